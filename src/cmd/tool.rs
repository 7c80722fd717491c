//! `nod mcp tool list` and `nod mcp tool call`: one call, or a stream of calls from stdin
//! (`--jsonl`) with up to N in flight on the one connection, results in input order.

use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use crossbeam_channel::{Receiver, select};
use serde_json::{Value, json};

use super::render::{self, row};
use super::{Context, Exit, One, print, print_json, print_listing, stdout_is_terminal};
use crate::cli::ToolCall;
use crate::dispatch::{CallError, CallUpdate, Progress};
use crate::session::catalog::{self, Kind};
use crate::session::elicit::{Asked, InputRequired, PolicyHandler};
use crate::session::{Call, Session};

pub fn list(server: &str, json: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let one = One::plain(server, ctx)?;
    let listing = catalog::list(one.session(), Kind::Tools)?;
    warn_rejected(server, &listing.rejected);
    if json && listing.unusable.is_empty() {
        print_listing("tools", &listing.items)?;
    } else if json {
        let unusable: serde_json::Map<String, Value> =
            listing.unusable.iter().map(|(name, why)| (name.clone(), json!(why))).collect();
        print_json(&json!({ "tools": listing.items, "unusable": unusable }))?;
    } else {
        let terminal = stdout_is_terminal();
        let mut out = String::new();
        for tool in &listing.items {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
            let mut about = tool.get("description").and_then(Value::as_str).unwrap_or("").to_string();
            if catalog::requires_task(tool) {
                about.push_str(" [task required]");
            }
            if let Some(why) = listing.unusable(name) {
                about.push_str(&format!(" [unusable: {why}]"));
            }
            out.push_str(&row(name, &about, terminal));
        }
        print(&out)?;
    }
    Ok(Exit::Ok)
}

/// Why nod will not call `tool`, from the server's listing: a schema nod cannot use, or a
/// tool that requires MCP Tasks. A tool the listing does not have is left to the server.
fn refusal(session: &Session, tool: &str) -> anyhow::Result<Option<String>> {
    let listing = match catalog::list(session, Kind::Tools) {
        Ok(listing) => listing,
        // A server without tools is told so by the call itself; one whose listing fails
        // still gets the call (its own answer says more than nod could).
        Err(err) => {
            log::debug!("server {}: tools/list before the call failed: {err:#}", session.name);
            return Ok(None);
        }
    };
    if let Some(why) = listing.unusable(tool) {
        return Ok(Some(format!("tool {tool} is unusable: {why}")));
    }
    if listing.find(tool).is_some_and(catalog::requires_task) {
        return Ok(Some(format!(
            "tool {tool} requires MCP Tasks (execution.taskSupport \"required\"), which nod does not implement"
        )));
    }
    Ok(None)
}

pub(super) fn warn_rejected(server: &str, rejected: &[String]) {
    for why in rejected {
        eprintln!("nod: server {server}: ignored {}", crate::util::one_line(why));
    }
}

pub fn call(call: ToolCall, ctx: &Context) -> anyhow::Result<Exit> {
    let arguments = match &call.arguments {
        Some(text) if !call.jsonl => Some(parse_arguments(text)?),
        _ => None,
    };
    let (input_tx, input_rx) = crossbeam_channel::unbounded();
    let handler = Arc::new(PolicyHandler { policy: call.elicit, input_required: Some(input_tx) });
    let one = One::connect(&call.server, handler, ctx)?;
    let session = one.session();
    if let Some(why) = refusal(session, &call.tool).map_err(|e| e.context(format!("server {}", call.server)))? {
        bail!("server {}: {why}; nothing was sent", call.server);
    }
    if call.jsonl {
        return jsonl(&one, &call, &input_rx, ctx);
    }
    let arguments = arguments.unwrap_or_else(|| json!({}));
    let pending = session.call_tool(&call.tool, &arguments, None);
    let label = format!("{}/{}", call.server, call.tool);
    match wait(session, pending, &input_rx, &label)? {
        Outcome::Result(result) => print_result(&call, &result, ctx),
        // The server needs the user to visit a URL first (-32042): input required.
        Outcome::Failed(CallError::Rpc(error)) if error.code == URL_ELICITATION_REQUIRED => {
            match url_required(&call.server, &error) {
                Some(input) => report_input_required(&input, call.json),
                None => {
                    eprintln!("nod: server {}: tool {}: {}", call.server, call.tool, CallError::Rpc(error));
                    Ok(Exit::ToolError)
                }
            }
        }
        // The server refused the call (unknown tool, bad arguments): the call failed, like
        // isError, and the connection is fine.
        Outcome::Failed(CallError::Rpc(error)) => {
            let shown = ctx.redactor.redact(&CallError::Rpc(error).to_string());
            eprintln!("nod: server {}: tool {}: {shown}", call.server, call.tool);
            Ok(Exit::ToolError)
        }
        Outcome::Failed(err) => {
            Err(anyhow::Error::new(err).context(format!("server {}: tool {}", call.server, call.tool)))
        }
        Outcome::InputRequired(input) => report_input_required(&input, call.json),
    }
}

