//! Skills a server offers through the MCP skills extension (SEP-2640,
//! `io.modelcontextprotocol/skills`): a listing of entries (`skills/list`), each naming its
//! `SKILL.md` by URI, carrying a verbatim copy of its front matter and the digest and size of
//! every file of the skill. Nothing of a skill is read before it is loaded (not on connect,
//! not on listing); a load reads `SKILL.md` with `resources/read` and uses it only when its
//! size, its SHA-256 digest and its front matter (field by field) agree with the entry; a
//! bundled file is read only when it is listed, and checked the same way. A skill whose files
//! are `"dynamic"` (no digests) is listed but never loaded: nothing could vouch for it.

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use super::Session;
use crate::util::base64_decode;

pub const EXTENSION: &str = "io.modelcontextprotocol/skills";
const LIST: &str = "skills/list";
/// The extension's limits, checked on the entry before anything is read.
pub const MAX_FILES: usize = 512;
pub const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;
/// Pages of `skills/list` read before nod stops.
const MAX_PAGES: usize = 100;
/// Entries kept from one server.
const MAX_SKILLS: usize = 1000;

/// One file of a server skill, as its entry lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct File {
    pub uri: String,
    pub digest: String,
    pub size: u64,
}

/// One entry of a server's `skills/list`.
#[derive(Clone, Debug)]
pub struct ServerSkill {
    pub name: String,
    pub description: String,
    /// The `SKILL.md`'s URI: with the server, the skill's identity.
    pub uri: String,
    pub front: Map<String, Value>,
    /// The files with their digests; `None` for a `"dynamic"` skill, which nod does not load.
    pub files: Option<Vec<File>>,
}

impl ServerSkill {
    /// The skill's folder URI (`skill://a/b` for `skill://a/b/SKILL.md`).
    fn root(&self) -> &str {
        self.uri.rsplit_once('/').map_or("", |(root, _)| root)
    }

    /// The bundled files by their path inside the skill (`SKILL.md` left out).
    pub fn relative_files(&self) -> Vec<String> {
        let prefix = format!("{}/", self.root());
        let files = self.files.iter().flatten();
        files.filter(|f| f.uri != self.uri).filter_map(|f| f.uri.strip_prefix(&prefix).map(str::to_string)).collect()
    }
}

/// Whether the server declared the extension.
pub fn offered(session: &Session) -> bool {
    session.capabilities.get("extensions").and_then(|e| e.get(EXTENSION)).is_some_and(Value::is_object)
}

/// The server's skills (every page), with the entries nod cannot use left out and named.
pub fn list(session: &Session) -> anyhow::Result<(Vec<ServerSkill>, Vec<String>)> {
    if !offered(session) {
        bail!("server {} does not offer skills (the {EXTENSION} extension)", session.name);
    }
    let (mut skills, mut rejected) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
        let page = session
            .request(LIST, params)
            .map_err(anyhow::Error::new)
            .with_context(|| format!("server {}: {LIST}", session.name))?;
        let Some(entries) = page.get("skills").and_then(Value::as_array) else {
            bail!("server {}: the {LIST} answer has no skills array", session.name);
        };
        for entry in entries {
            match entry_of(entry) {
                Ok(skill) if skills.len() < MAX_SKILLS => skills.push(skill),
                Ok(_) => {}
                Err(why) => {
                    let uri = entry.get("uri").and_then(Value::as_str).unwrap_or("(no uri)");
                    rejected.push(format!("{}: {why}", crate::util::one_line(uri)));
                }
            }
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if cursor.as_deref() != Some(next) && next.len() <= 4096 => cursor = Some(next.to_string()),
            Some(_) => bail!("server {}: {LIST} repeated its cursor", session.name),
            None => return Ok((skills, rejected)),
        }
    }
    bail!("server {}: {LIST} sent more than {MAX_PAGES} pages", session.name)
}

