//! The dispatcher over the in-memory transport: deadlines, cancellation, late answers,
//! progress, groups, floods and the death of a worker, with no process or socket.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{CallError, CallUpdate, ConnShared, Engine, GroupId, NoInbound, PendingCall, ProgressPolicy, Request};
use crate::mcp::{Version, method};
use crate::transport::memory::{self, Peer, Seen};
use crate::transport::{ConnId, RequestMeta, TransportError};

const WAIT: Duration = Duration::from_secs(10);

struct Conn {
    engine: Engine,
    conn: ConnId,
    shared: Arc<ConnShared>,
    peer: Peer,
}

fn connect() -> Conn {
    connect_with(Arc::new(NoInbound))
}

fn connect_with(handler: Arc<dyn super::InboundHandler>) -> Conn {
    let engine = Engine::start();
    let (conn, shared, link) = engine.register("mem", handler);
    let (worker, peer) = memory::spawn(link);
    engine.attach(conn, &shared, worker);
    Conn { engine, conn, shared, peer }
}

impl Conn {
    fn call(&self, method_name: &'static str, timeout: Duration, group: Option<GroupId>) -> PendingCall {
        let meta = RequestMeta::new(method_name, None);
        let req = Request { method: method_name, params: Some("{}"), timeout, progress: None, group, meta };
        self.engine.start_call(self.conn, &self.shared, req)
    }

    /// The next request the server received; its wire id.
    fn request_id(&self) -> u64 {
        let frame = self.peer.frame(WAIT).expect("a request");
        frame["id"].as_u64().unwrap_or_else(|| panic!("not a request: {frame}"))
    }

