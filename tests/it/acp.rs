//! `nod acp` driven by a scripted ACP client over NDJSON: the fake model endpoint, the fixture
//! (stdio, given by the client) and an in-process Streamable HTTP server; permission and
//! elicitation requests answered per test.

use std::io::{BufRead, BufReader, Write};
use std::process::ChildStdin;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ask::call;
use crate::http_fixture::{Fixture, standard};
use crate::model::{Model, Step, tool_messages};
use crate::run::Running;
use crate::support::{Env, FIXTURE};

/// A scripted ACP client: what it sent and received, in order.
pub struct Client {
    running: Option<Running>,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: i64,
    /// Every message nod sent, in order.
    pub seen: Vec<Value>,
    /// Both directions in order: (true: to nod, message).
    pub wire: Vec<(bool, Value)>,
}

impl Client {
    pub fn start(env: &Env, model: &Model) -> Client {
        Client::start_with(env, model, &[])
    }

    pub fn start_with(env: &Env, model: &Model, extra: &[(&str, &str)]) -> Client {
        let mut cmd = env
            .nod(["acp"])
            .env("NOD_BASE_URL", model.url())
            .env("NOD_MODEL", "fake-model")
            .stdin_pipe()
            .stdout_pipe()
            .timeout(60);
        for (key, value) in extra {
            cmd = cmd.env(key, *value);
        }
        let mut running = cmd.spawn();
        let stdin = running.take_stdin();
        let stdout = running.take_stdout();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("nod acp wrote a line that is not JSON on stdout: {line:?}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Client { running: Some(running), stdin: Some(stdin), lines, next_id: 100, seen: Vec::new(), wire: Vec::new() }
    }

    pub fn send(&mut self, message: &Value) {
        self.wire.push((true, message.clone()));
        self.write(format!("{message}\n").as_bytes());
    }

    pub fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to nod acp");
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// The next message from nod, within 30 s.
    pub fn next(&mut self) -> Value {
        match self.lines.recv_timeout(Duration::from_secs(30)) {
            Ok(value) => {
                self.seen.push(value.clone());
                self.wire.push((false, value.clone()));
                value
            }
            Err(RecvTimeoutError::Timeout) => panic!("nod acp sent nothing in 30 s; so far: {:#?}", self.seen),
            Err(RecvTimeoutError::Disconnected) => panic!("nod acp closed stdout; so far: {:#?}", self.seen),
        }
    }

    /// Reads until the answer to `id`, handing nod's requests to `answer` (which returns the
    /// result to send back). Returns the answer.
    pub fn answer_of(&mut self, id: i64, mut answer: impl FnMut(&Value) -> Value) -> Value {
        loop {
            let message = self.next();
            if message.get("method").is_some() && message.get("id").is_some() {
                let result = answer(&message);
                self.send(&json!({ "jsonrpc": "2.0", "id": message["id"], "result": result }));
                continue;
            }
            if message.get("method").is_none() && message["id"] == id {
                return message;
            }
        }
    }

    /// Reads until nod sends a request (or notification) with `method`; returns it, leaving
    /// it unanswered.
    pub fn until_method(&mut self, method: &str) -> Value {
        loop {
            let message = self.next();
            if message["method"] == method {
                return message;
            }
        }
    }

    /// Reads until the answer to `id`, leaving nod's requests meanwhile unanswered.
    pub fn until_answer(&mut self, id: i64) -> Value {
        loop {
            let message = self.next();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// `request`, then `answer_of`, refusing any request from nod.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.answer_of(id, |request| panic!("unexpected request from nod: {request}"))
    }

    pub fn initialize(&mut self, capabilities: Value) -> Value {
        self.call(
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": capabilities,
            "clientInfo": { "name": "nod-it", "version": "0" } }),
        )
    }

    /// A new session in `cwd` with `servers`; its id.
    pub fn new_session(&mut self, cwd: &str, servers: Value) -> String {
        let answer = self.call("session/new", json!({ "cwd": cwd, "mcpServers": servers }));
        answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_string()
    }

