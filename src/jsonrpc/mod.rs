//! JSON-RPC 2.0 messages as MCP uses them: parsing untrusted frames into a closed `Message`
//! enum, and writing nod's own requests, notifications and responses. `frame` cuts a byte
//! stream into messages; `queue` keeps nod's requests that wait for an answer.
//!
//! Request ids from a server are kept as raw JSON values so they are echoed with their exact
//! type (MSG-8). nod's own ids are integers that are never reused on a connection (MSG-2).

pub mod frame;
pub mod queue;

use serde_json::{Map, Value, json};

/// One decoded message from a peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// `id` is `None` for an error response whose id the peer could not read (MSG-4).
    Response {
        id: Option<Value>,
        result: Result<Value, ResponseError>,
    },
    /// A request nod cannot read (params that are not an object, no method): it still has
    /// an id, so it is answered -32600 rather than ignored (ERR-1).
    Invalid {
        id: Value,
        why: &'static str,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

/// The message, and the code unless the message names it already (SDKs write
/// "MCP error -32602: ...").
impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.contains(&self.code.to_string()) {
            f.write_str(&self.message)
        } else {
            write!(f, "{} (code {})", self.message, self.code)
        }
    }
}

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

impl ResponseError {
    pub fn new(code: i64, message: impl Into<String>) -> ResponseError {
        ResponseError { code, message: message.into(), data: None }
    }

    fn from_value(value: &Value) -> Option<ResponseError> {
        let obj = value.as_object()?;
        let code = obj.get("code")?.as_i64()?;
        let message = obj.get("message")?.as_str()?.to_string();
        Some(ResponseError { code, message, data: obj.get("data").cloned() })
    }

    fn to_value(&self) -> Value {
        let mut obj = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            obj["data"] = data.clone();
        }
        obj
    }
}

/// Why a frame could not be turned into messages.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    /// The line is not JSON at all (a server printing chatter on stdout).
    NotJson,
    /// The JSON is not a JSON-RPC 2.0 message.
    Invalid(&'static str),
    /// An array arrived on a connection whose protocol version has no batches.
    UnexpectedBatch,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::NotJson => f.write_str("a line that is not JSON"),
            DecodeError::Invalid(why) => write!(f, "an invalid JSON-RPC message ({why})"),
            DecodeError::UnexpectedBatch => f.write_str("a JSON-RPC batch, which this protocol version does not allow"),
        }
    }
}

/// Decodes one frame. Batches (arrays) are accepted only when `batches` is true, which is
/// the case for a connection that negotiated 2025-03-26 (MSG-9).
pub fn decode(frame: &[u8], batches: bool) -> Result<Vec<Message>, DecodeError> {
    // The frame is checked as UTF-8 once, in one fast pass, and parsed as text: parsing the
    // bytes checks every string on its own (a tenth of a 1,000-tool listing's decoding).
    // Invalid UTF-8 is refused either way.
    let text = std::str::from_utf8(frame).map_err(|_| DecodeError::NotJson)?;
    decode_text(text, batches)
}

/// `decode` of a frame known to be UTF-8 (the stdio framing checks every line).
pub fn decode_text(text: &str, batches: bool) -> Result<Vec<Message>, DecodeError> {
    // The usual frame, one object, is read straight into its envelope: no map is built for
    // the envelope's keys only to take them out again. Anything else (a batch, JSON that is
    // not an object, a frame that does not parse) takes the general road, which also says
    // what is wrong with it.
    if text.trim_start().starts_with('{')
        && let Ok(envelope) = serde_json::from_str::<Envelope<Value>>(text)
    {
        return Ok(vec![envelope.message()?]);
    }
    let value: Value = serde_json::from_str(text).map_err(|_| DecodeError::NotJson)?;
    match value {
        Value::Array(items) => {
            if !batches {
                return Err(DecodeError::UnexpectedBatch);
            }
            if items.is_empty() {
                return Err(DecodeError::Invalid("empty batch"));
            }
            items.into_iter().map(from_value).collect()
        }
        value => Ok(vec![from_value(value)?]),
    }
}

