//! `nod mcp trust approve|reject <name>`, `approve-all`, `reset`: project trust for the
//! current workspace, recorded in `$NOD_HOME/settings.json`, never in `.mcp.json`.
//!
//! Approving first prints what the entry runs or contacts, as written in the file: the
//! command and every argument in full (STDIO-7: no truncation), the working directory, the
//! environment with its template values, or the URL and header names. Everything shown is
//! quoted like JSON and terminal-safe, so no value can fake a line or move the cursor; values
//! other than the command line are cut at 200 characters with the remainder counted. On a
//! terminal approve-all asks before recording; elsewhere it needs `--yes`. The fingerprint
//! recorded is that of the entry shown, and the file is read again before saving: if it
//! changed meanwhile, nothing is approved.

use std::io::{BufRead, IsTerminal};
use std::path::Path;

use crossbeam_channel::select;
use serde_json::json;

use super::failure::{Kind, fail};
use super::{Context, Exit, print, print_json};
use crate::cli::Trust as TrustCommand;
use crate::config::project::{self, Entry, Launch, Project};
use crate::config::settings::{self, Choice};
use crate::util::{Trigger, terminal_safe};

/// The most characters shown of one value other than the command line.
const SHOWN_CHARS: usize = 200;

pub fn run(command: TrustCommand, ctx: &Context) -> anyhow::Result<Exit> {
    let settings_path = settings::path()?;
    let cwd = std::env::current_dir()?;
    let project = read_project(&settings_path, &cwd)?;
    let workspace = project.workspace.clone();
    for issue in &project.issues {
        eprintln!("nod: {issue}");
    }
    let json = ctx.options.json;
    // What a person reviews goes to stdout, or to stderr when stdout carries JSON.
    let show = |text: &str| -> anyhow::Result<()> {
        if json {
            eprint!("{text}");
            Ok(())
        } else {
            print(text)
        }
    };
    let done = |change: &str, names: &[&str], text: String| -> anyhow::Result<()> {
        if json {
            print_json(&json!({ "workspace": workspace, "change": change, "servers": names }))
        } else {
            print(&text)
        }
    };
    let find = |name: &str| -> anyhow::Result<&Entry> {
        match project.entries.iter().find(|e| e.name == name) {
            Some(entry) => Ok(entry),
            None => Err(fail(Kind::NotFound, missing(&project, name))),
        }
    };
    match command {
        TrustCommand::Approve(_) | TrustCommand::Reject(_) if project.file.is_none() => {
            return Err(fail(
                Kind::NotFound,
                format!(
                    "no {} in {} or above it (up to the repository root); nothing to trust",
                    project::FILE_NAME,
                    shown_path(&workspace)
                ),
            ));
        }
        TrustCommand::Approve(name) => {
            let entry = find(&name)?;
            show(&describe(entry, &workspace))?;
            warn_if_shadowed(&[entry])?;
            approve(&settings_path, &cwd, &project, &[entry])?;
            done("approved", &[&name], format!("approved project server {name} for {}\n", shown_path(&workspace)))?;
        }
        TrustCommand::Reject(name) => {
            let fingerprint = find(&name)?.fingerprint.clone();
            settings::record(
                &settings_path,
                &workspace,
                false,
                &[(name.clone(), Some(Choice { approved: false, fingerprint }))],
            )?;
            done("rejected", &[&name], format!("rejected project server {name} for {}\n", shown_path(&workspace)))?;
        }
        TrustCommand::ApproveAll { yes } => {
            if project.entries.is_empty() {
                return Err(fail(
                    Kind::NotFound,
                    format!("no project servers to approve in {}", shown_path(&workspace)),
                ));
            }
            let entries: Vec<&Entry> = project.entries.iter().collect();
            let shown: String = entries.iter().map(|e| describe(e, &workspace)).collect();
            let asking = !yes && std::io::stdin().is_terminal();
            // A question comes with what it is about: with stdout redirected, the servers
            // are shown on stderr beside it.
            if asking && !super::stdout_is_terminal() {
                eprint!("{shown}");
            } else {
                show(&shown)?;
            }
            warn_if_shadowed(&entries)?;
            let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
            if !yes && !asking {
                return Err(fail(
                    Kind::Usage,
                    "approve-all asks for confirmation and stdin is not a terminal, so nothing was approved; review the servers above, then run nod mcp trust approve-all --yes",
                ));
            }
            if asking {
                eprint!(
                    "approve {} for {}? [y/N] ",
                    if names.len() == 1 {
                        "this project server".into()
                    } else {
                        format!("these {} project servers", names.len())
                    },
                    shown_path(&workspace)
                );
                match confirm(std::io::BufReader::new(std::io::stdin()), &ctx.interrupt) {
                    Answer::Yes => {}
                    answer => {
                        // Ctrl-C and Ctrl-D leave the cursor after the question.
                        if answer != Answer::No {
                            eprintln!();
                        }
                        if answer == Answer::Interrupted {
                            return Ok(Exit::Interrupted);
                        }
                        eprintln!("nod: nothing was approved");
                        done("none", &[], String::new())?;
                        return Ok(Exit::Ok);
                    }
                }
            }
            approve(&settings_path, &cwd, &project, &entries)?;
            let text = format!("approved project servers {} for {}\n", names.join(", "), shown_path(&workspace));
            done("approved", &names, text)?;
        }
        TrustCommand::Reset => {
            settings::record(&settings_path, &workspace, true, &[])?;
            let names: Vec<&str> = project.entries.iter().map(|e| e.name.as_str()).collect();
            let text = format!(
                "cleared project trust for {}; every project server is pending again\n",
                shown_path(&workspace)
            );
            done("reset", &names, text)?;
        }
    }
    Ok(Exit::Ok)
}

