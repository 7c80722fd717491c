//! The shell's servers: the `/mcp` commands on the live runtime (the browser, `list`, `tool`,
//! `resource`, `prompt`, `auth`, `restart`, `reload`), building and swapping the runtime,
//! and the trust prompt for a project's pending servers.

use std::sync::Arc;

use super::input::Asking;
use super::surface::ShellBrowser;
use super::{STARTING_LIMIT, Shell, browser, count, new_runtime, settle_line, split_words};
use crate::cli::{Command, Mcp};
use crate::cmd::failure::{Kind, fail};
use crate::cmd::form::{self, Reply};
use crate::cmd::{Context, Exit};
use crate::config::project::Trust;
use crate::config::{self, Loaded, Severity};
use crate::session::Session;
use crate::session::runtime::{Runtime, State};
use crate::util::{redact_urls, terminal_safe};

impl<'a> Shell<'a> {
    /// `/mcp ...`: the browser, `reload`, or the `nod mcp` command of the same words with
    /// the same output; `list`, `tool`, `resource` and `prompt` use the live servers;
    /// changes to the configuration reload.
    pub(super) fn mcp(&mut self, rest: &str) {
        if rest.is_empty() {
            browser::open(self);
            return;
        }
        if rest == "reload" {
            self.reload();
            return;
        }
        let words = match split_words(rest) {
            Ok(words) => words,
            Err(why) => {
                self.failed = true;
                eprintln!("nod: {why}");
                return;
            }
        };
        let args: Vec<std::ffi::OsString> =
            std::iter::once("mcp".into()).chain(words.iter().map(std::ffi::OsString::from)).collect();
        let (mcp, options) = match crate::cli::parse(args.clone()) {
            Ok(Command::Mcp(mcp, options)) => (mcp, options),
            Ok(Command::Help(page)) => {
                print!("{}", crate::cli::man::render(page));
                return;
            }
            Ok(_) => {
                eprintln!("usage: /mcp [list|resource|prompt|tool|add|remove|path|reload|auth|logout|trust]");
                return;
            }
            Err(err) => {
                self.failed = true;
                crate::cmd::report_usage(&err, &args);
                return;
            }
        };
        let ctx = Context { options, interrupt: self.arm(), signals: None, ..self.ctx.clone() };
        match mcp {
            Mcp::List { .. } => {
                let loaded = config::load_native().unwrap_or_default();
                let healths = self.agent.runtime().health();
                match crate::cmd::list::show_health(&healths, &loaded, false, &ctx) {
                    Ok(Exit::Ok) => {}
                    Ok(_) => self.failed = true,
                    Err(err) => {
                        self.failed = true;
                        eprintln!("nod: {err:#}");
                    }
                }
            }
            Mcp::Auth { name, open } => self.authorize(&name, open, &ctx),
            Mcp::Logout { .. } => {
                let name = mcp.server().map(str::to_string);
                if crate::cmd::run(Command::Mcp(mcp, ctx.options.clone()), &ctx) == Exit::Ok
                    && let Some(name) = name
                {
                    self.restart(&name);
                }
            }
            Mcp::Add(_) | Mcp::AddJson { .. } | Mcp::Import { .. } | Mcp::Remove { .. } | Mcp::Trust(_) => {
                if crate::cmd::run(Command::Mcp(mcp, ctx.options.clone()), &ctx) == Exit::Ok {
                    self.reload();
                } else {
                    self.failed = true;
                }
            }
            Mcp::Path | Mcp::Get { .. } => {
                if crate::cmd::run(Command::Mcp(mcp, ctx.options.clone()), &ctx) != Exit::Ok {
                    self.failed = true;
                }
            }
            query => self.on_server(query, &ctx),
        }
    }

    /// `/mcp tool|resource|prompt ...` on the server the agent uses, printed as `nod mcp`
    /// prints it: no second process, so a stateful server keeps one state and nothing pays
    /// a cold start.
    fn on_server(&mut self, mcp: Mcp, ctx: &Context) {
        let server = mcp.server().unwrap_or_default().to_string();
        let result = (|| {
            // What the user gave is read first, as `nod mcp` reads it before connecting.
            let query = match mcp {
                Mcp::ToolCall(call) => Err(call),
                other => Ok(crate::cmd::Query::of(other).expect("only queries come here")?.1),
            };
            let session = self.live_session(&server, ctx)?;
            let runtime = self.agent.runtime().clone();
            // Ctrl-C cancels this command's calls on the wire (no turn is running); the
            // servers stay up.
            let engine = runtime.engine().clone();
            ctx.interrupt.on_fire(move || engine.cancel_all("interrupted by the user"));
            match query {
                Ok(query) => query.run(&session, crate::cmd::query::Lasting::Shared, ctx),
                Err(call) => {
                    let mut person = Asking { input: &mut self.input, interrupt: ctx.interrupt.clone() };
                    let live = || runtime.session(&server);
                    crate::cmd::tool::call::run_live(&call, &session, &live, &self.asks, &mut person, ctx)
                }
            }
        })();
        if crate::cmd::finish(result, ctx.options.json, Some(&server), Kind::Connection, ctx) != Exit::Ok {
            self.failed = true;
        }
    }

