//! What nod learned about servers' revisions, kept in `$NOD_HOME/revisions.json`: a server
//! found to be of the initialize era is initialized directly next time, without the
//! `server/discover` probe (which would start a lazy server's backend on every connect). The
//! key is a digest of the server's name and transport (command, arguments, environment, URL),
//! so a changed entry is probed again; an entry expires after seven days, so a server that
//! was upgraded is found again. 2026-07-28 servers are not recorded: their discover result is
//! what nod connects with.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
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

/// Verdicts not yet written, and how many batches hold them back. One lock for the process:
/// servers connect on threads of their own, and two read-modify-writes of the file at once
/// would lose one of them.
struct Pending {
    batches: usize,
    /// (file, key, the entry or None to forget it), in the order recorded.
    changes: Vec<(PathBuf, String, Option<Value>)>,
    /// The file as read when a batch first asked, kept until the last batch ends: twenty
    /// servers connecting at once read it once, not twenty times.
    read: Option<(PathBuf, Map<String, Value>)>,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending { batches: 0, changes: Vec::new(), read: None });

fn pending() -> MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Holds verdicts back while several servers connect at once, so that the file is written
/// once when the last batch ends rather than once per server.
#[must_use]
pub struct Batch(());

pub fn batch() -> Batch {
    pending().batches += 1;
    Batch(())
}

impl Drop for Batch {
    fn drop(&mut self) {
        let mut pending = pending();
        pending.batches -= 1;
        if pending.batches == 0 {
            pending.read = None;
            flush(&mut pending);
        }
    }
}

fn flush(pending: &mut Pending) {
    let mut changes = std::mem::take(&mut pending.changes);
    while let Some((path, ..)) = changes.first() {
        let path = path.clone();
        let (these, rest): (Vec<_>, Vec<_>) = changes.into_iter().partition(|(p, ..)| *p == path);
        changes = rest;
        let mut map = read(&path);
        let before = map.clone();
        // Expired entries go whenever the file is written.
        map.retain(|_, e| fresh(e));
        for (_, key, entry) in these {
            match entry {
                Some(entry) => map.insert(key, entry),
                None => map.remove(&key),
            };
        }
        if map != before {
            write(&path, map);
        }
    }
}

fn fresh(entry: &Value) -> bool {
    entry.get("at").and_then(Value::as_u64).is_some_and(|at| now().saturating_sub(at) < KEEP.as_secs())
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
    let key = key(config);
    let mut pending = pending();
    let held = pending.changes.iter().rev().find(|(p, k, _)| p == path && *k == key).map(|(.., e)| e.clone());
    let entry = match held {
        Some(entry) => entry,
        None if pending.batches == 0 => read(path).remove(&key),
        None => {
            if pending.read.as_ref().is_none_or(|(p, _)| p != path) {
                pending.read = Some((path.to_path_buf(), read(path)));
            }
            pending.read.as_ref().and_then(|(_, map)| map.get(&key).cloned())
        }
    };
    entry.is_some_and(|e| fresh(&e))
}

/// Records in `path` (if any) that `config`'s server is of the initialize era (`true`), or
/// forgets it; written now, or when the batch that holds it back ends.
pub fn record(path: Option<&Path>, config: &ServerConfig, initialize_era: bool) {
    let Some(path) = path else { return };
    let entry = initialize_era.then(|| json!({ "era": "initialize", "at": now() }));
    let mut pending = pending();
    pending.changes.push((path.to_path_buf(), key(config), entry));
    if pending.batches == 0 {
        flush(&mut pending);
    }
}
