//! nod's overhead against a minimal raw client, on the same fast stdio server (the fixture).
//!
//! Every workload runs nod's real commands (`nod mcp ...`) and, over the same pipes to the
//! same server, a raw client that writes JSON-RPC lines and parses the answers with
//! serde_json and nothing else. Both run as their own processes (the raw client is this
//! binary started with `--raw`), so both pay for process start. It prints the median time of
//! each and their ratio, plus nod's maximum RSS for a cold start, measured from a small
//! probe process (`--rss`) because Linux carries the parent's RSS high-water mark into a
//! child that is spawned from it and execs. Run with `cargo bench --bench overhead`; set
//! `NOD_BENCH_QUICK=1` for one repetition of each.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const NOD: &str = env!("CARGO_BIN_EXE_nod");
const FIXTURE: &str = env!("CARGO_BIN_EXE_nod-fixture-server");

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--raw") => return raw_main(&args[1..]),
        Some("--rss") => return rss_main(&args[1..]),
        _ => {}
    }
    let quick = std::env::var_os("NOD_BENCH_QUICK").is_some();
    let reps = |n: usize| if quick { 1 } else { n };
    let home = tempfile::tempdir().expect("temp dir");
    let mut rows = Vec::new();

    let cold_args = ["--tools", "0"];
    write_profile(home.path(), &[("fast", &cold_args)]);
    rows.push(bench(
        "cold start: spawn, initialize, list tools, exit",
        reps(20),
        || nod(home.path(), &["mcp", "tool", "list", "fast"], None),
        || raw(&["list", "--tools", "0"]),
    ));

    write_profile(home.path(), &[("fast", &[])]);
    let lines: String = (0..2000).map(|i| format!("{{\"message\":\"m{i}\"}}\n")).collect();
    rows.push(bench(
        "2000 sequential echo calls",
        reps(3),
        || nod(home.path(), &["mcp", "tool", "call", "fast", "echo", "--jsonl"], Some(&lines)),
        || raw(&["calls", "2000", "1"]),
    ));
    rows.push(bench(
        "2000 echo calls, 16 in flight",
        reps(3),
        || nod(home.path(), &["mcp", "tool", "call", "fast", "echo", "--jsonl", "--parallel", "16"], Some(&lines)),
        || raw(&["calls", "2000", "16"]),
    ));

    let big = 7 * 1024 * 1024;
    let big_args = format!("{{\"bytes\":{big}}}");
    rows.push(bench(
        "one 7 MiB result",
        reps(5),
        || nod(home.path(), &["mcp", "tool", "call", "fast", "big", &big_args, "--json"], None),
        || raw(&["big", &big.to_string()]),
    ));

    let many: Vec<(String, Vec<&str>)> = (0..20).map(|i| (format!("s{i:02}"), vec![])).collect();
    let refs: Vec<(&str, &[&str])> = many.iter().map(|(n, a)| (n.as_str(), a.as_slice())).collect();
    write_profile(home.path(), &refs);
    rows.push(bench(
        "20 servers at once (connect and discover)",
        reps(5),
        || nod(home.path(), &["mcp", "list", "--connect"], None),
        || raw(&["many", "20"]),
    ));

    let paged = ["--tools", "1000", "--page-size", "100"];
    write_profile(home.path(), &[("paged", &paged)]);
    rows.push(bench(
        "1000 tools in pages of 100",
        reps(10),
        || nod(home.path(), &["mcp", "tool", "list", "paged"], None),
        || raw(&["list", "--tools", "1000", "--page-size", "100"]),
    ));

    if let Some(server) = Everything::start() {
        let url = format!("http://127.0.0.1:{}/mcp", server.port);
        std::fs::write(
            home.path().join("mcp.json"),
            json!({ "mcp": { "web": { "type": "http", "url": url } } }).to_string(),
        )
        .expect("write profile");
        let lines: String = (0..500).map(|i| format!("{{\"message\":\"m{i}\"}}\n")).collect();
        let port = server.port.to_string();
        rows.push(bench(
            "500 sequential echo calls, Streamable HTTP",
            reps(3),
            || nod(home.path(), &["mcp", "tool", "call", "web", "echo", "--jsonl"], Some(&lines)),
            || raw(&["http", &port, "500"]),
        ));
    }

    write_profile(home.path(), &[("fast", &cold_args)]);
    let rss = (0..reps(5)).map(|_| rss_of(home.path(), &["mcp", "tool", "list", "fast"])).max().unwrap_or(0);

    println!("{:<45} {:>10} {:>10} {:>7}", "workload", "nod", "raw", "ratio");
    for (name, nod_time, raw_time) in &rows {
        println!(
            "{:<45} {:>8.1}ms {:>8.1}ms {:>6.2}x",
            name,
            ms(*nod_time),
            ms(*raw_time),
            nod_time.as_secs_f64() / raw_time.as_secs_f64()
        );
    }
    println!("max RSS of nod for a cold start: {:.1} MiB", rss as f64 / 1024.0);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs both sides alternately and returns their median times.
