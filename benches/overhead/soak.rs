//! Soak (`cargo bench --bench overhead -- soak`): the long-lived surfaces, driven for a long
//! time against the bench server and a scripted Chat Completions endpoint, must come back to
//! their starting counts of open descriptors, threads and child processes, and keep their RSS
//! within twice what it was after the warm-up.
//!
//! - **The shell**: 500 turns on piped stdin, each a tool call or a resource read (odd turns
//!   call the server's echo, even ones read its resource), then 1,000 `/mcp reload`s (each
//!   starts the server anew), then `/exit`.
//! - **`nod acp`**: 200 sessions, each opened with the bench server as its MCP server,
//!   prompted once (a tool call, an answer) and closed.
//!
//! `NOD_BENCH_QUICK=1` runs a tenth of each; `NOD_SOAK_TURNS`, `NOD_SOAK_RELOADS` and
//! `NOD_SOAK_SESSIONS` set the counts.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use serde_json::{Value, json};

use crate::agent::{Answer, Endpoint, Script};
use crate::measure::Bench;

/// What the process holds at one moment.
#[derive(Clone, Copy, Debug)]
struct Counts {
    fds: usize,
    threads: usize,
    children: usize,
    rss_kib: u64,
}

fn counts(pid: u32) -> Counts {
    let entries = |dir: String| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Counts {
        fds: entries(format!("/proc/{pid}/fd")),
        threads: entries(format!("/proc/{pid}/task")),
        children: children_of(pid),
        rss_kib,
    }
}

/// Processes whose parent is `pid`.
fn children_of(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // pid (comm) state ppid ...: the comm may hold spaces and parentheses.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid)
        })
        .count()
}

/// The endpoint's script for one tool step a turn: the first turn selects the echo tool and
/// calls it; later turns call it (odd turns) or read the resource (even turns); a tool result
/// gets a short answer.
fn script() -> Arc<Script> {
    Arc::new(|_, request: &Value| {
        let messages = request["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
        let users = messages.iter().filter(|m| m["role"] == "user").count();
        let last_call = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "assistant")
            .and_then(|m| m["tool_calls"][0]["function"]["name"].as_str())
            .unwrap_or("");
        let echo = || Answer::Call("mcp_fast_echo", json!({ "message": format!("turn {users}") }).to_string());
        match messages.last().map(|m| m["role"].as_str().unwrap_or("")) {
            Some("tool") if last_call == "mcp_select_tool" => echo(),
            Some("tool") => Answer::Text("ok"),
            _ if !messages.iter().any(|m| m["role"] == "tool") => {
                Answer::Call("mcp_select_tool", json!({ "name": "mcp_fast_echo" }).to_string())
            }
            _ if users % 2 == 0 => {
                Answer::Call("mcp_read_resource", json!({ "server": "fast", "uri": "bench://note" }).to_string())
            }
            _ => echo(),
        }
    })
}

/// Lines of `child`'s stdout, as they come.
fn lines_of(child: &mut Child) -> Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits until `done` holds, checking every millisecond, for at most `limit`.
fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "soak: {what} did not happen within {limit:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn show(label: &str, at: &Counts) {
    println!(
        "  {label}: {} descriptors, {} threads, {} children, RSS {:.1} MiB",
        at.fds,
        at.threads,
        at.children,
        at.rss_kib as f64 / 1024.0
    );
}

/// Returns whether `later` keeps `earlier`'s counts and at most twice its RSS.
fn steady(earlier: &Counts, later: &Counts) -> bool {
    later.fds <= earlier.fds
        && later.threads <= earlier.threads
        && later.children <= earlier.children
        && later.rss_kib <= 2 * earlier.rss_kib
}

pub fn run(bench: &Bench, quick: bool) {
    bench.write_profile(&[("fast", &[])]);
    bench.write_settings(&json!({ "permission": { "mcp_fast_*": "allow", "mcp_read_resource": "allow" } }));
    let scale = if quick { 10 } else { 1 };
    let count = |name: &str, n: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(n / scale);
    let ok_shell = shell(bench, count("NOD_SOAK_TURNS", 500), count("NOD_SOAK_RELOADS", 1000));
    let ok_acp = acp(bench, count("NOD_SOAK_SESSIONS", 200));
    assert!(ok_shell && ok_acp, "soak: a count did not come back (see above)");
}

