//! `nod mcp list`: the configuration view, and with `--connect` a live health snapshot of
//! every enabled server, connected in parallel. On a terminal each server's lines appear as
//! it becomes ready, with the servers still awaited and the time so far on stderr; piped or
//! with `--json`, one document at the end. Neither view shows commands, environment values,
//! headers or URLs.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Context, Exit, print, print_json};
use crate::config::merge::Source;
use crate::config::project::{Entry, Trust};
use crate::config::{ConfigIssue, Loaded, ServerConfig, Severity, Transport};
use crate::session::Access;
use crate::session::fleet::{Fleet, Health};
use crate::session::runtime::State;
use crate::util::{one_line, redact_urls};

pub fn run(connect: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let json = ctx.options.json;
    let loaded = super::one::load_quietly(ctx)?;
    if !connect {
        return configuration(&loaded, json);
    }
    super::one::note_skipped(&loaded);
    let handler = super::one::with_roots(super::one::no_input(), ctx)?;
    let engine = super::one::start_engine(ctx);
    let access = Access {
        browser: super::browser::from_environment(),
        fresh: false,
        redactor: ctx.redactor.clone(),
        revisions: crate::session::revisions::default_path(),
        private_env: crate::config::private_env(&loaded),
    };
    let progressive = !json && super::stdout_is_terminal();
    let enabled: Vec<&str> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
    if progressive {
        print(&format!("MCP health ({}):\n", count(loaded.servers.len())))?;
    }
    let (tx, rx) = crossbeam_channel::unbounded::<Health>();
    let (fleet, healths) = std::thread::scope(|scope| {
        let printer = progressive.then(|| scope.spawn(|| show_as_ready(&rx, &enabled, ctx)));
        let each = move |health: &Health| {
            let _ = tx.send(health.clone());
        };
        let done = Fleet::connect_and_check_each(&engine, &loaded.servers, handler.clone(), &access, &each);
        drop(each);
        if let Some(printer) = printer {
            let _ = printer.join();
        }
        done
    });
    // The engine closes every connection in parallel; dropping the fleet first would close
    // them one after another.
    engine.shutdown();
    fleet.leave_listings_to_exit();
    drop(fleet);
    super::names::remember_all(
        healths.iter().map(|h| (h.name.clone(), Some(h.tool_names.clone()), Some(h.prompt_names.clone()))).collect(),
    );
    show_health(&healths, &loaded, progressive, ctx)
}

/// Prints a health snapshot (the shell's `/mcp list` shows its live servers this way): the
/// servers, unless `shown` already, then the configuration issues; or one JSON document.
pub(super) fn show_health(healths: &[Health], loaded: &Loaded, shown: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let failed = healths.iter().any(|h| matches!(h.state, State::Failed(_)));
    let has_errors = loaded.issues.iter().any(|i| i.severity == Severity::Error);
    if ctx.options.json {
        let servers: Vec<Value> = healths.iter().map(|h| health_json(h, ctx)).collect();
        print_json(&json!({
            "path": loaded.path,
            "servers": servers,
            "project": project_json(loaded),
            "issues": issues_json(&loaded.issues),
        }))?;
    } else {
        let mut out = String::new();
        if !shown {
            out = format!("MCP health ({}):\n", count(healths.len()));
            let width = healths.iter().map(|h| h.name.len()).max().unwrap_or(0);
            for health in healths {
                out.push_str(&health_text(health, width, ctx));
            }
        }
        out.push_str(&issues_text(&loaded.issues));
        print(&out)?;
    }
    Ok(if failed || has_errors { Exit::Failure } else { Exit::Ok })
}

/// Prints each server's lines as its health arrives; on a terminal's stderr, the servers
/// still awaited and the time so far, redrawn in place.
fn show_as_ready(rx: &crossbeam_channel::Receiver<Health>, names: &[&str], ctx: &Context) {
    let status = std::io::stderr().is_terminal();
    let started = Instant::now();
    let width = names.iter().map(|n| n.len()).max().unwrap_or(0);
    let mut waiting: Vec<&str> = names.to_vec();
    let draw = |waiting: &[&str]| {
        if status && !waiting.is_empty() {
            let mut shown = waiting.iter().take(4).copied().collect::<Vec<_>>().join(", ");
            if waiting.len() > 4 {
                shown.push_str(", ...");
            }
            eprint!("\r\x1b[Knod: waiting for {shown} ({})", crate::util::seconds(round(started.elapsed())));
        }
    };
    let clear = || {
        if status {
            eprint!("\r\x1b[K");
        }
    };
    draw(&waiting);
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(health) => {
                clear();
                waiting.retain(|n| *n != health.name);
                if print(&health_text(&health, width, ctx)).is_err() {
                    return;
                }
                draw(&waiting);
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => draw(&waiting),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
    }
    clear();
}

