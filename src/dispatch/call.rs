//! What a caller hears of its call: progress and how it ended (`CallUpdate`, `Finished`),
//! why it produced no result (`CallError`), and the limit a timeout ran out of.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::jsonrpc::{self, ResponseError};
use crate::transport::TransportError;

/// How progress is requested for a call: `token` is in the request's `_meta`, and progress
/// may extend the deadline up to `cap` after the start.
pub struct ProgressPolicy {
    pub token: Value,
    pub cap: Duration,
}

/// What a caller hears about its call. Both kinds are boxed so that the message is two words:
/// a call's channel allocates room for 31 messages on its first send, and a message of a
/// `Result<Value, CallError>` (104 bytes) made that 3.5 KiB to clear, for every call.
#[derive(Debug)]
pub enum CallUpdate {
    Progress(Box<Progress>),
    Done(Box<Finished>),
}

/// How a call ended: its result, or the text of the result the server sent, which becomes a
/// value on the thread that takes it (`into_result`). A result read by the worker and freed
/// by its caller made every one of its small allocations cross threads: the caller's cache
/// of freed blocks filled at once, and the rest went back to the worker's heap through its
/// lock and glibc's slow paths (43 such frees a call, a quarter of the instructions of 2000
/// sequential calls). Read where it is used, a result is allocated and freed by one thread.
#[derive(Debug)]
pub enum Finished {
    Result(Result<Value, CallError>),
    /// `frame[span]` is the answer's `result`, checked to be JSON by the worker.
    Text {
        frame: String,
        span: std::ops::Range<usize>,
        method: &'static str,
    },
}

/// Why a result the worker checked as JSON is invalid all the same: a value cannot hold it
/// (a number past f64, nesting past serde_json's limit).
pub const UNREADABLE: &str = "is JSON that nod cannot read into a value";

impl Finished {
    /// The result's JSON text, when it came as text.
    pub fn text(&self) -> Option<&str> {
        match self {
            Finished::Text { frame, span, .. } => frame.get(span.clone()),
            Finished::Result(_) => None,
        }
    }

    pub fn into_result(self) -> Result<Value, CallError> {
        match self {
            Finished::Result(result) => result,
            Finished::Text { frame, span, method } => {
                serde_json::from_str(&frame[span]).map_err(|_| CallError::Invalid { method, why: UNREADABLE })
            }
        }
    }
}

impl CallUpdate {
    pub fn done(result: Result<Value, CallError>) -> CallUpdate {
        CallUpdate::Done(Box::new(Finished::Result(result)))
    }

    pub fn progress(progress: Progress) -> CallUpdate {
        CallUpdate::Progress(Box::new(progress))
    }
}

#[derive(Debug, Clone)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Why the caller refused to send a request: its own error type, which it takes back by
/// downcasting (no layer below the caller reads or renders it).
pub type Refusal = Arc<dyn std::error::Error + Send + Sync>;

/// Why a call produced no result.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CallError {
    /// The server answered with a JSON-RPC error.
    Rpc(ResponseError),
    /// No answer within the deadline, `after` waiting; a cancellation was sent (except for
    /// `initialize`). The session layer names the configured `limit` that ran out.
    Timeout { after: Duration, limit: Option<Limit> },
    /// The caller cancelled it.
    Cancelled(String),
    /// The connection is gone.
    Disconnected(Arc<TransportError>),
    /// The request would exceed the frame cap; nothing was sent.
    TooLarge(usize),
    /// The transport could not deliver this one request (an HTTP status, a refused
    /// connection, a stream that ended before its answer); the connection itself lives on.
    Transport(Arc<TransportError>),
    /// The server answered with something that is not a valid answer to the method.
    Invalid { method: &'static str, why: &'static str },
    /// The server did not declare the capability the method needs; nothing was sent.
    NotOffered(&'static str),
    /// The caller's last check before sending refused (a permission changed, a view died);
    /// the caller's own typed reason.
    Refused(Refusal),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc(error) => write!(f, "server error: {}", crate::util::one_line(&error.to_string())),
            CallError::Timeout { after, limit: None } => write!(f, "no answer within {}", crate::util::seconds(*after)),
            CallError::Timeout { after, limit: Some(limit) } => limit.describe(*after, f),
            CallError::Cancelled(reason) => write!(f, "cancelled ({reason})"),
            CallError::Disconnected(cause) => write!(f, "{cause}"),
            CallError::Transport(cause) => write!(f, "{cause}"),
            CallError::Invalid { method, why } => write!(f, "the server's answer to {method} {why}"),
            CallError::Refused(why) => write!(f, "refused before sending: {why}"),
            CallError::NotOffered(capability) => {
                write!(f, "the server does not offer {capability} (it declared no {capability} capability)")
            }
            CallError::TooLarge(n) => write!(
                f,
                "the request is {n} bytes, over the {} MiB frame limit; nothing was sent",
                jsonrpc::frame::MAX_FRAME >> 20
            ),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Disconnected(cause) | CallError::Transport(cause) => Some(cause.as_ref()),
            _ => None,
        }
    }
}

/// The configured limit a timeout ran out of, named in its message: the setting
/// (`operation_timeout_ms`, `startup_timeout_ms`) and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub setting: &'static str,
    pub value: Duration,
    /// Progress notifications had stretched the deadline, up to this many times `value`.
    pub stretched: Option<u32>,
}

impl Limit {
    fn describe(&self, after: Duration, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stretched {
            Some(times) => write!(
                f,
                "no answer within {} ({} is {}; progress may stretch a call to {times} times that)",
                crate::util::seconds(after),
                self.setting,
                crate::util::seconds(self.value)
            ),
            None => write!(f, "no answer within {} ({})", crate::util::seconds(self.value), self.setting),
        }
    }
}
