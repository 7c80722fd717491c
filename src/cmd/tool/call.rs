//! `nod mcp tool call`: one call, its progress on stderr, its result (images and audio to
//! files with `-o`), and the server's questions: answered by policy, by values given in
//! advance, by a person on the terminal, or reported as input required.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};
use serde_json::{Value, json};

use super::args;
use crate::cli::{ElicitArg, ToolCall};
use crate::cmd::failure::{Failure, Kind, fail};
use crate::cmd::form::{Interrupted, Prompter, Term};
use crate::cmd::render;
use crate::cmd::{Context, Exit, One, print, print_json, stdin_is_terminal, stdout_is_terminal};
use crate::dispatch::{CallError, CallUpdate, Progress};
use crate::session::elicit::{Answering, Asked, InputRequired, Policy, PolicyHandler};
use crate::session::{Call, Session};

pub fn run(call: ToolCall, ctx: &Context) -> anyhow::Result<Exit> {
    // Everything the user gave is read and checked before a server starts.
    let arguments = if call.jsonl { None } else { Some(args::tool_arguments(&call.arguments)?) };
    let answering = answering(&call)?;
    let (asks_tx, asks_rx) = crossbeam_channel::unbounded();
    let handler = Arc::new(PolicyHandler::answering(answering.clone(), Some(asks_tx)));
    let one = One::connect(&call.server, handler, ctx)?;
    let mut term = (answering == Answering::Ask).then(|| Term::stdio(ctx.interrupt.clone()));
    let asks =
        Asks { receiver: &asks_rx, answering: &answering, person: term.as_mut().map(|t| t as &mut dyn Prompter) };
    call_on(&call, arguments, one.session(), &|| one.live(), asks, ctx)
}

/// `/mcp tool call` in the shell, on the server its agent uses (`session`, or `live` after a
/// restart), whose handler hands every question to `receiver`: answered by the call's own
/// `--elicit` or `--elicit-answer`, else by the person through `person`, as `nod mcp` would.
pub fn run_live(
    call: &ToolCall,
    session: &Session,
    live: &dyn Fn() -> anyhow::Result<Arc<Session>>,
    receiver: &Receiver<Asked>,
    person: &mut dyn Prompter,
    ctx: &Context,
) -> anyhow::Result<Exit> {
    let arguments = if call.jsonl { None } else { Some(args::tool_arguments(&call.arguments)?) };
    let answering = answering(call)?;
    let person = (answering == Answering::Ask).then_some(person);
    call_on(call, arguments, session, live, Asks { receiver, answering: &answering, person }, ctx)
}

/// Who answers the questions a server asks during a call.
pub struct Asks<'a, 'p> {
    /// The questions the server's handler did not answer itself.
    pub receiver: &'a Receiver<Asked>,
    /// Applied first: a handler shared with others (the shell's) answers nothing itself.
    pub answering: &'a Answering,
    /// The person at the terminal; without one, a question ends the call in input required.
    pub person: Option<&'a mut (dyn Prompter + 'p)>,
}

/// The call on a connected server: refused before anything is sent when the listing says
/// nod cannot make it, then one call (or the `--jsonl` stream) and its result printed.
fn call_on(
    call: &ToolCall,
    arguments: Option<Value>,
    session: &Session,
    live: &dyn Fn() -> anyhow::Result<Arc<Session>>,
    mut asks: Asks<'_, '_>,
    ctx: &Context,
) -> anyhow::Result<Exit> {
    super::precheck(session, &call.tool, if call.jsonl { None } else { arguments.as_ref() })?;
    if call.jsonl {
        return super::jsonl::run(live, call, &mut Asks { person: None, ..asks }, ctx);
    }
    let arguments = arguments.unwrap_or_else(|| json!({}));
    let pending = session.call_tool(&call.tool, &arguments, None);
    let label = format!("{}/{}", call.server, call.tool);
    match wait(session, pending, &mut asks, &label)? {
        Outcome::Result(result) => print_result(call, &result, ctx),
        // The server needs the user to visit a URL first (-32042): input required.
        Outcome::Failed(CallError::Rpc(error))
            if error.code == URL_ELICITATION_REQUIRED && url_required(&call.server, &error).is_some() =>
        {
            report_input_required(&url_required(&call.server, &error).expect("checked"), None, ctx)
        }
        // The server refused the call (unknown tool, bad arguments): the call failed, like
        // isError, and the connection is fine.
        Outcome::Failed(CallError::Rpc(error)) => Err(anyhow::Error::new(Failure {
            kind: Kind::ToolError,
            message: format!("server {}: tool {}: {}", call.server, call.tool, CallError::Rpc(error.clone())),
            code: Some(error.code),
            data: error.data,
        })),
        Outcome::Failed(err) => {
            Err(anyhow::Error::new(err).context(format!("server {}: tool {}", call.server, call.tool)))
        }
        Outcome::InputRequired(input) => report_input_required(&input, None, ctx),
    }
}

