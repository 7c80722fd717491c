//! The bench's MCP server (`overhead --server [--tools N] [--page-size P]`): a loop that reads
//! newline-delimited JSON-RPC from stdin with serde_json and answers on stdout, as fast as a
//! stdio server can be, so the clients' own costs are what the bench sees. It answers
//! `initialize` (the requested version when it knows it, else 2025-11-25; capabilities
//! `{tools: {}}`), `ping`, `tools/list` (N tools, default 10: `echo`, `big` and fillers `t0`...;
//! pages of P when asked, the cursor being the decimal offset of the next page) and `tools/call`
//! for `echo` (`{"message": ...}` back as text) and `big` (`{"bytes": N}`: N bytes of 'x' as
//! text). Notifications are ignored. `--rich` gives the fillers varied names, descriptions and
//! properties (`search_issue_7`: "Search an issue in the billing service...") so a search has
//! something to rank.

use std::io::{BufRead, BufReader, BufWriter, Write};

use serde_json::{Value, json};

const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub fn run(args: &[String]) {
    let mut n_tools = 10;
    let mut page_size = None;
    let mut rich = false;
    let mut flags = args.iter();
    while let Some(flag) = flags.next() {
        let mut number = || flags.next().and_then(|n| n.parse::<usize>().ok()).expect("a number after the flag");
        match flag.as_str() {
            "--tools" => n_tools = number(),
            "--page-size" => page_size = Some(number().max(1)),
            "--rich" => rich = true,
            other => panic!("unknown server flag {other}"),
        }
    }
    let tools = tools(n_tools, rich);
    let mut input = BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let mut output = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
        let Some(id) = msg.get("id") else { continue };
        let params = msg.get("params").unwrap_or(&Value::Null);
        let answer = match msg["method"].as_str().unwrap_or("") {
            "initialize" => Ok(initialize(params)),
            "ping" => Ok(json!({})),
            "tools/list" => list(&tools, page_size, params),
            "tools/call" if params["name"] == "big" => {
                let bytes = params["arguments"]["bytes"].as_u64().unwrap_or(0) as usize;
                if write_big(&mut output, id, bytes).is_err() {
                    return;
                }
                continue;
            }
            "tools/call" => call(params),
            "resources/list" => {
                Ok(json!({ "resources": [{ "uri": "bench://note", "name": "note", "mimeType": "text/plain" }] }))
            }
            "resources/read" if params["uri"] == "bench://note" => Ok(
                json!({ "contents": [{ "uri": "bench://note", "mimeType": "text/plain", "text": "a note for the soak" }] }),
            ),
            _ => Err((-32601, "method not found")),
        };
        let reply = match answer {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err((code, message)) => {
                json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
            }
        };
        let written = serde_json::to_writer(&mut output, &reply).map_err(std::io::Error::from);
        if written.and_then(|()| output.write_all(b"\n")).and_then(|()| output.flush()).is_err() {
            return;
        }
    }
}

fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or("");
    let version = VERSIONS.iter().find(|known| **known == asked).unwrap_or(&VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": {}, "resources": {} },
        "serverInfo": { "name": "nod-bench-echo", "version": "0" },
    })
}

fn tools(n_tools: usize, rich: bool) -> Vec<Value> {
    let echo = json!({
        "name": "echo",
        "description": "Returns its message",
        "inputSchema": { "type": "object", "properties": { "message": { "type": "string" } } },
    });
    let big = json!({
        "name": "big",
        "description": "Returns a text block of the given size",
        "inputSchema": { "type": "object", "properties": { "bytes": { "type": "integer" } } },
    });
    let fillers = (0..).map(move |i| {
        if rich {
            rich_tool(i)
        } else {
            json!({ "name": format!("t{i}"), "description": "Does nothing", "inputSchema": { "type": "object" } })
        }
    });
    [echo, big].into_iter().chain(fillers).take(n_tools).collect()
}

const VERBS: [&str; 12] =
    ["read", "write", "list", "search", "create", "delete", "update", "get", "send", "fetch", "archive", "sync"];
const NOUNS: [&str; 16] = [
    "file", "issue", "page", "message", "user", "record", "branch", "event", "invoice", "ticket", "channel",
    "document", "commit", "order", "report", "calendar",
];
const PLACES: [&str; 8] = ["billing", "support", "storage", "chat", "wiki", "build", "sales", "mail"];
const FIELDS: [&str; 8] = ["title", "owner", "status", "labels", "created date", "size", "summary", "link"];

/// A filler that reads like a real tool: `{verb}_{noun}_{i}` with a sentence or two and a few
/// properties, all picked from `i`.
fn rich_tool(i: usize) -> Value {
    let pick = |list: &[&'static str], salt: usize| list[(i / salt + i * salt) % list.len()];
    let (verb, noun, place) = (pick(&VERBS, 1), pick(&NOUNS, 3), pick(&PLACES, 7));
    let description = format!(
        "{}{} a {noun} in the {place} service. Returns the {noun} with its {} and {}; \
         fails when the {noun} does not exist or access is denied.",
        verb[..1].to_ascii_uppercase(),
        &verb[1..],
        pick(&FIELDS, 5),
        pick(&FIELDS, 11),
    );
    json!({
        "name": format!("{verb}_{noun}_{i}"),
        "description": description,
        "inputSchema": { "type": "object", "properties": {
            format!("{noun}_id"): { "type": "string", "description": format!("The {noun}'s identifier") },
            "query": { "type": "string" },
            "limit": { "type": "integer", "minimum": 1 },
        }, "required": [format!("{noun}_id")] },
    })
}

fn list(tools: &[Value], page_size: Option<usize>, params: &Value) -> Result<Value, (i64, &'static str)> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(|c| c.parse::<usize>().ok())
            .filter(|offset| *offset <= tools.len())
            .ok_or((-32602, "invalid cursor"))?,
    };
    let end = page_size.map_or(tools.len(), |size| (start + size).min(tools.len()));
    let mut result = json!({ "tools": &tools[start..end] });
    if end < tools.len() {
        result["nextCursor"] = json!(end.to_string());
    }
    Ok(result)
}

fn call(params: &Value) -> Result<Value, (i64, &'static str)> {
    if params["name"] != "echo" {
        return Err((-32602, "unknown tool"));
    }
    let message = match &params["arguments"]["message"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    Ok(json!({ "content": [{ "type": "text", "text": message }] }))
}

/// Streams the `big` answer in pieces, so the server stays small however large the text is
/// and the clients' peak memory is what the RSS figures show.
fn write_big(output: &mut impl Write, id: &Value, bytes: usize) -> std::io::Result<()> {
    let piece = [b'x'; 1 << 16];
    write!(output, "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"")?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(piece.len());
        output.write_all(&piece[..n])?;
        left -= n;
    }
    output.write_all(b"\"}]}}\n")?;
    output.flush()
}
