//! Sampling: a server asks nod's model for a completion. Declared only with a model; answered
//! only when a rule (or --full-access) allows the server, as a separate model request with the
//! server's system prompt, messages and settings (maxTokens capped); declined otherwise,
//! saying how to allow it; bounded per server.

use serde_json::{Value, json};

use crate::ask::{ask, call, settings};
use crate::model::{Model, Step, tool_messages};
use crate::support::Env;

fn script(answer: &str) -> Vec<Step> {
    vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_sample", json!({ "prompt": "what is 2+2?" }))]),
        Step::Text(answer.into()),
        Step::Text("Done.".into()),
    ]
}

#[test]
fn an_allowed_server_samples_nods_model_in_a_request_of_its_own() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" }, "sampling": { "fx": "allow" } }));
    let model = Model::start(script("Four."));
    let out = ask(&env, &model, &["--json", "sample", "it"]).run();
    out.code(0);
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // The sampling request: the server's system prompt and message, its settings, no tools.
    let sampled = &requests[2];
    assert_eq!(
        sampled["messages"],
        json!([{ "role": "system", "content": "Answer in one line." }, { "role": "user", "content": "what is 2+2?" }])
    );
    assert!(sampled.get("tools").is_none(), "{sampled}");
    assert_eq!((sampled["max_tokens"].clone(), sampled["temperature"].clone()), (json!(100), json!(0.5)));
    assert_eq!(sampled["stop"], json!(["END"]));
    // The answer reached the server in the protocol's shape, and the model saw it as the tool's result.
    let result = tool_messages(&requests[3]).last().unwrap().1.clone();
    let shown: Value = serde_json::from_str(
        result.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no JSON in {result}")),
    )
    .unwrap();
    assert_eq!(
        shown["result"],
        json!({ "model": "fake-model", "stopReason": "endTurn", "role": "assistant", "content": { "type": "text", "text": "Four." } })
    );
    // Nothing of the conversation went along (includeContext is ignored), and the cost is counted apart.
    assert!(!sampled.to_string().contains("sample it"), "{sampled}");
    assert_eq!(out.json()["sampling"]["requests"], 1, "{}", out.json());
    let initialize = env.wire().into_iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(initialize["params"]["capabilities"]["sampling"], json!({ "tools": {} }));
}

#[test]
fn sampling_is_declined_without_a_rule_and_never_declared_without_a_model() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_sample", json!({ "prompt": "what is 2+2?" }))]),
        Step::Text("Done.".into()),
    ]);
    let out = ask(&env, &model, &["sample", "it"]).run();
    out.code(0).stderr_has("sampling (server fx) needs approval").stderr_has(r#"{"sampling":{"fx":"allow"}}"#);
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "no request for the server's sampling");
    let result = tool_messages(&requests[2]).last().unwrap().1.clone();
    assert!(result.contains("declined: sampling needs approval and nobody could be asked here"), "{result}");
    assert!(result.contains(r#"{\"sampling\": {\"fx\": \"allow\"}}"#), "it says how: {result}");
    // A denied server, even with --full-access.
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" }, "sampling": { "fx": "deny" } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_sample", json!({ "prompt": "what is 2+2?" }))]),
        Step::Text("Done.".into()),
    ]);
    ask(&env, &model, &["--full-access", "sample", "it"]).run().code(0);
    assert!(tool_messages(&model.requests()[2]).last().unwrap().1.contains("sampling is denied for server fx"));
    // nod mcp has no model: no sampling declared, and a server that asks anyway is told why.
    let _ = std::fs::remove_file(env.record_path());
    env.nod(["mcp", "tool", "call", "fx", "sample", r#"{"prompt":"hi"}"#])
        .run()
        .code(0)
        .stdout_has("sampling unavailable: no model configured");
    let initialize = env.wire().into_iter().find(|m| m["method"] == "initialize").unwrap();
    assert!(initialize["params"]["capabilities"].get("sampling").is_none(), "{initialize}");
}

#[test]
fn full_access_allows_sampling_and_a_looping_sampler_is_stopped() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let mut steps = vec![Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))])];
    // 21 samplings, one a step: each step is a tool call, then the sampling request's answer.
    for i in 0..21 {
        steps.push(Step::Calls(String::new(), vec![call("mcp_fx_sample", json!({ "prompt": format!("q{i}") }))]));
        if i < 20 {
            steps.push(Step::Text(format!("a{i}")));
        }
    }
    steps.push(Step::Text("Done.".into()));
    let model = Model::start(steps);
    let out = ask(&env, &model, &["--full-access", "--json", "--max-steps", "100", "loop"]).run();
    out.code(0);
    assert_eq!(out.json()["sampling"]["requests"], 20, "{}", out.json());
    let last = tool_messages(model.requests().last().unwrap()).last().unwrap().1.clone();
    assert!(last.contains("asked for 20 samplings in this turn already"), "the 21st is refused: {last}");
}

