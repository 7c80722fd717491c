//! Remote servers: Streamable HTTP (2025-03-26 and later) and legacy HTTP+SSE (2024-11-05),
//! through ureq with rustls.
//!
//! The worker thread (`nod-http:<server>`) takes frames from the dispatcher. Notifications and
//! responses are POSTed in order on the worker itself (they are answered 202 at once); each
//! request gets its own thread, since its answer may be a long SSE stream. Streams are read
//! with the hand-written parser in `sse`: an answer may arrive on any stream, so every message
//! goes to the dispatcher, which matches it by id. A stream that ends before the answer to its
//! request is resumed with GET and `Last-Event-ID` after the server's `retry` delay. A 404 to a
//! request that carried a session id starts a fresh session and replays the request once.
//! After `notifications/initialized` the standalone GET stream opens in the background. The
//! legacy transport lives in `legacy_sse`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use ureq::Agent;

use super::http_stream::{start_get_stream, stream};
use super::legacy_sse::{legacy_send, resolve_endpoint, start_legacy};
use super::sse;
use super::{ConnId, Outbound, TransportError, WorkerHandle};
use crate::dispatch::Event;
use crate::jsonrpc::frame::MAX_FRAME;
use crate::jsonrpc::{self, Message};
use crate::mcp::method;
use crate::util::JoinOnDrop;

/// What to connect to. `headers` are final: header_env and bearer tokens already resolved.
#[derive(Clone, Debug)]
pub struct HttpSpec {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// `type: "sse"`: the legacy 2024-11-05 transport from the start.
    pub legacy: bool,
    /// The bound on one notification or response POST (they are answered at once): the
    /// server's operation timeout, at most 10 s.
    pub message_timeout: Duration,
    /// OAuth, for servers without a static bearer token.
    pub auth: Option<Arc<crate::oauth::OAuth>>,
}

/// How long the first request after `notifications/initialized` waits for the GET stream.
const GET_STREAM_WAIT: Duration = Duration::from_millis(500);

pub fn spawn(conn: ConnId, name: &str, spec: HttpSpec, events: Sender<Event>) -> Result<WorkerHandle, TransportError> {
    let tls = ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build();
    let agent: Agent = Agent::config_builder()
        .http_status_as_error(false)
        // Redirects are followed by nod itself (same origin only): ureq would send the
        // configured headers to another origin, and does not re-send a POST body.
        .max_redirects(0)
        .timeout_connect(Some(Duration::from_secs(15)))
        .tls_config(tls)
        .user_agent(concat!("nod/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let shared = Arc::new(Shared {
        conn,
        name: name.to_string(),
        agent,
        url: spec.url.clone(),
        headers: spec.headers,
        events,
        session: Mutex::new(None),
        version: Mutex::new(None),
        init: Mutex::new(None),
        closed: AtomicBool::new(false),
        get_started: AtomicBool::new(false),
        legacy: Mutex::new(None),
        message_timeout: spec.message_timeout,
        auth: spec.auth,
    });
    let (outbox, inbox) = crossbeam_channel::unbounded();
    let legacy = spec.legacy;
    let thread = std::thread::Builder::new()
        .name(format!("nod-http:{name}"))
        .spawn(move || run(shared, inbox, legacy))
        .map_err(|e| TransportError::Io(e.to_string()))?;
    Ok(WorkerHandle { outbox, waker: None, thread: Some(JoinOnDrop::new(thread)) })
}

pub(super) struct Shared {
    pub(super) conn: ConnId,
    pub(super) name: String,
    pub(super) agent: Agent,
    pub(super) url: String,
    headers: Vec<(String, String)>,
    pub(super) events: Sender<Event>,
    pub(super) session: Mutex<Option<String>>,
    /// The negotiated version, sent as MCP-Protocol-Version once known.
    version: Mutex<Option<String>>,
    /// The initialize request (wire id and frame), replayed when a session expires.
    init: Mutex<Option<(u64, Vec<u8>)>>,
    pub(super) closed: AtomicBool,
    pub(super) get_started: AtomicBool,
    /// Legacy mode: the endpoint to POST to, once the SSE stream announced it.
    pub(super) legacy: Mutex<Option<Legacy>>,
    pub(super) message_timeout: Duration,
    auth: Option<Arc<crate::oauth::OAuth>>,
}

