//! Subagents: the `subagent` tool through `nod ask` and ACP against the fake model (one script
//! for the parent, one a child, routed by the first user message) and the fixture, whose own
//! record shows what reached it; and, through the library, a child whose view dies while it
//! runs (a reload, a removal, a logout) and whose next call is never sent.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::acp::{Client, cwd, every_call_ended_before_the_answer, fixture_server, prompt};
use crate::ask::{ask, call, settings};
use crate::model::{Gate, Model, Step, first_user, tool_messages, tool_names};
use crate::support::{Env, with_method};

fn run(task: &str) -> (String, String) {
    call("subagent", json!({ "action": "run", "task": task }))
}

fn message(name: &str, text: &str) -> (String, String) {
    call("subagent", json!({ "action": "message", "name": name, "message": text }))
}

fn calls(list: Vec<(String, String)>) -> Step {
    Step::Calls(String::new(), list)
}

/// The requests of the agent whose first user message contains `key`.
fn requests_of(model: &Model, key: &str) -> Vec<Value> {
    model.requests().into_iter().filter(|r| first_user(r).contains(key)).collect()
}

/// The tool results the parent (prompt containing `key`) received, parsed, in order.
fn results_of(model: &Model, key: &str) -> Vec<Value> {
    let requests = requests_of(model, key);
    let last = requests.last().expect("the parent asked the model");
    tool_messages(last).iter().map(|(_, content)| serde_json::from_str(content).unwrap_or(json!(content))).collect()
}

fn echo_calls(wire: &[Value]) -> Vec<String> {
    with_method(wire, "tools/call")
        .iter()
        .filter(|m| m["params"]["name"] == "echo")
        .map(|m| m["params"]["arguments"]["message"].as_str().unwrap_or("").to_string())
        .collect()
}

/// A child's answer as its parent's model receives it: written by a model that read server
/// text, so marked like server text.
fn marked(agent: &str, answer: &str) -> String {
    format!("<untrusted_external source=\"subagent\" agent=\"{agent}\">\n{answer}\n</untrusted_external>")
}

#[test]
fn a_one_off_child_calls_a_tool_and_the_parent_receives_its_answer() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let model = Model::routed(vec![
        (
            "TASK-ECHO",
            vec![
                calls(vec![call("capability_search", json!({ "query": "echo message back" }))]),
                calls(vec![call("mcp_fx_echo", json!({ "message": "forty-two" }))]),
                Step::Text("The echo said forty-two.".into()),
            ],
        ),
        (
            "PARENT",
            vec![calls(vec![run("TASK-ECHO: have the echo tool say forty-two")]), Step::Text("Parent done.".into())],
        ),
    ]);
    let out = ask(&env, &model, &["PARENT: delegate the echo"]).run();
    out.code(0).within(60.0).stdout_has("Parent done.").stderr_has("subagent run-1: mcp_fx_echo done");
    let result = &results_of(&model, "PARENT")[0];
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["agent"], "run-1");
    assert_eq!(result["result"], marked("run-1", "The echo said forty-two."), "a child's answer is marked");
    assert_eq!(
        result["tool_calls"],
        json!([{ "name": "capability_search", "ok": true }, { "name": "mcp_fx_echo", "ok": true }])
    );
    let child = requests_of(&model, "TASK-ECHO");
    assert_eq!(child.len(), 3);
    assert!(!tool_names(&child[0]).contains(&"subagent".to_string()), "a child cannot start children");
    assert!(child[0]["messages"][0]["content"].as_str().unwrap().contains("<subagent>"));
    let echoed = &tool_messages(&child[2])[1].1;
    assert!(echoed.starts_with("<untrusted_external") && echoed.contains("forty-two"), "{echoed}");
    let wire = env.wire();
    assert_eq!(echo_calls(&wire), ["forty-two"]);
    assert_eq!(with_method(&wire, "initialize").len(), 1, "the child used the parent's connection");
    env.assert_no_leftovers();
}

