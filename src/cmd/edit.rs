//! `nod mcp add`, `add-json`, `get` and `remove`: the profile's entries, edited and shown.

use serde_json::{Map, Value, json};

use super::failure::{Kind, fail};
use super::{Exit, print, print_json};
use crate::cli::Add;
use crate::config::{self, write::Change};

pub fn add(add: Add, json: bool) -> anyhow::Result<Exit> {
    check_name(&add.name)?;
    let path = config::profile::path()?;
    let entry = match add.transport.as_deref() {
        Some(kind) => {
            let mut entry = json!({ "type": kind, "url": add.target[0] });
            if !add.headers.is_empty() {
                let headers: Map<String, Value> = add.headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                entry["headers"] = Value::Object(headers);
            }
            entry
        }
        None => {
            let mut entry = json!({ "type": "stdio", "command": add.target });
            if !add.env.is_empty() {
                let env: Map<String, Value> = add.env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                entry["environment"] = Value::Object(env);
            }
            entry
        }
    };
    let change = config::write::add(&path, &add.name, entry)?;
    let verb = if change == Change::Replaced { "replaced" } else { "added" };
    if json {
        print_json(&json!({ "server": add.name, "change": verb, "path": path }))?;
    } else {
        print(&format!("{verb} server {} in {}\n", add.name, path.display()))?;
    }
    Ok(Exit::Ok)
}

/// `add-json`: the entry as given, checked by the profile reader before the write.
pub fn add_json(name: &str, source: &crate::cli::Source, json: bool) -> anyhow::Result<Exit> {
    check_name(name)?;
    let text = super::tool::args::read_text(source, "the entry")?;
    let entry: Value = serde_json::from_str(&text)
        .map_err(|e| fail(Kind::Usage, format!("the entry is not valid JSON: {e} (nothing was written)")))?;
    if !entry.is_object() {
        return Err(fail(Kind::Usage, "the entry must be a JSON object, like {\"command\": \"npx\", \"args\": [...]}"));
    }
    let path = config::profile::path()?;
    let change = config::write::add(&path, name, entry).map_err(|e| fail(Kind::Config, format!("{e:#}")))?;
    let verb = if change == Change::Replaced { "replaced" } else { "added" };
    if json {
        print_json(&json!({ "server": name, "change": verb, "path": path }))?;
    } else {
        print(&format!("{verb} server {name} in {}\n", path.display()))?;
    }
    Ok(Exit::Ok)
}

/// `get`: the entry as written, with the values a secret may hide in replaced.
pub fn get(name: &str, json: bool) -> anyhow::Result<Exit> {
    let path = config::profile::path()?;
    let (entry, source, remove) = match config::write::entry(&path, name)? {
        Some(entry) => (entry, path.display().to_string(), format!("nod mcp remove {name}")),
        None => {
            let loaded = config::load_native()?;
            let project = loaded.project.file.as_ref().and_then(|file| {
                let entry = config::write::entry(file, name).ok().flatten()?;
                Some((entry, file.display().to_string()))
            });
            match project {
                Some((entry, file)) => {
                    let remove = format!("delete {name} from {file}, or nod mcp trust reject {name}");
                    (entry, file, remove)
                }
                None => {
                    let known = loaded.servers.iter().map(|s| s.name.as_str());
                    let hint = crate::cli::suggest::hint(name, known);
                    return Err(fail(Kind::NotFound, format!("no server named {name} in {}{hint}", path.display())));
                }
            }
        }
    };
    let shown = hidden(&entry);
    if json {
        print_json(&json!({ "server": name, "source": source, "entry": shown, "remove": remove }))?;
    } else {
        let text = serde_json::to_string_pretty(&shown)?;
        print(&format!("{name} (in {source}):\n{}\nremove it with: {remove}\n", crate::util::terminal_safe(&text)))?;
    }
    Ok(Exit::Ok)
}

/// An entry with the values of `env`/`environment`/`headers` and any URL's query (where a
/// key may ride) replaced by `[hidden]`; the names stay, so the entry still reads.
pub(super) fn hidden(entry: &Value) -> Value {
    let mut out = entry.clone();
    if let Some(map) = out.as_object_mut() {
        for key in ["env", "environment", "headers"] {
            match map.get_mut(key) {
                Some(Value::Object(values)) => values.values_mut().for_each(|v| *v = json!("[hidden]")),
                Some(Value::Array(pairs)) => pairs.iter_mut().for_each(|pair| {
                    if let Some(value) = pair.get_mut("value") {
                        *value = json!("[hidden]");
                    }
                }),
                _ => {}
            }
        }
        if let Some(Value::String(url)) = map.get_mut("url")
            && let Some((base, _)) = url.split_once('?')
        {
            *url = format!("{base}?[hidden]");
        }
    }
    out
}

pub fn remove(name: &str, json: bool) -> anyhow::Result<Exit> {
    check_name(name)?;
    let path = config::profile::path()?;
    let loaded = config::profile::load(&path);
    let unreadable = loaded.issues.iter().any(|i| i.server.is_none() && i.severity == config::Severity::Error);
    let present = loaded.server(name).is_some() || loaded.issues.iter().any(|i| i.server.as_deref() == Some(name));
    // An unreadable file is for the write to report.
    if !unreadable && !present {
        let known: Vec<&str> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
        let hint = crate::cli::suggest::hint(name, known.iter().copied());
        return Err(fail(Kind::NotFound, format!("no server named {name} in {}{hint}", path.display())));
    }
    config::write::remove(&path, name)?;
    if json {
        print_json(&json!({ "server": name, "change": "removed", "path": path }))?;
    } else {
        print(&format!("removed server {name} from {}\n", path.display()))?;
    }
    Ok(Exit::Ok)
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if !config::valid_name(name) {
        return Err(fail(
            Kind::Usage,
            format!("invalid server name {name:?}: use only ASCII letters, digits, _ and - (nothing was written)"),
        ));
    }
    Ok(())
}
