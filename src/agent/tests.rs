//! The agent loop without processes or sockets: a scripted in-process model (the `Model`
//! seam) and a runtime with no servers, the way `dispatch` is tested over `transport::memory`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::permissions::{Mode, Policy, parse_rules};
use super::{Agent, Answer, Approval, Elicited, Level, Options, Status, Surface};
use crate::dispatch::{Engine, NoInbound};
use crate::provider::{Completion, Finish, Message, Model, ProviderConfig, ProviderError, Request, ToolCall};
use crate::session::Access;
use crate::session::elicit::InputRequired;
use crate::session::runtime::Runtime;
use crate::util::Trigger;

/// A model that answers from a script and records every request's messages and tool names.
struct Script {
    config: ProviderConfig,
    answers: Mutex<VecDeque<Result<Completion, ProviderError>>>,
    seen: Mutex<Vec<(Vec<Message>, Vec<String>)>>,
}

impl Script {
    fn new(answers: Vec<Result<Completion, ProviderError>>) -> Arc<Script> {
        let config = ProviderConfig {
            model: "scripted".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            base_url_from: "a test",
            api_key: None,
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
        };
        Arc::new(Script { config, answers: Mutex::new(answers.into()), seen: Mutex::new(Vec::new()) })
    }

    fn requests(&self) -> Vec<(Vec<Message>, Vec<String>)> {
        self.seen.lock().unwrap().clone()
    }
}

impl Model for Script {
    fn complete(
        &self,
        req: &Request<'_>,
        _cancel: &Trigger,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion, ProviderError> {
        let tools = req.tools.iter().map(|t| t.name.clone()).collect();
        self.seen.lock().unwrap().push((req.messages.to_vec(), tools));
        let answer = self.answers.lock().unwrap().pop_front().unwrap_or_else(|| Ok(text("(script ended)")));
        if let Ok(completion) = &answer {
            on_text(&completion.text);
        }
        answer.map(|mut c| {
            c.streamed = c.text.len();
            c
        })
    }

    fn config(&self) -> &ProviderConfig {
        &self.config
    }

    fn fork(&self) -> Arc<dyn Model> {
        Script::new(Vec::new())
    }
}

fn text(text: &str) -> Completion {
    Completion { text: text.into(), calls: Vec::new(), finish: Finish::Stop, usage: None, streamed: 0 }
}

fn calls(calls: &[(&str, Value)]) -> Completion {
    let calls = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| ToolCall { id: format!("c{i}"), name: name.to_string(), arguments: args.to_string() })
        .collect();
    Completion { text: String::new(), calls, finish: Finish::ToolCalls, usage: None, streamed: 0 }
}

/// What a surface was shown and asked.
#[derive(Default)]
struct Seen {
    notices: Vec<(Level, String)>,
    finished: Vec<(String, bool, String)>,
    approvals: Vec<Approval>,
    answer: Option<Answer>,
}

impl Surface for Seen {
    fn text(&mut self, _delta: &str) {}
    fn tool_started(&mut self, _name: &str, _arguments: &str) {}
    fn tool_finished(&mut self, name: &str, ok: bool, detail: &str, _result: &str) {
        self.finished.push((name.into(), ok, detail.into()));
    }
    fn notice(&mut self, level: Level, text: &str) {
        self.notices.push((level, text.into()));
    }
    fn approve(&mut self, request: &Approval) -> Option<Answer> {
        self.approvals.push(request.clone());
        self.answer.clone()
    }
    fn elicit(&mut self, _request: &InputRequired) -> Elicited {
        Elicited::Unanswerable
    }
}

fn agent(script: &Arc<Script>, rules: Value, max_steps: usize) -> Agent {
    let runtime = Arc::new(Runtime::new(Engine::start(), Vec::new(), Arc::new(NoInbound), Access::default()));
    let mut issues = Vec::new();
    let rules = parse_rules(&rules, "user", &mut issues);
    assert!(issues.is_empty(), "{issues:?}");
    let (_, asked) = crossbeam_channel::unbounded();
    let options = Options { max_steps, ..Options::default() };
    let model: Arc<dyn Model> = script.clone();
    Agent::new(Some(model), runtime, asked, Arc::new(Policy::new(Mode::Ask, rules)), Default::default(), options)
}

