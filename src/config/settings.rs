//! `$NOD_HOME/settings.json`: project trust, recorded per canonical workspace path, never in
//! the project's own `.mcp.json`. Written atomically, privately and under a lock; other keys
//! are kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

/// A recorded choice for one project entry, bound to the entry's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub approved: bool,
    pub fingerprint: String,
}

pub fn path() -> anyhow::Result<PathBuf> {
    Ok(super::home()?.join("settings.json"))
}

fn read_root(path: &Path) -> anyhow::Result<Map<String, Value>> {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(Value::Object(root)) => Ok(root),
            Ok(_) => bail!("{} is not a JSON object; fix it by hand first", path.display()),
            Err(err) => bail!("{} is not valid JSON (line {}); fix it by hand first", path.display(), err.line()),
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The choices recorded for `workspace`. A settings file that cannot be read means no
/// choices: every project entry stays pending, which is the safe side.
pub fn choices(path: &Path, workspace: &Path) -> anyhow::Result<HashMap<String, Choice>> {
    let root = read_root(path)?;
    let key = workspace.to_string_lossy();
    let trust =
        root.get("projects").and_then(|p| p.get(key.as_ref())).and_then(|w| w.get("trust")).and_then(Value::as_object);
    let mut out = HashMap::new();
    for (name, record) in trust.into_iter().flatten() {
        let state = record.get("state").and_then(Value::as_str);
        let fingerprint = record.get("fingerprint").and_then(Value::as_str);
        if let (Some(state @ ("approved" | "rejected")), Some(fingerprint)) = (state, fingerprint) {
            out.insert(name.clone(), Choice { approved: state == "approved", fingerprint: fingerprint.to_string() });
        }
    }
    Ok(out)
}

/// Records choices for `workspace` (`None` clears a name); `reset` first forgets them all.
/// Under the file's lock, so two nods recording at once both land.
pub fn record(path: &Path, workspace: &Path, reset: bool, changes: &[(String, Option<Choice>)]) -> anyhow::Result<()> {
    super::write::locked(path, || record_unlocked(path, workspace, reset, changes))
}

fn record_unlocked(
    path: &Path,
    workspace: &Path,
    reset: bool,
    changes: &[(String, Option<Choice>)],
) -> anyhow::Result<()> {
    let mut root = read_root(path)?;
    let key = workspace.to_string_lossy().into_owned();
    let projects = root.entry("projects").or_insert_with(|| json!({}));
    let Value::Object(projects) = projects else { bail!("\"projects\" in {} is not an object", path.display()) };
    if reset {
        projects.shift_remove(&key);
    }
    if !changes.is_empty() {
        let workspace = projects.entry(key).or_insert_with(|| json!({}));
        let trust = workspace.as_object_mut().map(|w| w.entry("trust").or_insert_with(|| json!({})));
        let Some(Value::Object(trust)) = trust else {
            bail!("the trust record in {} is not an object", path.display())
        };
        for (name, choice) in changes {
            match choice {
                Some(choice) => {
                    let state = if choice.approved { "approved" } else { "rejected" };
                    trust.insert(name.clone(), json!({ "state": state, "fingerprint": choice.fingerprint }));
                }
                None => {
                    trust.shift_remove(name);
                }
            }
        }
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(root))?;
    text.push('\n');
    super::write::write_private(path, text.as_bytes())
}
