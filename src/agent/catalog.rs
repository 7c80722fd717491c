//! What the model can find and call: the tools of the ready servers under their aliases
//! (assigned in a fixed order: servers by name, tools in list order), the set the model has
//! selected (it only grows in a conversation), and each tool's model-facing description and
//! schema, bounded by the context limits.

use std::sync::Arc;

use serde_json::{Value, json};

use super::limits::Limits;
use super::names::Aliases;
use super::text::cut;
use crate::provider::ToolSpec;
use crate::session::catalog::{self, Kind};
use crate::session::runtime::Runtime;

/// One tool the model may reach.
#[derive(Clone, Debug)]
pub struct Entry {
    pub alias: String,
    pub server: String,
    pub tool: Value,
    /// The server's instructions, bounded.
    pub instructions: String,
}

impl Entry {
    pub fn name(&self) -> &str {
        self.tool.get("name").and_then(Value::as_str).unwrap_or("")
    }

    /// The description the model sees: bounded, with the server's instructions after it.
    pub fn description(&self, limits: &Limits) -> String {
        let own = self.tool.get("description").and_then(Value::as_str).unwrap_or("");
        let mut text = cut(own, limits.description).to_string();
        if !self.instructions.is_empty() {
            text.push_str("\n\nServer instructions: ");
            text.push_str(&self.instructions);
        }
        text
    }

    pub fn schema(&self) -> Value {
        self.tool.get("inputSchema").cloned().unwrap_or_else(|| json!({ "type": "object" }))
    }

    /// What loading this tool costs from the schema budget: the compact JSON of its
    /// description and schema.
    pub fn cost(&self, limits: &Limits) -> usize {
        json!({ "description": self.description(limits), "inputSchema": self.schema() }).to_string().len()
    }

    pub fn spec(&self, limits: &Limits) -> ToolSpec {
        ToolSpec { name: self.alias.clone(), description: self.description(limits), parameters: self.schema() }
    }
}

/// The conversation's view of MCP tools.
pub struct Catalog {
    pub aliases: Aliases,
    pub selected: Vec<String>,
}

/// The built-in tools' names, which no alias may take.
pub const BUILTINS: [&str; 4] = ["capability_search", "mcp_select_tool", "mcp_read_resource", "subagent"];

impl Default for Catalog {
    fn default() -> Catalog {
        Catalog { aliases: Aliases::new(&BUILTINS), selected: Vec::new() }
    }
}

impl Catalog {
    /// Every usable tool of every ready server, in alias order of assignment. Tools with a
    /// schema nod cannot use or that require tasks are left out; so are tools `hidden`
    /// says to hide (denied by a rule).
    pub fn entries(&mut self, runtime: &Runtime, limits: &Limits, hidden: &dyn Fn(&str) -> bool) -> Vec<Entry> {
        let mut out = Vec::new();
        for server in runtime.ready() {
            let Ok(session) = runtime.session(&server) else { continue };
            if !session.has("tools") {
                continue;
            }
            let listing = match catalog::list(&session, Kind::Tools) {
                Ok(listing) => listing,
                Err(err) => {
                    log::warn!("{err:#}");
                    continue;
                }
            };
            let instructions = session.instructions.as_deref().map(|i| cut(i, limits.server_instructions).to_string());
            let instructions = instructions.map(|i| super::text::sanitize(&i)).unwrap_or_default();
            for tool in listing.items.iter() {
                let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
                if listing.unusable(name).is_some() || catalog::requires_task(tool) {
                    continue;
                }
                let alias = self.aliases.alias(&server, name);
                if hidden(&alias) {
                    continue;
                }
                out.push(Entry {
                    alias,
                    server: server.clone(),
                    tool: tool.clone(),
                    instructions: instructions.clone(),
                });
            }
        }
        out
    }

    /// The entry behind an alias, if its server is ready and still lists the tool.
    pub fn lookup(&mut self, runtime: &Runtime, limits: &Limits, alias: &str) -> Option<Entry> {
        let identity = self.aliases.resolve(alias)?.clone();
        let session = runtime.session(&identity.server).ok()?;
        let listing: Arc<catalog::Listing> = catalog::list(&session, Kind::Tools).ok()?;
        let tool = listing.find(&identity.tool)?.clone();
        if listing.unusable(&identity.tool).is_some() || catalog::requires_task(&tool) {
            return None;
        }
        let instructions = session.instructions.as_deref().map(|i| cut(i, limits.server_instructions).to_string());
        Some(Entry {
            alias: alias.to_string(),
            server: identity.server,
            tool,
            instructions: instructions.map(|i| super::text::sanitize(&i)).unwrap_or_default(),
        })
    }

    pub fn select(&mut self, alias: &str) {
        if !self.selected.iter().any(|a| a == alias) {
            self.selected.push(alias.to_string());
        }
    }

    pub fn is_selected(&self, alias: &str) -> bool {
        self.selected.iter().any(|a| a == alias)
    }

    /// The selected tools to advertise now (those whose server is ready and still has them).
    pub fn advertised(&mut self, runtime: &Runtime, limits: &Limits) -> Vec<ToolSpec> {
        let selected = self.selected.clone();
        selected.iter().filter_map(|alias| self.lookup(runtime, limits, alias)).map(|e| e.spec(limits)).collect()
    }
}
