//! The interactive shell (`nod` with no command): a plain line-mode REPL over the agent of
//! `nod ask` (agent-reference 6). A banner and the servers' start-up lines on stderr, the
//! trust prompt for pending project servers, then `nod> `: a line is a prompt for the model,
//! or a slash command (`/help`, every `/mcp` form, `/permissions`, `/status`, `/model`,
//! `/new`, `/exit`). The answer streams to stdout; tool lines, notices and questions go to
//! stderr. Ctrl-C cancels a running turn (its MCP calls on the wire) and, twice within 3 s
//! at the prompt, exits; Ctrl-D on an empty line exits. The REPL, its turns and its own
//! slash commands are here; the `/mcp` commands, the runtime's set-up and reload, and the
//! trust prompt are in `servers`.

mod browser;
mod input;
mod saved;
mod servers;
mod surface;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::form::Reply;
use super::{Context, Exit};
use crate::agent::permissions::Mode;
use crate::agent::{Agent, Status};
use crate::cli::{Command, Globals};
use crate::cmd::interrupt::Signals;
use crate::config::agent::AgentSettings;
use crate::config::{self, Loaded};
use crate::provider::{Provider, config as provider_config};
use crate::session::Access;
use crate::session::elicit::{Asked, Policy as ElicitPolicy, PolicyHandler};
use crate::session::runtime::{Runtime, State};
use crate::util::{Trigger, one_line, redact_urls, terminal_safe};
use input::{Asking, Input, Notify};
use surface::ShellSurface;

/// The window for the second Ctrl-C that exits.
const CTRL_C_WINDOW: Duration = Duration::from_secs(3);

/// How long `/mcp tool ...` waits for a server the background start is starting (what a
/// turn waits).
const STARTING_LIMIT: Duration = Duration::from_secs(120);

pub fn run(globals: Globals, ctx: &Context) -> Exit {
    let mut shell = match Shell::start(globals, ctx) {
        Ok(shell) => shell,
        Err(err) => {
            eprintln!("nod: {}", ctx.redactor.redact(&format!("{err:#}")));
            return Exit::ToolError;
        }
    };
    let exit = shell.repl();
    shell.leaving.store(true, std::sync::atomic::Ordering::SeqCst);
    shell.agent.runtime().shutdown();
    // A start that the shutdown could not end (a slow network connect) is given 5 s.
    if let Some(starting) = shell.starting.take() {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !starting.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if starting.is_finished() {
            let _ = starting.join();
        }
    }
    exit
}

/// Content the browser inserted, sent with the next message.
struct Attachment {
    label: String,
    text: String,
}

struct Shell<'a> {
    ctx: &'a Context,
    signals: Option<Signals>,
    input: Input,
    agent: Agent,
    asked: Sender<Asked>,
    /// The questions of the servers, for `/mcp tool call` (a turn reads them through the
    /// agent, which holds a clone: the channel is the same across reloads).
    asks: Receiver<Asked>,
    settings: AgentSettings,
    /// Why there is no model, when there is none.
    no_model: Option<String>,
    attachments: Vec<Attachment>,
    /// Tokens of this session, as the endpoint reported them.
    tokens: (u64, u64),
    /// The runtime in use, for the process trigger (SIGTERM) to shut down.
    current: Arc<Mutex<Arc<Runtime>>>,
    /// Lines from other threads.
    notify: Notify,
    /// The background start of the optional servers: joined at exit, after the shutdown made
    /// any start still under way fail, so no server it spawned outlives the shell.
    starting: Option<std::thread::JoinHandle<()>>,
    /// Set when the shell is leaving: a server settling now prints no line.
    leaving: Arc<std::sync::atomic::AtomicBool>,
    /// A line failed (a turn, a command): a piped shell exits non-zero at the end.
    failed: bool,
    /// Where conversations are saved (`$NOD_HOME`), unless saving is off.
    saving: Option<std::path::PathBuf>,
    /// The directories offered to the servers as roots: the workspace, `--add-dir`, `/add-dir`.
    roots: Arc<crate::session::roots::Roots>,
    /// What answers the servers' sampling requests (none without a model).
    sampler: Option<Arc<crate::session::sampling::Sampler>>,
}

