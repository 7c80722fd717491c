//! Sampling: a server asks the client's model for a completion (`sampling/createMessage`).
//! nod declares `sampling` only where a model is configured (`nod ask`, the shell, `nod acp`)
//! and answers with its own provider, never silently: a rule in settings.json allows or
//! denies a server (`"sampling": {"docs": "allow"}`), `--full-access` allows every server,
//! and without a rule the person is asked on the surface (the shell's prompt, `nod ask
//! --prompt-permissions`, ACP `session/request_permission`), shown the server, the messages,
//! the token limit and the model that would answer; where nobody can be asked it is declined,
//! saying how to allow it.
//!
//! The request becomes one separate model request (never part of the conversation): the
//! server's system prompt and messages (text), `maxTokens` capped by nod, temperature and stop
//! sequences; the answer goes back as `{model, stopReason, role, content}`. Nothing of the
//! conversation is shared whatever `includeContext` says, and tools in a request are refused,
//! so nod's MCP tools are never offered through it. Bounded: the request's size, the tokens,
//! two requests in flight per server and twenty per server in one process (a server that
//! samples in a loop is refused with a clear message after that).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::dispatch::{InboundHandler, Responder, ServerRequest};
use crate::jsonrpc::ResponseError;
use crate::provider::{Finish, Message, Model, Request, Sampling};
use crate::session::elicit::{Asked, InputRequired};

pub const METHOD: &str = "sampling/createMessage";
/// The most tokens a sampling request may ask for.
pub const MAX_TOKENS: u64 = 4096;
/// The most text one request may carry.
const MAX_BYTES: usize = 256 * 1024;
const MAX_IN_FLIGHT: usize = 2;
/// Sampling requests of one server in one process.
pub const MAX_PER_SERVER: usize = 20;
/// The error code MCP gives a declined sampling request.
const DECLINED: i64 = -1;
/// How long a person has to answer the question.
const ASK_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);
/// The text of each message the question shows.
const SHOWN: usize = 500;

/// What sampling cost, for `nod ask --json`.
#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub input_tokens: AtomicU64,
    pub output_tokens: AtomicU64,
}

/// A server's rule: allow or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Allow,
    Deny,
}

/// Reads `"sampling": {"<server>": "allow"|"deny"}` (either layer of settings.json).
pub fn rules(settings: &[Value]) -> (HashMap<String, Rule>, Vec<String>) {
    let (mut rules, mut issues) = (HashMap::new(), Vec::new());
    for layer in settings {
        let Some(map) = layer.as_object() else {
            issues.push("sampling in settings.json must be an object of server names; ignored".to_string());
            continue;
        };
        for (server, rule) in map {
            match rule.as_str() {
                Some("allow") => rules.insert(server.clone(), Rule::Allow),
                Some("deny") => rules.insert(server.clone(), Rule::Deny),
                _ => {
                    issues.push(format!("sampling.{server} in settings.json must be \"allow\" or \"deny\"; ignored"));
                    None
                }
            };
        }
    }
    (rules, issues)
}

/// What the rules say of a server's request.
enum Verdict {
    Allowed,
    Declined(String),
    /// No rule: the person decides.
    Ask,
}

pub struct Sampler {
    model: Arc<dyn Model>,
    rules: HashMap<String, Rule>,
    full_access: bool,
    /// Where the question goes; none on a surface that cannot ask.
    asks: Option<crossbeam_channel::Sender<Asked>>,
    pub stats: Arc<Stats>,
    /// Per server: requests in flight, requests so far.
    counts: Mutex<HashMap<String, (usize, usize)>>,
}

impl Sampler {
    pub fn new(
        model: Arc<dyn Model>,
        rules: HashMap<String, Rule>,
        full_access: bool,
        asks: Option<crossbeam_channel::Sender<Asked>>,
    ) -> Sampler {
        Sampler { model, rules, full_access, asks, stats: Arc::default(), counts: Mutex::default() }
    }

    /// Whether `server` may sample, or why not, or that the person decides.
    fn decide(&self, server: &str) -> Verdict {
        match self.rules.get(server) {
            Some(Rule::Deny) => {
                Verdict::Declined(format!("declined: sampling is denied for server {server} in settings.json"))
            }
            Some(Rule::Allow) => Verdict::Allowed,
            None if self.full_access => Verdict::Allowed,
            None => Verdict::Ask,
        }
    }

