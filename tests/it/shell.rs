//! The interactive shell on a pseudo-terminal, as a person uses it: what is typed, what the
//! terminal shows, what reached the fake model endpoint and the fixture server.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::ask::{call, settings};
use crate::model::{Model, Step, tool_messages, tool_names};
use crate::run::Terminal;
use crate::support::{Env, FIXTURE};

fn shell(env: &Env, model: &Model) -> Terminal {
    shell_in(env, model, None)
}

fn shell_in(env: &Env, model: &Model, cwd: Option<&Path>) -> Terminal {
    let mut cmd = env.nod(Vec::<String>::new()).env("NOD_BASE_URL", model.url()).env("NOD_MODEL", "fake-model");
    if let Some(cwd) = cwd {
        cmd = cmd.cwd(cwd);
    }
    cmd.timeout(60).spawn_on_terminal()
}

/// A repository whose `.mcp.json` has one pending server, `name` (the fixture), and an
/// empty profile.
fn pending_repo(env: &Env, name: &str) -> PathBuf {
    env.profile(json!({ "mcp": {} }));
    let repo = env.path("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let entry = json!({ "command": FIXTURE, "args": ["--record", env.record_path()], "env": env.marker_env() });
    std::fs::write(repo.join(".mcp.json"), json!({ "mcpServers": { name: entry } }).to_string()).unwrap();
    repo
}

/// The shell without a terminal: `lines` on its stdin.
fn piped(env: &Env, model: &Model, lines: &str) -> crate::run::Cmd {
    env.nod(Vec::<String>::new()).env("NOD_BASE_URL", model.url()).env("NOD_MODEL", "fake-model").stdin(lines)
}

/// The shell is up: the fixture connected and the prompt shown.
fn ready(term: &mut Terminal) -> &mut Terminal {
    term.next("✓ fx ready (15 tools)").next("nod> ")
}

fn exit(term: Terminal) -> String {
    let mut term = term;
    term.keys(&[4]);
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    shown
}

/// The user messages of a model request.
fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_turn_calls_a_tool_after_approval_and_ctrl_d_leaves_nothing_running() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![
        Step::Calls("Looking.".into(), vec![call("capability_search", json!({ "query": "echo" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "hello" }))]),
        Step::Text("The server said hello.".into()),
    ]);
    let mut term = shell(&env, &model);
    term.next("nod 0.1.0 · fake-model · ").next("permissions ask");
    ready(&mut term).type_line("say hello through echo");
    term.next("Looking.").next("● capability_search").next("● mcp_fx_echo");
    term.next("Allow this call?").next("(server fx, tool echo)").next("[y] once").type_line("1");
    term.next("The server said hello.").next("nod> ");
    exit(term);
    let results = tool_messages(&model.requests()[2]);
    assert!(results.last().unwrap().1.contains("hello"), "{results:?}");
    env.assert_no_leftovers();
}

#[test]
fn slash_commands_answer_here_and_never_reach_the_model() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![Step::Text("About that file.".into()), Step::Text("Second.".into())]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("/help");
    term.next("/mcp <command>").next("/permissions [mode]").next("nod> ").type_line("/foo bar");
    term.next("unknown command /foo · type /help").next("nod> ").type_line("/status");
    term.next("model: fake-model").next("permissions: ask").next("mcp: 1 server (1 ready)").next("nod> ");
    term.type_line("/mcp path").next("mcp.json").next("nod> ");
    term.type_line("/mcp list").next("fx  transport=stdio state=ready").next("tools=15").next("nod> ");
    term.type_line("/mcp resource list fx").next("fixture://text/1").next("nod> ");
    term.type_line(r#"/mcp prompt get fx greet '{"name": "Ada"}'"#).next("Hello, Ada!").next("nod> ");
    term.type_line("/mcp tool nosuch").next("nod: ").next("nod> ");
    term.type_line("/permissions").next("[permissions] mode=ask").next("nod> ");
    term.type_line("/permissions full-access").next("permissions: mode=full-access (this session)").next("nod> ");
    term.type_line("/model other-model").next("model: other-model").next("nod> ");
    term.type_line("/src/file.rs explain").next("About that file.").next("nod> ");
    term.type_line("/new").next("new conversation").next("nod> ");
    term.type_line("and again").next("Second.").next("nod> ");
    term.type_line("/exit");
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "only the two prompts reached the model");
    assert_eq!(requests[0]["model"], "other-model");
    assert_eq!(user_messages(&requests[0]), ["/src/file.rs explain"]);
    assert_eq!(user_messages(&requests[1]), ["and again"], "/new starts a fresh conversation");
    env.assert_no_leftovers();
}

