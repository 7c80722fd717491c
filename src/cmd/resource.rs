//! `nod mcp resource list|templates|read`, and `complete` for resources and prompts,
//! printed from the answers of the session's queries (`session::query`). With `-o`, a read
//! writes every content, text or binary, to files, as curl -o does; without it, text is
//! printed and binary is only summarized.

use std::path::Path;

use serde_json::Value;

use super::failure::{Kind, fail};
use super::render::{self, row, safe};
use super::{Context, Exit, print, print_json, print_listing, stdout_is_terminal};
use crate::session::Session;
use crate::session::catalog::{self, Kind as Catalog};
use crate::session::query;

pub fn list(session: &Session, templates: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let server = &session.name;
    let kind = if templates { Catalog::Templates } else { Catalog::Resources };
    let listing = catalog::list(session, kind)?;
    super::tool::warn_rejected(server, &listing.rejected);
    if ctx.options.json {
        let key = if templates { "resourceTemplates" } else { "resources" };
        print_listing(key, &listing.items)?;
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    for item in &listing.items {
        let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
        let id = if templates { text("uriTemplate") } else { text("uri") };
        let name = if text("title").is_empty() { text("name") } else { text("title") };
        let mime = text("mimeType");
        let mut about = name.to_string();
        if !mime.is_empty() {
            about.push_str(&format!(" ({mime})"));
        }
        out.push_str(&row(id, &about));
    }
    print(&out)?;
    Ok(Exit::Ok)
}

pub fn read(session: &Session, uri: &str, output: Option<&Path>, ctx: &Context) -> anyhow::Result<Exit> {
    let server = &session.name;
    let result = query::read_resource(session, uri)?;
    let contents = result.get("contents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if let Some(output) = output {
        let mut items = Vec::with_capacity(contents.len());
        for content in contents {
            if let Some(text) = content.get("text").and_then(Value::as_str) {
                items.push(text.as_bytes().to_vec());
            } else if let Some(blob) = content.get("blob").and_then(Value::as_str) {
                match crate::util::base64_decode(blob) {
                    Some(bytes) => items.push(bytes),
                    None => return Err(fail(Kind::Protocol, format!("server {server}: a blob is not valid base64"))),
                }
            }
        }
        if items.is_empty() {
            eprintln!("nod: the resource has no contents; nothing written to {}", output.display());
        } else {
            super::output::write_numbered(output, &items)?;
        }
    }
    if ctx.options.json {
        print_json(&result)?;
        return Ok(Exit::Ok);
    }
    if output.is_some() {
        return Ok(Exit::Ok);
    }
    let terminal = stdout_is_terminal();
    let mut out = String::new();
    for content in contents {
        if let Some(text) = content.get("text").and_then(Value::as_str) {
            out.push_str(&safe(text, terminal));
            if !out.ends_with('\n') {
                out.push('\n');
            }
        } else {
            let uri = content.get("uri").and_then(Value::as_str).unwrap_or(uri);
            let mime = content.get("mimeType").and_then(Value::as_str).unwrap_or("unknown type");
            let size = render::size(content.get("blob").and_then(Value::as_str).unwrap_or(""));
            eprintln!(
                "nod: {}: binary content ({mime}, {size}) not shown; use --output FILE to save it",
                safe(uri, true)
            );
        }
    }
    print(&out)?;
    Ok(Exit::Ok)
}

/// Runs `completion/complete` (for `resource complete` and `prompt complete`) and prints
/// the values, one a line.
pub(super) fn complete(
    session: &Session,
    reference: Value,
    argument: &str,
    value: &str,
    known: &[(String, String)],
    ctx: &Context,
) -> anyhow::Result<Exit> {
    let result = query::complete(session, reference, argument, value, known)?;
    if ctx.options.json {
        print_json(&result)?;
        return Ok(Exit::Ok);
    }
    let completion = result.get("completion").cloned().unwrap_or(Value::Null);
    let values = completion.get("values").and_then(Value::as_array).cloned().unwrap_or_default();
    let terminal = stdout_is_terminal();
    let mut out = String::new();
    for value in values.iter().filter_map(Value::as_str).take(100) {
        out.push_str(&safe(&crate::util::one_line(value), terminal));
        out.push('\n');
    }
    print(&out)?;
    if completion.get("hasMore").and_then(Value::as_bool) == Some(true) {
        let total = completion.get("total").and_then(Value::as_u64).map(|t| format!(" of {t}")).unwrap_or_default();
        eprintln!("nod: showing {}{total}; the server has more", values.len());
    }
    Ok(Exit::Ok)
}
