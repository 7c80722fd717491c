//! Saved conversations: every conversation of `nod ask` is written as it goes to
//! `$NOD_HOME/sessions/<id>.jsonl` (0600, the folder 0700), one JSON line a message, after a
//! first line of metadata (id, created, workspace, model, surface, title). What is saved is
//! what the model saw (the user's prompts, the model's answers and tool calls, the tool
//! results as bounded and marked), with configured secrets redacted; never the system
//! prompt, the API key or header values. A line is written whole with one `write`, so a
//! crash or a kill loses at most the message being written; a torn last line is skipped on
//! load with a warning.
//!
//! A continued conversation goes to the model as it was: tool calls without a result (the
//! process stopped during a step) are dropped, a turn that did not end is closed with a note,
//! and when the whole is over its bound the oldest tool results are elided with a notice.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::provider::{Message, ToolCall};
use crate::util::Redactor;

/// A session file stops growing here (a warning says so; the conversation goes on unsaved).
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// What a continued conversation may bring back to the model: past it the oldest tool
/// results are elided.
pub const MAX_CONTEXT_BYTES: usize = 4 * 1024 * 1024;
/// The longest title kept.
const MAX_TITLE: usize = 80;
/// Sessions looked at by a listing, newest first.
const MAX_LISTED: usize = 10_000;
/// The note that closes a turn the process did not finish.
pub const UNFINISHED: &str = "The previous response ended before completion (nod stopped before the turn ended).";

/// What is known of a session without reading its messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    pub id: String,
    /// Seconds since the epoch.
    pub created: u64,
    pub workspace: String,
    pub model: String,
    pub surface: String,
    pub title: String,
}

impl Meta {
    /// A new session's metadata on `surface`, titled by its first prompt; created now, its id
    /// given when the file is made (or set before, as ACP does).
    pub fn new(surface: &str, workspace: &str, model: &str, first_prompt: &str, redactor: &Redactor) -> Meta {
        Meta {
            id: String::new(),
            created: now(),
            workspace: workspace.to_string(),
            model: model.to_string(),
            surface: surface.to_string(),
            title: title_of(first_prompt, redactor),
        }
    }
}

/// A session as a listing shows it.
#[derive(Clone, Debug)]
pub struct Summary {
    pub meta: Meta,
    /// Seconds since the epoch of the last write.
    pub updated: u64,
    pub messages: usize,
}

pub fn dir(home: &Path) -> PathBuf {
    home.join("sessions")
}

fn path_of(home: &Path, id: &str) -> PathBuf {
    dir(home).join(format!("{id}.jsonl"))
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A new id: 12 hex digits, unlikely to repeat (time, process, a counter).
pub fn new_id() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!("{nanos}:{}:{n}", std::process::id());
    crate::sha256::hex(&crate::sha256::digest(seed.as_bytes()))[..12].to_string()
}

pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The first line of a prompt, cleaned and bounded: the session's title.
pub fn title_of(prompt: &str, redactor: &Redactor) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = crate::util::one_line(&redactor.redact(line.trim()));
    let mut title: String = line.chars().take(MAX_TITLE).collect();
    if line.chars().count() > MAX_TITLE {
        title.push('…');
    }
    title
}

/// Writes one session's lines as they come.
pub struct Recorder {
    file: File,
    id: String,
    written: u64,
    stopped: bool,
    redactor: Redactor,
}

impl Recorder {
    /// Starts a new session file, under `meta.id` when it is one (`new_id`), else a new id.
    pub fn create(home: &Path, mut meta: Meta, redactor: Redactor) -> anyhow::Result<Recorder> {
        let folder = dir(home);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        if !valid_id(&meta.id) {
            meta.id = new_id();
        }
        meta.title = redactor.redact(&meta.title);
        let path = path_of(home, &meta.id);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut recorder = Recorder { file, id: meta.id.clone(), written: 0, stopped: false, redactor };
        let line = json!({ "type": "session", "id": meta.id, "created": meta.created, "workspace": meta.workspace,
            "model": meta.model, "surface": meta.surface, "title": meta.title });
        recorder.write_line(&line);
        Ok(recorder)
    }

