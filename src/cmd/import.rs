//! `nod mcp import <file> [--yes]`: servers from where users already have them. Claude
//! Desktop's and Claude Code's JSON (`mcpServers`, and Claude Code's entry for the current
//! folder under `projects`), VS Code's `mcp.json` (`servers`), Codex's TOML (`mcp_servers`) and
//! nod's own profile (`mcp`). Every entry is checked as the profile would read it; what would
//! be added is shown (secret values hidden) before anything is written, and only `--yes`
//! writes.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::failure::{Kind, fail};
use super::{Exit, print, print_json};
use crate::config;

/// One entry found in the file, and what nod makes of it.
struct Found {
    name: String,
    entry: Value,
    /// Why the profile would not take it.
    problem: Option<String>,
    /// A server of that name is in the profile already.
    replaces: bool,
}

pub fn import(file: &Path, yes: bool, json: bool) -> anyhow::Result<Exit> {
    let text =
        std::fs::read_to_string(file).map_err(|e| fail(Kind::Usage, format!("cannot read {}: {e}", file.display())))?;
    let (format, servers) = servers_of(file, &text)?;
    let path = config::profile::path()?;
    let existing = config::profile::load(&path);
    let found: Vec<Found> = servers
        .into_iter()
        .map(|(name, entry)| {
            let problem = check(&name, &entry);
            let replaces = existing.server(&name).is_some();
            Found { name, entry, problem, replaces }
        })
        .collect();
    let usable = found.iter().filter(|f| f.problem.is_none()).count();
    let mut added = Vec::new();
    if yes {
        for found in found.iter().filter(|f| f.problem.is_none()) {
            config::write::add(&path, &found.name, found.entry.clone())
                .map_err(|e| fail(Kind::Config, format!("server {}: {e:#}", found.name)))?;
            added.push(found.name.clone());
        }
    }
    if json {
        let servers: Vec<Value> = found
            .iter()
            .map(|f| {
                json!({ "name": f.name, "entry": super::edit::hidden(&f.entry), "replaces": f.replaces,
                    "problem": f.problem, "added": added.contains(&f.name) })
            })
            .collect();
        print_json(&json!({ "file": file, "format": format, "servers": servers, "written": yes, "path": path }))?;
    } else {
        let mut out = format!("{} ({format}): {} server{}\n", file.display(), found.len(), plural(found.len()));
        for f in &found {
            let (mark, note) = match (&f.problem, f.replaces) {
                (Some(why), _) => ("✗", format!(": {why}")),
                (None, true) => ("~", " (replaces the one in the profile)".to_string()),
                (None, false) => ("+", String::new()),
            };
            out.push_str(&format!("  {mark} {}  {}{note}\n", f.name, summary(&f.entry)));
        }
        if yes {
            out.push_str(&format!("added {} server{} to {}\n", added.len(), plural(added.len()), path.display()));
        } else if usable > 0 {
            out.push_str(&format!(
                "nothing was written; nod mcp import {} --yes adds the {usable} marked + or ~\n",
                file.display()
            ));
        }
        print(&crate::util::terminal_safe(&out))?;
    }
    // A file none of whose entries nod can take is a failure; partly usable is not.
    Ok(if usable == 0 && !found.is_empty() { Exit::Failure } else { Exit::Ok })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The servers of a file, and which tool's format it is in.
fn servers_of(file: &Path, text: &str) -> anyhow::Result<(&'static str, Vec<(String, Value)>)> {
    let toml = file.extension().is_some_and(|e| e == "toml");
    let root: Value = if toml {
        basic_toml::from_str(text)
            .map_err(|e| fail(Kind::Usage, format!("{} is not valid TOML: {e}", file.display())))?
    } else {
        serde_json::from_str(text)
            .map_err(|e| fail(Kind::Usage, format!("{} is not valid JSON: {e}", file.display())))?
    };
    let take = |map: Option<&Value>| -> Vec<(String, Value)> {
        map.and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    if toml {
        return Ok(("Codex config.toml", take(root.get("mcp_servers"))));
    }
    if let Some(servers) = root.get("mcpServers") {
        let mut all = take(Some(servers));
        // Claude Code keeps a folder's servers under projects["/path"].mcpServers.
        let cwd = std::env::current_dir().unwrap_or_default();
        if let Some(project) = root.get("projects").and_then(|p| p.get(cwd.to_string_lossy().as_ref())) {
            all.extend(take(project.get("mcpServers")));
        }
        return Ok(("Claude Desktop / Claude Code JSON", all));
    }
    if let Some(servers) = root.get("servers") {
        return Ok(("VS Code mcp.json", take(Some(servers))));
    }
    if let Some(servers) = root.get("mcp") {
        return Ok(("nod profile", take(Some(servers))));
    }
    Err(fail(
        Kind::Usage,
        format!(
            "{} has no servers nod knows where to find (mcpServers, servers, mcp, or [mcp_servers] in TOML)",
            file.display()
        ),
    ))
}

/// Why the profile would not take `entry` as `name`, if it would not.
fn check(name: &str, entry: &Value) -> Option<String> {
    if !config::valid_name(name) {
        return Some("the name has characters other than ASCII letters, digits, _ and -".into());
    }
    let mut probe = config::Loaded::default();
    let mut servers = Map::new();
    servers.insert(name.to_string(), entry.clone());
    let text = json!({ "mcp": servers }).to_string();
    config::profile::parse(text.as_bytes(), &mut probe);
    probe.issues.iter().find(|i| i.severity == config::Severity::Error).map(|i| i.message.clone())
}

/// One line about an entry: its command or its URL (without query).
fn summary(entry: &Value) -> String {
    if let Some(url) = entry.get("url").and_then(Value::as_str) {
        return format!("url {}", url.split(['?', '#']).next().unwrap_or(""));
    }
    let command = match entry.get("command") {
        Some(Value::String(c)) => vec![c.clone()],
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let args = entry.get("args").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    let words: Vec<String> = command.into_iter().chain(args.map(str::to_string)).collect();
    crate::util::one_line(&words.join(" "))
}
