//! The dispatcher: one thread (`nod-dispatch`) that owns every pending call, every deadline
//! and every connection's routing state. Front ends reach it through `Engine`; workers through
//! `Event::Inbound` and `Event::Closed`. It does no I/O of its own and never blocks: frames
//! go to workers over unbounded channels, replies to callers over unbounded channels.

mod client;
mod inbound;
mod pending;

pub use client::{Engine, PendingCall};
pub use inbound::{InboundHandler, NoInbound, Responder, ServerRequest};

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, at, never, select};
use serde_json::{Value, json};

use crate::jsonrpc::{self, Message, ResponseError};
use crate::mcp::{Version, method};
use crate::transport::{ConnId, Outbound, TransportError, WorkerHandle};
use pending::Pending;

/// One front-end call; not the wire id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u64);

/// Everything the dispatcher reacts to. Closed set: grep it to see every trigger.
pub enum Event {
    Register {
        conn: ConnId,
        name: String,
        handler: Arc<dyn InboundHandler>,
        shared: Arc<ConnShared>,
    },
    Attach {
        conn: ConnId,
        worker: WorkerHandle,
    },
    SetVersion {
        conn: ConnId,
        version: Version,
    },
    Call(CallRequest),
    Notify {
        conn: ConnId,
        frame: Vec<u8>,
    },
    Cancel {
        call: CallId,
        reason: String,
    },
    /// Cancel every pending call (Ctrl-C).
    CancelAll {
        reason: String,
    },
    Respond {
        conn: ConnId,
        id: Value,
        result: Result<Value, ResponseError>,
    },
    /// Close one connection; its worker handle comes back so the caller does the joining.
    Detach {
        conn: ConnId,
        done: Sender<Option<WorkerHandle>>,
    },
    Shutdown {
        done: Sender<Vec<WorkerHandle>>,
    },
    Inbound {
        conn: ConnId,
        msgs: Vec<Message>,
        batch: bool,
    },
    /// The transport failed one request (HTTP): fail that call only.
    RequestFailed {
        conn: ConnId,
        wire_id: u64,
        cause: String,
    },
    Closed {
        conn: ConnId,
        cause: TransportError,
    },
}

pub struct CallRequest {
    pub id: CallId,
    pub conn: ConnId,
    pub method: &'static str,
    /// Serialized params, already bounded by the caller.
    pub params: Option<String>,
    pub timeout: Duration,
    /// Set when the request carries `_meta.progressToken`: progress may extend the deadline
    /// up to `cap` after the start.
    pub progress: Option<ProgressPolicy>,
    pub reply: Sender<CallUpdate>,
}

pub struct ProgressPolicy {
    pub token: Value,
    pub cap: Duration,
}

/// What a caller hears about its call.
#[derive(Debug)]
pub enum CallUpdate {
    Progress(Progress),
    Done(Result<Value, CallError>),
}

#[derive(Debug, Clone)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Why a call produced no result.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The server answered with a JSON-RPC error.
    Rpc(ResponseError),
    /// No answer within the deadline; a cancellation was sent (except for `initialize`).
    Timeout(Duration),
    /// The caller cancelled it.
    Cancelled(String),
    /// The connection is gone.
    Disconnected(Arc<TransportError>),
    /// The request would exceed the frame cap; nothing was sent.
    TooLarge(usize),
    /// The transport could not deliver this one request (an HTTP status, a refused
    /// connection, a stream that ended before its answer); the connection itself lives on.
    Transport(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc(error) => write!(f, "server error: {}", crate::util::one_line(&error.to_string())),
            CallError::Timeout(after) => write!(f, "no answer within {} ms", after.as_millis()),
            CallError::Cancelled(reason) => write!(f, "cancelled ({reason})"),
            CallError::Disconnected(cause) => write!(f, "{cause}"),
            CallError::Transport(why) => f.write_str(why),
            CallError::TooLarge(n) => write!(
                f,
                "the request is {n} bytes, over the {} MiB frame limit; nothing was sent",
                jsonrpc::frame::MAX_FRAME >> 20
            ),
        }
    }
}

