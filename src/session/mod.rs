//! A session is one initialized connection to one server: the lifecycle (`initialize`,
//! version negotiation, `notifications/initialized`), the negotiated capabilities, and
//! requests with the server's configured deadlines.

pub mod catalog;
pub mod elicit;
pub mod supervisor;

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

use crate::config::{ServerConfig, Transport};
use crate::dispatch::{CallError, ConnShared, Engine, Event, InboundHandler, PendingCall, ProgressPolicy};
use crate::jsonrpc;
use crate::mcp::{Version, method};
use crate::transport::http::{self, HttpSpec};
use crate::transport::{ConnId, TransportError, child::Spawn, stdio};

/// How far progress notifications may stretch one tool call: this many operation timeouts.
pub const PROGRESS_CAP_FACTOR: u32 = 10;

pub struct Session {
    engine: Engine,
    pub conn: ConnId,
    pub name: String,
    pub version: Version,
    pub capabilities: Value,
    pub server_info: Value,
    pub instructions: Option<String>,
    pub operation_timeout: Duration,
    shared: Arc<ConnShared>,
    cache: Mutex<catalog::Cache>,
    closed: bool,
}

/// The longest server instructions nod keeps.
const INSTRUCTIONS_BYTES: usize = 2048;

impl Session {
    /// Starts the server and runs the handshake, all within `startup_timeout_ms`.
    pub fn connect(
        engine: &Engine,
        config: &ServerConfig,
        handler: Arc<dyn InboundHandler>,
    ) -> anyhow::Result<Session> {
        let deadline = Instant::now() + config.startup_timeout;
        // Remote headers are resolved before anything starts: a missing variable is a
        // configuration error for this server alone.
        let remote = match &config.transport {
            Transport::Http(remote) | Transport::Sse(remote) => Some(HttpSpec {
                url: remote.url.clone(),
                headers: resolve_headers(remote)?,
                legacy: matches!(config.transport, Transport::Sse(_)),
                message_timeout: config.operation_timeout.min(http::MESSAGE_TIMEOUT),
                auth: match remote.bearer_token_env {
                    Some(_) => None,
                    None => Some(Arc::new(crate::oauth::OAuth::new(&config.name, &remote.url, remote.oauth.as_ref())?)),
                },
            }),
            Transport::Stdio(_) => None,
        };
        let conn = engine.next_conn();
        let shared = Arc::new(ConnShared::default());
        let capabilities = handler.capabilities();
        engine.send(Event::Register { conn, name: config.name.clone(), handler, shared: shared.clone() });
        let started = match (&config.transport, remote) {
            (Transport::Stdio(stdio), _) => {
                let spec = Spawn { argv: stdio.argv.clone(), env: stdio.env.clone(), cwd: stdio.cwd.clone() };
                stdio::spawn(conn, &config.name, spec, engine.events().clone())
            }
            (_, Some(spec)) => http::spawn(conn, &config.name, spec, engine.events().clone()),
            (_, None) => unreachable!("remote entries have a spec"),
        };
        let worker = match started {
            Ok(worker) => worker,
            Err(err) => {
                engine.detach(conn);
                return Err(anyhow!(err));
            }
        };
        engine.send(Event::Attach { conn, worker });
        let mut session = Session {
            engine: engine.clone(),
            conn,
            name: config.name.clone(),
            version: Version::LATEST,
            capabilities: Value::Null,
            server_info: Value::Null,
            instructions: None,
            operation_timeout: config.operation_timeout,
            shared,
            cache: Mutex::new(catalog::Cache::default()),
            closed: false,
        };
        // On failure `session` drops here, which closes the connection and reaps the process.
        session.initialize(&capabilities, deadline)?;
        Ok(session)
    }

    fn initialize(&mut self, capabilities: &Value, deadline: Instant) -> anyhow::Result<()> {
        let mut offer = Version::LATEST;
        let mut retried = false;
        let result = loop {
            let params = json!({
                "protocolVersion": offer.as_str(),
                "capabilities": capabilities,
                "clientInfo": { "name": "nod", "version": env!("CARGO_PKG_VERSION") },
            });
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.request_with(method::INITIALIZE, Some(params), remaining) {
                Ok(result) => break result,
                // A server may name the versions it supports in the error (VER-4).
                Err(CallError::Rpc(error)) if !retried => {
                    let supported = error.data.as_ref().and_then(|d| d.get("supported")).and_then(Value::as_array);
                    let fallback =
                        supported.into_iter().flatten().filter_map(|v| v.as_str().and_then(Version::parse)).max();
                    match fallback {
                        Some(version) if version != offer => {
                            offer = version;
                            retried = true;
                        }
                        _ => return Err(initialize_error(CallError::Rpc(error))),
                    }
                }
                Err(err) => return Err(initialize_error(err)),
            }
        };
        let answered = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
        let Some(version) = Version::parse(answered) else {
            let shown = crate::util::one_line(&answered.chars().take(40).collect::<String>());
            bail!(
                "the server answered protocol version {shown:?}, which nod does not support (nod speaks {})",
                Version::ALL.map(Version::as_str).join(", ")
            );
        };
        self.version = version;
        self.capabilities = result.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        self.server_info = result.get("serverInfo").cloned().unwrap_or(Value::Null);
        self.instructions =
            result.get("instructions").and_then(Value::as_str).map(|text| truncate(text, INSTRUCTIONS_BYTES));
        self.engine.send(Event::SetVersion { conn: self.conn, version });
        self.notify(method::INITIALIZED, None);
        Ok(())
    }

