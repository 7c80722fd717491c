//! MCP 2026-07-28 beside the initialize era: the server/discover probe and what nod makes
//! of its outcome, the stateless wire (`_meta` on every request, no handshake), input
//! requests inside results (SEP-2322), and Streamable HTTP without sessions (SEP-2243
//! headers, x-mcp-header, cancellation by closing the stream). The fixture's 2026 scenarios
//! over stdio, an in-process HTTP server for the HTTP side.

use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::http_fixture::{Fixture, Reply, Request, text_result};
use crate::support::{Env, FIXTURE, SERVER, with_method};

fn methods(wire: &[Value]) -> Vec<String> {
    wire.iter().filter_map(|m| m["method"].as_str()).map(String::from).collect()
}

fn call(env: &Env, tool: &str, args: &str, extra: &[&str]) -> crate::support::Output {
    let mut argv = vec!["mcp", "tool", "call", SERVER, tool, args];
    argv.extend_from_slice(extra);
    env.nod(argv).timeout(30).run()
}

#[test]
fn a_2026_only_server_is_reached_without_initialize_and_every_request_says_its_revision() {
    let env = Env::new();
    env.fixture(&["--scenario", "modern-only"], json!({}));
    call(&env, "echo", r#"{"message":"stateless"}"#, &[]).code(0).within(10.0).stdout_has("stateless");
    let wire = env.wire();
    assert_eq!(methods(&wire), ["server/discover", "tools/call"], "{wire:#?}");
    for request in &wire {
        let meta = &request["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{request}");
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object(), "{request}");
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "nod", "{request}");
    }
    assert!(wire[1]["params"]["_meta"]["progressToken"].is_number(), "the progress token stays: {}", wire[1]);
    // Not found is -32602 at 2026-07-28: still a not_found failure.
    let missing = env.nod(["mcp", "resource", "read", SERVER, "fixture://nope", "--json"]).run();
    missing.code(2);
    assert_eq!(missing.json()["error"]["kind"], "not_found", "{}", missing.json());
    let health = env.nod(["mcp", "list", "--connect", "--json"]).run();
    health.code(0);
    let server = &health.json()["servers"][0];
    assert_eq!(server["protocol_version"], "2026-07-28", "{server}");
    assert_eq!(server["server_version"], "2.0.0", "serverInfo comes from the discover result: {server}");
    env.assert_no_leftovers();
}

