//! `nod mcp tool list|show|call`, printed from a session's listing. `list` shows how to
//! call each tool (its signature), `show` one tool's description and schemas; the call and
//! its `--jsonl` stream live in `call` and `jsonl`, the arguments in `args`.

pub mod args;
pub mod call;
mod jsonl;
pub mod wait;

use serde_json::{Value, json};

use super::failure::{Kind, fail};
use super::render::{row, safe};
use super::{Context, Exit, print, print_json, print_listing, stdout_is_terminal};
use crate::session::Session;
use crate::session::catalog::{self, Kind as Catalog, Listing};

pub fn list(session: &Session, ctx: &Context) -> anyhow::Result<Exit> {
    let server = &session.name;
    let listing = catalog::list(session, Catalog::Tools)?;
    warn_rejected(server, &listing.rejected);
    super::names::remember(server, Some(&listing.items), None);
    if ctx.options.json && listing.unusable.is_empty() {
        print_listing("tools", &listing.items)?;
    } else if ctx.options.json {
        let unusable: serde_json::Map<String, Value> =
            listing.unusable.iter().map(|(name, why)| (name.clone(), json!(why))).collect();
        print_json(&json!({ "tools": listing.items, "unusable": unusable }))?;
    } else {
        let terminal = stdout_is_terminal();
        let mut out = String::new();
        for tool in &listing.items {
            let about = tool.get("description").and_then(Value::as_str).unwrap_or("");
            let about = format!("{}{}", super::render::first_line(about), marks(tool, &listing));
            out.push_str(&row(&ctx.redactor.redact(&signature(tool)), &ctx.redactor.redact(&about), terminal));
        }
        print(&out)?;
    }
    Ok(Exit::Ok)
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
    let mut out = format!("{}{}\n", signature(found), marks(found, &listing));
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
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let schema = &tool["inputSchema"];
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = name.to_string();
    for (param, property) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let shown = format!("{param}:{}", type_of(schema, property, 0));
        out.push(' ');
        if required.contains(&param.as_str()) {
            out.push_str(&shown);
        } else {
            out.push_str(&format!("[{shown}]"));
        }
    }
    crate::util::one_line(&out)
}

/// A property's type for a signature: its `type` (or types joined by |), the values of an
/// `enum` or `const`, a local `$ref` followed into `root` (`#/$defs/...`, `#/definitions/...`),
/// the branches of `anyOf`/`oneOf` joined by | (so Python's `Optional[str]` is `string|null`),
/// or `any`.
fn type_of(root: &Value, property: &Value, depth: usize) -> String {
    if depth > 8 {
        return "any".into();
    }
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> =
            values.iter().take(6).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect();
        let more = if values.len() > 6 { "|..." } else { "" };
        return format!("{}{more}", shown.join("|"));
    }
    if let Some(value) = property.get("const") {
        return value.as_str().map_or_else(|| value.to_string(), str::to_string);
    }
    if let Some(target) = property.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        return match root.pointer(target) {
            Some(found) => type_of(root, found, depth + 1),
            None => "any".into(),
        };
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = property.get(key).and_then(Value::as_array) {
            let mut kinds: Vec<String> = Vec::new();
            for branch in branches {
                let kind = type_of(root, branch, depth + 1);
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            if !kinds.is_empty() && !kinds.iter().any(|k| k == "any") {
                return kinds.join("|");
            }
        }
    }
    match property.get("type") {
        Some(Value::String(kind)) => match (kind.as_str(), property.get("items")) {
            ("array", Some(items)) if items.is_object() => match type_of(root, items, depth + 1).as_str() {
                "any" => "array".into(),
                item if item.contains('|') => format!("({item})[]"),
                item => format!("{item}[]"),
            },
            _ => kind.clone(),
        },
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|"),
        _ if property.get("properties").is_some() => "object".into(),
        _ => "any".into(),
    }
}

/// ` [task required]`, ` [unusable: why]`: what keeps nod from calling the tool.
fn marks(tool: &Value, listing: &Listing) -> String {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    if catalog::requires_task(tool) {
        out.push_str(" [task required]");
    }
    if let Some(why) = listing.unusable(name) {
        out.push_str(&format!(" [unusable: {why}]"));
    }
    out
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