    fn answer(&self, id: u64, result: Value) {
        self.peer.send(&json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.engine.shutdown();
    }
}

/// Waits for a call's outcome, with a bound so a broken dispatcher fails the test.
fn outcome(pending: &PendingCall) -> Result<Value, CallError> {
    let deadline = Instant::now() + WAIT;
    loop {
        match pending.updates().recv_deadline(deadline) {
            Ok(CallUpdate::Done(finished)) => return finished.into_result(),
            Ok(CallUpdate::Progress(_)) => {}
            Err(_) => panic!("no outcome within {WAIT:?}"),
        }
    }
}

#[test]
fn an_answer_reaches_its_caller() {
    let c = connect();
    let pending = c.call(method::TOOLS_LIST, WAIT, None);
    let id = c.request_id();
    c.answer(id, json!({ "tools": [] }));
    assert_eq!(outcome(&pending).unwrap(), json!({ "tools": [] }));
}

#[test]
fn a_deadline_fails_the_call_and_cancels_it_on_the_wire() {
    let c = connect();
    let started = Instant::now();
    let pending = c.call(method::TOOLS_CALL, Duration::from_millis(100), None);
    let id = c.request_id();
    assert!(matches!(outcome(&pending), Err(CallError::Timeout { .. })));
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(c.peer.recv(WAIT), Some(Seen::CancelStream(id)));
    let cancelled = c.peer.frame(WAIT).unwrap();
    assert_eq!(cancelled["method"], method::CANCELLED);
    assert_eq!(cancelled["params"], json!({ "requestId": id, "reason": "timeout" }));
    // The late answer is dropped; the connection keeps working.
    c.answer(id, json!({ "late": true }));
    let next = c.call(method::TOOLS_LIST, WAIT, None);
    let next_id = c.request_id();
    assert_ne!(next_id, id, "wire ids are never reused");
    c.answer(next_id, json!({ "tools": [] }));
    assert_eq!(outcome(&next).unwrap(), json!({ "tools": [] }));
}

#[test]
fn initialize_is_never_cancelled_with_a_notification() {
    let c = connect();
    let pending = c.call(method::INITIALIZE, Duration::from_millis(50), None);
    let id = c.request_id();
    assert!(matches!(outcome(&pending), Err(CallError::Timeout { .. })));
    assert_eq!(c.peer.recv(WAIT), Some(Seen::CancelStream(id)));
    // Nothing else follows: a ping proves the order.
    let ping = c.call(method::PING, WAIT, None);
    let ping_id = c.request_id();
    c.answer(ping_id, json!({}));
    outcome(&ping).unwrap();
}

#[test]
fn cancelling_wins_over_a_later_answer() {
    let c = connect();
    let pending = c.call(method::TOOLS_CALL, WAIT, None);
    let id = c.request_id();
    c.engine.cancel(pending.id, "the user changed their mind");
    match outcome(&pending) {
        Err(CallError::Cancelled(reason)) => assert_eq!(reason, "the user changed their mind"),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.peer.recv(WAIT), Some(Seen::CancelStream(id)));
    let cancelled = c.peer.frame(WAIT).unwrap();
    assert_eq!(cancelled["params"]["requestId"], id);
    c.answer(id, json!({}));
    assert!(pending.updates().recv_timeout(Duration::from_millis(100)).is_err(), "one outcome only");
}

#[test]
fn progress_extends_the_deadline_up_to_its_cap() {
    let c = connect();
    let token = json!("tok");
    let req = Request {
        method: method::TOOLS_CALL,
        params: Some(r#"{"_meta":{"progressToken":"tok"}}"#),
        timeout: Duration::from_millis(400),
        progress: Some(ProgressPolicy { token: token.clone(), cap: Duration::from_millis(1200) }),
        group: None,
        meta: RequestMeta::new(method::TOOLS_CALL, None),
    };
    let started = Instant::now();
    let pending = c.engine.start_call(c.conn, &c.shared, req);
    let _ = c.request_id();
    // Progress every 150 ms keeps it alive past the 400 ms timeout, but not past the cap.
    let mut seen = 0;
    let outcome = loop {
        match pending.updates().recv_timeout(Duration::from_millis(150)) {
            Ok(CallUpdate::Progress(p)) => {
                seen += 1;
                assert_eq!(p.message.as_deref(), Some("working"));
            }
            Ok(CallUpdate::Done(finished)) => break finished.into_result(),
            Err(_) => {
                c.peer.send(&json!({ "jsonrpc": "2.0", "method": method::PROGRESS,
                    "params": { "progressToken": token, "progress": seen, "message": "working" } }));
            }
        }
        assert!(started.elapsed() < WAIT);
    };
    let elapsed = started.elapsed();
    assert!(matches!(outcome, Err(CallError::Timeout { .. })), "{outcome:?}");
    assert!(seen >= 3, "progress reached the caller ({seen} updates)");
    assert!(elapsed >= Duration::from_millis(1100) && elapsed < Duration::from_millis(3000), "{elapsed:?}");
}

#[test]
fn the_death_of_a_worker_fails_its_calls_at_once_and_later_ones_too() {
    let c = connect();
    let pending = c.call(method::TOOLS_CALL, WAIT, None);
    let _ = c.request_id();
    c.peer.die(TransportError::Exited { status: "exit code 3".into(), stderr: vec!["boom".into()] });
    match outcome(&pending) {
        Err(CallError::Disconnected(cause)) => assert!(cause.to_string().contains("exit code 3")),
        other => panic!("{other:?}"),
    }
    let later = c.call(method::TOOLS_LIST, WAIT, None);
    assert!(matches!(outcome(&later), Err(CallError::Disconnected(_))));
}

#[test]
fn a_group_is_cancelled_as_a_whole_and_stays_cancelled() {
    let c = connect();
    let group = c.engine.group();
    let first = c.call(method::TOOLS_CALL, WAIT, Some(group));
    let second = c.call(method::TOOLS_CALL, WAIT, Some(group));
    let other = c.call(method::TOOLS_CALL, WAIT, None);
    let ids: Vec<u64> = (0..3).map(|_| c.request_id()).collect();
    c.engine.cancel_group(group, "turn cancelled");
    assert!(matches!(outcome(&first), Err(CallError::Cancelled(_))));
    assert!(matches!(outcome(&second), Err(CallError::Cancelled(_))));
    let late = c.call(method::TOOLS_CALL, WAIT, Some(group));
    assert!(matches!(outcome(&late), Err(CallError::Cancelled(_))));
    c.answer(ids[2], json!({ "ok": true }));
    assert_eq!(outcome(&other).unwrap(), json!({ "ok": true }));
}

#[test]
fn an_error_without_an_id_goes_to_the_only_pending_call() {
    let c = connect();
    let pending = c.call(method::TOOLS_CALL, WAIT, None);
    let _ = c.request_id();
    c.peer.send(&json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32700, "message": "parse error" } }));
    match outcome(&pending) {
        Err(CallError::Rpc(error)) => assert_eq!(error.code, -32700),
        other => panic!("{other:?}"),
    }
}