/// MCP 2025-11-25: the request cannot go on until the user completes a URL elicitation.
const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The first URL elicitation of a -32042 error, as an input-required result.
fn url_required(server: &str, error: &crate::jsonrpc::ResponseError) -> Option<InputRequired> {
    let elicitations = error.data.as_ref()?.get("elicitations")?.as_array()?;
    let first = elicitations.iter().find(|e| e.get("mode").and_then(Value::as_str) == Some("url"))?;
    let text = |key: &str| first.get(key).and_then(Value::as_str).map(str::to_string);
    Some(InputRequired {
        server: server.to_string(),
        mode: "url".into(),
        message: text("message").unwrap_or_else(|| error.message.clone()),
        requested_schema: None,
        url: Some(text("url")?),
        elicitation_id: text("elicitationId"),
    })
}

fn parse_arguments(text: &str) -> anyhow::Result<Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => bail!("tool arguments must be a JSON object, like {{\"path\": \"/tmp\"}}"),
        Err(err) => bail!("tool arguments are not valid JSON: {err}"),
    }
}

enum Outcome {
    Result(Value),
    Failed(CallError),
    InputRequired(InputRequired),
}

/// Waits for a call, showing progress on stderr. An elicitation the policy could not answer
/// cancels the call.
fn wait(session: &Session, mut pending: Call, input: &Receiver<Asked>, label: &str) -> anyhow::Result<Outcome> {
    let mut shown = ProgressLine::new(label);
    loop {
        select! {
            recv(pending.updates()) -> update => match update {
                Ok(CallUpdate::Progress(p)) => shown.show(&p),
                Ok(CallUpdate::Done(result)) => match session.settle(&mut pending, result) {
                    Some(Ok(result)) => return Ok(Outcome::Result(result)),
                    Some(Err(err)) => return Ok(Outcome::Failed(err)),
                    // Replayed on a new session: keep waiting.
                    None => {}
                },
                Err(_) => bail!("nod is shutting down"),
            },
            recv(pending.gone()) -> _ => bail!("nod is shutting down"),
            // A request the server has cancelled already is dropped (CAN-5).
            recv(input) -> request => if let Ok(Asked { input, responder }) = request && !responder.is_cancelled() {
                // The call is cancelled before the server hears the answer, so a fast server
                // cannot finish the call in between (the frames leave in this order).
                session.cancel(&pending, "the server asked for input that nod could not collect");
                responder.respond(Ok(json!({ "action": "cancel" })));
                return Ok(Outcome::InputRequired(input));
            },
        }
    }
}

/// Progress on stderr, at most ten lines a second a call.
struct ProgressLine<'a> {
    label: &'a str,
    last: Option<Instant>,
}

impl<'a> ProgressLine<'a> {
    fn new(label: &'a str) -> ProgressLine<'a> {
        ProgressLine { label, last: None }
    }

    fn show(&mut self, p: &Progress) {
        let now = Instant::now();
        if self.last.is_some_and(|at| now.duration_since(at) < Duration::from_millis(100)) {
            return;
        }
        self.last = Some(now);
        let amount = match p.total {
            Some(total) => format!("{}/{}", number(p.progress), number(total)),
            None => number(p.progress),
        };
        let message = p.message.as_deref().map(|m| format!(" {}", crate::util::terminal_safe(m))).unwrap_or_default();
        eprintln!("nod: {}: progress {amount}{message}", self.label);
    }
}

fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n:.2}") }
}

fn print_result(call: &ToolCall, result: &Value, ctx: &Context) -> anyhow::Result<Exit> {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    if call.json && is_error {
        print_json(&redact_value(result, ctx))?;
    } else if call.json {
        print_json(result)?;
    } else {
        let content = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let mut text = render::blocks(content, stdout_is_terminal());
        if content.is_empty()
            && let Some(structured) = result.get("structuredContent")
        {
            text = format!("{}\n", serde_json::to_string_pretty(structured)?);
        }
        if is_error {
            // A server may echo what it was sent (headers, environment) into an error.
            eprint!(
                "nod: server {}: tool {} reported an error:\n{}",
                call.server,
                call.tool,
                render::safe(&ctx.redactor.redact(&text), true)
            );
        } else {
            print(&text)?;
        }
    }
    Ok(if is_error { Exit::ToolError } else { Exit::Ok })
}

