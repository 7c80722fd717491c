//! Roots: the agent surfaces offer the workspace and the directories added with `--add-dir`
//! (and the shell's `/add-dir`, with notifications/roots/list_changed); `nod mcp` commands
//! only what `--root` names; a project server sees the workspace alone. The fixture asks
//! nod for its roots; server-filesystem started without a directory serves the workspace.

use serde_json::{Value, json};

use crate::ask::{ask, call, settings};
use crate::model::{Model, Step, tool_messages};
use crate::support::Env;

fn uri(path: &std::path::Path) -> String {
    let path = std::fs::canonicalize(path).unwrap();
    format!("file://{}", path.display())
}

fn initialize_capabilities(env: &Env) -> Vec<Value> {
    let wire = env.wire();
    wire.iter().filter(|m| m["method"] == "initialize").map(|m| m["params"]["capabilities"].clone()).collect()
}

#[test]
fn nod_mcp_offers_roots_only_when_asked_to() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let ask_roots = r#"{"method":"roots/list"}"#;
    let out = env.nod(["mcp", "tool", "call", "fx", "ask_client", ask_roots]).run();
    out.code(0).stdout_has("-32601").stdout_lacks("file://");
    assert!(initialize_capabilities(&env).iter().all(|c| c.get("roots").is_none()), "no roots declared");
    let dir = env.path("shared");
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(env.record_path());
    let out = env.nod(["mcp", "tool", "call", "fx", "ask_client", ask_roots, "--root", dir.to_str().unwrap()]).run();
    out.code(0).stdout_has(&uri(&dir)).stdout_has("\"name\":\"shared\"");
    assert_eq!(initialize_capabilities(&env)[0]["roots"], json!({ "listChanged": true }));
    env.nod(["mcp", "tool", "list", "fx", "--root", "/no/such/dir"]).run().code(2).stderr_has("is not a directory");
}

#[test]
fn nod_ask_offers_the_workspace_and_added_directories_and_a_project_server_the_workspace_alone() {
    let env = Env::new();
    let workspace = env.path("ws");
    let extra = env.path("extra");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&extra).unwrap();
    // The same fixture twice: from the profile, and from the workspace's .mcp.json (approved).
    let entry = env.fixture_entry(&[], json!({}));
    env.profile(json!({ "mcp": { "fx": entry.clone() } }));
    let argv = entry["command"].as_array().unwrap().clone();
    let project = json!({ "command": argv[0], "args": argv[1..], "env": entry["env"] });
    std::fs::write(workspace.join(".mcp.json"), json!({ "mcpServers": { "proj": project } }).to_string()).unwrap();
    // Settings first: the approval is recorded in settings.json.
    settings(&env, json!({ "permission": { "mcp_*": "allow" } }));
    env.nod(["mcp", "trust", "approve", "proj"]).cwd(&workspace).run().code(0);
    let roots = |alias: &str| call(alias, json!({ "method": "roots/list" }));
    let select = |alias: &str| call("mcp_select_tool", json!({ "name": alias }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![select("mcp_fx_ask_client"), select("mcp_proj_ask_client")]),
        Step::Calls(String::new(), vec![roots("mcp_fx_ask_client"), roots("mcp_proj_ask_client")]),
        Step::Text("Done.".into()),
    ]);
    ask(&env, &model, &["--add-dir", extra.to_str().unwrap(), "roots?"]).cwd(&workspace).run().code(0);
    let results = tool_messages(&model.requests()[2]);
    let (profile, project) = (&results[2].1, &results[3].1);
    assert!(profile.contains(&uri(&workspace)) && profile.contains(&uri(&extra)), "{profile}");
    assert!(project.contains(&uri(&workspace)), "{project}");
    assert!(!project.contains(&uri(&extra)), "a project server sees the workspace alone: {project}");
    assert!(initialize_capabilities(&env).iter().all(|c| c["roots"] == json!({ "listChanged": true })));
    ask(&env, &model, &["--add-dir", "/no/such/dir", "x"])
        .run()
        .code(2)
        .stderr_has("--add-dir /no/such/dir is not a directory");
}

#[test]
fn the_shell_adds_a_root_and_tells_the_servers() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let extra = env.path("later");
    std::fs::create_dir_all(&extra).unwrap();
    let model = Model::start(vec![]);
    let input = format!(
        "/mcp list\n/add-dir {}\n/add-dir\n/mcp tool call fx ask_client {{\"method\":\"roots/list\"}}\n",
        extra.display()
    );
    let out = env
        .nod(Vec::<String>::new())
        .env("NOD_BASE_URL", model.url())
        .env("NOD_MODEL", "fake-model")
        .stdin(input)
        .timeout(60)
        .run();
    out.code(0).stdout_has(&format!("added root {} (told 1 server)", extra.display()));
    out.stdout_has(&uri(&extra))
        .stdout_line_has(&["roots: ", &std::fs::canonicalize(&extra).unwrap().display().to_string()]);
    let wire = env.wire();
    assert!(wire.iter().any(|m| m["method"] == "notifications/roots/list_changed"), "{wire:?}");
}

#[test]
fn an_acp_session_offers_its_cwd_and_the_clients_additional_directories() {
    use crate::acp::{Client, cwd, fixture_server, prompt};
    let env = Env::new();
    let workspace = cwd(&env);
    let extra = env.path("more");
    std::fs::create_dir_all(&extra).unwrap();
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_ask_client" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_ask_client", json!({ "method": "roots/list" }))]),
        Step::Text("Done.".into()),
    ]);
    let mut client = Client::start(&env, &model);
    let init = client.initialize(json!({}));
    assert!(init["result"]["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"].is_object(), "{init}");
    let answer = client.call(
        "session/new",
        json!({ "cwd": workspace, "mcpServers": [fixture_server(&env, "fx")], "additionalDirectories": [extra] }),
    );
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    client.call("session/set_mode", json!({ "sessionId": session, "modeId": "full-access" }));
    let id = prompt(&mut client, &session, "roots?");
    assert_eq!(client.until_answer(id)["result"]["stopReason"], "end_turn");
    let result = &tool_messages(&model.requests()[2])[1].1;
    assert!(result.contains(&uri(std::path::Path::new(&workspace))) && result.contains(&uri(&extra)), "{result}");
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
}
