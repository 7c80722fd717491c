//! The shape of a server's answer, checked before anyone uses it: a result that is not an
//! object, a `tools/call` result without a `content` array or with a non-boolean `isError`,
//! a prompt without `messages`, a read without `contents`. Such an answer is a protocol
//! error naming the method, never an empty success. Only the envelope is checked: what a
//! tool's content says, and whether it matches the tool's output schema, is the server's
//! business.

use serde_json::Value;

use crate::json::Member;
use crate::mcp::method;

/// Why a result that is not an object is refused.
pub const NOT_AN_OBJECT: &str = "is not a JSON object";

/// Why a result whose `resultType` nod does not know is refused.
pub const UNKNOWN_RESULT_TYPE: &str = "has an unknown resultType";

/// What a result says it is (2026-07-28): no `resultType` (an older server) or "complete" is
/// a complete result; "input_required" asks for input, at that revision only; any other
/// string is not an answer nod can use.
#[derive(PartialEq, Eq)]
pub enum ResultKind {
    Complete,
    InputRequired,
    Unknown,
}

impl ResultKind {
    pub fn of(result_type: Option<&Value>, modern: bool) -> ResultKind {
        match result_type.and_then(Value::as_str) {
            None | Some("complete") => ResultKind::Complete,
            Some("input_required") if modern => ResultKind::InputRequired,
            Some(_) => ResultKind::Unknown,
        }
    }
}

