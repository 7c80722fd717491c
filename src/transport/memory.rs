//! An in-memory transport (lsp-server's `Connection::memory()`): a worker that keeps the
//! contract of every other transport, with a `Peer` on the other end that a test drives as
//! the server. The dispatcher's tests run on it without processes or sockets.

use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, select};
use serde_json::Value;

use super::{Link, Outbound, Outlet, TransportError, WorkerHandle};
use crate::util::JoinOnDrop;

/// What the worker saw from nod, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// A request, notification or response, parsed.
    Frame(Value),
    CancelStream(u64),
}

/// The server's end of an in-memory connection.
pub struct Peer {
    seen: Receiver<Seen>,
    link: Link,
    kill: Sender<TransportError>,
}

/// Starts a worker whose server is the returned `Peer`.
pub fn spawn(link: Link) -> (WorkerHandle, Peer) {
    let (outbox, inbox) = crossbeam_channel::unbounded::<Outbound>();
    let (seen_tx, seen) = crossbeam_channel::unbounded();
    let (kill, killed) = crossbeam_channel::bounded::<TransportError>(1);
    let worker_link = link.clone();
    let thread = std::thread::Builder::new()
        .name(format!("nod-memory:{}", link.name))
        .spawn(move || {
            let cause = loop {
                select! {
                    recv(inbox) -> out => match out {
                        Ok(Outbound::Request { frame, .. } | Outbound::Notify { frame, .. }) => {
                            let value = serde_json::from_slice(&frame).unwrap_or(Value::Null);
                            let _ = seen_tx.send(Seen::Frame(value));
                        }
                        Ok(Outbound::CancelStream(id)) => {
                            let _ = seen_tx.send(Seen::CancelStream(id));
                        }
                        Ok(Outbound::Close) | Err(_) => break TransportError::ClosedByClient,
                    },
                    recv(killed) -> cause => break cause.unwrap_or(TransportError::ClosedByClient),
                }
            };
            worker_link.closed(cause);
        })
        .expect("spawn the memory worker");
    let handle = WorkerHandle::new(Outlet::new(outbox, None), JoinOnDrop::new(thread));
    (handle, Peer { seen, link, kill })
}

impl Peer {
    /// The next thing nod sent, waiting at most `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Seen> {
        self.seen.recv_timeout(timeout).ok()
    }

    /// The next frame nod sent, skipping stream cancellations.
    pub fn frame(&self, timeout: Duration) -> Option<Value> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            match self.seen.recv_deadline(deadline).ok()? {
                Seen::Frame(value) => return Some(value),
                Seen::CancelStream(_) => {}
            }
        }
    }

    /// Writes a message as the server would. False once the dispatcher is gone.
    pub fn send(&self, value: &Value) -> bool {
        let bytes = serde_json::to_vec(value).expect("a JSON value serializes");
        match crate::jsonrpc::decode(&bytes, true) {
            Ok(msgs) => self.link.deliver(msgs, bytes.first() == Some(&b'[')),
            Err(_) => true,
        }
    }

    /// The connection dies with `cause`.
    pub fn die(&self, cause: TransportError) {
        let _ = self.kill.try_send(cause);
    }
}
