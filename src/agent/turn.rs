//! One turn (agent-reference 2): ask the model, run the tools it calls (one after another,
//! results in call order), and again, until it answers without tools, the step limit is
//! reached, a failure ends it, or it is cancelled.

use std::time::Duration;

use serde_json::Value;

use super::call::{CallEnd, Step};
use super::{Agent, Level, Report, Status, Surface};
use crate::provider::{Completion, Finish, Message, ProviderError, Request, Usage};
use crate::util::Trigger;

/// Steps in a row whose every call was malformed before the loop stops.
const MAX_MALFORMED_STEPS: usize = 3;
/// Attempts of one model request (the first and three retries).
const MAX_ATTEMPTS: usize = 4;
/// Waits between attempts when the endpoint names none.
const PACING: [Duration; 3] = [Duration::from_millis(250), Duration::from_secs(1), Duration::from_secs(2)];
/// The longest wait an endpoint's Retry-After gets: one that asks for more fails the turn
/// at once, saying so, rather than holding it for as long as the endpoint likes.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
const CONTINUE: &str = "The previous response was interrupted. Restart that response from the beginning using the completed tool results above. Do not repeat completed tool actions.";
const NO_MODEL: &str =
    "no model configured: set NOD_MODEL or \"model\" in settings.json, or choose one with /model <id>";
const SUMMARIZE: &str = "Summarize what you just did.";
pub const STEP_LIMIT: &str = "Agent step limit reached; continue with a follow-up prompt if needed.";
const MALFORMED: &str = "Repeated malformed tool arguments stopped the agent loop. The invalid calls were not executed. Continue with a follow-up prompt if needed.";

impl Agent {
    /// Runs one turn for `prompt`. `cancel` ends it at once (the model request and the MCP
    /// calls of the turn are cancelled on the wire).
    pub fn turn(&mut self, prompt: &str, surface: &mut dyn Surface, cancel: &Trigger) -> Report {
        let group = self.runtime.engine().group();
        let engine = self.runtime.engine().clone();
        cancel.on_fire(move || engine.cancel_group(group, "client cancelled"));
        let mut turn = Turn::default();
        let mut within = vec![Message::User(prompt.to_string())];
        // Saved as it goes: a kill loses at most the message being written.
        let mut saved = 0;
        self.save_new(&within, &mut saved);
        let end = loop {
            if cancel.is_fired() {
                break End::Interrupted;
            }
            if turn.steps >= self.options.max_steps {
                turn.step_limit = true;
                surface.notice(Level::Warning, STEP_LIMIT);
                turn.add_text(&format!("\n\n{STEP_LIMIT}"));
                // Completed (agent-reference 2.7), but without a final answer: the model was
                // still at work, and nod's notice is no answer of the model's.
                break End::Completed(String::new());
            }
            turn.steps += 1;
            surface.step(turn.steps);
            if turn.steps > 1 && !turn.output.is_empty() && !turn.output.ends_with('\n') {
                turn.output.push('\n');
            }
            let completion = match self.ask_model(&within, turn.steps == 1, surface, cancel, &mut turn) {
                Ok(completion) => completion,
                Err(end) => break end,
            };
            if completion.calls.is_empty() {
                if completion.text.is_empty() && completion.finish == Finish::Length {
                    surface.notice(Level::Warning, "the response was cut off (length)");
                }
                if completion.text.trim().is_empty() && turn.tool_steps_without_text >= 2 && !turn.summarized {
                    turn.summarized = true;
                    within.push(Message::User(SUMMARIZE.into()));
                    self.save_new(&within, &mut saved);
                    continue;
                }
                let text =
                    if completion.text.trim().is_empty() { "Done.".to_string() } else { completion.text.clone() };
                if completion.text.trim().is_empty() {
                    surface.text(&text);
                    turn.add_text(&text);
                }
                within.push(Message::Assistant { text: text.clone(), calls: Vec::new() });
                self.save_new(&within, &mut saved);
                break End::Completed(text);
            }
            turn.tool_steps_without_text =
                if completion.text.trim().is_empty() { turn.tool_steps_without_text + 1 } else { 0 };
            within.push(Message::Assistant { text: completion.text.clone(), calls: completion.calls.clone() });
            self.save_new(&within, &mut saved);
            let step = self.run_calls(&completion, group, surface, cancel, &mut turn);
            let Step { results, notes, end, all_malformed } = step;
            within.extend(results);
            // The results were saved as each call finished; the notes after them are not yet.
            saved = within.len();
            within.extend(notes.into_iter().map(Message::User));
            self.save_new(&within, &mut saved);
            match end {
                Some(CallEnd::Interrupted) => break End::Interrupted,
                Some(CallEnd::InputRequired(input)) => break End::InputRequired(input),
                None => {}
            }
            turn.malformed_steps = if all_malformed { turn.malformed_steps + 1 } else { 0 };
            if turn.malformed_steps >= MAX_MALFORMED_STEPS {
                surface.notice(Level::Warning, MALFORMED);
                turn.add_text(&format!("\n\n{MALFORMED}"));
                break End::Completed(MALFORMED.to_string());
            }
        };
        self.runtime.engine().end_group(group);
        self.finish(within, turn, end)
    }

