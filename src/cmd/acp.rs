//! `nod acp`: nod as an Agent Client Protocol (v1) agent. Newline-delimited JSON-RPC on stdin
//! and stdout, requests in both directions with separate id spaces, at most 8 MiB a message;
//! stdout carries the protocol only.
//!
//! The main thread reads and dispatches; each `session/prompt` runs one turn of the session's
//! agent (the `nod ask` agent: no second loop) on a thread of its own, so `session/cancel`,
//! answers to nod's own requests and other sessions keep flowing. A session's MCP servers are
//! the client's `mcpServers` plus the approved project servers of its `cwd`, on a runtime of
//! its own; its permissions become `session/request_permission`; an MCP elicitation is
//! relayed as ACP `elicitation/create` in the modes the client advertised, and refused
//! (`cancel` to the server, a failed tool call) otherwise. No OAuth flow ever starts here.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crossbeam_channel::{Sender, select};
use serde_json::{Value, json};

use super::{Context, Exit};
use crate::agent::permissions::Mode;
use crate::agent::{Agent, Answer, Approval, Elicited, Level, Status, Surface};
use crate::cli::Acp;
use crate::config;
use crate::session::Access;
use crate::session::elicit::{InputRequired, PolicyHandler};
use crate::session::runtime::Runtime;
use crate::util::Trigger;

/// The largest message nod reads.
const MAX_MESSAGE: usize = 8 * 1024 * 1024;
const PROTOCOL_VERSION: u64 = 1;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

pub fn run(acp: Acp, ctx: &Context) -> Exit {
    let agent = Arc::new(AgentSide::new(acp, ctx.clone()));
    let on_exit = agent.clone();
    // SIGTERM, SIGHUP or Ctrl-C: every session ends with nothing left running.
    ctx.interrupt.on_fire(move || {
        on_exit.close_all();
        std::process::exit(Exit::Interrupted as i32);
    });
    if let Some(signals) = &ctx.signals {
        signals.arm(ctx.interrupt.clone());
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        match read_message(&mut input) {
            Frame::End => break,
            Frame::TooLarge => {
                agent.out.error(Value::Null, INVALID_REQUEST, "message over 8 MiB; ignored");
            }
            Frame::Line(line) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                agent.dispatch(&line);
            }
        }
    }
    agent.close_all();
    Exit::Ok
}

enum Frame {
    Line(Vec<u8>),
    TooLarge,
    End,
}

/// One line of at most `MAX_MESSAGE` bytes; a longer one is read to its end and dropped.
fn read_message(input: &mut impl BufRead) -> Frame {
    let mut line = Vec::new();
    let mut too_large = false;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Frame::End,
        };
        if buffer.is_empty() {
            return if too_large {
                Frame::TooLarge
            } else if line.is_empty() {
                Frame::End
            } else {
                Frame::Line(line)
            };
        }
        let (chunk, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !too_large {
            if line.len() + chunk.len() > MAX_MESSAGE {
                too_large = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buffer.len());
        input.consume(used);
        if done.is_some() {
            return if too_large { Frame::TooLarge } else { Frame::Line(line) };
        }
    }
}

/// Writes messages to stdout, one a line.
struct Out {
    stdout: Mutex<std::io::Stdout>,
}

impl Out {
    fn send(&self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        let mut stdout = self.stdout.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = stdout.write_all(&line);
        let _ = stdout.flush();
    }

    fn result(&self, id: Value, result: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    }

    fn error(&self, id: Value, code: i64, message: &str) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }));
    }

    fn notify(&self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }
}

/// What the client can show.
#[derive(Clone, Copy, Debug, Default)]
struct ClientCaps {
    form: bool,
    url: bool,
}

/// The agent side of the connection: the sessions, and nod's own requests to the client.
struct AgentSide {
    acp: Acp,
    ctx: Context,
    out: Out,
    client: OnceLock<ClientCaps>,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
    /// nod's requests to the client waiting for their answer, by id.
    waiting: Mutex<HashMap<i64, Sender<Result<Value, Value>>>>,
    next_id: AtomicI64,
    next_session: AtomicU64,
}

struct AcpSession {
    id: String,
    agent: Mutex<Agent>,
    /// The agent's policy, shared: the mode changes while a turn holds the agent.
    policy: Arc<crate::agent::permissions::Policy>,
    runtime: Arc<Runtime>,
    /// What the agent shares with its subagents: closed with the session.
    host: Arc<crate::agent::subagent::Host>,
    /// The running prompt: its request id and the trigger that cancels it.
    running: Mutex<Option<(Value, Trigger)>>,
    /// Tool call ids of this session.
    calls: AtomicU64,
    closed: AtomicBool,
}