/// A duration to a tenth of a second, for a line redrawn often.
fn round(elapsed: Duration) -> Duration {
    Duration::from_millis(elapsed.as_millis() as u64 / 100 * 100)
}

fn configuration(loaded: &Loaded, json: bool) -> anyhow::Result<Exit> {
    let profile: Vec<&ServerConfig> =
        loaded.servers.iter().filter(|s| loaded.source(&s.name) == Source::Profile).collect();
    if json {
        let servers: Vec<Value> = profile
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "source": "profile",
                    "transport": s.transport.kind(),
                    "enabled": s.enabled,
                    "required": s.required,
                    "auth": auth_state(s),
                    "connection": "not_checked",
                })
            })
            .collect();
        print_json(&json!({
            "path": loaded.path,
            "servers": servers,
            "project": project_json(loaded),
            "issues": issues_json(&loaded.issues),
        }))?;
    } else {
        let mut out = format!("MCP configuration ({}) in {}:\n", count(profile.len()), loaded.path.display());
        let width = profile
            .iter()
            .map(|s| s.name.len())
            .chain(loaded.project.entries.iter().map(|e| e.name.len()))
            .max()
            .unwrap_or(0);
        for s in &profile {
            out.push_str(&format!(
                "  {:width$}  source=profile transport={} state={} policy={} auth={} connection=not_checked\n",
                s.name,
                s.transport.kind(),
                if s.enabled { "configured" } else { "disabled" },
                if s.required { "required" } else { "optional" },
                auth_state(s),
            ));
        }
        let project = &loaded.project;
        if let Some(file) = &project.file {
            out.push_str(&format!("Project servers ({}) in {}:\n", count(project.entries.len()), file.display()));
            for entry in &project.entries {
                out.push_str(&format!(
                    "  {:width$}  source=project transport={} trust={} policy=optional connection=not_checked\n",
                    entry.name,
                    entry.kind,
                    entry.trust.as_str()
                ));
                if let Some(why) = trust_note(loaded, entry) {
                    out.push_str(&format!("    {why}\n"));
                }
            }
        }
        out.push_str(&issues_text(&loaded.issues));
        print(&out)?;
    }
    Ok(if loaded.issues.iter().any(|i| i.severity == Severity::Error) { Exit::Failure } else { Exit::Ok })
}

/// How a server authenticates, from configuration and the credentials file alone (nobody is
/// contacted): none for stdio; for configured credentials without OAuth, env (bearer_token_env
/// or header_env) or headers (static ones alone); for OAuth, stored or malformed credentials
/// on file, or oauth when none are stored yet.
fn auth_state(server: &ServerConfig) -> &'static str {
    let (Transport::Http(remote) | Transport::Sse(remote)) = &server.transport else { return "none" };
    if !crate::session::uses_oauth(&server.name, remote, false) {
        return if remote.bearer_token_env.is_some() || !remote.header_env.is_empty() { "env" } else { "headers" };
    }
    match crate::oauth::store::path().map(|path| crate::oauth::store::state(&path, &server.name)) {
        Ok(crate::oauth::store::Stored::Valid) => "stored",
        Ok(crate::oauth::store::Stored::Malformed) => "malformed",
        _ => "oauth",
    }
}

