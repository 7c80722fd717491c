//! `nod mcp tool call`: one call, its progress on stderr, its result (images and audio to
//! files with `-o`), and the server's questions: answered by policy, by values given in
//! advance, by a person on the terminal, or reported as input required.

use std::io::IsTerminal;
use std::sync::Arc;

use crossbeam_channel::Receiver;
use serde_json::{Value, json};

use super::args;
pub use super::wait::{Asks, Outcome, URL_ELICITATION_REQUIRED, report_input_required, url_required, wait};
use crate::cli::{ElicitArg, ToolCall};
use crate::cmd::failure::{Failure, Kind};
use crate::cmd::form::{Prompter, Term};
use crate::cmd::render;
use crate::cmd::{Context, Exit, One, print, print_json, stdin_is_terminal, stdout_is_terminal};
use crate::dispatch::CallError;
use crate::session::Session;
use crate::session::elicit::{Answering, Asked, Policy, PolicyHandler};
use crate::session::envelope::Piece;

pub fn run(call: ToolCall, ctx: &Context) -> anyhow::Result<Exit> {
    // Everything the user gave is read and checked before a server starts.
    let arguments = if call.jsonl { None } else { Some(args::tool_arguments(&call.arguments)?) };
    let answering = answering(&call)?;
    let (asks_tx, asks_rx) = crossbeam_channel::unbounded();
    let handler: Arc<dyn crate::dispatch::InboundHandler> =
        Arc::new(PolicyHandler::answering(answering.clone(), Some(asks_tx.clone())));
    // With a model configured, the server may sample: by a rule in settings.json, or asked
    // on the terminal as elicitation is (declined where nobody can be asked).
    let handler = match sampler(asks_tx, ctx) {
        Some(sampler) => Arc::new(crate::session::sampling::WithSampling::new(handler, sampler)),
        None => handler,
    };
    let one = One::connect(&call.server, handler, ctx)?;
    let mut term = (answering == Answering::Ask).then(|| Term::stdio(ctx.interrupt.clone()));
    let asks =
        Asks { receiver: &asks_rx, answering: &answering, person: term.as_mut().map(|t| t as &mut dyn Prompter) };
    let exit = call_on(&call, arguments, one.session(), &|| one.live(), asks, ctx);
    one.session().leave_listings_to_exit();
    exit
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
    if call.jsonl {
        // One listing for the whole stream: lines for a tool nod will not call are not sent.
        super::precheck(session, &call.tool, None)?;
        return super::jsonl::run(live, call, &mut Asks { person: None, ..asks }, ctx);
    }
    let checked = super::checks_first(session);
    if checked {
        super::precheck(session, &call.tool, arguments.as_ref())?;
    }
    let arguments = arguments.unwrap_or_else(|| json!({}));
    let pending = session.call_tool(&call.tool, arguments.clone(), None);
    let label = format!("{}/{}", call.server, call.tool);
    // The usual result, plain text to stdout, is written from the text it came as.
    let plain = !ctx.options.json && call.output.is_none();
    let outcome = match wait(session, pending, &mut asks, &label, None, false, plain)? {
        Outcome::Plain { finished, texts: Some(texts) } => {
            return print_texts(finished.text().expect("a plain result is text"), &texts);
        }
        Outcome::Plain { finished, texts: None } => {
            finished.into_result().map_or_else(Outcome::Failed, Outcome::Result)
        }
        other => other,
    };
    match outcome {
        Outcome::Result(result) => {
            // The tool failed: what the listing says of the arguments may be why.
            if !checked && result.get("isError").and_then(Value::as_bool) == Some(true) {
                let content = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                let text = crate::util::one_line(render::blocks(content, false).trim_end());
                super::postcheck(session, &call.tool, Some(&arguments), &format!("it reported an error: {text}"))?;
            }
            print_result(call, &result, ctx)
        }
        // The server needs the user to visit a URL first (-32042): input required.
        Outcome::Failed(CallError::Rpc(error))
            if error.code == URL_ELICITATION_REQUIRED && url_required(&call.server, &error).is_some() =>
        {
            report_input_required(&url_required(&call.server, &error).expect("checked"), None, ctx)
        }
        // The server refused the call (unknown tool, bad arguments): the call failed, like
        // isError, and the connection is fine. Sent unchecked, the listing says why first.
        Outcome::Failed(CallError::Rpc(error)) => {
            if !checked {
                super::postcheck(session, &call.tool, Some(&arguments), &CallError::Rpc(error.clone()).to_string())?;
            }
            Err(anyhow::Error::new(Failure {
                kind: Kind::ToolError,
                message: format!("server {}: tool {}: {}", call.server, call.tool, CallError::Rpc(error.clone())),
                code: Some(error.code),
                data: error.data,
            }))
        }
        Outcome::Failed(err) => {
            Err(anyhow::Error::new(err).context(format!("server {}: tool {}", call.server, call.tool)))
        }
        Outcome::InputRequired(input) => report_input_required(&input, None, ctx),
        Outcome::Written | Outcome::Plain { .. } => {
            unreachable!("a single call gives no held lines; a plain one was taken")
        }
    }
}

/// A plain success whose blocks are all text, written from the answer's text as
/// `print_result` writes them from a value: a big result is never copied into a value first
/// (for 7 MiB, 7 MiB more memory and the time to fault it in).
fn print_texts(result: &str, texts: &[Piece]) -> anyhow::Result<Exit> {
    let mut stdout = direct_stdout()?;
    let terminal = stdout_is_terminal();
    for piece in texts {
        render::write_text(piece.text(result), terminal, &mut stdout)?;
    }
    std::io::Write::flush(&mut stdout)?;
    Ok(Exit::Ok)
}

/// Standard output for a big write: past std's line buffering, which looks for the last
/// newline of every write (a pass over all of a 7 MiB result), after what std holds.
fn direct_stdout() -> std::io::Result<std::io::BufWriter<Box<dyn std::io::Write>>> {
    std::io::Write::flush(&mut std::io::stdout())?;
    let direct: Box<dyn std::io::Write> = match std::os::fd::AsFd::as_fd(&std::io::stdout()).try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(std::io::stdout().lock()),
    };
    Ok(std::io::BufWriter::with_capacity(64 * 1024, direct))
}

/// What answers the server's sampling requests: the configured model (settings.json, or
/// NOD_MODEL and NOD_BASE_URL), under the sampling rules of settings.json; none without a
/// model, and then nod does not declare sampling.
fn sampler(asks: crossbeam_channel::Sender<Asked>, ctx: &Context) -> Option<Arc<crate::session::sampling::Sampler>> {
    let workspace = crate::config::project::locate(&std::env::current_dir().unwrap_or_default()).0;
    let settings = crate::config::agent::load(&crate::config::settings::path().ok()?, &workspace);
    let env = |name: &str| std::env::var(name).ok();
    let config = crate::provider::config::resolve(None, &settings.model, &env).ok()?;
    ctx.redactor.add(config.api_key.clone());
    let (rules, issues) = crate::session::sampling::rules(&settings.sampling);
    for issue in issues {
        log::warn!("{issue}");
    }
    let model = Arc::new(crate::provider::Provider::new(config)) as Arc<dyn crate::provider::Model>;
    let sampler = crate::session::sampling::Sampler::new(model, rules, Box::new(|| false), Some(asks));
    Some(Arc::new(sampler.without_full_access()))
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
            let mut stdout = direct_stdout()?;
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
