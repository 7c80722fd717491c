//! The shape of a server's answer, checked before anyone uses it: a result that is not an
//! object, a `tools/call` result without a `content` array or with a non-boolean `isError`,
//! a prompt without `messages`, a read without `contents`. Such an answer is a protocol
//! error naming the method, never an empty success. Only the envelope is checked: what a
//! tool's content says, and whether it matches the tool's output schema, is the server's
//! business.

use serde_json::Value;

use crate::json::Member;
use crate::mcp::method;

/// Checks `result`, the answer to `method_name`.
pub fn check(method_name: &str, result: &Value) -> Result<(), &'static str> {
    let Value::Object(obj) = result else {
        return Err("is not a JSON object");
    };
    let array = |key: &str| obj.member(key).map(Value::is_array);
    match method_name {
        method::TOOLS_CALL => {
            match array("content") {
                None => return Err("has no content"),
                Some(false) => return Err("has a content that is not an array"),
                Some(true) => {}
            }
            let blocks = obj.member("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            if !blocks.iter().all(|b| b.member("type").is_some_and(Value::is_string)) {
                return Err("has a content block without a type");
            }
            if obj.member("isError").is_some_and(|e| !e.is_boolean()) {
                return Err("has an isError that is not true or false");
            }
            if obj.member("structuredContent").is_some_and(|s| !s.is_object()) {
                return Err("has a structuredContent that is not an object");
            }
        }
        method::PROMPTS_GET => match array("messages") {
            None => return Err("has no messages"),
            Some(false) => return Err("has messages that are not an array"),
            Some(true) => {
                let messages = obj["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
                if !messages.iter().all(|m| {
                    m.get("role").is_some_and(Value::is_string) && m.get("content").is_some_and(Value::is_object)
                }) {
                    return Err("has a message without a role or content");
                }
            }
        },
        method::RESOURCES_READ => match array("contents") {
            None => return Err("has no contents"),
            Some(false) => return Err("has contents that are not an array"),
            Some(true) => {
                let contents = obj["contents"].as_array().map(Vec::as_slice).unwrap_or_default();
                if !contents.iter().all(|c| c.get("uri").is_some_and(Value::is_string)) {
                    return Err("has a content without a uri");
                }
            }
        },
        method::COMPLETE => {
            let values = obj.get("completion").and_then(|c| c.get("values"));
            if !values.and_then(Value::as_array).is_some_and(|v| v.iter().all(Value::is_string)) {
                return Err("has no completion.values array of strings");
            }
        }
        _ => {}
    }
    Ok(())
}

/// The server capability a method needs, for the methods nod sends.
pub fn capability(method_name: &str) -> Option<&'static str> {
    match method_name {
        method::TOOLS_LIST | method::TOOLS_CALL => Some("tools"),
        method::RESOURCES_LIST | method::RESOURCES_TEMPLATES | method::RESOURCES_READ => Some("resources"),
        method::PROMPTS_LIST | method::PROMPTS_GET => Some("prompts"),
        method::COMPLETE => Some("completions"),
        _ => None,
    }
}

/// The line `--jsonl` writes for a `tools/call` result that came as text (see
/// `dispatch::Finished`), appended to `out`, when the result is a plain success: it passes
/// `check`, says it is no error (no `isError`, or false) and, if it says so, is complete.
/// The line is the result's JSON written compactly, as serializing its value would write it
/// (the same strings, numbers and order), but without building the value: a tree of maps and
/// strings, allocated and freed for every call, which was the largest cost of a stream on its
/// caller's thread. `false` (and `out` as it was) for anything else, which the caller then
/// reads into a value and settles as usual; so is a result with a member named twice at its
/// top or in a block, where a value keeps only the last.
pub fn plain_tool_line(text: &str, out: &mut Vec<u8>) -> bool {
    if !plain_tool_result(text) {
        return false;
    }
    let start = out.len();
    let mut de = serde_json::Deserializer::from_str(text);
    let done = serde_transcode::transcode(&mut de, &mut serde_json::Serializer::new(&mut *out));
    if done.is_err() || de.end().is_err() {
        out.truncate(start);
        return false;
    }
    true
}

