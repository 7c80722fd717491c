//! `nod skills`: the installed Agent Skills (`config::skills`), their origin and trust state,
//! one skill's text, and the trust choices for project skills. Nothing here runs a skill.

use serde_json::{Value, json};

use super::failure::{Kind, fail};
use super::{Exit, print, print_json};
use crate::cli::Skills as Action;
use crate::config::project::Trust;
use crate::config::settings::Choice;
use crate::config::{self, skills};
use crate::util::terminal_safe;

/// The skills of the user and of the current workspace, with their recorded trust.
pub fn installed() -> anyhow::Result<skills::Skills> {
    let workspace = config::project::locate(&std::env::current_dir().unwrap_or_default()).0;
    let settings = config::settings::path()?;
    let choices = config::settings::choices(&settings, &workspace).unwrap_or_default();
    Ok(skills::load(&config::home()?, &workspace, &choices))
}

pub fn run(action: Action, json: bool) -> anyhow::Result<Exit> {
    let workspace = config::project::locate(&std::env::current_dir().unwrap_or_default()).0;
    let settings = config::settings::path()?;
    let found = installed()?;
    let approve = matches!(action, Action::Approve(_));
    match action {
        Action::List => list(&found, json),
        Action::Show(name) => show(&found, &name, json),
        Action::Add(folder) => add(&folder, json),
        Action::Remove(name) => remove(&found, &name, json),
        Action::ApproveAll { yes } => {
            let waiting: Vec<&skills::Skill> = found.skills.iter().filter(|s| s.trust != Trust::Approved).collect();
            if yes {
                let changes: Vec<(String, Option<Choice>)> = waiting
                    .iter()
                    .map(|s| {
                        (
                            skills::trust_key(&s.name),
                            Some(Choice { approved: true, fingerprint: s.fingerprint.clone() }),
                        )
                    })
                    .collect();
                config::settings::record(&settings, &workspace, false, &changes)?;
            }
            let names: Vec<&str> = waiting.iter().map(|s| s.name.as_str()).collect();
            if json {
                print_json(&json!({ "skills": names, "approved": yes }))?;
            } else if names.is_empty() {
                print("no project skill is waiting for approval\n")?;
            } else if yes {
                print(&format!("approved project skills {}\n", names.join(", ")))?;
            } else {
                let mut out = String::new();
                for skill in &waiting {
                    out.push_str(&format!("  {}  ({})  {}\n", skill.name, skill.trust.as_str(), skill.dir.display()));
                }
                out.push_str("nothing was approved; nod skills trust approve-all --yes approves them\n");
                print(&out)?;
            }
            Ok(Exit::Ok)
        }
        Action::Reset => {
            let changes: Vec<(String, Option<Choice>)> = found
                .skills
                .iter()
                .filter(|s| s.origin == skills::Origin::Project)
                .map(|s| (skills::trust_key(&s.name), None))
                .collect();
            config::settings::record(&settings, &workspace, false, &changes)?;
            if json {
                print_json(&json!({ "reset": changes.len() }))?;
            } else {
                print(&format!(
                    "forgot the choices about {} project skill(s); they are pending again\n",
                    changes.len()
                ))?;
            }
            Ok(Exit::Ok)
        }
        Action::Approve(name) | Action::Reject(name) => {
            let skill = project_skill(&found, &name)?;
            let choice = Choice { approved: approve, fingerprint: skill.fingerprint.clone() };
            config::settings::record(&settings, &workspace, false, &[(skills::trust_key(&name), Some(choice))])?;
            let verb = if approve { "approved" } else { "rejected" };
            if json {
                print_json(&json!({ "skill": name, "trust": verb }))?;
            } else {
                print(&format!("{verb} project skill {name} for {}\n", workspace.display()))?;
            }
            Ok(Exit::Ok)
        }
    }
}

fn state(trust: Trust) -> &'static str {
    match trust {
        Trust::Approved => "ready",
        other => other.as_str(),
    }
}

fn list(found: &skills::Skills, json: bool) -> anyhow::Result<Exit> {
    if json {
        let all: Vec<Value> = found
            .skills
            .iter()
            .map(|s| {
                json!({ "name": s.name, "origin": s.origin.as_str(), "state": state(s.trust),
                "description": s.description, "path": s.dir, "files": s.files.len() })
            })
            .collect();
        print_json(&json!({ "skills": all, "issues": found.issues }))?;
    } else {
        let width = found.skills.iter().map(|s| s.name.len()).max().unwrap_or(0);
        let mut out = format!("{} skill{}:\n", found.skills.len(), if found.skills.len() == 1 { "" } else { "s" });
        for s in &found.skills {
            let line = crate::util::one_line(&s.description);
            let about: String = line.chars().take(100).collect();
            out.push_str(&format!(
                "  {:width$}  {:7}  {:8}  {}\n",
                s.name,
                s.origin.as_str(),
                state(s.trust),
                terminal_safe(&about)
            ));
        }
        for issue in &found.issues {
            out.push_str(&format!("problem: {}\n", terminal_safe(issue)));
        }
        if found.skills.iter().any(|s| s.trust != Trust::Approved) {
            out.push_str("project skills are offered to the model once approved: nod skills trust approve <name>\n");
        }
        print(&out)?;
    }
    Ok(if found.issues.is_empty() { Exit::Ok } else { Exit::Failure })
}

