//! A session's lifecycle: starting the server's connection, finding its revision (the
//! `server/discover` probe, or `initialize` with version negotiation), and the new
//! handshake after a remote server forgot the session.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde_json::{Value, json};

use super::modern::Era;
use super::{Access, INSTRUCTIONS_BYTES, Session, catalog, remote, revisions};
use crate::config::{ServerConfig, Transport};
use crate::dispatch::{CallError, Engine, InboundHandler, Limit};
use crate::mcp::{Version, method};
use crate::transport::http::{self, HttpSpec};
use crate::transport::{TransportError, child::Spawn, stdio};

impl Session {
    /// Starts the server and finds its revision, all within `startup_timeout_ms`: a
    /// `server/discover` probe at 2026-07-28 first (unless the entry pins an initialize-era
    /// revision, or is legacy HTTP+SSE), then `initialize` when the answer says the server is
    /// of the initialize era. A stdio server that exits on the probe is started again and
    /// initialized.
    pub fn connect(
        engine: &Engine,
        config: &ServerConfig,
        handler: Arc<dyn InboundHandler>,
        access: &Access,
    ) -> anyhow::Result<Session> {
        let deadline = Instant::now() + config.startup_timeout;
        let mut session = Session::open(engine, config, handler.clone(), access)?;
        let probe = match (&config.transport, config.protocol_version) {
            (Transport::Sse(_), _) => false,
            (_, Some(version)) => version.is_modern(),
            (_, None) => true,
        };
        let pinned = config.protocol_version;
        if !probe {
            session.initialize(deadline, pinned.unwrap_or(Version::LATEST))?;
            return Ok(session);
        }
        // A server found to be of the initialize era lately is initialized without the probe;
        // if it now refuses initialize (upgraded), it is probed after all.
        let memory = access.revisions.as_deref();
        if pinned.is_none() && memory.is_some_and(|path| revisions::known_initialize_era(path, config)) {
            match session.initialize(deadline, Version::LATEST) {
                Ok(()) => return Ok(session),
                Err(err) => {
                    if !refused(&err) {
                        // Not evidence of a new revision (the server is down, say): keep it.
                        return Err(err);
                    }
                    revisions::record(memory, config, false);
                    log::debug!("server {}: refused initialize ({err:#}); probing its revision", config.name);
                    drop(session);
                    session = Session::open(engine, config, handler.clone(), access)?;
                }
            }
        }
        // On failure `session` drops, which closes the connection and reaps the process.
        match session.discover(deadline, pinned.is_some())? {
            Era::Modern => Ok(session),
            Era::Legacy => {
                session.initialize(deadline, Version::LATEST)?;
                revisions::record(memory, config, true);
                Ok(session)
            }
            Era::Silent(probe) => match session.initialize(deadline, Version::LATEST) {
                Ok(()) => {
                    session.cancel(&probe, "the server answered initialize");
                    revisions::record(memory, config, true);
                    Ok(session)
                }
                // A slow 2026-07-28 server answers the probe at last and refuses initialize.
                Err(err) if refused(&err) && session.late_discovery(probe, deadline) => Ok(session),
                Err(err) => Err(err),
            },
            Era::Respawn => {
                drop(session);
                log::debug!("server {}: exited on server/discover; starting it again for initialize", config.name);
                let mut session = Session::open(engine, config, handler, access)?;
                session.initialize(deadline, Version::LATEST)?;
                revisions::record(memory, config, true);
                Ok(session)
            }
        }
    }

    /// Starts the server's process or HTTP worker; nothing is sent yet.
    pub(super) fn open(
        engine: &Engine,
        config: &ServerConfig,
        handler: Arc<dyn InboundHandler>,
        access: &Access,
    ) -> anyhow::Result<Session> {
        // Remote headers are resolved before anything starts: a missing variable is a
        // configuration error for this server alone.
        let remote = match &config.transport {
            Transport::Http(remote) | Transport::Sse(remote) => Some(HttpSpec {
                url: remote.url.clone(),
                headers: remote::resolve_headers(remote)?,
                // Legacy HTTP+SSE entries authenticate exactly as Streamable HTTP ones.
                legacy: matches!(config.transport, Transport::Sse(_)),
                message_timeout: config.operation_timeout.min(http::MESSAGE_TIMEOUT),
                credentials: Some(remote::credentials(&config.name, remote, access)?),
            }),
            Transport::Stdio(_) => None,
        };
        let capabilities = handler.capabilities();
        let (conn, shared, link) = engine.register(&config.name, handler.clone());
        let is_remote = remote.is_some();
        let started = match (&config.transport, remote) {
            (Transport::Stdio(stdio), _) => {
                let spec = Spawn {
                    argv: stdio.argv.clone(),
                    env: stdio.env.clone(),
                    env_remove: access.private_env.to_vec(),
                    cwd: stdio.cwd.clone(),
                };
                stdio::spawn(link, spec)
            }
            (_, Some(spec)) => http::spawn(link, spec),
            (_, None) => unreachable!("remote entries have a spec"),
        };
        let worker = match started {
            Ok(worker) => worker,
            Err(err) => {
                engine.detach(conn);
                return Err(anyhow!(err));
            }
        };
        engine.attach(conn, &shared, worker);
        Ok(Session {
            engine: engine.clone(),
            conn,
            name: config.name.clone(),
            capabilities: Value::Null,
            server_info: Value::Null,
            instructions: None,
            operation_timeout: config.operation_timeout,
            startup_timeout: config.startup_timeout,
            shared,
            cache: Mutex::new(catalog::Cache::default()),
            closed: false,
            client_capabilities: capabilities,
            handshakes: Mutex::new(0),
            handler,
            remote: is_remote,
        })
    }

