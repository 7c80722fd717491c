//! Tool identity and the model-facing names derived from it.
//!
//! A tool is known by its identity, (server, tool). Its alias, the name the model calls it by,
//! is a pure function of that identity, so no alias depends on which other servers exist or
//! the order they started in:
//!
//! - `mcp_<server>_<tool>` when that text can only mean this identity: the server's name has
//!   no `_` (so the first `_` after `mcp_` ends it), the tool's name is made of
//!   `[A-Za-z0-9_-]` only, the whole is at most 64 characters, and it does not end like a
//!   hashed alias;
//! - otherwise the first 47 characters of the canonical name and `_` with 16 hex digits of
//!   SHA-256 over `server \0 tool`.
//!
//! The canonical name, `mcp_<server>_<tool>` sanitized and unbounded, is what permission rules
//! are written against; two identities can share it (`github` + `corp_delete_repo` and
//! `github_corp` + `delete_repo`), and the table says when they do (`contested`), so a rule
//! that names it applies to both with `deny` winning. An alias is resolved through the table
//! only, never by splitting it.

use std::collections::HashMap;

/// The longest name a Chat Completions endpoint accepts.
pub const MAX_NAME: usize = 64;
/// Hex digits of the hash suffix.
const HASH_DIGITS: usize = 16;
/// Characters of the canonical name kept before the hash suffix.
const KEPT: usize = MAX_NAME - HASH_DIGITS - 1;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    pub server: String,
    pub tool: String,
}

impl Identity {
    pub fn new(server: &str, tool: &str) -> Identity {
        Identity { server: server.to_string(), tool: tool.to_string() }
    }

    pub fn canonical(&self) -> String {
        canonical(&self.server, &self.tool)
    }
}

/// `mcp_<server>_<tool>` with each character outside `[A-Za-z0-9_-]` as `_` (an empty part
/// as `server` or `tool`), unbounded: what permission rules match.
pub fn canonical(server: &str, tool: &str) -> String {
    let mut base = String::with_capacity(6 + server.len() + tool.len());
    base.push_str("mcp_");
    sanitize_into(&mut base, server, "server");
    base.push('_');
    sanitize_into(&mut base, tool, "tool");
    base
}

/// The alias of an identity (see the module comment).
pub fn alias(server: &str, tool: &str) -> String {
    let base = canonical(server, tool);
    let clean =
        |text: &str| !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let plain = clean(server)
        && !server.contains('_')
        && clean(tool)
        && base.len() <= MAX_NAME
        && !looks_hashed(&base)
        && !super::builtin::is_builtin(&base);
    if plain { base } else { format!("{}_{}", head(&base, KEPT), hash(server, tool)) }
}

/// Whether `name` ends like a hashed alias (`_` and 16 lowercase hex digits).
fn looks_hashed(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > HASH_DIGITS
        && bytes[bytes.len() - HASH_DIGITS - 1] == b'_'
        && bytes[bytes.len() - HASH_DIGITS..].iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// Alias ↔ identity for the tools seen so far, and how many identities share each canonical
/// name.
#[derive(Debug, Default, Clone)]
pub struct Aliases {
    by_alias: HashMap<String, Identity>,
    /// server → tool → alias (nested, so a lookup allocates nothing).
    by_identity: HashMap<String, HashMap<String, String>>,
    /// canonical name → the identities that have it.
    canonical: HashMap<String, Vec<Identity>>,
}

impl Aliases {
    /// The alias of an identity, recording it. `None` in the one case an alias cannot be
    /// given: another identity already has the same one (a 64-bit hash collision, which only
    /// a server trying to take another's name would make); the later one is left out.
    pub fn alias(&mut self, server: &str, tool: &str) -> Option<String> {
        if let Some(alias) = self.existing(server, tool) {
            return Some(alias.to_string());
        }
        let alias = alias(server, tool);
        let identity = Identity::new(server, tool);
        if let Some(owner) = self.by_alias.get(&alias) {
            log::warn!(
                "MCP server {server}'s tool {tool:?} is left out: its name {alias} is taken by server {}'s tool {:?}",
                owner.server,
                owner.tool
            );
            return None;
        }
        self.canonical.entry(identity.canonical()).or_default().push(identity.clone());
        self.by_alias.insert(alias.clone(), identity);
        self.by_identity.entry(server.to_string()).or_default().insert(tool.to_string(), alias.clone());
        Some(alias)
    }

    /// The identity behind an alias.
    pub fn resolve(&self, alias: &str) -> Option<&Identity> {
        self.by_alias.get(alias)
    }

    /// The alias already given to an identity, if any.
    pub fn existing(&self, server: &str, tool: &str) -> Option<&str> {
        self.by_identity.get(server)?.get(tool).map(String::as_str)
    }

    /// The other identities that share `identity`'s canonical name.
    pub fn sharing(&self, identity: &Identity) -> Vec<&Identity> {
        self.canonical
            .get(&identity.canonical())
            .map_or_else(Vec::new, |all| all.iter().filter(|i| *i != identity).collect())
    }

    /// Every canonical name that more than one identity has, with those identities (sorted).
    pub fn shared(&self) -> Vec<(&str, Vec<&Identity>)> {
        let mut shared: Vec<(&str, Vec<&Identity>)> = self
            .canonical
            .iter()
            .filter(|(_, all)| all.len() > 1)
            .map(|(name, all)| {
                let mut all: Vec<&Identity> = all.iter().collect();
                all.sort();
                (name.as_str(), all)
            })
            .collect();
        shared.sort();
        shared
    }

    /// Whether another identity shares `identity`'s canonical name.
    pub fn contested(&self, identity: &Identity) -> bool {
        self.canonical.get(&identity.canonical()).is_some_and(|all| all.len() > 1)
    }
}

/// Appends `text` with each character outside `[A-Za-z0-9_-]` as `_`; empty appends
/// `fallback`.
fn sanitize_into(out: &mut String, text: &str, fallback: &str) {
    if text.is_empty() {
        out.push_str(fallback);
    }
    out.extend(text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }));
}