fn show(found: &skills::Skills, name: &str, json: bool) -> anyhow::Result<Exit> {
    let Some(skill) = found.find(name) else {
        let hint = crate::cli::suggest::hint(name, found.skills.iter().map(|s| s.name.as_str()));
        return Err(fail(Kind::NotFound, format!("no skill named {name}{hint}; see nod skills")));
    };
    if json {
        print_json(&json!({ "name": skill.name, "origin": skill.origin.as_str(), "state": state(skill.trust),
            "front_matter": skill.front, "body": skill.body, "files": skill.files, "path": skill.dir }))?;
    } else {
        print(&terminal_safe(&format!(
            "{} ({}, {}) in {}\n{}\n\n{}\nfiles: {}\n",
            skill.name,
            skill.origin.as_str(),
            state(skill.trust),
            skill.dir.display(),
            skill.description,
            skill.body.trim_end(),
            if skill.files.is_empty() { "(none)".to_string() } else { skill.files.join(", ") }
        )))?;
    }
    Ok(Exit::Ok)
}

fn project_skill<'a>(found: &'a skills::Skills, name: &str) -> anyhow::Result<&'a skills::Skill> {
    match found.find(name) {
        Some(skill) if skill.origin == skills::Origin::Project => Ok(skill),
        Some(_) => Err(fail(Kind::Usage, format!("{name} is a user skill: it needs no approval"))),
        None => Err(fail(Kind::NotFound, format!("no project skill named {name} in this workspace; see nod skills"))),
    }
}

/// Copies a skill folder into `$NOD_HOME/skills/<name>` once it reads as a skill: files and
/// folders only (a symlink is refused), within the same bounds as reading.
fn add(folder: &std::path::Path, json: bool) -> anyhow::Result<Exit> {
    let skill = skills::read_skill(folder, skills::Origin::User).map_err(|why| {
        fail(Kind::Usage, format!("{}: {why} (nothing was installed)", folder.join("SKILL.md").display()))
    })?;
    let target = config::home()?.join("skills").join(&skill.name);
    let replaced = target.exists();
    let staging = target.with_extension(format!("installing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    let copied = (|| -> anyhow::Result<()> {
        std::fs::copy(folder.join("SKILL.md"), staging.join("SKILL.md"))?;
        for file in &skill.files {
            let to = staging.join(file);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::copy(folder.join(file), to)?;
        }
        if replaced {
            std::fs::remove_dir_all(&target)?;
        }
        std::fs::rename(&staging, &target)?;
        Ok(())
    })();
    if let Err(err) = copied {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(err.context(format!("cannot install skill {} (nothing was installed)", skill.name)));
    }
    let verb = if replaced { "replaced" } else { "installed" };
    if json {
        print_json(&json!({ "skill": skill.name, "change": verb, "path": target, "files": skill.files }))?;
    } else {
        print(&format!(
            "{verb} skill {} in {} ({} bundled file{})\n",
            skill.name,
            target.display(),
            skill.files.len(),
            if skill.files.len() == 1 { "" } else { "s" }
        ))?;
    }
    Ok(Exit::Ok)
}

/// Deletes a user skill's folder.
fn remove(found: &skills::Skills, name: &str, json: bool) -> anyhow::Result<Exit> {
    match found.find(name) {
        Some(skill) if skill.origin == skills::Origin::User => {
            std::fs::remove_dir_all(&skill.dir)?;
            if json {
                print_json(&json!({ "skill": name, "change": "removed" }))?;
            } else {
                print(&format!("removed skill {name} from {}\n", skill.dir.display()))?;
            }
            Ok(Exit::Ok)
        }
        Some(_) => {
            Err(fail(Kind::Usage, format!("{name} is a project skill: nod skills trust reject {name} turns it off")))
        }
        None => {
            let hint = crate::cli::suggest::hint(name, found.skills.iter().map(|s| s.name.as_str()));
            Err(fail(Kind::NotFound, format!("no skill named {name}{hint}")))
        }
    }
}

