use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, FIXTURE, Output, SERVER};

const CANARY: &str = "canary-7f3a9c";

/// A profile with a broken entry, a server that cannot start, and a good fixture.
fn mixed_profile(env: &Env) {
    let missing = env.path("no-such-dir").join("nod-it-missing-server");
    env.profile(json!({ "mcp": {
        "broken": { "command": 7 },
        "nostart": { "command": [missing], "env": env.marker_env() },
        "good": env.fixture_entry(&[], json!({})),
    }}));
}

fn server<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no server {name} in {list}"))
}

#[test]
fn mcp_path_prints_the_profile_under_nod_home() {
    let env = Env::new();
    let out = env.nod(["mcp", "path"]).run();
    out.code(0);
    assert_eq!(out.text(), format!("{}\n", env.path("mcp.json").display()), "{}", out.dump());
}

#[test]
fn list_connect_shows_issues_failures_and_ready_servers() {
    let env = Env::new();
    mixed_profile(&env);
    let out = env.nod(["mcp", "list", "--connect"]).run();
    out.code(2).within(10.0);
    let text = out.text();
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for {name}\n{}", out.dump()))
            .to_string()
    };
    assert!(line("good").contains("state=ready"), "{}", out.dump());
    assert!(line("good").contains("protocol=2025-11-25"), "{}", out.dump());
    out.stdout_has("tools=15 resources=4 templates=1 prompts=2");
    assert!(line("nostart").contains("state=failed"), "{}", out.dump());
    out.stdout_has("No such file or directory");
    out.stdout_has("Configuration issues:").stdout_has("server broken: command must be");
    env.assert_no_leftovers();
}

#[test]
fn list_connect_json_has_one_health_record_per_server_and_the_issues() {
    let env = Env::new();
    mixed_profile(&env);
    let out = env.nod(["mcp", "list", "--connect", "--json"]).run();
    out.code(2);
    let list = out.json();
    let good = server(&list, "good");
    assert_eq!(good["state"], "ready", "{list}");
    assert_eq!(good["transport"], "stdio", "{list}");
    assert_eq!(good["protocol_version"], "2025-11-25", "{list}");
    assert_eq!(good["server_name"], "nod-fixture", "{list}");
    assert_eq!(
        [&good["tools"], &good["resources"], &good["templates"], &good["prompts"]],
        [&json!(15), &json!(4), &json!(1), &json!(2)],
        "{list}"
    );
    assert!(good["error"].is_null(), "{list}");
    let failed = server(&list, "nostart");
    assert_eq!(failed["state"], "failed", "{list}");
    assert!(failed["error"].as_str().is_some_and(|e| !e.is_empty()), "{list}");
    assert!(list["servers"].as_array().unwrap().iter().all(|s| s["name"] != "broken"));
    let issue = &list["issues"][0];
    assert_eq!(issue["server"], "broken", "{list}");
    assert_eq!(issue["severity"], "error", "{list}");
    assert!(issue["fix"].as_str().is_some_and(|f| !f.is_empty()), "{list}");
    assert_eq!(list["path"], json!(env.path("mcp.json")), "{list}");
    env.assert_no_leftovers();
}

/// nod-mcp(1): "Health output never shows commands, environment values, headers or URLs."
#[test]
fn health_never_shows_the_command_of_a_server_that_fails_to_start() {
    let env = Env::new();
    mixed_profile(&env);
    for args in [&["mcp", "list", "--connect"][..], &["mcp", "list", "--connect", "--json"]] {
        let out = env.nod(args).run();
        out.code(2).stdout_lacks("nod-it-missing-server").stderr_lacks("nod-it-missing-server");
    }
    env.assert_no_leftovers();
}

#[test]
fn list_without_connect_shows_the_configuration_only() {
    let env = Env::new();
    mixed_profile(&env);
    let out = env.nod(["mcp", "list"]).run();
    out.code(2).stdout_has("MCP configuration (2 servers)").stdout_has("server broken: command must be");
    // Names are padded so the columns line up.
    for name in ["good   ", "nostart"] {
        out.stdout_has(&format!("  {name}  source=profile transport=stdio state=configured"));
    }
    out.stdout_has("connection=not_checked");
    assert!(env.wire().is_empty(), "nothing was started");

    let out = env.nod(["mcp", "list", "--json"]).run();
    out.code(2);
    let list = out.json();
    let good = server(&list, "good");
    assert_eq!(good["connection"], "not_checked", "{list}");
    assert_eq!(good["enabled"], true, "{list}");
    assert_eq!(good["transport"], "stdio", "{list}");
    assert_eq!(list["issues"][0]["server"], "broken", "{list}");

    env.fixture(&[], json!({}));
    env.nod(["mcp", "list"]).run().code(0).stdout_lacks("Configuration issues");
    env.assert_no_leftovers();
}