fn head(text: &str, max: usize) -> &str {
    &text[..text.len().min(max)]
}

fn hash(server: &str, tool: &str) -> String {
    let mut bytes = server.as_bytes().to_vec();
    bytes.push(0);
    bytes.extend_from_slice(tool.as_bytes());
    crate::sha256::digest(&bytes)[..HASH_DIGITS / 2].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(alias: &str) -> bool {
        alias.len() <= MAX_NAME && alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn aliases_are_pure_functions_of_the_identity() {
        assert_eq!(alias("docs", "search"), "mcp_docs_search");
        assert_eq!(alias("everything", "get-sum"), "mcp_everything_get-sum");
        // Lossy or ambiguous text gets the hash suffix, whatever else exists.
        for (server, tool) in [("my.server", "read file"), ("a_b", "t"), ("server", &"x".repeat(100)[..]), ("", "")] {
            let name = alias(server, tool);
            assert!(valid(&name) && looks_hashed(&name), "{name}");
            assert_eq!(name, alias(server, tool), "stable");
        }
        assert!(alias("my.server", "read file").starts_with("mcp_my_server_read_file_"));
        assert_eq!(alias("server", &"x".repeat(100)).len(), MAX_NAME);
        // A tool that spells a hashed alias cannot take one.
        let hashed = alias("github_corp", "delete_repo");
        let tool = hashed.strip_prefix("mcp_github_").unwrap();
        assert_ne!(alias("github", tool), hashed);
        // Nor can a server and tool that spell a built-in's name.
        assert_ne!(alias("read", "resource"), "mcp_read_resource");
    }

    #[test]
    fn two_servers_sharing_a_canonical_name_never_share_an_alias_in_either_order() {
        let a = ("github", "corp_delete_repo");
        let b = ("github_corp", "delete_repo");
        assert_eq!(canonical(a.0, a.1), canonical(b.0, b.1));
        let mut first = Aliases::default();
        let mut second = Aliases::default();
        let (a1, b1) = (first.alias(a.0, a.1).unwrap(), first.alias(b.0, b.1).unwrap());
        let (b2, a2) = (second.alias(b.0, b.1).unwrap(), second.alias(a.0, a.1).unwrap());
        assert_eq!((&a1, &b1), (&a2, &b2), "order-independent");
        assert_ne!(a1, b1);
        assert_eq!(a1, "mcp_github_corp_delete_repo", "the server without `_` has the plain name");
        assert_eq!(first.resolve(&b1), Some(&Identity::new(b.0, b.1)));
        assert!(first.contested(&Identity::new(a.0, a.1)) && first.contested(&Identity::new(b.0, b.1)));
        assert_eq!(first.sharing(&Identity::new(a.0, a.1)), vec![&Identity::new(b.0, b.1)]);
        let mut alone = Aliases::default();
        assert_eq!(alone.alias(b.0, b.1).unwrap(), b1, "no other server changes it");
        assert!(!alone.contested(&Identity::new(b.0, b.1)));
        assert!(first.resolve("mcp_github").is_none(), "never split");
    }
}