/// Checks `result`, the answer to `method_name`.
pub fn check(method_name: &str, result: &Value) -> Result<(), &'static str> {
    let Value::Object(obj) = result else {
        return Err(NOT_AN_OBJECT);
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
/// reads into a value and settles as usual; so is a result with an object, at any depth, that
/// names a member twice (a value keeps only the last) or that `plain_tool_result` does not
/// compare. `keys` is room for that check, kept by the caller between lines.
pub fn plain_tool_line(text: &str, out: &mut Vec<u8>, keys: &mut Vec<std::ops::Range<usize>>) -> bool {
    if !plain_tool_result(text, keys) {
        return false;
    }
    // Most results are written as serde_json writes: then the line is the text itself.
    if written_compactly(text) {
        out.extend_from_slice(text.as_bytes());
        return true;
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

/// Whether valid JSON `text` is exactly what serde_json's compact writer would write for the
/// value it holds, so that reading and writing it again (`plain_tool_line`) would give it back
/// byte for byte: no whitespace between tokens, the escapes that writer uses and no others
/// (`\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`, and `\u00xx` in lower case for the other
/// control characters), and integers of at most 18 digits (a fraction, an exponent, `-0` or a
/// longer integer may be written back otherwise). False says only "not known to be".
fn written_compactly(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => {
                at += 1;
                loop {
                    let Some(next) = memchr::memchr2(b'"', b'\\', &bytes[at..]) else { return false };
                    at += next;
                    if bytes[at] == b'"' {
                        at += 1;
                        break;
                    }
                    match bytes.get(at + 1) {
                        Some(b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r') => at += 2,
                        Some(b'u') if bytes.get(at + 2..at + 6).is_some_and(escaped_as_written) => at += 6,
                        _ => return false,
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = at;
                at += 1;
                while bytes.get(at).is_some_and(u8::is_ascii_digit) {
                    at += 1;
                }
                let number = &bytes[start..at];
                let digits = number.len() - usize::from(byte == b'-');
                if matches!(bytes.get(at), Some(b'.' | b'e' | b'E')) || number == b"-0" || digits > 18 {
                    return false;
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => return false,
            _ => at += 1,
        }
    }
    true
}

/// Whether the four hex digits of a `\u` escape are how serde_json writes that character:
/// `00` and a lower-case pair, for a control character without a short escape.
fn escaped_as_written(hex: &[u8]) -> bool {
    let [b'0', b'0', high @ (b'0' | b'1'), low] = *hex else { return false };
    let low = match low {
        b'0'..=b'9' => low - b'0',
        b'a'..=b'f' => low - b'a' + 10,
        _ => return false,
    };
    !matches!((high - b'0') * 16 + low, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)
}

/// The most members of one object `plain_tool_result` compares (each with all before it).
const MOST_MEMBERS: usize = 64;

/// Whether a `tools/call` result, as text, is a plain success (`plain_tool_line`), read in
/// one pass that allocates nothing (but `keys`, kept by the caller): a `content` array of
/// objects with a string `type`, `isError` absent or false, `structuredContent` absent or an
/// object, `resultType` absent or "complete"; and no object, at any depth, naming a member
/// twice. Objects of more than `MOST_MEMBERS` members and member names written with escapes
/// are not compared: false, as for anything else. `keys` holds where the names of the
/// objects being read lie in `text`.
fn plain_tool_result(text: &str, keys: &mut Vec<std::ops::Range<usize>>) -> bool {
    read_plain(text, keys, None)
}

/// A piece of a plain result's text (`plain_tool_texts`): where it lies in the result, or,
/// when it was written with escapes, the text itself.
#[derive(Debug, PartialEq)]
pub enum Piece {
    At(std::ops::Range<usize>),
    Unescaped(String),
}

impl Piece {
    pub fn text<'t>(&'t self, result: &'t str) -> &'t str {
        match self {
            Piece::At(at) => &result[at.clone()],
            Piece::Unescaped(text) => text,
        }
    }
}

/// Whether a `tools/call` result, as text, is a plain success, as `plain_tool_result` decides
/// it, read in the same one pass; and when it is one whose blocks are all text, their texts
/// (a missing text is empty, as a value's rendering shows it), without copying any that has
/// no escapes. `None` when not plain; `Some(None)` when plain with a block that is not text,
/// or with none.
pub fn plain_tool_texts(text: &str) -> Option<Option<Vec<Piece>>> {
    let mut texts = Texts { pieces: Vec::new(), all_text: true, block: None };
    if !read_plain(text, &mut Vec::new(), Some(&mut texts)) {
        return None;
    }
    Some((texts.all_text && !texts.pieces.is_empty()).then_some(texts.pieces))
}

/// What `plain_tool_texts` gathers as it reads: the pieces so far, whether every block so far
/// was text, and the block being read (its type seen to be text, its text).
struct Texts {
    pieces: Vec<Piece>,
    all_text: bool,
    block: Option<(bool, Option<Piece>)>,
}

fn read_plain(text: &str, keys: &mut Vec<std::ops::Range<usize>>, texts: Option<&mut Texts>) -> bool {
    use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
    use std::fmt::Formatter;

    /// What a value read must be.
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        Any,
        Object,
        /// The top: a tool result.
        Result,
        /// `content`: blocks.
        Blocks,
        /// A block: an object with a string `type`.
        Block,
        /// A string (a block's `type`).
        Text,
    }
    struct Read<'k, 'de> {
        text: &'de str,
        keys: &'k mut Vec<std::ops::Range<usize>>,
        want: Want,
        texts: Option<&'k mut Texts>,
    }
    impl<'de> Read<'_, 'de> {
        fn next(&mut self, want: Want) -> Read<'_, 'de> {
            Read { text: self.text, keys: &mut *self.keys, want, texts: self.texts.as_deref_mut() }
        }
        fn scalar<E: serde::de::Error>(&self) -> Result<(), E> {
            if self.want == Want::Any { Ok(()) } else { Err(E::custom("not what a plain result holds here")) }
        }
    }
    impl<'de> DeserializeSeed<'de> for Read<'_, 'de> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Read<'_, 'de> {
        type Value = ();
        fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
            f.write_str("a plain tool result")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
            self.scalar()
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
            self.scalar()
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
            self.scalar()
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
            self.scalar()
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
            self.scalar()
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<(), E> {
            if self.want == Want::Text {
                if let Some((is_text, _)) = self.texts.and_then(|t| t.block.as_mut()) {
                    *is_text = text == "text";
                }
                return Ok(());
            }
            self.scalar()
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
            let each = match self.want {
                Want::Any => Want::Any,
                Want::Blocks => Want::Block,
                _ => return Err(A::Error::custom("an array where a plain result has none")),
            };
            while seq.next_element_seed(self.next(each))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            if matches!(self.want, Want::Blocks | Want::Text) {
                return Err(A::Error::custom("an object where a plain result has none"));
            }
            let first = self.keys.len();
            let (mut content, mut kind) = (false, false);
            if self.want == Want::Block
                && let Some(texts) = self.texts.as_deref_mut()
            {
                texts.block = Some((false, None));
            }
            while let Some(key) = map.next_key::<&'de str>()? {
                let seen = &self.keys[first..];
                if seen.len() >= MOST_MEMBERS || seen.iter().any(|at| &self.text[at.clone()] == key) {
                    return Err(A::Error::custom("a member named twice, or too many to compare"));
                }
                let at = key.as_ptr() as usize - self.text.as_ptr() as usize;
                self.keys.push(at..at + key.len());
                match (self.want, key) {
                    (Want::Result, "content") => {
                        content = true;
                        map.next_value_seed(self.next(Want::Blocks))?;
                    }
                    (Want::Result, "isError") => {
                        if map.next_value::<bool>()? {
                            return Err(A::Error::custom("an error"));
                        }
                    }
                    (Want::Result, "structuredContent") => map.next_value_seed(self.next(Want::Object))?,
                    (Want::Result, "resultType") => {
                        if map.next_value::<&str>()? != "complete" {
                            return Err(A::Error::custom("not complete"));
                        }
                    }
                    (Want::Block, "type") => {
                        kind = true;
                        map.next_value_seed(self.next(Want::Text))?;
                    }
                    (Want::Block, "text") if self.texts.is_some() => {
                        let piece = map.next_value_seed(TextPiece(self.next(Want::Any)))?;
                        if let Some((_, text)) = self.texts.as_deref_mut().and_then(|t| t.block.as_mut()) {
                            *text = piece;
                        }
                    }
                    _ => map.next_value_seed(self.next(Want::Any))?,
                }
            }
            self.keys.truncate(first);
            if self.want == Want::Block
                && let Some(texts) = self.texts.as_deref_mut()
                && let Some((is_text, text)) = texts.block.take()
            {
                match is_text {
                    // A text that is missing or no string shows empty, as in `render`.
                    true => texts.pieces.push(text.unwrap_or(Piece::Unescaped(String::new()))),
                    false => texts.all_text = false,
                }
            }
            match self.want {
                Want::Result if !content => Err(A::Error::custom("no content")),
                Want::Block if !kind => Err(A::Error::custom("a block without a type")),
                _ => Ok(()),
            }
        }
    }
    /// A block's `text`: where it lies, when it is a string (anything else is read as
    /// `Want::Any` reads it, and gives none).
    struct TextPiece<'k, 'de>(Read<'k, 'de>);
    impl<'de> DeserializeSeed<'de> for TextPiece<'_, 'de> {
        type Value = Option<Piece>;
        fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Option<Piece>, D::Error> {
            deserializer.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for TextPiece<'_, 'de> {
        type Value = Option<Piece>;
        fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
            f.write_str("a block's text")
        }
        fn visit_borrowed_str<E: serde::de::Error>(self, text: &'de str) -> Result<Option<Piece>, E> {
            let at = text.as_ptr() as usize - self.0.text.as_ptr() as usize;
            Ok(Some(Piece::At(at..at + text.len())))
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Option<Piece>, E> {
            Ok(Some(Piece::Unescaped(text.to_string())))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<Piece>, E> {
            Ok(None)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Option<Piece>, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Option<Piece>, E> {
            Ok(None)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Option<Piece>, E> {
            Ok(None)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Option<Piece>, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<Piece>, A::Error> {
            self.0.visit_seq(seq).map(|()| None)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<Piece>, A::Error> {
            self.0.visit_map(map).map(|()| None)
        }
    }
    keys.clear();
    let mut de = serde_json::Deserializer::from_str(text);
    Read { text, keys, want: Want::Result, texts }.deserialize(&mut de).is_ok() && de.end().is_ok()
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

    /// The texts a plain result's blocks show, read in the check's one pass: those of its
    /// value, borrowed unless written with escapes; none unless every block is text.
    #[test]
    fn a_plain_results_texts_are_its_values_texts() {
        use super::{Piece, plain_tool_result, plain_tool_texts};
        use serde_json::Value;
        let texts = |text: &str| -> Option<Vec<String>> {
            let pieces = plain_tool_texts(text).expect("plain")?;
            Some(pieces.iter().map(|p| p.text(text).to_string()).collect())
        };
        let all_text = [
            r#"{"content":[{"type":"text","text":"hello 1"}],"isError":false}"#,
            r#"{ "content" : [ { "text" : "a\u00e9\/b\n\"q\"", "type" : "text" }, {"type":"text","text":"two","annotations":{"text":"x","type":"y"}} ] }"#,
            r#"{"isError":false,"content":[{"type":"te\u0078t","text":""}],"structuredContent":{"text":"no"}}"#,
        ];
        for text in all_text {
            let value: Value = serde_json::from_str(text).unwrap();
            let want: Vec<String> =
                value["content"].as_array().unwrap().iter().map(|b| b["text"].as_str().unwrap().to_string()).collect();
            assert_eq!(texts(text), Some(want), "{text}");
            assert!(plain_tool_result(text, &mut Vec::new()));
        }
        let plain = r#"{"content":[{"type":"text","text":"x"},{"type":"text","text":"\u00e9"}]}"#;
        let pieces = plain_tool_texts(plain).unwrap().unwrap();
        assert!(matches!(&pieces[0], Piece::At(at) if &plain[at.clone()] == "x"), "borrowed: {pieces:?}");
        assert_eq!(pieces[1], Piece::Unescaped("\u{e9}".to_string()), "unescaped");
        // A text block without a string text shows empty, as a value's rendering shows it.
        let odd = r#"{"content":[{"type":"text"},{"type":"text","text":7},{"type":"text","text":null},
            {"type":"text","text":{"type":"image","text":"x"}},{"type":"text","text":["y"]}]}"#;
        assert_eq!(texts(odd), Some(vec![String::new(); 5]));
        // A character outside the BMP, escaped as a surrogate pair, is the character.
        let pair = r#"{"content":[{"type":"text","text":"a\ud83d\ude00b"}]}"#;
        assert_eq!(plain_tool_texts(pair).unwrap().unwrap(), [Piece::Unescaped("a\u{1f600}b".to_string())]);
        // Plain, but not all text (or no blocks): the value's road.
        for text in [
            r#"{"content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}]}"#,
            r#"{"content":[{"type":"image","data":"AA==","mimeType":"image/png","text":"no"}]}"#,
            r#"{"content":[],"structuredContent":{"a":1}}"#,
        ] {
            assert_eq!(plain_tool_texts(text), Some(None), "{text}");
        }
        // Not plain at all: settled as usual.
        for text in [
            r#"{"content":[{"type":"text","text":"a"}],"isError":true}"#,
            r#"{"content":[{"type":"text","text":"a","text":"b"}]}"#,
            r#"{"content":[{"type":"text","text":"a"}],"resultType":"input_required"}"#,
            r#"{"content":[{"type":"text","text":"a"}],"x":1e999}"#,
            r#"{"content":[{"type":"text","text":"\ud800"}]}"#,
            r#"{"content":[{"type":"text","text":"a"}]} trailing"#,
        ] {
            assert_eq!(plain_tool_texts(text), None, "{text}");
        }
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
            r#"{"content":[{"type":"text","text":"a","_meta":{"text":"b","a":{"text":"c"}}}],"structuredContent":{"a":{"a":1},"b":{"a":2}}}"#,
            // Written as serde_json writes (the text is the line), and nearly so (it is not).
            r#"{"content":[{"text":"q\"b\\n\nt\tr\rb\bf\fc\u001b\u0000\u001f","type":"text"}],"isError":false}"#,
            r#"{"content":[{"text":"é ✓ \u001B \u0008 \u000a \u0041 \ud83d\ude00 \/","type":"text"}]}"#,
            r#"{"content":[],"structuredContent":{"n":[0,-1,7,123456789012345678,-123456789012345678,1234567890123456789]}}"#,
            r#"{"content":[],"structuredContent":{"n":[-0,0.5,1E2,-12345678901234567890,1e-2]}}"#,
            "{\"content\":[],\t\"structuredContent\":{\"a\":true,\n\"b\":null}}\r",
        ];

        for text in plain {
            let mut out = b"earlier line\n".to_vec();
            assert!(plain_tool_line(text, &mut out, &mut Vec::new()), "not plain: {text}");
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
            r#"{"content":[{"type":"text","text":"a","text":"b"}]}"#,
            r#"{"content":[],"structuredContent":{"a":{"b":1,"c":[{"d":1,"d":2}]}}}"#,
            r#"{"content":[{"type":"text","te\u0078t":"a"}]}"#,
            r#"{"content":[],"n":1e999}"#,
            r#"{"content":[]} trailing"#,
            r#"[{"content":[]}]"#,
            "null",
        ];
        for text in other {
            let mut out = b"earlier line\n".to_vec();
            assert!(!plain_tool_line(text, &mut out, &mut Vec::new()), "taken as plain: {text}");
            assert_eq!(out, b"earlier line\n", "{text}");
        }
    }

    /// What serde_json writes is known to be written so; a text it would write otherwise is not.
    #[test]
    fn a_text_is_known_to_be_written_compactly_only_when_it_is() {
        use super::written_compactly;
        use serde_json::{Value, json};
        let controls: String = (0u8..0x20).map(char::from).collect();
        let values = [
            json!({"content": [{"type": "text", "text": format!("\"\\/{controls}\u{7f}é✓😀")}], "isError": false}),
            json!([0, -1, 17, 999_999_999_999_999_999u64, -999_999_999_999_999_999i64, true, false, null, "", {}, []]),
            json!({"a": {"b": [{"c": "d"}]}, "": ""}),
        ];
        for value in &values {
            let text = serde_json::to_string(value).unwrap();
            assert!(written_compactly(&text), "{text}");
            assert_eq!(serde_json::to_string(&serde_json::from_str::<Value>(&text).unwrap()).unwrap(), text);
        }
        for text in [
            "{\"a\": 1}",
            "[1,\n2]",
            "[1.0]",
            "[1e2]",
            "[-0]",
            "[1234567890123456789]",
            r#"["\/"]"#,
            r#"["\u0041"]"#,
            r#"["\u001B"]"#,
            r#"["\u0008"]"#,
            r#"["\u000a"]"#,
            r#"["\ud83d\ude00"]"#,
            r#"["unterminated"#,
        ] {
            assert!(!written_compactly(text), "{text}");
        }
    }
}
