//! Running the tool calls of one step: admission (a known tool, JSON object arguments), the
//! permission decision (asking the surface when needed) and its check again right before
//! the request is sent, the call itself with the elicitations that arrive meanwhile, and the
//! result made fit for the model (bounded, marked untrusted).

use crossbeam_channel::select;
use serde_json::{Value, json};

use super::permissions::{Decision, Denial, Sensitivity};
use super::subagent;
use super::tools::{self, Outcome};
use super::turn::{Turn, arguments};
use super::{Agent, Answer, Approval, Elicited, Level, Surface};
use std::sync::Arc;

use crate::dispatch::{CallError, CallUpdate, GroupId};
use crate::mcp::method;
use crate::provider::{Completion, Message};
use crate::session::elicit::{Asked, InputRequired};
use crate::session::{Admit, Call, Session};
use crate::util::Trigger;

/// A step's results: one tool message per call, notes from the user, and why the turn must
/// end (if it must).
pub(super) struct Step {
    pub results: Vec<Message>,
    pub notes: Vec<String>,
    pub end: Option<CallEnd>,
    /// Every call of the step was malformed (unknown tool, bad arguments).
    pub all_malformed: bool,
}

pub(super) enum CallEnd {
    Interrupted,
    InputRequired(Box<InputRequired>),
}

/// How a tool's execution ended.
enum Ran {
    Done(Outcome),
    Malformed(Outcome),
    End(CallEnd, Option<Outcome>),
}

impl Agent {
    pub(super) fn run_calls(
        &mut self,
        completion: &Completion,
        group: GroupId,
        surface: &mut dyn Surface,
        cancel: &Trigger,
        turn: &mut Turn,
    ) -> Step {
        let mut step = Step { results: Vec::new(), notes: Vec::new(), end: None, all_malformed: true };
        let calls = &completion.calls;
        // A leading run of two or more subagent calls runs in parallel.
        let lead = calls.iter().take_while(|c| c.name == subagent::TOOL).count();
        let parallel = if lead >= 2 && self.view.is_none() { lead } else { 0 };
        if parallel > 0 {
            // The children's views are taken from the servers as they are: start them first.
            self.start_servers(surface);
            let names: Vec<&str> = calls[..parallel].iter().map(|c| c.name.as_str()).collect();
            surface.notice(Level::Info, &format!("running {} subagents in parallel", names.len()));
            let (outcomes, interrupted) = self.run_subagents(&calls[..parallel], surface, cancel);
            step.all_malformed = false;
            for (call, outcome) in calls.iter().zip(outcomes) {
                surface.tool_started(&call.name, &call.arguments);
                surface.tool_finished(&call.name, outcome.ok, &detail(&outcome), &outcome.content);
                turn.tool_calls.push((call.name.clone(), outcome.ok));
                step.results.push(Message::Tool { call_id: call.id.clone(), content: outcome.content });
            }
            if interrupted {
                step.end = Some(CallEnd::Interrupted);
                return step;
            }
        }
        for call in &calls[parallel..] {
            if cancel.is_fired() {
                step.end = Some(CallEnd::Interrupted);
                break;
            }
            surface.tool_started(&call.name, &call.arguments);
            let ran = if call.name == subagent::TOOL && self.view.is_none() {
                self.start_servers(surface);
                surface.tool_running();
                let (mut outcomes, interrupted) = self.run_subagents(std::slice::from_ref(call), surface, cancel);
                let outcome = outcomes.pop().expect("one outcome a call");
                if interrupted { Ran::End(CallEnd::Interrupted, Some(outcome)) } else { Ran::Done(outcome) }
            } else {
                self.run_one(&call.name, &call.arguments, group, surface, cancel, &mut step.notes)
            };
            let (outcome, end) = match ran {
                Ran::Done(outcome) => {
                    step.all_malformed = false;
                    (Some(outcome), None)
                }
                Ran::Malformed(outcome) => (Some(outcome), None),
                Ran::End(end, outcome) => {
                    step.all_malformed = false;
                    (outcome, Some(end))
                }
            };
            if let Some(outcome) = outcome {
                surface.tool_finished(&call.name, outcome.ok, &detail(&outcome), &outcome.content);
                turn.tool_calls.push((call.name.clone(), outcome.ok));
                step.results.push(Message::Tool { call_id: call.id.clone(), content: outcome.content });
            }
            if let Some(end) = end {
                step.end = Some(end);
                break;
            }
        }
        step
    }

