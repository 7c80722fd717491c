//! `/mcp` with no arguments: numbered menus over the servers (agent-reference 6.6). A number
//! opens a row, `b` goes back, `q` (or Enter at the top) closes, `r` refreshes. Health rows
//! show no command, URL or secret. Tools show their schema and can be selected for the
//! model; resources, filled templates and prompts are previewed, and **Insert** attaches the
//! content, marked untrusted, to the next message: nothing is sent until you press Enter on
//! a message.

use serde_json::{Map, Value, json};

use super::{Attachment, Shell};
use crate::cmd::form::{Prompter, Reply};
use crate::config::project::Trust;
use crate::mcp::method;
use crate::session::Session;
use crate::session::catalog::{self, Kind};
use crate::session::runtime::State;
use crate::util::{one_line, terminal_safe};

/// Bytes of a resource or prompt shown in a preview.
const PREVIEW_BYTES: usize = 2048;

/// Where a menu leads.
enum Nav {
    Back,
    /// Leave the browser (q, or content was inserted).
    Close,
}

/// One row of the top menu.
enum Row {
    Server(String),
    /// A project server that is not approved (pending, changed or rejected).
    Project(String, Trust),
}

pub(super) fn open(shell: &mut Shell) {
    loop {
        let loaded = crate::config::load_native().unwrap_or_default();
        let healths = shell.agent.runtime().health();
        let mut rows: Vec<Row> = Vec::new();
        let mut lines: Vec<String> = Vec::new();
        for health in &healths {
            let source = match loaded.source(&health.name) {
                crate::config::merge::Source::Project => "project",
                _ => "profile",
            };
            let state = match shell.agent.runtime().state(&health.name) {
                Some(State::Unauthenticated) => "unauthenticated",
                _ => health.state.label(),
            };
            let mut line = format!("{}  {state}  {source}", health.name);
            if health.state == State::Ready {
                let counts = health.counts;
                let part =
                    |n: Option<usize>, what: &str| n.map(|n| format!("{n} {what}{}", if n == 1 { "" } else { "s" }));
                let parts: Vec<String> = [
                    part(counts.tools, "tool"),
                    part(counts.resources, "resource"),
                    part(counts.templates, "template"),
                    part(counts.prompts, "prompt"),
                ]
                .into_iter()
                .flatten()
                .collect();
                line.push_str(&format!("  {}", parts.join(" · ")));
            }
            rows.push(Row::Server(health.name.clone()));
            lines.push(line);
        }
        for entry in loaded.project.entries.iter().filter(|e| e.trust != Trust::Approved) {
            if loaded.server(&entry.name).is_some() {
                continue;
            }
            let state = if entry.trust == Trust::Rejected { "rejected" } else { "pending" };
            lines.push(format!("{}  {state}  project", entry.name));
            rows.push(Row::Project(entry.name.clone(), entry.trust));
        }
        let mut io = shell.asking();
        if rows.is_empty() {
            io.say("MCP servers (0)\n  no MCP servers configured · /mcp add NAME COMMAND\n");
            return;
        }
        io.say(&format!("MCP servers ({})\n", rows.len()));
        for (i, line) in lines.iter().enumerate() {
            io.say(&format!("  {}. {}\n", i + 1, terminal_safe(line)));
        }
        let choice = choose(&mut io, rows.len(), "number: open · r refresh · q close > ", true);
        drop(io);
        let nav = match choice {
            Choice::Refresh => continue,
            Choice::Back | Choice::Close => return,
            Choice::Item(i) => match &rows[i] {
                Row::Server(name) => server_menu(shell, name),
                Row::Project(name, trust) => project_menu(shell, name, *trust),
            },
        };
        if let Nav::Close = nav {
            return;
        }
    }
}

enum Choice {
    Item(usize),
    Refresh,
    Back,
    Close,
}

