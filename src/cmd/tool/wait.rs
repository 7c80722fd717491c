//! Waiting for a tool call, for one call and for `--jsonl` alike: who answers the server's
//! questions (`Asks`), the call's progress on stderr, how it ended (`Outcome`), and the typed
//! input-required report when a question could not be answered.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError, select};
use serde_json::{Value, json};

use crate::cmd::failure::{Kind, fail};
use crate::cmd::form::{Interrupted, Prompter};
use crate::cmd::render;
use crate::cmd::{Context, Exit, print, print_json};
use crate::dispatch::{CallError, CallUpdate, Finished, Progress};
use crate::session::elicit::{Answering, Asked, InputRequired};
use crate::session::envelope::Piece;
use crate::session::{Call, Session};
use crate::transport::sched::{Backoff, spare_cpu};

/// Who answers the questions a server asks during a call.
pub struct Asks<'a, 'p> {
    /// The questions the server's handler did not answer itself.
    pub receiver: &'a Receiver<Asked>,
    /// Applied first: a handler shared with others (the shell's) answers nothing itself.
    pub answering: &'a Answering,
    /// The person at the terminal; without one, a question ends the call in input required.
    pub person: Option<&'a mut (dyn Prompter + 'p)>,
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
    /// A plain successful result (`envelope::plain_tool_texts`), as the text it came as,
    /// unsettled: settling it would give its value unchanged (`into_result` reads it). With
    /// the texts of its blocks when all are text. Only when `wait` was asked for it (`plain`).
    Plain {
        finished: Box<Finished>,
        texts: Option<Vec<Piece>>,
    },
    /// A plain successful result, already written as a line to the `held` lines given to
    /// `wait` (`HeldLines::plain_tool_line`); only a stream gives them.
    Written,
    Failed(CallError),
    InputRequired(InputRequired),
}

/// Waits for a call, showing progress on stderr. A question from the server is answered by
/// `asks.answering` when it can, else put to `asks.person`; without one, it cancels the call
/// and ends in input required.
///
/// `held` is output written but not yet flushed (`--jsonl`'s earlier results): it goes out
/// when it is due, or before a person is asked, so waiting never holds a result back.
/// `stream` is a `--jsonl` stream, whose caller may spin for a fast answer.
/// `plain` asks for a plain success that came as text as `Outcome::Plain`, for a caller that
/// can write it out without its value.
pub fn wait(
    session: &Session,
    mut pending: Call,
    asks: &mut Asks<'_, '_>,
    label: &str,
    mut held: Option<&mut HeldLines>,
    stream: bool,
    plain: bool,
) -> anyhow::Result<Outcome> {
    let mut shown = ProgressLine::new(label);
    loop {
        let due = held.as_deref().and_then(HeldLines::due).map_or_else(crossbeam_channel::never, crossbeam_channel::at);
        let early = if stream { soon(pending.updates()) } else { None };
        let update = match early {
            Some(update) => update,
            None => select! {
                recv(due) -> _ => {
                    if let Some(held) = held.as_deref_mut() {
                        held.flush()?;
                    }
                    continue;
                },
                recv(pending.updates()) -> update => update,
                recv(asks.receiver) -> request => {
                    if let Some(outcome) = asked(session, &pending, asks, &mut held, request)? {
                        return Ok(outcome);
                    }
                    continue;
                },
            },
        };
        match update {
            Ok(CallUpdate::Progress(p)) => shown.show(&p),
            Ok(CallUpdate::Done(finished)) => {
                if let Some(held) = held.as_deref_mut()
                    && let Some(text) = finished.text()
                    && held.plain_tool_line(text)?
                {
                    return Ok(Outcome::Written);
                }
                if plain && let Some(texts) = finished.text().and_then(crate::session::envelope::plain_tool_texts) {
                    return Ok(Outcome::Plain { finished, texts });
                }
                match session.settle(&mut pending, finished.into_result()) {
                    Some(Ok(result)) => return Ok(Outcome::Result(result)),
                    Some(Err(err)) => return Ok(Outcome::Failed(err)),
                    // Replayed on a new session: keep waiting.
                    None => {}
                }
            }
            Err(_) => return Err(fail(Kind::Interrupted, "nod is shutting down")),
        }
    }
}

