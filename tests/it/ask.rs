//! `nod ask`: the agent, driven by the scripted fake model, against the fixture server and
//! real servers: search, auto-loading, calls, selection, resources, permissions,
//! elicitation, provider failures, cancellation, and the bounds on what reaches the model.

use serde_json::{Value, json};

use crate::model::{Model, Step, tool_messages, tool_names};
use crate::run::Cmd;
use crate::support::{Env, SERVER};

/// The canary key: it must appear nowhere.
const KEY: &str = "sk-canary-key-4711";

fn call(name: &str, arguments: Value) -> (String, String) {
    (name.to_string(), arguments.to_string())
}

/// `nod ask` against `model`, with the fixture server `fx` in the profile.
fn ask(env: &Env, model: &Model, args: &[&str]) -> Cmd {
    let mut all = vec!["ask"];
    all.extend_from_slice(args);
    env.nod(all)
        .env("NOD_BASE_URL", model.url())
        .env("NOD_MODEL", "fake-model")
        .env("NOD_API_KEY", KEY)
        .timeout(60)
}

fn settings(env: &Env, value: Value) {
    std::fs::write(env.path("settings.json"), value.to_string()).unwrap();
}

#[test]
fn a_question_is_answered_through_search_an_auto_loaded_tool_and_its_result() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let model = Model::start(vec![
        Step::Calls("Let me look.".into(), vec![call("capability_search", json!({ "query": "echo message back" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "forty-two" }))]),
        Step::Text("The server said forty-two.".into()),
    ]);
    let out = ask(&env, &model, &["what", "does", "echo", "say?"]).run();
    out.code(0).within(30.0).stdout_has("The server said forty-two.").stderr_has("● mcp_fx_echo");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_names(&requests[0]), ["capability_search", "mcp_select_tool", "mcp_read_resource"]);
    assert!(tool_names(&requests[1]).contains(&"mcp_fx_echo".to_string()), "auto-loaded: {:?}", tool_names(&requests[1]));
    let results = tool_messages(&requests[2]);
    let echoed = &results.last().unwrap().1;
    assert!(echoed.starts_with("<untrusted_external source=\"mcp\" server=\"fx\" tool=\"echo\">"), "{echoed}");
    assert!(echoed.contains("forty-two"));
    assert!(requests[0]["messages"][1]["content"].as_str().unwrap().contains("what does echo say?"));
    out.stdout_lacks(KEY).stderr_lacks(KEY);
}
