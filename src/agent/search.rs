//! `capability_search` ranking (agent-reference 4.1), exactly: the query is split into
//! lowercase tokens of `[a-z0-9]` (two characters or more, first occurrence kept); each token
//! scores 3 if it appears in the alias, tool name, title or server, 2 in the description, 1
//! in the top-level input property names, 1 in the server's instructions. Score 0 drops a
//! candidate; ties go to the alias in byte order. Resources are ranked the same way over
//! their name, title, uri and description.

use serde_json::Value;

/// Where a tool's searchable text lies in its server's `Text`: its alias, name, title and
/// server; its description; its top-level input property names; all lowercased once when the
/// server's listing is indexed. Tokens are alphanumeric, so the spaces and newlines between
/// the parts never join two of them into a match.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fields {
    names: (u32, u32),
    description: (u32, u32),
    properties: (u32, u32),
}

/// The searchable text of one server's tools, in one buffer.
#[derive(Debug, Default, Clone)]
pub struct Text(String);

impl Text {
    /// Appends `tool`'s text; returns where it lies.
    pub fn add(&mut self, alias: &str, server: &str, tool: &Value) -> Fields {
        let text = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or("");
        let buf = &mut self.0;
        let part = |buf: &mut String, pieces: &mut dyn Iterator<Item = &str>| {
            let start = buf.len();
            for piece in pieces {
                buf.push_str(piece);
                buf.push(' ');
            }
            buf[start..].make_ascii_lowercase();
            buf.push('\n');
            (start as u32, (buf.len() - 1) as u32)
        };
        let names = part(buf, &mut [alias, text("name"), text("title"), server].into_iter());
        let description = part(buf, &mut std::iter::once(text("description")));
        let keys = tool.get("inputSchema").and_then(|s| s.get("properties")).and_then(Value::as_object);
        let properties = part(buf, &mut keys.into_iter().flat_map(|k| k.keys().map(String::as_str)));
        Fields { names, description, properties }
    }

    fn get(&self, (start, end): (u32, u32)) -> &str {
        self.0.get(start as usize..end as usize).unwrap_or("")
    }
}

/// The query's tokens.
pub fn tokens(query: &str) -> Vec<String> {
    let lower = query.to_ascii_lowercase();
    let mut out: Vec<String> = Vec::new();
    for token in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        if token.len() >= 2 && !out.iter().any(|t| t == token) {
            out.push(token.to_string());
        }
    }
    out
}

/// Which of `tokens` a server's instructions contain (the same for each of its tools).
pub fn instruction_hits(tokens: &[String], instructions: &str) -> Vec<bool> {
    let lower = instructions.to_ascii_lowercase();
    tokens.iter().map(|t| lower.contains(t.as_str())).collect()
}

/// A tool's score for the query's tokens; `instructions` is `instruction_hits` of its server.
pub fn score(tokens: &[String], text: &Text, fields: &Fields, instructions: &[bool]) -> u32 {
    let (names, description, properties) =
        (text.get(fields.names), text.get(fields.description), text.get(fields.properties));
    tokens
        .iter()
        .zip(instructions)
        .map(|(t, in_instructions)| {
            3 * u32::from(names.contains(t.as_str()))
                + 2 * u32::from(description.contains(t.as_str()))
                + u32::from(properties.contains(t.as_str()))
                + u32::from(*in_instructions)
        })
        .sum()
}

/// A resource's score: 3 in its name, title or uri, 2 in its description.
pub fn resource_score(tokens: &[String], resource: &Value) -> u32 {
    let text = |key: &str| resource.get(key).and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let names = format!("{} {} {}", text("name"), text("title"), text("uri"));
    let description = text("description");
    tokens
        .iter()
        .map(|t| 3 * u32::from(names.contains(t.as_str())) + 2 * u32::from(description.contains(t.as_str())))
        .sum()
}

/// Orders scored matches best first, ties by alias (bytes).
pub fn rank<T>(matches: &mut [(u32, &str, T)]) {
    matches.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.as_bytes().cmp(b.1.as_bytes())));
}

/// Whether `query` names `server` as a whole word (`[A-Za-z0-9_-]` word characters).
pub fn names_server(query: &str, server: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    query.split(|c: char| !word(c)).any(|w| w.eq_ignore_ascii_case(server))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tokens_are_lowercase_deduplicated_and_two_characters_or_more() {
        assert_eq!(tokens("Read a FILE, read_file!"), ["read", "file"]);
        assert!(tokens("a ! ?").is_empty());
    }

    #[test]
    fn ranking_follows_the_weights_and_breaks_ties_by_alias() {
        let search = json!({ "name": "search", "description": "Find documents", "inputSchema": { "properties": { "query": {} } } });
        let fetch = json!({ "name": "fetch", "description": "Fetch a page of documents by query" });
        let other = json!({ "name": "zzz", "description": "unrelated" });
        let t = tokens("search documents query");
        let none = [false; 3];
        let mut text = Text::default();
        let fields = [
            text.add("mcp_docs_search", "docs", &search),
            text.add("mcp_web_fetch", "web", &fetch),
            text.add("mcp_x_zzz", "x", &other),
        ];
        // search: name 3 + description 2 (documents) + property 1 (query) = 6.
        assert_eq!(score(&t, &text, &fields[0], &none), 6);
        // fetch: description has documents and query: 2 + 2.
        assert_eq!(score(&t, &text, &fields[1], &none), 4);
        // Only the server's instructions mention documents.
        let hits = instruction_hits(&t, "Use for DOCUMENTS");
        assert_eq!(hits, [false, true, false]);
        assert_eq!(score(&t, &text, &fields[2], &hits), 1);
        let mut matches = vec![(2, "mcp_b_t", 0), (6, "mcp_z", 1), (2, "mcp_a_t", 2)];
        rank(&mut matches);
        assert_eq!(matches, [(6, "mcp_z", 1), (2, "mcp_a_t", 2), (2, "mcp_b_t", 0)]);
        assert_eq!(score(&tokens("??"), &text, &fields[0], &[]), 0);
    }

    #[test]
    fn a_match_never_spans_two_fields() {
        let tool =
            json!({ "name": "ab", "description": "Gh", "inputSchema": { "properties": { "cd": {}, "ef": {} } } });
        let mut text = Text::default();
        let fields = text.add("mcp_s_ab", "s", &tool);
        assert_eq!(score(&tokens("cd ef"), &text, &fields, &[false, false]), 2);
        assert_eq!(score(&tokens("cdef"), &text, &fields, &[false]), 0);
        assert_eq!(score(&tokens("ghcd"), &text, &fields, &[false]), 0);
        assert_eq!(score(&tokens("GH"), &text, &fields, &[false]), 2);
    }

    #[test]
    fn a_server_is_named_as_a_whole_word() {
        assert!(names_server("search the Docs server", "docs"));
        assert!(!names_server("search the docsy server", "docs"));
        assert!(names_server("use my-server now", "my-server"));
    }
}
