//! `Engine`: the front ends' handle on the dispatcher. Cloning it is cheap; the dispatcher
//! thread ends when `shutdown` is called.
//!
//! A wait for the dispatcher's own answer also watches `gone`, a channel whose only sender
//! lives on the dispatcher thread: when that thread ends, waits end at once. A call needs no
//! such watch: when the dispatcher thread ends, however it ends (a panic too), every call
//! still pending is failed and later ones are refused, so a call's own channel always ends.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};
use serde_json::Value;

use super::pending::{NewCall, Refused, Registry};
use super::{
    CallError, CallId, CallUpdate, Command, ConnShared, Dispatcher, Finished, GroupId, InboundHandler, ProgressPolicy,
};
use crate::jsonrpc;
use crate::transport::{ConnId, Link, NotifyKind, Outbound, Report, RequestMeta, WorkerHandle};
use crate::util::JoinOnDrop;

/// Bound on the worker → dispatcher queue: a noisy server waits rather than growing memory.
const REPORT_QUEUE: usize = 256;

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    commands: Sender<Command>,
    reports: Sender<Report>,
    registry: Arc<Registry>,
    quiet: super::Quiet,
    gone: Receiver<()>,
    next_call: AtomicU64,
    next_conn: AtomicU32,
    next_group: AtomicU64,
    thread: Mutex<Option<JoinOnDrop<()>>>,
    /// Held for a whole shutdown, so a second caller returns only when the first is done.
    shutting_down: Mutex<()>,
}

impl Drop for Inner {
    /// The last handle to the engine is gone without a shutdown (a library user that just
    /// drops it): the dispatcher is told to shut down, so joining its thread cannot wait
    /// forever (it holds a sender of its own command channel).
    fn drop(&mut self) {
        let (done, _ignored) = crossbeam_channel::bounded(1);
        let _ = self.commands.send(Command::Shutdown { done });
    }
}

/// A call in flight: its updates arrive on `updates()`, ending with one `Done` (a call
/// pending when the engine stops is done with `Cancelled`).
///
/// `wait` and `wait_until` are a plain receive on this channel alone: a receiver woken by the
/// worker's send reads its answer without taking the channel's waker lock again, which the
/// worker may still hold (a `select!` unregisters from every channel it watched). The tool
/// wait and the agent's, which also watch the server's questions, still `select!`.
pub struct PendingCall {
    pub id: CallId,
    updates: Receiver<CallUpdate>,
}

impl PendingCall {
    /// A call that failed before anything was sent.
    pub fn failed(id: CallId, error: CallError) -> PendingCall {
        let (reply, updates) = crossbeam_channel::bounded(1);
        let _ = reply.send(CallUpdate::done(Err(error)));
        PendingCall { id, updates }
    }

    /// A call whose updates another thread sends (a 2026-07-28 request retried after the
    /// input it asked for).
    pub fn relayed(id: CallId, updates: Receiver<CallUpdate>) -> PendingCall {
        PendingCall { id, updates }
    }

    pub fn updates(&self) -> &Receiver<CallUpdate> {
        &self.updates
    }

    /// Waits for the result, passing progress to `on_progress`. The dispatcher enforces the
    /// deadline, and fails the call if it stops, so this always returns.
    pub fn wait(&self, on_progress: impl FnMut(&super::Progress)) -> Result<Value, CallError> {
        self.wait_finished(on_progress).into_result()
    }

    /// `wait`, with a plain answer left as the text a stdio worker handed over (`Finished::Text`).
    pub fn wait_finished(&self, mut on_progress: impl FnMut(&super::Progress)) -> Finished {
        loop {
            match self.updates.recv() {
                Ok(CallUpdate::Progress(p)) => on_progress(&p),
                Ok(CallUpdate::Done(finished)) => return *finished,
                Err(_) => return Finished::Result(Err(stopped())),
            }
        }
    }
}