/// An ACP session whose one server is the sampling fixture, its tools allowed.
fn acp_session(env: &Env, model: &Model) -> (crate::acp::Client, String) {
    use crate::acp::{Client, cwd, fixture_server};
    settings(env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let mut client = Client::start(env, model);
    client.initialize(json!({}));
    let mut fx = fixture_server(env, "fx");
    fx["args"] = json!(["--sample", "--record", env.record_path()]);
    let session = client.new_session(&cwd(env), json!([fx]));
    (client, session)
}

/// Prompts `session` to sample; every permission request is answered with `option`. The
/// prompt's answer and the requests.
fn acp_sample(client: &mut crate::acp::Client, session: &str, option: &str) -> (Value, Vec<Value>) {
    let id = crate::acp::prompt(client, session, "sample it");
    let mut asked = Vec::new();
    let answer = client.answer_of(id, |request| {
        asked.push(request.clone());
        json!({ "outcome": { "outcome": "selected", "optionId": option } })
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    (answer, asked)
}

#[test]
fn an_acp_client_approves_a_sampling_request_with_request_permission() {
    let env = Env::new();
    let mut steps = script("Four.");
    steps.extend(script("Five."));
    let model = Model::start(steps);
    let (mut client, session) = acp_session(&env, &model);
    let (_, asked) = acp_sample(&mut client, &session, "allow_always");
    assert_eq!(asked.len(), 1, "only the sampling request was asked about: {asked:?}");
    assert_eq!(asked[0]["method"], "session/request_permission");
    assert_eq!(asked[0]["params"]["toolCall"]["title"], "sampling (server fx)", "{}", asked[0]);
    assert_eq!(asked[0]["params"]["toolCall"]["rawInput"]["messages"][0]["text"], "what is 2+2?");
    assert_eq!(model.requests()[2]["messages"][1]["content"], "what is 2+2?");
    // Allowed for the session: the next request is not asked about.
    let (_, asked) = acp_sample(&mut client, &session, "reject_once");
    assert!(asked.is_empty(), "{asked:?}");
    assert_eq!(model.requests().len(), 8, "the second request was sampled too");
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn an_acp_session_switched_to_full_access_samples_without_asking() {
    let env = Env::new();
    let model = Model::start(script("Four."));
    let (mut client, session) = acp_session(&env, &model);
    client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    let (_, asked) = acp_sample(&mut client, &session, "reject_once");
    assert!(asked.is_empty(), "the mode applies to sampling too: {asked:?}");
    assert_eq!(model.requests()[2]["messages"][1]["content"], "what is 2+2?", "the server's request was sampled");
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn nod_mcp_tool_call_with_a_model_asks_on_a_terminal_and_follows_the_rules_elsewhere() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    let with_model = |model: &Model, args: &[&str]| {
        env.nod(args.iter().copied()).env("NOD_MODEL", "fake-model").env("NOD_BASE_URL", model.url())
    };
    let args = ["mcp", "tool", "call", "fx", "sample", r#"{"prompt":"what is 2+2?"}"#];
    // Piped, no rule: sampling is declared, the request declined (saying how), nothing sampled.
    let model = Model::start(vec![Step::Text("Four.".into())]);
    let out = with_model(&model, &args).run();
    out.code(0).stdout_has("declined: sampling needs approval and nobody could be asked here");
    out.stdout_has(r#"{\"sampling\": {\"fx\": \"allow\"}}"#).stdout_lacks("--full-access");
    assert!(model.requests().is_empty(), "nothing was sampled");
    let initialize = env.wire().into_iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(initialize["params"]["capabilities"]["sampling"], json!({ "tools": {} }), "{initialize}");
    // On a terminal: asked as the shell asks, then sampled.
    let model = Model::start(vec![Step::Text("Four.".into())]);
    let mut terminal = with_model(&model, &args).spawn_on_terminal();
    terminal.wait_for("sampling  (server fx)").wait_for("what is 2+2?").wait_for("[y] once").type_line("y");
    let (code, shown) = terminal.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("Four."), "{shown}");
    assert_eq!(model.requests().len(), 1);
    assert_eq!(model.requests()[0]["messages"][1]["content"], "what is 2+2?");
    // A rule allows it without a terminal.
    settings(&env, json!({ "sampling": { "fx": "allow" } }));
    let model = Model::start(vec![Step::Text("Four.".into())]);
    with_model(&model, &args).run().code(0).stdout_has(r#""text":"Four.""#);
    assert_eq!(model.requests().len(), 1);
    env.assert_no_leftovers();
}

#[test]
fn a_servers_tools_in_a_sampling_request_reach_the_model_as_its_own_and_come_back_as_tool_uses() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" }, "sampling": { "fx": "allow" } }));
    let weather = json!({ "name": "get_weather", "description": "Weather of a city",
        "inputSchema": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] } });
    let arguments = json!({ "prompt": "weather in Paris?", "tools": [weather], "toolChoice": { "mode": "required" } });
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_sample", arguments)]),
        // The sampled model calls the server's tool.
        Step::Calls(String::new(), vec![call("get_weather", json!({ "city": "Paris" }))]),
        Step::Text("Done.".into()),
    ]);
    ask(&env, &model, &["sample", "it"]).run().code(0);
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // Only the server's tool, as it described it; none of nod's.
    let offered = &requests[2]["tools"];
    assert_eq!(offered.as_array().map(Vec::len), Some(1), "{offered}");
    assert_eq!(offered[0]["function"]["name"], "get_weather");
    assert_eq!(offered[0]["function"]["parameters"], weather["inputSchema"]);
    assert_eq!(requests[2]["tool_choice"], "required");
    let initialize = env.wire().into_iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(initialize["params"]["capabilities"]["sampling"], json!({ "tools": {} }));
    // The model's call went back to the server as a tool use, not run by nod.
    let result = tool_messages(&requests[3]).last().unwrap().1.clone();
    let shown: Value = serde_json::from_str(result.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    assert_eq!(shown["result"]["stopReason"], "toolUse", "{shown}");
    let content = &shown["result"]["content"];
    assert_eq!(content[0]["type"], "tool_use", "{shown}");
    assert_eq!(
        (content[0]["name"].clone(), content[0]["input"].clone()),
        (json!("get_weather"), json!({ "city": "Paris" }))
    );
    assert!(env.wire().iter().all(|m| m["params"]["name"] != "get_weather"), "nod called no tool of that name");
}

#[test]
fn nod_ask_with_prompt_permissions_puts_sampling_to_the_person() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let model = Model::start(script("Four."));
    let mut terminal = ask(&env, &model, &["--prompt-permissions", "sample", "it"]).spawn_on_terminal();
    terminal.wait_for("sampling  (server fx)").wait_for("what is 2+2?").wait_for("[y] once").type_line("y");
    let (code, shown) = terminal.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert_eq!(model.requests()[2]["messages"][1]["content"], "what is 2+2?", "sampled once approved");
    // Refused: the server is told so, and nothing is sampled.
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_sample", json!({ "prompt": "what is 2+2?" }))]),
        Step::Text("Done.".into()),
    ]);
    let mut terminal = ask(&env, &model, &["--prompt-permissions", "sample", "it"]).spawn_on_terminal();
    terminal.wait_for("sampling  (server fx)").wait_for("[y] once").type_line("n");
    let (code, shown) = terminal.wait();
    assert_eq!(code, Some(0), "{shown}");
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "nothing was sampled");
    assert!(tool_messages(&requests[2]).last().unwrap().1.contains("declined by the user"));
}

#[test]
fn an_acp_client_that_rejects_sampling_leaves_the_server_declined() {
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_sample", json!({ "prompt": "what is 2+2?" }))]),
        Step::Text("Done.".into()),
    ]);
    let (mut client, session) = acp_session(&env, &model);
    let (_, asked) = acp_sample(&mut client, &session, "reject_once");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "nothing was sampled");
    assert!(tool_messages(&requests[2]).last().unwrap().1.contains("declined by the user"));
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
}