/// Reads a menu choice: a number from 1 to `n`, `r` refresh, `b` back, `q` close (also
/// Ctrl-C, Ctrl-D, and an empty line at the top). Asks again on anything else.
fn choose(io: &mut dyn Prompter, n: usize, prompt: &str, top: bool) -> Choice {
    loop {
        let answer = match io.line(prompt) {
            Reply::Line(answer) => answer.trim().to_ascii_lowercase(),
            Reply::End | Reply::Interrupted => return Choice::Close,
        };
        match answer.as_str() {
            "q" => return Choice::Close,
            "b" => return Choice::Back,
            "" if top => return Choice::Close,
            "r" => return Choice::Refresh,
            number => match number.parse::<usize>() {
                Ok(i) if (1..=n).contains(&i) => return Choice::Item(i - 1),
                _ => io.say(&format!("  a number from 1 to {n}, b or q\n")),
            },
        }
    }
}

/// What a list's choice means: the item, or where to go.
fn picked(choice: Choice) -> Result<usize, Nav> {
    match choice {
        Choice::Item(i) => Ok(i),
        Choice::Close => Err(Nav::Close),
        Choice::Back | Choice::Refresh => Err(Nav::Back),
    }
}

/// A key from `keys`; `q` (also Ctrl-C, Ctrl-D) closes the browser; None for b or Enter.
fn key(io: &mut dyn Prompter, keys: &[char], prompt: &str) -> Option<char> {
    loop {
        let answer = match io.line(prompt) {
            Reply::Line(answer) => answer.trim().to_ascii_lowercase(),
            Reply::End | Reply::Interrupted => return Some('q'),
        };
        let mut chars = answer.chars();
        match (chars.next(), chars.next()) {
            (Some('q'), None) => return Some('q'),
            (Some('b'), None) | (None, _) => return None,
            (Some(c), None) if keys.contains(&c) => return Some(c),
            _ => io.say("  ?\n"),
        }
    }
}

fn server_menu(shell: &mut Shell, name: &str) -> Nav {
    loop {
        let runtime = shell.agent.runtime().clone();
        let session = runtime.session(name).ok();
        let config = runtime.config(name).cloned();
        let remote = config.as_ref().is_some_and(|c| !matches!(c.transport, crate::config::Transport::Stdio(_)));
        let mut items: Vec<(&str, &str)> = Vec::new();
        if let Some(session) = &session {
            for (capability, label) in [
                ("tools", "Tools"),
                ("resources", "Resources"),
                ("resources", "Resource templates"),
                ("prompts", "Prompts"),
            ] {
                if session.has(capability) {
                    items.push((label, label));
                }
            }
        }
        if remote {
            items.push(("auth", "Authenticate"));
            let stored = crate::oauth::store::path()
                .map(|p| crate::oauth::store::state(&p, name) != crate::oauth::store::Stored::None)
                .unwrap_or(false);
            if stored {
                items.push(("logout", "Log out"));
            }
        }
        items.push(("reload", "Reload all"));
        let loaded = crate::config::load_native().unwrap_or_default();
        if loaded.source(name) != crate::config::merge::Source::Project {
            items.push(("remove", "Remove"));
        }
        let mut io = shell.asking();
        let state = runtime.state(name).map_or("unknown", |s| s.label());
        io.say(&format!("{name} ({state})\n"));
        for (i, (_, label)) in items.iter().enumerate() {
            io.say(&format!("  {}. {label}\n", i + 1));
        }
        let choice = choose(&mut io, items.len(), "number · b back · q close > ", false);
        drop(io);
        let i = match choice {
            Choice::Item(i) => i,
            Choice::Refresh => continue,
            Choice::Back => return Nav::Back,
            Choice::Close => return Nav::Close,
        };
        let nav = match (items[i].0, &session) {
            ("Tools", Some(session)) => tools(shell, name, session),
            ("Resources", Some(session)) => resources(shell, name, session),
            ("Resource templates", Some(session)) => templates(shell, name, session),
            ("Prompts", Some(session)) => prompts(shell, name, session),
            ("auth", _) => {
                shell.mcp(&format!("auth {name} --open"));
                Nav::Back
            }
            ("logout", _) => {
                shell.mcp(&format!("logout {name}"));
                Nav::Back
            }
            ("reload", _) => {
                shell.reload();
                return Nav::Back;
            }
            ("remove", _) => {
                let mut io = shell.asking();
                let sure = matches!(io.line(&format!("remove {name}? [y/N] ")), Reply::Line(a) if matches!(a.trim(), "y" | "Y" | "yes"));
                drop(io);
                if sure {
                    shell.mcp(&format!("remove {name}"));
                    return Nav::Back;
                }
                Nav::Back
            }
            _ => Nav::Back,
        };
        if let Nav::Close = nav {
            return Nav::Close;
        }
    }
}