#[test]
fn batches_count_only_on_2025_03_26() {
    let c = connect();
    let pending = c.call(method::TOOLS_LIST, WAIT, None);
    let id = c.request_id();
    let batch = json!([{ "jsonrpc": "2.0", "id": id, "result": { "batched": true } }]);
    c.peer.send(&batch);
    assert!(pending.updates().recv_timeout(Duration::from_millis(200)).is_err(), "a batch is ignored on 2025-11-25");
    c.shared.revision.set(Some(Version::V2025_03_26));
    c.peer.send(&batch);
    assert_eq!(outcome(&pending).unwrap(), json!({ "batched": true }));
}

/// Ten thousand server requests while a call is in flight: each is answered (refused or
/// pinged), the call completes, and nothing blocks.
#[test]
fn a_flood_of_server_requests_is_answered_while_a_call_completes() {
    let c = connect();
    let pending = c.call(method::TOOLS_LIST, WAIT, None);
    let id = c.request_id();
    const FLOOD: usize = 10_000;
    std::thread::scope(|scope| {
        let peer = &c.peer;
        scope.spawn(move || {
            for n in 0..FLOOD {
                let method_name = match n % 3 {
                    0 => "roots/list",
                    1 => "ping",
                    _ => "no/such/method",
                };
                if !peer.send(&json!({ "jsonrpc": "2.0", "id": format!("s{n}"), "method": method_name })) {
                    return;
                }
            }
            peer.send(&json!({ "jsonrpc": "2.0", "id": id, "result": { "tools": [] } }));
        });
        let mut answered = 0;
        let deadline = Instant::now() + WAIT;
        while answered < FLOOD {
            let frame = c.peer.frame(deadline.saturating_duration_since(Instant::now())).expect("an answer");
            let n: usize = frame["id"].as_str().unwrap()[1..].parse().unwrap();
            match n % 3 {
                1 => assert_eq!(frame["result"], json!({})),
                _ => assert_eq!(frame["error"]["code"], -32601),
            }
            answered += 1;
        }
    });
    assert_eq!(outcome(&pending).unwrap(), json!({ "tools": [] }));
}

/// A shutdown (what a signal does) in the middle of a flood ends everything promptly.
#[test]
fn shutdown_during_a_flood_ends_promptly() {
    let c = connect();
    let pending = c.call(method::TOOLS_CALL, WAIT, None);
    let _ = c.request_id();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|scope| {
        let peer = &c.peer;
        let flooding = stop.clone();
        scope.spawn(move || {
            let mut n = 0u64;
            while !flooding.load(std::sync::atomic::Ordering::SeqCst) {
                if !peer.send(&json!({ "jsonrpc": "2.0", "id": n, "method": "roots/list" })) {
                    return;
                }
                n += 1;
            }
        });
        // The flood is well under way: two thousand refusals have come back.
        for _ in 0..2000 {
            c.peer.frame(WAIT).expect("a refusal");
        }
        let started = Instant::now();
        c.engine.cancel_all("interrupted by the user");
        c.engine.shutdown();
        let took = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    });
    assert!(matches!(outcome(&pending), Err(CallError::Cancelled(_))));
}

/// A handler that keeps each request's responder for the test to use.
struct Holding(crossbeam_channel::Sender<super::Responder>);

impl super::InboundHandler for Holding {
    fn request(&self, _: super::ServerRequest, responder: super::Responder) {
        let _ = self.0.send(responder);
    }
}

