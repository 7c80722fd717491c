//! What the MCP built-ins (agent-reference 4) return: `capability_search`'s ranked
//! document, `mcp_select_tool`'s schema, `mcp_read_resource`'s contents. Their rows (names,
//! schemas, permissions) are in `builtin`; how they run is in `call`.

use serde_json::{Value, json};

use super::Agent;
use super::builtin::{READ_RESOURCE, SEARCH, SELECT};
use super::catalog::Entry;
use super::outcome::{Failure, Outcome};
use super::search;
use super::text::Source;
use crate::session::catalog::{self as listings, Kind};
use crate::session::runtime::State;

/// Results kept from one search.
pub const MAX_MATCHES: usize = 20;
/// Resources listed beside the tools of one search.
pub const MAX_RESOURCES: usize = 10;
/// The notice when a search could not load every shown schema.
pub const BUDGET_NOTICE: &str =
    "[context] Additional MCP schemas exceed the search loading budget; narrow the search or select a tool explicitly.";

/// `capability_search {query, server?}`: the ranked document, and a notice when the schema
/// budget ran out.
pub fn capability_search(agent: &mut Agent, query: &str, server: Option<&str>) -> (Outcome, Option<&'static str>) {
    let names = agent.reach.servers(&agent.runtime);
    let skills = matching_skills(agent, &search::tokens(query), server);
    if names.is_empty() && agent.options.skills.usable().next().is_none() {
        return (Outcome::failed(SEARCH, "No MCP servers are configured."), None);
    }
    let (runtime, limits, marker) = (agent.runtime.clone(), agent.limits, agent.marker.clone());
    let mut doc = json!({ "skills": skills, "mcp_tools": [], "counts": { "skills": skills.len(), "mcp_tools": 0 },
        "total_matches": 0, "mcp_more_available": false, "mcp_next_cursor": null });
    if names.is_empty() {
        if skills.is_empty() {
            doc["state"] = json!("no_match");
        }
        return (Outcome::Ok(doc.to_string()), None);
    }
    if let Some(server) = server
        && !names.iter().any(|n| n == server)
    {
        doc["mcp_state"] = json!("server_not_found");
        return (Outcome::Ok(doc.to_string()), None);
    }
    // A server the query is about that needs authorization or a credential says so.
    let about = names.iter().filter(|n| server == Some(n.as_str()) || search::names_server(query, n));
    for name in about {
        match runtime.state(name) {
            Some(State::Unauthenticated) => {
                doc["authentication_required"] = json!({ "server": name, "interactive": true,
                    "message": format!("Run nod mcp auth {name} (or /mcp auth {name} --open in the shell), then try again.") });
            }
            Some(State::MissingVariable(var)) => {
                doc["authentication_required"] = json!({ "server": name, "interactive": false, "environment": var,
                    "message": "Set this environment variable before starting nod." });
            }
            _ => continue,
        }
        return (Outcome::Ok(doc.to_string()), None);
    }
    let tokens = search::tokens(query);
    let (policy, reach) = (agent.policy.clone(), agent.reach.clone());
    // Nothing to hide without a deny rule or a subagent's view: no subject is made per match.
    let filters = policy.deny_rules() > 0 || reach.is_child();
    let hidden = move |subject: &super::permissions::Subject| {
        policy.always_denied(subject) || !reach.admits_tool(subject.name())
    };
    let hidden: Option<&dyn Fn(&super::permissions::Subject) -> bool> = filters.then_some(&hidden);
    let catalog = &mut agent.catalog;
    let found = catalog.search(&runtime, &limits, hidden, &tokens, server, MAX_MATCHES);
    let total = found.total;
    let mut shown: Vec<&Entry> = found.best.iter().collect();
    let tool_json = |e: &Entry| {
        let description = e.tool.get("description").and_then(Value::as_str).unwrap_or("");
        json!({ "name": e.alias, "server": e.server, "tool": marker.plain(e.name(), 256),
            "description": marker.plain(description, limits.description) })
    };
    doc["total_matches"] = json!(total);
    let resources = matching_resources(agent, &tokens, server);
    if !resources.is_empty() {
        doc["mcp_resources"] = Value::Array(resources);
    }
    // Bound the document: results go from the end until it fits.
    let full = {
        let mut d = doc.clone();
        d["mcp_tools"] = Value::Array(shown.iter().map(|e| tool_json(e)).collect());
        d.to_string().len()
    };
    let mut omitted = 0;
    loop {
        doc["mcp_tools"] = Value::Array(shown.iter().map(|e| tool_json(e)).collect());
        doc["counts"]["mcp_tools"] = json!(shown.len());
        if omitted > 0 {
            doc["mcp_context_limit"] = json!({ "name": "mcp_search_result_bytes", "action": "omitted",
                "omitted_count": omitted, "observed_bytes": full, "effective_bytes": limits.search_result,
                "override": "--context-limit mcp_search_result_bytes=BYTES|off" });
        }
        if doc.to_string().len() <= limits.search_result || shown.is_empty() {
            break;
        }
        shown.pop();
        omitted += 1;
    }
    if shown.is_empty() && doc.get("mcp_resources").is_none() {
        doc["state"] = json!("no_match");
    }
    // Auto-load the shown tools' schemas within the budget.
    let mut budget = limits.selected_schema;
    let mut notice = None;
    let mut chosen = Vec::new();
    for entry in &shown {
        let cost = entry.cost(&limits, &marker);
        if cost > budget {
            notice = Some(BUDGET_NOTICE);
            break;
        }
        budget -= cost;
        chosen.push(entry.alias.clone());
    }
    let mut content = doc.to_string();
    drop(shown);
    for alias in chosen {
        agent.catalog.select(&alias);
    }
    if let Some(notice) = notice {
        content.push('\n');
        content.push_str(notice);
    }
    (Outcome::Ok(content), notice)
}

