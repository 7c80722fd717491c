//! The loopback side of authorization: the callback listener that receives the redirect (or
//! a redirect URL the user pasted, which the front end collects), PKCE and URL encodings.

use std::io::{BufRead, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::anyhow;
use crossbeam_channel::{Receiver, select};

/// How long nod waits for the user to finish in the browser.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

pub struct Callback {
    listener: TcpListener,
    pub redirect_uri: String,
}

impl Callback {
    /// Listens on 127.0.0.1 on a random port.
    pub fn bind() -> anyhow::Result<Callback> {
        Callback::bind_port(0)
    }

    /// Listens on 127.0.0.1 on `port` (0: a random one). A registered client's redirect URI
    /// names its port, and strict authorization servers compare it exactly.
    pub fn bind_port(port: u16) -> anyhow::Result<Callback> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let port = listener.local_addr()?.port();
        Ok(Callback { listener, redirect_uri: redirect_uri(port) })
    }

    /// Waits for the redirect that carries `state` (or such a URL from `pasted`) and returns
    /// its query parameters. A request with another state is answered 404 and ignored: any
    /// local process can reach the listener, and none may end someone's authorization.
    pub fn wait(self, state: &str, pasted: Option<Receiver<String>>) -> anyhow::Result<Vec<(String, String)>> {
        let (tx, rx) = crossbeam_channel::bounded::<Vec<(String, String)>>(1);
        let port = self.listener.local_addr()?.port();
        let listener = self.listener;
        let stop = Arc::new(AtomicBool::new(false));
        let expected = state.to_string();
        let listening = {
            let stop = stop.clone();
            std::thread::Builder::new().name("nod-oauth-callback".into()).spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    if let Some(query) = serve(stream, &expected) {
                        let _ = tx.send(query);
                        return;
                    }
                }
            })?
        };
        let deadline = Instant::now() + LOGIN_TIMEOUT;
        let mut pasted = pasted.unwrap_or_else(crossbeam_channel::never);
        let result = loop {
            select! {
                recv(rx) -> query => break query.map_err(|_| anyhow!("the callback listener stopped")),
                recv(pasted) -> line => match line {
                    Ok(line) => {
                        let query = query_of(line.trim());
                        if get(&query, "state").as_deref() == Some(state) {
                            break Ok(query);
                        }
                        if line.contains("code=") || line.contains("error=") {
                            log::warn!("the pasted URL is not the redirect of this authorization (its state differs); still waiting");
                        }
                    }
                    // Stdin ended: only the browser can finish now.
                    Err(_) => pasted = crossbeam_channel::never(),
                },
                recv(crossbeam_channel::at(deadline)) -> _ => {
                    break Err(anyhow!("no authorization arrived within {} s", LOGIN_TIMEOUT.as_secs()));
                }
            }
        };
        // Wake the listener so its thread ends.
        stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", port));
        let _ = listening.join();
        result
    }
}

/// The redirect URI of a callback listening on `port`.
pub fn redirect_uri(port: u16) -> String {
    format!("http://127.0.0.1:{port}/callback")
}

/// The port of a redirect URI that `redirect_uri` made.
pub fn callback_port(redirect_uri: &str) -> Option<u16> {
    redirect_uri.strip_prefix("http://127.0.0.1:")?.strip_suffix("/callback")?.parse().ok().filter(|&p| p != 0)
}

/// Answers one connection to the listener: the redirect that carries `state` gets a short
/// page and its query back; anything else a 404.
fn serve(mut stream: std::net::TcpStream, state: &str) -> Option<Vec<(String, String)>> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = std::io::BufReader::new(&stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    // The headers are read before any answer: closing a socket with unread data resets it,
    // and the client would lose the answer.
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        header.clear();
    }
    let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let query = target.strip_prefix("/callback").map(query_of);
    let Some(query) = query.filter(|q| get(q, "state").as_deref() == Some(state)) else {
        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return None;
    };
    let page = "<!doctype html><title>nod</title><p>nod received the authorization. You can close this window.</p>";
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    Some(query)
}

/// The query parameters of a URL or request target.
fn query_of(target: &str) -> Vec<(String, String)> {
    let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    parse_query(query.split('#').next().unwrap_or(""))
}

/// The value of `key` in a parsed query.
pub fn get(query: &[(String, String)], key: &str) -> Option<String> {
    query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}

pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(high), Some(low)) => {
                        out.push((high * 16 + low) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Random bytes from the kernel.
pub fn random(n: usize) -> anyhow::Result<Vec<u8>> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

pub use crate::util::{base64, base64url};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
        assert_eq!(base64(b"id:secret"), "aWQ6c2VjcmV0");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(
            parse_query("code=x%2By&state=s+t"),
            [("code".to_string(), "x+y".to_string()), ("state".to_string(), "s t".to_string())]
        );
        // RFC 7636 appendix B.
        let challenge = base64url(&crate::sha256::digest(b"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"));
        assert_eq!(challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        assert_eq!(callback_port(&redirect_uri(4242)), Some(4242));
        assert_eq!(callback_port("http://127.0.0.1:0/callback"), None);
        assert_eq!(callback_port("http://127.0.0.1:80/other"), None);
    }
}
