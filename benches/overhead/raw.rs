//! The raw client (`overhead --raw WORKLOAD [ARGS] -- SERVER [ARGS]`): what a client costs
//! with no MCP library at all, only blocking pipes and serde_json. It runs the same workloads
//! as nod and the rmcp client and does the same output work: each call result goes to stdout as
//! one JSON line, a listing prints one "name  description" line per tool. WORKLOAD is `list`,
//! `calls PARALLEL` (one `echo` call per stdin line), `call TOOL ARGUMENTS`, `many N` (N servers
//! at once) or `http URL` (sequential `echo` calls over Streamable HTTP; no SERVER part).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

pub fn run(args: &[String]) {
    let split = args.iter().position(|arg| arg == "--").unwrap_or(args.len());
    let (workload, server) = (&args[..split], args.get(split + 1..).unwrap_or_default());
    let number = |i: usize| workload[i].parse::<usize>().expect("a number");
    match workload[0].as_str() {
        "list" => list(server),
        "calls" => calls(server, number(1)),
        "call" => call(server, &workload[1], &workload[2]),
        "many" => many(server, number(1)),
        "http" => http(&workload[1]),
        other => panic!("unknown raw workload {other}"),
    }
}

/// One server process and line I/O over its pipes.
struct Connection {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Connection {
    /// Spawns the server and does the initialize handshake.
    fn open(server: &[String]) -> Connection {
        let mut child = Command::new(&server[0])
            .args(&server[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut conn = Connection { child, stdin, stdout, line: String::new() };
        conn.send(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "0" } },
        }));
        conn.recv();
        conn.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        conn
    }

    fn send(&mut self, msg: &Value) {
        send(&mut self.stdin, msg);
    }

    fn recv(&mut self) -> Value {
        recv(&mut self.stdout, &mut self.line)
    }

    /// Every tool, following cursors.
    fn tools(&mut self) -> Vec<Value> {
        let mut cursor: Option<String> = None;
        let mut tools = Vec::new();
        for id in 1.. {
            let params = cursor.as_ref().map_or(json!({}), |c| json!({ "cursor": c }));
            self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params }));
            let mut page = self.recv();
            if let Value::Array(items) = page["result"]["tools"].take() {
                tools.extend(items);
            }
            match page["result"]["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => break,
            }
        }
        tools
    }

    /// Closes the server's stdin and waits for it to exit.
    fn close(self) {
        let Connection { mut child, stdin, .. } = self;
        drop(stdin);
        let _ = child.wait();
    }
}

fn send(stdin: &mut impl Write, msg: &Value) {
    let mut line = msg.to_string();
    line.push('\n');
    stdin.write_all(line.as_bytes()).expect("write to the server");
}

fn recv(stdout: &mut impl BufRead, line: &mut String) -> Value {
    line.clear();
    stdout.read_line(line).expect("read from the server");
    serde_json::from_str(line).expect("a JSON line")
}

fn print(text: &str) {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).expect("write stdout");
    stdout.flush().expect("flush stdout");
}

fn list(server: &[String]) {
    let mut conn = Connection::open(server);
    let mut out = String::new();
    for tool in conn.tools() {
        out.push_str(tool["name"].as_str().unwrap_or(""));
        out.push_str("  ");
        out.push_str(tool["description"].as_str().unwrap_or(""));
        out.push('\n');
    }
    print(&out);
    conn.close();
}

fn arguments(line: &str) -> Value {
    let value: Value = serde_json::from_str(line).expect("arguments are JSON");
    assert!(value.is_object(), "arguments must be a JSON object");
    value
}

/// One `echo` call per stdin line with up to `parallel` in flight; a reader thread prints the
/// results in input order.
fn calls(server: &[String], parallel: usize) {
    let lines = argument_lines();
    let n = lines.len();
    let Connection { mut child, mut stdin, mut stdout, mut line } = Connection::open(server);
    let (permits, returned) = crossbeam_channel::bounded::<()>(parallel);
    let reader = std::thread::spawn(move || {
        // Results that came early, by id; the server answers in order, so this stays empty.
        let mut early: HashMap<u64, Value> = HashMap::new();
        let mut next = 1;
        for _ in 0..n {
            let mut msg = recv(&mut stdout, &mut line);
            early.insert(msg["id"].as_u64().expect("an id"), msg["result"].take());
            while let Some(result) = early.remove(&next) {
                print(&format!("{result}\n"));
                next += 1;
            }
            returned.recv().expect("a permit");
        }
    });
    for (i, arguments) in lines.into_iter().enumerate() {
        permits.send(()).expect("the reader is gone");
        let params = json!({ "name": "echo", "arguments": arguments });
        send(&mut stdin, &json!({ "jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params }));
    }
    reader.join().expect("reader");
    drop(stdin);
    let _ = child.wait();
}

/// The arguments on stdin, one JSON object a line.
fn argument_lines() -> Vec<Value> {
    let lines = std::io::stdin().lock().lines().map(|line| line.expect("read stdin"));
    lines.filter(|line| !line.trim().is_empty()).map(|line| arguments(&line)).collect()
}

fn call(server: &[String], tool: &str, text: &str) {
    let mut conn = Connection::open(server);
    let params = json!({ "name": tool, "arguments": arguments(text) });
    conn.send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }));
    let mut msg = conn.recv();
    print(&format!("{}\n", msg["result"].take()));
    conn.close();
}

fn many(server: &[String], n: usize) {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let server = server.to_vec();
            std::thread::spawn(move || {
                let mut conn = Connection::open(&server);
                let n_tools = conn.tools().len();
                conn.close();
                n_tools
            })
        })
        .collect();
    for (i, thread) in threads.into_iter().enumerate() {
        let n_tools = thread.join().expect("connection thread");
        print(&format!("s{i:02} tools={n_tools}\n"));
    }
}

/// Streamable HTTP: initialize, then one `echo` POST per stdin line, reading a JSON body or the
/// first SSE data line of each answer.
fn http(url: &str) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |session: Option<&str>, body: &Value| -> (Option<String>, Value) {
        let mut req = agent
            .post(url)
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
        &json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "0" } },
        }),
    );
    let session = session.expect("a session id");
    post(Some(&session), &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    for (i, arguments) in argument_lines().into_iter().enumerate() {
        let params = json!({ "name": "echo", "arguments": arguments });
        let (_, mut answer) =
            post(Some(&session), &json!({ "jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params }));
        assert!(answer.get("result").is_some(), "{answer}");
        print(&format!("{}\n", answer["result"].take()));
    }
    let _ = agent.delete(url).header("Mcp-Session-Id", &session).call();
}