    /// The session of `name` in the agent's runtime. An idle server is started first, as a
    /// turn would start it; one starting is awaited. Otherwise one line naming the server
    /// and its state, or `nod mcp`'s own words for a server not configured or disabled.
    fn live_session(&mut self, name: &str, ctx: &Context) -> anyhow::Result<Arc<Session>> {
        let runtime = self.agent.runtime().clone();
        match runtime.state(name) {
            None | Some(State::Disabled) => {
                let loaded = crate::cmd::one::load_quietly(ctx)?;
                crate::cmd::one::find_server(&loaded, name)?;
                return Err(fail(
                    Kind::Config,
                    format!(
                        "server {name} is not running in this shell (the profile changed since); /mcp reload starts it"
                    ),
                ));
            }
            Some(State::Idle) => {
                let notify = self.notify.clone();
                runtime.start_each(|s| s.name == name, &|name, state| notify(&settle_line(&runtime, name, state, ctx)));
                self.agent.index_tools();
            }
            // The background start has it: the same limit a turn waits.
            Some(State::Starting) => runtime.wait_started(STARTING_LIMIT),
            Some(_) => {}
        }
        match runtime.state(name) {
            Some(State::Ready) => runtime.session(name),
            state => {
                let label = state.as_ref().map_or("unknown", State::label);
                let why = runtime.problem(name).unwrap_or_else(|| label.to_string());
                let kind = if state == Some(State::Unauthenticated) { Kind::Unauthorized } else { Kind::Connection };
                Err(fail(kind, format!("server {name} is not ready: {why}")))
            }
        }
    }

    /// `/mcp auth NAME [--open]`: the OAuth flow without leaving the shell (a pasted
    /// redirect URL is read without echo), then the server connects again.
    fn authorize(&mut self, name: &str, open: bool, ctx: &Context) {
        let browser = Arc::new(ShellBrowser::new(open, ctx.interrupt.clone()));
        let result = crate::cmd::auth::auth_with(name, browser.clone(), ctx);
        browser.finish();
        match result {
            Ok(_) => self.restart(name),
            Err(err) => {
                let message = redact_urls(&ctx.redactor.redact(&crate::cmd::failure::message(&err)));
                eprintln!("nod: {}", terminal_safe(&message));
            }
        }
    }

    /// Connects one server again and says how it went.
    fn restart(&mut self, name: &str) {
        let runtime = self.agent.runtime().clone();
        if let Some(state) = runtime.restart(name) {
            eprintln!("{}", settle_line(&runtime, name, &state, self.ctx));
        }
        self.agent.index_tools();
    }

    /// `/mcp reload` (agent-reference 6.7).
    pub(super) fn reload(&mut self) {
        match self.build_runtime() {
            Ok((runtime, failed)) => {
                let total = runtime.names().len();
                let ready = runtime.ready().len();
                self.swap(runtime);
                let failures = total - ready;
                let mut line = format!("MCP reloaded: {} ({ready} ready", count(total));
                if failures > 0 {
                    line.push_str(&format!(", {failures} failed"));
                }
                println!("{line})");
                for (name, why) in failed {
                    println!("  ✗ {name} {}", terminal_safe(&redact_urls(&self.ctx.redactor.redact(&why))));
                }
            }
            Err(reasons) => {
                println!("MCP reload kept the previous servers:");
                for reason in reasons {
                    println!("  {}", terminal_safe(&redact_urls(&self.ctx.redactor.redact(&reason))));
                }
            }
        }
    }

    /// A reload at start-up (after the trust prompt), before anything else started.
    pub(super) fn reload_quietly(&mut self) {
        match self.build_runtime() {
            Ok((runtime, _)) => self.swap(runtime),
            Err(reasons) => {
                for reason in reasons {
                    eprintln!("! {}", terminal_safe(&redact_urls(&self.ctx.redactor.redact(&reason))));
                }
            }
        }
    }

    /// A new runtime from the configuration as it is now, every server started (each line
    /// as it settles); or why the old one stays.
    #[allow(clippy::type_complexity)]
    fn build_runtime(&self) -> Result<(Arc<Runtime>, Vec<(String, String)>), Vec<String>> {
        let loaded = config::load_native().map_err(|e| vec![format!("{e:#}")])?;
        self.ctx.redactor.add(loaded.secrets());
        let broken: Vec<String> = loaded
            .issues
            .iter()
            .filter(|i| i.severity == Severity::Error && i.server.is_none())
            .map(|i| i.to_string())
            .collect();
        if !broken.is_empty() {
            return Err(broken);
        }
        self.roots.set_project(&loaded);
        let runtime = new_runtime(&loaded, &self.asked, &self.roots, self.sampler.as_ref(), self.ctx);
        let ctx = self.ctx;
        let failed =
            runtime.start_each(|_| true, &|name, state| eprintln!("{}", settle_line(&runtime, name, state, ctx)));
        let required: Vec<String> = failed
            .iter()
            .filter(|(name, _)| runtime.config(name).is_some_and(|c| c.required))
            .map(|(name, why)| format!("required MCP server '{name}' failed: {why}"))
            .collect();
        if !required.is_empty() {
            runtime.shutdown();
            return Err(required);
        }
        Ok((runtime, failed))
    }

