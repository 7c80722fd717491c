//! `nod mcp trust approve|reject <name>`, `approve-all`, `reset`: project trust for the
//! current workspace, recorded in `$NOD_HOME/settings.json`, never in `.mcp.json`.

use anyhow::bail;

use super::{Exit, print};
use crate::cli::Trust as TrustCommand;
use crate::config::project::{self, Project};
use crate::config::settings::{self, Choice};

pub fn run(command: TrustCommand) -> anyhow::Result<Exit> {
    let settings_path = settings::path()?;
    let cwd = std::env::current_dir()?;
    let located = project::locate(&cwd);
    let choices = settings::choices(&settings_path, &located.0)?;
    let project = project::load(located, &choices);
    let workspace = project.workspace.clone();
    for issue in &project.issues {
        eprintln!("nod: {issue}");
    }
    let entry_fingerprint = |name: &str| -> anyhow::Result<String> {
        match project.entries.iter().find(|e| e.name == name) {
            Some(entry) => Ok(entry.fingerprint.clone()),
            None => bail!("{}", missing(&project, name)),
        }
    };
    match command {
        TrustCommand::Approve(_) | TrustCommand::Reject(_) if project.file.is_none() => {
            bail!(
                "no {} in {} or above it (up to the repository root); nothing to trust",
                project::FILE_NAME,
                workspace.display()
            )
        }
        TrustCommand::Approve(name) => {
            let fingerprint = entry_fingerprint(&name)?;
            settings::record(
                &settings_path,
                &workspace,
                false,
                &[(name.clone(), Some(Choice { approved: true, fingerprint }))],
            )?;
            print(&format!("approved project server {name} for {}\n", workspace.display()))?;
        }
        TrustCommand::Reject(name) => {
            let fingerprint = entry_fingerprint(&name)?;
            settings::record(
                &settings_path,
                &workspace,
                false,
                &[(name.clone(), Some(Choice { approved: false, fingerprint }))],
            )?;
            print(&format!("rejected project server {name} for {}\n", workspace.display()))?;
        }
        TrustCommand::ApproveAll => {
            if project.entries.is_empty() {
                bail!("no project servers to approve in {}", workspace.display());
            }
            let changes: Vec<_> = project
                .entries
                .iter()
                .map(|e| (e.name.clone(), Some(Choice { approved: true, fingerprint: e.fingerprint.clone() })))
                .collect();
            settings::record(&settings_path, &workspace, false, &changes)?;
            let names: Vec<&str> = project.entries.iter().map(|e| e.name.as_str()).collect();
            print(&format!("approved project servers {} for {}\n", names.join(", "), workspace.display()))?;
        }
        TrustCommand::Reset => {
            settings::record(&settings_path, &workspace, true, &[])?;
            print(&format!(
                "cleared project trust for {}; every project server is pending again\n",
                workspace.display()
            ))?;
        }
    }
    Ok(Exit::Ok)
}

fn missing(project: &Project, name: &str) -> String {
    let known: Vec<&str> = project.entries.iter().map(|e| e.name.as_str()).collect();
    if known.is_empty() {
        format!("no project server named {name}: the project's .mcp.json has no usable entries")
    } else {
        format!("no project server named {name} (the project's .mcp.json has: {})", known.join(", "))
    }
}
