//! Legacy HTTP+SSE (2024-11-05), for `type: "sse"` entries and as the fallback of `http`
//! entries: one GET stream carries every answer, and messages are POSTed to the endpoint that
//! the stream announces first, which must be on the stream's own origin.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::TransportError;
use super::http::{Legacy, Shared, deliver, fail, follow, http_failure, lock, with_headers};
use super::sse;
use crate::dispatch::Event;
use crate::jsonrpc;

pub(super) fn start_legacy(shared: &Arc<Shared>, sse_url: &str) {
    {
        let mut legacy = lock(&shared.legacy);
        if legacy.is_some() {
            return;
        }
        *legacy = Some(Legacy { endpoint: None, queued: Vec::new() });
    }
    let shared = shared.clone();
    let sse_url = sse_url.to_string();
    let _ = std::thread::Builder::new()
        .name(format!("nod-sse:{}", shared.name))
        .spawn(move || legacy_stream(&shared, &sse_url));
}

fn legacy_stream(shared: &Arc<Shared>, sse_url: &str) {
    let opened = follow(sse_url, |url| {
        with_headers(shared, shared.agent.get(url), None).header("Accept", "text/event-stream").call()
    });
    let cause = match opened {
        Ok(resp) if resp.status().is_success() => {
            let mut reader = resp.into_body().into_reader();
            let mut parser = sse::Parser::default();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break "the server closed its event stream".to_string(),
                    Ok(n) => n,
                };
                let mut batch = Vec::new();
                if let Err(err) = parser.push(&buf[..n], |e| batch.push(e)) {
                    break format!("the server sent {err}");
                }
                let foreign =
                    batch.iter().any(|e| e.event == "endpoint" && resolve_endpoint(sse_url, e.data.trim()).is_none());
                if foreign {
                    break "the server announced a message endpoint on another origin, which nod refuses".to_string();
                }
                for event in batch {
                    if event.event == "endpoint" {
                        if let Some(endpoint) = resolve_endpoint(sse_url, event.data.trim()) {
                            legacy_ready(shared, endpoint);
                        }
                    } else if !event.data.is_empty() {
                        match jsonrpc::decode(event.data.as_bytes(), true) {
                            Ok(msgs) => {
                                if !deliver(shared, msgs, false) {
                                    return;
                                }
                            }
                            Err(err) => log::warn!("server {} sent {err} in its event stream; ignored", shared.name),
                        }
                    }
                }
                if shared.closed.load(Ordering::SeqCst) {
                    return;
                }
            }
        }
        Ok(resp) => http_failure(resp.status().as_u16()),
        Err(err) => err,
    };
    if !shared.closed.load(Ordering::SeqCst) {
        let _ = shared.events.send(Event::Closed { conn: shared.conn, cause: TransportError::Io(cause) });
    }
}

fn legacy_ready(shared: &Shared, endpoint: String) {
    let queued = {
        let mut legacy = lock(&shared.legacy);
        let Some(legacy) = legacy.as_mut() else { return };
        legacy.endpoint = Some(endpoint);
        std::mem::take(&mut legacy.queued)
    };
    for frame in queued {
        legacy_send(shared, frame);
    }
}

pub(super) fn legacy_send(shared: &Shared, frame: Vec<u8>) {
    let endpoint = {
        let mut legacy = lock(&shared.legacy);
        let Some(legacy) = legacy.as_mut() else { return };
        match &legacy.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => {
                legacy.queued.push(frame);
                return;
            }
        }
    };
    let body = frame.strip_suffix(b"\n").unwrap_or(&frame);
    let sent = follow(&endpoint, |url| {
        with_headers(shared, shared.agent.post(url), None)
            .header("Content-Type", "application/json")
            .config()
            .timeout_global(Some(shared.message_timeout))
            .build()
            .send(body)
    });
    let failed = match sent {
        Ok(resp) if resp.status().is_success() => None,
        Ok(resp) => Some(http_failure(resp.status().as_u16())),
        Err(err) => Some(err),
    };
    if let Some(cause) = failed {
        let head: Value = serde_json::from_slice(&frame).unwrap_or(Value::Null);
        match head.get("id").and_then(Value::as_u64).filter(|_| head.get("method").is_some()) {
            Some(id) => fail(shared, id, cause),
            None => log::warn!("server {}: a message was refused: {cause}", shared.name),
        }
    }
}

/// Resolves the legacy endpoint against the SSE URL; only the same origin is accepted.
pub fn resolve_endpoint(base: &str, endpoint: &str) -> Option<String> {
    let origin_end = base.find("://").map(|i| i + 3)?;
    let path_start = base[origin_end..].find('/').map_or(base.len(), |i| origin_end + i);
    let origin = &base[..path_start];
    let resolved = if endpoint.contains("://") {
        endpoint.to_string()
    } else if endpoint.starts_with('/') {
        format!("{origin}{endpoint}")
    } else {
        let path = &base[path_start..];
        let path = path.split(['?', '#']).next().unwrap_or("");
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!("{origin}{dir}{endpoint}")
    };
    let same = resolved.get(..origin.len()).is_some_and(|o| o.eq_ignore_ascii_case(origin))
        && matches!(resolved.as_bytes().get(origin.len()), None | Some(b'/' | b'?'));
    same.then_some(resolved)
}

#[cfg(test)]
mod tests {
    use super::resolve_endpoint;

    #[test]
    fn endpoints_resolve_on_the_same_origin_only() {
        let base = "http://127.0.0.1:3000/sse";
        assert_eq!(
            resolve_endpoint(base, "/message?sessionId=1").as_deref(),
            Some("http://127.0.0.1:3000/message?sessionId=1")
        );
        assert_eq!(resolve_endpoint("http://h:1/a/sse", "msg").as_deref(), Some("http://h:1/a/msg"));
        assert_eq!(resolve_endpoint(base, "http://127.0.0.1:3000/m").as_deref(), Some("http://127.0.0.1:3000/m"));
        assert_eq!(resolve_endpoint(base, "http://evil.example/m"), None);
        assert_eq!(resolve_endpoint(base, "http://127.0.0.1:30001/m"), None);
    }
}
