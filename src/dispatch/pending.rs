//! The table of pending calls, shared by the callers that start them, the workers that
//! answer them and the dispatcher that owns their deadlines and cancellation.
//!
//! Every completion of a call (its answer, its deadline, a cancellation, the death of its
//! connection) removes the entry under one lock, so the first one wins and the others find
//! nothing. An answer therefore goes from the worker to the caller directly; the dispatcher
//! learns of it lazily (a stale deadline finds no entry). The dispatcher sleeps until the
//! earliest deadline it has seen (`armed`); a caller that registers an earlier one wakes it.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use serde_json::Value;

use super::{CallError, CallId, CallUpdate, Finished, GroupId, Progress};
use crate::jsonrpc::ResponseError;
use crate::mcp::Version;
use crate::transport::{ConnId, Outbound, Outlet, RequestMeta, Router, TransportError};

pub(crate) struct Entry {
    pub conn: ConnId,
    pub wire_id: u64,
    pub method: &'static str,
    /// The revision the request was sent at: a cancellation says it to the worker.
    pub revision: Option<Version>,
    pub reply: Sender<CallUpdate>,
    pub started: Instant,
    pub group: Option<GroupId>,
    deadline: Instant,
    timeout: Duration,
    progress: Option<(TokenKey, Duration)>,
}

/// What `insert` needs about a new call.
pub(crate) struct NewCall {
    pub id: CallId,
    pub conn: ConnId,
    pub wire_id: u64,
    /// What the request is, for the worker.
    pub meta: RequestMeta,
    pub timeout: Duration,
    pub progress: Option<(Value, Duration)>,
    pub group: Option<GroupId>,
    pub reply: Sender<CallUpdate>,
}

#[derive(Default)]
pub(crate) struct Table {
    calls: IdMap<CallId, Entry>,
    by_wire: IdMap<(ConnId, u64), CallId>,
    by_token: IdMap<(ConnId, TokenKey), CallId>,
    deadlines: BTreeSet<(Instant, CallId)>,
    /// The deadline the dispatcher sleeps until; `None` when it sleeps without one.
    armed: Option<Instant>,
    /// Connections that ended, and why: a call started on one fails at once.
    closed: HashMap<ConnId, Arc<TransportError>>,
    /// Groups cancelled as a whole: a call started in one fails at once.
    cancelled_groups: HashMap<GroupId, String>,
    /// The dispatcher has stopped: no call can start.
    stopped: bool,
}

/// Why a call ends when the dispatcher stops.
pub(crate) const STOPPED: &str = "nod is shutting down";

/// The table's maps: every key in them is one nod made (a call's id, a connection's, the wire
/// id it sent, the progress token it sent), so no one outside can choose keys that collide,
/// and a multiply-and-rotate hash will do where the default hash would be most of the cost
/// of starting and finishing a call (a server's text is only ever looked up, never stored).
type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct IdHasher(u64);

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// How a call could not be registered.
pub(crate) enum Refused {
    Closed(Arc<TransportError>),
    Cancelled(String),
}

#[derive(Default)]
pub(crate) struct Registry {
    table: Mutex<Table>,
}

