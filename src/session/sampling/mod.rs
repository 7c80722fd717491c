//! Sampling: a server asks the client's model for a completion (`sampling/createMessage`).
//! nod declares `sampling` only where a model is configured (`nod ask`, the shell, `nod acp`,
//! and `nod mcp tool call`) and answers with its own provider, never silently: a rule in
//! settings.json allows or denies a server (`"sampling": {"docs": "allow"}`), full-access mode
//! allows every other server (read at each request, so a mode changed in the session applies),
//! and without a rule the person is asked on the surface (the shell's prompt, `nod ask
//! --prompt-permissions`, ACP `session/request_permission`, `nod mcp tool call` on a terminal),
//! shown the server, the messages, the token limit and the model that would answer; "for the
//! session" allows that server until the session ends; where nobody can be asked it is
//! declined, saying how to allow it.
//!
//! The request becomes one separate model request (never part of the conversation): the
//! server's system prompt and messages (text, and images as data URLs), `maxTokens` capped by
//! nod, temperature and stop sequences, sent to the surface's current model; the answer goes
//! back as `{model, stopReason, role, content}`. Nothing of the conversation is shared whatever
//! `includeContext` says and `modelPreferences` never picks another model. A request's own
//! tools are offered as the server describes them, never nod's MCP tools: the model's calls go
//! back to the server as `tool_use` content, and the server's next request answers them with
//! `tool_result`s (checked: every use answered, results alone in their message). Bounded: the request's size,
//! its images, the tokens, two requests in flight per server and twenty per server in one
//! turn (a server that samples in a loop is refused with a clear message after that).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::dispatch::{InboundHandler, Responder, ServerRequest};
use crate::jsonrpc::ResponseError;
use crate::provider::{Finish, Model, Request};
use crate::session::elicit::{Asked, InputRequired};

mod request;
use request::{Ready, request_of, shown_block};

pub const METHOD: &str = "sampling/createMessage";
const MAX_IN_FLIGHT: usize = 2;
/// Sampling requests of one server in one turn (in one process for `nod ask` and `nod mcp`).
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

/// Whether the surface is in full-access mode now: asked at each request, so a mode
/// changed during the session (`/permissions`, ACP `session/set_mode`) applies at once.
pub type FullAccess = Box<dyn Fn() -> bool + Send + Sync>;

