//! Failures as a user sees them: a kind (the same few words in every JSON error, nod-mcp(1)
//! JSON OUTPUT), a message, the server it concerns, and the exit code. The kind comes from
//! the first typed cause in an error's chain (`CallError`, `TransportError`, `AuthError`,
//! `ConfigError`, `QueryError`, the front end's own `Failure`); the message is the chain,
//! with a timeout naming the setting that ran out and how to change it.

use serde_json::{Value, json};

use super::Exit;
use crate::config::ConfigError;
use crate::dispatch::{CallError, Limit};
use crate::oauth::AuthError;
use crate::session::query::QueryError;
use crate::transport::TransportError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Usage,
    Config,
    Connection,
    Timeout,
    Protocol,
    ToolError,
    InputRequired,
    Unauthorized,
    NotFound,
    Interrupted,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Usage => "usage",
            Kind::Config => "config",
            Kind::Connection => "connection",
            Kind::Timeout => "timeout",
            Kind::Protocol => "protocol",
            Kind::ToolError => "tool_error",
            Kind::InputRequired => "input_required",
            Kind::Unauthorized => "unauthorized",
            Kind::NotFound => "not_found",
            Kind::Interrupted => "interrupted",
        }
    }

    pub fn exit(self) -> Exit {
        match self {
            Kind::ToolError => Exit::ToolError,
            Kind::InputRequired => Exit::InputRequired,
            Kind::Interrupted => Exit::Interrupted,
            _ => Exit::Failure,
        }
    }
}

/// A failure the front end raises knowing its kind. `code` and `data` carry a server's
/// JSON-RPC error into the JSON report.
#[derive(Debug)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
    pub code: Option<i64>,
    pub data: Option<Value>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// An error of this kind.
pub fn fail(kind: Kind, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Failure { kind, message: message.into(), code: None, data: None })
}

/// The kind of `err`: its first typed cause, if it has one.
pub fn kind_of(err: &anyhow::Error) -> Option<Kind> {
    err.chain().find_map(|cause| {
        if let Some(failure) = cause.downcast_ref::<Failure>() {
            Some(failure.kind)
        } else if let Some(query) = cause.downcast_ref::<QueryError>() {
            Some(match query {
                QueryError::NotOffered { .. } | QueryError::NotFound { .. } => Kind::NotFound,
                QueryError::Malformed { .. } => Kind::Protocol,
            })
        } else if let Some(call) = cause.downcast_ref::<CallError>() {
            Some(call_kind(call))
        } else if let Some(transport) = cause.downcast_ref::<TransportError>() {
            Some(transport_kind(transport))
        } else if cause.downcast_ref::<AuthError>().is_some() {
            Some(Kind::Unauthorized)
        } else if cause.downcast_ref::<ConfigError>().is_some()
            || cause.downcast_ref::<crate::session::MissingVariable>().is_some()
        {
            Some(Kind::Config)
        } else if cause.downcast_ref::<crate::cli::UsageError>().is_some() {
            Some(Kind::Usage)
        } else {
            None
        }
    })
}

pub fn call_kind(err: &CallError) -> Kind {
    match err {
        CallError::Rpc(error) if error.code == RESOURCE_NOT_FOUND => Kind::NotFound,
        CallError::Rpc(_) | CallError::Invalid { .. } => Kind::Protocol,
        CallError::Timeout { .. } => Kind::Timeout,
        CallError::Cancelled(_) => Kind::Interrupted,
        CallError::Disconnected(cause) | CallError::Transport(cause) => transport_kind(cause),
        CallError::TooLarge(_) => Kind::Usage,
        CallError::NotOffered(_) => Kind::NotFound,
        CallError::Refused(_) => Kind::Usage,
    }
}

/// MCP: the resource does not exist.
const RESOURCE_NOT_FOUND: i64 = -32002;

fn transport_kind(err: &TransportError) -> Kind {
    match err {
        TransportError::Unauthorized { .. } | TransportError::Http { status: 401 | 403 } => Kind::Unauthorized,
        TransportError::Timeout => Kind::Timeout,
        TransportError::Protocol { .. } | TransportError::BadAnswer(_) => Kind::Protocol,
        _ => Kind::Connection,
    }
}

