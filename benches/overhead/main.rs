//! nod's overhead against a minimal raw client and against the official Rust MCP SDK (rmcp),
//! all three talking to the same minimal, fast stdio echo server. Run with
//! `cargo bench --bench overhead`; `NOD_BENCH_QUICK=1` does one repetition of everything;
//! `cargo bench --bench overhead -- agent` measures the agent instead (see `agent.rs`).
//!
//! This one binary plays four parts: the harness (no flag), the server (`--server`, see
//! `server.rs`), the raw client (`--raw`, see `raw.rs`) and two helpers: `--noop`, the trivial
//! process whose spawn-and-wait cost is subtracted from every time, and `--rss`, a small probe
//! that runs a client and reports its peak RSS. The rmcp client is its own crate in
//! `tests/rmcp-peer`, kept out of nod's workspace so nod's lock file never sees tokio or rmcp.
//!
//! Each workload runs pinned to one CPU (every process started through `taskset -c 0`) and then
//! free on all cores. Runs are paired: each repetition runs nod, raw and rmcp back to back in a
//! rotating order, and a ratio is the median of the per-repetition ratios, shown with its
//! spread. Every client's stdout goes to a pipe that the harness drains.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod agent;
mod measure;
mod raw;
mod server;
mod soak;

use std::path::{Path, PathBuf};

use serde_json::json;

use measure::{Bench, Client, Row, Workload};

const NOD: &str = env!("CARGO_BIN_EXE_nod");

/// The nod binary to measure: this build's, or `NOD_BENCH_NOD` (another build, to compare
/// before and after a change in one run of the same harness).
fn nod_binary() -> String {
    std::env::var("NOD_BENCH_NOD").unwrap_or_else(|_| NOD.to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--server") => return server::run(&args[1..]),
        Some("--raw") => return raw::run(&args[1..]),
        Some("--rss") => return measure::rss_probe(&args[1..]),
        Some("--noop") => return,
        _ => {}
    }
    let quick = std::env::var_os("NOD_BENCH_QUICK").is_some();
    let reps = |n: usize| if quick { 1 } else { n };
    let bench = Bench::new(rmcp_client());
    if args.iter().any(|a| a == "agent") {
        return agent::run(&bench, quick);
    }
    if args.iter().any(|a| a == "soak") {
        return soak::run(&bench, quick);
    }
    let mut rows = Vec::new();

    bench.write_profile(&[("fast", &[])]);
    let cold = Workload {
        name: "cold start: spawn, initialize, list 10 tools, exit",
        reps: reps(101),
        nod: &["mcp", "tool", "list", "fast"],
        peer: &["list"],
        server: &[],
        stdin: None,
        over_http: false,
    };
    rows.push(bench.run(&cold));
    let cold_rss = bench.peak_rss(Client::Nod, &cold, reps(5));

    let lines: String = (0..2000).map(|i| format!("{{\"message\":\"m{i}\"}}\n")).collect();
    rows.push(bench.run(&Workload {
        name: "2000 sequential echo calls (`--jsonl`)",
        reps: reps(31),
        nod: &["mcp", "tool", "call", "fast", "echo", "--jsonl"],
        peer: &["calls", "1"],
        server: &[],
        stdin: Some(lines.as_bytes()),
        over_http: false,
    }));
    rows.push(bench.run(&Workload {
        name: "2000 echo calls, 16 in flight (`--parallel 16`)",
        reps: reps(31),
        nod: &["mcp", "tool", "call", "fast", "echo", "--jsonl", "--parallel", "16"],
        peer: &["calls", "16"],
        server: &[],
        stdin: Some(lines.as_bytes()),
        over_http: false,
    }));

    let mib = r#"{"bytes":1048576}"#;
    rows.push(bench.run(&Workload {
        name: "one 1 MiB result",
        reps: reps(51),
        nod: &["mcp", "tool", "call", "fast", "big", mib, "--json"],
        peer: &["call", "big", mib],
        server: &[],
        stdin: None,
        over_http: false,
    }));
    let seven_mib = r#"{"bytes":7340032}"#;
    let big = Workload {
        name: "one 7 MiB result",
        reps: reps(31),
        nod: &["mcp", "tool", "call", "fast", "big", seven_mib, "--json"],
        peer: &["call", "big", seven_mib],
        server: &[],
        stdin: None,
        over_http: false,
    };
    rows.push(bench.run(&big));
    let big_rss = [Client::Nod, Client::Raw, Client::Rmcp].map(|client| bench.peak_rss(client, &big, reps(3)));

    let names: Vec<String> = (0..20).map(|i| format!("s{i:02}")).collect();
    let servers: Vec<(&str, &[&str])> = names.iter().map(|name| (name.as_str(), &[][..])).collect();
    bench.write_profile(&servers);
    rows.push(bench.run(&Workload {
        name: "20 servers at once (`list --connect`)",
        reps: reps(51),
        nod: &["mcp", "list", "--connect"],
        peer: &["many", "20"],
        server: &[],
        stdin: None,
        over_http: false,
    }));

    let paged = ["--tools", "1000", "--page-size", "100"];
    bench.write_profile(&[("paged", &paged)]);
    rows.push(bench.run(&Workload {
        name: "1000 tools in pages of 100",
        reps: reps(51),
        nod: &["mcp", "tool", "list", "paged"],
        peer: &["list"],
        server: &paged,
        stdin: None,
        over_http: false,
    }));

    if let Some(row) = http_workload(&bench, reps(7)) {
        rows.push(row);
    }

    print_report(&bench, &rows, quick);
    println!();
    println!("peak RSS, nod cold start: {}", mib_text(cold_rss));
    let [nod, raw, rmcp] = big_rss;
    println!("peak RSS, one 7 MiB result: nod {}, raw {}, rmcp {}", mib_text(nod), mib_text(raw), mib_text(rmcp));
    println!(
        "(RSS is the maximum over the runs of the client and the children it reaped, by wait4 in a fresh \
         probe process; the server streams its big answer and stays small)"
    );
}