    /// Puts `runtime` in place; calls still running on the old one are cancelled.
    fn swap(&mut self, runtime: Arc<Runtime>) {
        if let Ok(mut current) = self.current.lock() {
            *current = runtime.clone();
        }
        let old = self.agent.set_runtime(runtime);
        old.engine().cancel_all("MCP was reloaded");
        old.shutdown();
    }

    /// The trust prompt for pending project servers (agent-reference 6.5); without a
    /// terminal, one line and "decide later". Whether anything was approved.
    pub(super) fn trust_prompt(&mut self, loaded: &Loaded) -> bool {
        let pending: Vec<&config::project::Entry> = loaded
            .project
            .entries
            .iter()
            .filter(|e| matches!(e.trust, Trust::Pending | Trust::Changed) && loaded.server(&e.name).is_none())
            .collect();
        if pending.is_empty() {
            return false;
        }
        let n = pending.len();
        if !self.input.can_ask() {
            let names: Vec<_> = pending.iter().map(|e| terminal_safe(&e.name)).collect();
            eprintln!(
                "! {} in .mcp.json not approved, left for later (no terminal to ask): {}; approve with nod mcp trust approve <name>",
                if n == 1 { "1 project server".to_string() } else { format!("{n} project servers") },
                names.join(", ")
            );
            return false;
        }
        let workspace = &loaded.project.workspace;
        eprintln!(
            "This workspace's .mcp.json defines {n} MCP server{} that {} not been approved:",
            if n == 1 { "" } else { "s" },
            if n == 1 { "has" } else { "have" }
        );
        for (i, entry) in pending.iter().enumerate() {
            eprint!("{}. {}", i + 1, crate::cmd::trust::describe(entry, workspace));
        }
        let range = if n == 1 { "[1] choose".to_string() } else { format!("[1-{n}] choose") };
        let question = format!(
            "Approving lets nod start these commands / contact these hosts. [a] approve all  {range}  [r] reject all  [enter] decide later > "
        );
        let interrupt = self.arm();
        let mut asking = Asking { input: &mut self.input, interrupt };
        let mut approve: Vec<&config::project::Entry> = Vec::new();
        let mut reject: Vec<&config::project::Entry> = Vec::new();
        loop {
            let answer = match form::Prompter::line(&mut asking, &question) {
                Reply::Line(answer) => answer.trim().to_ascii_lowercase(),
                Reply::End | Reply::Interrupted => String::new(),
            };
            match answer.as_str() {
                "" => return false,
                "a" => approve.extend(pending.iter().copied()),
                "r" => reject.extend(pending.iter().copied()),
                number => match number.parse::<usize>().ok().filter(|i| (1..=n).contains(i)) {
                    Some(i) => {
                        let entry = pending[i - 1];
                        let ask = format!("approve {}? [y/n] ", entry.name);
                        match form::Prompter::line(&mut asking, &ask) {
                            Reply::Line(yes) if matches!(yes.trim().to_ascii_lowercase().as_str(), "y" | "yes") => {
                                approve.push(entry)
                            }
                            Reply::Line(no) if matches!(no.trim().to_ascii_lowercase().as_str(), "n" | "no") => {
                                reject.push(entry)
                            }
                            _ => return false,
                        }
                    }
                    None => {
                        eprintln!("  a, r, a number from 1 to {n}, or Enter");
                        continue;
                    }
                },
            }
            break;
        }
        self.record_trust(loaded, &approve, &reject)
    }

    fn record_trust(
        &self,
        loaded: &Loaded,
        approve: &[&config::project::Entry],
        reject: &[&config::project::Entry],
    ) -> bool {
        let recorded = (|| -> anyhow::Result<()> {
            let settings_path = config::settings::path()?;
            let cwd = std::env::current_dir()?;
            if !approve.is_empty() {
                crate::cmd::trust::approve(&settings_path, &cwd, &loaded.project, approve)?;
            }
            let rejections: Vec<_> = reject
                .iter()
                .map(|e| {
                    let choice = config::settings::Choice { approved: false, fingerprint: e.fingerprint.clone() };
                    (e.name.clone(), Some(choice))
                })
                .collect();
            if !rejections.is_empty() {
                config::settings::record(&settings_path, &loaded.project.workspace, false, &rejections)?;
            }
            Ok(())
        })();
        match recorded {
            Ok(()) => {
                for entry in approve {
                    eprintln!("approved project server {}", entry.name);
                }
                for entry in reject {
                    eprintln!("rejected project server {}", entry.name);
                }
                !approve.is_empty()
            }
            Err(err) => {
                eprintln!("nod: {}", crate::cmd::failure::message(&err));
                false
            }
        }
    }
}
