//! An in-process, scripted HTTP/1.1 server for nod's HTTP transports. Each test hands it a
//! handler `Fn(&Request) -> Reply`; every connection gets its own thread, every answer ends
//! with `Connection: close` (so ureq never reuses a connection), and every request is
//! recorded (method, path, lowercased headers, body, arrival time) for assertions on the wire.
//! Dropping the fixture stops every thread: streams that never end notice within 200 ms.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::{Value, json};

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Request {
    /// Arrival order, from 0.
    pub index: usize,
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body as JSON (Null when it is not).
    pub json: Value,
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC method of a POSTed message.
    pub fn rpc(&self) -> Option<&str> {
        self.json.get("method").and_then(Value::as_str)
    }

    /// The JSON-RPC id of a POSTed message (Null for a notification).
    pub fn id(&self) -> Value {
        self.json.get("id").cloned().unwrap_or(Value::Null)
    }

    /// A POSTed JSON-RPC response (to a server request).
    pub fn is_response(&self) -> bool {
        self.method == "POST" && self.json.get("method").is_none() && self.json.get("id").is_some()
    }
}

/// How a scripted answer is sent.
#[derive(Default)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Close-delimited (an event stream): no Content-Length.
    streaming: bool,
    /// Further chunks, each after its delay.
    more: Vec<(Duration, Vec<u8>)>,
    /// Send the body one byte at a time, this far apart.
    trickle: Option<Duration>,
    /// Keep the stream open after the chunks, a comment every 200 ms, until the fixture drops.
    hold: bool,
    /// Chunks from a channel (a comment every 200 ms meanwhile) until its senders are gone.
    feed: Option<Receiver<String>>,
}

impl Reply {
    /// A bare status with an empty body (202, 404, 405, 500...).
    pub fn status(status: u16) -> Reply {
        Reply { status, ..Reply::default() }
    }

    /// 200 with a JSON body.
    pub fn json(value: &Value) -> Reply {
        Reply::status(200).body("application/json", value.to_string())
    }

    /// 200 with the JSON-RPC result for `req`.
    pub fn result(req: &Request, result: Value) -> Reply {
        Reply::json(&result_msg(req, result))
    }

    /// 200 with an event stream made of `chunks` (raw SSE text), ending the connection after.
    pub fn sse<S: AsRef<str>>(chunks: &[S]) -> Reply {
        let body: String = chunks.iter().map(AsRef::as_ref).collect();
        let mut reply = Reply::status(200).body("text/event-stream", body);
        reply.streaming = true;
        reply
    }

    /// After the chunks, more from a channel until every sender is dropped.
    pub fn fed_by(mut self, rx: Receiver<String>) -> Reply {
        self.feed = Some(rx);
        self
    }

    pub fn code(mut self, status: u16) -> Reply {
        self.status = status;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn body(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
        self.headers.push(("Content-Type".into(), content_type.into()));
        self.body = body.into();
        self
    }

    /// Sends `chunk` `after` the previous part.
    pub fn then(mut self, after: Duration, chunk: impl Into<String>) -> Reply {
        self.more.push((after, chunk.into().into_bytes()));
        self
    }

    pub fn hold(mut self) -> Reply {
        self.hold = true;
        self
    }

    pub fn trickle(mut self, every: Duration) -> Reply {
        self.trickle = Some(every);
        self
    }
}

/// `{"jsonrpc":"2.0","id":<req's id>,"result":result}`.
pub fn result_msg(req: &Request, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": req.id(), "result": result })
}

/// The answer to `initialize`: the client's protocol version echoed, tools only, and the
/// session id (if any) in `Mcp-Session-Id`.
pub fn init_result(req: &Request) -> Value {
    let version = req.json["params"]["protocolVersion"].as_str().unwrap_or("2025-11-25");
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": {} },
        "serverInfo": { "name": "nod-http-fixture", "version": "1.0.0" },
    })
}

pub fn init_reply(req: &Request, session: Option<&str>) -> Reply {
    let reply = Reply::result(req, init_result(req));
    match session {
        Some(session) => reply.header("Mcp-Session-Id", session),
        None => reply,
    }
}

/// One SSE event carrying `data` as JSON, with an optional id.
pub fn event(id: Option<&str>, data: &Value) -> String {
    match id {
        Some(id) => format!("id: {id}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// A tool result with one text block.
pub fn text_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }] })
}

