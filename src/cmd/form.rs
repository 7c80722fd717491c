//! Asking a person on a terminal: an approval (`y` once, `a` for the session, `n` no), an
//! elicitation form field by field (typed, defaults shown, enums numbered, each answer and
//! then the whole form checked against the requested schema), and URL consent (only https,
//! or http to this machine; nod never fetches the URL). Shared by `nod ask
//! --prompt-permissions` (on /dev/tty) and the shell.

use serde_json::{Map, Value, json};

use crate::agent::{Answer, Approval, Elicited};
use crate::session::elicit::InputRequired;
use crate::util::{one_line, terminal_safe};

/// A line-oriented conversation with a person.
pub trait Prompter {
    fn say(&mut self, text: &str);
    /// One line without its newline; `None` at end of input or Ctrl-C.
    fn line(&mut self, prompt: &str) -> Option<String>;
}

/// `/dev/tty`, for `nod ask --prompt-permissions`.
pub struct Tty {
    input: std::io::BufReader<std::fs::File>,
    output: std::fs::File,
}

impl Tty {
    pub fn open() -> Option<Tty> {
        let output = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").ok()?;
        let input = std::io::BufReader::new(output.try_clone().ok()?);
        Some(Tty { input, output })
    }
}

impl Prompter for Tty {
    fn say(&mut self, text: &str) {
        use std::io::Write;
        let _ = self.output.write_all(text.as_bytes());
        let _ = self.output.flush();
    }

    fn line(&mut self, prompt: &str) -> Option<String> {
        use std::io::BufRead;
        self.say(prompt);
        let mut line = String::new();
        match self.input.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_string()),
        }
    }
}

/// `nod wants to run: <label>` and the y/a/n question (agent-reference 1.7).
pub fn approve(io: &mut dyn Prompter, request: &Approval) -> Answer {
    let mut label = request.tool.clone();
    if let (Some(server), Some(tool)) = (&request.server, &request.original) {
        label.push_str(&format!("  (server {server}, tool {})", terminal_safe(tool)));
    }
    io.say(&format!("nod wants to run: {label}\n"));
    let arguments = serde_json::to_string_pretty(&request.arguments).unwrap_or_default();
    let arguments = terminal_safe(&arguments);
    let shown: String = arguments.chars().take(2048).collect();
    io.say(&format!("{shown}\n"));
    match io.line("[y] once  [a] always this session  [n] deny > ").map(|l| l.trim().to_ascii_lowercase()) {
        Some(answer) if answer == "y" || answer == "yes" => Answer::Once,
        Some(answer) if answer == "a" => Answer::Session,
        Some(_) => Answer::Deny(None),
        None => Answer::Cancel,
    }
}

/// Collects an elicitation: a form, or consent to a URL.
pub fn elicit(io: &mut dyn Prompter, request: &InputRequired) -> Elicited {
    let message = terminal_safe(&request.message.chars().take(2048).collect::<String>()).into_owned();
    if request.mode == "url" {
        return url_consent(io, request, &message);
    }
    io.say(&format!("MCP server '{}' asks: {message}\n", request.server));
    let schema = request.requested_schema.clone().unwrap_or_else(|| json!({ "type": "object" }));
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut content = Map::new();
    for (name, property) in &properties {
        match field(io, name, property, required.contains(&name.as_str())) {
            Field::Value(value) => {
                content.insert(name.clone(), value);
            }
            Field::Skip => {}
            Field::Cancel => return Elicited::Answer(json!({ "action": "cancel" })),
        }
    }
    let content = Value::Object(content);
    if let Err((field, why)) = crate::session::schema::check_instance(&schema, &content) {
        io.say(&format!("  ✗ {field}: {why}\n"));
        return Elicited::Answer(json!({ "action": "decline" }));
    }
    for (name, value) in content.as_object().into_iter().flatten() {
        io.say(&format!("  {name} = {}\n", terminal_safe(&value.to_string())));
    }
    match io.line("[a] accept  [d] decline  [c] cancel > ").map(|l| l.trim().to_ascii_lowercase()) {
        Some(a) if a == "a" || a == "accept" || a.is_empty() => {
            Elicited::Answer(json!({ "action": "accept", "content": content }))
        }
        Some(d) if d == "d" || d == "decline" => Elicited::Answer(json!({ "action": "decline" })),
        _ => Elicited::Answer(json!({ "action": "cancel" })),
    }
}

enum Field {
    Value(Value),
    Skip,
    Cancel,
}

/// Asks one field until the answer fits its schema.
fn field(io: &mut dyn Prompter, name: &str, property: &Value, required: bool) -> Field {
    let kind = property.get("type").and_then(Value::as_str).unwrap_or("string");
    let choices: Vec<Value> = property
        .get("enum")
        .and_then(Value::as_array)
        .cloned()
        .or_else(|| {
            property
                .get("oneOf")
                .and_then(Value::as_array)
                .map(|o| o.iter().filter_map(|c| c.get("const").cloned()).collect())
        })
        .unwrap_or_default();
    let about = property
        .get("title")
        .or_else(|| property.get("description"))
        .and_then(Value::as_str)
        .map(|t| format!(" — {}", terminal_safe(&one_line(t))))
        .unwrap_or_default();
    let default = property.get("default");
    let mut header = format!("  {name} ({kind}{}){about}", if required { ", required" } else { "" });
    if let Some(default) = default {
        header.push_str(&format!(" [default: {}]", terminal_safe(&default.to_string())));
    }
    io.say(&format!("{header}\n"));
    for (i, choice) in choices.iter().enumerate() {
        io.say(&format!("    {}. {}\n", i + 1, terminal_safe(&choice.to_string())));
    }
    loop {
        let Some(answer) = io.line("  > ") else { return Field::Cancel };
        let answer = answer.trim();
        if answer.is_empty() {
            match default {
                Some(default) => return Field::Value(default.clone()),
                None if !required => return Field::Skip,
                None => {
                    io.say("  ✗ required\n");
                    continue;
                }
            }
        }
        let value = match parse(kind, answer, &choices) {
            Ok(value) => value,
            Err(why) => {
                io.say(&format!("  ✗ {why}\n"));
                continue;
            }
        };
        let one = json!({ "type": "object", "properties": { name: property } });
        match crate::session::schema::check_instance(&one, &json!({ name: value })) {
            Ok(()) => return Field::Value(value),
            Err((_, why)) => io.say(&format!("  ✗ {why}\n")),
        }
    }
}

