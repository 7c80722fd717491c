//! `Engine`: the front ends' handle on the dispatcher. Cloning it is cheap; the dispatcher
//! thread ends when `shutdown` is called.
//!
//! Every wait on the dispatcher also watches `gone`, a channel whose only sender lives on the
//! dispatcher thread: when that thread ends, waits end at once, even for a request that was
//! still queued (a bounded crossbeam channel keeps queued messages while any sender lives).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, select};
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
    gone: Receiver<()>,
    next_call: AtomicU64,
    next_conn: AtomicU32,
    thread: Mutex<Option<JoinOnDrop<()>>>,
    /// Held for a whole shutdown, so a second caller returns only when the first is done.
    shutting_down: Mutex<()>,
}

/// A call in flight: its updates arrive on `updates()`; `gone()` fires if the engine stops.
pub struct PendingCall {
    pub id: CallId,
    updates: Receiver<CallUpdate>,
    gone: Receiver<()>,
}

impl PendingCall {
    pub fn updates(&self) -> &Receiver<CallUpdate> {
        &self.updates
    }

    /// Becomes ready (disconnected) when the dispatcher has stopped.
    pub fn gone(&self) -> &Receiver<()> {
        &self.gone
    }

    /// Waits for the result, passing progress to `on_progress`. The dispatcher enforces the
    /// deadline, so this always returns.
    pub fn wait(self, mut on_progress: impl FnMut(&super::Progress)) -> Result<Value, CallError> {
        loop {
            select! {
                recv(self.updates) -> update => match update {
                    Ok(CallUpdate::Progress(p)) => on_progress(&p),
                    Ok(CallUpdate::Done(result)) => return result,
                    Err(_) => return Err(stopped()),
                },
                recv(self.gone) -> _ => return Err(stopped()),
            }
        }
    }
}

fn stopped() -> CallError {
    CallError::Cancelled("nod is shutting down".into())
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::start()
    }
}

impl Engine {
    pub fn start() -> Engine {
        let (events, inbox) = crossbeam_channel::bounded(EVENT_QUEUE);
        let (gone_tx, gone) = crossbeam_channel::bounded::<()>(0);
        let dispatcher = Dispatcher::new(events.clone());
        let thread = std::thread::Builder::new()
            .name("nod-dispatch".into())
            .spawn(move || {
                let _gone = gone_tx;
                dispatcher.run(inbox);
            })
            .expect("spawn the dispatcher thread");
        Engine {
            inner: Arc::new(Inner {
                events,
                gone,
                next_call: AtomicU64::new(1),
                next_conn: AtomicU32::new(1),
                thread: Mutex::new(Some(JoinOnDrop::new(thread))),
                shutting_down: Mutex::new(()),
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
            let _ = reply.send(CallUpdate::Done(Err(stopped())));
        }
        PendingCall { id, updates, gone: self.inner.gone.clone() }
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
        if let Some(Some(worker)) = self.reply(&rx) {
            join_worker(worker);
        }
    }

    /// Fails every pending call, closes every connection in parallel and joins the workers.
    /// A second call (Ctrl-C racing the normal end) waits for the first to finish.
    pub fn shutdown(&self) {
        let _one_at_a_time = self.inner.shutting_down.lock();
        let (done, rx) = crossbeam_channel::bounded(1);
        self.send(Event::Shutdown { done });
        if let Some(workers) = self.reply(&rx) {
            workers.into_iter().for_each(join_worker);
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

fn join_worker(mut worker: WorkerHandle) {
    if let Some(thread) = worker.thread.take() {
        thread.join();
    }
}
