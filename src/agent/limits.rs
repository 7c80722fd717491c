//! Context limits (bytes): how much MCP-originated text may reach the model. Defaults from
//! nod-reference.md; `settings.json` `context_limits` and `--context-limit name=bytes|off`
//! override them (`off` still means the 64 MiB ceiling).

use serde_json::Value;

/// The ceiling every limit stays under, `off` included.
pub const CEILING: usize = 64 * 1024 * 1024;
/// The default cap on one tool result reaching the model.
pub const TOOL_RESULT_BYTES: usize = 64 * 1024;
/// The smallest cap on one tool result.
pub const MIN_TOOL_RESULT_BYTES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// One MCP tool description.
    pub description: usize,
    /// A capability_search result document.
    pub search_result: usize,
    /// The instructions of one server.
    pub server_instructions: usize,
    /// The schema of one selected tool, and the auto-loading budget of one search.
    pub selected_schema: usize,
    /// One tool result (`max_tool_result_bytes`).
    pub tool_result: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            description: 1024,
            search_result: 16 * 1024,
            server_instructions: 2 * 1024,
            selected_schema: 64 * 1024,
            tool_result: TOOL_RESULT_BYTES,
        }
    }
}

/// A bad limit, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError(pub String);

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitError {}

pub const NAMES: [&str; 4] =
    ["mcp_description_bytes", "mcp_search_result_bytes", "mcp_server_instructions_bytes", "mcp_selected_schema_bytes"];

impl Limits {
    /// Applies `name=bytes|off` (the command-line form).
    pub fn apply_flag(&mut self, spec: &str) -> Result<(), LimitError> {
        let (name, value) = spec
            .split_once('=')
            .ok_or_else(|| LimitError(format!("--context-limit takes name=bytes or name=off, not {spec:?}")))?;
        let bytes = match value.trim() {
            "off" => CEILING,
            number => number.parse::<usize>().map_err(|_| {
                LimitError(format!("--context-limit {name}: {number:?} is not a number of bytes or off"))
            })?,
        };
        self.set(name.trim(), bytes)
    }

    /// Applies settings.json `context_limits` (an object of name → bytes or "off").
    pub fn apply_settings(&mut self, value: &Value) -> Vec<String> {
        let mut issues = Vec::new();
        let Some(map) = value.as_object() else {
            return vec!["context_limits in settings.json is not an object; ignored".into()];
        };
        for (name, value) in map {
            let bytes = match value {
                Value::String(off) if off == "off" => CEILING,
                Value::Number(n) if n.as_u64().is_some() => n.as_u64().map_or(CEILING, |n| n as usize),
                _ => {
                    issues.push(format!("context_limits.{name} must be a number of bytes or \"off\"; ignored"));
                    continue;
                }
            };
            if let Err(err) = self.set(name, bytes) {
                issues.push(format!("{err}; ignored"));
            }
        }
        issues
    }

    fn set(&mut self, name: &str, bytes: usize) -> Result<(), LimitError> {
        let bytes = bytes.min(CEILING);
        match name {
            "mcp_description_bytes" => self.description = bytes,
            "mcp_search_result_bytes" => self.search_result = bytes,
            "mcp_server_instructions_bytes" => self.server_instructions = bytes,
            "mcp_selected_schema_bytes" => self.selected_schema = bytes,
            "max_tool_result_bytes" => self.tool_result = bytes.max(MIN_TOOL_RESULT_BYTES),
            other => {
                return Err(LimitError(format!(
                    "unknown context limit {other:?} (known: {}, max_tool_result_bytes)",
                    NAMES.join(", ")
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn flags_and_settings() {
        let mut limits = Limits::default();
        limits.apply_flag("mcp_search_result_bytes=100").unwrap();
        limits.apply_flag("mcp_selected_schema_bytes=off").unwrap();
        assert_eq!((limits.search_result, limits.selected_schema), (100, CEILING));
        assert!(limits.apply_flag("nope=1").is_err());
        assert!(limits.apply_flag("mcp_description_bytes").is_err());
        let issues =
            limits.apply_settings(&json!({ "mcp_description_bytes": 10, "bad": 1, "max_tool_result_bytes": 5 }));
        assert_eq!(limits.description, 10);
        assert_eq!(limits.tool_result, MIN_TOOL_RESULT_BYTES);
        assert_eq!(issues.len(), 1);
    }
}
