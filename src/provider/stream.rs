//! Reading a Chat Completions answer: an SSE stream of chunks (text deltas forwarded at
//! once, tool-call fragments assembled by `index`), or one JSON completion. Tolerates what
//! local servers send: a whole call in one chunk, missing ids, interleaved indexes,
//! `choices: null` on the usage chunk, `reasoning_content`, comments and CRLF.

use std::io::Read;

use serde_json::Value;

use super::{Completion, Finish, ProviderError, ToolCall, Usage};
use crate::net::{Response, sse};

/// Reads the answer of a successful response.
pub(super) fn read(mut resp: Response, on_text: &mut dyn FnMut(&str)) -> Result<Completion, ProviderError> {
    let content_type = crate::net::header(&resp, "content-type").unwrap_or("").to_ascii_lowercase();
    if !content_type.starts_with("text/event-stream") {
        let body = resp
            .body_mut()
            .with_config()
            .limit(crate::jsonrpc::frame::MAX_FRAME as u64)
            .read_to_vec()
            .map_err(|e| ProviderError::Stream(e.to_string()))?;
        let value: Value = serde_json::from_slice(&body)
            .map_err(|_| ProviderError::Stream("the answer is neither an event stream nor JSON".into()))?;
        return whole(&value, on_text);
    }
    events(&mut resp.into_body().into_reader(), on_text)
}

/// Reads an event stream of chunks to its answer.
pub(crate) fn events(reader: &mut dyn Read, on_text: &mut dyn FnMut(&str)) -> Result<Completion, ProviderError> {
    let mut parser = sse::Parser::default();
    let mut acc = Accumulator::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::TimedOut => return Err(ProviderError::Timeout),
            Err(err) => return Err(ProviderError::Stream(err.to_string())),
        };
        let mut events = Vec::new();
        // The events before a broken one count first: what is wrong first is what is said,
        // however the bytes were cut into reads (found by the stream fuzz target).
        let pushed = parser.push(&buf[..n], |e| events.push(e));
        for event in events {
            let data = event.data.trim();
            if data == "[DONE]" {
                return acc.finish();
            }
            if data.is_empty() {
                continue;
            }
            let chunk: Value =
                serde_json::from_str(data).map_err(|_| ProviderError::Stream("a chunk that is not JSON".into()))?;
            acc.chunk(&chunk, on_text)?;
        }
        pushed.map_err(|e| ProviderError::Stream(e.to_string()))?;
    }
    // Some servers end the stream without [DONE]; what arrived with a finish reason counts.
    if acc.finish.is_some() {
        acc.finish()
    } else {
        Err(ProviderError::Stream("the stream ended before the answer did".into()))
    }
}

/// A non-streamed completion.
fn whole(value: &Value, on_text: &mut dyn FnMut(&str)) -> Result<Completion, ProviderError> {
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        return Err(stream_error(error));
    }
    let choice =
        value.pointer("/choices/0").ok_or_else(|| ProviderError::Stream("the answer has no choices".into()))?;
    let message = &choice["message"];
    let text = message.get("content").and_then(Value::as_str).unwrap_or("").to_string();
    if !text.is_empty() {
        on_text(&text);
    }
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map_or_else(|| format!("call_{i}"), str::to_string),
                    name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or("").to_string(),
                    arguments: arguments(c.pointer("/function/arguments")),
                })
                .collect()
        })
        .unwrap_or_default();
    let finish = finish(choice.get("finish_reason").and_then(Value::as_str))?;
    Ok(Completion { streamed: text.len(), text, calls, finish: finish.unwrap_or(Finish::Stop), usage: usage(value) })
}

