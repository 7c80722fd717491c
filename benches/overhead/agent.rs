//! The agent's own costs (`cargo bench --bench overhead -- agent`):
//!
//! - **capability_search over 10,000 tools on 50 servers**, in process: 50 bench servers with
//!   200 `--rich` tools each, started through nod's runtime; then the same search the model
//!   runs (ranking, the 16 KiB bound, schema auto-load), after the agent has indexed the tools
//!   (as it does when servers start); the indexing is timed on its own.
//! - **The agent's cost per tool step**: `nod ask` against a fake Chat Completions endpoint in
//!   this process that answers 200 steps, each one echo call to the bench server. A step's cost
//!   is the time from the endpoint's last byte of an answer to the last byte of the next
//!   request: nod parses the stream, checks permissions, makes the MCP call (a round trip to
//!   the minimal server, counted against nod rather than subtracted), wraps the result and
//!   sends the whole history back.
//! - **Peak RSS of `nod ask` with 1000 tools** (20 servers of 50): a search, a call, an answer.
//!
//! - **Saved sessions**: saving one message (in process: a recorder appending 1,000 messages
//!   of the shapes a turn writes, a 1 KiB tool result among them), and what continuing a
//!   session of 1,000 messages adds to `nod ask`: the time from the process's start to the
//!   endpoint's receipt of its first request, `nod ask --resume` against a fresh `nod ask`.
//!
//! `NOD_BENCH_ONLY=search|steps|rss|sessions` runs one part; `NOD_BENCH_STEPS=N` sets the steps.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

use crate::measure::{Bench, MODES, Mode};

/// What the fake endpoint answers to a request that carries `k` tool results (the request
/// itself beside, for a script that looks at its last message).
pub type Script = dyn Fn(usize, &Value) -> Answer + Send + Sync;

