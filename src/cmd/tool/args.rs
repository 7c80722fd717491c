//! Arguments without shell gymnastics: a JSON object given inline, read from stdin (`-`) or
//! from a file (`@FILE`, so no argument list limit applies), and `--arg NAME=VALUE` pairs
//! on top. For a tool a pair's value is JSON when it parses as JSON, else a string (as the
//! MCP Inspector's CLI does); for a prompt it is always a string.

use std::io::Read;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::cli::{Arguments, Source};
use crate::cmd::failure::{Kind, fail};

/// The text of a source: the word itself, all of stdin, or a file.
pub fn read_text(source: &Source, what: &str) -> anyhow::Result<String> {
    match source {
        Source::Inline(text) => Ok(text.clone()),
        Source::Stdin => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| fail(Kind::Usage, format!("cannot read {what} from stdin: {e}")))?;
            Ok(text)
        }
        Source::File(path) => std::fs::read_to_string(path)
            .map_err(|e| fail(Kind::Usage, format!("cannot read {what} from {}: {e}", path.display()))),
    }
}

/// A tool's arguments object: the object (default `{}`), then each pair.
pub fn tool_arguments(arguments: &Arguments) -> anyhow::Result<Value> {
    let mut object = match &arguments.object {
        Some(source) => object(&read_text(source, "the tool arguments")?, "tool arguments")?,
        None => Map::new(),
    };
    for (name, value) in &arguments.pairs {
        let value = serde_json::from_str::<Value>(value).unwrap_or_else(|_| Value::String(value.clone()));
        object.insert(name.clone(), value);
    }
    Ok(Value::Object(object))
}

/// A prompt's arguments: strings only. None when none were given.
pub fn prompt_arguments(arguments: &Arguments) -> anyhow::Result<Option<Value>> {
    let mut object = match &arguments.object {
        Some(source) => object(&read_text(source, "the prompt arguments")?, "prompt arguments")?,
        None if arguments.pairs.is_empty() => return Ok(None),
        None => Map::new(),
    };
    if let Some((key, _)) = object.iter().find(|(_, v)| !v.is_string()) {
        return Err(fail(
            Kind::Usage,
            format!("prompt arguments are strings; {key:?} is not (quote it, like {{\"{key}\": \"3\"}})"),
        ));
    }
    for (name, value) in &arguments.pairs {
        object.insert(name.clone(), Value::String(value.clone()));
    }
    Ok(Some(Value::Object(object)))
}

/// Parses `text` as a JSON object; `what` names it in the error.
pub fn object(text: &str, what: &str) -> anyhow::Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(not_an_object(what)),
        Err(err) => Err(not_json(text, what, &err)),
    }
}

/// Checks that `text` is one JSON object that a value could hold, and gives it back as its
/// text without the whitespace around it, not read into a value (`--jsonl`'s lines): it is
/// read through as `object` reads it, with the same errors (a number past f64, a lone
/// surrogate, nesting past serde_json's limit), but nothing is kept.
pub fn object_text<'a>(text: &'a str, what: &str) -> anyhow::Result<&'a str> {
    match serde_json::from_str::<Checked>(text) {
        Ok(Checked { object: true }) => Ok(text.trim_matches([' ', '\t', '\n', '\r'])),
        Ok(_) => Err(not_an_object(what)),
        Err(err) => Err(not_json(text, what, &err)),
    }
}

/// A JSON value read through and dropped (`object_text`); whether it was an object.
struct Checked {
    object: bool,
}

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked { object: false })
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked { object: false })
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked { object: false })
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked { object: false })
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked { object: false })
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked { object: false })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked { object: false })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked { object: true })
    }
}

fn not_an_object(what: &str) -> anyhow::Error {
    fail(Kind::Usage, format!("{what} must be a JSON object, like {{\"path\": \"/tmp\"}}"))
}

pub fn not_json(text: &str, what: &str, err: &serde_json::Error) -> anyhow::Error {
    // `message=hi` is one argument written as a pair: say how to pass it.
    let hint = match text.split_once('=') {
        Some((name, _)) if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || "_-".contains(c)) => {
            format!("; to pass one argument, use --arg {}", crate::util::one_line(text))
        }
        _ => String::new(),
    };
    fail(Kind::Usage, format!("{what} are not valid JSON: {err}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pairs_parse_as_json_when_they_can() {
        let arguments = Arguments {
            object: Some(Source::Inline(r#"{"a": 1, "keep": true}"#.into())),
            pairs: [("a", "2"), ("s", "hello"), ("q", "\"7\""), ("l", "[1,2]"), ("e", "")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .to_vec(),
        };
        assert_eq!(
            tool_arguments(&arguments).unwrap(),
            json!({"a": 2, "keep": true, "s": "hello", "q": "7", "l": [1, 2], "e": ""})
        );
        let prompt = Arguments { object: None, pairs: vec![("n".into(), "3".into())] };
        assert_eq!(prompt_arguments(&prompt).unwrap(), Some(json!({"n": "3"})));
        assert!(tool_arguments(&Arguments { object: Some(Source::Inline("[1]".into())), pairs: vec![] }).is_err());
        let pair = tool_arguments(&Arguments { object: Some(Source::Inline("message=hi".into())), pairs: vec![] });
        assert!(format!("{:#}", pair.unwrap_err()).contains("use --arg message=hi"));
    }

    #[test]
    fn an_object_as_text_is_the_object_as_written_and_fails_as_object_does() {
        let text = object_text(" {\"a\": [1, {}],  \"big\": 12345678901234567890123}\t", "tool arguments").unwrap();
        assert_eq!(text, "{\"a\": [1, {}],  \"big\": 12345678901234567890123}");
        let escapes = r#"{"s":"\u00e9\ud83d\ude00","n":-1.5e3,"t":true,"z":null}"#;
        assert_eq!(object_text(escapes, "x").unwrap(), escapes);
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(130), "]".repeat(130));
        for text in ["[1, 2]", "\"x\"", "3", "null", "{\"a\":", "{} {}", "message=hi", ""].into_iter().chain([
            r#"{"n":1e400}"#,
            r#"{"s":"\ud800"}"#,
            r#"{"\udc00":1}"#,
            deep.as_str(),
        ]) {
            let as_value = format!("{:#}", object(text, "tool arguments").unwrap_err());
            let as_text = format!("{:#}", object_text(text, "tool arguments").unwrap_err());
            assert_eq!(as_text, as_value, "{text:?}");
        }
    }
}
