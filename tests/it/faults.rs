use std::time::Duration;

use serde_json::json;

use crate::support::{Env, Output, SERVER, assert_group_gone, fixture_pid, with_method};

/// Runs `nod mcp tool call fx <tool> <args>` against a fixture started with `args`.
fn call(env: &Env, tool: &str, arguments: &str) -> Output {
    env.nod(["mcp", "tool", "call", SERVER, tool, arguments]).run()
}

fn echo(env: &Env) -> Output {
    call(env, "echo", r#"{"message":"still here"}"#)
}

#[test]
fn crash_mid_call_fails_the_call_with_exit_status_and_stderr_tail() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = call(&env, "crash", "{}");
    out.code(2).within(10.0).stderr_line_has(&["server fx", "exit code 3", "crashing on purpose"]);
    env.assert_no_leftovers();
}

#[test]
fn exit_before_initialize_shows_the_stderr_tail() {
    let env = Env::new();
    env.fixture(&["--scenario", "exit-before-init"], json!({}));
    let out = echo(&env);
    out.code(2).within(10.0).stderr_line_has(&["server fx", "exiting before initialize"]);
    env.assert_no_leftovers();
}

#[test]
fn no_answer_to_initialize_fails_at_the_startup_timeout_without_cancelling_it() {
    let env = Env::new();
    env.fixture(&["--scenario", "never-init"], json!({ "startup_timeout_ms": 500 }));
    let out = echo(&env);
    out.code(2).within(5.0).stderr_line_has(&["server fx", "initialize", "startup_timeout_ms"]);
    assert!(out.elapsed >= Duration::from_millis(450), "{}", out.dump());
    let wire = env.wire();
    assert_eq!(with_method(&wire, "initialize").len(), 1, "{wire:?}");
    assert!(with_method(&wire, "notifications/cancelled").is_empty(), "initialize must never be cancelled: {wire:?}");
    env.assert_no_leftovers();
}

#[test]
fn operation_timeout_fails_the_call_and_cancels_it_on_the_wire() {
    let env = Env::new();
    env.fixture(&[], json!({ "operation_timeout_ms": 500 }));
    let out = call(&env, "hang", "{}");
    out.code(2).within(5.0).stderr_line_has(&["server fx", "hang"]);
    assert!(out.stderr.contains("no answer within"), "not a timeout error\n{}", out.dump());
    let wire = env.wire();
    let call = with_method(&wire, "tools/call")[0].clone();
    let cancels = with_method(&wire, "notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{wire:?}");
    assert_eq!(cancels[0]["params"]["requestId"], call["id"], "{wire:?}");
    assert_eq!(cancels[0]["params"]["reason"], "timeout", "{wire:?}");
    env.assert_no_leftovers();
}

#[test]
fn a_garbage_line_is_ignored_with_a_warning_naming_the_server() {
    let env = Env::new();
    env.fixture(&["--scenario", "garbage"], json!({}));
    let out = echo(&env);
    out.code(0).stdout_has("still here").stderr_line_has(&["server fx", "JSON"]);
    env.assert_no_leftovers();
}

#[test]
fn a_frame_over_8_mib_ends_the_connection_with_a_clear_error() {
    let env = Env::new();
    env.fixture(&["--scenario", "huge-frame"], json!({}));
    let out = echo(&env);
    out.code(2).within(10.0).stderr_line_has(&["server fx", "8 MiB", "frame limit"]);
    env.assert_no_leftovers();
}

#[test]
fn invalid_utf8_ends_the_connection_with_a_clear_error() {
    let env = Env::new();
    env.fixture(&["--scenario", "invalid-utf8"], json!({}));
    let out = echo(&env);
    out.code(2).within(10.0).stderr_line_has(&["server fx", "UTF-8"]);
    env.assert_no_leftovers();
}

/// A single argument cannot carry 9 MiB (Linux caps one argv string at 128 KiB), so the
/// request comes through `--jsonl`.
#[test]
fn a_request_over_8_mib_is_refused_and_never_sent() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let line = format!("{}\n", json!({ "message": "x".repeat(9 << 20) }));
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl"]).stdin(line).run();
    out.code(1).within(10.0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 1, "{}", out.dump());
    let message = lines[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("8 MiB frame limit"), "{}", out.dump());
    assert!(message.contains("nothing was sent"), "{}", out.dump());
    let wire = env.wire();
    assert!(with_method(&wire, "tools/call").is_empty(), "sent anyway");
    env.assert_no_leftovers();
}