    /// The `session/update` notifications seen, as (sessionUpdate, update).
    pub fn updates(&self) -> Vec<(String, Value)> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| {
                (
                    m["params"]["update"]["sessionUpdate"].as_str().unwrap_or("").to_string(),
                    m["params"]["update"].clone(),
                )
            })
            .collect()
    }

    /// The text of the `agent_message_chunk` updates.
    pub fn said(&self) -> String {
        self.updates()
            .iter()
            .filter(|(kind, _)| kind == "agent_message_chunk")
            .map(|(_, u)| u["content"]["text"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// The conversation, one message a line: `→` to nod, `←` from nod.
    pub fn transcript(&self) -> String {
        self.wire.iter().map(|(to, m)| format!("{} {m}\n", if *to { "→" } else { "←" })).collect()
    }

    /// Closes stdin and waits for nod to exit: its exit code and stderr.
    #[must_use]
    pub fn finish(mut self) -> (Option<i32>, String) {
        self.stdin.take();
        let out = self.running.take().unwrap().wait();
        (out.code, out.stderr.clone())
    }
}

/// ACP's prompt-turn rule: every tool call announced while prompt `id` ran has a last
/// update with status `completed` or `failed`, and it came before the prompt's answer.
/// Returns the ids of those calls with their final update.
pub(crate) fn every_call_ended_before_the_answer(client: &Client, id: i64) -> Vec<(String, Value)> {
    let asked = client.wire.iter().position(|(to, m)| *to && m["id"] == id && m["method"].is_string());
    let asked = asked.unwrap_or_else(|| panic!("prompt {id} was never sent"));
    let answered = client.wire.iter().position(|(to, m)| !*to && m["id"] == id && m.get("method").is_none());
    let answered = answered.unwrap_or_else(|| panic!("prompt {id} was not answered: {}", client.transcript()));
    let update = |m: &Value| m["params"]["update"].clone();
    let is_call = |m: &Value| {
        m["method"] == "session/update"
            && matches!(m["params"]["update"]["sessionUpdate"].as_str(), Some("tool_call" | "tool_call_update"))
    };
    let mut last: Vec<(String, Value)> = Vec::new();
    for (to, m) in &client.wire[asked..answered] {
        if *to || !is_call(m) {
            continue;
        }
        let u = update(m);
        let call = u["toolCallId"].as_str().unwrap_or("").to_string();
        match last.iter_mut().find(|(c, _)| *c == call) {
            Some(entry) if u.get("status").is_some() => entry.1 = u,
            Some(_) => {}
            None => last.push((call, u)),
        }
    }
    assert!(!last.is_empty(), "no tool call in the turn: {}", client.transcript());
    for (call, u) in &last {
        assert!(
            matches!(u["status"].as_str(), Some("completed" | "failed")),
            "tool call {call} has no final status before the answer (last: {u}):\n{}",
            client.transcript()
        );
    }
    let ours = |m: &Value| last.iter().any(|(c, _)| update(m)["toolCallId"] == c.as_str());
    let late: Vec<&Value> =
        client.wire[answered..].iter().filter(|(to, m)| !*to && is_call(m) && ours(m)).map(|(_, m)| m).collect();
    assert!(late.is_empty(), "updates of the turn's calls after its answer: {late:?}");
    last
}

pub(crate) fn fixture_server(env: &Env, name: &str) -> Value {
    json!({ "name": name, "command": FIXTURE, "args": ["--record", env.record_path()],
        "env": [{ "name": "NOD_IT_MARKER", "value": env.marker_env()["NOD_IT_MARKER"] }] })
}

pub(crate) fn cwd(env: &Env) -> String {
    let dir = env.path("ws");
    std::fs::create_dir_all(&dir).unwrap();
    dir.display().to_string()
}

pub(crate) fn prompt(client: &mut Client, session: &str, text: &str) -> i64 {
    client.request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }))
}