fn project_menu(shell: &mut Shell, name: &str, trust: Trust) -> Nav {
    let loaded = crate::config::load_native().unwrap_or_default();
    let mut io = shell.asking();
    if let Some(entry) = loaded.project.entries.iter().find(|e| e.name == name) {
        io.say(&crate::cmd::trust::describe(entry, &loaded.project.workspace));
    }
    let state = if trust == Trust::Rejected { "rejected" } else { "pending" };
    io.say(&format!("{name} is {state}\n  1. Approve\n  2. Reject\n"));
    let choice = choose(&mut io, 2, "number · b back · q close > ", false);
    drop(io);
    match choice {
        Choice::Item(0) => shell.mcp(&format!("trust approve {name}")),
        Choice::Item(_) => shell.mcp(&format!("trust reject {name}")),
        Choice::Close => return Nav::Close,
        Choice::Back | Choice::Refresh => {}
    }
    Nav::Back
}

/// The items of a catalog, or a line saying why not.
fn listing(shell: &mut Shell, session: &Session, kind: Kind) -> Option<std::sync::Arc<catalog::Listing>> {
    match catalog::list(session, kind) {
        Ok(listing) => Some(listing),
        Err(err) => {
            let message = shell.ctx.redactor.redact(&format!("{err:#}"));
            shell.asking().say(&format!("  ✗ {}\n", terminal_safe(&one_line(&message))));
            None
        }
    }
}

fn text<'v>(item: &'v Value, key: &str) -> &'v str {
    item.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A server string on one line, at most `max` characters.
fn short(text: &str, max: usize) -> String {
    let line = one_line(text);
    let mut out: String = line.chars().take(max).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    terminal_safe(&out).into_owned()
}

fn tools(shell: &mut Shell, server: &str, session: &Session) -> Nav {
    let Some(listing) = listing(shell, session, Kind::Tools) else { return Nav::Back };
    loop {
        let rows: Vec<(String, &Value)> =
            listing.items.iter().map(|tool| (shell.agent.alias(server, text(tool, "name")), tool)).collect();
        let mut io = shell.asking();
        io.say(&format!("{server}: tools ({})\n", rows.len()));
        for (i, (alias, tool)) in rows.iter().enumerate() {
            let about = if text(tool, "title").is_empty() { text(tool, "description") } else { text(tool, "title") };
            io.say(&format!("  {}. {alias} — {}\n", i + 1, short(about, 80)));
        }
        let choice = choose(&mut io, rows.len(), "number · b back · q close > ", false);
        drop(io);
        let i = match picked(choice) {
            Ok(i) => i,
            Err(nav) => return nav,
        };
        let (alias, tool) = (rows[i].0.clone(), rows[i].1.clone());
        let mut io = shell.asking();
        io.say(&format!("{} ({alias})\n", short(text(&tool, "name"), 200)));
        let description = text(&tool, "description");
        let bounded = crate::agent::text::cut(description, 1024);
        io.say(&format!("{}\n", terminal_safe(bounded)));
        if let Some(why) = listing.unusable(text(&tool, "name")) {
            io.say(&format!("  [unusable: {}]\n", terminal_safe(why)));
        }
        let schema = serde_json::to_string_pretty(tool.get("inputSchema").unwrap_or(&json!({}))).unwrap_or_default();
        io.say(&format!("{}\n", bounded_text(&schema, PREVIEW_BYTES)));
        let pressed = key(&mut io, &['s'], "[s] select for the model · b back > ");
        drop(io);
        if pressed == Some('q') {
            return Nav::Close;
        }
        if pressed == Some('s') {
            let selected = shell.agent.select(&alias);
            let mut io = shell.asking();
            if selected {
                io.say(&format!("selected {alias}: the model can call it from the next message\n"));
            } else {
                io.say(&format!("  {alias} cannot be offered to the model (its schema or task support)\n"));
            }
        }
    }
}