/// Arguments arrive as a JSON string, or (some servers) as an object.
fn arguments(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The most an answer may hold, text and tool calls together: an endpoint that streams
/// without end is cut off here, not when nod's memory runs out.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The most tool calls one answer may assemble (a step runs at most `MAX_CALLS_PER_STEP`
/// of them; the rest are refused to the model).
pub const MAX_CALLS: usize = 4096;

#[derive(Default)]
struct Accumulator {
    text: String,
    /// Calls by `index`, in order of first appearance (sorted by index when the answer ends).
    calls: Vec<(u64, ToolCall)>,
    /// `index` → position in `calls`: assembly stays linear however many calls interleave.
    slots: std::collections::HashMap<u64, usize>,
    /// Bytes held so far (text, names, ids, arguments).
    held: usize,
    finish: Option<Finish>,
    usage: Option<Usage>,
}

impl Accumulator {
    /// Counts `bytes` more against `MAX_ANSWER_BYTES`.
    fn hold(&mut self, bytes: usize) -> Result<(), ProviderError> {
        self.held += bytes;
        if self.held > MAX_ANSWER_BYTES {
            return Err(ProviderError::TooLarge(format!("the answer exceeded {} MiB", MAX_ANSWER_BYTES >> 20)));
        }
        Ok(())
    }

    fn chunk(&mut self, chunk: &Value, on_text: &mut dyn FnMut(&str)) -> Result<(), ProviderError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(error));
        }
        if let Some(usage) = usage(chunk) {
            self.usage = Some(usage);
        }
        let Some(choice) = chunk.pointer("/choices/0") else { return Ok(()) };
        let delta = &choice["delta"];
        if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            self.hold(text.len())?;
            on_text(text);
            self.text.push_str(text);
        }
        for (position, call) in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            let slot = match self.slots.get(&index) {
                Some(&slot) => slot,
                None => {
                    if self.calls.len() >= MAX_CALLS {
                        return Err(ProviderError::TooLarge(format!("more than {MAX_CALLS} tool calls in one answer")));
                    }
                    let fresh = ToolCall { id: String::new(), name: String::new(), arguments: String::new() };
                    self.calls.push((index, fresh));
                    self.slots.insert(index, self.calls.len() - 1);
                    self.calls.len() - 1
                }
            };
            let id = call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
            let name = call.pointer("/function/name").and_then(Value::as_str);
            let args = arguments(call.pointer("/function/arguments"));
            self.hold(id.map_or(0, str::len) + name.map_or(0, str::len) + args.len())?;
            let entry = &mut self.calls[slot].1;
            if let Some(id) = id {
                entry.id = id.to_string();
            }
            if let Some(name) = name {
                entry.name.push_str(name);
            }
            entry.arguments.push_str(&args);
        }
        if let Some(finish) = finish(choice.get("finish_reason").and_then(Value::as_str))? {
            self.finish = Some(finish);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Completion, ProviderError> {
        // The model's order is its indexes', whatever order the fragments came in.
        self.calls.sort_by_key(|(index, _)| *index);
        let calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|(index, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{index}");
                }
                call
            })
            .collect();
        let finish = self.finish.unwrap_or(if calls.is_empty() { Finish::Stop } else { Finish::ToolCalls });
        Ok(Completion { streamed: self.text.len(), text: self.text, calls, finish, usage: self.usage })
    }
}

fn finish(reason: Option<&str>) -> Result<Option<Finish>, ProviderError> {
    Ok(match reason {
        None => None,
        Some("stop") => Some(Finish::Stop),
        Some("tool_calls" | "function_call") => Some(Finish::ToolCalls),
        Some("length") => Some(Finish::Length),
        Some("content_filter") => return Err(ProviderError::ContentFilter),
        Some(other) => Some(Finish::Other(other.to_string())),
    })
}

fn usage(value: &Value) -> Option<Usage> {
    let usage = value.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        input: usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        output: usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
    })
}

