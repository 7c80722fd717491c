//! nod against scripted HTTP servers (`http_fixture`): sessions that expire, headers, both
//! answer forms, resumed and broken streams, error storms, slow and endless answers, oversize
//! frames, redirects, credentials, newer and older servers, Ctrl-C, and server requests on
//! the standalone stream. Each test checks what a user sees (exit code, an error naming the
//! server, how long it took) and what nod put on the wire.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use serde_json::{Value, json};

use crate::http_fixture::{Fixture, Reply, Request, event, init_reply, init_result, result_msg, standard, text_result};
use crate::support::{Cmd, Env, Output, merge};

/// The remote server's name in every profile here.
const NAME: &str = "web";
const VERSION: &str = "2025-11-25";
const PRIMING: &str = "id: p0\ndata:\n\n";
const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// Writes a profile with the one remote server `web` at `path` on the fixture.
fn remote(env: &Env, fx: &Fixture, path: &str, extra: Value) {
    let mut entry = json!({ "type": "http", "url": fx.url(path) });
    merge(&mut entry, extra);
    env.profile(json!({ "mcp": { NAME: entry } }));
}

fn call(env: &Env, tool: &str) -> Output {
    env.nod(["mcp", "tool", "call", NAME, tool, "{}"]).timeout(30).run()
}

fn is_get(r: &Request) -> bool {
    r.method == "GET"
}

