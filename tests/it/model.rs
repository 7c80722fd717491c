//! A scripted fake model: an OpenAI-compatible Chat Completions endpoint on 127.0.0.1 that
//! answers each request with the next step of a script, in the real wire format (SSE chunks
//! with text deltas, tool-call fragments by index, a usage chunk and `[DONE]`, or JSON), and
//! records every request for the test to check.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
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
    /// An event stream of exactly this text (status 200), ending the connection after.
    Sse(String),
    /// A response of this status, content type and body, as they are.
    Body(u16, &'static str, String),
    /// Waits until the gate is opened (at most 20 s), then answers with the step.
    Gate(Gate, Box<Step>),
    /// Waits until a request whose first user message contains the key has arrived (at most
    /// 20 s), then answers with the step: proof that two agents ask at the same time.
    After(String, Box<Step>),
}

/// A gate a test opens.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }

    /// Whether it opened within `limit`.
    fn wait(&self, limit: Duration) -> bool {
        let guard = self.0.0.lock().unwrap();
        let (guard, _) = self.0.1.wait_timeout_while(guard, limit, |open| !*open).unwrap();
        *guard
    }
}

/// The first user message of a chat request (what routes it to a script).
pub fn first_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

pub struct Model {
    fx: Fixture,
}

impl Model {
    pub fn start(steps: Vec<Step>) -> Model {
        Model::routed(vec![("", steps)])
    }

    /// Several scripts: each request is answered from the first script whose key occurs in
    /// its first user message (a parent's prompt, a subagent's task), in that script's order.
    pub fn routed(scripts: Vec<(&str, Vec<Step>)>) -> Model {
        let scripts: Vec<(String, Mutex<VecDeque<Step>>)> =
            scripts.into_iter().map(|(key, steps)| (key.to_string(), Mutex::new(VecDeque::from(steps)))).collect();
        let seen: Arc<(Mutex<Vec<String>>, Condvar)> = Arc::default();
        let fx = Fixture::start(move |req| {
            if req.path.ends_with("/models") {
                return Reply::json(&json!({ "object": "list", "data": [{ "id": "fake", "object": "model" }] }));
            }
            if !req.path.ends_with("/chat/completions") || req.method != "POST" {
                return Reply::status(404);
            }
            let first = first_user(&req.json);
            seen.0.lock().unwrap().push(first.clone());
            seen.1.notify_all();
            let Some((_, script)) = scripts.iter().find(|(key, _)| first.contains(key.as_str())) else {
                return Reply::json(&json!({ "error": { "message": "no script for this request" } })).code(500);
            };
            let step = script.lock().unwrap().pop_front();
            match step {
                Some(step) => reply(req, step, &seen),
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

fn reply(_req: &Request, step: Step, seen: &(Mutex<Vec<String>>, Condvar)) -> Reply {
    match step {
        Step::Gate(gate, step) => {
            if !gate.wait(Duration::from_secs(20)) {
                return Reply::json(&json!({ "error": { "message": "the test never opened the gate" } })).code(400);
            }
            reply(_req, *step, seen)
        }
        Step::After(key, step) => {
            let guard = seen.0.lock().unwrap();
            let (guard, _) = seen
                .1
                .wait_timeout_while(guard, Duration::from_secs(20), |s| !s.iter().any(|m| m.contains(&key)))
                .unwrap();
            if !guard.iter().any(|m| m.contains(&key)) {
                return Reply::json(&json!({ "error": { "message": format!("no request for {key} came meanwhile") } }))
                    .code(400);
            }
            drop(guard);
            reply(_req, *step, seen)
        }
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
        Step::Sse(text) => Reply::sse(&[text]),
        Step::Body(status, content_type, body) => Reply::status(status).body(content_type, body),
    }
}
