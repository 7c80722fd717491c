//! The front end of `nod mcp`: each command loads the profile, starts the servers it needs
//! on one engine, does its work, prints, and shuts everything down. With `cli`, the only
//! module that prints.

mod ask;
mod auth;
mod browser;
mod edit;
pub mod form;
pub mod interrupt;
mod list;
pub mod logging;
mod prompt;
mod render;
mod resource;
mod status;
mod tool;
mod trust;

use std::io::Write;
use std::sync::Arc;

use anyhow::{anyhow, bail};

use crate::cli::{Command, Mcp};
use crate::config::project::Trust;
use crate::config::{self, Loaded, ServerConfig, Severity};
use crate::dispatch::{Engine, InboundHandler};
use crate::session::elicit::{Policy, PolicyHandler};
use crate::session::supervisor::Supervised;
use crate::session::{Access, Session};
use crate::util::{Redactor, Trigger};

/// What every command gets from `main`: values, not globals.
#[derive(Clone)]
pub struct Context {
    /// The secrets to keep out of every message; the logger holds the same one.
    pub redactor: Redactor,
    /// Fired by Ctrl-C, SIGTERM or SIGHUP: the command stops and exits 130.
    pub interrupt: Trigger,
}

/// How a command ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    ToolError = 1,
    Failure = 2,
    InputRequired = 3,
    Interrupted = 130,
}

/// Runs a parsed command. Errors are printed once, redacted, as `nod: ...`.
pub fn run(command: Command, ctx: &Context) -> Exit {
    let result = match command {
        Command::Help(page) => print(&crate::cli::help::render(page)).map(|()| Exit::Ok),
        Command::Version => print(&format!("nod {}\n", env!("CARGO_PKG_VERSION"))).map(|()| Exit::Ok),
        Command::GenerateMan(page) => print(&crate::cli::help::man(page)).map(|()| Exit::Ok),
        Command::Shell => {
            Err(anyhow!("the interactive shell is not built yet; see nod --help for what nod can do now"))
        }
        Command::Mcp(mcp) => run_mcp(mcp, ctx),
        Command::Ask(ask) => return ask::ask(ask, ctx),
        Command::Permissions { globals, json } => permissions(&globals, json),
        Command::Status { json } => status::status(json),
        Command::Doctor { json } => status::doctor(json),
    };
    let exit = match result {
        Ok(exit) => exit,
        Err(err) if is_broken_pipe(&err) => Exit::Ok,
        Err(_) if ctx.interrupt.is_fired() => Exit::Interrupted,
        Err(err) => {
            eprintln!("nod: {}", ctx.redactor.redact(&format!("{err:#}")));
            Exit::Failure
        }
    };
    if ctx.interrupt.is_fired() {
        return Exit::Interrupted;
    }
    exit
}

/// `nod permissions [--json]`: the effective mode and rules, with their sources.
fn permissions(globals: &crate::cli::Globals, json: bool) -> anyhow::Result<Exit> {
    let workspace = config::project::locate(&std::env::current_dir().unwrap_or_default()).0;
    let settings = config::agent::load(&config::settings::path()?, &workspace);
    for issue in &settings.issues {
        eprintln!("nod: {issue}");
    }
    let (policy, _) = ask::policy_and_limits(globals, &settings)?;
    if json {
        print_json(&policy.describe_json())?;
    } else {
        print(&policy.describe())?;
    }
    Ok(Exit::Ok)
}

fn run_mcp(mcp: Mcp, ctx: &Context) -> anyhow::Result<Exit> {
    match mcp {
        Mcp::Path => {
            print(&format!("{}\n", config::profile::path()?.display()))?;
            Ok(Exit::Ok)
        }
        Mcp::Add(add) => edit::add(add),
        Mcp::Remove { name } => edit::remove(&name),
        Mcp::Trust(command) => trust::run(command, ctx),
        Mcp::Auth { name, open } => auth::auth(&name, open, ctx),
        Mcp::Logout { name } => auth::logout(&name),
        Mcp::List { connect, json } => list::run(connect, json, ctx),
        Mcp::ToolList { server, json } => tool::list(&server, json, ctx),
        Mcp::ToolCall(call) => tool::call(call, ctx),
        Mcp::ResourceList { server, json } => resource::list(&server, json, false, ctx),
        Mcp::ResourceTemplates { server, json } => resource::list(&server, json, true, ctx),
        Mcp::ResourceRead { server, uri, output, json } => resource::read(&server, &uri, output.as_deref(), json, ctx),
        Mcp::ResourceComplete { server, template, variable, value, context, json } => {
            resource::complete(&server, &template, &variable, &value, &context, json, ctx)
        }
        Mcp::PromptList { server, json } => prompt::list(&server, json, ctx),
        Mcp::PromptGet { server, name, arguments, json } => {
            prompt::get(&server, &name, arguments.as_deref(), json, ctx)
        }
        Mcp::PromptComplete { server, name, argument, value, context, json } => {
            prompt::complete(&server, &name, &argument, &value, &context, json, ctx)
        }
    }
}

