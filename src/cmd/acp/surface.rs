//! A turn's view of the ACP client (`AcpSurface`): the agent's text and tool calls as
//! `session/update` notifications, its permission questions as `session/request_permission`,
//! and MCP elicitations relayed as ACP `elicitation/create` in the modes the client advertised.
//!
//! ACP's prompt-turn rule: every tool call the client was shown has a final status (`completed`
//! or `failed`) before the prompt's answer, or an editor shows it running forever. The surface
//! keeps the calls it announced and has not ended; `end_turn` fails what is left.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::{AcpSession, AgentSide, method};
use crate::agent::{Answer, Approval, Elicited, Level, Status, Surface};
use crate::session::elicit::InputRequired;
use crate::util::Trigger;

pub(super) struct AcpSurface {
    side: Arc<AgentSide>,
    session: Arc<AcpSession>,
    trigger: Trigger,
    /// The agent's tool call in progress: its id and arguments.
    call: Option<(String, Value)>,
    /// Every call announced and not yet ended, the agent's and its subagents', in order.
    open: Vec<String>,
}

impl AcpSurface {
    pub fn new(side: Arc<AgentSide>, session: Arc<AcpSession>, trigger: Trigger) -> AcpSurface {
        AcpSurface { side, session, trigger, call: None, open: Vec::new() }
    }

    /// The turn is over, however it ended: a call it started and never finished (the turn was
    /// cancelled while the call ran, or ended some other way) fails now, before the caller
    /// sends the prompt's answer.
    pub fn end_turn(&mut self, status: Status) {
        let why = match status {
            Status::Interrupted => "cancelled",
            Status::Completed | Status::Failed | Status::InputRequired => "the turn ended before the call finished",
        };
        self.call = None;
        for id in std::mem::take(&mut self.open) {
            self.end_update(&id, false, why);
        }
    }

    /// Shows a new tool call, open until `end`; its id.
    fn announce(&mut self, title: &str, kind: &str, raw: &Value) -> String {
        let n = self.session.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let id = format!("call_{n}");
        self.update(json!({ "sessionUpdate": "tool_call", "toolCallId": id, "title": title, "kind": kind,
            "status": "pending", "rawInput": raw }));
        self.open.push(id.clone());
        id
    }

    /// A call's final status, with the text the client shows under it.
    fn end(&mut self, id: &str, ok: bool, text: &str) {
        self.open.retain(|open| open != id);
        self.end_update(id, ok, text);
    }

    fn end_update(&self, id: &str, ok: bool, text: &str) {
        self.update(json!({ "sessionUpdate": "tool_call_update", "toolCallId": id,
            "status": if ok { "completed" } else { "failed" },
            "content": [{ "type": "content", "content": { "type": "text", "text": text } }] }));
    }

    fn update(&self, update: Value) {
        if self.session.closed.load(Ordering::SeqCst) {
            return;
        }
        self.side.peer.notify(method::SESSION_UPDATE, json!({ "sessionId": self.session.id, "update": update }));
    }

    fn text_chunk(&self, kind: &str, text: &str) {
        self.update(json!({ "sessionUpdate": kind, "content": { "type": "text", "text": text } }));
    }
}

/// A tool's ACP kind.
fn kind(name: &str) -> &'static str {
    crate::agent::builtin::kind(name)
}

impl Surface for AcpSurface {
    fn text(&mut self, delta: &str) {
        self.text_chunk("agent_message_chunk", delta);
    }

