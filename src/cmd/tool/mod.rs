//! `nod mcp tool list|show|call`, printed from a session's listing. `list` shows how to
//! call each tool (its signature), `show` one tool's description and schemas; the call and
//! its `--jsonl` stream live in `call` and `jsonl`, the arguments in `args`.

pub mod args;
pub mod call;
mod jsonl;
pub mod wait;

use serde_json::{Value, json};

use super::failure::{Kind, fail};
use super::render::safe;
use super::{Context, Exit, print, print_json, print_listing, stdout_is_terminal};
use crate::cmd::query::Lasting;
use crate::json::Member;
use crate::session::Session;
use crate::session::catalog::{self, Kind as Catalog, Listing};

pub(super) fn list(session: &Session, lasting: Lasting, ctx: &Context) -> anyhow::Result<Exit> {
    let server = &session.name;
    // A session that lives on keeps the listing for what comes next (the shell's agent).
    if ctx.options.json || lasting == Lasting::Shared {
        let listing = catalog::list(session, Catalog::Tools)?;
        warn_rejected(server, &listing.rejected);
        super::names::remember(server, Some(&listing.items), None);
        if !ctx.options.json {
            let mut out = String::new();
            write_rows(&listing, &mut out, &mut Default::default(), ctx);
            print(&out)?;
        } else if listing.unusable.is_empty() {
            print_listing("tools", &listing.items)?;
        } else {
            let unusable: serde_json::Map<String, Value> =
                listing.unusable.iter().map(|(name, why)| (name.clone(), json!(why))).collect();
            print_json(&json!({ "tools": listing.items, "unusable": unusable }))?;
        }
        return Ok(Exit::Ok);
    }
    // Only one page of parsed tools is held at a time; the rows are printed once the
    // listing is complete.
    let mut out = String::new();
    let mut names = Vec::new();
    let mut scratch = Default::default();
    let listing = catalog::list_pages(session, Catalog::Tools, &mut |page| {
        write_rows(page, &mut out, &mut scratch, ctx);
        names.extend(super::names::names_of(&page.items));
    })?;
    warn_rejected(server, &listing.rejected);
    super::names::remember_names(server, Some(names), None);
    print(&out)?;
    Ok(Exit::Ok)
}

/// One row a tool, built in two buffers the caller keeps (`scratch`): a listing of 1,000
/// tools is mostly this loop, handed a page or a single tool at a time, and a row costs no
/// allocation of its own.
fn write_rows(listing: &Listing, out: &mut String, scratch: &mut (String, String), ctx: &Context) {
    out.reserve(listing.items.len() * 96);
    let (line, about) = scratch;
    for tool in &listing.items {
        line.clear();
        about.clear();
        write_signature(tool, line);
        about.push_str(super::render::first_line(tool.member("description").and_then(Value::as_str).unwrap_or("")));
        write_marks(tool, listing, about);
        let about = super::render::first_line(about);
        if !about.is_empty() {
            line.push_str("  ");
            line.push_str(about);
        }
        super::render::push_row(out, &ctx.redactor.redact_cow(line));
    }
}

pub fn show(session: &Session, tool: &str, ctx: &Context) -> anyhow::Result<Exit> {
    let server = &session.name;
    let listing = catalog::list(session, Catalog::Tools)?;
    super::names::remember(server, Some(&listing.items), None);
    let Some(found) = listing.find(tool) else {
        let names = listing.items.iter().filter_map(|t| t.get("name").and_then(Value::as_str));
        let hint = crate::cli::suggest::hint(tool, names);
        return Err(fail(
            Kind::NotFound,
            format!("server {server} has no tool named {tool}{hint}; see nod mcp tool list {server}"),
        ));
    };
    if ctx.options.json {
        print_json(&json!({
            "tool": found,
            "unusable": listing.unusable(tool),
            "task_required": catalog::requires_task(found),
        }))?;
        return Ok(Exit::Ok);
    }
    let redact = |text: &str| ctx.redactor.redact(text);
    let text = |key: &str| found.get(key).and_then(Value::as_str).unwrap_or("");
    let mut out = signature(found);
    write_marks(found, &listing, &mut out);
    out.push('\n');
    if !text("title").is_empty() {
        out.push_str(&format!("title: {}\n", crate::util::one_line(text("title"))));
    }
    if !text("description").is_empty() {
        out.push_str(&format!("\n{}\n", text("description").trim_end()));
    }
    for (label, key) in
        [("annotations", "annotations"), ("input schema", "inputSchema"), ("output schema", "outputSchema")]
    {
        if let Some(value) = found.get(key) {
            out.push_str(&format!("\n{label}:\n{}\n", serde_json::to_string_pretty(value)?));
        }
    }
    print(&safe(&redact(&out), stdout_is_terminal()))?;
    Ok(Exit::Ok)
}

