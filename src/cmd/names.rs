//! Names for shell completion, found without connecting anything: servers from the profile
//! (and approved project servers), the workspace's project servers, and tool and prompt
//! names that listing commands remember in `$NOD_HOME/completion.json`. Only names a shell
//! can take as they are are kept (`cli::complete::shell_safe`): a server chooses its tool
//! names. Writing the cache is best effort; a command never fails because of it.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::{Exit, print};
use crate::cli::complete::{self, Names};
use crate::config::project::Trust;
use crate::json::Member;

/// The most names kept per server and kind.
const MAX_NAMES: usize = 2000;

fn path() -> anyhow::Result<PathBuf> {
    Ok(crate::config::home()?.join("completion.json"))
}

/// The `name` fields of listed items.
pub fn names_of(items: &[Value]) -> Vec<String> {
    items.iter().filter_map(|i| i.member("name").and_then(Value::as_str)).map(str::to_string).collect()
}

/// Remembers a server's tool and prompt names (those given), for completion.
pub fn remember(server: &str, tools: Option<&[Value]>, prompts: Option<&[Value]>) {
    remember_names(server, tools.map(names_of), prompts.map(names_of));
}

pub fn remember_names(server: &str, tools: Option<Vec<String>>, prompts: Option<Vec<String>>) {
    remember_all(vec![(server.to_string(), tools, prompts)]);
}

/// A server's name, and its tool and prompt names when they were listed.
pub type Listed = (String, Option<Vec<String>>, Option<Vec<String>>);

/// Remembers several servers' names with one read and at most one write of the file.
pub fn remember_all(servers: Vec<Listed>) {
    let Ok(path) = path() else { return };
    let mut root = read(&path);
    let entries = root.entry("servers").or_insert_with(|| json!({}));
    let Some(entries) = entries.as_object_mut() else { return };
    let mut changed = false;
    for (server, tools, prompts) in servers {
        let entry = entries.entry(server).or_insert_with(|| json!({}));
        if !entry.is_object() {
            // A damaged file: indexing a non-object would panic.
            *entry = json!({});
        }
        for (key, names) in [("tools", tools), ("prompts", prompts)] {
            if let Some(names) = names {
                // The names move into the value: `json!` would copy each through the serializer.
                let kept: Vec<Value> =
                    names.into_iter().filter(|n| complete::shell_safe(n)).take(MAX_NAMES).map(Value::String).collect();
                if entry.get(key).and_then(Value::as_array) != Some(&kept) {
                    entry[key] = Value::Array(kept);
                    changed = true;
                }
            }
        }
    }
    if !changed {
        return;
    }
    let mut text = serde_json::to_string(&Value::Object(root)).unwrap_or_default();
    text.push('\n');
    if let Err(err) = crate::config::write::write_cache(&path, text.as_bytes()) {
        log::debug!("could not remember names for completion: {err:#}");
    }
}

fn read(path: &std::path::Path) -> Map<String, Value> {
    match std::fs::read(path).ok().and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()) {
        Some(Value::Object(root)) => root,
        _ => Map::new(),
    }
}

/// `nod __complete WORD...`: one candidate a line, a tab, its description. Never fails and
/// never connects: a completion that errs shows nothing.
pub fn complete(words: &[String]) -> anyhow::Result<Exit> {
    let names = gather();
    let mut out = String::new();
    for (candidate, about) in complete::candidates(words, &names) {
        out.push_str(&format!("{candidate}\t{}\n", crate::util::one_line(&about)));
    }
    print(&out)?;
    Ok(Exit::Ok)
}

fn gather() -> Names {
    let mut names = Names::default();
    if let Ok(loaded) = crate::config::load_native() {
        names.servers = loaded.servers.iter().map(|s| s.name.clone()).collect();
        names.project = loaded
            .project
            .entries
            .iter()
            .filter(|e| e.trust != Trust::Approved || loaded.server(&e.name).is_some())
            .map(|e| e.name.clone())
            .filter(|n| complete::shell_safe(n))
            .collect();
    }
    if let Ok(found) = super::skills::installed() {
        names.skills = found.skills.iter().map(|s| s.name.clone()).filter(|n| complete::shell_safe(n)).collect();
    }
    let root = path().map(|p| read(&p)).unwrap_or_default();
    let servers = root.get("servers").and_then(Value::as_object).cloned().unwrap_or_default();
    let listed = |key: &str| -> HashMap<String, Vec<String>> {
        servers
            .iter()
            .map(|(server, entry)| {
                let items = entry.get(key).and_then(Value::as_array).into_iter().flatten();
                let kept = items.filter_map(Value::as_str).filter(|n| complete::shell_safe(n)).map(str::to_string);
                (server.clone(), kept.collect())
            })
            .collect()
    };
    names.tools = listed("tools");
    names.prompts = listed("prompts");
    names
}
