//! Subagents (nod-reference "Subagents"): the `subagent` tool runs a one-off child for one
//! task, or messages a named child that keeps its conversation for the parent's lifetime.
//!
//! A child is an `Agent` of its own (its history, its session grants, its step limit) whose
//! only way to MCP is a `View`: an immutable snapshot, taken when the child starts a run, of
//! what the parent may use (servers, tools by alias, resources, prompts, completion),
//! filtered by the parent's rules and by the `tools` patterns the parent gave. The view holds
//! the very sessions it admitted, and every request a child sends is checked against it right
//! before the transport (`View::check`): the parent's runtime must still be the one the view
//! was taken from (a reload or a removal replaces it), each server's session must still be
//! the one it had (an authorization, a logout or a restart makes a new one), the parent must
//! not be closed (an ACP session), and the run must not have ended or been cancelled. A
//! request that fails the check is never sent.
//!
//! Children share the parent's connections; each child's calls are its own call group, so a
//! child is cancelled alone, and cancelling the parent cancels them all. Their approvals and
//! the elicitations their servers send reach the person through the parent's surface, which
//! only the parent's thread touches: children run on threads of their own and relay.

use std::collections::BTreeMap;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, never, select, unbounded};
use serde_json::{Map, Value, json};

use super::outcome::Outcome;
use super::permissions::Policy;
use super::{Agent, Answer, Approval, Elicited, Level, Options, Report, Status, Surface};
use crate::provider::ToolCall;
use crate::session::elicit::Asked;
use crate::util::Trigger;

pub(crate) mod view;

pub use view::{Host, Use, View, disabled, refused};

pub const TOOL: &str = "subagent";
/// The most model requests in one run of a child.
pub const CHILD_MAX_STEPS: usize = 20;
/// Named children one parent may keep.
const MAX_NAMED: usize = 32;
/// `tools` patterns in one request, and the longest pattern.
const MAX_PATTERNS: usize = 64;
const MAX_PATTERN: usize = 256;
/// The longest task or message.
const MAX_TASK: usize = 256 * 1024;

const CHILD_PROMPT: &str = "<subagent>\nYou are a subagent: another agent gave you the task in the user message. Do it with the tools you have, then answer with the result only; that answer is all the other agent sees. Your MCP access is the part of the other agent's access it chose to give you.\n</subagent>";

pub const DESCRIPTION: &str = "Delegate work to a subagent: a separate agent with its own conversation and a part of your MCP access. action \"run\" does one task with a fresh subagent and returns its answer; action \"message\" talks to a named subagent that remembers earlier messages. Several subagent calls at the start of one step run in parallel. tools: optional wildcard patterns over your tool names (like mcp_docs_*) that narrow what the subagent may use; they can never widen it.";

