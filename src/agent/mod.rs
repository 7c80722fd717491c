//! The agent: a conversation with a model that reaches MCP tools through capability search,
//! explicit selection and aliases, under nod's permission policy. Front ends (`nod ask`, the
//! shell, ACP) drive it through the `Surface` trait; there is one loop (`turn`).
//!
//! The turn runs on the caller's thread: the model's answer streams in on it, tool calls go
//! out from it one after another, and while a tool runs it also answers the elicitations
//! servers send (through the surface). A `Trigger` cancels a turn: the model request and the
//! turn's MCP calls (one call group) are cancelled at once, on the wire.

pub(crate) mod builtin;
mod call;
pub use call::{SAMPLING, preview, sampling_answer, sampling_approval};
pub(crate) mod catalog;
pub mod limits;
pub mod names;
pub(crate) mod outcome;
pub mod permissions;
pub(crate) mod prompt;
mod reach;
pub(crate) mod search;
pub mod subagent;
#[cfg(test)]
mod tests;
pub(crate) mod text;
pub(crate) mod tools;
mod turn;
pub use turn::STEP_LIMIT;
pub(crate) use turn::keep_answered;

use std::sync::{Arc, Mutex};

use crossbeam_channel::Receiver;
use serde_json::Value;

use crate::provider::{Message, Model, Usage};
use crate::session::elicit::{Asked, InputRequired};
use crate::session::runtime::Runtime;
use catalog::Catalog;
use limits::Limits;
use permissions::Policy;
use reach::Reach;
use text::Marker;

/// How notices are meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

/// An action that needs a person's approval.
#[derive(Clone, Debug)]
pub struct Approval {
    /// The model-facing tool name (the permission name).
    pub tool: String,
    /// For MCP tools: the server and the tool's own name.
    pub server: Option<String>,
    pub original: Option<String>,
    pub arguments: Value,
    /// The subagent that asks, when it is not the agent itself.
    pub agent: Option<String>,
}

impl Approval {
    /// A built-in's approval (no server).
    pub fn builtin(name: &str, arguments: Value) -> Approval {
        Approval { tool: name.to_string(), server: None, original: None, arguments, agent: None }
    }

    /// One line that names what would run: the alias, and for an MCP tool its server and its
    /// own name (several servers may have similar names; the alias alone does not say which).
    pub fn title(&self) -> String {
        let mut title = self.tool.clone();
        if let Some(server) = &self.server {
            title.push_str(&format!(" (server {server}"));
            if let Some(tool) = &self.original {
                title.push_str(&format!(", tool {}", text::Marker::default().plain(tool, 256)));
            }
            title.push(')');
        }
        title
    }
}

/// A person's answer to an approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Once,
    /// Yes for the rest of this session: the whole tool.
    Session,
    /// No, with an optional note for the model.
    Deny(Option<String>),
    /// Ctrl-C at the question: no, and the turn ends.
    Cancel,
}

/// What a surface did with an elicitation.
#[derive(Clone, Debug)]
pub enum Elicited {
    /// The answer for the server: `{"action": ..., "content"?: ...}`.
    Answer(Value),
    /// Nobody can answer here: the turn ends with an input-required result.
    Unanswerable,
    /// This surface cannot show it (an ACP client without that mode): the server gets
    /// `cancel`, and the tool call fails with this message.
    Refused(String),
}

/// What a front end shows and asks. Every method is called on the turn's thread.
pub trait Surface {
    /// Assistant text, as it streams.
    fn text(&mut self, delta: &str);
    /// A new model request begins (1-based).
    fn step(&mut self, _step: usize) {}
    /// A tool call begins; `arguments` is the JSON text the model wrote.
    fn tool_started(&mut self, name: &str, arguments: &str);
    /// The call was admitted and is being sent (after any approval).
    fn tool_running(&mut self) {}
    /// The server reported progress on the running call.
    fn progress(&mut self, _progress: &crate::dispatch::Progress) {}
    /// `detail`: the first line of a failure; `result`: what the model receives (bounded).
    fn tool_finished(&mut self, name: &str, ok: bool, detail: &str, result: &str);
    fn notice(&mut self, level: Level, text: &str);
    /// Asks for approval; `None` when nobody can be asked.
    fn approve(&mut self, request: &Approval) -> Option<Answer>;
    fn elicit(&mut self, request: &InputRequired) -> Elicited;
}

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Completed,
    Failed,
    InputRequired,
    Interrupted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::InputRequired => "input_required",
            Status::Interrupted => "interrupted",
        }
    }
}

