//! Text rendering of MCP content for a person: text as it is (made terminal-safe), and a
//! one-line summary for everything that is not text.

use serde_json::Value;

use crate::json::Member;
use crate::util::terminal_safe;

/// Renders content blocks (tool results, prompt messages). `terminal` makes server text safe
/// to show on a terminal.
pub fn blocks(content: &[Value], terminal: bool) -> String {
    let mut out = String::new();
    for block in content {
        let piece = block_text(block);
        out.push_str(&safe(&piece, terminal));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// `blocks`, written to `out` as it goes: a text block is written from the result itself,
/// never copied (a 7 MiB result costs no second 7 MiB).
pub fn write_blocks(content: &[Value], terminal: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for block in content {
        let text = match block.member("type").and_then(Value::as_str) {
            Some("text") => std::borrow::Cow::Borrowed(block.member("text").and_then(Value::as_str).unwrap_or("")),
            _ => std::borrow::Cow::Owned(block_text(block)),
        };
        write_text(&text, terminal, out)?;
    }
    Ok(())
}

/// One text block as `write_blocks` writes it: terminal-safe on a terminal, and ending in a
/// newline.
pub fn write_text(text: &str, terminal: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let shown = if terminal { terminal_safe(text) } else { std::borrow::Cow::Borrowed(text) };
    out.write_all(shown.as_bytes())?;
    if !shown.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A progress notification as a line shows it: `3/10 message` (the server's message
/// terminal-safe, on one line, at most 200 characters).
pub fn progress(p: &crate::dispatch::Progress) -> String {
    let number = |n: f64| if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n:.2}") };
    let amount = match p.total {
        Some(total) => format!("{}/{}", number(p.progress), number(total)),
        None => number(p.progress),
    };
    let message = p.message.as_deref().map(|m| {
        let line: String = crate::util::one_line(m).chars().take(200).collect();
        format!(" {}", terminal_safe(&line))
    });
    format!("{amount}{}", message.unwrap_or_default())
}

pub fn safe(text: &str, terminal: bool) -> String {
    if terminal { terminal_safe(text).into_owned() } else { text.to_string() }
}

fn block_text(block: &Value) -> String {
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match text("type") {
        "text" => text("text").to_string(),
        kind @ ("image" | "audio") => {
            format!("[{kind}: {}, {}]", or(text("mimeType"), "unknown type"), size(text("data")))
        }
        "resource_link" => {
            let name = text("name");
            if name.is_empty() {
                format!("[resource link: {}]", text("uri"))
            } else {
                format!("[resource link: {} ({name})]", text("uri"))
            }
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            match resource.get("text").and_then(Value::as_str) {
                Some(body) => body.to_string(),
                None => {
                    let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                    let mime = resource.get("mimeType").and_then(Value::as_str).unwrap_or("unknown type");
                    let blob = resource.get("blob").and_then(Value::as_str).unwrap_or("");
                    format!("[embedded resource {uri}: {mime}, {}]", size(blob))
                }
            }
        }
        other => format!("[{} content]", or(other, "untyped")),
    }
}

fn or<'a>(text: &'a str, fallback: &'a str) -> &'a str {
    if text.is_empty() { fallback } else { text }
}

/// The decoded size of base64 data, for a summary line.
pub fn size(base64: &str) -> String {
    let trimmed = base64.trim_end_matches('=');
    let bytes = trimmed.len() * 3 / 4;
    if bytes < 1024 { format!("{bytes} bytes") } else { format!("{:.1} KiB", bytes as f64 / 1024.0) }
}

/// The first line of a description, for listings.
pub fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

/// A listing row: the name, then the description's first line.
pub fn row(name: &str, about: &str) -> String {
    let about = first_line(about);
    let line = if about.is_empty() { name.to_string() } else { format!("{name}  {about}") };
    let mut out = String::with_capacity(line.len() + 1);
    push_row(&mut out, &line);
    out
}

/// Appends `line` to `out` as a listing row: on one line (which also makes it terminal-safe:
/// `one_line` leaves no control character), then a newline.
pub fn push_row(out: &mut String, line: &str) {
    out.push_str(&crate::util::one_line_cow(line));
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_block_kind() {
        let content = [
            json!({"type": "text", "text": "hello\u{1b}[31m"}),
            json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
            json!({"type": "resource_link", "uri": "file:///a", "name": "a"}),
            json!({"type": "resource", "resource": {"uri": "x://1", "text": "inner"}}),
            json!({"type": "resource", "resource": {"uri": "x://2", "blob": "AAAA", "mimeType": "application/zip"}}),
            json!({"type": "hologram"}),
        ];
        let text = blocks(&content, true);
        assert_eq!(
            text,
            "hello\u{FFFD}[31m\n[image: image/png, 3 bytes]\n[resource link: file:///a (a)]\ninner\n[embedded resource x://2: application/zip, 3 bytes]\n[hologram content]\n"
        );
    }
}
