//! The private profile, `$NOD_HOME/mcp.json`: a root object with one `mcp` map (canonical) or
//! the `mcpServers` alias. `mcp` wins when both exist.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{ConfigIssue, Loaded, Severity, server};

/// The profile's path under nod's home.
pub fn path() -> anyhow::Result<PathBuf> {
    Ok(super::home()?.join("mcp.json"))
}

/// Reads the profile. A missing file is an empty profile; every problem is an issue.
pub fn load(path: &Path) -> Loaded {
    let mut loaded = Loaded { path: path.to_path_buf(), ..Loaded::default() };
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return loaded,
        Err(err) => {
            loaded.issues.push(file_issue(format!("cannot read the profile: {err}"), "check the file's permissions"));
            return loaded;
        }
    };
    parse(&text, &mut loaded);
    loaded
}

/// Parses profile text into `loaded`.
pub fn parse(text: &[u8], loaded: &mut Loaded) {
    let root: Value = match serde_json::from_slice(text) {
        Ok(root) => root,
        Err(err) => {
            loaded.issues.push(file_issue(
                format!("the profile is not valid JSON (line {}, column {})", err.line(), err.column()),
                "fix the JSON syntax; no server was loaded from it",
            ));
            return;
        }
    };
    let Value::Object(root) = root else {
        loaded.issues.push(file_issue("the profile is not a JSON object".into(), "write it as {\"mcp\": {...}}"));
        return;
    };
    for key in root.keys() {
        if key != "mcp" && key != "mcpServers" && looks_like_servers_key(key) {
            loaded.issues.push(ConfigIssue {
                server: None,
                severity: Severity::Warning,
                message: format!("the key {key:?} is not read; nod reads servers from \"mcp\""),
                fix: format!("rename {key:?} to \"mcp\"; until then nod will not change this file"),
            });
        }
    }
    let servers = match (root.get("mcp"), root.get("mcpServers")) {
        (Some(mcp), alias) => {
            if alias.is_some() {
                loaded.issues.push(ConfigIssue {
                    server: None,
                    severity: Severity::Warning,
                    message: "both \"mcp\" and \"mcpServers\" are present; \"mcpServers\" is ignored".into(),
                    fix: "move its entries into \"mcp\"".into(),
                });
            }
            mcp
        }
        (None, Some(alias)) => alias,
        (None, None) => return,
    };
    let Value::Object(servers) = servers else {
        loaded
            .issues
            .push(file_issue("the server map is not a JSON object".into(), "write it as \"mcp\": {\"name\": {...}}"));
        return;
    };
    for (name, entry) in servers {
        match server::parse(name, entry, &mut loaded.issues) {
            Ok(config) => loaded.servers.push(config),
            Err(issue) => loaded.issues.push(issue),
        }
    }
}

/// Whether a key is a near miss for the server map (`MCP-Servers`, `mcp_servers`, `servers`).
pub fn looks_like_servers_key(key: &str) -> bool {
    let folded: String = key.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
    matches!(folded.as_str(), "mcp" | "mcpservers" | "servers" | "mcpserver" | "server")
}

fn file_issue(message: String, fix: &str) -> ConfigIssue {
    ConfigIssue { server: None, severity: Severity::Error, message, fix: fix.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Transport;
    use std::time::Duration;

    fn load_text(text: &str) -> Loaded {
        let mut loaded = Loaded::default();
        parse(text.as_bytes(), &mut loaded);
        loaded
    }

    #[test]
    fn canonical_and_compatibility_forms() {
        let loaded = load_text(
            r#"{"mcp": {
                "a": {"type": "local", "command": ["node", "s.js"], "environment": {"K": "1"}, "env": {"K": "0", "J": "2"}},
                "b": {"command": "node", "args": ["s.js", "--x"], "env": {"K": "v"}, "cwd": "/tmp"},
                "c": {"url": "https://mcp.example.com/mcp"}
            }}"#,
        );
        assert!(loaded.issues.is_empty(), "{:?}", loaded.issues);
        let a = loaded.server("a").unwrap();
        let Transport::Stdio(stdio) = &a.transport else { panic!() };
        assert_eq!(stdio.argv, ["node", "s.js"]);
        assert_eq!(stdio.env, [("J".to_string(), "2".to_string()), ("K".to_string(), "1".to_string())]);
        assert!(a.enabled && !a.required);
        assert_eq!(
            (a.startup_timeout, a.operation_timeout, a.restart_limit),
            (Duration::from_secs(30), Duration::from_secs(60), 1)
        );
        let Transport::Stdio(b) = &loaded.server("b").unwrap().transport else { panic!() };
        assert_eq!(b.argv, ["node", "s.js", "--x"]);
        assert_eq!(b.cwd.as_deref(), Some(Path::new("/tmp")));
        assert_eq!(loaded.server("c").unwrap().transport.kind(), "http");
    }

    #[test]
    fn mcp_wins_over_alias() {
        let loaded = load_text(r#"{"mcp": {"a": {"command": "x"}}, "mcpServers": {"b": {"command": "y"}}}"#);
        assert_eq!(loaded.servers.len(), 1);
        assert_eq!(loaded.servers[0].name, "a");
        assert_eq!(loaded.issues.len(), 1);
        let alias = load_text(r#"{"mcpServers": {"b": {"command": "y"}}}"#);
        assert_eq!(alias.servers[0].name, "b");
    }

    #[test]
    fn a_bad_entry_keeps_the_good_ones() {
        let loaded = load_text(
            r#"{"mcp": {
                "good": {"command": ["x"]},
                "bad name": {"command": ["x"]},
                "no-command": {"enabled": true},
                "bad-timeout": {"command": ["x"], "startup_timeout_ms": 0},
                "bad-env": {"command": ["x"], "env": {"A": 1}},
                "auth": {"type": "http", "url": "https://e.com/mcp", "headers": {"authorization": "Bearer x"}},
                "plain": {"type": "http", "url": "http://e.com/mcp"},
                "weird": {"command": ["x"], "colour": "blue"}
            }}"#,
        );
        let names: Vec<_> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["good", "weird"]);
        let errors: Vec<_> =
            loaded.issues.iter().filter(|i| i.severity == Severity::Error).filter_map(|i| i.server.clone()).collect();
        assert_eq!(errors, ["bad name", "no-command", "bad-timeout", "bad-env", "auth", "plain"]);
        assert!(loaded.issues.iter().any(|i| i.severity == Severity::Warning && i.message.contains("colour")));
        assert!(loaded.issues.iter().all(|i| !i.to_string().contains("Bearer x")));
    }

    #[test]
    fn broken_files_are_issues() {
        assert_eq!(load_text("{").issues.len(), 1);
        assert_eq!(load_text("[]").issues.len(), 1);
        assert_eq!(load_text(r#"{"mcp": []}"#).issues.len(), 1);
        let similar = load_text(r#"{"MCP-Servers": {"a": {"command": "x"}}}"#);
        assert!(similar.servers.is_empty());
        assert!(similar.issues[0].message.contains("MCP-Servers"));
    }
}