/// How the server's questions are answered: `--elicit-answer` values, the `--elicit`
/// policy, a person when stdin is a terminal, else `fail`.
fn answering(call: &ToolCall) -> anyhow::Result<Answering> {
    if let Some(source) = &call.elicit_answer {
        let values = args::object(&args::read_text(source, "the elicitation answer")?, "the elicitation answer")?;
        return Ok(Answering::Values(Arc::new(Value::Object(values))));
    }
    Ok(match call.elicit {
        Some(arg) => Answering::Policy(match arg {
            ElicitArg::Fail => Policy::Fail,
            ElicitArg::Decline => Policy::Decline,
            ElicitArg::Cancel => Policy::Cancel,
            ElicitArg::Defaults => Policy::Defaults,
        }),
        // --jsonl reads its input from stdin: nobody to ask there. The questions go to
        // stderr, which must be the terminal too.
        None if !call.jsonl && stdin_is_terminal() && std::io::stderr().is_terminal() => Answering::Ask,
        None => Answering::Policy(Policy::Fail),
    })
}

/// MCP 2025-11-25: the request cannot go on until the user completes a URL elicitation.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The first URL elicitation of a -32042 error, as an input-required result.
pub fn url_required(server: &str, error: &crate::jsonrpc::ResponseError) -> Option<InputRequired> {
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

pub enum Outcome {
    Result(Value),
    Failed(CallError),
    InputRequired(InputRequired),
}

/// Waits for a call, showing progress on stderr. A question from the server is answered by
/// `asks.answering` when it can, else put to `asks.person`; without one, it cancels the call
/// and ends in input required.
pub fn wait(session: &Session, mut pending: Call, asks: &mut Asks<'_, '_>, label: &str) -> anyhow::Result<Outcome> {
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
                Err(_) => return Err(fail(Kind::Interrupted, "nod is shutting down")),
            },
            recv(pending.gone()) -> _ => return Err(fail(Kind::Interrupted, "nod is shutting down")),
            // A request the server has cancelled already is dropped (CAN-5).
            recv(asks.receiver) -> request => if let Ok(Asked { input, responder }) = request && !responder.is_cancelled() {
                if let Some(answer) = crate::session::elicit::answer(asks.answering, &input) {
                    responder.respond(Ok(answer));
                    continue;
                }
                if let Some(person) = asks.person.as_deref_mut() {
                    match crate::cmd::form::elicit(person, &input) {
                        Ok(answer) => responder.respond(Ok(answer)),
                        Err(Interrupted) => {
                            responder.respond(Ok(json!({ "action": "cancel" })));
                            return Err(fail(Kind::Interrupted, "interrupted while answering the server"));
                        }
                    }
                    continue;
                }
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
        eprintln!("nod: {}: progress {}", self.label, render::progress(p));
    }
}

fn print_result(call: &ToolCall, result: &Value, ctx: &Context) -> anyhow::Result<Exit> {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let content = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if let Some(output) = &call.output {
        let media: Vec<&Value> = content
            .iter()
            .filter(|b| matches!(b.get("type").and_then(Value::as_str), Some("image" | "audio")))
            .collect();
        if media.is_empty() {
            eprintln!("nod: the result has no images or audio; nothing written to {}", output.display());
        } else {
            let data: Vec<&str> = media.iter().map(|b| b.get("data").and_then(Value::as_str).unwrap_or("")).collect();
            crate::cmd::output::write_base64(&call.server, output, &data)?;
        }
    }
    let redact = |text: &str| ctx.redactor.redact(text);
    if ctx.options.json {
        // A server may echo what it was sent (headers, environment) into an error.
        let shown = if is_error { crate::cmd::failure::redact_value(result, &redact) } else { result.clone() };
        print_json(&shown)?;
    } else {
        if !is_error && !content.is_empty() && call.output.as_deref() != Some(std::path::Path::new("-")) {
            // The usual case, a successful result: written from the result, not copied.
            let mut stdout = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
            render::write_blocks(content, stdout_is_terminal(), &mut stdout)?;
            std::io::Write::flush(&mut stdout)?;
            return Ok(Exit::Ok);
        }
        let mut text = render::blocks(content, stdout_is_terminal());
        if content.is_empty()
            && let Some(structured) = result.get("structuredContent")
        {
            text = format!("{}\n", serde_json::to_string_pretty(structured)?);
        }
        if is_error {
            eprint!(
                "nod: server {}: tool {} reported an error:\n{}",
                call.server,
                call.tool,
                render::safe(&redact(&text), true)
            );
        } else if call.output.as_deref() != Some(std::path::Path::new("-")) {
            print(&text)?;
        }
    }
    Ok(if is_error { Exit::ToolError } else { Exit::Ok })
}

/// Says on stderr what the server asked and how to answer it, and prints the typed
/// input-required result on stdout (pretty with --json, one line otherwise; `line` is the
/// `--jsonl` input line that asked). Exit 3.
pub fn report_input_required(input: &InputRequired, line: Option<usize>, ctx: &Context) -> anyhow::Result<Exit> {
    let message = crate::util::terminal_safe(&crate::util::one_line(&ctx.redactor.redact(&input.message))).into_owned();
    let how = if input.mode == "url" {
        "open the URL it gives, then run the command again; or answer with --elicit decline or --elicit cancel"
    } else {
        "run it on a terminal to be asked, or answer with --elicit-answer JSON, --elicit defaults, decline or cancel"
    };
    let text = format!("server {} asked for input ({} mode): {message}", input.server, input.mode);
    eprintln!("nod: {text}; {how}");
    let mut report = input.to_json();
    report["error"] = json!({ "kind": Kind::InputRequired.as_str(), "message": text, "server": input.server });
    if let Some(line) = line {
        report["error"]["line"] = json!(line);
    }
    if ctx.options.json {
        print_json(&report)?;
    } else {
        print(&format!("{}\n", serde_json::to_string(&report)?))?;
    }
    Ok(Exit::InputRequired)
}
