//! `nod sessions`: the saved conversations (`saved`): list, show (terminal-safe, tool calls
//! summarised), rm, prune.

use serde_json::{Value, json};

use super::failure::{Kind, fail};
use super::{Exit, print, print_json};
use crate::cli::Sessions as Action;
use crate::provider::Message;
use crate::saved;
use crate::util::terminal_safe;

/// The longest tool result or argument text `show` prints of one message.
const SHOWN: usize = 400;

pub fn run(action: Action, json: bool) -> anyhow::Result<Exit> {
    let home = crate::config::home()?;
    match action {
        Action::List => list(&home, json),
        Action::Show(prefix) => {
            let id = resolve(&home, &prefix)?;
            show(&home, &id, json)
        }
        Action::Remove(prefix) => {
            let id = resolve(&home, &prefix)?;
            saved::remove(&home, &id)?;
            if json {
                print_json(&json!({ "removed": [id] }))?;
            } else {
                print(&format!("removed session {id}\n"))?;
            }
            Ok(Exit::Ok)
        }
        Action::Prune(age) => {
            let removed = saved::prune(&home, age)?;
            if json {
                print_json(&json!({ "removed": removed }))?;
            } else {
                let n = removed.len();
                print(&format!("removed {n} session{}\n", if n == 1 { "" } else { "s" }))?;
            }
            Ok(Exit::Ok)
        }
    }
}

fn resolve(home: &std::path::Path, prefix: &str) -> anyhow::Result<String> {
    saved::resolve(home, prefix).map_err(|err| fail(Kind::NotFound, format!("{err:#}")))
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `3m`, `5h`, `2d`: how long ago.
fn age(at: u64) -> String {
    let secs = now().saturating_sub(at);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn list(home: &std::path::Path, json: bool) -> anyhow::Result<Exit> {
    let found = saved::list(home);
    if json {
        let all: Vec<Value> = found
            .iter()
            .map(|s| {
                json!({ "id": s.meta.id, "created": s.meta.created, "updated": s.updated, "workspace": s.meta.workspace,
                    "surface": s.meta.surface, "model": s.meta.model, "title": s.meta.title, "messages": s.messages })
            })
            .collect();
        print_json(&json!({ "sessions": all }))?;
        return Ok(Exit::Ok);
    }
    if found.is_empty() {
        print("no saved sessions (nod ask saves each conversation; see nod sessions --help)\n")?;
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    for s in &found {
        out.push_str(&format!(
            "{}  {:>4}  {:5}  {:>4} msg  {}  {}\n",
            s.meta.id,
            age(s.updated),
            terminal_safe(&s.meta.surface),
            s.messages,
            terminal_safe(&s.meta.workspace),
            terminal_safe(&s.meta.title),
        ));
    }
    print(&out)?;
    Ok(Exit::Ok)
}

fn show(home: &std::path::Path, id: &str, json: bool) -> anyhow::Result<Exit> {
    let loaded = saved::load(home, id)?;
    for warning in &loaded.warnings {
        eprintln!("nod: {warning}");
    }
    let meta = &loaded.meta;
    if json {
        let messages: Vec<Value> = loaded.messages.iter().map(message_json).collect();
        print_json(
            &json!({ "id": meta.id, "created": meta.created, "workspace": meta.workspace, "surface": meta.surface,
            "model": meta.model, "title": meta.title, "messages": messages }),
        )?;
        return Ok(Exit::Ok);
    }
    let mut out = format!(
        "session {} · {} · {} · {} · started {} ago\n",
        meta.id,
        terminal_safe(&meta.surface),
        terminal_safe(&meta.model),
        terminal_safe(&meta.workspace),
        age(meta.created)
    );
    for message in &loaded.messages {
        match message {
            Message::System(_) => {}
            Message::User(text) => out.push_str(&format!("\n> {}\n", terminal_safe(text).replace('\n', "\n  "))),
            Message::UserParts(parts) => {
                let text = crate::provider::Part::text_of(parts);
                out.push_str(&format!("\n> {}\n", terminal_safe(&text).replace('\n', "\n  ")));
            }
            Message::Assistant { text, calls } => {
                if !text.is_empty() {
                    out.push_str(&format!("\n{}\n", terminal_safe(text)));
                }
                for call in calls {
                    out.push_str(&format!(
                        "● {} {}\n",
                        terminal_safe(&call.name),
                        terminal_safe(&short(&call.arguments))
                    ));
                }
            }
            Message::Tool { content, .. } => {
                out.push_str(&format!("  ⎿ {} bytes: {}\n", content.len(), terminal_safe(&short(content))));
            }
        }
    }
    print(&out)?;
    Ok(Exit::Ok)
}

/// One line of at most `SHOWN` characters.
fn short(text: &str) -> String {
    let line = crate::util::one_line(text);
    if line.chars().count() <= SHOWN {
        return line;
    }
    let mut cut: String = line.chars().take(SHOWN).collect();
    cut.push('…');
    cut
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::System(text) => json!({ "role": "system", "content": text }),
        Message::User(text) => json!({ "role": "user", "content": text }),
        Message::UserParts(parts) => json!({ "role": "user", "content": crate::provider::Part::text_of(parts) }),
        Message::Assistant { text, calls } => {
            let calls: Vec<Value> =
                calls.iter().map(|c| json!({ "id": c.id, "name": c.name, "arguments": c.arguments })).collect();
            json!({ "role": "assistant", "content": text, "tool_calls": calls })
        }
        Message::Tool { call_id, content } => json!({ "role": "tool", "tool_call_id": call_id, "content": content }),
    }
}
