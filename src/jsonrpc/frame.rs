//! Newline-delimited framing (MCP stdio, STDIO-2) with the 8 MiB cap that applies to every
//! frame in either direction.
//!
//! `FrameReader` is fed whatever bytes a non-blocking read returned and hands back complete
//! lines. It never buffers more than `MAX_FRAME` bytes of an unfinished line, so a server that
//! writes an endless line costs nod 8 MiB, not all of its memory. `Lines` frames a blocking
//! reader the same way (nod's own stdin as an ACP agent), and goes on after a bad line.

/// The largest frame nod sends or accepts, newline excluded.
pub const MAX_FRAME: usize = 8 * 1024 * 1024;

/// A reader's buffer larger than this is shrunk when it empties (one big result should not
/// keep its memory for the rest of the session).
const SHRINK_ABOVE: usize = 1024 * 1024;

/// Where the first newline of `bytes` is. On x86-64 the scan is memchr's SSE2 one, which
/// every x86-64 CPU has: the crate's default picks AVX2 at run time, and finding out runs
/// `cpuid` a dozen times (std's feature detection), which a virtual machine traps at several
/// microseconds each, in every nod process for its first frame. A 1 MiB result measured no
/// slower with SSE2 (3.98/3.99 -> 3.77/3.93 ms for the whole command, detection included).
fn newline(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(finder) = memchr::arch::x86_64::sse2::memchr::One::new(b'\n') {
        return finder.find(bytes);
    }
    memchr::memchr(b'\n', bytes)
}

/// Why the byte stream cannot be framed any further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A line grew past `MAX_FRAME` bytes before its newline.
    TooLarge,
    /// A line is not valid UTF-8 (MSG-6).
    NotUtf8,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge => write!(f, "a message larger than the {} MiB frame limit", MAX_FRAME >> 20),
            FrameError::NotUtf8 => f.write_str("a message that is not valid UTF-8"),
        }
    }
}

#[derive(Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Bytes of `buf` already scanned for a newline, so a long line is scanned once.
    scanned: usize,
}

/// A complete line from `FrameReader::push_owning`: borrowed from the reader's buffer, or,
/// when longer than the reader was told (`own_above`), the buffer itself, handed over without
/// a copy (what came after the line stays with the reader, in a buffer of its own).
pub enum Line<'a> {
    Borrowed(&'a str),
    Owned(String),
}

impl Line<'_> {
    pub fn as_str(&self) -> &str {
        match self {
            Line::Borrowed(text) => text,
            Line::Owned(text) => text,
        }
    }
}

impl FrameReader {
    /// Appends `bytes` and calls `on_frame` for every complete, non-blank line (without its
    /// line ending), checked to be UTF-8. Stops at the first error; the reader is useless
    /// after one.
    pub fn push(&mut self, bytes: &[u8], mut on_frame: impl FnMut(&str)) -> Result<(), FrameError> {
        self.push_owning(bytes, usize::MAX, |line| on_frame(line.as_str()))
    }