pub fn parameters() -> Value {
    json!({ "type": "object", "properties": {
            "action": { "type": "string", "enum": ["run", "message"] },
            "task": { "type": "string", "minLength": 1, "description": "run: what the subagent should do." },
            "name": { "type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$", "description": "message: the subagent's name." },
            "message": { "type": "string", "minLength": 1, "description": "message: what to tell it." },
            "tools": { "type": "array", "items": { "type": "string", "minLength": 1 },
                "description": "Optional patterns over tool names to narrow the subagent's MCP tools (mcp_read_resource for resources)." },
        }, "required": ["action"], "additionalProperties": false })
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
enum Ask {
    Run { task: String, tools: Option<Vec<String>> },
    Message { name: String, message: String, tools: Option<Vec<String>> },
}

/// A failure with its stable code.
struct Refusal {
    code: &'static str,
    message: String,
}

fn refusal(code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal { code, message: message.into() }
}

fn decode(args: &Value) -> Result<Ask, Refusal> {
    let invalid = |m: &str| refusal("invalid_request", m);
    let map = args.as_object().ok_or_else(|| invalid("the request must be a JSON object"))?;
    let allowed: &[&str] = match map.get("action").and_then(Value::as_str) {
        Some("run") => &["action", "task", "tools"],
        Some("message") => &["action", "name", "message", "tools"],
        _ => return Err(invalid("action must be \"run\" or \"message\"")),
    };
    if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(invalid(&format!("unexpected field {key:?} for this action")));
    }
    let text = |key: &str| -> Result<String, Refusal> {
        match map.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= MAX_TASK => Ok(s.clone()),
            Some(Value::String(s)) if s.len() > MAX_TASK => Err(invalid(&format!("{key} exceeds 256 KiB"))),
            _ => Err(invalid(&format!("{key} must be a non-empty string"))),
        }
    };
    let tools = match map.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut patterns = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(p) if !p.is_empty() && p.len() <= MAX_PATTERN => patterns.push(p.to_string()),
                    _ => return Err(invalid("tools must be an array of non-empty patterns")),
                }
            }
            if patterns.len() > MAX_PATTERNS {
                return Err(invalid("tools has more than 64 patterns"));
            }
            Some(patterns)
        }
        Some(_) => return Err(invalid("tools must be an array of non-empty patterns")),
    };
    if map["action"] == "run" {
        return Ok(Ask::Run { task: text("task")?, tools });
    }
    let name = text("name")?;
    if !valid_name(&name) {
        return Err(invalid("name must match ^[a-z][a-z0-9_-]{0,63}$"));
    }
    Ok(Ask::Message { name, message: text("message")?, tools })
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A named child between its runs.
pub(super) struct Named {
    /// `None` while it runs.
    agent: Option<Box<Agent>>,
    tools: Option<Vec<String>>,
}

/// The children a parent keeps.
#[derive(Default)]
pub(super) struct Children {
    named: BTreeMap<String, Named>,
    /// One-off runs so far, for their labels.
    runs: usize,
}

impl Children {
    pub fn clear(&mut self) {
        self.named.clear();
    }
}

/// A child ready to run.
struct Prepared {
    label: String,
    named: bool,
    agent: Box<Agent>,
    prompt: String,
    view: Arc<View>,
    trigger: Trigger,
}

/// What the parent's thread hears from running children.
enum Relay {
    Approve(Approval, Sender<Option<Answer>>),
    Notice(Level, String),
}

/// A child's surface: its text stays with it; approvals and notices go to the parent's
/// thread, labelled with the child's name.
struct ChildSurface {
    label: String,
    relay: Sender<Relay>,
    cancel: Trigger,
}

impl Surface for ChildSurface {
    fn text(&mut self, _delta: &str) {}

    fn tool_started(&mut self, _name: &str, _arguments: &str) {}

    fn tool_finished(&mut self, name: &str, ok: bool, detail: &str, _result: &str) {
        let text = if ok {
            format!("subagent {}: {name} done", self.label)
        } else {
            format!("subagent {}: {name} failed: {detail}", self.label)
        };
        let _ = self.relay.send(Relay::Notice(Level::Info, text));
    }

    fn notice(&mut self, level: Level, text: &str) {
        let _ = self.relay.send(Relay::Notice(level, format!("subagent {}: {text}", self.label)));
    }

    fn approve(&mut self, request: &Approval) -> Option<Answer> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut request = request.clone();
        request.agent = Some(self.label.clone());
        self.relay.send(Relay::Approve(request, tx)).ok()?;
        select! {
            recv(rx) -> answer => answer.ok().flatten(),
            recv(self.cancel.receiver()) -> _ => Some(Answer::Cancel),
        }
    }

    fn elicit(&mut self, _request: &crate::session::elicit::InputRequired) -> Elicited {
        // A child has no elicitation channel of its own: its servers' requests reach the
        // parent's thread, which answers them through the parent's surface.
        Elicited::Unanswerable
    }
}