/// The rmcp client's binary, or None (with a line saying how to build it) when it is missing.
fn rmcp_client() -> Option<PathBuf> {
    let path = std::env::var_os("NOD_BENCH_RMCP")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/rmcp-peer/target/release/nod-rmcp-peer"));
    if path.is_file() {
        return Some(path);
    }
    eprintln!(
        "rmcp client not found at {}: build it with `cargo build --release --manifest-path \
         tests/rmcp-peer/Cargo.toml`; its columns show -",
        path.display()
    );
    None
}

/// 500 sequential echo calls over Streamable HTTP to server-everything, nod against raw only,
/// when npm has installed it. The server is started anew for each mode, pinned with the clients
/// in the pinned one.
fn http_workload(bench: &Bench, reps: usize) -> Option<Row> {
    let npm = std::env::var_os("NOD_TEST_NPM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/nod-ci/npm"));
    let index = npm.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !index.exists() {
        eprintln!("skipping the HTTP workload: server-everything is not installed ({})", index.display());
        return None;
    }
    let lines: String = (0..500).map(|i| format!("{{\"message\":\"m{i}\"}}\n")).collect();
    let name = "500 sequential echo calls, Streamable HTTP (server-everything)";
    let mut row = Row::new(name);
    for mode in measure::MODES {
        let server = measure::Everything::start(&index, mode)?;
        let url = format!("http://127.0.0.1:{}/mcp", server.port);
        bench.write_json_profile(&json!({ "mcp": { "web": { "type": "http", "url": url } } }));
        let workload = Workload {
            name,
            reps,
            nod: &["mcp", "tool", "call", "web", "echo", "--jsonl"],
            peer: &["http", &url],
            server: &[],
            stdin: Some(lines.as_bytes()),
            over_http: true,
        };
        bench.run_mode(&workload, mode, &mut row);
    }
    eprintln!("measured: {name}");
    Some(row)
}

fn print_report(bench: &Bench, rows: &[Row], quick: bool) {
    let [pinned, free] = bench.spawn_cost.map(|d| d.as_secs_f64() * 1000.0);
    println!(
        "Times are medians pinned to CPU 0 (`taskset -c 0` for every process), less the median cost of \
         spawning and waiting for a trivial process ({pinned:.2} ms pinned, {free:.2} ms free), which is \
         subtracted from every time. Ratios are medians of per-repetition ratios over paired runs \
         [min-max]{}.",
        if quick { "; NOD_BENCH_QUICK: one repetition each" } else { "" }
    );
    println!();
    println!(
        "| workload | nod ms | raw ms | rmcp ms | nod/raw pinned | rmcp/raw pinned | nod/raw free | rmcp/raw free |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in rows {
        let time = |client| row.median_time(measure::Mode::Pinned, client).map_or("-".into(), |ms| format!("{ms:.1}"));
        let ratio = |mode, client| row.ratio(mode, client).map_or("-".into(), |r| r.to_string());
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            time(Client::Nod),
            time(Client::Raw),
            time(Client::Rmcp),
            ratio(measure::Mode::Pinned, Client::Nod),
            ratio(measure::Mode::Pinned, Client::Rmcp),
            ratio(measure::Mode::Free, Client::Nod),
            ratio(measure::Mode::Free, Client::Rmcp),
        );
    }
}

fn mib_text(kib: Option<i64>) -> String {
    kib.map_or("-".into(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0))
}
