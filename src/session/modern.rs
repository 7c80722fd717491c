//! MCP 2026-07-28 on a session: finding the server's revision with `server/discover`
//! (and what its outcome says, the research note's table), the `_meta` every request of
//! that revision carries, the input requests a result may hold (SEP-2322), and the retry of
//! a tool call whose headers the server found out of date (SEP-2243).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, at, select};
use serde_json::{Value, json};

use super::{Call, CallError, CallUpdate, PROGRESS_CAP_FACTOR, PendingCall, ProgressPolicy, Request, Session};
use super::{INSTRUCTIONS_BYTES, catalog, initialize_error, truncate};
use crate::mcp::{Version, headers, method};
use crate::transport::{RequestMeta, TransportError};
use crate::util::JoinOnDrop;

/// Rounds of input one 2026-07-28 request may ask for.
pub(super) const MAX_INPUT_ROUNDS: u32 = 10;

/// How long a stdio server has to answer the `server/discover` probe before nod takes it
/// for an initialize-era server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The thread of one round of input (`nod-input:<server>`), owned by its call: dropping the
/// round (the call is dropped, or the next round starts) stops the thread and joins it.
/// Field order is drop order: the stop signal goes before the join.
pub(super) struct InputRound {
    _stop: Sender<()>,
    _thread: JoinOnDrop<()>,
}

/// What the probe says about a server.
pub(super) enum Era {
    Modern,
    Legacy,
    /// A stdio server that has not answered the probe in `PROBE_TIMEOUT`: most likely of the
    /// initialize era (it ignores unknown requests), but it may be a slow one of 2026-07-28.
    /// It is initialized with the probe still open; if it refuses `initialize`, the probe's
    /// answer is awaited for the rest of the startup timeout.
    Silent(Box<Call>),
    /// A stdio server that exited on the probe: start it again and initialize.
    Respawn,
}

/// `supportedVersions` of a discover result, or `supported` of a -32022 error's data.
fn supported(value: &Value) -> Vec<String> {
    let list = value.get("supportedVersions").or_else(|| value.get("supported")).and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|v| crate::util::one_line(&v.chars().take(20).collect::<String>()))
        .take(16)
        .collect()
}

fn shown_list(versions: &[String]) -> String {
    if versions.is_empty() { "no revision it names".into() } else { versions.join(", ") }
}

