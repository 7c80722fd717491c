//! Saved sessions over ACP: `session/load` (with the conversation replayed to the client as
//! updates) and `session/resume`, `session/list`, and the file a new session is saved to from
//! its first prompt. The files themselves are `crate::saved`'s.

use serde_json::{Value, json};

use super::{AcpSession, AgentSide, lock, method, modes, start_servers};
use crate::agent::Agent;
use crate::jsonrpc::INVALID_PARAMS;

/// Where a session is saved, when it is.
pub(super) struct Saving {
    pub(super) home: std::path::PathBuf,
    pub(super) workspace: String,
    pub(super) model: String,
}

impl AgentSide {
    /// `session/load` (`replay`: the saved conversation goes to the client as updates before
    /// the answer) and `session/resume` (no replay): a saved session goes on in a new
    /// session with the client's servers of now; the model gets the conversation as it was.
    pub(super) fn load_session(&self, id: Value, params: &Value, replay: bool) {
        let Some(saved_id) = params.get("sessionId").and_then(Value::as_str) else {
            return self.peer.error(&id, INVALID_PARAMS, "sessionId is missing");
        };
        if lock(&self.sessions).contains_key(saved_id) {
            return self.peer.error(&id, INVALID_PARAMS, &format!("session {saved_id} is open already"));
        }
        let loaded = match crate::config::home() {
            Ok(home) if crate::saved::valid_id(saved_id) => crate::saved::load(&home, saved_id).map(|l| (home, l)),
            Ok(_) => Err(anyhow::anyhow!("no saved session {saved_id:?}")),
            Err(err) => Err(err),
        };
        let (home, loaded) = match loaded {
            Ok(found) => found,
            Err(err) => return self.peer.error(&id, INVALID_PARAMS, &format!("{err:#}")),
        };
        for warning in &loaded.warnings {
            log::warn!("{warning}");
        }
        let (session, mode) = match self.build_session(params, Some(saved_id.to_string())) {
            Ok(built) => built,
            Err((code, why)) => return self.peer.error(&id, code, &why),
        };
        if replay {
            self.replay(&session, &loaded.messages);
        }
        let recorder = session.saving.as_ref().and_then(|_| {
            crate::saved::Recorder::resume(&home, saved_id, self.ctx.redactor.clone())
                .inspect_err(|err| log::warn!("{err:#}; the rest of the session is not saved"))
                .ok()
        });
        lock(&session.agent).go_on(loaded, recorder);
        lock(&self.sessions).insert(session.id.clone(), session.clone());
        self.peer.result(&id, json!({ "modes": modes(mode) }));
        start_servers(&session);
    }

    /// The saved conversation as `session/update` notifications: the user's and the agent's
    /// messages as chunks, each tool call with its final status and result.
    fn replay(&self, session: &AcpSession, messages: &[crate::provider::Message]) {
        use crate::provider::Message;
        let update = |update: Value| {
            self.peer.notify(method::SESSION_UPDATE, json!({ "sessionId": session.id, "update": update }));
        };
        let chunk =
            |kind: &str, text: &str| json!({ "sessionUpdate": kind, "content": { "type": "text", "text": text } });
        for (i, message) in messages.iter().enumerate() {
            match message {
                Message::System(_) => {}
                Message::User(text) => update(chunk("user_message_chunk", text)),
                Message::UserParts(parts) => {
                    update(chunk("user_message_chunk", &crate::provider::Part::text_of(parts)));
                }
                Message::Assistant { text, calls } => {
                    if !text.is_empty() {
                        update(chunk("agent_message_chunk", text));
                    }
                    // Each call's result follows it, before the next model message.
                    for (n, call) in calls.iter().enumerate() {
                        let raw: Value =
                            serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!(call.arguments));
                        let call_id = format!("saved_{i}_{n}");
                        update(json!({ "sessionUpdate": "tool_call", "toolCallId": call_id, "title": call.name,
                            "kind": crate::agent::builtin::kind(&call.name), "status": "pending", "rawInput": raw }));
                        let result = messages[i + 1..]
                            .iter()
                            .take_while(|m| !matches!(m, Message::Assistant { .. }))
                            .find_map(|m| match m {
                                Message::Tool { call_id, content } if *call_id == call.id => Some(content.as_str()),
                                _ => None,
                            });
                        let (status, text) = match result {
                            Some(content) if content.starts_with("{\"error\"") => ("failed", content),
                            Some(content) => ("completed", content),
                            None => ("failed", "the call did not finish"),
                        };
                        update(json!({ "sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status,
                            "content": [{ "type": "content", "content": { "type": "text", "text": text } }] }));
                    }
                }
                Message::Tool { .. } => {}
            }
        }
    }

    /// `session/list {cwd?, cursor?}`: the saved sessions (of `cwd` when given), the most
    /// recent first, in one page.
    pub(super) fn list_sessions(&self, id: Value, params: &Value) {
        let Ok(home) = crate::config::home() else { return self.peer.result(&id, json!({ "sessions": [] })) };
        let cwd = params.get("cwd").and_then(Value::as_str);
        let sessions: Vec<Value> = crate::saved::list(&home)
            .into_iter()
            .filter(|s| cwd.is_none_or(|cwd| s.meta.workspace == cwd))
            .map(|s| {
                json!({ "sessionId": s.meta.id, "cwd": s.meta.workspace, "title": s.meta.title,
                    "updatedAt": crate::util::rfc3339(s.updated) })
            })
            .collect();
        self.peer.result(&id, json!({ "sessions": sessions }));
    }
}

impl AcpSession {
    /// At the first prompt of a new session: its file, titled by the prompt.
    pub(super) fn start_saving(&self, agent: &mut Agent, prompt: &str, redactor: &crate::util::Redactor) {
        let Some(saving) = &self.saving else { return };
        if agent.saved_id().is_some() {
            return;
        }
        let meta = crate::saved::Meta {
            id: self.id.clone(),
            ..crate::saved::Meta::new("acp", &saving.workspace, &saving.model, prompt, redactor)
        };
        match crate::saved::Recorder::create(&saving.home, meta, redactor.clone()) {
            Ok(recorder) => agent.save_to(recorder),
            Err(err) => log::warn!("{err:#}; this session is not saved"),
        }
    }
}
