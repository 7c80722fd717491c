//! The terminal side of asking: a `Prompter` over stdin and stderr or /dev/tty (`Term`), lines
//! read from a descriptor without reading ahead (`FdLines`), and echo turned off for a secret
//! (`NoEcho`).

use std::io::Write;

use super::{Prompter, Reply};
use crate::util::Trigger;

/// A terminal in cooked mode: stdin with stderr for `nod mcp`, or /dev/tty for `nod ask`.
/// Ctrl-C is a signal there, which fires `interrupt` and ends the wait for a line.
pub struct Term {
    output: Box<dyn Write + Send>,
    input: FdLines,
    interrupt: Trigger,
    /// Keeps /dev/tty open while `input` reads its descriptor.
    _tty: Option<std::fs::File>,
}

impl Term {
    /// Asks on stderr and reads stdin.
    pub fn stdio(interrupt: Trigger) -> Term {
        Term { output: Box::new(std::io::stderr()), input: FdLines::new(libc::STDIN_FILENO), interrupt, _tty: None }
    }

    /// Asks and reads on /dev/tty, or None when there is no terminal.
    pub fn tty(interrupt: Trigger) -> Option<Term> {
        use std::os::fd::AsRawFd;
        let tty = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").ok()?;
        let output = tty.try_clone().ok()?;
        let input = FdLines::new(tty.as_raw_fd());
        Some(Term { output: Box::new(output), input, interrupt, _tty: Some(tty) })
    }

    fn read(&mut self, prompt: &str, hidden: bool) -> Reply {
        let echo = hidden.then(|| NoEcho::start(self.input.fd)).flatten();
        self.say(prompt);
        let reply = self.input.next(&self.interrupt);
        if echo.is_some() {
            self.say("\n");
        }
        reply
    }
}

impl Prompter for Term {
    fn say(&mut self, text: &str) {
        let _ = self.output.write_all(text.as_bytes());
        let _ = self.output.flush();
    }

    fn line(&mut self, prompt: &str) -> Reply {
        self.read(prompt, false)
    }

    fn hidden(&mut self, prompt: &str) -> Reply {
        self.read(prompt, true)
    }
}

/// Lines read from a descriptor (a terminal in cooked mode, or a pipe) on the calling thread,
/// waiting in `poll` so that a fired trigger ends the wait: nothing reads ahead of a question
/// on another thread, so a line editor can take the terminal over between questions.
pub struct FdLines {
    fd: std::os::fd::RawFd,
    /// Bytes read past the last line (a pipe delivers several lines at once).
    buffer: Vec<u8>,
    ended: bool,
}

impl FdLines {
    pub fn new(fd: std::os::fd::RawFd) -> FdLines {
        FdLines { fd, buffer: Vec::new(), ended: false }
    }

    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd
    }

    /// The next line without its newline; `End` at the end of input (Ctrl-D on a terminal);
    /// `Interrupted` when `interrupt` fires first.
    pub fn next(&mut self, interrupt: &Trigger) -> Reply {
        loop {
            if let Some(at) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=at).collect();
                let text = String::from_utf8_lossy(&line[..at]);
                return Reply::Line(text.trim_end_matches('\r').to_string());
            }
            if self.ended {
                if self.buffer.is_empty() {
                    return Reply::End;
                }
                let rest = std::mem::take(&mut self.buffer);
                return Reply::Line(String::from_utf8_lossy(&rest).into_owned());
            }
            if interrupt.is_fired() {
                return Reply::Interrupted;
            }
            let mut poll = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut poll, 1, 100) };
            if ready <= 0 {
                continue;
            }
            let mut chunk = [0u8; 4096];
            // SAFETY: reads into a buffer this function owns, at most its length.
            let n = unsafe { libc::read(self.fd, chunk.as_mut_ptr().cast(), chunk.len()) };
            match n {
                0 => self.ended = true,
                n if n > 0 => self.buffer.extend_from_slice(&chunk[..n as usize]),
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => self.ended = true,
            }
        }
    }
}

/// The terminal's echo, off until dropped.
pub struct NoEcho {
    fd: std::os::fd::RawFd,
    saved: libc::termios,
}

impl NoEcho {
    pub fn start(fd: std::os::fd::RawFd) -> Option<NoEcho> {
        // SAFETY: tcgetattr and tcsetattr on a descriptor this process holds open, with a
        // termios this function owns; a failure leaves the terminal as it was.
        unsafe {
            let mut termios: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut termios) != 0 {
                return None;
            }
            let saved = termios;
            termios.c_lflag &= !libc::ECHO;
            (libc::tcsetattr(fd, libc::TCSANOW, &termios) == 0).then_some(NoEcho { fd, saved })
        }
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `start`.
        unsafe {
            libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved);
        }
    }
}