impl AgentSide {
    fn new(acp: Acp, ctx: Context) -> AgentSide {
        AgentSide {
            acp,
            ctx,
            out: Out { stdout: Mutex::new(std::io::stdout()) },
            client: OnceLock::new(),
            sessions: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(0),
            next_session: AtomicU64::new(1),
        }
    }

    fn dispatch(self: &Arc<Self>, line: &[u8]) {
        let message: Value = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(err) => {
                self.out.error(Value::Null, PARSE_ERROR, &format!("not JSON: {err}"));
                return;
            }
        };
        let id = message.get("id").cloned();
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            self.out.error(id.unwrap_or(Value::Null), INVALID_REQUEST, "not a JSON-RPC 2.0 message");
            return;
        }
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            // An answer to one of nod's requests.
            if let Some(id) = id.as_ref().and_then(Value::as_i64) {
                let waiting = lock(&self.waiting).remove(&id);
                if let Some(tx) = waiting {
                    let answer = match message.get("error") {
                        Some(error) => Err(error.clone()),
                        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                    };
                    let _ = tx.send(answer);
                }
            }
            return;
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = id else {
            self.notification(method, &params);
            return;
        };
        if method != "initialize" && self.client.get().is_none() {
            self.out.error(id, INVALID_REQUEST, "initialize first");
            return;
        }
        match method {
            "initialize" => self.initialize(id, &params),
            "session/new" => self.new_session(id, &params),
            "session/prompt" => self.prompt(id, &params),
            "session/set_mode" => self.set_mode(id, &params),
            "session/close" => match self.session(&params) {
                Ok(session) => {
                    self.close(&session);
                    self.out.result(id, json!({}));
                }
                Err(why) => self.out.error(id, INVALID_PARAMS, &why),
            },
            other => self.out.error(id, METHOD_NOT_FOUND, &format!("nod does not implement {other}")),
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        match method {
            "session/cancel" => {
                if let Ok(session) = self.session(params) {
                    session.cancel();
                }
            }
            "$/cancel_request" => {
                let request = params.get("requestId").cloned().unwrap_or(Value::Null);
                for session in lock(&self.sessions).values() {
                    let matches = lock(&session.running).as_ref().is_some_and(|(id, _)| *id == request);
                    if matches {
                        session.cancel();
                    }
                }
            }
            other => log::debug!("acp: notification {other} ignored"),
        }
    }

    fn initialize(&self, id: Value, params: &Value) {
        let elicitation = params.pointer("/clientCapabilities/elicitation");
        let advertised = |mode: &str| elicitation.and_then(|e| e.get(mode)).is_some_and(Value::is_object);
        let caps = ClientCaps { form: advertised("form"), url: advertised("url") };
        if self.client.set(caps).is_err() {
            self.out.error(id, INVALID_REQUEST, "already initialized");
            return;
        }
        self.out.result(
            id,
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": false,
                    "promptCapabilities": { "image": false, "audio": false, "embeddedContext": true },
                    "mcpCapabilities": { "http": true, "sse": true },
                    "sessionCapabilities": { "close": {} },
                },
                "agentInfo": { "name": "nod", "title": "nod", "version": env!("CARGO_PKG_VERSION") },
                "authMethods": [],
            }),
        );
    }

    fn session(&self, params: &Value) -> Result<Arc<AcpSession>, String> {
        let id = params.get("sessionId").and_then(Value::as_str).ok_or("sessionId is missing")?;
        lock(&self.sessions).get(id).cloned().ok_or_else(|| format!("no session {id:?}"))
    }

    fn new_session(&self, id: Value, params: &Value) {
        match self.build_session(params) {
            Ok((session, mode)) => {
                let session_id = session.id.clone();
                lock(&self.sessions).insert(session_id.clone(), session.clone());
                self.out.result(
                    id,
                    json!({ "sessionId": session_id, "modes": { "currentModeId": mode.as_str(), "availableModes": [
                        { "id": "ask", "name": "Ask", "description": "Ask before each MCP tool call" },
                        { "id": "full-access", "name": "Full access", "description": "Run every tool without asking" },
                    ] } }),
                );
                // Every server connects now, in the background; the first use of MCP waits.
                let runtime = session.runtime.clone();
                let _ = std::thread::Builder::new().name("nod-acp-start".into()).spawn(move || {
                    runtime.start_all();
                });
            }
            Err((code, why)) => self.out.error(id, code, &why),
        }
    }

    fn build_session(&self, params: &Value) -> Result<(Arc<AcpSession>, Mode), (i64, String)> {
        let invalid = |why: String| (INVALID_PARAMS, why);
        let cwd = params.get("cwd").and_then(Value::as_str).ok_or_else(|| invalid("cwd is missing".into()))?;
        let cwd = std::path::PathBuf::from(cwd);
        if !cwd.is_absolute() {
            return Err(invalid(format!("cwd must be an absolute path, not {:?}", cwd.display())));
        }
        let client = config::acp::parse_servers(params.get("mcpServers").unwrap_or(&json!([]))).map_err(invalid)?;
        let surface = super::setup::Surface::Acp { cwd: &cwd, client, model: self.acp.model.as_deref() };
        let setup = super::setup::prepare(&surface, &self.acp.globals, &self.ctx.redactor, &super::setup::process_env)
            .map_err(|e| invalid(format!("{e:#}")))?;
        for issue in &setup.issues {
            log::warn!("{issue}");
        }
        if let Err(why) = &setup.provider {
            log::warn!("{why}");
        }
        let caps = self.client.get().copied().unwrap_or_default();
        let (asked_tx, asked_rx) = crossbeam_channel::unbounded();
        let handler = Arc::new(PolicyHandler::relaying(caps.form, caps.url, asked_tx));
        // No OAuth flow from here: stored tokens are used, and a server that needs more
        // says so.
        let access = Access {
            browser: None,
            fresh: false,
            redactor: self.ctx.redactor.clone(),
            revisions: crate::session::revisions::default_path(),
        };
        let runtime = setup.runtime(handler, access);
        let policy = setup.policy.clone();
        let mode = policy.mode();
        let agent = setup.agent(runtime.clone(), asked_rx);
        let n = self.next_session.fetch_add(1, Ordering::SeqCst);
        let seed = format!("{n}:{}:{:?}", std::process::id(), std::time::SystemTime::now());
        let digest = crate::sha256::digest(seed.as_bytes());
        let id = format!("sess_{}", digest[..8].iter().map(|b| format!("{b:02x}")).collect::<String>());
        let session = AcpSession {
            id,
            host: agent.host(),
            agent: Mutex::new(agent),
            policy,
            runtime,
            running: Mutex::new(None),
            calls: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        };
        Ok((Arc::new(session), mode))
    }

    fn set_mode(&self, id: Value, params: &Value) {
        let session = match self.session(params) {
            Ok(session) => session,
            Err(why) => return self.out.error(id, INVALID_PARAMS, &why),
        };
        let text = params.get("modeId").and_then(Value::as_str).unwrap_or("");
        let Some(mode) = Mode::parse(text) else {
            return self.out.error(id, INVALID_PARAMS, &format!("unknown mode {text:?}: ask or full-access"));
        };
        // The agent may be busy in a turn: the policy is shared, so the change applies at
        // its next decision.
        session.policy.set_mode(Some(mode));
        self.out.result(id, json!({}));
        self.out.notify(
            "session/update",
            json!({ "sessionId": session.id, "update": { "sessionUpdate": "current_mode_update", "currentModeId": mode.as_str() } }),
        );
    }

    fn prompt(self: &Arc<Self>, id: Value, params: &Value) {
        let session = match self.session(params) {
            Ok(session) => session,
            Err(why) => return self.out.error(id, INVALID_PARAMS, &why),
        };
        let text = match prompt_text(params.get("prompt").unwrap_or(&Value::Null)) {
            Ok(text) => text,
            Err(why) => return self.out.error(id, INVALID_PARAMS, &why),
        };
        let trigger = Trigger::default();
        {
            let mut running = lock(&session.running);
            if running.is_some() {
                return self.out.error(id, INVALID_REQUEST, "a prompt is already running in this session");
            }
            *running = Some((id.clone(), trigger.clone()));
        }
        let side = self.clone();
        let spawned = std::thread::Builder::new().name("nod-acp-turn".into()).spawn(move || {
            let mut surface =
                AcpSurface { side: side.clone(), session: session.clone(), trigger: trigger.clone(), call: None };
            let report = {
                let mut agent = lock(&session.agent);
                agent.turn(&text, &mut surface, &trigger)
            };
            *lock(&session.running) = None;
            match report.status {
                Status::Completed if report.step_limit => {
                    side.out.result(id, json!({ "stopReason": "max_turn_requests" }));
                }
                Status::Completed | Status::InputRequired => side.out.result(id, json!({ "stopReason": "end_turn" })),
                Status::Interrupted => side.out.result(id, json!({ "stopReason": "cancelled" })),
                Status::Failed => {
                    let error = side.ctx.redactor.redact(report.error.as_deref().unwrap_or("the turn failed"));
                    if error.contains("content_filter") {
                        side.out.result(id, json!({ "stopReason": "refusal" }));
                    } else {
                        side.out.error(id, INTERNAL_ERROR, &error);
                    }
                }
            }
        });
        if spawned.is_err() {
            log::error!("acp: cannot start a thread for the prompt");
        }
    }

    /// Ends a session: its turn is cancelled and its servers shut down.
    fn close(&self, session: &AcpSession) {
        session.closed.store(true, Ordering::SeqCst);
        session.host.close("the ACP session closed");
        session.cancel();
        lock(&self.sessions).remove(&session.id);
        session.runtime.engine().cancel_all("the ACP session closed");
        session.runtime.shutdown();
    }

    fn close_all(&self) {
        let sessions: Vec<Arc<AcpSession>> = lock(&self.sessions).values().cloned().collect();
        for session in sessions {
            self.close(&session);
        }
        // Waiters on the client give up.
        lock(&self.waiting).clear();
    }

    /// Sends a request to the client and waits for its answer, or for `cancel`.
    fn request(&self, method: &str, params: Value, cancel: &Trigger) -> Option<Result<Value, Value>> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = crossbeam_channel::bounded(1);
        lock(&self.waiting).insert(id, tx);
        self.out.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        select! {
            recv(rx) -> answer => answer.ok(),
            recv(cancel.receiver()) -> _ => {
                lock(&self.waiting).remove(&id);
                self.out.notify("$/cancel_request", json!({ "requestId": id }));
                None
            }
        }
    }
}

