//! Server catalogs: tools, resources, resource templates and prompts, fetched page by page
//! to the end, checked, and cached until the server says the list changed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};

use super::Session;
use super::envelope::{ResultKind, UNKNOWN_RESULT_TYPE};
use super::page::Answer;
use crate::dispatch::CallError;
use crate::json::Member;
use crate::jsonrpc::METHOD_NOT_FOUND;
use crate::mcp::method;

/// A listing that needs more pages than this is refused: it is a loop or a flood.
pub const MAX_PAGES: usize = 1000;
/// The most items one listing keeps (tools, resources, templates or prompts of one server):
/// a server that pages without end stops here, with what it listed so far and a note, instead
/// of growing nod without bound.
pub const MAX_ITEMS: usize = 20_000;
/// The longest cursor nod sends back.
pub const MAX_CURSOR_BYTES: usize = 4096;
/// How deeply a tool's input schema may nest.
pub const MAX_SCHEMA_DEPTH: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl Kind {
    fn method(self) -> &'static str {
        match self {
            Kind::Tools => method::TOOLS_LIST,
            Kind::Resources => method::RESOURCES_LIST,
            Kind::Templates => method::RESOURCES_TEMPLATES,
            Kind::Prompts => method::PROMPTS_LIST,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Tools => "tools",
            Kind::Resources => "resources",
            Kind::Templates => "resourceTemplates",
            Kind::Prompts => "prompts",
        }
    }

    /// The server capability the listing needs.
    pub fn capability(self) -> &'static str {
        match self {
            Kind::Tools => "tools",
            Kind::Resources | Kind::Templates => "resources",
            Kind::Prompts => "prompts",
        }
    }

    fn epoch(self, session: &Session) -> &AtomicU64 {
        let shared = session.shared();
        match self {
            Kind::Tools => &shared.tools_epoch,
            Kind::Resources | Kind::Templates => &shared.resources_epoch,
            Kind::Prompts => &shared.prompts_epoch,
        }
    }
}

/// One listing's items, plus how many the server sent that nod could not use.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub items: Vec<Value>,
    pub rejected: Vec<String>,
    /// Tools that are listed but cannot be used, by name, with the reason: a schema in
    /// another dialect or invalid against its meta-schema.
    pub unusable: Vec<(String, String)>,
    /// 2026-07-28: how long the listing may be taken as fresh (the smallest `ttlMs` of its
    /// pages); None for the initialize era, whose listings hold until a list_changed.
    pub ttl: Option<Duration>,
}

/// The shortest freshness nod gives a 2026-07-28 listing: `ttlMs` 0 (or none) would list the
/// server again for each tool the agent looks up in one step.
const MIN_TTL: Duration = Duration::from_secs(1);

impl Listing {
    /// Why the tool `name` cannot be used, if it cannot.
    pub fn unusable(&self, name: &str) -> Option<&str> {
        self.unusable.iter().find(|(n, _)| n == name).map(|(_, why)| why.as_str())
    }

    /// The item called `name` (tools, prompts) or with that uri.
    pub fn find(&self, name: &str) -> Option<&Value> {
        self.items.iter().find(|i| i.member("name").and_then(Value::as_str) == Some(name))
    }
}

/// Whether a tool requires MCP Tasks (`execution.taskSupport: "required"`), which nod does
/// not implement: it is listed, marked, and never called.
pub fn requires_task(tool: &Value) -> bool {
    tool.member("execution").and_then(|e| e.member("taskSupport")).and_then(Value::as_str) == Some("required")
}

/// The `x-mcp-header` markings of tool `name` in the latest tools listing (SEP-2243): none
/// when the tool has none or was never listed.
pub(crate) fn markings(session: &Session, name: &str) -> Vec<(String, String)> {
    let Ok(cache) = session.cache().lock() else { return Vec::new() };
    let listing = cache.entries.iter().find(|(kind, ..)| *kind == Kind::Tools).map(|(.., listing)| listing);
    let tool = listing.and_then(|listing| listing.find(name));
    tool.and_then(|tool| crate::mcp::headers::markings(tool).ok()).unwrap_or_default()
}

