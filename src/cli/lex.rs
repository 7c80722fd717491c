//! The pieces every lexopt loop of the CLI shares: the result type, usage errors that name
//! their help page, reading a flag's value, and `Rest`, the flags `nod mcp` collects wherever
//! they are. The loops themselves (`parse`, `ask`) and the command table (`build`) sit on it.

use std::path::PathBuf;

use lexopt::prelude::*;

use super::help::Page;
use super::suggest;
use super::{ElicitArg, Options, Source, UsageError};

pub(super) type Parsed<T> = Result<T, UsageError>;

pub(super) fn usage(page: Page, message: impl Into<String>) -> UsageError {
    UsageError { message: message.into(), page }
}

pub(super) fn lex(page: Page) -> impl Fn(lexopt::Error) -> UsageError {
    move |e| usage(page, e.to_string())
}

/// A word given to a command that takes none.
pub(super) fn no_argument(path: &'static str, word: &std::ffi::OsStr) -> UsageError {
    let shown = word.to_string_lossy();
    usage(Page::Command(path), format!("nod {path} takes no argument {shown:?}; see nod {path} --help"))
}

/// An option nod does not know, with the closest one it does.
pub(super) fn unknown_option(page: Page, arg: lexopt::Arg<'_>, known: &[&str], see: &str) -> UsageError {
    let (shown, hint) = match arg {
        Long(name) => (format!("--{name}"), suggest::hint(name, known.iter().copied()).replace("mean ", "mean --")),
        Short(c) => (format!("-{c}"), String::new()),
        Value(value) => (format!("{:?}", value.to_string_lossy()), String::new()),
    };
    usage(page, format!("unknown option {shown}{hint}; see {see} --help"))
}

/// Flags every `nod mcp` subcommand shares, plus positional values in order.
#[derive(Default)]
pub(super) struct Rest {
    pub(super) values: Vec<String>,
    /// Long names of the flags given, to check that the command takes them.
    pub(super) given: Vec<&'static str>,
    pub(super) options: Options,
    pub(super) connect: bool,
    pub(super) jsonl: bool,
    pub(super) parallel: Option<usize>,
    pub(super) elicit: Option<ElicitArg>,
    pub(super) elicit_answer: Option<Source>,
    pub(super) output: Option<PathBuf>,
    pub(super) pairs: Vec<(String, String)>,
    pub(super) transport: Option<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) open: bool,
    pub(super) yes: bool,
    pub(super) help: bool,
}

pub(super) fn string(parser: &mut lexopt::Parser, page: Page) -> Parsed<String> {
    parser.value().map_err(lex(page))?.into_string().map_err(|_| usage(page, "option values must be valid UTF-8"))
}
