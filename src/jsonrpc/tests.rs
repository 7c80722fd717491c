use super::*;

/// A small deterministic generator for the property tests (xorshift64).
pub(crate) struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Text that JSON must escape, several scripts, and characters that end lines.
    pub fn text(&mut self, max: usize) -> String {
        const PALETTE: [char; 16] =
            ['a', 'Z', '0', ' ', '"', '\\', '\n', '\r', '\t', '\u{0}', '\u{1b}', 'é', '😀', '\u{2028}', '/', '{'];
        (0..self.below(max + 1)).map(|_| PALETTE[self.below(PALETTE.len())]).collect()
    }

    pub fn value(&mut self, depth: usize) -> Value {
        match self.below(if depth == 0 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => Value::Bool(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64 >> 12),
            3 => json!((self.next() % 1000) as f64 / 8.0),
            4 => Value::String(self.text(12)),
            5 => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
            _ => self.object(depth - 1),
        }
    }

    pub fn object(&mut self, depth: usize) -> Value {
        Value::Object((0..self.below(4)).map(|_| (self.text(6), self.value(depth))).collect())
    }
}

/// Frames cut anywhere by the reader come out whole.
fn framed(bytes: &[u8], g: &mut Gen) -> Vec<Vec<u8>> {
    let mut reader = frame::FrameReader::default();
    let mut frames = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (now, later) = rest.split_at(1 + g.below(rest.len()));
        reader.push(now, |f| frames.push(f.as_bytes().to_vec())).unwrap();
        rest = later;
    }
    reader.finish(|f| frames.push(f.as_bytes().to_vec())).unwrap();
    frames
}

#[test]
fn what_nod_encodes_decodes_to_the_same_message_however_the_bytes_are_cut() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    for round in 0..500u64 {
        let (method, params, result) = (g.text(10), g.object(3), g.value(3));
        let id = json!(format!("s-{round}"));
        let mut bytes = encode_request(round, &method, Some(&params.to_string()));
        bytes.extend(encode_notification(&method, Some(&params)));
        bytes.extend(encode_response(&id, &Ok(result.clone())));
        let frames = framed(&bytes, &mut g);
        assert_eq!(frames.len(), 3, "three frames in round {round}");
        let mut decoded = frames.iter().map(|f| decode(f, false).unwrap().remove(0));
        let request = Message::Request { id: json!(round), method: method.clone(), params: params.clone() };
        assert_eq!(decoded.next(), Some(request), "round {round}");
        assert_eq!(decoded.next(), Some(Message::Notification { method, params }), "round {round}");
        assert_eq!(decoded.next(), Some(Message::Response { id: Some(id), result: Ok(result) }), "round {round}");
    }
}

fn one(text: &str) -> Message {
    decode(text.as_bytes(), false).unwrap().remove(0)
}

#[test]
fn server_request_ids_keep_their_type() {
    let msg = one(r#"{"jsonrpc":"2.0","id":"7","method":"ping"}"#);
    assert_eq!(msg, Message::Request { id: json!("7"), method: "ping".into(), params: Value::Null });
    let reply = encode_response(&json!("7"), &Ok(json!({})));
    assert_eq!(reply, b"{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{}}\n");
    let reply = encode_response(&json!(7), &Ok(json!({})));
    assert_eq!(reply, b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n");
}

#[test]
fn error_response_without_id_is_accepted() {
    let msg = one(r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}"#);
    let Message::Response { id: None, result: Err(error) } = msg else { panic!("{msg:?}") };
    assert_eq!(error.code, PARSE_ERROR);
}

#[test]
fn envelopes_are_checked() {
    for bad in [
        r#"{"id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":{},"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"x"}}"#,
        r#"{"jsonrpc":"2.0","method":7}"#,
        r#"{"jsonrpc":"2.0","result":{}}"#,
        r#"[1]"#,
    ] {
        assert!(decode(bad.as_bytes(), false).is_err(), "{bad}");
    }
    assert_eq!(decode(b"hello", false), Err(DecodeError::NotJson));
}

#[test]
fn an_object_read_into_its_envelope_is_the_message_its_parsed_value_is() {
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"a":[1,{"b":null}]},"extra":{"x":[1,2]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m","data":null}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":null}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"m","params":null}"#,
        r#"{"jsonrpc":"2.0","method":"n","params":[1]}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":null}"#,
        r#"{"jsonrpc":2,"id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"result":{}}"#,
        r#"  {"id":"x","jsonrpc":"2.0","method":"ping"}"#,
    ] {
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(decode(text.as_bytes(), false), from_value(value).map(|m| vec![m]), "{text}");
    }
    // Not an object: told apart from text that is not JSON.
    assert_eq!(decode(b"42", false), Err(DecodeError::Invalid("not an object")));
    assert_eq!(decode(b"{\"jsonrpc\":", false), Err(DecodeError::NotJson));
}

