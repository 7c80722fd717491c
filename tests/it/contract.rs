//! The worker contract (transport/mod.rs), checked the same way against stdio, Streamable
//! HTTP and legacy HTTP+SSE workers driven directly: a request is answered through the
//! router, a notification reaches the server, `CancelStream` leaves the worker usable (and
//! closes an HTTP stream at once), and `Close` reports `Closed` exactly once, after which the
//! worker's threads are gone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use nod::jsonrpc::{ResponseError, encode_notification, encode_request};
use nod::mcp::Version;
use nod::transport::child::Spawn;
use nod::transport::http::{self, HttpSpec};
use nod::transport::{
    ConnId, Link, NotifyKind, Outbound, Report, RequestMeta, Router, TransportError, WorkerHandle, stdio,
};
use serde_json::{Value, json};

use crate::http_fixture::{Fixture, Reply, event, init_result, result_msg, standard, text_result};
use crate::support::{Env, FIXTURE, with_method};

const WAIT: Duration = Duration::from_secs(10);

/// Answers and progress, as the router received them.
struct Recorder(Sender<(u64, Result<Value, ResponseError>)>);

impl Router for Recorder {
    fn route(&self, _: ConnId, id: u64, result: Result<Value, ResponseError>) -> bool {
        self.0.send((id, result)).is_ok()
    }

    /// A stdio worker hands a plain answer over as text: read here as a caller reads it.
    fn route_text(&self, _: ConnId, id: u64, frame: String, span: std::ops::Range<usize>) -> bool {
        let result = serde_json::from_str(&frame[span]).expect("the worker checked the result's JSON");
        self.0.send((id, Ok(result))).is_ok()
    }

    fn progress(&self, _: ConnId, _: &Value) {}
}

struct Probe {
    answers: Receiver<(u64, Result<Value, ResponseError>)>,
    reports: Receiver<Report>,
}

fn link() -> (Link, Probe) {
    let (answer_tx, answers) = unbounded();
    let (report_tx, reports) = crossbeam_channel::bounded(64);
    let link = Link::new(ConnId(1), "contract", report_tx, Arc::new(Recorder(answer_tx)));
    (link, Probe { answers, reports })
}

fn spec(url: String, legacy: bool) -> HttpSpec {
    HttpSpec { url, headers: vec![], legacy, message_timeout: Duration::from_secs(5), credentials: None }
}

fn initialize(id: u64) -> Outbound {
    let params =
        json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "nod", "version": "0" } });
    let meta = RequestMeta::new("initialize", None);
    Outbound::Request { id, frame: encode_request(id, "initialize", Some(&params.to_string())), meta }
}

fn initialized() -> Outbound {
    Outbound::Notify { frame: encode_notification("notifications/initialized", None), kind: NotifyKind::Initialized }
}

fn call(id: u64, tool: &str) -> Outbound {
    let params = json!({ "name": tool, "arguments": { "message": "hi", "ms": 30000 } });
    let meta = RequestMeta::new("tools/call", Some(Version::V2025_11_25));
    Outbound::Request { id, frame: encode_request(id, "tools/call", Some(&params.to_string())), meta }
}

impl Probe {
    fn answer(&self, id: u64) -> Value {
        let (got, result) = self.answers.recv_timeout(WAIT).expect("an answer");
        assert_eq!(got, id);
        result.expect("a result")
    }

    /// Closes the worker: one `Closed` (by the client), no other report after it, and the
    /// worker's threads joined within the bound.
    fn close(self, worker: WorkerHandle) {
        let started = Instant::now();
        // Joined on a thread of its own, so that a worker that never ends fails the test
        // instead of hanging it.
        let (joined, done) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            worker.join();
            let _ = joined.send(());
        });
        done.recv_timeout(Duration::from_secs(5)).expect("the worker's threads joined within 5 s");
        assert!(started.elapsed() < Duration::from_secs(5), "close took {:?}", started.elapsed());
        let reports: Vec<Report> = self.reports.try_iter().collect();
        let closed: Vec<&Report> = reports.iter().filter(|r| matches!(r, Report::Closed { .. })).collect();
        assert_eq!(closed.len(), 1, "exactly one Closed: {reports:?}");
        assert!(matches!(closed[0], Report::Closed { cause: TransportError::ClosedByClient, .. }), "{reports:?}");
        assert!(matches!(reports.last(), Some(Report::Closed { .. })), "nothing after Closed: {reports:?}");
        // Every clone of the link was dropped with the worker's threads.
        assert!(
            matches!(
                self.reports.recv_timeout(Duration::from_secs(2)),
                Err(crossbeam_channel::RecvTimeoutError::Disconnected)
            ),
            "a thread of the worker outlived it"
        );
    }
}

