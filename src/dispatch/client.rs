//! `Engine`: the front ends' handle on the dispatcher. Cloning it is cheap; the dispatcher
//! thread ends when `shutdown` is called.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::Value;

use super::{CallError, CallId, CallRequest, CallUpdate, Dispatcher, Event, ProgressPolicy};
use crate::transport::{ConnId, WorkerHandle};
use crate::util::JoinOnDrop;

/// Bound on the worker → dispatcher queue: a noisy server waits rather than growing memory.
const EVENT_QUEUE: usize = 1024;

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    events: Sender<Event>,
    next_call: AtomicU64,
    next_conn: AtomicU32,
    thread: Mutex<Option<JoinOnDrop<()>>>,
}

/// A call in flight: its updates arrive on `updates()`.
pub struct PendingCall {
    pub id: CallId,
    updates: Receiver<CallUpdate>,
}

impl PendingCall {
    pub fn updates(&self) -> &Receiver<CallUpdate> {
        &self.updates
    }

    /// Waits for the result, passing progress to `on_progress`. The dispatcher enforces the
    /// deadline, so this always returns.
    pub fn wait(self, mut on_progress: impl FnMut(&super::Progress)) -> Result<Value, CallError> {
        loop {
            match self.updates.recv() {
                Ok(CallUpdate::Progress(p)) => on_progress(&p),
                Ok(CallUpdate::Done(result)) => return result,
                Err(_) => return Err(CallError::Cancelled("nod is shutting down".into())),
            }
        }
    }
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::start()
    }
}

impl Engine {
    pub fn start() -> Engine {
        let (events, inbox) = crossbeam_channel::bounded(EVENT_QUEUE);
        let dispatcher = Dispatcher::new(events.clone());
        let thread = std::thread::Builder::new()
            .name("nod-dispatch".into())
            .spawn(move || dispatcher.run(inbox))
            .expect("spawn the dispatcher thread");
        Engine {
            inner: Arc::new(Inner {
                events,
                next_call: AtomicU64::new(1),
                next_conn: AtomicU32::new(1),
                thread: Mutex::new(Some(JoinOnDrop::new(thread))),
            }),
        }
    }

    pub(crate) fn events(&self) -> &Sender<Event> {
        &self.inner.events
    }

    pub(crate) fn next_conn(&self) -> ConnId {
        ConnId(self.inner.next_conn.fetch_add(1, Ordering::Relaxed))
    }

    pub fn next_call(&self) -> CallId {
        CallId(self.inner.next_call.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn send(&self, event: Event) {
        let _ = self.inner.events.send(event);
    }

    /// Starts a request. `progress` asks for progress notifications with the given token.
    pub fn start_call(
        &self,
        id: CallId,
        conn: ConnId,
        method: &'static str,
        params: Option<String>,
        timeout: Duration,
        progress: Option<ProgressPolicy>,
    ) -> PendingCall {
        let (reply, updates) = crossbeam_channel::unbounded();
        let req = CallRequest { id, conn, method, params, timeout, progress, reply: reply.clone() };
        if self.inner.events.send(Event::Call(req)).is_err() {
            let _ = reply.send(CallUpdate::Done(Err(CallError::Cancelled("nod is shutting down".into()))));
        }
        PendingCall { id, updates }
    }

    pub fn cancel(&self, call: CallId, reason: &str) {
        self.send(Event::Cancel { call, reason: reason.to_string() });
    }

    pub fn cancel_all(&self, reason: &str) {
        self.send(Event::CancelAll { reason: reason.to_string() });
    }

    /// Closes one connection and waits (bounded by the worker's own shutdown sequence) for
    /// its process to be gone.
    pub(crate) fn detach(&self, conn: ConnId) {
        let (done, rx) = crossbeam_channel::bounded(1);
        self.send(Event::Detach { conn, done });
        if let Ok(Some(worker)) = rx.recv_timeout(Duration::from_secs(10)) {
            join_worker(worker);
        }
    }

    /// Fails every pending call, closes every connection in parallel and joins the workers.
    pub fn shutdown(&self) {
        let (done, rx) = crossbeam_channel::bounded(1);
        self.send(Event::Shutdown { done });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(workers) => workers.into_iter().for_each(join_worker),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        if let Some(thread) = self.inner.thread.lock().ok().and_then(|mut t| t.take()) {
            thread.join();
        }
    }
}

fn join_worker(mut worker: WorkerHandle) {
    if let Some(thread) = worker.thread.take() {
        thread.join();
    }
}