#[test]
fn the_browser_previews_a_resource_and_insert_sends_it_with_the_next_message() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![Step::Text("It is resource one.".into()), Step::Text("A greeting.".into())]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("/mcp");
    term.next("MCP servers (1)").next("1. fx  ready  profile  15 tools · 4 resources · 1 template · 2 prompts");
    term.next("number: open").type_line("1");
    term.next("fx (ready)").next("2. Resources").next("number · b back").type_line("2");
    term.next("1. text-1  fixture://text/1  text/plain").next("number · b back").type_line("1");
    term.next("text resource 1").next("[i] Insert").type_line("i");
    term.next("[attached: fx resource fixture://text/1").next("nod> ");
    assert!(model.requests().is_empty(), "nothing is sent before Enter");
    term.type_line("what does it say?").next("It is resource one.").next("nod> ");
    // A template filled with the server's completions, and a prompt, previewed and inserted.
    term.type_line("/mcp").next("number: open").type_line("1");
    term.next("3. Resource templates").next("number · b back").type_line("3");
    term.next("fixture://text/{id}").next("number · b back").type_line("1");
    term.next("[f] fill").type_line("f");
    term.next("id (?text lists completions): ").type_line("?");
    term.next("1  2  3").next("id (?text lists completions): ").type_line("2");
    term.next("text resource 2").next("[i] Insert").type_line("b");
    term.next("number · b back").type_line("b");
    term.next("4. Prompts").next("number · b back").type_line("4");
    term.next("1. greet — A greeting (args: name*, style)").next("number · b back").type_line("1");
    term.next("[g] get").type_line("g");
    term.next("name (required): ").type_line("Ada");
    term.next("style (optional): ").type_line("");
    term.next("user: Hello, Ada!").next("[i] Insert").type_line("i");
    term.next("[attached: fx prompt greet").next("nod> ").type_line("answer it");
    term.next("A greeting.").next("nod> ");
    exit(term);
    let requests = model.requests();
    let first = user_messages(&requests[0]).join("\n");
    assert!(
        first.starts_with("<untrusted_external source=\"mcp\" server=\"fx\" resource=\"fixture://text/1\">"),
        "{first}"
    );
    assert!(first.contains("text resource 1") && first.ends_with("what does it say?"), "{first}");
    let second = user_messages(&requests[1]).last().unwrap().clone();
    assert!(second.contains("prompt=\"greet\"") && second.contains("user: Hello, Ada!"), "{second}");
    assert!(!second.contains("text resource 2"), "a preview left with b is not attached");
    env.assert_no_leftovers();
}

#[test]
fn a_tool_selected_in_the_browser_is_offered_to_the_model() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![Step::Text("Fine.".into())]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("/mcp").next("number: open").type_line("1");
    term.next("1. Tools").next("number · b back").type_line("1");
    term.next("1. mcp_fx_echo — Echoes its message back").next("number · b back").type_line("1");
    term.next("echo (mcp_fx_echo)").next("\"message\"").next("[s] select").type_line("s");
    term.next("selected mcp_fx_echo").next("number · b back").type_line("q");
    term.next("nod> ").type_line("use it");
    term.next("Fine.").next("nod> ");
    exit(term);
    assert!(tool_names(&model.requests()[0]).contains(&"mcp_fx_echo".to_string()));
}

