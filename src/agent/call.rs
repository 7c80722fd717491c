//! Running the tool calls of one step: admission (a known tool, JSON object arguments), the
//! permission decision on the tool's identity (asking the surface when needed) and its check
//! again right before the request is sent, the call itself with the elicitations that arrive
//! meanwhile, and the result made fit for the model (bounded, marked untrusted).
//!
//! Built-ins run from their rows in `builtin::BUILTINS`; MCP tools by the identity their
//! alias resolves to. Both reach MCP through `Reach`, the same for a parent and a subagent.

use std::sync::Arc;

use crossbeam_channel::select;
use serde_json::{Value, json};

use super::builtin::{self, Builtin};
use super::outcome::{Failure, Outcome};
use super::permissions::{Decision, Denial, Sensitivity, Subject};
use super::text::Source;
use super::tools;
use super::turn::{Turn, arguments};
use super::{Agent, Answer, Approval, Elicited, Level, Surface};
use crate::dispatch::{CallError, CallUpdate, GroupId};
use crate::mcp::method;
use crate::provider::{Completion, Message, ToolCall};
use crate::session::elicit::{Asked, InputRequired};
use crate::session::{Admit, Call, Session};
use crate::util::Trigger;

/// The most tool calls one step runs; the model is told the rest did not run.
pub(crate) const MAX_CALLS_PER_STEP: usize = 64;
/// The most subagents one step runs in parallel; the rest of a leading run are refused.
pub(crate) const MAX_PARALLEL_CHILDREN: usize = 8;

/// A step's results: one tool message per call, notes from the user, and why the turn must
/// end (if it must).
pub(super) struct Step {
    pub results: Vec<Message>,
    pub notes: Vec<String>,
    pub end: Option<CallEnd>,
    /// Every call of the step was malformed (unknown tool, bad arguments).
    pub all_malformed: bool,
}

pub(crate) enum CallEnd {
    Interrupted,
    InputRequired(Box<InputRequired>),
}

/// How a tool's execution ended.
pub(crate) enum Ran {
    Done(Outcome),
    Malformed(Outcome),
    End(CallEnd, Option<Outcome>),
}

