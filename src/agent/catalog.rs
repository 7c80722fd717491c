//! What the model can find and call: the tools of the ready servers under their aliases
//! (assigned in a fixed order: servers by name, tools in list order), the set the model has
//! selected (it only grows in a conversation), and each tool's model-facing description and
//! schema, bounded by the context limits.

use std::sync::Arc;

use serde_json::{Value, json};

use super::limits::Limits;
use super::names::Aliases;
use super::permissions::Subject;
use super::search::{self, Fields, Text};
use super::text::{Marker, Source, cut};
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

    /// The description the model sees: the server's text (the tool's description, bounded,
    /// with the server's instructions after it), marked as the server's.
    pub fn description(&self, limits: &Limits, marker: &Marker) -> String {
        let own = self.tool.get("description").and_then(Value::as_str).unwrap_or("");
        let mut text = cut(own, limits.description).to_string();
        if !self.instructions.is_empty() {
            text.push_str("\n\nServer instructions: ");
            text.push_str(&self.instructions);
        }
        let cap = limits.description + limits.server_instructions + 64;
        marker.marked(Source::Mcp, &[("server", &self.server), ("tool", self.name())], &text, cap, &self.alias)
    }

    /// The input schema the model sees: every string in it (descriptions, titles, enum
    /// values, property names) cleaned the same way, so no text in it can close or forge the
    /// marking.
    pub fn schema(&self, marker: &Marker) -> Value {
        match self.tool.get("inputSchema") {
            Some(schema) => marker.value(schema),
            None => json!({ "type": "object" }),
        }
    }

    /// What loading this tool costs from the schema budget: the compact JSON of its
    /// description and schema.
    pub fn cost(&self, limits: &Limits, marker: &Marker) -> usize {
        json!({ "description": self.description(limits, marker), "inputSchema": self.schema(marker) }).to_string().len()
    }

    pub fn spec(&self, limits: &Limits, marker: &Marker) -> ToolSpec {
        ToolSpec {
            name: self.alias.clone(),
            description: self.description(limits, marker),
            parameters: self.schema(marker),
        }
    }
}

/// The conversation's view of MCP tools.
#[derive(Default)]
pub struct Catalog {
    pub aliases: Aliases,
    pub selected: Vec<String>,
    /// Per ready server with tools, in server-name order: its listing indexed for search.
    index: Vec<ServerIndex>,
    /// A subagent's catalog: a copy of its parent's index for the servers of its view, never
    /// refreshed, so the child never lists anything itself.
    frozen: bool,
}

/// One server's listing, indexed: kept while the session's cached listing is the same one
/// (a `list_changed` or a restart brings a new listing, and the index is built again).
#[derive(Clone)]
struct ServerIndex {
    server: String,
    listing: Arc<catalog::Listing>,
    /// The bounded, sanitized instructions, and the bound they were cut at.
    instructions: String,
    instructions_limit: usize,
    /// The usable tools (no unusable schema, no required task), in list order, and their
    /// searchable text.
    tools: Vec<Indexed>,
    text: Text,
    /// Positions in `tools`, ordered by tool name.
    by_name: Vec<u32>,
}

#[derive(Clone)]
struct Indexed {
    alias: String,
    /// Position in `listing.items`.
    item: usize,
    fields: Fields,
}

impl ServerIndex {
    fn name(&self, tool: &Indexed) -> &str {
        self.listing.items[tool.item].get("name").and_then(Value::as_str).unwrap_or("")
    }

    fn find(&self, name: &str) -> Option<&Indexed> {
        let at = self.by_name.binary_search_by(|&t| self.name(&self.tools[t as usize]).cmp(name)).ok()?;
        Some(&self.tools[self.by_name[at] as usize])
    }

    fn entry(&self, tool: &Indexed) -> Entry {
        Entry {
            alias: tool.alias.clone(),
            server: self.server.clone(),
            tool: self.listing.items[tool.item].clone(),
            instructions: self.instructions.clone(),
        }
    }
}

/// The result of a search: how many tools matched, and the best of them in rank order.
pub struct Found {
    pub total: usize,
    pub best: Vec<Entry>,
}

impl Catalog {
    /// Brings the index up to date with the ready servers: new or changed listings are indexed
    /// (aliases assigned in a fixed order: servers by name, tools in list order), servers no
    /// longer ready are dropped.
    pub fn refresh(&mut self, runtime: &Runtime, limits: &Limits) {
        if self.frozen {
            return;
        }
        let ready = runtime.ready();
        self.index.retain(|i| ready.contains(&i.server));
        for server in &ready {
            self.refresh_server(runtime, limits, server);
        }
    }

    /// A frozen copy for a subagent: the aliases and the index of `servers` only.
    pub fn restricted(&self, servers: &[String]) -> Catalog {
        Catalog {
            aliases: self.aliases.clone(),
            selected: Vec::new(),
            index: self.index.iter().filter(|i| servers.contains(&i.server)).cloned().collect(),
            frozen: true,
        }
    }

