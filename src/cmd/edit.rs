//! `nod mcp add` and `nod mcp remove`: profile edits.

use serde_json::{Map, Value, json};

use super::{Exit, print};
use crate::cli::Add;
use crate::config::{self, write::Change};

pub fn add(add: Add) -> anyhow::Result<Exit> {
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
    print(&format!("{verb} server {} in {}\n", add.name, path.display()))?;
    Ok(Exit::Ok)
}

pub fn remove(name: &str) -> anyhow::Result<Exit> {
    let path = config::profile::path()?;
    config::write::remove(&path, name)?;
    print(&format!("removed server {name} from {}\n", path.display()))?;
    Ok(Exit::Ok)
}
