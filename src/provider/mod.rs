//! The model: any OpenAI-compatible Chat Completions endpoint (OpenAI, Ollama, llama.cpp's
//! server, vLLM, LM Studio, OpenRouter). One request is one blocking exchange on the
//! caller's thread: the body is streamed (SSE, read with the same parser as MCP) and text
//! deltas reach the caller as they arrive; a JSON answer is accepted too. A cancellation
//! shuts the request's own agent down, which ends a blocked read at once.
//!
//! Retries belong to the agent loop (it knows whether anything was streamed); this module
//! classifies failures (`ProviderError`) and reads `Retry-After`.

pub mod config;
pub(crate) mod stream;

use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_json::{Value, json};

pub use config::ProviderConfig;

/// One message of the conversation, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    /// A user message of text and images (a server's sampling request); images go as data
    /// URLs, which OpenAI-compatible endpoints with vision take.
    UserParts(Vec<Part>),
    Assistant {
        text: String,
        calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        content: String,
    },
}

/// A piece of a `UserParts` message.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// Base64 `data` of an image of type `mime`.
    Image {
        mime: String,
        data: String,
    },
}

impl Part {
    /// The text of `parts`, an image as `[image: <type>]`: for where a message is shown or
    /// saved as text (such messages are sampling requests, never part of a conversation).
    pub fn text_of(parts: &[Part]) -> String {
        parts
            .iter()
            .map(|part| match part {
                Part::Text(text) => text.clone(),
                Part::Image { mime, .. } => format!("[image: {mime}]"),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn len(&self) -> usize {
        match self {
            Part::Text(text) => text.len(),
            Part::Image { mime, data } => mime.len() + data.len(),
        }
    }
}

impl Message {
    /// The bytes of text (and image data) it carries.
    pub fn size(&self) -> usize {
        match self {
            Message::System(t) | Message::User(t) => t.len(),
            Message::UserParts(parts) => parts.iter().map(Part::len).sum(),
            Message::Assistant { text, calls } => text.len() + calls.iter().map(|c| c.arguments.len()).sum::<usize>(),
            Message::Tool { content, .. } => content.len(),
        }
    }
}

/// A tool call the model made. `arguments` is the raw JSON text the model wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    Stop,
    ToolCalls,
    /// The answer was cut off (`length`).
    Length,
    Other(String),
}

/// Token counts, as far as the endpoint reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
}

/// One model answer.
#[derive(Debug, Clone)]
pub struct Completion {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub finish: Finish,
    pub usage: Option<Usage>,
    /// Bytes of text that reached the caller as deltas (the rest, if any, was not streamed).
    pub streamed: usize,
}

/// Why a request produced no completion. Messages keep the HTTP status in parentheses, so
/// a person (and the loop's classification) can tell them apart.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ProviderError {
    /// 401 or 403: the key was refused. Never retried; the key is never shown.
    Auth { status: u16 },
    /// 429: retried after `Retry-After` when the endpoint gave one.
    RateLimited { retry_after: Option<Duration> },
    /// 5xx: retried.
    Unavailable { status: u16, retry_after: Option<Duration> },
    /// Any other status, with the endpoint's message (bounded, one line).
    Http { status: u16, message: String },
    /// The connection could not be made or broke before an answer.
    Connect(String),
    /// No byte within the idle timeout.
    Timeout,
    /// The stream broke off or was not an answer.
    Stream(String),
    /// The endpoint refused the content (`content_filter`).
    ContentFilter,
    /// The answer grew past nod's bound (text and tool calls, or their number). Not retried:
    /// the same request would do the same.
    TooLarge(String),
    /// The request was cancelled.
    Cancelled,
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderError::Auth { status } => write!(f, "the model endpoint refused the API key ({status})"),
            ProviderError::RateLimited { .. } => f.write_str("the model endpoint is rate limiting requests (429)"),
            ProviderError::Unavailable { status, .. } => write!(f, "the model endpoint is unavailable ({status})"),
            ProviderError::Http { status, message } => write!(f, "the model endpoint answered ({status}): {message}"),
            ProviderError::Connect(why) => write!(f, "cannot reach the model endpoint: {why}"),
            ProviderError::Timeout => f.write_str("the model endpoint timed out"),
            ProviderError::Stream(why) => write!(f, "the model's answer broke off: {why}"),
            ProviderError::ContentFilter => f.write_str("the model endpoint refused the content (content_filter)"),
            ProviderError::TooLarge(why) => write!(f, "the model's answer was cut off: {why}"),
            ProviderError::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for ProviderError {}

impl ProviderError {
    /// Whether a new attempt may succeed.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::Unavailable { .. }
                | ProviderError::Connect(_)
                | ProviderError::Stream(_)
        )
    }

    /// The wait the endpoint asked for.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::RateLimited { retry_after } | ProviderError::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// What to ask: the messages, the tools, and whether tools may be called now.
