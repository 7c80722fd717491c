//! Server-to-client traffic: requests a server sends to nod, the `Responder` that answers
//! one of them from any thread, and the `InboundHandler` a surface supplies.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::Sender;
use serde_json::{Value, json};

use super::Command;
use crate::jsonrpc::{self, ResponseError};
use crate::mcp::Version;
use crate::transport::ConnId;

/// A request the server sent to nod.
#[derive(Debug, Clone)]
pub struct ServerRequest {
    pub server: String,
    pub version: Option<Version>,
    pub method: String,
    pub params: Value,
}

/// Answers one server request, from any thread, without ever blocking (the command channel
/// is unbounded). Dropping it unanswered sends an internal error, so a server never waits
/// forever.
pub struct Responder {
    to: Target,
    id: Option<Value>,
    /// Set when the server cancels its own request (CAN-5): nod no longer answers or acts.
    cancelled: Arc<AtomicBool>,
}

/// Where an answer goes.
enum Target {
    /// To the server, through the dispatcher.
    Server { commands: Sender<Command>, conn: ConnId },
    /// Back to nod itself: an input request inside a 2026-07-28 result, whose answer rides on
    /// the retried request.
    Local(Sender<Result<Value, ResponseError>>),
}

impl Responder {
    pub(super) fn new(commands: Sender<Command>, conn: ConnId, id: Value, cancelled: Arc<AtomicBool>) -> Responder {
        Responder { to: Target::Server { commands, conn }, id: Some(id), cancelled }
    }

    /// A responder whose answer comes back on `answers`.
    pub fn local(answers: Sender<Result<Value, ResponseError>>, cancelled: Arc<AtomicBool>) -> Responder {
        Responder { to: Target::Local(answers), id: Some(Value::Null), cancelled }
    }

    pub fn respond(mut self, result: Result<Value, ResponseError>) {
        if let Some(id) = self.id.take() {
            self.send(id, result);
        }
    }

    fn send(&self, id: Value, result: Result<Value, ResponseError>) {
        match &self.to {
            Target::Server { commands, conn } => {
                let _ = commands.send(Command::Respond { conn: *conn, id, result });
            }
            Target::Local(answers) => {
                let _ = answers.send(result);
            }
        }
    }

    /// Whether the server cancelled this request: a surface should drop it unanswered.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let error = ResponseError::new(jsonrpc::INTERNAL_ERROR, "the request was dropped without an answer");
            self.send(id, Err(error));
        }
    }
}

/// What a surface supplies for server-to-client traffic. Implementations must not block:
/// answer at once, or move the `Responder` to another thread.
pub trait InboundHandler: Send + Sync {
    /// Capabilities nod declares for connections using this handler.
    fn capabilities(&self) -> Value {
        json!({})
    }
    fn request(&self, req: ServerRequest, responder: Responder) {
        let error = ResponseError::new(jsonrpc::METHOD_NOT_FOUND, format!("nod does not support {}", req.method));
        responder.respond(Err(error));
    }
    fn notification(&self, _server: &str, _method: &str, _params: &Value) {}
}

/// The default handler: no client capabilities, every server request refused.
pub struct NoInbound;
impl InboundHandler for NoInbound {}