    /// The usable tools of an indexed server: (alias, the tool's own name), in list order.
    pub fn tools_of(&self, server: &str) -> Vec<(String, String)> {
        let Ok(at) = self.index.binary_search_by(|i| i.server.as_str().cmp(server)) else { return Vec::new() };
        let index = &self.index[at];
        index.tools.iter().map(|t| (t.alias.clone(), index.name(t).to_string())).collect()
    }

    /// Indexes `server` again if its listing changed; returns its position in the index.
    fn refresh_server(&mut self, runtime: &Runtime, limits: &Limits, server: &str) -> Option<usize> {
        let at = self.index.binary_search_by(|i| i.server.as_str().cmp(server));
        if self.frozen {
            return at.ok();
        }
        let session = runtime.session(server).ok().filter(|s| s.has("tools"));
        let listing = session.as_ref().and_then(|session| match catalog::list(session, Kind::Tools) {
            Ok(listing) => Some(listing),
            Err(err) => {
                log::warn!("{err:#}");
                None
            }
        });
        let (Some(session), Some(listing)) = (session, listing) else {
            if let Ok(at) = at {
                self.index.remove(at);
            }
            return None;
        };
        if let Ok(at) = at {
            let current = &self.index[at];
            if Arc::ptr_eq(&current.listing, &listing) && current.instructions_limit == limits.server_instructions {
                return Some(at);
            }
        }
        let instructions = session.instructions.as_deref().map(|i| cut(i, limits.server_instructions));
        let instructions = instructions.map(super::text::sanitize).unwrap_or_default();
        let mut tools = Vec::with_capacity(listing.items.len());
        let mut text = Text::default();
        for (item, tool) in listing.items.iter().enumerate() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
            if listing.unusable(name).is_some() || catalog::requires_task(tool) {
                continue;
            }
            let Some(alias) = self.aliases.alias(server, name) else { continue };
            let fields = text.add(&alias, server, tool);
            tools.push(Indexed { alias, item, fields });
        }
        let mut index = ServerIndex {
            server: server.to_string(),
            listing,
            instructions,
            instructions_limit: limits.server_instructions,
            tools,
            text,
            by_name: Vec::new(),
        };
        let names: Vec<&str> = index.tools.iter().map(|t| index.name(t)).collect();
        let mut by_name: Vec<u32> = (0..names.len() as u32).collect();
        by_name.sort_unstable_by(|&a, &b| names[a as usize].cmp(names[b as usize]));
        index.by_name = by_name;
        Some(match at {
            Ok(at) => {
                self.index[at] = index;
                at
            }
            Err(at) => {
                self.index.insert(at, index);
                at
            }
        })
    }

    /// What a permission decision about `alias` is about: the identity behind it, and whether
    /// another known tool shares its canonical name.
    pub fn subject(&self, alias: &str) -> Option<Subject> {
        let identity = self.aliases.resolve(alias)?;
        Some(Subject::tool(identity.clone(), alias, self.aliases.contested(identity)))
    }

    /// Ranks every usable tool of the ready servers (or of `server`) for `tokens`; `hidden`
    /// says which tools to leave out (denied by a rule, outside a subagent's view). Returns
    /// the count and the best `keep`.
    pub fn search(
        &mut self,
        runtime: &Runtime,
        limits: &Limits,
        hidden: Option<&dyn Fn(&Subject) -> bool>,
        tokens: &[String],
        server: Option<&str>,
        keep: usize,
    ) -> Found {
        self.refresh(runtime, limits);
        let mut matches: Vec<(u32, &str, (usize, usize))> = Vec::new();
        for (s, index) in self.index.iter().enumerate() {
            if server.is_some_and(|name| name != index.server) {
                continue;
            }
            let hits = search::instruction_hits(tokens, &index.instructions);
            for (t, tool) in index.tools.iter().enumerate() {
                let score = search::score(tokens, &index.text, &tool.fields, &hits);
                let subject = || {
                    let identity = super::names::Identity::new(&index.server, index.name(tool));
                    let contested = self.aliases.contested(&identity);
                    Subject::tool(identity, &tool.alias, contested)
                };
                if score > 0 && !hidden.is_some_and(|hidden| hidden(&subject())) {
                    matches.push((score, &tool.alias, (s, t)));
                }
            }
        }
        search::rank(&mut matches);
        let best = matches.iter().take(keep).map(|(_, _, (s, t))| self.index[*s].entry(&self.index[*s].tools[*t]));
        Found { total: matches.len(), best: best.collect() }
    }

    /// The entry behind an alias, if its server is ready and still lists the tool.
    pub fn lookup(&mut self, runtime: &Runtime, limits: &Limits, alias: &str) -> Option<Entry> {
        let identity = self.aliases.resolve(alias)?.clone();
        let at = self.refresh_server(runtime, limits, &identity.server)?;
        let index = &self.index[at];
        let tool = index.find(&identity.tool)?;
        // A tool of the same name that came back after a change keeps its alias.
        (tool.alias == alias).then(|| index.entry(tool))
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
    pub fn advertised(&mut self, runtime: &Runtime, limits: &Limits, marker: &Marker) -> Vec<ToolSpec> {
        let selected = self.selected.clone();
        selected
            .iter()
            .filter_map(|alias| self.lookup(runtime, limits, alias))
            .map(|e| e.spec(limits, marker))
            .collect()
    }
}
