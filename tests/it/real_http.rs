//! Real servers over HTTP: server-everything in its streamableHttp and sse modes, and a server
//! on the official Python SDK over Streamable HTTP, legacy SSE and stdio. Each test starts its
//! own server on a free loopback port. `#[ignore]`d like `real`: run with
//! `cargo test -- --include-ignored`, which fails them when the servers are missing.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::Env;

/// A server process, killed and reaped when the test ends.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cache(var: &str, default: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(default),
    }
}

fn missing(what: &str) -> Option<Server> {
    panic!("{what} is not installed; bash .ci/run installs it")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts `command` and waits (bounded) until its port accepts connections.
fn start(mut command: Command, port: u16) -> Server {
    let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start server");
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the server did not listen on port {port} within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

fn everything(mode: &str) -> Option<Server> {
    let index = cache("NOD_TEST_NPM", ".cache/nod-ci/npm")
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !index.exists() {
        return missing("@modelcontextprotocol/server-everything");
    }
    let port = free_port();
    let loopback = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/node/loopback.cjs");
    let mut command = Command::new("node");
    command.arg("-r").arg(loopback).arg(index).arg(mode).env("PORT", port.to_string());
    Some(start(command, port))
}

fn python() -> Option<PathBuf> {
    let python = cache("NOD_TEST_VENV", ".cache/nod-ci/venv").join("bin/python");
    let ok = python.exists()
        && Command::new(&python)
            .args(["-c", "import mcp.server.mcpserver"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    ok.then_some(python)
}

fn python_server(mode: &str) -> Option<Server> {
    let Some(python) = python() else { return missing("the Python mcp package (venv)") };
    let port = free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/python/server.py");
    let mut command = Command::new(python);
    command.arg(script).arg(mode).arg(port.to_string());
    Some(start(command, port))
}

fn remote(env: &Env, kind: &str, url: String) {
    env.profile(json!({ "mcp": { "rem": { "type": kind, "url": url, "operation_timeout_ms": 30000 } } }));
}

fn health(env: &Env) -> Value {
    let out = env.nod(["mcp", "list", "--connect", "--json"]).timeout(60).run();
    out.code(0);
    out.json()["servers"][0].clone()
}

fn check_everything(env: &Env, protocol: &str) {
    let health = health(env);
    assert_eq!(health["state"], "ready", "{health}");
    assert_eq!(health["protocol_version"], protocol);
    assert!(health["tools"].as_u64().unwrap() >= 13, "{health}");
    assert_eq!(
        (health["resources"].as_u64(), health["templates"].as_u64(), health["prompts"].as_u64()),
        (Some(7), Some(2), Some(4))
    );
    env.nod(["mcp", "tool", "call", "rem", "echo", r#"{"message":"over the wire"}"#])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("Echo: over the wire");
    env.nod(["mcp", "tool", "call", "rem", "get-sum", r#"{"a":2,"b":3}"#]).timeout(60).run().code(0).stdout_has("5");
    env.nod(["mcp", "tool", "call", "rem", "trigger-long-running-operation", r#"{"duration":1,"steps":2}"#])
        .timeout(60)
        .run()
        .code(0)
        .stderr_has("progress 2/2");
    env.nod(["mcp", "tool", "call", "rem", "trigger-elicitation-request", "--elicit", "decline"])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("decline");
    let out = env.nod(["mcp", "tool", "call", "rem", "trigger-elicitation-request"]).timeout(60).run();
    out.code(3);
    assert_eq!(out.json()["status"], "input_required");
    env.nod(["mcp", "resource", "read", "rem", "demo://resource/static/document/architecture.md"])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("Architecture");
    env.nod(["mcp", "prompt", "get", "rem", "args-prompt", r#"{"city":"Paris"}"#])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("Paris");
    env.nod(["mcp", "prompt", "complete", "rem", "completable-prompt", "department", "E"])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("Engineering");
    env.nod(["mcp", "resource", "complete", "rem", "demo://resource/dynamic/text/{resourceId}", "resourceId", "3"])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("3");
}

#[test]
#[ignore = "needs the MCP servers from npm and the Python SDK; cargo test -- --include-ignored (README)"]
fn everything_over_streamable_http() {
    let Some(server) = everything("streamableHttp") else { return };
    let env = Env::new();
    remote(&env, "http", format!("http://127.0.0.1:{}/mcp", server.port));
    check_everything(&env, "2025-11-25");
}

#[test]
#[ignore = "needs the MCP servers from npm and the Python SDK; cargo test -- --include-ignored (README)"]
fn everything_over_legacy_sse() {
    let Some(server) = everything("sse") else { return };
    let env = Env::new();
    remote(&env, "sse", format!("http://127.0.0.1:{}/sse", server.port));
    check_everything(&env, "2025-11-25");
}

#[test]
#[ignore = "needs the MCP servers from npm and the Python SDK; cargo test -- --include-ignored (README)"]
fn an_http_entry_falls_back_to_legacy_sse() {
    let Some(server) = everything("sse") else { return };
    let env = Env::new();
    remote(&env, "http", format!("http://127.0.0.1:{}/sse", server.port));
    let health = health(&env);
    assert_eq!(health["state"], "ready", "{health}");
    env.nod(["mcp", "tool", "call", "rem", "echo", r#"{"message":"fallback"}"#])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("Echo: fallback");
}

/// The Python SDK server's whole surface; `protocol`: the revision health must show (the SDK
/// is dual-era: nod finds 2026-07-28 over stdio and Streamable HTTP unless pinned).
fn check_python(env: &Env, protocol: Option<&str>) {
    let health = health(env);
    assert_eq!(health["state"], "ready", "{health}");
    if let Some(protocol) = protocol {
        assert_eq!(health["protocol_version"], protocol, "{health}");
    }
    assert_eq!(
        (health["tools"].as_u64(), health["templates"].as_u64(), health["prompts"].as_u64()),
        (Some(2), Some(1), Some(1))
    );
    env.nod(["mcp", "tool", "call", "rem", "add", r#"{"a":2,"b":40}"#]).timeout(60).run().code(0).stdout_has("42");
    env.nod(["mcp", "tool", "call", "rem", "shout", r#"{"text":"hey"}"#]).timeout(60).run().code(0).stdout_has("HEY");
    env.nod(["mcp", "resource", "read", "rem", "py://greeting/Ada"])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("Hello, Ada!");
    env.nod(["mcp", "resource", "list", "rem"]).timeout(60).run().code(0).stdout_has("py://static/readme");
    env.nod(["mcp", "prompt", "get", "rem", "review", r#"{"code":"x = 1"}"#])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("x = 1");
    env.nod(["mcp", "tool", "call", "rem", "add", r#"{"a":"not a number"}"#]).timeout(60).run().code(1);
    env.nod(["mcp", "resource", "complete", "rem", "py://greeting/{name}", "name", "A"])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("Ada")
        .stdout_has("Alan")
        .stdout_lacks("Grace");
    env.nod(["mcp", "prompt", "complete", "rem", "review", "code", "pr"])
        .timeout(60)
        .run()
        .code(0)
        .stdout_has("print(1)");
}

#[test]
#[ignore = "needs the MCP servers from npm and the Python SDK; cargo test -- --include-ignored (README)"]
fn python_sdk_over_streamable_http() {
    let Some(server) = python_server("streamable-http") else { return };
    let env = Env::new();
    remote(&env, "http", format!("http://127.0.0.1:{}/mcp", server.port));
    check_python(&env, Some("2026-07-28"));
    // The same server in the initialize era, pinned: everything works there too.
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    env.profile(json!({ "mcp": { "rem": { "type": "http", "url": url, "protocol_version": "2025-11-25" } } }));
    check_python(&env, Some("2025-11-25"));
}

#[test]
#[ignore = "needs the MCP servers from npm and the Python SDK; cargo test -- --include-ignored (README)"]
fn python_sdk_over_legacy_sse() {
    let Some(server) = python_server("sse") else { return };
    let env = Env::new();
    remote(&env, "sse", format!("http://127.0.0.1:{}/sse", server.port));
    check_python(&env, None);
}

#[test]
#[ignore = "needs the MCP servers from npm and the Python SDK; cargo test -- --include-ignored (README)"]
fn python_sdk_over_stdio() {
    let Some(python) = python() else {
        missing("the Python mcp package (venv)");
        return;
    };
    let env = Env::new();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/python/server.py");
    env.profile(json!({ "mcp": { "rem": { "command": [python, script], "env": env.marker_env() } } }));
    check_python(&env, Some("2026-07-28"));
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm and the Python SDK; cargo test -- --include-ignored (README)"]
fn acp_sessions_reach_everything_over_stdio_http_and_sse() {
    use crate::acp::Client;
    use crate::ask::call;
    use crate::model::{Model, Step, tool_messages};
    let http = everything("streamableHttp").unwrap();
    let sse = everything("sse").unwrap();
    let bin = cache("NOD_TEST_NPM", ".cache/nod-ci/npm").join("node_modules/.bin/mcp-server-everything");
    let env = Env::new();
    let ws = env.path("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let sum = |server: &str| {
        vec![
            Step::Calls(
                String::new(),
                vec![call("mcp_select_tool", json!({ "name": format!("mcp_{server}_get-sum") }))],
            ),
            Step::Calls(String::new(), vec![call(&format!("mcp_{server}_get-sum"), json!({ "a": 40, "b": 2 }))]),
            Step::Text(format!("{server} says 42.")),
        ]
    };
    let mut steps = sum("local");
    steps.extend(sum("web"));
    steps.extend(sum("old"));
    let model = Model::start(steps);
    let mut client = Client::start_with(&env, &model, &[("NOD_PERMISSION_MODE", "full-access")]);
    client.initialize(json!({}));
    let marker = env.marker_env()["NOD_IT_MARKER"].clone();
    let session = client.new_session(
        &ws.display().to_string(),
        json!([
            { "name": "local", "command": bin, "args": [], "env": [{ "name": "NOD_IT_MARKER", "value": marker }] },
            { "type": "http", "name": "web", "url": format!("http://127.0.0.1:{}/mcp", http.port), "headers": [] },
            { "type": "sse", "name": "old", "url": format!("http://127.0.0.1:{}/sse", sse.port), "headers": [] },
        ]),
    );
    for (i, server) in ["local", "web", "old"].iter().enumerate() {
        let id = client.request(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": format!("sum on {server}") }] }),
        );
        let answer = client.answer_of(id, |r| panic!("nothing is asked in full access: {r}"));
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        let result = tool_messages(&model.requests()[3 * i + 2]).last().unwrap().1.clone();
        assert!(result.contains("42"), "{server}: {result}");
    }
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
    env.assert_no_leftovers();
}
