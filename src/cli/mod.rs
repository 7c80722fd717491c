//! Command-line parsing: pure lexopt (`parse`), nothing read from the environment or the
//! disk here. `help` holds the one table of commands and flags that feeds `--help`, both
//! man pages (`man`), usage errors with their suggestions (`suggest`) and the shell
//! completions (`complete`).

mod ask;
mod build;
pub(crate) mod complete;
pub(crate) mod help;
mod lex;
pub(crate) mod man;
mod parse;
mod prose;
pub(crate) mod suggest;

use std::path::PathBuf;
use std::time::Duration;

pub use ask::{Acp, Ask, Globals};
pub use parse::parse;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Help(help::Page),
    Version,
    /// `nod` with no command: the interactive shell, with the global flags.
    Shell(Globals),
    /// `nod ask [flags] <prompt>`.
    Ask(Ask),
    /// `nod acp`: an Agent Client Protocol agent on stdin and stdout.
    Acp(Acp),
    /// `nod permissions [--json]`: the effective mode and rules.
    Permissions {
        globals: Globals,
        json: bool,
    },
    /// `nod --generate man <page>`: print a man page.
    GenerateMan(help::Page),
    Mcp(Mcp, Options),
    Status {
        json: bool,
    },
    Doctor {
        json: bool,
    },
    /// `nod skills list|show|trust ...`.
    Skills {
        action: Skills,
        json: bool,
    },
    /// `nod sessions list|show|rm|prune`.
    Sessions {
        action: Sessions,
        json: bool,
    },
    /// `nod completions bash|zsh|fish`.
    Completions(complete::Shell),
    /// `nod __complete WORD...`: the candidates for the last word, for the completion
    /// scripts. Hidden: reads the profile and the completion cache, never connects.
    Complete(Vec<String>),
}

/// What every `nod mcp` command shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    pub json: bool,
    /// `--timeout`: replaces operation_timeout_ms of every server for this run.
    pub timeout: Option<Duration>,
    /// `--startup-timeout`: replaces startup_timeout_ms of every server for this run.
    pub startup_timeout: Option<Duration>,
    /// `--protocol-version`: replaces protocol_version of every server for this run
    /// (`Some(None)`: auto).
    pub protocol_version: Option<Option<crate::mcp::Version>>,
    /// `--root PATH` (repeatable): the roots offered to the server; none without it.
    pub roots: Vec<std::path::PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Mcp {
    Path,
    Add(Add),
    /// `nod mcp add-json <name> <json>`: an entry given whole.
    AddJson {
        name: String,
        entry: Source,
    },
    /// `nod mcp get <name>`: the entry as configured, secrets hidden.
    Get {
        name: String,
    },
    /// `nod mcp import <file> [--yes]`: servers from another tool's configuration.
    Import {
        file: PathBuf,
        yes: bool,
    },
    Remove {
        name: String,
    },
    Trust(Trust),
    Auth {
        name: String,
        open: bool,
    },
    Logout {
        name: String,
    },
    List {
        connect: bool,
    },
    ToolList {
        server: String,
    },
    ToolShow {
        server: String,
        tool: String,
    },
    ToolCall(ToolCall),
    ResourceList {
        server: String,
    },
    ResourceTemplates {
        server: String,
    },
    ResourceRead {
        server: String,
        uri: String,
        output: Option<PathBuf>,
    },
    ResourceComplete {
        server: String,
        template: String,
        variable: String,
        value: String,
        context: Vec<(String, String)>,
    },
    PromptList {
        server: String,
    },
    PromptGet {
        server: String,
        name: String,
        arguments: Arguments,
    },
    PromptComplete {
        server: String,
        name: String,
        argument: String,
        value: String,
        context: Vec<(String, String)>,
    },
    /// The skills the server offers (the MCP skills extension).
    SkillList {
        server: String,
    },
    /// One server skill loaded and verified, or one of its files.
    SkillShow {
        server: String,
        name: String,
        file: Option<String>,
    },
}

