//! Issue 11, a person at a terminal (a pseudo-terminal here): a server's questions asked
//! field by field, a sensitive field read without echo, and `list --connect` showing each
//! server as it becomes ready.

use serde_json::json;

use crate::support::{Env, SERVER};

#[test]
fn a_terminal_is_asked_for_each_field_with_types_defaults_and_choices() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let mut term = env.nod(["mcp", "tool", "call", SERVER, "elicit"]).spawn_on_terminal();
    term.wait_for("MCP server 'fx' asks: Please tell me your name");
    term.wait_for("name (required) [Enter: Ada]: ").type_line("Grace Hopper");
    term.wait_for("age (integer) [Enter: 36]: ").type_line("eighty");
    term.wait_for("not a whole number; again").wait_for("age (integer) [Enter: 36]: ").type_line("");
    term.wait_for("ok (y/n) [Enter: y]: ").type_line("n");
    term.wait_for("color: 1) red  2) green [Enter: green]: ").type_line("1");
    term.wait_for("  name = Grace Hopper\n  age = 36\n  ok = false\n  color = red\n");
    term.wait_for("[a] accept (Enter)  [d] decline  [c] cancel > ").type_line("a");
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains(r#"{"action":"accept","content":{"name":"Grace Hopper","age":36,"ok":false,"color":"red"}}"#),
        "{shown}"
    );
    env.assert_no_leftovers();
}

#[test]
fn a_sensitive_field_is_read_without_echo_and_ctrl_d_declines() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let schema = json!({ "schema": { "type": "object", "properties": {
        "apiToken": { "type": "string", "title": "API token" },
    }, "required": ["apiToken"] } });
    let mut term = env.nod(["mcp", "tool", "call", SERVER, "elicit", &schema.to_string()]).spawn_on_terminal();
    term.wait_for("API token (required): ").type_line("hunter2-canary");
    term.wait_for("[a] accept").type_line("");
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    // Once, in the result the fixture echoes back; never as it was typed, nor in the summary.
    assert_eq!(shown.matches("hunter2-canary").count(), 1, "{shown}");
    assert!(shown.contains("apiToken = (hidden)"), "{shown}");
    assert!(shown.contains(r#""content":{"apiToken":"hunter2-canary"}"#), "{shown}");

    let mut term = env.nod(["mcp", "tool", "call", SERVER, "elicit"]).spawn_on_terminal();
    term.wait_for("name (required) [Enter: Ada]: ").end_input();
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains(r#"{"action":"decline"}"#), "{shown}");
    env.assert_no_leftovers();
}

#[test]
fn a_url_request_on_a_terminal_asks_for_consent() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let args = json!({ "url": "https://example.com/sign-in" }).to_string();
    let mut term = env.nod(["mcp", "tool", "call", SERVER, "elicit", &args]).spawn_on_terminal();
    term.wait_for("https://example.com/sign-in   (host: example.com)").wait_for("[p] print only").type_line("p");
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains(r#"{"action":"accept"}"#), "{shown}");
    env.assert_no_leftovers();
}

#[test]
fn list_connect_on_a_terminal_shows_each_server_as_it_becomes_ready() {
    let env = Env::new();
    let slow = env.fixture_entry(&["--scenario", "slow-init", "--init-delay-ms", "3000"], json!({}));
    let fast = env.fixture_entry(&[], json!({}));
    env.profile(json!({ "mcp": { "slow": slow, "fast": fast } }));
    let mut term = env.nod(["mcp", "list", "--connect"]).spawn_on_terminal();
    term.wait_for("fast  transport=stdio state=ready");
    let early = term.shown();
    assert!(!early.contains("slow  transport"), "the slow server was shown before it was ready:\n{early}");
    assert!(early.contains("waiting for slow"), "no word on stderr of what is awaited:\n{early}");
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    let (fast_at, slow_at) = (shown.find("fast  transport").unwrap(), shown.find("slow  transport").unwrap());
    assert!(fast_at < slow_at, "{shown}");
    // Piped, one document in the configured order, as before.
    let out = env.nod(["mcp", "list", "--connect"]).run();
    out.code(0).stdout_lacks("waiting for").stderr_lacks("waiting for");
    let text = out.text();
    assert!(text.find("slow  transport").unwrap() < text.find("fast  transport").unwrap(), "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn nod_ask_on_a_terminal_without_a_prompt_says_what_it_waits_for() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let model = crate::model::Model::start(vec![crate::model::Step::Text("Typed.".into())]);
    let mut term = env.nod(["ask"]).env("NOD_BASE_URL", model.url()).env("NOD_MODEL", "fake-model").spawn_on_terminal();
    term.wait_for("type the prompt, then Ctrl-D").type_line("hello from the terminal");
    term.keys(&[4]);
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("Typed."), "{shown}");
    assert_eq!(model.requests()[0]["messages"][1]["content"], "hello from the terminal\n");
}
