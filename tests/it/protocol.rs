//! Protocol correctness (the outside review of issue 10): answers checked before use,
//! capabilities respected, listings a server does not implement, URL elicitation required,
//! version walk-down, huge timeouts, tools that require tasks, schema dialects, and made-up
//! elicitation answers checked against the requested schema.

use serde_json::{Value, json};

use crate::http_fixture::{Fixture, Reply, Request, result_msg, standard};
use crate::support::{Env, SERVER};

const NAME: &str = "web";

fn remote(env: &Env, fx: &Fixture) {
    env.profile(json!({ "mcp": { NAME: { "type": "http", "url": fx.url("/mcp"), "operation_timeout_ms": 5000 } } }));
}

fn init_with(req: &Request, capabilities: Value) -> Reply {
    let version = req.json["params"]["protocolVersion"].clone();
    Reply::result(
        req,
        json!({ "protocolVersion": version, "capabilities": capabilities, "serverInfo": { "name": "fx", "version": "1" } }),
    )
}

/// A server whose tools/call answers `result` verbatim.
fn answering(result: Value) -> Fixture {
    Fixture::start(move |req| match req.rpc() {
        Some("tools/call") => Reply::json(&json!({ "jsonrpc": "2.0", "id": req.id(), "result": result.clone() })),
        _ => standard(req),
    })
}

#[test]
fn malformed_answers_are_protocol_errors_never_empty_successes() {
    for (result, why) in [
        (json!(null), "is not a JSON object"),
        (json!("ok"), "is not a JSON object"),
        (json!({}), "has no content"),
        (json!({ "content": "text" }), "content that is not an array"),
        (json!({ "content": [], "isError": "yes" }), "isError"),
    ] {
        let fx = answering(result.clone());
        let env = Env::new();
        remote(&env, &fx);
        let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}"]).timeout(20).run();
        out.code(2).within(10.0).stderr_line_has(&["server web", "tools/call", why]).stdout_lacks("content");
        let json = env.nod(["mcp", "tool", "call", NAME, "echo", "{}", "--json"]).timeout(20).run();
        json.code(2).within(10.0);
        assert_eq!(json.json()["error"]["kind"], "protocol", "{result}: {}", json.dump());
    }
}

#[test]
fn a_prompt_without_messages_is_a_protocol_error() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("initialize") => init_with(req, json!({ "prompts": {} })),
        Some("prompts/get") => Reply::result(req, json!({ "description": "no messages" })),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx);
    let out = env.nod(["mcp", "prompt", "get", NAME, "p"]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["server web", "prompts/get", "has no messages"]);
}

#[test]
fn nothing_is_sent_for_a_capability_the_server_never_declared() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("initialize") => init_with(req, json!({ "prompts": {} })),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx);
    let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}"]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["server web", "does not offer tools"]);
    let out = env.nod(["mcp", "tool", "list", NAME]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["server web", "does not offer tools"]);
    let out = env.nod(["mcp", "resource", "read", NAME, "file:///x"]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["server web", "does not offer resources"]);
    let sent: Vec<String> = fx.requests().iter().filter_map(|r| r.rpc().map(str::to_string)).collect();
    assert!(!sent.iter().any(|m| m.starts_with("tools/") || m.starts_with("resources/")), "sent anyway: {sent:?}");
}

#[test]
fn a_listing_the_server_does_not_implement_counts_as_empty() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("initialize") => init_with(req, json!({ "tools": {}, "resources": {} })),
        Some("resources/list") => Reply::result(req, json!({ "resources": [] })),
        Some("resources/templates/list") => Reply::json(&json!({
            "jsonrpc": "2.0", "id": req.id(), "error": { "code": -32601, "message": "Method not found" },
        })),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx);
    let out = env.nod(["mcp", "list", "--connect", "--json"]).timeout(20).run();
    out.code(0).within(10.0);
    let health: Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = &health["servers"][0];
    assert_eq!((server["state"].as_str(), server["templates"].as_u64()), (Some("ready"), Some(0)), "{health}");
}