#[derive(Default)]
pub(crate) struct Cache {
    /// (kind, the list_changed epoch it was fetched at, when it goes stale, the listing).
    entries: Vec<(Kind, u64, Option<Instant>, Arc<Listing>)>,
}

/// Lists `kind` to the end. A cached listing is reused until a `list_changed` arrives.
/// Errors name the server.
pub fn list(session: &Session, kind: Kind) -> anyhow::Result<Arc<Listing>> {
    list_until(session, kind, deadline(session)).map_err(|e| e.context(format!("server {}", session.name)))
}

/// A whole listing's deadline: every page may take the operation timeout.
fn deadline(session: &Session) -> Instant {
    let deadline = Instant::now().checked_add(session.operation_timeout * MAX_PAGES as u32);
    deadline.unwrap_or_else(|| crate::dispatch::far_future(Instant::now()))
}

/// Like `list`, with every page's request also bounded by `deadline` (the startup deadline
/// during first discovery).
pub fn list_until(session: &Session, kind: Kind, deadline: Instant) -> anyhow::Result<Arc<Listing>> {
    match cached(session, kind)? {
        Cached::Fresh(listing) => Ok(listing),
        Cached::Stale(stale, epoch) => keep(session, kind, epoch, fetch(session, kind, deadline, None), stale),
    }
}

/// `list_until` for several kinds at once: the first page of every kind that is not cached
/// is asked for before any answer is awaited, so the server sees them together (one round
/// trip instead of one per kind). Results are in the order of `kinds`.
pub fn list_each_until(session: &Session, kinds: &[Kind], deadline: Instant) -> Vec<anyhow::Result<Arc<Listing>>> {
    let started: Vec<_> = kinds
        .iter()
        .map(|&kind| match cached(session, kind) {
            Ok(Cached::Stale(stale, epoch)) => {
                let call = session.start(kind.method(), None, page_timeout(session, deadline), None);
                Ok(Err((stale, epoch, call)))
            }
            Ok(Cached::Fresh(listing)) => Ok(Ok(listing)),
            Err(err) => Err(err),
        })
        .collect();
    kinds
        .iter()
        .zip(started)
        .map(|(&kind, started)| match started? {
            Ok(listing) => Ok(listing),
            Err((stale, epoch, call)) => keep(session, kind, epoch, fetch(session, kind, deadline, Some(call)), stale),
        })
        .collect()
}

enum Cached {
    Fresh(Arc<Listing>),
    /// Not cached, or cached past its freshness (kept to serve if listing again fails); the
    /// list_changed epoch the new listing is fetched at.
    Stale(Option<Arc<Listing>>, u64),
}

/// Whether `list` would answer from the cache, without asking the server.
pub fn is_fresh(session: &Session, kind: Kind) -> bool {
    matches!(cached(session, kind), Ok(Cached::Fresh(_)))
}

fn cached(session: &Session, kind: Kind) -> anyhow::Result<Cached> {
    if !session.has(kind.capability()) {
        return Err(anyhow::Error::new(CallError::NotOffered(kind.capability())).context(kind.method()));
    }
    let epoch = kind.epoch(session).load(Ordering::SeqCst);
    let mut stale = None;
    if let Ok(cache) = session.cache().lock()
        && let Some((_, _, until, listing)) = cache.entries.iter().find(|(k, e, _, _)| *k == kind && *e == epoch)
    {
        // 2026-07-28 caching hints: fresh until its ttlMs ran out, then listed again.
        match until {
            Some(until) if Instant::now() >= *until => stale = Some(listing.clone()),
            _ => return Ok(Cached::Fresh(listing.clone())),
        }
    }
    Ok(Cached::Stale(stale, epoch))
}