fn parse(kind: &str, answer: &str, choices: &[Value]) -> Result<Value, String> {
    if !choices.is_empty() {
        if let Ok(n) = answer.parse::<usize>()
            && (1..=choices.len()).contains(&n)
        {
            return Ok(choices[n - 1].clone());
        }
        return choices
            .iter()
            .find(|c| match c {
                Value::String(s) => s == answer,
                other => serde_json::from_str::<Value>(answer).is_ok_and(|v| v == **other),
            })
            .cloned()
            .ok_or_else(|| format!("choose 1-{} or one of the values", choices.len()));
    }
    match kind {
        "integer" => answer.parse::<i64>().map(Value::from).map_err(|_| "a whole number".into()),
        "number" => answer
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| "a number".into()),
        "boolean" => match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("yes or no".into()),
        },
        "array" => Ok(Value::Array(answer.split(',').map(|s| Value::String(s.trim().to_string())).collect())),
        _ => Ok(Value::String(answer.to_string())),
    }
}

fn url_consent(io: &mut dyn Prompter, request: &InputRequired, message: &str) -> Elicited {
    let url = request.url.clone().unwrap_or_default();
    let scheme = crate::net::url::scheme(&url).unwrap_or_default();
    let host = crate::net::url::host(&url).unwrap_or_default();
    if !(scheme == "https" || scheme == "http" && crate::net::url::is_loopback(&host)) {
        io.say(&format!("! refused URL elicitation from '{}': scheme not allowed\n", request.server));
        return Elicited::Answer(json!({ "action": "decline" }));
    }
    let punycode = if host.split('.').any(|label| label.starts_with("xn--")) {
        "  (an internationalised name: check it)"
    } else {
        ""
    };
    io.say(&format!(
        "MCP server '{}' asks you to open a URL: {message}\n  {}   (host: {}){punycode}\n",
        request.server,
        terminal_safe(&url),
        terminal_safe(&host)
    ));
    match io.line("[o] open in browser  [p] print only  [d] decline > ").map(|l| l.trim().to_ascii_lowercase()) {
        Some(o) if o == "o" => {
            if std::env::var_os("NOD_NO_OPEN_BROWSER").is_some() || super::browser::open(&url).is_err() {
                io.say(&format!("{}\n", terminal_safe(&url)));
            }
            Elicited::Answer(json!({ "action": "accept" }))
        }
        Some(p) if p == "p" => {
            io.say(&format!("{}\n", terminal_safe(&url)));
            Elicited::Answer(json!({ "action": "accept" }))
        }
        Some(_) => Elicited::Answer(json!({ "action": "decline" })),
        None => Elicited::Answer(json!({ "action": "cancel" })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted person.
    struct Script {
        answers: Vec<&'static str>,
        said: String,
    }

    impl Prompter for Script {
        fn say(&mut self, text: &str) {
            self.said.push_str(text);
        }

        fn line(&mut self, prompt: &str) -> Option<String> {
            self.said.push_str(prompt);
            if self.answers.is_empty() { None } else { Some(self.answers.remove(0).to_string()) }
        }
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
    fn a_form_reasks_until_valid_then_accepts() {
        let schema = json!({ "type": "object", "properties": {
            "n": { "type": "integer", "minimum": 1, "maximum": 5 },
            "color": { "type": "string", "enum": ["red", "green"], "default": "green" },
            "ok": { "type": "boolean" },
        }, "required": ["n"] });
        let mut io = Script { answers: vec!["x", "9", "3", "", "", "a"], said: String::new() };
        match elicit(&mut io, &request(schema)) {
            Elicited::Answer(answer) => {
                assert_eq!(
                    answer,
                    json!({ "action": "accept", "content": { "n": 3, "color": "green" } }),
                    "{}",
                    io.said
                )
            }
            Elicited::Unanswerable => panic!(),
        }
        assert!(io.said.contains("✗ a whole number") && io.said.contains("✗"), "{}", io.said);
    }

    #[test]
    fn end_of_input_cancels_and_urls_need_a_safe_scheme() {
        let mut io = Script { answers: vec![], said: String::new() };
        let Elicited::Answer(answer) = elicit(
            &mut io,
            &request(json!({ "type": "object", "properties": { "a": { "type": "string" } }, "required": ["a"] })),
        ) else {
            panic!()
        };
        assert_eq!(answer["action"], "cancel");
        let mut url = request(json!({}));
        url.mode = "url".into();
        url.url = Some("javascript:alert(1)".into());
        let Elicited::Answer(answer) = elicit(&mut io, &url) else { panic!() };
        assert_eq!(answer["action"], "decline");
        url.url = Some("https://xn--pple-43d.com/pay".into());
        let mut io = Script { answers: vec!["p"], said: String::new() };
        let Elicited::Answer(answer) = elicit(&mut io, &url) else { panic!() };
        assert_eq!(answer["action"], "accept");
        assert!(io.said.contains("internationalised"));
    }
}