    /// Appends to an existing session (a continued conversation).
    pub fn resume(home: &Path, id: &str, redactor: Redactor) -> anyhow::Result<Recorder> {
        let path = path_of(home, id);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let written = file.metadata().map_or(0, |m| m.len());
        // A torn last line (a crash during a write) is closed, so the next line stands alone.
        let mut last = [0u8; 1];
        let torn = written > 0
            && std::io::Seek::seek(&mut file, std::io::SeekFrom::End(-1)).is_ok()
            && std::io::Read::read_exact(&mut file, &mut last).is_ok()
            && last[0] != b'\n';
        if torn {
            file.write_all(b"\n").with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(Recorder { file, id: id.to_string(), written: written + u64::from(torn), stopped: false, redactor })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Saves one message of the conversation, of the named subagent `agent` when given.
    pub fn append(&mut self, message: &Message, agent: Option<&str>) {
        if let Some(mut line) = encode(message, &self.redactor) {
            if let Some(agent) = agent {
                line["agent"] = json!(agent);
            }
            self.write_line(&line);
        }
    }

    fn write_line(&mut self, line: &Value) {
        if self.stopped {
            return;
        }
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        if self.written + bytes.len() as u64 > MAX_FILE_BYTES {
            self.stopped = true;
            log::warn!("session {} reached {} MiB; the rest of it is not saved", self.id, MAX_FILE_BYTES >> 20);
            return;
        }
        // One write for the whole line: a kill leaves whole lines and at most one torn last.
        match self.file.write_all(&bytes) {
            Ok(()) => self.written += bytes.len() as u64,
            Err(err) => {
                self.stopped = true;
                log::warn!("session {}: cannot save ({err}); the rest of it is not saved", self.id);
            }
        }
    }
}

/// A message as a line; none for a system message (never saved).
fn encode(message: &Message, redactor: &Redactor) -> Option<Value> {
    let r = |text: &str| redactor.redact(text);
    Some(match message {
        Message::System(_) => return None,
        Message::User(text) => json!({ "role": "user", "content": r(text) }),
        Message::UserParts(parts) => json!({ "role": "user", "content": r(&crate::provider::Part::text_of(parts)) }),
        Message::Assistant { text, calls } => {
            let calls: Vec<Value> =
                calls.iter().map(|c| json!({ "id": c.id, "name": c.name, "arguments": r(&c.arguments) })).collect();
            json!({ "role": "assistant", "content": r(text), "tool_calls": calls })
        }
        Message::Tool { call_id, content } => json!({ "role": "tool", "tool_call_id": call_id, "content": r(content) }),
    })
}

fn decode(line: &Value) -> Option<Message> {
    let text = |key: &str| line.get(key).and_then(Value::as_str).map(str::to_string);
    match line.get("role").and_then(Value::as_str)? {
        "user" => Some(Message::User(text("content")?)),
        "assistant" => {
            let calls = line.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let calls = calls
                .iter()
                .filter_map(|c| {
                    let field = |key: &str| c.get(key).and_then(Value::as_str).map(str::to_string);
                    Some(ToolCall { id: field("id")?, name: field("name")?, arguments: field("arguments")? })
                })
                .collect();
            Some(Message::Assistant { text: text("content").unwrap_or_default(), calls })
        }
        "tool" => Some(Message::Tool { call_id: text("tool_call_id")?, content: text("content")? }),
        _ => None,
    }
}

fn meta_of(line: &Value) -> Option<Meta> {
    if line.get("type").and_then(Value::as_str) != Some("session") {
        return None;
    }
    let text = |key: &str| line.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    Some(Meta {
        id: text("id"),
        created: line.get("created").and_then(Value::as_u64).unwrap_or(0),
        workspace: text("workspace"),
        model: text("model"),
        surface: text("surface"),
        title: text("title"),
    })
}

/// A session read back.
pub struct Loaded {
    pub meta: Meta,
    pub messages: Vec<Message>,
    /// The conversations of the named subagents, by name.
    pub children: std::collections::BTreeMap<String, Vec<Message>>,
    /// Lines that could not be read (a torn last line, say), each a sentence.
    pub warnings: Vec<String>,
}

/// Reads session `id` whole.
pub fn load(home: &Path, id: &str) -> anyhow::Result<Loaded> {
    let path = path_of(home, id);
    let file = File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    let (meta, all, warnings) = read(BufReader::new(file), id)?;
    let mut messages = Vec::new();
    let mut children: std::collections::BTreeMap<String, Vec<Message>> = Default::default();
    for (agent, message) in all {
        match agent {
            None => messages.push(message),
            Some(name) => children.entry(name).or_default().push(message),
        }
    }
    Ok(Loaded { meta, messages, children, warnings })
}

/// The messages of a session file, each with the named subagent it belongs to (`None`: the
/// main conversation).
#[allow(clippy::type_complexity)]
pub(crate) fn read(
    reader: impl BufRead,
    id: &str,
) -> anyhow::Result<(Meta, Vec<(Option<String>, Message)>, Vec<String>)> {
    let mut lines = reader.split(b'\n').enumerate();
    let first = lines.next().map(|(_, l)| l).transpose()?.unwrap_or_default();
    let Some(meta) = serde_json::from_slice::<Value>(&first).ok().as_ref().and_then(meta_of) else {
        bail!("session {id} has no readable first line; it is not a nod session file");
    };
    let (mut messages, mut warnings) = (Vec::new(), Vec::new());
    for (n, line) in lines {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value = serde_json::from_slice::<Value>(&line).ok();
        let agent = value.as_ref().and_then(|v| v.get("agent")).and_then(Value::as_str).map(str::to_string);
        match value.as_ref().and_then(decode) {
            Some(message) => messages.push((agent, message)),
            None => warnings.push(format!("session {id}: line {} could not be read and was skipped", n + 1)),
        }
    }
    Ok((meta, messages, warnings))
}

/// Whether the last turn of `messages` ended (with a model message that called nothing);
/// an empty conversation has nothing to close.
pub fn ended(messages: &[Message]) -> bool {
    messages.is_empty() || matches!(messages.last(), Some(Message::Assistant { calls, .. }) if calls.is_empty())
}

/// The conversation as the model gets it when it goes on: valid (no tool call without its
/// result, a turn that did not end closed) and within `MAX_CONTEXT_BYTES` (the oldest tool
/// results elided first).
pub fn for_model(messages: Vec<Message>) -> Vec<Message> {
    // A turn ended with a model message that called nothing; anything else was cut short.
    let ended = ended(&messages);
    let mut messages = crate::agent::keep_answered(messages);
    if !ended {
        messages.push(Message::Assistant { text: UNFINISHED.into(), calls: Vec::new() });
    }
    let size = Message::size;
    let mut total: usize = messages.iter().map(size).sum();
    for message in messages.iter_mut() {
        if total <= MAX_CONTEXT_BYTES {
            break;
        }
        if let Message::Tool { content, .. } = message {
            let notice = format!(
                "[elided: a tool result of {} bytes, to keep the saved session within its bound]",
                content.len()
            );
            total = total - content.len() + notice.len();
            *content = notice;
        }
    }
    messages
}

/// The session whose id starts with `prefix`, if exactly one does.
pub fn resolve(home: &Path, prefix: &str) -> anyhow::Result<String> {
    if !valid_id(prefix) {
        bail!("{prefix:?} is not a session id (hex digits, as nod sessions lists them)");
    }
    let ids: Vec<String> = ids(home).into_iter().filter(|id| id.starts_with(&prefix.to_ascii_lowercase())).collect();
    match ids.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!("no saved session {prefix}; see nod sessions list"),
        several => bail!("{} sessions start with {prefix}: {}; give more of the id", several.len(), several.join(", ")),
    }
}

fn ids(home: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir(home)) else { return Vec::new() };
    let names = entries.flatten().filter_map(|e| e.file_name().into_string().ok());
    names.filter_map(|n| n.strip_suffix(".jsonl").map(str::to_string)).filter(|id| valid_id(id)).collect()
}

