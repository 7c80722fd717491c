//! Transports move framed JSON-RPC between nod and one server. Each connection is a worker
//! thread; the dispatcher talks to it through `Outbound` messages and hears back through
//! `Event::Inbound` and `Event::Closed`.

pub mod child;
pub mod http;
mod http_stream;
mod legacy_sse;
pub mod sse;
pub mod stdio;

use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::jsonrpc::frame::FrameError;
use crate::util::JoinOnDrop;

/// One server connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// Dispatcher → worker.
#[derive(Debug)]
pub enum Outbound {
    /// One complete frame, newline included.
    Send(Vec<u8>),
    /// Shut down: for stdio close stdin, wait, SIGTERM, wait, SIGKILL, reap.
    Close,
}

/// Why a connection ended or could not start. Every variant is shown to the user with the
/// server's name in front of it.
#[derive(Debug, Clone)]
pub enum TransportError {
    /// The server process could not be started.
    Spawn { command: String, reason: String },
    /// The process exited on its own. `stderr` holds its last lines.
    Exited { status: String, stderr: Vec<String> },
    /// The process closed its stdout but kept running; nod stopped it.
    StdoutClosed { stderr: Vec<String> },
    /// The server broke framing (a frame over the cap, invalid UTF-8); nod stopped it.
    Protocol { error: FrameError, stderr: Vec<String> },
    /// nod asked the connection to close.
    ClosedByClient,
    /// The transport is not available for this entry yet.
    Unsupported(String),
    /// Any other I/O failure on the connection.
    Io(String),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The command is not shown: health output never includes commands.
            TransportError::Spawn { reason, .. } => write!(f, "could not start the server command: {reason}"),
            TransportError::Exited { status, stderr } => {
                write!(f, "server process exited ({status})")?;
                write_stderr(f, stderr)
            }
            TransportError::StdoutClosed { stderr } => {
                f.write_str("server closed its stdout while still running; nod stopped it")?;
                write_stderr(f, stderr)
            }
            TransportError::Protocol { error, stderr } => {
                write!(f, "server sent {error}; nod closed the connection")?;
                write_stderr(f, stderr)
            }
            TransportError::ClosedByClient => f.write_str("connection closed"),
            TransportError::Unsupported(why) => f.write_str(why),
            TransportError::Io(why) => write!(f, "connection failed: {why}"),
        }
    }
}

fn write_stderr(f: &mut std::fmt::Formatter<'_>, stderr: &[String]) -> std::fmt::Result {
    if stderr.is_empty() {
        return Ok(());
    }
    write!(f, "; last stderr: ")?;
    for (i, line) in stderr.iter().enumerate() {
        if i > 0 {
            f.write_str(" | ")?;
        }
        f.write_str(&crate::util::one_line(line))?;
    }
    Ok(())
}

/// The owning side of a worker. Dropping it closes the connection and joins the thread.
/// Field order is drop order: the outbox must go before the join.
pub struct WorkerHandle {
    pub(crate) outbox: Sender<Outbound>,
    /// Set for workers that sleep in mio (stdio); HTTP workers block on the outbox itself.
    pub(crate) waker: Option<Arc<mio::Waker>>,
    pub(crate) thread: Option<JoinOnDrop<()>>,
}

impl WorkerHandle {
    pub fn send(&self, out: Outbound) {
        // A send to a worker that has already ended is ignored: its `Closed` event carries
        // the cause.
        if self.outbox.send(out).is_ok()
            && let Some(waker) = &self.waker
        {
            let _ = waker.wake();
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        self.send(Outbound::Close);
    }
}
