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
pub(crate) mod json;
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

/// Entry points for the fuzz targets in `tests/fuzz`: each feeds untrusted bytes to one
/// reader and checks what must hold whatever the input. Not an API.
#[doc(hidden)]
pub mod fuzz {
    /// The SSE parser: the same events whether the bytes come whole or split at `at`.
    pub fn sse(data: &[u8]) {
        let at = data.first().map_or(0, |&b| b as usize % (data.len().max(1)));
        let whole = sse_events(&[data]);
        let split = sse_events(&[&data[..at], &data[at..]]);
        assert_eq!(whole, split, "events differ when the stream is split at {at}");
    }

    fn sse_events(chunks: &[&[u8]]) -> Result<Vec<crate::net::sse::Event>, crate::net::sse::SseError> {
        let mut parser = crate::net::sse::Parser::default();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.push(chunk, |event| events.push(event))?;
        }
        Ok(events)
    }

    /// The model provider's stream assembly (chunks, text deltas, tool-call fragments by
    /// index): the same answer whether the stream arrives whole or a few bytes at a time,
    /// the text streamed is the text of the answer, and the bounds hold.
    pub fn stream(data: &[u8]) {
        use crate::provider::stream::{MAX_ANSWER_BYTES, MAX_CALLS, events};
        /// Hands out at most `step` bytes a read.
        struct Trickle<'a>(&'a [u8], usize);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let step = data.first().map_or(1, |&b| usize::from(b % 16) + 1);
        let mut streamed = String::new();
        let whole = events(&mut Trickle(data, usize::MAX), &mut |t| streamed.push_str(t));
        let mut trickled = String::new();
        let split = events(&mut Trickle(data, step), &mut |t| trickled.push_str(t));
        match (&whole, &split) {
            (Ok(a), Ok(b)) => {
                assert_eq!((&a.text, &a.calls, &a.finish), (&b.text, &b.calls, &b.finish), "{step}-byte reads");
                assert_eq!(streamed, a.text, "the text streamed is the answer's");
                assert!(a.text.len() <= MAX_ANSWER_BYTES && a.calls.len() <= MAX_CALLS);
                assert!(a.calls.iter().all(|c| !c.id.is_empty()), "every call has an id");
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{step}-byte reads"),
            _ => panic!("whole {whole:?}, in {step}-byte reads {split:?}"),
        }
    }

    /// URL handling for consent and OAuth: no panic, and a host is never taken from after a
    /// backslash.
    pub fn url(text: &str) {
        let _ = crate::net::url::split(text);
        let _ = crate::net::url::is_absolute(text);
        let _ = crate::net::url::scheme(text);
        let _ = crate::net::url::check_oauth_url(text);
        let _ = crate::net::url::resolve_same_origin("https://example.com/mcp", text);
        if let Some(host) = crate::net::url::host(text) {
            assert!(!host.contains('\\') && !host.contains('/'), "host {host:?} of {text:?}");
            let _ = crate::net::url::is_loopback(&host);
        }
    }

    /// `${VAR}` expansion of `.mcp.json` values: bounded by its budget.
    pub fn expand(text: &str) {
        let mut budget = 64 * 1024;
        let mut missing = Vec::new();
        if let Some(out) = crate::config::project::expand(text, &mut budget, &mut missing) {
            assert!(out.len() <= text.len() + 64 * 1024, "expansion grew past its budget");
        }
    }

    /// SKILL.md front matter: parsed or refused, never a panic; a mapping comes back.
    pub fn skill(text: &str) {
        if let Ok((front, body)) = crate::config::skills::front_matter(text) {
            assert!(body.len() <= text.len());
            let _ = serde_json::Value::Object(front).to_string();
        }
    }

    /// A saved session file: read, then its conversation made valid for the model.
    pub fn session(data: &[u8]) {
        if let Ok((_, messages, _)) = crate::saved::read(data, "fuzz") {
            let messages: Vec<_> = messages.into_iter().map(|(_, m)| m).collect();
            let n = messages.len();
            let back = crate::saved::for_model(messages);
            assert!(back.len() <= n + 1);
        }
    }

    /// The ACP frame reader and message decoding: every line is a message or an error.
    pub fn acp(data: &[u8]) {
        for message in crate::cmd::acp::wire::incoming(data) {
            let _ = message;
        }
    }

    /// settings.json: the agent's settings and the trust choices read from a file.
    pub fn settings(data: &[u8]) {
        let path = std::env::temp_dir().join(format!("nod-fuzz-settings-{}.json", std::process::id()));
        if std::fs::write(&path, data).is_ok() {
            let workspace = std::path::Path::new("/w");
            let _ = crate::config::agent::load(&path, workspace);
            let _ = crate::config::settings::choices(&path, workspace);
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod fuzz_seeds {
    /// Every fuzz entry point takes the seeds of its target (real traffic and files) without
    /// a failed check: the seeds stay valid, and the checks hold on what nod really reads.
    #[test]
    fn every_fuzz_entry_point_takes_its_seeds() {
        let text = |f: fn(&str)| move |data: &[u8]| f(&String::from_utf8_lossy(data));
        type Entry = Box<dyn Fn(&[u8])>;
        let targets: [(&str, Entry); 8] = [
            ("sse", Box::new(super::fuzz::sse)),
            ("url", Box::new(text(super::fuzz::url))),
            ("expand", Box::new(text(super::fuzz::expand))),
            ("skill", Box::new(text(super::fuzz::skill))),
            ("session", Box::new(super::fuzz::session)),
            ("acp", Box::new(super::fuzz::acp)),
            ("settings", Box::new(super::fuzz::settings)),
            ("stream", Box::new(super::fuzz::stream)),
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/seeds");
        for (target, run) in targets {
            let dir = root.join(target);
            let seeds: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).collect();
            assert!(!seeds.is_empty(), "{target} has seeds");
            for seed in seeds {
                let path = seed.unwrap().path();
                run(&std::fs::read(&path).unwrap());
            }
        }
    }
}