#[test]
fn http_expired_session_is_renewed_and_the_call_replayed_once() {
    let inits = AtomicUsize::new(0);
    let fx = Fixture::start(move |req| match req.rpc() {
        Some("initialize") => init_reply(req, Some(&format!("s{}", inits.fetch_add(1, Ordering::SeqCst) + 1))),
        Some("tools/call") if req.header("mcp-session-id") == Some("s1") => {
            Reply::status(404).body("text/plain", "no such session")
        }
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({}));
    let out = call(&env, "echo");
    out.code(0).within(10.0).stdout_has("called echo");
    let (inits, initialized, calls) = (fx.rpc("initialize"), fx.rpc("notifications/initialized"), fx.rpc("tools/call"));
    let wire = fx.summary();
    assert_eq!((inits.len(), initialized.len(), calls.len()), (2, 2, 2), "{wire:#?}");
    assert_eq!(inits[1].header("mcp-session-id"), None, "the new initialize carries no session: {wire:#?}");
    assert_eq!(initialized[1].header("mcp-session-id"), Some("s2"), "{wire:#?}");
    assert_eq!(calls[0].header("mcp-session-id"), Some("s1"), "{wire:#?}");
    assert_eq!(calls[1].header("mcp-session-id"), Some("s2"), "{wire:#?}");
    // The replay is the same call under a new wire id: ids are never reused.
    assert_eq!(calls[1].json["params"], calls[0].json["params"], "the replay is the same request: {wire:#?}");
    assert_ne!(calls[1].json["id"], calls[0].json["id"], "{wire:#?}");
    let order = [calls[0].index, inits[1].index, initialized[1].index, calls[1].index];
    assert!(order.is_sorted(), "expected 404, initialize, initialized, replay: {wire:#?}");
}

#[test]
fn http_session_expiring_again_after_the_replay_fails_the_call_without_looping() {
    let inits = AtomicUsize::new(0);
    let fx = Fixture::start(move |req| match req.rpc() {
        Some("initialize") => init_reply(req, Some(&format!("s{}", inits.fetch_add(1, Ordering::SeqCst) + 1))),
        Some("tools/call") => Reply::status(404),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({}));
    let out = call(&env, "echo");
    out.code(2).within(10.0).stderr_line_has(&["server web", "404"]);
    let wire = fx.summary();
    assert_eq!(fx.rpc("tools/call").len(), 2, "one replay only: {wire:#?}");
    assert_eq!(fx.rpc("initialize").len(), 2, "one new session only: {wire:#?}");
}

#[test]
fn http_every_request_after_initialize_carries_the_version_and_session_headers() {
    let (get_seen, got_get) = unbounded::<()>();
    let fx = Fixture::start(move |req| match (req.method.as_str(), req.rpc()) {
        ("GET", _) => {
            let _ = get_seen.send(());
            Reply::sse(&[PRIMING]).hold()
        }
        // The call is answered once the standalone stream is open, so it is on the record.
        (_, Some("tools/call")) => {
            let _ = got_get.recv_timeout(Duration::from_secs(10));
            standard(req)
        }
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({}));
    call(&env, "echo").code(0).within(10.0).stdout_has("called echo");
    let requests = fx.requests();
    let wire = fx.summary();
    // First the 2026-07-28 probe, which this 2025-11-25 server does not know.
    let probe = &requests[0];
    assert_eq!(probe.rpc(), Some("server/discover"), "{wire:#?}");
    assert_eq!(probe.header("mcp-protocol-version"), Some("2026-07-28"), "{wire:#?}");
    assert_eq!(probe.header("mcp-method"), Some("server/discover"), "{wire:#?}");
    assert_eq!(probe.json["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    let init = &requests[1];
    assert_eq!(init.rpc(), Some("initialize"), "{wire:#?}");
    assert_eq!(init.header("mcp-session-id"), None, "{wire:#?}");
    assert_eq!(init.header("mcp-protocol-version"), None, "{wire:#?}");
    let seen = |m: &str, rpc: Option<&str>| requests.iter().any(|r| r.method == m && r.rpc() == rpc);
    assert!(seen("POST", Some("notifications/initialized")), "{wire:#?}");
    assert!(seen("GET", None), "no standalone GET: {wire:#?}");
    assert!(seen("POST", Some("tools/call")), "{wire:#?}");
    assert_eq!(requests.last().map(|r| r.method.as_str()), Some("DELETE"), "no DELETE at the end: {wire:#?}");
    for r in &requests {
        if r.method == "POST" {
            assert_eq!(r.header("accept"), Some(ACCEPT_BOTH), "{} {wire:#?}", r.index);
            assert!(r.header("content-type").is_some_and(|t| t.starts_with("application/json")), "{wire:#?}");
        }
        if r.index <= 1 {
            continue;
        }
        assert_eq!(r.header("mcp-protocol-version"), Some(VERSION), "request {} {wire:#?}", r.index);
        assert_eq!(r.header("mcp-session-id"), Some("s1"), "request {} {wire:#?}", r.index);
    }
    let get = requests.iter().find(|r| is_get(r)).unwrap();
    assert!(get.header("accept").is_some_and(|a| a.contains("text/event-stream")), "{wire:#?}");
}

#[test]
fn http_json_and_event_stream_answers_both_work_for_initialize_too() {
    for (init_sse, call_sse) in [(true, false), (false, true), (true, true)] {
        let fx = Fixture::start(move |req| match req.rpc() {
            Some("initialize") if init_sse => {
                Reply::sse(&[PRIMING, &event(Some("p1"), &result_msg(req, init_result(req)))])
                    .header("Mcp-Session-Id", "s1")
            }
            // The answer comes in a later chunk than the priming event.
            Some("tools/call") if call_sse => Reply::sse(&[PRIMING])
                .then(Duration::from_millis(100), event(Some("p1"), &result_msg(req, text_result("streamed")))),
            _ => standard(req),
        });
        let env = Env::new();
        remote(&env, &fx, "/mcp", json!({}));
        let out = call(&env, "echo");
        out.code(0).within(10.0).stdout_has(if call_sse { "streamed" } else { "called echo" });
        let calls = fx.rpc("tools/call");
        assert_eq!(calls.len(), 1, "{:#?}", fx.summary());
        assert_eq!(calls[0].header("mcp-session-id"), Some("s1"), "{:#?}", fx.summary());
    }
}

#[test]
fn http_stream_cut_before_the_answer_is_resumed_with_last_event_id_after_retry() {
    let call_id = Mutex::new(Value::Null);
    let fx = Fixture::start(move |req| match (req.method.as_str(), req.rpc()) {
        (_, Some("tools/call")) => {
            *call_id.lock().unwrap() = req.id();
            Reply::sse(&["id: e1\nretry: 500\ndata:\n\n"])
        }
        ("GET", _) if req.header("last-event-id").is_some() => {
            let answer = json!({ "jsonrpc": "2.0", "id": *call_id.lock().unwrap(), "result": text_result("resumed") });
            Reply::sse(&[event(Some("e2"), &answer)])
        }
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({ "operation_timeout_ms": 10000 }));
    call(&env, "echo").code(0).within(10.0).stdout_has("resumed");
    let wire = fx.summary();
    let calls = fx.rpc("tools/call");
    assert_eq!(calls.len(), 1, "the call is not posted again: {wire:#?}");
    let closed = fx.finished_at(calls[0].index).expect("the cut stream ended");
    let resume = fx.requests().into_iter().find(|r| is_get(r) && r.header("last-event-id").is_some());
    let resume = resume.unwrap_or_else(|| panic!("no GET with Last-Event-ID: {wire:#?}"));
    assert_eq!(resume.header("last-event-id"), Some("e1"), "{wire:#?}");
    assert_eq!(resume.header("mcp-session-id"), Some("s1"), "{wire:#?}");
    let waited = resume.at.duration_since(closed);
    assert!(
        (Duration::from_millis(450)..=Duration::from_millis(700)).contains(&waited),
        "resumed {waited:?} after the cut; retry was 500 ms"
    );
}

#[test]
fn http_stream_ending_without_an_event_id_fails_the_call_at_once() {
    // A stream with events but no id, and one cut in the middle of an event.
    for chunks in [[": nothing to resume from\n\n", "event: message\n\n"], [": cut\n", "data: {\"jsonrpc\":"]] {
        let fx = Fixture::start(move |req| match req.rpc() {
            Some("tools/call") => Reply::sse(&chunks),
            _ => standard(req),
        });
        let env = Env::new();
        remote(&env, &fx, "/mcp", json!({ "operation_timeout_ms": 20000 }));
        let out = call(&env, "echo");
        out.code(2).within(5.0).stderr_line_has(&["server web", "stream"]);
        let wire = fx.summary();
        assert!(!fx.requests().iter().any(|r| r.header("last-event-id").is_some()), "{wire:#?}");
    }
}

#[test]
fn http_500_storm_fails_each_call_fast_naming_http_500() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("tools/call") => Reply::status(500).body("text/plain", "internal trouble"),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({}));
    let out = call(&env, "echo");
    out.code(2).within(5.0).stderr_line_has(&["server web", "HTTP 500"]);

    let input = "{}\n".repeat(20);
    let out = env.nod(["mcp", "tool", "call", NAME, "echo", "--jsonl"]).stdin(input).timeout(30).run();
    out.code(1).within(10.0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 20, "{}", out.dump());
    for line in &lines {
        let message = line["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("HTTP 500"), "{line}\n{}", out.dump());
    }
    assert_eq!(fx.rpc("tools/call").len(), 21, "{:#?}", fx.summary());
    assert_eq!(fx.rpc("initialize").len(), 2, "a 500 is not a reason to start over: {:#?}", fx.summary());
}

#[test]
fn http_slow_loris_answer_times_out_and_nod_exits() {
    for sse in [false, true] {
        let fx = Fixture::start(move |req| match req.rpc() {
            Some("tools/call") if sse => {
                Reply::sse(&[event(None, &result_msg(req, text_result("slow")))]).trickle(Duration::from_millis(300))
            }
            Some("tools/call") => Reply::result(req, text_result("slow")).trickle(Duration::from_millis(300)),
            _ => standard(req),
        });
        let env = Env::new();
        remote(&env, &fx, "/mcp", json!({ "operation_timeout_ms": 1500 }));
        let out = call(&env, "echo");
        out.code(2).within(5.0).stderr_line_has(&["server web", "no answer within"]);
        assert!(out.elapsed >= Duration::from_millis(1400), "not the operation timeout\n{}", out.dump());
    }
}

/// Notifications are POSTed one after another: one the server never finishes answering must
/// not keep nod from timing out and exiting.
#[test]
fn http_server_stalling_a_notification_post_does_not_keep_nod_alive() {
    for stalled in ["notifications/initialized", "notifications/cancelled"] {
        let fx = Fixture::start(move |req| match req.rpc() {
            Some(method) if method == stalled => Reply::sse(&[": later\n"]).hold(),
            Some("tools/call") => Reply::sse(&[PRIMING]).hold(),
            _ => standard(req),
        });
        let env = Env::new();
        remote(&env, &fx, "/mcp", json!({ "operation_timeout_ms": 1000 }));
        let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}"]).timeout(10).run();
        out.code(2).within(6.0).stderr_line_has(&["server web", "no answer within"]);
    }
}

#[test]
fn http_endless_stream_times_out_and_the_call_is_cancelled_on_the_wire() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("tools/call") => Reply::sse(&[PRIMING]).hold(),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({ "operation_timeout_ms": 1000 }));
    let out = call(&env, "echo");
    out.code(2).within(5.0).stderr_line_has(&["server web", "no answer within"]);
    let id = fx.rpc("tools/call")[0].id();
    let cancel =
        fx.wait_for("notifications/cancelled", Duration::from_secs(2), |r| r.rpc() == Some("notifications/cancelled"));
    assert_eq!(cancel.json["params"]["requestId"], id, "{:#?}", fx.summary());
    assert_eq!(cancel.json["params"]["reason"], "timeout", "{:#?}", fx.summary());
    assert_eq!(cancel.header("mcp-session-id"), Some("s1"), "{:#?}", fx.summary());
}

#[test]
fn http_answers_over_8_mib_fail_the_call_naming_the_frame_limit() {
    for sse in [true, false] {
        let fx = Fixture::start(move |req| match req.rpc() {
            Some("tools/call") => {
                let big = result_msg(req, text_result(&"x".repeat(9 << 20)));
                if sse { Reply::sse(&[event(Some("b1"), &big)]) } else { Reply::json(&big) }
            }
            _ => standard(req),
        });
        let env = Env::new();
        remote(&env, &fx, "/mcp", json!({}));
        let out = call(&env, "echo");
        out.code(2).within(10.0).stderr_line_has(&["server web", "8 MiB", "frame limit"]);
    }
}

#[test]
fn http_307_redirect_on_the_same_host_is_followed() {
    let fx = Fixture::start(|req| match req.path.as_str() {
        "/old" => Reply::status(307).header("Location", "/mcp"),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/old", json!({}));
    let out = call(&env, "echo");
    out.code(0).within(10.0).stdout_has("called echo");
    let moved = fx.requests().into_iter().find(|r| r.path == "/mcp" && r.rpc() == Some("initialize"));
    assert!(moved.is_some(), "initialize was not re-sent to /mcp: {:#?}", fx.summary());
}

const CANARIES: [&str; 3] = ["static-canary-1", "env-canary-2", "token-canary-3"];

/// A profile for `fx` with a static header, a header from the environment and a bearer token.
fn credentialed(fx: &Fixture) -> Env {
    let env = Env::new();
    remote(
        &env,
        fx,
        "/mcp",
        json!({
            "headers": { "X-Static": CANARIES[0] },
            "header_env": { "X-Env": "NOD_IT_HDR" },
            "bearer_token_env": "NOD_IT_TOKEN",
            "startup_timeout_ms": 3000,
        }),
    );
    env
}

/// Tool calls fail with 500.
fn failing_calls(req: &Request) -> Reply {
    match req.rpc() {
        Some("tools/call") => Reply::status(500).body("text/plain", "internal trouble"),
        _ => standard(req),
    }
}

fn with_credentials(env: &Env, args: &[&str]) -> Cmd {
    env.nod(args).env("NOD_IT_HDR", CANARIES[1]).env("NOD_IT_TOKEN", CANARIES[2])
}

/// No canary, whole or in part (a hex dump splits values across lines).
fn assert_no_canary(out: &Output) {
    for canary in CANARIES.iter().chain(&["canary"]) {
        out.stdout_lacks(canary).stderr_lacks(canary);
    }
}

#[test]
fn http_configured_headers_go_on_every_request_and_never_show() {
    let fx = Fixture::start(failing_calls);
    let env = credentialed(&fx);
    let runs: [(&[&str], i32); 4] = [
        (&["mcp", "list", "--connect"], 0),
        (&["mcp", "list", "--connect", "--json"], 0),
        (&["mcp", "tool", "list", NAME], 0),
        (&["mcp", "tool", "call", NAME, "echo", "{}"], 2),
    ];
    for (args, code) in runs {
        let out = with_credentials(&env, args).run();
        out.code(code).within(10.0);
        assert_no_canary(&out);
    }
    let requests = fx.requests();
    assert!(requests.len() >= 10, "{:#?}", fx.summary());
    for r in &requests {
        assert_eq!(r.header("x-static"), Some(CANARIES[0]), "request {} {:#?}", r.index, fx.summary());
        assert_eq!(r.header("x-env"), Some(CANARIES[1]), "request {} {:#?}", r.index, fx.summary());
        let bearer = format!("Bearer {}", CANARIES[2]);
        assert_eq!(r.header("authorization"), Some(bearer.as_str()), "request {} {:#?}", r.index, fx.summary());
    }

    // A variable that is not set: a configuration error naming it, and nothing sent.
    let before = requests.len();
    let out = env.nod(["mcp", "tool", "list", NAME]).env("NOD_IT_TOKEN", CANARIES[2]).run();
    out.code(2).within(5.0).stderr_line_has(&["server web", "NOD_IT_HDR"]);
    assert_no_canary(&out);
    assert_eq!(fx.requests().len(), before, "{:#?}", fx.summary());

    // A literal Authorization header: refused by the profile check, never sent.
    remote(&env, &fx, "/mcp", json!({ "headers": { "Authorization": "Bearer literal-canary-4" } }));
    let out = env.nod(["mcp", "tool", "list", NAME]).run();
    out.code(2).within(5.0).stderr_has("Authorization").stderr_lacks("literal-canary-4");
    out.stdout_lacks("literal-canary-4");
    assert_eq!(fx.requests().len(), before, "{:#?}", fx.summary());
}

/// A redirect to another origin must not carry the configured headers there (ureq drops
/// only Authorization).
#[test]
fn http_redirect_to_another_origin_never_carries_credentials() {
    let other = Fixture::start_on("127.0.0.2", standard);
    let elsewhere = other.url("/collect");
    let fx = Fixture::start(move |req| match req.rpc() {
        Some("initialize") => Reply::status(302).header("Location", &elsewhere),
        _ => standard(req),
    });
    let env = credentialed(&fx);
    let out = with_credentials(&env, &["mcp", "tool", "list", NAME]).run();
    out.code(2).within(6.0).stderr_has("server web");
    assert_no_canary(&out);
    for r in other.requests() {
        for canary in CANARIES {
            let leaked = r.headers.iter().any(|(_, v)| v.contains(canary));
            assert!(!leaked, "{canary} went to another origin: {:#?}", other.summary());
        }
    }
}

/// nod's own log (NOD_LOG, up to trace) is for users to read and paste: credentials and
/// header values must not appear in it either, whatever the filter's spelling.
#[test]
fn http_trace_logging_never_shows_configured_credentials() {
    let fx = Fixture::start(failing_calls);
    let env = credentialed(&fx);
    for args in [&["mcp", "tool", "list", NAME][..], &["mcp", "tool", "call", NAME, "echo", "{}"]] {
        // Every spelling that once turned on the HTTP stack's raw dumps.
        for level in [
            "debug",
            "trace",
            "ureq",
            "ureq_proto",
            "nod=debug,ureq",
            "ureq=trace",
            "ureq_proto::client=trace",
            "rustls",
            // An empty level is every level to env_logger.
            "ureq=",
            "ureq_proto=",
            "warn,ureq=",
            "warn,ureq_proto=,rustls=",
        ] {
            let out = with_credentials(&env, args).env("NOD_LOG", level).run();
            out.within(10.0);
            assert_no_canary(&out);
        }
    }
    assert!(fx.requests().iter().all(|r| r.header("x-env") == Some(CANARIES[1])), "{:#?}", fx.summary());
}

/// A server that echoes what it was sent (every header) into its errors and its name: no
/// configured secret reaches the output, whether the error is a JSON-RPC error, a tool
/// result with isError, one call or a --jsonl stream, or the health output.
#[test]
fn http_secrets_a_server_echoes_back_are_never_printed() {
    fn echoed(req: &Request) -> String {
        req.headers.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
    let fx = Fixture::start(|req| match req.rpc() {
        Some("initialize") => {
            let version = req.json["params"]["protocolVersion"].clone();
            Reply::result(
                req,
                json!({ "protocolVersion": version, "capabilities": { "tools": {} },
                "serverInfo": { "name": echoed(req), "version": echoed(req) } }),
            )
            .header("Mcp-Session-Id", "s1")
        }
        Some("tools/call") if req.json["params"]["arguments"]["rpc"] == true => Reply::json(&json!({
            "jsonrpc": "2.0", "id": req.id(),
            "error": { "code": -32000, "message": echoed(req), "data": { "headers": echoed(req) } },
        })),
        Some("tools/call") => {
            Reply::result(req, json!({ "content": [{ "type": "text", "text": echoed(req) }], "isError": true }))
        }
        _ => standard(req),
    });
    let env = credentialed(&fx);
    let runs: [(&[&str], Option<&str>); 6] = [
        (&["mcp", "tool", "call", NAME, "echo", r#"{"rpc":true}"#], None),
        (&["mcp", "tool", "call", NAME, "echo", "{}"], None),
        (&["mcp", "tool", "call", NAME, "echo", "{}", "--json"], None),
        (&["mcp", "tool", "call", NAME, "echo", "--jsonl"], Some("{\"rpc\":true}\n{}\n")),
        (&["mcp", "list", "--connect"], None),
        (&["mcp", "list", "--connect", "--json"], None),
    ];
    for (args, input) in runs {
        let mut cmd = with_credentials(&env, args).timeout(20);
        if let Some(input) = input {
            cmd = cmd.stdin(input);
        }
        let out = cmd.run();
        out.within(10.0);
        assert_no_canary(&out);
    }
    // The server did see them: the test would catch an echo.
    assert!(fx.requests().iter().any(|r| r.header("authorization") == Some("Bearer token-canary-3")));
}

/// A 303 to a POST is followed with GET, as HTTP says.
#[test]
fn http_303_after_a_post_is_followed_with_get() {
    let fx = Fixture::start(|req| match (req.method.as_str(), req.rpc()) {
        ("POST", Some("tools/call")) => Reply::status(303).header("Location", "/answers/1"),
        // The call is the fourth request: server/discover, initialize, tools/list, tools/call.
        ("GET", _) if req.path == "/answers/1" => Reply::json(&json!({
            "jsonrpc": "2.0", "id": 4, "result": { "content": [{ "type": "text", "text": "seen other" }] },
        })),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({}));
    call(&env, "echo").code(0).within(10.0).stdout_has("seen other");
    let get = fx.requests().into_iter().find(|r| r.path == "/answers/1").expect("the GET");
    assert_eq!(get.method, "GET", "{:#?}", fx.summary());
}

/// When initialize gets a 404 and the legacy transport is not there either, the error
/// reports the 404 the server gave to initialize.
#[test]
fn http_a_failed_fallback_reports_the_status_initialize_got() {
    let fx = Fixture::start(|req| match req.method.as_str() {
        "POST" => Reply::status(404).body("text/html", "<h1>no</h1>"),
        _ => Reply::status(405),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({ "startup_timeout_ms": 5000 }));
    let out = call(&env, "echo");
    out.code(2).within(10.0).stderr_line_has(&["server web", "HTTP 404", "legacy", "HTTP 405"]);
}

/// A server that closes its stream after every event, with an event store (the Python SDK's
/// close_sse_stream()), is resumed for as long as it makes progress: more than five times.
#[test]
fn http_a_stream_closed_after_every_event_is_resumed_as_long_as_it_progresses() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let gets = AtomicUsize::new(0);
    let fx = Fixture::start(move |req| match (req.method.as_str(), req.rpc()) {
        ("POST", Some("tools/call")) => Reply::sse(&["id: e0\nretry: 10\ndata:\n\n"]),
        ("GET", _) if req.header("last-event-id").is_some() => {
            let n = gets.fetch_add(1, Ordering::SeqCst) + 1;
            if n < 8 {
                let progress = json!({ "jsonrpc": "2.0", "method": "notifications/progress",
                    "params": { "progressToken": 3, "progress": n } });
                Reply::sse(&[format!("id: e{n}\nretry: 10\ndata: {progress}\n\n")])
            } else {
                let answer = json!({ "jsonrpc": "2.0", "id": 4, "result": { "content": [{ "type": "text", "text": "done after 8" }] } });
                Reply::sse(&[format!("id: e{n}\ndata: {answer}\n\n")])
            }
        }
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({}));
    call(&env, "echo").code(0).within(20.0).stdout_has("done after 8");
    let resumed = fx.requests().iter().filter(|r| r.header("last-event-id").is_some()).count();
    assert_eq!(resumed, 8, "{:#?}", fx.summary());
}

#[test]
fn http_newer_revision_server_is_reported_and_not_treated_as_legacy() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("initialize") => Reply::json(&json!({
            "jsonrpc": "2.0", "id": req.id(),
            "error": { "code": -32022, "message": "unsupported", "data": { "supported": ["2026-07-28"] } },
        }))
        .code(400),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({ "startup_timeout_ms": 3000 }));
    let out = call(&env, "echo");
    out.code(2).within(5.0).stderr_line_has(&["server web", "newer"]);
    assert!(!fx.requests().iter().any(is_get), "fell back to legacy SSE: {:#?}", fx.summary());
}

/// A 2024-11-05 server: POSTs to anything but `/messages` get 404 (HTML), a GET opens the
/// event stream that announces `endpoint` and then carries every answer; a POST to the
/// endpoint is answered 202 and its answer goes out on the stream.
fn legacy_server(endpoint: &str) -> Fixture {
    let (tx, rx) = unbounded::<String>();
    let hello = format!("event: endpoint\ndata: {endpoint}\n\n");
    Fixture::start(move |req| {
        if req.method == "GET" {
            return Reply::sse(&[&hello]).fed_by(rx.clone());
        }
        if req.method != "POST" || !req.path.starts_with("/messages") {
            return Reply::status(404).body("text/html", "<html><body><h1>Not Found</h1></body></html>");
        }
        let answer = match req.rpc() {
            Some("initialize") => Some(result_msg(req, init_result(req))),
            Some("tools/call") => Some(result_msg(req, text_result("legacy ok"))),
            Some("tools/list") => {
                Some(result_msg(req, json!({ "tools": [{ "name": "echo", "inputSchema": { "type": "object" } }] })))
            }
            _ => None,
        };
        if let Some(answer) = answer {
            let _ = tx.send(format!("event: message\ndata: {answer}\n\n"));
        }
        Reply::status(202)
    })
}

#[test]
fn http_legacy_sse_server_is_found_after_a_404_to_initialize() {
    let fx = legacy_server("/messages?s=1");
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({}));
    call(&env, "echo").code(0).within(10.0).stdout_has("legacy ok");
    let requests = fx.requests();
    let wire = fx.summary();
    assert_eq!((requests[0].method.as_str(), requests[0].rpc()), ("POST", Some("server/discover")), "{wire:#?}");
    assert_eq!((requests[1].method.as_str(), requests[1].rpc()), ("POST", Some("initialize")), "{wire:#?}");
    let get = requests.iter().find(|r| is_get(r)).unwrap_or_else(|| panic!("no GET: {wire:#?}"));
    assert_eq!(get.path, "/mcp", "{wire:#?}");
    assert!(get.header("accept").is_some_and(|a| a.contains("text/event-stream")), "{wire:#?}");
    let posted: Vec<Option<&str>> = requests.iter().filter(|r| r.path == "/messages?s=1").map(|r| r.rpc()).collect();
    assert_eq!(
        posted,
        [Some("initialize"), Some("notifications/initialized"), Some("tools/list"), Some("tools/call")],
        "{wire:#?}"
    );
    assert_eq!(requests.iter().filter(|r| r.method == "POST" && r.path == "/mcp").count(), 2, "{wire:#?}");
}

#[test]
fn http_health_names_the_legacy_transport_an_entry_fell_back_to() {
    // One client per legacy fixture: its event stream serves one connection.
    for json in [false, true] {
        let fx = legacy_server("/messages?s=1");
        let env = Env::new();
        remote(&env, &fx, "/mcp", json!({}));
        let args: &[&str] = if json { &["mcp", "list", "--connect", "--json"] } else { &["mcp", "list", "--connect"] };
        let out = env.nod(args).run();
        out.code(0).within(10.0);
        if json {
            assert_eq!(out.json()["servers"][0]["transport"], "sse", "{}", out.text());
        } else {
            out.stdout_has("transport=sse");
        }
    }
}

#[test]
fn http_sse_type_uses_the_legacy_transport_from_the_start() {
    let fx = legacy_server("/messages?s=1");
    let env = Env::new();
    env.profile(json!({ "mcp": { NAME: { "type": "sse", "url": fx.url("/sse") } } }));
    call(&env, "echo").code(0).within(10.0).stdout_has("legacy ok");
    let requests = fx.requests();
    let wire = fx.summary();
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("GET", "/sse"), "{wire:#?}");
    assert!(!requests.iter().any(|r| r.method == "POST" && r.path == "/sse"), "{wire:#?}");
    assert_eq!(fx.rpc("tools/call").len(), 1, "{wire:#?}");
}

#[test]
fn http_legacy_endpoint_on_another_origin_is_refused() {
    let other = Fixture::start_on("127.0.0.2", standard);
    let fx = legacy_server(&other.url("/x"));
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({ "startup_timeout_ms": 2000 }));
    let out = call(&env, "echo");
    out.code(2).within(5.0).stderr_line_has(&["server web", "origin"]);
    assert!(other.requests().is_empty(), "nod posted to another origin: {:#?}", other.summary());
}

#[test]
fn http_ctrl_c_cancels_the_call_on_the_wire_and_exits_130() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("tools/call") => Reply::sse(&[PRIMING]).hold(),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({ "operation_timeout_ms": 30000 }));
    let running = env.nod(["mcp", "tool", "call", NAME, "echo", "{}"]).spawn();
    let call = fx.wait_for("tools/call", Duration::from_secs(10), |r| r.rpc() == Some("tools/call"));
    let signalled = Instant::now();
    // SAFETY: plain kill(2) on the nod process this test started.
    unsafe { libc::kill(running.pid(), libc::SIGINT) };
    let out = running.wait();
    out.code(130);
    assert!(signalled.elapsed() < Duration::from_secs(3), "{:?} after SIGINT\n{}", signalled.elapsed(), out.dump());
    let cancel =
        fx.wait_for("notifications/cancelled", Duration::from_secs(2), |r| r.rpc() == Some("notifications/cancelled"));
    assert_eq!(cancel.json["params"]["requestId"], call.id(), "{:#?}", fx.summary());
}

#[test]
fn http_elicitation_on_the_standalone_stream_is_answered_by_post() {
    let (get_tx, get_rx) = unbounded::<String>();
    let (call_tx, call_rx) = unbounded::<String>();
    let call_id = Mutex::new(Value::Null);
    let ask = json!({
        "jsonrpc": "2.0", "id": 41, "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Who are you?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": { "type": "string", "default": "Ada" },
                    "age": { "type": "integer", "default": 36 },
                },
                "required": ["name"],
            },
        },
    });
    let fx = Fixture::start(move |req| {
        if req.method == "GET" {
            return Reply::sse(&[PRIMING]).fed_by(get_rx.clone());
        }
        if req.rpc() == Some("tools/call") {
            *call_id.lock().unwrap() = req.id();
            let _ = get_tx.send(event(Some("g1"), &ask));
            return Reply::sse(&[PRIMING]).fed_by(call_rx.clone());
        }
        if req.is_response() && req.id() == 41 {
            let content = req.json["result"]["content"].to_string();
            let id = call_id.lock().unwrap().clone();
            let answer = json!({ "jsonrpc": "2.0", "id": id, "result": text_result(&format!("got {content}")) });
            let _ = call_tx.send(event(Some("c1"), &answer));
            return Reply::status(202);
        }
        standard(req)
    });
    let env = Env::new();
    remote(&env, &fx, "/mcp", json!({ "operation_timeout_ms": 10000 }));
    let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}", "--elicit", "defaults"]).run();
    out.code(0).within(10.0).stdout_has(r#"got {"name":"Ada","age":36}"#);
    let wire = fx.summary();
    let answer = fx.requests().into_iter().find(Request::is_response);
    let answer = answer.unwrap_or_else(|| panic!("no answer to the elicitation: {wire:#?}"));
    assert_eq!(answer.json["id"], 41, "{wire:#?}");
    assert_eq!(answer.json["result"]["action"], "accept", "{wire:#?}");
    assert_eq!(answer.json["result"]["content"], json!({ "name": "Ada", "age": 36 }), "{wire:#?}");
    assert_eq!(answer.header("mcp-session-id"), Some("s1"), "{wire:#?}");
    assert_eq!(answer.header("mcp-protocol-version"), Some(VERSION), "{wire:#?}");
}