#[test]
fn a_named_child_remembers_refuses_a_second_message_at_once_and_keeps_its_tools() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::routed(vec![
        ("MEMO:", vec![Step::Text("Noted: blue.".into()), Step::Text("You said blue.".into())]),
        (
            "PARENT",
            vec![
                calls(vec![message("scribe", "MEMO: remember the colour blue"), message("scribe", "and this too")]),
                calls(vec![message("scribe", "Which colour did I give you?")]),
                calls(vec![call(
                    "subagent",
                    json!({ "action": "message", "name": "scribe", "message": "now echo", "tools": ["mcp_fx_echo"] }),
                )]),
                Step::Text("Parent done.".into()),
            ],
        ),
    ]);
    ask(&env, &model, &["PARENT: keep notes"]).run().code(0).within(60.0).stdout_has("Parent done.");
    let results = results_of(&model, "PARENT");
    assert_eq!(
        (results[0]["ok"].clone(), results[0]["result"].clone()),
        (json!(true), json!(marked("scribe", "Noted: blue.")))
    );
    assert_eq!(results[1]["error"]["code"], "agent_busy", "{}", results[1]);
    assert_eq!(results[1]["agent"], "scribe");
    assert_eq!(results[2]["result"], marked("scribe", "You said blue."), "{}", results[2]);
    assert_eq!(results[3]["error"]["code"], "override_rejected", "{}", results[3]);
    let child = requests_of(&model, "MEMO:");
    assert_eq!(child.len(), 2, "the busy message and the override never reached the model");
    let history: Vec<String> = child[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .map(String::from)
        .collect();
    for said in ["MEMO: remember the colour blue", "Noted: blue.", "Which colour did I give you?"] {
        assert!(history.iter().any(|h| h == said), "{said:?} not in {history:?}");
    }
}

#[test]
fn a_leading_run_of_subagent_calls_runs_in_parallel() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    // Each child answers only once the other has asked: run one after the other, neither could.
    let model = Model::routed(vec![
        ("PAR-A", vec![Step::After("PAR-B".into(), Box::new(Step::Text("A finished.".into())))]),
        ("PAR-B", vec![Step::After("PAR-A".into(), Box::new(Step::Text("B finished.".into())))]),
        ("PARENT", vec![calls(vec![run("PAR-A: first"), run("PAR-B: second")]), Step::Text("Both done.".into())]),
    ]);
    ask(&env, &model, &["PARENT: two at once"]).run().code(0).within(60.0).stdout_has("Both done.");
    let results = results_of(&model, "PARENT");
    assert_eq!(results[0]["result"], marked("run-1", "A finished."), "{results:?}");
    assert_eq!(results[1]["result"], marked("run-2", "B finished."), "{results:?}");
    assert_eq!((results[0]["agent"].clone(), results[1]["agent"].clone()), (json!("run-1"), json!("run-2")));
}

#[test]
fn a_child_cannot_reach_a_tool_its_parent_is_denied_even_when_it_asks() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow", "mcp_fx_echo": "deny" } }));
    let narrow = |tools: Value| call("subagent", json!({ "action": "run", "task": "DENIED-0", "tools": tools }));
    let model = Model::routed(vec![
        (
            "DENIED-2",
            vec![
                calls(vec![call("capability_search", json!({ "query": "echo message back" }))]),
                calls(vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
                calls(vec![call("mcp_fx_echo", json!({ "message": "sneak" }))]),
                Step::Text("Could not echo.".into()),
            ],
        ),
        (
            "PARENT",
            vec![
                calls(vec![narrow(json!(["mcp_fx_echo"])), narrow(json!(["mcp_fx_*"])), narrow(json!(["mcp_nope_*"]))]),
                calls(vec![run("DENIED-2: make echo say sneak")]),
                Step::Text("Parent done.".into()),
            ],
        ),
    ]);
    ask(&env, &model, &["PARENT: try"]).run().code(0).within(60.0).stdout_has("Parent done.");
    let results = results_of(&model, "PARENT");
    for refused in &results[..3] {
        assert_eq!(refused["error"]["code"], "override_rejected", "{refused}");
    }
    assert!(results[0]["error"]["message"].as_str().unwrap().contains("may not use"), "{}", results[0]);
    assert!(results[2]["error"]["message"].as_str().unwrap().contains("matches no tool"), "{}", results[2]);
    assert!(requests_of(&model, "DENIED-0").is_empty(), "a refused child never starts");
    let child = requests_of(&model, "DENIED-2");
    let search = &tool_messages(&child[1])[0].1;
    assert!(!search.contains("mcp_fx_echo"), "a denied tool is not found: {search}");
    assert!(search.contains("\"mcp_fx_"), "the search itself worked: fx's other tools are found: {search}");
    let select = &tool_messages(&child[2])[1].1;
    assert!(select.contains("Unknown MCP tool: mcp_fx_echo"), "{select}");
    let direct = &tool_messages(&child[3])[2].1;
    assert!(direct.contains("Unsupported tool"), "{direct}");
    assert_eq!(results[3]["ok"], true, "{}", results[3]);
    assert!(echo_calls(&env.wire()).is_empty(), "echo never reached the server");
}

