//! `nod mcp tool call --jsonl`: one arguments object per stdin line, up to `--parallel` calls
//! in flight on the one connection, one result per line in input order. A line that failed
//! is `{"error": {"kind", "message", "server", "line"}}`; when any failed, one summary line
//! on stderr names the server and the counts.

use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::{Value, json};

use super::wait::{Asks, HeldLines, Outcome, URL_ELICITATION_REQUIRED, report_input_required, url_required, wait};
use crate::cli::ToolCall;
use crate::cmd::failure::{self, Kind};
use crate::cmd::{Context, Exit};
use crate::dispatch::CallError;
use crate::session::{Call, Session};

/// One line of input: a call in flight, or an answer already known.
enum Slot {
    Call(Call, Arc<Session>, usize),
    Ready(Value, Option<Failed>),
}

/// A failed line: its message, for the summary, and whether the connection was lost with
/// it (or never usable), which makes the run a connection error.
struct Failed {
    message: String,
    lost: bool,
}

/// `live` is the server's session now (restarted within its restart_limit if it died).
pub fn run(
    live: &dyn Fn() -> anyhow::Result<Arc<Session>>,
    call: &ToolCall,
    asks: &mut Asks<'_, '_>,
    ctx: &Context,
) -> anyhow::Result<Exit> {
    // Read in blocks of our own, so that nod knows when the next line needs a read that may
    // wait (a producer that sends a line only after it has seen the last result).
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut text = String::new();
    let mut held = HeldLines::new();
    let mut slots: VecDeque<Slot> = VecDeque::new();
    let mut failures: Vec<Failed> = Vec::new();
    let mut calls = 0usize;
    let mut eof = false;
    let mut line_no = 0usize;
    let label = format!("{}/{}", call.server, call.tool);
    // One answer at a time: until the stream ends, the server's worker runs with a short
    // slice and looks for the next answer before it sleeps.
    let _sequential = (call.parallel == 1).then(crate::transport::sched::sequential_stream);
    let error = |kind: Kind, message: String, line: usize, err: Option<&CallError>| -> (Value, Option<Failed>) {
        let message = ctx.redactor.redact(&message);
        let mut value =
            json!({ "error": { "kind": kind.as_str(), "message": message, "server": call.server, "line": line } });
        if let Some(CallError::Rpc(rpc)) = err {
            value["error"]["code"] = json!(rpc.code);
            if let Some(data) = &rpc.data {
                value["error"]["data"] = failure::redact_value(data, &|t: &str| ctx.redactor.redact(t));
            }
        }
        let lost = kind == Kind::Connection && err.is_none_or(|e| !matches!(e, CallError::Transport(_)))
            || matches!(err, Some(CallError::Invalid { .. } | CallError::NotOffered(_)));
        (value, Some(Failed { message, lost }))
    };
    loop {
        while !eof && slots.len() < call.parallel {
            if input.buffer().is_empty() {
                held.flush()?;
            }
            text.clear();
            match input.read_line(&mut text)? {
                0 => eof = true,
                _ => {
                    let line = text.strip_suffix('\n').unwrap_or(&text);
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    line_no += 1;
                    if line.trim().is_empty() {
                        continue;
                    }
                    calls += 1;
                    let usage = |err: anyhow::Error| {
                        let (value, failed) = error(Kind::Usage, format!("line {line_no}: {err:#}"), line_no, None);
                        Slot::Ready(value, failed)
                    };
                    // The line goes into the request as the text it is where the session can
                    // send it so (`Session::call_tool_text`).
                    slots.push_back(match super::args::object_text(line, "tool arguments") {
                        Ok(arguments) => match live() {
                            Ok(session) => match session.call_tool_text(&call.tool, arguments, None) {
                                Ok(pending) => Slot::Call(pending, session, line_no),
                                Err(err) => usage(super::args::not_json(line, "tool arguments", &err)),
                            },
                            Err(err) => {
                                let kind = failure::kind_of(&err).unwrap_or(Kind::Connection);
                                let (value, failed) = error(kind, failure::message(&err), line_no, None);
                                Slot::Ready(value, failed)
                            }
                        },
                        Err(err) => usage(err),
                    });
                }
            }
        }
        let Some(slot) = slots.pop_front() else { break };
        let (value, failed) = match slot {
            Slot::Ready(value, failed) => (value, failed),
            Slot::Call(pending, session, line) => {
                match wait(&session, pending, asks, &label, Some(&mut held), true, false)? {
                    // A plain result is out already.
                    Outcome::Written => continue,
                    Outcome::Plain { .. } => unreachable!("not asked for"),
                    Outcome::Result(result) => {
                        if result.get("isError").and_then(Value::as_bool).unwrap_or(false) {
                            // An error a server reports may echo what it was sent.
                            let text = crate::cmd::render::blocks(
                                result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default(),
                                false,
                            );
                            let message =
                                format!("the tool reported an error: {}", crate::util::one_line(text.trim_end()));
                            let redacted = failure::redact_value(&result, &|t: &str| ctx.redactor.redact(t));
                            (redacted, Some(Failed { message: ctx.redactor.redact(&message), lost: false }))
                        } else {
                            (result, None)
                        }
                    }
                    Outcome::Failed(CallError::Rpc(rpc))
                        if rpc.code == URL_ELICITATION_REQUIRED && url_required(&call.server, &rpc).is_some() =>
                    {
                        stop(&mut slots);
                        held.flush()?;
                        return report_input_required(
                            &url_required(&call.server, &rpc).expect("checked"),
                            Some(line),
                            &plain(ctx),
                        );
                    }
                    Outcome::Failed(err) => {
                        let kind = match &err {
                            CallError::Rpc(_) => Kind::ToolError,
                            other => failure::call_kind(other),
                        };
                        error(kind, failure::call_message(&err), line, Some(&err))
                    }
                    Outcome::InputRequired(request) => {
                        stop(&mut slots);
                        held.flush()?;
                        return report_input_required(&request, Some(line), &plain(ctx));
                    }
                }
            }
        };
        if let Some(failed) = failed {
            failures.push(failed);
        }
        held.line(&value)?;
    }
    held.flush()?;
    if let Some(first) = failures.first() {
        let same = failures.iter().all(|f| f.message == first.message);
        let counts = format!("{} of {calls} calls failed", failures.len());
        let shown = crate::util::terminal_safe(&first.message).into_owned();
        if same {
            eprintln!("nod: server {}: {counts}: {shown}", call.server);
        } else {
            eprintln!("nod: server {}: {counts}; the first: {shown}", call.server);
        }
    }
    // A connection lost (or never usable) is a connection error, even here.
    let lost = failures.iter().any(|f| f.lost);
    Ok(if lost {
        Exit::Failure
    } else if !failures.is_empty() {
        Exit::ToolError
    } else {
        Exit::Ok
    })
}

/// Cancels every call still in flight: the run stops.
fn stop(slots: &mut VecDeque<Slot>) {
    for slot in slots.drain(..) {
        if let Slot::Call(pending, session, _) = slot {
            session.cancel(&pending, "the run stopped: a server asked for input");
        }
    }
}

/// The input-required result of a `--jsonl` run is one line, like every other.
fn plain(ctx: &Context) -> Context {
    let mut ctx = ctx.clone();
    ctx.options.json = false;
    ctx
}