    /// Puts the request to the person; whether they allowed it. Declined when nobody can be
    /// asked, or no answer came within ten minutes.
    fn ask(&self, server: &str, params: &Value) -> Result<(), String> {
        let how =
            format!("allow it with {{\"sampling\": {{\"{server}\": \"allow\"}}}} in settings.json, or --full-access");
        let Some(asks) = &self.asks else { return Err(format!("declined: nobody here can approve sampling; {how}")) };
        let messages: Vec<Value> = params
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| {
                let text = m["content"].get("text").and_then(Value::as_str).unwrap_or("(not text)");
                let shown: String = crate::util::terminal_safe(text).chars().take(SHOWN).collect();
                json!({ "role": m.get("role").cloned().unwrap_or(Value::Null), "text": shown })
            })
            .collect();
        let asked = json!({ "server": server, "messages": messages, "maxTokens": params.get("maxTokens"),
            "model": self.model.config().model });
        let (tx, rx) = crossbeam_channel::bounded(1);
        let input = InputRequired {
            server: server.to_string(),
            mode: "sampling".into(),
            message: format!("server {server} asks the model for a completion"),
            requested_schema: None,
            url: None,
            elicitation_id: None,
        };
        let responder = Responder::local(tx, Arc::default());
        if asks.send(Asked { input, responder, sampling: Some(asked) }).is_err() {
            return Err(format!("declined: nobody here can approve sampling; {how}"));
        }
        match rx.recv_timeout(ASK_LIMIT) {
            Ok(Ok(answer)) if answer["approved"] == true => Ok(()),
            Ok(Ok(answer)) if answer["asked"] == false => {
                Err(format!("declined: sampling needs approval and nobody could be asked here; {how}"))
            }
            Ok(_) => Err(format!("declined by the user; {how}")),
            Err(_) => Err(format!("declined: nobody answered within {} minutes; {how}", ASK_LIMIT.as_secs() / 60)),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, (usize, usize)>> {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a slot for `server`, or says which bound it ran into.
    fn admit(&self, server: &str) -> Result<(), String> {
        let mut counts = self.counts();
        let (in_flight, total) = counts.entry(server.to_string()).or_default();
        if *total >= MAX_PER_SERVER {
            return Err(format!(
                "declined: server {server} asked for {MAX_PER_SERVER} samplings already; nod answers no more in this process"
            ));
        }
        if *in_flight >= MAX_IN_FLIGHT {
            return Err(format!("declined: server {server} has {MAX_IN_FLIGHT} sampling requests in flight already"));
        }
        *in_flight += 1;
        *total += 1;
        Ok(())
    }

    fn release(&self, server: &str) {
        if let Some((in_flight, _)) = self.counts().get_mut(server) {
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    /// The answer to one request, from the model.
    fn sample(&self, params: &Value) -> Result<Value, ResponseError> {
        let invalid = |why: String| ResponseError::new(crate::jsonrpc::INVALID_PARAMS, why);
        let (messages, sampling) = request_of(params).map_err(invalid)?;
        let req = Request { messages: &messages, tools: &[], tool_choice_none: false, sampling: Some(&sampling) };
        let never = crate::util::Trigger::default();
        let completion = self
            .model
            .complete(&req, &never, &mut |_| {})
            .map_err(|err| ResponseError::new(crate::jsonrpc::INTERNAL_ERROR, format!("the model failed: {err}")))?;
        self.stats.requests.fetch_add(1, Ordering::SeqCst);
        if let Some(usage) = completion.usage {
            self.stats.input_tokens.fetch_add(usage.input, Ordering::SeqCst);
            self.stats.output_tokens.fetch_add(usage.output, Ordering::SeqCst);
        }
        let stop = match completion.finish {
            Finish::Length => "maxTokens",
            Finish::Other(reason) if reason == "stop_sequence" => "stopSequence",
            _ => "endTurn",
        };
        Ok(json!({ "model": self.model.config().model, "stopReason": stop, "role": "assistant",
            "content": { "type": "text", "text": completion.text } }))
    }
}

/// The model request a sampling request asks for: the system prompt, then the messages
/// (text only), and its settings with `maxTokens` capped.
fn request_of(params: &Value) -> Result<(Vec<Message>, Sampling), String> {
    if params.get("tools").is_some_and(|t| !t.is_null()) {
        return Err("nod offers no tools in sampling requests".into());
    }
    let list = params.get("messages").and_then(Value::as_array).filter(|m| !m.is_empty());
    let list = list.ok_or("messages must be a non-empty array")?;
    let mut messages = Vec::with_capacity(list.len() + 1);
    let mut bytes = 0;
    if let Some(system) = params.get("systemPrompt").and_then(Value::as_str) {
        bytes += system.len();
        messages.push(Message::System(system.to_string()));
    }
    for message in list {
        let blocks = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            block => vec![block.clone()],
        };
        let mut text = String::new();
        for block in &blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
                Some(other) => return Err(format!("nod's sampling takes text, not {other} content")),
                None => return Err("a message's content has no type".into()),
            }
        }
        bytes += text.len();
        messages.push(match message.get("role").and_then(Value::as_str) {
            Some("user") => Message::User(text),
            Some("assistant") => Message::Assistant { text, calls: Vec::new() },
            _ => return Err("a message's role must be user or assistant".into()),
        });
    }
    if bytes > MAX_BYTES {
        return Err(format!("the request carries {bytes} bytes of text, over the {} KiB nod sends", MAX_BYTES >> 10));
    }
    let max_tokens = params.get("maxTokens").and_then(Value::as_u64).ok_or("maxTokens must be a positive integer")?;
    let stop = params.get("stopSequences").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let sampling = Sampling {
        max_tokens: max_tokens.clamp(1, MAX_TOKENS),
        temperature: params.get("temperature").and_then(Value::as_f64),
        stop: stop.iter().filter_map(Value::as_str).take(4).map(str::to_string).collect(),
    };
    Ok((messages, sampling))
}

/// A server's slot among its requests in flight, given back however the request ends.
struct Slot {
    sampler: Arc<Sampler>,
    server: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.sampler.release(&self.server);
    }
}