/// State shared between the dispatcher and a session: list-change counters.
#[derive(Default, Debug)]
pub struct ConnShared {
    pub tools_epoch: AtomicU64,
    pub resources_epoch: AtomicU64,
    pub prompts_epoch: AtomicU64,
    /// Set once when the connection ends: why.
    pub closed: std::sync::OnceLock<Arc<TransportError>>,
}

struct Conn {
    name: String,
    handler: Arc<dyn InboundHandler>,
    shared: Arc<ConnShared>,
    worker: Option<WorkerHandle>,
    /// Frames written before the worker was attached.
    queued: Vec<Vec<u8>>,
    next_id: u64,
    version: Option<Version>,
    closed: Option<Arc<TransportError>>,
    log_window: (Instant, u32),
}

impl Conn {
    fn send(&mut self, frame: Vec<u8>) {
        if self.closed.is_some() {
            return;
        }
        if log::log_enabled!(target: "nod::wire", log::Level::Trace) {
            log::trace!(target: "nod::wire", "> {} {}", self.name, String::from_utf8_lossy(&frame).trim_end());
        }
        match &self.worker {
            Some(worker) => worker.send(Outbound::Send(frame)),
            None => self.queued.push(frame),
        }
    }
}

pub(crate) struct Dispatcher {
    events: Sender<Event>,
    conns: HashMap<ConnId, Conn>,
    pending: Pending,
}

impl Dispatcher {
    pub(crate) fn new(events: Sender<Event>) -> Dispatcher {
        Dispatcher { events, conns: HashMap::new(), pending: Pending::default() }
    }

    pub(crate) fn run(mut self, inbox: Receiver<Event>) {
        loop {
            let timer = self.pending.next_deadline().map_or_else(never, at);
            select! {
                recv(inbox) -> event => match event {
                    Ok(Event::Shutdown { done }) => {
                        let _ = done.send(self.shutdown());
                        return;
                    }
                    Ok(event) => self.handle(event),
                    Err(_) => {
                        self.shutdown();
                        return;
                    }
                },
                recv(timer) -> _ => self.expire(Instant::now()),
            }
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Register { conn, name, handler, shared } => {
                let state = Conn {
                    name,
                    handler,
                    shared,
                    worker: None,
                    queued: Vec::new(),
                    next_id: 0,
                    version: None,
                    closed: None,
                    log_window: (Instant::now(), 0),
                };
                self.conns.insert(conn, state);
            }
            Event::Attach { conn, worker } => {
                if let Some(state) = self.conns.get_mut(&conn) {
                    for frame in state.queued.drain(..) {
                        worker.send(Outbound::Send(frame));
                    }
                    state.worker = Some(worker);
                }
            }
            Event::SetVersion { conn, version } => {
                if let Some(state) = self.conns.get_mut(&conn) {
                    state.version = Some(version);
                }
            }
            Event::Call(req) => self.call(req),
            Event::Notify { conn, frame } => {
                if let Some(state) = self.conns.get_mut(&conn) {
                    state.send(frame);
                }
            }
            Event::Cancel { call, reason } => {
                if let Some(entry) = self.pending.remove(call) {
                    self.send_cancel(entry.conn, entry.wire_id, entry.method, &reason);
                    let _ = entry.reply.send(CallUpdate::Done(Err(CallError::Cancelled(reason))));
                }
            }
            Event::CancelAll { reason } => {
                for entry in self.pending.drain_all() {
                    self.send_cancel(entry.conn, entry.wire_id, entry.method, &reason);
                    let _ = entry.reply.send(CallUpdate::Done(Err(CallError::Cancelled(reason.clone()))));
                }
            }
            Event::Respond { conn, id, result } => {
                if let Some(state) = self.conns.get_mut(&conn) {
                    state.send(jsonrpc::encode_response(&id, &result));
                }
            }
            Event::Detach { conn, done } => {
                let worker = self.detach(conn);
                let _ = done.send(worker);
            }
            Event::Shutdown { .. } => unreachable!("handled in run"),
            Event::Inbound { conn, msgs, batch } => self.inbound(conn, msgs, batch),
            Event::Closed { conn, cause } => self.closed(conn, cause),
            Event::RequestFailed { conn, wire_id, cause } => {
                if let Some(entry) = self.pending.remove_wire(conn, wire_id) {
                    let _ = entry.reply.send(CallUpdate::Done(Err(CallError::Transport(cause))));
                }
            }
        }
    }