/// Caches a new listing, or falls back on the stale one when listing again failed.
fn keep(
    session: &Session,
    kind: Kind,
    epoch: u64,
    fetched: anyhow::Result<Listing>,
    stale: Option<Arc<Listing>>,
) -> anyhow::Result<Arc<Listing>> {
    let listing = match (fetched, stale) {
        (Ok(listing), _) => Arc::new(listing),
        // A stale listing may serve when listing again fails (the caching utility allows it).
        (Err(err), Some(stale)) => {
            log::debug!("server {}: {:#}; using the stale listing", session.name, err);
            return Ok(stale);
        }
        (Err(err), None) => return Err(err),
    };
    let until = listing.ttl.map(|ttl| Instant::now() + ttl.max(MIN_TTL));
    if let Ok(mut cache) = session.cache().lock() {
        cache.entries.retain(|(k, _, _, _)| *k != kind);
        cache.entries.push((kind, epoch, until, listing.clone()));
    }
    Ok(listing)
}

fn page_timeout(session: &Session, deadline: Instant) -> Duration {
    session.operation_timeout.min(deadline.saturating_duration_since(Instant::now()))
}

/// Lists `kind` to the end as `list` does, handing each page's items (with their
/// `unusable` marks) to `on_page` as it arrives instead of keeping them all: what a one-shot
/// listing prints needs one page in memory at a time, where the whole listing of 1,000 tools
/// is about 3 MiB of parsed values. A page of an initialize-era server that came as text is
/// read item by item (`page`), and `on_page` then gets one item at a time. The listing
/// returned has no items, only what was rejected. A listing the session holds (fresh or
/// stale) is handed over whole as one page; one fetched here is not cached, so a later `list`
/// fetches it again.
pub fn list_pages(session: &Session, kind: Kind, on_page: &mut dyn FnMut(&Listing)) -> anyhow::Result<Listing> {
    let named = |e: anyhow::Error| e.context(format!("server {}", session.name));
    match cached(session, kind).map_err(named)? {
        Cached::Stale(None, _) => fetch_pages(session, kind, deadline(session), None, Some(on_page)).map_err(named),
        // A stale listing is what serves when listing again fails: the whole road of `list`.
        Cached::Fresh(_) | Cached::Stale(Some(_), _) => {
            let listing = list(session, kind)?;
            on_page(&listing);
            Ok(Listing { rejected: listing.rejected.clone(), ttl: listing.ttl, ..Listing::default() })
        }
    }
}

/// Fetches `kind` page by page; `first` is its first page's request when already sent.
fn fetch(session: &Session, kind: Kind, deadline: Instant, first: Option<super::Call>) -> anyhow::Result<Listing> {
    fetch_pages(session, kind, deadline, first, None)
}