/// Checks one listing entry: the fields the extension requires, the URI's last folder the
/// skill's name, the files inside the skill and within the limits, `SKILL.md` among them.
fn entry_of(entry: &Value) -> Result<ServerSkill, String> {
    let uri = entry.get("uri").and_then(Value::as_str).ok_or("no uri")?.to_string();
    let front = entry.get("frontmatter").and_then(Value::as_object).ok_or("no frontmatter object")?.clone();
    let text = |key: &str| front.get(key).and_then(Value::as_str).map(str::to_string);
    let name = text("name").ok_or("the frontmatter has no name")?;
    let description = text("description").ok_or("the frontmatter has no description")?;
    if !crate::config::skills::valid_name(&name) {
        return Err(format!("the name {name:?} is not a skill name"));
    }
    let Some((root, _)) = uri.rsplit_once('/') else { return Err("the uri has no path".into()) };
    if root.rsplit('/').next() != Some(name.as_str()) {
        return Err(format!("the uri's last folder is not the skill's name {name:?}"));
    }
    let files = match entry.get("resources") {
        Some(Value::String(s)) if s == "dynamic" => None,
        Some(Value::Array(items)) => {
            if items.len() > MAX_FILES {
                return Err(format!("{} files, over the {MAX_FILES} the extension allows", items.len()));
            }
            let mut files = Vec::with_capacity(items.len());
            for item in items {
                let file = file_of(item)?;
                let inside = file.uri == uri || file.uri.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'));
                if !inside || file.uri.split('/').any(|segment| segment == "..") {
                    return Err(format!("the file {} is outside the skill", crate::util::one_line(&file.uri)));
                }
                files.push(file);
            }
            let total: u64 = files.iter().map(|f| f.size).sum();
            if total > MAX_TOTAL_BYTES {
                return Err(format!("{total} bytes in all, over the {MAX_TOTAL_BYTES} the extension allows"));
            }
            if !files.iter().any(|f| f.uri == uri) {
                return Err("its resources do not list SKILL.md".into());
            }
            Some(files)
        }
        _ => return Err("resources is neither a list of files nor \"dynamic\"".into()),
    };
    Ok(ServerSkill { name, description, uri, front, files })
}

fn file_of(item: &Value) -> Result<File, String> {
    let uri = item.get("uri").and_then(Value::as_str).ok_or("a file without a uri")?.to_string();
    let digest = item.get("digest").and_then(Value::as_str).unwrap_or("");
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(format!("the file {} has no sha256:<64 hex digits> digest", crate::util::one_line(&uri)));
    }
    let size = item.get("size").and_then(Value::as_u64).ok_or("a file without a size")?;
    Ok(File { uri, digest: digest.to_string(), size })
}

/// A loaded skill: its instructions, verified.
pub struct Loaded {
    pub body: String,
}

/// Loads `skill`: reads its `SKILL.md` and uses it only when size, digest and front matter
/// agree with the entry. Nothing else is read.
pub fn load(session: &Session, skill: &ServerSkill) -> anyhow::Result<Loaded> {
    let files = skill.files.as_ref().with_context(|| {
        format!(
            "skill {} of server {} is \"dynamic\": its files carry no digests, so nod does not load it",
            skill.name, session.name
        )
    })?;
    let entry = files.iter().find(|f| f.uri == skill.uri).expect("checked when listed");
    let bytes = read_verified(session, skill, entry)?;
    let text = String::from_utf8(bytes).map_err(|_| refused(session, skill, "SKILL.md is not UTF-8 text"))?;
    let (front, body) = crate::config::skills::front_matter(&text).map_err(|why| refused(session, skill, &why))?;
    if let Some(key) = differing_key(&front, &skill.front) {
        return Err(refused(session, skill, &format!("its front matter's {key:?} differs from the listing's")));
    }
    Ok(Loaded { body })
}

/// Reads the bundled file `relative` of a loaded skill, only when the entry lists it, and
/// uses it only when size and digest agree.
pub fn read_file(session: &Session, skill: &ServerSkill, relative: &str) -> anyhow::Result<Vec<u8>> {
    let uri = format!("{}/{relative}", skill.root());
    let listed = skill.files.iter().flatten().find(|f| f.uri == uri && f.uri != skill.uri);
    let Some(entry) = listed else {
        bail!(
            "skill {} of server {} lists no file {relative:?}; its files: {}",
            skill.name,
            session.name,
            skill.relative_files().join(", ")
        );
    };
    read_verified(session, skill, entry)
}

fn read_verified(session: &Session, skill: &ServerSkill, entry: &File) -> anyhow::Result<Vec<u8>> {
    let result = session
        .request(crate::mcp::method::RESOURCES_READ, Some(json!({ "uri": entry.uri })))
        .map_err(anyhow::Error::new)
        .with_context(|| format!("server {}: reading {}", session.name, crate::util::one_line(&entry.uri)))?;
    let content = result.get("contents").and_then(Value::as_array).and_then(|c| c.first());
    let bytes = match content {
        Some(c) if c.get("text").is_some_and(Value::is_string) => c["text"].as_str().unwrap_or("").as_bytes().to_vec(),
        Some(c) if c.get("blob").is_some_and(Value::is_string) => base64_decode(c["blob"].as_str().unwrap_or(""))
            .ok_or_else(|| refused(session, skill, "a file's blob is not base64"))?,
        _ => return Err(refused(session, skill, "the read returned no content")),
    };
    // A size that differs fails as a digest would, without hashing what was sent.
    if bytes.len() as u64 != entry.size {
        let why = format!("{} is {} bytes, the listing says {}", short(&entry.uri), bytes.len(), entry.size);
        return Err(refused(session, skill, &why));
    }
    let digest = format!("sha256:{}", crate::sha256::hex(&crate::sha256::digest(&bytes)));
    if digest != entry.digest {
        return Err(refused(session, skill, &format!("{}'s digest is not the listing's", short(&entry.uri))));
    }
    Ok(bytes)
}

