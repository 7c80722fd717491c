//! Project servers: `<workspace>/.mcp.json`, Claude Code's format (`mcpServers` only).
//!
//! The workspace is the nearest folder, from the current directory's canonical path upward,
//! that holds `.mcp.json`; the search stops at the repository root (a folder with `.git`),
//! and without a file the workspace is the current directory. The file is opened without
//! following a symlink, must be a regular file and is read up to 1 MiB.
//!
//! Every entry starts pending. Until the user approves it, nod only reads the file: it starts
//! no process, contacts no endpoint, and reads no environment variable for the entry.
//! Approval is bound to a SHA-256 fingerprint of what the entry runs or contacts, as written
//! in the file: for a local entry its command, arguments, working directory and environment
//! (names and template values: `NODE_OPTIONS` or `LD_PRELOAD` change what runs), for a
//! remote one its URL and headers. A changed entry is pending again. After approval `${VAR}`
//! and `${VAR:-default}` expand in the command, arguments, environment values, headers and
//! URL, within a 1 MiB budget across all project servers; a relative `cwd` is taken from the
//! workspace and is never expanded.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::settings::Choice;
use super::{ConfigIssue, ServerConfig, Severity, server, valid_name};

pub const FILE_NAME: &str = ".mcp.json";
pub const MAX_FILE_BYTES: u64 = 1 << 20;
pub const EXPANSION_BUDGET: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    Pending,
    Approved,
    Rejected,
    /// Approved or rejected once, changed since: pending again.
    Changed,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Pending => "pending",
            Trust::Approved => "approved",
            Trust::Rejected => "rejected",
            Trust::Changed => "changed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// stdio, http or sse.
    pub kind: &'static str,
    /// What the entry runs or contacts, as written: the approval shows this, and the
    /// fingerprint is computed from it.
    pub launch: Launch,
    pub fingerprint: String,
    pub trust: Trust,
}

/// An entry's fields that decide what runs or what is contacted, templates unexpanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    Local {
        command: String,
        args: Vec<String>,
        /// As written; relative to the workspace when relative. None: nod's current directory.
        cwd: Option<String>,
        env: BTreeMap<String, String>,
    },
    Remote {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Launch {
    /// The environment variables its templates read once approved, each once, in order.
    pub fn variables(&self) -> Vec<&str> {
        let texts: Vec<&String> = match self {
            Launch::Local { command, args, env, .. } => {
                std::iter::once(command).chain(args).chain(env.values()).collect()
            }
            Launch::Remote { url, headers } => std::iter::once(url).chain(headers.values()).collect(),
        };
        let mut names = Vec::new();
        for (_, name, _) in texts.into_iter().flat_map(|text| templates(text)) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// `sha256:<hex>` over a canonical JSON form of the launch and the transport kind.
    fn fingerprint(&self, kind: &str) -> String {
        let material = match self {
            Launch::Local { command, args, cwd, env } => {
                json!({ "type": kind, "command": command, "args": args, "cwd": cwd, "env": env })
            }
            Launch::Remote { url, headers } => json!({ "type": kind, "url": url, "headers": headers }),
        };
        format!("sha256:{}", crate::sha256::hex(material.to_string().as_bytes()))
    }
}

#[derive(Debug, Default)]
pub struct Project {
    pub workspace: PathBuf,
    pub file: Option<PathBuf>,
    pub entries: Vec<Entry>,
    pub issues: Vec<ConfigIssue>,
}

/// Finds the workspace and its `.mcp.json` from `cwd`.
pub fn locate(cwd: &Path) -> (PathBuf, Option<PathBuf>) {
    let start = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    for dir in start.ancestors() {
        let file = dir.join(FILE_NAME);
        if std::fs::symlink_metadata(&file).is_ok() {
            return (dir.to_path_buf(), Some(file));
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    (start, None)
}

/// Reads the project file found by `locate` and attaches each entry's trust state from
/// `choices`.
pub fn load(located: (PathBuf, Option<PathBuf>), choices: &HashMap<String, Choice>) -> Project {
    let (workspace, file) = located;
    let mut project = Project { workspace, file: file.clone(), ..Project::default() };
    let Some(file) = file else { return project };
    let text = match read_bounded(&file) {
        Ok(text) => text,
        Err(why) => {
            project.issues.push(issue(None, why, "fix or remove the project's .mcp.json; project servers stay off"));
            return project;
        }
    };
    let root: Value = match serde_json::from_slice(&text) {
        Ok(root) => root,
        Err(err) => {
            let why =
                format!("the project's .mcp.json is not valid JSON (line {}, column {})", err.line(), err.column());
            project.issues.push(issue(None, why, "fix its JSON syntax"));
            return project;
        }
    };
    let servers = match root.get("mcpServers") {
        None => return project,
        Some(Value::Object(servers)) => servers,
        Some(_) => {
            project.issues.push(issue(
                None,
                "mcpServers in the project's .mcp.json is not an object".into(),
                "write it as \"mcpServers\": {\"name\": {...}}",
            ));
            return project;
        }
    };
    for (name, value) in servers {
        match entry(name, value) {
            Ok(mut entry) => {
                entry.trust = match choices.get(name) {
                    None => Trust::Pending,
                    Some(choice) if choice.fingerprint != entry.fingerprint => Trust::Changed,
                    Some(choice) if choice.approved => Trust::Approved,
                    Some(_) => Trust::Rejected,
                };
                project.entries.push(entry);
            }
            Err(found) => project.issues.push(found),
        }
    }
    project
}

/// Opens without following a symlink (and without blocking on a FIFO), then checks the type
/// and size on the open file itself, so nothing can change between the check and the read.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).map_err(
            |err| match err.raw_os_error() {
                Some(libc::ELOOP) => {
                    "the project's .mcp.json is a symbolic link; nod reads only a regular file".to_string()
                }
                _ => format!("cannot open the project's .mcp.json: {err}"),
            },
        )?;
    let meta = file.metadata().map_err(|err| format!("cannot inspect the project's .mcp.json: {err}"))?;
    if !meta.is_file() {
        return Err("the project's .mcp.json is not a regular file".into());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("the project's .mcp.json is {} bytes, over the 1 MiB limit", meta.len()));
    }
    let mut text = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|err| format!("cannot read the project's .mcp.json: {err}"))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err("the project's .mcp.json is over the 1 MiB limit".into());
    }
    Ok(text)
}