fn shell(bench: &Bench, turns: usize, reloads: usize) -> bool {
    let endpoint = Endpoint::start(script(), false);
    let mut child = bench
        .command(&[crate::nod_binary()], crate::measure::Mode::Free)
        .env("NOD_BASE_URL", endpoint.url())
        .env("NOD_MODEL", "bench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the shell");
    let pid = child.id();
    let lines = lines_of(&mut child);
    let mut stdin = child.stdin.take().expect("piped stdin");
    let started = Instant::now();
    let mut samples = Vec::new();
    for turn in 1..=turns {
        writeln!(stdin, "turn {turn}").expect("write a prompt");
        // Turn 1 takes three requests (select, echo, answer), every later turn two.
        let expected = 2 * turn + 1;
        wait_until(Duration::from_secs(30), "a turn's answer", || endpoint.answered() >= expected);
        // The answer's last line: the turn is over.
        wait_until(Duration::from_secs(30), "the turn's output", || lines.try_iter().any(|l| l.contains("ok")));
        if turn == 1 || turn == turns.min(50) || turn == turns {
            samples.push((format!("after turn {turn}"), counts(pid)));
        }
    }
    let turns_took = started.elapsed();
    let started = Instant::now();
    for _ in 0..reloads {
        writeln!(stdin, "/mcp reload").expect("write /mcp reload");
        wait_until(Duration::from_secs(30), "a reload", || lines.try_iter().any(|l| l.contains("MCP reloaded")));
    }
    let reloads_took = started.elapsed();
    samples.push((format!("after {reloads} reloads"), counts(pid)));
    writeln!(stdin, "/exit").expect("write /exit");
    drop(stdin);
    let status = child.wait().expect("the shell ends");
    println!(
        "soak, the shell: {turns} turns in {:.1} s ({:.1} ms a turn), {reloads} reloads in {:.1} s ({:.1} ms each) ({status})",
        turns_took.as_secs_f64(),
        turns_took.as_secs_f64() * 1000.0 / turns as f64,
        reloads_took.as_secs_f64(),
        reloads_took.as_secs_f64() * 1000.0 / reloads.max(1) as f64,
    );
    for (label, at) in &samples {
        show(label, at);
    }
    let warm = samples[1].1;
    let ok = samples[2..].iter().all(|(_, at)| steady(&warm, at)) && status.success();
    println!("  steady (descriptors, threads and children at most those after the warm-up; RSS at most 2x): {ok}");
    ok
}

/// A JSON-RPC peer of `nod acp` over its stdio.
struct Acp {
    stdin: std::process::ChildStdin,
    lines: Receiver<String>,
    next: u64,
}

impl Acp {
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.stdin, "{line}").expect("write to nod acp");
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(30)).expect("nod acp answers");
            let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
            if message["id"] == id && message.get("method").is_none() {
                assert!(message.get("error").is_none(), "soak: {method} failed: {message}");
                return message;
            }
        }
    }
}

fn acp(bench: &Bench, sessions: usize) -> bool {
    let endpoint = Endpoint::start(script(), false);
    let mut child = bench
        .command(&[crate::nod_binary(), "acp".to_string()], crate::measure::Mode::Free)
        .env("NOD_BASE_URL", endpoint.url())
        .env("NOD_MODEL", "bench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nod acp");
    let pid = child.id();
    let lines = lines_of(&mut child);
    let stdin = child.stdin.take().expect("piped stdin");
    let mut peer = Acp { stdin, lines, next: 0 };
    peer.call("initialize", json!({ "protocolVersion": 1, "clientCapabilities": {} }));
    let argv = bench.server_argv(&[]);
    let server = json!({ "name": "fast", "command": argv[0], "args": argv[1..], "env": [] });
    let cwd = bench.home().display().to_string();
    let started = Instant::now();
    let mut samples = vec![("after initialize".to_string(), counts(pid))];
    for n in 1..=sessions {
        let opened = peer.call("session/new", json!({ "cwd": cwd, "mcpServers": [server] }));
        let session = opened["result"]["sessionId"].as_str().expect("a session id").to_string();
        let prompted =
            peer.call("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "go" }] }));
        assert_eq!(prompted["result"]["stopReason"], "end_turn", "soak: {prompted}");
        peer.call("session/close", json!({ "sessionId": session }));
        if n == sessions.min(20) || n == sessions {
            // The closed session's server is reaped on its own time: wait for it (bounded).
            wait_until(Duration::from_secs(10), "the closed session's server to go", || children_of(pid) == 0);
            samples.push((format!("after {n} sessions"), counts(pid)));
        }
    }
    let took = started.elapsed();
    drop(peer);
    let status = child.wait().expect("nod acp ends");
    println!(
        "soak, nod acp: {sessions} sessions opened, prompted and closed in {:.1} s ({:.1} ms each) ({status})",
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / sessions as f64
    );
    for (label, at) in &samples {
        show(label, at);
    }
    let warm = samples[1].1;
    let ok = samples[2..].iter().all(|(_, at)| steady(&warm, at)) && status.success();
    println!("  steady (descriptors, threads and children at most those after 20 sessions; RSS at most 2x): {ok}");
    ok
}