#[test]
fn initialize_guards_the_protocol_and_bad_messages_get_errors() {
    let env = Env::new();
    let model = Model::start(vec![]);
    let mut client = Client::start(&env, &model);
    let early = client.call("session/new", json!({ "cwd": "/", "mcpServers": [] }));
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let init = client.initialize(json!({ "elicitation": { "form": {} } }));
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentCapabilities"]["mcpCapabilities"], json!({ "http": true, "sse": true }));
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(result["agentInfo"]["name"], "nod");
    let again = client.initialize(json!({}));
    assert_eq!(again["error"]["code"], -32600, "{again}");
    client.write(b"this is not json\n");
    let parse = client.next();
    assert_eq!((parse["id"].clone(), parse["error"]["code"].clone()), (Value::Null, json!(-32700)), "{parse}");
    client.send(&json!({ "id": 7, "method": "initialize" }));
    assert_eq!(client.next()["error"]["code"], -32600);
    let unknown = client.call("session/delete", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    // A message over 8 MiB is an error, and the next one works.
    let mut big = br#"{"jsonrpc":"2.0","id":8,"method":"x","params":{"pad":""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 9 * 1024 * 1024));
    big.extend_from_slice(b"\"}}\n");
    client.write(&big);
    let oversize = client.next();
    assert_eq!((oversize["id"].clone(), oversize["error"]["code"].clone()), (Value::Null, json!(-32600)), "{oversize}");
    let malformed =
        client.call("session/new", json!({ "cwd": cwd(&env), "mcpServers": [{ "name": "bad", "command": "" }] }));
    assert_eq!(malformed["error"]["code"], -32602, "{malformed}");
    assert!(malformed["error"]["message"].as_str().unwrap().contains("\"bad\""), "{malformed}");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_turn_calls_a_client_server_tool_with_permission_and_updates() {
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls("Checking.".into(), vec![call("capability_search", json!({ "query": "echo message" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "from acp" }))]),
        Step::Text("It echoed.".into()),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "echo something");
    let mut asked = Vec::new();
    let answer = client.answer_of(id, |request| {
        asked.push(request.clone());
        json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } })
    });
    assert_eq!(answer["result"], json!({ "stopReason": "end_turn" }), "{answer}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "session/request_permission");
    let options: Vec<&str> =
        asked[0]["params"]["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(options, ["allow_once", "allow_always", "reject_once"]);
    assert_eq!(asked[0]["params"]["toolCall"]["rawInput"], json!({ "message": "from acp" }));
    assert_eq!(client.said(), "Checking.It echoed.");
    let calls: Vec<(String, Value)> =
        client.updates().into_iter().filter(|(kind, _)| kind.starts_with("tool_call")).collect();
    let echo_id = asked[0]["params"]["toolCall"]["toolCallId"].clone();
    let statuses: Vec<(&str, &str)> = calls
        .iter()
        .filter(|(_, u)| u["toolCallId"] == echo_id)
        .map(|(kind, u)| (kind.as_str(), u["status"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        statuses,
        [("tool_call", "pending"), ("tool_call_update", "in_progress"), ("tool_call_update", "completed")]
    );
    let done = calls.iter().rfind(|(_, u)| u["toolCallId"] == echo_id).unwrap();
    assert!(done.1["content"][0]["content"]["text"].as_str().unwrap().contains("from acp"), "{done:?}");
    assert!(tool_messages(&model.requests()[2])[1].1.contains("from acp"));
    if std::env::var_os("NOD_IT_TRANSCRIPT").is_some() {
        eprintln!("{}", client.transcript());
    }
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
    env.assert_no_leftovers();
}

#[test]
fn permission_always_is_remembered_and_reject_fails_the_call() {
    let env = Env::new();
    let echo = |message: &str| Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": message }))]);
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
        echo("one"),
        echo("two"),
        Step::Text("First turn done.".into()),
        echo("three"),
        Step::Text("Second turn done.".into()),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "twice");
    let mut asks = 0;
    client.answer_of(id, |_| {
        asks += 1;
        json!({ "outcome": { "outcome": "selected", "optionId": "allow_always" } })
    });
    assert_eq!(asks, 1, "allow_always covers the second call");
    // The grant lasts for the session: the next turn's call is not asked about either.
    let id = prompt(&mut client, &session, "once more");
    let answer = client.answer_of(id, |_| panic!("the grant holds for the session"));
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
    let sent: Vec<String> = env
        .wire()
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["arguments"]["message"].to_string())
        .collect();
    assert_eq!(sent, [r#""one""#, r#""two""#, r#""three""#]);
    env.assert_no_leftovers();
}

#[test]
fn a_rejected_call_fails_and_reaches_the_model_as_denied() {
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "no" }))]),
        Step::Text("Not allowed.".into()),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "try");
    client.answer_of(id, |_| json!({ "outcome": { "outcome": "selected", "optionId": "reject_once" } }));
    let failed = client.updates().into_iter().rfind(|(kind, u)| kind == "tool_call_update" && u["status"] == "failed");
    assert!(failed.is_some(), "{:?}", client.updates());
    assert!(tool_messages(&model.requests()[2])[1].1.contains("user_denied"));
    assert!(env.wire().iter().all(|m| m["method"] != "tools/call"), "nothing reached the server");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
}