impl PendingCall {
    /// `wait`, up to `deadline`: `None` when no answer came by then (the call stays open).
    pub fn wait_until(
        &self,
        deadline: std::time::Instant,
        mut on_progress: impl FnMut(&super::Progress),
    ) -> Option<Result<Value, CallError>> {
        loop {
            match self.updates.recv_deadline(deadline) {
                Ok(CallUpdate::Progress(p)) => on_progress(&p),
                Ok(CallUpdate::Done(finished)) => return Some(finished.into_result()),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => return None,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Some(Err(stopped())),
            }
        }
    }
}

fn stopped() -> CallError {
    CallError::Cancelled(super::pending::STOPPED.into())
}

/// Stops the registry when the dispatcher thread ends, by its return or by a panic.
struct StopOnExit(Arc<Registry>);

impl Drop for StopOnExit {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// A request to start: what `Engine::start_call` needs.
pub struct Request<'a> {
    pub method: &'static str,
    /// Serialized params, encoded on the caller's thread.
    pub params: Option<&'a str>,
    pub timeout: Duration,
    pub progress: Option<ProgressPolicy>,
    pub group: Option<GroupId>,
    /// What the request is, for the worker (its method is `method`).
    pub meta: RequestMeta,
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::start()
    }
}

impl Engine {
    pub fn start() -> Engine {
        let (commands, command_inbox) = crossbeam_channel::unbounded();
        let (reports, report_inbox) = crossbeam_channel::bounded(REPORT_QUEUE);
        let (gone_tx, gone) = crossbeam_channel::bounded::<()>(0);
        let registry = Arc::new(Registry::default());
        let quiet = super::quiet();
        let dispatcher = Dispatcher::new(registry.clone(), commands.clone(), quiet.clone());
        let stopping = registry.clone();
        let thread = std::thread::Builder::new()
            .name("nod-dispatch".into())
            .spawn(move || {
                let _gone = gone_tx;
                // However the thread ends: no call waits for a dispatcher that is not there.
                let _stop = StopOnExit(stopping);
                dispatcher.run(command_inbox, report_inbox);
            })
            .expect("spawn the dispatcher thread");
        Engine {
            inner: Arc::new(Inner {
                commands,
                reports,
                registry,
                quiet,
                gone,
                next_call: AtomicU64::new(1),
                next_conn: AtomicU32::new(1),
                next_group: AtomicU64::new(1),
                thread: Mutex::new(Some(JoinOnDrop::new(thread))),
                shutting_down: Mutex::new(()),
            }),
        }
    }

    fn send(&self, command: Command) {
        let _ = self.inner.commands.send(command);
    }

    /// Queues a command the dispatcher takes when it next wakes, before anything else.
    fn send_quietly(&self, command: Command) {
        let mut quiet = self.inner.quiet.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match quiet.as_mut() {
            Some(queue) => queue.push(command),
            None => {
                drop(quiet);
                drop(command);
            }
        }
    }

    pub fn next_call(&self) -> CallId {
        CallId(self.inner.next_call.fetch_add(1, Ordering::Relaxed))
    }

    /// A new group of calls that can be cancelled together.
    pub fn group(&self) -> GroupId {
        GroupId(self.inner.next_group.fetch_add(1, Ordering::Relaxed))
    }

    /// Registers a new connection and returns its id, its shared state and the link its
    /// worker reports through.
    pub fn register(&self, name: &str, handler: Arc<dyn InboundHandler>) -> (ConnId, Arc<ConnShared>, Link) {
        let conn = ConnId(self.inner.next_conn.fetch_add(1, Ordering::Relaxed));
        let link = Link::new(conn, name, self.inner.reports.clone(), self.inner.registry.clone());
        let shared = Arc::new(ConnShared {
            revision: link.revision().clone(),
            legacy: link.legacy().clone(),
            ..ConnShared::default()
        });
        self.send_quietly(Command::Register { conn, name: name.to_string(), handler, shared: shared.clone() });
        (conn, shared, link)
    }

    /// Hands a started worker to the dispatcher; calls may go to it from now on.
    pub fn attach(&self, conn: ConnId, shared: &ConnShared, worker: WorkerHandle) {
        let _ = shared.outlet.set(worker.outlet().clone());
        self.send_quietly(Command::Attach { conn, worker });
    }

