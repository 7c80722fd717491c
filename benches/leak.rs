//! Leak check: connect to the fixture server and shut it down, many times in one process,
//! then count open file descriptors, threads and child processes. Run with
//! `cargo bench --bench leak` (1000 cycles; `NOD_LEAK_CYCLES` changes the count).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::time::Instant;

use nod::config::{ServerConfig, StdioConfig, Transport};
use nod::dispatch::{Engine, NoInbound};
use nod::session::Session;
use nod::session::catalog::{self, Kind};

const FIXTURE: &str = env!("CARGO_BIN_EXE_nod-fixture-server");

fn main() {
    let cycles: usize = std::env::var("NOD_LEAK_CYCLES").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let config = ServerConfig {
        name: "leak".into(),
        enabled: true,
        required: false,
        startup_timeout: std::time::Duration::from_secs(10),
        operation_timeout: std::time::Duration::from_secs(10),
        restart_limit: 0,
        protocol_version: None,
        transport: Transport::Stdio(StdioConfig { argv: vec![FIXTURE.into()], env: vec![], cwd: None }),
    };
    let engine = Engine::start();
    let (fds0, threads0) = (count_fds(), count_threads());
    let started = Instant::now();
    let mut samples = Vec::new();
    for i in 0..cycles {
        let session = Session::connect(&engine, &config, Arc::new(NoInbound), &Default::default()).expect("connect");
        catalog::list(&session, Kind::Tools).expect("list tools");
        session.close();
        if i % (cycles / 10).max(1) == 0 {
            samples.push((i, count_fds(), count_threads(), count_children()));
        }
    }
    let elapsed = started.elapsed();
    let (fds1, threads1, children1) = (count_fds(), count_threads(), count_children());
    engine.shutdown();
    println!(
        "{cycles} connect/list/shutdown cycles in {:.1} s ({:.2} ms each)",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / cycles as f64
    );
    for (i, fds, threads, children) in samples {
        println!("  after {i:>5} cycles: {fds} fds, {threads} threads, {children} children");
    }
    println!(
        "open fds: {fds0} before, {fds1} after; threads: {threads0} before, {threads1} after; child processes left: {children1}"
    );
    assert!(fds1 <= fds0, "file descriptors leaked: {fds0} -> {fds1}");
    assert!(threads1 <= threads0, "threads leaked: {threads0} -> {threads1}");
    assert_eq!(children1, 0, "child processes left behind");
}

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn count_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Processes whose parent is this process.
fn count_children() -> usize {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                // Field 4 (after the parenthesised name) is the parent pid.
                stat.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(1)).is_some_and(|ppid| ppid == me)
            })
        })
        .count()
}