pub struct Request<'a> {
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
    pub tool_choice_none: bool,
    /// A server's sampling request's own settings (none for the agent's requests).
    pub sampling: Option<&'a Sampling>,
}

/// What a sampling request may set of the completion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    pub max_tokens: u64,
    pub temperature: Option<f64>,
    pub stop: Vec<String>,
    /// The server's tools must be used (its `toolChoice` mode `required`).
    pub tools_required: bool,
}

/// What the agent needs of a model: one request, its text streamed to `on_text`, ended at
/// once by `cancel`. `Provider` is the HTTP one; the agent's unit tests script one in process.
pub trait Model: Send + Sync {
    fn complete(
        &self,
        req: &Request<'_>,
        cancel: &crate::util::Trigger,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion, ProviderError>;

    /// The model's name and endpoint.
    fn config(&self) -> &ProviderConfig;

    /// The same model for a subagent, with connection state of its own.
    fn fork(&self) -> std::sync::Arc<dyn Model>;
}

impl Model for Provider {
    fn complete(
        &self,
        req: &Request<'_>,
        cancel: &crate::util::Trigger,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion, ProviderError> {
        Provider::complete(self, req, cancel, on_text)
    }

    fn config(&self) -> &ProviderConfig {
        &self.config
    }

    fn fork(&self) -> std::sync::Arc<dyn Model> {
        std::sync::Arc::new(Provider::new(self.config.clone()))
    }
}

/// A Chat Completions client.
pub struct Provider {
    config: ProviderConfig,
    /// Set once the endpoint refused `stream_options` (some servers do): not sent again.
    no_stream_options: std::sync::atomic::AtomicBool,
    /// The agent that requests share (its connections are kept), and the trigger whose
    /// firing shuts it down; a request under another trigger gets a new agent.
    shared: std::sync::Mutex<Option<(ureq::Agent, crate::util::Trigger)>>,
}

impl Provider {
    pub fn new(config: ProviderConfig) -> Provider {
        Provider {
            config,
            no_stream_options: std::sync::atomic::AtomicBool::new(false),
            shared: std::sync::Mutex::new(None),
        }
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// Sends one request and reads the answer, passing text deltas to `on_text` as they
    /// arrive. `cancel` ends it at once.
    pub fn complete(
        &self,
        req: &Request<'_>,
        cancel: &crate::util::Trigger,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion, ProviderError> {
        use std::sync::atomic::Ordering;
        let with_options = !self.no_stream_options.load(Ordering::SeqCst);
        match self.exchange(req, cancel, on_text, with_options) {
            // A server that refuses stream_options says so in a 400; once without them.
            Err(ProviderError::Http { status: 400, message }) if with_options && message.contains("stream_options") => {
                self.no_stream_options.store(true, Ordering::SeqCst);
                self.exchange(req, cancel, on_text, false)
            }
            other => other,
        }
    }

    fn exchange(
        &self,
        req: &Request<'_>,
        cancel: &crate::util::Trigger,
        on_text: &mut dyn FnMut(&str),
        with_options: bool,
    ) -> Result<Completion, ProviderError> {
        if cancel.is_fired() {
            return Err(ProviderError::Cancelled);
        }
        let agent = self.agent(cancel);
        let body = body(&self.config.model, req, with_options);
        let url = format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'));
        let mut builder = agent
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "text/event-stream, application/json");
        if let Some(key) = &self.config.api_key {
            builder = builder.header("Authorization", format!("Bearer {key}"));
        }
        let sent = builder.send(&body[..]);
        let resp = match sent {
            Ok(resp) => resp,
            Err(_) if cancel.is_fired() => return Err(ProviderError::Cancelled),
            Err(ureq::Error::Timeout(_)) => return Err(ProviderError::Timeout),
            Err(err) => return Err(ProviderError::Connect(crate::util::one_line(&err.to_string()))),
        };
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(refusal(resp));
        }
        let result = stream::read(resp, on_text);
        match result {
            Err(_) if cancel.is_fired() => Err(ProviderError::Cancelled),
            other => other,
        }
    }