fn resources(shell: &mut Shell, server: &str, session: &Session) -> Nav {
    let Some(listing) = listing(shell, session, Kind::Resources) else { return Nav::Back };
    loop {
        let mut io = shell.asking();
        io.say(&format!("{server}: resources ({})\n", listing.items.len()));
        for (i, resource) in listing.items.iter().enumerate() {
            io.say(&format!(
                "  {}. {}  {}  {}\n",
                i + 1,
                short(text(resource, "name"), 60),
                short(text(resource, "uri"), 120),
                short(text(resource, "mimeType"), 40)
            ));
        }
        let choice = choose(&mut io, listing.items.len(), "number · b back · q close > ", false);
        drop(io);
        let i = match picked(choice) {
            Ok(i) => i,
            Err(nav) => return nav,
        };
        let uri = text(&listing.items[i], "uri").to_string();
        if let Nav::Close = read_and_offer(shell, server, session, &uri) {
            return Nav::Close;
        }
    }
}

/// Reads a resource, previews it, and offers Insert.
fn read_and_offer(shell: &mut Shell, server: &str, session: &Session, uri: &str) -> Nav {
    let read = session.request(method::RESOURCES_READ, Some(json!({ "uri": uri })));
    let result = match read {
        Ok(result) => result,
        Err(err) => {
            let message = shell.ctx.redactor.redact(&err.to_string());
            shell.asking().say(&format!("  ✗ {}\n", terminal_safe(&one_line(&message))));
            return Nav::Back;
        }
    };
    let contents = result.get("contents").and_then(Value::as_array).cloned().unwrap_or_default();
    let parts: Vec<String> = contents
        .iter()
        .map(|c| match c.get("text").and_then(Value::as_str) {
            Some(body) => body.to_string(),
            None => format!("<binary, {} bytes, {}>", text(c, "blob").len() / 4 * 3, one_line(text(c, "mimeType"))),
        })
        .collect();
    let body = parts.join("\n");
    offer(shell, server, ("resource", uri), &body)
}

/// Shows a preview of `body` and, on `i`, attaches it to the next message.
fn offer(shell: &mut Shell, server: &str, (kind, what): (&str, &str), body: &str) -> Nav {
    let mut io = shell.asking();
    io.say(&format!("{}\n", bounded_text(body, PREVIEW_BYTES)));
    let pressed = key(&mut io, &['i'], "[i] Insert into the next message · b back > ");
    drop(io);
    match pressed {
        Some('i') => {}
        Some('q') => return Nav::Close,
        _ => return Nav::Back,
    }
    let limits = shell.agent.limits;
    let text = shell.agent.marker().marked(
        crate::agent::text::Source::Mcp,
        &[("server", server), (kind, what)],
        body,
        limits.tool_result,
        "mcp_read_resource",
    );
    let label = format!("{server} {kind} {} ({})", one_line(what), size(text.len()));
    println!("[attached: {}]", terminal_safe(&label));
    println!("It goes with your next message; nothing is sent until you press Enter on one.");
    shell.attachments.push(Attachment { label, text });
    Nav::Close
}

fn templates(shell: &mut Shell, server: &str, session: &Session) -> Nav {
    let Some(listing) = listing(shell, session, Kind::Templates) else { return Nav::Back };
    loop {
        let mut io = shell.asking();
        io.say(&format!("{server}: resource templates ({})\n", listing.items.len()));
        for (i, template) in listing.items.iter().enumerate() {
            io.say(&format!(
                "  {}. {}  {}\n",
                i + 1,
                short(text(template, "uriTemplate"), 120),
                short(text(template, "name"), 60)
            ));
        }
        let choice = choose(&mut io, listing.items.len(), "number · b back · q close > ", false);
        drop(io);
        let i = match picked(choice) {
            Ok(i) => i,
            Err(nav) => return nav,
        };
        let template = text(&listing.items[i], "uriTemplate").to_string();
        let mut io = shell.asking();
        io.say(&format!("{}\n", short(&template, 400)));
        let pressed = key(&mut io, &['f'], "[f] fill · b back > ");
        drop(io);
        match pressed {
            Some('f') => {}
            Some('q') => return Nav::Close,
            _ => continue,
        }
        let Some(values) = fill(shell, session, &template) else { continue };
        let uri = expand(&template, &values);
        if let Nav::Close = read_and_offer(shell, server, session, &uri) {
            return Nav::Close;
        }
    }
}