    /// Asks the model, retrying what may succeed on a new attempt.
    fn ask_model(
        &mut self,
        within: &[Message],
        first: bool,
        surface: &mut dyn Surface,
        cancel: &Trigger,
        turn: &mut Turn,
    ) -> Result<Completion, End> {
        let mut extra: Vec<Message> = Vec::new();
        for attempt in 0..MAX_ATTEMPTS {
            let mut tools = self.builtins();
            tools.extend(self.catalog.advertised(&self.runtime, &self.limits, &self.marker));
            let mut messages = vec![Message::System(self.system.clone())];
            messages.extend(self.history.iter().cloned());
            messages.extend(within.iter().cloned());
            messages.extend(extra.iter().cloned());
            let req = Request {
                messages: &messages,
                tools: &tools,
                tool_choice_none: first && self.options.first_call_tool_choice_none,
                sampling: None,
            };
            let Some(provider) = self.provider.as_ref() else {
                return Err(End::Failed(NO_MODEL.into()));
            };
            let mut streamed = String::new();
            let result = provider.complete(&req, cancel, &mut |delta| {
                surface.text(delta);
                streamed.push_str(delta);
            });
            turn.add_text(&streamed);
            match result {
                Ok(completion) => {
                    turn.add_usage(completion.usage);
                    if completion.text.len() > completion.streamed {
                        let rest = &completion.text[completion.streamed..];
                        surface.text(rest);
                        turn.add_text(rest);
                    }
                    return Ok(completion);
                }
                Err(ProviderError::Cancelled) => return Err(End::Interrupted),
                Err(err) if err.retryable() && attempt + 1 < MAX_ATTEMPTS => {
                    let wait = err.retry_after().unwrap_or(PACING[attempt.min(PACING.len() - 1)]);
                    if wait > MAX_RETRY_WAIT {
                        return Err(End::Failed(format!(
                            "{}; it asks to be retried after {} s, longer than nod waits ({} s): try again later",
                            self.model_error(&err),
                            wait.as_secs(),
                            MAX_RETRY_WAIT.as_secs()
                        )));
                    }
                    surface.notice(Level::Warning, &format!("{err}. Retrying."));
                    if !streamed.is_empty() {
                        extra.push(Message::Assistant { text: streamed, calls: Vec::new() });
                        extra.push(Message::User(CONTINUE.into()));
                    }
                    // An interruptible wait: a cancellation ends it.
                    if cancel.receiver().recv_timeout(wait).is_err() && cancel.is_fired() {
                        return Err(End::Interrupted);
                    }
                }
                Err(err) => return Err(End::Failed(self.model_error(&err))),
            }
        }
        unreachable!("the last attempt returns")
    }

