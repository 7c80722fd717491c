//! An MCP runtime for one conversation: the configured servers on one engine, started when
//! needed (required ones first, optional ones on the first use of MCP), with their state for
//! search and health. The shell's reload builds a new one and swaps it in; ACP has one per
//! session.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::supervisor::Supervised;
use super::{Access, MissingVariable, Session};
use crate::config::ServerConfig;
use crate::dispatch::{Engine, InboundHandler};
use crate::oauth::AuthError;

/// Where a server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Not started yet (optional servers wait for the first use of MCP).
    Idle,
    Ready,
    /// It needs an OAuth authorization that this surface cannot run.
    Unauthenticated,
    /// A credential variable is not set.
    MissingVariable(String),
    Failed(String),
    Disabled,
}

impl State {
    pub fn label(&self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Ready => "ready",
            State::Unauthenticated => "unauthenticated",
            State::MissingVariable(_) => "failed",
            State::Failed(_) => "failed",
            State::Disabled => "disabled",
        }
    }
}

struct Server {
    config: ServerConfig,
    state: Mutex<(State, Option<Arc<Supervised>>)>,
}

pub struct Runtime {
    engine: Engine,
    servers: Vec<Server>,
    handler: Arc<dyn InboundHandler>,
    access: Access,
}

impl Runtime {
    /// A runtime over `configs`; nothing starts yet.
    pub fn new(
        engine: Engine,
        configs: Vec<ServerConfig>,
        handler: Arc<dyn InboundHandler>,
        access: Access,
    ) -> Runtime {
        let mut servers: Vec<Server> = configs
            .into_iter()
            .map(|config| {
                let state = if config.enabled { State::Idle } else { State::Disabled };
                Server { config, state: Mutex::new((state, None)) }
            })
            .collect();
        servers.sort_by(|a, b| a.config.name.cmp(&b.config.name));
        Runtime { engine, servers, handler, access }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.config.name.clone()).collect()
    }

    /// Starts the required servers (in parallel) and returns those that failed, with why.
    pub fn start_required(&self) -> Vec<(String, String)> {
        self.start(|s| s.config.required);
        self.servers
            .iter()
            .filter(|s| s.config.required)
            .filter_map(|s| match &lock(&s.state).0 {
                State::Ready | State::Disabled => None,
                other => Some((s.config.name.clone(), describe(other))),
            })
            .collect()
    }

    /// Starts every server not started yet, in parallel, each within its startup timeout;
    /// returns the ones that failed now, with why.
    pub fn start_all(&self) -> Vec<(String, String)> {
        self.start(|_| true)
    }

    fn start(&self, which: impl Fn(&Server) -> bool + Sync) -> Vec<(String, String)> {
        let idle: Vec<&Server> = self.servers.iter().filter(|s| which(s) && lock(&s.state).0 == State::Idle).collect();
        std::thread::scope(|scope| {
            for server in &idle {
                scope.spawn(|| {
                    let started = Instant::now();
                    let result = Supervised::start(&self.engine, &server.config, self.handler.clone(), &self.access);
                    let state = match result {
                        Ok(supervised) => (State::Ready, Some(Arc::new(supervised))),
                        Err(err) => (classify(&err), None),
                    };
                    log::debug!("server {}: {} after {:?}", server.config.name, state.0.label(), started.elapsed());
                    *lock(&server.state) = state;
                });
            }
        });
        idle.iter()
            .filter_map(|s| match &lock(&s.state).0 {
                State::Ready => None,
                other => Some((s.config.name.clone(), describe(other))),
            })
            .collect()
    }

    /// Whether any server is still to be started.
    pub fn has_idle(&self) -> bool {
        self.servers.iter().any(|s| lock(&s.state).0 == State::Idle)
    }

    pub fn state(&self, name: &str) -> Option<State> {
        self.find(name).map(|s| lock(&s.state).0.clone())
    }

    pub fn config(&self, name: &str) -> Option<&ServerConfig> {
        self.find(name).map(|s| &s.config)
    }

    /// The live session of a ready server (restarted within its restart_limit).
    pub fn session(&self, name: &str) -> anyhow::Result<Arc<Session>> {
        let server = self.find(name).ok_or_else(|| anyhow::anyhow!("no MCP server named {name}"))?;
        let supervised = lock(&server.state).1.clone();
        match supervised {
            Some(supervised) => supervised.session(),
            None => Err(anyhow::anyhow!("server {name} is {}", describe(&lock(&server.state).0))),
        }
    }

    /// Ready servers, by name in order.
    pub fn ready(&self) -> Vec<String> {
        self.servers.iter().filter(|s| lock(&s.state).0 == State::Ready).map(|s| s.config.name.clone()).collect()
    }

    /// Closes every connection (in parallel) and stops the engine.
    pub fn shutdown(&self) {
        self.engine.shutdown();
        for server in &self.servers {
            lock(&server.state).1.take();
        }
    }

    fn find(&self, name: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.config.name == name)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a failed start means for search and health.
fn classify(err: &anyhow::Error) -> State {
    for cause in err.chain() {
        if let Some(AuthError::Required { .. }) = cause.downcast_ref::<AuthError>() {
            return State::Unauthenticated;
        }
        if let Some(missing) = cause.downcast_ref::<MissingVariable>()
            && missing.field == "bearer_token_env"
        {
            return State::MissingVariable(missing.variable.clone());
        }
    }
    State::Failed(format!("{err:#}"))
}

fn describe(state: &State) -> String {
    match state {
        State::Failed(why) => format!("failed: {why}"),
        State::MissingVariable(var) => format!("failed: the environment variable {var} (bearer_token_env) is not set"),
        State::Unauthenticated => "not authorized: run nod mcp auth to authorize it".into(),
        other => other.label().to_string(),
    }
}
