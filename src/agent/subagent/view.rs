//! A subagent's view of its parent's MCP servers: the `Host` a parent shares with its
//! children (its current runtime, whether it was closed), and the immutable `View` a child
//! gets for one run, with the check every request of the child passes right before it is
//! sent (the guarantee is in the parent module).

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::json;

use crate::agent::Agent;
use crate::agent::outcome::{Failure, Outcome};
use crate::agent::permissions::{Decision, Sensitivity, Subject, wildcard};
use crate::session::Session;
use crate::session::runtime::Runtime;

pub(crate) const DISABLED: &str = "MCP is disabled for this subagent: its parent's view admits no MCP server or tool.";

/// What a parent shares with its children, and what front ends tell it: the runtime the
/// parent uses now, and whether the parent (an ACP session) was closed.
pub struct Host {
    runtime: Mutex<Arc<Runtime>>,
    closed: Mutex<Option<String>>,
}

impl Host {
    pub fn new(runtime: Arc<Runtime>) -> Arc<Host> {
        Arc::new(Host { runtime: Mutex::new(runtime), closed: Mutex::new(None) })
    }

    pub fn runtime(&self) -> Arc<Runtime> {
        lock(&self.runtime).clone()
    }

    /// The parent's runtime was replaced (a reload, which is also how a server is removed):
    /// every view taken from the old one is dead from now on.
    pub fn replace(&self, runtime: Arc<Runtime>) {
        *lock(&self.runtime) = runtime;
    }

    /// The parent is gone (an ACP session closed): no child request is sent any more.
    pub fn close(&self, why: &str) {
        lock(&self.closed).get_or_insert_with(|| why.to_string());
    }

    pub(super) fn closed(&self) -> Option<String> {
        lock(&self.closed).clone()
    }
}

/// One admitted server of a view.
struct Admitted {
    name: String,
    session: Arc<Session>,
    /// (alias, the tool's own name).
    tools: Vec<(String, String)>,
    resources: bool,
    prompts: bool,
    completion: bool,
}

/// A ready server before filtering: its name, session and (alias, tool) pairs.
type Candidate = (String, Arc<Session>, Vec<(String, String)>);

/// A child's immutable, permission-filtered view of its parent's MCP servers.
pub struct View {
    host: Arc<Host>,
    pub(super) runtime: Arc<Runtime>,
    servers: Vec<Admitted>,
    ended: Mutex<Option<String>>,
}

/// What a child asks of a server, for `View::admits`.
#[derive(Clone, Copy, Debug)]
pub enum Use<'a> {
    Tool(&'a str),
    Resource,
    Prompt,
    Completion,
}

impl View {
    /// Takes the snapshot: the parent's ready servers and their usable tools, less what the
    /// parent's rules deny, narrowed by `patterns`. A pattern that would admit something the
    /// parent may not use, or that admits nothing the parent has, is refused: patterns only
    /// narrow.
    pub(super) fn snapshot(parent: &mut Agent, patterns: Option<&[String]>) -> Result<View, String> {
        let runtime = parent.runtime.clone();
        parent.catalog.refresh(&runtime, &parent.limits);
        let policy = &parent.policy;
        let catalog = &parent.catalog;
        let denied = |alias: &str| {
            catalog
                .subject(alias)
                .is_none_or(|s| matches!(policy.decide(&s, "*", Sensitivity::Sensitive), Decision::Deny(_)))
        };
        let reads_denied = policy.always_denied(&Subject::Builtin(crate::agent::builtin::READ_RESOURCE));
        let mut candidates: Vec<Candidate> = Vec::new();
        for name in runtime.ready() {
            let Some(session) = runtime.current(&name).filter(|s| !s.is_closed()) else { continue };
            candidates.push((name.clone(), session, parent.catalog.tools_of(&name)));
        }
        if let Some(patterns) = patterns {
            for pattern in patterns {
                let mut matched = false;
                for (_, _, tools) in &candidates {
                    for (alias, _) in tools.iter().filter(|(alias, _)| wildcard(pattern, alias)) {
                        if denied(alias) {
                            return Err(format!(
                                "the tools pattern {pattern:?} would admit {alias}, which the parent may not use"
                            ));
                        }
                        matched = true;
                    }
                }
                if wildcard(pattern, "mcp_read_resource") {
                    if reads_denied {
                        return Err(format!(
                            "the tools pattern {pattern:?} would admit mcp_read_resource, which the parent may not use"
                        ));
                    }
                    matched = true;
                }
                if !matched {
                    return Err(format!("the tools pattern {pattern:?} matches no tool the parent can use"));
                }
            }
        }
        let chosen = |name: &str| patterns.is_none_or(|ps| ps.iter().any(|p| wildcard(p, name)));
        let reads = !reads_denied && chosen("mcp_read_resource");
        let servers = candidates
            .into_iter()
            .filter_map(|(name, session, tools)| {
                let tools: Vec<(String, String)> =
                    tools.into_iter().filter(|(alias, _)| !denied(alias) && chosen(alias)).collect();
                let resources = reads && session.has("resources");
                if tools.is_empty() && !resources {
                    return None;
                }
                let (prompts, completion) = (session.has("prompts"), session.has("completions"));
                Some(Admitted { name, session, tools, resources, prompts, completion })
            })
            .collect();
        Ok(View { host: parent.host.clone(), runtime, servers, ended: Mutex::new(None) })
    }

