//! The MCP servers of an ACP session: the client's `mcpServers` (stdio with `env` as a list
//! of `{name, value}`, `http` and `sse` with `headers` as such a list), combined with the
//! approved project servers of the session's `cwd`. The client wins a same-name entry and the
//! profile is never used. A client entry is the client's own: any name, any http(s) URL, a
//! literal Authorization header; it restarts up to 3 times.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::server::{RemoteConfig, ServerConfig, StdioConfig, Transport};
use super::{Loaded, merge};

/// Restarts an ACP entry gets (stdio).
const RESTART_LIMIT: u32 = 3;

/// The client's entries, or why one is malformed (naming it). Entries are checked strictly:
/// a malformed one fails the whole request, so the client hears about it.
pub fn parse_servers(value: &Value) -> Result<Vec<ServerConfig>, String> {
    let Some(entries) = value.as_array() else {
        return Err("mcpServers must be an array".into());
    };
    let mut servers: Vec<ServerConfig> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let server = parse_entry(entry).map_err(|why| {
            match entry.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                Some(name) => format!("mcpServers[{i}] ({name:?}): {why}"),
                None => format!("mcpServers[{i}]: {why}"),
            }
        })?;
        if servers.iter().any(|s| s.name == server.name) {
            return Err(format!("mcpServers[{i}]: the name {:?} is used twice", server.name));
        }
        servers.push(server);
    }
    Ok(servers)
}

fn parse_entry(entry: &Value) -> Result<ServerConfig, String> {
    if !entry.is_object() {
        return Err("an entry must be an object".into());
    }
    let name = match entry.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        _ => return Err("name must be a non-empty string".into()),
    };
    let kind = match entry.get("type") {
        None | Some(Value::Null) => "stdio",
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err("type must be a string".into()),
    };
    let transport = match kind {
        "stdio" => {
            let command = match entry.get("command") {
                Some(Value::String(command)) if !command.trim().is_empty() => command.clone(),
                _ => return Err("command must be a non-empty string".into()),
            };
            let mut argv = vec![command];
            argv.extend(strings(entry.get("args"), "args")?);
            Transport::Stdio(StdioConfig { argv, env: pairs(entry.get("env"), "env")?, cwd: None })
        }
        "http" | "sse" => {
            let url = match entry.get("url") {
                Some(Value::String(url)) => url.clone(),
                _ => return Err("url must be a string".into()),
            };
            let scheme = crate::net::url::scheme(&url);
            if !matches!(scheme.as_deref(), Some("http" | "https")) || crate::net::url::host(&url).is_none() {
                return Err(format!("url must be an absolute http(s) URL, not {url:?}"));
            }
            let remote = RemoteConfig { url, headers: pairs(entry.get("headers"), "headers")?, ..Default::default() };
            if kind == "http" { Transport::Http(remote) } else { Transport::Sse(remote) }
        }
        other => return Err(format!("unknown type {other:?} (stdio, http or sse)")),
    };
    Ok(ServerConfig {
        name,
        enabled: true,
        required: false,
        startup_timeout: Duration::from_secs(30),
        operation_timeout: Duration::from_secs(60),
        restart_limit: RESTART_LIMIT,
        protocol_version: None,
        transport,
    })
}

fn strings(value: Option<&Value>, key: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string).ok_or_else(|| format!("{key} must hold strings")))
            .collect(),
        Some(_) => Err(format!("{key} must be an array of strings")),
    }
}

/// `[{name, value}, ...]`.
fn pairs(value: Option<&Value>, key: &str) -> Result<Vec<(String, String)>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match (item.get("name").and_then(Value::as_str), item.get("value").and_then(Value::as_str)) {
                (Some(name), Some(value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
                _ => Err(format!("{key} entries must be {{\"name\": ..., \"value\": ...}} with string values")),
            })
            .collect(),
        Some(_) => Err(format!("{key} must be an array of {{name, value}} objects")),
    }
}

/// The session's servers: the client's, then the approved project servers of `cwd` that the
/// client did not name. Project issues are in `issues`; pending ones stay off.
pub fn load(cwd: &Path, client: Vec<ServerConfig>) -> Loaded {
    super::with_project(Loaded::default(), cwd, merge::Surface::Acp, client)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn client_entries_of_each_kind_parse_and_a_bad_one_is_named() {
        let servers = parse_servers(&json!([
            { "name": "files", "command": "/bin/fs", "args": ["--stdio"], "env": [{ "name": "K", "value": "v" }] },
            { "type": "stdio", "name": "npx one", "command": "npx" },
            { "type": "http", "name": "api", "url": "https://api.example.com/mcp",
              "headers": [{ "name": "Authorization", "value": "Bearer t" }] },
            { "type": "sse", "name": "old", "url": "http://10.0.0.2:8080/sse", "headers": [] },
        ]))
        .unwrap();
        assert_eq!(servers.len(), 4);
        let Transport::Stdio(stdio) = &servers[0].transport else { panic!() };
        assert_eq!(
            (stdio.argv.clone(), stdio.env.clone()),
            (vec!["/bin/fs".into(), "--stdio".into()], vec![("K".into(), "v".into())])
        );
        assert_eq!(servers[0].restart_limit, 3);
        let Transport::Http(http) = &servers[2].transport else { panic!() };
        assert_eq!(http.headers, [("Authorization".to_string(), "Bearer t".to_string())]);
        assert!(matches!(servers[3].transport, Transport::Sse(_)));
        let bad = |value: Value| parse_servers(&value).unwrap_err();
        assert!(bad(json!([{ "name": "x", "command": "" }])).contains("mcpServers[0] (\"x\")"));
        assert!(bad(json!([{ "type": "http", "name": "w", "url": "ftp://x" }])).contains("http(s)"));
        assert!(bad(json!([{ "name": "e", "command": "c", "env": { "A": "b" } }])).contains("env"));
        assert!(bad(json!([{ "type": "acp", "name": "a" }])).contains("unknown type"));
        assert!(bad(json!([{ "command": "c" }])).contains("name"));
        assert!(bad(json!([{ "name": "d", "command": "c" }, { "name": "d", "command": "c" }])).contains("twice"));
        assert!(bad(json!({})).contains("array"));
    }
}
