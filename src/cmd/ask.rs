//! `nod ask`: one request to the model for a script. The prompt comes from the arguments or
//! stdin (with both, stdin is attached as a delimited block); the answer streams to stdout,
//! tool lines and notices go to stderr; `--json` prints one object at the end. Exit codes: 0
//! completed, 1 model or provider failure, 2 usage or configuration error, 3 input required,
//! 130 interrupted.

use std::io::{IsTerminal, Read, Write};
use std::sync::Arc;

use serde_json::{Value, json};

use super::form::{self, Term};
use super::{Context, Exit, setup};
use crate::agent::{Answer, Approval, Elicited, Level, Report, Status, Surface};
use crate::cli::Ask;
use crate::session::Access;
use crate::session::elicit::{InputRequired, Policy as ElicitPolicy, PolicyHandler};

/// The longest prompt, from arguments and stdin together.
const MAX_PROMPT_BYTES: usize = 4 * 1024 * 1024;

pub fn ask(ask: Ask, ctx: &Context) -> Exit {
    match run(&ask, ctx) {
        Ok(exit) => exit,
        Err(err) => {
            let message = ctx.redactor.redact(&format!("{err:#}"));
            if ask.json {
                let out = json!({ "output": "", "final_output": "", "exit_code": 2, "model": "", "session_id": "",
                    "steps": 0, "tool_calls": [], "usage": { "input_tokens": null, "output_tokens": null },
                    "status": "failed", "error": message });
                let _ = super::print(&format!("{out}\n"));
            }
            eprintln!("nod: {message}");
            Exit::Failure
        }
    }
}

fn run(ask: &Ask, ctx: &Context) -> anyhow::Result<Exit> {
    let prompt = prompt(ask)?;
    let surface =
        setup::Surface::Ask { model: ask.model.as_deref(), max_steps: ask.max_steps, system: ask.system.as_deref() };
    let setup = setup::prepare(&surface, &ask.globals, &ctx.redactor, &setup::process_env)?;
    let home = crate::config::home()?;
    let workspace = crate::config::project::locate(&std::env::current_dir().unwrap_or_default()).0;
    let workspace = workspace.display().to_string();
    let continued = session_to_continue(ask, &home, &workspace)?;
    let save = !ask.no_save && !setup.settings.save_sessions_off;
    for issue in &setup.issues {
        eprintln!("nod: {issue}");
    }
    if let Some(notice) = setup.full_access_notice()
        && !ask.json
    {
        eprintln!("! {notice}");
    }
    let (asked_tx, asked) = crossbeam_channel::unbounded();
    let roots = crate::session::roots::Roots::for_workspace(
        std::path::Path::new(&workspace),
        &ask.globals.add_dirs,
        &setup.loaded,
    )?;
    let sampler = setup.sampler(Some(asked_tx.clone()));
    let policy = Arc::new(PolicyHandler::new(ElicitPolicy::Fail, Some(asked_tx)));
    let handler = Arc::new(crate::session::roots::WithRoots::new(policy, Arc::new(roots)));
    let handler = setup::Setup::with_sampling(handler, sampler.as_ref());
    // nod ask never starts an OAuth flow: a server that needs one says so.
    let runtime =
        setup.runtime(handler, Access { revisions: crate::session::revisions::default_path(), ..Access::default() });
    let failed = runtime.start_required();
    if !failed.is_empty() {
        for (server, why) in &failed {
            eprintln!("nod: required MCP server {server} failed: {}", ctx.redactor.redact(why));
        }
        runtime.shutdown();
        anyhow::bail!("a required MCP server could not start");
    }
    let mut agent = setup.agent(runtime.clone(), asked);
    if let Err(err) = attach_session(&mut agent, continued.as_deref(), save, &home, &workspace, &prompt, ctx) {
        runtime.shutdown();
        return Err(err);
    }
    let tty = if ask.prompt_permissions { Term::tty(ctx.interrupt.clone()) } else { None };
    let mut surface = AskSurface {
        progress_shown: None,
        explained: false,
        prompt_permissions: ask.prompt_permissions,
        json: ask.json,
        quiet: ask.quiet,
        terminal: std::io::stdout().is_terminal(),
        tty,
        last: '\n',
        wrote: false,
        redactor: ctx.redactor.clone(),
        sampling: None,
    };
    let report = agent.turn(&prompt, &mut surface, &ctx.interrupt);
    runtime.shutdown();
    let id = agent.saved_id().unwrap_or_default();
    surface.sampling = sampler.map(|s| s.stats.clone());
    surface.end(&report, agent.model(), &id)
}

