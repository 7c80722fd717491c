//! Model-facing names for MCP tools: `mcp_<server>_<tool>`, sanitized to `[A-Za-z0-9_-]`,
//! at most 64 characters. A name that is too long, or taken already, gets a stable hash
//! suffix (the first 8 hex digits of SHA-256 over `server \0 tool`), so the same identity
//! gets the same alias whatever order servers connected in. An alias is resolved through
//! the table only, never by splitting it.

use std::collections::HashMap;

/// The longest name a Chat Completions endpoint accepts.
pub const MAX_NAME: usize = 64;
/// Characters of the base kept before the hash suffix.
const KEPT: usize = 55;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub server: String,
    pub tool: String,
}

/// Alias ↔ identity, with built-in tool names reserved.
#[derive(Debug, Default, Clone)]
pub struct Aliases {
    by_alias: HashMap<String, Identity>,
    /// server → tool → alias (nested, so a lookup allocates nothing).
    by_identity: HashMap<String, HashMap<String, String>>,
    reserved: Vec<String>,
}

impl Aliases {
    pub fn new(reserved: &[&str]) -> Aliases {
        Aliases { reserved: reserved.iter().map(|s| s.to_string()).collect(), ..Aliases::default() }
    }

    /// The alias of `identity`, assigning one on first sight.
    pub fn alias(&mut self, server: &str, tool: &str) -> String {
        if let Some(alias) = self.existing(server, tool) {
            return alias.to_string();
        }
        let mut base = String::with_capacity(6 + server.len() + tool.len());
        base.push_str("mcp_");
        sanitize_into(&mut base, server, "server");
        base.push('_');
        sanitize_into(&mut base, tool, "tool");
        let free = |name: &str, table: &Aliases| {
            !table.by_alias.contains_key(name) && !table.reserved.iter().any(|r| r == name)
        };
        let alias = if base.len() <= MAX_NAME && free(&base, self) {
            base
        } else {
            let hash = hash8(server, tool);
            let candidate = format!("{}_{hash}", head(&base, KEPT));
            if free(&candidate, self) {
                candidate
            } else {
                (2..)
                    .map(|n| {
                        let suffix = format!("_{hash}_{n}");
                        format!("{}{suffix}", head(&base, MAX_NAME - suffix.len()))
                    })
                    .find(|c| free(c, self))
                    .expect("an unbounded search finds a free name")
            }
        };
        let identity = Identity { server: server.to_string(), tool: tool.to_string() };
        self.by_alias.insert(alias.clone(), identity);
        if let Some(tools) = self.by_identity.get_mut(server) {
            tools.insert(tool.to_string(), alias.clone());
        } else {
            self.by_identity.insert(server.to_string(), HashMap::from([(tool.to_string(), alias.clone())]));
        }
        alias
    }

    /// The identity behind an alias.
    pub fn resolve(&self, alias: &str) -> Option<&Identity> {
        self.by_alias.get(alias)
    }

    /// The alias already given to an identity, if any.
    pub fn existing(&self, server: &str, tool: &str) -> Option<&str> {
        self.by_identity.get(server)?.get(tool).map(String::as_str)
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

fn hash8(server: &str, tool: &str) -> String {
    let mut bytes = server.as_bytes().to_vec();
    bytes.push(0);
    bytes.extend_from_slice(tool.as_bytes());
    crate::sha256::digest(&bytes)[..4].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_sanitized_bounded_unique_and_stable() {
        let mut table = Aliases::new(&["capability_search"]);
        assert_eq!(table.alias("docs", "search"), "mcp_docs_search");
        assert_eq!(table.alias("my.server", "read file"), "mcp_my_server_read_file");
        // A collision (a.b vs a_b) gets the hash suffix.
        let first = table.alias("a.b", "t");
        let second = table.alias("a_b", "t");
        assert_eq!(first, "mcp_a_b_t");
        assert_ne!(first, second);
        assert!(second.starts_with("mcp_a_b_t_") && second.len() <= MAX_NAME);
        let long = table.alias("server", &"x".repeat(100));
        assert_eq!(long.len(), MAX_NAME);
        assert_eq!(table.alias("server", &"x".repeat(100)), long, "stable");
        assert_eq!(table.resolve(&long).unwrap().tool, "x".repeat(100));
        let mut other = Aliases::new(&[]);
        assert_eq!(other.alias("server", &"x".repeat(100)), long, "order-independent for long names");
        assert_eq!(table.alias("", ""), "mcp_server_tool");
        assert!(table.resolve("mcp_docs").is_none(), "never split");
        for alias in [&first, &second, &long] {
            assert!(alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        }
    }
}