/// A turn's record (`nod ask --json`).
#[derive(Clone, Debug)]
pub struct Report {
    pub status: Status,
    /// All assistant text of the turn, steps separated by newlines.
    pub output: String,
    /// The final answer when the turn completed, else empty.
    pub final_output: String,
    pub steps: usize,
    /// Finished tool calls in order: model-facing name and success.
    pub tool_calls: Vec<(String, bool)>,
    pub usage: Option<Usage>,
    pub error: Option<String>,
    pub input_required: Option<InputRequired>,
    /// The turn ended at the step limit (it still counts as completed).
    pub step_limit: bool,
}

/// How the agent is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The most model requests in one turn.
    pub max_steps: usize,
    /// `--system`: replaces the base prompt.
    pub system: Option<String>,
    /// `first_call_tool_choice: "none"`.
    pub first_call_tool_choice_none: bool,
    /// Say once, as a notice, which servers cannot be used when MCP is first needed (the
    /// shell shows its own start-up lines instead).
    pub report_servers: bool,
    /// The configured secrets, redacted from everything that reaches the model.
    pub redactor: crate::util::Redactor,
    /// The installed skills (user skills and approved project skills are offered).
    pub skills: Arc<crate::config::skills::Skills>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_steps: 50,
            system: None,
            first_call_tool_choice_none: false,
            report_servers: true,
            redactor: crate::util::Redactor::default(),
            skills: Arc::default(),
        }
    }
}

pub struct Agent {
    /// None until a model is configured (the shell starts without one).
    provider: Option<Arc<dyn Model>>,
    runtime: Arc<Runtime>,
    asked: Receiver<Asked>,
    pub policy: Arc<Policy>,
    pub limits: Limits,
    options: Options,
    system: String,
    history: Vec<Message>,
    catalog: Catalog,
    /// Servers whose problem was reported already.
    reported: Vec<String>,
    /// What this agent shares with its subagents (and front ends tell it).
    host: Arc<subagent::Host>,
    /// How it reaches MCP: its runtime, or (a subagent) its view of the parent's servers.
    reach: Reach,
    /// The one road for outside text to the model.
    marker: Marker,
    /// Named subagents, kept for this agent's lifetime.
    children: subagent::Children,
    /// Where the conversation is saved as it goes, when it is: shared with the named
    /// subagents, whose lines carry their name (`saved_as`).
    recorder: Option<Arc<Mutex<crate::saved::Recorder>>>,
    saved_as: Option<String>,
    /// Saved conversations of named subagents, taken up when the parent next messages them.
    saved_children: std::collections::BTreeMap<String, Vec<Message>>,
}

impl Agent {
    /// `asked` receives the elicitations of `runtime`'s servers (its inbound handler is a
    /// `PolicyHandler` with `Policy::Fail` sending there).
    pub fn new(
        provider: Option<Arc<dyn Model>>,
        runtime: Arc<Runtime>,
        asked: Receiver<Asked>,
        policy: Arc<Policy>,
        limits: Limits,
        options: Options,
    ) -> Agent {
        let marker = Marker::new(options.redactor.clone());
        let system = prompt::system(options.system.as_deref(), &runtime.names(), &marker);
        Agent {
            provider,
            runtime: runtime.clone(),
            asked,
            policy,
            limits,
            options,
            system,
            history: Vec::new(),
            catalog: Catalog::default(),
            reported: Vec::new(),
            host: subagent::Host::new(runtime.clone()),
            reach: Reach::Runtime,
            marker,
            children: subagent::Children::default(),
            recorder: None,
            saved_as: None,
            saved_children: Default::default(),
        }
    }

    /// Saves the conversation from now on with `recorder` (every message as it is added);
    /// `reset` stops it.
    pub fn save_to(&mut self, recorder: crate::saved::Recorder) {
        self.recorder = Some(Arc::new(Mutex::new(recorder)));
    }

    /// The id of the session the conversation is saved in, if it is.
    pub fn saved_id(&self) -> Option<String> {
        self.recorder.as_ref().map(|r| r.lock().unwrap_or_else(std::sync::PoisonError::into_inner).id().to_string())
    }