pub struct Sampler {
    /// The model that answers: the surface's, swapped when the person changes it (`/model`).
    model: Mutex<Arc<dyn Model>>,
    rules: HashMap<String, Rule>,
    full_access: FullAccess,
    /// Whether the surface has `--full-access` to suggest (`nod mcp` has not).
    full_access_flag: bool,
    /// Servers the person allowed for the rest of the session (`[a]`, ACP `allow_always`).
    granted: Mutex<std::collections::HashSet<String>>,
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
        full_access: FullAccess,
        asks: Option<crossbeam_channel::Sender<Asked>>,
    ) -> Sampler {
        Sampler {
            model: Mutex::new(model),
            rules,
            full_access,
            full_access_flag: true,
            granted: Mutex::default(),
            asks,
            stats: Arc::default(),
            counts: Mutex::default(),
        }
    }

    /// For a surface without `--full-access` (`nod mcp`): its refusals do not suggest it.
    pub fn without_full_access(mut self) -> Sampler {
        self.full_access_flag = false;
        self
    }

    /// The model that answers from now on.
    pub fn set_model(&self, model: Arc<dyn Model>) {
        *self.model.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = model;
    }

    fn model(&self) -> Arc<dyn Model> {
        self.model.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Whether `server` may sample, or why not, or that the person decides.
    fn decide(&self, server: &str) -> Verdict {
        match self.rules.get(server) {
            Some(Rule::Deny) => {
                Verdict::Declined(format!("declined: sampling is denied for server {server} in settings.json"))
            }
            Some(Rule::Allow) => Verdict::Allowed,
            None if (self.full_access)() => Verdict::Allowed,
            None if self.granted().contains(server) => Verdict::Allowed,
            None => Verdict::Ask,
        }
    }

    /// Puts the request to the person; whether they allowed it. Declined when nobody can be
    /// asked, or no answer came within ten minutes.
    fn ask(&self, server: &str, params: &Value) -> Result<(), String> {
        let or_flag = if self.full_access_flag { ", or --full-access" } else { "" };
        let how = format!("allow it with {{\"sampling\": {{\"{server}\": \"allow\"}}}} in settings.json{or_flag}");
        let Some(asks) = &self.asks else { return Err(format!("declined: nobody here can approve sampling; {how}")) };
        let messages: Vec<Value> = params
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| {
                let blocks = match &m["content"] {
                    Value::Array(blocks) => blocks.iter().collect(),
                    block => vec![block],
                };
                let text: Vec<String> = blocks.iter().map(|b| shown_block(b)).collect();
                let text = text.join("\n");
                let shown: String = crate::util::terminal_safe(&text).chars().take(SHOWN).collect();
                json!({ "role": m.get("role").cloned().unwrap_or(Value::Null), "text": shown })
            })
            .collect();
        let mut asked = json!({ "server": server, "messages": messages, "maxTokens": params.get("maxTokens"),
            "model": self.model().config().model });
        // The server's own tools the model may call (their calls go back to the server).
        let tools: Vec<&str> = params
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect();
        if !tools.is_empty() {
            asked["tools"] = json!(tools);
        }
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
            Ok(Ok(answer)) if answer["approved"] == true => {
                if answer["session"] == true {
                    self.granted().insert(server.to_string());
                }
                Ok(())
            }
            Ok(Ok(answer)) if answer["asked"] == false => {
                Err(format!("declined: sampling needs approval and nobody could be asked here; {how}"))
            }
            Ok(_) => Err(format!("declined by the user; {how}")),
            Err(_) => Err(format!("declined: nobody answered within {} minutes; {how}", ASK_LIMIT.as_secs() / 60)),
        }
    }

    fn granted(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.granted.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
                "declined: server {server} asked for {MAX_PER_SERVER} samplings in this turn already; nod answers no more of its requests until the next turn"
            ));
        }
        if *in_flight >= MAX_IN_FLIGHT {
            return Err(format!("declined: server {server} has {MAX_IN_FLIGHT} sampling requests in flight already"));
        }
        *in_flight += 1;
        *total += 1;
        Ok(())
    }

    /// A new turn of the surface's conversation: every server may sample `MAX_PER_SERVER`
    /// times again (requests in flight still count as in flight).
    pub fn begin_turn(&self) {
        for (_, total) in self.counts().values_mut() {
            *total = 0;
        }
    }

    fn release(&self, server: &str) {
        if let Some((in_flight, _)) = self.counts().get_mut(server) {
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    /// The answer to one request, from the model.
    fn sample(&self, ready: &Ready) -> Result<Value, ResponseError> {
        let req = Request {
            messages: &ready.messages,
            tools: &ready.tools,
            tool_choice_none: ready.tools_none,
            sampling: Some(&ready.sampling),
        };
        let never = crate::util::Trigger::default();
        let model = self.model();
        let completion = model
            .complete(&req, &never, &mut |_| {})
            .map_err(|err| ResponseError::new(crate::jsonrpc::INTERNAL_ERROR, format!("the model failed: {err}")))?;
        self.stats.requests.fetch_add(1, Ordering::SeqCst);
        if let Some(usage) = completion.usage {
            self.stats.input_tokens.fetch_add(usage.input, Ordering::SeqCst);
            self.stats.output_tokens.fetch_add(usage.output, Ordering::SeqCst);
        }
        let model_name = &model.config().model;
        if ready.tools.is_empty() || completion.calls.is_empty() {
            let stop = match completion.finish {
                Finish::Length => "maxTokens",
                Finish::Other(reason) if reason == "stop_sequence" => "stopSequence",
                _ => "endTurn",
            };
            return Ok(json!({ "model": model_name, "stopReason": stop, "role": "assistant",
                "content": { "type": "text", "text": completion.text } }));
        }
        // The model's tool calls go back to the server, which runs its own tools: only tools
        // the request offered, each with an object of arguments.
        let mut content = Vec::with_capacity(completion.calls.len() + 1);
        if !completion.text.is_empty() {
            content.push(json!({ "type": "text", "text": completion.text }));
        }
        for call in &completion.calls {
            if !ready.tools.iter().any(|t| t.name == call.name) {
                let why =
                    format!("the model called {}, which the request does not offer", crate::util::one_line(&call.name));
                return Err(ResponseError::new(crate::jsonrpc::INTERNAL_ERROR, why));
            }
            let input = match serde_json::from_str::<Value>(&call.arguments) {
                Ok(input @ Value::Object(_)) => input,
                _ => {
                    let why = format!("the model's arguments for {} are not a JSON object", call.name);
                    return Err(ResponseError::new(crate::jsonrpc::INTERNAL_ERROR, why));
                }
            };
            content.push(json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": input }));
        }
        Ok(json!({ "model": model_name, "stopReason": "toolUse", "role": "assistant", "content": content }))
    }
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
            map.insert("sampling".into(), json!({ "tools": {} }));
        }
        capabilities
    }

    fn request(&self, req: ServerRequest, responder: Responder) {
        if req.method != METHOD {
            return self.inner.request(req, responder);
        }
        // A request nod could not send is refused before anyone is asked about it.
        let ready = match request_of(&req.params) {
            Ok(ready) => ready,
            Err((code, why)) => {
                log::warn!("server {}: sampling request refused: {why}", req.server);
                return responder.respond(Err(ResponseError::new(code, why)));
            }
        };
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
            let answer = sampler.sample(&ready);
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
    fn rules_read_allow_and_deny_and_name_what_they_cannot_read() {
        let (rules, issues) = rules(&[json!({ "docs": "allow", "fs": "deny", "x": "maybe" })]);
        assert_eq!((rules.get("docs"), rules.get("fs"), issues.len()), (Some(&Rule::Allow), Some(&Rule::Deny), 1));
    }

    #[test]
    fn a_server_samples_twenty_times_a_turn_and_again_in_the_next() {
        let env = |name: &str| (name == "NOD_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_string());
        let config = crate::provider::config::resolve(Some("m"), &Default::default(), &env).unwrap();
        let model = Arc::new(crate::provider::Provider::new(config));
        let sampler = Sampler::new(model, HashMap::new(), Box::new(|| true), None);
        for _ in 0..MAX_PER_SERVER {
            sampler.admit("fx").unwrap();
            sampler.release("fx");
        }
        assert!(sampler.admit("fx").unwrap_err().contains("20 samplings in this turn already"));
        sampler.admit("other").unwrap();
        sampler.begin_turn();
        sampler.admit("fx").unwrap();
        // In flight stays in flight across turns.
        sampler.admit("fx").unwrap();
        sampler.begin_turn();
        assert!(sampler.admit("fx").unwrap_err().contains("in flight already"));
    }
}
