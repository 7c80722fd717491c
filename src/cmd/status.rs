//! `nod status` and `nod doctor`: configuration, profile warnings, project issues and trust
//! states, and the presence of settings and credential files; doctor also checks file and
//! folder permissions and whether each stdio program is on PATH. Neither starts an MCP
//! transport or any program, nor opens credential storage (the credentials file is only
//! looked at with stat), and their JSON marks the MCP connection check `not_checked`. Nothing
//! here shows environment values, headers, credentials or URLs; doctor names a program it
//! cannot find (never its arguments). Both show the model side too, without sending anything:
//! the model, the endpoint (without credentials or query) and where its URL came from, and
//! whether a key is set (never the key); doctor reports what keeps the model from working.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use super::{Exit, print, print_json};
use crate::config::merge::Source;
use crate::config::project::Trust;
use crate::config::{self, Loaded, Severity, StdioConfig, Transport};

/// The model side as settings and the environment give it, nothing sent.
struct ModelSide {
    model: Option<String>,
    endpoint: Option<String>,
    key_set: bool,
    /// Why the model cannot be used as configured, when it cannot.
    problem: Option<String>,
}

fn model_side() -> ModelSide {
    let workspace = config::project::locate(&std::env::current_dir().unwrap_or_default()).0;
    let settings = config::settings::path().map(|p| config::agent::load(&p, &workspace)).unwrap_or_default();
    let env = |name: &str| std::env::var(name).ok();
    match crate::provider::config::resolve(None, &settings.model, &env) {
        Ok(config) => ModelSide {
            model: Some(config.model.clone()),
            endpoint: Some(config.endpoint()),
            key_set: config.api_key.is_some(),
            problem: None,
        },
        Err(err) => ModelSide {
            model: env("NOD_MODEL").or(settings.model.model.clone()),
            endpoint: None,
            key_set: false,
            problem: Some(err.to_string()),
        },
    }
}

pub fn status(json: bool) -> anyhow::Result<Exit> {
    let loaded = config::load_native()?;
    let side = model_side();
    let home = config::home()?;
    let settings = config::settings::path()?;
    let credentials = home.join("credentials.json");
    let profile: Vec<Value> = loaded
        .servers
        .iter()
        .filter(|s| loaded.source(&s.name) == Source::Profile)
        .map(|s| json!({ "name": s.name, "transport": s.transport.kind(), "enabled": s.enabled, "required": s.required }))
        .collect();
    if json {
        print_json(&json!({
            "version": env!("CARGO_PKG_VERSION"),
            "home": home,
            "profile": { "path": loaded.path, "exists": loaded.path.exists(), "servers": profile, "issues": issues(&loaded) },
            "project": super::list::project_json(&loaded),
            "settings": { "path": settings, "exists": settings.exists() },
            "credentials": { "path": credentials, "exists": credentials.exists() },
            "model": { "name": side.model, "endpoint": side.endpoint, "key_set": side.key_set, "problem": side.problem },
            "checks": { "mcp_connection": "not_checked", "model": "not_checked" },
        }))?;
        return Ok(Exit::Ok);
    }
    let mut out = format!("nod {}\nhome: {}\n", env!("CARGO_PKG_VERSION"), home.display());
    let exists = |p: &Path| if p.exists() { "present" } else { "absent" };
    out.push_str(&format!(
        "profile: {} ({}, {} server(s))\n",
        loaded.path.display(),
        exists(&loaded.path),
        profile.len()
    ));
    for server in &profile {
        out.push_str(&format!(
            "  {}  transport={}\n",
            server["name"].as_str().unwrap_or(""),
            server["transport"].as_str().unwrap_or("")
        ));
    }
    match &loaded.project.file {
        Some(file) => {
            out.push_str(&format!("project: {} ({} server(s))\n", file.display(), loaded.project.entries.len()));
            for entry in &loaded.project.entries {
                out.push_str(&format!("  {}  transport={} trust={}\n", entry.name, entry.kind, entry.trust.as_str()));
            }
        }
        None => out.push_str(&format!("project: no .mcp.json for {}\n", loaded.project.workspace.display())),
    }
    out.push_str(&format!("settings: {} ({})\n", settings.display(), exists(&settings)));
    out.push_str(&format!("credentials: {} ({})\n", credentials.display(), exists(&credentials)));
    match (&side.model, &side.endpoint, &side.problem) {
        (Some(model), Some(endpoint), _) => out.push_str(&format!(
            "model: {} at {} (key {})\n",
            crate::util::terminal_safe(model),
            crate::util::terminal_safe(endpoint),
            if side.key_set { "set" } else { "not set" }
        )),
        (_, _, Some(problem)) => out.push_str(&format!("model: none ({problem})\n")),
        _ => out.push_str("model: none\n"),
    }
    if let Ok(found) = super::skills::installed() {
        let ready = found.usable().count();
        out.push_str(&format!(
            "skills: {} ({ready} offered to the model, {} with problems; nod skills)\n",
            found.skills.len(),
            found.issues.len()
        ));
    }
    for issue in &loaded.issues {
        out.push_str(&format!("{issue}\n"));
    }
    out.push_str("mcp connection: not_checked (nod mcp list --connect checks it)\n");
    print(&out)?;
    Ok(Exit::Ok)
}

