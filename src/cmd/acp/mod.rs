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
//!
//! This file holds the sessions and the client's requests; `saved` loading, replaying and
//! listing saved sessions and saving a new one; `wire` the JSON-RPC (on `crate::jsonrpc`),
//! `surface` what one turn shows the client.

mod saved;
mod surface;
pub(crate) mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::{Value, json};

use super::{Context, Exit};
use crate::agent::permissions::Mode;
use crate::agent::{Agent, Status};
use crate::cli::Acp;
use crate::config;
use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Message};
use crate::session::Access;
use crate::session::elicit::PolicyHandler;
use crate::session::runtime::Runtime;
use crate::util::Trigger;
use saved::Saving;
use surface::AcpSurface;
use wire::{Peer, Unreadable};

/// ACP method names (v1, `schema/v1/meta.json`), in one place so none is spelled ad hoc.
pub mod method {
    // The client's requests and notifications to nod.
    pub const INITIALIZE: &str = "initialize";
    pub const SESSION_NEW: &str = "session/new";
    pub const SESSION_PROMPT: &str = "session/prompt";
    pub const SESSION_CANCEL: &str = "session/cancel";
    pub const SESSION_SET_MODE: &str = "session/set_mode";
    pub const SESSION_CLOSE: &str = "session/close";
    pub const SESSION_LOAD: &str = "session/load";
    pub const SESSION_RESUME: &str = "session/resume";
    pub const SESSION_LIST: &str = "session/list";
    // nod's requests and notifications to the client.
    pub const SESSION_UPDATE: &str = "session/update";
    pub const REQUEST_PERMISSION: &str = "session/request_permission";
    pub const ELICIT: &str = "elicitation/create";
    /// Either direction: withdraws a request the sender no longer waits for.
    pub const CANCEL_REQUEST: &str = "$/cancel_request";
}

/// ACP's major version. nod speaks v1 and answers 1 whatever the client asks for, as version
/// negotiation allows (the v2 draft is not implemented).
const PROTOCOL_VERSION: u64 = 1;

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
    for incoming in wire::incoming(stdin.lock()) {
        match incoming {
            Ok(msg) => agent.dispatch(msg),
            Err(Unreadable { id, code, message }) => agent.peer.error(&id, code, &message),
        }
    }
    agent.close_all();
    Exit::Ok
}

/// What the client can show.
#[derive(Clone, Copy, Debug, Default)]
struct ClientCaps {
    form: bool,
    url: bool,
}

/// The agent side of the connection: the sessions, and the wire to the client.
struct AgentSide {
    acp: Acp,
    ctx: Context,
    peer: Peer,
    client: OnceLock<ClientCaps>,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
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
    /// Where the conversation is saved, when it is: the file is made at the first prompt
    /// (titled by it), so a session never prompted leaves nothing behind.
    saving: Option<Saving>,
    /// What answers the servers' sampling requests (with a model): its limits are per turn.
    sampler: Option<Arc<crate::session::sampling::Sampler>>,
}

impl AgentSide {
    fn new(acp: Acp, ctx: Context) -> AgentSide {
        AgentSide {
            acp,
            ctx,
            peer: Peer::new(std::io::stdout()),
            client: OnceLock::new(),
            sessions: Mutex::new(HashMap::new()),
            next_session: AtomicU64::new(1),
        }
    }

    fn dispatch(self: &Arc<Self>, msg: Message) {
        match msg {
            Message::Request { id, method, params } => self.request(id, &method, &params),
            Message::Notification { method, params } => self.notification(&method, &params),
            Message::Response { id, result } => self.peer.answered(id, result),
            Message::Invalid { id, why } => self.peer.error(&id, INVALID_REQUEST, why),
        }
    }

