//! A model endpoint that fails in every way (issue 27, part 3): each case ends with a retry
//! or a clear error within the configured timeouts, never a hang or a panic, and the saved
//! conversation keeps the prompt asked before the failure.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ask::ask;
use crate::model::{Model, Step};
use crate::support::Env;

const PROMPT: &str = "what is the answer?";

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({ "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    format!("data: {chunk}\n\n")
}

/// A whole answer "The answer is 42." as one event stream.
fn whole_answer() -> String {
    let mut text = chunk(json!({ "role": "assistant", "content": "" }), None);
    for piece in ["The ans", "wer is ", "42."] {
        text.push_str(&chunk(json!({ "content": piece }), None));
    }
    text.push_str(&chunk(json!({}), Some("stop")));
    text + "data: [DONE]\n\n"
}

struct Ran {
    env: Env,
    model: Model,
    code: Option<i32>,
    report: Value,
    took: Duration,
}

/// `nod ask --json PROMPT` against `steps` (request_timeout_ms `timeout_ms`, if given).
fn run(steps: Vec<Step>, timeout_ms: Option<u64>) -> Ran {
    let env = Env::new();
    env.fixture(&[], json!({}));
    if let Some(ms) = timeout_ms {
        crate::ask::settings(&env, json!({ "request_timeout_ms": ms }));
    }
    let model = Model::start(steps);
    let started = Instant::now();
    let out = ask(&env, &model, &["--json", PROMPT]).run();
    out.within(60.0);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let report = serde_json::from_str(&out.text()).unwrap_or_else(|_| panic!("no report: {}", out.dump()));
    Ran { env, model, code: out.code, report, took: started.elapsed() }
}

/// The same broken answer to every attempt: nod retries, then fails naming `why`.
fn fails_after_retries(broken: impl Fn() -> Step, why: &str) -> Ran {
    let ran = run((0..4).map(|_| broken()).collect(), None);
    assert_eq!(ran.code, Some(1), "{}", ran.report);
    assert_eq!(ran.report["status"], "failed");
    let error = ran.report["error"].as_str().unwrap_or("");
    assert!(error.contains(why), "{error}");
    assert_eq!(ran.model.requests().len(), 4, "asked four times in all");
    saved_prompt_kept(&ran);
    ran
}

/// The conversation saved before the failure holds the prompt.
fn saved_prompt_kept(ran: &Ran) {
    let id = ran.report["session_id"].as_str().unwrap_or_else(|| panic!("no session id: {}", ran.report));
    let dir = ran.env.path("sessions");
    let saved: String = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(id))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(saved.contains(PROMPT), "session {id} keeps the prompt: {saved}");
}

#[test]
fn a_200_with_an_html_page_is_a_clear_error() {
    let page = || Step::Body(200, "text/html", "<html><body>Sign in to the proxy</body></html>".into());
    fails_after_retries(page, "neither an event stream nor JSON");
}

#[test]
fn garbage_in_the_stream_is_a_clear_error() {
    fails_after_retries(|| Step::Sse("data: {not json\n\ndata: [DONE]\n\n".into()), "a chunk that is not JSON");
}

#[test]
fn an_oversized_line_is_refused_without_holding_it() {
    let big = || Step::Sse(format!("data: {}\n\n", "x".repeat(9 << 20)));
    fails_after_retries(big, "larger than the 8 MiB frame limit");
}

#[test]
fn a_stream_closed_at_any_byte_is_asked_again_and_completes() {
    let whole = whole_answer();
    // Every 23rd byte, the stream ends there; the next attempt gets the whole answer.
    for cut in (1..whole.len()).step_by(23) {
        let ran = run(vec![Step::Sse(whole[..cut].to_string()), Step::Sse(whole.clone())], None);
        assert_eq!(ran.code, Some(0), "cut at {cut}: {}", ran.report);
        let answer = ran.report["final_output"].as_str().unwrap_or("");
        assert!(answer.ends_with("42."), "cut at {cut}: {answer:?}");
    }
}

