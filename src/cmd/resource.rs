//! `nod mcp resource list|templates|read|complete`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use super::render::{self, row, safe};
use super::{Context, Exit, One, print, print_json, print_listing, stdout_is_terminal};
use crate::mcp::method;
use crate::session::catalog::{self, Kind};
use crate::session::context;

pub fn list(server: &str, json: bool, templates: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let one = One::plain(server, ctx)?;
    let session = one.session();
    let kind = if templates { Kind::Templates } else { Kind::Resources };
    let listing = catalog::list(session, kind)?;
    super::tool::warn_rejected(server, &listing.rejected);
    if json {
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

pub fn read(server: &str, uri: &str, output: Option<&Path>, json: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let one = One::plain(server, ctx)?;
    let result =
        context(one.session().request(method::RESOURCES_READ, Some(json!({ "uri": uri }))), server, "resources/read")?;
    let Some(contents) = result.get("contents").and_then(Value::as_array) else {
        bail!("server {server}: resources/read answered without contents");
    };
    let blobs: Vec<&Value> = contents.iter().filter(|c| c.get("blob").is_some()).collect();
    if let Some(output) = output {
        write_blobs(server, output, &blobs)?;
    }
    if json {
        print_json(&result)?;
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
        } else if output.is_none() {
            let uri = content.get("uri").and_then(Value::as_str).unwrap_or(uri);
            let mime = content.get("mimeType").and_then(Value::as_str).unwrap_or("unknown type");
            let size = render::size(content.get("blob").and_then(Value::as_str).unwrap_or(""));
            eprintln!(
                "nod: {}: binary content ({mime}, {size}) not shown; use --output FILE to save it",
                safe(uri, true)
            );
        }
    }
    if output != Some(Path::new("-")) {
        print(&out)?;
    }
    Ok(Exit::Ok)
}

/// Writes decoded blobs: the first to `output`, the next to `output.2`, ... `-` is stdout,
/// refused when stdout is a terminal.
fn write_blobs(server: &str, output: &Path, blobs: &[&Value]) -> anyhow::Result<()> {
    if blobs.is_empty() {
        eprintln!("nod: the resource has no binary contents; nothing written to {}", output.display());
        return Ok(());
    }
    let to_stdout = output == Path::new("-");
    if to_stdout && std::io::stdout().is_terminal() {
        bail!("refusing to write binary contents to a terminal; redirect stdout or give a file name");
    }
    for (i, blob) in blobs.iter().enumerate() {
        let data = blob.get("blob").and_then(Value::as_str).unwrap_or("");
        let Some(bytes) = crate::util::base64_decode(data) else {
            bail!("server {server}: a blob is not valid base64");
        };
        if to_stdout {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&bytes)?;
            stdout.flush()?;
            continue;
        }
        let path = if i == 0 { output.to_path_buf() } else { PathBuf::from(format!("{}.{}", output.display(), i + 1)) };
        std::fs::write(&path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("nod: wrote {} bytes to {}", bytes.len(), path.display());
    }
    Ok(())
}

pub fn complete(
    server: &str,
    template: &str,
    variable: &str,
    value: &str,
    known: &[(String, String)],
    json: bool,
    ctx: &Context,
) -> anyhow::Result<Exit> {
    let reference = json!({ "type": "ref/resource", "uri": template });
    run_complete(server, reference, variable, value, known, json, ctx)
}

/// Runs `completion/complete` and prints the values, one a line.
pub(super) fn run_complete(
    server: &str,
    reference: Value,
    argument: &str,
    value: &str,
    known: &[(String, String)],
    json: bool,
    ctx: &Context,
) -> anyhow::Result<Exit> {
    let one = One::plain(server, ctx)?;
    let session = one.session();
    if !session.has("completions") {
        bail!("server {server} does not offer completion (no completions capability)");
    }
    let mut params = json!({ "ref": reference, "argument": { "name": argument, "value": value } });
    if !known.is_empty() {
        let arguments: Map<String, Value> = known.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        params["context"] = json!({ "arguments": arguments });
    }
    let result = context(session.request(method::COMPLETE, Some(params)), server, "completion/complete")?;
    if json {
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