impl Mcp {
    /// The server the command is about, for error reports.
    pub fn server(&self) -> Option<&str> {
        Some(match self {
            Mcp::Add(add) => &add.name,
            Mcp::Remove { name } | Mcp::Auth { name, .. } | Mcp::Logout { name } => name,
            Mcp::AddJson { name, .. } | Mcp::Get { name } => name,
            Mcp::Trust(Trust::Approve(name) | Trust::Reject(name)) => name,
            Mcp::ToolList { server }
            | Mcp::ToolShow { server, .. }
            | Mcp::ResourceList { server }
            | Mcp::ResourceTemplates { server }
            | Mcp::ResourceRead { server, .. }
            | Mcp::ResourceComplete { server, .. }
            | Mcp::PromptList { server }
            | Mcp::PromptGet { server, .. }
            | Mcp::PromptComplete { server, .. }
            | Mcp::SkillList { server }
            | Mcp::SkillShow { server, .. } => server,
            Mcp::ToolCall(call) => &call.server,
            Mcp::Path | Mcp::List { .. } | Mcp::Trust(_) | Mcp::Import { .. } => return None,
        })
    }

    /// Whether the command line may hold a secret, so the shell keeps it out of its history:
    /// `add` takes `--env` and `--header` values, a server's own arguments or URL may carry a
    /// token, and `add-json` holds a whole entry.
    pub fn carries_secret(&self) -> bool {
        matches!(self, Mcp::Add(_) | Mcp::AddJson { .. })
    }
}

/// `nod sessions ...`: the saved conversations.
#[derive(Debug, Clone, PartialEq)]
pub enum Sessions {
    List,
    Show(String),
    Remove(String),
    /// Remove the sessions last written longer ago than this.
    Prune(std::time::Duration),
}

/// `nod skills ...`.
#[derive(Debug, Clone, PartialEq)]
pub enum Skills {
    List,
    Show(String),
    /// Copy a local skill folder into the user's skills.
    Add(std::path::PathBuf),
    Remove(String),
    Approve(String),
    Reject(String),
    /// Every pending or changed project skill; `yes`: without it, only shown.
    ApproveAll {
        yes: bool,
    },
    /// Forget every choice about this workspace's project skills.
    Reset,
}

/// `nod mcp trust ...`.
#[derive(Debug, Clone, PartialEq)]
pub enum Trust {
    Approve(String),
    Reject(String),
    /// `yes`: `--yes`, approve without asking on a terminal.
    ApproveAll {
        yes: bool,
    },
    Reset,
}

/// `nod mcp add`: a stdio command, or a remote URL with `--transport`.
#[derive(Debug, Clone, PartialEq)]
pub struct Add {
    pub name: String,
    /// `None` for stdio; `http` or `sse`.
    pub transport: Option<String>,
    /// The command and its arguments, or the URL alone.
    pub target: Vec<String>,
    pub env: Vec<(String, String)>,
    /// `--header 'NAME: VALUE'` for a remote server.
    pub headers: Vec<(String, String)>,
}

/// Where a JSON document comes from: the command line, stdin (`-`) or a file (`@FILE`).
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Inline(String),
    Stdin,
    File(PathBuf),
}

impl Source {
    /// `-` is stdin, `@FILE` a file, anything else the text itself.
    pub fn from_word(word: &str) -> Source {
        match word {
            "-" | "@-" => Source::Stdin,
            _ => match word.strip_prefix('@') {
                Some(path) => Source::File(PathBuf::from(path)),
                None => Source::Inline(word.to_string()),
            },
        }
    }
}

/// The arguments of a tool call or a prompt: an object from somewhere, plus `--arg` pairs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arguments {
    pub object: Option<Source>,
    pub pairs: Vec<(String, String)>,
}

/// `--elicit`: how a `nod mcp` command answers a server's questions when nobody is asked
/// (the command maps it onto the session's policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitArg {
    Fail,
    Decline,
    Cancel,
    Defaults,
}

impl ElicitArg {
    pub fn parse(text: &str) -> Option<ElicitArg> {
        Some(match text {
            "fail" => ElicitArg::Fail,
            "decline" => ElicitArg::Decline,
            "cancel" => ElicitArg::Cancel,
            "defaults" => ElicitArg::Defaults,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub server: String,
    pub tool: String,
    pub arguments: Arguments,
    pub jsonl: bool,
    pub parallel: usize,
    /// `--elicit`; None: ask on a terminal, else fail.
    pub elicit: Option<ElicitArg>,
    /// `--elicit-answer`: the values of a form, as JSON.
    pub elicit_answer: Option<Source>,
    /// `-o`: where images and audio of the result go.
    pub output: Option<PathBuf>,
}

/// A usage error: the message and the help page that explains the command.
#[derive(Debug)]
pub struct UsageError {
    pub message: String,
    pub page: help::Page,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UsageError {}
