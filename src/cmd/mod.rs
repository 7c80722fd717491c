//! The front end of `nod mcp`: each command loads the profile, starts the servers it needs
//! on one engine, does its work, prints, and shuts everything down. With `cli`, the only
//! module that prints. A failure is printed once, redacted, as `nod: ...` on stderr and,
//! under `--json`, as `{"error": {...}}` on stdout (`failure`).

pub(crate) mod acp;
mod ask;
mod auth;
mod browser;
mod edit;
pub(crate) mod failure;
pub(crate) mod form;
mod import;
pub mod interrupt;
mod list;
pub mod logging;
mod names;
mod one;
mod output;
mod prompt;
mod query;
mod render;
mod resource;
mod sessions;
mod setup;
mod shell;
mod skills;
mod status;
mod tool;
mod trust;

use std::io::Write;

use crate::cli::{Command, Mcp, Options, UsageError};
use crate::util::{Redactor, Trigger};
use failure::Kind;
use one::One;
use query::Query;

/// What every command gets from `main`: values, not globals.
#[derive(Clone, Default)]
pub struct Context {
    /// The secrets to keep out of every message; the logger holds the same one.
    pub redactor: Redactor,
    /// Fired by Ctrl-C, SIGTERM or SIGHUP: the command stops and exits 130.
    pub interrupt: Trigger,
    /// `--json` and the timeouts of this `nod mcp` run.
    pub options: Options,
    /// The signal handling, for a shell that arms a trigger per turn.
    pub signals: Option<interrupt::Signals>,
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

/// Runs a parsed command. Errors are printed once, redacted, as `nod: ...` (and as JSON on
/// stdout under `--json`).
pub fn run(command: Command, ctx: &Context) -> Exit {
    let (json, server, fallback) = match &command {
        Command::Mcp(mcp, options) => {
            let edits = matches!(
                mcp,
                Mcp::Path
                    | Mcp::Add(_)
                    | Mcp::AddJson { .. }
                    | Mcp::Get { .. }
                    | Mcp::Import { .. }
                    | Mcp::Remove { .. }
                    | Mcp::Trust(_)
            );
            (options.json, mcp.server().map(str::to_string), if edits { Kind::Config } else { Kind::Connection })
        }
        Command::Status { json }
        | Command::Doctor { json }
        | Command::Skills { json, .. }
        | Command::Sessions { json, .. } => (*json, None, Kind::Config),
        _ => (false, None, Kind::Usage),
    };
    let result = match command {
        Command::Help(page) => print(&crate::cli::man::render(page)).map(|()| Exit::Ok),
        Command::Version => print(&format!("nod {}\n", env!("CARGO_PKG_VERSION"))).map(|()| Exit::Ok),
        Command::GenerateMan(page) => print(&crate::cli::man::man(page)).map(|()| Exit::Ok),
        Command::Shell(globals) => return shell::run(globals, ctx),
        Command::Completions(shell) => print(shell.script()).map(|()| Exit::Ok),
        Command::Complete(words) => names::complete(&words),
        Command::Mcp(mcp, options) => {
            let ctx = Context { options, ..ctx.clone() };
            run_mcp(mcp, &ctx)
        }
        Command::Ask(ask) => return ask::ask(ask, ctx),
        Command::Acp(acp) => return acp::run(acp, ctx),
        Command::Permissions { globals, json } => permissions(&globals, json),
        Command::Status { json } => status::status(json),
        Command::Doctor { json } => status::doctor(json),
        Command::Skills { action, json } => skills::run(action, json),
        Command::Sessions { action, json } => sessions::run(action, json),
    };
    finish(result, json, server.as_deref(), fallback, ctx)
}

/// How a command that returned `result` ends: a broken pipe is success, an interrupt exits
/// 130, and a failure is reported once (`fallback` is its kind when it has no typed cause).
pub(super) fn finish(
    result: anyhow::Result<Exit>,
    json: bool,
    server: Option<&str>,
    fallback: Kind,
    ctx: &Context,
) -> Exit {
    let exit = match result {
        Ok(exit) => exit,
        Err(err) if is_broken_pipe(&err) => Exit::Ok,
        Err(_) if ctx.interrupt.is_fired() => {
            if json {
                let err = failure::fail(Kind::Interrupted, "interrupted; requests in flight were cancelled");
                return report(&err, json, server, Kind::Interrupted, ctx);
            }
            Exit::Interrupted
        }
        Err(err) => report(&err, json, server, fallback, ctx),
    };
    if ctx.interrupt.is_fired() {
        return Exit::Interrupted;
    }
    exit
}

/// `nod permissions [--json]`: the effective mode and rules, with their sources.
fn permissions(globals: &crate::cli::Globals, json: bool) -> anyhow::Result<Exit> {
    let setup = setup::prepare(&setup::Surface::Permissions, globals, &Redactor::default(), &setup::process_env)?;
    for issue in &setup.issues {
        eprintln!("nod: {issue}");
    }
    let policy = setup.policy;
    if json {
        print_json(&policy.describe_json())?;
    } else {
        print(&policy.describe())?;
    }
    Ok(Exit::Ok)
}

/// Prints a failure: the message on stderr, and with `json` the error document on stdout.
fn report(err: &anyhow::Error, json: bool, server: Option<&str>, fallback: Kind, ctx: &Context) -> Exit {
    let kind = failure::kind_of(err).unwrap_or(fallback);
    let message = ctx.redactor.redact(&failure::message(err));
    eprintln!("nod: {}", crate::util::terminal_safe(&message));
    if json {
        let redact = |text: &str| ctx.redactor.redact(text);
        let _ = print_json(&failure::to_json(kind, &message, server, Some(err), &redact));
    }
    kind.exit()
}

/// A command line nod could not parse: `nod: ...` on stderr, and the usage error as JSON
/// when the command line asked for `--json`.
pub fn report_usage(err: &UsageError, args: &[std::ffi::OsString]) -> Exit {
    eprintln!("nod: {err}");
    if args.iter().any(|a| a == "--json") {
        let _ = print_json(&failure::to_json(Kind::Usage, &err.message, None, None, &|t| t.to_string()));
    }
    Exit::Failure
}

fn run_mcp(mcp: Mcp, ctx: &Context) -> anyhow::Result<Exit> {
    // One-shot work: nod's threads hand each answer on without preempting each other.
    crate::transport::sched::enter_batch();
    let json = ctx.options.json;
    match mcp {
        Mcp::Path => {
            let path = crate::config::profile::path()?;
            if json {
                print_json(&serde_json::json!({ "path": path }))?;
            } else {
                print(&format!("{}\n", path.display()))?;
            }
            Ok(Exit::Ok)
        }
        Mcp::Add(add) => edit::add(add, json),
        Mcp::AddJson { name, entry } => edit::add_json(&name, &entry, json),
        Mcp::Get { name } => edit::get(&name, json),
        Mcp::Import { file, yes } => import::import(&file, yes, json),
        Mcp::Remove { name } => edit::remove(&name, json),
        Mcp::Trust(command) => trust::run(command, ctx),
        Mcp::Auth { name, open } => auth::auth(&name, open, ctx),
        Mcp::Logout { name } => auth::logout(&name, json),
        Mcp::List { connect } => list::run(connect, ctx),
        Mcp::ToolCall(call) => tool::call::run(call, ctx),
        query @ (Mcp::ToolList { .. }
        | Mcp::ToolShow { .. }
        | Mcp::ResourceList { .. }
        | Mcp::ResourceTemplates { .. }
        | Mcp::ResourceRead { .. }
        | Mcp::ResourceComplete { .. }
        | Mcp::PromptList { .. }
        | Mcp::PromptGet { .. }
        | Mcp::PromptComplete { .. }
        | Mcp::SkillList { .. }
        | Mcp::SkillShow { .. }) => {
            let (server, query) = Query::of(query).expect("every query is a Query")?;
            let one = One::plain(&server, ctx)?;
            let exit = query.run(one.session(), query::Lasting::OneShot, ctx);
            one.session().leave_listings_to_exit();
            exit
        }
    }
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

fn stdin_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
}
