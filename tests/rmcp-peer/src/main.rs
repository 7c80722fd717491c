//! The overhead bench's client built on the official Rust MCP SDK (rmcp, on tokio): the same
//! workloads as nod and the bench's raw client, against the same server, with the same output.
//! Each result goes to stdout as one JSON line, and a listing prints one tool per line, so all
//! three clients do the same output work. Usage: `nod-rmcp-peer WORKLOAD [ARGS] -- SERVER [ARGS]`,
//! where WORKLOAD is one of
//! - `list`: connect, list every tool (following cursors), print "name  description" lines;
//! - `calls PARALLEL`: one `echo` call per line of stdin (its arguments), up to PARALLEL in
//!   flight, results printed in input order;
//! - `call TOOL ARGUMENTS`: one call, its result printed;
//! - `many N`: N connections at once, each initialized and its tools listed.

use std::io::{BufRead, Write};
use std::process::Stdio;

use futures::stream::{self, StreamExt};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, JsonObject, ProtocolVersion,
};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;

type Client = RunningService<RoleClient, ClientConfig>;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|arg| arg == "--") else {
        eprintln!("usage: nod-rmcp-peer list|calls N|call TOOL ARGS|many N -- SERVER [ARGS]");
        std::process::exit(2);
    };
    let (workload, server) = (&args[..split], &args[split + 1..]);
    let number = |i: usize| workload[i].parse::<usize>().expect("a number");
    match workload[0].as_str() {
        "list" => list(server).await,
        "calls" => calls(server, number(1)).await,
        "call" => call(server, &workload[1], &workload[2]).await,
        "many" => many(server, number(1)).await,
        other => panic!("unknown workload {other}"),
    }
}

/// Spawns the server and does the initialize handshake at the version nod and the raw client
/// ask for.
async fn connect(server: &[String]) -> Client {
    let mut command = tokio::process::Command::new(&server[0]);
    command.args(&server[1..]);
    let (transport, _) =
        TokioChildProcess::builder(command).stderr(Stdio::inherit()).spawn().expect("spawn the server");
    let config = ClientConfig::new(ClientCapabilities::default(), Implementation::new("nod-rmcp-peer", "0"))
        .with_protocol_version(ProtocolVersion::V_2025_11_25);
    config.serve(transport).await.expect("initialize")
}

/// Closes stdin, then waits for the server to exit (rmcp's graceful shutdown).
async fn close(client: Client) {
    client.cancel().await.expect("shut down");
}

fn print_line(text: &str) {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).expect("write stdout");
    stdout.write_all(b"\n").expect("write stdout");
    stdout.flush().expect("flush stdout");
}

async fn list(server: &[String]) {
    let client = connect(server).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut out = String::new();
    for tool in &tools {
        out.push_str(&tool.name);
        out.push_str("  ");
        out.push_str(tool.description.as_deref().unwrap_or(""));
        out.push('\n');
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes()).expect("write stdout");
    stdout.flush().expect("flush stdout");
    drop(stdout);
    close(client).await;
}

fn arguments(text: &str) -> JsonObject {
    match serde_json::from_str(text).expect("arguments are JSON") {
        serde_json::Value::Object(map) => map,
        _ => panic!("arguments must be a JSON object"),
    }
}

async fn calls(server: &[String], parallel: usize) {
    let lines: Vec<JsonObject> = std::io::stdin()
        .lock()
        .lines()
        .map(|line| line.expect("read stdin"))
        .filter(|line| !line.trim().is_empty())
        .map(|line| arguments(&line))
        .collect();
    let client = connect(server).await;
    let peer = client.peer().clone();
    // `buffered` keeps up to `parallel` calls in flight and yields them in input order.
    let mut results = stream::iter(lines)
        .map(|arguments| {
            let peer = peer.clone();
            async move { peer.call_tool(CallToolRequestParams::new("echo").with_arguments(arguments)).await }
        })
        .buffered(parallel);
    while let Some(result) = results.next().await {
        let result = result.expect("tools/call");
        print_line(&serde_json::to_string(&result).expect("serialize"));
    }
    close(client).await;
}

async fn call(server: &[String], tool: &str, text: &str) {
    let client = connect(server).await;
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments(text));
    let result = client.call_tool(params).await.expect("tools/call");
    print_line(&serde_json::to_string(&result).expect("serialize"));
    close(client).await;
}

async fn many(server: &[String], n: usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let server = server.to_vec();
            tokio::spawn(async move {
                let client = connect(&server).await;
                let n_tools = client.list_all_tools().await.expect("tools/list").len();
                close(client).await;
                n_tools
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let n_tools = task.await.expect("connection task");
        print_line(&format!("s{i:02} tools={n_tools}"));
    }
}