fn stream_error(error: &Value) -> ProviderError {
    let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_string);
    ProviderError::Stream(crate::util::one_line(&message.chars().take(300).collect::<String>()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(chunks: &[Value]) -> (Completion, String) {
        let mut acc = Accumulator::default();
        let mut shown = String::new();
        for chunk in chunks {
            acc.chunk(chunk, &mut |t| shown.push_str(t)).unwrap();
        }
        (acc.finish().unwrap(), shown)
    }

    fn delta(delta: Value) -> Value {
        json!({ "choices": [{ "index": 0, "delta": delta, "finish_reason": null }] })
    }

    #[test]
    fn calls_are_assembled_by_index_even_interleaved() {
        let (done, shown) = run(&[
            delta(json!({ "role": "assistant", "content": "Let me " })),
            delta(json!({ "content": "look.", "reasoning_content": "hmm" })),
            delta(
                json!({ "tool_calls": [{ "index": 0, "id": "a", "function": { "name": "mcp_x_", "arguments": "" } }] }),
            ),
            delta(json!({ "tool_calls": [{ "index": 1, "function": { "name": "second", "arguments": "{}" } }] })),
            delta(json!({ "tool_calls": [{ "index": 0, "function": { "name": "one", "arguments": "{\"q\":" } }] })),
            delta(json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "1}" } }] })),
            json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] }),
            json!({ "choices": null, "usage": { "prompt_tokens": 10, "completion_tokens": 3 } }),
        ]);
        assert_eq!(shown, "Let me look.");
        assert_eq!(done.calls[0], ToolCall { id: "a".into(), name: "mcp_x_one".into(), arguments: "{\"q\":1}".into() });
        assert_eq!(done.calls[1].id, "call_1", "a missing id is made up");
        assert_eq!(done.finish, Finish::ToolCalls);
        assert_eq!(done.usage, Some(Usage { input: 10, output: 3 }));
    }

    #[test]
    fn an_endless_answer_and_a_flood_of_calls_are_cut_off_and_assembly_stays_linear() {
        let mut acc = Accumulator::default();
        let piece = delta(json!({ "content": "x".repeat(1 << 20) }));
        let mut failed = None;
        for _ in 0..(MAX_ANSWER_BYTES >> 20) + 2 {
            if let Err(err) = acc.chunk(&piece, &mut |_| {}) {
                failed = Some(err);
                break;
            }
        }
        assert!(matches!(failed, Some(ProviderError::TooLarge(_))), "{failed:?}");
        assert!(!failed.unwrap().retryable(), "the same request would do the same");
        // 4096 calls interleaved in fragments: each fragment finds its call at once.
        let mut acc = Accumulator::default();
        let started = std::time::Instant::now();
        for round in 0..2 {
            for i in 0..MAX_CALLS as u64 {
                let name = if round == 0 { "t" } else { "" };
                let call = json!({ "tool_calls": [{ "index": i, "function": { "name": name, "arguments": "{}" } }] });
                acc.chunk(&delta(call), &mut |_| {}).unwrap();
            }
        }
        assert_eq!(acc.calls.len(), MAX_CALLS);
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
        let one_more = json!({ "tool_calls": [{ "index": MAX_CALLS as u64, "function": { "name": "t" } }] });
        assert!(matches!(acc.chunk(&delta(one_more), &mut |_| {}), Err(ProviderError::TooLarge(_))));
    }

    #[test]
    fn a_whole_call_in_one_chunk_with_object_arguments() {
        let (done, _) = run(&[json!({ "choices": [{ "delta": { "tool_calls": [
            { "function": { "name": "t", "arguments": { "a": 1 } } }
        ] }, "finish_reason": "tool_calls" }] })]);
        assert_eq!(done.calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(done.calls[0].id, "call_0");
    }

    #[test]
    fn content_filter_and_errors_fail() {
        let mut acc = Accumulator::default();
        let filtered = json!({ "choices": [{ "delta": {}, "finish_reason": "content_filter" }] });
        assert!(matches!(acc.chunk(&filtered, &mut |_| {}), Err(ProviderError::ContentFilter)));
        let error = json!({ "error": { "message": "overloaded" } });
        assert!(
            matches!(Accumulator::default().chunk(&error, &mut |_| {}), Err(ProviderError::Stream(m)) if m == "overloaded")
        );
    }

    #[test]
    fn a_json_answer_is_one_completion() {
        let value = json!({ "choices": [{ "message": { "content": "hi", "tool_calls": [
            { "id": "c", "type": "function", "function": { "name": "t", "arguments": "{}" } }
        ] }, "finish_reason": "tool_calls" }], "usage": { "prompt_tokens": 1, "completion_tokens": 2 } });
        let mut shown = String::new();
        let done = whole(&value, &mut |t| shown.push_str(t)).unwrap();
        assert_eq!((shown.as_str(), done.calls.len(), done.finish), ("hi", 1, Finish::ToolCalls));
    }
}