    /// A model failure as a person reads it: what went wrong, the endpoint and where its URL
    /// came from, and the likely fix.
    fn model_error(&self, err: &ProviderError) -> String {
        let Some(provider) = self.provider.as_ref() else { return err.to_string() };
        let config = provider.config();
        let hint = match err {
            ProviderError::Connect(_) => "; is the server running, and is the URL right?",
            ProviderError::Http { status: 404, .. } => "; does the URL end in /v1?",
            ProviderError::Http { status: 400, message } if message.contains("model") => "; is the model name right?",
            ProviderError::Auth { .. } => "; check the key (NOD_API_KEY, OPENAI_API_KEY or api_key_env)",
            _ => "",
        };
        format!("{err} (endpoint {}){hint}", config.endpoint())
    }

    /// Records the turn in the history and makes the report.
    fn finish(&mut self, within: Vec<Message>, turn: Turn, end: End) -> Report {
        let (status, final_output, error, input) = match end {
            End::Completed(text) => (Status::Completed, text, None, None),
            End::Failed(why) => (Status::Failed, String::new(), Some(why), None),
            End::Interrupted => (Status::Interrupted, String::new(), Some("interrupted".to_string()), None),
            End::InputRequired(input) => {
                (Status::InputRequired, String::new(), Some("input required".to_string()), Some(*input))
            }
        };
        match status {
            Status::Completed => self.history.extend(keep_answered(within)),
            // An unfinished turn stays in the history, closed so the next one is valid.
            _ => {
                self.history.extend(keep_answered(within));
                let note = format!(
                    "The previous response ended before completion ({}).",
                    error.as_deref().unwrap_or("stopped")
                );
                let note = Message::Assistant { text: note, calls: Vec::new() };
                self.save(&note);
                self.history.push(note);
            }
        }
        Report {
            status,
            output: turn.output,
            final_output,
            steps: turn.steps,
            tool_calls: turn.tool_calls,
            usage: turn.usage,
            error,
            input_required: input,
            step_limit: turn.step_limit,
        }
    }
}

/// Drops tool calls that have no result (a cancelled step), so the history stays valid. A
/// call is answered by a tool message with its id after it and before the next model
/// message (ids need not be unique across steps: some endpoints number them per step).
pub(crate) fn keep_answered(messages: Vec<Message>) -> Vec<Message> {
    let mut answered = vec![Vec::new(); messages.len()];
    let mut step = None;
    for (i, message) in messages.iter().enumerate() {
        match message {
            Message::Assistant { .. } => step = Some(i),
            Message::Tool { call_id, .. } => {
                if let Some(step) = step {
                    answered[step].push(call_id.clone());
                }
            }
            _ => {}
        }
    }
    messages
        .into_iter()
        .zip(answered)
        .map(|(m, answered)| match m {
            Message::Assistant { text, calls } => {
                Message::Assistant { text, calls: calls.into_iter().filter(|c| answered.contains(&c.id)).collect() }
            }
            other => other,
        })
        .collect()
}

pub(super) enum End {
    Completed(String),
    Failed(String),
    Interrupted,
    InputRequired(Box<crate::session::elicit::InputRequired>),
}

/// The running tally of a turn.
#[derive(Default)]
pub(super) struct Turn {
    pub steps: usize,
    /// The step limit ended the turn.
    pub step_limit: bool,
    pub output: String,
    pub tool_calls: Vec<(String, bool)>,
    pub usage: Option<Usage>,
    malformed_steps: usize,
    tool_steps_without_text: usize,
    summarized: bool,
}

impl Turn {
    fn add_text(&mut self, text: &str) {
        self.output.push_str(text);
    }

    fn add_usage(&mut self, usage: Option<Usage>) {
        if let Some(usage) = usage {
            let total = self.usage.get_or_insert_default();
            total.input += usage.input;
            total.output += usage.output;
        }
    }
}

/// Parses a call's arguments: empty means `{}`.
pub(super) fn arguments(raw: &str) -> Result<Value, &'static str> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("Tool arguments must be a JSON object. The call was not executed."),
        Err(_) => Err("Tool arguments were not valid JSON."),
    }
}
