//! Just enough URL handling for nod: splitting off the origin, resolving a reference on the
//! same origin, and the hosts that count as loopback. URLs are kept verbatim otherwise.

/// `scheme://authority` and the rest (path, query), for an absolute URL.
pub fn split(url: &str) -> Option<(&str, &str)> {
    let scheme_end = scheme_len(url)?;
    let after = scheme_end + 3;
    let path_start = url[after..].find(['/', '?', '#']).map_or(url.len(), |i| after + i);
    Some((&url[..path_start], &url[path_start..]))
}

/// The length of the scheme when `text` starts with `scheme://`.
fn scheme_len(text: &str) -> Option<usize> {
    let end = text.find("://")?;
    let scheme = &text[..end];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .then_some(end)
}

/// Whether `text` is an absolute URL (it starts with a scheme and `://`); `://` inside a
/// query does not count.
pub fn is_absolute(text: &str) -> bool {
    scheme_len(text).is_some()
}

/// Resolves `reference` against `base`; `None` unless the result is on `base`'s origin.
pub fn resolve_same_origin(base: &str, reference: &str) -> Option<String> {
    let (origin, rest) = split(base)?;
    let resolved = if is_absolute(reference) {
        reference.to_string()
    } else if reference.starts_with("//") {
        return None;
    } else if reference.starts_with('/') {
        format!("{origin}{reference}")
    } else if reference.starts_with('?') {
        let path = rest.split(['?', '#']).next().unwrap_or("");
        format!("{origin}{path}{reference}")
    } else {
        let path = rest.split(['?', '#']).next().unwrap_or("");
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!("{origin}{dir}{reference}")
    };
    let (resolved_origin, _) = split(&resolved)?;
    resolved_origin.eq_ignore_ascii_case(origin).then_some(resolved)
}

/// The host of an absolute URL, brackets kept for IPv6 literals, lowercased.
pub fn host(url: &str) -> Option<String> {
    let (origin, _) = split(url)?;
    let authority = &origin[scheme_len(origin)? + 3..];
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if authority.starts_with('[') {
        &authority[..=authority.find(']')?]
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The scheme of an absolute URL, lowercased.
pub fn scheme(url: &str) -> Option<String> {
    scheme_len(url).map(|end| url[..end].to_ascii_lowercase())
}

/// Loopback hosts: where plain http is acceptable.
pub fn is_loopback(host: &str) -> bool {
    matches!(host, "localhost" | "[::1]") || host.starts_with("127.") && host.split('.').count() == 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_origin_resolution() {
        let base = "http://127.0.0.1:3000/sse";
        assert_eq!(
            resolve_same_origin(base, "/message?sessionId=1").as_deref(),
            Some("http://127.0.0.1:3000/message?sessionId=1")
        );
        assert_eq!(resolve_same_origin("http://h:1/a/sse", "msg").as_deref(), Some("http://h:1/a/msg"));
        assert_eq!(resolve_same_origin(base, "http://127.0.0.1:3000/m").as_deref(), Some("http://127.0.0.1:3000/m"));
        assert_eq!(resolve_same_origin(base, "http://evil.example/m"), None);
        assert_eq!(resolve_same_origin(base, "http://127.0.0.1:30001/m"), None);
        assert_eq!(resolve_same_origin(base, "//evil.example/m"), None);
        // `://` in a query is not a scheme.
        assert_eq!(
            resolve_same_origin(base, "/message?next=http://x").as_deref(),
            Some("http://127.0.0.1:3000/message?next=http://x")
        );
        assert_eq!(resolve_same_origin("http://h:1/mcp?a=1", "?b=2").as_deref(), Some("http://h:1/mcp?b=2"));
    }

    #[test]
    fn hosts() {
        assert_eq!(host("https://User@Example.com:8443/x").as_deref(), Some("example.com"));
        assert_eq!(host("http://[::1]:3000/mcp").as_deref(), Some("[::1]"));
        assert!(is_loopback("127.0.0.1") && is_loopback("localhost") && is_loopback("[::1]"));
        assert!(!is_loopback("127.example.com") && !is_loopback("10.0.0.1"));
        assert!(is_absolute("https://a/b") && !is_absolute("/a?u=http://b"));
    }
}
