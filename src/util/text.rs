//! Text from outside, made fit to show: secrets redacted (`Redactor`, `redact`, and URLs for
//! health output), and server text made one line or terminal-safe, so that nothing it holds
//! moves the cursor, rewrites the screen or reorders what a terminal shows.

use std::sync::{Arc, PoisonError, RwLock};

/// The secret values nod must never print (environment and header values, tokens,
/// configured server URLs), and the redaction of text that might contain them. A value, shared by clones: the
/// logger and the front end hold the same one, and a reload adds to it.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<RwLock<Vec<String>>>,
}

/// Never shows what it holds: only how many.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.secrets.read().unwrap_or_else(PoisonError::into_inner);
        write!(f, "Redactor({} secrets)", known.len())
    }
}

impl Redactor {
    /// Remembers more secrets. Longer ones are replaced first.
    pub fn add(&self, secrets: impl IntoIterator<Item = String>) {
        let mut known = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
        for secret in secrets {
            if secret.len() >= 4 && !known.contains(&secret) {
                known.push(secret);
            }
        }
        known.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `redact` with the remembered secrets: for every error and log line nod prints.
    pub fn redact(&self, text: &str) -> String {
        self.redact_cow(text).into_owned()
    }

    /// `redact`, borrowing `text` when it holds no secret.
    pub fn redact_cow<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let known = self.secrets.read().unwrap_or_else(PoisonError::into_inner);
        if known.iter().any(|secret| secret.len() >= 4 && text.contains(secret.as_str())) {
            std::borrow::Cow::Owned(redact(text, &known))
        } else {
            std::borrow::Cow::Borrowed(text)
        }
    }
}

/// Replaces every secret in `text` with `[redacted]`; the rest stays as it is (a resource
/// URI, a server's own message). Secrets shorter than four bytes are left alone: they would
/// redact ordinary words.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for secret in secrets {
        if secret.len() >= 4 && out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "[redacted]");
        }
    }
    out
}

