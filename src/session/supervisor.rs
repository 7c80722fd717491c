//! Restarts for stdio servers that die after a successful start (`restart_limit`, default 1).
//!
//! A restart happens when the server is next needed, after a backoff that doubles from
//! 250 ms (capped at 4 s). Calls that were in flight when it died fail at once and are not
//! retried: a tool call may not be idempotent. The new session fetches its catalogs afresh.
//! Past the limit the server stays down, and its last error is what every later use reports.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::{Access, Session};
use crate::config::{ServerConfig, Transport};
use crate::dispatch::{Engine, InboundHandler};

pub struct Supervised {
    engine: Engine,
    config: ServerConfig,
    handler: Arc<dyn InboundHandler>,
    access: Access,
    state: Mutex<State>,
}

struct State {
    session: Option<Arc<Session>>,
    restarts: u32,
    last_error: Option<String>,
}

impl Supervised {
    /// Connects for the first time. A server that cannot start is not restarted.
    pub fn start(
        engine: &Engine,
        config: &ServerConfig,
        handler: Arc<dyn InboundHandler>,
        access: &Access,
    ) -> anyhow::Result<Supervised> {
        let session = Session::connect(engine, config, handler.clone(), access)?;
        Ok(Supervised {
            engine: engine.clone(),
            config: config.clone(),
            handler,
            access: access.clone(),
            state: Mutex::new(State { session: Some(Arc::new(session)), restarts: 0, last_error: None }),
        })
    }

    /// The live session, restarting a dead one when the limit allows.
    pub fn session(&self) -> anyhow::Result<Arc<Session>> {
        let mut state = self.state.lock().map_err(|_| anyhow!("server {}: state poisoned", self.config.name))?;
        if let Some(session) = &state.session {
            match session.closed_cause() {
                None => return Ok(session.clone()),
                Some(cause) => {
                    state.last_error = Some(cause);
                    state.session = None;
                }
            }
        }
        let last = state.last_error.clone().unwrap_or_else(|| "stopped".into());
        let limit = if matches!(self.config.transport, Transport::Stdio(_)) { self.config.restart_limit } else { 0 };
        if state.restarts >= limit {
            bail!(
                "server {} is down after {} restart(s) (restart_limit {limit}): {last}",
                self.config.name,
                state.restarts
            );
        }
        let delay = Duration::from_millis(250 << state.restarts.min(4));
        state.restarts += 1;
        log::warn!(
            "server {}: {last}; restarting in {} ms (restart {} of {limit})",
            self.config.name,
            delay.as_millis(),
            state.restarts
        );
        std::thread::sleep(delay);
        match Session::connect(&self.engine, &self.config, self.handler.clone(), &self.access) {
            Ok(session) => {
                let session = Arc::new(session);
                state.session = Some(session.clone());
                Ok(session)
            }
            Err(err) => {
                state.last_error = Some(crate::util::chain(&err));
                Err(err.context(format!("server {}: restart failed", self.config.name)))
            }
        }
    }

    /// The current session, as it is: never restarted here (a subagent's view compares it
    /// with the one it was given).
    pub fn current(&self) -> Option<Arc<Session>> {
        self.state.lock().ok()?.session.clone()
    }

    /// How many times the server was restarted.
    pub fn restarts(&self) -> u32 {
        self.state.lock().map_or(0, |s| s.restarts)
    }
}
