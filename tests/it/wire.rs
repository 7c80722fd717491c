use std::collections::HashSet;
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Env, SERVER, with_method};

#[test]
fn initialize_offers_2025_11_25_as_nod_then_sends_initialized_first() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    env.nod(["mcp", "tool", "call", SERVER, "echo", r#"{"message":"x"}"#]).run().code(0);
    let wire = env.wire();
    let methods: Vec<&str> = wire.iter().filter_map(|m| m["method"].as_str()).collect();
    // No listing before the call over stdio: nod lists only when the call fails.
    // The 2026-07-28 probe first: this server answers -32601, so it is of the initialize era.
    assert_eq!(methods, ["server/discover", "initialize", "notifications/initialized", "tools/call"], "{wire:?}");
    let probe = &wire[0]["params"]["_meta"];
    assert_eq!(probe["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{probe}");
    assert_eq!(probe["io.modelcontextprotocol/clientInfo"]["name"], "nod", "{probe}");
    assert!(probe["io.modelcontextprotocol/clientCapabilities"].is_object(), "{probe}");
    assert!(
        wire[3]["params"]["_meta"].get("io.modelcontextprotocol/protocolVersion").is_none(),
        "initialize-era requests carry no revision: {}",
        wire[3]
    );
    let init = &wire[1];
    assert_eq!(init["jsonrpc"], "2.0");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["params"]["clientInfo"]["name"], "nod", "{init}");
    assert!(init["params"]["capabilities"].is_object(), "{init}");
    let call = &wire[3];
    assert_eq!(call["params"]["name"], "echo");
    assert_eq!(call["params"]["arguments"], json!({"message": "x"}));
    assert!(!call["params"]["_meta"]["progressToken"].is_null(), "a tool call carries a progress token: {call}");
    env.assert_no_leftovers();
}

#[test]
fn request_ids_are_never_reused() {
    let env = Env::new();
    env.fixture(&["--tools", "5", "--resources", "4", "--page-size", "2"], json!({}));
    env.nod(["mcp", "list", "--connect"]).run().code(0);
    let wire = env.wire();
    let ids: Vec<String> =
        wire.iter().filter(|m| m["method"].is_string() && !m["id"].is_null()).map(|m| m["id"].to_string()).collect();
    assert!(ids.len() >= 10, "expected many paged requests: {wire:?}");
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "an id was reused: {ids:?}");
    env.assert_no_leftovers();
}

#[test]
fn jsonl_runs_calls_in_parallel_and_prints_results_in_input_order() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let sleeps = [400, 50, 300, 10, 200];
    let input: String = sleeps.iter().map(|ms| format!("{}\n", json!({ "ms": ms }))).collect();
    let out = env.nod(["mcp", "tool", "call", SERVER, "slow", "--jsonl", "--parallel", "3"]).stdin(input).run();
    out.code(0);
    let lines = out.json_lines();
    let texts: Vec<String> =
        lines.iter().map(|l| l["content"][0]["text"].as_str().unwrap_or("?").to_string()).collect();
    let expected: Vec<String> = sleeps.iter().map(|ms| format!("slept {ms}")).collect();
    assert_eq!(texts, expected, "{}", out.dump());
    // In sequence the calls take 960 ms; three at a time about 600 ms.
    out.within(0.9);
    env.assert_no_leftovers();
}

/// Results are written in blocks, but a producer that sends the next line only after it has
/// read the last result (a coprocess) still gets each result: nod flushes before it waits
/// for input.
#[test]
fn jsonl_answers_a_producer_that_waits_for_each_result_before_the_next_line() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let mut running = env.nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl"]).stdin_pipe().stdout_pipe().spawn();
    let mut stdin = running.take_stdin();
    let results = lines_of(running.take_stdout());
    for i in 0..5 {
        writeln!(stdin, "{}", json!({ "message": format!("turn {i}") })).expect("write a line");
        stdin.flush().expect("flush");
        let line = results
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no result for line {} while nod waits for the next", i + 1));
        let result: serde_json::Value = serde_json::from_str(&line).expect("a JSON result line");
        assert_eq!(result["content"][0]["text"], format!("turn {i}"), "{line}");
    }
    drop(stdin);
    running.wait().code(0);
    env.assert_no_leftovers();
}