impl Registry {
    /// Fails every pending call and refuses new ones: the dispatcher is stopping, and no one
    /// would enforce their deadlines any more.
    pub fn stop(&self) {
        let entries = {
            let mut table = self.lock();
            table.stopped = true;
            table.drain_all()
        };
        for entry in entries {
            let _ = entry.reply.send(CallUpdate::done(Err(CallError::Cancelled(STOPPED.into()))));
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a call and hands its frame to the worker in the same critical section, so a
    /// cancellation can never reach the wire before the request. Returns whether the
    /// dispatcher must wake up to arm an earlier deadline.
    pub fn start(&self, call: NewCall, outlet: &Outlet, frame: Vec<u8>, now: Instant) -> Result<bool, Refused> {
        let mut table = self.lock();
        if table.stopped {
            return Err(Refused::Cancelled(STOPPED.into()));
        }
        if let Some(cause) = table.closed.get(&call.conn) {
            return Err(Refused::Closed(cause.clone()));
        }
        if let Some(reason) = call.group.and_then(|g| table.cancelled_groups.get(&g)) {
            return Err(Refused::Cancelled(reason.clone()));
        }
        let deadline = checked_deadline(now, call.timeout);
        let wire_id = call.wire_id;
        let progress = call.progress.map(|(token, cap)| (token_key(&token), cap));
        if let Some((key, _)) = &progress {
            table.by_token.insert((call.conn, key.clone()), call.id);
        }
        table.by_wire.insert((call.conn, wire_id), call.id);
        table.deadlines.insert((deadline, call.id));
        let entry = Entry {
            conn: call.conn,
            wire_id,
            method: call.meta.method,
            revision: call.meta.revision,
            reply: call.reply,
            started: now,
            group: call.group,
            deadline,
            timeout: call.timeout,
            progress,
        };
        table.calls.insert(call.id, entry);
        let wake = table.armed.is_none_or(|armed| deadline < armed);
        if wake {
            table.armed = Some(deadline);
        }
        // The table is let go once the frame has its place in the worker's queue (so a
        // cancellation still goes out after it) but before the write: on one CPU the server
        // may answer, and the worker route it, before this thread runs again.
        let mut table = Some(table);
        outlet.send_then(Outbound::Request { id: wire_id, frame, meta: call.meta }, &mut || drop(table.take()));
        Ok(wake)
    }
}

impl Table {
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

    /// The earliest deadline, which the dispatcher now sleeps until.
    pub fn arm(&mut self) -> Option<Instant> {
        self.armed = self.deadlines.first().map(|(at, _)| *at);
        self.armed
    }

    pub fn pop_expired(&mut self, now: Instant) -> Option<Entry> {
        let &(at, call) = self.deadlines.first()?;
        if at > now {
            return None;
        }
        self.remove(call)
    }

    /// Lets a progress notification push the deadline out, never past the call's hard cap,
    /// and returns where to forward it.
    pub fn progress(&mut self, conn: ConnId, token: &Value, now: Instant) -> Option<Sender<CallUpdate>> {
        let &call = self.by_token.get(&(conn, token_key(token)))?;
        let entry = self.calls.get_mut(&call)?;
        let cap = entry.progress.as_ref().map_or(entry.timeout, |(_, cap)| *cap);
        let extended = checked_deadline(now, entry.timeout).min(checked_deadline(entry.started, cap));
        if extended > entry.deadline {
            self.deadlines.remove(&(entry.deadline, call));
            entry.deadline = extended;
            self.deadlines.insert((extended, call));
        }
        Some(entry.reply.clone())
    }

    /// Marks `conn` closed and takes its calls.
    pub fn close_conn(&mut self, conn: ConnId, cause: Arc<TransportError>) -> Vec<Entry> {
        self.closed.insert(conn, cause);
        self.drain_where(|e| e.conn == conn)
    }

    /// Forgets a connection that is gone for good (its id is never reused).
    pub fn forget_conn(&mut self, conn: ConnId) {
        self.closed.remove(&conn);
    }

    /// Marks `group` cancelled and takes its calls.
    pub fn cancel_group(&mut self, group: GroupId, reason: &str) -> Vec<Entry> {
        self.cancelled_groups.insert(group, reason.to_string());
        self.drain_where(|e| e.group == Some(group))
    }

    /// Lets a cancelled group's id start calls again (a shell turn's group is new each turn,
    /// so this only frees memory).
    pub fn forget_group(&mut self, group: GroupId) {
        self.cancelled_groups.remove(&group);
    }

    pub fn drain_all(&mut self) -> Vec<Entry> {
        self.drain_where(|_| true)
    }

    fn drain_where(&mut self, keep: impl Fn(&Entry) -> bool) -> Vec<Entry> {
        let calls: Vec<CallId> = self.calls.iter().filter(|(_, e)| keep(e)).map(|(id, _)| *id).collect();
        calls.into_iter().filter_map(|call| self.remove(call)).collect()
    }
}

impl Router for Registry {
    fn progress(&self, conn: ConnId, params: &Value) {
        let Some(token) = params.get("progressToken") else { return };
        let Some(progress) = params.get("progress").and_then(Value::as_f64) else { return };
        let update = Progress {
            progress,
            total: params.get("total").and_then(Value::as_f64),
            message: params.get("message").and_then(Value::as_str).map(crate::util::one_line),
        };
        let reply = self.lock().progress(conn, token, Instant::now());
        if let Some(reply) = reply {
            let _ = reply.send(CallUpdate::progress(update));
        }
    }

    fn route(&self, conn: ConnId, id: u64, result: Result<Value, ResponseError>) -> bool {
        self.answer(conn, id, |_| Finished::Result(result.map_err(CallError::Rpc)))
    }

    fn route_text(&self, conn: ConnId, id: u64, frame: String, span: std::ops::Range<usize>) -> bool {
        self.answer(conn, id, |entry| Finished::Text { frame, span, method: entry.method })
    }
}

impl Registry {
    /// Ends the call waiting for `id` with what `finished` makes of it; false when none waits.
    fn answer(&self, conn: ConnId, id: u64, finished: impl FnOnce(&Entry) -> Finished) -> bool {
        let Some(entry) = self.lock().remove_wire(conn, id) else { return false };
        let _ = entry.reply.send(CallUpdate::Done(Box::new(finished(&entry))));
        true
    }
}

/// `now + timeout`, saturating far in the future instead of overflowing (a timeout of
/// u64::MAX milliseconds must not panic).
pub(crate) fn checked_deadline(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// A progress token as a key. Tokens compare by their JSON text, so 1 and "1" stay different
/// tokens; nod's own (call numbers) are kept as numbers, which costs no allocation a call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TokenKey {
    Number(u64),
    Text(Box<str>),
}

fn token_key(token: &Value) -> TokenKey {
    match token {
        Value::Number(n) if n.is_u64() => TokenKey::Number(n.as_u64().expect("checked")),
        other => TokenKey::Text(other.to_string().into_boxed_str()),
    }
}