impl AcpSession {
    fn cancel(&self) {
        if let Some((_, trigger)) = lock(&self.running).as_ref() {
            trigger.fire();
        }
    }
}

/// The prompt's content blocks as text for the model: text as it is, a resource link named,
/// an embedded text resource inside a tag with its URI.
fn prompt_text(prompt: &Value) -> Result<String, String> {
    let blocks = prompt.as_array().ok_or("prompt must be an array of content blocks")?;
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
        match text("type") {
            "text" => parts.push(text("text").to_string()),
            "resource_link" => parts.push(format!("[resource: {} {}]", text("name"), text("uri"))),
            "resource" => {
                let resource = block.get("resource").unwrap_or(&Value::Null);
                let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                match resource.get("text").and_then(Value::as_str) {
                    Some(body) => parts.push(format!("<resource uri=\"{uri}\">\n{body}\n</resource>")),
                    None => parts.push(format!("[binary resource: {uri}]")),
                }
            }
            other => return Err(format!("content blocks of type {other:?} are not supported")),
        }
    }
    if parts.iter().all(|p| p.trim().is_empty()) {
        return Err("the prompt is empty".into());
    }
    Ok(parts.join("\n\n"))
}

/// A turn's view of the client: updates, permission requests and relayed elicitations.
struct AcpSurface {
    side: Arc<AgentSide>,
    session: Arc<AcpSession>,
    trigger: Trigger,
    /// The tool call in progress: its id, name and arguments.
    call: Option<(String, String, Value)>,
}