    /// Whether nothing was admitted (MCP is disabled for the child).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The admitted servers' names.
    pub fn servers(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    /// The server and tool name behind an admitted alias.
    pub fn tool(&self, alias: &str) -> Option<(&str, &str)> {
        self.servers
            .iter()
            .find_map(|s| s.tools.iter().find(|(a, _)| a == alias).map(|(_, tool)| (s.name.as_str(), tool.as_str())))
    }

    /// Whether the view admits this use of `server`.
    pub fn admits(&self, server: &str, what: Use) -> bool {
        self.servers.iter().any(|s| {
            s.name == server
                && match what {
                    Use::Tool(alias) => s.tools.iter().any(|(a, _)| a == alias),
                    Use::Resource => s.resources,
                    Use::Prompt => s.prompts,
                    Use::Completion => s.completion,
                }
        })
    }

    /// The check right before transport: the view is alive, and `server`'s session is the
    /// one it admitted, still open. Returns that session.
    pub fn check(&self, server: &str) -> Result<Arc<Session>, String> {
        if let Some(why) = lock(&self.ended).clone() {
            return Err(why);
        }
        if let Some(why) = self.host.closed() {
            return Err(why);
        }
        if !Arc::ptr_eq(&self.host.runtime(), &self.runtime) {
            return Err("the parent's MCP servers were reloaded since this subagent started".into());
        }
        let Some(admitted) = self.servers.iter().find(|s| s.name == server) else {
            return Err(format!("MCP server {server} is not in this subagent's view"));
        };
        match self.runtime.current(server) {
            Some(now) if Arc::ptr_eq(&now, &admitted.session) && !now.is_closed() => Ok(now),
            Some(now) if Arc::ptr_eq(&now, &admitted.session) => Err(format!("MCP server {server} disconnected")),
            _ => Err(format!(
                "MCP server {server} reconnected (a new authorization, a logout or a restart) since this subagent started"
            )),
        }
    }

    /// Ends the view: no request goes out through it any more.
    pub fn end(&self, why: &str) {
        lock(&self.ended).get_or_insert_with(|| why.to_string());
    }
}

/// The refusal a child's request gets when the view check fails.
pub fn refused(tool: &str, why: &str) -> Failure {
    Failure::execution(tool, format!("Not sent: {why}. This subagent can no longer use MCP in this run."))
}

/// What a child's `capability_search` says when its view is empty.
pub fn disabled() -> Outcome {
    Outcome::Ok(
        json!({ "skills": [], "mcp_tools": [], "counts": { "skills": 0, "mcp_tools": 0 }, "total_matches": 0,
        "state": "mcp_disabled", "message": DISABLED })
        .to_string(),
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
