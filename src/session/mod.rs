//! A session is one initialized connection to one server: the lifecycle (`initialize`,
//! version negotiation, `notifications/initialized`), the negotiated capabilities, requests
//! with the server's configured deadlines, and the new handshake after a remote server
//! forgot the session (one handshake however many calls noticed, then each call is replayed).
//! `lifecycle` holds the start: the connection, the `server/discover` probe, `initialize`
//! and its negotiation, and the new handshake; this file the session and its calls.

pub mod catalog;
pub mod elicit;
pub(crate) mod envelope;
pub mod fleet;
mod lifecycle;
mod modern;
mod page;
use lifecycle::{initialize_error, truncate};
pub mod query;
mod remote;
pub(crate) mod revisions;
pub mod roots;
pub mod runtime;
pub mod sampling;
pub(crate) mod schema;
pub mod skills;
pub(crate) mod state;
pub mod supervisor;

pub use remote::uses_oauth;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::dispatch::{
    CallError, CallUpdate, ConnShared, Engine, GroupId, InboundHandler, Limit, PendingCall, Progress, ProgressPolicy,
    Request,
};
use crate::json::Member;
use crate::jsonrpc;
use crate::mcp::{Version, method};
use crate::oauth::Browser;
use crate::transport::{ConnId, NotifyKind, RequestMeta, TransportError};

/// How far progress notifications may stretch one tool call: this many operation timeouts.
pub const PROGRESS_CAP_FACTOR: u32 = 10;

/// How a surface lets servers connect: authentication for remote ones, the environment
/// stdio ones do not inherit.
#[derive(Clone)]
pub struct Access {
    /// Where an authorization flow may show its URL; None: a 401 that a refresh cannot
    /// answer fails with "run nod mcp auth".
    pub browser: Option<Arc<dyn Browser>>,
    /// Ignore stored tokens and authorize afresh (`nod mcp auth`).
    pub fresh: bool,
    /// Where tokens go to be redacted from everything the front end prints.
    pub redactor: crate::util::Redactor,
    /// Where initialize-era verdicts are remembered (`$NOD_HOME/revisions.json` for the
    /// front ends; None: every connect probes).
    pub revisions: Option<std::path::PathBuf>,
    /// nod's own secret variables (the model's key, the variables other entries take tokens
    /// and headers from): no stdio server inherits them. `NOD_API_KEY` and `OPENAI_API_KEY`
    /// always; front ends add the rest (`config::Loaded::private_env`).
    pub private_env: Arc<[String]>,
}

impl Default for Access {
    fn default() -> Access {
        Access {
            browser: None,
            fresh: false,
            redactor: Default::default(),
            revisions: None,
            private_env: crate::config::private_names([]),
        }
    }
}

pub struct Session {
    engine: Engine,
    pub conn: ConnId,
    pub name: String,
    pub capabilities: Value,
    pub server_info: Value,
    pub instructions: Option<String>,
    pub operation_timeout: Duration,
    /// startup_timeout_ms: bounds the handshake and first discovery.
    pub startup_timeout: Duration,
    shared: Arc<ConnShared>,
    cache: Mutex<catalog::Cache>,
    closed: bool,
    /// What nod declared in `initialize`, for a new handshake.
    client_capabilities: Value,
    /// Remote sessions: the generation after the last new handshake (0: none yet).
    handshakes: Mutex<u64>,
    /// Answers what the server asks: server requests (initialize era) and the input requests
    /// of 2026-07-28 results.
    handler: Arc<dyn InboundHandler>,
    remote: bool,
}

/// The longest server instructions nod keeps.
const INSTRUCTIONS_BYTES: usize = 2048;

/// The caller's last check before a request goes to the transport (a permission decision,
/// a subagent's view): run again before every retry of the request.
pub type Admit = Arc<dyn Fn() -> Result<(), crate::dispatch::Refusal> + Send + Sync>;

/// A request in flight, as the session sees it: the engine's pending call plus what a replay
/// on a new session needs.
pub struct Call {
    pending: PendingCall,
    method: &'static str,
    /// Kept for a replay (remote servers) or a retry with input (2026-07-28), `_meta`
    /// included.
    params: Option<Value>,
    timeout: Duration,
    progress: Option<Value>,
    group: Option<GroupId>,
    replayed: bool,
    /// 2026-07-28: rounds of input given so far, the wire call of the current round, and
    /// whether the caller cancelled (a pending retry is then never sent).
    rounds: u32,
    current: Arc<Mutex<Option<crate::dispatch::CallId>>>,
    aborted: Arc<std::sync::atomic::AtomicBool>,
    admit: Option<Admit>,
    /// 2026-07-28: the thread of the current round of input, stopped and joined with the call
    /// (boxed: calls sit in enums beside small variants, and most never ask for input).
    input: Option<Box<modern::InputRound>>,
}