    fn run_one(
        &mut self,
        name: &str,
        raw: &str,
        group: GroupId,
        surface: &mut dyn Surface,
        cancel: &Trigger,
        notes: &mut Vec<String>,
    ) -> Ran {
        let builtin = self.builtins().iter().any(|s| s.name == name);
        if !builtin && !self.catalog.is_selected(name) {
            let envelope = json!({ "error": { "type": "tool_execution_failed", "tool_name": name,
                "message": format!("Unsupported tool: {name}"),
                "suggestion": "Use only the tools advertised for this session." } });
            return Ran::Malformed(Outcome { ok: false, content: envelope.to_string() });
        }
        let args = match arguments(raw) {
            Ok(args) => args,
            Err(why) => return Ran::Malformed(Outcome::failed(name, why)),
        };
        self.start_servers(surface);
        if name != "mcp_read_resource" && tools::specs().iter().any(|s| s.name == name) {
            surface.tool_running();
        }
        let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or("").to_string();
        match name {
            "capability_search" => {
                let query = text("query");
                if query.trim().is_empty() {
                    return Ran::Malformed(Outcome::failed(name, "capability_search requires a query."));
                }
                let server = args.get("server").and_then(Value::as_str);
                if self.view.as_ref().is_some_and(|v| v.is_empty()) {
                    return Ran::Done(subagent::disabled());
                }
                let policy = self.policy.clone();
                let view = self.view.clone();
                let hidden = move |alias: &str| {
                    policy.always_denied(alias) || view.as_ref().is_some_and(|v| v.tool(alias).is_none())
                };
                let (outcome, notice) = tools::capability_search(
                    &mut self.catalog,
                    &self.runtime,
                    &self.limits,
                    &hidden,
                    &query,
                    server,
                    self.view.as_deref(),
                );
                if let Some(notice) = notice {
                    surface.notice(Level::Info, notice);
                }
                Ran::Done(outcome)
            }
            "mcp_select_tool" => {
                let alias = text("name");
                if alias.is_empty() {
                    return Ran::Malformed(Outcome::failed(
                        name,
                        "mcp_select_tool requires an exact dynamic tool name.",
                    ));
                }
                if let Some(view) = &self.view {
                    if view.is_empty() {
                        return Ran::Done(subagent::disabled_failure(name));
                    }
                    if view.tool(&alias).is_none() {
                        return Ran::Done(Outcome::failed(name, &format!("Unknown MCP tool: {alias}")));
                    }
                }
                Ran::Done(tools::select(&mut self.catalog, &self.runtime, &self.limits, &alias))
            }
            "mcp_read_resource" => {
                let (server, uri) = (text("server"), text("uri"));
                if server.is_empty() || uri.is_empty() {
                    return Ran::Malformed(Outcome::failed(name, "mcp_read_resource requires server and uri."));
                }
                if let Some(view) = &self.view {
                    if view.is_empty() {
                        return Ran::Done(subagent::disabled_failure(name));
                    }
                    if !view.admits(&server, subagent::Use::Resource) {
                        let why = format!("MCP server {server}'s resources are not in this subagent's view");
                        return Ran::Done(Outcome::failed(name, &why));
                    }
                }
                let target = format!("{server}:{uri}");
                let approval = Approval {
                    tool: name.into(),
                    server: Some(server.clone()),
                    original: None,
                    arguments: args.clone(),
                    agent: None,
                };
                let approved = match self.permit(name, &target, Sensitivity::ReadOnly, &approval, surface, notes) {
                    Ok(approved) => approved,
                    Err(ran) => return ran,
                };
                let session = match &self.view {
                    Some(view) => view.check(&server).map_err(|why| subagent::refused(name, &why)),
                    None => tools::resource_session(&self.runtime, &server),
                };
                let session = match session {
                    Ok(session) => session,
                    Err(outcome) => return Ran::Done(outcome),
                };
                let policy = self.policy.clone();
                let view = self.view.clone();
                let checked = server.clone();
                let admit: Admit = Arc::new(move || {
                    if let Some(view) = &view {
                        view.check(&checked).map_err(|why| subagent::refused("mcp_read_resource", &why).content)?;
                    }
                    policy
                        .recheck("mcp_read_resource", &target, Sensitivity::ReadOnly, approved)
                        .map_err(|d| d.to_json("mcp_read_resource").to_string())
                });
                surface.tool_running();
                let params = json!({ "uri": uri });
                let mut call = session.start_admitted(
                    method::RESOURCES_READ,
                    params,
                    session.operation_timeout,
                    Some(group),
                    Some(admit),
                );
                match self.wait_call(&session, &mut call, surface, cancel, name) {
                    Ok(result) => Ran::Done(tools::resource_outcome(result, &self.limits, &server, &uri)),
                    Err(ran) => ran,
                }
            }
            alias => self.call_mcp(alias, args, group, surface, cancel, notes),
        }
    }