/// Whether a `tools/call` result, as text, is a plain success (`plain_tool_line`): read
/// member by member as raw text, nothing allocated.
fn plain_tool_result(text: &str) -> bool {
    use serde::de::{Deserializer as _, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::value::RawValue;

    #[derive(serde::Deserialize)]
    #[serde(field_identifier)]
    enum Key {
        #[serde(rename = "content")]
        Content,
        #[serde(rename = "isError")]
        IsError,
        #[serde(rename = "structuredContent")]
        Structured,
        #[serde(rename = "resultType")]
        ResultType,
        #[serde(other)]
        Other,
    }
    #[derive(Default)]
    struct Top<'a> {
        content: Option<&'a RawValue>,
        is_error: Option<&'a RawValue>,
        structured: Option<&'a RawValue>,
        result_type: Option<&'a RawValue>,
    }
    struct TopVisitor;
    impl<'de> Visitor<'de> for TopVisitor {
        type Value = Top<'de>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a tool result")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
            let mut top = Top::default();
            while let Some(key) = map.next_key::<Key>()? {
                let slot = match key {
                    Key::Content => &mut top.content,
                    Key::IsError => &mut top.is_error,
                    Key::Structured => &mut top.structured,
                    Key::ResultType => &mut top.result_type,
                    Key::Other => {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                };
                if slot.replace(map.next_value()?).is_some() {
                    return Err(A::Error::custom("a member named twice"));
                }
            }
            Ok(top)
        }
    }
    /// A content array whose every block is an object with a string `type`.
    struct Blocks;
    impl<'de> Visitor<'de> for Blocks {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("content blocks")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Block)?.is_some() {}
            Ok(())
        }
    }
    struct Block;
    impl<'de> serde::de::DeserializeSeed<'de> for Block {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for Block {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a content block")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut kind: Option<&'de RawValue> = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key != "type" {
                    map.next_value::<IgnoredAny>()?;
                } else if kind.replace(map.next_value()?).is_some() {
                    return Err(A::Error::custom("a type named twice"));
                }
            }
            match kind {
                Some(kind) if kind.get().starts_with('"') => Ok(()),
                _ => Err(A::Error::custom("a block without a string type")),
            }
        }
    }

    let mut de = serde_json::Deserializer::from_str(text);
    let Ok(top) = (&mut de).deserialize_map(TopVisitor) else { return false };
    let Some(content) = top.content else { return false };
    let blocks = serde_json::Deserializer::from_str(content.get()).deserialize_seq(Blocks).is_ok();
    blocks
        && top.is_error.is_none_or(|e| e.get() == "false")
        && top.structured.is_none_or(|s| s.get().starts_with('{'))
        && top.result_type.is_none_or(|t| t.get() == "\"complete\"")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check;

    #[test]
    fn envelopes() {
        let text = json!({ "content": [{ "type": "text", "text": "x" }] });
        assert_eq!(check("tools/call", &text), Ok(()));
        assert_eq!(check("tools/call", &json!(null)), Err("is not a JSON object"));
        assert_eq!(check("tools/call", &json!("ok")), Err("is not a JSON object"));
        assert_eq!(check("tools/call", &json!({})), Err("has no content"));
        assert_eq!(check("tools/call", &json!({ "content": "x" })), Err("has a content that is not an array"));
        assert_eq!(
            check("tools/call", &json!({ "content": [], "isError": "yes" })),
            Err("has an isError that is not true or false")
        );
        assert_eq!(check("prompts/get", &json!({ "description": "x" })), Err("has no messages"));
        assert_eq!(check("resources/read", &json!({ "contents": [{ "uri": "a://b", "text": "" }] })), Ok(()));
        assert_eq!(check("completion/complete", &json!({ "completion": { "values": ["a"] } })), Ok(()));
        assert_eq!(check("ping", &json!({})), Ok(()));
    }

    /// A result written as a line without its value is exactly what its value would write,
    /// and only a plain success is written so; anything else is left to the value's road.
    #[test]
    fn a_plain_tool_result_is_written_as_its_value_would_write_it() {
        use super::plain_tool_line;
        use serde_json::Value;
        let plain = [
            r#"{"content":[{"type":"text","text":"hello 1"}],"isError":false}"#,
            r#"{ "content" : [ { "text" : "a\u00e9\/b\n", "type" : "text" } ] }"#,
            r#"{"content":[],"structuredContent":{"n":1.0,"m":1e2,"k":-0,"big":123456789012345678901234},"resultType":"complete"}"#,
            r#"{"content":[{"type":"image","data":"AA==","mimeType":"image/png","_meta":{"x":[1,{"y":null}]}}],"extra":[true]}"#,
            r#"{"isError":false,"content":[{"type":"te\u0078t","text":""}]}"#,
        ];
        for text in plain {
            let mut out = b"earlier line\n".to_vec();
            assert!(plain_tool_line(text, &mut out), "not plain: {text}");
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(check("tools/call", &value), Ok(()), "{text}");
            let want = format!("earlier line\n{}", serde_json::to_string(&value).unwrap());
            assert_eq!(String::from_utf8(out).unwrap(), want, "{text}");
        }
        let other = [
            r#"{"content":[{"type":"text","text":"no"}],"isError":true}"#,
            r#"{"content":[],"isError":null}"#,
            r#"{"content":[],"isError":"false"}"#,
            r#"{"content":{}}"#,
            r#"{"text":"no content"}"#,
            r#"{"content":[{"text":"no type"}]}"#,
            r#"{"content":[{"type":7}]}"#,
            r#"{"content":["text"]}"#,
            r#"{"content":[],"structuredContent":[1]}"#,
            r#"{"content":[],"resultType":"input_required"}"#,
            r#"{"content":[],"content":[]}"#,
            r#"{"content":[{"type":"text","type":"text"}]}"#,
            r#"{"content":[],"n":1e999}"#,
            r#"{"content":[]} trailing"#,
            r#"[{"content":[]}]"#,
            "null",
        ];
        for text in other {
            let mut out = b"earlier line\n".to_vec();
            assert!(!plain_tool_line(text, &mut out), "taken as plain: {text}");
            assert_eq!(out, b"earlier line\n", "{text}");
        }
    }
}
