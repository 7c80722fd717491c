//! Asking the person at the terminal what a server wants (elicitation), on stderr: a form
//! field by field (typed, the default in brackets, an enum as a numbered choice, a boolean
//! as y/n, a sensitive field read without echo), or consent to open a URL. The answer is
//! checked against the requested schema before it is sent; Ctrl-D declines, Ctrl-C ends
//! nod. Only std and libc: termios turns the echo off for a sensitive field.

use std::io::BufRead;

use crossbeam_channel::select;
use serde_json::{Map, Value, json};

use crate::session::elicit::InputRequired;
use crate::util::{Trigger, one_line, terminal_safe};

/// The answer to send, or None when Ctrl-C interrupted.
pub fn ask(input: &InputRequired, interrupt: &Trigger) -> Option<Value> {
    let said = terminal_safe(&one_line(&input.message)).into_owned();
    if input.mode == "url" {
        let url = terminal_safe(&one_line(input.url.as_deref().unwrap_or(""))).into_owned();
        eprintln!("nod: server {} asks you to open a URL: {said}\n  {url}", input.server);
        eprint!("open it yourself and continue? [y/N] ");
        return match read_line(false, interrupt)? {
            Some(line) if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") => {
                Some(json!({ "action": "accept" }))
            }
            _ => Some(json!({ "action": "decline" })),
        };
    }
    eprintln!("nod: server {} asks: {said}", input.server);
    eprintln!("nod: answer each field; Enter takes the value in brackets, Ctrl-D declines");
    let empty = json!({});
    let schema = input.requested_schema.as_ref().unwrap_or(&empty);
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut content = Map::new();
    let mut todo: Vec<String> = properties.keys().cloned().collect();
    for _round in 0..3 {
        for name in std::mem::take(&mut todo) {
            let field = Field { name: &name, schema: &properties[&name], required: required.contains(&name.as_str()) };
            match field.ask(interrupt)? {
                Asked::Value(value) => {
                    content.insert(name.clone(), value);
                }
                Asked::Skip => {
                    content.remove(&name);
                }
                Asked::End => {
                    eprintln!();
                    return Some(json!({ "action": "decline" }));
                }
            }
        }
        let answer = Value::Object(content.clone());
        match crate::session::schema::check_instance(schema, &answer) {
            Ok(()) => return Some(json!({ "action": "accept", "content": answer })),
            Err((field, why)) if properties.contains_key(&field) => {
                eprintln!("  {}: {}; again:", shown(&field), terminal_safe(&why));
                todo.push(field);
            }
            Err((field, why)) => {
                eprintln!("nod: the answer does not fit the form ({field}: {}); declined", terminal_safe(&why));
                return Some(json!({ "action": "decline" }));
            }
        }
    }
    eprintln!("nod: the answer still does not fit the form; declined");
    Some(json!({ "action": "decline" }))
}

enum Asked {
    Value(Value),
    /// An optional field left empty.
    Skip,
    /// Ctrl-D.
    End,
}

struct Field<'a> {
    name: &'a str,
    schema: &'a Value,
    required: bool,
}

impl Field<'_> {
    /// Asks until the input parses (or ends); None when interrupted.
    fn ask(&self, interrupt: &Trigger) -> Option<Asked> {
        let text = |key: &str| self.schema.get(key).and_then(Value::as_str);
        let label = shown(text("title").unwrap_or(self.name));
        if let Some(description) = text("description") {
            eprintln!("  {}", terminal_safe(&one_line(description)));
        }
        let choices = choices(self.schema);
        let kind = text("type").unwrap_or("string");
        let many = kind == "array";
        let mut hint = String::new();
        if !choices.is_empty() {
            let list: Vec<String> =
                choices.iter().enumerate().map(|(i, (_, title))| format!("{}) {}", i + 1, shown(title))).collect();
            hint = format!(": {}{}", list.join("  "), if many { " (numbers, comma-separated)" } else { "" });
        } else if kind == "boolean" {
            hint = " (y/n)".into();
        } else if kind != "string" {
            hint = format!(" ({kind})");
        }
        let default = self.schema.get("default").map(|d| match d {
            Value::Bool(b) => {
                if *b {
                    "y".to_string()
                } else {
                    "n".to_string()
                }
            }
            Value::String(s) => shown(s),
            other => shown(&other.to_string()),
        });
        let sensitive = sensitive(self.name, self.schema);
        let need = if self.required { " (required)" } else { "" };
        let brackets = default.as_ref().map(|d| format!(" [{d}]")).unwrap_or_default();
        loop {
            eprint!("  {label}{hint}{need}{brackets}: ");
            let Some(line) = read_line(sensitive, interrupt)? else { return Some(Asked::End) };
            if sensitive {
                eprintln!();
            }
            let line = line.trim_end_matches(['\n', '\r']);
            if line.trim().is_empty() {
                match self.schema.get("default") {
                    Some(default) => return Some(Asked::Value(default.clone())),
                    None if !self.required => return Some(Asked::Skip),
                    None => {
                        eprintln!("  {label} is required");
                        continue;
                    }
                }
            }
            match parse(line, kind, &choices, many) {
                Ok(value) => return Some(Asked::Value(value)),
                Err(why) => eprintln!("  {why}; again"),
            }
        }
    }
}