/// Asks each variable of a template; `?` lists the server's completions for what is typed
/// after it (`?ab`).
fn fill(shell: &mut Shell, session: &Session, template: &str) -> Option<Map<String, Value>> {
    let completions = session.has("completions");
    let mut values = Map::new();
    for name in variables(template) {
        loop {
            let mut io = shell.asking();
            let hint = if completions { " (?text lists completions)" } else { "" };
            let answer = match io.line(&format!("  {name}{hint}: ")) {
                Reply::Line(answer) => answer,
                Reply::End | Reply::Interrupted => return None,
            };
            if completions && let Some(partial) = answer.strip_prefix('?') {
                let params = json!({ "ref": { "type": "ref/resource", "uri": template },
                    "argument": { "name": name, "value": partial }, "context": { "arguments": values } });
                match session.request(method::COMPLETE, Some(params)) {
                    Ok(result) => {
                        let found = result.pointer("/completion/values").and_then(Value::as_array).cloned();
                        let found: Vec<String> =
                            found.unwrap_or_default().iter().filter_map(Value::as_str).map(|v| short(v, 80)).collect();
                        io.say(&format!("    {}\n", if found.is_empty() { "(none)".into() } else { found.join("  ") }));
                    }
                    Err(err) => io.say(&format!("    ✗ {}\n", terminal_safe(&one_line(&err.to_string())))),
                }
                continue;
            }
            values.insert(name.clone(), Value::String(answer));
            break;
        }
    }
    Some(values)
}

fn prompts(shell: &mut Shell, server: &str, session: &Session) -> Nav {
    let Some(listing) = listing(shell, session, Kind::Prompts) else { return Nav::Back };
    loop {
        let mut io = shell.asking();
        io.say(&format!("{server}: prompts ({})\n", listing.items.len()));
        for (i, prompt) in listing.items.iter().enumerate() {
            let arguments: Vec<String> = prompt
                .get("arguments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|a| {
                    let star = if a.get("required").and_then(Value::as_bool) == Some(true) { "*" } else { "" };
                    format!("{}{star}", short(text(a, "name"), 40))
                })
                .collect();
            io.say(&format!(
                "  {}. {} — {}{}\n",
                i + 1,
                short(text(prompt, "name"), 60),
                short(text(prompt, "description"), 80),
                if arguments.is_empty() { String::new() } else { format!(" (args: {})", arguments.join(", ")) }
            ));
        }
        let choice = choose(&mut io, listing.items.len(), "number · b back · q close > ", false);
        drop(io);
        let i = match picked(choice) {
            Ok(i) => i,
            Err(nav) => return nav,
        };
        let prompt = listing.items[i].clone();
        let name = text(&prompt, "name").to_string();
        let mut io = shell.asking();
        let pressed = key(&mut io, &['g'], &format!("{} · [g] get · b back > ", short(&name, 60)));
        match pressed {
            Some('g') => {}
            Some('q') => return Nav::Close,
            _ => continue,
        }
        let mut arguments = Map::new();
        let mut ended = false;
        for argument in prompt.get("arguments").and_then(Value::as_array).into_iter().flatten() {
            let required = argument.get("required").and_then(Value::as_bool) == Some(true);
            let label = format!(
                "  {} ({}): ",
                short(text(argument, "name"), 60),
                if required { "required" } else { "optional" }
            );
            match io.line(&label) {
                Reply::Line(value) if !value.is_empty() || required => {
                    arguments.insert(text(argument, "name").to_string(), Value::String(value));
                }
                Reply::Line(_) => {}
                Reply::End | Reply::Interrupted => {
                    ended = true;
                    break;
                }
            }
        }
        drop(io);
        if ended {
            continue;
        }
        let got = session.request(method::PROMPTS_GET, Some(json!({ "name": name, "arguments": arguments })));
        let result = match got {
            Ok(result) => result,
            Err(err) => {
                let message = shell.ctx.redactor.redact(&err.to_string());
                shell.asking().say(&format!("  ✗ {}\n", terminal_safe(&one_line(&message))));
                continue;
            }
        };
        let messages: Vec<String> = result
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| {
                let content = m.get("content").unwrap_or(&Value::Null);
                let body = match content.get("text").and_then(Value::as_str) {
                    Some(body) => body.to_string(),
                    None => format!("<{} content>", one_line(text(content, "type"))),
                };
                format!("{}: {body}", one_line(text(m, "role")))
            })
            .collect();
        if let Nav::Close = offer(shell, server, ("prompt", &name), &messages.join("\n\n")) {
            return Nav::Close;
        }
    }
}

