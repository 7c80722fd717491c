//! Legacy HTTP+SSE (2024-11-05), for `type: "sse"` entries and as the fallback of `http`
//! entries: one GET stream carries every answer, and messages are POSTed (in order, by the
//! poster thread) to the endpoint that the stream announces first, which must be on the
//! stream's own origin. Credentials are used as on Streamable HTTP: a 401 is answered once.

use std::io::Read;
use std::sync::Arc;

use super::shared::{Legacy, Post, Shared, StreamKey, lock, net_error};
use crate::jsonrpc;
use crate::net::{self, Method, sse};
use crate::transport::TransportError;

pub(super) fn start_legacy(shared: &Arc<Shared>, sse_url: &str) {
    {
        let mut legacy = lock(&shared.legacy);
        if legacy.is_some() {
            return;
        }
        *legacy = Some(Legacy { endpoint: None, queued: Vec::new() });
    }
    shared.link.legacy().store(true, std::sync::atomic::Ordering::SeqCst);
    let sse_url = sse_url.to_string();
    shared.spawn_thread(move |shared| {
        let cause = legacy_stream(shared, &sse_url);
        shared.checkin(StreamKey::Legacy);
        if let Some(cause) = cause
            && !shared.is_closed()
        {
            shared.report_closed(cause);
        }
    });
}

/// Reads the event stream until it ends; returns why, unless the dispatcher is gone.
fn legacy_stream(shared: &Arc<Shared>, sse_url: &str) -> Option<TransportError> {
    let agent = shared.checkout(StreamKey::Legacy)?;
    let mut retried = false;
    let resp = loop {
        let opened = net::follow(sse_url, |url, _: Method| {
            shared.with_headers(agent.get(url), None).header("Accept", "text/event-stream").call()
        });
        match opened {
            Ok(resp) if resp.status().as_u16() == 401 && !retried => {
                retried = true;
                let challenge = net::header(&resp, "www-authenticate").unwrap_or("").to_string();
                match &shared.credentials {
                    Some(credentials) => {
                        if let Err(cause) = credentials.unauthorized(&challenge) {
                            return Some(TransportError::Unauthorized { status: 401, cause: Some(cause) });
                        }
                    }
                    None => return Some(TransportError::Unauthorized { status: 401, cause: None }),
                }
            }
            Ok(resp) if resp.status().is_success() => break resp,
            Ok(resp) if resp.status().as_u16() == 401 => {
                return Some(TransportError::Unauthorized { status: 401, cause: None });
            }
            Ok(resp) => {
                let status = resp.status().as_u16();
                let post = shared.fallback_from.load(std::sync::atomic::Ordering::SeqCst);
                // Falling back was a guess: the POST's answer is what the user must see.
                return Some(match post {
                    0 => TransportError::Http { status },
                    post => TransportError::NoTransport { post, get: status },
                });
            }
            Err(err) => return Some(net_error(err)),
        }
    };
    let mut reader = resp.into_body().into_reader();
    let mut parser = sse::Parser::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => return Some(TransportError::StreamEnded("the server closed its event stream".into())),
            Ok(n) => n,
        };
        let mut batch = Vec::new();
        if let Err(err) = parser.push(&buf[..n], |e| batch.push(e)) {
            return Some(TransportError::BadAnswer(err.to_string()));
        }
        for event in batch {
            if event.event == "endpoint" {
                match net::url::resolve_same_origin(sse_url, event.data.trim()) {
                    Some(endpoint) => legacy_ready(shared, endpoint),
                    None => {
                        return Some(TransportError::Redirect(
                            "the server announced a message endpoint on another origin, which nod refuses",
                        ));
                    }
                }
            } else if !event.data.is_empty() {
                match jsonrpc::decode(event.data.as_bytes(), true) {
                    Ok(msgs) => {
                        if !shared.deliver(msgs, false) {
                            return None;
                        }
                    }
                    Err(err) => log::warn!("server {} sent {err} in its event stream; ignored", shared.name()),
                }
            }
        }
        if shared.is_closed() {
            return None;
        }
    }
}

fn legacy_ready(shared: &Shared, endpoint: String) {
    let queued = {
        let mut legacy = lock(&shared.legacy);
        let Some(legacy) = legacy.as_mut() else { return };
        legacy.endpoint = Some(endpoint);
        std::mem::take(&mut legacy.queued)
    };
    // Back to the poster, which sends everything in order.
    for (id, frame) in queued {
        shared.post(Post::Legacy { id, frame });
    }
}

/// POSTs one message to the endpoint, or queues it until the endpoint is known. A refused
/// request fails that request; a refused notification is logged. Runs on the poster thread.
pub(super) fn legacy_send(shared: &Shared, id: Option<u64>, frame: Vec<u8>) {
    let endpoint = {
        let mut legacy = lock(&shared.legacy);
        let Some(legacy) = legacy.as_mut() else { return };
        match &legacy.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => {
                legacy.queued.push((id, frame));
                return;
            }
        }
    };
    let Some(agent) = shared.checkout(StreamKey::Poster) else { return };
    let body = frame.strip_suffix(b"\n").unwrap_or(&frame);
    let send = || {
        net::follow(&endpoint, |url, _: Method| {
            shared
                .with_headers(agent.post(url), None)
                .header("Content-Type", "application/json")
                .config()
                .timeout_global(Some(shared.message_timeout))
                .build()
                .send(body)
        })
    };
    let mut sent = send();
    // Why the credentials could not answer a 401, shown with the request's failure.
    let mut refused = None;
    if let (Ok(resp), Some(credentials)) = (&sent, &shared.credentials)
        && resp.status().as_u16() == 401
    {
        let challenge = net::header(resp, "www-authenticate").unwrap_or("").to_string();
        match credentials.unauthorized(&challenge) {
            Ok(()) => sent = send(),
            Err(cause) => refused = Some(cause),
        }
    }
    shared.checkin(StreamKey::Poster);
    let failed = match sent {
        Ok(resp) if resp.status().is_success() => None,
        Ok(resp) if resp.status().as_u16() == 401 => Some(TransportError::Unauthorized { status: 401, cause: refused }),
        Ok(resp) => Some(TransportError::Http { status: resp.status().as_u16() }),
        Err(err) => Some(net_error(err)),
    };
    if let Some(cause) = failed {
        match id {
            Some(id) => shared.fail(id, cause),
            None => log::warn!("server {}: a message was refused: {cause}", shared.name()),
        }
    }
}
