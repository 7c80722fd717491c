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
}
