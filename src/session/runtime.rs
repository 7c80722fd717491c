//! An MCP runtime for one conversation: the configured servers on one engine, started when
//! needed (required ones first, optional ones on the first use of MCP), with their state for
//! search and health. The shell's reload builds a new one and swaps it in; ACP has one per
//! session.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::fleet::Health;
use super::supervisor::Supervised;
use super::{Access, MissingVariable, Session};
use crate::config::ServerConfig;
use crate::dispatch::{Engine, InboundHandler};
use crate::oauth::AuthError;

pub use super::state::State;

struct Server {
    config: ServerConfig,
    state: Mutex<(State, Option<Arc<Supervised>>)>,
    /// How long its last start took (health shows it).
    took: Mutex<Duration>,
}

pub struct Runtime {
    engine: Engine,
    servers: Vec<Server>,
    handler: Arc<dyn InboundHandler>,
    access: Access,
    /// Signalled whenever a server leaves `Starting`.
    settled: Condvar,
    settling: Mutex<()>,
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
                Server { config, state: Mutex::new((state, None)), took: Mutex::new(Duration::ZERO) }
            })
            .collect();
        servers.sort_by(|a, b| a.config.name.cmp(&b.config.name));
        Runtime { engine, servers, handler, access, settled: Condvar::new(), settling: Mutex::new(()) }
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
                other => Some((s.config.name.clone(), describe(&s.config.name, other))),
            })
            .collect()
    }

    /// Starts every server not started yet, in parallel, each within its startup timeout;
    /// returns the ones that failed now, with why.
    pub fn start_all(&self) -> Vec<(String, String)> {
        self.start(|_| true)
    }

    /// Starts the servers `which` selects that are idle, in parallel, calling `settled` from
    /// each server's thread as it becomes ready or fails; returns the ones that failed.
    pub fn start_each(
        &self,
        which: impl Fn(&ServerConfig) -> bool + Sync,
        settled: &(dyn Fn(&str, &State) + Sync),
    ) -> Vec<(String, String)> {
        self.start_with(|s| which(&s.config), settled)
    }

    fn start(&self, which: impl Fn(&Server) -> bool + Sync) -> Vec<(String, String)> {
        self.start_with(which, &|_, _| {})
    }

    fn start_with(
        &self,
        which: impl Fn(&Server) -> bool + Sync,
        settled: &(dyn Fn(&str, &State) + Sync),
    ) -> Vec<(String, String)> {
        // Claimed under the lock: a server is started by one caller only.
        let claimed: Vec<&Server> = self
            .servers
            .iter()
            .filter(|s| {
                let mut state = lock(&s.state);
                let claim = which(s) && state.0 == State::Idle;
                if claim {
                    state.0 = State::Starting;
                }
                claim
            })
            .collect();
        // The revisions learned are written once, when all have started.
        let batch = (claimed.len() > 1).then(super::revisions::batch);
        std::thread::scope(|scope| {
            for server in &claimed {
                scope.spawn(|| {
                    let started = Instant::now();
                    let result = Supervised::start(&self.engine, &server.config, self.handler.clone(), &self.access);
                    let state = match result {
                        Ok(supervised) => (State::Ready, Some(Arc::new(supervised))),
                        Err(err) => (classify(&err), None),
                    };
                    log::debug!("server {}: {} after {:?}", server.config.name, state.0.label(), started.elapsed());
                    *lock(&server.took) = started.elapsed();
                    let shown = state.0.clone();
                    *lock(&server.state) = state;
                    {
                        let _guard = lock(&self.settling);
                        self.settled.notify_all();
                    }
                    settled(&server.config.name, &shown);
                });
            }
        });
        drop(batch);
        claimed
            .iter()
            .filter_map(|s| match &lock(&s.state).0 {
                State::Ready => None,
                other => Some((s.config.name.clone(), describe(&s.config.name, other))),
            })
            .collect()
    }

    /// Waits until no server is starting (another thread started them), at most `limit`.
    pub fn wait_started(&self, limit: std::time::Duration) {
        let deadline = Instant::now() + limit;
        let mut guard = lock(&self.settling);
        while self.servers.iter().any(|s| lock(&s.state).0 == State::Starting) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            guard = self.settled.wait_timeout(guard, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Starts `name` again (after an authorization, or a failure): its old connection is
    /// closed and it connects anew. The new state.
    pub fn restart(&self, name: &str) -> Option<State> {
        let server = self.find(name)?;
        {
            let mut state = lock(&server.state);
            if state.0 == State::Starting || state.0 == State::Disabled {
                return Some(state.0.clone());
            }
            *state = (State::Idle, None);
        }
        self.start(|s| s.config.name == name);
        self.state(name)
    }

    /// Every server's health as `nod mcp list --connect` shows it, from the live
    /// connections (catalogs from the cache, listed within the operation timeout).
    pub fn health(&self) -> Vec<Health> {
        std::thread::scope(|scope| {
            let handles: Vec<_> =
                self.servers.iter().map(|server| scope.spawn(move || self.server_health(server))).collect();
            handles.into_iter().map(|h| h.join().expect("health thread")).collect()
        })
    }

    fn server_health(&self, server: &Server) -> Health {
        let (state, supervised) = lock(&server.state).clone();
        let mut health = Health::new(&server.config);
        health.elapsed = *lock(&server.took);
        match (state, supervised) {
            (State::Ready, Some(supervised)) => {
                let deadline = Instant::now() + server.config.operation_timeout;
                match supervised.session() {
                    Ok(session) => super::fleet::check(&session, deadline, &mut health),
                    Err(err) => health.fail(crate::util::chain(&err)),
                }
            }
            (State::Idle | State::Starting, _) => health.state = State::Starting,
            (State::Disabled, _) => {}
            (other, _) => health.fail(describe(&server.config.name, &other)),
        }
        health
    }

    /// Whether any server is still to be started, or starting.
    pub fn has_idle(&self) -> bool {
        self.servers.iter().any(|s| matches!(lock(&s.state).0, State::Idle | State::Starting))
    }

    /// Why `name` cannot be used, when it has failed (or needs authorization).
    pub fn problem(&self, name: &str) -> Option<String> {
        let state = self.state(name)?;
        match state {
            State::Failed(_) | State::MissingVariable(_) | State::Unauthenticated => Some(describe(name, &state)),
            _ => None,
        }
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
            None => Err(anyhow::anyhow!("server {name} is {}", describe(name, &lock(&server.state).0))),
        }
    }

    /// The session `name` has now, without restarting a dead one (what a subagent's view
    /// checks its own against).
    pub fn current(&self, name: &str) -> Option<Arc<Session>> {
        let server = self.find(name)?;
        let supervised = lock(&server.state).1.clone()?;
        supervised.current()
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
    State::Failed(crate::util::chain(err))
}

fn describe(name: &str, state: &State) -> String {
    match state {
        State::Failed(why) => format!("failed: {why}"),
        State::MissingVariable(var) => format!("failed: the environment variable {var} (bearer_token_env) is not set"),
        State::Unauthenticated => format!("authentication required: run nod mcp auth {name}"),
        other => other.label().to_string(),
    }
}