    /// `push`, handing a line of more than `own_above` bytes over as the buffer it was read
    /// into (`Line::Owned`): a big answer leaves the reader without being copied, and its
    /// memory is not kept for the rest of the session.
    pub fn push_owning(
        &mut self,
        bytes: &[u8],
        own_above: usize,
        mut on_frame: impl FnMut(Line<'_>),
    ) -> Result<(), FrameError> {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) = newline(&self.buf[self.scanned..]) {
            let end = self.scanned + offset;
            let len = if end > start && self.buf[end - 1] == b'\r' { end - 1 - start } else { end - start };
            if len > MAX_FRAME {
                return Err(FrameError::TooLarge);
            }
            let blank = self.buf[start..start + len].iter().all(u8::is_ascii_whitespace);
            if !blank && len > own_above {
                let rest = self.buf[end + 1..].to_vec();
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.truncate(start + len);
                line.drain(..start);
                let Ok(line) = String::from_utf8(line) else {
                    return Err(FrameError::NotUtf8);
                };
                on_frame(Line::Owned(line));
                start = 0;
                self.scanned = 0;
                continue;
            }
            if !blank {
                let Ok(line) = std::str::from_utf8(&self.buf[start..start + len]) else {
                    return Err(FrameError::NotUtf8);
                };
                on_frame(Line::Borrowed(line));
            }
            start = end + 1;
            self.scanned = start;
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        // A big frame leaves a big buffer: give it back once the frame is out.
        if self.buf.capacity() > SHRINK_ABOVE && self.buf.len() < SHRINK_ABOVE / 4 {
            self.buf.shrink_to(SHRINK_ABOVE / 4);
        }
        if self.buf.len() > MAX_FRAME + 1 {
            return Err(FrameError::TooLarge);
        }
        Ok(())
    }

    /// At end of stream: a final line without a newline still counts.
    pub fn finish(&mut self, mut on_frame: impl FnMut(&str)) -> Result<(), FrameError> {
        self.finish_owning(usize::MAX, |line| on_frame(line.as_str()))
    }

    /// `finish`, handing a long last line over as `push_owning` does.
    pub fn finish_owning(&mut self, own_above: usize, on_frame: impl FnMut(Line<'_>)) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.push_owning(b"\n", own_above, on_frame)
    }

    /// Bytes held for an unfinished line.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// The frames of a blocking reader, by the same rules as `FrameReader`, except that a bad
/// line is one `Err` item and not the end: a line over the cap is read to its newline and
/// dropped (at most `MAX_FRAME` bytes of it held), so a peer that sent one oversized request
/// can still be answered and go on. Ends at end of stream or on a read error.
pub struct Lines<R> {
    input: R,
}

impl<R: std::io::BufRead> Lines<R> {
    pub fn new(input: R) -> Lines<R> {
        Lines { input }
    }
}

impl<R: std::io::BufRead> Iterator for Lines<R> {
    type Item = Result<Vec<u8>, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (mut line, too_large, ended) = self.read_line()?;
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if too_large || line.len() > MAX_FRAME {
                return Some(Err(FrameError::TooLarge));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                if ended {
                    return None;
                }
                continue;
            }
            if std::str::from_utf8(&line).is_err() {
                return Some(Err(FrameError::NotUtf8));
            }
            return Some(Ok(line));
        }
    }
}

impl<R: std::io::BufRead> Lines<R> {
    /// One line without its newline: (the bytes, whether it was over the cap and dropped,
    /// whether the stream ended instead of a newline). `None` at the end of the stream.
    fn read_line(&mut self) -> Option<(Vec<u8>, bool, bool)> {
        let mut line = Vec::new();
        let mut too_large = false;
        loop {
            let buffer = match self.input.fill_buf() {
                Ok(buffer) => buffer,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            if buffer.is_empty() {
                return (too_large || !line.is_empty()).then_some((line, too_large, true));
            }
            let newline = newline(buffer);
            let chunk = &buffer[..newline.unwrap_or(buffer.len())];
            // One byte of room for a `\r` before the newline, which is not part of the frame.
            if !too_large && line.len() + chunk.len() > MAX_FRAME + 1 {
                too_large = true;
                line = Vec::new();
            }
            if !too_large {
                line.extend_from_slice(chunk);
            }
            let used = newline.map_or(buffer.len(), |at| at + 1);
            self.input.consume(used);
            if newline.is_some() {
                return Some((line, too_large, false));
            }
        }
    }
}

/// Checks an outgoing frame (with its trailing newline) against the cap.
pub fn check_outgoing(frame: &[u8]) -> Result<(), FrameError> {
    if frame.len() > MAX_FRAME + 1 { Err(FrameError::TooLarge) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(reader: &mut FrameReader, chunks: &[&[u8]]) -> Result<Vec<String>, FrameError> {
        let mut out = Vec::new();
        for chunk in chunks {
            reader.push(chunk, |f| out.push(f.to_string()))?;
        }
        Ok(out)
    }

    #[test]
    fn splits_lines_across_chunks_and_strips_cr() {
        let mut reader = FrameReader::default();
        let got = frames(&mut reader, &[b"{\"a\"", b":1}\r\n\n  \n{\"b\":2}\n{\"c\""]).unwrap();
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":2}"]);
        assert_eq!(reader.buffered(), 4);
        let mut rest = Vec::new();
        reader.finish(|f| rest.push(f.as_bytes().to_vec())).unwrap();
        assert_eq!(rest, vec![b"{\"c\"".to_vec()]);
    }