#[test]
fn cancel_during_a_tool_call_cancels_it_on_the_wire_and_the_prompt_answers_cancelled() {
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_hang" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_hang", json!({}))]),
        Step::Text("After the cancel.".into()),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let set = client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    assert_eq!(set["result"], json!({}), "{set}");
    let id = prompt(&mut client, &session, "hang");
    env.wait_for_wire("tools/call", Duration::from_secs(20));
    client.send(&json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }));
    let answer = client.answer_of(id, |r| panic!("unexpected {r}"));
    assert_eq!(answer["result"], json!({ "stopReason": "cancelled" }), "{answer}");
    // The running call ends as failed before the answer, so an editor stops its spinner.
    let ended = every_call_ended_before_the_answer(&client, id);
    let hang = ended.iter().find(|(_, u)| u["status"] == "failed").expect("the hang call failed");
    assert_eq!(hang.1["content"][0]["content"]["text"], "cancelled", "{hang:?}");
    let cancelled = env.wait_for_wire("notifications/cancelled", Duration::from_secs(20));
    assert_eq!(cancelled["params"]["reason"], "client cancelled");
    // The session goes on.
    let id = prompt(&mut client, &session, "still there?");
    let answer = client.answer_of(id, |r| panic!("unexpected {r}"));
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(client.said().contains("After the cancel."));
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    env.assert_no_leftovers();
}