/// Turns one JSON value into a message, checking the envelope.
pub fn from_value(value: Value) -> Result<Message, DecodeError> {
    let Value::Object(mut obj) = value else {
        return Err(DecodeError::Invalid("not an object"));
    };
    let mut take = |key: &str| obj.remove(key);
    Envelope {
        jsonrpc: take("jsonrpc"),
        id: take("id"),
        method: take("method"),
        params: take("params"),
        result: take("result"),
        error: take("error"),
    }
    .message()
}

/// The members of a JSON-RPC object that say what it is.
#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    #[serde(other)]
    Other,
}

/// Where a frame's `result` lies, and the answer's id, when the frame is a plain answer: one
/// object with `"jsonrpc":"2.0"`, a non-negative integer id, a `result` (of any JSON, checked
/// here) and neither `error` nor `method`. Such an answer goes to its caller as text, read into
/// a value on the caller's thread (`dispatch::Finished`); anything else is `None` and takes
/// `decode_text`, which decides the same cases the same way and says what is wrong.
pub fn answer_span(text: &str) -> Option<(u64, std::ops::Range<usize>)> {
    use serde_json::value::RawValue;
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let raw: AnswerMembers = serde::Deserialize::deserialize(&mut de).ok()?;
    de.end().ok()?;
    if raw.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return None;
    }
    let id = raw.id?.get();
    if !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id = id.parse::<u64>().ok()?;
    let result = raw.result?.get();
    let start = result.as_ptr() as usize - text.as_ptr() as usize;
    Some((id, start..start + result.len()))
}

/// What `answer_span` reads of a frame: its `jsonrpc`, `id` and `result` as their text (the
/// last of each, as in a parsed object). A `method` or an `error` member ends the reading at
/// once, since the frame is then no plain answer whatever follows: a big notification, request
/// or error answer is not read through before `decode_text` reads it.
struct AnswerMembers<'a> {
    jsonrpc: Option<&'a serde_json::value::RawValue>,
    id: Option<&'a serde_json::value::RawValue>,
    result: Option<&'a serde_json::value::RawValue>,
}