/// The saved session a run goes on with (`-c`, `--resume`), found before anything starts.
fn session_to_continue(ask: &Ask, home: &std::path::Path, workspace: &str) -> anyhow::Result<Option<String>> {
    match (&ask.resume, ask.continue_last) {
        (Some(prefix), _) => crate::saved::resolve(home, prefix).map(Some),
        (None, true) => match crate::saved::latest(home, workspace) {
            Some(id) => Ok(Some(id)),
            None => {
                anyhow::bail!("no saved session of this workspace ({workspace}) to continue; see nod sessions list")
            }
        },
        (None, false) => Ok(None),
    }
}

/// Sets `agent` up to go on with session `continued` (its conversation as the model saw it),
/// and to save, unless saving is off: into that session, or a new one titled by `prompt`.
fn attach_session(
    agent: &mut crate::agent::Agent,
    continued: Option<&str>,
    save: bool,
    home: &std::path::Path,
    workspace: &str,
    prompt: &str,
    ctx: &Context,
) -> anyhow::Result<()> {
    use crate::saved::{self, Meta, Recorder};
    let Some(id) = continued else {
        if save {
            let meta = Meta::new("ask", workspace, agent.model(), prompt, &ctx.redactor);
            match Recorder::create(home, meta, ctx.redactor.clone()) {
                Ok(recorder) => agent.save_to(recorder),
                Err(err) => eprintln!("nod: {err:#}; this conversation is not saved"),
            }
        }
        return Ok(());
    };
    let loaded = saved::load(home, id)?;
    for warning in &loaded.warnings {
        eprintln!("nod: {warning}");
    }
    let recorder = if save { Some(Recorder::resume(home, id, ctx.redactor.clone())?) } else { None };
    agent.go_on(loaded, recorder);
    Ok(())
}

/// The words with piped stdin after them as a `<stdin>` block that nothing inside can close
/// or forge (stdin is often a repository's text): cleaned like every outside text.
fn stdin_block(words: &str, input: &str) -> String {
    let clean = crate::agent::text::sanitize(input.trim_end_matches('\n'));
    let clean = crate::agent::text::neutralise(&clean, &["stdin", "untrusted_external"]);
    format!("{words}\n\n<stdin>\n{clean}\n</stdin>")
}

/// The prompt: the words, or stdin; with both, stdin as a delimited block after the words.
fn prompt(ask: &Ask) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let piped = !stdin.is_terminal();
    let read_stdin = ask.prompt.is_empty() || (piped && !ask.no_stdin);
    let mut input = String::new();
    if ask.prompt.is_empty() && !piped {
        // Nothing would say what nod waits for.
        eprintln!(
            "nod: type the prompt, then Ctrl-D on a line of its own (or give it as arguments: nod ask what is ...)"
        );
    }
    if read_stdin && (piped || ask.prompt.is_empty()) {
        let mut bytes = Vec::new();
        stdin.lock().take(MAX_PROMPT_BYTES as u64 + 1).read_to_end(&mut bytes)?;
        if bytes.len() > MAX_PROMPT_BYTES {
            anyhow::bail!("the prompt exceeds 4 MiB");
        }
        input = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the prompt on stdin is not valid UTF-8"))?;
    }
    let prompt = if ask.prompt.is_empty() {
        input
    } else if input.trim().is_empty() {
        ask.prompt.clone()
    } else {
        stdin_block(&ask.prompt, &input)
    };
    if prompt.len() > MAX_PROMPT_BYTES {
        anyhow::bail!("the prompt exceeds 4 MiB");
    }
    if prompt.trim().is_empty() {
        anyhow::bail!("the prompt is empty: give it as arguments or on stdin");
    }
    Ok(prompt)
}