fn issue(server: Option<&str>, message: String, fix: &str) -> ConfigIssue {
    let message = if server.is_some() { format!("{message} (in the project's .mcp.json)") } else { message };
    ConfigIssue { server: server.map(str::to_string), severity: Severity::Error, message, fix: fix.to_string() }
}

/// Checks an entry's shape (without expanding anything) and fingerprints it.
fn entry(name: &str, value: &Value) -> Result<Entry, ConfigIssue> {
    if !valid_name(name) {
        return Err(issue(
            Some(name),
            "the name may contain only ASCII letters, digits, _ and -".into(),
            "rename the entry in .mcp.json",
        ));
    }
    let Value::Object(raw) = value else {
        return Err(issue(
            Some(name),
            "the entry is not a JSON object".into(),
            "see the mcpServers format in nod-mcp(1)",
        ));
    };
    let strings = |key: &str| -> Result<Vec<String>, ConfigIssue> {
        match raw.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| issue(Some(name), format!("{key} must be an array of strings"), "quote every item")),
            Some(_) => Err(issue(Some(name), format!("{key} must be an array of strings"), "write it as [\"...\"]")),
        }
    };
    type Strings = BTreeMap<String, String>;
    let map = |key: &str| -> Result<Strings, ConfigIssue> {
        match raw.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect::<Option<_>>()
                .ok_or_else(|| issue(Some(name), format!("every value of {key} must be a string"), "quote it")),
            Some(_) => Err(issue(
                Some(name),
                format!("{key} must be an object of strings"),
                "write it as {\"NAME\": \"value\"}",
            )),
        }
    };
    let kind = match (raw.get("type").and_then(Value::as_str), raw.get("command"), raw.get("url")) {
        (Some("stdio") | None, Some(Value::String(_)), _) => "stdio",
        (Some("http") | None, None, Some(Value::String(_))) => "http",
        (Some("sse"), None, Some(Value::String(_))) => "sse",
        _ => {
            return Err(issue(
                Some(name),
                "the entry needs a \"command\" string, or a \"url\" string with \"type\" http or sse".into(),
                "see the mcpServers format in nod-mcp(1)",
            ));
        }
    };
    let text = |key: &str| raw.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    let launch = if kind == "stdio" {
        let cwd = match raw.get("cwd") {
            None => None,
            Some(Value::String(dir)) if !dir.is_empty() => Some(dir.clone()),
            Some(_) => {
                return Err(issue(
                    Some(name),
                    "cwd must be a non-empty string".into(),
                    "give the server's working directory as a path, relative to the workspace or absolute",
                ));
            }
        };
        Launch::Local { command: text("command"), args: strings("args")?, cwd, env: map("env")? }
    } else {
        Launch::Remote { url: text("url"), headers: map("headers")? }
    };
    let fingerprint = launch.fingerprint(kind);
    Ok(Entry { name: name.to_string(), kind, launch, fingerprint, trust: Trust::Pending })
}

