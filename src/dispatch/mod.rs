//! The dispatcher: one thread (`nod-dispatch`) that owns every deadline, every cancellation
//! and every connection's routing state. It never blocks on a channel: it drains two inboxes
//! and writes only to unbounded ones.
//!
//! - `Command`s come from front ends and from `Responder`s (answers to server requests) on
//!   an unbounded channel. Nothing the dispatcher calls ever sends into a channel it must
//!   drain and could find full, so no flood can close a cycle through it.
//! - `Report`s come from workers on a bounded channel: a flooding server waits.
//!
//! Calls take a shorter road: the caller registers its call in the shared table and hands
//! the frame to the worker itself, and the worker hands the answer to the caller (see
//! `pending`). The dispatcher hears of a call only when it must act: a deadline, a
//! cancellation, progress, or the end of its connection.

mod call;
mod client;
mod inbound;
mod pending;
#[cfg(test)]
mod tests;

pub use call::{CallError, CallUpdate, Finished, Limit, Progress, ProgressPolicy, Refusal, UNREADABLE};
pub use client::{Engine, PendingCall, Request};

/// An instant so far ahead that it never comes (for "no deadline" without overflow).
pub fn far_future(now: Instant) -> Instant {
    pending::checked_deadline(now, Duration::MAX)
}
pub use inbound::{InboundHandler, NoInbound, Responder, ServerRequest};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, at, never, select_biased};
use serde_json::{Value, json};

use crate::jsonrpc::{self, Message, ResponseError};
use crate::mcp::{Version, method};
use crate::transport::{ConnId, NotifyKind, Outbound, Outlet, Report, Revision, TransportError, WorkerHandle};
use pending::{Entry, Registry};

/// One front-end call; not the wire id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u64);

/// Calls that are cancelled together: one shell turn, one subagent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub u64);

/// What front ends (and responders) ask of the dispatcher. Closed set: grep it to see every
/// trigger.
pub(crate) enum Command {
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
    Cancel {
        call: CallId,
        reason: String,
    },
    CancelGroup {
        group: GroupId,
        reason: String,
    },
    /// The group's owner is done with it: forget that it was cancelled.
    EndGroup {
        group: GroupId,
    },
    /// Cancel every pending call (Ctrl-C in `nod mcp`).
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
    /// A caller registered a deadline earlier than the one the dispatcher sleeps until.
    Wake,
}

/// One connection's state shared by the dispatcher, its session and the callers: the way to
/// its worker, wire ids, list-change counters, and why it closed.
#[derive(Default)]
pub struct ConnShared {
    pub tools_epoch: AtomicU64,
    pub resources_epoch: AtomicU64,
    pub prompts_epoch: AtomicU64,
    /// Set once when the connection ends: why.
    pub closed: OnceLock<Arc<TransportError>>,
    /// The negotiated revision: the session sets it; the worker's `Link` holds the same.
    pub revision: Revision,
    /// The HTTP worker speaks legacy HTTP+SSE (its `Link` holds the same flag).
    pub legacy: Arc<AtomicBool>,
    next_wire: AtomicU64,
    outlet: OnceLock<Outlet>,
}

impl ConnShared {
    pub(crate) fn next_wire(&self) -> u64 {
        self.next_wire.fetch_add(1, Ordering::Relaxed) + 1
    }
}

struct Conn {
    name: String,
    handler: Arc<dyn InboundHandler>,
    shared: Arc<ConnShared>,
    worker: Option<WorkerHandle>,
    /// Frames written before the worker was attached.
    queued: Vec<Outbound>,
    closed: Option<Arc<TransportError>>,
    log_window: (Instant, u32),
}

impl Conn {
    fn send(&mut self, out: Outbound) {
        if self.closed.is_some() {
            return;
        }
        match &self.worker {
            Some(worker) => worker.send(out),
            None => self.queued.push(out),
        }
    }

    fn send_frame(&mut self, frame: Vec<u8>, kind: NotifyKind) {
        if log::log_enabled!(target: "nod::wire", log::Level::Trace) {
            log::trace!(target: "nod::wire", "> {} {}", self.name, String::from_utf8_lossy(&frame).trim_end());
        }
        self.send(Outbound::Notify { frame, kind });
    }
}

