//! `nod mcp prompt list|get`, printed from the answers of the session's queries
//! (`session::query`).

use serde_json::Value;

use super::render::{self, row};
use super::{Context, Exit, print, print_json, print_listing, stdout_is_terminal};
use crate::session::Session;
use crate::session::catalog::{self, Kind};
use crate::session::query;

pub fn list(session: &Session, ctx: &Context) -> anyhow::Result<Exit> {
    let server = &session.name;
    // A server without the capability: the listing's own error says so, once.
    let listing = catalog::list(session, Kind::Prompts)?;
    super::tool::warn_rejected(server, &listing.rejected);
    super::names::remember(server, None, Some(&listing.items));
    if ctx.options.json {
        print_listing("prompts", &listing.items)?;
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    for prompt in &listing.items {
        let name = prompt.get("name").and_then(Value::as_str).unwrap_or("");
        let about = prompt.get("description").and_then(Value::as_str).unwrap_or("");
        let args: Vec<String> = prompt
            .get("arguments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| {
                let name = a.get("name").and_then(Value::as_str)?;
                Some(if a.get("required").and_then(Value::as_bool) == Some(true) {
                    name.to_string()
                } else {
                    format!("[{name}]")
                })
            })
            .collect();
        let label = if args.is_empty() { name.to_string() } else { format!("{name} {}", args.join(" ")) };
        out.push_str(&row(&label, about));
    }
    print(&out)?;
    Ok(Exit::Ok)
}

/// `arguments` were read from what the user gave before the server was reached
/// (`args::prompt_arguments`).
/// Names, on stderr, the required arguments of `name` that `arguments` lacks, from the
/// server's listing (when it lists prompts); the request goes out all the same.
fn warn_missing(session: &Session, name: &str, arguments: Option<&Value>) {
    let Ok(listing) = catalog::list(session, Kind::Prompts) else { return };
    let Some(prompt) = listing.items.iter().find(|p| p.get("name").and_then(Value::as_str) == Some(name)) else {
        return;
    };
    let given = |key: &str| arguments.and_then(|a| a.get(key)).is_some();
    let missing: Vec<&str> = prompt
        .get("arguments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.get("required").and_then(Value::as_bool) == Some(true))
        .filter_map(|a| a.get("name").and_then(Value::as_str))
        .filter(|key| !given(key))
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "nod: warning: server {}: prompt {}: missing required argument{} {} (sent anyway: the server decides; --arg NAME=VALUE gives one)",
            session.name,
            crate::util::one_line(name),
            if missing.len() == 1 { "" } else { "s" },
            missing.iter().map(|m| crate::util::one_line(m)).collect::<Vec<_>>().join(", ")
        );
    }
}

pub fn get(session: &Session, name: &str, arguments: Option<Value>, ctx: &Context) -> anyhow::Result<Exit> {
    warn_missing(session, name, arguments.as_ref());
    let result = query::get_prompt(session, name, arguments)?;
    if ctx.options.json {
        print_json(&result)?;
        return Ok(Exit::Ok);
    }
    let terminal = stdout_is_terminal();
    let mut out = String::new();
    for message in result.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
        out.push_str(&format!("[{}]\n", render::safe(&crate::util::one_line(role), terminal)));
        let content = message.get("content").cloned().unwrap_or(Value::Null);
        let blocks = match content {
            Value::Array(items) => items,
            other => vec![other],
        };
        out.push_str(&render::blocks(&blocks, terminal));
    }
    print(&out)?;
    Ok(Exit::Ok)
}