#[test]
fn a_rejected_version_is_retried_with_one_the_server_supports() {
    let env = Env::new();
    env.fixture(&["--scenario", "reject-version"], json!({}));
    let out = env.nod(["mcp", "list", "--connect", "--json"]).run();
    out.code(0);
    let health = &out.json()["servers"][0];
    assert_eq!(health["state"], "ready", "{}", out.dump());
    assert_eq!(health["protocol_version"], "2025-06-18", "{}", out.dump());
    let wire = env.wire();
    let offers: Vec<_> =
        with_method(&wire, "initialize").iter().map(|m| m["params"]["protocolVersion"].clone()).collect();
    assert_eq!(offers, [json!("2025-11-25"), json!("2025-06-18")], "{wire:?}");
    env.assert_no_leftovers();
}

#[test]
fn an_unknown_protocol_version_is_refused_clearly() {
    let env = Env::new();
    env.fixture(&["--version", "1999-01-01"], json!({}));
    let out = echo(&env);
    out.code(2).within(10.0).stderr_line_has(&["server fx", "1999-01-01", "not support"]);
    assert!(with_method(&env.wire(), "tools/call").is_empty());
    env.assert_no_leftovers();
}

#[test]
fn older_protocol_versions_work() {
    let env = Env::new();
    env.fixture(&["--version", "2024-11-05"], json!({}));
    echo(&env).code(0).stdout_has("still here");
    let out = env.nod(["mcp", "list", "--connect", "--json"]).run();
    out.code(0);
    assert_eq!(out.json()["servers"][0]["protocol_version"], "2024-11-05");

    env.fixture(&["--scenario", "batch", "--version", "2025-03-26"], json!({}));
    echo(&env).code(0).stdout_has("still here");
    env.assert_no_leftovers();
}

/// A JSON-RPC error refusing a tool call exits 1 (nod-mcp(1), EXIT STATUS).
#[test]
fn an_error_without_id_fails_the_only_call_at_once() {
    let env = Env::new();
    env.fixture(&["--scenario", "error-no-id"], json!({ "operation_timeout_ms": 5000 }));
    let out = echo(&env);
    out.code(1).within(3.0).stderr_line_has(&["server fx", "parse error"]);
    env.assert_no_leftovers();
}