/// Commands the dispatcher takes whenever it wakes, before anything else, but that do not wake
/// it: a new connection's `Register` and `Attach`. Nothing about a connection can reach the
/// dispatcher before them (its calls start after the attach, its worker reports after its
/// registration), and taking them first keeps that order; a server connecting costs no
/// dispatcher wakeups (two a server before, forty for `list --connect` of twenty).
/// `None` once the dispatcher has stopped: a command queued then is dropped at once (an
/// `Attach`'s worker handle closes its worker), as a send to a stopped dispatcher is.
pub(crate) type Quiet = Arc<std::sync::Mutex<Option<Vec<Command>>>>;

/// A new, open queue of quiet commands.
pub(crate) fn quiet() -> Quiet {
    Arc::new(std::sync::Mutex::new(Some(Vec::new())))
}

pub(crate) struct Dispatcher {
    registry: Arc<Registry>,
    conns: HashMap<ConnId, Conn>,
    commands: Sender<Command>,
    quiet: Quiet,
    /// Server requests not answered yet, by connection and id (as JSON text), with the flag
    /// that a cancellation from the server sets.
    inbound: HashMap<(ConnId, String), Arc<AtomicBool>>,
}

impl Drop for Dispatcher {
    /// However the dispatcher ends: what was queued quietly is dropped (outside the lock), and
    /// what comes later is dropped by its sender.
    fn drop(&mut self) {
        let left = self.quiet.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        drop(left);
    }
}

impl Dispatcher {
    pub(crate) fn new(registry: Arc<Registry>, commands: Sender<Command>, quiet: Quiet) -> Dispatcher {
        Dispatcher { registry, conns: HashMap::new(), commands, quiet, inbound: HashMap::new() }
    }

    pub(crate) fn run(mut self, commands: Receiver<Command>, reports: Receiver<Report>) {
        enum Woken {
            Command(Result<Command, crossbeam_channel::RecvError>),
            Report(Result<Report, crossbeam_channel::RecvError>),
            Timer,
        }
        loop {
            let armed = self.registry.lock().arm();
            let timer = armed.map_or_else(never, at);
            // Commands first: a cancellation or a shutdown is served even while a server
            // floods the report channel.
            let woken = select_biased! {
                recv(commands) -> command => Woken::Command(command),
                recv(reports) -> report => Woken::Report(report),
                recv(timer) -> _ => Woken::Timer,
            };
            self.take_quiet();
            match woken {
                Woken::Command(Ok(Command::Shutdown { done })) => {
                    self.settle(&commands, &reports);
                    let _ = done.send(self.shutdown());
                    return;
                }
                Woken::Command(Ok(command)) => self.command(command),
                Woken::Command(Err(_)) => {
                    self.shutdown();
                    return;
                }
                // The engine keeps a sender while the dispatcher runs: never disconnected.
                Woken::Report(report) => {
                    if let Ok(report) = report {
                        self.report(report);
                    }
                }
                Woken::Timer => self.expire(Instant::now()),
            }
        }
    }

    /// Takes the commands that were queued without waking the dispatcher, in their order.
    fn take_quiet(&mut self) {
        let taken = self.quiet.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut().map(std::mem::take);
        for command in taken.into_iter().flatten() {
            self.command(command);
        }
    }