#[test]
fn the_mcp_servers_alias_works() {
    let env = Env::new();
    env.profile(json!({ "mcpServers": { SERVER: env.fixture_entry(&[], json!({})) } }));
    env.nod(["mcp", "tool", "call", SERVER, "echo", r#"{"message":"alias"}"#]).run().code(0).stdout_has("alias");
    env.assert_no_leftovers();
}

#[test]
fn an_unknown_server_is_named_with_the_configured_ones() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    env.nod(["mcp", "tool", "list", "nosuch"]).run().code(2).stderr_line_has(&["nosuch", "fx"]);
    let empty = Env::new();
    empty.nod(["mcp", "tool", "list", "nosuch"]).run().code(2).stderr_line_has(&["nosuch", "no servers"]);
}

#[test]
fn a_disabled_server_is_refused() {
    let env = Env::new();
    env.fixture(&[], json!({ "enabled": false }));
    env.nod(["mcp", "tool", "call", SERVER, "echo", r#"{"message":"x"}"#])
        .run()
        .code(2)
        .stderr_line_has(&["server fx", "disabled"]);
    assert!(env.wire().is_empty(), "a disabled server is never started");
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let cases: &[&[&str]] = &[
        &["bogus"],
        &["mcp"],
        &["mcp", "frobnicate"],
        &["mcp", "tool", "call"],
        &["mcp", "tool", "call", SERVER, "echo", "--parallel", "4"],
        &["mcp", "tool", "call", SERVER, "echo", "--jsonl", "--parallel", "0"],
        &["mcp", "tool", "call", SERVER, "echo", "--elicit", "maybe"],
        &["mcp", "list", "--jsonl"],
        &["mcp", "tool", "list", SERVER, "--connect"],
        &["mcp", "tool", "call", SERVER, "echo", "[1]"],
        &["mcp", "tool", "call", SERVER, "echo", "{not json"],
    ];
    for args in cases {
        let out = env.nod(*args).run();
        out.code(2).stderr_has("nod: ");
        assert_eq!(out.text(), "", "{}", out.dump());
    }
    assert!(env.wire().is_empty(), "no usage error starts a server");
}

#[test]
fn help_and_version_exit_0() {
    let env = Env::new();
    env.nod(["--help"]).run().code(0).stdout_has("USAGE").stdout_has("nod mcp");
    env.nod(["help", "mcp"]).run().code(0).stdout_has("nod mcp tool call");
    env.nod(["mcp", "--help"]).run().code(0).stdout_has("EXIT STATUS");
    env.nod(["mcp", "tool", "call", "--help"]).run().code(0).stdout_has("--elicit");
    let out = env.nod(["--version"]).run();
    out.code(0);
    assert_eq!(out.text(), format!("nod {}\n", env!("CARGO_PKG_VERSION")));
}

fn assert_no_secret(out: &Output, secrets: &[&str]) {
    for secret in secrets {
        out.stdout_lacks(secret).stderr_lacks(secret);
    }
}

#[test]
fn health_output_shows_neither_environment_values_nor_commands() {
    let env = Env::new();
    let dir = env.path("cmd-d41c");
    std::fs::create_dir(&dir).unwrap();
    let command = dir.join("srv-e4c1d7");
    std::os::unix::fs::symlink(FIXTURE, &command).unwrap();
    let record = env.record_path();
    env.profile(json!({ "mcp": { "sec": {
        "command": [command, "--record", record],
        "env": { "API_TOKEN": CANARY, "NOD_IT_MARKER": env.marker_env()["NOD_IT_MARKER"] },
    }}}));
    for args in [
        &["mcp", "list", "--connect"][..],
        &["mcp", "list", "--connect", "--json"],
        &["mcp", "list"],
        &["mcp", "list", "--json"],
    ] {
        let out = env.nod(args).run();
        out.code(0);
        assert_no_secret(&out, &[CANARY, "srv-e4c1d7", "cmd-d41c"]);
    }
    env.assert_no_leftovers();
}

#[test]
fn a_server_crashing_at_start_does_not_leak_environment_values() {
    let env = Env::new();
    env.fixture(&["--scenario", "exit-before-init"], json!({ "env": { "API_TOKEN": CANARY } }));
    let out = env.nod(["mcp", "tool", "list", SERVER]).run();
    out.code(2).stderr_has("exiting before initialize");
    assert_no_secret(&out, &[CANARY]);
    let out = env.nod(["mcp", "list", "--connect", "--json"]).run();
    out.code(2);
    assert_no_secret(&out, &[CANARY]);

    // Here the secret is in the server's own last stderr line, which nod shows.
    // The fixture takes the last --record, which it cannot open, and says so on stderr.
    let bad_record = format!("/nonexistent-nod-it/{CANARY}/record.jsonl");
    let mut entry = env.fixture_entry(&[], json!({ "env": { "API_TOKEN": CANARY } }));
    entry["command"].as_array_mut().unwrap().extend([json!("--record"), json!(bad_record)]);
    env.profile(json!({ "mcp": { SERVER: entry } }));
    // A failed command says it on stderr; the health listing shows it in its table.
    for (args, on_stderr) in [(&["mcp", "tool", "list", SERVER][..], true), (&["mcp", "list", "--connect"], false)] {
        let out = env.nod(args).run();
        out.code(2).within(10.0);
        let shown = if on_stderr { out.stderr.clone() } else { out.text() };
        assert!(shown.contains("cannot open --record file"), "the stderr tail is shown\n{}", out.dump());
        assert_no_secret(&out, &[CANARY]);
    }
    env.assert_no_leftovers();
}

/// Reads the first line of nod's stdout, then closes the pipe.
fn first_line_then_close(env: &Env, args: &[&str]) -> (String, Output) {
    let mut running = env.nod(args).stdout_pipe().spawn();
    let stdout = running.take_stdout();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        // The reader drops here, closing the pipe.
    });
    let line = rx.recv_timeout(Duration::from_secs(15)).expect("nod printed no line within 15 s");
    (line, running.wait())
}

#[test]
fn a_closed_stdout_pipe_ends_nod_quietly() {
    let env = Env::new();
    env.fixture(&["--tools", "5000"], json!({}));
    for args in [&["mcp", "tool", "list", SERVER][..], &["mcp", "tool", "list", SERVER, "--json"]] {
        let (line, out) = first_line_then_close(&env, args);
        assert!(!line.is_empty(), "{}", out.dump());
        out.code(0).within(15.0).stderr_lacks("nod:").stderr_lacks("Broken pipe");
    }
    env.assert_no_leftovers();
}

#[test]
fn nod_started_with_stdin_closed_keeps_descriptor_0_from_its_servers() {
    // Without descriptor 0, the first pipe nod makes for a server would take it, and
    // `--jsonl` would read the server's answers as its own input lines.
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl"]).closed_stdin().run();
    out.code(0).within(15.0).stderr_lacks("nod:");
    assert_eq!(out.text(), "", "no input lines, so no results: {}", out.dump());
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", r#"{"message":"still here"}"#]).closed_stdin().run();
    out.code(0).stdout_has("still here");
    env.assert_no_leftovers();
}

#[test]
fn committed_man_pages_match_the_generated_ones() {
    let env = Env::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (page, file) in [("nod", "man/nod.1"), ("nod-mcp", "man/nod-mcp.1")] {
        let hint = format!("regenerate with: cargo run -- --generate man {page} > {file}");
        let out = env.nod(["--generate", "man", page]).run();
        out.code(0).stdout_has(".TH ");
        let committed = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}; {hint}"));
        assert!(committed == out.text(), "{file} is out of date; {hint}");
    }
}