/// nod's stdout, line by line, as it comes.
fn lines_of(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// A result held in the block goes out while nod waits for a slow call after it.
#[test]
fn jsonl_shows_a_result_while_the_next_call_is_still_running() {
    let env = Env::new();
    env.fixture(&[], json!({ "operation_timeout_ms": 30000 }));
    let mut running = env.nod(["mcp", "tool", "call", SERVER, "slow", "--jsonl"]).stdin_pipe().stdout_pipe().spawn();
    let mut stdin = running.take_stdin();
    // Both lines at once: nod has input and no reason to wait for it.
    write!(stdin, "{}\n{}\n", json!({ "ms": 0 }), json!({ "ms": 4000 })).expect("write the lines");
    stdin.flush().expect("flush");
    let results = lines_of(running.take_stdout());
    let first = results.recv_timeout(Duration::from_secs(2)).expect("the first result while the second call runs");
    assert!(first.contains("slept 0"), "{first}");
    let second = results.recv_timeout(Duration::from_secs(15)).expect("the second result");
    assert!(second.contains("slept 4000"), "{second}");
    drop(stdin);
    running.wait().code(0);
    env.assert_no_leftovers();
}

#[test]
fn jsonl_sends_each_line_as_it_was_written() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    // The first line's spacing and its integer past 64 bits reach the server as written;
    // the second has a bare CR between members (JSON's whitespace, a line break to some
    // servers' readers), so it is read and written out again.
    let first = r#"{"message": "one",  "n": 12345678901234567890123}"#;
    let input = format!("{first}\n  {{\"message\":\"two\",\r\"n\": 2}}  \n");
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl"]).stdin(input).run();
    out.code(0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 2, "{}", out.dump());
    assert_eq!(lines[0]["content"][0]["text"], "one", "{}", out.dump());
    assert_eq!(lines[1]["content"][0]["text"], "two", "{}", out.dump());
    let record = std::fs::read_to_string(env.record_path()).expect("the record");
    let calls: Vec<&str> = record.lines().filter(|l| l.contains("\"tools/call\"")).collect();
    assert_eq!(calls.len(), 2, "{record}");
    assert!(calls[0].contains(&format!("\"arguments\":{first}")), "{}", calls[0]);
    assert!(calls[1].contains(r#""arguments":{"message":"two","n":2}"#), "{}", calls[1]);
    for (call, line) in calls.iter().zip(env.wire().iter().filter(|m| m["method"] == "tools/call")) {
        assert_eq!(line["params"]["name"], "echo", "{call}");
        assert!(line["params"]["_meta"]["progressToken"].is_u64(), "{call}");
    }
    env.assert_no_leftovers();
}

#[test]
fn jsonl_refuses_a_line_a_value_cannot_hold_and_sends_nothing_for_it() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    // Valid JSON text, but no value: a number past f64 and a lone surrogate. Sent as written,
    // they would fail the server's parse with no id to answer, and the call would wait for
    // its timeout.
    let input = "{\"message\":\"one\"}\n{\"n\":1e400}\n{\"s\":\"\\ud800\"}\n{\"message\":\"four\"}\n";
    let out = env.nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl", "--parallel", "4"]).stdin(input).run();
    out.code(1);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 4, "{}", out.dump());
    assert_eq!(lines[0]["content"][0]["text"], "one", "{}", out.dump());
    for (line, number) in [(&lines[1], 2), (&lines[2], 3)] {
        let message = line["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("line {number}")) && message.contains("not valid JSON"), "{}", out.dump());
        assert_eq!(line["error"]["kind"], "usage", "{}", out.dump());
    }
    assert_eq!(lines[3]["content"][0]["text"], "four", "{}", out.dump());
    let calls = env.wire().into_iter().filter(|m| m["method"] == "tools/call").count();
    assert_eq!(calls, 2, "only the two good lines reach the server");
    env.assert_no_leftovers();
}

#[test]
fn jsonl_reports_a_line_that_is_not_an_object_by_number_and_exits_1() {
    let env = Env::new();
    env.fixture(&[], json!({}));
    let out = env
        .nod(["mcp", "tool", "call", SERVER, "echo", "--jsonl"])
        .stdin("{\"message\":\"one\"}\n[1, 2]\n{\"message\":\"three\"}\n")
        .run();
    out.code(1);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 3, "{}", out.dump());
    assert_eq!(lines[0]["content"][0]["text"], "one", "{}", out.dump());
    let message = lines[1]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("line 2"), "{}", out.dump());
    assert!(message.contains("object"), "{}", out.dump());
    assert_eq!(lines[2]["content"][0]["text"], "three", "{}", out.dump());
    env.assert_no_leftovers();
}