#[test]
fn the_trust_prompt_leaves_servers_for_later_or_approves_them() {
    let env = Env::new();
    let repo = pending_repo(&env, "lint");
    let model = Model::start(vec![]);
    let mut term = shell_in(&env, &model, Some(&repo));
    term.next("This workspace's .mcp.json defines 1 MCP server that has not been approved:");
    term.next("1. project server lint (stdio) runs this program").next(FIXTURE);
    term.next("[enter] decide later > ").type_line("");
    term.next("nod> ").type_line("/mcp list");
    term.next("MCP health (0 servers)").next("nod> ");
    exit(term);
    assert!(env.wire().is_empty(), "a server left for later never starts");

    let mut term = shell_in(&env, &model, Some(&repo));
    term.next("[enter] decide later > ").type_line("1");
    term.next("approve lint? [y/n] ").type_line("y");
    term.next("approved project server lint").next("✓ lint ready (15 tools)").next("nod> ");
    exit(term);
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(env.path("settings.json")).unwrap()).unwrap();
    assert!(settings.to_string().contains("lint"), "{settings}");

    let mut term = shell_in(&env, &model, Some(&repo));
    term.next("✓ lint ready").next("nod> ");
    assert!(!term.since().contains("not been approved"), "an approved server is not asked about again");
    exit(term);
    env.assert_no_leftovers();
}

