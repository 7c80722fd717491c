//! ACP's JSON-RPC 2.0 on nod's own stdin and stdout, built on `crate::jsonrpc`: the frames
//! (newline-delimited, at most `MAX_FRAME` each), the decoding into a `Message`, the encoding of
//! nod's answers, notifications and requests, and the table of nod's requests to the client
//! that wait for an answer. The client and nod each send requests, with id spaces of their
//! own: a response from the client answers nod's request of that id, never the client's.

use std::io::{BufRead, Write};
use std::sync::Mutex;

use crossbeam_channel::{Sender, select};
use serde_json::{Value, json};

use super::{lock, method};
use crate::jsonrpc::frame::{FrameError, Lines, MAX_FRAME};
use crate::jsonrpc::queue::Outgoing;
use crate::jsonrpc::{self, INVALID_REQUEST, Message, PARSE_ERROR, ResponseError};
use crate::util::Trigger;

/// The client's answer to one of nod's requests.
pub(super) type Answer = Result<Value, ResponseError>;

/// A line that is no message: answered with error `code`, to `id` when the line had a
/// readable one.
pub(crate) struct Unreadable {
    pub id: Value,
    pub code: i64,
    pub message: String,
}

/// The client's messages, one a line, until its end of stream. A bad line is an `Unreadable`
/// and the next line is read as usual.
pub(crate) fn incoming(input: impl BufRead) -> impl Iterator<Item = Result<Message, Unreadable>> {
    Lines::new(input).map(|frame| match frame {
        Ok(line) => decode(&line),
        Err(FrameError::TooLarge) => Err(Unreadable {
            id: Value::Null,
            code: INVALID_REQUEST,
            message: format!("message over {} MiB; ignored", MAX_FRAME >> 20),
        }),
        Err(err @ FrameError::NotUtf8) => {
            Err(Unreadable { id: Value::Null, code: PARSE_ERROR, message: format!("not JSON: {err}") })
        }
    })
}

/// One line as a message. `jsonrpc::decode` would drop the id of a message it rejects; the
/// value is parsed here so that an envelope error is still answered to its request's id.
fn decode(line: &[u8]) -> Result<Message, Unreadable> {
    let value: Value = serde_json::from_slice(line).map_err(|err| Unreadable {
        id: Value::Null,
        code: PARSE_ERROR,
        message: format!("not JSON: {err}"),
    })?;
    let id = value.get("id").filter(|id| id.is_string() || id.is_number()).cloned().unwrap_or(Value::Null);
    jsonrpc::from_value(value).map_err(|err| Unreadable { id, code: INVALID_REQUEST, message: err.to_string() })
}

/// nod's side of the wire: one writer for every thread (a message is one write of one line,
/// so lines never interleave), and nod's requests that wait for the client.
pub(super) struct Peer {
    stdout: Mutex<Box<dyn Write + Send>>,
    outgoing: Mutex<Outgoing<Sender<Answer>>>,
}

impl Peer {
    pub fn new(stdout: impl Write + Send + 'static) -> Peer {
        Peer { stdout: Mutex::new(Box::new(stdout)), outgoing: Mutex::new(Outgoing::default()) }
    }

    pub fn result(&self, id: &Value, result: Value) {
        self.write(&jsonrpc::encode_response(id, &Ok(result)));
    }

    pub fn error(&self, id: &Value, code: i64, message: &str) {
        self.write(&jsonrpc::encode_response(id, &Err(ResponseError::new(code, message))));
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.write(&jsonrpc::encode_notification(method, Some(&params)));
    }

    /// Sends a request to the client and waits for its answer. `None` when `cancel` fires
    /// first (the request is withdrawn with `$/cancel_request`) or when nod gives up on every
    /// request (`give_up`).
    pub fn request(&self, method: &str, params: &Value, cancel: &Trigger) -> Option<Answer> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        // Registered before it is written, so even an instant answer finds its waiter.
        let id = lock(&self.outgoing).register(tx);
        let params = serde_json::to_string(params).expect("a JSON value serializes");
        self.write(&jsonrpc::encode_request(id, method, Some(&params)));
        select! {
            recv(rx) -> answer => answer.ok(),
            recv(cancel.receiver()) -> _ => {
                lock(&self.outgoing).cancel(id);
                self.notify(method::CANCEL_REQUEST, json!({ "requestId": id }));
                None
            }
        }
    }

    /// A response from the client: it reaches the request it answers. An answer to a request
    /// nod withdrew or never sent is dropped.
    pub fn answered(&self, id: Option<Value>, answer: Answer) {
        let waiter = id.as_ref().and_then(|id| lock(&self.outgoing).complete(id));
        match waiter {
            Some(tx) => {
                let _ = tx.send(answer);
            }
            None => log::debug!("acp: an answer to no waiting request ({id:?}) dropped"),
        }
    }

    /// Every waiting request ends without an answer (the connection is ending).
    pub fn give_up(&self) {
        lock(&self.outgoing).clear();
    }

    fn write(&self, frame: &[u8]) {
        let mut stdout = lock(&self.stdout);
        let _ = stdout.write_all(frame);
        let _ = stdout.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<Result<Message, (Value, i64)>> {
        incoming(text.as_bytes()).map(|m| m.map_err(|u| (u.id, u.code))).collect()
    }

    #[test]
    fn bad_lines_are_answered_to_their_id_when_it_can_be_read() {
        let got = read(
            "not json\n{\"id\":7,\"method\":\"initialize\"}\n[1]\n{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\"}\n",
        );
        assert_eq!(
            got,
            [
                Err((Value::Null, PARSE_ERROR)),
                Err((json!(7), INVALID_REQUEST)),
                Err((Value::Null, INVALID_REQUEST)),
                Ok(Message::Notification { method: "session/cancel".into(), params: Value::Null }),
            ]
        );
    }
}