/// A server that cancels its own request (an elicitation, say) gets no answer to it, and
/// the surface holding it can see that it was cancelled (CAN-5).
#[test]
fn a_request_the_server_cancelled_is_never_answered() {
    let (tx, held) = crossbeam_channel::unbounded();
    let c = connect_with(Arc::new(Holding(tx)));
    c.peer.send(&json!({ "jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {} }));
    let responder = held.recv_timeout(WAIT).expect("the request reached the handler");
    c.peer.send(&json!({ "jsonrpc": "2.0", "method": method::CANCELLED, "params": { "requestId": "e1" } }));
    // The server's ping, answered in order, proves the cancellation was handled before it.
    c.peer.send(&json!({ "jsonrpc": "2.0", "id": "p1", "method": "ping" }));
    assert_eq!(c.peer.frame(WAIT).expect("the ping's answer")["id"], "p1");
    assert!(responder.is_cancelled());
    responder.respond(Ok(json!({ "action": "accept" })));
    // Another request answered normally shows the answer above was dropped, not delayed.
    c.peer.send(&json!({ "jsonrpc": "2.0", "id": "e2", "method": "elicitation/create", "params": {} }));
    let second = held.recv_timeout(WAIT).expect("the second request");
    assert!(!second.is_cancelled());
    second.respond(Ok(json!({ "action": "decline" })));
    let answer = c.peer.frame(WAIT).expect("an answer");
    assert_eq!(answer["id"], "e2", "only the second request is answered: {answer}");
}

/// Malformed server requests are answered -32600 with their id, never ignored (ERR-1).
#[test]
fn a_malformed_server_request_gets_invalid_request() {
    let c = connect();
    c.peer.send(&json!({ "jsonrpc": "2.0", "id": 9, "method": "roots/list", "params": "nope" }));
    c.peer.send(&json!({ "jsonrpc": "2.0", "id": "no-method" }));
    for id in [json!(9), json!("no-method")] {
        let answer = c.peer.frame(WAIT).expect("an answer");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }
}

/// A handler that panics, which ends the dispatcher thread it runs on.
struct Panicking;

impl super::InboundHandler for Panicking {
    fn request(&self, _: super::ServerRequest, _: super::Responder) {
        panic!("the handler broke (as this test means it to)");
    }
}

/// A call waits on its own channel alone: when the dispatcher thread ends without a shutdown
/// (a panic), the call still ends, and a call started afterwards fails at once.
#[test]
fn a_call_ends_when_the_dispatcher_dies_and_later_calls_are_refused() {
    let c = connect_with(Arc::new(Panicking));
    let pending = c.call(method::TOOLS_CALL, WAIT, None);
    let _ = c.request_id();
    c.peer.send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "roots/list" }));
    match outcome(&pending) {
        Err(CallError::Cancelled(reason)) => assert_eq!(reason, "nod is shutting down"),
        other => panic!("{other:?}"),
    }
    let later = c.call(method::TOOLS_LIST, WAIT, None);
    match later.updates().try_recv() {
        Ok(CallUpdate::Done(finished)) => {
            let result = finished.into_result();
            assert!(matches!(result, Err(CallError::Cancelled(_))), "{result:?}")
        }
        other => panic!("a call after the dispatcher died must fail at once: {other:?}"),
    }
}

/// A result the worker hands over as text is read into a value by the thread that takes it;
/// text that checks as JSON but cannot be a value (a number past f64, nesting past serde's
/// limit) ends the call as an invalid answer instead of being dropped on the floor.
#[test]
fn a_result_handed_over_as_text_is_read_by_its_taker_or_fails_the_call() {
    let text = |result: &str| {
        let frame = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#);
        let (id, span) = crate::jsonrpc::answer_span(&frame).expect("a plain answer");
        assert_eq!(id, 7);
        super::Finished::Text { frame, span, method: method::TOOLS_CALL }.into_result()
    };
    assert_eq!(text(r#"{"content":[]}"#).unwrap(), json!({ "content": [] }));
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for unreadable in ["1e999", deep.as_str()] {
        match text(unreadable) {
            Err(CallError::Invalid { method: "tools/call", why }) => assert!(why.contains("cannot read"), "{why}"),
            other => panic!("{unreadable:.20}: {other:?}"),
        }
    }
}