/// The approved entries as server configurations: expanded (the only place a project entry
/// reads the environment), checked like profile entries, and always optional. An entry that
/// needs a variable that is not set is skipped with an issue naming the variable.
pub fn approved(project: &Project, issues: &mut Vec<ConfigIssue>) -> Vec<ServerConfig> {
    let mut budget = EXPANSION_BUDGET;
    let mut out = Vec::new();
    for entry in project.entries.iter().filter(|e| e.trust == Trust::Approved) {
        let mut missing = Vec::new();
        let mut over = false;
        let mut expand = |text: &str| -> String {
            match expand(text, &mut budget, &mut missing) {
                Some(text) => text,
                None => {
                    over = true;
                    String::new()
                }
            }
        };
        let expanded = match &entry.launch {
            Launch::Local { command, args, cwd, env } => {
                let command: Vec<Value> =
                    std::iter::once(command).chain(args).map(|item| json!(expand(item))).collect();
                let env: Map<String, Value> = env.iter().map(|(k, v)| (k.clone(), json!(expand(v)))).collect();
                let mut local = json!({ "type": "stdio", "command": command, "env": env });
                if let Some(cwd) = cwd {
                    local["cwd"] = json!(project.workspace.join(cwd).to_string_lossy());
                }
                local
            }
            Launch::Remote { url, headers } => {
                let headers: Map<String, Value> = headers.iter().map(|(k, v)| (k.clone(), json!(expand(v)))).collect();
                json!({ "type": entry.kind, "url": expand(url), "headers": headers })
            }
        };
        if over {
            issues.push(issue(
                Some(&entry.name),
                "expanded values are over the 1 MiB budget; the server was skipped".into(),
                "shorten the values its variables expand to",
            ));
            continue;
        }
        if let Some(var) = missing.first() {
            issues.push(issue(
                Some(&entry.name),
                format!("needs the environment variable {var}, which is not set; the server was skipped"),
                &format!("set {var}, or give a default in .mcp.json with ${{{var}:-value}}"),
            ));
            continue;
        }
        let mut warnings = Vec::new();
        match server::parse_entry(&entry.name, &expanded, &mut warnings, true) {
            Ok(mut config) => {
                // Project servers are always optional.
                config.required = false;
                out.push(config);
            }
            Err(found) => issues.push(found),
        }
    }
    out
}

/// Expands `${VAR}` and `${VAR:-default}`. Returns None when the budget runs out; records
/// variables that are unset and have no default.
pub fn expand(text: &str, budget: &mut usize, missing: &mut Vec<String>) -> Option<String> {
    expand_with(text, |name| std::env::var(name).ok(), budget, missing)
}

/// [`expand`] with the variables read through `lookup`.
fn expand_with(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
    budget: &mut usize,
    missing: &mut Vec<String>,
) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (range, name, default) in templates(text) {
        out.push_str(&text[done..range.start]);
        let value = match (lookup(name).filter(|v| !v.is_empty()), default) {
            (Some(value), _) => value,
            (None, Some(default)) => default.to_string(),
            (None, None) => {
                if !missing.iter().any(|m| m == name) {
                    missing.push(name.to_string());
                }
                String::new()
            }
        };
        *budget = budget.checked_sub(value.len())?;
        out.push_str(&value);
        done = range.end;
    }
    out.push_str(&text[done..]);
    Some(out)
}

