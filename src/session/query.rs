//! The questions `nod mcp tool|resource|prompt` put to one server, asked of a `&Session`
//! and answered as data: a resource's contents, a prompt's messages, completion values, and
//! why nod will not call a tool. Whoever holds the session asks: `nod mcp` the one server it
//! connected for the command, the shell the server its agent uses, so a stateful server
//! sees one client. Printing the answers belongs to the front ends (`cmd`).

use serde_json::{Map, Value, json};

use super::catalog::{self, Listing};
use super::{Session, context};
use crate::dispatch::CallError;
use crate::mcp::method;

/// Why a query has no answer although the server answered (or was not asked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// The server does not declare the capability the query needs (nothing was sent).
    NotOffered { server: String, what: &'static str, capability: &'static str },
    /// The server says the resource does not exist (2026-07-28: -32602 on resources/read).
    NotFound { server: String, method: &'static str, message: String },
    /// The answer lacks what the method promises.
    Malformed { server: String, why: String },
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::NotOffered { server, what, capability } => {
                write!(f, "server {server} does not offer {what} (no {capability} capability)")
            }
            QueryError::NotFound { server, method, message } => write!(f, "server {server}: {method}: {message}"),
            QueryError::Malformed { server, why } => write!(f, "server {server}: {why}"),
        }
    }
}

impl std::error::Error for QueryError {}

/// What keeps nod from calling a tool the server lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Its schema is one nod cannot use; the reason.
    Unusable(String),
    /// It requires MCP Tasks (execution.taskSupport "required"), which nod does not implement.
    TaskRequired,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unusable(why) => write!(f, "is unusable: {why}"),
            Refusal::TaskRequired => {
                f.write_str("requires MCP Tasks (execution.taskSupport \"required\"), which nod does not implement")
            }
        }
    }
}

/// Why nod will not call `tool`, from the server's `listing`. A tool the listing does not
/// have is left to the server: its own answer says more than nod could.
pub fn refusal(listing: &Listing, tool: &str) -> Option<Refusal> {
    if let Some(why) = listing.unusable(tool) {
        return Some(Refusal::Unusable(why.to_string()));
    }
    listing.find(tool).is_some_and(catalog::requires_task).then_some(Refusal::TaskRequired)
}

/// `resources/read`: the whole result, which has a `contents` array.
pub fn read_resource(session: &Session, uri: &str) -> anyhow::Result<Value> {
    let server = &session.name;
    let answer = session.request(method::RESOURCES_READ, Some(json!({ "uri": uri })));
    // 2026-07-28 says "not found" with -32602 (-32002 before, which the call error's kind
    // already says).
    if let Err(CallError::Rpc(error)) = &answer
        && error.code == -32602
        && session.is_modern()
    {
        let message = crate::util::one_line(&error.message);
        return Err(QueryError::NotFound { server: server.clone(), method: method::RESOURCES_READ, message }.into());
    }
    let result = context(answer, server, "resources/read")?;
    if !result.get("contents").is_some_and(Value::is_array) {
        let why = "resources/read answered without contents".to_string();
        return Err(QueryError::Malformed { server: server.clone(), why }.into());
    }
    Ok(result)
}

/// `prompts/get` with string `arguments` (none when `None`).
pub fn get_prompt(session: &Session, name: &str, arguments: Option<Value>) -> anyhow::Result<Value> {
    let mut params = json!({ "name": name });
    if let Some(arguments) = arguments {
        params["arguments"] = arguments;
    }
    context(session.request(method::PROMPTS_GET, Some(params)), &session.name, &format!("prompt {name}"))
}

/// `completion/complete` of `argument`, typed so far as `value`, for `reference` (a
/// `ref/prompt` or `ref/resource`), with the `known` values of the other arguments.
pub fn complete(
    session: &Session,
    reference: Value,
    argument: &str,
    value: &str,
    known: &[(String, String)],
) -> anyhow::Result<Value> {
    if !session.has("completions") {
        let server = session.name.clone();
        return Err(QueryError::NotOffered { server, what: "completion", capability: "completions" }.into());
    }
    let mut params = json!({ "ref": reference, "argument": { "name": argument, "value": value } });
    if !known.is_empty() {
        let arguments: Map<String, Value> = known.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        params["context"] = json!({ "arguments": arguments });
    }
    context(session.request(method::COMPLETE, Some(params)), &session.name, "completion/complete")
}
