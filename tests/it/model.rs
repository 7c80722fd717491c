//! A scripted fake model: an OpenAI-compatible Chat Completions endpoint on 127.0.0.1 that
//! answers each request with the next step of a script, in the real wire format (SSE chunks
//! with text deltas, tool-call fragments by index, a usage chunk and `[DONE]`, or JSON), and
//! records every request for the test to check.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::http_fixture::{Fixture, Reply, Request};

/// One scripted answer.
#[derive(Clone)]
pub enum Step {
    /// Text, streamed in pieces of a few characters.
    Text(String),
    /// Tool calls (name, arguments as JSON text), streamed as fragments; text before them.
    Calls(String, Vec<(String, String)>),
    /// The same, as one whole chunk per call without ids (as some local servers send).
    WholeCalls(Vec<(String, String)>),
    /// A non-streamed JSON completion with text.
    Json(String),
    /// An HTTP status with a body and headers.
    Status(u16, Value, Vec<(String, String)>),
    /// Text that stops mid-stream: no finish reason, no [DONE].
    Cut(String),
    /// A stream that sends its first chunk, then holds the connection open.
    Hang(String),
}

pub struct Model {
    fx: Fixture,
}

impl Model {
    pub fn start(steps: Vec<Step>) -> Model {
        let script = Arc::new(Mutex::new(VecDeque::from(steps)));
        let queue = script.clone();
        let fx = Fixture::start(move |req| {
            if req.path.ends_with("/models") {
                return Reply::json(&json!({ "object": "list", "data": [{ "id": "fake", "object": "model" }] }));
            }
            if !req.path.ends_with("/chat/completions") || req.method != "POST" {
                return Reply::status(404);
            }
            match queue.lock().unwrap().pop_front() {
                Some(step) => reply(req, step),
                None => Reply::json(&json!({ "error": { "message": "the test script is exhausted" } })).code(500),
            }
        });
        Model { fx }
    }

    /// The base URL to give as NOD_BASE_URL.
    pub fn url(&self) -> String {
        self.fx.url("/v1")
    }

    /// Every chat request's body, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.fx.requests().into_iter().filter(|r| r.path.ends_with("/chat/completions")).map(|r| r.json).collect()
    }

    /// Every chat request, headers included.
    pub fn raw_requests(&self) -> Vec<Request> {
        self.fx.requests().into_iter().filter(|r| r.path.ends_with("/chat/completions")).collect()
    }
}

/// The names of the tools a request offered.
pub fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The `tool` messages of a request: (tool_call_id, content).
pub fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (m["tool_call_id"].as_str().unwrap_or("").to_string(), m["content"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({ "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    format!("data: {chunk}\n\n")
}

fn usage() -> String {
    let chunk = json!({ "id": "c1", "object": "chat.completion.chunk", "choices": [],
        "usage": { "prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110 } });
    format!("data: {chunk}\n\ndata: [DONE]\n\n")
}

fn text_chunks(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(7).map(|piece| chunk(json!({ "content": piece.iter().collect::<String>() }), None)).collect()
}

fn reply(_req: &Request, step: Step) -> Reply {
    match step {
        Step::Text(text) => {
            let mut parts = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
            parts.extend(text_chunks(&text));
            parts.push(chunk(json!({}), Some("stop")));
            parts.push(usage());
            Reply::sse(&parts)
        }
        Step::Calls(text, calls) => {
            let mut parts = vec![chunk(json!({ "role": "assistant" }), None)];
            parts.extend(text_chunks(&text));
            for (index, (name, arguments)) in calls.iter().enumerate() {
                let head = json!({ "tool_calls": [{ "index": index, "id": format!("call_{index}_x"), "type": "function",
                    "function": { "name": name, "arguments": "" } }] });
                parts.push(chunk(head, None));
                let chars: Vec<char> = arguments.chars().collect();
                for piece in chars.chunks(5) {
                    let fragment = json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece.iter().collect::<String>() } }] });
                    parts.push(chunk(fragment, None));
                }
            }
            parts.push(chunk(json!({}), Some("tool_calls")));
            parts.push(usage());
            Reply::sse(&parts)
        }
        Step::WholeCalls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(name, arguments)| json!({ "function": { "name": name, "arguments": arguments } }))
                .collect();
            Reply::sse(&[chunk(json!({ "tool_calls": calls }), Some("tool_calls")), "data: [DONE]\n\n".to_string()])
        }
        Step::Json(text) => Reply::json(&json!({ "id": "c1", "object": "chat.completion", "model": "fake",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 5, "completion_tokens": 2 } })),
        Step::Status(status, body, headers) => {
            let mut reply = Reply::json(&body).code(status);
            for (name, value) in headers {
                reply = reply.header(&name, &value);
            }
            reply
        }
        Step::Cut(text) => {
            let mut parts = vec![chunk(json!({ "role": "assistant" }), None)];
            parts.extend(text_chunks(&text));
            Reply::sse(&parts)
        }
        Step::Hang(text) => Reply::sse(&text_chunks(&text)).hold().then(Duration::from_secs(600), ""),
    }
}