/// A plain MCP server: initialize (session `s1`), tools/list, tools/call (echoes the tool
/// name as `called <name>`), ping; notifications and responses get 202, GET 405, DELETE 200.
pub fn standard(req: &Request) -> Reply {
    match (req.method.as_str(), req.rpc()) {
        ("POST", Some("initialize")) => init_reply(req, Some("s1")),
        ("POST", Some("tools/list")) => Reply::result(
            req,
            json!({ "tools": [{ "name": "echo", "description": "Echoes", "inputSchema": { "type": "object" } }] }),
        ),
        ("POST", Some("tools/call")) => {
            let name = req.json["params"]["name"].as_str().unwrap_or("?");
            Reply::result(req, text_result(&format!("called {name}")))
        }
        ("POST", Some("ping")) => Reply::result(req, json!({})),
        ("POST", Some(method)) if req.json.get("id").is_some() => Reply::json(&json!({
            "jsonrpc": "2.0", "id": req.id(), "error": { "code": -32601, "message": format!("no {method}") },
        })),
        ("POST", _) => Reply::status(202),
        ("DELETE", _) => Reply::status(200),
        _ => Reply::status(405),
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

struct State {
    handler: Box<Handler>,
    requests: Mutex<Vec<Request>>,
    /// (request index, when its answer ended and the connection closed).
    finished: Mutex<Vec<(usize, Instant)>>,
    stop: AtomicBool,
}

pub struct Fixture {
    addr: SocketAddr,
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
}

impl Fixture {
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Fixture {
        Fixture::start_on("127.0.0.1", handler)
    }

    /// On another loopback address (127.0.0.2, say): a different origin.
    pub fn start_on(ip: &str, handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Fixture {
        let listener = TcpListener::bind((ip, 0)).expect("bind the HTTP fixture");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            handler: Box::new(handler),
            requests: Mutex::new(Vec::new()),
            finished: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let shared = state.clone();
        let thread = std::thread::spawn(move || accept(&listener, &shared));
        Fixture { addr, state, thread: Some(thread) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The POSTs carrying the JSON-RPC `method`.
    pub fn rpc(&self, method: &str) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.method == "POST" && r.rpc() == Some(method)).collect()
    }

    /// Waits (polling) for a request matching `pred`; fails the test after `within`.
    pub fn wait_for(&self, what: &str, within: Duration, pred: impl Fn(&Request) -> bool) -> Request {
        let deadline = Instant::now() + within;
        loop {
            if let Some(found) = self.requests().into_iter().find(|r| pred(r)) {
                return found;
            }
            assert!(Instant::now() < deadline, "no {what} within {within:?}; requests: {:#?}", self.summary());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// When the answer to request `index` ended (its connection closed).
    pub fn finished_at(&self, index: usize) -> Option<Instant> {
        self.state.finished.lock().unwrap().iter().find(|(i, _)| *i == index).map(|(_, at)| *at)
    }

    /// One line a request, for failure messages.
    pub fn summary(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| format!("{} {} {} {:?}", r.method, r.path, String::from_utf8_lossy(&r.body), r.headers))
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept(listener: &TcpListener, state: &Arc<State>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !state.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let state = state.clone();
                conns.push(std::thread::spawn(move || serve(stream, &state)));
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break,
        }
    }
    for conn in conns {
        let _ = conn.join();
    }
}

/// Reads one request, records it, answers it, closes the connection.
fn serve(mut stream: TcpStream, state: &State) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let Some(mut req) = read_request(&mut stream, state) else { return };
    {
        let mut requests = state.requests.lock().unwrap();
        req.index = requests.len();
        requests.push(req.clone());
    }
    let reply = (state.handler)(&req);
    let _ = send(&mut stream, reply, state);
    state.finished.lock().unwrap().push((req.index, Instant::now()));
    let _ = stream.shutdown(Shutdown::Both);
}

fn read_request(stream: &mut TcpStream, state: &State) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    let mut head_end = None;
    loop {
        if head_end.is_none()
            && let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n")
        {
            head_end = Some(pos + 4);
        }
        if let Some(end) = head_end {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut first = lines.next()?.split(' ');
            let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let length: usize =
                headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
            if buf.len() >= end + length {
                let body = buf[end..end + length].to_vec();
                let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
                return Some(Request { index: 0, method, path, headers, body, json, at: Instant::now() });
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if state.stop.load(Ordering::SeqCst) {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
}

/// Sleeps `d` in small steps; false once the fixture is stopping.
fn pause(d: Duration, state: &State) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if state.stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(20)));
    }
    !state.stop.load(Ordering::SeqCst)
}

fn send(stream: &mut TcpStream, reply: Reply, state: &State) -> std::io::Result<()> {
    // The reason phrase is free text: clients ignore it.
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !reply.streaming {
        head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    match reply.trickle {
        Some(every) => {
            for byte in &reply.body {
                if !pause(every, state) {
                    return Ok(());
                }
                stream.write_all(std::slice::from_ref(byte))?;
            }
        }
        None => stream.write_all(&reply.body)?,
    }
    for (after, chunk) in &reply.more {
        if !pause(*after, state) {
            return Ok(());
        }
        stream.write_all(chunk)?;
    }
    if let Some(feed) = &reply.feed {
        while !state.stop.load(Ordering::SeqCst) {
            match feed.recv_timeout(Duration::from_millis(200)) {
                Ok(chunk) => stream.write_all(chunk.as_bytes())?,
                Err(RecvTimeoutError::Timeout) => stream.write_all(b": keep-alive\n")?,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }
    while reply.hold && pause(Duration::from_millis(200), state) {
        stream.write_all(b": keep-alive\n")?;
    }
    stream.flush()
}