/// Faults of a remote server while the agent waits (issue 27, part 4): over Streamable HTTP, a
/// call that stalls fails at operation_timeout_ms and one that gets 500s fails naming the
/// status, each naming the server, while a stdio server answers in the same step; the next
/// call to the remote server answers.
#[test]
fn http_faults_during_an_agent_run_fail_the_call_and_the_run_goes_on() {
    use crate::ask::{ask, call, settings};
    use crate::model::{Model, Step, tool_messages};
    let fx = Fixture::start(|req| match req.rpc() {
        Some("tools/call") if req.json["params"]["arguments"]["message"] == "stall" => {
            Reply::result(req, text_result("too late")).trickle(Duration::from_millis(300))
        }
        Some("tools/call") if req.json["params"]["arguments"]["message"] == "fail" => {
            Reply::status(500).body("text/plain", "upstream broke")
        }
        _ => standard(req),
    });
    let env = Env::new();
    let web = json!({ "type": "http", "url": fx.url("/mcp"), "operation_timeout_ms": 1500 });
    env.profile(json!({ "mcp": { NAME: web, "fx": env.fixture_entry(&[], json!({})) } }));
    settings(&env, json!({ "permission": { "mcp_*": "allow" } }));
    let web_echo = |message: &str| call("mcp_web_echo", json!({ "message": message }));
    let local = |message: &str| call("mcp_fx_echo", json!({ "message": message }));
    let model = Model::start(vec![
        Step::Calls(
            String::new(),
            vec![
                call("mcp_select_tool", json!({ "name": "mcp_web_echo" })),
                call("mcp_select_tool", json!({ "name": "mcp_fx_echo" })),
            ],
        ),
        Step::Calls(String::new(), vec![web_echo("stall"), local("local one")]),
        Step::Calls(String::new(), vec![web_echo("fail"), local("local two")]),
        Step::Calls(String::new(), vec![web_echo("fine")]),
        Step::Text("Done.".into()),
    ]);
    ask(&env, &model, &["--json", "try", "the", "web"]).run().code(0).within(30.0);
    let requests = model.requests();
    let step =
        |i: usize, n: usize| tool_messages(&requests[i]).into_iter().rev().take(n).map(|(_, r)| r).collect::<Vec<_>>();
    let stalled = step(2, 2);
    assert!(stalled.iter().any(|r| r.contains("local one")), "{stalled:?}");
    let timed_out = stalled.iter().find(|r| !r.contains("local one")).unwrap();
    assert!(
        timed_out.contains(r#"server=\"web\""#) && timed_out.contains("1.5 s (operation_timeout_ms)"),
        "{timed_out}"
    );
    let failed = step(3, 2);
    assert!(failed.iter().any(|r| r.contains("local two")), "{failed:?}");
    let refused = failed.iter().find(|r| !r.contains("local two")).unwrap();
    assert!(refused.contains("web") && refused.contains("500"), "{refused}");
    assert!(step(4, 1)[0].contains("called echo"), "the next call answers: {:?}", step(4, 1));
}