/// `nod mcp skill list <server>`: the skills a server offers, from its listing alone.
pub fn server_list(session: &crate::session::Session, ctx: &super::Context) -> anyhow::Result<Exit> {
    use crate::session::skills as offered;
    let (found, rejected) = offered::list(session).map_err(|e| typed(e, Kind::NotFound))?;
    for why in &rejected {
        eprintln!("nod: server {}: skill {} left out", session.name, terminal_safe(&ctx.redactor.redact(why)));
    }
    if ctx.options.json {
        let skills: Vec<Value> = found
            .iter()
            .map(|s| {
                json!({ "name": s.name, "description": s.description, "uri": s.uri, "frontmatter": s.front,
                    "files": s.relative_files(), "loadable": s.files.is_some() })
            })
            .collect();
        print_json(&json!({ "server": session.name, "skills": skills, "rejected": rejected }))?;
        return Ok(Exit::Ok);
    }
    if found.is_empty() {
        print(&format!("server {} lists no skills\n", session.name))?;
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    for skill in &found {
        let files = match &skill.files {
            None => "dynamic: no digests, not loaded".to_string(),
            Some(_) => match skill.relative_files().len() {
                0 => "no other files".to_string(),
                1 => "1 file".to_string(),
                n => format!("{n} files"),
            },
        };
        let about = super::render::first_line(&skill.description);
        out.push_str(&format!("{}  {}  ({files})\n", terminal_safe(&skill.name), terminal_safe(about)));
    }
    print(&out)?;
    Ok(Exit::Ok)
}

/// `nod mcp skill show <server> <name> [file]`: loads the skill (verified), then prints its
/// instructions or reads one of its files (verified too).
pub fn server_show(
    session: &crate::session::Session,
    name: &str,
    file: Option<&str>,
    ctx: &super::Context,
) -> anyhow::Result<Exit> {
    use crate::session::skills as offered;
    let (found, _) = offered::list(session).map_err(|e| typed(e, Kind::NotFound))?;
    let named: Vec<&offered::ServerSkill> = found.iter().filter(|s| s.name == name).collect();
    let skill = match named.as_slice() {
        [one] => *one,
        [] => {
            let hint = crate::cli::suggest::hint(name, found.iter().map(|s| s.name.as_str()));
            return Err(fail(Kind::NotFound, format!("server {} lists no skill {name}{hint}", session.name)));
        }
        several => {
            let uris: Vec<&str> = several.iter().map(|s| s.uri.as_str()).collect();
            let uris = terminal_safe(&uris.join(", ")).into_owned();
            return Err(fail(
                Kind::Protocol,
                format!("server {} lists {} skills named {name}: {uris}", session.name, several.len()),
            ));
        }
    };
    let loaded = offered::load(session, skill).map_err(|e| typed(e, Kind::Protocol))?;
    let Some(file) = file else {
        if ctx.options.json {
            print_json(&json!({ "server": session.name, "name": skill.name, "uri": skill.uri,
                "frontmatter": skill.front, "body": loaded.body, "files": skill.relative_files() }))?;
        } else {
            print(&terminal_safe(&loaded.body))?;
        }
        return Ok(Exit::Ok);
    };
    let bytes = offered::read_file(session, skill, file).map_err(|e| typed(e, Kind::Protocol))?;
    let text = String::from_utf8_lossy(&bytes);
    if ctx.options.json {
        print_json(&json!({ "server": session.name, "name": skill.name, "file": file, "text": text }))?;
    } else {
        print(&terminal_safe(&text))?;
    }
    Ok(Exit::Ok)
}

/// `err` as a failure of `kind`, unless it already says what kind it is (a timeout, a lost
/// connection).
fn typed(err: anyhow::Error, kind: Kind) -> anyhow::Error {
    match super::failure::kind_of(&err) {
        Some(_) => err,
        None => fail(kind, crate::util::chain(&err)),
    }
}

/// The shell's `/skills`, after the installed ones: the skills the ready servers offer, from
/// their listings (nothing of a skill is read); they are the servers' text, untrusted.
pub fn print_server_skills(runtime: &crate::session::runtime::Runtime) -> anyhow::Result<()> {
    use crate::session::skills as offered;
    let mut out = String::new();
    for name in runtime.ready() {
        let Ok(session) = runtime.session(&name) else { continue };
        if !offered::offered(&session) {
            continue;
        }
        match offered::list(&session) {
            Ok((skills, _)) => {
                for skill in skills {
                    let about: String = crate::util::one_line(&skill.description).chars().take(100).collect();
                    let state = if skill.files.is_some() { "offered" } else { "dynamic" };
                    out.push_str(&format!(
                        "  {}  server={}  {state}  {}\n",
                        terminal_safe(&skill.name),
                        terminal_safe(&name),
                        terminal_safe(&about)
                    ));
                }
            }
            Err(err) => out.push_str(&format!("problem: {}\n", terminal_safe(&crate::util::chain(&err)))),
        }
    }
    if !out.is_empty() {
        print(&format!("skills the servers offer (their text, loaded only when verified):\n{out}"))?;
    }
    Ok(())
}
