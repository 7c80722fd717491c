//! How an agent reaches MCP: a parent through its runtime, a subagent through the immutable
//! view of its parent's servers it was given for one run. Every built-in and every MCP call
//! asks this one interface, so no built-in checks which kind of agent it runs in.

use std::sync::Arc;

use super::outcome::Failure;
use super::subagent::view::DISABLED;
use super::subagent::{Use, View, refused};
use crate::session::Session;
use crate::session::runtime::Runtime;

#[derive(Clone)]
pub enum Reach {
    /// A parent: every server of its runtime.
    Runtime,
    /// A subagent: what its view admits, checked again right before each request.
    View(Arc<View>),
}

impl Reach {
    pub fn view(&self) -> Option<&Arc<View>> {
        match self {
            Reach::Runtime => None,
            Reach::View(view) => Some(view),
        }
    }

    pub fn is_child(&self) -> bool {
        matches!(self, Reach::View(_))
    }

    /// The servers this agent may name.
    pub fn servers(&self, runtime: &Runtime) -> Vec<String> {
        match self {
            Reach::Runtime => runtime.names(),
            Reach::View(view) => view.servers(),
        }
    }

    /// `Some` when this agent has no MCP at all (a subagent whose view admitted nothing):
    /// what every MCP built-in answers.
    pub fn disabled(&self, tool: &str) -> Option<Failure> {
        match self {
            Reach::View(view) if view.is_empty() => Some(Failure::execution(tool, DISABLED)),
            _ => None,
        }
    }

    /// Whether the model may use the tool behind `alias`.
    pub fn admits_tool(&self, alias: &str) -> bool {
        match self {
            Reach::Runtime => true,
            Reach::View(view) => view.tool(alias).is_some(),
        }
    }

    /// Whether `server`'s resources may be read (or listed in a search).
    pub fn admits_resources(&self, server: &str) -> bool {
        match self {
            Reach::Runtime => true,
            Reach::View(view) => view.admits(server, Use::Resource),
        }
    }

    /// The session to send to, or why there is none. For a subagent this is the view's check.
    pub fn session(&self, runtime: &Runtime, tool: &str, server: &str) -> Result<Arc<Session>, Failure> {
        match self {
            Reach::View(view) => view.check(server).map_err(|why| refused(tool, &why)),
            Reach::Runtime => match runtime.session(server) {
                Ok(session) => Ok(session),
                Err(_) if runtime.state(server).is_none() => {
                    Err(Failure::execution(tool, format!("Unknown MCP server: {server}")))
                }
                Err(err) => Err(Failure::execution(
                    tool,
                    format!("MCP server '{server}' is not available: {}", crate::util::chain(&err)),
                )),
            },
        }
    }

    /// The part of the last check before transport that belongs to the reach: a subagent's
    /// view is still alive and `server`'s session is the one it admitted.
    pub fn check(&self, tool: &str, server: &str) -> Result<(), Failure> {
        match self {
            Reach::Runtime => Ok(()),
            Reach::View(view) => view.check(server).map(drop).map_err(|why| refused(tool, &why)),
        }
    }

    /// A parent starts its optional servers on first use; a subagent's view is fixed.
    pub fn starts_servers(&self) -> bool {
        matches!(self, Reach::Runtime)
    }
}