pub(super) struct Legacy {
    pub(super) endpoint: Option<String>,
    /// Frames waiting for the endpoint.
    pub(super) queued: Vec<Vec<u8>>,
}

fn run(shared: Arc<Shared>, inbox: Receiver<Outbound>, legacy: bool) {
    if legacy {
        start_legacy(&shared, &shared.url.clone());
    }
    while let Ok(out) = inbox.recv() {
        match out {
            Outbound::Send(frame) => {
                if shared.legacy.lock().is_ok_and(|l| l.is_some()) {
                    legacy_send(&shared, frame);
                    continue;
                }
                let head: Value = serde_json::from_slice(&frame).unwrap_or(Value::Null);
                let method_name = head.get("method").and_then(Value::as_str).unwrap_or("");
                match head.get("id").and_then(Value::as_u64).filter(|_| !method_name.is_empty()) {
                    Some(id) => {
                        if method_name == method::INITIALIZE {
                            *lock(&shared.init) = Some((id, frame.clone()));
                        }
                        let worker = shared.clone();
                        let thread = std::thread::Builder::new()
                            .name(format!("nod-http:{}", shared.name))
                            .spawn(move || request(&worker, id, frame));
                        match thread {
                            // Request threads are not joined on close: one may be blocked on
                            // a stream the server keeps open; it ends on its next failed send.
                            Ok(handle) => drop(handle),
                            Err(err) => log::warn!("server {}: cannot start a request thread: {err}", shared.name),
                        }
                    }
                    None => {
                        let initialized = method_name == method::INITIALIZED;
                        if message(&shared, &frame) && initialized {
                            // The next request waits (bounded) until the server has answered
                            // the GET: a server may send what a request triggers on the GET
                            // stream only, and drops it when that stream is not open yet.
                            let opened = start_get_stream(&shared);
                            let _ = opened.recv_timeout(GET_STREAM_WAIT);
                        }
                    }
                }
            }
            Outbound::Close => break,
        }
    }
    shared.closed.store(true, Ordering::SeqCst);
    if let Some(session) = lock(&shared.session).clone() {
        // Ending the session is a courtesy: a server that does not allow it answers 405.
        let req = with_headers(&shared, shared.agent.delete(&shared.url), Some(&session));
        let _ = req.config().timeout_global(Some(Duration::from_secs(2))).build().call();
    }
    let _ = shared.events.send(Event::Closed { conn: shared.conn, cause: TransportError::ClosedByClient });
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(super) fn with_headers<B>(
    shared: &Shared,
    mut req: ureq::RequestBuilder<B>,
    session: Option<&str>,
) -> ureq::RequestBuilder<B> {
    for (name, value) in &shared.headers {
        req = req.header(name.as_str(), value.as_str());
    }
    if let Some(session) = session {
        req = req.header("Mcp-Session-Id", session);
    }
    if let Some(version) = lock(&shared.version).as_deref() {
        req = req.header("MCP-Protocol-Version", version);
    }
    if let Some(bearer) = shared.auth.as_ref().and_then(|auth| auth.header()) {
        req = req.header("Authorization", bearer);
    }
    req
}

type Response = ureq::http::Response<ureq::Body>;

/// POSTs a frame to the server URL. `limit` bounds the whole exchange (notifications).
fn post(shared: &Shared, frame: &[u8], limit: Option<Duration>) -> Result<(Response, Option<String>), String> {
    let session = lock(&shared.session).clone();
    let body = frame.strip_suffix(b"\n").unwrap_or(frame);
    let resp = follow(&shared.url, |url| {
        let req = with_headers(shared, shared.agent.post(url), session.as_deref())
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json");
        match limit {
            Some(limit) => req.config().timeout_global(Some(limit)).build().send(body),
            None => req.send(body),
        }
    })?;
    Ok((resp, session))
}

/// The most redirects nod follows for one request.
const MAX_REDIRECTS: usize = 5;
/// The longest a notification or response POST may take: they are answered at once (202).
pub const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends a request, following redirects on the same origin only (the method and body are
/// kept, as for 307). A redirect to another origin is refused: the configured headers and
/// credentials belong to the configured server.
pub(super) fn follow(
    start: &str,
    mut send: impl FnMut(&str) -> Result<Response, ureq::Error>,
) -> Result<Response, String> {
    let mut url = start.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let resp = send(&url).map_err(|e| describe(&e))?;
        if !matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
            return Ok(resp);
        }
        let Some(location) = resp.headers().get("location").and_then(|v| v.to_str().ok()) else {
            return Ok(resp);
        };
        url = match resolve_endpoint(&url, location.trim()) {
            Some(next) => next,
            None => {
                return Err("the server redirected to another origin; nod does not follow that with its headers".into());
            }
        };
    }
    Err("too many redirects".into())
}