    #[test]
    fn a_line_over_the_cap_is_an_error_even_without_newline() {
        let mut reader = FrameReader::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let mut result = Ok(());
        for _ in 0..9 {
            result = reader.push(&chunk, |_| {});
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(FrameError::TooLarge));
        assert!(reader.buffered() <= MAX_FRAME + 1024 * 1024 + 1);
    }

    #[test]
    fn exactly_the_cap_passes() {
        let mut reader = FrameReader::default();
        let mut line = vec![b'x'; MAX_FRAME];
        line.push(b'\n');
        let mut n = 0;
        reader.push(&line, |f| n += f.len()).unwrap();
        assert_eq!(n, MAX_FRAME);
        assert!(check_outgoing(&line).is_ok());
        line.insert(0, b'x');
        assert_eq!(check_outgoing(&line), Err(FrameError::TooLarge));
    }

    #[test]
    fn blocking_lines_go_on_after_an_oversized_or_invalid_line() {
        let mut input = vec![b'x'; MAX_FRAME + 10];
        input.extend_from_slice(b"\n{\"a\":1}\r\n \n\xff\n");
        let mut exact = vec![b'y'; MAX_FRAME];
        exact.extend_from_slice(b"\r\nlast");
        input.extend_from_slice(&exact);
        let got: Vec<Result<usize, FrameError>> =
            Lines::new(std::io::BufReader::with_capacity(4096, &input[..])).map(|l| l.map(|l| l.len())).collect();
        assert_eq!(
            got,
            [Err(FrameError::TooLarge), Ok(7), Err(FrameError::NotUtf8), Ok(MAX_FRAME), Ok(4)],
            "the oversized line is dropped, blank lines skipped, a last line without newline kept"
        );
        let over_at_end = vec![b'z'; MAX_FRAME + 2];
        let got: Vec<_> = Lines::new(&over_at_end[..]).collect();
        assert_eq!(got, [Err(FrameError::TooLarge)]);
    }

    /// Lines as `push_owning` hands them over: (text, whether it came as the buffer itself).
    fn owning(reader: &mut FrameReader, own_above: usize, chunks: &[&[u8]]) -> Result<Vec<(String, bool)>, FrameError> {
        let mut out = Vec::new();
        for chunk in chunks {
            reader.push_owning(chunk, own_above, |line| {
                let owned = matches!(line, Line::Owned(_));
                out.push((line.as_str().to_string(), owned));
            })?;
        }
        Ok(out)
    }

    #[test]
    fn a_long_line_leaves_with_the_buffer_and_what_follows_it_stays() {
        let long = "y".repeat(40);
        let mut reader = FrameReader::default();
        let input = format!("{{\"a\":1}}\n{long}\r\n  \n{{\"b\":2}}\n{long}\n{{\"c\"");
        let got = owning(&mut reader, 16, &[&input.as_bytes()[..30], &input.as_bytes()[30..]]).unwrap();
        let want = [("{\"a\":1}", false), (long.as_str(), true), ("{\"b\":2}", false), (long.as_str(), true)];
        assert_eq!(got, want.map(|(text, owned)| (text.to_string(), owned)), "the same lines as push, long ones owned");
        assert_eq!(reader.buffered(), 4, "the unfinished line is kept");
        let mut last = Vec::new();
        reader.finish_owning(2, |line| last.push((line.as_str().to_string(), matches!(line, Line::Owned(_))))).unwrap();
        assert_eq!(last, [("{\"c\"".to_string(), true)]);
        let mut plain = FrameReader::default();
        let same = frames(&mut plain, &[input.as_bytes()]).unwrap();
        assert_eq!(same, ["{\"a\":1}", long.as_str(), "{\"b\":2}", long.as_str()]);
    }

    #[test]
    fn a_long_line_is_checked_like_any_other() {
        let mut reader = FrameReader::default();
        assert_eq!(owning(&mut reader, 4, &[b"{\"a\":\"\xff\xfe\"}\n"]), Err(FrameError::NotUtf8));
        let mut reader = FrameReader::default();
        assert_eq!(owning(&mut reader, 4, &[b"          \t   \n{}\n"]).unwrap(), [("{}".to_string(), false)]);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut reader = FrameReader::default();
        assert_eq!(reader.push(b"{\"a\":\"\xff\xfe\"}\n", |_| {}), Err(FrameError::NotUtf8));
    }
}
