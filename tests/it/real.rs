//! Real servers from npm, installed by `.ci/run` into `${NOD_TEST_NPM:-$HOME/.cache/nod-ci/npm}`.
//! These tests are `#[ignore]`d, so a plain `cargo test` counts them as ignored rather than
//! passing them unrun; `cargo test -- --include-ignored` runs them, and fails them when the
//! servers are missing.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Env, Output, merge};

const EV: &str = "ev";

/// The npm binary `name`; a test that needs it fails when it is not installed.
fn npm_bin(name: &str) -> Option<PathBuf> {
    let root = match std::env::var_os("NOD_TEST_NPM") {
        Some(root) => PathBuf::from(root),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/nod-ci/npm"),
    };
    let bin = root.join("node_modules/.bin").join(name);
    assert!(bin.exists(), "{name} is not installed (no {}); bash .ci/run installs it", bin.display());
    Some(bin)
}

/// Writes a profile with the one server `name` running `bin args...`.
fn real_profile(env: &Env, name: &str, bin: PathBuf, args: &[&str], extra: Value) {
    let mut command = vec![json!(bin)];
    command.extend(args.iter().map(|a| json!(a)));
    let mut entry = json!({
        "command": command,
        "env": env.marker_env(),
        "operation_timeout_ms": 30000,
    });
    merge(&mut entry, extra);
    env.profile(json!({ "mcp": { name: entry } }));
}

fn everything() -> Option<Env> {
    let bin = npm_bin("mcp-server-everything")?;
    let env = Env::new();
    real_profile(&env, EV, bin, &[], json!({}));
    Some(env)
}

