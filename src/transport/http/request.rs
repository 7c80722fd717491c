//! One Streamable HTTP exchange: a request POSTed on its own thread and its answer read (a
//! JSON body or an event stream), with the 401/403 handling of the credentials and session
//! expiry; and the poster thread that sends notifications and answers in order.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::legacy::{legacy_send, start_legacy};
use super::shared::{Post, Shared, StreamKey, lock, net_error};
use super::stream::{start_get_stream, stream};
use crate::jsonrpc::frame::MAX_FRAME;
use crate::jsonrpc::{self, Message};
use crate::mcp::Version;
use crate::net::{self, Method, NetError, Response, sse};
use crate::transport::{NotifyKind, RequestMeta, TransportError};

/// How long the first request after `notifications/initialized` waits for the GET stream:
/// a server may send what a request triggers on the GET stream only, and drops it when that
/// stream is not open yet.
const GET_STREAM_WAIT: Duration = Duration::from_millis(500);
/// Step-up retries for one request: a guard against a provider that never says no (OAuth
/// caps its own authorizations lower).
const MAX_STEP_UPS: u32 = 10;

pub(super) fn poster(shared: &Arc<Shared>, inbox: Receiver<Post>) {
    for post in inbox {
        match post {
            Post::Notify { seq, frame, kind } => {
                if lock(&shared.legacy).is_some() {
                    legacy_send(shared, None, frame);
                } else if message(shared, &frame) && kind == NotifyKind::Initialized {
                    let opened = start_get_stream(shared);
                    let _ = opened.recv_timeout(GET_STREAM_WAIT);
                }
                shared.order.mark_sent(seq);
            }
            Post::Legacy { id, frame } => legacy_send(shared, id, frame),
        }
    }
}

/// POSTs a frame sent at `revision` to the server URL with the session id `session`;
/// `limit` bounds the whole exchange (notifications).
fn post(
    shared: &Shared,
    agent: &ureq::Agent,
    frame: &[u8],
    session: Option<&str>,
    revision: Option<Version>,
    limit: Option<Duration>,
    extra: &[(String, String)],
) -> Result<Response, NetError> {
    let body = frame.strip_suffix(b"\n").unwrap_or(frame);
    net::follow(&shared.url, |url, method| {
        if method == Method::Get {
            let req = shared.with_headers_at(agent.get(url), session, revision);
            return req.header("Accept", "application/json").call();
        }
        let mut req = shared
            .with_headers_at(agent.post(url), session, revision)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json");
        for (name, value) in extra {
            req = req.header(name.as_str(), value.as_str());
        }
        match limit {
            Some(limit) => req.config().timeout_global(Some(limit)).build().send(body),
            None => req.send(body),
        }
    })
}

fn challenge(resp: &Response) -> String {
    net::header(resp, "www-authenticate").unwrap_or("").to_string()
}

/// POSTs a notification or an answer. Returns whether the server accepted it.
fn message(shared: &Arc<Shared>, frame: &[u8]) -> bool {
    let Some(agent) = shared.checkout(StreamKey::Poster) else { return false };
    let session = lock(&shared.session).id.clone();
    let revision = shared.link.revision().get();
    let limit = Some(shared.message_timeout);
    let mut answer = post(shared, &agent, frame, session.as_deref(), revision, limit, &[]);
    if let (Ok(resp), Some(credentials)) = (&answer, &shared.credentials)
        && resp.status().as_u16() == 401
        && credentials.unauthorized(&challenge(resp)).is_ok()
    {
        answer = post(shared, &agent, frame, session.as_deref(), revision, limit, &[]);
    }
    let accepted = match answer {
        Ok(mut resp) if resp.status().is_success() => {
            // Some servers answer a notification with 200 and a body; read and ignore it.
            let _ = resp.body_mut().with_config().limit(MAX_FRAME as u64).read_to_vec();
            true
        }
        Ok(resp) => {
            log::warn!("server {} refused a message: HTTP {}", shared.name(), resp.status().as_u16());
            false
        }
        Err(err) => {
            log::warn!("server {}: {}", shared.name(), net_error(err));
            false
        }
    };
    shared.checkin(StreamKey::Poster);
    accepted
}