#[test]
fn a_response_with_an_unknown_id_is_ignored() {
    let env = Env::new();
    env.fixture(&["--scenario", "unknown-id"], json!({}));
    echo(&env).code(0).stdout_has("still here").stdout_lacks("nobody asked");
    env.assert_no_leftovers();
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_at_shutdown() {
    let env = Env::new();
    env.fixture(&["--scenario", "ignore-sigterm"], json!({}));
    let out = echo(&env);
    out.code(0).within(5.0).stdout_has("still here");
    env.assert_no_leftovers();
}

#[test]
fn a_grandchild_dies_with_a_crashing_server() {
    let env = Env::new();
    env.fixture(&["--scenario", "grandchild"], json!({}));
    let out = call(&env, "crash", "{}");
    out.code(2).within(10.0).stderr_line_has(&["server fx", "exit code 3"]);
    // The server leads its own process group, which the grandchild shares.
    let pgid = fixture_pid(&out.stderr).expect("the stderr tail names the fixture's pid");
    env.assert_no_leftovers();
    assert_group_gone(pgid);
}

#[test]
fn a_stderr_flood_does_not_stop_the_answer() {
    let env = Env::new();
    env.fixture(&["--scenario", "stderr-flood", "--flood-mb", "100"], json!({}));
    echo(&env).code(0).within(10.0).stdout_has("still here");
    env.assert_no_leftovers();
}

#[test]
fn a_server_that_closes_stdout_fails_clearly() {
    let env = Env::new();
    env.fixture(&["--scenario", "stdout-close"], json!({}));
    let out = echo(&env);
    out.code(2).within(10.0).stderr_line_has(&["server fx", "closed its stdout"]);
    env.assert_no_leftovers();
}

#[test]
fn a_server_that_stops_reading_cannot_deadlock_nod() {
    let env = Env::new();
    env.fixture(&["--scenario", "no-read"], json!({ "operation_timeout_ms": 1000 }));
    let line = format!("{}\n", json!({ "message": "y".repeat(1 << 20) }));
    let out = env
        .nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl", "--parallel", "4"])
        .stdin(line.repeat(4))
        .timeout(30)
        .run();
    out.code(1).within(15.0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 4, "{}", out.dump());
    for line in &lines {
        let message = line["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("no answer within"), "{}", out.dump());
    }
    env.assert_no_leftovers();
}

#[test]
fn a_notification_flood_does_not_stop_the_answer() {
    let env = Env::new();
    env.fixture(&["--scenario", "notify-flood"], json!({}));
    echo(&env).code(0).within(10.0).stdout_has("still here");
    env.assert_no_leftovers();
}

#[test]
fn crash_after_initialize_fails_the_call_naming_the_server() {
    let env = Env::new();
    env.fixture(&["--scenario", "crash-after-init"], json!({}));
    let out = echo(&env);
    out.code(2).within(10.0).stderr_line_has(&["server fx", "exit code 4"]);
    env.assert_no_leftovers();
}

#[test]
fn slow_initialize_within_the_startup_timeout_works() {
    let env = Env::new();
    env.fixture(&["--scenario", "slow-init", "--init-delay-ms", "300"], json!({ "startup_timeout_ms": 5000 }));
    echo(&env).code(0).within(10.0).stdout_has("still here");
    env.assert_no_leftovers();
}

/// Faults while the agent waits (issue 27, part 4), in one `nod ask` run: a server that dies
/// on a call fails that call naming the server while another server's call in the same step
/// succeeds; the next step's call starts it again (restart_limit); a server that hangs fails
/// its call at operation_timeout_ms, naming it and the limit, while the other server answers;
/// a server that floods notifications still answers.
#[test]
fn a_server_that_dies_or_hangs_while_the_agent_waits_fails_its_call_and_the_run_goes_on() {
    use crate::ask::{ask, call, settings};
    use crate::model::{Model, Step, tool_messages};
    let env = Env::new();
    let entry = env.fixture_entry(&[], json!({ "operation_timeout_ms": 1500 }));
    let flooding = env.fixture_entry(&["--scenario", "notify-flood"], json!({}));
    env.profile(json!({ "mcp": { "fx": entry.clone(), "gx": entry, "hx": flooding } }));
    settings(&env, json!({ "permission": { "mcp_*": "allow" } }));
    let select = |name: &str| call("mcp_select_tool", json!({ "name": name }));
    let model = Model::start(vec![
        Step::Calls(
            String::new(),
            vec![select("mcp_fx_crash"), select("mcp_gx_echo"), select("mcp_fx_hang"), select("mcp_hx_echo")],
        ),
        // fx dies on its call while gx answers in the same step.
        Step::Calls(
            String::new(),
            vec![call("mcp_fx_crash", json!({})), call("mcp_gx_echo", json!({ "message": "still here" }))],
        ),
        // fx is started again for the next call.
        Step::Calls(String::new(), vec![select("mcp_fx_echo")]),
        Step::Calls(String::new(), vec![call("mcp_fx_echo", json!({ "message": "back" }))]),
        // fx hangs past its operation timeout; gx answers meanwhile.
        Step::Calls(
            String::new(),
            vec![call("mcp_fx_hang", json!({})), call("mcp_gx_echo", json!({ "message": "meanwhile" }))],
        ),
        // hx floods notifications while it answers.
        Step::Calls(String::new(), vec![call("mcp_hx_echo", json!({ "message": "through the flood" }))]),
        Step::Text("Survived.".into()),
    ]);
    let out = ask(&env, &model, &["--json", "break", "things"]).run();
    out.code(0).within(30.0);
    assert_eq!(out.json()["final_output"], "Survived.");
    let requests = model.requests();
    let step =
        |i: usize, n: usize| tool_messages(&requests[i]).into_iter().rev().take(n).map(|(_, r)| r).collect::<Vec<_>>();
    let died = step(2, 2);
    assert!(died.iter().any(|r| r.contains("still here")), "gx answered in the same step: {died:?}");
    let failed = died.iter().find(|r| !r.contains("still here")).unwrap();
    assert!(failed.contains("fx") && failed.contains("exit"), "the call failed naming the server: {failed}");
    assert!(step(4, 1)[0].contains("back"), "fx was started again: {:?}", step(4, 1));
    let hung = step(5, 2);
    assert!(hung.iter().any(|r| r.contains("meanwhile")), "{hung:?}");
    let timed_out = hung.iter().find(|r| !r.contains("meanwhile")).unwrap();
    assert!(
        timed_out.contains(r#"server=\"fx\""#) && timed_out.contains("1.5 s (operation_timeout_ms)"),
        "{timed_out}"
    );
    assert!(step(6, 1)[0].contains("through the flood"), "{:?}", step(6, 1));
    env.assert_no_leftovers();
}