/// Loads the profile, prints its file-level issues and those of `only` (or all with `None`),
/// and remembers its secrets for redaction.
fn load_profile(only: Option<&str>, ctx: &Context) -> anyhow::Result<Loaded> {
    let loaded = config::load_native()?;
    ctx.redactor.add(loaded.secrets());
    for issue in &loaded.issues {
        if only.is_none() || issue.server.is_none() || issue.server.as_deref() == only {
            eprintln!("nod: {issue}");
        }
    }
    Ok(loaded)
}

/// The server `name` from the profile, or a clear error saying why it cannot be used.
fn find_server<'a>(loaded: &'a Loaded, name: &str) -> anyhow::Result<&'a ServerConfig> {
    if let Some(server) = loaded.server(name) {
        if !server.enabled {
            bail!("server {name} is disabled (\"enabled\": false in {})", loaded.path.display());
        }
        return Ok(server);
    }
    if let Some(entry) = loaded.project.entries.iter().find(|e| e.name == name) {
        bail!("{}", untrusted(&entry.name, entry.trust));
    }
    if loaded.issues.iter().any(|i| i.severity == Severity::Error && i.server.as_deref() == Some(name)) {
        bail!("server {name} has a configuration error (above); fix it in {}", loaded.path.display());
    }
    let known: Vec<&str> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
    if known.is_empty() {
        bail!(
            "no server named {name}: the profile {} has no servers; add one with an editor (see nod-mcp(1))",
            loaded.path.display()
        );
    }
    bail!("no server named {name} in {} (configured: {})", loaded.path.display(), known.join(", "))
}

/// Why a project server is not used, and the command that changes it.
fn untrusted(name: &str, trust: Trust) -> String {
    match trust {
        Trust::Rejected => format!("project server {name} was rejected; nod mcp trust approve {name} allows it"),
        Trust::Changed => format!(
            "project server {name} changed since it was approved or rejected; review .mcp.json, then run nod mcp trust approve {name}"
        ),
        _ => format!(
            "project server {name} is pending approval; review .mcp.json, then run nod mcp trust approve {name}"
        ),
    }
}

/// Says on stderr which project servers are left out, and why.
fn note_skipped(loaded: &Loaded) {
    for entry in loaded.project.entries.iter().filter(|e| e.trust != Trust::Approved) {
        if loaded.server(&entry.name).is_none() {
            eprintln!("nod: skipped: {}", untrusted(&entry.name, entry.trust));
        }
    }
}

/// One engine with one connected server, for commands about a single server.
struct One {
    engine: Engine,
    first: Option<Arc<Session>>,
    server: Option<Supervised>,
}

impl One {
    fn connect(name: &str, handler: Arc<dyn InboundHandler>, ctx: &Context) -> anyhow::Result<One> {
        One::connect_with(name, handler, &Access { browser: browser::from_environment(), fresh: false }, ctx)
    }

    fn connect_with(
        name: &str,
        handler: Arc<dyn InboundHandler>,
        access: &Access,
        ctx: &Context,
    ) -> anyhow::Result<One> {
        let loaded = load_profile(Some(name), ctx)?;
        let config = find_server(&loaded, name)?;
        let engine = start_engine(ctx);
        let started = Supervised::start(&engine, config, handler, access)
            .and_then(|server| Ok((server.session()?, server)))
            .map_err(|e| anyhow!("server {name}: {e:#}"));
        match started {
            Ok((first, server)) => Ok(One { engine, first: Some(first), server: Some(server) }),
            Err(err) => {
                engine.shutdown();
                Err(err)
            }
        }
    }

    /// For commands that call no tool. The capabilities are those of `tool call`, so a
    /// server lists the same tools to both (servers register some tools by capability).
    fn plain(name: &str, ctx: &Context) -> anyhow::Result<One> {
        One::connect(name, no_input(), ctx)
    }

    /// The session the command started with.
    fn session(&self) -> &Session {
        self.first.as_ref().expect("connected")
    }

    /// The live session, restarted per restart_limit if the server died.
    fn live(&self) -> anyhow::Result<Arc<Session>> {
        self.server.as_ref().expect("connected").session()
    }
}

impl Drop for One {
    fn drop(&mut self) {
        // Closing through the engine ends every connection in parallel.
        self.engine.shutdown();
        self.first.take();
        self.server.take();
    }
}

/// An engine that an interrupt stops: every call in flight is cancelled on the wire, then
/// every server is shut down.
fn start_engine(ctx: &Context) -> Engine {
    let engine = Engine::start();
    let stop = engine.clone();
    ctx.interrupt.on_fire(move || {
        stop.cancel_all("interrupted by the user");
        stop.shutdown();
    });
    engine
}

/// The handler for commands that cannot ask anyone: elicitations are cancelled.
fn no_input() -> Arc<dyn InboundHandler> {
    Arc::new(PolicyHandler { policy: Policy::Fail, input_required: None })
}

/// Writes to stdout; a closed pipe surfaces as an error that `run` turns into success.
fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Pretty JSON on stdout, streamed (a large result is not copied into a string first).
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// `{"<key>": [items]}` without copying the items.
fn print_listing(key: &str, items: &[serde_json::Value]) -> anyhow::Result<()> {
    print_json(&std::collections::BTreeMap::from([(key, items)]))
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

fn stdout_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
}