/// What a running tool may use of its step.
pub(crate) struct Calling<'a> {
    pub group: GroupId,
    pub surface: &'a mut dyn Surface,
    pub cancel: &'a Trigger,
    pub notes: &'a mut Vec<String>,
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
        let (calls, skipped) = completion.calls.split_at(completion.calls.len().min(MAX_CALLS_PER_STEP));
        // A leading run of two or more subagent calls runs in parallel, at most
        // MAX_PARALLEL_CHILDREN of them; the rest of the run is refused.
        let lead = calls.iter().take_while(|c| c.name == builtin::SUBAGENT).count();
        let (calls, refused_children) = if lead > MAX_PARALLEL_CHILDREN && !self.reach.is_child() {
            calls.split_at(MAX_PARALLEL_CHILDREN)
        } else {
            (calls, &[][..])
        };
        let refused_children =
            &refused_children[..refused_children.iter().take_while(|c| c.name == builtin::SUBAGENT).count()];
        let after = &completion.calls[calls.len() + refused_children.len()..completion.calls.len() - skipped.len()];
        let calls: Vec<ToolCall> = calls.iter().chain(after).cloned().collect();
        let calls = &calls[..];
        let parallel = if lead >= 2 && !self.reach.is_child() { lead.min(MAX_PARALLEL_CHILDREN) } else { 0 };
        if parallel > 0 {
            step.all_malformed = false;
            let (outcomes, interrupted) = match self.permit_subagents(surface, &mut step.notes) {
                Ok(()) => {
                    // The children's views are taken from the servers as they are: start them first.
                    self.start_servers(surface);
                    surface.notice(Level::Info, &format!("running {parallel} subagents in parallel"));
                    self.run_subagents(&calls[..parallel], surface, cancel)
                }
                Err((outcome, interrupted)) => (vec![outcome; parallel], interrupted),
            };
            for (call, outcome) in calls.iter().zip(outcomes) {
                surface.tool_started(&call.name, &call.arguments);
                self.finish_call(call, outcome, surface, turn, &mut step);
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
            let mut calling = Calling { group, surface: &mut *surface, cancel, notes: &mut step.notes };
            let ran = self.run_one(&call.name, &call.arguments, &mut calling);
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
                self.finish_call(call, outcome, surface, turn, &mut step);
            }
            if let Some(end) = end {
                step.end = Some(end);
                break;
            }
        }
        // Every call gets an answer, so the conversation stays valid: the ones over a bound
        // are refused, saying which bound.
        let over = |call: &ToolCall, why: String| (call.clone(), Outcome::failed(&call.name, why));
        let refusals = refused_children
            .iter()
            .map(|c| over(c, format!("Not run: at most {MAX_PARALLEL_CHILDREN} subagents run in one step; ask again for the rest.")))
            .chain(skipped.iter().map(|c| over(c, format!("Not run: at most {MAX_CALLS_PER_STEP} tool calls run in one step; call the rest in the next step."))));
        if step.end.is_none() {
            for (call, outcome) in refusals.collect::<Vec<_>>() {
                surface.tool_started(&call.name, &call.arguments);
                self.finish_call(&call, outcome, surface, turn, &mut step);
            }
        }
        step
    }

    fn finish_call(
        &self,
        call: &ToolCall,
        outcome: Outcome,
        surface: &mut dyn Surface,
        turn: &mut Turn,
        step: &mut Step,
    ) {
        let content = outcome.content();
        surface.tool_finished(&call.name, outcome.is_ok(), &outcome.detail(), &content);
        turn.tool_calls.push((call.name.clone(), outcome.is_ok()));
        let result = Message::Tool { call_id: call.id.clone(), content };
        // Saved as soon as it is known: a kill later in the step keeps it.
        self.save(&result);
        step.results.push(result);
    }

    /// The permission decision for a parallel run of subagents, made once for all of them.
    fn permit_subagents(&mut self, surface: &mut dyn Surface, notes: &mut Vec<String>) -> Result<(), (Outcome, bool)> {
        let row = builtin::find(builtin::SUBAGENT).expect("a row");
        let approval = Approval::builtin(row.name, json!({ "parallel": true }));
        let subject = Subject::Builtin(row.name);
        match self.permit(&subject, "*", row.sensitivity, &approval, surface, notes) {
            Ok(_) => Ok(()),
            Err(Ran::End(_, outcome)) => {
                Err((outcome.unwrap_or_else(|| Failure::denied(row.name, Denial::UserDenied).into()), true))
            }
            Err(Ran::Done(outcome) | Ran::Malformed(outcome)) => Err((outcome, false)),
        }
    }

    fn run_one(&mut self, name: &str, raw: &str, calling: &mut Calling<'_>) -> Ran {
        let row = builtin::offered(self.reach.is_child()).find(|b| b.name == name);
        if row.is_none() && !self.catalog.is_selected(name) {
            return Ran::Malformed(Failure::Unsupported { tool: name.to_string() }.into());
        }
        let args = match arguments(raw) {
            Ok(args) => args,
            Err(why) => return Ran::Malformed(Outcome::failed(name, why)),
        };
        if self.reach.starts_servers() && (row.is_none() || name != builtin::SUBAGENT) {
            self.start_servers(calling.surface);
        }
        match row {
            Some(row) => self.run_builtin(row, &args, calling),
            None => self.call_mcp(name, args, calling),
        }
    }

    /// A built-in: its arguments checked, the permission decided (rules apply to built-ins
    /// too), then its row's `run`.
    fn run_builtin(&mut self, row: &'static Builtin, args: &Value, calling: &mut Calling<'_>) -> Ran {
        if let Some(missing) = required_missing(row, args) {
            return Ran::Malformed(Outcome::failed(row.name, format!("{} requires {missing}.", row.name)));
        }
        let target = (row.target)(args);
        let mut approval = Approval::builtin(row.name, args.clone());
        if row.name == builtin::READ_RESOURCE {
            // A read names its server, like every MCP call.
            approval.server = args.get("server").and_then(Value::as_str).map(str::to_string);
        }
        let subject = Subject::Builtin(row.name);
        if let Err(ran) = self.permit(&subject, &target, row.sensitivity, &approval, calling.surface, calling.notes) {
            return ran;
        }
        calling.surface.tool_running();
        (row.run)(self, args, calling)
    }

    pub(super) fn run_search(&mut self, args: &Value, calling: &mut Calling<'_>) -> Ran {
        let query = text(args, "query");
        let server = args.get("server").and_then(Value::as_str);
        if let Some(outcome) = self.reach.view().filter(|v| v.is_empty()).map(|_| super::subagent::disabled()) {
            return Ran::Done(outcome);
        }
        let (outcome, notice) = tools::capability_search(self, &query, server);
        if let Some(notice) = notice {
            calling.surface.notice(Level::Info, notice);
        }
        Ran::Done(outcome)
    }

    pub(super) fn run_select(&mut self, args: &Value, _calling: &mut Calling<'_>) -> Ran {
        let alias = text(args, "name");
        if let Some(failure) = self.reach.disabled(builtin::SELECT) {
            return Ran::Done(failure.into());
        }
        if !self.reach.admits_tool(&alias) {
            return Ran::Done(Outcome::failed(builtin::SELECT, format!("Unknown MCP tool: {alias}")));
        }
        Ran::Done(tools::select(self, &alias))
    }

    pub(super) fn run_read_resource(&mut self, args: &Value, calling: &mut Calling<'_>) -> Ran {
        const TOOL: &str = builtin::READ_RESOURCE;
        let (server, uri) = (text(args, "server"), text(args, "uri"));
        if let Some(failure) = self.reach.disabled(TOOL) {
            return Ran::Done(failure.into());
        }
        if !self.reach.admits_resources(&server) {
            let why = format!("MCP server {server}'s resources are not in this subagent's view");
            return Ran::Done(Outcome::failed(TOOL, why));
        }
        let session = match self.reach.session(&self.runtime, TOOL, &server) {
            Ok(session) => session,
            Err(failure) => return Ran::Done(self.marked_failure(failure, &server).into()),
        };
        let target = format!("{server}:{uri}");
        let admit = self.admit(Subject::Builtin(TOOL), target, Sensitivity::ReadOnly, &server, false);
        let params = json!({ "uri": uri });
        let mut call = session.start_admitted(
            method::RESOURCES_READ,
            params,
            session.operation_timeout,
            Some(calling.group),
            Some(admit),
        );
        match self.wait_call(&session, &mut call, calling, TOOL) {
            Ok(result) => Ran::Done(tools::resource_outcome(self, result, &server, &uri)),
            Err(ran) => ran,
        }
    }

    /// `skill {name, file?}`: the skill's instructions (or one bundled file), marked as the
    /// skill's text and where it came from; `allowed-tools` is shown, never obeyed.
    pub(super) fn run_skill(&mut self, args: &Value, _calling: &mut Calling<'_>) -> Ran {
        let name = text(args, "name");
        if let Some(server) = args.get("server").and_then(Value::as_str) {
            return Ran::Done(self.server_skill(server, &name, args.get("file").and_then(Value::as_str)));
        }
        let skills = self.options.skills.clone();
        let Some(skill) = skills.usable().find(|s| s.name == name) else {
            let hint = crate::cli::suggest::hint(&name, skills.usable().map(|s| s.name.as_str()));
            return Ran::Done(Outcome::failed(builtin::SKILL, format!("Unknown skill: {name}{hint}")));
        };
        let cap = self.limits.tool_result;
        let attributes = [("origin", skill.origin.as_str()), ("skill", skill.name.as_str())];
        if let Some(file) = args.get("file").and_then(Value::as_str) {
            return Ran::Done(match crate::config::skills::read_file(skill, file, cap) {
                Ok(body) => {
                    let mut attributes = attributes.to_vec();
                    attributes.push(("file", file));
                    Outcome::Ok(self.marker.marked(Source::Skill, &attributes, &body, cap, builtin::SKILL))
                }
                Err(why) => Outcome::failed(builtin::SKILL, why),
            });
        }
        let mut body = skill.body.clone();
        if !skill.files.is_empty() {
            body.push_str(&format!(
                "\n\nBundled files (load one with skill {{\"name\": \"{}\", \"file\": ...}}): {}",
                skill.name,
                skill.files.join(", ")
            ));
        }
        if let Some(allowed) = skill.front.get("allowed-tools") {
            body.push_str(&format!("\n\nallowed-tools (informational: nod's permissions decide): {allowed}"));
        }
        Ran::Done(Outcome::Ok(self.marker.marked(Source::Skill, &attributes, &body, cap, builtin::SKILL)))
    }

    /// `skill {name, server, file?}`: a skill `server` offers, loaded from its listing's entry
    /// and used only when it verifies (`session::skills`); marked as coming from that server.
    fn server_skill(&mut self, server: &str, name: &str, file: Option<&str>) -> Outcome {
        let offered = tools::server_skills(self, Some(server));
        let Some((_, skill)) = offered.iter().find(|(_, s)| s.name == name) else {
            let hint = crate::cli::suggest::hint(name, offered.iter().map(|(_, s)| s.name.as_str()));
            return Outcome::failed(builtin::SKILL, format!("Unknown skill: {name} of server {server}{hint}"));
        };
        let session = match self.reach.session(&self.runtime, builtin::SKILL, server) {
            Ok(session) => session,
            Err(failure) => return self.marked_failure(failure, server).into(),
        };
        // A skill's files are the server's resources: the rules for reading them apply.
        let target = format!("{server}:{}", skill.uri);
        let admit = self.admit(Subject::Builtin(builtin::READ_RESOURCE), target, Sensitivity::ReadOnly, server, false);
        if let Err(refusal) = admit() {
            return Outcome::failed(builtin::SKILL, refusal.to_string());
        }
        let cap = self.limits.tool_result;
        let mut attributes = vec![("origin", "server"), ("server", server), ("skill", name)];
        let loaded = match crate::session::skills::load(&session, skill) {
            Ok(loaded) => loaded,
            Err(err) => return Outcome::failed(builtin::SKILL, self.marker.plain(&crate::util::chain(&err), 2048)),
        };
        let Some(file) = file else {
            let mut body = loaded.body;
            let files = skill.relative_files();
            if !files.is_empty() {
                body.push_str(&format!(
                    "\n\nBundled files (load one with skill {{\"name\": \"{name}\", \"server\": \"{server}\", \"file\": ...}}): {}",
                    files.join(", ")
                ));
            }
            if let Some(allowed) = skill.front.get("allowed-tools") {
                body.push_str(&format!("\n\nallowed-tools (informational: nod's permissions decide): {allowed}"));
            }
            return Outcome::Ok(self.marker.marked(Source::Skill, &attributes, &body, cap, builtin::SKILL));
        };
        match crate::session::skills::read_file(&session, skill, file) {
            Ok(bytes) => {
                attributes.push(("file", file));
                let text = String::from_utf8_lossy(&bytes);
                Outcome::Ok(self.marker.marked(Source::Skill, &attributes, &text, cap, builtin::SKILL))
            }
            Err(err) => Outcome::failed(builtin::SKILL, self.marker.plain(&crate::util::chain(&err), 2048)),
        }
    }

    pub(super) fn run_subagent(&mut self, args: &Value, calling: &mut Calling<'_>) -> Ran {
        self.start_servers(calling.surface);
        let call = ToolCall { id: String::new(), name: builtin::SUBAGENT.into(), arguments: args.to_string() };
        let (mut outcomes, interrupted) =
            self.run_subagents(std::slice::from_ref(&call), calling.surface, calling.cancel);
        let outcome = outcomes.pop().expect("one outcome a call");
        if interrupted { Ran::End(CallEnd::Interrupted, Some(outcome)) } else { Ran::Done(outcome) }
    }

    /// Optional servers start on the first use of MCP; those that cannot be used are named
    /// once, as notices. Their tools are indexed as they come up.
    pub(super) fn start_servers(&mut self, surface: &mut dyn Surface) {
        if !self.reach.starts_servers() {
            return;
        }
        if self.runtime.has_idle() {
            self.runtime.start_all();
            // Servers another thread is starting (a background start) are awaited.
            self.runtime.wait_started(std::time::Duration::from_secs(120));
            self.index_tools();
        }
        self.report_shared_names(surface);
        if !self.options.report_servers {
            return;
        }
        for name in self.runtime.names() {
            if self.reported.contains(&name) {
                continue;
            }
            if let Some(problem) = self.runtime.problem(&name) {
                let problem = self.marker.redact(&problem);
                surface.notice(Level::Warning, &format!("MCP server {name} is not available: {problem}"));
                self.reported.push(name);
            }
        }
    }

    /// Says once per shared name that two tools have the same canonical name, so a rule that
    /// names it applies to both (deny winning).
    fn report_shared_names(&mut self, surface: &mut dyn Surface) {
        for (name, identities) in self.catalog.aliases.shared() {
            if self.reported.iter().any(|r| r == name) {
                continue;
            }
            let tools: Vec<String> = identities
                .iter()
                .map(|i| format!("server {} tool {}", i.server, self.marker.plain(&i.tool, 128)))
                .collect();
            let text = format!(
                "{} share the permission name {name}: a rule that names it applies to each of them, and a deny wins",
                tools.join(" and ")
            );
            surface.notice(Level::Warning, &text);
            self.reported.push(name.to_string());
        }
    }

    /// The permission decision, asking when needed. `Ok(approved)`: go on (`approved` says a
    /// person approved this one call); `Err`: the tool does not run.
    fn permit(
        &mut self,
        subject: &Subject,
        target: &str,
        sensitivity: Sensitivity,
        approval: &Approval,
        surface: &mut dyn Surface,
        notes: &mut Vec<String>,
    ) -> Result<bool, Ran> {
        let name = subject.name().to_string();
        let denied = |denial: Denial| Ran::Done(Failure::denied(&name, denial).into());
        match self.policy.decide(subject, target, sensitivity) {
            Decision::Allow => Ok(false),
            Decision::Deny(denial) => Err(denied(denial)),
            Decision::Ask => match surface.approve(approval) {
                None => Err(denied(Denial::PermissionRequired)),
                Some(Answer::Once) => Ok(true),
                Some(Answer::Session) => {
                    self.policy.grant(subject, target);
                    Ok(true)
                }
                Some(Answer::Deny(note)) => {
                    if let Some(note) = note.filter(|n| !n.trim().is_empty()) {
                        notes.push(format!("Note from the user about {name}: {note}"));
                    }
                    Err(denied(Denial::UserDenied))
                }
                Some(Answer::Cancel) => {
                    Err(Ran::End(CallEnd::Interrupted, Some(Failure::denied(&name, Denial::UserDenied).into())))
                }
            },
        }
    }

    /// The last word before a request is sent (and before any retry with input): the reach
    /// still admits `server` (a subagent's view is alive, its session the admitted one), and
    /// the permission decision still holds. A refusal is a typed `Failure`.
    fn admit(&self, subject: Subject, target: String, sensitivity: Sensitivity, server: &str, approved: bool) -> Admit {
        let policy = self.policy.clone();
        let reach = self.reach.clone();
        let server = server.to_string();
        Arc::new(move || {
            let name = subject.name();
            reach.check(name, &server).map_err(|f| Arc::new(f) as crate::dispatch::Refusal)?;
            policy
                .recheck(&subject, &target, sensitivity, approved)
                .map_err(|denial| Arc::new(Failure::denied(name, denial)) as crate::dispatch::Refusal)
        })
    }

    fn call_mcp(&mut self, alias: &str, args: Value, calling: &mut Calling<'_>) -> Ran {
        if !self.reach.admits_tool(alias) {
            return Ran::Done(Outcome::failed(alias, "this tool is not in this subagent's view"));
        }
        let Some(entry) = self.catalog.lookup(&self.runtime, &self.limits, alias) else {
            return Ran::Done(Outcome::failed(alias, "tool no longer available"));
        };
        let subject = self.catalog.subject(alias).expect("a looked-up alias has an identity");
        let approval = Approval {
            tool: alias.to_string(),
            server: Some(entry.server.clone()),
            original: Some(entry.name().to_string()),
            arguments: args.clone(),
            agent: None,
        };
        let approved =
            match self.permit(&subject, "*", Sensitivity::Sensitive, &approval, calling.surface, calling.notes) {
                Ok(approved) => approved,
                Err(ran) => return ran,
            };
        let session = match self.reach.session(&self.runtime, alias, &entry.server) {
            Ok(session) => session,
            Err(_) if !self.reach.is_child() => return Ran::Done(Outcome::failed(alias, "tool no longer available")),
            Err(failure) => return Ran::Done(failure.into()),
        };
        let admit = self.admit(subject, "*".into(), Sensitivity::Sensitive, &entry.server, approved);
        calling.surface.tool_running();
        let mut call = session.call_tool_admitted(entry.name(), &args, Some(calling.group), admit);
        match self.wait_call(&session, &mut call, calling, alias) {
            Ok(result) => Ran::Done(self.mcp_outcome(alias, &entry.server, entry.name(), result)),
            Err(ran) => ran,
        }
    }

    /// Waits for `call`, answering through the surface the elicitations that arrive meanwhile
    /// (a server's elicitation/create, or the input requests of a 2026-07-28 result). The
    /// result, or how the tool ended otherwise (input nobody can give, cancellation).
    fn wait_call(
        &mut self,
        session: &Session,
        call: &mut Call,
        calling: &mut Calling<'_>,
        tool: &str,
    ) -> Result<Result<Value, CallError>, Ran> {
        loop {
            select! {
                recv(call.updates()) -> update => match update {
                    Ok(CallUpdate::Progress(progress)) => calling.surface.progress(&progress),
                    // A cancelled turn ends as cancelled, whichever of the two the select
                    // saw first (the cancellation also ends the call with an error).
                    Ok(CallUpdate::Done(_)) if calling.cancel.is_fired() => {
                        session.cancel(call, "client cancelled");
                        return Err(Ran::End(CallEnd::Interrupted, None));
                    }
                    Ok(CallUpdate::Done(finished)) => {
                        if let Some(result) = session.settle(call, finished.into_result()) {
                            return Ok(result);
                        }
                    }
                    Err(_) => return Err(Ran::Done(Outcome::failed(tool, "nod is shutting down"))),
                },
                recv(self.asked) -> asked => if let Ok(Asked { input, responder, sampling }) = asked {
                    if responder.is_cancelled() {
                        continue;
                    }
                    if let Some(asked) = sampling {
                        responder.respond(Ok(approve_sampling(calling.surface, &asked)));
                        continue;
                    }
                    match calling.surface.elicit(&input) {
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
                            return Err(Ran::Done(Outcome::failed(tool, why)));
                        }
                    }
                },
                recv(calling.cancel.receiver()) -> _ => {
                    session.cancel(call, "client cancelled");
                    return Err(Ran::End(CallEnd::Interrupted, None));
                }
            }
        }
    }

    /// A failure whose message may quote a server (its state, its stderr when it crashed),
    /// marked as that server's text and redacted.
    fn marked_failure(&self, failure: Failure, server: &str) -> Failure {
        match failure {
            Failure::Execution { tool, message } => {
                let message =
                    self.marker.marked(Source::Mcp, &[("server", server)], &message, self.limits.tool_result, &tool);
                Failure::Execution { tool, message }
            }
            other => other,
        }
    }

    /// A `tools/call` result as the model sees it (agent-reference 2.5): the content, or the
    /// server's error, or nod's own error about the call (which may quote a server's stderr),
    /// all marked as the server's and redacted.
    fn mcp_outcome(&self, alias: &str, server: &str, tool: &str, result: Result<Value, CallError>) -> Outcome {
        let wrap = |text: &str| {
            self.marker.marked(Source::Mcp, &[("server", server), ("tool", tool)], text, self.limits.tool_result, alias)
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
                    Outcome::failed(alias, message)
                } else {
                    Outcome::Ok(wrap(&text))
                }
            }
            Err(err) => refused(&err).unwrap_or_else(|| Outcome::failed(alias, wrap(&error_text(&err)))),
        }
    }
}