#[test]
fn stdio_worker_keeps_the_contract() {
    let env = Env::new();
    let (link, probe) = link();
    let argv = vec![FIXTURE.to_string(), "--record".into(), env.record_path().to_string_lossy().into_owned()];
    let worker =
        stdio::spawn(link, Spawn { argv, env: vec![], env_remove: vec![], cwd: None }).expect("spawn the fixture");
    worker.send(initialize(1));
    assert_eq!(probe.answer(1)["protocolVersion"], "2025-11-25");
    worker.send(initialized());
    worker.send(call(2, "slow"));
    worker.send(Outbound::CancelStream(2));
    worker.send(call(3, "echo"));
    assert_eq!(probe.answer(3)["content"][0]["text"], "hi");
    let wire = env.wire();
    assert_eq!(with_method(&wire, "notifications/initialized").len(), 1, "{wire:?}");
    probe.close(worker);
    env.assert_no_leftovers();
}

#[test]
fn streamable_http_worker_keeps_the_contract() {
    let fx = Fixture::start(|req| match req.rpc() {
        // An answer that never comes: a stream held open.
        Some("tools/call") if req.json["params"]["name"] == "slow" => Reply::sse(&[": open\n\n"]).hold(),
        _ => standard(req),
    });
    let (link, probe) = link();
    let spec = spec(fx.url("/mcp"), false);
    let worker = http::spawn(link, spec).expect("spawn the HTTP worker");
    worker.send(initialize(1));
    assert_eq!(probe.answer(1)["protocolVersion"], "2025-11-25");
    worker.send(initialized());
    worker.send(call(2, "slow"));
    let held = fx.wait_for("the held call", WAIT, |r| r.rpc() == Some("tools/call"));
    let cancelled = Instant::now();
    worker.send(Outbound::CancelStream(2));
    // The stream closes at once: the fixture sees its connection end.
    loop {
        if let Some(at) = fx.finished_at(held.index) {
            assert!(at.duration_since(cancelled) < Duration::from_secs(1), "closed after {:?}", at - cancelled);
            break;
        }
        assert!(cancelled.elapsed() < WAIT, "the cancelled stream stayed open: {:#?}", fx.summary());
        std::thread::sleep(Duration::from_millis(10));
    }
    worker.send(call(3, "echo"));
    assert_eq!(probe.answer(3)["content"][0]["text"], "called echo");
    assert_eq!(fx.rpc("notifications/initialized").len(), 1);
    assert!(probe.answers.try_recv().is_err(), "no answer for the cancelled call");
    probe.close(worker);
    assert!(fx.requests().iter().any(|r| r.method == "DELETE"), "the session was ended: {:#?}", fx.summary());
}