    pub(super) fn initialize(&mut self, deadline: Instant, first: Version) -> anyhow::Result<()> {
        // Nothing is negotiated while the handshake runs: initialize carries no
        // MCP-Protocol-Version header.
        self.shared.revision.set(None);
        let mut offer = first;
        let mut named = false;
        let result = loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.handshake(offer, remaining) {
                Ok(result) => break result,
                Err(CallError::Rpc(error)) => match next_offer(offer, &error, &mut named) {
                    Some(next) => {
                        log::debug!("server {}: initialize with {offer} refused; offering {next}", self.name);
                        offer = next;
                    }
                    None => return Err(initialize_error(CallError::Rpc(error), self.startup_timeout)),
                },
                Err(err) => return Err(initialize_error(err, self.startup_timeout)),
            }
        };
        let version = answered_version(&result)?;
        self.capabilities = result.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        self.server_info = result.get("serverInfo").cloned().unwrap_or(Value::Null);
        self.instructions =
            result.get("instructions").and_then(Value::as_str).map(|text| truncate(text, INSTRUCTIONS_BYTES));
        // Before `initialized`, which carries it over HTTP.
        self.shared.revision.set(Some(version));
        self.notify(method::INITIALIZED, None);
        Ok(())
    }

    /// One `initialize` request offering `version`.
    pub(super) fn handshake(&self, version: Version, timeout: Duration) -> Result<Value, CallError> {
        let params = json!({
            "protocolVersion": version.as_str(),
            "capabilities": self.client_capabilities,
            "clientInfo": { "name": "nod", "version": env!("CARGO_PKG_VERSION") },
        });
        self.send_request(method::INITIALIZE, Some(&params), timeout, None, None).wait(|_| {})
    }

    /// The server forgot the session that request generation `generation` used: start a new
    /// one, once for every call that noticed.
    pub(super) fn recover(&self, generation: u64) -> Result<(), CallError> {
        let mut done = self.handshakes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *done > generation {
            return Ok(());
        }
        let result = self.handshake(self.version(), self.operation_timeout)?;
        if answered_version(&result).ok() != Some(self.version()) {
            let why = "the server answered the new session with another protocol version".to_string();
            return Err(CallError::Transport(Arc::new(TransportError::BadAnswer(why))));
        }
        self.notify(method::INITIALIZED, None);
        *done = generation + 1;
        Ok(())
    }
}

pub(super) fn answered_version(result: &Value) -> anyhow::Result<Version> {
    let answered = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    match Version::parse(answered) {
        Some(version) => Ok(version),
        None => {
            let shown = crate::util::one_line(&answered.chars().take(40).collect::<String>());
            Err(anyhow!(TransportError::BadAnswer(format!(
                "protocol version {shown:?}, which nod does not support (nod speaks {})",
                Version::ALL.map(Version::as_str).join(", ")
            ))))
        }
    }
}

/// The version to offer after `initialize` offering `offer` was refused with `error`: one the
/// server names in `error.data.supported` (VER-4; once), else, when the refusal is about the
/// version (-32602 or -32022) and names none, the next older revision down to 2025-03-26.
pub(super) fn next_offer(offer: Version, error: &crate::jsonrpc::ResponseError, named: &mut bool) -> Option<Version> {
    let supported = error.data.as_ref().and_then(|d| d.get("supported")).and_then(Value::as_array);
    if let Some(supported) = supported {
        let best = supported.iter().filter_map(|v| v.as_str().and_then(Version::parse)).max();
        return match best {
            Some(version) if version != offer && !*named => {
                *named = true;
                Some(version)
            }
            _ => None,
        };
    }
    if !matches!(error.code, -32602 | -32022) {
        return None;
    }
    match offer {
        Version::V2025_11_25 => Some(Version::V2025_06_18),
        Version::V2025_06_18 => Some(Version::V2025_03_26),
        _ => None,
    }
}

/// Whether a refusal says the server speaks MCP 2026-07-28.
pub(super) fn names_2026(error: &crate::jsonrpc::ResponseError) -> bool {
    let supported = error.data.as_ref().and_then(|d| d.get("supported")).and_then(Value::as_array);
    supported.is_some_and(|s| s.iter().any(|v| v.as_str().is_some_and(|v| v.starts_with("2026-"))))
        || error.message.contains("2026-07-28")
}

/// Whether the server refused with a JSON-RPC error (evidence of its revision, unlike a
/// connection that failed).
pub(super) fn refused(err: &anyhow::Error) -> bool {
    err.chain().any(|c| matches!(c.downcast_ref::<CallError>(), Some(CallError::Rpc(_))))
}

pub(super) fn initialize_error(err: CallError, startup: Duration) -> anyhow::Error {
    match err {
        CallError::Timeout { after, .. } => {
            let limit = Limit { setting: "startup_timeout_ms", value: startup, stretched: None };
            anyhow::Error::new(CallError::Timeout { after, limit: Some(limit) }).context("initialize")
        }
        // Only when the server says so: it speaks MCP 2026-07-28 only (an entry pinned to an
        // older revision, or a server that changed its mind after its probe went unanswered).
        CallError::Rpc(error) if names_2026(&error) => anyhow::Error::new(CallError::Rpc(error))
            .context("the server refused initialize: it speaks only a newer MCP revision (2026-07-28; protocol_version \"auto\" or \"2026-07-28\" reaches it)"),
        CallError::Rpc(error) => anyhow::Error::new(CallError::Rpc(error)).context("the server refused initialize"),
        CallError::Disconnected(cause) if matches!(*cause, TransportError::ClosedByClient) => {
            anyhow!("connection closed during initialize")
        }
        other => anyhow!(other),
    }
}

pub(super) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
