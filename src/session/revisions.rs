//! What nod learned about servers' revisions, kept in `$NOD_HOME/revisions.json`: a server
//! found to be of the initialize era is initialized directly next time, without the
//! `server/discover` probe (which would start a lazy server's backend on every connect). The
//! key is a digest of the server's name and transport (command, arguments, environment, URL),
//! so a changed entry is probed again; an entry expires after seven days, so a server that
//! was upgraded is found again. 2026-07-28 servers are not recorded: their discover result is
//! what nod connects with.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::config::ServerConfig;

/// How long a verdict holds.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The front ends' file: `$NOD_HOME/revisions.json`.
pub fn default_path() -> Option<PathBuf> {
    crate::config::home().ok().map(|home| home.join("revisions.json"))
}

fn key(config: &ServerConfig) -> String {
    let identity = format!("{}\0{:?}", config.name, config.transport);
    crate::sha256::hex(&crate::sha256::digest(identity.as_bytes()))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn read(path: &Path) -> Map<String, Value> {
    let Ok(bytes) = std::fs::read(path) else { return Map::new() };
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

fn write(path: &Path, map: Map<String, Value>) {
    let bytes = serde_json::to_vec_pretty(&Value::Object(map)).unwrap_or_default();
    if let Err(err) = crate::config::write::write_cache(path, &bytes) {
        log::debug!("cannot record protocol revisions: {err:#}");
    }
}

/// Whether `config`'s server was found to be of the initialize era lately.
pub fn known_initialize_era(path: &Path, config: &ServerConfig) -> bool {
    let map = read(path);
    let at = map.get(&key(config)).and_then(|e| e.get("at")).and_then(Value::as_u64);
    at.is_some_and(|at| now().saturating_sub(at) < KEEP.as_secs())
}

/// Records in `path` (if any) that `config`'s server is of the initialize era (`true`), or
/// forgets it.
pub fn record(path: Option<&Path>, config: &ServerConfig, initialize_era: bool) {
    let Some(path) = path else { return };
    let mut map = read(path);
    let key = key(config);
    // Expired entries go whenever the file is written.
    map.retain(|_, e| e.get("at").and_then(Value::as_u64).is_some_and(|at| now().saturating_sub(at) < KEEP.as_secs()));
    let changed = if initialize_era {
        map.insert(key, json!({ "era": "initialize", "at": now() }));
        true
    } else {
        map.remove(&key).is_some()
    };
    if changed {
        write(path, map);
    }
}