fn updated_of(path: &Path) -> u64 {
    let modified = fs::metadata(path).and_then(|m| m.modified()).ok();
    modified.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs())
}

/// Every saved session (metadata, last write, message count), the most recent first.
pub fn list(home: &Path) -> Vec<Summary> {
    let mut found: Vec<(u64, String)> = ids(home).into_iter().map(|id| (updated_of(&path_of(home, &id)), id)).collect();
    found.sort_by(|a, b| b.cmp(a));
    found
        .into_iter()
        .take(MAX_LISTED)
        .filter_map(|(updated, id)| {
            let file = File::open(path_of(home, &id)).ok()?;
            let mut lines = BufReader::new(file).split(b'\n');
            let first = lines.next()?.ok()?;
            let meta = meta_of(&serde_json::from_slice(&first).ok()?)?;
            let messages = lines.filter(|l| l.as_ref().is_ok_and(|l| !l.is_empty())).count();
            Some(Summary { meta, updated, messages })
        })
        .collect()
}

/// The most recent session of `workspace`, if any.
pub fn latest(home: &Path, workspace: &str) -> Option<String> {
    let mut found: Vec<(u64, String)> = ids(home).into_iter().map(|id| (updated_of(&path_of(home, &id)), id)).collect();
    found.sort_by(|a, b| b.cmp(a));
    found.into_iter().map(|(_, id)| id).find(|id| {
        let Ok(file) = File::open(path_of(home, id)) else { return false };
        let first = BufReader::new(file).split(b'\n').next().and_then(Result::ok).unwrap_or_default();
        serde_json::from_slice(&first).ok().as_ref().and_then(meta_of).is_some_and(|m| m.workspace == workspace)
    })
}

