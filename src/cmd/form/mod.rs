//! Asking a person, the same way on every surface: an approval, an elicitation form field by
//! field, and consent to open a URL. `nod mcp` asks on stdin and stderr, `nod ask
//! --prompt-permissions` on /dev/tty, the shell through its line editor; each is a
//! `Prompter`.
//!
//! A form asks each field with its type, choices, default and whether it is required (an
//! enum or a `oneOf` of consts as numbered choices, a multi-select as comma-separated
//! numbers, a boolean as y/n, a field that looks secret without echo), checks each answer
//! against the field's schema and asks again, checks the whole form against the requested
//! schema, shows a summary and asks accept, decline or cancel. Ctrl-D declines the form;
//! Ctrl-C cancels it (and the caller ends what it was doing). A URL is offered only when it
//! is https, or http to this machine; nod never fetches it.
//!
//! `term` holds the terminal side: `Term`, `FdLines`, `NoEcho`.

use serde_json::{Map, Value, json};

use crate::agent::{Answer, Approval};
use crate::session::elicit::InputRequired;
use crate::util::{one_line, terminal_safe};

mod term;

pub use term::{FdLines, NoEcho, Term};

/// What a person typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Line(String),
    /// End of input: Ctrl-D on an empty line.
    End,
    /// Ctrl-C.
    Interrupted,
}

/// A line-oriented conversation with a person.
pub trait Prompter {
    fn say(&mut self, text: &str);
    /// One line, without its newline.
    fn line(&mut self, prompt: &str) -> Reply;
    /// One line read without echo.
    fn hidden(&mut self, prompt: &str) -> Reply {
        self.line(prompt)
    }
}

/// Ctrl-C at a question: the caller answers "cancel" (or "no") and stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted;

/// Server text on one line, safe for a terminal.
fn shown(text: &str) -> String {
    terminal_safe(&one_line(text)).into_owned()
}

/// The label and the arguments of an approval: every argument on a line of its own, each
/// value bounded (saying how much was cut), and every character that shows as nothing (blank
/// glyphs, invisible and bidi characters, long runs of spaces) written out, so no argument can
/// hide behind another and nothing is approved that the person could not see.
fn describe(io: &mut dyn Prompter, request: &Approval) {
    let mut label = shown(&request.tool);
    if let Some(server) = &request.server {
        match &request.original {
            Some(tool) => label.push_str(&format!("  (server {}, tool {})", shown(server), shown(tool))),
            None => label.push_str(&format!("  (server {})", shown(server))),
        }
    }
    io.say(&format!("  {label}\n"));
    if let Some(agent) = &request.agent {
        io.say(&format!("  asked by subagent {}\n", shown(agent)));
    }
    match &request.arguments {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                io.say(&format!("  {}: {}\n", visible(key, 64), argument(value)));
            }
        }
        Value::Object(_) => io.say("  (no arguments)\n"),
        other => io.say(&format!("  {}\n", argument(other))),
    }
}

/// One argument's value as shown in an approval: strings as they read, anything else as JSON,
/// at most `VALUE_CHARS` characters with what was left out counted.
fn argument(value: &Value) -> String {
    const VALUE_CHARS: usize = 400;
    let text = match value {
        Value::String(text) => format!("\"{}\"", visible(text, usize::MAX)),
        other => visible(&other.to_string(), usize::MAX),
    };
    let total = text.chars().count();
    if total <= VALUE_CHARS {
        return text;
    }
    let head: String = text.chars().take(VALUE_CHARS).collect();
    format!("{head} … ({} more characters not shown)", total - VALUE_CHARS)
}

