use serde_json::json;

use crate::support::{Env, SERVER, with_method};

const BLOB: [u8; 8] = [0x00, 0x01, 0x02, 0xFF, 0xFE, 0x89, 0x50, 0x4E];

#[test]
fn resource_list_follows_every_page() {
    let env = Env::new();
    env.fixture(&["--resources", "5", "--page-size", "2"], json!({}));
    let out = env.nod(["mcp", "resource", "list", SERVER]).run();
    out.code(0)
        .stdout_has("fixture://text/1  text-1 (text/plain)")
        .stdout_has("fixture://blob/1  blob-1 (application/octet-stream)");
    let rows: Vec<String> = out.text().lines().map(str::to_string).collect();
    assert_eq!(rows.len(), 6, "{}", out.dump());
    assert_eq!(with_method(&env.wire(), "resources/list").len(), 3);

    let out = env.nod(["mcp", "resource", "list", SERVER, "--json"]).run();
    out.code(0);
    let resources = out.json()["resources"].as_array().cloned().unwrap_or_default();
    assert_eq!(resources.len(), 6, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn resource_templates_are_listed() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "resource", "templates", SERVER]).run();
    out.code(0).stdout_has("fixture://text/{id}  text-by-id");
    let out = env.nod(["mcp", "resource", "templates", SERVER, "--json"]).run();
    out.code(0);
    assert_eq!(out.json()["resourceTemplates"][0]["uriTemplate"], "fixture://text/{id}");
    env.assert_no_leftovers();
}

#[test]
fn a_text_resource_is_printed() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://text/2"]).run();
    out.code(0);
    assert_eq!(out.text(), "text resource 2\n", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_binary_resource_is_not_printed_without_output() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://blob/1"]).run();
    out.code(0).stderr_line_has(&["fixture://blob/1", "binary content", "not shown"]).stderr_has("--output");
    assert!(
        !out.stdout.iter().any(|b| *b >= 0x80 || (*b < 0x20 && *b != b'\n')),
        "binary bytes on stdout\n{}",
        out.dump()
    );
    env.assert_no_leftovers();
}

#[test]
fn a_binary_resource_is_written_exactly_with_output() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let file = env.path("blob.bin");
    let path = file.to_string_lossy();
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://blob/1", "--output", &path]).run();
    out.code(0);
    assert_eq!(std::fs::read(&file).unwrap(), BLOB, "{}", out.dump());
    env.assert_no_leftovers();
}

/// Issue 11: with -o every content goes to a file, text too (as curl -o does), numbered in
/// order; nothing is printed. (This test once pinned the text being printed instead.)
#[test]
fn mixed_contents_with_output_go_to_numbered_files() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let file = env.path("multi.bin");
    let path = file.to_string_lossy();
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://multi", "-o", &path]).run();
    out.code(0).stdout_lacks("text resource multi");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "text resource multi", "{}", out.dump());
    assert_eq!(std::fs::read(format!("{path}.2")).unwrap(), BLOB, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_missing_resource_fails_with_the_server_error() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://missing"]).run();
    out.code(2).stderr_line_has(&["server fx", "Resource not found"]);
    assert_eq!(out.text(), "", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_resource_template_variable_is_completed() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "resource", "complete", SERVER, "fixture://text/{id}", "id", "1"]).run();
    out.code(0);
    assert_eq!(out.text(), "1\n", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn completion_without_the_capability_says_so() {
    let env = Env::new();
    env.fixture(&["--no-completions"], json!({}));
    let out = env.nod(["mcp", "prompt", "complete", SERVER, "greet", "name", "A"]).run();
    out.code(2).stderr_line_has(&["server fx", "completion"]);
    env.assert_no_leftovers();
}

#[test]
fn prompts_are_listed_with_their_arguments() {
    let env = Env::new();
    env.fixture(&["--page-size", "1"], json!({}));
    let out = env.nod(["mcp", "prompt", "list", SERVER]).run();
    out.code(0).stdout_has("greet name [style]  A greeting").stdout_has("plain  A prompt without arguments");
    assert_eq!(out.text().lines().count(), 2, "{}", out.dump());
    assert_eq!(with_method(&env.wire(), "prompts/list").len(), 2);
    env.assert_no_leftovers();
}

#[test]
fn a_prompt_is_rendered_with_its_arguments() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "prompt", "get", SERVER, "greet", r#"{"name":"Ada"}"#]).run();
    out.code(0).stdout_has("[user]").stdout_has("Hello, Ada!");
    let out = env.nod(["mcp", "prompt", "get", SERVER, "greet", r#"{"name":"Ada"}"#, "--json"]).run();
    out.code(0);
    assert_eq!(out.json()["messages"][0]["content"]["text"], "Hello, Ada!", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_prompt_without_its_required_argument_fails_naming_the_server() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "prompt", "get", SERVER, "greet"]).run();
    out.code(2).stderr_line_has(&["server fx", "greet", "Missing required argument"]);
    env.assert_no_leftovers();
}

#[test]
fn a_non_string_prompt_argument_is_a_usage_error() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "prompt", "get", SERVER, "greet", r#"{"name":3}"#]).run();
    out.code(2).stderr_has("\"name\"").stderr_has("string");
    assert!(env.wire().is_empty(), "no server is needed to refuse it");
    env.assert_no_leftovers();
}

#[test]
fn a_prompt_argument_is_completed() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "prompt", "complete", SERVER, "greet", "name", "A"]).run();
    out.code(0);
    assert_eq!(out.text(), "Ada\nAlan\n", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn output_dash_writes_the_blob_to_a_piped_stdout() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://blob/1", "--output", "-"]).run();
    out.code(0);
    assert_eq!(out.stdout, BLOB, "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn a_prompt_without_its_required_argument_is_named_before_it_is_asked_for() {
    let env = crate::support::Env::new();
    env.fixture(&[], serde_json::json!({}));
    let out = env.nod(["mcp", "prompt", "get", "fx", "greet"]).run();
    out.stderr_has("warning: server fx: prompt greet: missing required argument name");
    let out = env.nod(["mcp", "prompt", "get", "fx", "greet", "--arg", "name=Ada"]).run();
    out.code(0).stderr_lacks("missing required");
}
