//! Running nod with a hard deadline, and assertions on what a user sees of one run.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::NOD;

enum Input {
    Null,
    Bytes(Vec<u8>),
    Pipe,
    /// Descriptor 0 closed, as `nod <&-` starts it.
    Closed,
}

/// A nod command line, run with a hard deadline.
/// The caller's variables a test's nod gets: what programs need to run at all.
const INHERITED: [&str; 7] = ["PATH", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "USER"];

pub struct Cmd {
    home: PathBuf,
    args: Vec<String>,
    input: Input,
    piped_stdout: bool,
    nod_home: bool,
    timeout: Duration,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    /// Run in a session of its own, without a controlling terminal (`/dev/tty` cannot open),
    /// whatever terminal the test suite itself runs in.
    detached: bool,
}

impl Cmd {
    pub fn new(home: &Path, args: Vec<String>) -> Cmd {
        Cmd {
            home: home.to_path_buf(),
            args,
            input: Input::Null,
            piped_stdout: false,
            nod_home: true,
            timeout: Duration::from_secs(20),
            env: Vec::new(),
            cwd: None,
            detached: false,
        }
    }

    /// Runs nod without a controlling terminal, as CI and cron do.
    pub fn detached(mut self) -> Cmd {
        self.detached = true;
        self
    }

    /// Runs nod in `dir` instead of the temp dir.
    pub fn cwd(mut self, dir: &Path) -> Cmd {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// Sets an environment variable for nod (and so for the servers it starts).
    pub fn env(mut self, key: &str, value: impl Into<String>) -> Cmd {
        self.env.push((key.to_string(), value.into()));
        self
    }

    /// Runs without `NOD_HOME` (HOME is still the temp dir).
    pub fn without_nod_home(mut self) -> Cmd {
        self.nod_home = false;
        self
    }

    /// Feeds these bytes to stdin, then closes it.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Cmd {
        self.input = Input::Bytes(bytes.into());
        self
    }

    /// Leaves stdin open for the test to write (`Running::take_stdin`).
    pub fn stdin_pipe(mut self) -> Cmd {
        self.input = Input::Pipe;
        self
    }

    /// Starts nod with descriptor 0 closed (`nod <&-`).
    pub fn closed_stdin(mut self) -> Cmd {
        self.input = Input::Closed;
        self
    }

    /// Leaves stdout to the test (`Running::take_stdout`).
    pub fn stdout_pipe(mut self) -> Cmd {
        self.piped_stdout = true;
        self
    }

    pub fn timeout(mut self, secs: u64) -> Cmd {
        self.timeout = Duration::from_secs(secs);
        self
    }

    pub fn run(self) -> Output {
        self.spawn().wait()
    }