#[test]
fn url_elicitation_required_is_input_required_with_the_url() {
    let error = json!({ "code": -32042, "message": "This request requires more information.", "data": { "elicitations": [{
        "mode": "url", "elicitationId": "el-7", "url": "https://auth.example.com/connect?x=1",
        "message": "Connect your account first",
    }] } });
    let fx = Fixture::start(move |req| match req.rpc() {
        Some("tools/call") => Reply::json(&json!({ "jsonrpc": "2.0", "id": req.id(), "error": error.clone() })),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx);
    let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}", "--json"]).timeout(20).run();
    out.code(3).within(10.0);
    let typed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(typed["status"], "input_required", "{typed}");
    assert_eq!(typed["mode"], "url");
    assert_eq!(typed["url"], "https://auth.example.com/connect?x=1");
    assert_eq!(typed["elicitationId"], "el-7");
    assert_eq!(typed["message"], "Connect your account first");
    let jsonl = env.nod(["mcp", "tool", "call", NAME, "echo", "--jsonl"]).stdin("{}\n").timeout(20).run();
    jsonl.code(3).within(10.0).stdout_has("el-7");
}

#[test]
fn a_refused_version_walks_down_to_an_older_revision() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("initialize") if req.json["params"]["protocolVersion"] != "2025-03-26" => Reply::json(&json!({
            "jsonrpc": "2.0", "id": req.id(), "error": { "code": -32602, "message": "Unsupported protocol version" },
        })),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx);
    let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}"]).timeout(20).run();
    out.code(0).within(10.0).stdout_has("called echo");
    let offered: Vec<Value> =
        fx.rpc("initialize").iter().map(|r| r.json["params"]["protocolVersion"].clone()).collect();
    assert_eq!(offered, [json!("2025-11-25"), json!("2025-06-18"), json!("2025-03-26")]);
}

#[test]
fn a_refusal_that_does_not_name_2026_is_not_called_a_newer_revision() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("initialize") => Reply::json(&json!({
            "jsonrpc": "2.0", "id": req.id(), "error": { "code": -32602, "message": "Unsupported protocol version" },
        })),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx);
    let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}"]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["server web", "refused initialize"]).stderr_lacks("2026");
    assert_eq!(fx.rpc("initialize").len(), 3, "11-25, 06-18, 03-26 and no more");
}

#[test]
fn the_largest_timeout_does_not_crash_nod() {
    let env = Env::new();
    env.profile(json!({ "mcp": { SERVER: env.fixture_entry(&[], json!({
        "operation_timeout_ms": 18446744073709551615u64,
        "startup_timeout_ms": 18446744073709551615u64,
    })) } }));
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", r#"{"message":"still here"}"#]).timeout(20).run();
    out.code(0).within(10.0).stdout_has("still here");
}

fn tools_fixture() -> Fixture {
    Fixture::start(|req| match req.rpc() {
        Some("tools/list") => Reply::result(
            req,
            json!({ "tools": [
            { "name": "long", "inputSchema": { "type": "object" }, "execution": { "taskSupport": "required" } },
            { "name": "old", "inputSchema": { "$schema": "http://json-schema.org/draft-04/schema#", "type": "object" } },
            { "name": "bad", "inputSchema": { "type": "object", "properties": { "a": { "type": 5 } } } },
            { "name": "seven", "inputSchema": { "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": { "a": { "type": "string" } } } },
            { "name": "out", "inputSchema": { "type": "object" }, "outputSchema": { "type": "object", "required": "no" } },
        ] }),
        ),
        _ => standard(req),
    })
}