fn report_input_required(input: &InputRequired, json: bool) -> anyhow::Result<Exit> {
    eprintln!(
        "nod: server {} asked for input ({} mode): {}; rerun with --elicit defaults, decline or cancel to answer it",
        input.server,
        input.mode,
        crate::util::terminal_safe(&crate::util::one_line(&input.message))
    );
    if json {
        print_json(&input.to_json())?;
    } else {
        print(&format!("{}\n", serde_json::to_string(&input.to_json())?))?;
    }
    Ok(Exit::InputRequired)
}

/// One line of `--jsonl` input: a call in flight, or an answer already known.
enum Slot {
    Call(Call, Arc<Session>),
    Ready(Value, bool),
}

fn jsonl(one: &One, call: &ToolCall, input: &Receiver<Asked>, ctx: &Context) -> anyhow::Result<Exit> {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut slots: VecDeque<Slot> = VecDeque::new();
    let mut failed = false;
    let mut lost = false;
    let mut eof = false;
    let mut line_no = 0usize;
    let label = format!("{}/{}", call.server, call.tool);
    loop {
        while !eof && slots.len() < call.parallel {
            match lines.next() {
                None => eof = true,
                Some(line) => {
                    let line = line?;
                    line_no += 1;
                    if line.trim().is_empty() {
                        continue;
                    }
                    slots.push_back(match parse_arguments(&line) {
                        Ok(arguments) => match one.live() {
                            Ok(session) => Slot::Call(session.call_tool(&call.tool, &arguments, None), session),
                            Err(err) => {
                                lost = true;
                                let message = ctx.redactor.redact(&format!("{err:#}"));
                                Slot::Ready(json!({ "error": { "message": message } }), true)
                            }
                        },
                        Err(err) => {
                            Slot::Ready(json!({ "error": { "message": format!("line {line_no}: {err}") } }), true)
                        }
                    });
                }
            }
        }
        let Some(slot) = slots.pop_front() else { break };
        let (value, bad) = match slot {
            Slot::Ready(value, bad) => (value, bad),
            Slot::Call(pending, session) => match wait(&session, pending, input, &label)? {
                Outcome::Result(result) => {
                    let bad = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    // An error a server reports may echo what it was sent.
                    let result = if bad { redact_value(&result, ctx) } else { result };
                    (result, bad)
                }
                Outcome::Failed(CallError::Rpc(error))
                    if error.code == URL_ELICITATION_REQUIRED && url_required(&call.server, &error).is_some() =>
                {
                    for slot in slots.drain(..) {
                        if let Slot::Call(pending, session) = slot {
                            session.cancel(&pending, "the run stopped: a server asked for input");
                        }
                    }
                    let input = url_required(&call.server, &error).expect("checked");
                    return report_input_required(&input, false);
                }
                Outcome::Failed(err) => {
                    lost |= matches!(
                        err,
                        CallError::Disconnected(_) | CallError::Invalid { .. } | CallError::NotOffered(_)
                    );
                    (error_json(&err, ctx), true)
                }
                Outcome::InputRequired(request) => {
                    for slot in slots.drain(..) {
                        if let Slot::Call(pending, session) = slot {
                            session.cancel(&pending, "the run stopped: a server asked for input");
                        }
                    }
                    return report_input_required(&request, false);
                }
            },
        };
        failed |= bad;
        print(&format!("{}\n", serde_json::to_string(&value)?))?;
    }
    Ok(if lost {
        Exit::Failure
    } else if failed {
        Exit::ToolError
    } else {
        Exit::Ok
    })
}

/// A JSON value with every secret redacted from its strings.
fn redact_value(value: &Value, ctx: &Context) -> Value {
    match value {
        Value::String(text) => Value::String(ctx.redactor.redact(text)),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_value(v, ctx)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), redact_value(v, ctx))).collect()),
        other => other.clone(),
    }
}

fn error_json(err: &CallError, ctx: &Context) -> Value {
    match err {
        CallError::Rpc(error) => {
            let message = ctx.redactor.redact(&error.message);
            let mut out = json!({ "error": { "code": error.code, "message": message } });
            if let Some(data) = &error.data {
                out["error"]["data"] = redact_value(data, ctx);
            }
            out
        }
        other => {
            json!({ "error": { "message": ctx.redactor.redact(&other.to_string()) } })
        }
    }
}
