//! Reading Streamable HTTP event streams: the stream of one request's answer, its resumption
//! with GET and `Last-Event-ID` after the server's `retry` delay when it ends before the
//! answer, and the standalone GET stream that carries what a server sends outside any request.
//!
//! A server may close a stream after every event and let the client resume (the Python SDK's
//! `close_sse_stream()` with an event store), many times within one call. So resuming goes on
//! while resumptions deliver events; only consecutive resumptions that deliver nothing are
//! capped. The caller's deadline bounds it all: a timed-out call cancels its stream.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::shared::{Shared, StreamKey, lock, net_error};
use crate::jsonrpc::{self, Message};
use crate::net::{self, Method, sse};
use crate::transport::TransportError;

/// Consecutive resumptions that deliver no event before the stream is given up.
const MAX_EMPTY_RESUMES: u32 = 5;
/// The wait before resuming when the server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_millis(1000);
/// The longest `retry` nod honours.
const MAX_RETRY: Duration = Duration::from_secs(60);

/// Reads an event stream to its end, delivering every message, and resumes it while it
/// makes progress. `want` is the request whose answer the stream carries (None for the
/// standalone GET stream).
pub(super) fn stream(
    shared: &Arc<Shared>,
    key: StreamKey,
    reader: impl Read + 'static,
    want: Option<u64>,
    parser: sse::Parser,
) {
    let mut reader: Box<dyn Read> = Box::new(reader);
    let mut parser = parser;
    let mut empty_resumes = 0;
    loop {
        let before = parser.last_id.clone();
        let read = read_events(shared, &mut reader, &mut parser, want);
        let progressed = read.events > 0 || parser.last_id != before;
        match read.end {
            End::Answered | End::DispatcherGone => return,
            End::Broken(why) => {
                if let Some(id) = want
                    && !shared.is_cancelled(key)
                {
                    shared.fail(id, TransportError::BadAnswer(why));
                }
                return;
            }
            End::Closed => {}
        }
        if shared.is_cancelled(key) {
            return;
        }
        empty_resumes = if progressed { 0 } else { empty_resumes + 1 };
        if parser.last_id.is_none() || empty_resumes > MAX_EMPTY_RESUMES {
            if let Some(id) = want {
                let why = if parser.last_id.is_none() {
                    "the server closed the stream before answering"
                } else {
                    "the server kept closing the stream without sending anything; gave up resuming it"
                };
                shared.fail(id, TransportError::StreamEnded(why.into()));
            }
            return;
        }
        let delay = parser.retry.map_or(DEFAULT_RETRY, Duration::from_millis).min(MAX_RETRY);
        if !shared.pause(key, delay) {
            return;
        }
        match get(shared, key, parser.last_id.as_deref()) {
            Ok(next) => {
                reader = next;
                parser = parser.resumed();
            }
            Err(err) => {
                if let Some(id) = want
                    && !shared.is_cancelled(key)
                {
                    let why = format!("the stream ended before the answer and could not be resumed: {err}");
                    shared.fail(id, TransportError::StreamEnded(why));
                }
                return;
            }
        }
    }
}

enum End {
    /// The answer to `want` arrived.
    Answered,
    /// The stream ended (or broke off) without it.
    Closed,
    /// The stream broke the event-stream rules.
    Broken(String),
    DispatcherGone,
}

struct Outcome {
    events: usize,
    end: End,
}

fn read_events(shared: &Shared, reader: &mut dyn Read, parser: &mut sse::Parser, want: Option<u64>) -> Outcome {
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Outcome { events, end: End::Closed },
            Ok(n) => n,
            Err(err) => {
                log::debug!("server {}: stream ended: {err}", shared.name());
                return Outcome { events, end: End::Closed };
            }
        };
        let mut batch = Vec::new();
        let pushed = parser.push(&buf[..n], |event| batch.push(event));
        let mut answered = false;
        for event in batch {
            events += 1;
            // Events with empty data (priming events) only carry an id.
            if event.data.is_empty() || event.event != "message" {
                continue;
            }
            match jsonrpc::decode(event.data.as_bytes(), true) {
                Ok(msgs) => {
                    answered |= want.is_some_and(|id| msgs.iter().any(|m| response_to(m, id)));
                    if !shared.deliver(msgs, event.data.starts_with('[')) {
                        return Outcome { events, end: End::DispatcherGone };
                    }
                }
                Err(err) => log::warn!("server {} sent {err} in an event stream; ignored", shared.name()),
            }
        }
        if let Err(err) = pushed {
            return Outcome { events, end: End::Broken(err.to_string()) };
        }
        if answered {
            return Outcome { events, end: End::Answered };
        }
        if shared.is_closed() {
            return Outcome { events, end: End::DispatcherGone };
        }
    }
}

fn response_to(msg: &Message, id: u64) -> bool {
    matches!(msg, Message::Response { id: Some(got), .. } if got.as_u64() == Some(id))
}

/// GET on the server URL for an event stream, resuming after `last_id` when given.
fn get(shared: &Shared, key: StreamKey, last_id: Option<&str>) -> Result<Box<dyn Read>, TransportError> {
    let agent = lock_agent(shared, key)?;
    let session = lock(&shared.session).id.clone();
    let resp = net::follow(&shared.url, |url, _: Method| {
        let mut req = shared.with_headers(agent.get(url), session.as_deref()).header("Accept", "text/event-stream");
        if let Some(last_id) = last_id {
            req = req.header("Last-Event-ID", last_id);
        }
        req.call()
    })
    .map_err(net_error)?;
    if !resp.status().is_success() {
        return Err(TransportError::Http { status: resp.status().as_u16() });
    }
    Ok(Box::new(resp.into_body().into_reader()))
}

/// The agent a stream is registered under (checked out again after a checkin).
fn lock_agent(shared: &Shared, key: StreamKey) -> Result<ureq::Agent, TransportError> {
    shared.current_agent(key).ok_or(TransportError::ClosedByClient)
}

/// The standalone GET stream: server requests and notifications outside any request. A 405
/// (or any refusal) means the server has none. The returned channel disconnects once the
/// server has answered the GET, either way.
pub(super) fn start_get_stream(shared: &Arc<Shared>) -> Receiver<()> {
    let (answered, opened) = crossbeam_channel::bounded::<()>(0);
    if shared.get_running.swap(true, Ordering::SeqCst) {
        return opened;
    }
    shared.spawn_thread(move |shared| {
        if shared.checkout(StreamKey::Get).is_none() {
            return;
        }
        let result = get(shared, StreamKey::Get, None);
        drop(answered);
        match result {
            Ok(reader) => stream(shared, StreamKey::Get, reader, None, sse::Parser::default()),
            Err(err) => log::debug!("server {}: no standalone stream ({err})", shared.name()),
        }
        shared.checkin(StreamKey::Get);
        shared.get_running.store(false, Ordering::SeqCst);
    });
    opened
}