    fn call(&mut self, req: CallRequest) {
        let Some(state) = self.conns.get_mut(&req.conn) else {
            let cause = Arc::new(TransportError::Io("unknown connection".into()));
            let _ = req.reply.send(CallUpdate::Done(Err(CallError::Disconnected(cause))));
            return;
        };
        if let Some(cause) = &state.closed {
            let _ = req.reply.send(CallUpdate::Done(Err(CallError::Disconnected(cause.clone()))));
            return;
        }
        state.next_id += 1;
        let wire_id = state.next_id;
        let frame = jsonrpc::encode_request(wire_id, req.method, req.params.as_deref());
        if jsonrpc::frame::check_outgoing(&frame).is_err() {
            let _ = req.reply.send(CallUpdate::Done(Err(CallError::TooLarge(frame.len() - 1))));
            return;
        }
        state.send(frame);
        self.pending.insert(req, wire_id, Instant::now());
    }

    fn send_cancel(&mut self, conn: ConnId, wire_id: u64, method: &str, reason: &str) {
        // The spec forbids cancelling initialize (CAN-2).
        if method == method::INITIALIZE {
            return;
        }
        if let Some(state) = self.conns.get_mut(&conn) {
            let params = json!({ "requestId": wire_id, "reason": reason });
            state.send(jsonrpc::encode_notification(method::CANCELLED, Some(&params)));
        }
    }

    fn expire(&mut self, now: Instant) {
        while let Some(entry) = self.pending.pop_expired(now) {
            log::debug!("request {} ({}) timed out", entry.wire_id, entry.method);
            self.send_cancel(entry.conn, entry.wire_id, entry.method, "timeout");
            let waited = now.saturating_duration_since(entry.started);
            let _ = entry.reply.send(CallUpdate::Done(Err(CallError::Timeout(waited))));
        }
    }

    fn inbound(&mut self, conn: ConnId, msgs: Vec<Message>, batch: bool) {
        let Some(state) = self.conns.get(&conn) else {
            return;
        };
        if batch && !state.version.is_some_and(Version::allows_batches) {
            log::warn!(
                "server {} sent a JSON-RPC batch, which its protocol version does not allow; ignored",
                state.name
            );
            return;
        }
        for msg in msgs {
            match msg {
                Message::Response { id, result } => self.response(conn, id, result),
                Message::Request { id, method, params } => self.server_request(conn, id, method, params),
                Message::Notification { method, params } => self.notification(conn, &method, params),
            }
        }
    }

    fn response(&mut self, conn: ConnId, id: Option<Value>, result: Result<Value, ResponseError>) {
        let name = self.conns.get(&conn).map_or("?", |c| c.name.as_str());
        let entry = match id {
            Some(id) => match id.as_u64().and_then(|wire| self.pending.remove_wire(conn, wire)) {
                Some(entry) => entry,
                None => {
                    // A late answer to a cancelled or timed-out call, or an id nod never sent.
                    log::debug!("server {name} answered request id {id}, which is not pending; dropped");
                    return;
                }
            },
            // An error without an id: the server could not read some message. Only when one
            // call is pending can it be attributed without guessing.
            None => match self.pending.sole_for(conn) {
                Some(call) => self.pending.remove(call).expect("sole pending call"),
                None => {
                    if let Err(error) = &result {
                        log::warn!(
                            "server {name} reported an error without a request id: {}",
                            crate::util::one_line(&error.message)
                        );
                    }
                    return;
                }
            },
        };
        let result = result.map_err(CallError::Rpc);
        let _ = entry.reply.send(CallUpdate::Done(result));
    }