/// Replaces every URL in `text` with `<url>`: for health output, which shows no URL at all.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let before = &rest[..pos];
        // The scheme starts after the last character that cannot be part of one (which may
        // be several bytes long: found by the message fuzz target).
        let scheme_start = before
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        if scheme_start == pos {
            out.push_str(&rest[..pos + 3]);
            rest = &rest[pos + 3..];
            continue;
        }
        out.push_str(&before[..scheme_start]);
        out.push_str("<url>");
        let after = &rest[pos + 3..];
        let mut end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')' | ']'))
            .unwrap_or(after.len());
        // Punctuation that ends a sentence is not part of the URL.
        while end > 0 && matches!(after.as_bytes()[end - 1], b',' | b'.' | b';' | b':' | b'!' | b'?') {
            end -= 1;
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Makes server text safe to print on a terminal: control characters other than newline and
/// tab become U+FFFD, so a server cannot move the cursor or rewrite the screen (LOG-2).
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if plain_ascii(text) || !text.chars().any(is_unsafe_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(text.chars().map(|c| if is_unsafe_control(c) { '\u{FFFD}' } else { c }).collect())
}

/// Printable ASCII only: nothing for `one_line` or `terminal_safe` to change (the common
/// case, checked before any character is decoded). Sixteen bytes at a time without an early
/// exit inside a block, which the compiler turns into vector compares: a byte-at-a-time
/// check was a seventh of the command thread's work in a 1,000-tool listing.
fn plain_ascii(text: &str) -> bool {
    fn printable(b: u8) -> bool {
        b.wrapping_sub(0x20) < 0x5f
    }
    let mut blocks = text.as_bytes().chunks_exact(16);
    blocks.all(|block| block.iter().fold(true, |all, &b| all & printable(b)))
        && blocks.remainder().iter().all(|&b| printable(b))
}

/// Characters that move the cursor, rewrite the screen or reorder text on a terminal: C0
/// and C1 controls other than newline and tab, and bidi overrides.
pub(crate) fn is_unsafe_control(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// One line of server text for a log or an error: control characters and newlines become
/// spaces, and bidirectional controls (which reorder what a terminal shows) U+FFFD.
pub fn one_line(text: &str) -> String {
    one_line_cow(text).into_owned()
}

/// `one_line`, borrowing `text` when there is nothing to change.
pub fn one_line_cow(text: &str) -> std::borrow::Cow<'_, str> {
    if plain_ascii(text) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                ' '
            } else if is_unsafe_control(c) {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect::<String>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_cow_borrows_text_without_secrets() {
        let redactor = Redactor::default();
        redactor.add(["canary-secret-1234".to_string()]);
        assert!(matches!(redactor.redact_cow("nothing here"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(redactor.redact_cow("a canary-secret-1234 b"), "a [redacted] b");
        assert_eq!(redactor.redact("a canary-secret-1234 b"), "a [redacted] b");
    }

    #[test]
    fn redact_hides_secrets_and_keeps_the_rest() {
        let secrets = vec!["s3cr3t-canary".to_string(), "https://user:pw@example.com/mcp?x=1".to_string()];
        let text = "failed: token s3cr3t-canary at https://user:pw@example.com/mcp?x=1 (retry)";
        assert_eq!(redact(text, &secrets), "failed: token [redacted] at [redacted] (retry)");
        assert_eq!(redact("Resource demo://nope not found", &secrets), "Resource demo://nope not found");
        assert_eq!(redact("add \"url\": \"https://...\"", &secrets), "add \"url\": \"https://...\"");
    }

    #[test]
    fn redact_urls_hides_every_url() {
        assert_eq!(redact_urls("at https://user:pw@example.com/mcp?x=1 (retry)"), "at <url> (retry)");
        assert_eq!(redact_urls("no scheme ://here"), "no scheme ://here");
        assert_eq!(redact_urls("issuer https://a/b, not https://c."), "issuer <url>, not <url>.");
        // The reproducer from tests/fuzz (message target): a multi-byte character before "://".
        assert_eq!(redact_urls("{\"&[{\u{595}so://x"), "{\"&[{\u{595}<url>");
    }

    #[test]
    fn one_line_neutralises_controls_and_bidi() {
        assert_eq!(one_line("a\nb\x1b[2J\u{202E}c"), "a b [2J\u{FFFD}c");
        assert_eq!(one_line("plain: ~{}[]"), "plain: ~{}[]");
        assert_eq!(one_line("a\x7fb\tc"), "a b c");
        assert_eq!(terminal_safe("a\x7fb\tc\n"), "a\u{FFFD}b\tc\n");
    }

    #[test]
    fn one_line_finds_a_control_at_every_place_of_a_long_line() {
        // In a block of sixteen, at a block's edge and in the tail after the last block.
        for len in [1, 15, 16, 17, 40] {
            for at in 0..len {
                for bad in ['\x1f', '\x7f', '\u{85}', '\u{202E}'] {
                    let mut text: String = (0..len).map(|i| char::from(b' ' + (i % 95) as u8)).collect();
                    text.replace_range(at..at + 1, &bad.to_string());
                    assert!(!plain_ascii(&text), "{bad:?} at {at} of {len}");
                    assert!(!one_line(&text).contains(bad), "{bad:?} at {at} of {len}");
                }
            }
            let plain: String = (0..len).map(|i| char::from(b' ' + (i % 95) as u8)).collect();
            assert!(plain_ascii(&plain));
            assert!(matches!(one_line_cow(&plain), std::borrow::Cow::Borrowed(_)));
        }
    }

    #[test]
    fn terminal_safe_strips_escapes() {
        assert_eq!(terminal_safe("a\x1b[2Jb\nc\td"), "a\u{FFFD}[2Jb\nc\td");
    }
}