impl Agent {
    /// The `subagent` calls `calls` (all of them `subagent`), run together: each child on a
    /// thread of its own, this thread relaying their approvals and elicitations to `surface`.
    /// Returns one outcome a call, in order, and whether the turn must end (cancelled).
    pub(super) fn run_subagents(
        &mut self,
        calls: &[ToolCall],
        surface: &mut dyn Surface,
        cancel: &Trigger,
    ) -> (Vec<Outcome>, bool) {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; calls.len()];
        let mut ready: Vec<(usize, Prepared)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            match self.prepare(call) {
                Ok(prepared) => ready.push((i, prepared)),
                Err((label, refusal)) => outcomes[i] = Some(failure(label.as_deref(), &refusal)),
            }
        }
        let triggers: Vec<Trigger> = ready.iter().map(|(_, p)| p.trigger.clone()).collect();
        let cancel_all = |triggers: &[Trigger]| triggers.iter().for_each(Trigger::fire);
        let (relay_tx, relay_rx) = unbounded::<Relay>();
        let (done_tx, done_rx) = unbounded::<(usize, Prepared, Report)>();
        let mut interrupted = false;
        let asked = self.asked.clone();
        std::thread::scope(|scope| {
            for (i, mut prepared) in ready {
                let (relay, done) = (relay_tx.clone(), done_tx.clone());
                scope.spawn(move || {
                    let mut child_surface =
                        ChildSurface { label: prepared.label.clone(), relay, cancel: prepared.trigger.clone() };
                    let report = prepared.agent.turn(&prepared.prompt, &mut child_surface, &prepared.trigger);
                    prepared.view.end("the subagent's run ended");
                    let _ = done.send((i, prepared, report));
                });
            }
            drop((relay_tx, done_tx));
            let mut parent_cancel: Receiver<()> = cancel.receiver().clone();
            let mut relays = relay_rx;
            let mut questions = asked;
            loop {
                select! {
                    recv(done_rx) -> done => match done {
                        Ok((i, prepared, report)) => {
                            outcomes[i] = Some(finished(&prepared, &report, self.limits.tool_result, &self.marker));
                            if prepared.named
                                && let Some(named) = self.children.named.get_mut(&prepared.label)
                            {
                                named.agent = Some(prepared.agent);
                            }
                        }
                        Err(_) => break,
                    },
                    recv(relays) -> relay => match relay {
                        Ok(Relay::Approve(request, reply)) => {
                            // After a cancellation nobody is asked any more.
                            let answer = if interrupted { Some(Answer::Cancel) } else { surface.approve(&request) };
                            if answer == Some(Answer::Cancel) {
                                interrupted = true;
                                cancel_all(&triggers);
                            }
                            let _ = reply.send(answer);
                        }
                        Ok(Relay::Notice(level, text)) => surface.notice(level, &text),
                        Err(_) => relays = never(),
                    },
                    recv(questions) -> asked => match asked {
                        Ok(Asked { input, responder, sampling }) => {
                            if responder.is_cancelled() {
                                continue;
                            }
                            if let Some(asked) = sampling {
                                let answer = match interrupted {
                                    true => json!({ "approved": false, "asked": false }),
                                    false => super::call::approve_sampling(surface, &asked),
                                };
                                responder.respond(Ok(answer));
                                continue;
                            }
                            // After a cancellation nobody is asked any more.
                            let answer = match interrupted {
                                true => json!({ "action": "cancel" }),
                                false => match surface.elicit(&input) {
                                    Elicited::Answer(answer) => answer,
                                    Elicited::Unanswerable | Elicited::Refused(_) => json!({ "action": "cancel" }),
                                },
                            };
                            responder.respond(Ok(answer));
                        }
                        Err(_) => questions = never(),
                    },
                    recv(parent_cancel) -> _ => {
                        interrupted = true;
                        cancel_all(&triggers);
                        parent_cancel = never();
                    }
                }
            }
        });
        let outcomes = outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| failure(None, &refusal("interrupted", "the subagent did not finish"))))
            .collect();
        (outcomes, interrupted)
    }

    /// Decodes a call and makes its child (with a fresh view) ready to run.
    fn prepare(&mut self, call: &ToolCall) -> Result<Prepared, (Option<String>, Refusal)> {
        let args = super::turn::arguments(&call.arguments).map_err(|why| (None, refusal("invalid_request", why)))?;
        let ask = decode(&args).map_err(|r| (None, r))?;
        let Some(provider) = self.provider.as_ref() else {
            return Err((None, refusal("host_unavailable", "no model is configured for subagents")));
        };
        if self.reach.is_child() {
            return Err((None, refusal("host_unavailable", "a subagent cannot start subagents")));
        }
        if let Some(why) = self.host.closed() {
            return Err((None, refusal("host_unavailable", why)));
        }
        let provider = provider.fork();
        match ask {
            Ask::Run { task, tools } => {
                self.children.runs += 1;
                let label = format!("run-{}", self.children.runs);
                let view = View::snapshot(self, tools.as_deref())
                    .map_err(|why| (Some(label.clone()), refusal("override_rejected", why)))?;
                let view = Arc::new(view);
                let agent = Box::new(self.child(provider.clone(), view.clone()));
                Ok(Prepared { label, named: false, agent, prompt: task, view, trigger: Trigger::default() })
            }
            Ask::Message { name, message, tools } => {
                let label = Some(name.clone());
                let existing = self.children.named.get(&name).map(|n| (n.agent.is_none(), n.tools.clone()));
                let patterns = match existing {
                    Some((true, _)) => {
                        return Err((
                            label,
                            refusal("agent_busy", format!("subagent {name} is busy with another message")),
                        ));
                    }
                    Some((false, kept)) => {
                        if tools.is_some() && tools != kept {
                            return Err((
                                label,
                                refusal(
                                    "override_rejected",
                                    format!("subagent {name} keeps the tools it was created with"),
                                ),
                            ));
                        }
                        kept
                    }
                    None if self.children.named.len() >= MAX_NAMED => {
                        return Err((label, refusal("invalid_request", "too many named subagents (32)")));
                    }
                    None => tools,
                };
                let view = Arc::new(
                    View::snapshot(self, patterns.as_deref())
                        .map_err(|why| (label.clone(), refusal("override_rejected", why)))?,
                );
                let agent = match self.children.named.get_mut(&name).and_then(|n| n.agent.take()) {
                    Some(mut agent) => {
                        agent.adopt(view.clone(), &self.catalog);
                        agent
                    }
                    None => {
                        let mut agent = Box::new(self.child(provider.clone(), view.clone()));
                        // A named child's conversation is part of its parent's session.
                        agent.recorder = self.recorder.clone();
                        agent.saved_as = Some(name.clone());
                        if let Some(saved) = self.saved_children.remove(&name) {
                            let closed = !crate::saved::ended(&saved);
                            agent.history = crate::saved::for_model(saved);
                            if closed && let Some(note) = agent.history.last().cloned() {
                                agent.save(&note);
                            }
                        }
                        self.children.named.insert(name.clone(), Named { agent: None, tools: patterns });
                        agent
                    }
                };
                Ok(Prepared { label: name, named: true, agent, prompt: message, view, trigger: Trigger::default() })
            }
        }
    }

    /// A new child under `view`.
    fn child(&self, provider: Arc<dyn crate::provider::Model>, view: Arc<View>) -> Agent {
        let options = Options {
            max_steps: CHILD_MAX_STEPS.min(self.options.max_steps),
            system: None,
            first_call_tool_choice_none: false,
            report_servers: false,
            redactor: self.options.redactor.clone(),
            // Subagents see the skills their parent sees.
            skills: self.options.skills.clone(),
        };
        let policy = Arc::new(Policy::child(&self.policy));
        let mut agent = Agent::new(Some(provider), view.runtime.clone(), never(), policy, self.limits, options);
        agent.host = self.host.clone();
        agent.adopt(view, &self.catalog);
        agent
    }

    /// Puts a child under a new view: its runtime, its system message (the servers it may
    /// use), a frozen copy of the parent's catalog for the view's servers (the child never
    /// lists anything); selections outside the view are dropped.
    fn adopt(&mut self, view: Arc<View>, parent: &super::catalog::Catalog) {
        self.runtime = view.runtime.clone();
        let mut selected = std::mem::take(&mut self.catalog.selected);
        selected.retain(|alias| view.tool(alias).is_some());
        self.catalog = parent.restricted(&view.servers());
        self.catalog.selected = selected;
        self.system = format!("{}\n\n{CHILD_PROMPT}", super::prompt::system(None, &view.servers(), &self.marker));
        self.reach = super::Reach::View(view);
    }
}