    /// Goes on from saved session `loaded`: the model next gets its conversation as it was
    /// (`saved::for_model`), and a named subagent its own when the parent messages it again.
    /// With `recorder` (that session, opened again) the conversation is saved on into it,
    /// starting with the note that closes a turn the process did not finish.
    pub fn go_on(&mut self, loaded: crate::saved::Loaded, recorder: Option<crate::saved::Recorder>) {
        let closed = !crate::saved::ended(&loaded.messages);
        self.history = crate::saved::for_model(loaded.messages);
        self.saved_children = loaded.children;
        if let Some(recorder) = recorder {
            self.save_to(recorder);
            if closed && let Some(note) = self.history.last().cloned() {
                self.save(&note);
            }
        }
    }

    fn save(&self, message: &Message) {
        if let Some(recorder) = &self.recorder {
            let mut recorder = recorder.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            recorder.append(message, self.saved_as.as_deref());
        }
    }

    /// Saves what of `messages` past `*saved` is not saved yet.
    fn save_new(&mut self, messages: &[Message], saved: &mut usize) {
        for message in &messages[(*saved).min(messages.len())..] {
            self.save(message);
        }
        *saved = messages.len();
    }

    /// What this agent shares with its subagents: a front end that closes the agent's session
    /// (ACP) closes it too, so no child request is sent afterwards.
    pub fn host(&self) -> Arc<subagent::Host> {
        self.host.clone()
    }

    /// The built-in tools this agent offers the model (subagents cannot start subagents).
    pub(crate) fn builtins(&self) -> Vec<crate::provider::ToolSpec> {
        builtin::offered(self.reach.is_child()).map(builtin::Builtin::spec).collect()
    }

    /// The model's name, or "" when none is configured.
    pub fn model(&self) -> &str {
        self.provider.as_ref().map_or("", |p| p.config().model.as_str())
    }

    pub fn provider(&self) -> Option<&dyn Model> {
        self.provider.as_deref()
    }

    /// Uses another model (or endpoint) from the next request on.
    pub fn set_provider(&mut self, provider: Arc<dyn Model>) {
        self.provider = Some(provider);
    }

    /// Swaps in another runtime (a reload): its servers' tools are indexed, and selected tools
    /// that no longer resolve are dropped; every subagent view of the old one is dead.
    /// Returns the old runtime.
    pub fn set_runtime(&mut self, runtime: Arc<Runtime>) -> Arc<Runtime> {
        self.host.replace(runtime.clone());
        let old = std::mem::replace(&mut self.runtime, runtime);
        self.system = prompt::system(self.options.system.as_deref(), &self.runtime.names(), &self.marker);
        self.catalog.refresh(&self.runtime, &self.limits);
        let selected = std::mem::take(&mut self.catalog.selected);
        for alias in selected {
            if self.catalog.lookup(&self.runtime, &self.limits, &alias).is_some() {
                self.catalog.selected.push(alias);
            }
        }
        old
    }

    /// Adds a tool to the selected set (the shell's browser), by its model-facing name.
    pub fn select(&mut self, alias: &str) -> bool {
        let found = self.catalog.lookup(&self.runtime, &self.limits, alias).is_some();
        if found {
            self.catalog.select(alias);
        }
        found
    }

    /// The model-facing name of a server's tool.
    pub fn alias(&mut self, server: &str, tool: &str) -> String {
        self.catalog.aliases.alias(server, tool).unwrap_or_else(|| names::alias(server, tool))
    }

    /// The one road for outside text to the model (the shell's browser attaches through it).
    pub fn marker(&self) -> &Marker {
        &self.marker
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Runs `capability_search` as the model would (the same ranking, bounds and auto-load);
    /// returns the document the model would see. For front ends and the benchmark.
    pub fn search(&mut self, query: &str, server: Option<&str>) -> String {
        tools::capability_search(self, query, server).0.content()
    }

    /// Indexes the tools of the ready servers for search (each listing once, and again when
    /// it changes). Done as servers start, so a search only ranks.
    pub fn index_tools(&mut self) {
        self.catalog.refresh(&self.runtime, &self.limits);
    }

    /// A fresh conversation: history, selections, session grants and named subagents are
    /// forgotten (the tool index and its aliases stay: they follow the servers, not the
    /// conversation).
    pub fn reset(&mut self) {
        self.recorder = None;
        self.saved_children.clear();
        self.history.clear();
        self.children.clear();
        self.catalog.selected.clear();
        self.policy.clear_grants();
    }
}
