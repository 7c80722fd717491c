//! A turn's view of the ACP client (`AcpSurface`): the agent's text and tool calls as
//! `session/update` notifications, its permission questions as `session/request_permission`,
//! and MCP elicitations relayed as ACP `elicitation/create` in the modes the client advertised.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::{AcpSession, AgentSide, method};
use crate::agent::{Answer, Approval, Elicited, Level, Surface};
use crate::session::elicit::InputRequired;
use crate::util::Trigger;

pub(super) struct AcpSurface {
    pub side: Arc<AgentSide>,
    pub session: Arc<AcpSession>,
    pub trigger: Trigger,
    /// The tool call in progress: its id, name and arguments.
    pub call: Option<(String, String, Value)>,
}

impl AcpSurface {
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
        let n = self.session.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let id = format!("call_{n}");
        let raw: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!(arguments));
        self.update(json!({ "sessionUpdate": "tool_call", "toolCallId": id, "title": name, "kind": kind(name),
            "status": "pending", "rawInput": raw }));
        self.call = Some((id, name.to_string(), raw));
    }

    fn tool_running(&mut self) {
        if let Some((id, _, _)) = &self.call {
            self.update(json!({ "sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress" }));
        }
    }

    fn tool_finished(&mut self, _name: &str, ok: bool, _detail: &str, result: &str) {
        let Some((id, _, _)) = self.call.take() else { return };
        let text = crate::agent::text::cut(result, 64 * 1024);
        self.update(json!({ "sessionUpdate": "tool_call_update", "toolCallId": id,
            "status": if ok { "completed" } else { "failed" },
            "content": [{ "type": "content", "content": { "type": "text", "text": text } }] }));
    }

    fn notice(&mut self, _level: Level, text: &str) {
        self.text_chunk("agent_thought_chunk", &format!("! {}", self.side.ctx.redactor.redact(text)));
    }

    fn approve(&mut self, request: &Approval) -> Option<Answer> {
        let (id, title, raw) = match &request.agent {
            // A subagent's call is a tool call of its own, titled with the subagent's name.
            Some(agent) => {
                let n = self.session.calls.fetch_add(1, Ordering::SeqCst) + 1;
                let id = format!("call_{n}");
                let title = format!("subagent {agent}: {}", request.title());
                self.update(json!({ "sessionUpdate": "tool_call", "toolCallId": id, "title": title,
                    "kind": kind(&request.tool), "status": "pending", "rawInput": request.arguments }));
                (id, title, request.arguments.clone())
            }
            None => {
                let (id, _, raw) = self.call.clone().unwrap_or_else(|| ("call_0".into(), String::new(), Value::Null));
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
            None => return Some(Answer::Cancel),
            Some(Err(error)) => {
                log::warn!("acp: the client answered session/request_permission with an error: {error}");
                return Some(Answer::Deny(None));
            }
            Some(Ok(result)) => result,
        };
        let outcome = answer.get("outcome").unwrap_or(&Value::Null);
        let answer = match outcome.get("outcome").and_then(Value::as_str) {
            Some("selected") => match outcome.get("optionId").and_then(Value::as_str) {
                Some("allow_once") => Answer::Once,
                Some("allow_always") => Answer::Session,
                _ => Answer::Deny(None),
            },
            Some("cancelled") => Answer::Cancel,
            _ => Answer::Deny(None),
        };
        if request.agent.is_some() {
            // The subagent's call runs on its own; this entry records the decision.
            let allowed = matches!(answer, Answer::Once | Answer::Session);
            let said = if allowed { "approved for the subagent" } else { "refused" };
            self.update(json!({ "sessionUpdate": "tool_call_update", "toolCallId": id,
                "status": if allowed { "completed" } else { "failed" },
                "content": [{ "type": "content", "content": { "type": "text", "text": said } }] }));
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
        if let Some((id, _, _)) = &self.call {
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