    /// Before a shutdown: what already arrived is handled, so server requests nod has read
    /// get their answers before the connections close. Bounded: a server still flooding
    /// cannot hold the shutdown up.
    fn settle(&mut self, commands: &Receiver<Command>, reports: &Receiver<Report>) {
        const MOST: usize = 100_000;
        for _ in 0..MOST {
            // Before each item, as before anything the dispatcher handles when it wakes.
            self.take_quiet();
            if let Ok(command) = commands.try_recv() {
                match command {
                    // Another shutdown waits for this one's answer.
                    Command::Shutdown { done } => drop(done),
                    command => self.command(command),
                }
            } else if let Ok(report) = reports.try_recv() {
                self.report(report);
            } else {
                return;
            }
        }
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::Register { conn, name, handler, shared } => {
                let state = Conn {
                    name,
                    handler,
                    shared,
                    worker: None,
                    queued: Vec::new(),
                    closed: None,
                    log_window: (Instant::now(), 0),
                };
                self.conns.insert(conn, state);
            }
            Command::Attach { conn, worker } => match self.conns.get_mut(&conn) {
                Some(state) => {
                    for out in state.queued.drain(..) {
                        worker.send(out);
                    }
                    state.worker = Some(worker);
                }
                None => worker.send(Outbound::Close),
            },
            Command::Cancel { call, reason } => {
                let entry = self.registry.lock().remove(call);
                if let Some(entry) = entry {
                    self.finish_cancelled(entry, &reason);
                }
            }
            Command::CancelGroup { group, reason } => {
                let entries = self.registry.lock().cancel_group(group, &reason);
                for entry in entries {
                    self.finish_cancelled(entry, &reason);
                }
            }
            Command::EndGroup { group } => self.registry.lock().forget_group(group),
            Command::CancelAll { reason } => {
                let entries = self.registry.lock().drain_all();
                for entry in entries {
                    self.finish_cancelled(entry, &reason);
                }
            }
            Command::Respond { conn, id, result } => {
                let cancelled = self.inbound.remove(&(conn, id.to_string()));
                if cancelled.is_some_and(|c| c.load(Ordering::SeqCst)) {
                    return;
                }
                if let Some(state) = self.conns.get_mut(&conn) {
                    state.send_frame(jsonrpc::encode_response(&id, &result), NotifyKind::Other);
                }
            }
            Command::Detach { conn, done } => {
                let worker = self.detach(conn);
                let _ = done.send(worker);
            }
            Command::Shutdown { .. } => unreachable!("handled in run"),
            Command::Wake => {}
        }
    }

    fn report(&mut self, report: Report) {
        match report {
            Report::Inbound { conn, msgs, batch } => self.inbound(conn, msgs, batch),
            Report::RequestFailed { conn, id, error } => {
                let entry = self.registry.lock().remove_wire(conn, id);
                if let Some(entry) = entry {
                    let _ = entry.reply.send(CallUpdate::done(Err(CallError::Transport(Arc::new(error)))));
                }
            }
            Report::Closed { conn, cause } => self.closed(conn, cause),
        }
    }

    /// A call ended by cancellation (or its deadline): the server hears of it, the caller too.
    fn finish_cancelled(&mut self, entry: Entry, reason: &str) {
        self.send_cancel(&entry, reason);
        let _ = entry.reply.send(CallUpdate::done(Err(CallError::Cancelled(reason.to_string()))));
    }

    fn send_cancel(&mut self, entry: &Entry, reason: &str) {
        let Some(state) = self.conns.get_mut(&entry.conn) else { return };
        // The stream (HTTP) is closed at once; a dropped stream is not a cancellation in
        // the 2025 revisions, so the notification goes too.
        state.send(Outbound::CancelStream(entry.wire_id));
        // The spec forbids cancelling initialize (CAN-2).
        if entry.method == method::INITIALIZE {
            return;
        }
        let params = json!({ "requestId": entry.wire_id, "reason": reason });
        let kind = NotifyKind::Cancelled { revision: entry.revision };
        state.send_frame(jsonrpc::encode_notification(method::CANCELLED, Some(&params)), kind);
    }

    fn expire(&mut self, now: Instant) {
        loop {
            let Some(entry) = self.registry.lock().pop_expired(now) else { break };
            log::debug!("request {} ({}) timed out", entry.wire_id, entry.method);
            self.send_cancel(&entry, "timeout");
            let waited = now.saturating_duration_since(entry.started);
            let _ = entry.reply.send(CallUpdate::done(Err(CallError::Timeout { after: waited, limit: None })));
        }
    }

    fn inbound(&mut self, conn: ConnId, msgs: Vec<Message>, batch: bool) {
        let Some(state) = self.conns.get(&conn) else {
            return;
        };
        if batch && !state.shared.revision.get().is_some_and(Version::allows_batches) {
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
                Message::Invalid { id, why } => {
                    if let Some(state) = self.conns.get_mut(&conn) {
                        log::debug!("server {} sent an invalid request ({why}); answered -32600", state.name);
                        let error = ResponseError::new(jsonrpc::INVALID_REQUEST, format!("invalid request: {why}"));
                        state.send_frame(jsonrpc::encode_response(&id, &Err(error)), NotifyKind::Other);
                    }
                }
                Message::Notification { method, params } => self.notification(conn, &method, params),
            }
        }
    }

    /// Answers that reach the dispatcher: batch members and errors without an id.
    fn response(&mut self, conn: ConnId, id: Option<Value>, result: Result<Value, ResponseError>) {
        let name = self.conns.get(&conn).map_or("?", |c| c.name.as_str());
        let entry = {
            let mut table = self.registry.lock();
            match &id {
                Some(id) => id.as_u64().and_then(|wire| table.remove_wire(conn, wire)),
                // An error without an id: the server could not read some message. Only when
                // one call is pending can it be attributed without guessing.
                None => table.sole_for(conn).and_then(|call| table.remove(call)),
            }
        };
        match entry {
            Some(entry) => {
                let _ = entry.reply.send(CallUpdate::done(result.map_err(CallError::Rpc)));
            }
            None => match (id, result) {
                (Some(id), _) => {
                    log::debug!("server {name} answered request id {id}, which is not pending; dropped")
                }
                (None, Err(error)) => log::warn!(
                    "server {name} reported an error without a request id: {}",
                    crate::util::one_line(&error.message)
                ),
                (None, Ok(_)) => {}
            },
        }
    }

    fn server_request(&mut self, conn: ConnId, id: Value, method_name: String, params: Value) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        if method_name == method::PING {
            state.send_frame(jsonrpc::encode_response(&id, &Ok(json!({}))), NotifyKind::Other);
            return;
        }
        let cancelled = Arc::new(AtomicBool::new(false));
        self.inbound.insert((conn, id.to_string()), cancelled.clone());
        let responder = Responder::new(self.commands.clone(), conn, id, cancelled);
        let version = state.shared.revision.get();
        let req = ServerRequest { server: state.name.clone(), version, method: method_name, params };
        state.handler.request(req, responder);
    }

    fn notification(&mut self, conn: ConnId, method_name: &str, params: Value) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        match method_name {
            // Progress in a batch (2025-03-26); otherwise workers deliver it themselves.
            method::PROGRESS => crate::transport::Router::progress(&*self.registry, conn, &params),
            method::MESSAGE => log_server_message(state, &params),
            // The server withdraws a request it sent (CAN-5): it gets no answer, and the
            // surface that holds it sees `Responder::is_cancelled`.
            method::CANCELLED => {
                // The entry stays until the responder answers or drops, so that answer is
                // recognized and withheld.
                if let Some(id) = params.get("requestId")
                    && let Some(flag) = self.inbound.get(&(conn, id.to_string()))
                {
                    flag.store(true, Ordering::SeqCst);
                    log::debug!("server {} cancelled its request {id}", state.name);
                }
            }
            method::TOOLS_CHANGED => bump(&state.shared.tools_epoch),
            method::RESOURCES_CHANGED => bump(&state.shared.resources_epoch),
            method::PROMPTS_CHANGED => bump(&state.shared.prompts_epoch),
            _ => state.handler.notification(&state.name, method_name, &params),
        }
    }

    fn closed(&mut self, conn: ConnId, cause: TransportError) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        if !matches!(cause, TransportError::ClosedByClient) {
            log::debug!("server {}: connection closed: {cause}", state.name);
        }
        let cause = Arc::new(cause);
        state.closed = Some(cause.clone());
        let _ = state.shared.closed.set(cause.clone());
        let entries = self.registry.lock().close_conn(conn, cause.clone());
        for entry in entries {
            let _ = entry.reply.send(CallUpdate::done(Err(CallError::Disconnected(cause.clone()))));
        }
    }

    fn detach(&mut self, conn: ConnId) -> Option<WorkerHandle> {
        self.inbound.retain(|(c, _), _| *c != conn);
        let cause = Arc::new(TransportError::ClosedByClient);
        let entries = {
            let mut table = self.registry.lock();
            let entries = table.close_conn(conn, cause.clone());
            table.forget_conn(conn);
            entries
        };
        for entry in entries {
            let _ = entry.reply.send(CallUpdate::done(Err(CallError::Disconnected(cause.clone()))));
        }
        let state = self.conns.remove(&conn)?;
        let _ = state.shared.closed.set(cause);
        let worker = state.worker?;
        worker.send(Outbound::Close);
        Some(worker)
    }

    fn shutdown(&mut self) -> Vec<WorkerHandle> {
        self.take_quiet();
        self.registry.stop();
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