impl<'a> Shell<'a> {
    fn start(globals: Globals, ctx: &'a Context) -> anyhow::Result<Shell<'a>> {
        let setup =
            super::setup::prepare(&super::setup::Surface::Shell, &globals, &ctx.redactor, &super::setup::process_env)?;
        for issue in &setup.issues {
            eprintln!("! {issue}");
        }
        let no_model = setup.provider.as_ref().err().cloned();
        let history = (!setup.settings.prompt_history_off)
            .then(|| config::home().ok().map(|h| h.join("prompt_history")))
            .flatten();
        let mut input = Input::open(history);
        let notify = input.notifier();
        let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
        let model = setup.provider.as_ref().map_or("no model".to_string(), |p| p.model.clone());
        let saving = (!setup.settings.save_sessions_off).then(|| config::home().ok()).flatten();
        eprintln!(
            "nod {} · {} · {} · permissions {} · {}",
            env!("CARGO_PKG_VERSION"),
            terminal_safe(&model),
            terminal_safe(&cwd),
            setup.policy.mode().as_str(),
            if saving.is_some() { "new session (/resume for an earlier one)" } else { "sessions not saved" }
        );
        if let Some(notice) = setup.full_access_notice() {
            eprintln!("! {notice}");
        }
        let (asked_tx, asked_rx) = crossbeam_channel::unbounded();
        let roots = crate::session::roots::Roots::for_workspace(
            std::path::Path::new(&saved::workspace()),
            &globals.add_dirs,
            &setup.loaded,
        )?;
        let roots = Arc::new(roots);
        let sampler = setup.sampler(Some(asked_tx.clone()));
        let runtime = new_runtime(&setup.loaded, &asked_tx, &roots, sampler.as_ref(), ctx);
        let failed =
            runtime.start_each(|s| s.required, &|name, state| notify(&settle_line(&runtime, name, state, ctx)));
        if let Some((name, why)) = failed.first() {
            runtime.shutdown();
            anyhow::bail!("required MCP server '{name}' failed: {}", redact_urls(&ctx.redactor.redact(why)));
        }
        let current = Arc::new(Mutex::new(runtime.clone()));
        let agent = setup.agent(runtime, asked_rx.clone());
        let super::setup::Setup { loaded, settings, .. } = setup;
        let mut shell = Shell {
            ctx,
            signals: ctx.signals.clone(),
            input,
            agent,
            asked: asked_tx,
            asks: asked_rx,
            settings,
            no_model,
            attachments: Vec::new(),
            tokens: (0, 0),
            current,
            notify,
            starting: None,
            leaving: Arc::default(),
            failed: false,
            saving,
            roots,
            sampler,
        };
        shell.on_terminate();
        if shell.trust_prompt(&loaded) {
            shell.reload_quietly();
        }
        shell.start_in_background();
        Ok(shell)
    }

    /// SIGTERM or SIGHUP: the terminal is given back and every server shut down.
    fn on_terminate(&self) {
        // SAFETY: a zeroed termios is only used when tcgetattr filled it.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: reads stdin's attributes into a termios this function owns.
        let have = unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } == 0;
        let current = self.current.clone();
        self.ctx.interrupt.on_fire(move || {
            if have {
                // SAFETY: restores the attributes read above.
                unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &saved) };
            }
            let runtime = current.lock().map(|r| r.clone());
            if let Ok(runtime) = runtime {
                runtime.engine().cancel_all("nod is exiting");
                runtime.shutdown();
            }
            eprintln!();
            std::process::exit(Exit::Interrupted as i32);
        });
    }

    /// Starts the optional servers on a thread of their own, one line each as it settles.
    fn start_in_background(&mut self) {
        let runtime = self.agent.runtime().clone();
        if !runtime.has_idle() {
            return;
        }
        let ctx = self.ctx.clone();
        let notify = self.notify.clone();
        let leaving = self.leaving.clone();
        self.starting = std::thread::Builder::new()
            .name("nod-start".into())
            .spawn(move || {
                runtime.start_each(|_| true, &|name, state| {
                    // At exit, a start the shutdown cut short is no news.
                    if !leaving.load(std::sync::atomic::Ordering::SeqCst) {
                        notify(&settle_line(&runtime, name, state, &ctx));
                    }
                });
            })
            .ok();
    }

    /// Questions outside a turn, interrupted by Ctrl-C.
    fn asking(&mut self) -> Asking<'_> {
        let interrupt = self.arm();
        Asking { input: &mut self.input, interrupt }
    }

    fn arm(&self) -> Trigger {
        match &self.signals {
            Some(signals) => signals.arm_new(),
            None => Trigger::default(),
        }
    }

    fn repl(&mut self) -> Exit {
        let mut armed_exit: Option<Instant> = None;
        let mut idle = self.arm();
        loop {
            // Turns and commands arm triggers of their own: Ctrl-C goes to this one again.
            if !idle.is_fired() {
                idle = self.arm();
            }
            // A Ctrl-C that came as a signal between two reads counts as one typed.
            let reply = if idle.is_fired() { Reply::Interrupted } else { self.input.prompt("nod> ", &idle) };
            if idle.is_fired() || reply == Reply::Interrupted {
                idle = self.arm();
            }
            let line = match reply {
                Reply::Line(line) => line,
                Reply::End => {
                    if self.input.is_terminal() {
                        eprintln!();
                    }
                    return self.exit_status();
                }
                Reply::Interrupted => {
                    if armed_exit.is_some_and(|at| at.elapsed() <= CTRL_C_WINDOW) {
                        return Exit::Ok;
                    }
                    eprintln!("(press Ctrl-C again to exit)");
                    armed_exit = Some(Instant::now());
                    continue;
                }
            };
            armed_exit = None;
            let Some(line) = self.continued(line) else { continue };
            if line.trim().is_empty() {
                continue;
            }
            if may_remember(&line) {
                self.input.remember(&line);
            }
            // Without a terminal nobody watches the start-up lines: a line runs once the
            // servers have settled, as a script expects.
            let about_servers = ["/mcp", "/skills"].iter().any(|c| line.trim_start().starts_with(c));
            if !self.input.is_terminal() && (!looks_like_command(&line) || about_servers) {
                let runtime = self.agent.runtime().clone();
                runtime.start_all();
                runtime.wait_started(STARTING_LIMIT);
                self.agent.index_tools();
            }
            if looks_like_command(&line) {
                if self.command(line.trim()) == Flow::Exit {
                    return self.exit_status();
                }
                continue;
            }
            self.turn(&line);
        }
    }

    /// How the shell exits: non-zero when a line failed and there was no terminal (a script
    /// must be able to tell).
    fn exit_status(&self) -> Exit {
        if self.failed && !self.input.is_terminal() { Exit::ToolError } else { Exit::Ok }
    }

    /// Joins lines ending in `\` with the ones after them (`... ` prompt).
    fn continued(&mut self, mut line: String) -> Option<String> {
        while line.ends_with('\\') {
            line.pop();
            line.push('\n');
            let idle = self.arm();
            match self.input.prompt("... ", &idle) {
                Reply::Line(next) => line.push_str(&next),
                Reply::End | Reply::Interrupted => return None,
            }
        }
        Some(line)
    }

    /// One turn of the agent for `line`, with the pending attachments before it.
    fn turn(&mut self, line: &str) {
        let mut prompt = String::new();
        for attachment in self.attachments.drain(..) {
            prompt.push_str(&attachment.text);
            prompt.push_str("\n\n");
        }
        prompt.push_str(line);
        self.start_saving(line);
        let trigger = self.arm();
        let mut surface = ShellSurface {
            asking: Asking { input: &mut self.input, interrupt: trigger.clone() },
            trigger: trigger.clone(),
            redactor: self.ctx.redactor.clone(),
            last: '\n',
            progress_shown: None,
        };
        if let Some(sampler) = &self.sampler {
            sampler.begin_turn();
        }
        let report = self.agent.turn(&prompt, &mut surface, &trigger);
        if surface.last != '\n' {
            surface.out("\n");
        }
        if let Some(usage) = report.usage {
            self.tokens.0 += usage.input;
            self.tokens.1 += usage.output;
        }
        match report.status {
            Status::Completed => {}
            Status::Interrupted => eprintln!("^C interrupted"),
            Status::Failed => {
                self.failed = true;
                let error = report.error.as_deref().unwrap_or("failed");
                eprintln!("✗ {}", terminal_safe(&self.ctx.redactor.redact(error)));
            }
            Status::InputRequired => {
                self.failed = true;
                eprintln!("✗ input required");
            }
        }
        println!();
    }

    /// A slash command; `Flow::Exit` ends the shell.
    fn command(&mut self, line: &str) -> Flow {
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match word {
            "/help" => print_help(),
            "/exit" | "/quit" => return Flow::Exit,
            "/new" | "/clear" => {
                self.agent.reset();
                self.attachments.clear();
                println!(
                    "new conversation{}",
                    if self.saving.is_some() { " (saved from its first prompt)" } else { "" }
                );
            }
            "/resume" => self.resume(rest),
            "/add-dir" => self.add_dir(rest),
            "/model" => self.model(rest),
            "/permissions" => self.permissions(rest),
            "/status" => self.status(),
            "/mcp" => self.mcp(rest),
            "/skills" => {
                if super::skills::run(crate::cli::Skills::List, false).is_err() {
                    self.failed = true;
                }
                if super::skills::print_server_skills(self.agent.runtime()).is_err() {
                    self.failed = true;
                }
            }
            other => {
                self.failed = true;
                eprintln!("unknown command {} · type /help", terminal_safe(other));
            }
        }
        Flow::Continue
    }

    fn model(&mut self, id: &str) {
        if id.is_empty() {
            match self.agent.provider() {
                Some(p) => println!("model: {}", terminal_safe(&p.config().model)),
                None => println!("model: none ({})", self.no_model.as_deref().unwrap_or("not configured")),
            }
            return;
        }
        let env = |name: &str| std::env::var(name).ok();
        match provider_config::resolve(Some(id), &self.settings.model, &env) {
            Ok(config) => {
                self.ctx.redactor.add(config.api_key.clone());
                let provider = Arc::new(Provider::new(config));
                // The servers' sampling requests are answered by the model chosen here.
                let declared = match &self.sampler {
                    Some(sampler) => {
                        sampler.set_model(provider.clone());
                        true
                    }
                    None => {
                        let asks = Some(self.asked.clone());
                        self.sampler =
                            Some(super::setup::sampler(provider.clone(), &self.settings, &self.agent.policy, asks));
                        false
                    }
                };
                self.agent.set_provider(provider);
                self.no_model = None;
                println!("model: {}", terminal_safe(id));
                if !declared {
                    // Servers declared what nod offered when they connected: without a model,
                    // no sampling.
                    println!("(servers may sample from the next /mcp reload)");
                }
            }
            Err(err) => eprintln!("✗ {err}"),
        }
    }

    fn permissions(&mut self, arg: &str) {
        if arg.is_empty() {
            print!("{}", self.agent.policy.describe());
            return;
        }
        let arg = arg.to_ascii_lowercase();
        let mode = match arg.as_str() {
            "reset" => None,
            "full access" | "yolo" => Some(Mode::FullAccess),
            other => match Mode::parse(other) {
                Some(mode) => Some(mode),
                None => {
                    eprintln!("usage: /permissions [ask|full-access|reset]");
                    return;
                }
            },
        };
        self.agent.policy.set_mode(mode);
        let shown = self.agent.policy.mode();
        println!(
            "permissions: mode={} ({})",
            shown.as_str(),
            if mode.is_some() { "this session" } else { "as configured" }
        );
    }

    fn status(&self) {
        let model = self.agent.model();
        println!("model: {}", if model.is_empty() { "none" } else { model });
        match self.agent.saved_id() {
            Some(id) => println!("session: {id}"),
            None if self.saving.is_some() => println!("session: new (saved from its first prompt)"),
            None => println!("session: not saved"),
        }
        if let Some(provider) = self.agent.provider() {
            let host = crate::net::url::host(&provider.config().base_url).unwrap_or_default();
            println!("endpoint: {}", terminal_safe(&host));
        }
        let cwd = std::env::current_dir().unwrap_or_default();
        println!("workspace: {}", terminal_safe(&config::project::locate(&cwd).0.display().to_string()));
        println!("permissions: {}", self.agent.policy.mode().as_str());
        let runtime = self.agent.runtime();
        let names = runtime.names();
        let states: Vec<State> = names.iter().filter_map(|n| runtime.state(n)).collect();
        let ready = states.iter().filter(|s| **s == State::Ready).count();
        let failed = states.iter().filter(|s| matches!(s, State::Failed(_) | State::MissingVariable(_))).count();
        let mut summary = format!("mcp: {} ({ready} ready", count(names.len()));
        if failed > 0 {
            summary.push_str(&format!(", {failed} failed"));
        }
        let other = names.len() - ready - failed;
        if other > 0 {
            summary.push_str(&format!(", {other} other"));
        }
        println!("{summary})");
        println!("tokens: {} in, {} out", self.tokens.0, self.tokens.1);
        for attachment in &self.attachments {
            println!("attached: {}", terminal_safe(&attachment.label));
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

/// A runtime over `loaded`'s servers whose elicitations go to the agent and which are offered
/// `roots`.
fn new_runtime(
    loaded: &Loaded,
    asked: &Sender<Asked>,
    roots: &Arc<crate::session::roots::Roots>,
    sampler: Option<&Arc<crate::session::sampling::Sampler>>,
    ctx: &Context,
) -> Arc<Runtime> {
    let policy = Arc::new(PolicyHandler::new(ElicitPolicy::Fail, Some(asked.clone())));
    let handler = Arc::new(crate::session::roots::WithRoots::new(policy, roots.clone()));
    let handler = super::setup::Setup::with_sampling(handler, sampler);
    let access = Access {
        browser: super::browser::from_environment(),
        fresh: false,
        redactor: ctx.redactor.clone(),
        revisions: crate::session::revisions::default_path(),
        private_env: crate::config::private_env(loaded),
    };
    Arc::new(Runtime::new(crate::dispatch::Engine::start(), loaded.servers.clone(), handler, access))
}

/// One server's start-up line (agent-reference 6.1).
fn settle_line(runtime: &Runtime, name: &str, state: &State, ctx: &Context) -> String {
    let shown = |text: &str| terminal_safe(&redact_urls(&ctx.redactor.redact(&one_line(text)))).into_owned();
    match state {
        State::Ready => {
            let tools = runtime
                .session(name)
                .ok()
                .filter(|s| s.has("tools"))
                .and_then(|s| crate::session::catalog::list(&s, crate::session::catalog::Kind::Tools).ok())
                .map_or(0, |l| l.items.len());
            format!("  ✓ {name} ready ({tools} tool{})", if tools == 1 { "" } else { "s" })
        }
        State::Unauthenticated => format!("  ✗ {name} needs authorization: /mcp auth {name} --open"),
        State::MissingVariable(var) => {
            format!("  ✗ {name} failed: the environment variable {var} (bearer_token_env) is not set")
        }
        State::Failed(why) => format!("  ✗ {name} failed: {}", shown(why)),
        other => format!("  … {name} {}", other.label()),
    }
}

fn count(n: usize) -> String {
    if n == 1 { "1 server".into() } else { format!("{n} servers") }
}

/// `^/[\w-]+(\s|$)`: `/help` is a command, `/src/app.rs explain` a prompt.
fn looks_like_command(line: &str) -> bool {
    let line = line.trim_start();
    let Some(rest) = line.strip_prefix('/') else { return false };
    let word: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
    !word.is_empty() && word.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

/// Whether `line` may go into the history. A `/mcp` line is judged on what the shell's own
/// parser makes of it (`Mcp::carries_secret`), so no spacing or flag order lets a secret
/// through; one that does not parse stays out too, since it may be such a command mistyped.
fn may_remember(line: &str) -> bool {
    let line = line.trim();
    if !looks_like_command(line) {
        return true;
    }
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    if word != "/mcp" {
        return true;
    }
    let Ok(words) = split_words(rest) else { return false };
    let args: Vec<std::ffi::OsString> =
        std::iter::once("mcp".into()).chain(words.into_iter().map(Into::into)).collect();
    match crate::cli::parse(args) {
        Ok(Command::Mcp(mcp, _)) => !mcp.carries_secret(),
        Ok(_) => true,
        Err(_) => false,
    }
}

/// Splits a command line into words: whitespace separates, '...' and "..." quote, a
/// backslash escapes the next character (outside single quotes).
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("a quote is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("a quote is not closed".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("a quote is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            // A word that starts a JSON object or array is taken as written, to its matching
            // bracket: `{"entities":[]}` keeps its quotes (a shell would eat them).
            c @ ('{' | '[') if !in_word => {
                in_word = true;
                word.push(c);
                let (mut depth, mut string, mut escaped) = (1usize, false, false);
                while depth > 0 {
                    let Some(c) = chars.next() else { return Err("a JSON argument is not closed".into()) };
                    word.push(c);
                    match (string, escaped, c) {
                        (true, true, _) => escaped = false,
                        (true, false, '\\') => escaped = true,
                        (true, false, '"') => string = false,
                        (true, false, _) => {}
                        (false, _, '"') => string = true,
                        (false, _, '{' | '[') => depth += 1,
                        (false, _, '}' | ']') => depth -= 1,
                        _ => {}
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

const COMMANDS: &[(&str, &str)] = &[
    ("/help", "this list"),
    ("/mcp", "browse MCP servers: health, tools, resources, templates, prompts; Insert content into the next message"),
    (
        "/mcp <command>",
        "list, resource, prompt, tool, add, remove, path, reload, auth, logout, trust: as nod mcp <command>",
    ),
    ("/permissions [mode]", "the permission mode and rules; ask, full-access or reset for this session"),
    ("/skills", "the installed skills, their origin and state (nod skills for more)"),
    ("/resume [id]", "go on with a saved session (a numbered menu of this workspace's without an id)"),
    ("/add-dir [path]", "offer a directory to the servers as a root (the roots without a path)"),
    ("/status", "model, endpoint, workspace, permissions, MCP servers, tokens"),
    ("/model [id]", "the model, or use another for this session"),
    ("/new", "a fresh conversation (also /clear); MCP servers stay"),
    ("/exit", "leave (also /quit, Ctrl-D)"),
];

fn print_help() {
    let width = terminal_width();
    let indent = 23;
    for (command, about) in COMMANDS {
        let lines = crate::cli::man::wrap(about, width.saturating_sub(indent).max(20));
        for (i, line) in lines.iter().enumerate() {
            if i == 0 {
                println!("  {command:<20} {line}");
            } else {
                println!("{:indent$}{line}", "");
            }
        }
    }
    for line in crate::cli::man::wrap(
        "A line ending in \\ continues on the next. Ctrl-C cancels a running turn; twice at the prompt, it exits.",
        width,
    ) {
        println!("{line}");
    }
}

/// The width of the terminal on stdout, or 80 when it is not one.
fn terminal_width() -> usize {
    // SAFETY: TIOCGWINSZ fills a winsize this function owns; a failure leaves it zeroed.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: see above; the descriptor is stdout's.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 { usize::from(size.ws_col) } else { 80 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_slash_words_and_paths_are_prompts() {
        assert!(looks_like_command("/help"));
        assert!(looks_like_command("/mcp resource list fx"));
        assert!(looks_like_command("  /exit  "));
        assert!(!looks_like_command("/src/file.rs explain"));
        assert!(!looks_like_command("/"));
        assert!(!looks_like_command("explain /help"));
    }

    #[test]
    fn mcp_lines_that_may_hold_a_secret_stay_out_of_the_history() {
        for line in [
            "/mcp add -e TOKEN=x a cmd",
            "/mcp  add -e TOKEN=x a cmd",
            "  /mcp\tadd --env TOKEN=x a cmd",
            "/mcp --json add -e TOKEN=x a cmd",
            "/mcp 'add' --transport http a https://h/?token=x",
            "/mcp add -e TOKEN=x",
            "/mcp add 'unclosed",
        ] {
            assert!(!may_remember(line), "{line}");
        }
        for line in ["/mcp list", "/mcp  path", "/mcp add --help", "/help", "explain /mcp add -e T=x", "a question"] {
            assert!(may_remember(line), "{line}");
        }
    }

    #[test]
    fn help_text_wraps_between_words() {
        let lines = crate::cli::man::wrap("browse MCP servers: health, tools, resources, templates, prompts", 20);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:?}");
        assert_eq!(lines.join(" "), "browse MCP servers: health, tools, resources, templates, prompts");
        assert_eq!(crate::cli::man::wrap("averyveryverylongword x", 5), ["averyveryverylongword", "x"]);
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_words(r#"prompt get s p '{"a": "b c"}'"#).unwrap(),
            ["prompt", "get", "s", "p", r#"{"a": "b c"}"#]
        );
        assert_eq!(split_words(r#"a "b \" c" d\ e"#).unwrap(), ["a", "b \" c", "d e"]);
        assert_eq!(split_words("  ").unwrap(), Vec::<String>::new());
        // JSON is taken as written, spaces and quotes inside strings included.
        assert_eq!(
            split_words(r#"tool call memory create_entities {"entities": [{"name": "a b}"}]} --json"#).unwrap(),
            ["tool", "call", "memory", "create_entities", r#"{"entities": [{"name": "a b}"}]}"#, "--json"]
        );
        assert_eq!(split_words(r#"[1, "\"]", 2]"#).unwrap(), [r#"[1, "\"]", 2]"#]);
        assert!(split_words(r#"{"open": 1"#).is_err());
        assert_eq!(split_words("''").unwrap(), [""]);
        assert!(split_words("'open").is_err());
    }
}
