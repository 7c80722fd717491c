//! Test helpers: a private `NOD_HOME` per test, the fixture's profile entry, the fixture's
//! wire record, and the leftover-process check.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use crate::run::{Cmd, Output};

pub const NOD: &str = env!("CARGO_BIN_EXE_nod");
pub const FIXTURE: &str = env!("CARGO_BIN_EXE_nod-fixture-server");
/// The name of the fixture server in single-server profiles.
pub const SERVER: &str = "fx";

/// One test's private world: a temp dir used as `NOD_HOME` and `HOME`, and a marker that
/// every server process started from its profile carries in its environment.
pub struct Env {
    dir: tempfile::TempDir,
    marker: String,
}

/// Every test that made an `Env` checks, when it ends, that no process of its own is left
/// (a server, or a grandchild of one): the check is the harness's, not each test's to ask for.
/// A test that already failed is not checked again (a second panic would hide the first).
impl Drop for Env {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.assert_no_leftovers();
        }
    }
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::Builder::new().prefix("nod-it-").tempdir().expect("create a temp dir");
        let base = dir.path().file_name().unwrap().to_string_lossy().into_owned();
        let marker = format!("nod-it-marker{base}");
        Env { dir, marker }
    }

    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn record_path(&self) -> PathBuf {
        self.path("record.jsonl")
    }

    /// The environment every server entry gets, so leftovers can be found in /proc.
    pub fn marker_env(&self) -> Value {
        json!({ "NOD_IT_MARKER": self.marker })
    }

    /// A profile entry that runs the fixture with `args`, recording what nod sends to this
    /// test's record file; `extra` fields are merged in (objects key by key).
    pub fn fixture_entry(&self, args: &[&str], extra: Value) -> Value {
        let mut command = vec![json!(FIXTURE)];
        command.extend(args.iter().map(|a| json!(a)));
        command.push(json!("--record"));
        command.push(json!(self.record_path()));
        let mut entry = json!({ "command": command, "env": self.marker_env() });
        merge(&mut entry, extra);
        entry
    }

    /// Writes `$NOD_HOME/mcp.json`.
    pub fn profile(&self, profile: Value) {
        let text = serde_json::to_string_pretty(&profile).unwrap();
        std::fs::write(self.path("mcp.json"), text).expect("write the profile");
    }

    /// Writes a profile with the one fixture server `fx`.
    pub fn fixture(&self, args: &[&str], extra: Value) {
        self.profile(json!({ "mcp": { SERVER: self.fixture_entry(args, extra) } }));
    }

    pub fn nod<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Cmd::new(self.home(), args.into_iter().map(|a| a.as_ref().to_string()).collect())
    }

    /// Every line nod sent to the fixture, parsed (a line that is not JSON becomes a string).
    pub fn wire(&self) -> Vec<Value> {
        let Ok(bytes) = std::fs::read(self.record_path()) else {
            return Vec::new();
        };
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_string())))
            .collect()
    }

    /// Polls the record until a message with `method` shows up.
    pub fn wait_for_wire(&self, method: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            if let Some(msg) = with_method(&self.wire(), method).first() {
                return (*msg).clone();
            }
            assert!(
                Instant::now() < deadline,
                "nod did not send {method} within {within:?}; wire so far: {:?}",
                self.wire()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Live processes of this test: (pid, command line, started by nod directly). A direct
    /// child carries this test's temp dir in its command line; any descendant carries the
    /// marker in its environment.
    pub fn live_processes(&self) -> Vec<(u32, String, bool)> {
        let dir = self.home().to_string_lossy().into_owned();
        let me = std::process::id();
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return found;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let proc_dir = entry.path();
            let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
            if cmdline.is_empty() {
                continue; // a zombie or a kernel thread: nothing runs
            }
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let environ = std::fs::read(proc_dir.join("environ")).unwrap_or_default();
            let direct = cmdline.contains(&dir);
            let marked = contains(&environ, self.marker.as_bytes());
            if direct || marked {
                found.push((pid, cmdline.trim_end().to_string(), direct));
            }
        }
        found
    }

    /// Asserts that no process of this test is left (also done when the `Env` is dropped). nod reaps its own children before it
    /// exits, so those must be gone at once; a grandchild it can only signal gets 2 s to die.
    pub fn assert_no_leftovers(&self) {
        let direct: Vec<_> = self.live_processes().into_iter().filter(|p| p.2).collect();
        assert!(direct.is_empty(), "server processes still running after nod exited: {direct:?}");
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let left = self.live_processes();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "processes started by the server still running 2 s after nod exited: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Merges `extra` into `base`: objects key by key (recursively), anything else replaced.
pub fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, extra) => *base = extra,
    }
}

/// The messages of `wire` with this method.
pub fn with_method<'a>(wire: &'a [Value], method: &str) -> Vec<&'a Value> {
    wire.iter().filter(|m| m["method"] == method).collect()
}

/// The pid in the fixture's log prefix `nod-fixture[PID]:`, as shown in an error's stderr tail.
pub fn fixture_pid(text: &str) -> Option<i32> {
    let start = text.find("nod-fixture[")? + "nod-fixture[".len();
    let end = start + text[start..].find(']')?;
    text[start..end].parse().ok()
}

/// Live (not zombie) processes in the process group `pgid`: (pid, state, name).
pub fn group_members(pgid: i32) -> Vec<(i32, char, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let state = fields.first().and_then(|f| f.chars().next()).unwrap_or('?');
        let pgrp = fields.get(2).and_then(|f| f.parse::<i32>().ok());
        if pgrp == Some(pgid) && state != 'Z' && state != 'X' {
            found.push((pid, state, name));
        }
    }
    found
}

/// Asserts that the process group `pgid` empties within 2 s (a SIGKILL takes effect
/// asynchronously; a zombie waiting for its new parent counts as gone).
pub fn assert_group_gone(pgid: i32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let members = group_members(pgid);
        if members.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "process group {pgid} still has members 2 s after nod exited: {members:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
