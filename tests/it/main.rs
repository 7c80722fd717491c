//! Integration tests: the real `nod` binary against the fixture server and real MCP servers.

#![allow(clippy::print_stdout, clippy::print_stderr)]

/// An in-process scripted HTTP server for the remote transports.
mod http_fixture;
/// A scripted fake model (OpenAI-compatible Chat Completions) on 127.0.0.1.
mod model;
/// Running nod with a hard deadline; assertions on exit code, output and time.
mod run;
/// Helpers: private NOD_HOME, the fixture's profile entry, the wire record, leftover processes.
mod support;

/// `nod acp`: a scripted ACP client over NDJSON.
mod acp;
/// `nod ask`: the agent against the fake model and the fixture.
mod ask;
/// Resources and prompts: listing, reading, completion.
mod catalog;
/// The profile, health, secrets, usage errors, broken pipes, help and man pages.
mod cli;
/// The worker contract, the same for stdio, Streamable HTTP and legacy SSE workers.
mod contract;
/// Misbehaving servers: crashes, hangs, floods, broken framing, version trouble.
mod faults;
/// The agent's floors: tools by identity, rules on built-ins, marked text, one set-up.
mod floors;
/// Per-command help, typo suggestions, completions, doctor's findings, diagnoses, wording.
mod guidance;
/// Remote servers misbehaving over HTTP: sessions, streams, storms, credentials, legacy SSE.
mod http_faults;
/// Restarts, docker ownership, fault isolation, connect/shutdown cycles.
mod lifecycle;
/// A model endpoint that fails in every way.
mod model_faults;
/// MCP 2026-07-28: discovery, the stateless wire, input requests, HTTP without sessions.
mod modern;
/// OAuth: discovery, PKCE, refresh, step-up, logout and token secrecy against an in-process world.
mod oauth;
/// `nod mcp add` and `nod mcp remove`.
mod profile;
/// Project `.mcp.json`: trust, fingerprints, expansion, merging, status and doctor.
mod project;
/// Protocol correctness: answer envelopes, capabilities, versions, schemas, tasks.
mod protocol;
/// Real MCP servers from npm: everything, filesystem, memory.
mod real;
/// The agent with server-everything and a Python SDK server.
mod real_agent;
/// Real servers over HTTP and SSE: server-everything and the Python SDK (stdio too).
mod real_http;
/// Roots: the workspace, --add-dir, /add-dir, --root, project servers, server-filesystem.
mod roots;
/// Sampling: servers asking nod's model, by rule, bounded.
mod sampling;
/// JSON everywhere, typed --jsonl errors, argument sources, output files, answers, timeouts.
mod scripting;
/// Saved sessions: nod ask -c / --resume, nod sessions, kills, torn files, secrets.
mod sessions;
/// The interactive shell on a pseudo-terminal.
mod shell;
/// Subagents: one-off and named children, their view of the parent's servers, fail-closed.
mod subagent;
/// A person at a terminal: elicitation prompts, list --connect as servers become ready.
mod terminal;
/// Tool calls against the fixture: output, errors, progress, pagination, elicitation, logs.
mod tools;
/// `--jsonl` streams, Ctrl-C, and what goes over the wire.
mod wire;