#[test]
fn a_stalled_stream_ends_at_the_request_timeout() {
    let ran = run((0..4).map(|_| Step::Hang("The answer".into())).collect(), Some(500));
    assert_eq!(ran.code, Some(1), "{}", ran.report);
    assert!(ran.took < Duration::from_secs(30), "four stalls of 0.5 s and the pauses: {:?}", ran.took);
    saved_prompt_kept(&ran);
}

#[test]
fn a_missing_finish_reason_and_usage_only_chunks_still_end_the_answer() {
    let no_finish = format!("{}data: [DONE]\n\n", chunk(json!({ "content": "42" }), None));
    let ran = run(vec![Step::Sse(no_finish)], None);
    assert_eq!((ran.code, ran.report["final_output"].as_str()), (Some(0), Some("42")), "{}", ran.report);
    let usage_only = r#"data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":0}}"#.to_string()
        + "\n\ndata: [DONE]\n\n";
    let ran = run(vec![Step::Sse(usage_only)], None);
    assert_eq!(ran.code, Some(0), "{}", ran.report);
    assert_eq!(ran.report["usage"]["input_tokens"], 7, "the usage is counted: {}", ran.report);
}

#[test]
fn tool_call_fragments_out_of_order_are_put_together_by_index() {
    let search = |query: &str| json!({ "query": query }).to_string();
    let (q1, q0) = (search("second"), search("first"));
    let (head, tail) = q1.split_at(5);
    let stream = [
        chunk(
            json!({ "tool_calls": [{ "index": 1, "id": "b", "type": "function",
            "function": { "name": "capability_search", "arguments": head } }] }),
            None,
        ),
        chunk(
            json!({ "tool_calls": [{ "index": 0, "id": "a", "type": "function",
            "function": { "name": "capability_search", "arguments": q0 } }] }),
            None,
        ),
        chunk(json!({ "tool_calls": [{ "index": 1, "function": { "arguments": tail } }] }), Some("tool_calls")),
    ]
    .concat()
        + "data: [DONE]\n\n";
    let ran = run(vec![Step::Sse(stream), Step::Text("Found.".into())], None);
    assert_eq!(ran.code, Some(0), "{}", ran.report);
    let second = &ran.model.requests()[1]["messages"];
    let calls = second.as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap()["tool_calls"].clone();
    assert_eq!(calls[0]["function"]["arguments"], q0, "{calls}");
    assert_eq!(calls[1]["function"]["arguments"], q1, "{calls}");
}

#[test]
fn a_retry_after_storm_ends_with_a_clear_error_and_a_long_one_is_not_waited_for() {
    let limited = |after: &str| {
        Step::Status(429, json!({ "error": { "message": "slow down" } }), vec![("Retry-After".into(), after.into())])
    };
    let ran = run((0..4).map(|_| limited("1")).collect(), None);
    assert_eq!(ran.code, Some(1), "{} after {} requests", ran.report, ran.model.requests().len());
    assert!(
        ran.report["error"].as_str().unwrap_or("").contains("rate limiting requests (429)"),
        "{} after {} requests",
        ran.report,
        ran.model.raw_requests().len()
    );
    assert_eq!(ran.model.requests().len(), 4);
    assert!(ran.took >= Duration::from_secs(3), "each Retry-After honoured: {:?}", ran.took);
    saved_prompt_kept(&ran);
    // An hour is not waited for: the turn fails at once, saying so.
    let ran = run(vec![limited("3600")], None);
    assert_eq!(ran.code, Some(1), "{}", ran.report);
    let error = ran.report["error"].as_str().unwrap_or("");
    assert!(error.contains("retried after 3600 s, longer than nod waits (30 s)"), "{error}");
    assert!(ran.took < Duration::from_secs(20), "{:?}", ran.took);
    assert_eq!(ran.model.requests().len(), 1);
}