    /// The shared agent, or a new one that `cancel` shuts down (ending the request in
    /// flight at once).
    fn agent(&self, cancel: &crate::util::Trigger) -> ureq::Agent {
        let mut shared = self.shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((agent, trigger)) = shared.as_ref()
            && trigger.same(cancel)
        {
            return agent.clone();
        }
        let agent = crate::net::streaming_agent(self.config.connect_timeout, self.config.idle_timeout);
        let stop = agent.clone();
        cancel.on_fire(move || stop.shutdown());
        *shared = Some((agent.clone(), cancel.clone()));
        agent
    }
}

/// The request body (agent-reference 3.2), serialized straight from the conversation: no
/// JSON tree of the whole history is built per step.
fn body(model: &str, req: &Request<'_>, with_options: bool) -> Vec<u8> {
    let tools = !req.tools.is_empty();
    let body = Body {
        model,
        messages: req.messages,
        stream: true,
        stream_options: with_options.then_some(StreamOptions { include_usage: true }),
        tools: tools.then_some(Tools(req.tools)),
        tool_choice: tools.then_some(match req.sampling {
            _ if req.tool_choice_none => "none",
            Some(sampling) if sampling.tools_required => "required",
            _ => "auto",
        }),
        parallel_tool_calls: tools.then_some(true),
        max_tokens: req.sampling.map(|s| s.max_tokens),
        temperature: req.sampling.and_then(|s| s.temperature),
        stop: req.sampling.map(|s| s.stop.as_slice()).filter(|stop| !stop.is_empty()),
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: &'a [Message],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop: Option<&'a [String]>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

struct Tools<'a>(&'a [ToolSpec]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
        }
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        serializer.collect_seq(self.0.iter().map(|t| Tool {
            kind: "function",
            function: Function { name: &t.name, description: &t.description, parameters: &t.parameters },
        }))
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        #[derive(Serialize)]
        struct Call<'a> {
            id: &'a str,
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        let mut map = serializer.serialize_map(None)?;
        match self {
            Message::System(text) => {
                map.serialize_entry("role", "system")?;
                map.serialize_entry("content", text)?;
            }
            Message::User(text) => {
                map.serialize_entry("role", "user")?;
                map.serialize_entry("content", text)?;
            }
            Message::UserParts(parts) => {
                let parts: Vec<Value> = parts
                    .iter()
                    .map(|part| match part {
                        Part::Text(text) => json!({ "type": "text", "text": text }),
                        Part::Image { mime, data } => {
                            json!({ "type": "image_url", "image_url": { "url": format!("data:{mime};base64,{data}") } })
                        }
                    })
                    .collect();
                map.serialize_entry("role", "user")?;
                map.serialize_entry("content", &parts)?;
            }
            Message::Assistant { text, calls } => {
                map.serialize_entry("role", "assistant")?;
                map.serialize_entry("content", &(!text.is_empty()).then_some(text))?;
                if !calls.is_empty() {
                    let calls: Vec<Call<'_>> = calls
                        .iter()
                        .map(|c| Call {
                            id: &c.id,
                            kind: "function",
                            function: Function { name: &c.name, arguments: &c.arguments },
                        })
                        .collect();
                    map.serialize_entry("tool_calls", &calls)?;
                }
            }
            Message::Tool { call_id, content } => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", call_id)?;
                map.serialize_entry("content", content)?;
            }
        }
        map.end()
    }
}

