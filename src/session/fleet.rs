//! A fleet: the servers of `nod mcp list --connect`, connected in parallel on one engine,
//! with their health and catalog counts. The health is the query that command and the
//! shell's `/mcp list` (over `Runtime::health`) share; printing it belongs to the front ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::catalog::{self, Kind};
use super::state::State;
use super::supervisor::Supervised;
use super::{Access, Session};
use crate::config::ServerConfig;
use crate::dispatch::{Engine, InboundHandler};

/// One configured server in a fleet.
struct Member {
    config: ServerConfig,
    status: Status,
    /// When its connection started: startup_timeout_ms counts from here.
    started: Instant,
    connected: Duration,
}

enum Status {
    Disabled,
    Ready(Box<Supervised>),
    Failed(String),
}

/// Catalog sizes; `None` where the server did not declare the capability.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub tools: Option<usize>,
    pub resources: Option<usize>,
    pub templates: Option<usize>,
    pub prompts: Option<usize>,
}

/// One server's health snapshot.
#[derive(Clone, Debug)]
pub struct Health {
    pub name: String,
    pub transport: &'static str,
    /// Disabled, Starting, Ready, or Failed with the raw reason (front ends redact it).
    pub state: State,
    pub version: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub counts: Counts,
    /// Catalog items the server sent that nod could not use.
    pub rejected: usize,
    pub elapsed: Duration,
    /// The names of its tools and prompts, for the front end's completion cache.
    pub tool_names: Vec<String>,
    pub prompt_names: Vec<String>,
}

pub struct Fleet {
    /// The connections stay open until the fleet is dropped, after the engine has closed
    /// them all at once.
    members: Vec<Member>,
}

impl Fleet {
    /// Connects every enabled server in `servers` in parallel, each within its own
    /// startup_timeout_ms, then checks its health (a server that fails is a member with its
    /// reason), handing each health to `each` as soon as it is known (from that server's
    /// thread), so a front end can show the fast ones first.
    pub fn connect_and_check_each(
        engine: &Engine,
        servers: &[ServerConfig],
        handler: Arc<dyn InboundHandler>,
        access: &Access,
        each: &(dyn Fn(&Health) + Sync),
    ) -> (Fleet, Vec<Health>) {
        // The revisions learned are written once, when all have connected.
        let batch = super::revisions::batch();
        let started: Vec<(Member, Health)> = std::thread::scope(|scope| {
            let handles: Vec<_> = servers
                .iter()
                .map(|config| {
                    let handler = handler.clone();
                    scope.spawn(move || {
                        let started = Instant::now();
                        let status = if !config.enabled {
                            Status::Disabled
                        } else {
                            match Supervised::start(engine, config, handler, access) {
                                Ok(server) => Status::Ready(Box::new(server)),
                                Err(err) => Status::Failed(crate::util::chain(&err)),
                            }
                        };
                        let member = Member { config: config.clone(), status, started, connected: started.elapsed() };
                        let health = member.health();
                        each(&health);
                        (member, health)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("connect thread")).collect()
        });
        drop(batch);
        let (members, healths): (Vec<Member>, Vec<Health>) = started.into_iter().unzip();
        (Fleet { members }, healths)
    }

    /// For a one-shot command about to exit: the servers' listings are left to the operating
    /// system (`Session::leave_listings_to_exit`) instead of being freed value by value, by a
    /// thread other than those that read them.
    pub fn leave_listings_to_exit(&self) {
        for member in &self.members {
            if let Status::Ready(server) = &member.status
                && let Some(session) = server.current()
            {
                session.leave_listings_to_exit();
            }
        }
    }
}

impl Health {
    /// A disabled server's health, to fill in.
    pub fn new(config: &ServerConfig) -> Health {
        Health {
            name: config.name.clone(),
            transport: config.transport.kind(),
            state: State::Disabled,
            version: None,
            server_name: None,
            server_version: None,
            counts: Counts::default(),
            rejected: 0,
            elapsed: Duration::ZERO,
            tool_names: Vec::new(),
            prompt_names: Vec::new(),
        }
    }

    pub fn fail(&mut self, why: String) {
        self.state = State::Failed(why);
    }

    /// Why it failed, when it did: the raw text.
    pub fn error(&self) -> Option<&str> {
        match &self.state {
            State::Failed(why) => Some(why),
            _ => None,
        }
    }
}

/// Fills in a connected server's health: its version, name and catalog counts (each listing
/// bounded by `deadline`); failed when a listing fails.
pub fn check(session: &Session, deadline: Instant, health: &mut Health) {
    let listed = (|| -> anyhow::Result<()> {
        health.version = Some(session.version().to_string());
        health.transport = session.transport(health.transport);
        health.server_name = info(session, "name");
        health.server_version = info(session, "version");
        let kinds: Vec<Kind> = [Kind::Tools, Kind::Resources, Kind::Templates, Kind::Prompts]
            .into_iter()
            .filter(|kind| session.has(kind.capability()))
            .collect();
        // Asked for together: one round trip for the four first pages, not four.
        for (kind, listing) in kinds.iter().copied().zip(catalog::list_each_until(session, &kinds, deadline)) {
            let listing = listing?;
            health.rejected += listing.rejected.len();
            let count = Some(listing.items.len());
            let names = || listing.items.iter().filter_map(|i| i["name"].as_str()).map(str::to_string).collect();
            match kind {
                Kind::Tools => health.tool_names = names(),
                Kind::Prompts => health.prompt_names = names(),
                _ => {}
            }
            match kind {
                Kind::Tools => health.counts.tools = count,
                Kind::Resources => health.counts.resources = count,
                Kind::Templates => health.counts.templates = count,
                Kind::Prompts => health.counts.prompts = count,
            }
        }
        Ok(())
    })();
    match listed {
        Ok(()) => health.state = State::Ready,
        Err(err) => health.fail(crate::util::chain(&err)),
    }
}

impl Member {
    fn health(&self) -> Health {
        let mut health = Health::new(&self.config);
        health.elapsed = self.connected;
        let server = match &self.status {
            Status::Disabled => return health,
            Status::Failed(why) => {
                health.fail(why.clone());
                return health;
            }
            Status::Ready(server) => server,
        };
        let deadline = self.started + self.config.startup_timeout;
        match server.session() {
            Ok(session) => check(&session, deadline, &mut health),
            Err(err) => health.fail(crate::util::chain(&err)),
        }
        health.elapsed = self.started.elapsed();
        health
    }
}

/// A short, single-line `serverInfo` field.
fn info(session: &Session, key: &str) -> Option<String> {
    session
        .server_info
        .get(key)
        .and_then(Value::as_str)
        .map(|s| crate::util::one_line(&s.chars().take(80).collect::<String>()))
}