/// A refused call's result.
fn failure(agent: Option<&str>, refusal: &Refusal) -> Outcome {
    let value = json!({ "ok": false, "agent": agent, "result": "", "tool_calls": [],
        "error": { "code": refusal.code, "message": refusal.message } });
    Outcome::FailedDocument { content: value.to_string(), detail: format!("{}: {}", refusal.code, refusal.message) }
}

/// A finished run's result: the child's answer (bounded, and marked: it was written by a
/// model that read server text) and its tool calls.
fn finished(prepared: &Prepared, report: &Report, cap: usize, marker: &super::text::Marker) -> Outcome {
    let calls: Vec<Value> = report.tool_calls.iter().map(|(name, ok)| json!({ "name": name, "ok": ok })).collect();
    let code = match report.status {
        Status::Completed => None,
        Status::Failed => Some("agent_failed"),
        Status::InputRequired => Some("agent_paused"),
        Status::Interrupted => Some("interrupted"),
    };
    let mut value = Map::new();
    value.insert("ok".into(), json!(code.is_none()));
    value.insert("agent".into(), json!(prepared.label));
    // A child stopped by its step limit has no final answer: its parent gets what it wrote,
    // which ends with the step-limit notice.
    let answer = if report.step_limit { report.output.trim() } else { report.final_output.as_str() };
    let result = if answer.is_empty() {
        String::new()
    } else {
        marker.marked(super::text::Source::Subagent, &[("agent", &prepared.label)], answer, cap, TOOL)
    };
    value.insert("result".into(), json!(result));
    value.insert("tool_calls".into(), Value::Array(calls));
    if let Some(code) = code {
        let message = match report.status {
            Status::InputRequired => {
                let server = report.input_required.as_ref().map_or("", |i| i.server.as_str());
                format!("the subagent stopped: MCP server '{server}' asked for input that could not be collected")
            }
            _ => report.error.clone().unwrap_or_else(|| code.to_string()),
        };
        let detail = format!("{code}: {message}");
        value.insert("error".into(), json!({ "code": code, "message": message }));
        return Outcome::FailedDocument { content: Value::Object(value).to_string(), detail };
    }
    Outcome::Ok(Value::Object(value).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_decode_or_get_stable_codes() {
        assert_eq!(
            decode(&json!({ "action": "run", "task": "sum it", "tools": ["mcp_a_*"] })).ok(),
            Some(Ask::Run { task: "sum it".into(), tools: Some(vec!["mcp_a_*".into()]) })
        );
        assert_eq!(
            decode(&json!({ "action": "message", "name": "notes-1", "message": "hi" })).ok(),
            Some(Ask::Message { name: "notes-1".into(), message: "hi".into(), tools: None })
        );
        for bad in [
            json!({ "task": "x" }),
            json!({ "action": "walk" }),
            json!({ "action": "run" }),
            json!({ "action": "run", "task": "  " }),
            json!({ "action": "run", "task": "x", "name": "a" }),
            json!({ "action": "run", "task": "x", "tools": "mcp_*" }),
            json!({ "action": "run", "task": "x", "tools": [""] }),
            json!({ "action": "message", "name": "Notes", "message": "hi" }),
            json!({ "action": "message", "name": "1st", "message": "hi" }),
            json!({ "action": "message", "name": "a".repeat(65), "message": "hi" }),
            json!({ "action": "message", "name": "ok" }),
        ] {
            let refused = decode(&bad).err().unwrap_or_else(|| panic!("{bad} was accepted"));
            assert_eq!(refused.code, "invalid_request", "{bad}");
        }
        assert!(valid_name(&format!("a{}", "b".repeat(63))));
    }
}
