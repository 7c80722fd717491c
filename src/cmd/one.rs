//! Loading the profile for a command, finding the server it names (or saying exactly why it
//! cannot be used, once), and `One`: an engine with one connected server.

use std::sync::Arc;

use anyhow::Context as _;

use super::Context;
use super::failure::{Kind, fail};
use crate::config::project::Trust;
use crate::config::{self, ConfigIssue, Loaded, ServerConfig, Severity};
use crate::dispatch::{Engine, InboundHandler};
use crate::session::elicit::{Policy, PolicyHandler};
use crate::session::supervisor::Supervised;
use crate::session::{Access, Session};

/// Loads the profile and the approved project servers, applies `--timeout` and
/// `--startup-timeout`, and remembers the secrets for redaction. With `only`, prints the
/// warnings that concern that server or the whole file; errors that keep it from being used
/// are for `find_server` to report, once.
pub(super) fn load_profile(only: Option<&str>, ctx: &Context) -> anyhow::Result<Loaded> {
    let loaded = load_quietly(ctx)?;
    for issue in &loaded.issues {
        let concerns = issue.server.is_none() || issue.server.as_deref() == only;
        match only {
            None => eprintln!("nod: {issue}"),
            Some(_) if concerns && issue.severity == Severity::Warning => eprintln!("nod: {issue}"),
            Some(_) => {}
        }
    }
    Ok(loaded)
}

/// `load_profile` for commands that show the issues themselves.
pub(super) fn load_quietly(ctx: &Context) -> anyhow::Result<Loaded> {
    let mut loaded = config::load_native().map_err(|e| fail(Kind::Config, format!("{e:#}")))?;
    ctx.redactor.add(loaded.secrets());
    for server in &mut loaded.servers {
        if let Some(timeout) = ctx.options.timeout {
            server.operation_timeout = timeout;
        }
        if let Some(timeout) = ctx.options.startup_timeout {
            server.startup_timeout = timeout;
        }
        if let Some(version) = ctx.options.protocol_version {
            server.protocol_version = version;
        }
    }
    Ok(loaded)
}

/// The server `name`, or the one reason it cannot be used: its own configuration error, a
/// project entry not approved (or approved but not loadable), a profile that could not be
/// read, or no such server (with the closest name).
pub(super) fn find_server<'a>(loaded: &'a Loaded, name: &str) -> anyhow::Result<&'a ServerConfig> {
    let blocking: Vec<&ConfigIssue> = loaded
        .issues
        .iter()
        .filter(|i| i.severity == Severity::Error && (i.server.is_none() || i.server.as_deref() == Some(name)))
        .collect();
    if let Some(server) = loaded.server(name) {
        // The server works despite them; they are still worth saying.
        for issue in &blocking {
            eprintln!("nod: {issue}");
        }
        if !server.enabled {
            return Err(fail(
                Kind::Config,
                format!("server {name} is disabled (\"enabled\": false in {})", loaded.path.display()),
            ));
        }
        return Ok(server);
    }
    if let Some(issue) = blocking.iter().find(|i| i.server.as_deref() == Some(name)) {
        return Err(fail(Kind::Config, issue.plain()));
    }
    if let Some(entry) = loaded.project.entries.iter().find(|e| e.name == name) {
        return Err(fail(Kind::Config, untrusted(&entry.name, entry.trust)));
    }
    if let Some(issue) = blocking.first() {
        return Err(fail(
            Kind::Config,
            format!("cannot use server {name}: {}: {}", loaded.path.display(), issue.plain()),
        ));
    }
    let known: Vec<&str> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
    if known.is_empty() {
        return Err(fail(
            Kind::NotFound,
            format!(
                "no server named {name}: the profile {} has no servers; add one with nod mcp add {name} <command> [args...] (or --transport http {name} <url>)",
                loaded.path.display()
            ),
        ));
    }
    let hint = crate::cli::suggest::hint(name, known.iter().copied());
    Err(fail(
        Kind::NotFound,
        format!("no server named {name} in {} (configured: {}){hint}", loaded.path.display(), known.join(", ")),
    ))
}