#[test]
fn nothing_admitted_means_mcp_is_disabled_for_the_child() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "deny", "mcp_read_resource": "deny" } }));
    let model = Model::routed(vec![
        (
            "EMPTY",
            vec![
                calls(vec![call("capability_search", json!({ "query": "echo" }))]),
                Step::Text("No tools for me.".into()),
            ],
        ),
        ("PARENT", vec![calls(vec![run("EMPTY: look for tools")]), Step::Text("Parent done.".into())]),
    ]);
    ask(&env, &model, &["PARENT: look"]).run().code(0).within(60.0);
    let child = requests_of(&model, "EMPTY");
    let found: Value = serde_json::from_str(&tool_messages(&child[1])[0].1).unwrap();
    assert_eq!(found["state"], "mcp_disabled", "{found}");
    assert!(found["message"].as_str().unwrap().contains("MCP is disabled for this subagent"));
}

#[test]
fn cancelling_the_parent_cancels_the_childs_call_on_the_wire() {
    let env = Env::new();
    env.fixture(&[], json!({ "operation_timeout_ms": 30000 }));
    let model = Model::routed(vec![
        (
            "SLOW",
            vec![
                calls(vec![call("mcp_select_tool", json!({ "name": "mcp_fx_hang" }))]),
                calls(vec![call("mcp_fx_hang", json!({}))]),
            ],
        ),
        ("PARENT", vec![calls(vec![run("SLOW: wait for hang")])]),
    ]);
    let running = ask(&env, &model, &["--full-access", "PARENT: wait"]).spawn();
    let sent = env.wait_for_wire("tools/call", Duration::from_secs(20));
    // SAFETY: plain kill(2) on the nod process this test started.
    unsafe { libc::kill(running.pid(), libc::SIGINT) };
    running.wait().code(130).within(15.0);
    let wire = env.wire();
    assert!(
        wire.iter().any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == sent["id"]),
        "{wire:?}"
    );
    env.assert_no_leftovers();
}

#[test]
fn a_child_in_acp_asks_through_session_request_permission() {
    let env = Env::new();
    let model = Model::routed(vec![
        (
            "ACP-CHILD",
            vec![
                calls(vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
                calls(vec![call("mcp_fx_echo", json!({ "message": "via child" }))]),
                Step::Text("Child echoed.".into()),
            ],
        ),
        ("PARENT", vec![calls(vec![run("ACP-CHILD: echo via child")]), Step::Text("Parent done.".into())]),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "PARENT: delegate");
    let mut asked = Vec::new();
    let answer = client.answer_of(id, |request| {
        asked.push(request.clone());
        json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } })
    });
    assert_eq!(answer["result"], json!({ "stopReason": "end_turn" }), "{answer}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "session/request_permission");
    let tool_call = &asked[0]["params"]["toolCall"];
    assert_eq!(tool_call["title"], "subagent run-1: mcp_fx_echo (server fx, tool echo)", "{tool_call}");
    assert_eq!(tool_call["rawInput"], json!({ "message": "via child" }));
    assert_eq!(results_of(&model, "PARENT")[0]["result"], marked("run-1", "Child echoed."));
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    assert_eq!(echo_calls(&env.wire()), ["via child"]);
}

#[test]
fn cancel_in_acp_ends_the_childs_calls_and_the_parents_before_the_answer() {
    let env = Env::new();
    let model = Model::routed(vec![
        (
            "WAITING",
            vec![
                calls(vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
                calls(vec![call("mcp_fx_echo", json!({ "message": "never" }))]),
            ],
        ),
        ("PARENT", vec![calls(vec![run("WAITING: echo")])]),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "PARENT: delegate");
    // The child's call waits for permission, shown as a call of its own, when the turn is cancelled.
    let asked = client.until_method("session/request_permission");
    assert!(asked["params"]["toolCall"]["title"].as_str().unwrap().starts_with("subagent "), "{asked}");
    client.send(&json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }));
    let answer = client.until_answer(id);
    assert_eq!(answer["result"], json!({ "stopReason": "cancelled" }), "{answer}");
    let ended = every_call_ended_before_the_answer(&client, id);
    let child = asked["params"]["toolCall"]["toolCallId"].as_str().unwrap();
    assert!(ended.iter().any(|(call, u)| call == child && u["status"] == "failed"), "{ended:?}");
    assert!(ended.len() >= 2, "the parent's subagent call is there too: {ended:?}");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    assert!(echo_calls(&env.wire()).is_empty());
    env.assert_no_leftovers();
}

