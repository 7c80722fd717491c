//! The browser side of authorization: the loopback callback listener, launching the browser
//! (`BROWSER`, then `xdg-open`), and a pasted redirect URL for machines without one.

use std::io::{BufRead, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

/// How long nod waits for the user to finish in the browser.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

pub struct Callback {
    listener: TcpListener,
    pub redirect_uri: String,
}

impl Callback {
    /// Listens on 127.0.0.1 on a random port.
    pub fn bind() -> anyhow::Result<Callback> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        Ok(Callback { listener, redirect_uri: format!("http://127.0.0.1:{port}/callback") })
    }

    /// Waits for the one redirect (or a pasted URL) and returns its query parameters.
    pub fn wait(self, paste: bool) -> anyhow::Result<Vec<(String, String)>> {
        let (tx, rx) = crossbeam_channel::bounded::<String>(2);
        let listener = self.listener;
        let callback = tx.clone();
        std::thread::Builder::new().name("nod-oauth-callback".into()).spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = std::io::BufReader::new(&stream);
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
                if !target.starts_with("/callback") {
                    let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    continue;
                }
                // Drain the headers so the browser sees a clean answer.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let page = "<!doctype html><title>nod</title><p>nod received the authorization. You can close this window.</p>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = callback.send(target);
                return;
            }
        })?;
        if paste {
            let pasted = tx;
            let _ = std::thread::Builder::new().name("nod-oauth-paste".into()).spawn(move || {
                let stdin = std::io::stdin();
                for line in stdin.lock().lines().map_while(Result::ok) {
                    let line = line.trim().to_string();
                    if line.contains("code=") || line.contains("error=") {
                        let _ = pasted.send(line);
                        return;
                    }
                }
            });
        }
        let deadline = Instant::now() + LOGIN_TIMEOUT;
        let target = rx
            .recv_deadline(deadline)
            .map_err(|_| anyhow!("no authorization arrived within {} s", LOGIN_TIMEOUT.as_secs()))?;
        let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
        let query = query.split('#').next().unwrap_or("");
        Ok(parse_query(query))
    }
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

/// Opens the URL in a browser without a shell: `BROWSER` (a program and its arguments,
/// split on spaces, with the URL last), else `xdg-open`.
pub fn open(url: &str) -> anyhow::Result<()> {
    if !(url.starts_with("https://") || url.starts_with("http://127.0.0.1") || url.starts_with("http://localhost")) {
        bail!("refusing to open an authorization URL that is not https");
    }
    let browser = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty());
    let mut words: Vec<String> = match &browser {
        Some(browser) => browser.split_whitespace().map(str::to_string).collect(),
        None => vec!["xdg-open".into()],
    };
    let program = words.remove(0);
    let mut child = std::process::Command::new(&program)
        .args(words)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| anyhow!("could not start the browser ({program}): {e}"))?;
    // The browser command runs on its own; reap it in the background.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

/// Random bytes from the kernel.
pub fn random(n: usize) -> anyhow::Result<Vec<u8>> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Base64url without padding (PKCE, state).
pub fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 2);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Standard base64 with padding (HTTP Basic).
pub fn base64(bytes: &[u8]) -> String {
    let mut out = base64url(bytes).replace('-', "+").replace('_', "/");
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

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
    }
}
