//! Saved sessions: `nod ask` saves each conversation as it goes, `-c` and `--resume` go on with
//! one (what the model receives, exactly), `nod sessions` lists, shows, removes and prunes;
//! a kill in the middle of a turn and a torn last line lose only what was being written, and
//! no secret reaches the disk.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ask::{ask, call, settings};
use crate::model::{Model, Step};
use crate::support::Env;

fn session_files(env: &Env) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(env.path("sessions")) else { return Vec::new() };
    let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    files
}

/// The messages of a chat request after the system prompt.
fn conversation(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system", "{request}");
    messages[1..].to_vec()
}

#[test]
fn a_follow_up_sends_the_saved_conversation_exactly_as_the_model_saw_it() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let first = Model::start(vec![
        Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "echo message back" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "forty-two" }))]),
        Step::Text("The server said forty-two.".into()),
    ]);
    let out = ask(&env, &first, &["--json", "what does echo say?"]).run();
    out.code(0).within(30.0);
    let id = out.json()["session_id"].as_str().unwrap().to_string();
    assert!(id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let files = session_files(&env);
    assert_eq!(files.len(), 1);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(env.path("sessions")).unwrap().permissions().mode() & 0o777, 0o700);

    let second = Model::start(vec![Step::Text("Still forty-two.".into())]);
    let out = ask(&env, &second, &["-c", "--json", "and", "again?"]).run();
    out.code(0);
    assert_eq!(out.json()["session_id"], id.as_str(), "the same session goes on");
    let before = conversation(first.requests().last().unwrap());
    let now = conversation(&second.requests()[0]);
    assert_eq!(now.len(), before.len() + 2, "{now:#?}");
    assert_eq!(now[..before.len()], before[..], "the earlier messages, exactly");
    assert_eq!(now[before.len()]["role"], "assistant");
    assert_eq!(now[before.len()]["content"], "The server said forty-two.");
    assert_eq!(now[before.len() + 1], json!({ "role": "user", "content": "and again?" }));

    // --resume by a prefix; the third run sees both earlier turns.
    let third = Model::start(vec![Step::Text("Yes.".into())]);
    ask(&env, &third, &["--resume", &id[..4], "sure?"]).run().code(0);
    let seen = conversation(&third.requests()[0]);
    assert_eq!(seen[..now.len()], now[..]);
    assert_eq!(seen.last().unwrap()["content"], "sure?");

    let listed = env.nod(["sessions", "--json"]).run();
    listed.code(0);
    let sessions = listed.json()["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["title"], "what does echo say?");
    assert_eq!(sessions[0]["surface"], "ask");
    assert_eq!(sessions[0]["messages"], seen.len() + 1, "every message of the three runs");
    env.nod(["sessions", "show", &id[..6]])
        .run()
        .code(0)
        .stdout_has("> what does echo say?")
        .stdout_has("● mcp_fx_echo {\"message\":\"forty-two\"}")
        .stdout_has("> sure?")
        .stdout_has("Yes.");
    env.nod(["sessions", "show", "ffffffffffff"]).run().code(2).stderr_has("no saved session ffffffffffff");
    env.nod(["sessions", "rm", &id]).run().code(0).stdout_has(&format!("removed session {id}"));
    assert!(session_files(&env).is_empty());
    let none = Model::start(vec![]);
    ask(&env, &none, &["-c", "more"]).run().code(2).stderr_has("no saved session of this workspace");
    assert!(none.requests().is_empty(), "nothing is sent when there is nothing to continue");
}

#[test]
fn no_key_and_no_configured_secret_reaches_the_session_file() {
    const SECRET: &str = "canary-env-secret-5517";
    let env = Env::new();
    let mut entry = env.fixture_entry(&[], json!({}));
    entry["env"]["FX_TOKEN"] = json!(SECRET);
    env.profile(json!({ "mcp": { "fx": entry } }));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": format!("say {SECRET}") }))]),
        Step::Text(format!("It said {SECRET}.")),
    ]);
    ask(&env, &model, &["--json", "repeat", SECRET]).run().code(0);
    let files = session_files(&env);
    assert_eq!(files.len(), 1);
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains("untrusted_external source=\\\"mcp\\\" server=\\\"fx\\\" tool=\\\"echo\\\""),
        "the echo ran: {text}"
    );
    assert!(text.contains("repeat"), "the conversation is there: {text}");
    assert!(!text.contains(SECRET), "a configured secret on disk: {text}");
    assert!(!text.contains(crate::ask::KEY), "the API key on disk: {text}");
    assert!(!text.contains(&model.url()), "the endpoint on disk: {text}");
    // Saving off: by flag, and by settings.
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![Step::Text("a".into()), Step::Text("b".into())]);
    let out = ask(&env, &model, &["--json", "--no-save", "hi"]).run();
    assert_eq!(out.code(0).json()["session_id"], "");
    settings(&env, json!({ "save_sessions": false }));
    ask(&env, &model, &["hi"]).run().code(0);
    assert!(session_files(&env).is_empty());
}