#[test]
fn an_elicitation_form_asks_again_on_invalid_input_and_confirms() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let schema = json!({ "type": "object", "properties": {
        "count": { "type": "integer", "minimum": 1, "maximum": 9, "description": "How many" },
    }, "required": ["count"] });
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_elicit" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_elicit", json!({ "schema": schema }))]),
        Step::Text("Got it.".into()),
    ]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("ask me");
    term.next("MCP server 'fx' asks: Please tell me your name").next("How many");
    term.next("count (integer) (required): ").type_line("many");
    term.next("not a whole number; again").next("count (integer) (required): ").type_line("12");
    term.next("12 is greater than the maximum of 9; again").next("count (integer) (required): ").type_line("4");
    term.next("  count = 4").next("[a] accept (Enter)  [d] decline  [c] cancel > ").type_line("a");
    term.next("Got it.").next("nod> ");
    exit(term);
    let result = &tool_messages(&model.requests()[2])[1].1;
    assert!(result.contains(r#"{"action":"accept","content":{"count":4}}"#), "{result}");
}

#[test]
fn a_url_request_shows_its_host_and_is_printed_on_consent() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_elicit" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_elicit", json!({ "url": "https://example.com/sign-in?x=1" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_elicit", json!({ "url": "http://example.com/plain" }))]),
        Step::Text("Done.".into()),
    ]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("sign me in");
    term.next("MCP server 'fx' asks you to open a URL: Please sign in");
    term.next("https://example.com/sign-in?x=1   (host: example.com)");
    term.next("[o] open in browser  [p] print only  [d] decline > ").type_line("p");
    term.next("https://example.com/sign-in?x=1");
    term.next("! refused URL elicitation from 'fx': scheme not allowed").next("Done.").next("nod> ");
    exit(term);
    let requests = model.requests();
    assert!(tool_messages(&requests[2])[1].1.contains(r#"{"action":"accept"}"#));
    assert!(tool_messages(&requests[3])[2].1.contains(r#"{"action":"decline"}"#));
}

#[test]
fn a_permission_prompt_refuses_with_a_note_or_allows_for_the_session() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let echo = |message: &str| Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": message }))]);
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
        echo("refused"),
        echo("granted"),
        echo("again"),
        Step::Text("Finished.".into()),
    ]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("echo three times");
    term.next("\"refused\"").next("[y] once").type_line("3 use the cached copy");
    term.next("\"granted\"").next("[y] once").type_line("2");
    term.next("Finished.").next("nod> ");
    assert!(!term.since().contains("[y] once"));
    term.type_line("/permissions").next("session grants:").next("mcp_fx_echo").next("nod> ");
    exit(term);
    let messages: Vec<String> = env
        .wire()
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["arguments"]["message"].to_string())
        .collect();
    assert_eq!(messages, [r#""granted""#, r#""again""#], "the refused call never reached the server");
    let after_refusal = &model.requests()[2];
    assert!(tool_messages(after_refusal)[1].1.contains("user_denied"));
    assert!(
        user_messages(after_refusal).iter().any(|m| m.contains("use the cached copy")),
        "the note reaches the model: {:?}",
        user_messages(after_refusal)
    );
}

#[test]
fn reload_keeps_the_servers_when_the_profile_is_broken_and_applies_a_fixed_one() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![]);
    let mut term = shell(&env, &model);
    ready(&mut term);
    std::fs::write(env.path("mcp.json"), "{ \"mcp\": { broken").unwrap();
    term.type_line("/mcp reload").next("MCP reload kept the previous servers:").next("nod> ");
    term.type_line("/mcp list").next("fx  transport=stdio state=ready").next("nod> ");
    let second = env.fixture_entry(&[], json!({}));
    let first = env.fixture_entry(&[], json!({}));
    env.profile(json!({ "mcp": { "fx": first, "gx": second } }));
    term.type_line("/mcp reload").next("✓ gx ready").next("MCP reloaded: 2 servers (2 ready)").next("nod> ");
    term.type_line("/mcp list").next("gx  transport=stdio state=ready").next("nod> ");
    exit(term);
    env.assert_no_leftovers();
}

#[test]
fn a_failed_required_server_ends_the_start_with_its_reason() {
    let env = Env::new();
    env.profile(json!({ "mcp": { "must": { "command": ["/nonexistent/nod-it-program"], "required": true } } }));
    let model = Model::start(vec![]);
    let term = shell(&env, &model);
    let (code, shown) = term.wait();
    assert_eq!(code, Some(1), "{shown}");
    assert!(shown.contains("required MCP server 'must' failed"), "{shown}");
    assert!(!shown.contains("nod> "), "{shown}");
}

#[test]
fn ctrl_c_cancels_a_tool_call_on_the_wire_and_the_shell_goes_on() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_hang" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_hang", json!({}))]),
        Step::Text("Still here.".into()),
    ]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("hang");
    term.next("● mcp_fx_hang");
    env.wait_for_wire("tools/call", std::time::Duration::from_secs(20));
    term.keys(&[3]).next("^C interrupted").next("nod> ");
    let cancelled = env.wait_for_wire("notifications/cancelled", std::time::Duration::from_secs(20));
    assert_eq!(cancelled["params"]["reason"], "client cancelled");
    term.type_line("are you there?").next("Still here.").next("nod> ");
    // Ctrl-C at the prompt asks for a second one; the second exits.
    term.keys(&[3]).next("(press Ctrl-C again to exit)").next("nod> ").keys(&[3]);
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    env.assert_no_leftovers();
}

#[test]
fn history_recalls_prompts_and_keeps_secrets_out_of_its_file() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![Step::Text("One.".into()), Step::Text("Two.".into()), Step::Text("Three.".into())]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("first question");
    term.next("One.").next("nod> ").type_line("/mcp add spare /bin/true --token hunter2-canary");
    term.next("nod> ").type_line("a long \\");
    term.next("... ").type_line("question");
    term.next("Two.").next("nod> ");
    // Up recalls the two-line entry, Up again moves to its first line, and Up once more
    // recalls the entry before it.
    term.keys(b"\x1b[A\x1b[A\x1b[A\r").next("Three.").next("nod> ");
    exit(term);
    let requests = model.requests();
    assert_eq!(user_messages(&requests[1]).last().unwrap(), "a long \nquestion");
    assert_eq!(user_messages(&requests[2]).last().unwrap(), "first question");
    let path = env.path("prompt_history");
    let history = std::fs::read_to_string(&path).unwrap();
    // A recalled line is a new entry; a line equal to the one before it is not.
    assert_eq!(history, "first question\na long \\nquestion\nfirst question\n");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
}