#[test]
fn tools_that_require_tasks_are_marked_and_never_called() {
    let fx = tools_fixture();
    let env = Env::new();
    remote(&env, &fx);
    let list = env.nod(["mcp", "tool", "list", NAME]).timeout(20).run();
    list.code(0).within(10.0);
    assert!(list.text().lines().any(|l| l.starts_with("long") && l.contains("[task required]")), "{}", list.text());
    let out = env.nod(["mcp", "tool", "call", NAME, "long", "{}"]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["server web", "long", "requires MCP Tasks"]);
    assert!(fx.rpc("tools/call").is_empty(), "{:#?}", fx.summary());
}

#[test]
fn a_schema_in_another_dialect_or_invalid_makes_only_that_tool_unusable() {
    let fx = tools_fixture();
    let env = Env::new();
    remote(&env, &fx);
    let list = env.nod(["mcp", "tool", "list", NAME]).timeout(20).run();
    list.code(0).within(10.0);
    let line = |name: &str| list.text().lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert!(line("old").contains("[unusable:") && line("old").contains("draft-04"), "{}", list.text());
    assert!(line("bad").contains("[unusable:"), "{}", list.text());
    assert!(line("out").contains("[unusable:") && line("out").contains("outputSchema"), "{}", list.text());
    assert!(!line("seven").contains("unusable"), "Draft 7 is accepted: {}", list.text());
    let json = env.nod(["mcp", "tool", "list", NAME, "--json"]).timeout(20).run();
    let listed: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(listed["tools"].as_array().map(Vec::len), Some(5), "{listed}");
    assert!(listed["unusable"]["old"].is_string() && listed["unusable"].get("seven").is_none(), "{listed}");
    let out = env.nod(["mcp", "tool", "call", NAME, "old", "{}"]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["server web", "old", "unusable"]);
    assert!(fx.rpc("tools/call").is_empty(), "{:#?}", fx.summary());
    env.nod(["mcp", "tool", "call", NAME, "seven", "{}"]).timeout(20).run().code(0).stdout_has("called seven");
}

#[test]
fn elicit_defaults_accepts_only_defaults_that_fit_the_requested_schema() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let fits = json!({ "schema": { "type": "object", "properties": {
        "n": { "type": "integer", "minimum": 1, "maximum": 5, "default": 3 },
    } } });
    let out =
        env.nod(["mcp", "tool", "call", SERVER, "elicit", &fits.to_string(), "--elicit", "defaults"]).timeout(20).run();
    out.code(0).within(10.0).stdout_has(r#""action":"accept""#).stdout_has(r#""n":3"#);
    for (schema, field) in [
        (json!({ "n": { "type": "integer", "maximum": 5, "default": 9 } }), "n"),
        (json!({ "mail": { "type": "string", "format": "email", "default": "not an address" } }), "mail"),
        (json!({ "word": { "type": "string", "maxLength": 2, "default": "long" } }), "word"),
        (json!({ "pick": { "type": "string", "enum": ["a", "b"], "default": "c" } }), "pick"),
    ] {
        let args = json!({ "schema": { "type": "object", "properties": schema } });
        let out = env
            .nod(["mcp", "tool", "call", SERVER, "elicit", &args.to_string(), "--elicit", "defaults"])
            .timeout(20)
            .run();
        out.code(0).within(10.0).stdout_has(r#""action":"decline""#).stderr_line_has(&["declined", field]);
    }
}

/// The same answer checks apply to the envelope of a result that arrives on a stream.
#[test]
fn a_streamed_malformed_answer_is_refused_too() {
    let fx = Fixture::start(|req| match req.rpc() {
        Some("tools/call") => Reply::sse(&[crate::http_fixture::event(None, &result_msg(req, json!(null)))]),
        _ => standard(req),
    });
    let env = Env::new();
    remote(&env, &fx);
    let out = env.nod(["mcp", "tool", "call", NAME, "echo", "{}"]).timeout(20).run();
    out.code(2).within(10.0).stderr_line_has(&["tools/call", "is not a JSON object"]);
}