impl Drop for Call {
    /// A call nobody waits for any more (the caller returned, cancelled or not) never sends
    /// a retry with input.
    fn drop(&mut self) {
        self.aborted.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Call {
    fn new(
        pending: PendingCall,
        method: &'static str,
        params: Option<Value>,
        timeout: Duration,
        progress: Option<Value>,
        group: Option<GroupId>,
        replayed: bool,
    ) -> Call {
        Call {
            pending,
            method,
            params,
            timeout,
            progress,
            group,
            replayed,
            rounds: 0,
            current: Arc::default(),
            aborted: Arc::default(),
            admit: None,
            input: None,
        }
    }

    pub fn updates(&self) -> &crossbeam_channel::Receiver<CallUpdate> {
        self.pending.updates()
    }

    /// The engine's call underneath (for a bounded wait that also ends at shutdown).
    pub(crate) fn pending_call(&self) -> &PendingCall {
        &self.pending
    }

    pub fn id(&self) -> crate::dispatch::CallId {
        self.pending.id
    }
}

/// A `tools/call`'s params. Built as a map, not with `json!`: that would copy the arguments
/// by serializing them into a new value, key by key.
fn tool_params(tool: &str, arguments: Value) -> Value {
    // Room for the `_meta` that `start_admitted` adds.
    let mut params = serde_json::Map::with_capacity(3);
    params.insert("name".into(), Value::String(tool.to_string()));
    params.insert("arguments".into(), arguments);
    Value::Object(params)
}

impl Session {
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// The revision the session speaks: the connection's one record of it (the dispatcher
    /// and the worker read the same); the latest initialize-era one until negotiated.
    pub fn version(&self) -> Version {
        self.shared.revision.get().unwrap_or(Version::LATEST)
    }

    /// The transport this session really speaks: `sse` once an `http` entry fell back to
    /// legacy HTTP+SSE.
    pub fn transport(&self, configured: &'static str) -> &'static str {
        if self.shared.legacy.load(std::sync::atomic::Ordering::SeqCst) { "sse" } else { configured }
    }

    /// Whether the session speaks the stateless revision.
    pub fn is_modern(&self) -> bool {
        self.version().is_modern()
    }

    /// Whether the server declared a capability (`tools`, `resources`, `prompts`, ...).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|c| !c.is_null())
    }

    pub fn notify(&self, method_name: &str, params: Option<&Value>) {
        let frame = jsonrpc::encode_notification(method_name, params);
        self.engine.notify(&self.shared, frame, NotifyKind::of(method_name));
    }

    /// A request with the server's operation timeout.
    pub fn request(&self, method_name: &'static str, params: Option<Value>) -> Result<Value, CallError> {
        self.request_with(method_name, params, self.operation_timeout)
    }

    pub fn request_with(
        &self,
        method_name: &'static str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let call = self.start(method_name, params, timeout, None);
        self.wait(call, |_| {})
    }

    /// Starts a request without waiting.
    pub fn start(
        &self,
        method_name: &'static str,
        params: Option<Value>,
        timeout: Duration,
        group: Option<GroupId>,
    ) -> Call {
        self.launch(method_name, params, timeout, None, group)
    }

    /// Starts `tools/call` with a progress token, in `group` when given. The arguments move
    /// into the request (a stream of calls does not copy each line's object again).
    pub fn call_tool(&self, tool: &str, arguments: Value, group: Option<GroupId>) -> Call {
        self.start_admitted(method::TOOLS_CALL, tool_params(tool, arguments), self.operation_timeout, group, None)
    }

    /// `call_tool`, with `admit` asked right before the request goes to the transport (the
    /// agent's permission check; a subagent's view), and again before any retry: a refusal
    /// sends nothing.
    pub fn call_tool_admitted(&self, tool: &str, arguments: &Value, group: Option<GroupId>, admit: Admit) -> Call {
        self.start_admitted(
            method::TOOLS_CALL,
            tool_params(tool, arguments.clone()),
            self.operation_timeout,
            group,
            Some(admit),
        )
    }

    /// Starts a request in `group` after `admit` (if any) allowed it; `tools/call` gets a
    /// progress token.
    pub fn start_admitted(
        &self,
        method_name: &'static str,
        mut params: Value,
        timeout: Duration,
        group: Option<GroupId>,
        admit: Option<Admit>,
    ) -> Call {
        let token = (method_name == method::TOOLS_CALL).then(|| json!(self.engine.next_call().0));
        if let (Some(token), Some(map)) = (&token, params.as_object_mut()) {
            let mut meta = serde_json::Map::with_capacity(1);
            meta.insert("progressToken".into(), token.clone());
            map.insert("_meta".into(), Value::Object(meta));
        }
        if let Some(why) = admit.as_ref().and_then(|admit| admit().err()) {
            let pending = PendingCall::failed(self.engine.next_call(), CallError::Refused(why));
            return Call::new(pending, method_name, None, timeout, None, group, true);
        }
        let mut call = self.launch(method_name, Some(params), timeout, token, group);
        call.admit = admit;
        call
    }

    fn launch(
        &self,
        method_name: &'static str,
        params: Option<Value>,
        timeout: Duration,
        progress: Option<Value>,
        group: Option<GroupId>,
    ) -> Call {
        // 2026-07-28: every request says who sends it and at which revision.
        let params = if self.is_modern() { Some(self.with_meta(params)) } else { params };
        let pending = match self.not_offered(method_name) {
            Some(failed) => failed,
            None => self.send_request(method_name, params.as_ref(), timeout, progress.clone(), group),
        };
        // Kept for a replay on a new session (remote) or a retry with input (2026-07-28).
        let params = if self.remote || self.is_modern() { params } else { None };
        Call::new(pending, method_name, params, timeout, progress, group, false)
    }

    /// `call_tool` with the arguments as the JSON text of one object that a value could hold
    /// (a `--jsonl` line, checked by the caller: `args::object_text`). A local server at an
    /// initialize-era revision gets the text in its request as it came: the request is
    /// written around it, not read into a value and written out again. Where the params are
    /// kept (for a replay, or a retry with input) or get the revision's `_meta`, and for a
    /// text with a bare CR (JSON's whitespace, a line break to some servers' readers), they
    /// are read into a value as for `call_tool`; a text that a value cannot hold fails there.
    pub fn call_tool_text(&self, tool: &str, text: &str, group: Option<GroupId>) -> serde_json::Result<Call> {
        if self.remote || self.is_modern() || text.contains('\r') {
            return Ok(self.call_tool(tool, serde_json::from_str(text)?, group));
        }
        let method_name = method::TOOLS_CALL;
        let timeout = self.operation_timeout;
        let token = self.engine.next_call().0;
        let pending = match self.not_offered(method_name) {
            Some(failed) => failed,
            None => {
                // Piece by piece: `format!` took 500 instructions a call more (callgrind, 2000 calls).
                let mut params = String::with_capacity(64 + tool.len() + text.len());
                params.push_str(r#"{"name":"#);
                params.push_str(&serde_json::to_string(tool)?);
                params.push_str(r#","arguments":"#);
                params.push_str(text);
                params.push_str(r#","_meta":{"progressToken":"#);
                params.push_str(&token.to_string());
                params.push_str("}}");
                let meta = self.request_meta(method_name, None);
                self.send_text(method_name, Some(&params), meta, timeout, Some(json!(token)), group)
            }
        };
        Ok(Call::new(pending, method_name, None, timeout, Some(json!(token)), group, false))
    }

    /// A method the server never declared is not sent (LC-8): the call fails at once.
    fn not_offered(&self, method_name: &'static str) -> Option<PendingCall> {
        let capability = envelope::capability(method_name).filter(|c| !self.has(c))?;
        Some(PendingCall::failed(self.engine.next_call(), CallError::NotOffered(capability)))
    }

    /// What a finished call means: its result, or `None` when the server had forgotten the
    /// session and the call now runs again on a new one (keep waiting on `call.updates()`).
    pub fn settle(&self, call: &mut Call, result: Result<Value, CallError>) -> Option<Result<Value, CallError>> {
        if let Err(CallError::Timeout { after, limit: None }) = result {
            return Some(Err(CallError::Timeout { after, limit: Some(self.limit(call, after)) }));
        }
        if let Ok(value) = &result {
            // 2026-07-28 results say what they are: no resultType is a complete result (an
            // older server), an unknown one is not an answer nod can use.
            match envelope::ResultKind::of(value.member("resultType"), self.is_modern()) {
                envelope::ResultKind::Complete => {}
                envelope::ResultKind::InputRequired => {
                    let asked = value.clone();
                    return self.give_input(call, &asked);
                }
                envelope::ResultKind::Unknown => {
                    return Some(Err(CallError::Invalid { method: call.method, why: envelope::UNKNOWN_RESULT_TYPE }));
                }
            }
            return Some(match envelope::check(call.method, value) {
                Ok(()) => result,
                Err(why) => Err(CallError::Invalid { method: call.method, why }),
            });
        }
        if self.is_modern()
            && let Err(CallError::Rpc(error)) = &result
            && error.code == -32020
        {
            return self.header_mismatch(call, result);
        }
        let generation = match &result {
            Err(CallError::Transport(cause)) => match **cause {
                TransportError::SessionExpired { generation } if !call.replayed && self.remote => generation,
                _ => return Some(result),
            },
            _ => return Some(result),
        };
        if let Err(err) = self.recover(generation) {
            return Some(Err(err));
        }
        let params = call.params.clone();
        self.resend(call, params.as_ref());
        None
    }

    /// Sends `call`'s request once more, with a new id: after a new session, or a new
    /// listing of the tools (which may change its headers).
    fn resend(&self, call: &mut Call, params: Option<&Value>) {
        call.pending = self.send_request(call.method, params, call.timeout, call.progress.clone(), call.group);
        call.replayed = true;
    }

    /// Hands one request to the engine, with what the worker is told about it; the params
    /// are serialized here, once.
    fn send_request(
        &self,
        method_name: &'static str,
        params: Option<&Value>,
        timeout: Duration,
        progress: Option<Value>,
        group: Option<GroupId>,
    ) -> PendingCall {
        let meta = self.request_meta(method_name, params);
        // Straight into a buffer: `Value`'s Display goes through the formatter, byte by byte.
        let text = params.map(|p| serde_json::to_string(p).expect("a JSON value serializes"));
        self.send_text(method_name, text.as_deref(), meta, timeout, progress, group)
    }

    /// Hands one request, its params serialized, to the engine.
    fn send_text(
        &self,
        method_name: &'static str,
        params: Option<&str>,
        meta: RequestMeta,
        timeout: Duration,
        progress: Option<Value>,
        group: Option<GroupId>,
    ) -> PendingCall {
        let progress = progress.map(|token| ProgressPolicy { token, cap: timeout * PROGRESS_CAP_FACTOR });
        let req = Request { method: method_name, params, timeout, progress, group, meta };
        self.engine.start_call(self.conn, &self.shared, req)
    }

    /// The configured limit a call ran out of. A call shorter than the operation timeout is
    /// bounded by what was left of the startup timeout (the first listings); one that ran
    /// past its timeout was stretched by progress.
    fn limit(&self, call: &Call, after: Duration) -> Limit {
        if call.timeout < self.operation_timeout {
            return Limit { setting: "startup_timeout_ms", value: self.startup_timeout, stretched: None };
        }
        let stretched = call.progress.is_some() && after > call.timeout + Duration::from_millis(50);
        Limit {
            setting: "operation_timeout_ms",
            value: self.operation_timeout,
            stretched: stretched.then_some(PROGRESS_CAP_FACTOR),
        }
    }

    /// Waits for a call, passing progress to `on_progress`.
    pub fn wait(&self, mut call: Call, mut on_progress: impl FnMut(&Progress)) -> Result<Value, CallError> {
        loop {
            let result = call.pending.wait(&mut on_progress);
            if let Some(result) = self.settle(&mut call, result) {
                return result;
            }
        }
    }

    pub fn cancel(&self, call: &Call, reason: &str) {
        call.aborted.store(true, std::sync::atomic::Ordering::SeqCst);
        self.engine.cancel(call.pending.id, reason);
        if let Some(current) = *call.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            self.engine.cancel(current, reason);
        }
    }

    /// Whether the connection is closed, for whatever reason (nod's own close too).
    pub fn is_closed(&self) -> bool {
        self.shared.closed.get().is_some()
    }

    /// Why the connection ended, if it ended on its own (not closed by nod).
    pub fn closed_cause(&self) -> Option<String> {
        let cause = self.shared.closed.get()?;
        (!matches!(**cause, TransportError::ClosedByClient)).then(|| cause.to_string())
    }

    pub(crate) fn shared(&self) -> &ConnShared {
        &self.shared
    }

    pub(crate) fn cache(&self) -> &Mutex<catalog::Cache> {
        &self.cache
    }

    /// For a one-shot command about to exit: its listings are left to the operating system
    /// instead of being freed value by value (for 1000 tools, freeing their JSON took a fifth
    /// of the whole `nod mcp tool list`). Nothing but memory is held by a listing.
    pub fn leave_listings_to_exit(&self) {
        let cache = std::mem::take(&mut *self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        std::mem::forget(cache);
    }

    /// Closes the connection: stdin closed, then SIGTERM, then SIGKILL, always reaped.
    pub fn close(mut self) {
        self.closed = true;
        self.engine.detach(self.conn);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.closed {
            self.engine.detach(self.conn);
        }
    }
}

/// A remote entry's credential comes from an environment variable that is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVariable {
    /// `bearer_token_env`, or the header `header_env` fills.
    pub field: String,
    pub variable: String,
}

impl std::fmt::Display for MissingVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field == "bearer_token_env" {
            write!(f, "bearer_token_env names the environment variable {}, which is not set", self.variable)
        } else {
            write!(f, "header {} comes from the environment variable {}, which is not set", self.field, self.variable)
        }
    }
}

impl std::error::Error for MissingVariable {}

/// Adds the server name to an error.
pub fn context<T>(result: Result<T, CallError>, server: &str, what: &str) -> anyhow::Result<T> {
    result.map_err(anyhow::Error::new).with_context(|| format!("server {server}: {what}"))
}
