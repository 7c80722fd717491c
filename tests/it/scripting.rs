//! Issue 11, output and scripting: JSON everywhere with typed errors, typed --jsonl errors
//! with a summary, arguments from stdin, files and pairs, output files, answers given in
//! advance to elicitations, and the timeout flags.

use serde_json::{Value, json};

use crate::support::{Env, Output, SERVER, with_method};

/// The `{"error": {...}}` document on stdout, checked against what stderr says.
fn error_of(out: &Output) -> Value {
    let doc = out.json();
    let error = doc["error"].clone();
    let message = error["message"].as_str().unwrap_or_else(|| panic!("no error message\n{}", out.dump()));
    assert!(out.stderr.contains(message), "stderr does not say the same\n{}", out.dump());
    error
}

#[test]
fn every_command_prints_one_json_document_under_json() {
    let env = Env::new();
    let fixture = env.fixture_entry(&[], json!({}));
    let program = fixture["command"][0].as_str().unwrap().to_string();
    let path = env.path("mcp.json");
    let out = env.nod(["mcp", "path", "--json"]).run();
    out.code(0);
    assert_eq!(out.json(), json!({ "path": path }), "{}", out.dump());
    let out = env.nod(["mcp", "add", "--json", "fx", &program]).run();
    out.code(0);
    assert_eq!(out.json(), json!({ "server": "fx", "change": "added", "path": path }), "{}", out.dump());
    let out = env.nod(["mcp", "add", "--json", "fx", &program]).run();
    assert_eq!(out.json()["change"], "replaced", "{}", out.dump());
    let out = env.nod(["mcp", "trust", "reset", "--json"]).run();
    out.code(0);
    assert_eq!(out.json()["change"], "reset", "{}", out.dump());
    let out = env.nod(["mcp", "remove", "fx", "--json"]).run();
    out.code(0);
    assert_eq!(out.json(), json!({ "server": "fx", "change": "removed", "path": path }), "{}", out.dump());
    // Failures: the same message on stderr, a kind, the server, the usual exit code.
    let out = env.nod(["mcp", "remove", "fx", "--json"]).run();
    out.code(2);
    let error = error_of(&out);
    assert_eq!((error["kind"].as_str(), error["server"].as_str()), (Some("not_found"), Some("fx")), "{}", out.dump());
    let out = env.nod(["mcp", "logout", "fx", "--json"]).run();
    out.code(2);
    assert_eq!(error_of(&out)["kind"], "not_found", "{}", out.dump());
}