/// The most skills one search lists.
pub const MAX_SKILLS: usize = 10;

/// The skills that match `tokens`, best first: the usable installed ones (unless the search
/// is about one server) and those the ready servers offer (of `server` only, when given),
/// scored like tools (a name hit 3, a description hit 2), cleaned like every other outside
/// text. A server's skills come from its listing alone: nothing of them is read until loaded.
fn matching_skills(agent: &Agent, tokens: &[String], server: Option<&str>) -> Vec<Value> {
    let score = |name: &str, description: &str| -> u32 {
        let (name, description) = (name.to_ascii_lowercase(), description.to_ascii_lowercase());
        tokens
            .iter()
            .map(|t| 3 * u32::from(name.contains(t.as_str())) + 2 * u32::from(description.contains(t.as_str())))
            .sum()
    };
    // Scored first, and only the ones shown are cleaned and made into entries: a query can
    // match most of a thousand installed skills.
    enum Found<'a> {
        Installed(&'a crate::config::skills::Skill),
        Server(&'a str, &'a crate::session::skills::ServerSkill),
    }
    let offered = server_skills(agent, server);
    let mut found: Vec<(u32, &str, Found<'_>)> = Vec::new();
    if server.is_none() {
        for skill in agent.options.skills.usable() {
            let points = score(&skill.name, &skill.description);
            if points > 0 {
                found.push((points, &skill.name, Found::Installed(skill)));
            }
        }
    }
    for (name, skill) in &offered {
        let points = score(&skill.name, &skill.description);
        if points > 0 {
            found.push((points, &skill.name, Found::Server(name, skill)));
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    found
        .into_iter()
        .take(MAX_SKILLS)
        .map(|(.., skill)| match skill {
            Found::Installed(skill) => json!({ "name": skill.name, "origin": skill.origin.as_str(),
                "description": agent.marker.plain(&skill.description, 1024), "load": "skill" }),
            Found::Server(name, skill) => json!({ "name": agent.marker.plain(&skill.name, 64), "origin": "server",
                "server": name, "description": agent.marker.plain(&skill.description, 1024), "load": "skill" }),
        })
        .collect()
}

/// The skills the ready servers (or `server`) offer through the skills extension, by server;
/// a subagent sees those of the servers whose resources its view admits.
pub(super) fn server_skills(agent: &Agent, server: Option<&str>) -> Vec<(String, crate::session::skills::ServerSkill)> {
    let mut found = Vec::new();
    for name in agent.runtime.ready() {
        if server.is_some_and(|s| s != name) || !agent.reach.admits_resources(&name) {
            continue;
        }
        let Ok(session) = agent.reach.session(&agent.runtime, super::builtin::SKILL, &name) else { continue };
        if !crate::session::skills::offered(&session) {
            continue;
        }
        match crate::session::skills::list(&session) {
            Ok((skills, _)) => found.extend(skills.into_iter().map(|skill| (name.clone(), skill))),
            Err(err) => log::debug!("server {name}: {err:#}"),
        }
    }
    found
}

/// The resources of the ready servers (or of `server`) that match, cleaned like every other
/// piece of server text; a subagent lists only through its view, checked right before.
fn matching_resources(agent: &Agent, tokens: &[String], server: Option<&str>) -> Vec<Value> {
    let mut found: Vec<(u32, Value)> = Vec::new();
    for name in agent.runtime.ready() {
        if server.is_some_and(|s| s != name) || !agent.reach.admits_resources(&name) {
            continue;
        }
        let Ok(session) = agent.reach.session(&agent.runtime, READ_RESOURCE, &name) else { continue };
        if !session.has("resources") {
            continue;
        }
        let Ok(listing) = listings::list(&session, Kind::Resources) else { continue };
        for resource in listing.items.iter() {
            let score = search::resource_score(tokens, resource);
            if score > 0 {
                let text = |key: &str, cap: usize| {
                    agent.marker.plain(resource.get(key).and_then(Value::as_str).unwrap_or(""), cap)
                };
                found.push((
                    score,
                    json!({ "uri": text("uri", 2048), "name": text("name", 256), "server": name,
                        "description": text("description", 256) }),
                ));
            }
        }
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().take(MAX_RESOURCES).map(|(_, v)| v).collect()
}

/// `mcp_select_tool {name}`.
pub fn select(agent: &mut Agent, name: &str) -> Outcome {
    let (runtime, limits, marker) = (agent.runtime.clone(), agent.limits, agent.marker.clone());
    let catalog = &mut agent.catalog;
    if runtime.names().is_empty() {
        return Outcome::failed(SELECT, "No MCP servers are configured.");
    }
    if catalog.aliases.resolve(name).is_none() {
        // Aliases are assigned when catalogs are read: read them before refusing.
        catalog.refresh(&runtime, &limits);
    }
    if catalog.aliases.resolve(name).is_none() {
        return Outcome::failed(SELECT, format!("Unknown MCP tool: {name}"));
    }
    let Some(entry) = catalog.lookup(&runtime, &limits, name) else {
        return Outcome::failed(SELECT, "tool no longer available");
    };
    let cost = entry.cost(&limits, &marker);
    if cost > limits.selected_schema {
        let reason = json!({ "context_limit_rejection": { "name": "mcp_selected_schema_bytes", "tool": name,
            "action": "rejected", "observed_bytes": cost, "effective_bytes": limits.selected_schema,
            "override": "--context-limit mcp_selected_schema_bytes=BYTES|off" } });
        return Failure::Rejected { tool: SELECT.into(), reason }.into();
    }
    catalog.select(name);
    Outcome::Ok(
        json!({ "name": name, "server": entry.server, "tool": marker.plain(entry.name(), 256),
            "description": entry.description(&limits, &marker), "inputSchema": entry.schema(&marker) })
        .to_string(),
    )
}

/// What `mcp_read_resource` returns for a `resources/read` result: the contents, bounded and
/// marked untrusted; a failure's text marked as the server's too.
pub fn resource_outcome(
    agent: &Agent,
    result: Result<Value, crate::dispatch::CallError>,
    server: &str,
    uri: &str,
) -> Outcome {
    let mark = |text: &str| {
        agent.marker.marked(
            Source::Mcp,
            &[("server", server), ("resource", uri)],
            text,
            agent.limits.tool_result,
            READ_RESOURCE,
        )
    };
    let result = match result {
        Ok(result) => result,
        Err(err) => {
            return super::call::refused(&err)
                .unwrap_or_else(|| Outcome::failed(READ_RESOURCE, mark(&super::call::error_text(&err))));
        }
    };
    let contents = result.get("contents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let parts: Vec<String> = contents
        .iter()
        .map(|c| match c.get("text").and_then(Value::as_str) {
            Some(body) => body.to_string(),
            None => format!(
                "<resource uri=\"{}\" mimeType=\"{}\" blob/>",
                c.get("uri").and_then(Value::as_str).unwrap_or("").replace(['"', '<', '>'], ""),
                c.get("mimeType").and_then(Value::as_str).unwrap_or("").replace(['"', '<', '>'], "")
            ),
        })
        .collect();
    Outcome::Ok(mark(&parts.join("\n")))
}
