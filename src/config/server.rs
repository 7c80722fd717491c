//! One server entry: the common fields with their defaults, and the stdio or remote part,
//! parsed from the canonical or the compatibility form.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{ConfigIssue, Severity, url, valid_name};

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub enabled: bool,
    pub required: bool,
    pub startup_timeout: Duration,
    pub operation_timeout: Duration,
    pub restart_limit: u32,
    /// `protocol_version`: None finds the server's revision (a `server/discover` probe, then
    /// `initialize`); a revision pins it (no probe for an initialize-era one, no fallback for
    /// 2026-07-28).
    pub protocol_version: Option<crate::mcp::Version>,
    pub transport: Transport,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio(StdioConfig),
    /// Streamable HTTP.
    Http(RemoteConfig),
    /// Legacy HTTP+SSE (2024-11-05).
    Sse(RemoteConfig),
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "http",
            Transport::Sse(_) => "sse",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StdioConfig {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemoteConfig {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub header_env: Vec<(String, String)>,
    pub bearer_token_env: Option<String>,
    pub oauth: Option<OAuthConfig>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthConfig {
    pub resource: Option<String>,
    pub issuer: Option<String>,
    pub client_id: Option<String>,
    pub client_secret_env: Option<String>,
    pub client_metadata_url: Option<String>,
    pub scopes: Option<Vec<String>>,
}

const COMMON: &[&str] =
    &["type", "enabled", "required", "startup_timeout_ms", "operation_timeout_ms", "restart_limit", "protocol_version"];
const STDIO: &[&str] = &["command", "args", "environment", "env", "cwd"];
const REMOTE: &[&str] = &["url", "headers", "header_env", "bearer_token_env", "oauth"];

/// Parses one entry. Warnings (unknown fields) are pushed to `issues`; an error is returned.
pub(super) fn parse(name: &str, value: &Value, issues: &mut Vec<ConfigIssue>) -> Result<ServerConfig, ConfigIssue> {
    parse_entry(name, value, issues, false)
}

/// `project`: a project entry (approved and expanded), where a literal Authorization header
/// is the repository's own business.
pub(super) fn parse_entry(
    name: &str,
    value: &Value,
    issues: &mut Vec<ConfigIssue>,
    project: bool,
) -> Result<ServerConfig, ConfigIssue> {
    let error = |message: String, fix: &str| ConfigIssue {
        server: Some(name.to_string()),
        severity: Severity::Error,
        message,
        fix: fix.to_string(),
    };
    if !valid_name(name) {
        return Err(error(
            "the name may contain only ASCII letters, digits, _ and -".into(),
            "rename the entry, for example with - in place of spaces or dots",
        ));
    }
    let Value::Object(obj) = value else {
        return Err(error(
            "the entry is not a JSON object".into(),
            "write it as {\"command\": [...]} or {\"type\": \"http\", \"url\": ...}",
        ));
    };
    let kind = match obj.get("type") {
        None => {
            if obj.contains_key("command") {
                "stdio"
            } else if obj.contains_key("url") {
                "http"
            } else {
                return Err(error(
                    "the entry has neither command nor url".into(),
                    "add \"command\" for a local server or \"url\" for a remote one",
                ));
            }
        }
        Some(Value::String(kind)) => match kind.as_str() {
            "local" | "stdio" => "stdio",
            "http" | "streamable-http" | "streamableHttp" => "http",
            "sse" => "sse",
            other => {
                return Err(error(
                    format!("unknown type {other:?}"),
                    "use \"stdio\" (or \"local\"), \"http\" or \"sse\"",
                ));
            }
        },
        Some(_) => {
            return Err(error("type is not a string".into(), "use \"stdio\", \"http\" or \"sse\""));
        }
    };
    let common = Common::parse(obj).map_err(|(m, fix)| error(m, fix))?;
    let transport = if kind == "stdio" {
        Transport::Stdio(parse_stdio(obj).map_err(|(m, fix)| error(m, fix))?)
    } else {
        let remote = parse_remote(obj, project).map_err(|(m, fix)| error(m, fix))?;
        if kind == "http" { Transport::Http(remote) } else { Transport::Sse(remote) }
    };
    let known: &[&str] = if kind == "stdio" { STDIO } else { REMOTE };
    for key in obj.keys() {
        if !COMMON.contains(&key.as_str()) && !known.contains(&key.as_str()) {
            issues.push(ConfigIssue {
                server: Some(name.to_string()),
                severity: Severity::Warning,
                message: format!("unknown field {key:?} ignored"),
                fix: "check its spelling against nod-mcp(1)".into(),
            });
        }
    }
    Ok(ServerConfig {
        name: name.to_string(),
        enabled: common.enabled,
        required: common.required,
        startup_timeout: common.startup_timeout,
        operation_timeout: common.operation_timeout,
        restart_limit: common.restart_limit,
        protocol_version: common.protocol_version,
        transport,
    })
}

struct Common {
    enabled: bool,
    required: bool,
    startup_timeout: Duration,
    operation_timeout: Duration,
    restart_limit: u32,
    protocol_version: Option<crate::mcp::Version>,
}

/// The longest timeout nod keeps: 30 days. Larger values (up to u64::MAX) mean "as long as
/// possible" and are capped, so no deadline computation can overflow.
pub const MAX_TIMEOUT_MS: u64 = 30 * 24 * 3600 * 1000;

impl Common {
    fn parse(obj: &Map<String, Value>) -> Result<Common, FieldError> {
        const FIX: &str = "timeouts are positive integers in milliseconds; enabled and required are true or false";
        let flag = |key: &str, default: bool| match obj.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err((format!("{key} must be true or false"), FIX)),
        };
        let millis = |key: &str, default: u64| match obj.get(key) {
            None => Ok(Duration::from_millis(default)),
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Ok(Duration::from_millis(n.min(MAX_TIMEOUT_MS))),
                _ => Err((format!("{key} must be a positive integer (milliseconds)"), FIX)),
            },
        };
        let restart_limit = match obj.get("restart_limit") {
            None => 1,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or(("restart_limit must be a non-negative integer".to_string(), FIX))?,
        };
        let protocol_version = match obj.get("protocol_version") {
            None => None,
            Some(Value::String(text)) if text == "auto" => None,
            Some(Value::String(text)) if crate::mcp::Version::parse(text).is_some() => crate::mcp::Version::parse(text),
            Some(_) => {
                return Err((
                    "protocol_version must be \"auto\" or one of 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
                        .to_string(),
                    "leave it out to let nod find the server's revision",
                ));
            }
        };
        Ok(Common {
            protocol_version,
            enabled: flag("enabled", true)?,
            required: flag("required", false)?,
            startup_timeout: millis("startup_timeout_ms", 30_000)?,
            operation_timeout: millis("operation_timeout_ms", 60_000)?,
            restart_limit,
        })
    }
}