fn tool_results(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_step_limit_ends_a_turn_as_completed_with_its_notice() {
    let search = || Ok(calls(&[("capability_search", json!({ "query": "x" }))]));
    let script = Script::new(vec![search(), search(), search()]);
    let mut agent = agent(&script, json!({}), 2);
    let mut seen = Seen::default();
    let report = agent.turn("go", &mut seen, &Trigger::default());
    assert_eq!((report.status, report.steps, report.step_limit), (Status::Completed, 2, true));
    assert_eq!(report.final_output, "", "no answer of the model's");
    assert_eq!(script.requests().len(), 2);
    assert!(seen.notices.iter().any(|(_, t)| t.contains("step limit")), "{:?}", seen.notices);
}

#[test]
fn three_steps_of_malformed_calls_stop_the_loop_without_running_anything() {
    let bad = || Ok(calls(&[("no_such_tool", json!({}))]));
    let script = Script::new(vec![bad(), bad(), bad(), Ok(text("never asked"))]);
    let mut agent = agent(&script, json!({}), 50);
    let mut seen = Seen::default();
    let report = agent.turn("go", &mut seen, &Trigger::default());
    assert_eq!(report.status, Status::Completed);
    assert_eq!(script.requests().len(), 3);
    assert!(report.final_output.contains("malformed"), "{}", report.final_output);
    assert!(
        seen.finished.iter().all(|(name, ok, detail)| name == "no_such_tool" && !ok && detail.contains("Unsupported"))
    );
}

#[test]
fn two_silent_tool_steps_and_an_empty_answer_get_one_summarize_nudge() {
    let search = || Ok(calls(&[("capability_search", json!({ "query": "x" }))]));
    let script = Script::new(vec![search(), search(), Ok(text("")), Ok(text("I searched twice."))]);
    let mut agent = agent(&script, json!({}), 50);
    let report = agent.turn("go", &mut Seen::default(), &Trigger::default());
    assert_eq!(report.final_output, "I searched twice.");
    let requests = script.requests();
    assert_eq!(requests.len(), 4);
    let last = requests[3].0.last().unwrap();
    assert_eq!(last, &Message::User("Summarize what you just did.".into()));
}

#[test]
fn a_retryable_failure_is_asked_again_with_a_notice() {
    let broken = Err(ProviderError::Unavailable { status: 503, retry_after: Some(Duration::ZERO) });
    let script = Script::new(vec![broken, Ok(text("Answer."))]);
    let mut agent = agent(&script, json!({}), 50);
    let mut seen = Seen::default();
    let report = agent.turn("go", &mut seen, &Trigger::default());
    assert_eq!((report.status, report.final_output.as_str()), (Status::Completed, "Answer."));
    assert_eq!(script.requests().len(), 2);
    assert!(seen.notices.iter().any(|(l, t)| *l == Level::Warning && t.contains("Retrying")), "{:?}", seen.notices);
}

#[test]
fn a_failed_turn_stays_in_the_history_closed_for_the_next_one() {
    let script = Script::new(vec![Err(ProviderError::Auth { status: 401 }), Ok(text("Second."))]);
    let mut agent = agent(&script, json!({}), 50);
    let report = agent.turn("first", &mut Seen::default(), &Trigger::default());
    assert_eq!(report.status, Status::Failed);
    agent.turn("second", &mut Seen::default(), &Trigger::default());
    let (messages, _) = &script.requests()[1];
    let texts: Vec<String> = messages
        .iter()
        .skip(1)
        .map(|m| match m {
            Message::User(t) => format!("user: {t}"),
            Message::Assistant { text, .. } => format!("assistant: {text}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(texts[0], "user: first");
    assert!(texts[1].starts_with("assistant: The previous response ended before completion"), "{texts:?}");
    assert_eq!(texts[2], "user: second");
}

#[test]
fn rules_apply_to_built_ins_deny_refuses_and_ask_asks() {
    let step =
        Ok(calls(&[("capability_search", json!({ "query": "x" })), ("mcp_select_tool", json!({ "name": "mcp_a_b" }))]));
    let script = Script::new(vec![step, Ok(text("Done."))]);
    let mut agent = agent(&script, json!({ "capability_search": "deny", "mcp_select_tool": "ask" }), 50);
    let mut seen = Seen { answer: Some(Answer::Deny(Some("not now".into()))), ..Seen::default() };
    agent.turn("go", &mut seen, &Trigger::default());
    assert_eq!(seen.approvals.len(), 1, "only the ask rule asks");
    assert_eq!((seen.approvals[0].tool.as_str(), seen.approvals[0].server.as_deref()), ("mcp_select_tool", None));
    let (messages, _) = &script.requests()[1];
    let results = tool_results(messages);
    let reasons: Vec<Value> =
        results.iter().map(|r| serde_json::from_str::<Value>(r).unwrap()["error"]["reason"].clone()).collect();
    assert_eq!(reasons, [json!("policy_denied"), json!("user_denied")]);
    assert!(messages.contains(&Message::User("Note from the user about mcp_select_tool: not now".into())));
}

#[test]
fn a_subagent_is_offered_the_built_ins_of_its_row_and_a_parent_all_of_them() {
    let script = Script::new(vec![Ok(text("Hi."))]);
    let mut agent = agent(&script, json!({}), 50);
    agent.turn("hi", &mut Seen::default(), &Trigger::default());
    let (_, tools) = &script.requests()[0];
    assert_eq!(tools, &["capability_search", "mcp_select_tool", "mcp_read_resource", "skill", "subagent"]);
    let offered: Vec<&str> = super::builtin::offered(true).map(|b| b.name).collect();
    assert_eq!(offered, ["capability_search", "mcp_select_tool", "mcp_read_resource", "skill"]);
}

#[test]
fn a_step_runs_a_bounded_number_of_calls_and_children_and_answers_every_call() {
    let many: Vec<(&str, Value)> = (0..70).map(|_| ("capability_search", json!({ "query": "x" }))).collect();
    let script = Script::new(vec![Ok(calls(&many)), Ok(text("Done."))]);
    let mut first = agent(&script, json!({}), 50);
    first.turn("go", &mut Seen::default(), &Trigger::default());
    let results = tool_results(&script.requests()[1].0);
    assert_eq!(results.len(), 70, "every call is answered");
    let refused = results.iter().filter(|r| r.contains("at most 64 tool calls run in one step")).count();
    assert_eq!(refused, 6);
    let children: Vec<(&str, Value)> =
        (0..10).map(|i| ("subagent", json!({ "action": "run", "task": format!("task {i}") }))).collect();
    let script = Script::new(vec![Ok(calls(&children)), Ok(text("Done."))]);
    let mut parent = agent(&script, json!({}), 50);
    parent.turn("go", &mut Seen::default(), &Trigger::default());
    let results = tool_results(&script.requests()[1].0);
    assert_eq!(results.len(), 10);
    let refused = results.iter().filter(|r| r.contains("at most 8 subagents run in one step")).count();
    assert_eq!(refused, 2, "{results:?}");
}
