//! A Server-Sent Events parser, one line at a time, as the HTML standard's "event stream
//! interpretation" says: `event`, `data` (multi-line), `id`, `retry`, comments, CR, LF or CRLF
//! line ends, a leading BOM. An event with no `data` field is not dispatched (an empty `data:`
//! line is: its data is the empty string), but its `id` still becomes the last event id (MCP
//! servers send such "priming" events). Nothing grows past the
//! 8 MiB frame cap.

use crate::jsonrpc::frame::MAX_FRAME;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event` field; `message` when absent.
    pub event: String,
    pub data: String,
    /// The last event id after this event.
    pub id: Option<String>,
}

/// The stream broke the cap or the encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    TooLarge,
    NotUtf8,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::TooLarge => write!(f, "an event larger than the {} MiB frame limit", MAX_FRAME >> 20),
            SseError::NotUtf8 => f.write_str("an event stream that is not valid UTF-8"),
        }
    }
}

#[derive(Default)]
pub struct Parser {
    line: Vec<u8>,
    data: String,
    event: String,
    /// The last event id buffer and the id of the stream so far.
    pub last_id: Option<String>,
    /// The reconnection time the server asked for, in milliseconds.
    pub retry: Option<u64>,
    started: bool,
    after_cr: bool,
}

impl Parser {
    /// A parser for a resumed stream: it keeps the last event id and the retry delay.
    pub fn resumed(&self) -> Parser {
        Parser { last_id: self.last_id.clone(), retry: self.retry, ..Parser::default() }
    }

    /// Feeds bytes; calls `on_event` for each dispatched event.
    pub fn push(&mut self, bytes: &[u8], mut on_event: impl FnMut(Event)) -> Result<(), SseError> {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    self.after_cr = b == b'\r';
                    let mut line = std::mem::take(&mut self.line);
                    if !self.started {
                        // A UTF-8 byte order mark may open the stream.
                        self.started = true;
                        if line.starts_with(b"\xEF\xBB\xBF") {
                            line.drain(..3);
                        }
                    }
                    self.line_end(&line, &mut on_event)?;
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() >= MAX_FRAME {
                        return Err(SseError::TooLarge);
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(())
    }

    fn line_end(&mut self, line: &[u8], on_event: &mut impl FnMut(Event)) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(on_event);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.data.len() + value.len() + 1 > MAX_FRAME {
                    return Err(SseError::TooLarge);
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(Event)) {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        let event = if event.is_empty() { "message".to_string() } else { event };
        on_event(Event { event, data, id: self.last_id.clone() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events written as a server may write them (any of the three line ends, fields in
    /// any order, comments between) are read back the same however the bytes are cut.
    #[test]
    fn events_round_trip_through_any_cut() {
        let mut g = crate::jsonrpc::tests::Gen(0x2545_f491_4f6c_dd1d);
        let line_text = |g: &mut crate::jsonrpc::tests::Gen| -> String {
            // A field's value: no line end; one leading space would be eaten, so none.
            let t: String = g.text(12).chars().filter(|c| !matches!(c, '\n' | '\r' | '\u{0}')).collect();
            format!("x{t}")
        };
        for round in 0..300 {
            let ends = ["\n", "\r\n", "\r"];
            let mut stream = String::new();
            let mut expected = Vec::new();
            let mut last_id = None;
            for _ in 0..1 + g.below(5) {
                let end = ends[g.below(3)];
                let name = if g.below(2) == 0 { Some(format!("e{}", g.below(9))) } else { None };
                let lines: Vec<String> = (0..1 + g.below(3)).map(|_| line_text(&mut g)).collect();
                let id = if g.below(2) == 0 { Some(line_text(&mut g)) } else { None };
                if g.below(3) == 0 {
                    stream.push_str(&format!(": a comment{end}"));
                }
                if let Some(name) = &name {
                    stream.push_str(&format!("event: {name}{end}"));
                }
                for line in &lines {
                    stream.push_str(&format!("data: {line}{end}"));
                }
                if let Some(id) = &id {
                    stream.push_str(&format!("id: {id}{end}"));
                    last_id = Some(id.clone());
                }
                stream.push_str(end);
                expected.push(Event {
                    event: name.unwrap_or_else(|| "message".into()),
                    data: lines.join("\n"),
                    id: last_id.clone(),
                });
            }
            let bytes = stream.as_bytes();
            let mut parser = Parser::default();
            let mut events = Vec::new();
            let mut rest = bytes;
            while !rest.is_empty() {
                let (now, later) = rest.split_at(1 + g.below(rest.len()));
                parser.push(now, |e| events.push(e)).unwrap();
                rest = later;
            }
            assert_eq!(events, expected, "round {round}: {stream:?}");
        }
    }

    fn parse(chunks: &[&[u8]]) -> (Vec<Event>, Parser) {
        let mut parser = Parser::default();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.push(chunk, |e| events.push(e)).unwrap();
        }
        (events, parser)
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> Event {
        Event { event: event.into(), data: data.into(), id: id.map(str::to_string) }
    }

    #[test]
    fn fields_comments_and_multiline_data() {
        let (events, parser) =
            parse(&[b": comment\nevent: message\nid: 7\ndata: {\"a\":\ndata:1}\n\ndata:  two spaces\nretry: 500\n\n"]);
        assert_eq!(events, vec![ev("message", "{\"a\":\n1}", Some("7")), ev("message", " two spaces", Some("7"))]);
        assert_eq!(parser.retry, Some(500));
    }

    #[test]
    fn empty_data_is_dispatched_empty_and_records_the_id() {
        // A "priming" event: the standard dispatches it with empty data; MCP readers skip it.
        let (events, parser) = parse(&[b"id: prime-1\ndata:\n\n"]);
        assert_eq!(events, vec![ev("message", "", Some("prime-1"))]);
        assert_eq!(parser.last_id.as_deref(), Some("prime-1"));
        let (events, parser) = parse(&[b"id: p\nevent: x\n\n"]);
        assert!(events.is_empty());
        assert_eq!(parser.last_id.as_deref(), Some("p"));
    }

    #[test]
    fn every_line_ending_and_split_points() {
        let text = b"\xEF\xBB\xBFdata: a\r\n\r\ndata: b\r\rdata: c\n\n";
        let whole = parse(&[text]).0;
        assert_eq!(whole, vec![ev("message", "a", None), ev("message", "b", None), ev("message", "c", None)]);
        for split in 0..text.len() {
            assert_eq!(parse(&[&text[..split], &text[split..]]).0, whole, "split at {split}");
        }
    }

    #[test]
    fn bad_retry_and_ids_with_nul_are_ignored() {
        let (_, parser) = parse(&[b"retry: 10x\nid: a\0b\ndata: x\n\n"]);
        assert_eq!(parser.retry, None);
        assert_eq!(parser.last_id, None);
        let (events, _) = parse(&[b"data\n\n"]);
        assert_eq!(events, vec![ev("message", "", None)]);
    }

    #[test]
    fn an_endless_line_is_an_error() {
        let mut parser = Parser::default();
        let chunk = vec![b'x'; 1 << 20];
        let mut result = Ok(());
        for _ in 0..9 {
            result = parser.push(&chunk, |_| {});
        }
        assert_eq!(result, Err(SseError::TooLarge));
    }
}