/// The shell's own parser decides: no spacing or flag order saves a secret-bearing `/mcp`
/// line, and a history file left readable to others is made private.
#[test]
fn history_keeps_mcp_secrets_out_however_they_are_spelled() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let path = env.path("prompt_history");
    std::fs::write(&path, "old entry\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let model = Model::start(vec![]);
    let mut term = shell(&env, &model);
    ready(&mut term);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "made private on opening");
    term.type_line("/mcp  add -e TOKEN=two-spaces-canary bad.name /bin/true");
    term.next("invalid server name").next("nod> ");
    term.type_line("/mcp --json add --env TOKEN=json-first-canary bad.name /bin/true");
    term.next("invalid server name").next("nod> ");
    term.type_line("/mcp add -e TOKEN=unfinished-canary").next("nod> ");
    term.type_line("/mcp  path").next("mcp.json").next("nod> ");
    exit(term);
    let history = std::fs::read_to_string(&path).unwrap();
    assert_eq!(history, "old entry\n/mcp  path\n");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn piped_lines_run_the_same_repl_without_a_terminal() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![Step::Text("Piped answer.".into())]);
    let out = piped(&env, &model, "/mcp path\nhello there\n/exit\n").run();
    out.code(0).within(30.0).stdout_has("mcp.json").stdout_has("Piped answer.").stderr_has("nod 0.1.0 · fake-model");
    assert_eq!(user_messages(&model.requests()[0]), ["hello there"]);
    env.assert_no_leftovers();
}

/// Without a terminal nobody can be asked: pending project servers stay pending (one line
/// says how to approve them), and the piped line after is a message, not an answer.
#[test]
fn a_piped_shell_leaves_project_servers_pending() {
    let env = Env::new();
    let repo = pending_repo(&env, "lint");
    let model = Model::start(vec![Step::Text("A message.".into())]);
    let out = piped(&env, &model, "a\n/exit\n").cwd(&repo).run();
    out.code(0)
        .within(30.0)
        .stderr_line_has(&["lint", "nod mcp trust approve <name>"])
        .stderr_lacks("approved project server");
    assert_eq!(user_messages(&model.requests()[0]), ["a"]);
    assert!(env.wire().is_empty(), "a pending server never starts");
    let states = env.nod(["mcp", "list", "--json"]).cwd(&repo).run().json();
    assert_eq!(states["project"]["servers"][0]["trust"], "pending", "{states}");
}

/// A call that needs approval in a piped shell is refused as in `nod ask`
/// (permission_required), and the next line is the next message.
#[test]
fn a_piped_shell_refuses_calls_that_need_approval() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "unasked" }))]),
        Step::Text("Refused.".into()),
        Step::Text("Second.".into()),
    ]);
    let out = piped(&env, &model, "echo something\n1\n/exit\n").run();
    out.code(0).within(30.0).stdout_has("Refused.").stdout_has("Second.");
    let requests = model.requests();
    assert!(tool_messages(&requests[2])[1].1.contains("permission_required"), "{:?}", tool_messages(&requests[2]));
    assert_eq!(user_messages(&requests[3]).last().unwrap(), "1");
    assert!(env.wire().iter().all(|m| m["method"] != "tools/call"), "the refused call never reached the server");
    env.assert_no_leftovers();
}