    fn server_request(&mut self, conn: ConnId, id: Value, method_name: String, params: Value) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        if method_name == method::PING {
            state.send(jsonrpc::encode_response(&id, &Ok(json!({}))));
            return;
        }
        let responder = Responder::new(self.events.clone(), conn, id);
        let req = ServerRequest { server: state.name.clone(), version: state.version, method: method_name, params };
        state.handler.request(req, responder);
    }

    fn notification(&mut self, conn: ConnId, method_name: &str, params: Value) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        match method_name {
            method::PROGRESS => {
                let Some(token) = params.get("progressToken") else {
                    return;
                };
                let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
                    return;
                };
                let update = Progress {
                    progress,
                    total: params.get("total").and_then(Value::as_f64),
                    message: params.get("message").and_then(Value::as_str).map(crate::util::one_line),
                };
                // Unknown or finished tokens are ignored (PROG-3).
                self.pending.progress(conn, token, Instant::now(), update);
            }
            method::MESSAGE => log_server_message(state, &params),
            method::TOOLS_CHANGED => bump(&state.shared.tools_epoch),
            method::RESOURCES_CHANGED => bump(&state.shared.resources_epoch),
            method::PROMPTS_CHANGED => bump(&state.shared.prompts_epoch),
            _ => {
                log::debug!("server {}: notification {method_name}", state.name);
                state.handler.notification(&state.name, method_name, &params);
            }
        }
    }

    fn closed(&mut self, conn: ConnId, cause: TransportError) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        if !matches!(cause, TransportError::ClosedByClient) {
            log::debug!("server {}: {cause}", state.name);
        }
        let cause = Arc::new(cause);
        state.closed = Some(cause.clone());
        let _ = state.shared.closed.set(cause.clone());
        for entry in self.pending.drain_conn(conn) {
            let _ = entry.reply.send(CallUpdate::Done(Err(CallError::Disconnected(cause.clone()))));
        }
    }

    fn detach(&mut self, conn: ConnId) -> Option<WorkerHandle> {
        let cause = Arc::new(TransportError::ClosedByClient);
        for entry in self.pending.drain_conn(conn) {
            let _ = entry.reply.send(CallUpdate::Done(Err(CallError::Disconnected(cause.clone()))));
        }
        let state = self.conns.remove(&conn)?;
        let worker = state.worker?;
        worker.send(Outbound::Close);
        Some(worker)
    }

    fn shutdown(&mut self) -> Vec<WorkerHandle> {
        for entry in self.pending.drain_all() {
            let _ = entry.reply.send(CallUpdate::Done(Err(CallError::Cancelled("nod is shutting down".into()))));
        }
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        conns.into_iter().filter_map(|conn| self.detach(conn)).collect()
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::SeqCst);
}

/// Server log messages go to nod's log, rate-limited so a flooding server cannot drown the
/// terminal: at most 20 lines a second a server, then a count.
fn log_server_message(state: &mut Conn, params: &Value) {
    let now = Instant::now();
    if now.duration_since(state.log_window.0) >= Duration::from_secs(1) {
        if state.log_window.1 > 20 {
            log::warn!(
                "server {}: {} more log messages in the last second were not shown",
                state.name,
                state.log_window.1 - 20
            );
        }
        state.log_window = (now, 0);
    }
    state.log_window.1 += 1;
    if state.log_window.1 > 20 {
        return;
    }
    let level = match params.get("level").and_then(Value::as_str).unwrap_or("info") {
        "debug" => log::Level::Debug,
        "info" | "notice" => log::Level::Info,
        "warning" => log::Level::Warn,
        _ => log::Level::Error,
    };
    let data = match params.get("data") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let logger = params.get("logger").and_then(Value::as_str).map(|l| format!("{l}: ")).unwrap_or_default();
    log::log!(target: "nod::server", level, "server {}: {}{}", state.name, crate::util::one_line(&logger), crate::util::one_line(&data));
}