/// What the user should know about a project entry's trust, with the command that changes it.
fn trust_note(loaded: &Loaded, entry: &Entry) -> Option<String> {
    let name = &entry.name;
    if entry.trust == Trust::Approved {
        return match loaded.server(name).map(|_| loaded.source(name)) {
            Some(Source::Profile) => Some("shadowed: the profile has a server with the same name, which wins".into()),
            Some(_) => None,
            None => Some("approved, but not usable: see the configuration issue about it".into()),
        };
    }
    match entry.trust {
        Trust::Approved => None,
        Trust::Pending => Some(format!("not started until approved: nod mcp trust approve {name}")),
        Trust::Rejected => Some(format!("rejected; nod mcp trust approve {name} allows it")),
        Trust::Changed => Some(format!(
            "changed since it was approved or rejected (its command, arguments, working directory, environment names or values, URL or headers); review it, then nod mcp trust approve {name}"
        )),
    }
}

/// The project file and its entries' trust, for JSON output. Never commands or URLs.
pub(super) fn project_json(loaded: &Loaded) -> Value {
    let project = &loaded.project;
    let entries: Vec<Value> = project
        .entries
        .iter()
        .map(|e| json!({ "name": e.name, "transport": e.kind, "trust": e.trust.as_str(), "note": trust_note(loaded, e) }))
        .collect();
    json!({ "workspace": project.workspace, "file": project.file, "servers": entries })
}

fn count(n: usize) -> String {
    if n == 1 { "1 server".into() } else { format!("{n} servers") }
}

/// A health error as shown: one line, every secret and every URL redacted (health output
/// shows no URL, whatever the error quotes).
fn shown_error(health: &Health, ctx: &Context) -> Option<String> {
    health.error().map(|e| redact_urls(&ctx.redactor.redact(&one_line(e))))
}

/// Server-chosen names pass the same redactor as errors: a server may echo a secret.
fn shown_info(text: &Option<String>, ctx: &Context) -> Option<String> {
    text.as_ref().map(|t| redact_urls(&ctx.redactor.redact(t)))
}

fn health_json(health: &Health, ctx: &Context) -> Value {
    let counts = health.counts;
    json!({
        "name": health.name,
        "transport": health.transport,
        "state": health.state.label(),
        "protocol_version": health.version,
        "server_name": shown_info(&health.server_name, ctx),
        "server_version": shown_info(&health.server_version, ctx),
        "tools": counts.tools,
        "resources": counts.resources,
        "templates": counts.templates,
        "prompts": counts.prompts,
        "rejected": health.rejected,
        "error": shown_error(health, ctx),
        "elapsed_ms": health.elapsed.as_millis(),
    })
}

/// A server's health lines, its name padded to `width` so the columns line up.
fn health_text(health: &Health, width: usize, ctx: &Context) -> String {
    let mut out = format!("  {:width$}  transport={} state={}", health.name, health.transport, health.state.label());
    if let Some(version) = &health.version {
        out.push_str(&format!(" protocol={version}"));
    }
    if let Some(name) = shown_info(&health.server_name, ctx) {
        out.push_str(&format!(" server={}", crate::util::terminal_safe(&name)));
        if let Some(v) = shown_info(&health.server_version, ctx).filter(|v| !v.is_empty()) {
            out.push_str(&format!("@{}", crate::util::terminal_safe(&v)));
        }
    }
    out.push('\n');
    if health.state == State::Ready {
        let shown = |n: Option<usize>| n.map_or("-".to_string(), |n| n.to_string());
        let counts = health.counts;
        out.push_str(&format!(
            "    tools={} resources={} templates={} prompts={}",
            shown(counts.tools),
            shown(counts.resources),
            shown(counts.templates),
            shown(counts.prompts)
        ));
        if health.rejected > 0 {
            out.push_str(&format!(" rejected={}", health.rejected));
        }
        out.push_str(&format!(" ({} ms)\n", health.elapsed.as_millis()));
    }
    if let Some(error) = shown_error(health, ctx) {
        out.push_str(&format!("    error: {}\n", crate::util::terminal_safe(&error)));
    }
    out
}

fn issues_json(issues: &[ConfigIssue]) -> Vec<Value> {
    issues
        .iter()
        .map(|i| {
            json!({
                "server": i.server,
                "severity": match i.severity { Severity::Error => "error", Severity::Warning => "warning" },
                "message": i.message,
                "fix": i.fix,
            })
        })
        .collect()
}

fn issues_text(issues: &[ConfigIssue]) -> String {
    if issues.is_empty() {
        return String::new();
    }
    let mut out = String::from("Configuration issues:\n");
    for issue in issues {
        out.push_str(&format!("  {issue}\n"));
    }
    out
}