    fn request(self: &Arc<Self>, id: Value, method: &str, params: &Value) {
        if method != method::INITIALIZE && self.client.get().is_none() {
            self.peer.error(&id, INVALID_REQUEST, "initialize first");
            return;
        }
        match method {
            method::INITIALIZE => self.initialize(id, params),
            method::SESSION_NEW => self.new_session(id, params),
            method::SESSION_PROMPT => self.prompt(id, params),
            method::SESSION_SET_MODE => self.set_mode(id, params),
            method::SESSION_LOAD => self.load_session(id, params, true),
            method::SESSION_RESUME => self.load_session(id, params, false),
            method::SESSION_LIST => self.list_sessions(id, params),
            method::SESSION_CLOSE => match self.session(params) {
                Ok(session) => {
                    self.close(&session);
                    self.peer.result(&id, json!({}));
                }
                Err(why) => self.peer.error(&id, INVALID_PARAMS, &why),
            },
            other => self.peer.error(&id, METHOD_NOT_FOUND, &format!("nod does not implement {other}")),
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        match method {
            method::SESSION_CANCEL => {
                if let Ok(session) = self.session(params) {
                    session.cancel();
                }
            }
            method::CANCEL_REQUEST => {
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
            self.peer.error(&id, INVALID_REQUEST, "already initialized");
            return;
        }
        self.peer.result(
            &id,
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": { "image": false, "audio": false, "embeddedContext": true },
                    "mcpCapabilities": { "http": true, "sse": true },
                    "sessionCapabilities": { "close": {}, "list": {}, "resume": {}, "additionalDirectories": {} },
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
        match self.build_session(params, None) {
            Ok((session, mode)) => {
                let session_id = session.id.clone();
                lock(&self.sessions).insert(session_id.clone(), session.clone());
                self.peer.result(&id, json!({ "sessionId": session_id, "modes": modes(mode) }));
                start_servers(&session);
            }
            Err((code, why)) => self.peer.error(&id, code, &why),
        }
    }

    fn build_session(&self, params: &Value, id: Option<String>) -> Result<(Arc<AcpSession>, Mode), (i64, String)> {
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
        let sampler = setup.sampler(Some(asked_tx.clone()));
        let relaying = Arc::new(PolicyHandler::relaying(caps.form, caps.url, asked_tx));
        // The session's roots: its cwd, and the client's additional directories.
        let added: Vec<std::path::PathBuf> = params
            .get("additionalDirectories")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute())
            .collect();
        let roots = crate::session::roots::Roots::new(Some(&cwd), &added, std::iter::empty());
        roots.set_project(&setup.loaded);
        let handler = Arc::new(crate::session::roots::WithRoots::new(relaying, Arc::new(roots)));
        let handler = super::setup::Setup::with_sampling(handler, sampler.clone().as_ref());
        // No OAuth flow from here: stored tokens are used, and a server that needs more
        // says so.
        let access = Access {
            browser: None,
            fresh: false,
            redactor: self.ctx.redactor.clone(),
            revisions: crate::session::revisions::default_path(),
            private_env: crate::config::private_names([]),
        };
        let runtime = setup.runtime(handler, access);
        let policy = setup.policy.clone();
        let mode = policy.mode();
        let agent = setup.agent(runtime.clone(), asked_rx);
        // A saved session's id is the ACP session's, so a client can load it later.
        let saving = (!setup.settings.save_sessions_off)
            .then(|| crate::config::home().ok())
            .flatten()
            .map(|home| Saving { home, workspace: cwd.display().to_string(), model: agent.model().to_string() });
        let id = id.unwrap_or_else(|| {
            if saving.is_some() {
                return crate::saved::new_id();
            }
            let n = self.next_session.fetch_add(1, Ordering::SeqCst);
            let seed = format!("{n}:{}:{:?}", std::process::id(), std::time::SystemTime::now());
            let digest = crate::sha256::digest(seed.as_bytes());
            format!("sess_{}", digest[..8].iter().map(|b| format!("{b:02x}")).collect::<String>())
        });
        let session = AcpSession {
            id,
            host: agent.host(),
            agent: Mutex::new(agent),
            policy,
            runtime,
            running: Mutex::new(None),
            calls: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            saving,
            sampler,
        };
        Ok((Arc::new(session), mode))
    }

    fn set_mode(&self, id: Value, params: &Value) {
        let session = match self.session(params) {
            Ok(session) => session,
            Err(why) => return self.peer.error(&id, INVALID_PARAMS, &why),
        };
        let text = params.get("modeId").and_then(Value::as_str).unwrap_or("");
        let Some(mode) = Mode::parse(text) else {
            return self.peer.error(&id, INVALID_PARAMS, &format!("unknown mode {text:?}: ask or full-access"));
        };
        // The agent may be busy in a turn: the policy is shared, so the change applies at
        // its next decision.
        session.policy.set_mode(Some(mode));
        self.peer.result(&id, json!({}));
        self.peer.notify(
            method::SESSION_UPDATE,
            json!({ "sessionId": session.id, "update": { "sessionUpdate": "current_mode_update", "currentModeId": mode.as_str() } }),
        );
    }

    fn prompt(self: &Arc<Self>, id: Value, params: &Value) {
        let session = match self.session(params) {
            Ok(session) => session,
            Err(why) => return self.peer.error(&id, INVALID_PARAMS, &why),
        };
        let text = match prompt_text(params.get("prompt").unwrap_or(&Value::Null)) {
            Ok(text) => text,
            Err(why) => return self.peer.error(&id, INVALID_PARAMS, &why),
        };
        let trigger = Trigger::default();
        {
            let mut running = lock(&session.running);
            if running.is_some() {
                return self.peer.error(&id, INVALID_REQUEST, "a prompt is already running in this session");
            }
            *running = Some((id.clone(), trigger.clone()));
        }
        let side = self.clone();
        let spawned = std::thread::Builder::new().name("nod-acp-turn".into()).spawn(move || {
            let mut surface = AcpSurface::new(side.clone(), session.clone(), trigger.clone());
            if let Some(sampler) = &session.sampler {
                sampler.begin_turn();
            }
            let report = {
                let mut agent = lock(&session.agent);
                session.start_saving(&mut agent, &text, &side.ctx.redactor);
                agent.turn(&text, &mut surface, &trigger)
            };
            // Every call shown ends before the answer below (ACP's prompt-turn rule).
            surface.end_turn(report.status);
            *lock(&session.running) = None;
            match report.status {
                Status::Completed if report.step_limit => {
                    side.peer.result(&id, json!({ "stopReason": "max_turn_requests" }));
                }
                Status::Completed | Status::InputRequired => side.peer.result(&id, json!({ "stopReason": "end_turn" })),
                Status::Interrupted => side.peer.result(&id, json!({ "stopReason": "cancelled" })),
                Status::Failed => {
                    let error = side.ctx.redactor.redact(report.error.as_deref().unwrap_or("the turn failed"));
                    if error.contains("content_filter") {
                        side.peer.result(&id, json!({ "stopReason": "refusal" }));
                    } else {
                        side.peer.error(&id, INTERNAL_ERROR, &error);
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
        self.peer.give_up();
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

/// The session modes, as `session/new` and `session/load` answer them.
fn modes(mode: Mode) -> Value {
    json!({ "currentModeId": mode.as_str(), "availableModes": [
        { "id": "ask", "name": "Ask", "description": "Ask before each MCP tool call" },
        { "id": "full-access", "name": "Full access", "description": "Run every tool without asking" },
    ] })
}

/// Every server connects now, in the background; the first use of MCP waits.
fn start_servers(session: &AcpSession) {
    let runtime = session.runtime.clone();
    let _ = std::thread::Builder::new().name("nod-acp-start".into()).spawn(move || {
        runtime.start_all();
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

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