/// A refusal of the check before transport, taken back as the agent's own failure.
pub(super) fn refused(err: &CallError) -> Option<Outcome> {
    match err {
        CallError::Refused(refusal) => Some(
            refusal
                .downcast_ref::<Failure>()
                .cloned()
                .unwrap_or_else(|| Failure::execution("", refusal.to_string()))
                .into(),
        ),
        _ => None,
    }
}

/// What a call's error says: a server's own message as it wrote it, nod's text otherwise.
pub(super) fn error_text(err: &CallError) -> String {
    match err {
        CallError::Rpc(error) => error.message.clone(),
        other => other.to_string(),
    }
}

/// The first required parameter of `row` that `args` lacks or gives empty.
fn required_missing(row: &Builtin, args: &Value) -> Option<String> {
    let schema = (row.parameters)();
    let required = schema.get("required").and_then(Value::as_array)?;
    let missing: Vec<&str> = required
        .iter()
        .filter_map(Value::as_str)
        .filter(|key| args.get(*key).and_then(Value::as_str).is_none_or(|v| v.trim().is_empty()))
        .collect();
    match missing.as_slice() {
        [] => None,
        [one] => Some(format!("a {one}")),
        many => Some(many.join(" and ")),
    }
}

fn text(args: &Value, key: &str) -> String {
    args.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// A one-line preview of a call's arguments (80 characters), for tool lines.
pub fn preview(raw: &str) -> String {
    let line = crate::util::one_line(raw);
    match line.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// The pseudo-tool a server's sampling request is approved as.
pub const SAMPLING: &str = "sampling";

/// A server's sampling request put to the person on `surface` as an approval of the
/// `sampling` pseudo-tool; the answer for the sampler (see `sampling_answer`).
pub(super) fn approve_sampling(surface: &mut dyn Surface, asked: &Value) -> Value {
    sampling_answer(surface.approve(&sampling_approval(asked)))
}

/// The approval a sampling request is asked as: the `sampling` pseudo-tool, its arguments the
/// server, the messages, the token limit and the model that would answer.
pub fn sampling_approval(asked: &Value) -> super::Approval {
    let server = asked.get("server").and_then(Value::as_str).map(str::to_string);
    super::Approval { tool: SAMPLING.into(), server, original: None, arguments: asked.clone(), agent: None }
}

/// The person's answer for the sampler: `{"approved", "asked", "session"}` (`asked` false
/// when nobody could be asked; `session` when that server may sample for the rest of the
/// session without being asked again).
pub fn sampling_answer(answer: Option<super::Answer>) -> Value {
    match answer {
        Some(super::Answer::Once) => json!({ "approved": true, "asked": true }),
        Some(super::Answer::Session) => json!({ "approved": true, "asked": true, "session": true }),
        Some(_) => json!({ "approved": false, "asked": true }),
        None => json!({ "approved": false, "asked": false }),
    }
}