/// `get-sum a:number b:number [note:string]`: the name, then each parameter with its type,
/// optional ones in brackets, in the schema's order.
pub fn signature(tool: &Value) -> String {
    let mut out = String::new();
    write_signature(tool, &mut out);
    out
}

/// `signature`, appended to `out` (on one line).
fn write_signature(tool: &Value, out: &mut String) {
    let start = out.len();
    out.push_str(tool.member("name").and_then(Value::as_str).unwrap_or(""));
    let schema = tool.member("inputSchema").unwrap_or(&Value::Null);
    let required = schema.member("required").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (param, property) in schema.member("properties").and_then(Value::as_object).into_iter().flatten() {
        let optional = !required.iter().any(|r| r.as_str() == Some(param));
        out.push_str(if optional { " [" } else { " " });
        out.push_str(param);
        out.push(':');
        write_type(schema, property, 0, out);
        if optional {
            out.push(']');
        }
    }
    if let std::borrow::Cow::Owned(flat) = crate::util::one_line_cow(&out[start..]) {
        out.truncate(start);
        out.push_str(&flat);
    }
}

/// A property's type for a signature: its `type` (or types joined by |), the values of an
/// `enum` or `const`, a local `$ref` followed into `root` (`#/$defs/...`, `#/definitions/...`),
/// the branches of `anyOf`/`oneOf` joined by | (so Python's `Optional[str]` is `string|null`),
/// or `any`; appended to `out`.
fn write_type(root: &Value, property: &Value, depth: usize, out: &mut String) {
    if depth > 8 {
        return out.push_str("any");
    }
    let Some(fields) = property.as_object() else { return out.push_str("any") };
    // One pass over the property's keywords (a few, mostly): cheaper than a lookup for each.
    let (mut kind, mut items, mut values, mut constant, mut reference, mut any_of, mut one_of, mut nested) =
        (None, None, None, None, None, None, None, false);
    for (key, value) in fields {
        match key.as_str() {
            "type" => kind = Some(value),
            "items" => items = Some(value),
            "enum" => values = value.as_array(),
            "const" => constant = Some(value),
            "$ref" => reference = value.as_str(),
            "anyOf" => any_of = value.as_array(),
            "oneOf" => one_of = value.as_array(),
            "properties" => nested = true,
            _ => {}
        }
    }
    if let Some(values) = values {
        for (i, v) in values.iter().take(6).enumerate() {
            if i > 0 {
                out.push('|');
            }
            match v.as_str() {
                Some(text) => out.push_str(text),
                None => out.push_str(&v.to_string()),
            }
        }
        if values.len() > 6 {
            out.push_str("|...");
        }
        return;
    }
    if let Some(value) = constant {
        return match value.as_str() {
            Some(text) => out.push_str(text),
            None => out.push_str(&value.to_string()),
        };
    }
    if let Some(target) = reference.and_then(|r| r.strip_prefix('#')) {
        return match root.pointer(target) {
            Some(found) => write_type(root, found, depth + 1, out),
            None => out.push_str("any"),
        };
    }
    for branches in [any_of, one_of].into_iter().flatten() {
        let mut kinds: Vec<String> = Vec::new();
        for branch in branches {
            let mut kind = String::new();
            write_type(root, branch, depth + 1, &mut kind);
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if !kinds.is_empty() && !kinds.iter().any(|k| k == "any") {
            return out.push_str(&kinds.join("|"));
        }
    }
    match kind {
        Some(Value::String(kind)) => match (kind.as_str(), items) {
            ("array", Some(items)) if items.is_object() => {
                let mut item = String::new();
                write_type(root, items, depth + 1, &mut item);
                match item.as_str() {
                    "any" => out.push_str("array"),
                    item if item.contains('|') => {
                        out.push('(');
                        out.push_str(item);
                        out.push_str(")[]");
                    }
                    item => {
                        out.push_str(item);
                        out.push_str("[]");
                    }
                }
            }
            _ => out.push_str(kind),
        },
        Some(Value::Array(kinds)) => {
            for (i, kind) in kinds.iter().filter_map(Value::as_str).enumerate() {
                if i > 0 {
                    out.push('|');
                }
                out.push_str(kind);
            }
        }
        _ if nested => out.push_str("object"),
        _ => out.push_str("any"),
    }
}

/// ` [task required]`, ` [unusable: why]`: what keeps nod from calling the tool, appended
/// to `out`.
fn write_marks(tool: &Value, listing: &Listing, out: &mut String) {
    if catalog::requires_task(tool) {
        out.push_str(" [task required]");
    }
    let name = tool.member("name").and_then(Value::as_str).unwrap_or("");
    if let Some(why) = listing.unusable(name) {
        out.push_str(" [unusable: ");
        out.push_str(why);
        out.push(']');
    }
}

/// What nod knows before calling `tool`, from the server's listing: an error when nod will not
/// send the call (a tool the server does not list, with the closest name it does; a schema
/// nod cannot use; a tool that requires MCP Tasks), and warnings on stderr about `arguments`
/// the schema does not expect (a missing required one, one the tool does not take), which are
/// sent all the same: the server decides.
fn precheck(session: &Session, tool: &str, arguments: Option<&Value>) -> anyhow::Result<()> {
    check(session, tool, arguments, None)
}

/// The same check after a call failed that was sent without it (`answer`: what the server
/// said), so the error can say why in nod's words: the tool the server does not list, with
/// the closest name, or the one that needs MCP Tasks; and the argument warnings.
fn postcheck(session: &Session, tool: &str, arguments: Option<&Value>, answer: &str) -> anyhow::Result<()> {
    check(session, tool, arguments, Some(answer))
}

/// Whether a call lists the server's tools before it is sent. Over stdio the listing is a
/// round trip a call does not need: it is checked only when the call fails (`postcheck`).
/// A remote server is listed first: a 2026-07-28 server needs the tool's `x-mcp-header`
/// markings for the request's headers. A listing this session holds already costs nothing.
fn checks_first(session: &Session) -> bool {
    session.is_remote() || catalog::is_fresh(session, Catalog::Tools)
}

fn check(session: &Session, tool: &str, arguments: Option<&Value>, answer: Option<&str>) -> anyhow::Result<()> {
    let outcome = match answer {
        None => "nothing was sent".to_string(),
        Some(answer) => format!("the server refused the call: {answer}"),
    };
    let server = &session.name;
    let listing = match catalog::list(session, Catalog::Tools) {
        Ok(listing) => listing,
        // A server without tools is told so by the call itself; one whose listing fails
        // still gets the call (its own answer says more than nod could).
        Err(err) => {
            log::debug!("server {server}: tools/list before the call failed: {err:#}");
            return Ok(());
        }
    };
    super::names::remember(server, Some(&listing.items), None);
    if let Some(why) = crate::session::query::refusal(&listing, tool) {
        return Err(fail(Kind::Protocol, format!("server {server}: tool {tool} {why}; {outcome}")));
    }
    let Some(found) = listing.find(tool) else {
        let names = listing.items.iter().filter_map(|t| t.get("name").and_then(Value::as_str));
        let hint = crate::cli::suggest::hint(tool, names);
        return Err(fail(
            Kind::NotFound,
            format!("server {server} has no tool named {tool}{hint}; see nod mcp tool list {server}; {outcome}"),
        ));
    };
    if let Some(Value::Object(given)) = arguments {
        for warning in argument_warnings(&found["inputSchema"], given) {
            // The names come from the server's schema and the user's arguments: shown terminal-safe.
            let line = format!("server {server}: tool {tool}: {warning} (sent anyway: the server decides)");
            eprintln!("nod: warning: {}", crate::util::terminal_safe(&line));
        }
    }
    Ok(())
}

/// What the schema says of `given` before it is sent: required arguments missing, and
/// arguments it does not take when it allows no others.
fn argument_warnings(schema: &Value, given: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    let missing: Vec<&str> = required.filter(|name| !given.contains_key(*name)).collect();
    if !missing.is_empty() {
        out.push(format!(
            "missing required argument{} {}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        ));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    if let (Some(properties), Some(false)) = (properties, schema.get("additionalProperties").and_then(Value::as_bool)) {
        let unknown: Vec<&str> = given.keys().map(String::as_str).filter(|k| !properties.contains_key(*k)).collect();
        if !unknown.is_empty() {
            let names = properties.keys().map(String::as_str);
            let hint = crate::cli::suggest::hint(unknown[0], names);
            out.push(format!("it takes no argument {}{hint}", unknown.join(", ")));
        }
    }
    out
}

pub(super) fn warn_rejected(server: &str, rejected: &[String]) {
    for why in rejected {
        eprintln!("nod: server {server}: ignored {}", crate::util::one_line(why));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_the_schema_does_not_expect_are_named() {
        let schema = json!({ "type": "object", "properties": { "a": {}, "b": {} }, "required": ["a", "b"],
            "additionalProperties": false });
        let given = json!({ "a": 1, "bb": 2 });
        let warnings = argument_warnings(&schema, given.as_object().unwrap());
        assert_eq!(warnings, ["missing required argument b", "it takes no argument bb (did you mean b?)"]);
        let open = json!({ "type": "object", "properties": { "a": {} } });
        assert!(argument_warnings(&open, given.as_object().unwrap()).is_empty(), "other arguments are allowed");
    }

    #[test]
    fn signatures_follow_local_refs_and_optional_types() {
        let tool = json!({ "name": "t", "inputSchema": { "type": "object",
            "properties": {
                "a": { "anyOf": [{ "type": "string" }, { "type": "null" }], "default": null },
                "b": { "$ref": "#/$defs/Mode" },
                "c": { "type": "array", "items": { "$ref": "#/$defs/Mode" } },
                "d": { "$ref": "#/$defs/Missing" },
                "e": {},
                "f": { "type": "array", "items": { "type": "integer" } },
            },
            "required": ["b"],
            "$defs": { "Mode": { "type": "string", "enum": ["fast", "slow"] } } } });
        assert_eq!(signature(&tool), "t [a:string|null] b:fast|slow [c:(fast|slow)[]] [d:any] [e:any] [f:integer[]]");
    }

    #[test]
    fn a_signature_and_its_row_stay_on_one_line_without_controls() {
        let tool = json!({"name": "t\u{1b}[2J", "inputSchema": {"type": "object", "properties": {
            "a\nb": {"type": "string\u{202E}"}, "c": {"enum": ["x\ry", 1]}
        }, "required": ["c"]}});
        let shown = signature(&tool);
        assert_eq!(shown, "t [2J [a b:string\u{FFFD}] c:x y|1");
        let mut out = String::new();
        super::super::render::push_row(&mut out, &format!("{shown}  about\u{7}\u{2066}me"));
        assert_eq!(out, "t [2J [a b:string\u{FFFD}] c:x y|1  about \u{FFFD}me\n");
    }

    #[test]
    fn signatures_show_types_and_optional_parameters() {
        let tool = json!({"name": "get-sum", "inputSchema": {"type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "number"}, "note": {"type": "string"},
            "mode": {"type": "string", "enum": ["fast", "slow"]}, "tags": {"type": "array", "items": {"type": "string"}},
            "x": {"type": ["string", "null"]}, "y": {}
        }, "required": ["a", "b"]}});
        assert_eq!(
            signature(&tool),
            "get-sum a:number b:number [note:string] [mode:fast|slow] [tags:string[]] [x:string|null] [y:any]"
        );
        assert_eq!(signature(&json!({"name": "noop", "inputSchema": {"type": "object"}})), "noop");
    }
}
