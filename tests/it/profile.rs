//! `nod mcp add` and `nod mcp remove`: what lands in the file, and what is refused.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::support::Env;

fn read(env: &Env) -> Value {
    serde_json::from_slice(&std::fs::read(env.path("mcp.json")).expect("profile written")).expect("profile is JSON")
}

#[test]
fn add_writes_a_private_canonical_entry_and_keeps_the_rest() {
    let env = Env::new();
    std::fs::write(
        env.path("mcp.json"),
        r#"{"model": "m", "mcpServers": {"old": {"command": ["x"], "custom_field": {"keep": true}}}}"#,
    )
    .unwrap();
    env.nod(["mcp", "add", "--env", "K=V", "fs", "npx", "-y", "@scope/server", "--read-only", "/tmp"])
        .run()
        .code(0)
        .stdout_has("added server fs");
    let root = read(&env);
    assert_eq!(root["model"], "m");
    assert!(root.get("mcpServers").is_none(), "the alias moves to mcp: {root}");
    assert_eq!(root["mcp"]["old"], json!({"command": ["x"], "custom_field": {"keep": true}}));
    assert_eq!(
        root["mcp"]["fs"],
        json!({"type": "stdio", "command": ["npx", "-y", "@scope/server", "--read-only", "/tmp"], "environment": {"K": "V"}})
    );
    let mode = std::fs::metadata(env.path("mcp.json")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    env.nod(["mcp", "add", "fs", "node", "server.js"]).run().code(0).stdout_has("replaced server fs");
    assert_eq!(read(&env)["mcp"]["fs"]["command"], json!(["node", "server.js"]));
    env.nod(["mcp", "add", "--transport", "http", "remote", "https://mcp.example.com/mcp"]).run().code(0);
    assert_eq!(read(&env)["mcp"]["remote"], json!({"type": "http", "url": "https://mcp.example.com/mcp"}));
    env.nod(["mcp", "remove", "fs"]).run().code(0).stdout_has("removed server fs");
    assert!(read(&env)["mcp"].get("fs").is_none());
    env.nod(["mcp", "remove", "fs"]).run().code(2).stderr_has("no server named fs");
}

#[test]
fn add_creates_a_private_home() {
    let env = Env::new();
    let home = env.path("fresh/nested");
    env.nod(["mcp", "add", "a", "x"]).env("NOD_HOME", home.display().to_string()).run().code(0);
    let mode = std::fs::metadata(&home).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn ambiguous_or_broken_profiles_are_never_rewritten() {
    let env = Env::new();
    for text in [r#"{"MCP-Servers": {"a": {"command": ["x"]}}}"#, r#"{"mcp_servers": {}}"#, "{oops", "[1]"] {
        std::fs::write(env.path("mcp.json"), text).unwrap();
        let out = env.nod(["mcp", "add", "b", "y"]).run();
        out.code(2);
        assert_eq!(std::fs::read_to_string(env.path("mcp.json")).unwrap(), text, "{}", out.dump());
        env.nod(["mcp", "remove", "a"]).run().code(2);
        assert_eq!(std::fs::read_to_string(env.path("mcp.json")).unwrap(), text);
    }
    std::fs::write(env.path("mcp.json"), r#"{"MCP-Servers": {}}"#).unwrap();
    env.nod(["mcp", "add", "b", "y"]).run().code(2).stderr_has("\"MCP-Servers\"");
    env.nod(["mcp", "list"]).run().stderr_lacks("panicked").stdout_has("MCP-Servers");
}

#[test]
fn bad_names_and_entries_are_refused_before_writing() {
    let env = Env::new();
    env.nod(["mcp", "add", "bad.name", "x"]).run().code(2).stderr_has("invalid server name");
    env.nod(["mcp", "add", "--transport", "http", "plain", "http://example.com/mcp"])
        .run()
        .code(2)
        .stderr_has("plain http");
    env.nod(["mcp", "add", "--transport", "sse", "ftp", "ftp://example.com/"]).run().code(2);
    assert!(!env.path("mcp.json").exists(), "nothing may be written for a refused entry");
}

/// Twenty `nod mcp add` at once: every one lands (each read-modify-write holds the
/// profile's lock), none is lost to a rename that raced it.
#[test]
fn concurrent_adds_all_land() {
    let env = Env::new();
    let names: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
    let running: Vec<_> = names.iter().map(|name| env.nod(["mcp", "add", name, "--", "true"]).spawn()).collect();
    for run in running {
        run.wait().code(0);
    }
    let servers = read(&env)["mcp"].as_object().cloned().unwrap_or_default();
    let mut kept: Vec<&String> = servers.keys().collect();
    kept.sort();
    let mut wanted: Vec<&String> = names.iter().collect();
    wanted.sort();
    assert_eq!(kept, wanted);
}

#[test]
fn get_shows_an_entry_with_its_secrets_hidden_and_add_json_and_header_add_entries() {
    let env = Env::new();
    let entry = r#"{"command": "npx", "args": ["-y", "server-x"], "env": {"TOKEN": "canary-get-secret-1"}}"#;
    env.nod(["mcp", "add-json", "x", entry]).run().code(0).stdout_has("added server x");
    env.nod([
        "mcp",
        "add",
        "--transport",
        "http",
        "-H",
        "X-Api-Key: canary-header-2",
        "web",
        "https://e.example/mcp?key=canary-q-3",
    ])
    .run()
    .code(0);
    let out = env.nod(["mcp", "get", "x"]).run();
    out.code(0).stdout_has("\"TOKEN\": \"[hidden]\"").stdout_has("remove it with: nod mcp remove x");
    out.stdout_lacks("canary-get-secret-1");
    let out = env.nod(["mcp", "get", "web", "--json"]).run();
    out.code(0);
    let shown = out.json();
    assert_eq!(shown["entry"]["headers"]["X-Api-Key"], "[hidden]", "{shown}");
    assert_eq!(shown["entry"]["url"], "https://e.example/mcp?[hidden]", "{shown}");
    out.stdout_lacks("canary-header-2").stdout_lacks("canary-q-3");
    // The header reaches the profile for the server to get it.
    let profile = std::fs::read_to_string(env.path("mcp.json")).unwrap();
    assert!(profile.contains("canary-header-2"), "{profile}");
    env.nod(["mcp", "get", "nope"]).run().code(2).stderr_has("no server named nope");
    env.nod(["mcp", "add-json", "bad", r#"{"command": 3}"#]).run().code(2).stderr_has("command must be");
    env.nod(["mcp", "add", "-H", "A: b", "local", "cmd"])
        .run()
        .code(2)
        .stderr_has("--header goes with a remote server");
}

#[test]
fn import_shows_what_it_would_add_from_each_tools_format_and_writes_only_with_yes() {
    let env = Env::new();
    let claude = env.path("claude_desktop_config.json");
    std::fs::write(
        &claude,
        json!({ "mcpServers": {
        "fs": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            "env": { "TOKEN": "canary-import-1" } },
        "broken": { "command": 3 },
    } })
        .to_string(),
    )
    .unwrap();
    let vscode = env.path("mcp.json.vscode");
    std::fs::write(
        &vscode,
        json!({ "servers": { "web": { "type": "http", "url": "https://e.example/mcp" } } }).to_string(),
    )
    .unwrap();
    let codex = env.path("config.toml");
    std::fs::write(
        &codex,
        "[mcp_servers.memory]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]\n",
    )
    .unwrap();
    let claude_arg = claude.display().to_string();
    let out = env.nod(["mcp", "import", &claude_arg]).run();
    out.code(0).stdout_has("+ fs  npx -y @modelcontextprotocol/server-filesystem /tmp").stdout_has("✗ broken");
    out.stdout_has("nothing was written").stdout_lacks("canary-import-1");
    assert!(!env.path("mcp.json").exists(), "nothing was written without --yes");
    env.nod(["mcp", "import", &claude_arg, "--yes"]).run().code(0).stdout_has("added 1 server");
    env.nod(["mcp", "import", &vscode.display().to_string(), "--yes"])
        .run()
        .code(0)
        .stdout_has("+ web  url https://e.example/mcp");
    env.nod(["mcp", "import", &codex.display().to_string(), "--yes"]).run().code(0).stdout_has("+ memory");
    let list = env.nod(["mcp", "list", "--json"]).run();
    let names: Vec<String> =
        list.json()["servers"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["fs", "web", "memory"]);
    let again = env.nod(["mcp", "import", &claude_arg]).run();
    again.code(0).stdout_has("~ fs");
}