type FieldError = (String, &'static str);

fn parse_stdio(obj: &Map<String, Value>) -> Result<StdioConfig, FieldError> {
    const FIX: &str = "use \"command\": [\"program\", \"arg\", ...], or \"command\": \"program\" with \"args\": [...]";
    let mut argv = match obj.get("command") {
        Some(Value::Array(items)) => strings(items).ok_or(("every item of command must be a string".into(), FIX))?,
        Some(Value::String(program)) => vec![program.clone()],
        Some(_) => {
            return Err(("command must be an array of strings or a string".into(), FIX));
        }
        None => return Err(("a local server needs a command".into(), FIX)),
    };
    match obj.get("args") {
        None => {}
        Some(Value::Array(items)) if matches!(obj.get("command"), Some(Value::String(_))) => {
            argv.extend(strings(items).ok_or(("every item of args must be a string".into(), FIX))?);
        }
        Some(Value::Array(_)) => {
            return Err(("args goes with a string command, not an array command".into(), FIX));
        }
        Some(_) => return Err(("args must be an array of strings".into(), FIX)),
    }
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err(("command is empty".into(), FIX));
    }
    // `environment` is canonical and wins over its alias `env` key by key.
    let mut env = string_map(obj.get("env"), "env")?;
    for (key, value) in string_map(obj.get("environment"), "environment")? {
        env.retain(|(k, _)| *k != key);
        env.push((key, value));
    }
    let cwd = match obj.get("cwd") {
        None => None,
        Some(Value::String(dir)) if !dir.is_empty() => Some(PathBuf::from(dir)),
        Some(_) => {
            return Err(("cwd must be a non-empty string".into(), "give the server's working directory as a path"));
        }
    };
    Ok(StdioConfig { argv, env, cwd })
}

fn parse_remote(obj: &Map<String, Value>, project: bool) -> Result<RemoteConfig, FieldError> {
    let url = match obj.get("url") {
        Some(Value::String(url)) => url.clone(),
        _ => {
            return Err(("a remote server needs a url string".into(), "add \"url\": \"https://...\""));
        }
    };
    url::check(&url).map_err(|problem| {
        (format!("the url {problem}"), "use an https URL, or http://127.0.0.1:PORT/... for a local server")
    })?;
    let headers = string_map(obj.get("headers"), "headers")?;
    if !project && headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization")) {
        return Err((
            "a literal Authorization header is not allowed in the profile".into(),
            "use bearer_token_env, header_env or oauth so the credential stays out of the file",
        ));
    }
    let header_env = string_map(obj.get("header_env"), "header_env")?;
    let bearer_token_env = match obj.get("bearer_token_env") {
        None => None,
        Some(Value::String(var)) if !var.is_empty() => Some(var.clone()),
        Some(_) => {
            return Err((
                "bearer_token_env must be the name of an environment variable".into(),
                "for example \"MY_TOKEN\"",
            ));
        }
    };
    let oauth = match obj.get("oauth") {
        None => None,
        Some(Value::Object(o)) => Some(parse_oauth(o)?),
        Some(_) => {
            return Err(("oauth must be an object".into(), "every oauth field is optional: {} is valid"));
        }
    };
    Ok(RemoteConfig { url, headers, header_env, bearer_token_env, oauth })
}

fn parse_oauth(obj: &Map<String, Value>) -> Result<OAuthConfig, FieldError> {
    let text = |key: &str| match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err((format!("oauth.{key} must be a string"), "see nod-mcp(1), AUTHENTICATION")),
    };
    let scopes = match obj.get("scopes") {
        None => None,
        Some(Value::Array(items)) => {
            Some(strings(items).ok_or(("oauth.scopes must be an array of strings".into(), "for example [\"read\"]"))?)
        }
        Some(_) => {
            return Err(("oauth.scopes must be an array of strings".into(), "for example [\"read\"]"));
        }
    };
    Ok(OAuthConfig {
        resource: text("resource")?,
        issuer: text("issuer")?,
        client_id: text("client_id")?,
        client_secret_env: text("client_secret_env")?,
        client_metadata_url: text("client_metadata_url")?,
        scopes,
    })
}

fn strings(items: &[Value]) -> Option<Vec<String>> {
    items.iter().map(|v| v.as_str().map(str::to_string)).collect()
}

fn string_map(value: Option<&Value>, key: &str) -> Result<Vec<(String, String)>, FieldError> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err((
                    format!("{key}.{k} must be a string"),
                    "every value in this map is a string; quote numbers and booleans",
                )),
            })
            .collect(),
        Some(_) => Err((format!("{key} must be an object of strings"), "for example {\"NAME\": \"value\"}")),
    }
}