#[test]
fn failures_under_json_are_typed_with_the_exit_code_of_text_mode() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let cases: &[(&[&str], &str, i32)] = &[
        (&["mcp", "tool", "list", "fxx"], "not_found", 2),
        (&["mcp", "tool", "call", SERVER, "no_such_tool"], "not_found", 2),
        (&["mcp", "tool", "call", SERVER, "add", r#"{"a": "x", "b": 1}"#], "tool_error", 1),
        (&["mcp", "tool", "call", SERVER, "slow", r#"{"ms":5000}"#, "--timeout", "300"], "timeout", 2),
        (&["mcp", "tool", "call", SERVER, "echo", "[1]"], "usage", 2),
        (&["mcp", "resource", "read", SERVER, "fixture://missing"], "not_found", 2),
        (&["mcp", "list", "--jsn"], "usage", 2),
    ];
    for (args, kind, code) in cases {
        let mut args = args.to_vec();
        args.push("--json");
        let out = env.nod(&args).run();
        out.code(*code);
        let error = error_of(&out);
        assert_eq!(error["kind"], *kind, "{}", out.dump());
        let text = env.nod(&args[..args.len() - 1]).run();
        text.code(*code);
        assert_eq!(text.text(), "", "no JSON without --json\n{}", text.dump());
    }
    // A server's JSON-RPC refusal carries its code.
    let out = env.nod(["mcp", "tool", "call", SERVER, "add", r#"{"a": "x", "b": 1}"#, "--json"]).run();
    let error = error_of(&out);
    assert_eq!((error["server"].as_str(), error["code"].as_i64()), (Some(SERVER), Some(-32602)), "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn jsonl_errors_are_typed_and_a_summary_names_the_server_and_counts() {
    let env = Env::new();
    env.fixture(&[], json!({ "operation_timeout_ms": 300 }));
    let input = "{\"ms\":5000}\n{\"ms\":10}\n[1]\n{\"ms\":4000}\n";
    let out = env.nod(["mcp", "tool", "call", SERVER, "slow", "--jsonl", "--parallel", "4"]).stdin(input).run();
    out.code(1);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 4, "{}", out.dump());
    let kinds: Vec<&str> = lines.iter().map(|l| l["error"]["kind"].as_str().unwrap_or("ok")).collect();
    assert_eq!(kinds, ["timeout", "ok", "usage", "timeout"], "{}", out.dump());
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.get("error").is_some()) {
        assert_eq!(line["error"]["server"], SERVER, "{}", out.dump());
        assert_eq!(line["error"]["line"], i + 1, "{}", out.dump());
    }
    let timeout = lines[0]["error"]["message"].as_str().unwrap();
    assert!(timeout.contains("0.3 s (operation_timeout_ms"), "{}", out.dump());
    out.stderr_line_has(&["server fx", "3 of 4 calls failed"]);

    let out = env.nod(["mcp", "tool", "call", SERVER, "slow", "--jsonl"]).stdin("{\"ms\":5000}\n{\"ms\":5000}\n").run();
    out.code(1).stderr_line_has(&["server fx: 2 of 2 calls failed: no answer within 0.3 s (operation_timeout_ms"]);
    // A question from the server ends the run with a line of kind input_required.
    let out = env.nod(["mcp", "tool", "call", SERVER, "elicit", "--jsonl"]).stdin("{}\n").run();
    out.code(3);
    let error = &out.json_lines()[0]["error"];
    assert_eq!((error["kind"].as_str(), error["line"].as_u64()), (Some("input_required"), Some(1)), "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn arguments_come_from_stdin_a_file_or_arg_pairs() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let call = |extra: &[&str]| {
        let mut args = vec!["mcp", "tool", "call", SERVER];
        args.extend_from_slice(extra);
        env.nod(args)
    };
    call(&["add", "--arg", "a=2", "--arg", "b=3"]).run().code(0).stdout_has("5");
    // A value that is not JSON is a string; an argument object and pairs combine.
    call(&["echo", "--arg", "message=hello there"]).run().code(0).stdout_has("hello there");
    call(&["add", r#"{"a": 1, "b": 1}"#, "--arg", "b=41"]).run().code(0).stdout_has("42");
    call(&["echo", "-"]).stdin(r#"{"message": "from stdin"}"#).run().code(0).stdout_has("from stdin");
    // 5 MB: over what an argument list can carry.
    let big = "y".repeat(5_000_000);
    let file = env.path("args.json");
    std::fs::write(&file, json!({ "message": big }).to_string()).unwrap();
    let out = call(&["echo", &format!("@{}", file.display())]).run();
    out.code(0);
    assert_eq!(out.stdout.len(), 5_000_001, "{}", out.dump());
    let out = call(&["echo", "@/nonexistent-nod-it/args.json"]).run();
    out.code(2).stderr_has("cannot read the tool arguments from /nonexistent-nod-it/args.json");
    // Prompts take the same sources; their values stay strings.
    let out = env.nod(["mcp", "prompt", "get", SERVER, "greet", "--arg", "name=42"]).run();
    out.code(0).stdout_has("42");
    let wire = env.wire();
    let sent = with_method(&wire, "prompts/get");
    assert_eq!(sent.last().unwrap()["params"]["arguments"], json!({ "name": "42" }));
    env.assert_no_leftovers();
}

#[test]
fn output_files_take_text_resources_and_the_images_and_audio_of_a_result() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let file = env.path("one.txt");
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://text/1", "-o", &file.to_string_lossy()]).run();
    out.code(0).stdout_lacks("text resource 1");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "text resource 1");

    let media = env.path("media.bin");
    let media_arg = media.to_string_lossy().into_owned();
    let out = env.nod(["mcp", "tool", "call", SERVER, "image", r#"{"audio": true}"#, "-o", &media_arg]).run();
    out.code(0).stdout_has("[image: image/png, 8 bytes]").stderr_has("wrote 8 bytes");
    assert_eq!(std::fs::read(&media).unwrap(), b"\x89PNG\r\n\x1a\n");
    assert_eq!(std::fs::read(format!("{media_arg}.2")).unwrap(), b"RIFF");
    // - writes them to stdout when it is not a terminal.
    let out = env.nod(["mcp", "tool", "call", SERVER, "image", "-o", "-"]).run();
    out.code(0);
    assert_eq!(out.stdout, b"\x89PNG\r\n\x1a\n", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn elicit_answer_accepts_values_that_fit_and_declines_naming_the_field() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let elicit = |answer: &str| env.nod(["mcp", "tool", "call", SERVER, "elicit", "--elicit-answer", answer]).run();
    let out = elicit(r#"{"name": "Grace", "age": 85}"#);
    out.code(0);
    let answer: Value = serde_json::from_str(out.text().trim()).unwrap();
    assert_eq!(answer, json!({ "action": "accept", "content": { "name": "Grace", "age": 85 } }), "{}", out.dump());
    let out = elicit(r#"{"name": "Grace", "age": "old"}"#);
    out.code(0).stdout_has(r#""action":"decline""#).stderr_line_has(&["server fx", "declined", "age"]);
    let out = elicit(r#"{"age": 3}"#);
    out.code(0).stdout_has(r#""action":"decline""#).stderr_line_has(&["declined", "name"]);
    let file = env.path("answer.json");
    std::fs::write(&file, r#"{"name": "Ada"}"#).unwrap();
    let out = elicit(&format!("@{}", file.display()));
    out.code(0).stdout_has(r#""content":{"name":"Ada"}"#);
    elicit("[]").code(2).stderr_has("must be a JSON object");
    env.assert_no_leftovers();
}

#[test]
fn timeout_flags_override_the_profile_and_messages_name_the_setting() {
    let env = Env::new();
    let hang = env.fixture_entry(&[], json!({ "operation_timeout_ms": 60000 }));
    let never = env.fixture_entry(&["--scenario", "never-init"], json!({ "startup_timeout_ms": 60000 }));
    let short = env.fixture_entry(&[], json!({ "operation_timeout_ms": 400 }));
    env.profile(json!({ "mcp": { "hang": hang, "never": never, "short": short } }));
    let out = env.nod(["mcp", "tool", "call", "hang", "hang", "--timeout", "500"]).run();
    out.code(2).within(5.0).stderr_line_has(&[
        "server hang",
        "no answer within 0.5 s (operation_timeout_ms; use --timeout or set it in the profile)",
    ]);
    let out = env.nod(["mcp", "tool", "list", "never", "--startup-timeout", "500"]).run();
    out.code(2).within(5.0).stderr_line_has(&[
        "server never",
        "no answer within 0.5 s (startup_timeout_ms; use --startup-timeout or set it in the profile)",
    ]);
    // Without the flags, the profile's value is named the same way.
    let out = env.nod(["mcp", "tool", "call", "short", "hang"]).run();
    out.code(2).within(5.0).stderr_has("no answer within 0.4 s (operation_timeout_ms;");
    env.nod(["mcp", "list", "--timeout", "0"]).run().code(2).stderr_has("--timeout takes a positive number");
    env.assert_no_leftovers();
}

#[test]
fn trust_commands_print_json_with_the_review_on_stderr() {
    let env = Env::new();
    let repo = env.path("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let project = json!({ "mcpServers": { "proj": { "command": "some-server", "args": ["--flag"] } } });
    std::fs::write(repo.join(".mcp.json"), project.to_string()).unwrap();
    let out = env.nod(["mcp", "trust", "approve", "proj", "--json"]).cwd(&repo).run();
    out.code(0).stderr_has("\"some-server\"").stderr_has("\"--flag\"");
    assert_eq!(out.json()["change"], "approved", "{}", out.dump());
    assert_eq!(out.json()["servers"], json!(["proj"]), "{}", out.dump());
    let out = env.nod(["mcp", "trust", "reject", "proj", "--json"]).cwd(&repo).run();
    assert_eq!(out.json()["change"], "rejected", "{}", out.dump());
    let out = env.nod(["mcp", "trust", "approve-all", "--json"]).cwd(&repo).run();
    out.code(2);
    assert_eq!(error_of(&out)["kind"], "usage", "{}", out.dump());
    let out = env.nod(["mcp", "trust", "approve-all", "--yes", "--json"]).cwd(&repo).run();
    assert_eq!(out.json()["change"], "approved", "{}", out.dump());
    let out = env.nod(["mcp", "trust", "approve", "nope", "--json"]).cwd(&repo).run();
    out.code(2);
    assert_eq!(error_of(&out)["kind"], "not_found", "{}", out.dump());
}

#[test]
fn ctrl_c_under_json_prints_an_interrupted_error() {
    let env = Env::new();
    env.fixture(&[], json!({ "operation_timeout_ms": 30000 }));
    let running = env.nod(["mcp", "tool", "call", SERVER, "hang", "--json"]).spawn();
    env.wait_for_wire("tools/call", std::time::Duration::from_secs(10));
    // SAFETY: plain kill(2) on the nod process this test started.
    unsafe { libc::kill(running.pid(), libc::SIGINT) };
    let out = running.wait();
    out.code(130);
    assert_eq!(error_of(&out)["kind"], "interrupted", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn tool_list_shows_how_to_call_each_tool_and_tool_show_its_schemas() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "tool", "list", SERVER]).run();
    out.code(0).stdout_has("add a:number b:number  Adds two numbers\n").stdout_has("fail  Always fails");
    let out = env.nod(["mcp", "tool", "show", SERVER, "add"]).run();
    out.code(0).stdout_has("add a:number b:number\n").stdout_has("Adds two numbers");
    let text = out.text();
    let (input, output) = (text.find("input schema:").unwrap(), text.find("output schema:").unwrap());
    assert!(input < output && text[output..].contains("\"sum\""), "{}", out.dump());
    let out = env.nod(["mcp", "tool", "show", SERVER, "add", "--json"]).run();
    out.code(0);
    let shown = out.json();
    assert_eq!((&shown["tool"]["name"], &shown["task_required"]), (&json!("add"), &json!(false)), "{}", out.dump());
    assert!(shown["unusable"].is_null() && shown["tool"]["outputSchema"].is_object(), "{}", out.dump());
    let out = env.nod(["mcp", "tool", "show", SERVER, "ad", "--json"]).run();
    out.code(2);
    let error = error_of(&out);
    assert_eq!(error["kind"], "not_found", "{}", out.dump());
    assert!(error["message"].as_str().unwrap().contains("did you mean add?"), "{}", out.dump());
    env.assert_no_leftovers();
}