#[test]
fn a_kill_in_the_middle_of_a_turn_and_a_torn_line_lose_only_what_was_being_written() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let select = |name: &str| call("mcp_select_tool", json!({ "name": name }));
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![select("mcp_fx_slow"), select("mcp_fx_echo")]),
        Step::Calls(
            "Waiting.".into(),
            vec![call("mcp_fx_echo", json!({ "message": "done first" })), call("mcp_fx_slow", json!({ "ms": 60_000 }))],
        ),
    ]);
    let running = ask(&env, &model, &["wait", "for", "it"]).spawn();
    // The tool is running (the server got the call); its call is on disk: kill nod.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !env.wire().iter().any(|m| m["method"] == "tools/call" && m["params"]["name"] == "slow") {
        assert!(Instant::now() < deadline, "the slow call was not sent within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let file = loop {
        let found = session_files(&env).into_iter().next();
        let saved = |f: &std::path::PathBuf| std::fs::read_to_string(f).unwrap_or_default().contains("done first");
        if let Some(file) = found.filter(saved) {
            break file;
        }
        assert!(Instant::now() < deadline, "the tool call was not saved within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    };
    unsafe { libc::kill(running.pid(), libc::SIGKILL) };
    let _ = running.wait();
    // A torn line after it, as a crash during a write would leave.
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{\"role\":\"tool\",\"tool_call_id\":\"x\",\"cont");
    std::fs::write(&file, &text).unwrap();

    let next = Model::start(vec![Step::Text("Here.".into())]);
    let out = ask(&env, &next, &["-c", "are", "you", "there?"]).run();
    out.code(0).stderr_has("could not be read and was skipped").stdout_has("Here.");
    let seen = conversation(&next.requests()[0]);
    assert_eq!(seen.len(), 8, "{seen:#?}");
    assert_eq!(seen[0], json!({ "role": "user", "content": "wait for it" }));
    assert_eq!(seen[1]["tool_calls"][0]["function"]["name"], "mcp_select_tool");
    assert_eq!((seen[2]["role"].clone(), seen[3]["role"].clone()), (json!("tool"), json!("tool")), "the finished step");
    assert_eq!(seen[4]["content"], "Waiting.");
    let calls = seen[4]["tool_calls"].as_array().unwrap();
    let names: Vec<&str> = calls.iter().map(|c| c["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mcp_fx_echo"], "the call that finished stays, the unanswered one is dropped");
    assert_eq!(seen[5]["role"], "tool");
    assert!(seen[5]["content"].as_str().unwrap().contains("done first"), "a result saved before the kill: {}", seen[5]);
    assert_eq!(seen[6]["role"], "assistant");
    assert!(seen[6]["content"].as_str().unwrap().contains("ended before completion"), "{}", seen[6]);
    assert_eq!(seen[7], json!({ "role": "user", "content": "are you there?" }));
    // The next continuation sends the same again, and the answer after it.
    let again = Model::start(vec![Step::Text("Still here.".into())]);
    ask(&env, &again, &["-c", "sure?"]).run().code(0);
    let twice = conversation(&again.requests()[0]);
    assert_eq!(twice[..8], seen[..], "{twice:#?}");
    assert_eq!(twice[8]["content"], "Here.");
    env.assert_no_leftovers();
}

#[test]
fn prune_removes_only_what_is_older_than_asked() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = Model::start(vec![Step::Text("a".into()), Step::Text("b".into())]);
    ask(&env, &model, &["first"]).run().code(0);
    ask(&env, &model, &["second"]).run().code(0);
    let files = session_files(&env);
    assert_eq!(files.len(), 2);
    // One of them last written 40 days ago.
    let old = std::time::SystemTime::now() - Duration::from_secs(40 * 86_400);
    std::fs::File::options().write(true).open(&files[0]).unwrap().set_modified(old).unwrap();
    let out = env.nod(["sessions", "prune", "--older-than", "30d", "--json"]).run();
    out.code(0);
    let gone = files[0].file_stem().unwrap().to_str().unwrap();
    assert_eq!(out.json()["removed"], json!([gone]));
    assert_eq!(session_files(&env), files[1..]);
    env.nod(["sessions", "prune"]).run().code(2).stderr_has("needs --older-than");
    env.nod(["sessions", "prune", "--older-than", "soon"]).run().code(2).stderr_has("takes an age");
}