    fn tool_started(&mut self, name: &str, arguments: &str) {
        let raw: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!(arguments));
        let id = self.announce(name, kind(name), &raw);
        self.call = Some((id, raw));
    }

    fn tool_running(&mut self) {
        if let Some((id, _)) = &self.call {
            self.update(json!({ "sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress" }));
        }
    }

    fn tool_finished(&mut self, _name: &str, ok: bool, _detail: &str, result: &str) {
        let Some((id, _)) = self.call.take() else { return };
        self.end(&id, ok, crate::agent::text::cut(result, 64 * 1024));
    }

    fn notice(&mut self, _level: Level, text: &str) {
        self.text_chunk("agent_thought_chunk", &format!("! {}", self.side.ctx.redactor.redact(text)));
    }

    fn approve(&mut self, request: &Approval) -> Option<Answer> {
        // A server's sampling request is shown as an entry of its own, with what it asks.
        let sampling = request.tool == crate::agent::SAMPLING;
        let (id, title, raw) = match &request.agent {
            // A subagent's call is a tool call of its own, titled with the subagent's name.
            Some(agent) => {
                let title = format!("subagent {agent}: {}", request.title());
                let id = self.announce(&title, kind(&request.tool), &request.arguments);
                (id, title, request.arguments.clone())
            }
            None if sampling => {
                let title = request.title();
                let id = self.announce(&title, "other", &request.arguments);
                (id, title, request.arguments.clone())
            }
            None => {
                let (id, raw) = self.call.clone().unwrap_or_else(|| ("call_0".into(), Value::Null));
                (id, request.title(), raw)
            }
        };
        let params = json!({ "sessionId": self.session.id,
            "toolCall": { "toolCallId": id, "title": title, "kind": kind(&request.tool), "status": "pending", "rawInput": raw },
            "options": [
                { "optionId": "allow_once", "name": "Allow once", "kind": "allow_once" },
                { "optionId": "allow_always", "name": "Allow for this session", "kind": "allow_always" },
                { "optionId": "reject_once", "name": "Reject", "kind": "reject_once" },
            ] });
        let answer = match self.side.peer.request(method::REQUEST_PERMISSION, &params, &self.trigger) {
            None => Answer::Cancel,
            Some(Err(error)) => {
                log::warn!("acp: the client answered session/request_permission with an error: {error}");
                Answer::Deny(None)
            }
            Some(Ok(result)) => permission(&result),
        };
        if request.agent.is_some() || sampling {
            // The subagent's call runs on its own; this entry records the decision, whatever
            // it was (a cancelled question too).
            let (allowed, said) = match answer {
                Answer::Once | Answer::Session if sampling => (true, "sampling approved"),
                Answer::Once | Answer::Session => (true, "approved for the subagent"),
                Answer::Cancel => (false, "cancelled"),
                Answer::Deny(_) => (false, "refused"),
            };
            self.end(&id, allowed, said);
        }
        Some(answer)
    }

    fn elicit(&mut self, request: &InputRequired) -> Elicited {
        let caps = self.side.client.get().copied().unwrap_or_default();
        let supported = match request.mode.as_str() {
            "form" => caps.form,
            "url" => caps.url,
            _ => false,
        };
        if !supported {
            return Elicited::Refused(format!(
                "MCP server '{}' asked for input in {} mode, which this ACP client does not support; nod answered cancel",
                request.server, request.mode
            ));
        }
        let mut params = json!({ "sessionId": self.session.id, "mode": request.mode, "message": request.message });
        if let Some((id, _)) = &self.call {
            params["toolCallId"] = json!(id);
        }
        if let Some(schema) = &request.requested_schema {
            params["requestedSchema"] = schema.clone();
        }
        if let Some(url) = &request.url {
            params["url"] = json!(url);
        }
        if let Some(id) = &request.elicitation_id {
            params["elicitationId"] = json!(id);
        }
        match self.side.peer.request(method::ELICIT, &params, &self.trigger) {
            Some(Ok(answer))
                if matches!(answer.get("action").and_then(Value::as_str), Some("accept" | "decline" | "cancel")) =>
            {
                let mut out = json!({ "action": answer["action"] });
                if answer["action"] == "accept" && request.mode == "form" {
                    out["content"] = answer.get("content").cloned().unwrap_or_else(|| json!({}));
                }
                Elicited::Answer(out)
            }
            Some(Ok(other)) => {
                log::warn!("acp: the client's elicitation answer has no valid action: {other}");
                Elicited::Answer(json!({ "action": "cancel" }))
            }
            Some(Err(_)) | None => Elicited::Answer(json!({ "action": "cancel" })),
        }
    }
}

/// The client's answer to `session/request_permission`; anything unexpected refuses.
fn permission(result: &Value) -> Answer {
    let outcome = result.get("outcome").unwrap_or(&Value::Null);
    match outcome.get("outcome").and_then(Value::as_str) {
        Some("selected") => match outcome.get("optionId").and_then(Value::as_str) {
            Some("allow_once") => Answer::Once,
            Some("allow_always") => Answer::Session,
            _ => Answer::Deny(None),
        },
        Some("cancelled") => Answer::Cancel,
        _ => Answer::Deny(None),
    }
}
