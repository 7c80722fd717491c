//! Transports move framed JSON-RPC between nod and one server. Every transport follows one
//! worker contract, so the dispatcher cannot tell them apart:
//!
//! - `spawn` returns a `WorkerHandle` that owns the worker's threads; dropping or closing it
//!   joins them (bounded), so no thread of a connection outlives it.
//! - The worker takes `Outbound` messages: `Request` (a request with its wire id and what
//!   the session says it is), `Notify` (a notification or a response to the server, with its
//!   kind), `CancelStream` (stop waiting for one answer: HTTP closes that request's stream at
//!   once) and `Close`. A worker is told what it sends; it never reads its frames back.
//! - It reports through its `Link`: answers to nod's requests go straight to the waiting
//!   caller through the `Router`; everything else, a failed request and the end of the
//!   connection (`Closed`, in every mode and exactly once) go to the dispatcher as `Report`s
//!   on a bounded channel, so a flooding server waits instead of growing memory.
//!
//! Transports know nothing of configuration or OAuth: a remote worker asks for credentials
//! through the `Credentials` trait, which the session layer implements.

pub mod child;
pub mod http;
#[cfg(test)]
pub(crate) mod memory;
pub mod sched;
pub mod stdio;

use std::sync::{Arc, Mutex, PoisonError};

use crossbeam_channel::Sender;
use serde_json::Value;

use crate::jsonrpc::frame::FrameError;
use crate::jsonrpc::{Message, ResponseError};
use crate::mcp::{Version, method};
use crate::util::JoinOnDrop;

/// One server connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// Dispatcher (or a caller) → worker.
#[derive(Debug)]
pub enum Outbound {
    /// One request frame, newline included, with its wire id and what it is.
    Request { id: u64, frame: Vec<u8>, meta: RequestMeta },
    /// A notification, or the answer to a server's request.
    Notify { frame: Vec<u8>, kind: NotifyKind },
    /// nod no longer wants the answer to request `id`: close its stream where it has one.
    CancelStream(u64),
    /// Shut down: for stdio close stdin, wait, SIGTERM, wait, SIGKILL, reap; for HTTP close
    /// every stream and end the session.
    Close,
}

/// What a request is, as the session that built it knows (SEP-2243 needs it in headers at
/// 2026-07-28): set while its params were still a value, so no worker parses a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMeta {
    pub method: &'static str,
    /// The revision the request is sent at (its `_meta` says the same at 2026-07-28); None
    /// while none is negotiated (the first `initialize`).
    pub revision: Option<Version>,
    /// `Mcp-Name`, as a header value: the tool or prompt name, or the resource URI.
    pub name: Option<String>,
    /// `Mcp-Param-<Name>` headers of a tool call: the arguments its `x-mcp-header`
    /// markings name, as header values.
    pub params: Vec<(String, String)>,
}

impl RequestMeta {
    /// A request with no SEP-2243 values (any but a 2026-07-28 tool call, prompt or read).
    pub fn new(method_name: &'static str, revision: Option<Version>) -> RequestMeta {
        RequestMeta { method: method_name, revision, name: None, params: Vec::new() }
    }

    pub fn is_initialize(&self) -> bool {
        self.method == method::INITIALIZE
    }

    /// Sent at 2026-07-28: no session, and the SEP-2243 headers over HTTP.
    pub fn is_modern(&self) -> bool {
        self.revision.is_some_and(Version::is_modern)
    }
}

/// What a notification is, for the workers that treat some apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyKind {
    /// `notifications/cancelled`, for a request sent at `revision`: at 2026-07-28 over HTTP
    /// closing the request's stream is the cancellation, so it is not posted.
    Cancelled { revision: Option<Version> },
    /// `notifications/initialized`: over HTTP the standalone GET stream opens after it.
    Initialized,
    /// Any other notification, or an answer to a server's request.
    Other,
}

impl NotifyKind {
    /// The kind of a notification nod sends with `method_name` (never a cancellation: the
    /// dispatcher sends those, knowing the request).
    pub fn of(method_name: &str) -> NotifyKind {
        if method_name == method::INITIALIZED { NotifyKind::Initialized } else { NotifyKind::Other }
    }
}