impl<'de> serde::Deserialize<'de> for AnswerMembers<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<AnswerMembers<'de>, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = AnswerMembers<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a plain JSON-RPC answer")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<AnswerMembers<'de>, A::Error> {
                let mut members = AnswerMembers { jsonrpc: None, id: None, result: None };
                while let Some(key) = map.next_key::<Key>()? {
                    let slot = match key {
                        Key::Jsonrpc => &mut members.jsonrpc,
                        Key::Id => &mut members.id,
                        Key::Result => &mut members.result,
                        Key::Method | Key::Error => return Err(serde::de::Error::custom("not a plain answer")),
                        Key::Params | Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value()?);
                }
                Ok(members)
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// The members of a JSON-RPC object that say what it is, as values (`answer_span` reads its
/// own, `AnswerMembers`); others are ignored. A member given twice counts with its last value,
/// as in a parsed object.
struct Envelope<T> {
    jsonrpc: Option<T>,
    id: Option<T>,
    method: Option<T>,
    params: Option<T>,
    result: Option<T>,
    error: Option<T>,
}

impl<T> Default for Envelope<T> {
    fn default() -> Envelope<T> {
        Envelope { jsonrpc: None, id: None, method: None, params: None, result: None, error: None }
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Envelope<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Envelope<T>, D::Error> {
        struct Members<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Members<T> {
            type Value = Envelope<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON-RPC object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Envelope<T>, A::Error> {
                let mut envelope = Envelope::default();
                while let Some(key) = map.next_key::<Key>()? {
                    let slot = match key {
                        Key::Jsonrpc => &mut envelope.jsonrpc,
                        Key::Id => &mut envelope.id,
                        Key::Method => &mut envelope.method,
                        Key::Params => &mut envelope.params,
                        Key::Result => &mut envelope.result,
                        Key::Error => &mut envelope.error,
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value()?);
                }
                Ok(envelope)
            }
        }
        deserializer.deserialize_map(Members(std::marker::PhantomData))
    }
}

impl Envelope<Value> {
    fn message(self) -> Result<Message, DecodeError> {
        if self.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            return Err(DecodeError::Invalid("jsonrpc is not \"2.0\""));
        }
        let id = match self.id {
            None | Some(Value::Null) => None,
            Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
            Some(_) => return Err(DecodeError::Invalid("id is neither a string nor a number")),
        };
        if let Some(method) = self.method {
            let Value::String(method) = method else {
                return match id {
                    Some(id) => Ok(Message::Invalid { id, why: "method is not a string" }),
                    None => Err(DecodeError::Invalid("method is not a string")),
                };
            };
            let params = match self.params {
                None => Value::Null,
                Some(params @ Value::Object(_)) => params,
                // JSON-RPC allows arrays; MCP's requests take an object.
                Some(Value::Array(_)) if id.is_some() => {
                    return Ok(Message::Invalid { id: id.expect("checked"), why: "params is not an object" });
                }
                Some(params @ Value::Array(_)) => params,
                Some(_) => {
                    return match id {
                        Some(id) => Ok(Message::Invalid { id, why: "params is not an object" }),
                        None => Err(DecodeError::Invalid("params is neither an object nor an array")),
                    };
                }
            };
            return Ok(match id {
                Some(id) => Message::Request { id, method, params },
                None => Message::Notification { method, params },
            });
        }
        match (self.result, self.error) {
            (Some(result), None) => match id {
                Some(id) => Ok(Message::Response { id: Some(id), result: Ok(result) }),
                None => Err(DecodeError::Invalid("result response without an id")),
            },
            (None, Some(error)) => {
                let error = ResponseError::from_value(&error).ok_or(DecodeError::Invalid("malformed error object"))?;
                Ok(Message::Response { id, result: Err(error) })
            }
            (Some(_), Some(_)) => Err(DecodeError::Invalid("both result and error")),
            (None, None) => match id {
                Some(id) => Ok(Message::Invalid { id, why: "a request without a method" }),
                None => Err(DecodeError::Invalid("neither method, result nor error")),
            },
        }
    }
}

/// Writes a request. `params_json` is already serialized so that large arguments are encoded
/// once, on the caller's thread, and not inside the dispatcher.
pub fn encode_request(id: u64, method: &str, params_json: Option<&str>) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::with_capacity(64 + method.len() + params_json.map_or(0, str::len));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    let _ = write!(out, "{id}");
    out.extend_from_slice(b",\"method\":");
    // MCP's method names need no escapes; any other is written as JSON writes strings.
    if method.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(method.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut out, method).expect("a string serializes");
    }
    if let Some(params) = params_json {
        out.extend_from_slice(b",\"params\":");
        out.extend_from_slice(params.as_bytes());
    }
    out.extend_from_slice(b"}\n");
    out
}

/// Writes a notification.
pub fn encode_notification(method: &str, params: Option<&Value>) -> Vec<u8> {
    let mut obj = Map::new();
    obj.insert("jsonrpc".into(), "2.0".into());
    obj.insert("method".into(), method.into());
    // A message without params decodes to Null; it must encode without params again, since
    // `"params": null` is not valid JSON-RPC (found by the message fuzz target).
    if let Some(params) = params.filter(|p| !p.is_null()) {
        obj.insert("params".into(), params.clone());
    }
    line(Value::Object(obj))
}

/// Writes the answer to a peer's request, echoing its id as it came.
pub fn encode_response(id: &Value, result: &Result<Value, ResponseError>) -> Vec<u8> {
    let msg = match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_value() }),
    };
    line(msg)
}

fn line(value: Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(&value).expect("a JSON value serializes");
    out.push(b'\n');
    out
}

#[cfg(test)]
pub(crate) mod tests;
