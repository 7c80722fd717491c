//! The agent against servers nobody here wrote: server-everything from npm and the Python
//! SDK, through the scripted fake model. `#[ignore]`d like the other real-server tests:
//! `cargo test -- --include-ignored` runs them and fails them when the servers are missing.

use std::path::PathBuf;

use serde_json::json;

use crate::ask::{ask, call, settings};
use crate::model::{Model, Step, tool_messages, tool_names};
use crate::support::Env;

fn npm_root() -> PathBuf {
    std::env::var_os("NOD_TEST_NPM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/nod-ci/npm"))
}

/// The npm binary `name`; a test that needs it fails when it is not installed.
fn npm_bin(name: &str) -> PathBuf {
    let bin = npm_root().join("node_modules/.bin").join(name);
    assert!(bin.exists(), "{name} is not installed (no {}); bash .ci/run installs it", bin.display());
    bin
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn server_everything_answers_a_question_through_the_agent() {
    let bin = npm_bin("mcp-server-everything");
    let env = Env::new();
    env.profile(json!({ "mcp": { "everything": { "command": [bin], "env": env.marker_env() } } }));
    settings(&env, json!({ "permission": { "mcp_everything_*": "allow" } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "echo back the input message" }))]),
        Step::Calls(String::new(), vec![call("mcp_everything_echo", json!({ "message": "from the model" }))]),
        Step::Calls(
            String::new(),
            vec![call(
                "mcp_read_resource",
                json!({ "server": "everything", "uri": "demo://resource/static/document/architecture.md" }),
            )],
        ),
        Step::Text("Everything echoed it.".into()),
    ]);
    let out = ask(&env, &model, &["--json", "use", "everything"]).run();
    out.code(0).within(60.0);
    assert_eq!(out.json()["final_output"], "Everything echoed it.");
    let requests = model.requests();
    assert!(tool_names(&requests[1]).contains(&"mcp_everything_echo".to_string()), "{:?}", tool_names(&requests[1]));
    let echoed = &tool_messages(&requests[2])[1].1;
    assert!(echoed.contains("Echo: from the model"), "{echoed}");
    let read = &tool_messages(&requests[3])[2].1;
    assert!(read.starts_with("<untrusted_external source=\"mcp\" server=\"everything\" resource="), "{read}");
    let calls: Vec<(String, String)> = out.json()["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["status"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls.iter().all(|(_, status)| status == "success"), "{calls:?}");
    // The plain form, with the question from a pipe.
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "add two numbers" }))]),
        Step::Calls(String::new(), vec![call("mcp_everything_get-sum", json!({ "a": 40, "b": 2 }))]),
        Step::Text("The sum is 42.".into()),
    ]);
    let out = ask(&env, &model, &[]).stdin("What is 40 + 2? Use the everything server.\n").run();
    out.code(0).within(60.0).stdout_has("The sum is 42.").stderr_has("● mcp_everything_get-sum");
    let requests = model.requests();
    assert_eq!(requests[0]["messages"][1]["content"], "What is 40 + 2? Use the everything server.\n");
    let sum = &tool_messages(&requests[2])[1].1;
    assert!(sum.contains("42"), "{sum}");
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the Python mcp SDK in a venv; cargo test -- --include-ignored (README)"]
fn the_python_sdk_server_answers_a_question_through_the_agent() {
    let venv = std::env::var_os("NOD_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/nod-ci/venv"));
    let python = venv.join("bin/python");
    assert!(python.exists(), "no Python venv with mcp at {}; bash .ci/run makes it", venv.display());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/python/server.py");
    let env = Env::new();
    env.profile(json!({ "mcp": { "py": { "command": [python, script, "stdio"], "env": env.marker_env() } } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "add two integers" }))]),
        Step::Calls(String::new(), vec![call("mcp_py_add", json!({ "a": 40, "b": 2 }))]),
        Step::Text("It is 42.".into()),
    ]);
    let out = ask(&env, &model, &["--full-access", "add"]).run();
    out.code(0).within(60.0).stdout_has("It is 42.");
    let result = &tool_messages(&model.requests()[2])[1].1;
    assert!(result.contains("42"), "{result}");
    env.assert_no_leftovers();
}