fn short(uri: &str) -> String {
    crate::util::one_line(uri.rsplit('/').next().unwrap_or(uri))
}

fn refused(session: &Session, skill: &ServerSkill, why: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "skill {} of server {} was not loaded: {why}; nod uses no content that fails verification",
        skill.name,
        session.name
    )
}

/// The first key (in either) whose value differs between the file's front matter and the
/// listing's copy of it.
pub fn differing_key(file: &Map<String, Value>, listed: &Map<String, Value>) -> Option<String> {
    let keys = file.keys().chain(listed.keys());
    keys.into_iter().find(|key| file.get(*key) != listed.get(*key)).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(resources: Value) -> Value {
        json!({ "uri": "skill://acme/pdf-tools/SKILL.md",
            "frontmatter": { "name": "pdf-tools", "description": "Fill PDF forms." },
            "resources": resources })
    }

    fn file(uri: &str, size: u64) -> Value {
        json!({ "uri": uri, "digest": format!("sha256:{}", "0".repeat(64)), "size": size })
    }

    #[test]
    fn entries_are_checked_before_anything_is_read() {
        let md = "skill://acme/pdf-tools/SKILL.md";
        let ok =
            entry_of(&entry(json!([file(md, 10), file("skill://acme/pdf-tools/references/FORMS.md", 5)]))).unwrap();
        assert_eq!(ok.relative_files(), ["references/FORMS.md"]);
        assert!(entry_of(&entry(json!("dynamic"))).unwrap().files.is_none());
        let outside = entry_of(&entry(json!([file(md, 1), file("skill://acme/other/x.md", 1)]))).unwrap_err();
        assert!(outside.contains("outside the skill"), "{outside}");
        let dotdot = entry_of(&entry(json!([file(md, 1), file("skill://acme/pdf-tools/../x/SKILL.md", 1)])));
        assert!(dotdot.unwrap_err().contains("outside"));
        assert!(entry_of(&entry(json!([file("skill://acme/pdf-tools/a.md", 1)]))).unwrap_err().contains("SKILL.md"));
        assert!(entry_of(&entry(json!({}))).unwrap_err().contains("neither"));
        assert!(entry_of(&entry(json!([file(md, MAX_TOTAL_BYTES + 1)]))).unwrap_err().contains("over the"));
        let many: Vec<Value> = (0..=MAX_FILES).map(|i| file(&format!("skill://acme/pdf-tools/{i}"), 1)).collect();
        assert!(entry_of(&entry(json!(many))).unwrap_err().contains("512"));
        let mut wrong_name = entry(json!([file(md, 1)]));
        wrong_name["frontmatter"]["name"] = json!("other");
        assert!(entry_of(&wrong_name).unwrap_err().contains("last folder"));
        let mut bad_digest = entry(json!([file(md, 1)]));
        bad_digest["resources"][0]["digest"] = json!("sha256:ABC");
        assert!(entry_of(&bad_digest).unwrap_err().contains("digest"));
    }

    #[test]
    fn front_matter_differs_on_any_key_of_either_side() {
        let listed = json!({ "name": "a", "description": "d", "metadata": { "v": 2 } });
        let listed = listed.as_object().unwrap();
        let same =
            crate::config::skills::front_matter("---\nname: a\ndescription: d\nmetadata:\n  v: 2\n---\nx").unwrap().0;
        assert_eq!(differing_key(&same, listed), None);
        let changed =
            crate::config::skills::front_matter("---\nname: a\ndescription: e\nmetadata:\n  v: 2\n---\n").unwrap().0;
        assert_eq!(differing_key(&changed, listed).as_deref(), Some("description"));
        let fewer = crate::config::skills::front_matter("---\nname: a\ndescription: d\n---\n").unwrap().0;
        assert_eq!(differing_key(&fewer, listed).as_deref(), Some("metadata"));
    }
}
