//! `nod mcp add` and `nod mcp remove`: profile edits.

use serde_json::{Map, Value, json};

use super::failure::{Kind, fail};
use super::{Exit, print, print_json};
use crate::cli::Add;
use crate::config::{self, write::Change};

pub fn add(add: Add, json: bool) -> anyhow::Result<Exit> {
    check_name(&add.name)?;
    let path = config::profile::path()?;
    let entry = match add.transport.as_deref() {
        Some(kind) => json!({ "type": kind, "url": add.target[0] }),
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