    /// Optional servers start on the first use of MCP; those that cannot be used are named
    /// once, as notices. Their tools are indexed as they come up.
    fn start_servers(&mut self, surface: &mut dyn Surface) {
        if self.view.is_some() {
            // A subagent's view is fixed: it starts nothing.
            return;
        }
        if self.runtime.has_idle() {
            self.runtime.start_all();
            // Servers another thread is starting (a background start) are awaited.
            self.runtime.wait_started(std::time::Duration::from_secs(120));
            self.index_tools();
        }
        if !self.options.report_servers {
            return;
        }
        for name in self.runtime.names() {
            if self.reported.contains(&name) {
                continue;
            }
            if let Some(problem) = self.runtime.problem(&name) {
                surface.notice(Level::Warning, &format!("MCP server {name} is not available: {problem}"));
                self.reported.push(name);
            }
        }
    }

    /// The permission decision, asking when needed. `Ok(approved)`: go on (`approved` says a
    /// person approved this one call); `Err`: the tool does not run.
    fn permit(
        &mut self,
        name: &str,
        target: &str,
        sensitivity: Sensitivity,
        approval: &Approval,
        surface: &mut dyn Surface,
        notes: &mut Vec<String>,
    ) -> Result<bool, Ran> {
        let denied = |denial: Denial| Ran::Done(Outcome { ok: false, content: denial.to_json(name).to_string() });
        match self.policy.decide(name, target, sensitivity) {
            Decision::Allow => Ok(false),
            Decision::Deny(denial) => Err(denied(denial)),
            Decision::Ask => match surface.approve(approval) {
                None => Err(denied(Denial::PermissionRequired)),
                Some(Answer::Once) => Ok(true),
                Some(Answer::Session) => {
                    self.policy.grant(name);
                    Ok(true)
                }
                Some(Answer::Deny(note)) => {
                    if let Some(note) = note.filter(|n| !n.trim().is_empty()) {
                        notes.push(format!("Note from the user about {name}: {note}"));
                    }
                    Err(denied(Denial::UserDenied))
                }
                Some(Answer::Cancel) => Err(Ran::End(
                    CallEnd::Interrupted,
                    Some(Outcome { ok: false, content: Denial::UserDenied.to_json(name).to_string() }),
                )),
            },
        }
    }

    fn call_mcp(
        &mut self,
        alias: &str,
        args: Value,
        group: GroupId,
        surface: &mut dyn Surface,
        cancel: &Trigger,
        notes: &mut Vec<String>,
    ) -> Ran {
        if let Some(view) = &self.view
            && view.tool(alias).is_none()
        {
            return Ran::Done(Outcome::failed(alias, "this tool is not in this subagent's view"));
        }
        let Some(entry) = self.catalog.lookup(&self.runtime, &self.limits, alias) else {
            return Ran::Done(Outcome::failed(alias, "tool no longer available"));
        };
        let approval = Approval {
            tool: alias.to_string(),
            server: Some(entry.server.clone()),
            original: Some(entry.name().to_string()),
            arguments: args.clone(),
            agent: None,
        };
        let approved = match self.permit(alias, "*", Sensitivity::Sensitive, &approval, surface, notes) {
            Ok(approved) => approved,
            Err(ran) => return ran,
        };
        let session = match &self.view {
            Some(view) => match view.check(&entry.server) {
                Ok(session) => session,
                Err(why) => return Ran::Done(subagent::refused(alias, &why)),
            },
            None => match self.runtime.session(&entry.server) {
                Ok(session) => session,
                Err(_) => return Ran::Done(Outcome::failed(alias, "tool no longer available")),
            },
        };
        let policy = self.policy.clone();
        let permission = alias.to_string();
        let view = self.view.clone();
        let server = entry.server.clone();
        // The last word before the request is sent (and before any retry with input): the
        // subagent's view is still alive and the session is the one it admitted, and the
        // permission decision still holds.
        let admit: Admit = Arc::new(move || {
            if let Some(view) = &view {
                view.check(&server).map_err(|why| subagent::refused(&permission, &why).content)?;
            }
            policy
                .recheck(&permission, "*", Sensitivity::Sensitive, approved)
                .map_err(|d| d.to_json(&permission).to_string())
        });
        surface.tool_running();
        let mut call = session.call_tool_admitted(entry.name(), &args, Some(group), admit);
        match self.wait_call(&session, &mut call, surface, cancel, alias) {
            Ok(result) => Ran::Done(self.mcp_outcome(alias, &entry.server, entry.name(), result)),
            Err(ran) => ran,
        }
    }

