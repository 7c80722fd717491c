//! Fuzz message decoding and the text helpers that handle server strings: decode, then
//! re-encode what decoded; an answer handed over as text (`answer_span`) is one that decode
//! reads as the same answer; base64, redaction and terminal sanitizing never panic.
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
    if let Ok(text) = std::str::from_utf8(data)
        && let Some((id, span)) = jsonrpc::answer_span(text)
    {
        match jsonrpc::decode_text(text, true).as_deref() {
            Ok([Message::Response { id: Some(want), result: Ok(result) }]) => {
                assert_eq!(want.as_u64(), Some(id));
                // The caller's read may fail (a number past f64, nesting past the limit):
                // its call then fails. When it succeeds, it is what decode read.
                if let Ok(read) = serde_json::from_str::<serde_json::Value>(&text[span]) {
                    assert_eq!(&read, result);
                }
            }
            // decode could not read the result into a value where the text road could.
            Err(_) => {}
            Ok(other) => panic!("answer_span took {text:?}, decode read {other:?}"),
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