/// The Python SDK client (`agent-client-protocol`) drives `nod acp`: its lines of JSON.
fn python_acp(env: &Env, model: &Model, everything: &std::path::Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let venv = std::env::var_os("NOD_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/nod-ci/venv"));
    let python = venv.join("bin/python");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/python/acp_client.py");
    let ws = env.path("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut args: Vec<String> = vec![
        script.display().to_string(),
        env!("CARGO_BIN_EXE_nod").to_string(),
        everything.display().to_string(),
        ws.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = std::process::Command::new(&python)
        .args(&args)
        .env("NOD_HOME", env.home())
        .env("NOD_BASE_URL", model.url())
        .env("NOD_MODEL", "fake-model")
        .env("NOD_IT_MARKER", env.marker_env()["NOD_IT_MARKER"].as_str().unwrap())
        .output()
        .expect("run the Python ACP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the Python client failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect()
}

#[test]
#[ignore = "needs server-everything from npm and the Python SDK agent-client-protocol; cargo test -- --include-ignored (README)"]
fn the_python_acp_sdk_drives_a_turn_with_permission_and_elicitation() {
    let bin = npm_bin("mcp-server-everything");
    let env = Env::new();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "trigger elicitation request" }))]),
        Step::Calls(String::new(), vec![call("mcp_everything_trigger-elicitation-request", json!({}))]),
        Step::Text("Thank you, Ada.".into()),
    ]);
    let lines = python_acp(&env, &model, &bin, &[]);
    let transcript = lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n");
    if std::env::var_os("NOD_IT_TRANSCRIPT").is_some() {
        eprintln!("{transcript}");
    }
    let find = |key: &str| lines.iter().filter(|l| l.get(key).is_some()).cloned().collect::<Vec<_>>();
    assert_eq!(find("initialize")[0]["initialize"]["protocolVersion"], 1);
    let permissions = find("permission");
    assert_eq!(permissions.len(), 1, "{transcript}");
    assert_eq!(
        permissions[0]["title"],
        "mcp_everything_trigger-elicitation-request (server everything, tool trigger-elicitation-request)",
        "the question names the server and the tool"
    );
    let elicitations = find("elicitation");
    assert_eq!(elicitations.len(), 1, "{transcript}");
    assert_eq!(elicitations[0]["mode"], "ElicitationFormSessionMode");
    assert_eq!(find("stopReason")[0]["stopReason"], "end_turn", "{transcript}");
    let said: String = lines
        .iter()
        .filter(|l| l["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|l| l["update"]["content"]["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(said, "Thank you, Ada.", "{transcript}");
    let result = &tool_messages(&model.requests()[2])[1].1;
    assert!(result.contains("Ada Lovelace"), "{result}");
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs server-everything from npm and the Python SDK agent-client-protocol; cargo test -- --include-ignored (README)"]
fn the_python_acp_sdk_cancels_a_long_tool_call() {
    let bin = npm_bin("mcp-server-everything");
    let env = Env::new();
    settings(&env, json!({ "permission": { "mcp_everything_*": "allow" } }));
    let model = Model::start(vec![
        Step::Calls(
            String::new(),
            vec![call("mcp_select_tool", json!({ "name": "mcp_everything_trigger-long-running-operation" }))],
        ),
        Step::Calls(
            String::new(),
            vec![call("mcp_everything_trigger-long-running-operation", json!({ "duration": 60, "steps": 60 }))],
        ),
    ]);
    let started = std::time::Instant::now();
    let lines = python_acp(&env, &model, &bin, &["cancel"]);
    let transcript = lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n");
    let stop = lines.iter().find(|l| l.get("stopReason").is_some()).unwrap_or_else(|| panic!("{transcript}"));
    assert_eq!(stop["stopReason"], "cancelled", "{transcript}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "took {:?}", started.elapsed());
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn subagents_share_server_everything_within_their_parents_rules() {
    let bin = npm_bin("mcp-server-everything");
    let env = Env::new();
    env.profile(json!({ "mcp": { "everything": { "command": [bin], "env": env.marker_env() } } }));
    settings(&env, json!({ "permission": { "mcp_everything_*": "allow", "mcp_everything_get-sum": "deny" } }));
    let sub = |args: serde_json::Value| call("subagent", args);
    let model = Model::routed(vec![
        (
            "ECHOER",
            vec![
                Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "add two numbers" }))]),
                Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_everything_echo" }))]),
                Step::Calls(String::new(), vec![call("mcp_everything_echo", json!({ "message": "from a child" }))]),
                Step::Text("Echoed from a child.".into()),
            ],
        ),
        (
            "READER",
            vec![
                Step::Calls(
                    String::new(),
                    vec![call(
                        "mcp_read_resource",
                        json!({ "server": "everything", "uri": "demo://resource/static/document/architecture.md" }),
                    )],
                ),
                Step::Text("Read the architecture document.".into()),
            ],
        ),
        (
            "PARENT",
            vec![
                Step::Calls(
                    String::new(),
                    vec![
                        sub(
                            json!({ "action": "run", "task": "ECHOER: echo something", "tools": ["mcp_everything_echo", "mcp_everything_get-*"] }),
                        ),
                        sub(
                            json!({ "action": "run", "task": "ECHOER: echo something", "tools": ["mcp_everything_echo"] }),
                        ),
                        sub(
                            json!({ "action": "message", "name": "reader", "message": "READER: read the docs", "tools": ["mcp_read_resource"] }),
                        ),
                    ],
                ),
                Step::Text("Both children reported.".into()),
            ],
        ),
    ]);
    let out = ask(&env, &model, &["--json", "PARENT: delegate to children"]).run();
    out.code(0).within(90.0);
    assert_eq!(out.json()["final_output"], "Both children reported.");
    let parent = model.requests().into_iter().rfind(|r| crate::model::first_user(r).contains("PARENT")).unwrap();
    let results: Vec<serde_json::Value> =
        tool_messages(&parent).iter().map(|(_, c)| serde_json::from_str(c).unwrap()).collect();
    assert_eq!(results[0]["error"]["code"], "override_rejected", "get-sum is denied to the parent: {}", results[0]);
    let marked = |agent: &str, answer: &str| {
        format!("<untrusted_external source=\"subagent\" agent=\"{agent}\">\n{answer}\n</untrusted_external>")
    };
    assert_eq!(results[1]["result"], marked("run-2", "Echoed from a child."), "{}", results[1]);
    assert_eq!(results[2]["result"], marked("reader", "Read the architecture document."), "{}", results[2]);
    let echoer: Vec<serde_json::Value> =
        model.requests().into_iter().filter(|r| crate::model::first_user(r).contains("ECHOER")).collect();
    let search = &tool_messages(&echoer[1])[0].1;
    assert!(!search.contains("get-sum"), "the child's search has no denied or unadmitted tool: {search}");
    let listed: serde_json::Value = serde_json::from_str(search).expect("the child's search answered");
    assert!(listed["mcp_tools"].is_array() && listed["total_matches"].is_number(), "the search worked: {search}");
    let echoed = &tool_messages(&echoer[3])[2].1;
    assert!(echoed.contains("Echo: from a child"), "{echoed}");
    let reader: Vec<serde_json::Value> =
        model.requests().into_iter().filter(|r| crate::model::first_user(r).contains("READER")).collect();
    let read = &tool_messages(&reader[1])[0].1;
    assert!(read.starts_with("<untrusted_external source=\"mcp\" server=\"everything\""), "{read}");
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn server_filesystem_without_a_directory_serves_the_workspace_it_gets_as_roots_and_nothing_else() {
    let bin = npm_bin("mcp-server-filesystem");
    let env = Env::new();
    let workspace = env.path("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("note.txt"), "in the workspace").unwrap();
    std::fs::write(env.path("outside.txt"), "CANARY-OUTSIDE").unwrap();
    // No directory on its command line: the server asks nod for its roots.
    env.profile(json!({ "mcp": { "fs": { "command": [bin], "env": env.marker_env() } } }));
    settings(&env, json!({ "permission": { "mcp_fs_*": "allow" } }));
    let select = |name: &str| call("mcp_select_tool", json!({ "name": name }));
    let read = |path: &std::path::Path| call("mcp_fs_read_text_file", json!({ "path": path }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![select("mcp_fs_read_text_file"), select("mcp_fs_list_allowed_directories")]),
        Step::Calls(
            String::new(),
            vec![
                call("mcp_fs_list_allowed_directories", json!({})),
                read(&workspace.join("note.txt")),
                read(&env.path("outside.txt")),
            ],
        ),
        Step::Text("Read.".into()),
    ]);
    ask(&env, &model, &["read", "my", "note"]).cwd(&workspace).run().code(0).within(60.0);
    let results = tool_messages(&model.requests()[2]);
    let canonical = std::fs::canonicalize(&workspace).unwrap().display().to_string();
    assert!(results[2].1.contains(&canonical), "the workspace is its allowed directory: {}", results[2].1);
    assert!(results[3].1.contains("in the workspace"), "{}", results[3].1);
    assert!(!results[4].1.contains("CANARY-OUTSIDE"), "nothing outside the roots: {}", results[4].1);
    assert!(results[4].1.contains("denied") || results[4].1.contains("outside"), "{}", results[4].1);
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn server_everything_samples_nods_model_when_allowed() {
    let bin = npm_bin("mcp-server-everything");
    let env = Env::new();
    env.profile(json!({ "mcp": { "everything": { "command": [bin], "env": env.marker_env() } } }));
    settings(&env, json!({ "permission": { "mcp_everything_*": "allow" }, "sampling": { "everything": "allow" } }));
    let tool = "mcp_everything_trigger-sampling-request";
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": tool }))]),
        Step::Calls(String::new(), vec![call(tool, json!({ "prompt": "name a colour", "maxTokens": 20 }))]),
        Step::Text("Teal.".into()),
        Step::Text("The server got teal.".into()),
    ]);
    let out = ask(&env, &model, &["--json", "sample", "through", "everything"]).run();
    out.code(0).within(60.0);
    let requests = model.requests();
    // The server only offers the tool to a client that declared sampling.
    assert!(tool_messages(&requests[1])[0].1.contains("trigger-sampling-request"), "{:?}", tool_messages(&requests[1]));
    assert_eq!(
        requests[2]["messages"],
        json!([
            { "role": "system", "content": "You are a helpful test server." },
            { "role": "user", "content": "Resource trigger-sampling-request context: name a colour" }
        ])
    );
    assert_eq!((requests[2]["max_tokens"].clone(), requests[2]["temperature"].clone()), (json!(20), json!(0.7)));
    let result = tool_messages(&requests[3]).last().unwrap().1.clone();
    assert!(
        result.contains("LLM sampling result") && result.contains("Teal.") && result.contains("endTurn"),
        "{result}"
    );
    assert_eq!(out.json()["sampling"]["requests"], 1);
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn the_typescript_sdks_sampling_example_summarizes_with_nods_model() {
    let example =
        npm_root().join("node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/toolWithSampleServer.js");
    assert!(example.exists(), "no {}; bash .ci/run installs the SDK", example.display());
    let env = Env::new();
    env.profile(json!({ "mcp": { "sum": { "command": ["node", example], "env": env.marker_env() } } }));
    settings(&env, json!({ "permission": { "mcp_sum_*": "allow" }, "sampling": { "sum": "allow" } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_sum_summarize" }))]),
        Step::Calls(
            String::new(),
            vec![call("mcp_sum_summarize", json!({ "text": "MCP servers ask clients for completions." }))],
        ),
        Step::Text("Servers can sample.".into()),
        Step::Text("Summarized.".into()),
    ]);
    let out = ask(&env, &model, &["--json", "summarize", "it"]).run();
    out.code(0).within(60.0);
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    // The sampling request is a request of its own: the example's one message, its token limit.
    assert_eq!(
        requests[2]["messages"],
        json!([{ "role": "user", "content": "Please summarize the following text concisely:\n\nMCP servers ask clients for completions." }])
    );
    assert_eq!(requests[2]["max_tokens"], 500);
    assert!(requests[2].get("tools").is_none(), "{}", requests[2]);
    let result = tool_messages(&requests[3]).last().unwrap().1.clone();
    assert!(result.contains("Servers can sample."), "the summary came back through the server: {result}");
    assert_eq!(out.json()["sampling"]["requests"], 1, "{}", out.json());
    env.assert_no_leftovers();
}
