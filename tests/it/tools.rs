use serde_json::{Value, json};

use crate::support::{Env, SERVER, with_method};

fn call(env: &Env, tool: &str, args: &str) -> crate::support::Output {
    env.nod(["mcp", "tool", "call", SERVER, tool, args]).run()
}

#[test]
fn echo_prints_the_text_result() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = call(&env, "echo", r#"{"message":"hello, nod"}"#);
    out.code(0).within(10.0);
    assert_eq!(out.text(), "hello, nod\n", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn add_prints_the_sum_and_json_gives_the_raw_result() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = call(&env, "add", r#"{"a":2,"b":3}"#);
    out.code(0);
    assert_eq!(out.text(), "5\n", "{}", out.dump());

    let out = env.nod(["mcp", "tool", "call", SERVER, "add", r#"{"a":2,"b":3}"#, "--json"]).run();
    out.code(0);
    let result = out.json();
    assert_eq!(result["content"][0]["type"], "text", "{}", out.dump());
    assert_eq!(result["content"][0]["text"], "5", "{}", out.dump());
    assert_eq!(result["structuredContent"]["sum"], 5, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_tool_error_exits_1_with_its_text_on_stderr_naming_server_and_tool() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "tool", "call", SERVER, "fail"]).run();
    out.code(1).stderr_has("server fx").stderr_has("tool fail").stderr_has("the fixture failed on purpose");
    assert_eq!(out.text(), "", "{}", out.dump());
    env.assert_no_leftovers();
}

/// Over stdio a call is sent without listing first (a round trip it does not need); when the
/// server refuses it, the listing says why in nod's words, exit 2. A server nod already
/// holds a listing of, or a remote one, is checked before anything is sent (below, and
/// `tools_that_require_tasks_are_marked_and_never_called`).
#[test]
fn an_unknown_tool_is_named_with_the_closest_one_when_the_server_refuses_it() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = call(&env, "no_such_tool", "{}");
    out.code(2).stderr_line_has(&["server fx", "no_such_tool", "has no tool named", "the server refused the call"]);
    let methods: Vec<String> = env.wire().iter().filter_map(|m| m["method"].as_str()).map(str::to_string).collect();
    let tail: Vec<&str> = methods.iter().map(String::as_str).skip_while(|m| *m != "tools/call").collect();
    assert_eq!(tail, ["tools/call", "tools/list"], "the call first, the listing after its refusal: {methods:?}");
    env.assert_no_leftovers();
}

#[test]
fn progress_is_shown_on_stderr_and_the_result_printed() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = call(&env, "progress", r#"{"steps":3,"interval_ms":300}"#);
    out.code(0).within(10.0);
    assert_eq!(out.text(), "done 3 steps\n", "{}", out.dump());
    for step in ["progress 1/3", "progress 2/3", "progress 3/3"] {
        out.stderr_line_has(&["fx/progress", step]);
    }
    env.assert_no_leftovers();
}

#[test]
fn image_and_resource_link_blocks_are_summarized() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "tool", "call", SERVER, "image"]).run();
    out.code(0).stdout_has("[image: image/png, 8 bytes]").stdout_has("[resource link: fixture://text/1 (one)]");
    env.assert_no_leftovers();
}

