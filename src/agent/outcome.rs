//! How a tool call ended, as typed values: the model-facing JSON is made in one place
//! (`Outcome::content`), and the one-line detail a surface shows is read from the value, never
//! parsed back out of the JSON.

use std::fmt;

use serde_json::{Value, json};

use super::permissions::Denial;

/// A tool's outcome.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// What the model receives, as it is (a marked result, a search document).
    Ok(String),
    /// A document in a built-in's own shape that reports a failure (a subagent's result);
    /// `detail` is its one-line summary.
    FailedDocument {
        content: String,
        detail: String,
    },
    Failed(Failure),
}

/// Why a tool did not give a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The generic failure (agent-reference 2.5); `message` may hold marked server text.
    Execution { tool: String, message: String },
    /// The model called a tool it was not given.
    Unsupported { tool: String },
    /// A permission decision, or a person, said no.
    Denied { tool: String, denial: Denial },
    /// A built-in refused with a structured reason of its own (a context-limit rejection).
    Rejected { tool: String, reason: Value },
}

impl Failure {
    pub fn execution(tool: &str, message: impl Into<String>) -> Failure {
        Failure::Execution { tool: tool.to_string(), message: message.into() }
    }

    pub fn denied(tool: &str, denial: Denial) -> Failure {
        Failure::Denied { tool: tool.to_string(), denial }
    }

    /// The failure envelope the model receives.
    pub fn to_json(&self) -> Value {
        match self {
            Failure::Execution { tool, message } => {
                json!({ "error": { "type": "tool_execution_failed", "tool_name": tool, "message": message } })
            }
            Failure::Unsupported { tool } => json!({ "error": { "type": "tool_execution_failed", "tool_name": tool,
                "message": format!("Unsupported tool: {tool}"),
                "suggestion": "Use only the tools advertised for this session." } }),
            Failure::Denied { tool, denial } => denial.to_json(tool),
            Failure::Rejected { tool, reason } => {
                json!({ "error": { "type": "tool_execution_failed", "tool_name": tool, "message": reason.to_string() } })
            }
        }
    }

    /// One line for a person.
    fn line(&self) -> String {
        match self {
            Failure::Execution { message, .. } => {
                message.lines().find(|l| !l.trim().is_empty() && !l.starts_with('<')).unwrap_or("").to_string()
            }
            Failure::Unsupported { tool } => format!("Unsupported tool: {tool}"),
            Failure::Denied { denial, .. } => denial.message().to_string(),
            Failure::Rejected { reason, .. } => {
                let name = reason.as_object().and_then(|o| o.values().next()).and_then(|v| v.get("name"));
                format!("rejected by the context limit {}", name.and_then(Value::as_str).unwrap_or("?"))
            }
        }
    }
}

/// A failure is also what the check right before the transport refuses with: the session
/// carries it as an error and the agent takes it back by type.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line())
    }
}

impl std::error::Error for Failure {}

impl Outcome {
    pub fn failed(tool: &str, message: impl Into<String>) -> Outcome {
        Outcome::Failed(Failure::execution(tool, message))
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok(_))
    }

    /// What the model receives.
    pub fn content(&self) -> String {
        match self {
            Outcome::Ok(content) | Outcome::FailedDocument { content, .. } => content.clone(),
            Outcome::Failed(failure) => failure.to_json().to_string(),
        }
    }

    /// The first line of a failure (at most 120 characters), for the surface; empty on
    /// success.
    pub fn detail(&self) -> String {
        let line = match self {
            Outcome::Ok(_) => return String::new(),
            Outcome::FailedDocument { detail, .. } => detail.clone(),
            Outcome::Failed(failure) => failure.line(),
        };
        crate::util::one_line(&line).chars().take(120).collect()
    }
}

impl From<Failure> for Outcome {
    fn from(failure: Failure) -> Outcome {
        Outcome::Failed(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_render_once_and_their_detail_is_read_from_the_value() {
        let marked = "<untrusted_external source=\"mcp\">\nthe disk is full\n</untrusted_external>";
        let outcome = Outcome::failed("mcp_fs_write", marked);
        assert!(!outcome.is_ok());
        assert_eq!(outcome.detail(), "the disk is full");
        let value: Value = serde_json::from_str(&outcome.content()).unwrap();
        assert_eq!(value["error"]["type"], "tool_execution_failed");
        assert_eq!(value["error"]["message"], marked);
        let denied = Outcome::from(Failure::denied("mcp_fs_write", Denial::PolicyDenied));
        assert_eq!(denied.detail(), "Tool access was denied by configured policy");
        assert_eq!(Outcome::Ok("fine".into()).detail(), "");
        assert_eq!(Outcome::from(Failure::Unsupported { tool: "x".into() }).detail(), "Unsupported tool: x");
    }
}