pub(super) fn read_project(settings_path: &Path, cwd: &Path) -> anyhow::Result<Project> {
    let located = project::locate(cwd);
    let choices = settings::choices(settings_path, &located.0)?;
    Ok(project::load(located, &choices))
}

/// Records approval of `entries` with the fingerprints they were shown with, after reading
/// the file again: if the workspace or any entry differs from what was shown, nothing is
/// recorded. (A change after this check cannot slip through either: the recorded
/// fingerprint is that of the entry shown, so a different entry is `changed`.)
pub(super) fn approve(settings_path: &Path, cwd: &Path, shown: &Project, entries: &[&Entry]) -> anyhow::Result<()> {
    let now = read_project(settings_path, cwd)?;
    if now.workspace != shown.workspace || fingerprints(&now) != fingerprints(shown) {
        return Err(fail(
            Kind::Config,
            "the project's .mcp.json changed while it was being approved, so nothing was approved; run the command again to review it as it is now",
        ));
    }
    let changes: Vec<_> = entries
        .iter()
        .map(|e| (e.name.clone(), Some(Choice { approved: true, fingerprint: e.fingerprint.clone() })))
        .collect();
    settings::record(settings_path, &shown.workspace, false, &changes)
}

fn fingerprints(project: &Project) -> Vec<(&str, &str)> {
    project.entries.iter().map(|e| (e.name.as_str(), e.fingerprint.as_str())).collect()
}

/// A profile server of the same name wins over a project entry, so approving the entry
/// changes nothing while that server exists: say so on stderr.
fn warn_if_shadowed(entries: &[&Entry]) -> anyhow::Result<()> {
    let path = crate::config::profile::path()?;
    let profile = crate::config::profile::load(&path);
    for entry in entries.iter().filter(|e| profile.server(&e.name).is_some()) {
        eprintln!(
            "nod: warning: the profile {} also has a server named {name}, which wins over the project's; approving the project entry has no effect until one of them is renamed (or: nod mcp remove {name})",
            shown_path(&path),
            name = entry.name,
        );
    }
    Ok(())
}

/// What approving `entry` allows, one item a line.
pub(super) fn describe(entry: &Entry, workspace: &Path) -> String {
    let name = &entry.name;
    let mut out = String::new();
    match &entry.launch {
        Launch::Local { command, args, cwd, env } => {
            out.push_str(&format!(
                "project server {name} ({}) runs this program on this machine, as you, with your access to files, network and credentials:\n",
                entry.kind
            ));
            out.push_str(&format!("  command  {}\n", quoted(command)));
            for arg in args {
                out.push_str(&format!("  arg      {}\n", quoted(arg)));
            }
            match cwd {
                Some(dir) => {
                    out.push_str(&format!("  cwd      {} ({})\n", bounded(dir), shown_path(&workspace.join(dir))))
                }
                None => out.push_str("  cwd      not set: the directory nod runs in\n"),
            }
            if env.is_empty() {
                out.push_str("  env      nothing set: it inherits nod's environment\n");
            }
            for (key, value) in env {
                out.push_str(&format!("  env      {}={}\n", label(key), bounded(value)));
            }
        }
        Launch::Remote { url, headers } => {
            let host = crate::net::url::host(url).map_or_else(|| "the URL below".to_string(), |h| label(&h));
            out.push_str(&format!(
                "project server {name} ({}) contacts {host}, sending it what nod asks of the server:\n",
                entry.kind
            ));
            out.push_str(&format!("  url      {}\n", bounded(url)));
            for key in headers.keys() {
                out.push_str(&format!("  header   {} (value not shown)\n", label(key)));
            }
        }
    }
    let variables = entry.launch.variables();
    if !variables.is_empty() {
        let names: Vec<String> = variables.iter().map(|v| label(v)).collect();
        let when = if entry.kind == "stdio" { "nod starts it" } else { "nod connects" };
        out.push_str(&format!("  reads    {} from your environment when {when}\n", names.join(", ")));
    }
    out
}