/// One request: POST, then read its answer (JSON or a stream), with credentials and
/// session expiry handled as the spec says.
pub(super) fn request(shared: &Arc<Shared>, id: u64, meta: &RequestMeta, frame: &[u8]) {
    let key = StreamKey::Request(id);
    let is_init = meta.is_initialize();
    let extra = modern_headers(meta);
    let mut auth_retried = false;
    let mut step_ups = 0;
    loop {
        let Some(agent) = shared.checkout(key) else { return };
        let sent = lock(&shared.session).clone();
        let session = if is_init { None } else { sent.id.clone() };
        let resp = match post(shared, &agent, frame, session.as_deref(), meta.revision, None, &extra) {
            Ok(resp) => resp,
            Err(err) => {
                if !shared.is_cancelled(key) {
                    shared.fail(id, net_error(err));
                }
                return;
            }
        };
        let status = resp.status().as_u16();
        if is_init && (200..300).contains(&status) {
            adopt_session(shared, &resp);
        }
        match (status, &shared.credentials) {
            (401, Some(credentials)) if !auth_retried => {
                auth_retried = true;
                match credentials.unauthorized(&challenge(&resp)) {
                    Ok(()) => continue,
                    Err(cause) => return shared.fail(id, TransportError::Unauthorized { status, cause: Some(cause) }),
                }
            }
            (401, _) => return shared.fail(id, TransportError::Unauthorized { status, cause: None }),
            (403, Some(credentials)) if step_ups < MAX_STEP_UPS => match credentials.forbidden(&challenge(&resp)) {
                Ok(true) => {
                    step_ups += 1;
                    continue;
                }
                Ok(false) => return shared.fail(id, TransportError::Http { status }),
                Err(cause) => return shared.fail(id, TransportError::Unauthorized { status, cause: Some(cause) }),
            },
            _ => {}
        }
        return match status {
            200..=299 => answer(shared, key, resp, id),
            404 if session.is_some() && !is_init => {
                expire(shared, session.as_deref());
                shared.fail(id, TransportError::SessionExpired { generation: sent.generation })
            }
            400 | 404 if sent.expired && !is_init => {
                shared.fail(id, TransportError::SessionExpired { generation: sent.generation })
            }
            400 | 404 | 405 if is_init => {
                let body = small_body(resp);
                // A newer server answers with a JSON-RPC error; pass it on instead of
                // falling back to the legacy transport.
                if deliver_body(shared, &body, id) {
                    return;
                }
                log::info!(
                    "server {}: initialize got HTTP {status}; trying the legacy HTTP+SSE transport",
                    shared.name()
                );
                shared.fallback_from.store(status, Ordering::SeqCst);
                start_legacy(shared, &shared.url.clone());
                shared.post(Post::Legacy { id: Some(id), frame: frame.to_vec() });
            }
            _ => {
                let body = small_body(resp);
                if !deliver_body(shared, &body, id) {
                    shared.fail(id, TransportError::Http { status });
                }
            }
        };
    }
}

/// The headers of a 2026-07-28 request (SEP-2243), as the session computed them:
/// Mcp-Method, Mcp-Name and Mcp-Param-*; none before 2026-07-28.
fn modern_headers(meta: &RequestMeta) -> Vec<(String, String)> {
    if !meta.is_modern() {
        return Vec::new();
    }
    let mut headers = vec![("Mcp-Method".to_string(), meta.method.to_string())];
    if let Some(name) = &meta.name {
        headers.push(("Mcp-Name".to_string(), name.clone()));
    }
    headers.extend(meta.params.iter().cloned());
    headers
}

/// Takes the session id from an initialize answer: a new session.
fn adopt_session(shared: &Shared, resp: &Response) {
    let mut session = lock(&shared.session);
    if let Some(id) = net::header(resp, "mcp-session-id") {
        session.id = Some(id.to_string());
    }
    session.generation += 1;
    session.expired = false;
}

/// The server forgot session `sent`: drop it, unless a newer one replaced it already.
fn expire(shared: &Shared, sent: Option<&str>) {
    let mut session = lock(&shared.session);
    if session.id.as_deref() == sent {
        log::warn!("server {}: the session expired; starting a new one", shared.name());
        session.id = None;
        session.expired = true;
        shared.get_running.store(false, Ordering::SeqCst);
    }
}

fn small_body(mut resp: Response) -> Vec<u8> {
    resp.body_mut().with_config().limit(64 * 1024).read_to_vec().unwrap_or_default()
}

/// Delivers a body if it is the JSON-RPC answer to request `id` (a newer server's error,
/// say). An error without that id (a server that did not read the request) is not.
fn deliver_body(shared: &Shared, body: &[u8], id: u64) -> bool {
    match jsonrpc::decode(body, true) {
        Ok(msgs)
            if !msgs.is_empty()
                && msgs.iter().all(
                    |m| matches!(m, Message::Response { id: Some(answered), .. } if answered.as_u64() == Some(id)),
                ) =>
        {
            shared.deliver(msgs, false);
            true
        }
        _ => false,
    }
}

/// Reads a successful answer: a JSON body or an event stream.
fn answer(shared: &Arc<Shared>, key: StreamKey, mut resp: Response, id: u64) {
    let content_type = net::header(&resp, "content-type").unwrap_or("").to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        let reader = resp.into_body().into_reader();
        return stream(shared, key, reader, Some(id), sse::Parser::default());
    }
    let body = match resp.body_mut().with_config().limit(MAX_FRAME as u64 + 1).read_to_vec() {
        Ok(body) => body,
        Err(ureq::Error::BodyExceedsLimit(_)) => {
            let why = format!("an answer larger than the {} MiB frame limit", MAX_FRAME >> 20);
            return shared.fail(id, TransportError::BadAnswer(why));
        }
        Err(err) => {
            if !shared.is_cancelled(key) {
                shared.fail(id, net_error(err.into()));
            }
            return;
        }
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return shared.fail(id, TransportError::BadAnswer("an empty body".into()));
    }
    match jsonrpc::decode(&body, true) {
        Ok(msgs) => {
            shared.deliver(msgs, body.first() == Some(&b'['));
        }
        Err(err) => shared.fail(id, TransportError::BadAnswer(err.to_string())),
    }
}