#[test]
fn configuration_commands_change_the_profile_and_reload() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line(&format!("/mcp add gx {FIXTURE} --record {}", env.record_path().display()));
    term.next("added server gx").next("MCP reloaded: 2 servers (2 ready)").next("nod> ");
    term.type_line("/mcp remove gx").next("MCP reloaded: 1 server (1 ready)").next("nod> ");
    term.type_line("/mcp logout fx").next("nod: no stored credentials for server fx").next("nod> ");
    term.type_line("/mcp trust reset").next("cleared project trust").next("MCP reloaded").next("nod> ");
    term.type_line("/mcp frobnicate").next("nod: ").next("nod> ");
    exit(term);
    let profile = std::fs::read_to_string(env.path("mcp.json")).unwrap();
    assert!(!profile.contains("\"gx\""), "{profile}");
    env.assert_no_leftovers();
}

/// The whole of issue 13 in one session: approve a project server, browse a resource and
/// insert it, ask a question that needs a tool, answer a permission prompt and a form,
/// reload, exit. `NOD_IT_TRANSCRIPT=1` prints what the terminal showed.
#[test]
fn a_whole_session_from_trust_to_exit() {
    let env = Env::new();
    let repo = pending_repo(&env, "docs");
    let model = Model::start(vec![
        Step::Calls("Let me ask you.".into(), vec![call("capability_search", json!({ "query": "elicit a name" }))]),
        Step::Calls(String::new(), vec![call("mcp_docs_elicit", json!({}))]),
        Step::Text("The resource says 'text resource 1', and your name is Grace.".into()),
    ]);
    let mut term = shell_in(&env, &model, Some(&repo));
    term.next("[enter] decide later > ").type_line("a");
    term.next("approved project server docs").next("✓ docs ready (15 tools)").next("nod> ");
    term.type_line("/mcp").next("1. docs  ready  project").next("number: open").type_line("1");
    term.next("2. Resources").next("number · b back").type_line("2");
    term.next("1. text-1").next("number · b back").type_line("1");
    term.next("[i] Insert").type_line("i").next("[attached: docs resource fixture://text/1").next("nod> ");
    term.type_line("what does it say, and what is my name?");
    term.next("Allow this call?").next("[y] once").type_line("1");
    term.next("MCP server 'docs' asks: Please tell me your name");
    term.next("name (required) [Enter: Ada]: ").type_line("Grace");
    term.next("age (integer) [Enter: 36]: ").type_line("");
    term.next("ok (y/n) [Enter: y]: ").type_line("");
    term.next("[Enter: green]: ").type_line("");
    term.next("[a] accept").type_line("a");
    term.next("your name is Grace.").next("nod> ");
    term.type_line("/mcp reload").next("MCP reloaded: 1 server (1 ready)").next("nod> ");
    let shown = exit(term);
    if std::env::var_os("NOD_IT_TRANSCRIPT").is_some() {
        eprintln!("{shown}");
    }
    let requests = model.requests();
    let first = user_messages(&requests[0]).join("\n");
    assert!(first.contains("text resource 1") && first.ends_with("what is my name?"), "{first}");
    let answer = &tool_messages(&requests[2])[1].1;
    assert!(answer.contains(r#""name":"Grace""#), "{answer}");
    env.assert_no_leftovers();
}

/// A subagent's call is asked about at the shell's prompt, named by the subagent, and runs
/// once approved there.
#[test]
fn a_subagents_call_is_approved_at_the_shell_prompt_under_its_name() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let message = |text: &str| call("subagent", json!({ "action": "message", "name": "scribe", "message": text }));
    let model = Model::routed(vec![
        (
            "SCRIBE:",
            vec![
                Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
                Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "from scribe" }))]),
                Step::Text("Scribe echoed.".into()),
            ],
        ),
        (
            "",
            vec![Step::Calls(String::new(), vec![message("SCRIBE: echo something")]), Step::Text("Delegated.".into())],
        ),
    ]);
    let mut term = shell(&env, &model);
    ready(&mut term).type_line("delegate an echo");
    term.next("● subagent").next("Allow this call?").next("(server fx, tool echo)");
    term.next("asked by subagent scribe").next("[y] once").type_line("1");
    term.next("Delegated.").next("nod> ");
    exit(term);
    let echoed: Vec<Value> = crate::support::with_method(&env.wire(), "tools/call").into_iter().cloned().collect();
    assert_eq!(echoed.len(), 1);
    assert_eq!(echoed[0]["params"]["arguments"]["message"], "from scribe");
    env.assert_no_leftovers();
}