#[test]
fn an_acp_client_lists_and_loads_a_saved_session_in_a_new_process() {
    use crate::acp::{Client, cwd, fixture_server, prompt};
    let env = Env::new();
    settings(&env, json!({ "permission": { "mcp_fx_*": "allow" } }));
    let workspace = cwd(&env);
    let first = Model::start(vec![
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_fx_echo" }))]),
        Step::Calls("Asking.".into(), vec![call("mcp_fx_echo", json!({ "message": "forty-two" }))]),
        Step::Text("It said forty-two.".into()),
    ]);
    let mut client = Client::start(&env, &first);
    let init = client.initialize(json!({}));
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true, "{init}");
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    assert!(caps["list"].is_object() && caps["resume"].is_object() && caps["close"].is_object(), "{caps}");
    let session = client.new_session(&workspace, json!([fixture_server(&env, "fx")]));
    let id = prompt(&mut client, &session, "what does echo say?");
    assert_eq!(client.until_answer(id)["result"]["stopReason"], "end_turn");
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
    let before = conversation(first.requests().last().unwrap());

    // A new process: the session is listed for its cwd, and loads with its conversation replayed.
    let second = Model::start(vec![Step::Text("Still forty-two.".into())]);
    let mut client = Client::start(&env, &second);
    client.initialize(json!({}));
    let listed = client.call("session/list", json!({ "cwd": workspace }));
    let sessions = listed["result"]["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], session.as_str());
    assert_eq!(sessions[0]["title"], "what does echo say?");
    assert!(sessions[0]["updatedAt"].as_str().unwrap().ends_with('Z'), "{listed}");
    let other = client.call("session/list", json!({ "cwd": "/elsewhere" }));
    assert_eq!(other["result"]["sessions"], json!([]));
    let loaded = client.call(
        "session/load",
        json!({ "sessionId": session, "cwd": workspace, "mcpServers": [fixture_server(&env, "fx")] }),
    );
    assert!(loaded["result"]["modes"].is_object(), "{loaded}");
    let replayed: Vec<(String, Value)> = client.updates().into_iter().filter(|(_, u)| !u.is_null()).collect();
    let kinds: Vec<&str> = replayed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ],
        "{replayed:#?}"
    );
    assert_eq!(replayed[0].1["content"]["text"], "what does echo say?");
    assert_eq!(replayed[4].1["title"], "mcp_fx_echo");
    assert_eq!(replayed[5].1["status"], "completed");
    assert!(replayed[5].1["content"][0]["content"]["text"].as_str().unwrap().contains("forty-two"));
    assert_eq!(replayed[6].1["content"]["text"], "It said forty-two.");
    // The model gets the conversation as it was, then the new prompt.
    let id = prompt(&mut client, &session, "sure?");
    assert_eq!(client.until_answer(id)["result"]["stopReason"], "end_turn");
    let now = conversation(&second.requests()[0]);
    assert_eq!(now[..before.len()], before[..]);
    assert_eq!(now[before.len()]["content"], "It said forty-two.");
    assert_eq!(now[before.len() + 1], json!({ "role": "user", "content": "sure?" }));
    let unknown =
        client.call("session/load", json!({ "sessionId": "abcdef000000", "cwd": workspace, "mcpServers": [] }));
    assert!(unknown["error"]["message"].as_str().unwrap().contains("abcdef000000"), "{unknown}");
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
    // The ACP session and `nod sessions` see the same store.
    env.nod(["sessions"]).run().code(0).stdout_line_has(&[&session, "acp", "what does echo say?"]);
}

