//! A server's sampling request made into a provider request: its system prompt and
//! messages (text, images as data URLs, the tool uses and results of its own tool loop,
//! checked), its own tools as it describes them, its settings with `maxTokens` capped; and
//! what the approval question shows of each content block.

use serde_json::{Value, json};

use crate::provider::{Message, Part, Sampling, ToolSpec};

/// The most tokens a sampling request may ask for.
pub const MAX_TOKENS: u64 = 4096;
/// The most text one request may carry.
const MAX_BYTES: usize = 256 * 1024;
/// The most image data (base64) one request may carry.
const MAX_IMAGE_BYTES: usize = 4 * 1024 * 1024;
/// The most tools one request may offer.
const MAX_TOOLS: usize = 128;
/// The image types OpenAI-compatible endpoints take.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A content block as the approval question shows it: its text, or what it is.
pub(super) fn shown_block(block: &Value) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str);
    match field("type") {
        Some("text") => field("text").unwrap_or("").to_string(),
        Some("image") => format!(
            "[image: {}, {} bytes of base64]",
            field("mimeType").unwrap_or("?"),
            field("data").map_or(0, str::len)
        ),
        Some("tool_use") => format!(
            "[tool use: {} {}]",
            field("name").unwrap_or("?"),
            block.get("input").map_or_else(String::new, Value::to_string)
        ),
        Some("tool_result") => {
            let content = block.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let text: Vec<String> = content.iter().map(shown_block).collect();
            format!("[tool result: {}]", text.join(" "))
        }
        Some(other) => format!("[{other} content]"),
        None => "[content without a type]".to_string(),
    }
}

/// The model request a sampling request asks for: the system prompt, then the messages
/// (text, and images as data URLs), and its settings with `maxTokens` capped.
pub(super) fn request_of(params: &Value) -> Result<Ready, Refusal> {
    let tools = tools_of(params)?;
    let list = params.get("messages").and_then(Value::as_array).filter(|m| !m.is_empty());
    let list = list.ok_or_else(|| invalid("messages must be a non-empty array"))?;
    let mut messages = Vec::with_capacity(list.len() + 1);
    let mut bytes = 0;
    if let Some(system) = params.get("systemPrompt").and_then(Value::as_str) {
        bytes += system.len();
        messages.push(Message::System(system.to_string()));
    }
    let mut image_bytes = 0;
    // The tool uses of the last assistant message, each to be answered by the next message.
    let mut unanswered: Vec<String> = Vec::new();
    for message in list {
        let blocks = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            block => vec![block.clone()],
        };
        let role = message.get("role").and_then(Value::as_str);
        let kinds: Vec<&str> = blocks.iter().map(|b| b.get("type").and_then(Value::as_str).unwrap_or("")).collect();
        if kinds.contains(&"tool_result") {
            if role != Some("user") || kinds.iter().any(|k| *k != "tool_result") {
                return Err(invalid("a message with tool results must be a user message of tool results only"));
            }
            for block in &blocks {
                let id = block.get("toolUseId").and_then(Value::as_str).unwrap_or("");
                let Some(at) = unanswered.iter().position(|u| u == id) else {
                    return Err(invalid(format!(
                        "a tool result answers no tool use of the message before it ({id:?})"
                    )));
                };
                unanswered.remove(at);
                let content = block.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                let mut text: Vec<String> = content.iter().map(shown_block).collect();
                if block.get("isError") == Some(&Value::Bool(true)) {
                    text.insert(0, "(the tool failed)".into());
                }
                let text = text.join("\n");
                bytes += text.len();
                messages.push(Message::Tool { call_id: id.to_string(), content: text });
            }
            continue;
        }
        if !unanswered.is_empty() {
            return Err(invalid(format!("tool result missing in request (for {})", unanswered.join(", "))));
        }
        let mut parts = Vec::with_capacity(blocks.len());
        let mut calls = Vec::new();
        for block in &blocks {
            let field = |key: &str| block.get(key).and_then(Value::as_str);
            match field("type") {
                Some("text") => {
                    let text = field("text").unwrap_or("");
                    bytes += text.len();
                    parts.push(Part::Text(text.to_string()));
                }
                Some("image") => {
                    let mime = field("mimeType").unwrap_or("");
                    let data = field("data").unwrap_or("");
                    if !IMAGE_TYPES.contains(&mime) {
                        return Err(invalid(format!(
                            "nod's sampling takes images of type {}, not {mime:?}",
                            IMAGE_TYPES.join(", ")
                        )));
                    }
                    if data.is_empty()
                        || !data.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                    {
                        return Err(invalid("an image's data is not base64"));
                    }
                    image_bytes += data.len();
                    parts.push(Part::Image { mime: mime.to_string(), data: data.to_string() });
                }
                Some("tool_use") if role == Some("assistant") => {
                    let (Some(id), Some(name)) = (field("id"), field("name")) else {
                        return Err(invalid("a tool use needs an id and a name"));
                    };
                    if !tools.iter().any(|t| t.name == name) {
                        return Err(invalid(format!("a tool use names {name:?}, which the request does not offer")));
                    }
                    let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                    let arguments = input.to_string();
                    bytes += arguments.len();
                    calls.push(crate::provider::ToolCall { id: id.to_string(), name: name.to_string(), arguments });
                    unanswered.push(id.to_string());
                }
                Some(other) => {
                    return Err(invalid(format!(
                        "nod's sampling takes text, images and tool uses, not {other} content"
                    )));
                }
                None => return Err(invalid("a message's content has no type")),
            }
        }
        let only_text = parts.iter().all(|p| matches!(p, Part::Text(_)));
        messages.push(match role {
            Some("user") if only_text => Message::User(Part::text_of(&parts)),
            Some("user") => Message::UserParts(parts),
            Some("assistant") if only_text => Message::Assistant { text: Part::text_of(&parts), calls },
            Some("assistant") => return Err(invalid("an assistant message of a sampling request must be text")),
            _ => return Err(invalid("a message's role must be user or assistant")),
        });
    }
    if !unanswered.is_empty() {
        return Err(invalid(format!("tool result missing in request (for {})", unanswered.join(", "))));
    }
    if image_bytes > MAX_IMAGE_BYTES {
        return Err(invalid(format!(
            "the request carries {image_bytes} bytes of images, over the {} MiB nod sends",
            MAX_IMAGE_BYTES >> 20
        )));
    }
    if bytes > MAX_BYTES {
        return Err(invalid(format!(
            "the request carries {bytes} bytes of text, over the {} KiB nod sends",
            MAX_BYTES >> 10
        )));
    }
    let max_tokens = params.get("maxTokens").and_then(Value::as_u64);
    let max_tokens = max_tokens.ok_or_else(|| invalid("maxTokens must be a positive integer"))?;
    let stop = params.get("stopSequences").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mode = params.pointer("/toolChoice/mode").and_then(Value::as_str).unwrap_or("auto");
    if !matches!(mode, "auto" | "required" | "none") {
        return Err(invalid(format!("toolChoice mode {mode:?} is none of auto, required and none")));
    }
    let sampling = Sampling {
        max_tokens: max_tokens.clamp(1, MAX_TOKENS),
        temperature: params.get("temperature").and_then(Value::as_f64),
        stop: stop.iter().filter_map(Value::as_str).take(4).map(str::to_string).collect(),
        tools_required: mode == "required" && !tools.is_empty(),
    };
    Ok(Ready { messages, sampling, tools, tools_none: mode == "none" })
}

