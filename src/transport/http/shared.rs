//! What the threads of one HTTP connection share: the server's session, the agents of open
//! streams (so any stream can be closed at once), the order of notifications before
//! requests, the poster's queue and the threads the worker owns and joins.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::HttpSpec;
use crate::jsonrpc::Message;
use crate::mcp::Version;
use crate::net::NetError;
use crate::transport::{Credentials, Link, NotifyKind, TransportError};

/// Idle agents kept for reuse (each keeps its connection alive).
const IDLE_AGENTS: usize = 8;

/// Work for the poster thread.
pub(super) enum Post {
    /// A notification or an answer to the server, `seq` in the order of `Order`.
    Notify { seq: u64, frame: Vec<u8>, kind: NotifyKind },
    /// Legacy mode: every message is a POST to the announced endpoint.
    Legacy { id: Option<u64>, frame: Vec<u8> },
}

/// What a stream's agent is registered under, so it can be shut down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum StreamKey {
    Request(u64),
    Get,
    Legacy,
    Poster,
}

/// The server's session as the worker knows it.
#[derive(Default, Clone)]
pub(super) struct SessionState {
    pub id: Option<String>,
    /// Bumped each time a new session id is adopted.
    pub generation: u64,
    /// The session expired and no new one has started yet.
    pub expired: bool,
}

pub(super) struct Shared {
    pub link: Link,
    pub url: String,
    headers: Vec<(String, String)>,
    pub credentials: Option<Arc<dyn Credentials>>,
    pub message_timeout: Duration,
    pub session: Mutex<SessionState>,
    pub closed: AtomicBool,
    reported: AtomicBool,
    /// Legacy mode: the endpoint to POST to, once the event stream announced it.
    pub legacy: Mutex<Option<Legacy>>,
    pub get_running: AtomicBool,
    /// The status of the initialize POST that made an http entry fall back to legacy SSE.
    pub fallback_from: std::sync::atomic::AtomicU16,
    idle: Mutex<Vec<ureq::Agent>>,
    pub active: Mutex<HashMap<StreamKey, ureq::Agent>>,
    cancelled: Mutex<HashSet<StreamKey>>,
    pub wakeup: Condvar,
    pub order: Order,
    /// The poster thread's queue; taken at close.
    pub posts: Mutex<Option<Sender<Post>>>,
    /// Disconnects when the poster thread has sent everything and ended.
    pub poster_done: Mutex<Option<Receiver<()>>>,
    pub threads: Threads,
}

pub(super) struct Legacy {
    pub endpoint: Option<String>,
    /// Frames waiting for the endpoint, with their request ids.
    pub queued: Vec<(Option<u64>, Vec<u8>)>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn new(link: Link, spec: HttpSpec) -> Shared {
        Shared {
            link,
            url: spec.url,
            headers: spec.headers,
            credentials: spec.credentials,
            message_timeout: spec.message_timeout,
            session: Mutex::new(SessionState::default()),
            closed: AtomicBool::new(false),
            reported: AtomicBool::new(false),
            legacy: Mutex::new(None),
            get_running: AtomicBool::new(false),
            fallback_from: std::sync::atomic::AtomicU16::new(0),
            idle: Mutex::new(Vec::new()),
            active: Mutex::new(HashMap::new()),
            cancelled: Mutex::new(HashSet::new()),
            wakeup: Condvar::new(),
            order: Order::default(),
            posts: Mutex::new(None),
            poster_done: Mutex::new(None),
            threads: Threads::default(),
        }
    }