pub fn remove(home: &Path, id: &str) -> anyhow::Result<()> {
    let path = path_of(home, id);
    fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))
}

/// Removes the sessions last written more than `age` ago; returns their ids.
pub fn prune(home: &Path, age: Duration) -> anyhow::Result<Vec<String>> {
    let cutoff = now().saturating_sub(age.as_secs());
    let mut removed = Vec::new();
    for id in ids(home) {
        if updated_of(&path_of(home, &id)) < cutoff {
            remove(home, &id)?;
            removed.push(id);
        }
    }
    removed.sort();
    Ok(removed)
}

/// `30d`, `12h`, `90m`, `45s` (or a bare number of days) as a duration.
pub fn parse_age(text: &str) -> Option<Duration> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "d"),
    };
    let n: u64 = number.parse().ok()?;
    let seconds = match unit {
        "d" => n.checked_mul(86_400)?,
        "h" => n.checked_mul(3600)?,
        "m" => n.checked_mul(60)?,
        "s" => n,
        _ => return None,
    };
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "mcp_fx_echo".into(), arguments: "{}".into() }
    }

    #[test]
    fn lines_round_trip_and_a_torn_last_line_is_skipped() {
        let redactor = Redactor::default();
        let messages = vec![
            Message::User("hi".into()),
            Message::Assistant { text: String::new(), calls: vec![call("c1")] },
            Message::Tool { call_id: "c1".into(), content: "out".into() },
            Message::Assistant { text: "done".into(), calls: Vec::new() },
        ];
        let mut text = json!({ "type": "session", "id": "ab", "created": 1, "workspace": "/w", "model": "m",
            "surface": "ask", "title": "hi" })
        .to_string();
        for m in &messages {
            text.push('\n');
            text.push_str(&encode(m, &redactor).unwrap().to_string());
        }
        let main = |all: Vec<(Option<String>, Message)>| -> Vec<Message> { all.into_iter().map(|(_, m)| m).collect() };
        let (meta, back, warnings) = read(text.as_bytes(), "ab").unwrap();
        assert_eq!((meta.workspace.as_str(), main(back), warnings.len()), ("/w", messages.clone(), 0));
        let torn = format!("{text}\n{{\"role\":\"user\",\"cont");
        let (_, back, warnings) = read(torn.as_bytes(), "ab").unwrap();
        assert_eq!(main(back), messages);
        assert_eq!(warnings, ["session ab: line 6 could not be read and was skipped"]);
        assert!(read("not json\n".as_bytes(), "ab").is_err());
    }

    #[test]
    fn a_conversation_that_stopped_mid_turn_goes_back_valid_and_bounded() {
        let stopped = vec![
            Message::User("go".into()),
            Message::Assistant { text: String::new(), calls: vec![call("c1"), call("c2")] },
            Message::Tool { call_id: "c1".into(), content: "one".into() },
        ];
        let back = for_model(stopped);
        assert_eq!(back.len(), 4);
        assert_eq!(back[1], Message::Assistant { text: String::new(), calls: vec![call("c1")] }, "c2 had no result");
        assert_eq!(back[3], Message::Assistant { text: UNFINISHED.into(), calls: Vec::new() });
        let big = "x".repeat(MAX_CONTEXT_BYTES / 2 + 10);
        let mut long = Vec::new();
        for i in 0..3 {
            long.push(Message::User(format!("q{i}")));
            long.push(Message::Assistant { text: String::new(), calls: vec![call(&format!("c{i}"))] });
            long.push(Message::Tool { call_id: format!("c{i}"), content: big.clone() });
            long.push(Message::Assistant { text: format!("a{i}"), calls: Vec::new() });
        }
        let back = for_model(long);
        let Message::Tool { content, .. } = &back[2] else { panic!() };
        assert!(content.starts_with("[elided: a tool result of"), "the oldest goes first");
        let Message::Tool { content, .. } = &back[6] else { panic!() };
        assert!(content.starts_with("[elided"), "{}", &content[..20]);
        let Message::Tool { content, .. } = &back[10] else { panic!() };
        assert_eq!(content, &big, "the newest stays");
    }

    #[test]
    fn ages_read_as_a_person_writes_them() {
        assert_eq!(parse_age("30d"), Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Some(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("7"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("3w"), None);
        assert_eq!(parse_age("d"), None);
    }
}