/// The message of `err`: its chain joined by ": ", a timeout saying how to change the
/// setting that ran out, a program that could not start named with the fix.
pub fn message(err: &anyhow::Error) -> String {
    let parts: Vec<String> = err.chain().map(part).collect();
    // A context that repeats its cause (anyhow!("{e}")) is shown once.
    let mut out: Vec<String> = Vec::new();
    for part in parts {
        if out.last().is_none_or(|last| !last.ends_with(&part)) {
            out.push(part);
        }
    }
    out.join(": ")
}

fn part(cause: &(dyn std::error::Error + 'static)) -> String {
    match cause.downcast_ref::<CallError>() {
        Some(call) => call_message(call),
        None => match cause.downcast_ref::<TransportError>() {
            Some(transport) => transport_message(transport),
            None => cause.to_string(),
        },
    }
}

/// A call's failure as the front end shows it.
pub fn call_message(err: &CallError) -> String {
    match err {
        CallError::Timeout { limit: Some(limit), .. } => with_hint(&err.to_string(), limit),
        CallError::Disconnected(cause) | CallError::Transport(cause) => transport_message(cause),
        other => other.to_string(),
    }
}

fn transport_message(err: &TransportError) -> String {
    match err {
        TransportError::Spawn { program, reason } => format!(
            "could not start the program {}: {reason}; install it or put it on PATH, or fix the server's command with nod mcp add",
            serde_json::Value::from(crate::util::one_line(program))
        ),
        other => other.to_string(),
    }
}

/// `no answer within 60 s (operation_timeout_ms; use --timeout or set it in the profile)`.
fn with_hint(text: &str, limit: &Limit) -> String {
    let flag = if limit.setting == "startup_timeout_ms" { "--startup-timeout" } else { "--timeout" };
    match text.strip_suffix(')') {
        Some(open) => format!("{open}; use {flag} or set it in the profile)"),
        None => text.to_string(),
    }
}

/// A server's JSON-RPC error in the chain, for `code` and `data`.
fn rpc_error(err: &anyhow::Error) -> Option<(i64, Option<Value>)> {
    err.chain().find_map(|cause| {
        if let Some(Failure { code: Some(code), data, .. }) = cause.downcast_ref::<Failure>() {
            return Some((*code, data.clone()));
        }
        match cause.downcast_ref::<CallError>() {
            Some(CallError::Rpc(error)) => Some((error.code, error.data.clone())),
            _ => None,
        }
    })
}

/// `{"error": {"kind", "message", "server"?, "code"?, "data"?}}`. `redact` applies to every
/// string the server may have chosen.
pub fn to_json(
    kind: Kind,
    message: &str,
    server: Option<&str>,
    err: Option<&anyhow::Error>,
    redact: &dyn Fn(&str) -> String,
) -> Value {
    let mut error = json!({ "kind": kind.as_str(), "message": message });
    if let Some(server) = server {
        error["server"] = json!(server);
    }
    if let Some((code, data)) = err.and_then(rpc_error) {
        error["code"] = json!(code);
        if let Some(data) = data {
            error["data"] = redact_value(&data, redact);
        }
    }
    json!({ "error": error })
}

/// A JSON value with every string passed through `redact`.
pub fn redact_value(value: &Value, redact: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(text) => Value::String(redact(text)),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_value(v, redact)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), redact_value(v, redact))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_timeout_names_its_setting_and_the_flag() {
        let limit = Limit { setting: "operation_timeout_ms", value: Duration::from_secs(60), stretched: None };
        let err = anyhow::Error::new(CallError::Timeout { after: Duration::from_secs(60), limit: Some(limit) })
            .context("server fx: tool slow");
        assert_eq!(kind_of(&err), Some(Kind::Timeout));
        assert_eq!(
            message(&err),
            "server fx: tool slow: no answer within 60 s (operation_timeout_ms; use --timeout or set it in the profile)"
        );
    }

    #[test]
    fn kinds_come_from_the_first_typed_cause() {
        let err = fail(Kind::NotFound, "no server named x");
        assert_eq!(kind_of(&err), Some(Kind::NotFound));
        let err = anyhow::anyhow!("plain");
        assert_eq!(kind_of(&err), None);
        let spawn = TransportError::Spawn { program: "npx".into(), reason: "No such file".into() };
        let err = anyhow::Error::new(spawn).context("server fx");
        assert_eq!(kind_of(&err), Some(Kind::Connection));
        assert!(message(&err).contains("could not start the program \"npx\""), "{}", message(&err));
    }
}