/// A surface's handler, with sampling declared and answered by `sampler`.
pub struct WithSampling {
    inner: Arc<dyn InboundHandler>,
    sampler: Arc<Sampler>,
}

impl WithSampling {
    pub fn new(inner: Arc<dyn InboundHandler>, sampler: Arc<Sampler>) -> WithSampling {
        WithSampling { inner, sampler }
    }
}

impl InboundHandler for WithSampling {
    fn capabilities(&self) -> Value {
        let mut capabilities = self.inner.capabilities();
        if let Some(map) = capabilities.as_object_mut() {
            map.insert("sampling".into(), json!({}));
        }
        capabilities
    }

    fn request(&self, req: ServerRequest, responder: Responder) {
        if req.method != METHOD {
            return self.inner.request(req, responder);
        }
        let sampler = self.sampler.clone();
        let server = req.server.clone();
        let verdict = sampler.decide(&server);
        // The slot is taken before any thread or question: a server that floods gets its
        // refusals at once, never a thread each.
        let ask = matches!(verdict, Verdict::Ask);
        let slot = match verdict {
            Verdict::Declined(why) => Err(why),
            _ => sampler.admit(&server).map(|()| Slot { sampler: sampler.clone(), server: server.clone() }),
        };
        let slot = match slot {
            Ok(slot) => slot,
            Err(why) => {
                log::warn!("server {server}: sampling {why}");
                return responder.respond(Err(ResponseError::new(DECLINED, why)));
            }
        };
        // The person's answer and the model's come on a thread of its own: the dispatcher
        // never waits on them.
        let spawned = std::thread::Builder::new().name(format!("nod-sampling:{server}")).spawn(move || {
            let _slot = slot;
            if ask && let Err(why) = sampler.ask(&server, &req.params) {
                log::warn!("server {server}: sampling {why}");
                return responder.respond(Err(ResponseError::new(DECLINED, why)));
            }
            let answer = sampler.sample(&req.params);
            if !responder.is_cancelled() {
                responder.respond(answer);
            }
        });
        if spawned.is_err() {
            log::error!("server {}: no thread for its sampling request", req.server);
        }
    }

    fn notification(&self, server: &str, method_name: &str, params: &Value) {
        self.inner.notification(server, method_name, params);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_become_capped_text_requests_and_tools_or_images_are_refused() {
        let params = json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": "hi" } }],
            "systemPrompt": "be brief", "maxTokens": 100_000, "temperature": 0.2, "stopSequences": ["END"] });
        let (messages, sampling) = request_of(&params).unwrap();
        assert_eq!(messages, [Message::System("be brief".into()), Message::User("hi".into())]);
        assert_eq!(sampling, Sampling { max_tokens: MAX_TOKENS, temperature: Some(0.2), stop: vec!["END".into()] });
        let mut with_tools = params.clone();
        with_tools["tools"] = json!([{ "name": "x" }]);
        assert!(request_of(&with_tools).unwrap_err().contains("no tools"));
        let image = json!({ "messages": [{ "role": "user", "content": { "type": "image", "data": "", "mimeType": "image/png" } }], "maxTokens": 5 });
        assert!(request_of(&image).unwrap_err().contains("not image"));
        assert!(request_of(&json!({ "messages": [], "maxTokens": 5 })).is_err());
        let (rules, issues) = rules(&[json!({ "docs": "allow", "fs": "deny", "x": "maybe" })]);
        assert_eq!((rules.get("docs"), rules.get("fs"), issues.len()), (Some(&Rule::Allow), Some(&Rule::Deny), 1));
    }
}