/// Every `${NAME}` and `${NAME:-default}` in `text`: its byte range, name and default. Text
/// that only looks like one (`${1BAD}`, `${open`) stays literal.
fn templates(text: &str) -> Vec<(std::ops::Range<usize>, &str, Option<&str>)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find("${").map(|i| from + i) {
        let Some(length) = text[start + 2..].find('}') else { break };
        let end = start + 2 + length + 1;
        let inner = &text[start + 2..end - 1];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let valid = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if valid {
            found.push((start..end, name, default));
        }
        from = end;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_forms_and_budget() {
        let lookup = |name: &str| (name == "NOD_UNIT_EXPAND").then(|| "val".to_string());
        let mut budget = 100;
        let mut missing = Vec::new();
        let out = expand_with(
            "a ${NOD_UNIT_EXPAND} ${NOD_UNIT_UNSET:-dflt} ${NOD_UNIT_UNSET} $x ${1BAD} ${open",
            lookup,
            &mut budget,
            &mut missing,
        );
        assert_eq!(out.as_deref(), Some("a val dflt  $x ${1BAD} ${open"));
        assert_eq!(missing, ["NOD_UNIT_UNSET"]);
        assert_eq!(budget, 100 - 3 - 4);
        let mut small = 2;
        assert_eq!(expand_with("${NOD_UNIT_EXPAND}", lookup, &mut small, &mut missing), None);
        let launch =
            entry("v", &json!({"command": "${A}", "args": ["${B:-1} ${A}"], "env": {"K": "${C}", "L": "$D ${1E}"}}))
                .unwrap()
                .launch;
        assert_eq!(launch.variables(), ["A", "B", "C"]);
    }

    #[test]
    fn fingerprints_follow_what_the_entry_runs() {
        let local = |extra: Value| {
            let mut raw = json!({"command": "npx", "args": ["x"], "env": {"K": "1"}});
            raw.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            entry("a", &raw).unwrap().fingerprint
        };
        let a = local(json!({}));
        assert_eq!(a, local(json!({"headers": {"X": "ignored by a local entry"}})));
        for changed in [
            json!({"args": ["y"]}),
            json!({"command": "node"}),
            json!({"env": {"J": "1"}}),
            json!({"env": {"K": "2"}}),
            json!({"env": {"K": "1", "NODE_OPTIONS": "--require ./evil.js"}}),
            json!({"cwd": "tools"}),
        ] {
            assert_ne!(a, local(changed.clone()), "{changed}");
        }
        assert_ne!(local(json!({"cwd": "tools"})), local(json!({"cwd": "other"})));
        // The template text is fingerprinted, not its expansion.
        assert_ne!(local(json!({"env": {"K": "${A}"}})), local(json!({"env": {"K": "${B}"}})));
        let remote = entry("r", &json!({"type": "http", "url": "https://e/mcp", "headers": {"X": "1"}})).unwrap();
        let other_header = entry("r", &json!({"type": "http", "url": "https://e/mcp", "headers": {"X": "2"}})).unwrap();
        assert_ne!(remote.fingerprint, other_header.fingerprint);
        assert!(entry("bad name", &json!({"command": "x"})).is_err());
        assert!(entry("a", &json!({"command": ["x"]})).is_err());
        assert!(entry("a", &json!({"command": "x", "cwd": 1})).is_err());
    }

    #[test]
    fn a_relative_cwd_is_taken_from_the_workspace() {
        let workspace = PathBuf::from("/work/space");
        let mut project = Project { workspace: workspace.clone(), ..Project::default() };
        for cwd in ["tools", "/abs"] {
            let mut entry = entry(cwd.trim_start_matches('/'), &json!({"command": "x", "cwd": cwd})).unwrap();
            entry.trust = Trust::Approved;
            project.entries.push(entry);
        }
        let servers = approved(&project, &mut Vec::new());
        let cwds: Vec<_> = servers
            .iter()
            .map(|s| match &s.transport {
                crate::config::Transport::Stdio(stdio) => stdio.cwd.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(cwds, [Some(workspace.join("tools")), Some(PathBuf::from("/abs"))]);
    }
}
