//! nod: a command-line agent whose every capability comes from MCP servers.
//!
//! The heart is the MCP client. Layers depend downward only:
//!
//! - `cli` parses arguments (lexopt) and `cmd` runs the commands: the only modules that print.
//!   `cmd::setup` is the one agent set-up of every surface.
//! - `agent` is the conversation: the loop, the built-ins as one table, tools by identity, the
//!   permission policy, the one road for outside text to the model, subagents. `provider`
//!   is the model endpoint behind the `Model` trait.
//! - `session` runs one server's lifecycle (discovery or initialize, revision negotiation), its
//!   catalogs (`session::catalog`), the elicitation policies, and an agent's servers
//!   (`session::runtime`).
//! - `dispatch` is one thread that owns every pending call and deadline, and routes requests,
//!   cancellations, progress and server-to-client requests over crossbeam channels.
//! - `transport` has one worker per connection, all with one contract; stdio drives child
//!   pipes with mio, HTTP uses ureq with a thread per request stream, told by each request's
//!   metadata what it sends.
//! - `net` builds ureq agents (one TLS and proxy setup) and holds the one SSE parser.
//! - `jsonrpc` frames and decodes messages under the 8 MiB cap; `mcp` names methods and
//!   revisions.
//! - `config` reads the profile, project files, settings and Agent Skills; problems are data,
//!   so one bad entry never hides the rest.
//! - `oauth` authorizes remote servers; the transport reaches it through a trait, and the
//!   browser side belongs to the front end.

pub mod agent;
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod cli;
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod cmd;
pub mod config;
pub mod dispatch;
pub mod jsonrpc;
pub mod mcp;
pub(crate) mod net;
pub mod oauth;
pub mod provider;
pub mod saved;
pub mod session;
pub mod sha256;
pub mod transport;
pub mod util;