#[test]
fn the_server_gets_the_profile_environment_and_working_directory() {
    let env = Env::new();
    let cwd = env.path("work");
    std::fs::create_dir(&cwd).unwrap();
    env.fixture(&[], json!({ "environment": { "NOD_IT_GREETING": "bonjour" }, "cwd": cwd }));
    call(&env, "env", r#"{"name":"NOD_IT_GREETING"}"#).code(0).stdout_has("bonjour");
    let out = env.nod(["mcp", "tool", "call", SERVER, "cwd"]).run();
    out.code(0);
    assert_eq!(out.text().trim_end(), cwd.to_string_lossy(), "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn tool_list_follows_every_page() {
    let env = Env::new();
    env.fixture(&["--tools", "25", "--page-size", "10"], json!({}));
    let out = env.nod(["mcp", "tool", "list", SERVER, "--json"]).run();
    out.code(0);
    let tools = out.json()["tools"].as_array().cloned().unwrap_or_default();
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names.len(), 15 + 25, "{}", out.dump());
    assert!(names.contains(&"echo") && names.contains(&"tool_0024"), "{names:?}");
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 40, "duplicate tools: {}", out.dump());
    let pages = with_method(&env.wire(), "tools/list").len();
    assert_eq!(pages, 4, "40 tools in pages of 10 take 4 requests");

    let out = env.nod(["mcp", "tool", "list", SERVER]).run();
    // Each line shows how to call the tool: its parameters with their types.
    out.code(0).stdout_has("echo message:string  Echoes its message back");
    assert_eq!(out.text().lines().count(), 40, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_listing_that_fails_on_a_later_page_prints_none_of_it() {
    let env = Env::new();
    // The second page names the first page's cursor again: nod stops there.
    env.fixture(&["--tools", "25", "--page-size", "10", "--scenario", "repeat-cursor"], json!({}));
    for json in [false, true] {
        let mut args = vec!["mcp", "tool", "list", SERVER];
        if json {
            args.push("--json");
        }
        let out = env.nod(args).run();
        out.code(2).stderr_has("repeated a cursor").stdout_lacks("echo");
    }
    env.assert_no_leftovers();
}

#[test]
fn a_page_that_names_its_tools_twice_is_refused_where_it_is_read_item_by_item() {
    let env = Env::new();
    env.fixture(&["--tools", "25", "--page-size", "10", "--scenario", "odd-pages"], json!({}));
    // A plain listing reads a page as it goes, and by the second array it has read the
    // first: it refuses the page, and prints none of the listing.
    let out = env.nod(["mcp", "tool", "list", SERVER]).run();
    out.code(2).stderr_has("names its items twice").stdout_lacks("decoy").stdout_lacks("echo");
    // Read whole, the page's value keeps the last array, as JSON readers do.
    let out = env.nod(["mcp", "tool", "list", SERVER, "--json"]).run();
    out.code(0).stdout_lacks("decoy").stdout_has("echo");
    env.assert_no_leftovers();
}

#[test]
fn a_page_with_a_result_type_nod_does_not_know_is_refused_on_either_road() {
    let env = Env::new();
    env.fixture(
        &["--tools", "25", "--page-size", "10", "--scenario", "odd-pages", "--result-type", "later"],
        json!({}),
    );
    for json in [false, true] {
        let mut args = vec!["mcp", "tool", "list", SERVER];
        if json {
            args.push("--json");
        }
        let out = env.nod(args).run();
        out.code(2).stderr_has("unknown resultType").stdout_lacks("echo");
    }
    // "complete" is what a page says when it says anything.
    let env = Env::new();
    env.fixture(
        &["--tools", "25", "--page-size", "10", "--scenario", "odd-pages", "--result-type", "complete"],
        json!({}),
    );
    let out = env.nod(["mcp", "tool", "list", SERVER]).run();
    out.code(0).stdout_has("echo");
    let listed = env.nod(["mcp", "tool", "list", SERVER, "--json"]).run();
    let tools = listed.code(0).json()["tools"].as_array().map_or(0, Vec::len);
    assert!(tools > 25, "{}", listed.dump());
    assert_eq!(out.text().lines().count(), tools, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn elicit_defaults_accepts_the_form_with_its_defaults() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "tool", "call", SERVER, "elicit", "--elicit", "defaults"]).run();
    out.code(0);
    let answer: Value = serde_json::from_str(out.text().trim()).unwrap_or_else(|_| {
        panic!("the fixture echoes the answer as JSON\n{}", out.dump());
    });
    assert_eq!(answer["action"], "accept", "{}", out.dump());
    assert_eq!(answer["content"], json!({"name": "Ada", "age": 36, "ok": true, "color": "green"}), "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn elicit_decline_and_cancel_answer_so() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    for policy in ["decline", "cancel"] {
        let out = env.nod(["mcp", "tool", "call", SERVER, "elicit", "--elicit", policy]).run();
        out.code(0).stdout_has(&format!(r#""action":"{policy}""#)).stdout_lacks("Ada");
    }
    env.assert_no_leftovers();
}

#[test]
fn elicitation_without_a_policy_exits_3_with_input_required_and_cancels_the_call() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "tool", "call", SERVER, "elicit"]).run();
    out.code(3).within(10.0);
    let report = out.json();
    assert_eq!(report["status"], "input_required", "{}", out.dump());
    assert_eq!(report["server"], SERVER, "{}", out.dump());
    assert_eq!(report["mode"], "form", "{}", out.dump());
    assert_eq!(report["message"], "Please tell me your name", "{}", out.dump());
    assert_eq!(report["requestedSchema"]["properties"]["name"]["default"], "Ada", "{}", out.dump());
    out.stderr_line_has(&["server fx", "input"]).stderr_has("--elicit");
    env.assert_no_leftovers();
}