/// The HTTP worker sends what it is told: the SEP-2243 headers come from the request's
/// metadata, and only a cancellation of a 2026-07-28 request is left to the closed stream,
/// whatever text another notification carries.
#[test]
fn streamable_http_worker_is_told_what_it_sends_and_reads_no_frame() {
    let fx = Fixture::start(standard);
    let (link, probe) = link();
    let spec = spec(fx.url("/mcp"), false);
    let worker = http::spawn(link, spec).expect("spawn the HTTP worker");
    let params = json!({ "name": "echo", "arguments": { "region": "us-west1" } });
    let meta = RequestMeta {
        method: "tools/call",
        revision: Some(Version::MODERN),
        name: Some("echo".into()),
        params: vec![("Mcp-Param-Region".into(), "us-west1".into())],
    };
    worker.send(Outbound::Request { id: 1, frame: encode_request(1, "tools/call", Some(&params.to_string())), meta });
    assert_eq!(probe.answer(1)["content"][0]["text"], "called echo");
    let posted = &fx.rpc("tools/call")[0];
    assert_eq!(posted.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(posted.header("mcp-method"), Some("tools/call"));
    assert_eq!(posted.header("mcp-name"), Some("echo"));
    assert_eq!(posted.header("mcp-param-region"), Some("us-west1"));
    // A notification whose text holds what a cancellation would say is still posted.
    let quoted = json!({ "level": "info", "data": r#"{"method":"notifications/cancelled"}"# });
    let frame = encode_notification("notifications/message", Some(&quoted));
    worker.send(Outbound::Notify { frame, kind: NotifyKind::Other });
    let cancel = |id: u64, revision: Version| Outbound::Notify {
        frame: encode_notification("notifications/cancelled", Some(&json!({ "requestId": id }))),
        kind: NotifyKind::Cancelled { revision: Some(revision) },
    };
    worker.send(cancel(1, Version::MODERN));
    worker.send(cancel(2, Version::V2025_11_25));
    // The poster sends in order: once the last is there, the others were decided.
    fx.wait_for("the 2025-11-25 cancellation", WAIT, |r| r.json["params"]["requestId"] == 2);
    assert_eq!(fx.rpc("notifications/message").len(), 1, "{:#?}", fx.summary());
    assert_eq!(fx.rpc("notifications/cancelled").len(), 1, "{:#?}", fx.summary());
    probe.close(worker);
}

#[test]
fn legacy_sse_worker_keeps_the_contract() {
    let (tx, rx) = unbounded::<String>();
    let fx = Fixture::start(move |req| {
        if req.method == "GET" {
            return Reply::sse(&["event: endpoint\ndata: /messages\n\n"]).fed_by(rx.clone());
        }
        let answer = match req.rpc() {
            Some("initialize") => Some(result_msg(req, init_result(req))),
            Some("tools/call") if req.json["params"]["name"] == "echo" => {
                Some(result_msg(req, text_result("legacy ok")))
            }
            _ => None,
        };
        if let Some(answer) = answer {
            let _ = tx.send(event(None, &answer));
        }
        Reply::status(202)
    });
    let (link, probe) = link();
    let spec = spec(fx.url("/sse"), true);
    let worker = http::spawn(link, spec).expect("spawn the legacy worker");
    worker.send(initialize(1));
    assert_eq!(probe.answer(1)["protocolVersion"], "2025-11-25");
    worker.send(initialized());
    worker.send(call(2, "slow"));
    worker.send(Outbound::CancelStream(2));
    worker.send(call(3, "echo"));
    assert_eq!(probe.answer(3)["content"][0]["text"], "legacy ok");
    assert_eq!(fx.rpc("notifications/initialized").len(), 1, "{:#?}", fx.summary());
    probe.close(worker);
}

/// Eight calls in flight when the server forgets the session: one new initialize, one
/// notifications/initialized, and each call replayed once on the new session.
#[test]
fn eight_concurrent_expiries_lead_to_one_new_session() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    let inits = AtomicUsize::new(0);
    // The old session's calls are held until all eight have arrived (or 10 s passed), so
    // they are in flight together; `together` records that they were.
    let gate = Arc::new((Mutex::new(0usize), Condvar::new()));
    let together = Arc::new(AtomicUsize::new(0));
    let (held, met) = (gate.clone(), together.clone());
    let fx = Fixture::start(move |req| match req.rpc() {
        Some("initialize") => {
            let n = inits.fetch_add(1, Ordering::SeqCst) + 1;
            // The new session's answer is a stream that stays open after the answer.
            let session = format!("s{n}");
            if n == 1 {
                crate::http_fixture::init_reply(req, Some(&session))
            } else {
                Reply::sse(&[event(None, &result_msg(req, init_result(req)))]).header("Mcp-Session-Id", &session).hold()
            }
        }
        Some("tools/call") if req.header("mcp-session-id") == Some("s1") => {
            let (arrived, all) = &*held;
            let mut arrived = arrived.lock().unwrap();
            *arrived += 1;
            all.notify_all();
            let (arrived, _) = all.wait_timeout_while(arrived, Duration::from_secs(10), |n| *n < 8).unwrap();
            if *arrived >= 8 {
                met.fetch_add(1, Ordering::SeqCst);
            }
            Reply::status(404)
        }
        _ => standard(req),
    });
    let env = Env::new();
    env.profile(json!({ "mcp": { "web": { "type": "http", "url": fx.url("/mcp") } } }));
    let lines: String = (0..8).map(|i| format!("{{\"message\":\"m{i}\"}}\n")).collect();
    let out =
        env.nod(["mcp", "tool", "call", "web", "echo", "--jsonl", "--parallel", "8"]).stdin(lines).timeout(30).run();
    out.code(0).within(15.0);
    assert_eq!(out.text().lines().filter(|l| l.contains("called echo")).count(), 8, "{}", out.text());
    let wire = fx.summary();
    assert_eq!(together.load(Ordering::SeqCst), 8, "all eight were in flight on the old session: {wire:#?}");
    assert_eq!(fx.rpc("initialize").len(), 2, "one new session: {wire:#?}");
    assert_eq!(fx.rpc("notifications/initialized").len(), 2, "{wire:#?}");
    let calls = fx.rpc("tools/call");
    assert_eq!(calls.len(), 16, "eight calls, each replayed once: {wire:#?}");
    assert_eq!(calls.iter().filter(|c| c.header("mcp-session-id") == Some("s2")).count(), 8, "{wire:#?}");
}