/// `text` on one line with every character that shows as nothing written out as `\u{…}`, and
/// runs of more than 8 spaces or newlines counted; at most `max` characters of the original.
pub(crate) fn visible(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut chars = text.chars().take(max).peekable();
    while let Some(c) = chars.next() {
        if c == ' ' || c == '\n' {
            let mut run = 1;
            while chars.peek() == Some(&c) {
                chars.next();
                run += 1;
            }
            let name = if c == ' ' { "spaces" } else { "newlines" };
            match (c, run) {
                (' ', n) if n <= 8 => out.push_str(&" ".repeat(n)),
                ('\n', 1) => out.push_str("\\n"),
                (_, n) => out.push_str(&format!("⟨{n} {name}⟩")),
            }
        } else if blank(c) {
            out.push_str(&format!("\\u{{{:04X}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters a terminal shows as nothing, or that move or reorder what it shows.
fn blank(c: char) -> bool {
    c.is_control()
        || c.is_whitespace()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}' | '\u{180E}'
            | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{2800}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{E0000}'..='\u{E007F}')
}

/// What "for this session" covers: one tool, or one server's resources.
fn scope(request: &Approval) -> String {
    match (&request.server, request.tool.as_str()) {
        (Some(server), crate::agent::builtin::READ_RESOURCE) => format!("reading {server}'s resources"),
        (Some(server), crate::agent::SAMPLING) => format!("sampling by {server}"),
        (Some(_), _) => "this MCP tool".to_string(),
        (None, tool) => tool.to_string(),
    }
}

/// The one approval question, for the shell and `nod ask --prompt-permissions` alike (nod(1)
/// PERMISSIONS): y runs the call once, a allows it for the session (what "it" covers is said),
/// n refuses it, and text after n goes to the model as a note. 1, 2 and 3 are taken too.
/// Asked again until it is one of them; end of input refuses, Ctrl-C cancels the turn.
pub fn approve(io: &mut dyn Prompter, request: &Approval) -> Answer {
    io.say("Allow this call?\n");
    describe(io, request);
    let prompt =
        format!("[y] once  [a] {} for this session  [n] no (text after n goes to the model) > ", scope(request));
    loop {
        let line = match io.line(&prompt) {
            Reply::Line(line) => line,
            Reply::End => return Answer::Deny(None),
            Reply::Interrupted => return Answer::Cancel,
        };
        let line = line.trim();
        let (choice, note) = line.split_at(line.find(char::is_whitespace).unwrap_or(line.len()));
        let note = Some(note.trim().to_string()).filter(|n| !n.is_empty());
        match choice.to_ascii_lowercase().as_str() {
            "y" | "yes" | "1" => {
                if let Some(note) = note {
                    io.say(&format!("  (a note goes with a refusal; ignored: {})\n", shown(&note)));
                }
                return Answer::Once;
            }
            "a" | "always" | "2" => return Answer::Session,
            "n" | "no" | "3" => return Answer::Deny(note),
            _ => io.say("  answer y, a or n\n"),
        }
    }
}

/// Collects an elicitation: a form, or consent to a URL. The answer for the server, or
/// `Interrupted` (answer "cancel" then).
pub fn elicit(io: &mut dyn Prompter, request: &InputRequired) -> Result<Value, Interrupted> {
    let message: String = shown(&request.message).chars().take(2048).collect();
    if request.mode == "url" {
        return url_consent(io, request, &message);
    }
    io.say(&format!("MCP server '{}' asks: {message}\n", request.server));
    let empty = json!({ "type": "object" });
    let schema = request.requested_schema.as_ref().unwrap_or(&empty);
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if !properties.is_empty() {
        io.say("  answer each field; Enter takes the value in brackets, Ctrl-D declines\n");
    }
    let mut content = Map::new();
    let mut todo: Vec<String> = properties.keys().cloned().collect();
    let mut fits = false;
    for _round in 0..3 {
        for name in std::mem::take(&mut todo) {
            let field = Field { name: &name, schema: &properties[&name], required: required.contains(&name.as_str()) };
            match field.ask(io)? {
                Asked::Value(value) => {
                    content.insert(name.clone(), value);
                }
                Asked::Skip => {
                    content.remove(&name);
                }
                Asked::End => return Ok(json!({ "action": "decline" })),
            }
        }
        match crate::session::schema::check_instance(schema, &Value::Object(content.clone())) {
            Ok(()) => {
                fits = true;
                break;
            }
            Err((field, why)) if properties.contains_key(&field) => {
                io.say(&format!("  {}: {}; again\n", shown(&field), terminal_safe(&why)));
                todo.push(field);
            }
            Err((field, why)) => {
                io.say(&format!("  the answer does not fit the form ({}: {}); declined\n", shown(&field), shown(&why)));
                return Ok(json!({ "action": "decline" }));
            }
        }
    }
    if !fits {
        io.say("  the answer still does not fit the form; declined\n");
        return Ok(json!({ "action": "decline" }));
    }
    for (name, value) in &content {
        let value = match value {
            _ if sensitive(name, &properties[name]) => "(hidden)".to_string(),
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        io.say(&format!("  {} = {}\n", shown(name), shown(&value)));
    }
    loop {
        match io.line("[a] accept (Enter)  [d] decline  [c] cancel > ") {
            Reply::Line(answer) => match answer.trim().to_ascii_lowercase().as_str() {
                "" | "a" | "accept" => return Ok(json!({ "action": "accept", "content": content })),
                "d" | "decline" => return Ok(json!({ "action": "decline" })),
                "c" | "cancel" => return Ok(json!({ "action": "cancel" })),
                _ => io.say("  a, d or c\n"),
            },
            Reply::End => return Ok(json!({ "action": "decline" })),
            Reply::Interrupted => return Err(Interrupted),
        }
    }
}

enum Asked {
    Value(Value),
    /// An optional field left empty.
    Skip,
    /// Ctrl-D: the form is declined.
    End,
}

struct Field<'a> {
    name: &'a str,
    schema: &'a Value,
    required: bool,
}

impl Field<'_> {
    /// Asks until the answer parses and fits the field's schema.
    fn ask(&self, io: &mut dyn Prompter) -> Result<Asked, Interrupted> {
        let text = |key: &str| self.schema.get(key).and_then(Value::as_str);
        let label = shown(text("title").unwrap_or(self.name));
        if let Some(description) = text("description") {
            io.say(&format!("  {}\n", shown(description)));
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
        // A default as the person would type it: a choice by its title (several comma-joined),
        // a boolean as y or n, text as it is; and said to be what Enter takes.
        let title_of = |value: &Value| {
            choices.iter().find(|(v, _)| v == value).map(|(_, t)| shown(t)).unwrap_or_else(|| match value {
                Value::String(s) => shown(s),
                other => shown(&other.to_string()),
            })
        };
        let default = self.schema.get("default").map(|d| match d {
            Value::Bool(true) => "y".to_string(),
            Value::Bool(false) => "n".to_string(),
            Value::Array(items) => items.iter().map(title_of).collect::<Vec<_>>().join(", "),
            other => title_of(other),
        });
        let sensitive = sensitive(self.name, self.schema);
        let need = if self.required { " (required)" } else { "" };
        let brackets = default.as_ref().map(|d| format!(" [Enter: {d}]")).unwrap_or_default();
        let prompt = format!("  {label}{hint}{need}{brackets}: ");
        loop {
            let reply = if sensitive { io.hidden(&prompt) } else { io.line(&prompt) };
            let line = match reply {
                Reply::Line(line) => line,
                Reply::End => return Ok(Asked::End),
                Reply::Interrupted => return Err(Interrupted),
            };
            if line.trim().is_empty() {
                match self.schema.get("default") {
                    Some(default) => return Ok(Asked::Value(default.clone())),
                    None if !self.required => return Ok(Asked::Skip),
                    None => {
                        io.say(&format!("  {label} is required\n"));
                        continue;
                    }
                }
            }
            let value = match parse(&line, kind, &choices, many) {
                Ok(value) => value,
                Err(why) => {
                    io.say(&format!("  {why}; again\n"));
                    continue;
                }
            };
            let one = json!({ "type": "object", "properties": { self.name: self.schema } });
            match crate::session::schema::check_instance(&one, &json!({ self.name: value })) {
                Ok(()) => return Ok(Asked::Value(value)),
                Err((_, why)) => io.say(&format!("  {}; again\n", shown(&why))),
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
        "array" => Ok(Value::Array(word.split(',').map(|s| Value::String(s.trim().to_string())).collect())),
        // A string keeps what was typed, spaces included.
        _ => Ok(Value::String(line.to_string())),
    }
}

/// A field to read without echo: a password format, writeOnly, or a name that says so.
/// (MCP forbids asking for secrets in a form; a server that does anyway is not echoed.)
fn sensitive(name: &str, schema: &Value) -> bool {
    let lower = name.to_ascii_lowercase();
    schema.get("format").and_then(Value::as_str) == Some("password")
        || schema.get("writeOnly").and_then(Value::as_bool) == Some(true)
        || ["password", "passwd", "secret", "token", "apikey", "api_key", "api-key"].iter().any(|w| lower.contains(w))
}

fn text_of(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

/// Consent to a URL (agent-reference 6.9): shown with its host, offered only when https or
/// http to this machine; `o` opens it with the browser (or prints it under
/// NOD_NO_OPEN_BROWSER), `p` prints it, `d` declines.
fn url_consent(io: &mut dyn Prompter, request: &InputRequired, message: &str) -> Result<Value, Interrupted> {
    let url = request.url.clone().unwrap_or_default();
    let scheme = crate::net::url::scheme(&url).unwrap_or_default();
    let host = crate::net::url::host(&url).unwrap_or_default();
    if !(scheme == "https" || scheme == "http" && crate::net::url::is_loopback(&host)) || url.contains(char::is_control)
    {
        io.say(&format!("! refused URL elicitation from '{}': scheme not allowed\n", shown(&request.server)));
        return Ok(json!({ "action": "decline" }));
    }
    // Credentials or a backslash in a URL let it name one host to a person and open another.
    let authority = crate::net::url::split(&url).map_or("", |(origin, _)| origin);
    if url.contains('\\') || authority.contains('@') {
        io.say(&format!(
            "! refused URL elicitation from '{}': the URL carries credentials or a backslash, which can hide the host it opens\n",
            shown(&request.server)
        ));
        return Ok(json!({ "action": "decline" }));
    }
    let punycode = if host.split('.').any(|label| label.starts_with("xn--")) {
        "  (an internationalised name: check it)"
    } else {
        ""
    };
    io.say(&format!(
        "MCP server '{}' asks you to open a URL: {message}\n  {}   (host: {}){punycode}\n",
        request.server,
        shown(&url),
        shown(&host)
    ));
    loop {
        match io.line("[o] open in browser  [p] print only  [d] decline > ") {
            Reply::Line(answer) => match answer.trim().to_ascii_lowercase().as_str() {
                "o" | "open" => {
                    if std::env::var_os("NOD_NO_OPEN_BROWSER").is_some() || super::browser::open(&url).is_err() {
                        io.say(&format!("{}\n", shown(&url)));
                    }
                    return Ok(json!({ "action": "accept" }));
                }
                "p" | "print" => {
                    io.say(&format!("{}\n", shown(&url)));
                    return Ok(json!({ "action": "accept" }));
                }
                "d" | "decline" => return Ok(json!({ "action": "decline" })),
                _ => io.say("  o, p or d\n"),
            },
            Reply::End => return Ok(json!({ "action": "decline" })),
            Reply::Interrupted => return Err(Interrupted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted person.
    struct Script {
        answers: Vec<Reply>,
        said: String,
    }

    impl Script {
        fn new(answers: &[&str]) -> Script {
            Script { answers: answers.iter().map(|a| Reply::Line(a.to_string())).collect(), said: String::new() }
        }
    }

    impl Prompter for Script {
        fn say(&mut self, text: &str) {
            self.said.push_str(text);
        }

        fn line(&mut self, prompt: &str) -> Reply {
            self.said.push_str(prompt);
            if self.answers.is_empty() { Reply::End } else { self.answers.remove(0) }
        }
    }

    #[test]
    fn an_approval_shows_every_argument_and_nothing_invisible() {
        let blank = "\u{2800}".repeat(2100);
        let request = Approval {
            tool: "mcp_fs_write\u{1b}]52;c;bad\u{7}".into(),
            server: Some("fs".into()),
            original: Some("write".into()),
            arguments: json!({ "padding": blank, "path": "/home/me/.ssh/authorized_keys", "text": "a\u{200B}b            \n" }),
            agent: None,
        };
        let mut io = Script::new(&["n"]);
        approve(&mut io, &request);
        let said = io.said;
        assert!(said.contains("  path: \"/home/me/.ssh/authorized_keys\"\n"), "{said}");
        assert!(said.contains("  padding: \"\\u{2800}\\u{2800}"), "{said}");
        assert!(said.contains("more characters not shown)"), "{said}");
        assert!(said.contains("  text: \"a\\u{200B}b⟨12 spaces⟩\\n\""), "{said}");
        assert!(!said.contains('\u{1b}') && !said.contains('\u{7}'), "{said:?}");
        assert!(said.contains("(server fs, tool write)"), "{said}");
    }

    fn request(schema: Value) -> InputRequired {
        InputRequired {
            server: "s".into(),
            mode: "form".into(),
            message: "Tell me".into(),
            requested_schema: Some(schema),
            url: None,
            elicitation_id: None,
        }
    }

    #[test]
    fn a_form_reasks_until_valid_shows_a_summary_then_accepts() {
        let schema = json!({ "type": "object", "properties": {
            "n": { "type": "integer", "minimum": 1, "maximum": 5 },
            "color": { "type": "string", "enum": ["red", "green"], "default": "green" },
            "ok": { "type": "boolean" },
        }, "required": ["n"] });
        let mut io = Script::new(&["x", "9", "3", "", "", "a"]);
        let answer = elicit(&mut io, &request(schema)).unwrap();
        assert_eq!(answer, json!({ "action": "accept", "content": { "n": 3, "color": "green" } }), "{}", io.said);
        assert!(io.said.contains("not a whole number; again"), "{}", io.said);
        assert!(io.said.contains("  n = 3\n  color = green\n"), "{}", io.said);
    }

    #[test]
    fn ctrl_d_declines_ctrl_c_interrupts_and_urls_need_a_safe_scheme() {
        let form = request(json!({ "type": "object", "properties": { "a": { "type": "string" } }, "required": ["a"] }));
        let mut io = Script::new(&[]);
        assert_eq!(elicit(&mut io, &form).unwrap()["action"], "decline");
        let mut io = Script { answers: vec![Reply::Interrupted], said: String::new() };
        assert_eq!(elicit(&mut io, &form), Err(Interrupted));
        let mut url = request(json!({}));
        url.mode = "url".into();
        url.url = Some("javascript:alert(1)".into());
        assert_eq!(elicit(&mut io, &url).unwrap()["action"], "decline");
        url.url = Some("http://example.com/pay".into());
        assert_eq!(elicit(&mut io, &url).unwrap()["action"], "decline", "plain http only to this machine");
        url.url = Some("https://xn--pple-43d.com/pay".into());
        let mut io = Script::new(&["p"]);
        assert_eq!(elicit(&mut io, &url).unwrap()["action"], "accept");
        assert!(io.said.contains("internationalised") && io.said.contains("(host: xn--pple-43d.com)"), "{}", io.said);
        // A URL whose host a person and a browser would read differently is refused.
        for hidden in ["https://evil.example\\@bank.example/login", "https://bank.example@evil.example/login"] {
            url.url = Some(hidden.into());
            let mut io = Script::new(&["o"]);
            assert_eq!(elicit(&mut io, &url).unwrap()["action"], "decline", "{hidden}");
            assert!(io.said.contains("credentials or a backslash") && !io.said.contains("host: bank"), "{}", io.said);
        }
    }

    #[test]
    fn defaults_are_shown_as_the_person_would_choose_them_and_enter_takes_them() {
        let form = request(json!({ "type": "object", "properties": {
            "hero": { "type": "string", "oneOf": [{ "const": "hero-1", "title": "Wonder Woman" }], "default": "hero-1" },
            "kit": { "type": "array", "items": { "type": "string", "enum": ["Guitar", "Drums"] }, "default": ["Guitar", "Drums"] },
        } }));
        let mut io = Script::new(&["", "", ""]);
        let answer = elicit(&mut io, &form).unwrap();
        assert!(io.said.contains("[Enter: Wonder Woman]") && io.said.contains("[Enter: Guitar, Drums]"), "{}", io.said);
        assert!(io.said.contains("[a] accept (Enter)"), "{}", io.said);
        assert_eq!(answer["content"], json!({ "hero": "hero-1", "kit": ["Guitar", "Drums"] }));
    }

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

    #[test]
    fn one_approval_question_takes_a_letter_or_a_number_and_a_note() {
        let request = Approval {
            tool: "mcp_fx_echo".into(),
            server: Some("fx".into()),
            original: Some("echo".into()),
            arguments: json!({ "message": "hi" }),
            agent: None,
        };
        let mut io = Script::new(&["maybe", "3 use the cached copy"]);
        assert_eq!(approve(&mut io, &request), Answer::Deny(Some("use the cached copy".into())));
        assert!(io.said.contains("answer y, a or n") && io.said.contains("(server fx, tool echo)"), "{}", io.said);
        assert!(io.said.contains("[y] once  [a] this MCP tool for this session  [n] no"), "{}", io.said);
        assert_eq!(approve(&mut Script::new(&["n too risky"]), &request), Answer::Deny(Some("too risky".into())));
        assert!(!io.said.contains("asked by subagent"), "{}", io.said);
        let child = Approval { agent: Some("notes".into()), ..request.clone() };
        let mut io = Script::new(&["1"]);
        assert_eq!(approve(&mut io, &child), Answer::Once);
        assert!(io.said.contains("asked by subagent notes"), "{}", io.said);
        assert_eq!(approve(&mut Script::new(&["2"]), &request), Answer::Session);
        assert_eq!(approve(&mut Script::new(&["1"]), &request), Answer::Once);
        let mut io = Script { answers: vec![Reply::Interrupted], said: String::new() };
        assert_eq!(approve(&mut io, &request), Answer::Cancel);
        assert_eq!(approve(&mut Script::new(&["a"]), &request), Answer::Session);
        assert_eq!(approve(&mut Script::new(&["what"]), &request), Answer::Deny(None));
    }
}