#[test]
fn mcp_commands_use_the_running_server_and_print_as_nod_mcp_does() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![]);
    let call = r#"/mcp tool call fx echo '{"message": "a"}'"#;
    let out = env
        .nod(Vec::<String>::new())
        .env("NOD_BASE_URL", model.url())
        .env("NOD_MODEL", "fake-model")
        .stdin(format!("/mcp tool list fx\n/mcp tool list fx\n{call}\n{call}\n/mcp tool call nosuch echo\n/exit\n"))
        .run();
    // The line naming a server that does not exist failed: a piped shell says so in its status.
    out.code(1).within(30.0);
    // The agent's server answered every command: one process, one handshake all session.
    let wire = env.wire();
    assert_eq!(crate::support::with_method(&wire, "initialize").len(), 1, "{wire:#?}");
    assert_eq!(crate::support::with_method(&wire, "tools/call").len(), 2, "{wire:#?}");
    out.stderr_has("nod: no server named nosuch");
    let list = env.nod(["mcp", "tool", "list", "fx"]).run();
    let one = env.nod(["mcp", "tool", "call", "fx", "echo", r#"{"message": "a"}"#]).run();
    one.code(0);
    // The shell lists from its agent's session (kept for the agent), `nod mcp` page by page:
    // the same rows either way, each time.
    assert_eq!(out.text(), format!("{}{}{}{}", list.text(), list.text(), one.text(), one.text()), "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_json_argument_is_taken_as_written() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![]);
    let out = piped(&env, &model, "/mcp tool call fx echo {\"message\": \"two words\"}\n/exit\n").run();
    out.code(0).within(30.0).stdout_has("two words");
    assert!(model.requests().is_empty());
}

#[test]
fn a_piped_shell_waits_for_its_servers_stays_quiet_at_exit_and_fails_when_a_line_did() {
    let env = Env::new();
    env.fixture(&["--init-delay-ms", "300"], json!({}));
    let model = Model::start(vec![]);
    let out = piped(&env, &model, "/mcp list\n/exit\n").run();
    out.code(0).within(30.0).stdout_has("state=ready").stdout_lacks("state=starting");
    out.stderr_lacks("shutting down");
    let out = piped(&env, &model, "/nope\n").run();
    out.code(1).within(30.0).stderr_has("unknown command /nope");
    // Leaving at once while a server still starts prints nothing about it.
    let out = piped(&env, &model, "/exit\n").run();
    out.code(0).within(30.0).stderr_lacks("shutting down").stderr_lacks("cancelled");
    env.assert_no_leftovers();
}

#[test]
fn a_servers_sampling_request_is_put_to_the_person_and_runs_only_when_allowed() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let sample = |prompt: &str| call("mcp_fx_sample", json!({ "prompt": prompt }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![sample("what is 2+2?")]),
        Step::Text("Four.".into()),
        Step::Text("It said four.".into()),
        Step::Calls(String::new(), vec![sample("and 3+3?")]),
        Step::Text("Refused.".into()),
    ]);
    let mut term = shell(&env, &model);
    term.next("✓ fx ready (16 tools)").next("nod> ").type_line("sample it");
    // Shown: the server, the messages, the token limit and the model that would answer.
    term.next("Allow this call?").next("sampling  (server fx)").next("what is 2+2?").next("maxTokens: 100");
    term.next("model: \"fake-model\"");
    term.next("[y] once").type_line("y");
    term.next("It said four.").next("nod> ").type_line("again");
    term.next("sampling  (server fx)").next("[y] once").type_line("n");
    term.next("Refused.").next("nod> ");
    exit(term);
    let requests = model.requests();
    assert_eq!(requests[2]["messages"][1]["content"], "what is 2+2?", "the sampling request went to the model");
    let refused = tool_messages(&requests[5]).last().unwrap().1.clone();
    assert!(refused.contains("declined by the user"), "{refused}");
    assert_eq!(requests.len(), 6, "nothing was sampled for the refused request");
    env.assert_no_leftovers();
}

