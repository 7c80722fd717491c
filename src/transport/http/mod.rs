//! Remote servers: Streamable HTTP (2025-03-26 and later) and legacy HTTP+SSE (2024-11-05),
//! through ureq with rustls.
//!
//! The worker thread (`nod-http:<server>`) owns every thread of the connection:
//! - each request gets a thread (`request`), since its answer may be a long event
//!   stream, and an agent of its own, so `CancelStream` can close that stream at once
//!   (`ureq::Agent::shutdown`); agents of finished requests are kept for reuse;
//! - notifications and answers to the server are POSTed in order by one poster thread, and a
//!   request waits until the notifications queued before it were sent (`initialized` comes
//!   before the first list);
//! - the standalone GET stream and the legacy event stream (`stream`, `legacy`) have a
//!   thread each.
//!
//! `Close` shuts down every agent, ends the session (DELETE), and waits (bounded) for the
//! threads. A 404 to a request that carried a session id is reported as `SessionExpired`;
//! the session layer starts a new session and replays the request.
//!
//! What those threads share (`Shared`, the poster's `Post`, `net_error`) lives in `shared`,
//! which imports none of its siblings.

mod legacy;
mod request;
mod shared;
mod stream;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::{Credentials, Link, NotifyKind, Outbound, Outlet, RequestMeta, TransportError, WorkerHandle};
use crate::util::JoinOnDrop;
use legacy::start_legacy;
use request::{poster, request};
use shared::{Post, Shared, StreamKey, lock};

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