    /// nod with this command line, environment and directory; the caller sets its stdio.
    /// The environment starts empty: only `INHERITED` comes from the caller's (a developer's
    /// `OPENAI_API_KEY`, `NOD_MODEL`, `NOD_BASE_URL` or `BROWSER` must never reach a test's nod),
    /// then what the test sets itself.
    fn command(&self) -> Command {
        let mut command = Command::new(NOD);
        command.env_clear();
        for name in INHERITED {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        if self.nod_home {
            command.env("NOD_HOME", &self.home);
        }
        command
            .args(&self.args)
            .env("HOME", &self.home)
            .env_remove("NOD_LOG")
            .env_remove("RUST_LOG")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(self.cwd.as_ref().unwrap_or(&self.home));
        if self.detached {
            // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        command
    }

    /// Runs nod with a pseudo-terminal as its stdin, stdout and stderr, as in a user's
    /// terminal: the test reads what nod shows and types lines (`Terminal`).
    pub fn spawn_on_terminal(self) -> Terminal {
        let (master, slave) = pseudo_terminal();
        let mut command = self.command();
        command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // The terminal becomes nod's controlling terminal (a session of its own), as in a
        // login shell: /dev/tty opens, and ^C typed on it is SIGINT to nod.
        // SAFETY: setsid and ioctl are async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let child = command.spawn().expect("start nod");
        // The parent's copies of the terminal's slave side close here, so the master reads
        // end (EIO) once nod has exited.
        drop(command);
        let master = std::fs::File::from(master);
        let (tx, output) = mpsc::channel();
        let mut reader = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Terminal {
            child: Some(child),
            args: self.args,
            started,
            timeout: self.timeout,
            master,
            output,
            seen: Vec::new(),
            cursor: 0,
        }
    }

    pub fn spawn(self) -> Running {
        let mut command = self.command();
        command
            .stdin(match self.input {
                Input::Null | Input::Closed => Stdio::null(),
                _ => Stdio::piped(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if matches!(self.input, Input::Closed) {
            // SAFETY: close is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                    libc::close(0);
                    Ok(())
                });
            }
        }
        let started = Instant::now();
        let mut child = command.spawn().expect("start nod");
        let stdin = child.stdin.take();
        let stdin = match (self.input, stdin) {
            (Input::Bytes(bytes), Some(mut pipe)) => {
                // A thread, so a nod that does not read cannot block the test.
                std::thread::spawn(move || {
                    let _ = pipe.write_all(&bytes);
                });
                None
            }
            (_, stdin) => stdin,
        };
        let (stdout, stdout_rx) = if self.piped_stdout {
            (child.stdout.take(), None)
        } else {
            (None, Some(drain(child.stdout.take().unwrap())))
        };
        let stderr_rx = drain(child.stderr.take().unwrap());
        Running {
            child: Some(child),
            args: self.args,
            started,
            timeout: self.timeout,
            stdin,
            stdout,
            stdout_rx,
            stderr_rx,
        }
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// A nod process in flight. Dropping it unwaited kills it.
pub struct Running {
    child: Option<Child>,
    args: Vec<String>,
    started: Instant,
    timeout: Duration,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stdout_rx: Option<Receiver<Vec<u8>>>,
    stderr_rx: Receiver<Vec<u8>>,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("spawned with stdin_pipe()")
    }

    pub fn take_stdout(&mut self) -> ChildStdout {
        self.stdout.take().expect("spawned with stdout_pipe()")
    }

    /// Waits for nod to exit within the deadline; kills it and fails the test otherwise.
    pub fn wait(mut self) -> Output {
        let mut child = self.child.take().unwrap();
        self.stdin.take();
        let deadline = self.started + self.timeout;
        let status: Option<ExitStatus> = loop {
            match child.try_wait().expect("wait for nod") {
                Some(status) => break Some(status),
                None if Instant::now() >= deadline => break None,
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let elapsed = self.started.elapsed();
        let status = match status {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = collect(&self.stderr_rx);
                let stdout = self.stdout_rx.as_ref().map(collect).unwrap_or_default();
                panic!(
                    "nod {:?} did not exit within {:?}; killed it.\n--- stdout:\n{}\n--- stderr:\n{}",
                    self.args,
                    self.timeout,
                    String::from_utf8_lossy(&stdout),
                    String::from_utf8_lossy(&stderr)
                );
            }
        };
        let stdout = self.stdout_rx.as_ref().map(collect).unwrap_or_default();
        let stderr = collect(&self.stderr_rx);
        Output {
            args: self.args.clone(),
            code: status.code(),
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            elapsed,
        }
    }
}

fn collect(rx: &Receiver<Vec<u8>>) -> Vec<u8> {
    rx.recv_timeout(Duration::from_secs(5)).expect("nod's output pipe stayed open 5 s after nod exited")
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a user sees of one nod run.
pub struct Output {
    pub args: Vec<String>,
    /// None when nod died of a signal.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e})\n{}", self.dump()))
    }

    /// stdout as one JSON value per line.
    pub fn json_lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?} is not JSON ({e})\n{}", self.dump()))
            })
            .collect()
    }

    pub fn dump(&self) -> String {
        let mut stdout = self.text();
        if stdout.len() > 4000 {
            stdout.truncate(4000);
            stdout.push_str("...");
        }
        format!(
            "nod {:?}\nexit code {:?} after {:?}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.args, self.code, self.elapsed, stdout, self.stderr
        )
    }

    pub fn code(&self, code: i32) -> &Output {
        assert_eq!(self.code, Some(code), "unexpected exit code\n{}", self.dump());
        self
    }

    pub fn stdout_has(&self, needle: &str) -> &Output {
        assert!(self.text().contains(needle), "stdout lacks {needle:?}\n{}", self.dump());
        self
    }

    pub fn stdout_lacks(&self, needle: &str) -> &Output {
        assert!(!self.text().contains(needle), "stdout has {needle:?}\n{}", self.dump());
        self
    }

    pub fn stderr_has(&self, needle: &str) -> &Output {
        assert!(self.stderr.contains(needle), "stderr lacks {needle:?}\n{}", self.dump());
        self
    }

    pub fn stderr_lacks(&self, needle: &str) -> &Output {
        assert!(!self.stderr.contains(needle), "stderr has {needle:?}\n{}", self.dump());
        self
    }

    /// Some line of stdout contains every one of `needles`.
    pub fn stdout_line_has(&self, needles: &[&str]) -> &Output {
        let text = self.text();
        assert!(
            text.lines().any(|l| needles.iter().all(|n| l.contains(n))),
            "no stdout line has all of {needles:?}\n{}",
            self.dump()
        );
        self
    }

    /// Some line of stderr contains every one of `needles`.
    pub fn stderr_line_has(&self, needles: &[&str]) -> &Output {
        assert!(
            self.stderr.lines().any(|l| needles.iter().all(|n| l.contains(n))),
            "no stderr line has all of {needles:?}\n{}",
            self.dump()
        );
        self
    }