#[test]
fn closing_the_acp_session_stops_a_child_before_its_next_call() {
    let env = Env::new();
    let gate = Gate::default();
    let model = Model::routed(vec![
        (
            "CLOSING",
            vec![
                calls(vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
                calls(vec![call("mcp_fx_echo", json!({ "message": "first" }))]),
                Step::Gate(gate.clone(), Box::new(calls(vec![call("mcp_fx_echo", json!({ "message": "second" }))]))),
                Step::Text("Never.".into()),
            ],
        ),
        ("PARENT", vec![calls(vec![run("CLOSING: echo twice")]), Step::Text("Never either.".into())]),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    let id = prompt(&mut client, &session, "PARENT: go");
    env.wait_for_wire("tools/call", Duration::from_secs(20));
    let close = client.request("session/close", json!({ "sessionId": session }));
    let (mut answer, mut closed) = (None, None);
    while answer.is_none() || closed.is_none() {
        let message = client.next();
        if message.get("method").is_none() && message["id"] == id {
            answer = Some(message);
        } else if message.get("method").is_none() && message["id"] == close {
            closed = Some(message);
            // Only now may the child's model answer with its next call.
            gate.open();
        }
    }
    let (answer, closed) = (answer.unwrap(), closed.unwrap());
    assert!(closed.get("error").is_none(), "{closed}");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    assert_eq!(echo_calls(&env.wire()), ["first"], "the second call never reached the server");
    env.assert_no_leftovers();
}

/// The library's view of the same thing: a parent agent over a runtime with the fixture, its
/// turn on a thread, and the event happening while its child waits for the model.
mod lib {
    use super::*;
    use nod::agent::limits::Limits;
    use nod::agent::permissions::{Mode, Policy};
    use nod::agent::{Agent, Answer, Approval, Elicited, Level, Options, Report, Surface};
    use nod::dispatch::Engine;
    use nod::provider::Provider;
    use nod::provider::config::ProviderConfig;
    use nod::session::Access;
    use nod::session::elicit::{InputRequired, Policy as ElicitPolicy, PolicyHandler};
    use nod::session::runtime::Runtime;
    use nod::util::Trigger;

    struct Quiet;

    impl Surface for Quiet {
        fn text(&mut self, _: &str) {}
        fn tool_started(&mut self, _: &str, _: &str) {}
        fn tool_finished(&mut self, _: &str, _: bool, _: &str, _: &str) {}
        fn notice(&mut self, _: Level, _: &str) {}
        fn approve(&mut self, _: &Approval) -> Option<Answer> {
            None
        }
        fn elicit(&mut self, _: &InputRequired) -> Elicited {
            Elicited::Unanswerable
        }
    }

    fn runtime(env: &Env, with_fixture: bool) -> Arc<Runtime> {
        if with_fixture {
            env.fixture(&[], json!({}));
        } else {
            env.profile(json!({ "mcp": {} }));
        }
        let loaded = nod::config::profile::load(&env.path("mcp.json"));
        let handler = Arc::new(PolicyHandler::new(ElicitPolicy::Fail, None));
        let runtime = Arc::new(Runtime::new(Engine::start(), loaded.servers, handler, Access::default()));
        assert!(runtime.start_all().is_empty());
        runtime
    }

    /// Runs a parent whose child echoes "first", then (once `event` has happened) tries
    /// "second". Returns the child's result for the second call.
    fn child_call_after(event: impl FnOnce(&Env, &Arc<Runtime>, &nod::agent::subagent::Host)) -> String {
        let env = Env::new();
        let gate = Gate::default();
        let model = Model::routed(vec![
            (
                "LIFE",
                vec![
                    calls(vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
                    calls(vec![call("mcp_fx_echo", json!({ "message": "first" }))]),
                    Step::Gate(
                        gate.clone(),
                        Box::new(calls(vec![call("mcp_fx_echo", json!({ "message": "second" }))])),
                    ),
                    Step::Text("Child done.".into()),
                ],
            ),
            ("PARENT", vec![calls(vec![run("LIFE: echo twice")]), Step::Text("Parent done.".into())]),
        ]);
        let runtime = runtime(&env, true);
        let provider = Provider::new(ProviderConfig {
            base_url: model.url(),
            base_url_from: "the test",
            model: "fake".into(),
            api_key: Some("sk-test".into()),
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
        });
        let policy = Arc::new(Policy::new(Mode::FullAccess, Vec::new()));
        let (_tx, asked) = crossbeam_channel::unbounded();
        let mut agent =
            Agent::new(Some(Arc::new(provider)), runtime.clone(), asked, policy, Limits::default(), Options::default());
        let host = agent.host();
        let (ended, turn) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = ended.send(agent.turn("PARENT: go", &mut Quiet, &Trigger::default()));
        });
        env.wait_for_wire("tools/call", Duration::from_secs(20));
        event(&env, &runtime, &host);
        gate.open();
        let report: Report = turn.recv_timeout(Duration::from_secs(60)).expect("the turn ends within 60 s");
        assert_eq!(report.final_output, "Parent done.", "{report:?}");
        let child = requests_of(&model, "LIFE");
        let second = tool_messages(&child[3]).last().expect("the second call's result").1.clone();
        assert_eq!(echo_calls(&env.wire()), ["first"], "nothing more reached the server");
        // Not even a listing: the child's catalog is a frozen copy of its parent's.
        assert_eq!(with_method(&env.wire(), "tools/list").len(), 1, "{:#?}", env.wire());
        runtime.shutdown();
        second
    }

    #[test]
    fn a_reload_kills_the_view_before_the_childs_next_call() {
        let result = child_call_after(|env, _old, host| host.replace(runtime(env, true)));
        assert!(result.contains("Not sent: the parent's MCP servers were reloaded"), "{result}");
    }

    #[test]
    fn a_removed_server_is_not_reached_by_the_child() {
        let result = child_call_after(|env, _old, host| {
            let without = runtime(env, false);
            assert!(without.names().is_empty());
            host.replace(without);
        });
        assert!(result.contains("Not sent: the parent's MCP servers were reloaded"), "{result}");
    }

    #[test]
    fn a_logout_or_new_tokens_kill_the_view_before_the_childs_next_call() {
        // What /mcp logout and /mcp auth do once the tokens changed: connect the server anew.
        let result = child_call_after(|_env, runtime, _host| {
            runtime.restart("fx");
        });
        assert!(result.contains("Not sent: MCP server fx reconnected"), "{result}");
    }
}

#[test]
fn a_child_stops_at_its_step_limit_and_its_answer_is_bounded() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "max_tool_result_bytes": 1024 }));
    let search = || calls(vec![call("capability_search", json!({ "query": "echo" }))]);
    let model = Model::routed(vec![
        ("LOOPING", (0..25).map(|_| search()).collect()),
        ("LONG", vec![Step::Text("y".repeat(3000))]),
        (
            "PARENT",
            vec![calls(vec![run("LOOPING: search forever"), run("LONG: write a lot")]), Step::Text("Done.".into())],
        ),
    ]);
    ask(&env, &model, &["PARENT: two children"]).run().code(0).within(60.0).stdout_has("Done.");
    assert_eq!(requests_of(&model, "LOOPING").len(), 20, "a child makes at most 20 model requests a run");
    let results = results_of(&model, "PARENT");
    assert_eq!(results[0]["ok"], true, "{}", results[0]);
    assert!(results[0]["result"].as_str().unwrap().contains("step limit"), "{}", results[0]);
    let long = results[1]["result"].as_str().unwrap();
    assert!(long.len() < 1300 && long.contains("truncated for subagent"), "{long}");
}

#[test]
fn cancelling_at_a_childs_permission_question_ends_the_parents_turn() {
    let env = Env::new();
    let model = Model::routed(vec![
        (
            "ASKING",
            vec![
                calls(vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
                calls(vec![call("mcp_fx_echo", json!({ "message": "never" }))]),
            ],
        ),
        ("PARENT", vec![calls(vec![run("ASKING: echo")]), Step::Text("Never.".into())]),
    ]);
    let mut client = Client::start(&env, &model);
    client.initialize(json!({}));
    let session = client.new_session(&cwd(&env), json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "PARENT: delegate");
    let answer = client.answer_of(id, |_| json!({ "outcome": { "outcome": "cancelled" } }));
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert_eq!(requests_of(&model, "PARENT").len(), 1, "the parent never asked the model again");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");
    assert!(echo_calls(&env.wire()).is_empty());
}
