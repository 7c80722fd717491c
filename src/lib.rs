//! nod: a command-line agent whose every capability comes from MCP servers.
//!
//! The heart is the MCP client. Layers depend downward only:
//!
//! - `cli` parses arguments (lexopt) and `cmd` runs the commands: the only modules that print.
//! - `session` runs one server's lifecycle (initialize, version negotiation), its catalogs
//!   (`session::catalog`) and the elicitation policies of non-interactive surfaces.
//! - `dispatch` is one thread that owns every pending call and deadline, and routes requests,
//!   cancellations, progress and server-to-client requests over crossbeam channels.
//! - `transport` has one worker per connection, all with one contract; stdio drives child
//!   pipes with mio, HTTP uses ureq with a thread per request stream.
//! - `net` builds ureq agents (one TLS and proxy setup) and holds the one SSE parser.
//! - `jsonrpc` frames and decodes messages under the 8 MiB cap.
//! - `config` reads the profile; problems are data, so one bad entry never hides the rest.
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
pub mod net;
pub mod oauth;
pub mod provider;
pub mod session;
pub mod sha256;
pub mod transport;
pub mod util;
