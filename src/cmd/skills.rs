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

pub fn run(action: Action, json: bool) -> anyhow::Result<Exit> {
    let workspace = config::project::locate(&std::env::current_dir().unwrap_or_default()).0;
    let settings = config::settings::path()?;
    let choices = config::settings::choices(&settings, &workspace).unwrap_or_default();
    let found = skills::load(&config::home()?, &workspace, &choices);
    let approve = matches!(action, Action::Approve(_));
    match action {
        Action::List => list(&found, json),
        Action::Show(name) => show(&found, &name, json),
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
