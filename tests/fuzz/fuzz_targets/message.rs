//! Fuzz message decoding and the text helpers that handle server strings: decode, then
//! re-encode what decoded; base64, redaction and terminal sanitizing never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nod::jsonrpc::{self, Message};

fuzz_target!(|data: &[u8]| {
    if let Ok(msgs) = jsonrpc::decode(data, true) {
        for msg in msgs {
            match msg {
                Message::Request { id, .. } => {
                    let line = jsonrpc::encode_response(&id, &Ok(serde_json::json!({})));
                    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
                }
                Message::Notification { method, params } => {
                    let line = jsonrpc::encode_notification(&method, Some(&params));
                    assert!(jsonrpc::decode(&line[..line.len() - 1], false).is_ok());
                }
                Message::Response { .. } | Message::Invalid { .. } => {}
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = nod::util::base64_decode(text);
        let _ = nod::util::redact(text, &["secret".to_string()]);
        let _ = nod::util::redact_urls(text);
        let safe = nod::util::terminal_safe(text);
        assert!(!safe.contains('\u{1b}'));
        let _ = nod::util::one_line(text);
    }
});