    /// Sends a notification (or any frame that expects no answer) of `kind`.
    pub fn notify(&self, shared: &ConnShared, frame: Vec<u8>, kind: NotifyKind) {
        if let Some(outlet) = shared.outlet.get() {
            outlet.send(Outbound::Notify { frame, kind });
        }
    }

    /// Starts a request. The frame goes to the worker from this thread; the answer comes
    /// back to this call's channel from the worker's.
    pub fn start_call(&self, conn: ConnId, shared: &ConnShared, req: Request<'_>) -> PendingCall {
        let id = self.next_call();
        let (reply, updates) = crossbeam_channel::unbounded();
        let pending = PendingCall { id, updates };
        let fail = |error: CallError| {
            let _ = reply.send(CallUpdate::done(Err(error)));
        };
        if let Some(cause) = shared.closed.get() {
            fail(CallError::Disconnected(cause.clone()));
            return pending;
        }
        let Some(outlet) = shared.outlet.get() else {
            fail(CallError::Disconnected(Arc::new(crate::transport::TransportError::Io(
                "the connection has no worker".into(),
            ))));
            return pending;
        };
        let wire_id = shared.next_wire();
        let frame = jsonrpc::encode_request(wire_id, req.method, req.params);
        if jsonrpc::frame::check_outgoing(&frame).is_err() {
            fail(CallError::TooLarge(frame.len() - 1));
            return pending;
        }
        if log::log_enabled!(target: "nod::wire", log::Level::Trace) {
            log::trace!(target: "nod::wire", "> {} {}", conn.0, String::from_utf8_lossy(&frame).trim_end());
        }
        let call = NewCall {
            id,
            conn,
            wire_id,
            meta: req.meta,
            timeout: req.timeout,
            progress: req.progress.map(|p| (p.token, p.cap)),
            group: req.group,
            reply: reply.clone(),
        };
        match self.inner.registry.start(call, outlet, frame, Instant::now()) {
            Ok(true) => self.send(Command::Wake),
            Ok(false) => {}
            Err(Refused::Closed(cause)) => fail(CallError::Disconnected(cause)),
            Err(Refused::Cancelled(reason)) => fail(CallError::Cancelled(reason)),
        }
        pending
    }

    pub fn cancel(&self, call: CallId, reason: &str) {
        self.send(Command::Cancel { call, reason: reason.to_string() });
    }

    /// Cancels every call of `group`, and any it starts later.
    pub fn cancel_group(&self, group: GroupId, reason: &str) {
        self.send(Command::CancelGroup { group, reason: reason.to_string() });
    }

    pub fn cancel_all(&self, reason: &str) {
        self.send(Command::CancelAll { reason: reason.to_string() });
    }

    /// Forgets a cancelled group once none of its calls can start any more.
    pub fn end_group(&self, group: GroupId) {
        self.send(Command::EndGroup { group });
    }

    /// Closes one connection and waits (bounded by the worker's own shutdown sequence) for
    /// its process to be gone.
    pub fn detach(&self, conn: ConnId) {
        let (done, rx) = crossbeam_channel::bounded(1);
        self.send(Command::Detach { conn, done });
        if let Some(Some(worker)) = self.reply(&rx) {
            worker.join();
        }
    }

    /// Fails every pending call, closes every connection in parallel and joins the workers.
    /// A second call (Ctrl-C racing the normal end) waits for the first to finish.
    pub fn shutdown(&self) {
        let _one_at_a_time = self.inner.shutting_down.lock();
        let (done, rx) = crossbeam_channel::bounded(1);
        self.send(Command::Shutdown { done });
        if let Some(workers) = self.reply(&rx) {
            // Close all first, then join: the connections end in parallel.
            for worker in &workers {
                worker.send(Outbound::Close);
            }
            workers.into_iter().for_each(WorkerHandle::join);
        }
        if let Some(thread) = self.inner.thread.lock().ok().and_then(|mut t| t.take()) {
            thread.join();
        }
    }

    /// Waits for the dispatcher's answer, or for the dispatcher to be gone.
    fn reply<T>(&self, rx: &Receiver<T>) -> Option<T> {
        select! {
            recv(rx) -> answer => answer.ok(),
            recv(self.inner.gone) -> _ => rx.try_recv().ok(),
        }
    }
}