fn bench(
    name: &str,
    reps: usize,
    mut nod_run: impl FnMut() -> Duration,
    mut raw_run: impl FnMut() -> Duration,
) -> (String, Duration, Duration) {
    // One warm-up of each, so page cache and binary loading do not count.
    nod_run();
    raw_run();
    let mut nods = Vec::new();
    let mut raws = Vec::new();
    for _ in 0..reps {
        nods.push(nod_run());
        raws.push(raw_run());
    }
    eprintln!("measured: {name}");
    (name.to_string(), median(nods), median(raws))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn write_profile(home: &Path, servers: &[(&str, &[&str])]) {
    let mut map = serde_json::Map::new();
    for (name, args) in servers {
        let mut argv = vec![FIXTURE.to_string()];
        argv.extend(args.iter().map(|s| s.to_string()));
        map.insert(name.to_string(), json!({ "command": argv }));
    }
    std::fs::write(home.join("mcp.json"), json!({ "mcp": map }).to_string()).expect("write profile");
}

/// Runs the raw client as its own process; returns the wall time.
fn raw(args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(std::env::current_exe().expect("own path"))
        .arg("--raw")
        .args(args)
        .stdin(Stdio::null())
        .status()
        .expect("run the raw client");
    assert!(status.success(), "raw client {args:?} failed");
    start.elapsed()
}

fn raw_main(args: &[String]) {
    let n = |i: usize| args[i].parse::<usize>().expect("a number");
    match args[0].as_str() {
        "list" => {
            let rest: Vec<&str> = args[1..].iter().map(String::as_str).collect();
            raw_list_tools(&rest);
        }
        "calls" => raw_calls(n(1), n(2)),
        "big" => raw_big(n(1)),
        "many" => raw_many(n(1)),
        "http" => raw_http(n(1), n(2)),
        other => panic!("unknown raw workload {other}"),
    }
}

/// nod's maximum RSS in KiB, read by a fresh probe process.
fn rss_of(home: &Path, args: &[&str]) -> i64 {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .arg("--rss")
        .args(args)
        .env("NOD_HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("run the probe");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("probe output")
}

fn rss_main(args: &[String]) {
    let mut child = Command::new(NOD).args(args).stdin(Stdio::null()).stdout(Stdio::null()).spawn().expect("run nod");
    let (status, rss) = wait_rss(&mut child);
    assert!(status == 0, "nod {args:?} failed with status {status}");
    println!("{rss}");
}

/// Runs nod; returns the wall time.
fn nod(home: &Path, args: &[&str], stdin: Option<&str>) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(NOD)
        .args(args)
        .env("NOD_HOME", home)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run nod");
    let input = stdin.map(str::to_string);
    let mut pipe = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let (Some(pipe), Some(input)) = (pipe.as_mut(), input) {
            let _ = pipe.write_all(input.as_bytes());
        }
        drop(pipe);
    });
    let mut out = Vec::new();
    child.stdout.take().expect("stdout").read_to_end(&mut out).expect("read nod output");
    writer.join().expect("writer");
    let status = child.wait().expect("wait for nod");
    let elapsed = start.elapsed();
    assert!(status.success(), "nod {args:?} failed with {status}");
    elapsed
}

fn wait_rss(child: &mut Child) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; the out-pointers are valid.
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}