impl AcpSurface {
    fn update(&self, update: Value) {
        if self.session.closed.load(Ordering::SeqCst) {
            return;
        }
        self.side.out.notify("session/update", json!({ "sessionId": self.session.id, "update": update }));
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
        let answer = match self.side.request("session/request_permission", params, &self.trigger) {
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
        match self.side.request("elicitation/create", params, &self.trigger) {
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_lines_of_at_most_8_mib() {
        let mut big = vec![b'x'; MAX_MESSAGE + 10];
        big.push(b'\n');
        big.extend_from_slice(b"{\"a\":1}\nlast");
        let mut input = std::io::BufReader::with_capacity(4096, &big[..]);
        assert!(matches!(read_message(&mut input), Frame::TooLarge));
        assert!(matches!(read_message(&mut input), Frame::Line(l) if l == b"{\"a\":1}"));
        assert!(matches!(read_message(&mut input), Frame::Line(l) if l == b"last"));
        assert!(matches!(read_message(&mut input), Frame::End));
    }

    #[test]
    fn prompts_become_text_and_unsupported_blocks_are_refused() {
        let text = prompt_text(&json!([
            { "type": "text", "text": "Look at" },
            { "type": "resource_link", "uri": "file:///a.rs", "name": "a.rs" },
            { "type": "resource", "resource": { "uri": "file:///b.rs", "text": "fn b() {}" } },
        ]))
        .unwrap();
        assert_eq!(
            text,
            "Look at\n\n[resource: a.rs file:///a.rs]\n\n<resource uri=\"file:///b.rs\">\nfn b() {}\n</resource>"
        );
        assert!(prompt_text(&json!([{ "type": "image", "data": "", "mimeType": "image/png" }])).is_err());
        assert!(prompt_text(&json!([])).is_err());
    }
}