    pub fn name(&self) -> &str {
        &self.link.name
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// An agent for `key`, registered so that `cancel` can shut it down. None when the
    /// stream was cancelled or the connection closed.
    pub fn checkout(&self, key: StreamKey) -> Option<ureq::Agent> {
        if self.is_closed() || lock(&self.cancelled).contains(&key) {
            return None;
        }
        let agent = lock(&self.idle).pop().unwrap_or_else(|| crate::net::agent(None));
        lock(&self.active).insert(key, agent.clone());
        Some(agent)
    }

    /// The agent registered for `key`, while the stream is neither cancelled nor closed.
    pub fn current_agent(&self, key: StreamKey) -> Option<ureq::Agent> {
        if self.is_cancelled(key) {
            return None;
        }
        lock(&self.active).get(&key).cloned()
    }

    /// Gives an agent back after a finished exchange; one that was shut down is dropped.
    pub fn checkin(&self, key: StreamKey) {
        let agent = lock(&self.active).remove(&key);
        let cancelled = lock(&self.cancelled).remove(&key);
        if let Some(agent) = agent
            && !cancelled
            && !self.is_closed()
        {
            let mut idle = lock(&self.idle);
            if idle.len() < IDLE_AGENTS {
                idle.push(agent);
            }
        }
    }

    /// Closes a stream at once: its agent's connections are shut, so a blocked read fails.
    pub fn cancel(&self, key: StreamKey) {
        lock(&self.cancelled).insert(key);
        if let Some(agent) = lock(&self.active).remove(&key) {
            agent.shutdown();
        }
        self.wakeup.notify_all();
    }

    pub fn is_cancelled(&self, key: StreamKey) -> bool {
        self.is_closed() || lock(&self.cancelled).contains(&key)
    }

    /// Sleeps for `delay` unless the stream is cancelled or the connection closes first.
    /// True when the sleep ran its course.
    pub fn pause(&self, key: StreamKey, delay: Duration) -> bool {
        let deadline = Instant::now() + delay;
        let mut cancelled = lock(&self.cancelled);
        loop {
            if self.is_closed() || cancelled.contains(&key) {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            cancelled = self.wakeup.wait_timeout(cancelled, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Adds the configured headers, the session id, the negotiated revision and credentials.
    pub fn with_headers<B>(&self, req: ureq::RequestBuilder<B>, session: Option<&str>) -> ureq::RequestBuilder<B> {
        self.with_headers_at(req, session, self.link.revision().get())
    }

    /// `with_headers` for a request sent at `revision` (what its `RequestMeta` says).
    pub fn with_headers_at<B>(
        &self,
        mut req: ureq::RequestBuilder<B>,
        session: Option<&str>,
        revision: Option<Version>,
    ) -> ureq::RequestBuilder<B> {
        for (name, value) in &self.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        if let Some(session) = session {
            req = req.header("Mcp-Session-Id", session);
        }
        if let Some(revision) = revision {
            req = req.header("MCP-Protocol-Version", revision.as_str());
        }
        if let Some(bearer) = self.credentials.as_ref().and_then(|c| c.authorization()) {
            req = req.header("Authorization", bearer);
        }
        req
    }

    /// Hands messages on. False once the dispatcher is gone.
    pub fn deliver(&self, msgs: Vec<Message>, batch: bool) -> bool {
        self.link.deliver(msgs, batch)
    }

    /// Queues work for the poster thread.
    pub fn post(&self, post: Post) {
        if let Some(posts) = lock(&self.posts).as_ref() {
            let _ = posts.send(post);
        }
    }

    pub fn fail(&self, id: u64, error: TransportError) {
        self.link.failed(id, error);
    }

    /// Reports the end of the connection, once.
    pub fn report_closed(&self, cause: TransportError) {
        if !self.reported.swap(true, Ordering::SeqCst) {
            self.link.closed(cause);
        }
    }

    /// Starts a thread the worker owns.
    pub fn spawn_thread(self: &Arc<Self>, work: impl FnOnce(&Arc<Shared>) + Send + 'static) {
        let shared = self.clone();
        self.threads.started();
        let spawned = std::thread::Builder::new().name(format!("nod-http:{}", self.name())).spawn(move || {
            let _done = ThreadDone(&shared.threads);
            work(&shared);
        });
        match spawned {
            Ok(handle) => lock(&self.threads.handles).push(handle),
            Err(err) => {
                self.threads.finished();
                log::warn!("server {}: cannot start a thread: {err}", self.name());
            }
        }
    }
}

/// Orders requests after the notifications queued before them.
#[derive(Default)]
pub(super) struct Order {
    counts: Mutex<(u64, u64)>,
    sent: Condvar,
}

impl Order {
    /// Counts a queued notification; returns its sequence number.
    pub fn queue(&self) -> u64 {
        let mut counts = lock(&self.counts);
        counts.0 += 1;
        counts.0
    }

    pub fn queued(&self) -> u64 {
        lock(&self.counts).0
    }

    pub fn mark_sent(&self, seq: u64) {
        let mut counts = lock(&self.counts);
        counts.1 = counts.1.max(seq);
        self.sent.notify_all();
    }

    /// Waits (bounded) until notification `seq` was sent.
    pub fn wait_sent(&self, seq: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut counts = lock(&self.counts);
        while counts.1 < seq {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            counts = self.sent.wait_timeout(counts, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

#[derive(Default)]
pub(super) struct Threads {
    handles: Mutex<Vec<JoinHandle<()>>>,
    running: Mutex<usize>,
    ended: Condvar,
}

impl Threads {
    fn started(&self) {
        *lock(&self.running) += 1;
    }

    fn finished(&self) {
        let mut running = lock(&self.running);
        *running = running.saturating_sub(1);
        self.ended.notify_all();
    }

    /// Joins the threads that have ended.
    pub fn reap(&self) {
        let mut handles = lock(&self.handles);
        let (done, live): (Vec<_>, Vec<_>) = handles.drain(..).partition(JoinHandle::is_finished);
        *handles = live;
        drop(handles);
        for handle in done {
            let _ = handle.join();
        }
    }

    /// Waits until every thread has ended, or `limit` passed; joins those that ended.
    pub fn wait_all(&self, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        let mut running = lock(&self.running);
        while *running > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            running = self.ended.wait_timeout(running, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        let left = *running;
        drop(running);
        self.reap();
        left
    }
}

struct ThreadDone<'a>(&'a Threads);

impl Drop for ThreadDone<'_> {
    fn drop(&mut self) {
        self.0.finished();
    }
}

pub(super) fn net_error(err: NetError) -> TransportError {
    match err {
        NetError::Redirect(why) => TransportError::Redirect(why),
        NetError::Timeout => TransportError::Timeout,
        NetError::HostNotFound => TransportError::Io("host not found".into()),
        NetError::Io(why) => TransportError::Io(why),
    }
}