#[test]
fn the_shell_saves_its_conversations_and_resumes_one_by_id_or_from_its_menu() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let shell = |model: &Model, input: &str| {
        env.nod(Vec::<String>::new())
            .env("NOD_BASE_URL", model.url())
            .env("NOD_MODEL", "fake-model")
            .stdin(input.to_string())
            .timeout(60)
            .run()
    };
    let first = Model::start(vec![Step::Text("Hi there.".into()), Step::Text("Fresh.".into())]);
    let out = shell(&first, "hello shell\n/status\n/new\nsecond talk\n");
    out.code(0).stderr_has("new session (/resume for an earlier one)");
    out.stdout_has("new conversation (saved from its first prompt)");
    assert!(conversation(&first.requests()[1]).len() == 1, "/new starts from nothing");
    let listed = env.nod(["sessions", "--json"]).run();
    let sessions = listed.json()["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 2, "two conversations, two sessions: {sessions:?}");
    let first_id = sessions.iter().find(|s| s["title"] == "hello shell").unwrap()["id"].as_str().unwrap().to_string();
    assert!(sessions.iter().all(|s| s["surface"] == "shell"));
    out.stdout_has(&format!("session: {first_id}"));

    let second = Model::start(vec![Step::Text("Back.".into())]);
    let out = shell(&second, &format!("/resume {}\nwhere were we?\n/resume\n", &first_id[..5]));
    out.code(0).stdout_has(&format!("session {first_id} · 2 messages · hello shell"));
    out.stdout_has("resume one with /resume <id>").stdout_line_has(&["1. ", "msg"]);
    let seen = conversation(&second.requests()[0]);
    assert_eq!(
        seen,
        [
            json!({ "role": "user", "content": "hello shell" }),
            json!({ "role": "assistant", "content": "Hi there." }),
            json!({ "role": "user", "content": "where were we?" }),
        ]
    );
    let out = shell(&second, "/resume 0000\n");
    out.code(1).stderr_has("no saved session 0000");
}

#[test]
fn a_named_subagents_conversation_is_saved_with_its_parents_and_comes_back_with_it() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let message = |text: &str| call("subagent", json!({ "action": "message", "name": "scribe", "message": text }));
    let first = Model::routed(vec![
        ("MEMO:", vec![Step::Text("Noted: blue.".into())]),
        ("PARENT", vec![Step::Calls(String::new(), vec![message("MEMO: remember blue")]), Step::Text("Told.".into())]),
    ]);
    ask(&env, &first, &["PARENT: keep notes"]).run().code(0).stdout_has("Told.");
    let text = std::fs::read_to_string(&session_files(&env)[0]).unwrap();
    assert!(text.contains("\"agent\":\"scribe\""), "the child's lines are in the parent's file: {text}");

    let second = Model::routed(vec![
        ("MEMO:", vec![Step::Text("You said blue.".into())]),
        ("PARENT", vec![Step::Calls(String::new(), vec![message("Which colour?")]), Step::Text("Blue.".into())]),
    ]);
    ask(&env, &second, &["-c", "PARENT: and now?"]).run().code(0).stdout_has("Blue.");
    let child: Vec<Value> = second
        .requests()
        .into_iter()
        .filter(|r| r["messages"][1]["content"].as_str().is_some_and(|c| c.contains("MEMO:")))
        .collect();
    assert_eq!(child.len(), 1, "the child was asked once");
    let seen = conversation(&child[0]);
    assert_eq!(
        seen,
        [
            json!({ "role": "user", "content": "MEMO: remember blue" }),
            json!({ "role": "assistant", "content": "Noted: blue." }),
            json!({ "role": "user", "content": "Which colour?" }),
        ],
        "the child goes on with its own conversation"
    );
    // The parent's conversation holds none of the child's messages.
    let parent = conversation(&second.requests()[0]);
    assert!(parent.iter().all(|m| m["content"] != "Noted: blue."), "{parent:#?}");
}

#[test]
fn two_processes_save_two_sessions_at_once() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let one = Model::start(vec![Step::Text("One.".into())]);
    let two = Model::start(vec![Step::Text("Two.".into())]);
    let a = ask(&env, &one, &["--json", "first", "run"]).spawn();
    let b = ask(&env, &two, &["--json", "second", "run"]).spawn();
    let (a, b) = (a.wait(), b.wait());
    let ids = [a.code(0).json()["session_id"].clone(), b.code(0).json()["session_id"].clone()];
    assert_ne!(ids[0], ids[1]);
    for (id, (prompt, answer)) in ids.iter().zip([("first run", "One."), ("second run", "Two.")]) {
        let shown = env.nod(["sessions", "show", id.as_str().unwrap(), "--json"]).run();
        let messages = shown.code(0).json()["messages"].clone();
        assert_eq!(
            messages,
            json!([{ "role": "user", "content": prompt }, { "role": "assistant", "content": answer, "tool_calls": [] }])
        );
    }
}