/// Whether the program of a stdio entry would be found, without running it: a path is
/// checked as it is (from the entry's cwd when relative), a bare name in each folder of
/// PATH (the entry's own PATH when it sets one).
fn program_found(stdio: &StdioConfig) -> bool {
    let program = Path::new(&stdio.argv[0]);
    let executable =
        |path: &Path| std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if stdio.argv[0].contains('/') {
        let base = stdio.cwd.clone().or_else(|| std::env::current_dir().ok()).unwrap_or_default();
        return executable(&base.join(program));
    }
    let path = stdio.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.into()).or_else(|| std::env::var_os("PATH"));
    path.is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}

fn issues(loaded: &Loaded) -> Vec<Value> {
    loaded
        .issues
        .iter()
        .map(|i| {
            let severity = if i.severity == Severity::Error { "error" } else { "warning" };
            json!({ "server": i.server, "severity": severity, "message": i.message, "fix": i.fix })
        })
        .collect()
}

/// One finding of `nod doctor`.
struct Finding {
    problem: bool,
    message: String,
    fix: String,
}

pub fn doctor(json: bool) -> anyhow::Result<Exit> {
    let loaded = config::load_native()?;
    let home = config::home()?;
    let mut findings = Vec::new();
    let private = |path: &Path, mode: u32, what: &str, findings: &mut Vec<Finding>| {
        let Ok(meta) = std::fs::metadata(path) else { return };
        let bits = meta.permissions().mode();
        let message = if bits & 0o022 != 0 {
            // Whoever can write there can change what nod runs.
            let whose = if meta.is_dir() { "put a profile of their own in it" } else { "change what nod runs" };
            format!("{what} {} can be written by other users, who could {whose}", path.display())
        } else if bits & 0o077 != 0 {
            format!("{what} {} can be read by other users", path.display())
        } else {
            return;
        };
        findings.push(Finding { problem: true, message, fix: format!("chmod {mode:o} {}", path.display()) });
    };
    private(&home, 0o700, "the nod folder", &mut findings);
    private(&loaded.path, 0o600, "the profile", &mut findings);
    private(&config::settings::path()?, 0o600, "the settings file", &mut findings);
    private(&home.join("credentials.json"), 0o600, "the credentials file", &mut findings);
    for issue in &loaded.issues {
        let problem = issue.severity == Severity::Error;
        let file = if issue.message.contains(".mcp.json") {
            loaded.project.file.clone().unwrap_or_default()
        } else {
            loaded.path.clone()
        };
        let message = match &issue.server {
            Some(name) => format!("server {name}: {}", issue.message),
            None => issue.message.clone(),
        };
        findings.push(Finding { problem, message, fix: format!("edit {}: {}", file.display(), issue.fix) });
    }
    for server in &loaded.servers {
        let Transport::Stdio(stdio) = &server.transport else { continue };
        if !server.enabled || program_found(stdio) {
            continue;
        }
        let program = serde_json::Value::from(crate::util::one_line(&stdio.argv[0])).to_string();
        let fix = match loaded.source(&server.name) {
            Source::Project => format!("install {program}, or fix the command of {} in .mcp.json", server.name),
            _ => format!("install {program}, or change the command: nod mcp add {} <command> [args...]", server.name),
        };
        let place =
            if stdio.argv[0].contains('/') { "does not exist or is not executable" } else { "is not found on PATH" };
        findings.push(Finding {
            problem: true,
            message: format!("server {}: the program {program} {place}", server.name),
            fix,
        });
    }
    for entry in &loaded.project.entries {
        let (problem, message) = match entry.trust {
            Trust::Approved => continue,
            Trust::Pending => (false, format!("project server {} is pending approval", entry.name)),
            Trust::Rejected => (false, format!("project server {} is rejected", entry.name)),
            Trust::Changed => {
                (true, format!("project server {} changed since it was approved or rejected, and is off", entry.name))
            }
        };
        findings.push(Finding { problem, message, fix: format!("nod mcp trust approve {}", entry.name) });
    }
    if let Ok(found) = super::skills::installed() {
        for issue in &found.issues {
            findings.push(Finding {
                problem: true,
                message: format!("skill {issue}"),
                fix: "fix the SKILL.md as the message says; nod skills lists the skills".into(),
            });
        }
        for skill in found.skills.iter().filter(|s| s.trust != Trust::Approved) {
            findings.push(Finding {
                problem: false,
                message: format!("project skill {} is {}", skill.name, skill.trust.as_str()),
                fix: format!("nod skills trust approve {}", skill.name),
            });
        }
    }
    let side = model_side();
    if let Some(problem) = &side.problem {
        // No model at all is only a note: nod mcp needs none. A model that is configured but
        // cannot be used is a problem.
        let configured = side.model.is_some();
        findings.push(Finding {
            problem: configured,
            message: format!("the model for nod ask, the shell and nod acp: {problem}"),
            fix: if configured {
                "fix the model settings (NOD_BASE_URL, NOD_API_KEY or api_key_env, settings.json)".into()
            } else {
                "set NOD_MODEL (and NOD_BASE_URL for a local server), or \"model\" in settings.json".into()
            },
        });
    } else if !side.key_set && side.endpoint.as_deref().is_some_and(|e| e.starts_with("https://api.openai.com")) {
        findings.push(Finding {
            problem: true,
            message: "the model endpoint is the default (api.openai.com) and no key is set".into(),
            fix: "set OPENAI_API_KEY (or NOD_API_KEY), or NOD_BASE_URL for a local server".into(),
        });
    }
    let problems = findings.iter().filter(|f| f.problem).count();
    if json {
        let checks: Vec<Value> = findings
            .iter()
            .map(|f| json!({ "status": if f.problem { "problem" } else { "notice" }, "message": f.message, "fix": f.fix }))
            .collect();
        print_json(
            &json!({ "findings": checks, "problems": problems, "checks": { "mcp_connection": "not_checked" } }),
        )?;
    } else {
        let mut out = String::new();
        for finding in &findings {
            let label = if finding.problem { "problem" } else { "notice" };
            out.push_str(&format!("{label}: {}\n  fix: {}\n", finding.message, finding.fix));
        }
        out.push_str(&format!(
            "{}; mcp connection: not_checked (nod mcp list --connect checks it)\n",
            match problems {
                0 => "no problems found".to_string(),
                1 => "1 problem found".to_string(),
                n => format!("{n} problems found"),
            }
        ));
        print(&out)?;
    }
    Ok(if problems > 0 { Exit::Failure } else { Exit::Ok })
}
