//! `nod ask` and `nod permissions`, and the agent's global flags (`--full-access`/`--yolo`,
//! `--context-limit`), which may come before the command or among its flags. The flags of
//! `ask` may come anywhere before `--`, before the prompt's words or after them (`nod ask
//! hello --json`, as `llm`, `gh` and `claude` take theirs); after `--` everything is prompt
//! text, dashes and all. A word that looks like an option nod does not know is an error that
//! says how to send it.

use lexopt::prelude::*;

use super::Command;
use super::help::Page;
use super::lex::{Parsed, lex, no_argument, string, unknown_option, usage};

/// Flags valid before any command.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Globals {
    pub full_access: bool,
    pub context_limits: Vec<String>,
    /// `--add-dir PATH` (repeatable): directories offered to servers as roots beside the
    /// workspace.
    pub add_dirs: Vec<std::path::PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub globals: Globals,
    /// The prompt words, joined with spaces (empty: read the prompt from stdin).
    pub prompt: String,
    pub json: bool,
    pub quiet: bool,
    pub prompt_permissions: bool,
    pub no_stdin: bool,
    pub system: Option<String>,
    pub model: Option<String>,
    pub max_steps: Option<usize>,
    /// `-c`: go on with the most recent session of this workspace.
    pub continue_last: bool,
    /// `--resume ID`: go on with that session (a unique prefix of its id).
    pub resume: Option<String>,
    pub no_save: bool,
}

/// `nod acp`: an ACP agent on stdin and stdout.
#[derive(Debug, Clone, PartialEq)]
pub struct Acp {
    pub globals: Globals,
    pub model: Option<String>,
    /// Logs go here instead of stderr.
    pub log_file: Option<std::path::PathBuf>,
}

/// A global flag.
pub(super) enum Global {
    FullAccess,
    ContextLimit,
    AddDir,
}

/// Which global flag `arg` is, if it is one.
pub(super) fn global(arg: &lexopt::Arg<'_>) -> Option<Global> {
    match arg {
        Long("full-access") | Long("yolo") => Some(Global::FullAccess),
        Long("context-limit") => Some(Global::ContextLimit),
        Long("add-dir") => Some(Global::AddDir),
        _ => None,
    }
}

/// Applies a global flag, reading its value.
pub(super) fn apply(flag: Global, parser: &mut lexopt::Parser, globals: &mut Globals, page: Page) -> Parsed<()> {
    match flag {
        Global::FullAccess => globals.full_access = true,
        Global::ContextLimit => globals.context_limits.push(string(parser, page)?),
        Global::AddDir => globals.add_dirs.push(string(parser, page)?.into()),
    }
    Ok(())
}

/// The long flags a command of the table takes, `help` included.
fn known_flags(path: &str) -> Vec<&'static str> {
    let own = super::help::command(path).map(|c| c.flags).unwrap_or_default();
    own.iter().copied().chain(["help"]).collect()
}

pub(super) fn parse_ask(parser: &mut lexopt::Parser, globals: Globals) -> Parsed<Command> {
    let page = Page::Command("ask");
    let mut ask = Ask {
        globals,
        prompt: String::new(),
        json: false,
        quiet: false,
        prompt_permissions: false,
        no_stdin: false,
        system: None,
        model: None,
        max_steps: None,
        continue_last: false,
        resume: None,
        no_save: false,
    };
    let mut words: Vec<String> = Vec::new();
    while let Some(arg) = parser.next().map_err(lex(page))? {
        if let Some(flag) = global(&arg) {
            apply(flag, parser, &mut ask.globals, page)?;
            continue;
        }
        match arg {
            Long("json") => ask.json = true,
            Short('q') | Long("quiet") => ask.quiet = true,
            Long("prompt-permissions") => ask.prompt_permissions = true,
            Long("no-stdin") => ask.no_stdin = true,
            Short('c') | Long("continue") => ask.continue_last = true,
            Long("resume") => ask.resume = Some(string(parser, page)?),
            Long("no-save") => ask.no_save = true,
            Short('s') | Long("system") => ask.system = Some(string(parser, page)?),
            Short('m') | Long("model") => ask.model = Some(string(parser, page)?),
            Long("max-steps") => {
                let text = string(parser, page)?;
                let steps = text
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| usage(page, format!("--max-steps takes a positive number, not {text:?}")))?;
                ask.max_steps = Some(steps);
            }
            Short('h') | Long("help") => return Ok(Command::Help(page)),
            Value(word) => {
                words.push(word.into_string().map_err(|_| usage(page, "the prompt must be valid UTF-8"))?);
            }
            other => {
                let mut err = unknown_option(page, other, &known_flags("ask"), "nod ask");
                err.message.push_str("; to send words that start with a dash, put them after --: nod ask -- -x ...");
                return Err(err);
            }
        }
    }
    if ask.continue_last && ask.resume.is_some() {
        return Err(usage(page, "--continue and --resume each name the session to go on with; give one"));
    }
    ask.prompt = words.join(" ");
    Ok(Command::Ask(ask))
}

pub(super) fn parse_permissions(parser: &mut lexopt::Parser, mut globals: Globals) -> Parsed<Command> {
    let page = Page::Command("permissions");
    let mut json = false;
    while let Some(arg) = parser.next().map_err(lex(page))? {
        if let Some(flag) = global(&arg) {
            apply(flag, parser, &mut globals, page)?;
            continue;
        }
        match arg {
            Long("json") => json = true,
            Short('h') | Long("help") => return Ok(Command::Help(page)),
            Value(word) => return Err(no_argument("permissions", &word)),
            other => return Err(unknown_option(page, other, &known_flags("permissions"), "nod permissions")),
        }
    }
    Ok(Command::Permissions { globals, json })
}

pub(super) fn parse_acp(parser: &mut lexopt::Parser, globals: Globals) -> Parsed<Command> {
    let page = Page::Command("acp");
    let mut acp = Acp { globals, model: None, log_file: None };
    while let Some(arg) = parser.next().map_err(lex(page))? {
        if let Some(flag) = global(&arg) {
            apply(flag, parser, &mut acp.globals, page)?;
            continue;
        }
        match arg {
            Short('m') | Long("model") => acp.model = Some(string(parser, page)?),
            Long("log-file") => acp.log_file = Some(string(parser, page)?.into()),
            Short('h') | Long("help") => return Ok(Command::Help(page)),
            Value(word) => return Err(no_argument("acp", &word)),
            other => return Err(unknown_option(page, other, &known_flags("acp"), "nod acp")),
        }
    }
    Ok(Command::Acp(acp))
}
