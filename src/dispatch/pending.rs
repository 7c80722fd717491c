//! Pending calls and their deadlines, owned by the dispatcher alone.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use serde_json::Value;

use super::{CallId, CallRequest, CallUpdate, Progress};
use crate::transport::ConnId;

pub(super) struct Entry {
    pub conn: ConnId,
    pub wire_id: u64,
    pub method: &'static str,
    pub reply: Sender<CallUpdate>,
    pub started: Instant,
    deadline: Instant,
    timeout: Duration,
    progress: Option<(String, Duration)>,
}

#[derive(Default)]
pub(super) struct Pending {
    calls: HashMap<CallId, Entry>,
    by_wire: HashMap<(ConnId, u64), CallId>,
    by_token: HashMap<(ConnId, String), CallId>,
    deadlines: BTreeSet<(Instant, CallId)>,
}

impl Pending {
    pub fn insert(&mut self, req: CallRequest, wire_id: u64, now: Instant) {
        let deadline = now + req.timeout;
        let progress = req.progress.map(|p| (token_key(&p.token), p.cap));
        if let Some((key, _)) = &progress {
            self.by_token.insert((req.conn, key.clone()), req.id);
        }
        self.by_wire.insert((req.conn, wire_id), req.id);
        self.deadlines.insert((deadline, req.id));
        let entry = Entry {
            conn: req.conn,
            wire_id,
            method: req.method,
            reply: req.reply,
            started: now,
            deadline,
            timeout: req.timeout,
            progress,
        };
        self.calls.insert(req.id, entry);
    }

    pub fn remove(&mut self, call: CallId) -> Option<Entry> {
        let entry = self.calls.remove(&call)?;
        self.by_wire.remove(&(entry.conn, entry.wire_id));
        if let Some((key, _)) = &entry.progress {
            self.by_token.remove(&(entry.conn, key.clone()));
        }
        self.deadlines.remove(&(entry.deadline, call));
        Some(entry)
    }

    pub fn remove_wire(&mut self, conn: ConnId, wire_id: u64) -> Option<Entry> {
        let call = *self.by_wire.get(&(conn, wire_id))?;
        self.remove(call)
    }

    /// The only call pending on `conn`, if there is exactly one.
    pub fn sole_for(&self, conn: ConnId) -> Option<CallId> {
        let mut found = self.calls.iter().filter(|(_, e)| e.conn == conn).map(|(id, _)| *id);
        let first = found.next()?;
        found.next().is_none().then_some(first)
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    pub fn pop_expired(&mut self, now: Instant) -> Option<Entry> {
        let &(at, call) = self.deadlines.first()?;
        if at > now {
            return None;
        }
        self.remove(call)
    }

    /// Forwards a progress notification and lets it push the deadline out, never past the
    /// call's hard cap.
    pub fn progress(&mut self, conn: ConnId, token: &Value, now: Instant, update: Progress) {
        let Some(&call) = self.by_token.get(&(conn, token_key(token))) else {
            return;
        };
        let Some(entry) = self.calls.get_mut(&call) else {
            return;
        };
        let cap = entry.progress.as_ref().map_or(entry.timeout, |(_, cap)| *cap);
        let extended = (now + entry.timeout).min(entry.started + cap);
        if extended > entry.deadline {
            self.deadlines.remove(&(entry.deadline, call));
            entry.deadline = extended;
            self.deadlines.insert((extended, call));
        }
        let _ = entry.reply.send(CallUpdate::Progress(update));
    }

    pub fn drain_conn(&mut self, conn: ConnId) -> Vec<Entry> {
        let calls: Vec<CallId> = self.calls.iter().filter(|(_, e)| e.conn == conn).map(|(id, _)| *id).collect();
        calls.into_iter().filter_map(|call| self.remove(call)).collect()
    }

    pub fn drain_all(&mut self) -> Vec<Entry> {
        let calls: Vec<CallId> = self.calls.keys().copied().collect();
        calls.into_iter().filter_map(|call| self.remove(call)).collect()
    }
}

/// Tokens compare by their JSON text, so 1 and "1" stay different tokens.
fn token_key(token: &Value) -> String {
    token.to_string()
}