fn run(env: &Env, args: &[&str]) -> Output {
    env.nod(args).timeout(60).run()
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn everything_is_healthy_with_its_full_catalog() {
    let Some(env) = everything() else { return };
    let out = run(&env, &["mcp", "list", "--connect", "--json"]);
    out.code(0);
    let health = &out.json()["servers"][0];
    assert_eq!(health["state"], "ready", "{}", out.dump());
    assert_eq!(health["protocol_version"], "2025-11-25", "{}", out.dump());
    assert!(health["tools"].as_u64().unwrap_or(0) >= 13, "{}", out.dump());
    assert_eq!(health["resources"], 7, "{}", out.dump());
    assert_eq!(health["templates"], 2, "{}", out.dump());
    assert_eq!(health["prompts"], 4, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn everything_echoes_and_adds() {
    let Some(env) = everything() else { return };
    let out = run(&env, &["mcp", "tool", "call", EV, "echo", r#"{"message":"hi"}"#]);
    out.code(0);
    assert_eq!(out.text().trim_end(), "Echo: hi", "{}", out.dump());
    run(&env, &["mcp", "tool", "call", EV, "get-sum", r#"{"a":2,"b":3}"#]).code(0).stdout_has("5");
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn everything_long_operation_shows_progress() {
    let Some(env) = everything() else { return };
    let out = run(&env, &["mcp", "tool", "call", EV, "trigger-long-running-operation", r#"{"duration":2,"steps":4}"#]);
    out.code(0)
        .within(20.0)
        .stdout_has("Long running operation completed")
        .stderr_line_has(&["ev/trigger-long-running-operation", "progress 1/4"])
        .stderr_line_has(&["ev/trigger-long-running-operation", "progress 4/4"]);
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn everything_elicitation_follows_the_policy() {
    let Some(env) = everything() else { return };
    // Its form requires "name", which has no default: the defaults policy declines.
    let out = run(&env, &["mcp", "tool", "call", EV, "trigger-elicitation-request", "--elicit", "defaults"]);
    out.code(0).stdout_has(r#""action": "decline""#).stderr_line_has(&["server ev", "\"name\"", "no default"]);

    let out = run(&env, &["mcp", "tool", "call", EV, "trigger-elicitation-request"]);
    out.code(3);
    let report = out.json();
    assert_eq!(report["status"], "input_required", "{}", out.dump());
    assert_eq!(report["server"], EV, "{}", out.dump());
    assert_eq!(report["mode"], "form", "{}", out.dump());
    assert!(report["requestedSchema"]["properties"]["name"].is_object(), "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn everything_resources_are_listed_and_read() {
    let Some(env) = everything() else { return };
    let out = run(&env, &["mcp", "resource", "list", EV]);
    out.code(0).stdout_has("demo://resource/static/document/architecture.md");
    assert_eq!(out.text().lines().count(), 7, "{}", out.dump());

    let out = run(&env, &["mcp", "resource", "templates", EV]);
    out.code(0)
        .stdout_has("demo://resource/dynamic/text/{resourceId}")
        .stdout_has("demo://resource/dynamic/blob/{resourceId}");
    assert_eq!(out.text().lines().count(), 2, "{}", out.dump());

    let uri = "demo://resource/static/document/architecture.md";
    run(&env, &["mcp", "resource", "read", EV, uri]).code(0).stdout_has("Architecture");

    let file = env.path("blob.bin");
    let path = file.to_string_lossy();
    let out = run(&env, &["mcp", "resource", "read", EV, "demo://resource/dynamic/blob/1", "--output", &path]);
    out.code(0);
    let bytes = std::fs::read(&file).unwrap_or_default();
    assert!(!bytes.is_empty(), "nothing written\n{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn everything_prompts_are_listed_rendered_and_completed() {
    let Some(env) = everything() else { return };
    let out = run(&env, &["mcp", "prompt", "list", EV]);
    out.code(0).stdout_has("args-prompt city [state]");
    assert_eq!(out.text().lines().count(), 4, "{}", out.dump());

    run(&env, &["mcp", "prompt", "get", EV, "args-prompt", r#"{"city":"Paris"}"#]).code(0).stdout_has("Paris");

    let out = run(&env, &["mcp", "prompt", "complete", EV, "completable-prompt", "department", "E"]);
    out.code(0);
    assert_eq!(out.text(), "Engineering\n", "{}", out.dump());

    let out =
        run(&env, &["mcp", "prompt", "complete", EV, "completable-prompt", "name", "--arg", "department=Engineering"]);
    out.code(0).stdout_has("Alice\n");

    let template = "demo://resource/dynamic/text/{resourceId}";
    let out = run(&env, &["mcp", "resource", "complete", EV, template, "resourceId", "3"]);
    out.code(0);
    assert_eq!(out.text(), "3\n", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn filesystem_writes_reads_and_lists_files() {
    let Some(bin) = npm_bin("mcp-server-filesystem") else { return };
    let env = Env::new();
    let root = env.path("files");
    std::fs::create_dir(&root).unwrap();
    real_profile(&env, "fs", bin, &[&root.to_string_lossy()], json!({}));
    let out = run(&env, &["mcp", "tool", "list", "fs", "--json"]);
    out.code(0);
    let tools: Vec<String> = out.json()["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    for name in ["write_file", "read_text_file", "list_directory"] {
        assert!(tools.iter().any(|t| t == name), "no {name} in {tools:?}");
    }
    let file = root.join("note.txt");
    let write = json!({ "path": file, "content": "hello from nod" }).to_string();
    run(&env, &["mcp", "tool", "call", "fs", "write_file", &write]).code(0);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello from nod");
    let read = json!({ "path": file }).to_string();
    run(&env, &["mcp", "tool", "call", "fs", "read_text_file", &read]).code(0).stdout_has("hello from nod");
    let list = json!({ "path": root }).to_string();
    run(&env, &["mcp", "tool", "call", "fs", "list_directory", &list]).code(0).stdout_has("[FILE] note.txt");
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn memory_creates_entities_and_reads_the_graph() {
    let Some(bin) = npm_bin("mcp-server-memory") else { return };
    let env = Env::new();
    // The server's default file lives inside its package; keep it in the temp dir instead.
    let memory = env.path("memory.jsonl");
    real_profile(&env, "mem", bin, &[], json!({ "env": { "MEMORY_FILE_PATH": memory } }));

    let entities = json!({ "entities": [
        { "name": "Ada", "entityType": "person", "observations": ["wrote the first program"] }
    ]})
    .to_string();
    run(&env, &["mcp", "tool", "call", "mem", "create_entities", &entities]).code(0).stdout_has("Ada");
    let out = run(&env, &["mcp", "tool", "call", "mem", "read_graph"]);
    out.code(0).stdout_has("\"Ada\"").stdout_has("wrote the first program");
    assert!(memory.exists(), "the graph went elsewhere");
    env.assert_no_leftovers();
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn everything_streams_jsonl_calls_in_order_with_many_in_flight() {
    let Some(env) = everything() else { return };
    let input: String = (0..40).map(|i| format!("{}\n", json!({ "message": format!("m{i}") }))).collect();
    let out = env.nod(["mcp", "tool", "call", EV, "echo", "--jsonl", "--parallel", "8"]).stdin(input).timeout(60).run();
    out.code(0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 40, "{}", out.dump());
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["content"][0]["text"], format!("Echo: m{i}"), "line {i}");
    }
}

#[test]
#[ignore = "needs the MCP servers from npm; cargo test -- --include-ignored (README)"]
fn filesystem_reads_many_files_through_jsonl() {
    let Some(bin) = npm_bin("mcp-server-filesystem") else { return };
    let env = Env::new();
    let root = env.path("files");
    std::fs::create_dir(&root).unwrap();
    for i in 0..12 {
        std::fs::write(root.join(format!("f{i}.txt")), format!("content {i}")).unwrap();
    }
    real_profile(&env, "fs", bin, &[&root.to_string_lossy()], json!({}));
    let input: String = (0..12).map(|i| format!("{}\n", json!({ "path": root.join(format!("f{i}.txt")) }))).collect();
    let out = env
        .nod(["mcp", "tool", "call", "fs", "read_text_file", "--jsonl", "--parallel", "4"])
        .stdin(input)
        .timeout(60)
        .run();
    out.code(0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 12, "{}", out.dump());
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["content"][0]["text"], format!("content {i}"), "line {i}: {line}");
    }
    env.assert_no_leftovers();
}
