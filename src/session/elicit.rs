//! The client's answer to a server's elicitation, for every surface: a policy that answers at
//! once (`--elicit`), values given in advance (`--elicit-answer`, checked against the
//! requested schema), or a person asked by the front end (`nod mcp` on a terminal, the agent's
//! surfaces through `Asked`, ACP relaying to its client). `fail` and asking both hand the
//! request to the front end, which reports a typed input-required result or asks.

use std::sync::Arc;

use crossbeam_channel::Sender;
use serde_json::{Map, Value, json};

use crate::dispatch::{InboundHandler, Responder, ServerRequest};
use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND, ResponseError};
use crate::mcp::method;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Answer `cancel` and end the command with an input-required result.
    Fail,
    Decline,
    Cancel,
    /// Accept a form with every field's `default`; decline URL requests and forms whose
    /// required fields have no default.
    Defaults,
}

impl Policy {
    pub fn parse(text: &str) -> Option<Policy> {
        Some(match text {
            "fail" => Policy::Fail,
            "decline" => Policy::Decline,
            "cancel" => Policy::Cancel,
            "defaults" => Policy::Defaults,
            _ => return None,
        })
    }
}

/// How a handler answers an elicitation.
#[derive(Clone, Debug, PartialEq)]
pub enum Answering {
    Policy(Policy),
    /// Accept a form with these values when they satisfy its schema, else decline; decline
    /// URL requests.
    Values(Arc<Value>),
    /// Hand every request to the front end, which asks a person.
    Ask,
}

/// What the front end needs to report an elicitation it could not answer.
#[derive(Debug, Clone)]
pub struct InputRequired {
    pub server: String,
    pub mode: String,
    pub message: String,
    pub requested_schema: Option<Value>,
    pub url: Option<String>,
    /// URL mode: the id the server gave this elicitation.
    pub elicitation_id: Option<String>,
}

impl InputRequired {
    pub fn to_json(&self) -> Value {
        let mut out =
            json!({ "status": "input_required", "server": self.server, "mode": self.mode, "message": self.message });
        if let Some(schema) = &self.requested_schema {
            out["requestedSchema"] = schema.clone();
        }
        if let Some(url) = &self.url {
            out["url"] = json!(url);
        }
        if let Some(id) = &self.elicitation_id {
            out["elicitationId"] = json!(id);
        }
        out
    }
}

/// An elicitation handed to the front end (`Policy::Fail`, `Answering::Ask`): it cancels
/// the call or asks a person, then answers the server through `responder`.
pub struct Asked {
    pub input: InputRequired,
    pub responder: Responder,
    /// Instead of an elicitation, a server's sampling request for the person to approve:
    /// what it asks (`server`, `messages`, `maxTokens`, `model`). Answered
    /// `{"approved": true|false}`.
    pub sampling: Option<Value>,
}

pub struct PolicyHandler {
    answering: Answering,
    /// Where requests for the front end go; without it they are cancelled.
    asks: Option<Sender<Asked>>,
    /// The elicitation modes declared to servers (form, url): both, unless a client that
    /// supports fewer says which (ACP). Then every request goes to the front end, which
    /// refuses the modes it cannot show.
    declared: Option<(bool, bool)>,
}

impl PolicyHandler {
    pub fn new(policy: Policy, asks: Option<Sender<Asked>>) -> PolicyHandler {
        PolicyHandler { answering: Answering::Policy(policy), asks, declared: None }
    }

    pub fn answering(answering: Answering, asks: Option<Sender<Asked>>) -> PolicyHandler {
        PolicyHandler { answering, asks, declared: None }
    }

    /// For a front end that relays elicitations to a client supporting these modes.
    pub fn relaying(form: bool, url: bool, asks: Sender<Asked>) -> PolicyHandler {
        PolicyHandler { answering: Answering::Ask, asks: Some(asks), declared: Some((form, url)) }
    }
}

impl InboundHandler for PolicyHandler {
    fn capabilities(&self) -> Value {
        match self.declared {
            None | Some((true, true)) => json!({ "elicitation": { "form": {}, "url": {} } }),
            Some((true, false)) => json!({ "elicitation": { "form": {} } }),
            Some((false, true)) => json!({ "elicitation": { "url": {} } }),
            Some((false, false)) => json!({}),
        }
    }