    /// Whether the server declared a capability (`tools`, `resources`, `prompts`, ...).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|c| !c.is_null())
    }

    pub fn notify(&self, method_name: &str, params: Option<&Value>) {
        let frame = jsonrpc::encode_notification(method_name, params);
        self.engine.send(Event::Notify { conn: self.conn, frame });
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
        self.start(method_name, params.map(|p| p.to_string()), timeout, false).wait(|_| {})
    }

    /// Starts a request without waiting. `params` is serialized JSON. With `progress`, the
    /// request carries a progress token (which must be inside `params._meta` already: see
    /// `progress_params`), and progress may extend the deadline up to the cap.
    pub fn start(
        &self,
        method_name: &'static str,
        params: Option<String>,
        timeout: Duration,
        progress: bool,
    ) -> PendingCall {
        let id = self.engine.next_call();
        let progress = progress.then(|| ProgressPolicy { token: json!(id.0), cap: timeout * PROGRESS_CAP_FACTOR });
        self.engine.start_call(id, self.conn, method_name, params, timeout, progress)
    }

    /// Starts `tools/call` with a progress token.
    pub fn call_tool(&self, tool: &str, arguments: &Value) -> PendingCall {
        let id = self.engine.next_call();
        let params = json!({ "name": tool, "arguments": arguments, "_meta": { "progressToken": id.0 } });
        let timeout = self.operation_timeout;
        let progress = Some(ProgressPolicy { token: json!(id.0), cap: timeout * PROGRESS_CAP_FACTOR });
        self.engine.start_call(id, self.conn, method::TOOLS_CALL, Some(params.to_string()), timeout, progress)
    }

    pub fn cancel(&self, call: &PendingCall, reason: &str) {
        self.engine.cancel(call.id, reason);
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

/// Static headers, `header_env` values and the bearer token, read now from the environment.
fn resolve_headers(remote: &crate::config::RemoteConfig) -> anyhow::Result<Vec<(String, String)>> {
    let mut headers = remote.headers.clone();
    for (header, var) in &remote.header_env {
        match std::env::var(var) {
            Ok(value) if !value.is_empty() => headers.push((header.clone(), value)),
            _ => bail!("header {header} comes from the environment variable {var}, which is not set"),
        }
    }
    if let Some(var) = &remote.bearer_token_env {
        match std::env::var(var) {
            Ok(token) if !token.is_empty() => headers.push(("Authorization".into(), format!("Bearer {token}"))),
            _ => bail!("bearer_token_env names the environment variable {var}, which is not set"),
        }
    }
    Ok(headers)
}

fn initialize_error(err: CallError) -> anyhow::Error {
    match err {
        CallError::Timeout(after) => {
            anyhow!("no answer to initialize within {} ms (startup_timeout_ms)", after.as_millis())
        }
        // Servers of MCP 2026-07-28 refuse the 2025 handshake with these codes.
        CallError::Rpc(error) if matches!(error.code, -32020 | -32022 | -32601) => anyhow!(
            "the server requires a newer MCP revision (2026-07-28), which nod does not implement; it said: {}",
            crate::util::one_line(&error.message)
        ),
        CallError::Rpc(error) => {
            anyhow!("the server refused initialize: {}", crate::util::one_line(&error.to_string()))
        }
        CallError::Disconnected(cause) if matches!(*cause, TransportError::ClosedByClient) => {
            anyhow!("connection closed during initialize")
        }
        other => anyhow!(other),
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Adds the server name to an error.
pub fn context<T>(result: Result<T, CallError>, server: &str, what: &str) -> anyhow::Result<T> {
    result.map_err(anyhow::Error::new).with_context(|| format!("server {server}: {what}"))
}

impl std::error::Error for CallError {}