    /// Waits for `call`, answering through `surface` the elicitations that arrive meanwhile
    /// (a server's elicitation/create, or the input requests of a 2026-07-28 result). The
    /// result, or how the tool ended otherwise (input nobody can give, cancellation).
    fn wait_call(
        &mut self,
        session: &Session,
        call: &mut Call,
        surface: &mut dyn Surface,
        cancel: &Trigger,
        tool: &str,
    ) -> Result<Result<Value, CallError>, Ran> {
        loop {
            select! {
                recv(call.updates()) -> update => match update {
                    Ok(CallUpdate::Progress(_)) => {}
                    Ok(CallUpdate::Done(result)) => {
                        if let Some(result) = session.settle(call, result) {
                            return Ok(result);
                        }
                    }
                    Err(_) => return Err(Ran::Done(Outcome::failed(tool, "nod is shutting down"))),
                },
                recv(self.asked) -> asked => if let Ok(Asked { input, responder }) = asked {
                    if responder.is_cancelled() {
                        continue;
                    }
                    match surface.elicit(&input) {
                        Elicited::Answer(answer) => responder.respond(Ok(answer)),
                        Elicited::Unanswerable => {
                            // The call is cancelled before the server hears the answer.
                            session.cancel(call, "the server asked for input that nod could not collect");
                            responder.respond(Ok(json!({ "action": "cancel" })));
                            return Err(Ran::End(CallEnd::InputRequired(Box::new(input)), None));
                        }
                        Elicited::Refused(why) => {
                            session.cancel(call, "the server asked for input that nod could not collect");
                            responder.respond(Ok(json!({ "action": "cancel" })));
                            return Err(Ran::Done(Outcome::failed(tool, &why)));
                        }
                    }
                },
                recv(cancel.receiver()) -> _ => {
                    session.cancel(call, "client cancelled");
                    return Err(Ran::End(CallEnd::Interrupted, None));
                }
            }
        }
    }

    /// A `tools/call` result as the model sees it (agent-reference 2.5).
    fn mcp_outcome(&self, alias: &str, server: &str, tool: &str, result: Result<Value, CallError>) -> Outcome {
        let limits = &self.limits;
        let wrap = |text: &str| {
            let bounded = super::text::bound(&super::text::sanitize(text), limits.tool_result, alias);
            super::text::untrusted(&[("server", server), ("tool", tool)], &bounded)
        };
        match result {
            Ok(value) => {
                let content = value.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                let mut text = super::text::content_text(content);
                if let Some(structured) = value.get("structuredContent") {
                    text.push('\n');
                    text.push_str(&structured.to_string());
                }
                if value.get("isError").and_then(Value::as_bool).unwrap_or(false) {
                    let message =
                        if text.trim().is_empty() { "MCP tool reported an error".to_string() } else { wrap(&text) };
                    Outcome::failed(alias, &message)
                } else {
                    Outcome::ok(wrap(&text))
                }
            }
            Err(CallError::Refused(why)) => Outcome { ok: false, content: why },
            Err(CallError::Rpc(error)) => Outcome::failed(alias, &wrap(&error.message)),
            Err(err) => Outcome::failed(alias, &crate::util::one_line(&err.to_string())),
        }
    }
}

/// A one-line preview of a call's arguments (80 characters), for tool lines.
pub fn preview(raw: &str) -> String {
    let line = crate::util::one_line(raw);
    match line.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// The first line of a failure, for the surface.
fn detail(outcome: &Outcome) -> String {
    if outcome.ok {
        return String::new();
    }
    let value: Value = serde_json::from_str(&outcome.content).unwrap_or(Value::Null);
    let message = value.pointer("/error/message").and_then(Value::as_str).unwrap_or(&outcome.content);
    let line = crate::util::one_line(
        message.lines().find(|l| !l.trim().is_empty() && !l.starts_with("<untrusted")).unwrap_or(""),
    );
    line.chars().take(120).collect()
}