/// nod-mcp(1): "fail (the default) cancels the call". The cancellation must reach the server
/// before anything that lets the tool finish: once the elicitation is answered, a fast server
/// completes the call first, nod sends no notifications/cancelled and drops the result.
#[test]
fn input_required_cancels_the_call_before_answering_the_elicitation() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    env.nod(["mcp", "tool", "call", SERVER, "elicit"]).run().code(3);
    let wire = env.wire();
    let call = with_method(&wire, "tools/call")[0].clone();
    let cancel =
        wire.iter().position(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == call["id"]);
    let answer = wire.iter().position(|m| m["method"].is_null() && m["id"] == "srv-1");
    let Some(cancel) = cancel else {
        panic!("the tools/call {} was never cancelled: {wire:?}", call["id"]);
    };
    assert!(
        answer.is_none_or(|answer| cancel < answer),
        "the elicitation was answered before the call was cancelled: {wire:?}"
    );
    env.assert_no_leftovers();
}

#[test]
fn a_server_ping_is_answered() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    call(&env, "ask_client", r#"{"method":"ping"}"#).code(0).stdout_has(r#""result":{}"#);
    env.assert_no_leftovers();
}

#[test]
fn sampling_and_roots_requests_are_refused_with_method_not_found() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    for method in ["sampling/createMessage", "roots/list"] {
        let out = call(&env, "ask_client", &json!({ "method": method }).to_string());
        out.code(0).stdout_has(r#""code":-32601"#);
    }
    env.assert_no_leftovers();
}

#[test]
fn a_server_error_log_is_shown_naming_the_server_and_debug_logs_are_not() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    call(&env, "log", r#"{"level":"error","message":"disk on fire"}"#)
        .code(0)
        .stdout_has("logged")
        .stderr_line_has(&["server fx", "disk on fire"]);
    call(&env, "log", r#"{"level":"debug","message":"quiet detail"}"#).code(0).stderr_lacks("quiet detail");
    env.assert_no_leftovers();
}

#[test]
fn a_tool_error_with_json_prints_the_raw_result_and_exits_1() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "tool", "call", SERVER, "fail", "--json"]).run();
    out.code(1);
    assert_eq!(out.json()["isError"], true, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_large_result_under_the_frame_limit_arrives_whole() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = call(&env, "big", r#"{"bytes":5000000}"#);
    out.code(0).within(10.0);
    assert_eq!(out.stdout.len(), 5_000_001, "{}", out.dump());
    assert!(out.stdout[..5_000_000].iter().all(|b| *b == b'x'));
    env.assert_no_leftovers();
}

/// An answer bigger than the 64 KiB a frame is copied up to leaves the worker as the buffer
/// it was read into, and a plain text result is printed from that text without a value: the
/// same text, escapes and all, that the value carries (`--json`) and a stream writes.
#[test]
fn a_big_result_with_escapes_is_printed_as_its_value_holds_it() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let line = "quote \" backslash \\ tab \t \u{e9} \u{2603} \u{1} \u{10348} end\n";
    let message = line.repeat(100_000 / line.len() + 1);
    assert!(message.len() > 100_000);
    let args = json!({ "message": message }).to_string();
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", "-"]).stdin(args.clone()).run();
    out.code(0).within(10.0);
    assert!(out.text() == message, "the text as it was sent, and no newline added: {} bytes", out.stdout.len());
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", "-", "--json"]).stdin(args.clone()).run();
    out.code(0);
    assert!(out.json()["content"][0]["text"] == message.as_str(), "{} bytes", out.stdout.len());
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl"]).stdin(format!("{args}\n{args}\n")).run();
    out.code(0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 2, "{}", out.dump());
    assert!(lines.iter().all(|l| l["content"][0]["text"] == message.as_str()), "{} bytes", out.stdout.len());
    env.assert_no_leftovers();
}

