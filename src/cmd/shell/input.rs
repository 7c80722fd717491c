//! The shell's input: a line editor (rustyline) on a terminal, with history kept in
//! `$NOD_HOME/prompt_history`; plain lines from stdin otherwise, so a scripted session is
//! the same REPL without editing. Questions asked during a turn (approvals, forms) read
//! through the same input, never into the history, and only when stdin is a terminal.

use std::io::Write;
use std::path::PathBuf;

use rustyline::error::ReadlineError;
use rustyline::history::{History, MemHistory};

use crate::cmd::form::{FdLines, NoEcho, Prompter, Reply};
use crate::util::Trigger;

/// Entries the history keeps.
const HISTORY_CAP: usize = 500;

/// Where a line from another thread goes.
pub type Notify = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

pub enum Input {
    Editor(Box<Editor>),
    Piped(FdLines),
}

pub struct Editor {
    line: rustyline::Editor<(), MemHistory>,
    /// Where entries are appended, when history is on.
    file: Option<PathBuf>,
    /// For a hidden question, read on the terminal in cooked mode.
    cooked: FdLines,
}

/// The interrupt a question waits on: the shell sets the turn's own while a turn runs.
pub struct Asking<'a> {
    pub input: &'a mut Input,
    pub interrupt: Trigger,
}

impl Input {
    /// The line editor when stdin and stdout are terminals, else plain lines. `history`: the
    /// file to load and append to (None: history off).
    pub fn open(history: Option<PathBuf>) -> Input {
        use std::io::IsTerminal;
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return Input::Piped(FdLines::new(libc::STDIN_FILENO));
        }
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .bracketed_paste(true)
            .max_history_size(HISTORY_CAP)
            .and_then(|b| b.history_ignore_dups(true))
            .map(rustyline::config::Builder::build)
            .unwrap_or_default();
        let history_store = MemHistory::with_config(&config);
        let Ok(mut line) = rustyline::Editor::with_history(config, history_store) else {
            return Input::Piped(FdLines::new(libc::STDIN_FILENO));
        };
        if let Some(path) = &history {
            for entry in load(path) {
                let _ = line.add_history_entry(entry);
            }
        }
        Input::Editor(Box::new(Editor { line, file: history, cooked: FdLines::new(libc::STDIN_FILENO) }))
    }

    /// Prints lines from other threads (servers settling in the background): above the
    /// prompt while the editor reads, on stderr otherwise.
    pub fn notifier(&mut self) -> Notify {
        if let Input::Editor(editor) = self
            && let Ok(printer) = editor.line.create_external_printer()
        {
            let printer = std::sync::Mutex::new(printer);
            return std::sync::Arc::new(move |line: &str| {
                use rustyline::ExternalPrinter;
                if let Ok(mut printer) = printer.lock() {
                    let _ = printer.print(format!("{line}\n"));
                }
            });
        }
        std::sync::Arc::new(|line: &str| eprintln!("{line}"))
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self, Input::Editor(_))
    }

    /// Whether someone can answer a question: stdin is a terminal. Piped lines belong to the
    /// script, which cannot have foreseen a question; taking one as an answer would let
    /// `printf 'a\n' | nod` approve what it never saw.
    pub fn can_ask(&self) -> bool {
        use std::io::IsTerminal;
        match self {
            Input::Editor(_) => true,
            Input::Piped(_) => std::io::stdin().is_terminal(),
        }
    }

    /// One line at the main prompt: `Interrupted` for Ctrl-C (typed, or the signal firing
    /// `interrupt` when the input is not a terminal), `End` for Ctrl-D.
    pub fn prompt(&mut self, prompt: &str, interrupt: &Trigger) -> Reply {
        match self {
            Input::Editor(editor) => match editor.line.readline(prompt) {
                Ok(line) => Reply::Line(line),
                Err(ReadlineError::Interrupted) => Reply::Interrupted,
                Err(_) => Reply::End,
            },
            Input::Piped(lines) => lines.next(interrupt),
        }
    }

    /// Adds a line to the history (and its file). The shell decides first whether the line
    /// may carry a secret (`may_remember`).
    pub fn remember(&mut self, line: &str) {
        let Input::Editor(editor) = self else { return };
        if line.trim().is_empty() {
            return;
        }
        let last =
            editor.line.history().len().checked_sub(1).and_then(|i| {
                editor.line.history().get(i, rustyline::history::SearchDirection::Forward).ok().flatten()
            });
        if last.is_some_and(|entry| entry.entry == line) {
            return;
        }
        let _ = editor.line.add_history_entry(line);
        if let Some(path) = &editor.file {
            append(path, line);
        }
    }

    /// A question's line, on the terminal through the editor (no history), else from stdin.
    fn ask(&mut self, prompt: &str, interrupt: &Trigger, hidden: bool) -> Reply {
        match self {
            Input::Editor(editor) if hidden => {
                eprint!("{prompt}");
                let _ = std::io::stderr().flush();
                let echo = NoEcho::start(editor.cooked.fd());
                let reply = editor.cooked.next(interrupt);
                drop(echo);
                eprintln!();
                reply
            }
            Input::Editor(editor) => match editor.line.readline(prompt) {
                Ok(line) => Reply::Line(line),
                Err(ReadlineError::Interrupted) => Reply::Interrupted,
                Err(_) => Reply::End,
            },
            Input::Piped(lines) => {
                eprint!("{prompt}");
                let _ = std::io::stderr().flush();
                lines.next(interrupt)
            }
        }
    }
}

impl Prompter for Asking<'_> {
    fn say(&mut self, text: &str) {
        eprint!("{text}");
        let _ = std::io::stderr().flush();
    }

    fn line(&mut self, prompt: &str) -> Reply {
        let interrupt = self.interrupt.clone();
        self.input.ask(prompt, &interrupt, false)
    }

    fn hidden(&mut self, prompt: &str) -> Reply {
        let interrupt = self.interrupt.clone();
        self.input.ask(prompt, &interrupt, true)
    }
}

/// The history file's entries, oldest first: one a line, `\n` and `\\` escaped. A file over
/// twice the cap is rewritten with the last `HISTORY_CAP`. A file another program (or an
/// older nod) left readable to others is made private.
fn load(path: &PathBuf) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    make_private(path);
    let entries: Vec<String> = text.lines().filter(|l| !l.is_empty()).map(unescape).collect();
    let kept = entries[entries.len().saturating_sub(HISTORY_CAP)..].to_vec();
    if entries.len() > 2 * HISTORY_CAP {
        let body: String = kept.iter().map(|e| format!("{}\n", escape(e))).collect();
        let _ = crate::config::write::write_private(path, body.as_bytes());
    }
    kept
}

fn append(path: &PathBuf, entry: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path);
    if let Ok(mut file) = file {
        // `mode` applies only to a file this call creates.
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
        let _ = file.write_all(format!("{}\n", escape(entry)).as_bytes());
    }
}

/// Mode 0600, whatever the file had.
fn make_private(path: &PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}

fn escape(entry: &str) -> String {
    entry.replace('\\', "\\\\").replace('\n', "\\n").replace('\r', "\\r")
}

fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_entries_keep_their_newlines_and_backslashes() {
        for entry in ["plain", "two\nlines", "a \\ b", "ends with \\", "\\n literally"] {
            assert_eq!(unescape(&escape(entry)), entry);
            assert!(!escape(entry).contains('\n'));
        }
    }
}