#[test]
fn ctrl_c_cancels_the_call_in_flight_and_exits_130() {
    let env = Env::new();
    env.fixture(&[], json!({ "operation_timeout_ms": 30000 }));
    let running = env.nod(["mcp", "tool", "call", SERVER, "hang"]).spawn();
    let call = env.wait_for_wire("tools/call", Duration::from_secs(10));
    // The leftover check below can see the server while it runs.
    assert!(env.live_processes().iter().any(|p| p.2), "the running server is not visible in /proc");
    // SAFETY: plain kill(2) on the nod process this test started.
    unsafe { libc::kill(running.pid(), libc::SIGINT) };
    let out = running.wait();
    // How fast is checked by ctrl_c_exits_promptly_every_time.
    out.code(130).within(15.0);
    let wire = env.wire();
    let cancels = with_method(&wire, "notifications/cancelled");
    assert!(
        cancels.iter().any(|c| c["params"]["requestId"] == call["id"]),
        "the tools/call {} was not cancelled: {wire:?}",
        call["id"]
    );
    env.assert_no_leftovers();
}

#[test]
fn sigterm_and_sighup_end_nod_like_ctrl_c() {
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let env = Env::new();
        env.fixture(&[], json!({ "operation_timeout_ms": 30000 }));
        let running = env.nod(["mcp", "tool", "call", SERVER, "hang"]).spawn();
        let call = env.wait_for_wire("tools/call", Duration::from_secs(10));
        // SAFETY: plain kill(2) on the nod process this test started.
        unsafe { libc::kill(running.pid(), signal) };
        running.wait().code(130).within(15.0);
        let wire = env.wire();
        let cancels = with_method(&wire, "notifications/cancelled");
        assert!(cancels.iter().any(|c| c["params"]["requestId"] == call["id"]), "signal {signal}: {wire:?}");
        env.assert_no_leftovers();
    }
}

#[test]
fn a_grandchild_seen_running_is_gone_after_the_server_crashes() {
    let env = Env::new();
    env.fixture(&["--scenario", "grandchild"], json!({}));
    let mut running = env.nod(["mcp", "tool", "call", SERVER, "crash", "--jsonl"]).stdin_pipe().spawn();
    env.wait_for_wire("notifications/initialized", Duration::from_secs(10));
    let grandchild = env
        .live_processes()
        .into_iter()
        .find(|(_, cmdline, direct)| !direct && cmdline.starts_with("sleep"))
        .unwrap_or_else(|| panic!("no grandchild: {:?}", env.live_processes()));
    let mut stdin = running.take_stdin();
    stdin.write_all(b"{}\n").unwrap();
    drop(stdin);
    let out = running.wait();
    // A lost connection is a connection error (2), even in --jsonl mode.
    out.code(2).within(10.0).stdout_has("exit code 3");
    // The marker in its environment finds the grandchild (pid {grandchild.0}) if it lives.
    env.assert_no_leftovers();
    assert!(!env.live_processes().iter().any(|p| p.0 == grandchild.0), "grandchild {grandchild:?} survived");
}