impl Session {
    /// The `server/discover` probe and what its outcome says about the server (the research
    /// note's table): a result listing 2026-07-28 is a modern server (its capabilities,
    /// instructions and serverInfo are taken from it); -32022 naming 2026-07-28 is asked
    /// again once; any other JSON-RPC error, a result listing only older revisions, an HTTP
    /// 400/404/405 without a JSON-RPC answer, or (stdio) silence are the initialize era; a
    /// stdio server that exits needs a new process. 401/403, 5xx and network errors are not
    /// evidence of anything: they fail the connection. With `pinned`, only modern will do.
    pub(super) fn discover(&mut self, deadline: Instant, pinned: bool) -> anyhow::Result<Era> {
        self.shared.revision.set(Some(Version::MODERN));
        let mut asked_again = false;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            // The probe runs to the startup deadline; a stdio server silent for
            // PROBE_TIMEOUT is initialized meanwhile, with the probe still open.
            let probe = self.start(method::DISCOVER, None, remaining, None);
            let result = if self.remote || pinned {
                self.wait(probe, |_| {})
            } else {
                match self.wait_for(probe, PROBE_TIMEOUT) {
                    Ok(result) => result,
                    Err(pending) => {
                        log::debug!("server {}: no answer to server/discover yet; using initialize", self.name);
                        return Ok(Era::Silent(pending));
                    }
                }
            };
            let legacy = |why: &str| {
                log::debug!("server {}: {why}; using initialize", self.name);
                Ok(Era::Legacy)
            };
            match result {
                Ok(result) => {
                    let versions = supported(&result);
                    if versions.iter().any(|v| v == Version::MODERN.as_str()) {
                        self.adopt_discovery(&result);
                        return Ok(Era::Modern);
                    }
                    if pinned {
                        anyhow::bail!(
                            "the server speaks {}, not 2026-07-28 (protocol_version pins it)",
                            shown_list(&versions)
                        );
                    }
                    return legacy("server/discover lists only initialize-era revisions");
                }
                Err(CallError::Rpc(error)) if error.code == -32022 => {
                    let versions = error.data.as_ref().map(supported).unwrap_or_default();
                    if versions.iter().any(|v| v == Version::MODERN.as_str()) && !asked_again {
                        asked_again = true;
                        continue;
                    }
                    if !pinned && versions.iter().any(|v| Version::parse_legacy(v).is_some()) {
                        return legacy("the server named only initialize-era revisions");
                    }
                    return Err(anyhow::Error::new(CallError::Rpc(error)).context(format!(
                        "no common protocol revision: the server speaks {}, nod speaks 2026-07-28 and {}",
                        shown_list(&versions),
                        Version::ALL.map(Version::as_str).join(", ")
                    )));
                }
                Err(CallError::Rpc(error)) if matches!(error.code, -32020 | -32021) => {
                    return Err(anyhow::Error::new(CallError::Rpc(error)).context("server/discover was refused"));
                }
                Err(CallError::Rpc(_)) if !pinned => return legacy("server/discover is unknown to the server"),
                Err(CallError::Timeout { .. }) if !self.remote && !pinned => {
                    return legacy("no answer to server/discover");
                }
                Err(CallError::Disconnected(_)) if !self.remote && !pinned => return Ok(Era::Respawn),
                Err(CallError::Transport(cause))
                    if self.remote && !pinned && matches!(*cause, TransportError::Http { status: 400 | 404 | 405 }) =>
                {
                    return legacy("server/discover got an HTTP error without a JSON-RPC answer");
                }
                Err(err) => return Err(initialize_error(err, self.startup_timeout).context("server/discover")),
            }
        }
    }

    /// Waits up to `limit` for `call`: its result, or the call itself, still open, when none
    /// came.
    fn wait_for(&self, mut call: Call, limit: Duration) -> Result<Result<Value, CallError>, Box<Call>> {
        let until = Instant::now() + limit;
        loop {
            // The engine's shutdown ends the wait too (a start cut short at exit).
            match call.pending_call().wait_until(until, |_| {}) {
                Some(result) => {
                    if let Some(result) = self.settle(&mut call, result) {
                        return Ok(result);
                    }
                }
                None => return Err(Box::new(call)),
            }
        }
    }

    /// After a silent probe and a refused `initialize`: whether the probe's answer, awaited
    /// until `deadline`, says the server speaks 2026-07-28 (then the session is modern).
    pub(super) fn late_discovery(&mut self, probe: Box<Call>, deadline: Instant) -> bool {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let Ok(Ok(result)) = self.wait_for(*probe, remaining) else { return false };
        if !supported(&result).iter().any(|v| v == Version::MODERN.as_str()) {
            return false;
        }
        log::debug!("server {}: answered server/discover late; it speaks 2026-07-28", self.name);
        self.shared.revision.set(Some(Version::MODERN));
        self.adopt_discovery(&result);
        true
    }

    /// What `initialize` used to say, from a `server/discover` result.
    fn adopt_discovery(&mut self, result: &Value) {
        self.capabilities = result.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        self.server_info = result.pointer("/_meta/io.modelcontextprotocol~1serverInfo").cloned().unwrap_or(Value::Null);
        self.instructions =
            result.get("instructions").and_then(Value::as_str).map(|text| truncate(text, INSTRUCTIONS_BYTES));
    }

    /// `params` with the 2026-07-28 `_meta` fields added (protocol version, client
    /// capabilities, client info), the other `_meta` fields (a progress token) kept.
    pub(super) fn with_meta(&self, params: Option<Value>) -> Value {
        let mut value = match params {
            Some(Value::Object(map)) => Value::Object(map),
            _ => json!({}),
        };
        let meta = value.as_object_mut().expect("an object").entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(crate::mcp::meta::PROTOCOL_VERSION.into(), json!(self.version().as_str()));
            meta.insert(crate::mcp::meta::CLIENT_CAPABILITIES.into(), self.client_capabilities.clone());
            meta.insert(
                crate::mcp::meta::CLIENT_INFO.into(),
                json!({ "name": "nod", "version": env!("CARGO_PKG_VERSION") }),
            );
        }
        value
    }

    /// What the worker is told about a request: its method and revision and, for a
    /// 2026-07-28 server over HTTP, the SEP-2243 header values: `Mcp-Name` (the tool or
    /// prompt name, the resource URI) and the `Mcp-Param-*` headers that the tool's
    /// `x-mcp-header` markings in the latest listing ask for.
    pub(super) fn request_meta(&self, method_name: &'static str, params: Option<&Value>) -> RequestMeta {
        let mut meta = RequestMeta::new(method_name, self.shared.revision.get());
        let Some(params) = params.filter(|_| self.remote && meta.is_modern()) else { return meta };
        let key = match method_name {
            method::TOOLS_CALL | method::PROMPTS_GET => "name",
            method::RESOURCES_READ => "uri",
            _ => return meta,
        };
        let name = params.get(key).and_then(Value::as_str);
        meta.name = name.map(headers::value);
        if method_name == method::TOOLS_CALL
            && let (Some(tool), Some(arguments)) = (name, params.get("arguments").and_then(Value::as_object))
        {
            meta.params = headers::params(&catalog::markings(self, tool), arguments);
        }
        meta
    }

    /// A 2026-07-28 `input_required` result (SEP-2322): each of its `inputRequests` goes to
    /// this connection's handler as an `elicitation/create` would (the same policies and
    /// surfaces), and once every answer is in, the request is sent again with a new id, the
    /// answers as `inputResponses` and `requestState` exactly as given. The caller keeps
    /// waiting on `call.updates()`. At most `MAX_INPUT_ROUNDS` rounds, each within the
    /// request's timeout. The round runs on a thread that the call owns and joins.
    pub(super) fn give_input(&self, call: &mut Call, asked: &Value) -> Option<Result<Value, CallError>> {
        let invalid = |why: &'static str| Some(Err(CallError::Invalid { method: call.method, why }));
        if !matches!(call.method, method::TOOLS_CALL | method::PROMPTS_GET | method::RESOURCES_READ) {
            return invalid("asks for input, which this method cannot");
        }
        if call.rounds >= MAX_INPUT_ROUNDS {
            return invalid("asked for input more than 10 times");
        }
        let requests = asked.get("inputRequests").and_then(Value::as_object);
        let state = match asked.get("requestState") {
            None => None,
            Some(Value::String(state)) => Some(state.clone()),
            Some(_) => return invalid("has a requestState that is not a string"),
        };
        if requests.is_none() && state.is_none() {
            return invalid("asks for input without inputRequests or requestState");
        }
        let Some(base) = call.params.clone() else {
            return invalid("asks for input on a request nod cannot send again");
        };
        // The retry's name and arguments are the request's own: so are its headers.
        let meta = self.request_meta(call.method, Some(&base));
        let mut waiting = Vec::new();
        for (key, request) in requests.into_iter().flatten() {
            let method_name = request.get("method").and_then(Value::as_str).unwrap_or("");
            if method_name != method::ELICIT && method_name != method::ROOTS_LIST {
                return invalid("asks for input nod does not provide (only elicitation and roots)");
            }
            let (tx, rx) = crossbeam_channel::bounded(1);
            let req = crate::dispatch::ServerRequest {
                server: self.name.clone(),
                version: Some(self.version()),
                method: method_name.to_string(),
                params: request.get("params").cloned().unwrap_or_else(|| json!({})),
            };
            self.handler.request(req, crate::dispatch::Responder::local(tx, call.aborted.clone()));
            waiting.push((key.clone(), rx));
        }
        call.rounds += 1;
        let (updates_tx, updates_rx) = crossbeam_channel::unbounded();
        let (engine, conn, shared) = (self.engine.clone(), self.conn, self.shared.clone());
        let (method_name, timeout, group, progress) = (call.method, call.timeout, call.group, call.progress.clone());
        let (current, aborted, admit) = (call.current.clone(), call.aborted.clone(), call.admit.clone());
        let name = self.name.clone();
        // Disconnects when the call drops the round: nobody waits for it any more.
        let (stop_tx, stop) = crossbeam_channel::bounded::<()>(0);
        let spawned = std::thread::Builder::new().name(format!("nod-input:{name}")).spawn(move || {
            let done = |result: Result<Value, CallError>| {
                let _ = updates_tx.send(CallUpdate::done(result));
            };
            let deadline = Instant::now() + timeout;
            let mut responses = serde_json::Map::new();
            for (key, rx) in waiting {
                let answer = select! {
                    recv(rx) -> answer => answer.ok(),
                    recv(at(deadline)) -> _ => None,
                    recv(stop) -> _ => return,
                };
                match answer {
                    Some(Ok(answer)) => {
                        responses.insert(key, answer);
                    }
                    Some(Err(error)) => return done(Err(CallError::Rpc(error))),
                    None => return done(Err(CallError::Timeout { after: timeout, limit: None })),
                }
            }
            if aborted.load(std::sync::atomic::Ordering::SeqCst) {
                return done(Err(CallError::Cancelled("the request was cancelled while input was collected".into())));
            }
            // The caller's last check again: a permission or a subagent's view may have
            // changed while the person answered.
            if let Some(Err(why)) = admit.as_ref().map(|admit| admit()) {
                return done(Err(CallError::Refused(why)));
            }
            let mut params = base;
            if let Some(map) = params.as_object_mut() {
                map.remove("inputResponses");
                map.remove("requestState");
                if !responses.is_empty() {
                    map.insert("inputResponses".into(), Value::Object(responses));
                }
                if let Some(state) = state {
                    map.insert("requestState".into(), Value::String(state));
                }
            }
            let params = params.to_string();
            let policy = progress.map(|token| ProgressPolicy { token, cap: timeout * PROGRESS_CAP_FACTOR });
            let req = Request { method: method_name, params: Some(&params), timeout, progress: policy, group, meta };
            let retry = engine.start_call(conn, &shared, req);
            *current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(retry.id);
            if aborted.load(std::sync::atomic::Ordering::SeqCst) {
                engine.cancel(retry.id, "cancelled");
            }
            loop {
                select! {
                    recv(retry.updates()) -> update => match update {
                        Ok(CallUpdate::Done(finished)) => return done(finished.into_result()),
                        Ok(update) => {
                            let _ = updates_tx.send(update);
                        }
                        Err(_) => return done(Err(CallError::Cancelled("nod is shutting down".into()))),
                    },
                    recv(stop) -> _ => return,
                }
            }
        });
        let Ok(thread) = spawned else { return invalid("could not be answered (no thread)") };
        // The previous round's thread has ended (its answer brought this round): joined here.
        call.input = Some(Box::new(InputRound { _stop: stop_tx, _thread: JoinOnDrop::new(thread) }));
        call.pending = PendingCall::relayed(call.pending.id, updates_rx);
        None
    }

    /// 2026-07-28 over HTTP: -32020 says the headers do not match the body, which for a
    /// tool call means nod's x-mcp-header markings are out of date. The tools are listed
    /// again (the call's headers come from the new listing's markings) and the call is sent
    /// once more, after the caller's check; anything else keeps the error.
    pub(super) fn header_mismatch(
        &self,
        call: &mut Call,
        result: Result<Value, CallError>,
    ) -> Option<Result<Value, CallError>> {
        if call.method != method::TOOLS_CALL || !self.remote || call.replayed || call.rounds > 0 {
            return Some(result);
        }
        let Some(params) = call.params.clone() else { return Some(result) };
        log::info!("server {}: header mismatch (-32020); listing tools again and retrying once", self.name);
        self.shared.tools_epoch.fetch_add(1, Ordering::SeqCst);
        let relist = Instant::now() + self.operation_timeout.min(Duration::from_secs(10));
        if let Err(err) = catalog::list_until(self, catalog::Kind::Tools, relist) {
            log::warn!("{err:#}");
            return Some(result);
        }
        if let Some(Err(why)) = call.admit.as_ref().map(|admit| admit()) {
            return Some(Err(CallError::Refused(why)));
        }
        self.resend(call, Some(&params));
        None
    }
}