fn describe(err: &ureq::Error) -> String {
    match err {
        ureq::Error::Timeout(_) => "the HTTP request timed out".into(),
        ureq::Error::Io(io) => format!("connection failed: {io}"),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::TooManyRedirects => "too many redirects".into(),
        other => format!("HTTP error: {other}"),
    }
}

/// POSTs a notification or a response. Returns whether the server accepted it.
fn message(shared: &Shared, frame: &[u8]) -> bool {
    let mut answer = post(shared, frame, Some(shared.message_timeout));
    if let (Ok((resp, _)), Some(auth)) = (&answer, &shared.auth)
        && resp.status().as_u16() == 401
    {
        let challenge = resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if auth.unauthorized(&challenge) {
            answer = post(shared, frame, Some(shared.message_timeout));
        }
    }
    match answer {
        Ok((mut resp, _)) if resp.status().is_success() => {
            // Some servers answer a notification with 200 and a body; read and ignore it.
            let _ = resp.body_mut().with_config().limit(MAX_FRAME as u64).read_to_vec();
            true
        }
        Ok((resp, _)) => {
            log::warn!("server {} refused a message: HTTP {}", shared.name, resp.status().as_u16());
            false
        }
        Err(err) => {
            log::warn!("server {}: {err}", shared.name);
            false
        }
    }
}

/// One request: POST, then read its answer (JSON or a stream), resuming or re-initializing
/// as the spec says.
fn request(shared: &Arc<Shared>, id: u64, frame: Vec<u8>) {
    let is_init = lock(&shared.init).as_ref().is_some_and(|(init, _)| *init == id);
    let mut replayed = false;
    let mut auth_retried = false;
    loop {
        let (resp, sent_session) = match post(shared, &frame, None) {
            Ok(answer) => answer,
            Err(err) => return fail(shared, id, err),
        };
        let status = resp.status().as_u16();
        if is_init && let Some(session) = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            *lock(&shared.session) = Some(session.to_string());
        }
        let challenge =
            || resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if let Some(auth) = &shared.auth {
            // A 401 is answered once (refresh or authorization); a 403 for missing scopes
            // steps up (OAuth caps that at three in a row).
            let retry = match status {
                401 if !auth_retried => {
                    auth_retried = true;
                    Some(auth.unauthorized(&challenge()))
                }
                403 => Some(auth.forbidden(&challenge())),
                _ => None,
            };
            match retry {
                Some(true) => continue,
                Some(false) => {
                    let why = auth.failure().unwrap_or_else(|| http_failure(status));
                    return fail(shared, id, why);
                }
                None => {}
            }
        }
        match status {
            200..=299 => return answer(shared, resp, Some(id)),
            404 if sent_session.is_some() && !replayed && !is_init => {
                log::warn!("server {}: the session expired; starting a new one", shared.name);
                replayed = true;
                if let Err(err) = reinitialize(shared) {
                    return fail(shared, id, format!("the session expired and a new one could not start: {err}"));
                }
            }
            400 | 404 | 405 if is_init => {
                let mut resp = resp;
                let body = resp.body_mut().with_config().limit(64 * 1024).read_to_vec().unwrap_or_default();
                // A newer server answers with a JSON-RPC error; pass it on instead of
                // falling back to the legacy transport.
                if deliver_body(shared, &body) {
                    return;
                }
                log::info!(
                    "server {}: initialize got HTTP {status}; trying the legacy HTTP+SSE transport",
                    shared.name
                );
                start_legacy(shared, &shared.url.clone());
                legacy_send(shared, frame);
                return;
            }
            _ => {
                let mut resp = resp;
                let body = resp.body_mut().with_config().limit(64 * 1024).read_to_vec().unwrap_or_default();
                if deliver_body(shared, &body) {
                    return;
                }
                return fail(shared, id, http_failure(status));
            }
        }
    }
}