#[test]
fn sampling_follows_the_shells_model_and_a_for_the_session_stops_the_questions() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let sample = |prompt: &str| call("mcp_fx_sample", json!({ "prompt": prompt }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![sample("what is 2+2?")]),
        Step::Text("Four.".into()),
        Step::Text("It said four.".into()),
        Step::Calls(String::new(), vec![sample("and 3+3?")]),
        Step::Text("Six.".into()),
        Step::Text("It said six.".into()),
    ]);
    let mut term = shell(&env, &model);
    term.next("✓ fx ready (16 tools)").next("nod> ");
    term.type_line("/model other-model").next("model: other-model").next("nod> ");
    term.type_line("sample it");
    term.next("sampling  (server fx)").next("model: \"other-model\"");
    term.next("[a] sampling by fx for this session").type_line("a");
    term.next("It said four.").next("nod> ");
    // Allowed for the session: the second request is not asked about.
    term.type_line("again").next("It said six.").next("nod> ");
    exit(term);
    let requests = model.requests();
    assert_eq!(requests.len(), 7, "both samplings reached the model");
    for (i, question) in [(2, "what is 2+2?"), (5, "and 3+3?")] {
        assert_eq!(requests[i]["messages"][1]["content"], question, "{}", requests[i]);
        assert_eq!(requests[i]["model"], "other-model", "the sampler follows /model: {}", requests[i]);
    }
    let result = tool_messages(&requests[6]).last().unwrap().1.clone();
    assert!(result.contains(r#""model":"other-model""#), "{result}");
    env.assert_no_leftovers();
}

#[test]
fn a_model_chosen_in_a_shell_without_one_lets_servers_sample_after_a_reload() {
    let env = Env::new();
    env.fixture(&["--sample"], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" }, "sampling": { "fx": "allow" } }));
    let model = Model::start(script_sampling("Four."));
    let mut term = env.nod(Vec::<String>::new()).env("NOD_BASE_URL", model.url()).timeout(60).spawn_on_terminal();
    term.next("✓ fx ready").next("nod> ");
    term.type_line("/model fake-model").next("model: fake-model").next("from the next /mcp reload").next("nod> ");
    term.type_line("/mcp reload").next("MCP reloaded: 1 server (1 ready)").next("nod> ");
    term.type_line("sample it").next("It said four.").next("nod> ");
    exit(term);
    let initializes: Vec<Value> = env.wire().into_iter().filter(|m| m["method"] == "initialize").collect();
    assert_eq!(initializes.len(), 2, "{initializes:?}");
    assert!(initializes[0]["params"]["capabilities"].get("sampling").is_none(), "no model, no sampling");
    assert_eq!(initializes[1]["params"]["capabilities"]["sampling"], json!({ "tools": {} }));
    assert_eq!(model.requests()[2]["messages"][1]["content"], "what is 2+2?");
    env.assert_no_leftovers();
}

fn script_sampling(answer: &str) -> Vec<Step> {
    vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_sample" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_sample", json!({ "prompt": "what is 2+2?" }))]),
        Step::Text(answer.into()),
        Step::Text("It said four.".into()),
    ]
}
