//! Reading Streamable HTTP event streams: the stream of one request's answer, its resumption
//! with GET and `Last-Event-ID` after the server's `retry` delay when it ends before the answer,
//! and the standalone GET stream that carries what a server sends outside any request.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::http::{Shared, deliver, fail, follow, lock, with_headers};
use super::sse;
use crate::jsonrpc::{self, Message};

/// Resumption attempts for one request's stream before the request fails.
const MAX_RESUMES: u32 = 5;
/// The wait before resuming when the server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_millis(1000);

/// Reads an SSE stream to its end, delivering every message. When it ends before the answer
/// to `want`, resumes with GET and `Last-Event-ID` after the server's retry delay.
pub(super) fn stream(shared: &Shared, mut reader: impl Read, want: Option<u64>, mut parser: sse::Parser, resumes: u32) {
    let mut answered = false;
    let mut buf = vec![0u8; 64 * 1024];
    let mut failure = None;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) => {
                log::debug!("server {}: stream ended: {err}", shared.name);
                break;
            }
        };
        let mut batch = Vec::new();
        let pushed = parser.push(&buf[..n], |event| batch.push(event));
        for event in batch {
            // Events with empty data (priming events) only carry an id.
            if event.data.is_empty() || (event.event != "message" && !event.event.is_empty()) {
                continue;
            }
            match jsonrpc::decode(event.data.as_bytes(), true) {
                Ok(msgs) => {
                    answered |= want.is_some_and(|id| msgs.iter().any(|m| response_to(m, id)));
                    if !deliver(shared, msgs, event.data.starts_with('[')) {
                        return;
                    }
                }
                Err(err) => log::warn!("server {} sent {err} in an event stream; ignored", shared.name),
            }
        }
        if let Err(err) = pushed {
            failure = Some(err.to_string());
            break;
        }
        if answered || shared.closed.load(Ordering::SeqCst) {
            return;
        }
    }
    if shared.closed.load(Ordering::SeqCst) || answered {
        return;
    }
    let Some(id) = want else {
        return resume_get(shared, parser, resumes);
    };
    if let Some(failure) = failure {
        return fail(shared, id, format!("the server sent {failure}"));
    }
    if parser.last_id.is_none() || resumes >= MAX_RESUMES {
        return fail(shared, id, "the server closed the stream before answering".into());
    }
    let delay = parser.retry.map_or(DEFAULT_RETRY, Duration::from_millis);
    std::thread::sleep(delay);
    match get(shared, parser.last_id.as_deref()) {
        Ok(reader) => stream(shared, reader, Some(id), parser_after(&parser), resumes + 1),
        Err(err) => fail(shared, id, format!("the stream ended before the answer and could not be resumed: {err}")),
    }
}

/// A fresh parser that remembers the stream's last id and retry delay.
fn parser_after(old: &sse::Parser) -> sse::Parser {
    old.resumed()
}

fn response_to(msg: &Message, id: u64) -> bool {
    matches!(msg, Message::Response { id: Some(got), .. } if got.as_u64() == Some(id))
}

fn get(shared: &Shared, last_id: Option<&str>) -> Result<ureq::BodyReader<'static>, String> {
    let session = lock(&shared.session).clone();
    let resp = follow(&shared.url, |url| {
        let mut req =
            with_headers(shared, shared.agent.get(url), session.as_deref()).header("Accept", "text/event-stream");
        if let Some(last_id) = last_id {
            req = req.header("Last-Event-ID", last_id);
        }
        req.call()
    })?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    Ok(resp.into_body().into_reader())
}

/// The standalone GET stream: server requests and notifications outside any request. A 405
/// (or any refusal) means the server has none. The returned channel disconnects once the
/// server has answered the GET, either way.
pub(super) fn start_get_stream(shared: &Arc<Shared>) -> Receiver<()> {
    let (answered, opened) = crossbeam_channel::bounded::<()>(0);
    if shared.get_started.swap(true, Ordering::SeqCst) {
        return opened;
    }
    let shared = shared.clone();
    let _ = std::thread::Builder::new().name(format!("nod-sse:{}", shared.name)).spawn(move || {
        let result = get(&shared, None);
        drop(answered);
        match result {
            Ok(reader) => stream(&shared, reader, None, sse::Parser::default(), 0),
            Err(err) => log::debug!("server {}: no standalone stream ({err})", shared.name),
        }
    });
    opened
}

/// The standalone stream ended: reconnect (with the last event id) while the connection lives.
fn resume_get(shared: &Shared, parser: sse::Parser, resumes: u32) {
    if resumes >= MAX_RESUMES || shared.closed.load(Ordering::SeqCst) {
        return;
    }
    std::thread::sleep(parser.retry.map_or(DEFAULT_RETRY, Duration::from_millis));
    if shared.closed.load(Ordering::SeqCst) {
        return;
    }
    if let Ok(reader) = get(shared, parser.last_id.as_deref()) {
        stream(shared, reader, None, parser_after(&parser), resumes + 1);
    }
}