/// A sampling request made ready for the provider.
#[derive(Debug)]
pub(super) struct Ready {
    pub messages: Vec<Message>,
    pub sampling: Sampling,
    /// The server's own tools, as it describes them (never nod's).
    pub tools: Vec<ToolSpec>,
    /// `toolChoice` mode `none`.
    pub tools_none: bool,
}

/// Why a request was refused: the JSON-RPC error's code and message.
type Refusal = (i64, String);

fn invalid(why: impl Into<String>) -> Refusal {
    (crate::jsonrpc::INVALID_PARAMS, why.into())
}

/// The tools a sampling request offers the model, as the server describes them: a name the
/// provider takes (letters, digits, `_` and `-`, up to 64), its description, its input schema.
fn tools_of(params: &Value) -> Result<Vec<ToolSpec>, Refusal> {
    let Some(list) = params.get("tools").filter(|t| !t.is_null()) else { return Ok(Vec::new()) };
    let list = list.as_array().ok_or_else(|| invalid("tools must be an array"))?;
    if list.len() > MAX_TOOLS {
        return Err(invalid(format!("the request offers {} tools, over the {MAX_TOOLS} nod sends", list.len())));
    }
    let mut tools: Vec<ToolSpec> = Vec::with_capacity(list.len());
    for tool in list {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
        let fits = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
        if !fits {
            return Err(invalid(format!(
                "a tool's name must be 1 to 64 letters, digits, _ or - for the model, not {:?}",
                crate::util::one_line(name)
            )));
        }
        if tools.iter().any(|t| t.name == name) {
            return Err(invalid(format!("two tools are named {name}")));
        }
        let schema = tool.get("inputSchema").filter(|s| s.is_object());
        let schema = schema.ok_or_else(|| invalid(format!("tool {name} has no inputSchema object")))?;
        let description = tool.get("description").and_then(Value::as_str).unwrap_or("").to_string();
        tools.push(ToolSpec { name: name.to_string(), description, parameters: schema.clone() });
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_become_capped_requests_of_text_and_images() {
        let err = |params: &Value| request_of(params).unwrap_err().1;
        let params = json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": "hi" } }],
            "systemPrompt": "be brief", "maxTokens": 100_000, "temperature": 0.2, "stopSequences": ["END"] });
        let ready = request_of(&params).unwrap();
        assert_eq!(ready.messages, [Message::System("be brief".into()), Message::User("hi".into())]);
        let capped = Sampling {
            max_tokens: MAX_TOKENS,
            temperature: Some(0.2),
            stop: vec!["END".into()],
            tools_required: false,
        };
        assert_eq!(ready.sampling, capped);
        assert!(ready.tools.is_empty() && !ready.tools_none);
        let image = |mime: &str, data: &str| {
            json!({ "messages": [{ "role": "user", "content": [{ "type": "text", "text": "what is it?" },
                { "type": "image", "data": data, "mimeType": mime }] }], "maxTokens": 5 })
        };
        let messages = request_of(&image("image/png", "iVBORw0K")).unwrap().messages;
        let parts =
            vec![Part::Text("what is it?".into()), Part::Image { mime: "image/png".into(), data: "iVBORw0K".into() }];
        assert_eq!(messages, [Message::UserParts(parts)]);
        // On the wire: OpenAI's content parts, the image as a data URL.
        assert_eq!(
            serde_json::to_value(&messages[0]).unwrap()["content"][1],
            json!({ "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0K" } })
        );
        assert!(err(&image("image/png", "")).contains("not base64"));
        assert!(err(&image("image/png", "a\"b")).contains("not base64"));
        assert!(err(&image("image/svg+xml", "PHN2Zz4=")).contains("not \"image/svg+xml\""));
        let huge = "A".repeat(MAX_IMAGE_BYTES + 4);
        assert!(err(&image("image/png", &huge)).contains("bytes of images"));
        let audio = json!({ "messages": [{ "role": "user", "content": { "type": "audio", "data": "AAAA", "mimeType": "audio/wav" } }], "maxTokens": 5 });
        assert!(err(&audio).contains("not audio"));
        assert!(request_of(&json!({ "messages": [], "maxTokens": 5 })).is_err());
    }

    #[test]
    fn the_servers_tools_are_offered_as_it_describes_them_and_its_tool_loop_is_checked() {
        let err = |params: &Value| request_of(params).unwrap_err();
        let weather = json!({ "name": "get_weather", "description": "Weather of a city",
            "inputSchema": { "type": "object", "properties": { "city": { "type": "string" } } } });
        let ask = json!({ "role": "user", "content": { "type": "text", "text": "Paris?" } });
        let uses = json!({ "role": "assistant", "content": [
            { "type": "tool_use", "id": "c1", "name": "get_weather", "input": { "city": "Paris" } }] });
        let results = json!({ "role": "user", "content": [
            { "type": "tool_result", "toolUseId": "c1", "content": [{ "type": "text", "text": "18C" }] }] });
        let params = |messages: Value, choice: &str| json!({ "messages": messages, "tools": [weather], "toolChoice": { "mode": choice }, "maxTokens": 50 });
        let ready = request_of(&params(json!([ask, uses, results]), "required")).unwrap();
        assert_eq!(ready.tools.len(), 1);
        assert_eq!(
            (ready.tools[0].name.as_str(), ready.tools[0].description.as_str()),
            ("get_weather", "Weather of a city")
        );
        assert_eq!(ready.tools[0].parameters, weather["inputSchema"]);
        assert!(ready.sampling.tools_required && !ready.tools_none);
        let call = crate::provider::ToolCall {
            id: "c1".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        };
        assert_eq!(
            ready.messages,
            [
                Message::User("Paris?".into()),
                Message::Assistant { text: String::new(), calls: vec![call] },
                Message::Tool { call_id: "c1".into(), content: "18C".into() },
            ]
        );
        assert!(request_of(&params(json!([ask]), "none")).unwrap().tools_none);
        // The loop's rules: every tool use answered by the next message, results alone.
        let (code, why) = err(&params(json!([ask, uses]), "auto"));
        assert_eq!(code, crate::jsonrpc::INVALID_PARAMS);
        assert!(why.contains("tool result missing"), "{why}");
        assert!(err(&params(json!([ask, uses, ask]), "auto")).1.contains("tool result missing"));
        let mixed = json!({ "role": "user", "content": [results["content"][0], { "type": "text", "text": "and" }] });
        assert!(err(&params(json!([ask, uses, mixed]), "auto")).1.contains("tool results only"));
        assert!(err(&params(json!([ask, results]), "auto")).1.contains("answers no tool use"));
        let stranger =
            json!({ "role": "assistant", "content": { "type": "tool_use", "id": "c2", "name": "rm", "input": {} } });
        assert!(err(&params(json!([ask, stranger]), "auto")).1.contains("does not offer"));
        // Tools the provider could not take are refused by name.
        let mut dotted = params(json!([ask]), "auto");
        dotted["tools"][0]["name"] = json!("get.weather");
        assert!(err(&dotted).1.contains("1 to 64 letters"));
        let mut twice = params(json!([ask]), "auto");
        twice["tools"] = json!([weather, weather]);
        assert!(err(&twice).1.contains("two tools"));
        let mut choice = params(json!([ask]), "auto");
        choice["toolChoice"]["mode"] = json!("any");
        assert!(err(&choice).1.contains("toolChoice mode"));
    }
}