/// `fetch`, handing each page to `on_page` (when given) once it is checked and its cursor
/// taken, and then dropping the page's items. A page of an initialize-era server that came as
/// text is read item by item (`page`) and each item handed on alone.
fn fetch_pages(
    session: &Session,
    kind: Kind,
    deadline: Instant,
    mut first: Option<super::Call>,
    mut on_page: Option<&mut dyn FnMut(&Listing)>,
) -> anyhow::Result<Listing> {
    let mut listing = Listing::default();
    // Items already handed to `on_page`.
    let mut handed = 0;
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    let invalid = |why| anyhow::Error::new(CallError::Invalid { method: kind.method(), why }).context(kind.method());
    for _ in 0..MAX_PAGES {
        let call = match first.take() {
            Some(call) => call,
            None => {
                let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
                session.start(kind.method(), params, page_timeout(session, deadline), None)
            }
        };
        let answer = match on_page {
            Some(_) => session.wait_answer(call),
            None => session.wait(call, |_| {}).map(Answer::Value),
        };
        let answer = match answer {
            Ok(answer) => answer,
            // A server that declares the capability but has no handler for this listing (the
            // Python SDK's low-level server without templates): the listing is empty.
            Err(CallError::Rpc(error)) if error.code == METHOD_NOT_FOUND && cursor.is_none() => {
                log::debug!("server {}: {} is not implemented; taken as empty", session.name, kind.method());
                return Ok(listing);
            }
            Err(err) => return Err(anyhow::Error::new(err).context(kind.method())),
        };
        let no_array = || anyhow::anyhow!("{}: the answer has no {} array", kind.method(), kind.key());
        let (next, full, whole) = match answer {
            Answer::Value(mut page) => {
                let Some(Value::Array(items)) = page.get_mut(kind.key()).map(Value::take) else {
                    return Err(no_array());
                };
                // Past the bound nothing is taken (nor noted as rejected), as on the road below.
                for item in items {
                    if handed + listing.items.len() >= MAX_ITEMS {
                        break;
                    }
                    take(session, kind, &mut listing, item);
                }
                let full = handed + listing.items.len() >= MAX_ITEMS;
                if !full && session.is_modern() {
                    let ttl = page.get("ttlMs").and_then(Value::as_i64).unwrap_or(0).max(0) as u64;
                    let ttl = Duration::from_millis(ttl.min(crate::config::MAX_TIMEOUT_MS));
                    listing.ttl = Some(listing.ttl.map_or(ttl, |t| t.min(ttl)));
                }
                (page.get_mut("nextCursor").map(Value::take), full, true)
            }
            Answer::Text { frame, span } => {
                let on_page = on_page.as_mut().expect("only a listing handed on page by page waits for text");
                let page = super::page::read(&frame[span], kind.key(), &mut |item| {
                    take(session, kind, &mut listing, item);
                    on_page(&listing);
                    handed += listing.items.len();
                    listing.items.clear();
                    listing.unusable.clear();
                    handed < MAX_ITEMS
                })
                .map_err(|unread| invalid(unread.why()))?;
                // What `Session::settle` would have refused (the session is not modern).
                if ResultKind::of(page.result_type.as_ref(), false) != ResultKind::Complete {
                    return Err(invalid(UNKNOWN_RESULT_TYPE));
                }
                if !page.listed {
                    return Err(no_array());
                }
                (page.next_cursor, handed >= MAX_ITEMS, false)
            }
        };
        if full {
            let note = format!("{}: stopped at {MAX_ITEMS} items; the rest are not listed", kind.method());
            log::warn!("server {}: {note}", session.name);
            listing.rejected.push(note);
        }
        let next = match next {
            _ if full => None,
            None | Some(Value::Null) => None,
            Some(Value::String(next)) => {
                if next.len() > MAX_CURSOR_BYTES {
                    bail!("{}: the server sent a cursor over {MAX_CURSOR_BYTES} bytes", kind.method());
                }
                if !seen.insert(next.clone()) {
                    bail!("{}: the server repeated a cursor; the listing would never end", kind.method());
                }
                Some(next)
            }
            Some(_) => bail!("{}: nextCursor is not a string", kind.method()),
        };
        if whole && let Some(on_page) = on_page.as_mut() {
            on_page(&listing);
            handed += listing.items.len();
            listing.items.clear();
            listing.unusable.clear();
        }
        match next {
            None => return Ok(listing),
            next => cursor = next,
        }
    }
    bail!("{}: more than {MAX_PAGES} pages; stopped", kind.method())
}

/// Checks one listed item: kept in `listing` (with why it cannot be used, if so), or
/// rejected with the reason.
fn take(session: &Session, kind: Kind, listing: &mut Listing, item: Value) {
    match check(kind, &item) {
        Ok(()) if kind == Kind::Tools && session.is_modern() && session.is_remote() => {
            // 2026-07-28 over HTTP: a tool whose x-mcp-header markings cannot be mirrored
            // into headers is left out (SEP-2243).
            match crate::mcp::headers::markings(&item) {
                Ok(_) => {
                    if let Some(why) = tool_problem(&item) {
                        let name = item["name"].as_str().unwrap_or("").to_string();
                        listing.unusable.push((name, why));
                    }
                    listing.items.push(item);
                }
                Err(why) => {
                    let name = crate::util::one_line(item["name"].as_str().unwrap_or(""));
                    log::warn!("server {}: tool {name} left out: {why}", session.name);
                    listing.rejected.push(format!("tool {name}: {why}"));
                }
            }
        }
        Ok(()) => {
            if kind == Kind::Tools
                && let Some(why) = tool_problem(&item)
            {
                let name = item["name"].as_str().unwrap_or("").to_string();
                listing.unusable.push((name, why));
            }
            listing.items.push(item);
        }
        Err(why) => listing.rejected.push(why.to_string()),
    }
}