/// A non-2xx answer, classified, with the endpoint's own message where it gave one.
fn refusal(mut resp: crate::net::Response) -> ProviderError {
    let status = resp.status().as_u16();
    let retry_after = crate::net::header(&resp, "retry-after").and_then(retry_after);
    let body = resp.body_mut().with_config().limit(64 * 1024).read_to_vec().unwrap_or_default();
    match status {
        401 | 403 => ProviderError::Auth { status },
        429 => ProviderError::RateLimited { retry_after },
        500..=599 => ProviderError::Unavailable { status, retry_after },
        _ => ProviderError::Http { status, message: endpoint_message(&body) },
    }
}

/// The message of an error body: `error.message`, `error`, `detail` or `message`, else the
/// first 300 characters; one line.
fn endpoint_message(body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = value
        .pointer("/error/message")
        .or_else(|| value.get("error").filter(|e| e.is_string()))
        .or_else(|| value.get("detail"))
        .or_else(|| value.get("message"))
        .or_else(|| value.is_string().then_some(&value))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    // A web server's error page says nothing a person can use here.
    let head = text.trim_start().get(..15).unwrap_or("").to_ascii_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        return "an HTML page (not an API answer)".to_string();
    }
    crate::util::one_line(&text.chars().take(300).collect::<String>())
}

/// `Retry-After` in seconds (an HTTP date is taken as "soon": one second), capped at 30 s.
fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<f64>() {
        Ok(seconds) if seconds >= 0.0 && seconds.is_finite() => Duration::from_secs_f64(seconds),
        _ if !value.is_empty() => Duration::from_secs(1),
        _ => return None,
    };
    // What the endpoint asked, bounded only so that it stays a sane number: the agent
    // decides what it waits for (agent::turn's MAX_RETRY_WAIT).
    Some(wait.min(Duration::from_secs(24 * 3600)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_body_has_the_documented_shape() {
        let messages = vec![
            Message::System("sys".into()),
            Message::User("hi".into()),
            Message::Assistant {
                text: String::new(),
                calls: vec![ToolCall { id: "c1".into(), name: "t".into(), arguments: "{}".into() }],
            },
            Message::Tool { call_id: "c1".into(), content: "ok".into() },
        ];
        let tools = vec![ToolSpec { name: "t".into(), description: "d".into(), parameters: json!({"type": "object"}) }];
        let body =
            body("m", &Request { messages: &messages, tools: &tools, tool_choice_none: false, sampling: None }, true);
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["messages"][1], json!({"role": "user", "content": "hi"}));
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(body["messages"][2]["tool_calls"][0]["type"], "function");
        assert_eq!(
            body["tools"][0],
            json!({"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}})
        );
        assert_eq!((body["model"].as_str(), body["stream"].as_bool()), (Some("m"), Some(true)));
        assert_eq!(body["parallel_tool_calls"], true);
        assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(body["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}));
        assert_eq!(body["tool_choice"], "auto");
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        let bare = super::body(
            "m",
            &Request { messages: &messages, tools: &[], tool_choice_none: false, sampling: None },
            false,
        );
        let bare: Value = serde_json::from_slice(&bare).unwrap();
        assert!(
            bare.get("tools").is_none() && bare.get("tool_choice").is_none() && bare.get("stream_options").is_none()
        );
    }

    #[test]
    fn retry_after_is_read_and_capped() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(retry_after("1e12"), Some(Duration::from_secs(24 * 3600)));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(""), None);
    }

    #[test]
    fn endpoint_messages_are_found() {
        assert_eq!(endpoint_message(br#"{"error":{"message":"bad model"}}"#), "bad model");
        assert_eq!(endpoint_message(br#"{"detail":"nope"}"#), "nope");
        assert_eq!(endpoint_message(b"plain\ntext"), "plain text");
        assert_eq!(
            endpoint_message(b"<!DOCTYPE html><html><body>404</body></html>"),
            "an HTML page (not an API answer)"
        );
    }
}