/// Worker → dispatcher, on a bounded channel.
#[derive(Debug)]
pub enum Report {
    /// Messages that are not answers to a pending call: server requests, notifications,
    /// errors without an id, batches.
    Inbound { conn: ConnId, msgs: Vec<Message>, batch: bool },
    /// The transport could not deliver request `id` or its answer; the connection lives on.
    RequestFailed { conn: ConnId, id: u64, error: TransportError },
    /// The connection ended. Sent exactly once per worker.
    Closed { conn: ConnId, cause: TransportError },
}

/// Where answers go: the dispatcher's table of pending calls, which hands each answer to its
/// caller directly (the first completion of a call wins: answer, timeout or cancellation).
pub trait Router: Send + Sync {
    /// Delivers the answer to request `id`. False when no call waits for it (late or unknown).
    fn route(&self, conn: ConnId, id: u64, result: Result<Value, ResponseError>) -> bool;
    /// Delivers the answer to request `id` whose result is `frame[span]`, JSON not yet read
    /// into a value (see `dispatch::Finished`). False as for `route`.
    fn route_text(&self, conn: ConnId, id: u64, frame: String, span: std::ops::Range<usize>) -> bool;
    /// Delivers a `notifications/progress` to its call (in order with the answer, which
    /// follows it on the same connection).
    fn progress(&self, conn: ConnId, params: &Value);
}

/// The revision a connection speaks, held once: its session sets it (2026-07-28 for the
/// `server/discover` probe, none during `initialize`, then the answer's), and the dispatcher
/// (batches, server requests) and the worker (MCP-Protocol-Version outside requests) read
/// it. Requests carry the revision they were built at in their `RequestMeta`.
#[derive(Clone, Default, Debug)]
pub struct Revision(Arc<Mutex<Option<Version>>>);

impl Revision {
    pub fn get(&self) -> Option<Version> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn set(&self, revision: Option<Version>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = revision;
    }
}

/// What a worker reports through.
#[derive(Clone)]
pub struct Link {
    pub conn: ConnId,
    pub name: String,
    reports: Sender<Report>,
    router: Arc<dyn Router>,
    revision: Revision,
    /// Set by an HTTP worker that fell back to legacy HTTP+SSE: health names the transport
    /// the connection really uses.
    legacy: Arc<std::sync::atomic::AtomicBool>,
}

impl Link {
    pub fn new(conn: ConnId, name: &str, reports: Sender<Report>, router: Arc<dyn Router>) -> Link {
        Link { conn, name: name.to_string(), reports, router, revision: Revision::default(), legacy: Arc::default() }
    }

    /// The flag an HTTP worker sets when it speaks legacy HTTP+SSE.
    pub fn legacy(&self) -> &Arc<std::sync::atomic::AtomicBool> {
        &self.legacy
    }

    /// The connection's negotiated revision (its session sets it).
    pub fn revision(&self) -> &Revision {
        &self.revision
    }

    /// Hands decoded messages on: answers to their callers, the rest to the dispatcher.
    /// False once the dispatcher is gone.
    pub fn deliver(&self, msgs: Vec<Message>, batch: bool) -> bool {
        if batch {
            return self.reports.send(Report::Inbound { conn: self.conn, msgs, batch }).is_ok();
        }
        let mut rest = Vec::new();
        for msg in msgs {
            match msg {
                Message::Response { id: Some(id), result } => match id.as_u64() {
                    Some(wire) => {
                        if !self.router.route(self.conn, wire, result) {
                            log::debug!(
                                "server {} answered request id {wire}, which is not pending; dropped",
                                self.name
                            );
                        }
                    }
                    None => log::debug!("server {} answered request id {id}, which nod never sent; dropped", self.name),
                },
                Message::Notification { method, params } if method == crate::mcp::method::PROGRESS => {
                    self.router.progress(self.conn, &params);
                }
                other => rest.push(other),
            }
        }
        rest.is_empty() || self.reports.send(Report::Inbound { conn: self.conn, msgs: rest, batch }).is_ok()
    }

    /// Delivers an answer with a result, as its frame's text (`jsonrpc::answer_span` found
    /// its id and where its result lies).
    pub fn deliver_answer(&self, id: u64, frame: String, span: std::ops::Range<usize>) {
        if !self.router.route_text(self.conn, id, frame, span) {
            log::debug!("server {} answered request id {id}, which is not pending; dropped", self.name);
        }
    }

    /// Request `id` failed in the transport.
    pub fn failed(&self, id: u64, error: TransportError) {
        let _ = self.reports.send(Report::RequestFailed { conn: self.conn, id, error });
    }