/// Why a catalog item was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    Nameless(&'static str),
    NoSchema(String),
    NotAnObject(String),
    TooDeep(String),
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejected::Nameless(what) => f.write_str(what),
            Rejected::NoSchema(name) => write!(f, "tool {name:?} has no inputSchema"),
            Rejected::NotAnObject(name) => {
                write!(f, "tool {name:?} has an inputSchema that does not describe an object")
            }
            Rejected::TooDeep(name) => {
                write!(f, "tool {name:?} has an inputSchema nested deeper than {MAX_SCHEMA_DEPTH}")
            }
        }
    }
}

/// Checks the fields nod relies on; everything else is kept verbatim.
fn check(kind: Kind, item: &Value) -> Result<(), Rejected> {
    let text = |key: &str| item.member(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    match kind {
        Kind::Tools => {
            let name = text("name").ok_or(Rejected::Nameless("a tool without a name"))?;
            let schema = item.member("inputSchema").ok_or_else(|| Rejected::NoSchema(name.to_string()))?;
            if schema.member("type").and_then(Value::as_str) != Some("object") {
                return Err(Rejected::NotAnObject(name.to_string()));
            }
            if deeper_than(schema, MAX_SCHEMA_DEPTH) {
                return Err(Rejected::TooDeep(name.to_string()));
            }
            Ok(())
        }
        Kind::Resources => text("uri").map(drop).ok_or(Rejected::Nameless("a resource without a uri")),
        Kind::Templates => text("uriTemplate").map(drop).ok_or(Rejected::Nameless("a template without a uriTemplate")),
        Kind::Prompts => text("name").map(drop).ok_or(Rejected::Nameless("a prompt without a name")),
    }
}

/// A listed tool's schemas, checked against their dialect's meta-schema.
fn tool_problem(tool: &Value) -> Option<String> {
    let input = super::schema::problem("inputSchema", tool.member("inputSchema").unwrap_or(&Value::Null));
    input.or_else(|| tool.member("outputSchema").and_then(|schema| super::schema::problem("outputSchema", schema)))
}

/// Whether `value` nests more than `limit` objects and arrays deep (the value itself counted).
/// Scalars are passed over without a call, and the walk stops at the first path too deep.
fn deeper_than(value: &Value, limit: usize) -> bool {
    let nested = |child: &Value| matches!(child, Value::Object(_) | Value::Array(_)) && deeper_than(child, limit - 1);
    match value {
        Value::Object(map) => limit == 0 || map.values().any(nested),
        Value::Array(items) => limit == 0 || items.iter().any(nested),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tool schema `levels` objects deep: the schema, then a property inside a property.
    fn nested(levels: usize) -> Value {
        let mut schema = json!({"type": "string"});
        for _ in 1..levels {
            // Each level adds two: the object and its "properties" map.
            schema = json!({"type": "object", "properties": {"a": schema}});
        }
        schema
    }

    #[test]
    fn a_schema_as_deep_as_the_limit_is_kept_and_one_deeper_is_refused() {
        let tool = |schema: Value| json!({"name": "t", "inputSchema": {"type": "object", "properties": {"x": schema}}});
        // The tool's own schema and its properties map are two levels, the array schema one,
        // `nested(n)` 2n - 1: 64 in all, and 65 with the items in an array of their own.
        assert_eq!(MAX_SCHEMA_DEPTH, 64);
        let deepest = tool(json!({"type": "array", "items": nested(31)}));
        assert_eq!(check(Kind::Tools, &deepest), Ok(()));
        let too_deep = tool(json!({"type": "array", "items": [nested(31)]}));
        assert!(matches!(check(Kind::Tools, &too_deep), Err(Rejected::TooDeep(name)) if name == "t"));
        // Scalars and empty containers at the limit do not count past it.
        assert!(!deeper_than(&json!([[1, "a", null], {}]), 3));
        assert!(deeper_than(&json!([[1, "a", null], {}]), 1));
        assert!(!deeper_than(&json!(7), 0));
        assert!(deeper_than(&json!({}), 0));
    }
}
