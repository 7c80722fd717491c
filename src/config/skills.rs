//! Agent Skills on disk: a folder holding a `SKILL.md` whose YAML front matter names the skill
//! (`name`: lowercase letters, digits and hyphens, at most 64, the folder's name) and says what
//! it is for (`description`, at most 1024 characters), optionally `license`, `compatibility`,
//! `metadata` and `allowed-tools` (unknown keys are kept), followed by Markdown instructions.
//!
//! User skills live in `$NOD_HOME/skills/<name>/`; project skills in the workspace's
//! `.nod/skills/` and `.agents/skills/`. Project skills are repository content: like `.mcp.json`
//! servers they are pending until approved, with a fingerprint over the whole folder (a changed
//! skill is pending again), recorded in settings.json's trust under `skill:<name>`. A user skill
//! wins over a project skill of the same name. Reading is bounded and never follows a symlink
//! out of a skill's folder; a broken skill is reported with its path and the fix while the
//! others load.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use super::project::Trust;
use super::settings::Choice;

/// The largest `SKILL.md` read.
pub const MAX_SKILL_BYTES: usize = 256 * 1024;
/// Skills read from one place.
const MAX_SKILLS: usize = 1000;
/// Files of one skill's folder taken into its fingerprint and its list of bundled files.
const MAX_FILES: usize = 500;
/// How deep a skill's folder is walked.
const MAX_DEPTH: usize = 4;
/// The longest description.
const MAX_DESCRIPTION: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    User,
    Project,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Project => "project",
        }
    }
}

/// One skill as found.
#[derive(Clone, Debug)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub origin: Origin,
    /// The skill's folder.
    pub dir: PathBuf,
    /// Every front matter key (name and description included), as JSON.
    pub front: Map<String, Value>,
    /// The Markdown after the front matter.
    pub body: String,
    /// The folder's files (relative paths), `SKILL.md` excluded.
    pub files: Vec<String>,
    pub fingerprint: String,
    /// User skills are approved; project skills as recorded.
    pub trust: Trust,
}

/// The skills found, and what is wrong with the ones that could not be read.
#[derive(Debug, Default)]
pub struct Skills {
    pub skills: Vec<Skill>,
    pub issues: Vec<String>,
}

impl Skills {
    /// The skills the model may see: user skills and approved project skills.
    pub fn usable(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|s| s.trust == Trust::Approved)
    }

    pub fn find(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// The settings.json trust key of a project skill.
pub fn trust_key(name: &str) -> String {
    format!("skill:{name}")
}

/// Reads the user's skills under `home` and the project skills of `workspace`, with the trust
/// recorded in `choices`.
pub fn load(home: &Path, workspace: &Path, choices: &std::collections::HashMap<String, Choice>) -> Skills {
    let mut out = Skills::default();
    read_place(&home.join("skills"), Origin::User, &mut out, choices);
    for place in [".nod/skills", ".agents/skills"] {
        read_place(&workspace.join(place), Origin::Project, &mut out, choices);
    }
    out
}

fn read_place(place: &Path, origin: Origin, out: &mut Skills, choices: &std::collections::HashMap<String, Choice>) {
    let Ok(entries) = std::fs::read_dir(place) else { return };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs.into_iter().take(MAX_SKILLS) {
        // A symlinked skill folder could point anywhere: not followed.
        let Ok(meta) = std::fs::symlink_metadata(&dir) else { continue };
        if !meta.is_dir() {
            if meta.file_type().is_symlink() {
                out.issues
                    .push(format!("{}: a symlink, not followed; copy the skill's folder there instead", dir.display()));
            }
            continue;
        }
        match read_skill(&dir, origin) {
            Ok(mut skill) => {
                if out.find(&skill.name).is_some() {
                    // The user's skill of that name came first and wins.
                    continue;
                }
                if origin == Origin::Project {
                    skill.trust = match choices.get(&trust_key(&skill.name)) {
                        None => Trust::Pending,
                        Some(choice) if choice.fingerprint != skill.fingerprint => Trust::Changed,
                        Some(choice) if choice.approved => Trust::Approved,
                        Some(_) => Trust::Rejected,
                    };
                }
                out.skills.push(skill);
            }
            Err(why) => out.issues.push(format!("{}: {why}", dir.join("SKILL.md").display())),
        }
    }
}

/// Reads one skill's folder.
pub fn read_skill(dir: &Path, origin: Origin) -> Result<Skill, String> {
    let file = dir.join("SKILL.md");
    let meta =
        std::fs::symlink_metadata(&file).map_err(|_| "no SKILL.md in the folder; every skill needs one".to_string())?;
    if meta.file_type().is_symlink() {
        return Err("SKILL.md is a symlink, which nod does not follow; make it a file".into());
    }
    if meta.len() as usize > MAX_SKILL_BYTES {
        return Err(format!(
            "SKILL.md is {} bytes, over the {} KiB nod reads; shorten it",
            meta.len(),
            MAX_SKILL_BYTES >> 10
        ));
    }
    let text = std::fs::read_to_string(&file).map_err(|e| format!("cannot read it ({e}); it must be UTF-8 text"))?;
    let (front, body) = front_matter(&text)?;
    let text_of = |key: &str| front.get(key).and_then(Value::as_str).map(str::to_string);
    let name = text_of("name").ok_or("the front matter has no name; add name: <folder name>")?;
    let folder = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !valid_name(&name) {
        return Err(format!("the name {name:?} must be lowercase letters, digits and hyphens, at most 64"));
    }
    if name != folder {
        return Err(format!("the name {name:?} is not the folder's ({folder:?}); rename one of them"));
    }
    let description = text_of("description")
        .ok_or("the front matter has no description; say what the skill does and when to use it")?;
    if description.trim().is_empty() {
        return Err("the description is empty; say what the skill does and when to use it".into());
    }
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(format!("the description is over {MAX_DESCRIPTION} characters; shorten it"));
    }
    // Only a project skill's trust needs the fingerprint (hashing every file of every user
    // skill at each start would cost for nothing).
    let (files, fingerprint) = files_and_fingerprint(dir, &text, origin == Origin::Project);
    let trust = Trust::Approved;
    Ok(Skill { name, description, origin, dir: dir.to_path_buf(), front, body, files, fingerprint, trust })
}

