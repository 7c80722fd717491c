//! Profile writes for `nod mcp add` and `nod mcp remove`. A write reads the file as raw JSON,
//! changes one entry under the canonical `mcp` key, and keeps every other entry and unknown
//! field as it was. It is atomic (a temp file in the same folder, fsync, rename, fsync of the
//! folder) and private (file 0600, folder 0700). An ambiguous file is never rewritten.
//! Every read-modify-write of a file nod shares between processes (the profile,
//! settings.json, credentials.json) runs under `locked`, so concurrent writers all land.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use serde_json::{Map, Value};

use super::profile::looks_like_servers_key;
use super::{Loaded, valid_name};

/// What a successful write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Replaced,
    Removed,
}

/// Adds or replaces `name` with `entry`. The entry is checked like any loaded entry first.
pub fn add(path: &Path, name: &str, entry: Value) -> anyhow::Result<Change> {
    check_name(name)?;
    let mut issues = Vec::new();
    let mut probe = Loaded::default();
    let text = serde_json::json!({ "mcp": { name: entry.clone() } }).to_string();
    super::profile::parse(text.as_bytes(), &mut probe);
    issues.extend(probe.issues);
    if let Some(issue) = issues.iter().find(|i| i.severity == super::Severity::Error) {
        bail!("{issue}");
    }
    update(path, |servers| {
        Ok(if servers.insert(name.to_string(), entry).is_some() { Change::Replaced } else { Change::Added })
    })
}

/// The raw entry of `name` in the profile (or a `.mcp.json`) at `path`, as written there;
/// `None` when there is none.
pub fn entry(path: &Path, name: &str) -> anyhow::Result<Option<Value>> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    let root: Value =
        serde_json::from_slice(&bytes).with_context(|| format!("{} is not valid JSON", path.display()))?;
    let servers = ["mcp", "mcpServers", "servers"].iter().find_map(|key| root.get(key)).and_then(Value::as_object);
    Ok(servers.and_then(|s| s.get(name)).cloned())
}

/// Removes `name`.
pub fn remove(path: &Path, name: &str) -> anyhow::Result<Change> {
    check_name(name)?;
    update(path, |servers| match servers.shift_remove(name) {
        Some(_) => Ok(Change::Removed),
        None => bail!("no server named {name} in {}", path.display()),
    })
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if !valid_name(name) {
        bail!("invalid server name {name:?}: use only ASCII letters, digits, _ and - (nothing was written)");
    }
    Ok(())
}

/// Reads the profile as raw JSON, lets `change` edit the canonical server map, writes it
/// back, all under the profile's lock.
fn update(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<Change>,
) -> anyhow::Result<Change> {
    locked(path, || update_unlocked(path, change))
}

fn update_unlocked(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<Change>,
) -> anyhow::Result<Change> {
    let mut root = match fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(root)) => root,
            Ok(_) => bail!("cannot update {}: it is not a JSON object; fix it by hand first", path.display()),
            Err(err) => bail!(
                "cannot update {}: it is not valid JSON (line {}, column {}); fix it by hand first",
                path.display(),
                err.line(),
                err.column()
            ),
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    if let Some(key) = root.keys().find(|k| *k != "mcp" && *k != "mcpServers" && looks_like_servers_key(k)) {
        bail!(
            "refusing to change {}: it has a key {key:?} that nod does not read; rename it to \"mcp\" first",
            path.display()
        );
    }
    // A lone `mcpServers` alias moves to the canonical key.
    if !root.contains_key("mcp") {
        let alias = root.shift_remove("mcpServers").unwrap_or_else(|| Value::Object(Map::new()));
        root.insert("mcp".into(), alias);
    }
    let Some(Value::Object(servers)) = root.get_mut("mcp") else {
        bail!("cannot update {}: \"mcp\" is not a JSON object; fix it by hand first", path.display());
    };
    let result = change(servers)?;
    let mut text = serde_json::to_string_pretty(&Value::Object(root))?;
    text.push('\n');
    write_private(path, text.as_bytes())?;
    Ok(result)
}

/// Runs `change` (a read-modify-write of `path`) holding an exclusive `flock` on the lock
/// file beside it, `.NAME.lock` (0600). The rename in `write_private` keeps readers safe;
/// the lock keeps a second writer from reading the file before the first one's rename and
/// writing its stale copy over it. The lock goes with the descriptor, also when a process
/// dies holding it. Never nest two of these on one path: flock locks per open file, so a
/// second lock in the same process waits for ever.
pub fn locked<T>(path: &Path, change: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    use std::os::fd::AsRawFd;
    let dir = ensure_dir(path)?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let lock_path = dir.join(format!(".{file_name}.lock"));
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .with_context(|| format!("cannot open the lock file {}", lock_path.display()))?;
    loop {
        // SAFETY: flock on a descriptor this function owns for as long as the call.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } == 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).with_context(|| format!("cannot lock {}", lock_path.display()));
        }
    }
    // Closing `lock` (dropped after `change` returns) releases it.
    change()
}

/// `path`'s folder, created 0700 when missing.
fn ensure_dir(path: &Path) -> anyhow::Result<&Path> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(dir)
}

/// Writes `bytes` to `path` atomically, as a 0600 file in a 0700 folder, and durably (synced).
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_file(path, bytes, true)
}

/// `write_private` for a cache that nod can rebuild (completion names, revision verdicts):
/// atomic, never torn, but not synced to disk, which costs milliseconds a command; a crash
/// may leave the older copy, never a broken one.
pub fn write_cache(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_file(path, bytes, false)
}

fn write_file(path: &Path, bytes: &[u8], durable: bool) -> anyhow::Result<()> {
    let dir = ensure_dir(path)?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    // Unique per write, not only per process: two threads may write the same file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{file_name}.{}.{n}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if durable {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))?;
    // An existing file keeps the mode rename gave it (the temp file's 0600), but make sure.
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn add_keeps_everything_else_and_migrates_the_alias() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home/mcp.json");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, r#"{"model": "x", "mcpServers": {"old": {"command": ["a"], "custom": 1}}}"#).unwrap();
        assert_eq!(add(&path, "new", json!({"type": "stdio", "command": ["b"]})).unwrap(), Change::Added);
        assert_eq!(add(&path, "new", json!({"type": "stdio", "command": ["c"]})).unwrap(), Change::Replaced);
        let root: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            root,
            json!({"model": "x", "mcp": {"old": {"command": ["a"], "custom": 1}, "new": {"type": "stdio", "command": ["c"]}}})
        );
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(remove(&path, "old").unwrap(), Change::Removed);
        assert!(remove(&path, "old").is_err());
    }

    #[test]
    fn ambiguous_or_broken_files_are_never_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        for text in [r#"{"MCP-Servers": {}}"#, "{not json", "[]", r#"{"mcp": 3}"#] {
            fs::write(&path, text).unwrap();
            assert!(add(&path, "a", json!({"command": ["x"]})).is_err(), "{text}");
            assert_eq!(fs::read_to_string(&path).unwrap(), text);
        }
        assert!(add(&path, "bad name", json!({"command": ["x"]})).is_err());
        fs::remove_file(&path).unwrap();
        assert!(add(&path, "remote", json!({"type": "http", "url": "http://example.com/"})).is_err());
        assert!(!path.exists());
    }
}