#[test]
fn elicitation_is_relayed_in_the_clients_mode_and_refused_otherwise() {
    let env = Env::new();
    let elicit = || Step::Calls(String::new(), vec![call("mcp_fx_elicit", json!({}))]);
    let select = || Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_elicit" }))]);
    let model = Model::start(vec![
        select(),
        elicit(),
        Step::Text("Thanks.".into()),
        select(),
        elicit(),
        Step::Text("Could not.".into()),
    ]);
    // A client with forms.
    let mut client = Client::start(&env, &model);
    client.initialize(json!({ "elicitation": { "form": {} } }));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    let id = prompt(&mut client, &session, "ask me");
    let mut relayed = Vec::new();
    let answer = client.answer_of(id, |request| {
        relayed.push(request.clone());
        json!({ "action": "accept", "content": { "name": "Grace", "age": 36, "ok": true, "color": "red" } })
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(relayed.len(), 1);
    assert_eq!(relayed[0]["method"], "elicitation/create");
    let params = &relayed[0]["params"];
    assert_eq!((params["mode"].as_str(), params["sessionId"].as_str()), (Some("form"), Some(session.as_str())));
    assert!(
        params["toolCallId"].is_string() && params["requestedSchema"]["properties"]["name"].is_object(),
        "{params}"
    );
    assert!(tool_messages(&model.requests()[2])[1].1.contains(r#""name":"Grace""#));
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    let declared = env.wire().into_iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(declared["params"]["capabilities"]["elicitation"], json!({ "form": {} }), "{declared}");

    // A client without elicitation: the server gets cancel, the call fails clearly.
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    let id = prompt(&mut client, &session, "ask me");
    let answer = client.answer_of(id, |r| panic!("nothing is relayed: {r}"));
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let failed =
        client.updates().into_iter().rfind(|(kind, u)| kind == "tool_call_update" && u["status"] == "failed").unwrap();
    let text = failed.1["content"][0]["content"]["text"].as_str().unwrap().to_string();
    assert!(text.contains("asked for input in form mode, which this ACP client does not support"), "{text}");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    env.assert_no_leftovers();
}

#[test]
fn two_sessions_run_at_once_each_with_its_own_servers() {
    let env = Env::new();
    let http = Fixture::start(standard);
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_slow" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_slow", json!({ "ms": 1500 }))]),
        // While the slow call runs, the web session takes the next three answers.
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_web_echo" }))]),
        Step::Calls(String::new(), vec![call("mcp_web_echo", json!({}))]),
        Step::Text("Web one done.".into()),
        Step::Text("Slow one done.".into()),
    ]);
    let mut client = Client::start_with(&env, &model, &[("NOD_PERMISSION_MODE", "full-access")]);
    client.initialize(json!({}));
    let slow = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let web = client.new_session(
        &cwd(&env),
        json!([{ "type": "http", "name": "web", "url": http.url("/mcp"), "headers": [{ "name": "Authorization", "value": "Bearer acp-canary" }] }]),
    );
    assert_ne!(slow, web);
    let first = prompt(&mut client, &slow, "slow");
    env.wait_for_wire("tools/call", Duration::from_secs(20));
    let started = Instant::now();
    let second = prompt(&mut client, &web, "web");
    let busy = prompt(&mut client, &slow, "meanwhile");
    let mut answers = Vec::new();
    while answers.len() < 3 {
        let message = client.next();
        if message.get("method").is_none() {
            answers.push(message);
        }
    }
    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).unwrap().clone();
    assert_eq!(by_id(busy)["error"]["code"], -32600, "one prompt at a time per session");
    assert_eq!(by_id(second)["result"]["stopReason"], "end_turn");
    assert_eq!(by_id(first)["result"]["stopReason"], "end_turn");
    let web_done = answers.iter().position(|a| a["id"] == second).unwrap();
    let slow_done = answers.iter().position(|a| a["id"] == first).unwrap();
    assert!(web_done < slow_done, "the web session did not wait for the slow one ({:?})", started.elapsed());
    let auth = http.rpc("tools/call")[0].header("authorization").map(str::to_string);
    assert_eq!(auth.as_deref(), Some("Bearer acp-canary"), "the client's literal Authorization header is sent");
    let closed = client.call("session/close", json!({ "sessionId": slow }));
    assert_eq!(closed["result"], json!({}));
    let gone = client.call("session/prompt", json!({ "sessionId": slow, "prompt": [{ "type": "text", "text": "x" }] }));
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0));
    assert!(!stderr.contains("acp-canary"), "{stderr}");
    env.assert_no_leftovers();
}

#[test]
fn closing_stdin_mid_turn_leaves_nothing_running() {
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_hang" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_hang", json!({}))]),
    ]);
    let mut client = Client::start_with(&env, &model, &[("NOD_PERMISSION_MODE", "full-access")]);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    prompt(&mut client, &session, "hang");
    env.wait_for_wire("tools/call", Duration::from_secs(20));
    let started = Instant::now();
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    env.assert_no_leftovers();
}

#[test]
fn the_profile_is_never_inherited_and_approved_project_servers_join() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "echo" }))]),
        Step::Text("Searched.".into()),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([]));
    let id = prompt(&mut client, &session, "what can you do?");
    client.answer_of(id, |r| panic!("unexpected {r}"));
    let found = &tool_messages(&model.requests()[1])[0].1;
    assert!(found.contains("No MCP servers are configured"), "the profile's fx is not used: {found}");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    assert!(env.wire().is_empty(), "the profile's server never started");
}

#[test]
fn cancel_while_a_permission_request_is_open_ends_the_turn_cancelled() {
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "never" }))]),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "echo");
    let asked = client.until_method("session/request_permission");
    client.send(&json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }));
    let answer = client.until_answer(id);
    assert_eq!(answer["result"], json!({ "stopReason": "cancelled" }), "{answer}");
    every_call_ended_before_the_answer(&client, id);
    let withdrawn =
        client.seen.iter().any(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == asked["id"]);
    assert!(withdrawn, "nod withdraws its open request: {:#?}", client.seen);
    // A late answer to the withdrawn request is ignored.
    client.send(&json!({ "jsonrpc": "2.0", "id": asked["id"], "result": { "outcome": { "outcome": "cancelled" } } }));
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    assert!(env.wire().iter().all(|m| m["method"] != "tools/call"));
    env.assert_no_leftovers();
}
