//! nod's small standard library: a joining thread guard, a bounded text tail for server
//! stderr, a one-shot trigger, base64, dates; `text` holds secret redaction and
//! terminal-safe text (re-exported here, where their callers have always found them).

mod text;

pub(crate) use text::is_unsafe_control;
pub use text::{Redactor, one_line, one_line_cow, redact, redact_urls, terminal_safe};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// Joins its thread when dropped, so no worker outlives its owner.
pub struct JoinOnDrop<T>(Option<JoinHandle<T>>);

impl<T> JoinOnDrop<T> {
    pub fn new(handle: JoinHandle<T>) -> JoinOnDrop<T> {
        JoinOnDrop(Some(handle))
    }

    pub fn is_finished(&self) -> bool {
        self.0.as_ref().is_none_or(JoinHandle::is_finished)
    }

    pub fn join(mut self) -> Option<T> {
        self.0.take().and_then(|h| h.join().ok())
    }
}

impl<T> Drop for JoinOnDrop<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let _ = handle.join();
        }
    }
}

/// The last lines a server wrote to stderr, bounded in lines and in bytes per line.
pub struct Tail {
    /// The first line ever seen: often the one that says what went wrong (an npx error
    /// before its stack of notices).
    first: Option<String>,
    lines: VecDeque<String>,
    partial: Vec<u8>,
    max_lines: usize,
}

const TAIL_LINE_BYTES: usize = 512;

impl Tail {
    pub fn new(max_lines: usize) -> Tail {
        Tail { first: None, lines: VecDeque::new(), partial: Vec::new(), max_lines }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.end_line();
            } else if self.partial.len() < TAIL_LINE_BYTES {
                self.partial.push(b);
            }
        }
    }

    fn end_line(&mut self) {
        let line = String::from_utf8_lossy(&self.partial).trim_end().to_string();
        self.partial.clear();
        if line.is_empty() {
            return;
        }
        if self.first.is_none() {
            self.first = Some(line.clone());
        }
        if self.lines.len() == self.max_lines {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The last `n` lines, an unfinished one included.
    pub fn last(&self, n: usize) -> Vec<String> {
        let mut lines: Vec<String> = self.lines.iter().cloned().collect();
        if !self.partial.is_empty() {
            lines.push(String::from_utf8_lossy(&self.partial).trim_end().to_string());
        }
        let skip = lines.len().saturating_sub(n);
        lines.split_off(skip)
    }

    /// What to show of the stream in `n` lines: the first line, then `…` and the last ones
    /// when the first has scrolled out of the last `n`.
    pub fn summary(&self, n: usize) -> Vec<String> {
        let mut last = self.last(n);
        let Some(first) = &self.first else { return last };
        if n < 3 || last.contains(first) {
            return last;
        }
        let keep = last.split_off(last.len() - (n - 2));
        let mut out = vec![first.clone(), "…".to_string()];
        out.extend(keep);
        out
    }
}

/// An error and its causes on one line, `outer: inner`, a cause shown once when the text
/// before it ends with it already (an error whose message quotes its source).
pub fn chain(err: &anyhow::Error) -> String {
    let mut out: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.last().is_none_or(|last| !last.ends_with(&text)) {
            out.push(text);
        }
    }
    out.join(": ")
}

/// A one-shot signal: fired once (Ctrl-C, a cancelled turn), observed by polling, by
/// `select!` on `receiver()`, or by actions registered with `on_fire`. A value, so one
/// process can hold several (one per turn) and fire one without the others.
#[derive(Clone)]
pub struct Trigger {
    inner: Arc<TriggerInner>,
}

struct TriggerInner {
    fired: AtomicBool,
    /// Dropped on fire, which makes `receiver` ready (disconnected) for every select.
    gate: Mutex<Option<crossbeam_channel::Sender<()>>>,
    receiver: crossbeam_channel::Receiver<()>,
    actions: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl Default for Trigger {
    fn default() -> Trigger {
        let (gate, receiver) = crossbeam_channel::bounded(0);
        Trigger {
            inner: Arc::new(TriggerInner {
                fired: AtomicBool::new(false),
                gate: Mutex::new(Some(gate)),
                receiver,
                actions: Mutex::new(Vec::new()),
            }),
        }
    }
}

impl Trigger {
    /// Fires: wakes every waiter and runs the registered actions, once.
    pub fn fire(&self) {
        if self.inner.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner.gate.lock().unwrap_or_else(PoisonError::into_inner).take();
        let actions = std::mem::take(&mut *self.inner.actions.lock().unwrap_or_else(PoisonError::into_inner));
        for action in actions {
            action();
        }
    }

