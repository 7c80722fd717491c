//! `nod mcp resource list|templates|read|complete`. With `-o`, a read writes every content,
//! text or binary, to files, as curl -o does; without it, text is printed and binary is only
//! summarized.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::failure::{Kind, fail};
use super::render::{self, row, safe};
use super::{Context, Exit, One, print, print_json, print_listing, stdout_is_terminal};
use crate::mcp::method;
use crate::session::catalog::{self, Kind as Catalog};
use crate::session::context;

pub fn list(server: &str, templates: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let one = One::plain(server, ctx)?;
    let session = one.session();
    let kind = if templates { Catalog::Templates } else { Catalog::Resources };
    let listing = catalog::list(session, kind)?;
    super::tool::warn_rejected(server, &listing.rejected);
    if ctx.options.json {
        let key = if templates { "resourceTemplates" } else { "resources" };
        print_listing(key, &listing.items)?;
        return Ok(Exit::Ok);
    }
    let terminal = stdout_is_terminal();
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
        out.push_str(&row(id, &about, terminal));
    }
    print(&out)?;
    Ok(Exit::Ok)
}

pub fn read(server: &str, uri: &str, output: Option<&Path>, ctx: &Context) -> anyhow::Result<Exit> {
    let one = One::plain(server, ctx)?;
    let answer = one.session().request(method::RESOURCES_READ, Some(json!({ "uri": uri })));
    // 2026-07-28 says "not found" with -32602 (-32002 before).
    if let Err(crate::dispatch::CallError::Rpc(error)) = &answer
        && error.code == -32602
        && one.session().is_modern()
    {
        let message = crate::util::one_line(&error.message);
        return Err(fail(Kind::NotFound, format!("server {server}: resources/read: {message}")));
    }
    let result = context(answer, server, "resources/read")?;
    let Some(contents) = result.get("contents").and_then(Value::as_array) else {
        return Err(fail(Kind::Protocol, format!("server {server}: resources/read answered without contents")));
    };
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

pub fn complete(
    server: &str,
    template: &str,
    variable: &str,
    value: &str,
    known: &[(String, String)],
    ctx: &Context,
) -> anyhow::Result<Exit> {
    let reference = json!({ "type": "ref/resource", "uri": template });
    run_complete(server, reference, variable, value, known, ctx)
}

/// Runs `completion/complete` and prints the values, one a line.
pub(super) fn run_complete(
    server: &str,
    reference: Value,
    argument: &str,
    value: &str,
    known: &[(String, String)],
    ctx: &Context,
) -> anyhow::Result<Exit> {
    let one = One::plain(server, ctx)?;
    let session = one.session();
    if !session.has("completions") {
        return Err(fail(
            Kind::NotFound,
            format!("server {server} does not offer completion (no completions capability)"),
        ));
    }
    let mut params = json!({ "ref": reference, "argument": { "name": argument, "value": value } });
    if !known.is_empty() {
        let arguments: Map<String, Value> = known.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        params["context"] = json!({ "arguments": arguments });
    }
    let result = context(session.request(method::COMPLETE, Some(params)), server, "completion/complete")?;
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