/// A notification bigger than 64 KiB (a server's log message) is no answer: it is read as a
/// message, not handed to a call, and the call it came with still gets its own answer.
#[test]
fn a_big_notification_during_a_call_is_not_taken_for_its_answer() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let message = format!("disk on fire {}", "m".repeat(100_000));
    let args = json!({ "level": "error", "message": message }).to_string();
    let out = env.nod(["mcp", "tool", "call", SERVER, "log", "-"]).stdin(args).run();
    out.code(0).within(10.0).stderr_line_has(&["server fx", "disk on fire mmm"]);
    assert_eq!(out.text(), "logged\n", "{}", out.dump());
    env.assert_no_leftovers();
}

/// A listing page bigger than 64 KiB comes as text too: `tool list` reads it item by item
/// and shows every tool `--json` (which reads it whole) shows.
#[test]
fn a_listing_page_over_64_kib_is_read_item_by_item() {
    let env = Env::new();
    env.fixture(&["--tools", "1500"], json!({}));
    let out = env.nod(["mcp", "tool", "list", SERVER, "--json"]).run();
    out.code(0);
    let listed = out.json()["tools"].as_array().map_or(0, Vec::len);
    assert_eq!(listed, 1515, "{}", out.dump());
    let page = with_method(&env.wire(), "tools/list").len();
    assert_eq!(page, 1, "one page");
    let out = env.nod(["mcp", "tool", "list", SERVER]).run();
    out.code(0).stdout_has("tool_1499");
    assert_eq!(out.text().lines().count(), listed, "{}", out.dump());
    env.assert_no_leftovers();
}

/// nod-mcp(1): progress may extend a call's deadline, up to ten times operation_timeout_ms.
#[test]
fn progress_extends_the_deadline_up_to_ten_operation_timeouts() {
    let env = Env::new();
    env.fixture(&[], json!({ "operation_timeout_ms": 200 }));
    // 1.2 s of work, reporting every 150 ms: each report buys another 200 ms.
    call(&env, "progress", r#"{"steps":8,"interval_ms":150}"#).code(0).stdout_has("done 8 steps");
    // 3 s of work is past the 2 s cap, however often it reports.
    let out = call(&env, "progress", r#"{"steps":20,"interval_ms":150}"#);
    out.code(2).within(5.0).stderr_line_has(&["server fx", "progress", "no answer within"]);
    assert!(out.elapsed.as_millis() >= 1900, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn elicitation_is_refused_on_protocol_versions_before_it() {
    let env = Env::new();
    env.fixture(&["--version", "2025-03-26"], json!({}));
    let out = env.nod(["mcp", "tool", "call", SERVER, "elicit", "--elicit", "defaults"]).run();
    out.code(0).stdout_has("-32601").stdout_lacks("accept");
    env.assert_no_leftovers();
}

#[test]
fn a_call_says_what_the_listing_says_of_the_tool_and_its_arguments() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    // An unknown tool: not found, with the closest name, once the server refused it.
    let out = env.nod(["mcp", "tool", "call", "fx", "ech", "{}"]).run();
    out.code(2).stderr_has("has no tool named ech (did you mean echo?)").stderr_has("the server refused the call");
    // In --jsonl one listing serves the stream: nothing is sent for a tool nod will not call.
    let out = env.nod(["mcp", "tool", "call", "fx", "ech", "--jsonl"]).stdin("{}\n{}\n").run();
    out.code(2).stderr_has("has no tool named ech (did you mean echo?)").stderr_has("nothing was sent");
    assert_eq!(with_method(&env.wire(), "tools/call").len(), 1, "only the single call was sent");
    // A missing required argument: said once the tool failed, and the server decided.
    let out = env.nod(["mcp", "tool", "call", "fx", "add", r#"{"a": 1}"#]).run();
    out.code(1).stderr_has("warning: server fx: tool add: missing required argument b");
    assert!(env.wire().iter().any(|m| m["method"] == "tools/call"), "the call was sent");
    // NAME=VALUE written where JSON goes, and @- for stdin.
    env.nod(["mcp", "tool", "call", "fx", "echo", "message=hi"]).run().code(2).stderr_has("use --arg message=hi");
    let out = env.nod(["mcp", "tool", "call", "fx", "echo", "@-"]).stdin(r#"{"message": "from stdin"}"#).run();
    out.code(0).stdout_has("from stdin");
}