    fn request(&self, req: ServerRequest, responder: Responder) {
        if req.method == crate::session::sampling::METHOD {
            // A surface with a model answers sampling before this handler (WithSampling).
            let error = ResponseError::new(METHOD_NOT_FOUND, "sampling unavailable: no model configured");
            return responder.respond(Err(error));
        }
        if req.method != method::ELICIT || !req.version.is_some_and(|v| v.has_elicitation()) {
            responder
                .respond(Err(ResponseError::new(METHOD_NOT_FOUND, format!("nod does not support {}", req.method))));
            return;
        }
        // A request without a mode is a form (ELI-3).
        let mode = req.params.get("mode").and_then(Value::as_str).unwrap_or("form").to_string();
        let url_allowed = req.version.is_some_and(|v| v.has_url_elicitation());
        if self.declared.is_none() && mode != "form" && !(mode == "url" && url_allowed) {
            responder.respond(Err(ResponseError::new(
                INVALID_PARAMS,
                format!("nod did not declare elicitation mode {mode:?}"),
            )));
            return;
        }
        let message = req.params.get("message").and_then(Value::as_str).unwrap_or("").to_string();
        let url = req.params.get("url").and_then(Value::as_str).map(str::to_string);
        let elicitation_id = req.params.get("elicitationId").and_then(Value::as_str).map(str::to_string);
        let schema = if mode == "form" { req.params.get("requestedSchema").cloned() } else { None };
        let input =
            InputRequired { server: req.server.clone(), mode, message, requested_schema: schema, url, elicitation_id };
        if let Some(answer) = answer(&self.answering, &input) {
            responder.respond(Ok(answer));
            return;
        }
        match &self.asks {
            Some(tx) => {
                if let Err(unsent) = tx.send(Asked { input, responder, sampling: None }) {
                    unsent.into_inner().responder.respond(Ok(json!({ "action": "cancel" })));
                }
            }
            None => responder.respond(Ok(json!({ "action": "cancel" }))),
        }
    }
}

/// The answer `answering` gives to `input` by itself, or None when the front end must
/// (`Policy::Fail` and `Answering::Ask`). A shell whose servers answer every question with
/// `Fail` applies a command's own `--elicit` this way.
pub fn answer(answering: &Answering, input: &InputRequired) -> Option<Value> {
    let (server, mode, schema) = (&input.server, input.mode.as_str(), input.requested_schema.as_ref());
    let policy = match answering {
        Answering::Policy(policy) => *policy,
        Answering::Ask => return None,
        Answering::Values(values) => return Some(given(server, mode, schema, values)),
    };
    Some(match policy {
        Policy::Fail => return None,
        Policy::Decline => json!({ "action": "decline" }),
        Policy::Cancel => json!({ "action": "cancel" }),
        Policy::Defaults if mode == "form" => match defaults(schema) {
            // The made-up answer must satisfy the requested schema (ELI-10).
            Ok(content) => match schema.map(|s| super::schema::check_instance(s, &content)) {
                Some(Err((field, why))) => {
                    log::warn!(
                        "server {server}: elicitation declined: the default of {field} does not fit the requested schema ({why})"
                    );
                    json!({ "action": "decline" })
                }
                _ => json!({ "action": "accept", "content": content }),
            },
            Err(MissingDefault(field)) => {
                log::warn!("server {server}: elicitation declined: required field {field:?} has no default");
                json!({ "action": "decline" })
            }
        },
        Policy::Defaults => {
            log::warn!("server {server}: URL elicitation declined: nod opens no URL without a person's consent");
            json!({ "action": "decline" })
        }
    })
}

/// The answer to a form from values given in advance: accepted when they satisfy the
/// requested schema, else declined with a warning naming the field.
fn given(server: &str, mode: &str, schema: Option<&Value>, values: &Value) -> Value {
    if mode != "form" {
        log::warn!("server {server}: URL elicitation declined: --elicit-answer answers forms only");
        return json!({ "action": "decline" });
    }
    match schema.map(|s| super::schema::check_instance(s, values)) {
        Some(Err((field, why))) => {
            let what = if field == "the answer" { field } else { format!("field {field:?}") };
            log::warn!("server {server}: elicitation declined: {what} does not fit the requested schema ({why})");
            json!({ "action": "decline" })
        }
        _ => json!({ "action": "accept", "content": values }),
    }
}

/// A required form field without a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingDefault(pub String);

/// The content a form gets when every field takes its default. Fails with the name of a
/// required field that has none.
pub fn defaults(schema: Option<&Value>) -> Result<Value, MissingDefault> {
    let mut content = Map::new();
    let properties = schema.and_then(|s| s.get("properties")).and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        if let Some(default) = property.get("default") {
            let usable = match default {
                Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
                Value::Array(items) => items.iter().all(Value::is_string),
                _ => false,
            };
            if usable {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    let required = schema.and_then(|s| s.get("required")).and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !content.contains_key(name) {
            return Err(MissingDefault(name.to_string()));
        }
    }
    Ok(Value::Object(content))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_every_kind_and_need_required_ones() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "n": {"type": "integer", "default": 42},
            "x": {"type": "number", "default": 2.5},
            "ok": {"type": "boolean", "default": true},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["a"]},
            "free": {"type": "string"}
        }, "required": ["name"]});
        assert_eq!(
            defaults(Some(&schema)).unwrap(),
            json!({"name": "Ada", "n": 42, "x": 2.5, "ok": true, "tags": ["a"]})
        );
        let missing = json!({"type": "object", "properties": {"free": {"type": "string"}}, "required": ["free"]});
        assert_eq!(defaults(Some(&missing)), Err(MissingDefault("free".to_string())));
    }
}