/// A value as a JSON string: quotes, backslashes and control characters escaped, and then
/// terminal-safe (JSON leaves DEL, C1 controls and bidi overrides alone).
fn quoted(text: &str) -> String {
    terminal_safe(&serde_json::Value::from(text).to_string()).into_owned()
}

/// `quoted`, cut at `SHOWN_CHARS` with the rest counted.
fn bounded(text: &str) -> String {
    let total = text.chars().count();
    if total <= SHOWN_CHARS {
        return quoted(text);
    }
    let cut: String = text.chars().take(SHOWN_CHARS).collect();
    format!("{}… ({} more characters; read them in .mcp.json)", quoted(&cut), total - SHOWN_CHARS)
}

/// A name (environment variable, header) as it is when it is plain, else `bounded`.
fn label(name: &str) -> String {
    let plain = !name.is_empty()
        && name.chars().count() <= SHOWN_CHARS
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if plain { name.to_string() } else { bounded(name) }
}

#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Yes,
    /// A line that is not y or yes, an empty one included.
    No,
    /// The input ended (Ctrl-D) or could not be read: a no.
    Ended,
    Interrupted,
}

/// Reads one line of `input`: y or yes (any case) is a yes, anything else a no. The read
/// happens on a thread so that Ctrl-C still ends the wait (the thread, blocked on stdin,
/// ends with the process).
fn confirm(mut input: impl BufRead + Send + 'static, interrupt: &Trigger) -> Answer {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let reader = std::thread::Builder::new().name("nod-confirm".into()).spawn(move || {
        let mut line = String::new();
        let answer = match input.read_line(&mut line) {
            Ok(0) | Err(_) => Answer::Ended,
            Ok(_) if is_yes(&line) => Answer::Yes,
            Ok(_) => Answer::No,
        };
        let _ = tx.send(answer);
    });
    if reader.is_err() {
        return Answer::Ended;
    }
    select! {
        recv(rx) -> answer => answer.unwrap_or(Answer::Ended),
        recv(interrupt.receiver()) -> _ => Answer::Interrupted,
    }
}

/// A path of this machine, terminal-safe: a folder's name may hold control characters too.
pub(super) fn shown_path(path: &Path) -> String {
    terminal_safe(&path.display().to_string()).into_owned()
}

fn is_yes(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn missing(project: &Project, name: &str) -> String {
    let known: Vec<&str> = project.entries.iter().map(|e| e.name.as_str()).collect();
    if known.is_empty() {
        format!("no project server named {name}: the project's .mcp.json has no usable entries")
    } else {
        format!("no project server named {name} (the project's .mcp.json has: {})", known.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_y_or_yes_confirms() {
        let answer = |input: &'static str| confirm(std::io::Cursor::new(input), &Trigger::default());
        for yes in ["y\n", "Y\n", "yes\n", " YES \r\n", "y"] {
            assert_eq!(answer(yes), Answer::Yes, "{yes:?}");
        }
        for no in ["\n", "n\n", "no\n", "yess\n", "\ny\n", "sure\n"] {
            assert_eq!(answer(no), Answer::No, "{no:?}");
        }
        assert_eq!(answer(""), Answer::Ended);
    }

    #[test]
    fn ctrl_c_ends_the_question() {
        // A reader that never answers: only the interrupt can end the wait.
        struct Silent(crossbeam_channel::Receiver<()>);
        impl std::io::Read for Silent {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                let _ = self.0.recv();
                Ok(0)
            }
        }
        let (_hold, never) = crossbeam_channel::bounded::<()>(0);
        let interrupt = Trigger::default();
        interrupt.fire();
        assert_eq!(confirm(std::io::BufReader::new(Silent(never)), &interrupt), Answer::Interrupted);
    }

    #[test]
    fn shown_values_are_quoted_safe_and_bounded() {
        assert_eq!(quoted("a \"b\"\n\x1b[2J\u{202E}"), "\"a \\\"b\\\"\\n\\u001b[2J\u{FFFD}\"");
        let long = "x".repeat(SHOWN_CHARS + 5);
        let shown = bounded(&long);
        assert!(shown.starts_with(&format!("\"{}\"…", "x".repeat(SHOWN_CHARS))), "{shown}");
        assert!(shown.contains("5 more characters"), "{shown}");
        assert_eq!(label("NODE_OPTIONS"), "NODE_OPTIONS");
        assert_eq!(label("A\nB"), "\"A\\nB\"");
    }
}