pub(super) fn http_failure(status: u16) -> String {
    match status {
        401 => "HTTP 401: the server requires authentication".into(),
        403 => "HTTP 403: the server refused access".into(),
        404 => "HTTP 404: no MCP endpoint at this URL, or the session ended".into(),
        status => format!("HTTP {status}"),
    }
}

/// Delivers a body if it is a JSON-RPC message (a newer server's error, say).
fn deliver_body(shared: &Shared, body: &[u8]) -> bool {
    match jsonrpc::decode(body, true) {
        Ok(msgs) if msgs.iter().all(|m| matches!(m, Message::Response { .. })) && !msgs.is_empty() => {
            deliver(shared, msgs, false);
            true
        }
        _ => false,
    }
}

pub(super) fn fail(shared: &Shared, wire_id: u64, cause: String) {
    let _ = shared.events.send(Event::RequestFailed { conn: shared.conn, wire_id, cause });
}

/// Reads a successful answer: a JSON body or an SSE stream.
fn answer(shared: &Shared, mut resp: ureq::http::Response<ureq::Body>, want: Option<u64>) {
    let content_type =
        resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        let reader = resp.into_body().into_reader();
        return stream(shared, reader, want, sse::Parser::default(), 0);
    }
    let body = match resp.body_mut().with_config().limit(MAX_FRAME as u64 + 1).read_to_vec() {
        Ok(body) => body,
        Err(ureq::Error::BodyExceedsLimit(_)) => {
            if let Some(id) = want {
                fail(shared, id, format!("the answer is larger than the {} MiB frame limit", MAX_FRAME >> 20));
            }
            return;
        }
        Err(err) => {
            if let Some(id) = want {
                fail(shared, id, describe(&err));
            }
            return;
        }
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        if let Some(id) = want {
            fail(shared, id, "the server answered with an empty body".into());
        }
        return;
    }
    match jsonrpc::decode(&body, true) {
        Ok(msgs) => {
            deliver(shared, msgs, body.first() == Some(&b'['));
        }
        Err(err) => {
            if let Some(id) = want {
                fail(shared, id, format!("the server answered with {err}"));
            }
        }
    }
}

/// Sends messages to the dispatcher. Learns the negotiated version from the initialize
/// answer. Returns false once the dispatcher is gone.
pub(super) fn deliver(shared: &Shared, msgs: Vec<Message>, batch: bool) -> bool {
    if let Some((init_id, _)) = *lock(&shared.init) {
        for msg in &msgs {
            if let Message::Response { id: Some(id), result: Ok(result) } = msg
                && id.as_u64() == Some(init_id)
                && let Some(version) = result.get("protocolVersion").and_then(Value::as_str)
            {
                *lock(&shared.version) = Some(version.to_string());
            }
        }
    }
    shared.events.send(Event::Inbound { conn: shared.conn, msgs, batch }).is_ok()
}

/// After a 404 on a session: initialize again without a session id, swallow the answer, send
/// `notifications/initialized`.
fn reinitialize(shared: &Arc<Shared>) -> Result<(), String> {
    let Some((_, frame)) = lock(&shared.init).clone() else {
        return Err("no initialize request to replay".into());
    };
    *lock(&shared.session) = None;
    let (mut resp, _) = post(shared, &frame, None)?;
    if !resp.status().is_success() {
        return Err(http_failure(resp.status().as_u16()));
    }
    if let Some(session) = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
        *lock(&shared.session) = Some(session.to_string());
    }
    // The answer is consumed here: the dispatcher already has the first session's.
    let _ = resp.body_mut().with_config().limit(MAX_FRAME as u64).read_to_vec();
    let initialized = jsonrpc::encode_notification(method::INITIALIZED, None);
    if !message(shared, &initialized) {
        return Err("the server refused notifications/initialized".into());
    }
    Ok(())
}