/// `name`: `[a-z0-9-]{1,64}`, not starting or ending with a hyphen.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The YAML front matter between the first two `---` lines, as JSON, and the text after it.
pub fn front_matter(text: &str) -> Result<(Map<String, Value>, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("SKILL.md must start with a --- line that opens the front matter")?;
    let end = rest
        .match_indices("\n---")
        .find(|(at, _)| rest[at + 4..].starts_with('\n') || rest[at + 4..].starts_with("\r\n") || rest.len() == at + 4)
        .map(|(at, _)| at)
        .ok_or("the front matter is not closed by a --- line")?;
    let yaml = &rest[..end];
    let body = rest[end + 4..].trim_start_matches(['\r', '\n']).to_string();
    let docs =
        yaml_rust2::YamlLoader::load_from_str(yaml).map_err(|e| format!("the front matter is not valid YAML: {e}"))?;
    let front = match docs.into_iter().next().map(|d| to_json(&d)) {
        Some(Value::Object(map)) => map,
        _ => return Err("the front matter must be a YAML mapping (name: ..., description: ...)".into()),
    };
    Ok((front, body))
}

/// YAML as JSON: mappings with string keys, sequences, scalars; anything else as its text.
fn to_json(yaml: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match yaml {
        Yaml::String(s) => Value::String(s.clone()),
        // A number as a number, so that it compares equal to the same number in JSON.
        Yaml::Real(s) => s
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(s.clone()), Value::Number),
        Yaml::Integer(n) => Value::from(*n),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Yaml::Hash(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) | Yaml::Real(s) => s.clone(),
                        Yaml::Integer(n) => n.to_string(),
                        Yaml::Boolean(b) => b.to_string(),
                        _ => String::new(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// The folder's files (bounded, no symlinks followed) and a fingerprint over each file's path
/// and content, `SKILL.md` included.
fn files_and_fingerprint(dir: &Path, skill_md: &str, fingerprint: bool) -> (Vec<String>, String) {
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
            let relative = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().into_owned();
            if meta.is_dir() && depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            } else if meta.is_file() && relative != "SKILL.md" && files.len() < MAX_FILES {
                files.push(relative);
            }
        }
    }
    files.sort();
    if !fingerprint {
        return (files, String::new());
    }
    let mut hashed = Vec::with_capacity(skill_md.len());
    hashed.extend_from_slice(b"SKILL.md\0");
    hashed.extend_from_slice(skill_md.as_bytes());
    for file in &files {
        hashed.extend_from_slice(file.as_bytes());
        hashed.push(0);
        let bytes = std::fs::read(dir.join(file)).unwrap_or_default();
        hashed.extend_from_slice(&crate::sha256::digest(&bytes));
    }
    let digest = crate::sha256::digest(&hashed);
    (files, digest[..16].iter().map(|b| format!("{b:02x}")).collect())
}

/// A file of `skill`'s folder by its relative path, bounded at `cap` bytes; never outside the
/// folder (no `..`, no absolute path, no symlink).
pub fn read_file(skill: &Skill, relative: &str, cap: usize) -> Result<String, String> {
    if !skill.files.iter().any(|f| f == relative) {
        return Err(format!("skill {} has no file {relative:?}; its files: {}", skill.name, skill.files.join(", ")));
    }
    let path = skill.dir.join(relative);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("cannot read {relative}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{relative} is not a plain file"));
    }
    let mut bytes = std::fs::read(&path).map_err(|e| format!("cannot read {relative}: {e}"))?;
    let total = bytes.len();
    bytes.truncate(cap);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if total > cap {
        text.push_str(&format!("\n... [file truncated: {total} bytes; cap is {cap} bytes]\n"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_yaml_and_unknown_keys_are_kept() {
        let text = "---\nname: pdf-tools\ndescription: >\n  Fill PDF forms.\nallowed-tools: [Read, Bash]\nmetadata:\n  version: 2\nx-own: true\n---\n# Steps\nDo it.\n";
        let (front, body) = front_matter(text).unwrap();
        assert_eq!(front["name"], "pdf-tools");
        assert_eq!(front["description"], "Fill PDF forms.\n");
        assert_eq!(front["allowed-tools"], serde_json::json!(["Read", "Bash"]));
        assert_eq!(front["metadata"]["version"], 2);
        assert_eq!(front["x-own"], true);
        assert_eq!(body, "# Steps\nDo it.\n");
        assert!(front_matter("no front matter").is_err());
        assert!(front_matter("---\nname: [unclosed\n---\n").is_err());
        assert!(front_matter("---\nname: a\n").is_err());
        assert!(valid_name("pdf-tools-2") && !valid_name("PDF") && !valid_name("-a") && !valid_name(&"a".repeat(65)));
    }
}