/// Progress lines at most this often (a server may report every millisecond).
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

struct AskSurface {
    /// When the last progress line was shown.
    progress_shown: Option<std::time::Instant>,
    /// The refusal of a call needing approval was explained already.
    explained: bool,
    prompt_permissions: bool,
    json: bool,
    quiet: bool,
    terminal: bool,
    tty: Option<Term>,
    /// The last character written to stdout.
    last: char,
    wrote: bool,
    redactor: crate::util::Redactor,
    /// The servers' sampling costs, for `--json`.
    sampling: Option<Arc<crate::session::sampling::Stats>>,
}

impl AskSurface {
    /// Once per run, on stderr: why a call needing approval was refused and the ways to allow
    /// it (the model is told too, but the person is the one who can act).
    fn explain_refusal(&mut self, request: &Approval) {
        if self.explained || self.json {
            return;
        }
        self.explained = true;
        let why = if self.prompt_permissions {
            "--prompt-permissions could not ask: there is no terminal (/dev/tty) to ask on"
        } else {
            "nod ask asks no one unless told to"
        };
        let rule = match (request.tool.as_str(), &request.server) {
            ("sampling", Some(server)) => serde_json::json!({ "sampling": { server.as_str(): "allow" } }),
            _ => serde_json::json!({ "permission": { request.tool.as_str(): "allow" } }),
        };
        eprintln!(
            "nod: {} needs approval and {why}. To allow it: rerun with --prompt-permissions on a terminal; or add the rule {rule} to {}; or run with --full-access (no checks at all).",
            crate::util::terminal_safe(&request.title()),
            crate::config::settings::path().map_or_else(|_| "settings.json".to_string(), |p| p.display().to_string())
        );
    }

    fn out(&mut self, text: &str) {
        if self.json || text.is_empty() {
            return;
        }
        let shown = if self.terminal { crate::util::terminal_safe(text) } else { std::borrow::Cow::Borrowed(text) };
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(shown.as_bytes());
        let _ = stdout.flush();
        self.last = text.chars().last().unwrap_or(self.last);
        self.wrote = true;
    }

    /// Prints the end of the run and says how it exits.
    fn end(&mut self, report: &Report, model: &str, session_id: &str) -> anyhow::Result<Exit> {
        let exit = match report.status {
            Status::Completed => Exit::Ok,
            Status::Failed => Exit::ToolError,
            Status::InputRequired => Exit::InputRequired,
            Status::Interrupted => Exit::Interrupted,
        };
        if self.json {
            let usage = match report.usage {
                Some(usage) => json!({ "input_tokens": usage.input, "output_tokens": usage.output }),
                None => json!({ "input_tokens": null, "output_tokens": null }),
            };
            let calls: Vec<Value> = report
                .tool_calls
                .iter()
                .map(|(name, ok)| json!({ "name": name, "status": if *ok { "success" } else { "failure" } }))
                .collect();
            let mut out = json!({ "output": report.output, "final_output": report.final_output, "exit_code": exit as u8,
                "model": model, "session_id": session_id, "steps": report.steps, "tool_calls": calls, "usage": usage,
                "status": report.status.as_str() });
            if let Some(error) = &report.error {
                out["error"] = json!(self.redactor.redact(error));
            }
            if report.step_limit {
                out["step_limit"] = json!(true);
            }
            // What the servers' sampling requests cost, apart from the agent's own (present
            // when a server sampled).
            if let Some(stats) =
                self.sampling.as_ref().filter(|s| s.requests.load(std::sync::atomic::Ordering::SeqCst) > 0)
            {
                use std::sync::atomic::Ordering::SeqCst;
                out["sampling"] = json!({ "requests": stats.requests.load(SeqCst), "usage": {
                    "input_tokens": stats.input_tokens.load(SeqCst), "output_tokens": stats.output_tokens.load(SeqCst) } });
            }
            if let Some(input) = &report.input_required {
                out["input_required"] = input_json(input);
            }
            super::print(&format!("{out}\n"))?;
        } else if self.wrote && self.last != '\n' {
            self.out("\n");
        }
        match (report.status, &report.input_required) {
            (Status::InputRequired, Some(input)) if !self.json => {
                let message = crate::util::terminal_safe(&crate::util::one_line(&input.message)).into_owned();
                eprintln!("nod: input required: MCP server '{}' asks: {message}", input.server);
                if let Some(url) = &input.url {
                    eprintln!("{}", crate::util::terminal_safe(url));
                }
            }
            (Status::Failed, _) if !self.json => {
                eprintln!("nod: {}", self.redactor.redact(report.error.as_deref().unwrap_or("failed")));
            }
            (Status::Interrupted, _) if !self.json => eprintln!("nod: interrupted"),
            _ => {}
        }
        Ok(exit)
    }
}