#[test]
fn a_dual_era_server_is_spoken_to_in_2026_and_a_pin_keeps_the_initialize_era() {
    let env = Env::new();
    env.fixture(&["--scenario", "modern"], json!({}));
    call(&env, "echo", r#"{"message":"x"}"#, &[]).code(0);
    assert!(!methods(&env.wire()).contains(&"initialize".to_string()), "{:#?}", env.wire());
    std::fs::remove_file(env.record_path()).unwrap();
    env.fixture(&["--scenario", "modern"], json!({ "protocol_version": "2025-11-25" }));
    call(&env, "echo", r#"{"message":"x"}"#, &[]).code(0);
    let wire = env.wire();
    assert_eq!(methods(&wire)[..2], ["initialize", "notifications/initialized"], "no probe when pinned: {wire:#?}");
    assert!(wire.iter().all(|m| m["params"]["_meta"].get("io.modelcontextprotocol/protocolVersion").is_none()));
}

#[test]
fn an_initialize_era_server_is_initialized_after_the_probe_even_one_that_exits_on_it() {
    let env = Env::new();
    env.fixture(&["--scenario", "exit-before-init-request"], json!({}));
    call(&env, "echo", r#"{"message":"again"}"#, &[]).code(0).within(10.0).stdout_has("again");
    let wire = env.wire();
    assert_eq!(methods(&wire)[..3], ["server/discover", "initialize", "notifications/initialized"], "{wire:#?}");
    env.assert_no_leftovers();
    // Pinned to 2026-07-28, an initialize-era server is an error that says so.
    env.fixture(&[], json!({ "protocol_version": "2026-07-28" }));
    call(&env, "echo", r#"{"message":"x"}"#, &[]).code(2).stderr_line_has(&["server fx", "server/discover"]);
    // A value nod does not know is a configuration error naming the field.
    env.fixture(&[], json!({ "protocol_version": "2027-01-01" }));
    call(&env, "echo", r#"{"message":"x"}"#, &[]).code(2).stderr_has("protocol_version must be");
}

#[test]
fn input_required_is_answered_and_the_request_sent_again_with_a_new_id_and_the_state_as_given() {
    let env = Env::new();
    env.fixture(&["--scenario", "modern-only"], json!({}));
    let out = call(&env, "elicit", "{}", &["--elicit-answer", r#"{"name":"Ada"}"#]);
    out.code(0).within(10.0).stdout_has(r#"{"action":"accept","content":{"name":"Ada"}}"#);
    let wire = env.wire();
    let calls = with_method(&wire, "tools/call");
    assert_eq!(calls.len(), 2, "{wire:#?}");
    assert_ne!(calls[0]["id"], calls[1]["id"], "the retry has a new id");
    assert!(calls[0]["params"].get("inputResponses").is_none());
    assert_eq!(
        calls[1]["params"]["inputResponses"]["name"],
        json!({ "action": "accept", "content": { "name": "Ada" } })
    );
    assert_eq!(calls[1]["params"]["requestState"], "{\"round\": 1, \"note\": \"opaque\"}", "verbatim");
    assert_eq!(calls[1]["params"]["name"], "elicit");
    // The same policies as for elicitation/create: decline is sent back as the answer.
    std::fs::remove_file(env.record_path()).unwrap();
    call(&env, "elicit", "{}", &["--elicit", "decline"]).code(0).stdout_has(r#"{"action":"decline"}"#);
    // Nobody to ask (no terminal, no policy): input required, and no retry goes out.
    std::fs::remove_file(env.record_path()).unwrap();
    let out = env.nod(["mcp", "tool", "call", SERVER, "elicit", "{}", "--json"]).timeout(30).run();
    out.code(3).within(10.0);
    assert_eq!(with_method(&env.wire(), "tools/call").len(), 1, "{:#?}", env.wire());
}

/// A 2026-07-28 Streamable HTTP server: one POST per request, no session; `tools/list` offers
/// a tool with x-mcp-header markings and one whose markings are invalid; `hang` never answers.
fn modern_http(first_refused: bool) -> Fixture {
    modern_http_with(first_refused, false)
}

/// `mismatch`: the first tools/call is refused with -32020 (the headers do not match).
fn modern_http_with(first_refused: bool, mismatch: bool) -> Fixture {
    let refused = AtomicUsize::new(0);
    let calls = AtomicUsize::new(0);
    Fixture::start(move |req: &Request| {
        if req.method != "POST" {
            return Reply::status(405);
        }
        let version = req.json["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].clone();
        if req.header("mcp-protocol-version") != version.as_str() || version.is_null() {
            return error(req, 400, -32020, "header mismatch");
        }
        // The first request is refused as an unsupported version (the conformance mock does).
        if first_refused && refused.fetch_add(1, Ordering::SeqCst) == 0 {
            let data = json!({ "supported": ["2026-07-28"], "requested": version });
            return Reply::json(&json!({ "jsonrpc": "2.0", "id": req.id(),
                "error": { "code": -32022, "message": "unsupported", "data": data } }))
            .code(400);
        }
        match req.rpc() {
            Some("server/discover") => Reply::result(
                req,
                json!({ "resultType": "complete", "supportedVersions": ["2026-07-28"],
                    "capabilities": { "tools": {} }, "_meta": { "io.modelcontextprotocol/serverInfo": { "name": "web26", "version": "1" } },
                    "ttlMs": 0, "cacheScope": "private" }),
            ),
            Some("tools/list") => Reply::result(
                req,
                json!({ "resultType": "complete", "tools": [
                    { "name": "lookup", "inputSchema": { "type": "object", "properties": {
                        "region": { "type": "string", "x-mcp-header": "Region" },
                        "count": { "type": "integer", "x-mcp-header": "Count" },
                        "note": { "type": "string", "x-mcp-header": "Note" },
                        "query": { "type": "string" } } } },
                    { "name": "broken", "inputSchema": { "type": "object", "properties": {
                        "a": { "type": "string", "x-mcp-header": "My Field" } } } },
                    { "name": "hang", "inputSchema": { "type": "object" } },
                ] }),
            ),
            Some("tools/call") if req.json["params"]["name"] == "hang" => Reply::sse(&[": keep-alive\n\n"]).hold(),
            Some("tools/call") if mismatch && calls.fetch_add(1, Ordering::SeqCst) == 0 => {
                error(req, 400, -32020, "Mcp-Param-Region does not match the arguments")
            }
            Some("tools/call") => Reply::result(req, text_result("looked up")),
            _ => error(req, 404, -32601, "no such method"),
        }
    })
}

fn error(req: &Request, status: u16, code: i64, message: &str) -> Reply {
    Reply::json(&json!({ "jsonrpc": "2.0", "id": req.id(), "error": { "code": code, "message": message } }))
        .code(status)
}

fn http_profile(env: &Env, fx: &Fixture) {
    env.profile(json!({ "mcp": { SERVER: { "type": "http", "url": fx.url("/mcp") } } }));
}

#[test]
fn over_http_every_post_carries_the_2026_headers_and_marked_arguments() {
    let fx = modern_http(true);
    let env = Env::new();
    http_profile(&env, &fx);
    let args = r#"{"region":"us-west1","count":42,"note":" padded ","query":"q"}"#;
    call(&env, "lookup", args, &[]).code(0).within(10.0).stdout_has("looked up");
    let requests = fx.requests();
    let wire = fx.summary();
    assert!(requests.iter().all(|r| r.method == "POST"), "no GET, no DELETE: {wire:#?}");
    assert!(requests.iter().all(|r| r.header("mcp-session-id").is_none()), "{wire:#?}");
    let rpcs: Vec<&str> = requests.iter().filter_map(|r| r.rpc()).collect();
    assert_eq!(rpcs, ["server/discover", "server/discover", "tools/list", "tools/call"], "asked again after -32022");
    for r in &requests {
        assert_eq!(r.header("mcp-protocol-version"), Some("2026-07-28"), "{wire:#?}");
        assert_eq!(r.header("mcp-method"), r.rpc(), "{wire:#?}");
    }
    let call = &requests[3];
    assert_eq!(call.header("mcp-name"), Some("lookup"));
    assert_eq!(call.header("mcp-param-region"), Some("us-west1"));
    assert_eq!(call.header("mcp-param-count"), Some("42"));
    assert_eq!(call.header("mcp-param-note"), Some("=?base64?IHBhZGRlZCA=?="));
    assert_eq!(call.header("mcp-param-query"), None, "only marked arguments");
    // The tool with an invalid marking is left out, with a warning that names it.
    let listed = env.nod(["mcp", "tool", "list", SERVER]).timeout(30).run();
    listed.code(0).stdout_has("lookup").stdout_lacks("broken").stderr_has("broken");
}

#[test]
fn over_http_a_2026_call_is_cancelled_by_closing_its_stream() {
    let fx = modern_http(false);
    let env = Env::new();
    env.profile(json!({ "mcp": { SERVER: { "type": "http", "url": fx.url("/mcp"), "operation_timeout_ms": 1000 } } }));
    call(&env, "hang", "{}", &[]).code(2).within(15.0).stderr_has("operation_timeout_ms");
    let hang = fx.rpc("tools/call")[0].index;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while fx.finished_at(hang).is_none() {
        assert!(std::time::Instant::now() < deadline, "the stream was never closed: {:#?}", fx.summary());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(fx.rpc("notifications/cancelled").is_empty(), "no cancel POST in 2026: {:#?}", fx.summary());
}

#[test]
fn an_initialize_era_verdict_is_remembered_and_forgotten_when_the_server_changes() {
    let env = Env::new();
    // A wrapper script, so the server can change while its entry stays the same.
    let script = env.path("server.sh");
    let write = |scenario: &str| {
        let text = format!(
            "exec {} --scenario {scenario} --record {}\n",
            crate::support::FIXTURE,
            env.record_path().display()
        );
        std::fs::write(&script, text).unwrap();
    };
    write("basic");
    env.profile(json!({ "mcp": { SERVER: { "command": ["sh", script], "env": env.marker_env() } } }));
    let run = |env: &Env| {
        let _ = std::fs::remove_file(env.record_path());
        call(env, "echo", r#"{"message":"x"}"#, &[]).code(0).within(10.0);
        methods(&env.wire())
    };
    assert_eq!(run(&env)[..2], ["server/discover", "initialize"]);
    assert!(env.path("revisions.json").exists());
    assert_eq!(run(&env)[0], "initialize", "no probe for a server known to be of the initialize era");
    // The server is upgraded to 2026-07-28 only: initialize is refused, and nod probes.
    write("modern-only");
    let upgraded = run(&env);
    assert_eq!(upgraded[..2], ["initialize", "server/discover"], "{upgraded:?}");
    assert_eq!(run(&env)[0], "server/discover", "the old verdict is gone");
    let revisions = std::fs::read_to_string(env.path("revisions.json")).unwrap();
    assert!(!revisions.contains("server.sh") && !revisions.contains(SERVER), "only digests: {revisions}");
    env.assert_no_leftovers();
}

#[test]
fn protocol_version_on_the_command_line_pins_every_server_for_one_run() {
    let env = Env::new();
    env.fixture(&["--scenario", "modern"], json!({}));
    let pinned = env.nod(["mcp", "list", "--connect", "--json", "--protocol-version", "2025-06-18"]).run();
    pinned.code(0);
    assert_eq!(pinned.json()["servers"][0]["protocol_version"], "2025-06-18", "{}", pinned.json());
    assert!(!methods(&env.wire()).contains(&"server/discover".to_string()));
    let auto = env.nod(["mcp", "list", "--connect", "--json", "--protocol-version", "auto"]).run();
    assert_eq!(auto.json()["servers"][0]["protocol_version"], "2026-07-28", "{}", auto.json());
    env.nod(["mcp", "list", "--connect", "--protocol-version", "2027-01-01"])
        .run()
        .code(2)
        .stderr_has("--protocol-version takes");
}

/// 2026-07-28 caching hints: a listing is reused while its ttlMs lasts and listed again
/// after; an initialize-era listing holds until the server says it changed.
#[test]
fn a_2026_listing_is_fresh_for_its_ttl_and_then_listed_again() {
    use nod::session::catalog::{Kind, list};
    use std::sync::Arc;
    let connect = |env: &Env, args: &[&str]| {
        env.fixture(args, json!({}));
        let loaded = nod::config::profile::load(&env.path("mcp.json"));
        let engine = nod::dispatch::Engine::start();
        let session = nod::session::Session::connect(
            &engine,
            &loaded.servers[0],
            Arc::new(nod::dispatch::NoInbound),
            &Default::default(),
        )
        .expect("connect");
        (engine, session)
    };
    let lists = |env: &Env| with_method(&env.wire(), "tools/list").len();
    let close = |engine: nod::dispatch::Engine, session: nod::session::Session| {
        drop(session);
        engine.shutdown();
    };
    // A long TTL: the second listing comes from the cache.
    let env = Env::new();
    let (engine, session) = connect(&env, &["--scenario", "modern-only", "--ttl-ms", "60000"]);
    list(&session, Kind::Tools).unwrap();
    list(&session, Kind::Tools).unwrap();
    assert_eq!(lists(&env), 1);
    close(engine, session);
    // TTL 0: stale at once (nod keeps it one second, so one agent step lists a server once);
    // once that second has passed, the next use lists again.
    let env = Env::new();
    let (engine, session) = connect(&env, &["--scenario", "modern-only", "--ttl-ms", "0"]);
    let listed = std::time::Instant::now();
    list(&session, Kind::Tools).unwrap();
    list(&session, Kind::Tools).unwrap();
    assert_eq!(lists(&env), 1);
    // Used again and again until it lists anew: not before its second is up, and soon after.
    while lists(&env) < 2 {
        assert!(listed.elapsed() < std::time::Duration::from_secs(5), "never listed again once stale");
        std::thread::sleep(std::time::Duration::from_millis(20));
        list(&session, Kind::Tools).unwrap();
    }
    assert!(listed.elapsed() >= std::time::Duration::from_secs(1), "listed again before the second was up");
    close(engine, session);
    // The initialize era: no TTL, the listing holds.
    let env = Env::new();
    let (engine, session) = connect(&env, &["--ttl-ms", "0"]);
    list(&session, Kind::Tools).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    list(&session, Kind::Tools).unwrap();
    assert_eq!(lists(&env), 1);
    close(engine, session);
    env.assert_no_leftovers();
}

#[test]
fn over_http_a_header_mismatch_lists_the_tools_again_and_retries_once() {
    let fx = modern_http_with(false, true);
    let env = Env::new();
    http_profile(&env, &fx);
    call(&env, "lookup", r#"{"region":"eu"}"#, &[]).code(0).within(10.0).stdout_has("looked up");
    let requests = fx.requests();
    let rpcs: Vec<&str> = requests.iter().filter_map(|r| r.rpc()).collect();
    assert_eq!(
        rpcs,
        ["server/discover", "tools/list", "tools/call", "tools/list", "tools/call"],
        "{:#?}",
        fx.summary()
    );
    let calls = fx.rpc("tools/call");
    assert_ne!(calls[0].id(), calls[1].id());
    assert_eq!(calls[1].header("mcp-param-region"), Some("eu"));
}

/// The agent with a 2026-07-28 server: an input request nobody can answer ends `nod ask`
/// with the typed input-required result (exit 3), and the request is not sent again; with
/// ACP, it is relayed to the client as elicitation/create and the answer rides on the retry.
#[test]
fn the_agent_meets_input_requests_as_it_meets_elicitations() {
    use crate::ask::{ask, call as model_call};
    use crate::model::{Model, Step};
    let env = Env::new();
    env.fixture(&["--scenario", "modern-only"], json!({}));
    let script = || {
        Model::start(vec![
            Step::Calls(String::new(), vec![model_call("mcp_select_tool", json!({ "name": "mcp_fx_elicit" }))]),
            Step::Calls(String::new(), vec![model_call("mcp_fx_elicit", json!({}))]),
            Step::Text("Greeted.".into()),
        ])
    };
    let model = script();
    let out = ask(&env, &model, &["--full-access", "--json", "greet", "me"]).run();
    out.code(3).within(30.0);
    let report = out.json();
    assert_eq!(report["input_required"]["server"], "fx", "{report}");
    assert_eq!(report["input_required"]["message"], "Please tell me your name");
    assert_eq!(with_method(&env.wire(), "tools/call").len(), 1, "no retry without an answer");
    // ACP: the client answers the relayed question.
    std::fs::remove_file(env.record_path()).unwrap();
    let model = script();
    let mut client = crate::acp::Client::start(&env, &model);
    client.initialize(json!({ "elicitation": { "form": {} } }));
    let server = json!({ "name": "fx", "command": crate::support::FIXTURE,
        "args": ["--scenario", "modern-only", "--record", env.record_path()] });
    let session = client.new_session(&crate::acp::cwd(&env), json!([server]));
    client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    let id = crate::acp::prompt(&mut client, &session, "greet me");
    let mut asked = Vec::new();
    let answer = client.answer_of(id, |request| {
        asked.push(request.clone());
        json!({ "action": "accept", "content": { "name": "Ada" } })
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "elicitation/create");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    let calls = with_method(&env.wire(), "tools/call").into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[1]["params"]["inputResponses"]["name"]["content"]["name"], "Ada");
}

/// Cancelling while a 2026 input request is being answered sends no retry, even when the
/// answer comes after the cancellation.
#[test]
fn a_cancel_while_input_is_collected_sends_no_retry() {
    use crate::ask::call as model_call;
    use crate::model::{Model, Step};
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![model_call("mcp_select_tool", json!({ "name": "mcp_fx_elicit" }))]),
        Step::Calls(String::new(), vec![model_call("mcp_fx_elicit", json!({}))]),
    ]);
    let mut client = crate::acp::Client::start(&env, &model);
    client.initialize(json!({ "elicitation": { "form": {} } }));
    let server = json!({ "name": "fx", "command": crate::support::FIXTURE,
        "args": ["--scenario", "modern-only", "--record", env.record_path()],
        "env": [{ "name": "NOD_IT_MARKER", "value": env.marker_env()["NOD_IT_MARKER"] }] });
    let session = client.new_session(&crate::acp::cwd(&env), json!([server]));
    client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    let id = crate::acp::prompt(&mut client, &session, "greet me");
    let asked = client.until_method("elicitation/create");
    client.send(&json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }));
    let answer = client.until_answer(id);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // A late answer to the withdrawn question changes nothing.
    client.send(
        &json!({ "jsonrpc": "2.0", "id": asked["id"], "result": { "action": "accept", "content": { "name": "Ada" } } }),
    );
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    assert_eq!(with_method(&env.wire(), "tools/call").len(), 1, "{:#?}", env.wire());
    env.assert_no_leftovers();
}

/// The names of this process's threads (Linux: at most 15 bytes each).
fn thread_names() -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let comm = |task: std::fs::DirEntry| std::fs::read_to_string(task.path().join("comm")).ok();
    tasks.filter_map(Result::ok).filter_map(comm).map(|name| name.trim_end().to_string()).collect()
}

/// A round of input runs on a thread that its call owns: dropping the call while the person
/// has not answered yet ends that thread and joins it, instead of leaving it to its timeout.
#[test]
fn a_dropped_call_joins_the_thread_of_its_input_round() {
    use nod::dispatch::{CallUpdate, InboundHandler, Responder, ServerRequest};
    use std::sync::{Arc, Mutex};
    /// Keeps every question unanswered, and says when one came.
    struct Silent(Mutex<Vec<Responder>>, crossbeam_channel::Sender<()>);
    impl InboundHandler for Silent {
        fn request(&self, _: ServerRequest, responder: Responder) {
            self.0.lock().unwrap().push(responder);
            let _ = self.1.send(());
        }
    }
    let env = Env::new();
    // A server name no other test uses: the thread is found by its name among all of this
    // process's threads, and other tests run input rounds of their own on `fx` meanwhile.
    let name = "drop1";
    let entry = env.fixture_entry(&["--scenario", "modern-only"], json!({ "operation_timeout_ms": 60000 }));
    env.profile(json!({ "mcp": { name: entry } }));
    let loaded = nod::config::profile::load(&env.path("mcp.json"));
    let (asked_tx, asked) = crossbeam_channel::unbounded();
    let handler = Arc::new(Silent(Mutex::default(), asked_tx));
    let engine = nod::dispatch::Engine::start();
    let session =
        nod::session::Session::connect(&engine, &loaded.servers[0], handler, &Default::default()).expect("connect");
    let mut call = session.call_tool("elicit", json!({}), None);
    let wait = Duration::from_secs(10);
    match call.updates().recv_timeout(wait) {
        Ok(CallUpdate::Done(finished)) => {
            assert!(session.settle(&mut call, finished.into_result()).is_none(), "an input round")
        }
        other => panic!("{other:?}"),
    }
    asked.recv_timeout(wait).expect("the question reached the handler");
    // "nod-input:drop1" is the 15 bytes a Linux thread name can hold.
    let round = format!("nod-input:{name}");
    // A new thread names itself once it runs.
    let named = std::time::Instant::now() + wait;
    while !thread_names().contains(&round) {
        assert!(std::time::Instant::now() < named, "no thread {round}: {:?}", thread_names());
        std::thread::sleep(Duration::from_millis(5));
    }
    let dropped = std::time::Instant::now();
    drop(call);
    assert!(dropped.elapsed() < Duration::from_secs(2), "the drop waited {:?}", dropped.elapsed());
    // The kernel wakes a joiner before it retires the joined thread's task, so its entry in
    // /proc may outlast the join by a moment; not by the round's 60 s timeout.
    let retired = std::time::Instant::now() + Duration::from_secs(1);
    while thread_names().contains(&round) {
        assert!(std::time::Instant::now() < retired, "the round's thread outlived its call: {:?}", thread_names());
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(session);
    engine.shutdown();
}

#[test]
fn a_slow_starting_2026_server_connects_on_its_first_contact() {
    // It wakes after the probe's 5 s: the probe's answer comes late, and it refuses the
    // initialize nod sent meanwhile (issue 21.1: three of four Python servers, cold).
    let env = Env::new();
    let script = format!("sleep 6; exec {FIXTURE} --scenario modern-only --record {}", env.record_path().display());
    env.profile(json!({ "mcp": { "slow": { "command": ["sh", "-c", script], "env": env.marker_env(),
        "startup_timeout_ms": 20000 } } }));
    let out = env.nod(["mcp", "tool", "call", "slow", "echo", r#"{"message":"late"}"#]).timeout(40).run();
    out.code(0).stdout_has("late");
    let health = env.nod(["mcp", "list", "--connect"]).timeout(40).run();
    health.code(0).stdout_has("protocol=2026-07-28");
    env.assert_no_leftovers();
}

#[test]
fn servers_connected_at_once_all_have_their_verdicts_remembered() {
    // Eight servers learn their revision on threads of their own; every verdict must reach
    // revisions.json (one read-modify-write at a time), so the next run probes none of them.
    let env = Env::new();
    let servers: serde_json::Map<String, Value> =
        (0..8).map(|i| (format!("s{i}"), env.fixture_entry(&["--scenario", "basic"], json!({})))).collect();
    env.profile(json!({ "mcp": servers }));
    env.nod(["mcp", "list", "--connect"]).timeout(30).run().code(0);
    let first = methods(&env.wire());
    assert_eq!(first.iter().filter(|m| *m == "server/discover").count(), 8, "{first:?}");
    let revisions: Value = serde_json::from_str(&std::fs::read_to_string(env.path("revisions.json")).unwrap()).unwrap();
    assert_eq!(revisions.as_object().map(|m| m.len()), Some(8), "{revisions}");
    std::fs::remove_file(env.record_path()).unwrap();
    env.nod(["mcp", "list", "--connect"]).timeout(30).run().code(0);
    let second = methods(&env.wire());
    assert_eq!(second.iter().filter(|m| *m == "initialize").count(), 8, "{second:?}");
    assert!(!second.contains(&"server/discover".to_string()), "{second:?}");
    env.assert_no_leftovers();
}
