//! `nod status` and `nod doctor`: configuration, profile warnings, project issues and trust
//! states, and the presence of settings and credential files. Neither starts an MCP transport
//! nor opens credential storage (the credentials file is only looked at with stat), and their
//! JSON marks the MCP connection check `not_checked`. Nothing here shows commands, environment
//! values, headers, credentials or URLs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use super::{Exit, print, print_json};
use crate::config::merge::Source;
use crate::config::project::Trust;
use crate::config::{self, Loaded, Severity};

pub fn status(json: bool) -> anyhow::Result<Exit> {
    let loaded = config::load_native()?;
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
            "checks": { "mcp_connection": "not_checked" },
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
    for issue in &loaded.issues {
        out.push_str(&format!("{issue}\n"));
    }
    out.push_str("mcp connection: not_checked (nod mcp list --connect checks it)\n");
    print(&out)?;
    Ok(Exit::Ok)
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
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            findings.push(Finding {
                problem: true,
                message: format!("{what} {} can be read by other users", path.display()),
                fix: format!("chmod {mode:o} {}", path.display()),
            });
        }
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
        findings.push(Finding {
            problem,
            message: issue.to_string(),
            fix: format!("edit {}: {}", file.display(), issue.fix),
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