    /// The connection ended.
    pub fn closed(&self, cause: TransportError) {
        let _ = self.reports.send(Report::Closed { conn: self.conn, cause });
    }
}

/// Credentials for a remote server, supplied by the session layer (OAuth, in practice).
/// Calls may block (a refresh, an authorization); they are made on request threads only.
pub trait Credentials: Send + Sync {
    /// The Authorization header value to send now, if any.
    fn authorization(&self) -> Option<String>;
    /// The server answered 401 with this `WWW-Authenticate` value. `Ok`: retry the request.
    fn unauthorized(&self, challenge: &str) -> Result<(), AuthFailure>;
    /// The server answered 403 with this `WWW-Authenticate` value. `Ok(true)`: retry the
    /// request; `Ok(false)`: the refusal is not about credentials.
    fn forbidden(&self, challenge: &str) -> Result<bool, AuthFailure>;
}

/// Why credentials could not answer a 401 or 403: the credential provider's own error.
pub type AuthFailure = Arc<dyn std::error::Error + Send + Sync>;

/// Why a connection ended, or why one request failed in the transport. Every variant is
/// shown to the user with the server's name in front of it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TransportError {
    /// The server process could not be started. `program` is the executable alone (the
    /// arguments may hold secrets).
    Spawn { program: String, reason: String },
    /// The process exited on its own. `stderr` holds its last lines.
    Exited { status: String, stderr: Vec<String> },
    /// The process closed its stdout but kept running; nod stopped it.
    StdoutClosed { stderr: Vec<String> },
    /// The server stopped reading its stdin while nod had too much to write; nod stopped it.
    Stalled { stderr: Vec<String> },
    /// The server broke framing (a frame over the cap, invalid UTF-8); nod stopped it.
    Protocol { error: FrameError, stderr: Vec<String> },
    /// nod asked the connection to close.
    ClosedByClient,
    /// The server answered with an HTTP status nod cannot go past.
    Http { status: u16 },
    /// initialize got HTTP `post`, and the legacy HTTP+SSE stream tried after it HTTP `get`.
    NoTransport { post: u16, get: u16 },
    /// The server answered 401 (or 403) and the credentials could not fix it.
    Unauthorized { status: u16, cause: Option<AuthFailure> },
    /// The server no longer knows the session (a 404 to a request that carried one). The
    /// session layer starts a new one; `generation` tells which session expired.
    SessionExpired { generation: u64 },
    /// The answer is not something nod can read: `what` says why (too large, not JSON, ...).
    BadAnswer(String),
    /// The event stream ended before the answer and could not be resumed.
    StreamEnded(String),
    /// A redirect nod refuses to follow (another origin, or too many).
    Redirect(&'static str),
    /// The HTTP request timed out.
    Timeout,
    /// Any other I/O failure on the connection.
    Io(String),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The program is not shown: health output never includes commands.
            TransportError::Spawn { reason, .. } => write!(f, "could not start the server command: {reason}"),
            TransportError::Exited { status, stderr } => {
                write!(f, "server process exited ({status})")?;
                write_stderr(f, stderr)
            }
            TransportError::StdoutClosed { stderr } => {
                f.write_str("server closed its stdout while still running; nod stopped it")?;
                write_stderr(f, stderr)
            }
            TransportError::Stalled { stderr } => {
                f.write_str("server stopped reading its input while nod had over 32 MiB to send; nod stopped it")?;
                write_stderr(f, stderr)
            }
            TransportError::Protocol { error, stderr } => {
                write!(f, "server sent {error}; nod closed the connection")?;
                write_stderr(f, stderr)
            }
            TransportError::ClosedByClient => f.write_str("connection closed"),
            TransportError::Http { status } => f.write_str(&http_status(*status)),
            TransportError::NoTransport { post, get } => write!(
                f,
                "{} (to initialize); a legacy HTTP+SSE stream is not there either (HTTP {get})",
                http_status(*post)
            ),
            TransportError::Unauthorized { status, cause: Some(cause) } => write!(f, "HTTP {status}: {cause}"),
            TransportError::Unauthorized { status, cause: None } => f.write_str(&http_status(*status)),
            TransportError::SessionExpired { .. } => f.write_str("the server ended the session (HTTP 404)"),
            TransportError::BadAnswer(what) => write!(f, "the server answered with {what}"),
            TransportError::StreamEnded(why) => f.write_str(why),
            TransportError::Redirect(why) => f.write_str(why),
            TransportError::Timeout => write!(
                f,
                "the HTTP request timed out (connecting may take {}; sending a notification or an answer, operation_timeout_ms up to {})",
                crate::util::seconds(crate::net::CONNECT_TIMEOUT),
                crate::util::seconds(http::MESSAGE_TIMEOUT)
            ),
            TransportError::Io(why) => write!(f, "connection failed: {why}"),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TransportError::Unauthorized { cause: Some(cause), .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

fn http_status(status: u16) -> String {
    match status {
        401 => "HTTP 401: the server requires authentication".into(),
        403 => "HTTP 403: the server refused access".into(),
        404 => "HTTP 404: no MCP endpoint at this URL, or the session ended".into(),
        status => format!("HTTP {status}"),
    }
}

fn write_stderr(f: &mut std::fmt::Formatter<'_>, stderr: &[String]) -> std::fmt::Result {
    if stderr.is_empty() {
        return Ok(());
    }
    write!(f, "; last stderr: ")?;
    for (i, line) in stderr.iter().enumerate() {
        if i > 0 {
            f.write_str(" | ")?;
        }
        f.write_str(&crate::util::one_line(line))?;
    }
    Ok(())
}

/// Where a worker can take frames without a message to its thread (the stdio worker's
/// shared stdin): requests and notifications go there, in order, from any thread.
pub trait FrameSink: Send + Sync {
    /// Queues `frame` behind everything sent before it, calls `queued` (the frame's place
    /// is now fixed), then writes what the pipe takes.
    fn send_frame(&self, frame: Vec<u8>, queued: &mut dyn FnMut());
}

/// The sending side of a worker's inbox: cheap to clone, so callers can hand requests to
/// the worker without a detour through the dispatcher.
#[derive(Clone)]
pub struct Outlet {
    outbox: Sender<Outbound>,
    /// Set for workers that sleep in mio (stdio); others block on the inbox itself.
    waker: Option<Arc<mio::Waker>>,
    sink: Option<Arc<dyn FrameSink>>,
}

impl Outlet {
    pub(crate) fn new(outbox: Sender<Outbound>, waker: Option<Arc<mio::Waker>>) -> Outlet {
        Outlet { outbox, waker, sink: None }
    }

    pub(crate) fn with_sink(mut self, sink: Arc<dyn FrameSink>) -> Outlet {
        self.sink = Some(sink);
        self
    }

    /// Sends to the worker. A send to a worker that has ended is ignored: its `Closed`
    /// report carries the cause.
    pub fn send(&self, out: Outbound) {
        self.send_then(out, &mut || {});
    }

    /// Sends to the worker, calling `queued` once the message's place among the others is
    /// fixed and before it is written: a caller can let go of its locks there, so that a
    /// write that wakes the server does not leave them held while the answer arrives.
    pub fn send_then(&self, out: Outbound, queued: &mut dyn FnMut()) {
        let out = match (out, &self.sink) {
            (Outbound::Request { frame, .. } | Outbound::Notify { frame, .. }, Some(sink)) => {
                return sink.send_frame(frame, queued);
            }
            (out, _) => out,
        };
        let sent = self.outbox.send(out).is_ok();
        queued();
        if sent && let Some(waker) = &self.waker {
            let _ = waker.wake();
        }
    }
}

/// The owning side of a worker. Dropping it closes the connection and joins the thread.
/// Field order is drop order: the outlet goes before the join.
pub struct WorkerHandle {
    outlet: Outlet,
    thread: Option<JoinOnDrop<()>>,
}

impl WorkerHandle {
    pub(crate) fn new(outlet: Outlet, thread: JoinOnDrop<()>) -> WorkerHandle {
        WorkerHandle { outlet, thread: Some(thread) }
    }

    pub fn outlet(&self) -> &Outlet {
        &self.outlet
    }

    pub fn send(&self, out: Outbound) {
        self.outlet.send(out);
    }

    /// Asks the worker to close and waits for its thread (the worker bounds its own
    /// shutdown: about 2 s for a stdio server that ignores everything).
    pub fn join(mut self) {
        self.outlet.send(Outbound::Close);
        if let Some(thread) = self.thread.take() {
            thread.join();
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        self.outlet.send(Outbound::Close);
    }
}