/// nod-mcp(1): Ctrl-C cancels, shuts the servers down and exits 130. Nothing in that takes
/// long (the servers exit at EOF), so every run must end within moments, during a call or
/// during startup alike. Repeated, because a race can make one run wait much longer.
#[test]
fn ctrl_c_exits_promptly_every_time() {
    let env = Env::new();
    let hang = env.fixture_entry(&[], json!({ "operation_timeout_ms": 30000 }));
    let never = env.fixture_entry(&["--scenario", "never-init"], json!({ "startup_timeout_ms": 30000 }));
    env.profile(json!({ "mcp": { "hang": hang, "never": never } }));
    for round in 0..12 {
        let (args, sent): (&[&str], &str) = if round % 3 == 2 {
            (&["mcp", "tool", "list", "never"], "initialize")
        } else {
            (&["mcp", "tool", "call", "hang", "hang"], "tools/call")
        };
        let _ = std::fs::remove_file(env.record_path());
        let running = env.nod(args).spawn();
        env.wait_for_wire(sent, Duration::from_secs(10));
        let signalled = Instant::now();
        // SAFETY: plain kill(2) on the nod process this test started.
        unsafe { libc::kill(running.pid(), libc::SIGINT) };
        let out = running.wait();
        out.code(130);
        assert!(
            signalled.elapsed() < Duration::from_secs(3),
            "round {round}: nod took {:?} to exit after SIGINT\n{}",
            signalled.elapsed(),
            out.dump()
        );
        env.assert_no_leftovers();
    }
}

/// A server that answers initialize and then writes 10,000 requests (roots/list, ping, an
/// unknown method) before it answers tools/list: every one is answered, and the listing
/// completes. This once froze nod for good.
#[test]
fn a_flood_of_server_requests_is_answered_and_the_listing_completes() {
    let env = Env::new();
    env.fixture(&["--scenario", "request-flood"], json!({}));
    let out = env.nod(["mcp", "tool", "list", SERVER]).timeout(60).run();
    out.code(0).within(30.0).stdout_has("echo");
    let wire = env.wire();
    let answers: Vec<&serde_json::Value> =
        wire.iter().filter(|m| m["id"].as_str().is_some_and(|id| id.starts_with("flood-"))).collect();
    assert_eq!(answers.len(), 10_000, "every server request got an answer");
    for answer in &answers {
        let n: usize = answer["id"].as_str().unwrap()["flood-".len()..].parse().unwrap();
        match n % 3 {
            // ping
            1 => assert_eq!(answer["result"], json!({}), "{answer}"),
            // roots/list (nod declares no roots) and an unknown method
            _ => assert_eq!(answer["error"]["code"], -32601, "{answer}"),
        }
    }
    env.assert_no_leftovers();
}

/// SIGTERM while a server floods nod with requests ends nod within the shutdown bound, with
/// nothing left running.
#[test]
fn sigterm_during_a_request_flood_ends_nod_promptly() {
    let env = Env::new();
    env.fixture(&["--scenario", "request-flood-forever"], json!({}));
    let running = env.nod(["mcp", "tool", "list", SERVER]).timeout(30).spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !env.wire().iter().any(|m| m["id"] == "flood-2000") {
        assert!(Instant::now() < deadline, "the flood never got going: {} lines", env.wire().len());
        std::thread::sleep(Duration::from_millis(20));
    }
    let signalled = Instant::now();
    // SAFETY: plain kill(2) on the nod process this test started.
    unsafe { libc::kill(running.pid(), libc::SIGTERM) };
    running.wait().code(130);
    let took = signalled.elapsed();
    assert!(took < Duration::from_secs(5), "nod took {took:?} to end after SIGTERM");
    env.assert_no_leftovers();
}