#[test]
fn an_answer_handed_over_as_text_is_the_answer_decode_reads() {
    // Taken as text: the span is the result decode reads, the id the one it routes.
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"a":[1,{"b":"\u00e9\n"}]}}"#,
        r#"  {"result":[],"id":18446744073709551615,"jsonrpc":"2.0","extra":{"x":[1,2]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{},"result":7}"#,
        r#"{"jsonrpc":"2.0","id":4,"params":{"p":1},"result":"x"}"#,
        r#"{"jsonrpc":"2.0","id":5,"result":null}"#,
    ] {
        let (id, span) = answer_span(text).unwrap_or_else(|| panic!("not taken as text: {text}"));
        let read: Value = serde_json::from_str(&text[span]).unwrap();
        match decode(text.as_bytes(), false).unwrap().as_slice() {
            [Message::Response { id: Some(want), result: Ok(result) }] => {
                assert_eq!(Some(id), want.as_u64(), "{text}");
                assert_eq!(&read, result, "{text}");
            }
            other => panic!("{text}: decode read {other:?}"),
        }
    }
    // Everything else takes decode's road: an error member (null too), an error, a
    // request, an id that is not a plain integer, a bad jsonrpc, trailing text, bad JSON.
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{}}"#,
        r#"{"jsonrpc":"2.0","id":-1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1.0,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}"#,
        r#"{"jsonrpc":"2.0","result":{}}"#,
        r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2\u002e0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}} x"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"a":"\x"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":[1,]}"#,
        r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
    ] {
        assert_eq!(answer_span(text), None, "{text}");
    }
}

#[test]
fn malformed_requests_keep_their_id() {
    for (text, why) in [
        (r#"{"jsonrpc":"2.0","id":5,"method":"x","params":7}"#, "params is not an object"),
        (r#"{"jsonrpc":"2.0","id":"a","method":"x","params":[1]}"#, "params is not an object"),
        (r#"{"jsonrpc":"2.0","id":6,"method":3}"#, "method is not a string"),
        (r#"{"jsonrpc":"2.0","id":7}"#, "a request without a method"),
    ] {
        match one(text) {
            Message::Invalid { why: got, .. } => assert_eq!(got, why, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn batches_only_when_allowed() {
    let batch =
        br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"notifications/message","params":{}}]"#;
    assert_eq!(decode(batch, false), Err(DecodeError::UnexpectedBatch));
    assert_eq!(decode(batch, true).unwrap().len(), 2);
}

#[test]
fn a_notification_without_params_round_trips() {
    // The reproducer from tests/fuzz (message target): no params must not become null.
    let input = br#"[{"jsonrpc":"2.0","method":"notifications/pr@gress","'arams":{"progressToken":1,"progress":0.5}}]"#;
    for msg in decode(input, true).unwrap() {
        let Message::Notification { method, params } = msg else { panic!() };
        let line = encode_notification(&method, Some(&params));
        assert!(decode(&line[..line.len() - 1], false).is_ok(), "{}", String::from_utf8_lossy(&line));
    }
}

#[test]
fn requests_are_compact_single_lines() {
    let out = encode_request(3, "tools/call", Some(r#"{"name":"a\nb"}"#));
    assert_eq!(out, b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"a\\nb\"}}\n");
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(encode_request(4, "ping", None), b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\n");
    // A method name that needs escapes is written as JSON writes strings.
    for method in ["a\"b", "a\\b", "a b", "\u{e9}", "tab\t"] {
        let out = encode_request(u64::MAX, method, None);
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["method"], method);
        assert_eq!(value["id"], u64::MAX);
    }
}
