//! nod's own requests to a peer that are waiting for their answer, by id: the outgoing half of
//! lsp-server's `ReqQueue`, for a connection where the peer sends requests too (ACP) and
//! answers arrive among them.
//!
//! Ids are integers handed out once per queue and never reused (MSG-2), so a late answer to a
//! withdrawn request finds nothing, never another request's waiter.

use std::collections::HashMap;

use serde_json::Value;

/// What each waiting request left behind (a reply channel, usually), under its id.
pub struct Outgoing<T> {
    next_id: u64,
    waiting: HashMap<u64, T>,
}

impl<T> Default for Outgoing<T> {
    fn default() -> Outgoing<T> {
        Outgoing { next_id: 0, waiting: HashMap::new() }
    }
}

impl<T> Outgoing<T> {
    /// A fresh id for a new request; `data` waits under it until `complete` or `cancel`.
    pub fn register(&mut self, data: T) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.waiting.insert(id, data);
        id
    }

    /// The request a response's id answers. `None` for an id nod never gave out, one already
    /// answered or withdrawn, and any id that is not the integer nod sent (a peer must echo it
    /// as it came, so `"3"` does not answer 3).
    pub fn complete(&mut self, id: &Value) -> Option<T> {
        self.waiting.remove(&id.as_u64()?)
    }

    /// Withdraws a request nod no longer waits for.
    pub fn cancel(&mut self, id: u64) -> Option<T> {
        self.waiting.remove(&id)
    }

    /// Gives up on every waiting request (the connection is ending): their data is dropped.
    pub fn clear(&mut self) {
        self.waiting.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_completes_its_request_once_and_ids_are_never_reused() {
        let mut queue = Outgoing::default();
        let (a, b) = (queue.register("a"), queue.register("b"));
        assert_eq!((a, b), (0, 1));
        assert_eq!(queue.complete(&json!(1)), Some("b"));
        assert_eq!(queue.complete(&json!(1)), None, "a second answer finds nothing");
        assert_eq!(queue.complete(&json!("0")), None, "the id must come back as sent");
        assert_eq!(queue.cancel(a), Some("a"));
        assert_eq!(queue.complete(&json!(0)), None, "a late answer to a withdrawn request");
        assert_eq!(queue.register("c"), 2);
        queue.clear();
        assert_eq!(queue.complete(&json!(2)), None);
    }
}