pub enum Answer {
    Call(&'static str, String),
    Text(&'static str),
}

/// A Chat Completions endpoint on 127.0.0.1 that answers by the number of tool results in the
/// request (so one script serves any number of runs) and records, per request, when its body
/// had arrived and when the answer's last byte went out.
/// Per answered request: when its body had arrived, when the answer's last byte went out.
type Times = Mutex<Vec<(Instant, Instant)>>;

pub struct Endpoint {
    port: u16,
    times: Arc<(Times, std::sync::Condvar)>,
}

impl Endpoint {
    pub fn start(script: Arc<Script>, pin: bool) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake endpoint");
        let port = listener.local_addr().expect("its address").port();
        let times = Arc::new((Mutex::new(Vec::new()), std::sync::Condvar::new()));
        let record = times.clone();
        std::thread::spawn(move || {
            if pin {
                pin_to_cpu0();
            }
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if let Some(pair) = serve(stream, &*script) {
                    record.0.lock().expect("times").push(pair);
                    record.1.notify_all();
                }
            }
        });
        Endpoint { port, times }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The times recorded, once there are `expected` of them (or 5 s passed). nod may read
    /// the last answer and exit before this endpoint's thread has recorded that answer's
    /// times: waiting for the count, not for nod, is what makes the count exact. (Taking them
    /// at once after nod exited lost the last one now and then: "201 != 202".)
    /// How many requests have been answered.
    pub fn answered(&self) -> usize {
        self.times.0.lock().expect("times").len()
    }

    fn take_times(&self, expected: usize) -> Vec<(Instant, Instant)> {
        let (times, changed) = &*self.times;
        let guard = times.lock().expect("times");
        let (mut guard, _) = changed
            .wait_timeout_while(guard, std::time::Duration::from_secs(5), |t| t.len() < expected)
            .expect("times");
        std::mem::take(&mut *guard)
    }
}

/// One request, one streamed answer, then the connection closes.
fn serve(stream: TcpStream, script: &Script) -> Option<(Instant, Instant)> {
    stream.set_nodelay(true).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut length = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let arrived = Instant::now();
    let request: Value = serde_json::from_slice(&body).ok()?;
    let results = request["messages"].as_array()?.iter().filter(|m| m["role"] == "tool").count();
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({ "id": "bench", "object": "chat.completion.chunk", "model": "bench",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
        format!("data: {chunk}\n\n")
    };
    let mut out = String::from("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
    match script(results, &request) {
        Answer::Call(name, arguments) => {
            let call = json!([{ "index": 0, "id": format!("call_{results}"), "type": "function",
                "function": { "name": name, "arguments": arguments } }]);
            out.push_str(&chunk(json!({ "role": "assistant", "tool_calls": call }), Value::Null));
            out.push_str(&chunk(json!({}), json!("tool_calls")));
        }
        Answer::Text(text) => {
            out.push_str(&chunk(json!({ "role": "assistant", "content": text }), Value::Null));
            out.push_str(&chunk(json!({}), json!("stop")));
        }
    }
    out.push_str("data: [DONE]\n\n");
    let mut stream = stream;
    stream.write_all(out.as_bytes()).ok()?;
    stream.flush().ok()?;
    let sent = Instant::now();
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    Some((arrived, sent))
}

fn pin_to_cpu0() {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and sched_setaffinity get valid
    // pointers to it, for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn percentile(mut values: Vec<f64>, p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let i = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(i).copied().unwrap_or(f64::NAN)
}

pub fn run(bench: &Bench, quick: bool) {
    let only = std::env::var("NOD_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "search" {
        search(bench, quick);
    }
    if only.is_empty() || only == "steps" {
        steps(bench, quick);
    }
    if only.is_empty() || only == "rss" {
        rss(bench, quick);
    }
    if only.is_empty() || only == "sessions" {
        sessions(bench, quick);
    }
}

/// The cost of saving a message, and of continuing a session of 1,000 messages.
fn sessions(bench: &Bench, quick: bool) {
    use nod::provider::{Message, ToolCall};
    let home = bench.home();
    let messages: Vec<Message> = (0..1000)
        .map(|i| match i % 4 {
            0 => Message::User(format!("question {i}: what does the echo tool say about item {i}?")),
            1 => Message::Assistant {
                text: String::new(),
                calls: vec![ToolCall {
                    id: format!("call_{i}"),
                    name: "mcp_fast_echo".into(),
                    arguments: json!({ "message": format!("item {i}") }).to_string(),
                }],
            },
            2 => Message::Tool { call_id: format!("call_{}", i - 1), content: "r".repeat(1024) },
            _ => Message::Assistant { text: format!("The echo said item {i}, as it should."), calls: Vec::new() },
        })
        .collect();
    let meta = |title: &str| nod::saved::Meta {
        id: String::new(),
        created: nod::saved::now(),
        workspace: home.display().to_string(),
        model: "bench".into(),
        surface: "ask".into(),
        title: title.into(),
    };
    let redactor = nod::util::Redactor::default();
    let mut per_message = Vec::new();
    let mut id = String::new();
    for _ in 0..if quick { 1 } else { 5 } {
        let mut recorder = nod::saved::Recorder::create(home, meta("bench"), redactor.clone()).expect("a session");
        let started = Instant::now();
        for message in &messages {
            recorder.append(message, None);
        }
        per_message.push(started.elapsed().as_secs_f64() * 1000.0 / messages.len() as f64);
        id = recorder.id().to_string();
    }
    println!(
        "saving a message of a session (1,000 messages, 1 KiB tool results among them): median {:.4} ms",
        median(per_message)
    );

    let script: Arc<Script> = Arc::new(|_, _| Answer::Text("done"));
    let runs = if quick { 2 } else { 10 };
    for mode in MODES {
        let endpoint = Endpoint::start(script.clone(), mode == Mode::Pinned);
        let first_request = |extra: &[&str]| {
            let mut args = vec!["--quiet"];
            args.extend_from_slice(extra);
            args.push("one more");
            let started = Instant::now();
            run_ask(bench, &ask_argv(&args), mode, &endpoint);
            let times = endpoint.take_times(1);
            times[0].0.duration_since(started).as_secs_f64() * 1000.0
        };
        let (mut fresh, mut continued) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            fresh.push(first_request(&["--no-save"]));
            continued.push(first_request(&["--no-save", "--resume", &id]));
        }
        let (fresh, continued) = (median(fresh), median(continued));
        println!(
            "nod ask, start to its first request, {}: fresh {fresh:.2} ms, continuing 1,000 messages {continued:.2} ms (+{:.2} ms)",
            mode.label(),
            continued - fresh
        );
    }
}

/// capability_search over 10,000 tools on 50 servers, in this process.
fn search(bench: &Bench, quick: bool) {
    use nod::agent::permissions::{Mode as PermissionMode, Policy};
    use nod::agent::{Agent, Options};
    use nod::session::runtime::Runtime;

    let servers: Vec<(String, Vec<&str>)> =
        (0..50).map(|i| (format!("s{i:02}"), vec!["--tools", "200", "--rich"])).collect();
    let profile = bench.profile_json(&servers.iter().map(|(n, f)| (n.as_str(), &f[..])).collect::<Vec<_>>());
    let mut loaded = nod::config::Loaded::default();
    nod::config::profile::parse(profile.to_string().as_bytes(), &mut loaded);
    assert!(loaded.issues.is_empty(), "{:?}", loaded.issues);
    let handler = Arc::new(nod::session::elicit::PolicyHandler::new(nod::session::elicit::Policy::Fail, None));
    let runtime = Arc::new(Runtime::new(
        nod::dispatch::Engine::start(),
        loaded.servers,
        handler,
        nod::session::Access::default(),
    ));
    let failed = runtime.start_all();
    assert!(failed.is_empty(), "servers failed: {failed:?}");
    let env = |name: &str| (name == "NOD_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_string());
    let provider = nod::provider::config::resolve(Some("bench"), &Default::default(), &env).expect("provider");
    // 1,000 installed skills beside the 10,000 tools, as a search ranks them too.
    let skills = Arc::new(nod::config::skills::Skills {
        skills: (0..1000)
            .map(|i| nod::config::skills::Skill {
                name: format!("skill-{i}"),
                description: format!("Skill {i}: writes reports about issues, files and messages in area {}.", i % 37),
                origin: nod::config::skills::Origin::User,
                dir: std::path::PathBuf::from("/nonexistent"),
                front: Default::default(),
                body: String::new(),
                files: Vec::new(),
                fingerprint: String::new(),
                trust: nod::config::skills::Trust::Approved,
            })
            .collect(),
        issues: Vec::new(),
    });
    let new_agent = || {
        Agent::new(
            Some(std::sync::Arc::new(nod::provider::Provider::new(provider.clone()))),
            runtime.clone(),
            crossbeam_channel::never(),
            Arc::new(Policy::new(PermissionMode::FullAccess, Vec::new())),
            Default::default(),
            Options { skills: skills.clone(), ..Options::default() },
        )
    };
    let queries = ["search issues by label", "send a message to a user", "read the contents of a file", "zzz qqq"];
    // Warm the listings (the runtime caches them, as in a conversation).
    let total: u64 = {
        let mut agent = new_agent();
        let doc: Value = serde_json::from_str(agent.search("echo message", None).lines().next().unwrap()).unwrap();
        doc["total_matches"].as_u64().unwrap_or(0)
    };
    assert!(total >= 50, "the echo tools are found: {total}");
    let reps = if quick { 3 } else { 101 };
    for mode in MODES {
        let timed = || {
            let mut indexing = Vec::new();
            let mut searches = Vec::new();
            for _ in 0..reps {
                let mut agent = new_agent();
                let started = Instant::now();
                agent.index_tools();
                indexing.push(started.elapsed().as_secs_f64() * 1000.0);
                for query in queries {
                    let started = Instant::now();
                    let doc = agent.search(query, None);
                    searches.push(started.elapsed().as_secs_f64() * 1000.0);
                    assert!(doc.len() <= 16 * 1024 + 200, "bounded: {}", doc.len());
                }
            }
            (indexing, searches)
        };
        let (indexing, searches) = if mode == Mode::Pinned {
            std::thread::scope(|s| {
                s.spawn(|| {
                    pin_to_cpu0();
                    timed()
                })
                .join()
                .expect("the pinned search")
            })
        } else {
            timed()
        };
        println!(
            "capability_search, 10,000 tools on 50 servers and 1,000 skills, {}: {:.2} ms (p90 {:.2}); indexing the \
             10,000 tools (once, as the servers start) {:.1} ms",
            mode.label(),
            median(searches.clone()),
            percentile(searches, 0.9),
            median(indexing),
        );
    }
    let mut agent = new_agent();
    let doc = agent.search(queries[0], None);
    let parsed: Value = serde_json::from_str(doc.lines().next().unwrap()).unwrap();
    println!(
        "  ({:?}: {} matches, {} shown in {} bytes)",
        queries[0],
        parsed["total_matches"],
        parsed["counts"]["mcp_tools"],
        doc.len()
    );
    runtime.shutdown();
}

/// `nod ask` through 200 tool steps; the agent's own time per step.
fn steps(bench: &Bench, quick: bool) {
    let n = std::env::var("NOD_BENCH_STEPS").ok().and_then(|n| n.parse().ok()).unwrap_or(if quick { 20 } else { 200 });
    bench.write_profile(&[("fast", &[])]);
    bench.write_settings(&json!({ "permission": { "mcp_fast_*": "allow" } }));
    let script: Arc<Script> = Arc::new(move |k, _| match k {
        0 => Answer::Call("mcp_select_tool", json!({ "name": "mcp_fast_echo" }).to_string()),
        k if k <= n => Answer::Call("mcp_fast_echo", json!({ "message": format!("m{k}") }).to_string()),
        _ => Answer::Text("done"),
    });
    let runs = if quick { 1 } else { 5 };
    for mode in MODES {
        let endpoint = Endpoint::start(script.clone(), mode == Mode::Pinned);
        let mut gaps = Vec::new();
        for _ in 0..runs {
            run_ask(bench, &ask_argv(&["--max-steps", "1000", "--quiet", "echo", "it"]), mode, &endpoint);
            let times = endpoint.take_times(n + 2);
            assert_eq!(times.len(), n + 2, "every step reached the endpoint");
            // From the answer to the first echo call to the request with the last result.
            for pair in times.windows(2).skip(1) {
                gaps.push(pair[1].0.duration_since(pair[0].1).as_secs_f64() * 1000.0);
            }
        }
        println!(
            "agent cost per tool step ({} steps x {runs} runs), {}: median {:.3} ms, p90 {:.3} ms \
             (model answer sent -> next request received, MCP round trip to the minimal server included)",
            n,
            mode.label(),
            median(gaps.clone()),
            percentile(gaps, 0.9),
        );
    }
}

/// Peak RSS of `nod ask` with 1000 tools on 20 servers.
fn rss(bench: &Bench, quick: bool) {
    let servers: Vec<(String, Vec<&str>)> =
        (0..20).map(|i| (format!("s{i:02}"), vec!["--tools", "50", "--rich"])).collect();
    bench.write_profile(&servers.iter().map(|(n, f)| (n.as_str(), &f[..])).collect::<Vec<_>>());
    bench.write_settings(&json!({ "permission": { "mcp_*": "allow" } }));
    let script: Arc<Script> = Arc::new(|k, _| match k {
        0 => Answer::Call("capability_search", json!({ "query": "search issues" }).to_string()),
        1 => Answer::Call("mcp_s00_echo", json!({ "message": "hello" }).to_string()),
        _ => Answer::Text("done"),
    });
    let endpoint = Endpoint::start(script, false);
    let argv = ask_argv(&["--quiet", "find", "it"]);
    let env = [("NOD_BASE_URL", endpoint.url()), ("NOD_MODEL", "bench".to_string())];
    let runs = if quick { 1 } else { 5 };
    let kib = (0..runs).map(|_| bench.rss(&argv, &env)).max().unwrap_or(0);
    assert_eq!(endpoint.take_times(3 * runs).len(), 3 * runs, "each run took three steps");
    println!(
        "peak RSS of nod ask with 1000 tools on 20 servers (a search, a call, an answer): {:.1} MiB",
        kib as f64 / 1024.0
    );
}

/// Runs `nod ask` (`argv`) against `endpoint` to its end; it must succeed.
fn run_ask(bench: &Bench, argv: &[String], mode: Mode, endpoint: &Endpoint) {
    let status = bench
        .command(argv, mode)
        .env("NOD_BASE_URL", endpoint.url())
        .env("NOD_MODEL", "bench")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("run nod ask");
    assert!(status.success(), "nod ask failed: {status}");
}

fn ask_argv(args: &[&str]) -> Vec<String> {
    let mut argv = vec![crate::nod_binary(), "ask".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}