fn input_json(input: &InputRequired) -> Value {
    let mut out = json!({ "server": input.server, "mode": input.mode,
        "message": crate::util::terminal_safe(&input.message).into_owned() });
    if let Some(schema) = &input.requested_schema {
        out["requested_schema"] = schema.clone();
    }
    if let Some(url) = &input.url {
        out["url"] = json!(url);
    }
    if let Some(id) = &input.elicitation_id {
        out["elicitation_id"] = json!(id);
    }
    out
}

impl Surface for AskSurface {
    fn text(&mut self, delta: &str) {
        self.out(delta);
    }

    fn step(&mut self, step: usize) {
        if step > 1 && self.wrote && self.last != '\n' {
            self.out("\n");
        }
    }

    fn tool_started(&mut self, name: &str, arguments: &str) {
        if !self.quiet && !self.json {
            let preview = crate::util::terminal_safe(&crate::agent::preview(arguments)).into_owned();
            // The name is the model's: made terminal-safe like everything else it writes.
            let name = crate::util::terminal_safe(&crate::util::one_line(name)).into_owned();
            eprintln!("● {name} {preview}");
        }
    }

    fn progress(&mut self, progress: &crate::dispatch::Progress) {
        if self.quiet || self.json || self.progress_shown.is_some_and(|at| at.elapsed() < PROGRESS_EVERY) {
            return;
        }
        self.progress_shown = Some(std::time::Instant::now());
        eprintln!("  … {}", super::render::progress(progress));
    }

    fn tool_finished(&mut self, _name: &str, ok: bool, detail: &str, _result: &str) {
        if !ok && !self.quiet && !self.json {
            eprintln!("  ✗ {}", crate::util::terminal_safe(&self.redactor.redact(detail)));
        }
    }

    fn notice(&mut self, level: Level, text: &str) {
        if self.json || (self.quiet && level != Level::Error) {
            return;
        }
        let mark = match level {
            Level::Error => "✗",
            Level::Warning => "!",
            Level::Info => "·",
        };
        let hint = if text == crate::agent::STEP_LIMIT { " (--max-steps N raises the limit for a run)" } else { "" };
        eprintln!("{mark} {}{hint}", crate::util::terminal_safe(&self.redactor.redact(text)));
    }

    fn approve(&mut self, request: &Approval) -> Option<Answer> {
        match self.tty.as_mut() {
            Some(tty) => Some(form::approve(tty, request)),
            None => {
                self.explain_refusal(request);
                None
            }
        }
    }

    fn elicit(&mut self, request: &InputRequired) -> Elicited {
        match self.tty.as_mut() {
            Some(tty) => Elicited::Answer(form::elicit(tty, request).unwrap_or_else(|_| json!({ "action": "cancel" }))),
            None => Elicited::Unanswerable,
        }
    }
}
