//! How the overhead bench runs and times its clients: every run is a fresh process tree,
//! started through `taskset -c 0` in the pinned mode, fed the workload's stdin, its stdout
//! drained through a pipe; the median spawn cost of a trivial process is subtracted from each
//! time. Also the peak-RSS probe and the server-everything process for the HTTP workload.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every process of the run on CPU 0.
    Pinned,
    /// No affinity set: the run may use every core.
    Free,
}

pub const MODES: [Mode; 2] = [Mode::Pinned, Mode::Free];

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Pinned => "pinned",
            Mode::Free => "free",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    Nod,
    Raw,
    Rmcp,
}

const CLIENTS: [Client; 3] = [Client::Nod, Client::Raw, Client::Rmcp];

/// One workload: nod's arguments, and the workload arguments that the raw and the rmcp client
/// share (`WORKLOAD [ARGS] -- SERVER [ARGS]`, the server being this binary with `--server`).
pub struct Workload<'a> {
    pub name: &'a str,
    pub reps: usize,
    pub nod: &'a [&'a str],
    pub peer: &'a [&'a str],
    /// Flags for the bench's server, as the raw and rmcp clients start it.
    pub server: &'a [&'a str],
    pub stdin: Option<&'a [u8]>,
    /// Streamable HTTP to an outside server: nod against raw only, no server to start.
    pub over_http: bool,
}

/// The timed samples of one workload: per mode, one entry per repetition, in client order.
pub struct Row {
    pub name: String,
    samples: [Vec<[Option<Duration>; 3]>; 2],
}

/// A median of per-repetition ratios and their spread.
pub struct Ratio {
    median: f64,
    min: f64,
    max: f64,
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2}x [{:.2}-{:.2}]", self.median, self.min, self.max)
    }
}

impl Row {
    pub fn new(name: &str) -> Row {
        Row { name: name.to_string(), samples: [Vec::new(), Vec::new()] }
    }

    /// The median time of `client` in `mode`, in milliseconds.
    pub fn median_time(&self, mode: Mode, client: Client) -> Option<f64> {
        let times: Vec<f64> = self.samples[mode as usize]
            .iter()
            .filter_map(|rep| rep[client as usize])
            .map(|d| d.as_secs_f64())
            .collect();
        median(times).map(|seconds| seconds * 1000.0)
    }