#[test]
fn nod_home_defaults_to_dot_nod_in_the_home_directory() {
    let env = Env::new();
    let out = env.nod(["mcp", "path"]).without_nod_home().run();
    out.code(0);
    let expected = env.home().join(".nod").join("mcp.json");
    assert_eq!(out.text(), format!("{}\n", expected.display()), "{}", out.dump());
}

#[test]
fn an_invalid_profile_is_a_configuration_issue_with_its_position() {
    let env = Env::new();
    std::fs::write(env.path("mcp.json"), "{\n  \"mcp\": {,\n}").unwrap();
    let out = env.nod(["mcp", "list"]).run();
    out.code(2).stdout_has("not valid JSON (line 2");
}

#[test]
fn an_unknown_field_warns_and_the_server_still_works() {
    let env = Env::new();
    env.fixture(&[], json!({ "colour": "red" }));
    env.nod(["mcp", "tool", "call", SERVER, "echo", r#"{"message":"x"}"#])
        .run()
        .code(0)
        .stdout_has("x")
        .stderr_line_has(&["warning", "server fx", "colour"]);
    env.assert_no_leftovers();
}

#[test]
fn a_remote_server_that_cannot_be_reached_fails_without_showing_its_url() {
    let env = Env::new();
    // Port 1 on loopback: nothing listens, so the connection is refused at once.
    env.profile(json!({ "mcp": {
        "rem": { "url": "http://127.0.0.1:1/mcp?key=k3y-9d2e" },
        SERVER: env.fixture_entry(&[], json!({})),
    }}));
    for (args, code) in [
        (&["mcp", "list", "--connect"][..], 2),
        (&["mcp", "list", "--connect", "--json"], 2),
        (&["mcp", "list"], 0),
        (&["mcp", "list", "--json"], 0),
    ] {
        let out = env.nod(args).run();
        out.code(code);
        assert_no_secret(&out, &["127.0.0.1:1", "k3y-9d2e"]);
    }
    let out = env.nod(["mcp", "list", "--connect", "--json"]).run();
    assert_eq!(server(&out.json(), "rem")["state"], "failed", "{}", out.dump());
    assert_eq!(server(&out.json(), SERVER)["state"], "ready", "{}", out.dump());
    let out = env.nod(["mcp", "tool", "list", "rem"]).run();
    out.code(2).stderr_line_has(&["server rem", "connection failed"]);
    assert_no_secret(&out, &["127.0.0.1:1", "k3y-9d2e"]);
    env.assert_no_leftovers();
}

#[test]
fn list_connect_starts_the_servers_in_parallel() {
    let env = Env::new();
    let slow = env.fixture_entry(&["--scenario", "slow-init", "--init-delay-ms", "1000"], json!({}));
    env.profile(json!({ "mcp": { "a": slow, "b": slow, "c": slow } }));
    let out = env.nod(["mcp", "list", "--connect", "--json"]).run();
    out.code(0).within(2.5);
    let list = out.json();
    for name in ["a", "b", "c"] {
        assert_eq!(server(&list, name)["state"], "ready", "{list}");
    }
    env.assert_no_leftovers();
}

#[test]
fn server_log_lines_redact_environment_values() {
    let env = Env::new();
    env.fixture(&[], json!({ "env": { "API_TOKEN": CANARY } }));
    let message = json!({ "level": "error", "message": format!("token is {CANARY}") }).to_string();
    let out = env.nod(["mcp", "tool", "call", SERVER, "log", &message]).run();
    out.code(0).stderr_line_has(&["server fx", "token is"]);
    assert_no_secret(&out, &[CANARY]);
    env.assert_no_leftovers();
}

/// Issue 11: what is secret is redacted (configured environment values and URLs), and
/// nothing else is mangled: URLs and URIs a server or a hint mentions stay readable.
#[test]
fn redaction_hides_configured_secrets_and_urls_and_keeps_the_rest_readable() {
    let env = Env::new();
    env.profile(json!({ "mcp": {
        SERVER: env.fixture_entry(&[], json!({ "env": { "API_TOKEN": CANARY } })),
        "rem": { "url": "http://127.0.0.1:1/mcp?key=k3y-9d2e" },
    }}));
    let said = format!(
        "see https://docs.example.com/help about demo://nope; token {CANARY} at http://127.0.0.1:1/mcp?key=k3y-9d2e"
    );
    let message = json!({ "level": "error", "message": said }).to_string();
    let out = env.nod(["mcp", "tool", "call", SERVER, "log", &message]).run();
    out.code(0).stderr_line_has(&["https://docs.example.com/help", "demo://nope", "[redacted]"]);
    assert_no_secret(&out, &[CANARY, "k3y-9d2e", "127.0.0.1:1"]);
    let out = env.nod(["mcp", "resource", "read", SERVER, "fixture://missing", "--json"]).run();
    out.code(2);
    assert_eq!(out.json()["error"]["data"]["uri"], "fixture://missing", "{}", out.dump());
    // A hint shows the URL it means.
    let out = env.nod(["mcp", "add", "--transport", "http", "plain", "http://example.com/mcp"]).run();
    out.code(2).stderr_has("http://127.0.0.1:PORT/").stderr_lacks("<url>");
    env.assert_no_leftovers();
}
