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
//! `includeContext` says, `modelPreferences` never picks another model, and tools in a request
//! are refused, so nod's MCP tools are never offered through it. Bounded: the request's size,
//! its images, the tokens, two requests in flight per server and twenty per server in one
//! process (a server that samples in a loop is refused with a clear message after that).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::dispatch::{InboundHandler, Responder, ServerRequest};
use crate::jsonrpc::ResponseError;
use crate::provider::{Finish, Message, Model, Part, Request, Sampling};
use crate::session::elicit::{Asked, InputRequired};

pub const METHOD: &str = "sampling/createMessage";
/// The most tokens a sampling request may ask for.
pub const MAX_TOKENS: u64 = 4096;
/// The most text one request may carry.
const MAX_BYTES: usize = 256 * 1024;
/// The most image data (base64) one request may carry.
const MAX_IMAGE_BYTES: usize = 4 * 1024 * 1024;
/// The image types OpenAI-compatible endpoints take.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
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
        let asked = json!({ "server": server, "messages": messages, "maxTokens": params.get("maxTokens"),
            "model": self.model().config().model });
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
        let model = self.model();
        let completion = model
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
        Ok(json!({ "model": model.config().model, "stopReason": stop, "role": "assistant",
            "content": { "type": "text", "text": completion.text } }))
    }
}

/// A content block as the approval question shows it: its text, or what it is.
fn shown_block(block: &Value) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str);
    match field("type") {
        Some("text") => field("text").unwrap_or("").to_string(),
        Some("image") => format!(
            "[image: {}, {} bytes of base64]",
            field("mimeType").unwrap_or("?"),
            field("data").map_or(0, str::len)
        ),
        Some(other) => format!("[{other} content]"),
        None => "[content without a type]".to_string(),
    }
}

/// The model request a sampling request asks for: the system prompt, then the messages
/// (text, and images as data URLs), and its settings with `maxTokens` capped.
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
    let mut image_bytes = 0;
    for message in list {
        let blocks = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            block => vec![block.clone()],
        };
        let mut parts = Vec::with_capacity(blocks.len());
        for block in &blocks {
            let field = |key: &str| block.get(key).and_then(Value::as_str);
            match field("type") {
                Some("text") => {
                    let text = field("text").unwrap_or("");
                    bytes += text.len();
                    parts.push(Part::Text(text.to_string()));
                }
                Some("image") => {
                    let mime = field("mimeType").unwrap_or("");
                    let data = field("data").unwrap_or("");
                    if !IMAGE_TYPES.contains(&mime) {
                        return Err(format!(
                            "nod's sampling takes images of type {}, not {mime:?}",
                            IMAGE_TYPES.join(", ")
                        ));
                    }
                    if data.is_empty()
                        || !data.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                    {
                        return Err("an image's data is not base64".into());
                    }
                    image_bytes += data.len();
                    parts.push(Part::Image { mime: mime.to_string(), data: data.to_string() });
                }
                Some(other) => return Err(format!("nod's sampling takes text and images, not {other} content")),
                None => return Err("a message's content has no type".into()),
            }
        }
        let role = message.get("role").and_then(Value::as_str);
        let only_text = parts.iter().all(|p| matches!(p, Part::Text(_)));
        messages.push(match role {
            Some("user") if only_text => Message::User(Part::text_of(&parts)),
            Some("user") => Message::UserParts(parts),
            Some("assistant") if only_text => Message::Assistant { text: Part::text_of(&parts), calls: Vec::new() },
            Some("assistant") => return Err("an assistant message of a sampling request must be text".into()),
            _ => return Err("a message's role must be user or assistant".into()),
        });
    }
    if image_bytes > MAX_IMAGE_BYTES {
        return Err(format!(
            "the request carries {image_bytes} bytes of images, over the {} MiB nod sends",
            MAX_IMAGE_BYTES >> 20
        ));
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
    fn requests_become_capped_requests_of_text_and_images_and_tools_are_refused() {
        let params = json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": "hi" } }],
            "systemPrompt": "be brief", "maxTokens": 100_000, "temperature": 0.2, "stopSequences": ["END"] });
        let (messages, sampling) = request_of(&params).unwrap();
        assert_eq!(messages, [Message::System("be brief".into()), Message::User("hi".into())]);
        assert_eq!(sampling, Sampling { max_tokens: MAX_TOKENS, temperature: Some(0.2), stop: vec!["END".into()] });
        let mut with_tools = params.clone();
        with_tools["tools"] = json!([{ "name": "x" }]);
        assert!(request_of(&with_tools).unwrap_err().contains("no tools"));
        let image = |mime: &str, data: &str| {
            json!({ "messages": [{ "role": "user", "content": [{ "type": "text", "text": "what is it?" },
                { "type": "image", "data": data, "mimeType": mime }] }], "maxTokens": 5 })
        };
        let (messages, _) = request_of(&image("image/png", "iVBORw0K")).unwrap();
        let parts =
            vec![Part::Text("what is it?".into()), Part::Image { mime: "image/png".into(), data: "iVBORw0K".into() }];
        assert_eq!(messages, [Message::UserParts(parts)]);
        // On the wire: OpenAI's content parts, the image as a data URL.
        assert_eq!(
            serde_json::to_value(&messages[0]).unwrap()["content"][1],
            json!({ "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0K" } })
        );
        assert!(request_of(&image("image/png", "")).unwrap_err().contains("not base64"));
        assert!(request_of(&image("image/png", "a\"b")).unwrap_err().contains("not base64"));
        assert!(request_of(&image("image/svg+xml", "PHN2Zz4=")).unwrap_err().contains("not \"image/svg+xml\""));
        let huge = "A".repeat(MAX_IMAGE_BYTES + 4);
        assert!(request_of(&image("image/png", &huge)).unwrap_err().contains("bytes of images"));
        let audio = json!({ "messages": [{ "role": "user", "content": { "type": "audio", "data": "AAAA", "mimeType": "audio/wav" } }], "maxTokens": 5 });
        assert!(request_of(&audio).unwrap_err().contains("not audio"));
        assert!(request_of(&json!({ "messages": [], "maxTokens": 5 })).is_err());
        let (rules, issues) = rules(&[json!({ "docs": "allow", "fs": "deny", "x": "maybe" })]);
        assert_eq!((rules.get("docs"), rules.get("fs"), issues.len()), (Some(&Rule::Allow), Some(&Rule::Deny), 1));
    }
}