/// Text for the terminal, cut at `max` bytes with the rest counted.
fn bounded_text(text: &str, max: usize) -> String {
    let cut = crate::agent::text::cut(text, max);
    let mut out = terminal_safe(cut).into_owned();
    if cut.len() < text.len() {
        out.push_str(&format!("\n… ({} more bytes)", text.len() - cut.len()));
    }
    out
}

fn size(bytes: usize) -> String {
    if bytes < 1024 { format!("{bytes} B") } else { format!("{:.1} KiB", bytes as f64 / 1024.0) }
}

/// The variable names of a URI template (RFC 6570), in order, each once.
fn variables(template: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for expression in expressions(template) {
        for name in expression.1.split(',') {
            let name = name.trim_end_matches('*').split(':').next().unwrap_or("").to_string();
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The `{...}` expressions of a template: (operator, variable list).
fn expressions(template: &str) -> Vec<(Option<char>, &str)> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else { break };
        let inner = &rest[start + 1..start + end];
        let operator = inner.chars().next().filter(|c| "+#./;?&".contains(*c));
        out.push((operator, if operator.is_some() { &inner[1..] } else { inner }));
        rest = &rest[start + end + 1..];
    }
    out
}

/// Expands a URI template (RFC 6570 levels 1 to 3) with string values.
fn expand(template: &str, values: &Map<String, Value>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &rest[start + 1..start + end];
        let operator = inner.chars().next().filter(|c| "+#./;?&".contains(*c));
        let list = if operator.is_some() { &inner[1..] } else { inner };
        let (first, separator, named, reserved) = match operator {
            None => ("", ",", false, false),
            Some('+') => ("", ",", false, true),
            Some('#') => ("#", ",", false, true),
            Some('.') => (".", ".", false, false),
            Some('/') => ("/", "/", false, false),
            Some(';') => (";", ";", true, false),
            Some('?') => ("?", "&", true, false),
            _ => ("&", "&", true, false),
        };
        let parts: Vec<String> = list
            .split(',')
            .filter_map(|name| {
                let name = name.trim_end_matches('*').split(':').next().unwrap_or("");
                let value = values.get(name)?.as_str()?;
                let encoded = encode(value, reserved);
                Some(if named { format!("{name}={encoded}") } else { encoded })
            })
            .collect();
        if !parts.is_empty() {
            out.push_str(first);
            out.push_str(&parts.join(separator));
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

/// Percent-encoding of RFC 6570: unreserved characters stay; with `reserved`, reserved
/// characters stay too.
fn encode(value: &str, reserved: bool) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        let keep = byte.is_ascii_alphanumeric()
            || b"-._~".contains(&byte)
            || (reserved && b":/?#[]@!$&'()*+,;=".contains(&byte));
        if keep {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_their_variables_and_expand() {
        let template = "demo://resource/dynamic/text/{id}{?lang,size}";
        assert_eq!(variables(template), ["id", "lang", "size"]);
        let mut values = Map::new();
        values.insert("id".into(), json!("a b"));
        values.insert("lang".into(), json!("en"));
        assert_eq!(expand(template, &values), "demo://resource/dynamic/text/a%20b?lang=en");
        assert_eq!(
            expand("file:///{+path}", &{
                let mut v = Map::new();
                v.insert("path".into(), json!("a/b c"));
                v
            }),
            "file:///a/b%20c"
        );
        assert_eq!(expand("x{/seg}", &Map::new()), "x");
    }
}