/// An enum's values with their titles: `enum` (with `enumNames`), `oneOf`/`anyOf` of
/// `const` with `title`, or the same under `items` for a multi-select.
fn choices(schema: &Value) -> Vec<(Value, String)> {
    let schema = if schema.get("type").and_then(Value::as_str) == Some("array") { &schema["items"] } else { schema };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let title = names.and_then(|n| n.get(i)).and_then(Value::as_str);
                (v.clone(), title.map_or_else(|| text_of(v), str::to_string))
            })
            .collect();
    }
    let options = schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Value::as_array);
    options
        .into_iter()
        .flatten()
        .filter_map(|o| {
            let value = o.get("const")?.clone();
            let title = o.get("title").and_then(Value::as_str).map_or_else(|| text_of(&value), str::to_string);
            Some((value, title))
        })
        .collect()
}

fn parse(line: &str, kind: &str, choices: &[(Value, String)], many: bool) -> Result<Value, String> {
    let word = line.trim();
    if !choices.is_empty() {
        let pick = |word: &str| -> Result<Value, String> {
            if let Ok(n) = word.parse::<usize>()
                && (1..=choices.len()).contains(&n)
            {
                return Ok(choices[n - 1].0.clone());
            }
            choices
                .iter()
                .find(|(value, title)| text_of(value) == word || title == word)
                .map(|(value, _)| value.clone())
                .ok_or_else(|| format!("choose a number from 1 to {}", choices.len()))
        };
        if many {
            return word
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(pick)
                .collect::<Result<_, _>>()
                .map(Value::Array);
        }
        return pick(word);
    }
    match kind {
        "boolean" => match word.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => Ok(Value::Bool(true)),
            "n" | "no" | "false" | "0" => Ok(Value::Bool(false)),
            _ => Err("answer y or n".into()),
        },
        "integer" => word.parse::<i64>().map(Value::from).map_err(|_| "not a whole number".into()),
        "number" => match word.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(json!(n)),
            _ => Err("not a number".into()),
        },
        // A string keeps what was typed, spaces included.
        _ => Ok(Value::String(line.to_string())),
    }
}

/// A field to read without echo: a password format, writeOnly, or a name that says so.
fn sensitive(name: &str, schema: &Value) -> bool {
    let lower = name.to_ascii_lowercase();
    schema.get("format").and_then(Value::as_str) == Some("password")
        || schema.get("writeOnly").and_then(Value::as_bool) == Some(true)
        || ["password", "passwd", "secret", "token", "apikey", "api_key", "api-key"].iter().any(|w| lower.contains(w))
}

fn text_of(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

/// Server text for the terminal: one line, safe.
fn shown(text: &str) -> String {
    terminal_safe(&one_line(text)).into_owned()
}

/// One line from stdin, or None at its end; the outer None is Ctrl-C. The read happens on a
/// thread so that Ctrl-C still ends the wait (the thread, blocked on stdin, ends with the
/// process); with `hidden` the terminal does not echo what is typed.
fn read_line(hidden: bool, interrupt: &Trigger) -> Option<Option<String>> {
    let _echo = hidden.then(NoEcho::start).flatten();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let reader = std::thread::Builder::new().name("nod-ask".into()).spawn(move || {
        let mut line = String::new();
        let read = match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        };
        let _ = tx.send(read);
    });
    if reader.is_err() {
        return Some(None);
    }
    select! {
        recv(rx) -> line => Some(line.unwrap_or(None)),
        recv(interrupt.receiver()) -> _ => None,
    }
}

/// The terminal's echo, off until dropped.
struct NoEcho {
    saved: libc::termios,
}

impl NoEcho {
    fn start() -> Option<NoEcho> {
        // SAFETY: tcgetattr and tcsetattr on stdin with a termios this function owns; a
        // failure leaves the terminal as it was.
        unsafe {
            let mut termios: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut termios) != 0 {
                return None;
            }
            let saved = termios;
            termios.c_lflag &= !libc::ECHO;
            (libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &termios) == 0).then_some(NoEcho { saved })
        }
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `start`.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_by_type_and_choice() {
        let colors = choices(&json!({"type": "string", "enum": ["red", "green"]}));
        assert_eq!(parse("2", "string", &colors, false), Ok(json!("green")));
        assert_eq!(parse("red", "string", &colors, false), Ok(json!("red")));
        assert!(parse("3", "string", &colors, false).is_err());
        let titled = choices(&json!({"type": "string", "oneOf": [{"const": "a", "title": "Alpha"}]}));
        assert_eq!(titled, [(json!("a"), "Alpha".to_string())]);
        let tags = choices(&json!({"type": "array", "items": {"enum": ["x", "y", "z"]}}));
        assert_eq!(parse("1, 3", "array", &tags, true), Ok(json!(["x", "z"])));
        assert_eq!(parse("y", "boolean", &[], false), Ok(json!(true)));
        assert_eq!(parse("42", "integer", &[], false), Ok(json!(42)));
        assert!(parse("4.5", "integer", &[], false).is_err());
        assert_eq!(parse(" two words ", "string", &[], false), Ok(json!(" two words ")));
        assert!(sensitive("apiToken", &json!({})) && sensitive("x", &json!({"format": "password"})));
        assert!(!sensitive("name", &json!({"type": "string"})));
    }
}