/// The raw client: a fixture process and line I/O over its pipes.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Raw {
    fn start(args: &[&str]) -> Raw {
        let mut child = Command::new(FIXTURE)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fixture");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut raw = Raw { child, stdin, stdout, line: String::new() };
        raw.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}));
        raw.recv();
        raw.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        raw
    }

    fn send(&mut self, msg: &Value) {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).expect("write");
    }

    fn recv(&mut self) -> Value {
        self.line.clear();
        self.stdout.read_line(&mut self.line).expect("read");
        serde_json::from_str(&self.line).expect("json")
    }

    fn list(&mut self, method: &str, key: &str) -> usize {
        let mut cursor: Option<String> = None;
        let mut n = 0;
        loop {
            let params = cursor.as_ref().map_or(json!({}), |c| json!({ "cursor": c }));
            self.send(&json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}));
            let page = self.recv();
            n += page["result"][key].as_array().map_or(0, Vec::len);
            match page["result"]["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return n,
            }
        }
    }

    fn finish(self) {
        let Raw { mut child, stdin, .. } = self;
        drop(stdin);
        let _ = child.wait();
    }
}

fn raw_list_tools(args: &[&str]) {
    let mut raw = Raw::start(args);
    raw.list("tools/list", "tools");
    raw.finish();
}

fn raw_calls(n: usize, in_flight: usize) {
    let raw = Raw::start(&[]);
    let Raw { child, mut stdin, mut stdout, .. } = raw;
    let (permits_tx, permits_rx) = crossbeam_channel::bounded::<()>(in_flight);
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        for _ in 0..n {
            line.clear();
            stdout.read_line(&mut line).expect("read");
            let _: Value = serde_json::from_str(&line).expect("json");
            permits_rx.recv().expect("permit");
        }
    });
    for i in 0..n {
        permits_tx.send(()).expect("permit");
        let msg = json!({"jsonrpc":"2.0","id":i + 1,"method":"tools/call","params":{"name":"echo","arguments":{"message":format!("m{i}")}}});
        let mut line = msg.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).expect("write");
    }
    reader.join().expect("reader");
    drop(stdin);
    let mut child = child;
    let _ = child.wait();
}

fn raw_big(bytes: usize) {
    let mut raw = Raw::start(&[]);
    raw.send(
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":bytes}}}),
    );
    let result = raw.recv();
    assert!(result["result"]["content"][0]["text"].as_str().map_or(0, str::len) == bytes);
    raw.finish();
}

fn raw_many(n: usize) {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(|| {
                let mut raw = Raw::start(&[]);
                raw.list("tools/list", "tools");
                raw.list("resources/list", "resources");
                raw.list("resources/templates/list", "resourceTemplates");
                raw.list("prompts/list", "prompts");
                raw.finish();
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("raw client"));
}

/// server-everything in Streamable HTTP mode on a free loopback port, when npm installed it.
struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    fn start() -> Option<Everything> {
        let npm = std::env::var_os("NOD_TEST_NPM").map(std::path::PathBuf::from).unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/nod-ci/npm")
        });
        let index = npm.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        if !index.exists() {
            eprintln!("skipping the HTTP workload: server-everything is not installed ({})", index.display());
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let loopback = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/node/loopback.cjs");
        let child = Command::new("node")
            .arg("-r")
            .arg(loopback)
            .arg(index)
            .arg("streamableHttp")
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

/// The raw HTTP client: initialize, then `n` sequential tools/call POSTs, reading JSON or the
/// first SSE data line of each answer.
fn raw_http(port: usize, n: usize) {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |session: Option<&str>, body: &Value| -> (Option<String>, Value) {
        let mut req = agent
            .post(&url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json");
        if let Some(session) = session {
            req = req.header("Mcp-Session-Id", session).header("MCP-Protocol-Version", "2025-11-25");
        }
        let mut resp = req.send(body.to_string().as_bytes()).expect("post");
        let session = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
        let text = resp.body_mut().read_to_string().expect("body");
        let data = text.lines().find_map(|l| l.strip_prefix("data: ").filter(|d| !d.is_empty())).unwrap_or(&text);
        (session, serde_json::from_str(data).unwrap_or(Value::Null))
    };
    let (session, _) = post(
        None,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}),
    );
    let session = session.expect("a session id");
    post(Some(&session), &json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    for i in 0..n {
        let (_, answer) = post(
            Some(&session),
            &json!({"jsonrpc":"2.0","id":i + 1,"method":"tools/call","params":{"name":"echo","arguments":{"message":format!("m{i}")}}}),
        );
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let _ = agent.delete(&url).header("Mcp-Session-Id", &session).call();
}
