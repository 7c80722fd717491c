//! The shell's surface: how a turn's text, tool lines, notices and questions show on the
//! terminal (one `Surface` for the agent), and the browser side of `/mcp auth`.

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use super::input::Asking;
use crate::agent::{Answer, Approval, Elicited, Level, Surface};
use crate::cmd::form::{self, Reply};
use crate::session::elicit::InputRequired;
use crate::util::{Trigger, one_line, terminal_safe};

/// What the agent shows and asks in the shell.
pub(super) struct ShellSurface<'i> {
    pub(super) asking: Asking<'i>,
    pub(super) trigger: Trigger,
    pub(super) redactor: crate::util::Redactor,
    /// The last character written to stdout.
    pub(super) last: char,
    /// When the last progress line was shown (at most one each 100 ms).
    pub(super) progress_shown: Option<Instant>,
}

impl ShellSurface<'_> {
    pub(super) fn out(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(terminal_safe(text).as_bytes());
        let _ = stdout.flush();
        self.last = text.chars().last().unwrap_or(self.last);
    }
}

impl Surface for ShellSurface<'_> {
    fn text(&mut self, delta: &str) {
        self.out(delta);
    }

    fn step(&mut self, step: usize) {
        if step > 1 && self.last != '\n' {
            self.out("\n");
        }
    }

    fn tool_started(&mut self, name: &str, arguments: &str) {
        if self.last != '\n' {
            self.out("\n");
        }
        // The name is the model's: made terminal-safe like everything else it writes.
        eprintln!("● {} {}", terminal_safe(&one_line(name)), terminal_safe(&crate::agent::preview(arguments)));
    }

    fn progress(&mut self, progress: &crate::dispatch::Progress) {
        if self.progress_shown.is_some_and(|at| at.elapsed() < Duration::from_millis(100)) {
            return;
        }
        self.progress_shown = Some(Instant::now());
        eprintln!("  … {}", crate::cmd::render::progress(progress));
    }

    fn tool_finished(&mut self, _name: &str, ok: bool, detail: &str, _result: &str) {
        if !ok {
            let first = detail.lines().next().unwrap_or("");
            let first: String = first.chars().take(120).collect();
            eprintln!("  ✗ {}", terminal_safe(&self.redactor.redact(&first)));
        }
    }

    fn notice(&mut self, level: Level, text: &str) {
        let mark = match level {
            Level::Error => "✗",
            Level::Warning => "!",
            Level::Info => "·",
        };
        eprintln!("{mark} {}", terminal_safe(&self.redactor.redact(text)));
    }

    /// `None` without a terminal: the call is refused as permission_required, as in `nod
    /// ask`, and the next piped line stays a line of the script.
    fn approve(&mut self, request: &Approval) -> Option<Answer> {
        if !self.asking.input.can_ask() {
            return None;
        }
        if self.last != '\n' {
            self.out("\n");
        }
        let answer = form::approve(&mut self.asking, request);
        if answer == Answer::Cancel {
            self.trigger.fire();
        }
        Some(answer)
    }

    fn elicit(&mut self, request: &InputRequired) -> Elicited {
        if self.last != '\n' {
            self.out("\n");
        }
        match form::elicit(&mut self.asking, request) {
            Ok(answer) => Elicited::Answer(answer),
            Err(form::Interrupted) => {
                self.trigger.fire();
                Elicited::Answer(json!({ "action": "cancel" }))
            }
        }
    }
}

/// The browser side of `/mcp auth`: the URL is shown (and opened with `--open` or when
/// BROWSER is set), and a redirect URL may be pasted on the terminal without echo; the
/// reading stops as soon as the flow ends, so nothing typed afterwards is taken.
pub(super) struct ShellBrowser {
    open: bool,
    stop: Trigger,
    reader: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ShellBrowser {
    pub(super) fn new(open: bool, interrupt: Trigger) -> ShellBrowser {
        // Ctrl-C during the flow also stops the reading.
        let stop = Trigger::default();
        let also = stop.clone();
        interrupt.on_fire(move || also.fire());
        ShellBrowser { open, stop, reader: Mutex::new(None) }
    }

    pub(super) fn finish(&self) {
        self.stop.fire();
        if let Ok(mut reader) = self.reader.lock()
            && let Some(handle) = reader.take()
        {
            let _ = handle.join();
        }
    }
}

impl crate::oauth::Browser for ShellBrowser {
    fn show(&self, server: &str, url: &str) -> Result<(), crate::oauth::AuthError> {
        crate::cmd::browser::Interactive { open: self.open }.show(server, url)
    }

    fn pasted(&self) -> Option<crossbeam_channel::Receiver<String>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let stop = self.stop.clone();
        let handle = std::thread::Builder::new()
            .name("nod-oauth-paste".into())
            .spawn(move || {
                let mut lines = form::FdLines::new(libc::STDIN_FILENO);
                let _echo = form::NoEcho::start(libc::STDIN_FILENO);
                while let Reply::Line(line) = lines.next(&stop) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        if let Ok(mut reader) = self.reader.lock() {
            *reader = Some(handle);
        }
        Some(rx)
    }
}