    pub fn is_fired(&self) -> bool {
        self.inner.fired.load(Ordering::SeqCst)
    }

    /// Ready (disconnected) once fired.
    pub fn receiver(&self) -> &crossbeam_channel::Receiver<()> {
        &self.inner.receiver
    }

    /// Whether `other` is this trigger (a clone of it).
    pub fn same(&self, other: &Trigger) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Runs `action` when the trigger fires (at once if it has).
    pub fn on_fire(&self, action: impl FnOnce() + Send + 'static) {
        let mut actions = self.inner.actions.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_fired() {
            drop(actions);
            action();
        } else {
            actions.push(Box::new(action));
        }
    }
}

/// A duration for people: `60 s`, `1.5 s`, `0.25 s`.
pub fn seconds(duration: std::time::Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        return format!("{} s", millis / 1000);
    }
    let text = format!("{:.3}", duration.as_secs_f64());
    format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
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

/// Decodes standard or URL-safe base64, padded or not. Whitespace is skipped.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    let mut padding = false;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        if padding {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Days since 1970-01-01 as YYYY-MM-DD (proleptic Gregorian; Howard Hinnant's algorithm).
pub fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Seconds since the epoch as an RFC 3339 UTC time (`2026-12-01T22:05:09Z`).
pub fn rfc3339(secs: u64) -> String {
    let rest = secs % 86_400;
    format!("{}T{:02}:{:02}:{:02}Z", civil_date((secs / 86_400) as i64), rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_lines_bounded() {
        let mut tail = Tail::new(3);
        tail.push(b"one\ntwo\nthr");
        tail.push(b"ee\nfour\nfive");
        assert_eq!(tail.last(3), vec!["three", "four", "five"]);
        assert_eq!(tail.summary(3), vec!["one", "…", "five"], "the first line is kept");
        assert_eq!(tail.summary(5), vec!["one", "…", "three", "four", "five"]);
        let mut short = Tail::new(64);
        short.push(b"a\nb\n");
        assert_eq!(short.summary(3), vec!["a", "b"], "nothing scrolled out");
        tail.push(&vec![b'x'; 10_000]);
        assert_eq!(tail.last(1)[0].len(), TAIL_LINE_BYTES);
    }

    #[test]
    fn seconds_read_naturally() {
        use std::time::Duration;
        assert_eq!(seconds(Duration::from_secs(60)), "60 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(seconds(Duration::from_millis(1005)), "1.005 s");
        assert_eq!(seconds(Duration::from_millis(250)), "0.25 s");
        assert_eq!(seconds(Duration::from_micros(29_999_600)), "30 s");
    }

    #[test]
    fn a_trigger_fires_once_and_wakes_waiters() {
        let trigger = Trigger::default();
        let count = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let seen = count.clone();
        trigger.on_fire(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        });
        assert!(trigger.receiver().try_recv().is_err() && !trigger.is_fired());
        trigger.fire();
        trigger.fire();
        assert!(trigger.is_fired());
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert!(matches!(trigger.receiver().recv(), Err(crossbeam_channel::RecvError)));
        let late = count.clone();
        trigger.on_fire(move || {
            late.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn base64_round_trip() {
        assert_eq!(base64_decode("AAEC//6JUE4=").unwrap(), vec![0, 1, 2, 0xff, 0xfe, 0x89, 0x50, 0x4e]);
        assert_eq!(base64_decode("aGk").unwrap(), b"hi");
        assert!(base64_decode("a*b").is_none());
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
        assert_eq!(base64(b"id:secret"), "aWQ6c2VjcmV0");
        assert_eq!(base64_decode(&base64(b"\x00\x01\xfe")).unwrap(), b"\x00\x01\xfe");
    }

    #[test]
    fn times_read_as_rfc_3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_162_709), "2026-12-01T22:05:09Z");
    }
}
