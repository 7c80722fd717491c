//! `capability_search` ranking (agent-reference 4.1), exactly: the query is split into
//! lowercase tokens of `[a-z0-9]` (two characters or more, first occurrence kept); each token
//! scores 3 if it appears in the alias, tool name, title or server, 2 in the description, 1
//! in the top-level input property names, 1 in the server's instructions. Score 0 drops a
//! candidate; ties go to the alias in byte order. Resources are ranked the same way over
//! their name, title, uri and description.

use serde_json::Value;

/// A tool that may be found.
pub struct Candidate<'a> {
    pub alias: &'a str,
    pub server: &'a str,
    pub tool: &'a Value,
    pub instructions: &'a str,
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

/// A tool's score for the query's tokens.
pub fn score(tokens: &[String], candidate: &Candidate<'_>) -> u32 {
    let text = |key: &str| candidate.tool.get(key).and_then(Value::as_str).unwrap_or("");
    let names =
        format!("{} {} {} {}", candidate.alias, text("name"), text("title"), candidate.server).to_ascii_lowercase();
    let description = text("description").to_ascii_lowercase();
    let properties = candidate
        .tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect::<Vec<_>>().join(" ").to_ascii_lowercase())
        .unwrap_or_default();
    let instructions = candidate.instructions.to_ascii_lowercase();
    tokens
        .iter()
        .map(|t| {
            3 * u32::from(names.contains(t.as_str()))
                + 2 * u32::from(description.contains(t.as_str()))
                + u32::from(properties.contains(t.as_str()))
                + u32::from(instructions.contains(t.as_str()))
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

/// Ranks candidates: best first, ties by alias (bytes). Returns (index, score) of every
/// candidate that scored.
pub fn rank(tokens: &[String], candidates: &[Candidate<'_>]) -> Vec<(usize, u32)> {
    let mut scored: Vec<(usize, u32)> =
        candidates.iter().enumerate().map(|(i, c)| (i, score(tokens, c))).filter(|(_, s)| *s > 0).collect();
    scored.sort_by(|a, b| {
        b.1.cmp(&a.1).then_with(|| candidates[a.0].alias.as_bytes().cmp(candidates[b.0].alias.as_bytes()))
    });
    scored
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
        let candidates = [
            Candidate { alias: "mcp_docs_search", server: "docs", tool: &search, instructions: "" },
            Candidate { alias: "mcp_web_fetch", server: "web", tool: &fetch, instructions: "" },
            Candidate { alias: "mcp_x_zzz", server: "x", tool: &other, instructions: "use for documents" },
        ];
        let t = tokens("search documents query");
        // search: name 3 + description 2 (documents) + property 1 (query) = 6.
        assert_eq!(score(&t, &candidates[0]), 6);
        // fetch: description has documents and query: 2 + 2.
        assert_eq!(score(&t, &candidates[1]), 4);
        assert_eq!(score(&t, &candidates[2]), 1);
        assert_eq!(rank(&t, &candidates), [(0, 6), (1, 4), (2, 1)]);
        let tie = [
            Candidate { alias: "mcp_b_t", server: "b", tool: &other, instructions: "" },
            Candidate { alias: "mcp_a_t", server: "a", tool: &other, instructions: "" },
        ];
        assert_eq!(rank(&tokens("unrelated"), &tie), [(1, 2), (0, 2)]);
        assert!(rank(&tokens("??"), &candidates).is_empty());
    }

    #[test]
    fn a_server_is_named_as_a_whole_word() {
        assert!(names_server("search the Docs server", "docs"));
        assert!(!names_server("search the docsy server", "docs"));
        assert!(names_server("use my-server now", "my-server"));
    }
}
