//! Remote servers: Streamable HTTP (2025-03-26 and later) and legacy HTTP+SSE (2024-11-05),
//! through ureq with rustls.
//!
//! The worker thread (`nod-http:<server>`) owns every thread of the connection:
//! - each request gets a thread (`http_request`), since its answer may be a long event
//!   stream, and an agent of its own, so `CancelStream` can close that stream at once
//!   (`ureq::Agent::shutdown`); agents of finished requests are kept for reuse;
//! - notifications and answers to the server are POSTed in order by one poster thread, and a
//!   request waits until the notifications queued before it were sent (`initialized` comes
//!   before the first list);
//! - the standalone GET stream and the legacy event stream (`http_stream`, `legacy_sse`)
//!   have a thread each.
//!
//! `Close` shuts down every agent, ends the session (DELETE), and waits (bounded) for the
//! threads. A 404 to a request that carried a session id is reported as `SessionExpired`;
//! the session layer starts a new session and replays the request.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::http_request::{Post, poster, request};
use super::legacy_sse::start_legacy;
use super::{Credentials, Link, NotifyKind, Outbound, Outlet, RequestMeta, TransportError, WorkerHandle};
use crate::jsonrpc::Message;
use crate::mcp::Version;
use crate::util::JoinOnDrop;

/// What to connect to. `headers` are final: header_env and bearer tokens already resolved.
#[derive(Clone)]
pub struct HttpSpec {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// `type: "sse"`: the legacy 2024-11-05 transport from the start.
    pub legacy: bool,
    /// The bound on one notification or response POST (they are answered at once): the
    /// server's operation timeout, at most 10 s.
    pub message_timeout: Duration,
    /// Credentials for servers that need them (OAuth).
    pub credentials: Option<Arc<dyn Credentials>>,
}

/// The longest a notification or response POST may take: they are answered at once (202).
pub const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `Close` waits for the connection's threads before leaving the rest to end on
/// their own (a connect in progress cannot be interrupted; it ends within its timeout).
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Idle agents kept for reuse (each keeps its connection alive).
const IDLE_AGENTS: usize = 8;

pub fn spawn(link: Link, spec: HttpSpec) -> Result<WorkerHandle, TransportError> {
    let name = link.name.clone();
    let legacy = spec.legacy;
    let shared = Arc::new(Shared::new(link, spec));
    let (outbox, inbox) = crossbeam_channel::unbounded();
    let thread = std::thread::Builder::new()
        .name(format!("nod-http:{name}"))
        .spawn(move || run(shared, inbox, legacy))
        .map_err(|e| TransportError::Io(e.to_string()))?;
    Ok(WorkerHandle::new(Outlet::new(outbox, None), JoinOnDrop::new(thread)))
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
    active: Mutex<HashMap<StreamKey, ureq::Agent>>,
    cancelled: Mutex<HashSet<StreamKey>>,
    wakeup: Condvar,
    pub order: Order,
    /// The poster thread's queue; taken at close.
    posts: Mutex<Option<Sender<Post>>>,
    /// Disconnects when the poster thread has sent everything and ended.
    poster_done: Mutex<Option<Receiver<()>>>,
    threads: Threads,
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
    fn new(link: Link, spec: HttpSpec) -> Shared {
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
struct Threads {
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
    fn reap(&self) {
        let mut handles = lock(&self.handles);
        let (done, live): (Vec<_>, Vec<_>) = handles.drain(..).partition(JoinHandle::is_finished);
        *handles = live;
        drop(handles);
        for handle in done {
            let _ = handle.join();
        }
    }

    /// Waits until every thread has ended, or `limit` passed; joins those that ended.
    fn wait_all(&self, limit: Duration) -> usize {
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

fn run(shared: Arc<Shared>, inbox: Receiver<Outbound>, legacy: bool) {
    let (posts, post_inbox) = crossbeam_channel::unbounded::<Post>();
    let (done, poster_done) = crossbeam_channel::bounded::<()>(0);
    *lock(&shared.posts) = Some(posts);
    *lock(&shared.poster_done) = Some(poster_done);
    shared.spawn_thread(move |shared| {
        let _done = done;
        poster(shared, post_inbox);
    });
    if legacy {
        start_legacy(&shared, &shared.url.clone());
    }
    while let Ok(out) = inbox.recv() {
        match out {
            Outbound::Request { id, frame, meta } => send_request(&shared, id, frame, meta),
            // 2026-07-28 over HTTP: closing the response stream is the cancellation.
            Outbound::Notify { kind: NotifyKind::Cancelled { revision: Some(revision) }, .. }
                if revision.is_modern() => {}
            Outbound::Notify { frame, kind } => {
                let seq = shared.order.queue();
                shared.post(Post::Notify { seq, frame, kind });
            }
            Outbound::CancelStream(id) => shared.cancel(StreamKey::Request(id)),
            Outbound::Close => break,
        }
        shared.threads.reap();
    }
    close(&shared);
}

fn send_request(shared: &Arc<Shared>, id: u64, frame: Vec<u8>, meta: RequestMeta) {
    if lock(&shared.legacy).is_some() {
        shared.post(Post::Legacy { id: Some(id), frame });
        return;
    }
    let after = shared.order.queued();
    shared.spawn_thread(move |shared| {
        if !meta.is_initialize() {
            shared.order.wait_sent(after, shared.message_timeout);
        }
        request(shared, id, &meta, &frame);
        shared.checkin(StreamKey::Request(id));
    });
}

fn close(shared: &Arc<Shared>) {
    // What was queued before the close (a final notifications/cancelled) goes out first,
    // within a bound: the poster ends once its queue is empty.
    lock(&shared.posts).take();
    if let Some(done) = lock(&shared.poster_done).take() {
        let _ = done.recv_timeout(CLOSE_WAIT);
    }
    shared.closed.store(true, Ordering::SeqCst);
    let agents: Vec<ureq::Agent> = lock(&shared.active).drain().map(|(_, agent)| agent).collect();
    for agent in agents {
        agent.shutdown();
    }
    shared.wakeup.notify_all();
    shared.order.mark_sent(u64::MAX);
    let session = lock(&shared.session).id.clone();
    if let Some(session) = session {
        // Ending the session is a courtesy: a server that does not allow it answers 405.
        let agent = crate::net::agent(Some(Duration::from_secs(2)));
        let _ = shared.with_headers(agent.delete(&shared.url), Some(&session)).call();
    }
    let left = shared.threads.wait_all(CLOSE_WAIT);
    if left > 0 {
        log::debug!("server {}: {left} connection thread(s) still connecting; they end on their own", shared.name());
    }
    shared.report_closed(TransportError::ClosedByClient);
}