/// A question from the server during the call, answered or put to the person; the outcome
/// when the call cannot go on (input required).
fn asked(
    session: &Session,
    pending: &Call,
    asks: &mut Asks<'_, '_>,
    held: &mut Option<&mut HeldLines>,
    request: Result<Asked, crossbeam_channel::RecvError>,
) -> anyhow::Result<Option<Outcome>> {
    // A request the server has cancelled already is dropped (CAN-5).
    let Ok(Asked { input, responder, sampling }) = request else { return Ok(None) };
    if responder.is_cancelled() {
        return Ok(None);
    }
    if let Some(held) = held.as_deref_mut() {
        held.flush()?;
    }
    if let Some(asked) = sampling {
        // A server's sampling request: the person decides, as for elicitation.
        let answer = asks
            .person
            .as_deref_mut()
            .map(|person| crate::cmd::form::approve(person, &crate::agent::sampling_approval(&asked)));
        let cancelled = matches!(answer, Some(crate::agent::Answer::Cancel));
        responder.respond(Ok(crate::agent::sampling_answer(answer)));
        if cancelled {
            return Err(fail(Kind::Interrupted, "interrupted while answering the server"));
        }
        return Ok(None);
    }
    if let Some(answer) = crate::session::elicit::answer(asks.answering, &input) {
        responder.respond(Ok(answer));
        return Ok(None);
    }
    if let Some(person) = asks.person.as_deref_mut() {
        match crate::cmd::form::elicit(person, &input) {
            Ok(answer) => responder.respond(Ok(answer)),
            Err(Interrupted) => {
                responder.respond(Ok(json!({ "action": "cancel" })));
                return Err(fail(Kind::Interrupted, "interrupted while answering the server"));
            }
        }
        return Ok(None);
    }
    // The call is cancelled before the server hears the answer, so a fast server cannot
    // finish the call in between (the frames leave in this order).
    session.cancel(pending, "the server asked for input that nod could not collect");
    responder.respond(Ok(json!({ "action": "cancel" })));
    Ok(Some(Outcome::InputRequired(input)))
}

/// How long the caller of a stream, with a CPU to spare, looks for its answer before it
/// sleeps: a fast server answers within it, and the answer is taken without the worker
/// waking this thread (on a virtual machine a wakeup across CPUs costs more than a fast
/// server's round trip). With calls in flight (`--parallel`) too: once a line costs the
/// caller less than the worker and the server take to answer it, the caller waits for every
/// answer, and 2000 calls 16 at a time took 1.15x as long free on two CPUs when it slept
/// (against 0.91x with this look, each against the build before both).
const SPIN: Duration = Duration::from_micros(50);

/// The callers' spins, one backoff for all: a slow server makes them rare.
static SPINS: Backoff = Backoff::new(0);

/// The call's next update if it comes within `SPIN`, where more than one CPU is ours; at
/// once `None` on one CPU, where spinning would only keep the server from running.
fn soon(updates: &Receiver<CallUpdate>) -> Option<Result<CallUpdate, crossbeam_channel::RecvError>> {
    if !spare_cpu() || !SPINS.try_now() {
        return None;
    }
    let start = Instant::now();
    loop {
        match updates.try_recv() {
            Ok(update) => {
                SPINS.found(true);
                return Some(Ok(update));
            }
            Err(TryRecvError::Disconnected) => return Some(Err(crossbeam_channel::RecvError)),
            Err(TryRecvError::Empty) if start.elapsed() >= SPIN => {
                SPINS.found(false);
                return None;
            }
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
}

/// Result lines on stdout, written in blocks: a line goes out at the latest `HOLD` after it
/// was written, when nod would wait for input (`flush` before a read that may block), or
/// when the block is full. One write per line would be a system call per call.
pub struct HeldLines {
    out: std::io::BufWriter<std::io::Stdout>,
    /// When the oldest line not yet flushed was written.
    since: Option<Instant>,
    /// A line being made (`plain_tool_line`), and room for its check, kept between lines.
    scratch: Vec<u8>,
    keys: Vec<std::ops::Range<usize>>,
}

/// How long a result line may wait in the block for the ones after it.
const HOLD: Duration = Duration::from_millis(20);

impl HeldLines {
    pub fn new() -> HeldLines {
        HeldLines {
            out: std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()),
            since: None,
            scratch: Vec::new(),
            keys: Vec::new(),
        }
    }

    pub fn line(&mut self, value: &Value) -> std::io::Result<()> {
        use std::io::Write;
        serde_json::to_writer(&mut self.out, value)?;
        self.out.write_all(b"\n")?;
        self.written()
    }

    /// Writes a `tools/call` result given as text as its line, without reading it into a
    /// value, when it is a plain success (`envelope::plain_tool_line`); false, and nothing
    /// written, for anything else.
    pub fn plain_tool_line(&mut self, text: &str) -> std::io::Result<bool> {
        use std::io::Write;
        self.scratch.clear();
        if !crate::session::envelope::plain_tool_line(text, &mut self.scratch, &mut self.keys) {
            return Ok(false);
        }
        self.scratch.push(b'\n');
        self.out.write_all(&self.scratch)?;
        self.written()?;
        Ok(true)
    }

    /// A line went into the block: it goes out at the latest `HOLD` after the oldest.
    fn written(&mut self) -> std::io::Result<()> {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) >= HOLD {
            self.flush()?;
        }
        Ok(())
    }

    /// When the held lines must go out, if any are held.
    fn due(&self) -> Option<Instant> {
        self.since.map(|since| since + HOLD)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        self.since = None;
        self.out.flush()
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