/// Why a project server is not used, and the command that changes it.
pub(super) fn untrusted(name: &str, trust: Trust) -> String {
    match trust {
        Trust::Rejected => format!("project server {name} was rejected; nod mcp trust approve {name} allows it"),
        Trust::Changed => format!(
            "project server {name} changed since it was approved or rejected; review .mcp.json, then run nod mcp trust approve {name}"
        ),
        Trust::Approved => format!("project server {name} is approved but could not be loaded; see nod mcp list"),
        Trust::Pending => format!(
            "project server {name} is pending approval; review .mcp.json, then run nod mcp trust approve {name}"
        ),
    }
}

/// Says on stderr which project servers are left out, and why.
pub(super) fn note_skipped(loaded: &Loaded) {
    for entry in loaded.project.entries.iter().filter(|e| e.trust != Trust::Approved) {
        if loaded.server(&entry.name).is_none() {
            eprintln!("nod: skipped: {}", untrusted(&entry.name, entry.trust));
        }
    }
}

/// One engine with one connected server, for commands about a single server.
pub(super) struct One {
    engine: Engine,
    first: Option<Arc<Session>>,
    server: Option<Supervised>,
}

impl One {
    pub fn connect(name: &str, handler: Arc<dyn InboundHandler>, ctx: &Context) -> anyhow::Result<One> {
        let access = Access {
            browser: super::browser::from_environment(),
            fresh: false,
            redactor: ctx.redactor.clone(),
            revisions: crate::session::revisions::default_path(),
            private_env: crate::config::private_names([]),
        };
        One::connect_with(name, handler, &access, ctx)
    }

    pub fn connect_with(
        name: &str,
        handler: Arc<dyn InboundHandler>,
        access: &Access,
        ctx: &Context,
    ) -> anyhow::Result<One> {
        let handler = with_roots(handler, ctx)?;
        let loaded = load_profile(Some(name), ctx)?;
        let config = find_server(&loaded, name)?;
        let engine = start_engine(ctx);
        let access = Access { private_env: crate::config::private_env(&loaded), ..access.clone() };
        let started = Supervised::start(&engine, config, handler, &access)
            .and_then(|server| Ok((server.session()?, server)))
            .with_context(|| format!("server {name}"));
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
    pub fn plain(name: &str, ctx: &Context) -> anyhow::Result<One> {
        One::connect(name, no_input(), ctx)
    }

    /// The session the command started with.
    pub fn session(&self) -> &Session {
        self.first.as_ref().expect("connected")
    }

    /// The live session, restarted per restart_limit if the server died.
    pub fn live(&self) -> anyhow::Result<Arc<Session>> {
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
pub(super) fn start_engine(ctx: &Context) -> Engine {
    let engine = Engine::start();
    let stop = engine.clone();
    ctx.interrupt.on_fire(move || {
        stop.cancel_all("interrupted by the user");
        stop.shutdown();
    });
    engine
}

/// `handler`, offering the directories `--root` named as roots (none without it: a one-off
/// command never exposes a directory on its own).
pub(super) fn with_roots(handler: Arc<dyn InboundHandler>, ctx: &Context) -> anyhow::Result<Arc<dyn InboundHandler>> {
    use crate::session::roots::{Roots, WithRoots};
    let Some((first, rest)) = ctx.options.roots.split_first() else { return Ok(handler) };
    for dir in &ctx.options.roots {
        if !dir.is_dir() {
            return Err(super::failure::fail(
                super::failure::Kind::Usage,
                format!("--root {} is not a directory", dir.display()),
            ));
        }
    }
    let roots = Arc::new(Roots::new(Some(first), rest, std::iter::empty()));
    Ok(Arc::new(WithRoots::new(handler, roots)))
}

/// The handler for commands that cannot ask anyone: elicitations are cancelled.
pub(super) fn no_input() -> Arc<dyn InboundHandler> {
    Arc::new(PolicyHandler::new(Policy::Fail, None))
}