    pub fn within(&self, secs: f64) -> &Output {
        assert!(
            self.elapsed < Duration::from_secs_f64(secs),
            "took {:?}, expected under {secs} s\n{}",
            self.elapsed,
            self.dump()
        );
        self
    }
}

/// A new pseudo-terminal: (master, slave), in its default cooked mode (line editing, echo).
fn pseudo_terminal() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc calls on a descriptor this function owns; each result is checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = std::os::fd::OwnedFd::from_raw_fd(master);
        use std::os::fd::AsRawFd;
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0, "grantpt");
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()), 0, "ptsname_r");
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(slave >= 0, "open the terminal's slave side: {}", std::io::Error::last_os_error());
        // A terminal of a usual size: line editors ask for it.
        let size = libc::winsize { ws_row: 40, ws_col: 160, ws_xpixel: 0, ws_ypixel: 0 };
        assert_eq!(libc::ioctl(slave, libc::TIOCSWINSZ, &size), 0, "TIOCSWINSZ");
        (master, std::os::fd::OwnedFd::from_raw_fd(slave))
    }
}

/// nod running on a pseudo-terminal. Dropping it unwaited kills it.
pub struct Terminal {
    child: Option<Child>,
    args: Vec<String>,
    started: Instant,
    timeout: Duration,
    master: std::fs::File,
    output: Receiver<Vec<u8>>,
    /// Everything the terminal has shown so far (nod's output and the echo of typed input).
    seen: Vec<u8>,
    /// Where `next` looks from: the end of what it last found.
    cursor: usize,
}

impl Terminal {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Waits until the terminal has shown `needle`, within the command's deadline.
    pub fn wait_for(&mut self, needle: &str) -> &mut Terminal {
        let deadline = self.started + self.timeout;
        while !self.shown().contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(chunk) => self.seen.extend(chunk),
                Err(_) => panic!("nod {:?} did not show {needle:?} in time; it showed:\n{}", self.args, self.shown()),
            }
        }
        self
    }

    /// Waits until the terminal shows `needle` after what `next` found last, and moves past
    /// it: for a prompt that shows again and again.
    pub fn next(&mut self, needle: &str) -> &mut Terminal {
        let deadline = self.started + self.timeout;
        loop {
            let shown = self.shown();
            if let Some(at) = shown.get(self.cursor..).and_then(|rest| rest.find(needle)) {
                self.cursor += at + needle.len();
                return self;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(chunk) => self.seen.extend(chunk),
                Err(_) => panic!(
                    "nod {:?} did not show {needle:?} in time; after what was found last it showed:\n{}",
                    self.args,
                    shown.get(self.cursor..).unwrap_or("")
                ),
            }
        }
    }

    /// What the terminal showed after what `next` found last, as far as it has been read.
    pub fn since(&self) -> String {
        self.shown().get(self.cursor..).unwrap_or("").to_string()
    }

    /// Sends raw bytes: keys such as Ctrl-C (3) or Ctrl-D (4).
    pub fn keys(&mut self, bytes: &[u8]) -> &mut Terminal {
        self.master.write_all(bytes).expect("type on the terminal");
        self
    }

    /// Types `line` and Enter.
    pub fn type_line(&mut self, line: &str) -> &mut Terminal {
        self.master.write_all(format!("{line}\n").as_bytes()).expect("type on the terminal");
        self
    }

    /// Ends the input, as Ctrl-D at the start of a line does.
    pub fn end_input(&mut self) -> &mut Terminal {
        self.master.write_all(&[4]).expect("type on the terminal");
        self
    }

    /// What the terminal shows, as text: control sequences (a line editor's cursor moves and
    /// line clearing) and carriage returns left out.
    pub fn shown(&self) -> String {
        let raw = String::from_utf8_lossy(&self.seen);
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\u{1b}' => match chars.peek() {
                    Some('[') => {
                        chars.next();
                        for c in chars.by_ref() {
                            if ('@'..='~').contains(&c) {
                                break;
                            }
                        }
                    }
                    Some(_) => {
                        chars.next();
                    }
                    None => {}
                },
                '\r' => {}
                c => out.push(c),
            }
        }
        out
    }

    /// Waits for nod to exit within the deadline: (exit code, everything shown).
    pub fn wait(mut self) -> (Option<i32>, String) {
        let mut child = self.child.take().unwrap();
        let deadline = self.started + self.timeout;
        let status = loop {
            match child.try_wait().expect("wait for nod") {
                Some(status) => break status,
                None if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("nod {:?} did not exit within {:?}; it showed:\n{}", self.args, self.timeout, self.shown());
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        // nod has exited: the reader ends at EIO once the rest of its output is read.
        while let Ok(chunk) = self.output.recv_timeout(Duration::from_secs(5)) {
            self.seen.extend(chunk);
        }
        (status.code(), self.shown())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