    /// `client` over the raw client in `mode`, repetition by repetition.
    pub fn ratio(&self, mode: Mode, client: Client) -> Option<Ratio> {
        let ratios: Vec<f64> = self.samples[mode as usize]
            .iter()
            .filter_map(|rep| Some(rep[client as usize]?.as_secs_f64() / rep[Client::Raw as usize]?.as_secs_f64()))
            .collect();
        let min = ratios.iter().copied().reduce(f64::min)?;
        let max = ratios.iter().copied().reduce(f64::max)?;
        Some(Ratio { median: median(ratios)?, min, max })
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The harness: this binary's path, a temporary NOD_HOME (also every run's working directory,
/// so no project config is picked up) and the rmcp client, when built.
pub struct Bench {
    exe: String,
    home: tempfile::TempDir,
    rmcp: Option<PathBuf>,
    /// The median time to spawn and wait for a trivial process, per mode.
    pub spawn_cost: [Duration; 2],
}

impl Bench {
    pub fn new(rmcp: Option<PathBuf>) -> Bench {
        let exe = std::env::current_exe().expect("own path").to_string_lossy().into_owned();
        let home = tempfile::tempdir().expect("temp dir");
        let mut bench = Bench { exe, home, rmcp, spawn_cost: [Duration::ZERO; 2] };
        let noop = [bench.exe.clone(), "--noop".to_string()];
        for mode in MODES {
            let mut times: Vec<f64> = (0..35).map(|_| bench.time(&noop, mode, None).as_secs_f64()).skip(4).collect();
            times.sort_by(f64::total_cmp);
            bench.spawn_cost[mode as usize] = Duration::from_secs_f64(times[times.len() / 2]);
        }
        bench
    }

    /// Writes NOD_HOME's profile: one stdio server entry per name, each the bench's server with
    /// the given flags.
    pub fn write_profile(&self, servers: &[(&str, &[&str])]) {
        self.write_json_profile(&self.profile_json(servers));
    }

    /// The profile `write_profile` writes.
    pub fn profile_json(&self, servers: &[(&str, &[&str])]) -> Value {
        let mut map = serde_json::Map::new();
        for (name, flags) in servers {
            map.insert(name.to_string(), json!({ "command": self.server_argv(flags) }));
        }
        json!({ "mcp": map })
    }

    /// The bench's `NOD_HOME`.
    pub fn home(&self) -> &std::path::Path {
        self.home.path()
    }

    pub fn write_settings(&self, settings: &Value) {
        std::fs::write(self.home.path().join("settings.json"), settings.to_string()).expect("write the settings");
    }

    pub fn write_json_profile(&self, profile: &Value) {
        std::fs::write(self.home.path().join("mcp.json"), profile.to_string()).expect("write the profile");
    }

    pub fn server_argv(&self, flags: &[&str]) -> Vec<String> {
        let mut argv = vec![self.exe.clone(), "--server".to_string()];
        argv.extend(flags.iter().map(|flag| flag.to_string()));
        argv
    }

    /// The command line of `client` for `workload`, or None when that client does not take part.
    fn argv(&self, workload: &Workload, client: Client) -> Option<Vec<String>> {
        let mut argv: Vec<String> = match client {
            Client::Nod => {
                let mut argv = vec![crate::nod_binary()];
                argv.extend(workload.nod.iter().map(|arg| arg.to_string()));
                return Some(argv);
            }
            Client::Raw => vec![self.exe.clone(), "--raw".to_string()],
            Client::Rmcp if workload.over_http => return None,
            Client::Rmcp => vec![self.rmcp.as_ref()?.to_string_lossy().into_owned()],
        };
        argv.extend(workload.peer.iter().map(|arg| arg.to_string()));
        if !workload.over_http {
            argv.push("--".to_string());
            argv.extend(self.server_argv(workload.server));
        }
        Some(argv)
    }

    /// Runs `workload` in both modes.
    pub fn run(&self, workload: &Workload) -> Row {
        let mut row = Row::new(workload.name);
        for mode in MODES {
            self.run_mode(workload, mode, &mut row);
        }
        eprintln!("measured: {}", workload.name);
        row
    }

    /// One warm-up run of each client, then `workload.reps` repetitions of nod, raw and rmcp
    /// back to back, the order rotating so no client always goes first.
    pub fn run_mode(&self, workload: &Workload, mode: Mode, row: &mut Row) {
        let argvs = CLIENTS.map(|client| self.argv(workload, client));
        for argv in argvs.iter().flatten() {
            self.time(argv, mode, workload.stdin);
        }
        for rep in 0..workload.reps {
            let mut times = [None; 3];
            for turn in 0..CLIENTS.len() {
                let i = (rep + turn) % CLIENTS.len();
                if let Some(argv) = &argvs[i] {
                    let time = self.time(argv, mode, workload.stdin);
                    times[i] = Some(time.saturating_sub(self.spawn_cost[mode as usize]));
                }
            }
            row.samples[mode as usize].push(times);
        }
    }

    /// Runs one process tree to the end: spawns it, feeds its stdin from a thread, drains its
    /// stdout, waits; returns the wall time.
    fn time(&self, argv: &[String], mode: Mode, stdin: Option<&[u8]>) -> Duration {
        let started = Instant::now();
        let mut child = self
            .command(argv, mode)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| panic!("spawn {argv:?}: {err}"));
        let pipe = child.stdin.take();
        let mut output = child.stdout.take().expect("stdout");
        std::thread::scope(|scope| {
            if let (Some(mut pipe), Some(input)) = (pipe, stdin) {
                // A client that fails early closes its stdin; the failure shows in its status.
                scope.spawn(move || pipe.write_all(input));
            }
            let mut buffer = vec![0; 1 << 16];
            while output.read(&mut buffer).expect("read the client's stdout") > 0 {}
        });
        let status = child.wait().expect("wait for the client");
        let elapsed = started.elapsed();
        assert!(status.success(), "{argv:?} failed with {status}");
        elapsed
    }

    /// `argv` with NOD_HOME and the working directory set, pinned or free.
    pub fn command(&self, argv: &[String], mode: Mode) -> Command {
        let mut command = command(argv, mode);
        command.env("NOD_HOME", self.home.path()).current_dir(self.home.path());
        command
    }

    /// The peak RSS in KiB of `client` on `workload` over `runs` runs, each read by a fresh
    /// probe process.
    pub fn peak_rss(&self, client: Client, workload: &Workload, runs: usize) -> Option<i64> {
        let argv = self.argv(workload, client)?;
        (0..runs).map(|_| self.rss(&argv, &[])).max()
    }

    /// The peak RSS in KiB of one run of `argv` with `env` added, read by a fresh probe.
    pub fn rss(&self, argv: &[String], env: &[(&str, String)]) -> i64 {
        let out = self
            .command(&[self.exe.clone(), "--rss".to_string()], Mode::Free)
            .args(argv)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .expect("run the RSS probe");
        assert!(out.status.success(), "the RSS probe of {argv:?} failed");
        String::from_utf8_lossy(&out.stdout).trim().parse::<i64>().expect("the probe's output")
    }
}

/// `argv` as a command, through `taskset -c 0` when pinned.
fn command(argv: &[String], mode: Mode) -> Command {
    let mut command = match mode {
        Mode::Pinned => {
            let mut command = Command::new("taskset");
            command.args(["-c", "0"]).arg(&argv[0]);
            command
        }
        Mode::Free => Command::new(&argv[0]),
    };
    command.args(&argv[1..]);
    command
}

/// `--rss ARGV...`: runs ARGV with its output thrown away and prints its peak RSS in KiB. A
/// probe of its own, because Linux carries the parent's RSS high-water mark into a child that
/// is spawned from it and execs: the harness is big, this probe is small.
pub fn rss_probe(argv: &[String]) {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("run the client");
    let (status, max_rss) = wait_with_usage(&mut child);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{argv:?} failed");
    println!("{max_rss}");
}

/// Reaps `child` with wait4 (so it must not be waited for again); returns its wait status and
/// peak RSS in KiB.
fn wait_with_usage(child: &mut Child) -> (libc::c_int, libc::c_long) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; the out-pointers are valid for the call.
    let waited = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert!(waited > 0, "wait4 failed: {}", std::io::Error::last_os_error());
    (status, usage.ru_maxrss)
}

/// server-everything in Streamable HTTP mode on a free loopback port, started through
/// `taskset -c 0` in the pinned mode.
pub struct Everything {
    child: Child,
    pub port: u16,
}

impl Everything {
    pub fn start(index: &Path, mode: Mode) -> Option<Everything> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let loopback = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/node/loopback.cjs");
        let argv: Vec<String> = ["node", "-r"]
            .into_iter()
            .map(String::from)
            .chain([loopback, index.to_path_buf()].map(|path| path.to_string_lossy().into_owned()))
            .chain(["streamableHttp".to_string()])
            .collect();
        let child = command(&argv, mode)
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let server = Everything { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                eprintln!("skipping the HTTP workload: server-everything did not start");
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
