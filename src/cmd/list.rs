//! `nod mcp list`: the configuration view, and with `--connect` a live health snapshot of
//! every enabled server, connected in parallel. Neither shows commands, environment values,
//! headers or URLs.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Exit, print, print_json};
use crate::config::merge::Source;
use crate::config::project::{Entry, Trust};
use crate::config::{ConfigIssue, Loaded, ServerConfig, Severity, Transport};
use crate::dispatch::Engine;
use crate::session::Session;
use crate::session::catalog::{self, Kind};
use crate::util::{one_line, redact};

pub fn run(connect: bool, json: bool) -> anyhow::Result<Exit> {
    let loaded = crate::config::load_native()?;
    crate::util::remember_secrets(loaded.secrets());
    if !connect {
        return configuration(&loaded, json);
    }
    super::note_skipped(&loaded);
    let engine = Engine::start();
    super::interrupt::watch(&engine);
    let secrets = loaded.secrets();
    let healths: Vec<Health> = std::thread::scope(|scope| {
        let handles: Vec<_> = loaded
            .servers
            .iter()
            .map(|server| {
                let engine = &engine;
                let secrets = &secrets;
                scope.spawn(move || probe(engine, server, secrets))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("probe thread")).collect()
    });
    engine.shutdown();
    let failed = healths.iter().any(|h| h.state == "failed");
    let has_errors = loaded.issues.iter().any(|i| i.severity == Severity::Error);
    if json {
        let servers: Vec<Value> = healths.iter().map(Health::to_json).collect();
        print_json(&json!({
            "path": loaded.path,
            "servers": servers,
            "project": project_json(&loaded),
            "issues": issues_json(&loaded.issues),
        }))?;
    } else {
        let mut out = format!("MCP health ({}):\n", count(healths.len()));
        for health in &healths {
            out.push_str(&health.to_text());
        }
        out.push_str(&issues_text(&loaded.issues));
        print(&out)?;
    }
    Ok(if failed || has_errors { Exit::Failure } else { Exit::Ok })
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
        for s in &profile {
            out.push_str(&format!(
                "  {}  source=profile transport={} state={} policy={} auth={} connection=not_checked\n",
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
                    "  {}  source=project transport={} trust={} policy=optional connection=not_checked\n",
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
/// contacted): none for stdio, env for a bearer_token_env or header_env, stored or malformed
/// for OAuth credentials on file, oauth when none are stored yet.
fn auth_state(server: &ServerConfig) -> &'static str {
    let (Transport::Http(remote) | Transport::Sse(remote)) = &server.transport else { return "none" };
    if remote.bearer_token_env.is_some() || !remote.header_env.is_empty() {
        return "env";
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
            "changed since it was approved or rejected (its command, arguments, URL, headers or environment keys); review it, then nod mcp trust approve {name}"
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

struct Health {
    name: String,
    transport: &'static str,
    state: &'static str,
    version: Option<String>,
    server_name: Option<String>,
    server_version: Option<String>,
    counts: [Option<usize>; 4],
    rejected: usize,
    error: Option<String>,
    millis: u128,
}

fn probe(engine: &Engine, server: &ServerConfig, secrets: &[String]) -> Health {
    let started = Instant::now();
    let mut health = Health {
        name: server.name.clone(),
        transport: server.transport.kind(),
        state: "disabled",
        version: None,
        server_name: None,
        server_version: None,
        counts: [None; 4],
        rejected: 0,
        error: None,
        millis: 0,
    };
    if !server.enabled {
        return health;
    }
    let deadline = started + server.startup_timeout;
    let result = Session::connect(engine, server, super::no_input()).and_then(|session| {
        let info = |key: &str| {
            session
                .server_info
                .get(key)
                .and_then(Value::as_str)
                .map(|s| one_line(&s.chars().take(80).collect::<String>()))
        };
        health.version = Some(session.version.to_string());
        health.server_name = info("name");
        health.server_version = info("version");
        for (i, kind) in [Kind::Tools, Kind::Resources, Kind::Templates, Kind::Prompts].into_iter().enumerate() {
            if session.has(kind.capability()) {
                let listing = catalog::list_until(&session, kind, deadline)?;
                health.counts[i] = Some(listing.items.len());
                health.rejected += listing.rejected.len();
            }
        }
        session.close();
        Ok(())
    });
    health.millis = started.elapsed().as_millis();
    match result {
        Ok(()) => health.state = "ready",
        Err(err) => {
            health.state = "failed";
            health.error = Some(redact(&one_line(&format!("{err:#}")), secrets));
        }
    }
    health
}

impl Health {
    fn to_json(&self) -> Value {
        let [tools, resources, templates, prompts] = self.counts;
        json!({
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "protocol_version": self.version,
            "server_name": self.server_name,
            "server_version": self.server_version,
            "tools": tools,
            "resources": resources,
            "templates": templates,
            "prompts": prompts,
            "rejected": self.rejected,
            "error": self.error,
            "elapsed_ms": self.millis,
        })
    }

    fn to_text(&self) -> String {
        let mut out = format!("  {}  transport={} state={}", self.name, self.transport, self.state);
        if let Some(version) = &self.version {
            out.push_str(&format!(" protocol={version}"));
        }
        if let Some(name) = &self.server_name {
            out.push_str(&format!(" server={}", crate::util::terminal_safe(name)));
            if let Some(v) = self.server_version.as_ref().filter(|v| !v.is_empty()) {
                out.push_str(&format!("@{}", crate::util::terminal_safe(v)));
            }
        }
        out.push('\n');
        if self.state == "ready" {
            let shown = |n: Option<usize>| n.map_or("-".to_string(), |n| n.to_string());
            let [tools, resources, templates, prompts] = self.counts;
            out.push_str(&format!(
                "    tools={} resources={} templates={} prompts={}",
                shown(tools),
                shown(resources),
                shown(templates),
                shown(prompts)
            ));
            if self.rejected > 0 {
                out.push_str(&format!(" rejected={}", self.rejected));
            }
            out.push_str(&format!(" ({} ms)\n", self.millis));
        }
        if let Some(error) = &self.error {
            out.push_str(&format!("    error: {}\n", crate::util::terminal_safe(error)));
        }
        out
    }
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
