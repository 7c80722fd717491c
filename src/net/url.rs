//! Just enough URL handling for nod: splitting off the origin, resolving a reference on the
//! same origin, the hosts that count as loopback, and the rule for URLs that OAuth may
//! reach. URLs are kept verbatim otherwise.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `scheme://authority` and the rest (path, query), for an absolute URL. The authority ends
/// where a browser ends it (the WHATWG URL standard): at `/`, `?`, `#`, or `\` (which browsers
/// read as `/` in http and https URLs), so `https://evil.example\@bank.example/` is
/// evil.example here as in the browser that would open it.
pub fn split(url: &str) -> Option<(&str, &str)> {
    let scheme_end = scheme_len(url)?;
    let after = scheme_end + 3;
    let path_start = url[after..].find(['/', '?', '#', '\\']).map_or(url.len(), |i| after + i);
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

/// Loopback hosts, as `host` gives them: where plain http is acceptable. `localhost`, or an
/// address literal in 127.0.0.0/8 or `[::1]` (IPv4 in any form the resolver accepts, such
/// as `127.1`); a name such as `127.0.0.1.example.com` is not one.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost" || ip_literal(host).is_some_and(|ip| class(ip) == Class::Loopback)
}

/// Why a URL may not be used for OAuth: discovery, registration, authorization, tokens,
/// revocation, or a client metadata document. Shown after "refusing the <what> ...: ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthUrlError {
    /// Not an absolute URL with a host.
    NotAbsolute,
    /// Whitespace or control characters anywhere in it.
    Unprintable,
    /// `user:password@` in the authority.
    Credentials,
    /// A backslash, which browsers and other URL parsers read differently.
    Backslash,
    /// A scheme other than https or http.
    Scheme(String),
    /// Plain http to a host that is not loopback.
    PlainHttp,
    /// A link-local address (169.254.0.0/16, fe80::/10), where cloud metadata services live.
    LinkLocal,
    /// The unspecified address (0.0.0.0/8, `[::]`), which reaches this machine.
    Unspecified,
}

/// The rule, as the messages and the help state it.
pub const OAUTH_URL_RULE: &str = "OAuth URLs must be https, or http to a loopback host (127.0.0.0/8, localhost, [::1])";

impl std::fmt::Display for OAuthUrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OAuthUrlError::NotAbsolute => write!(f, "it is not an absolute URL with a host; {OAUTH_URL_RULE}"),
            OAuthUrlError::Unprintable => f.write_str("it contains whitespace or control characters"),
            OAuthUrlError::Credentials => f.write_str("it carries credentials (user@host)"),
            OAuthUrlError::Backslash => f.write_str("it contains a backslash, which URL parsers read differently"),
            OAuthUrlError::Scheme(scheme) => write!(f, "it uses the scheme {scheme}; {OAUTH_URL_RULE}"),
            OAuthUrlError::PlainHttp => {
                write!(f, "it is plain http to a host that is not loopback; {OAUTH_URL_RULE}")
            }
            OAuthUrlError::LinkLocal => f.write_str(
                "it points to a link-local address (169.254.0.0/16, fe80::/10), where nod never sends OAuth requests",
            ),
            OAuthUrlError::Unspecified => f.write_str(
                "it points to the unspecified address (0.0.0.0, [::]), where nod never sends OAuth requests",
            ),
        }
    }
}

impl std::error::Error for OAuthUrlError {}

/// The rule for every URL that OAuth reaches, checked before each request: https, or http
/// to a loopback host; never a link-local or unspecified address, whatever the scheme; no
/// credentials, whitespace or control characters. Host names are not resolved: the rule is
/// about what the URL says.
pub fn check_oauth_url(url: &str) -> Result<(), OAuthUrlError> {
    if url.chars().any(|c| c.is_whitespace() || crate::util::is_unsafe_control(c)) {
        return Err(OAuthUrlError::Unprintable);
    }
    if url.contains('\\') {
        return Err(OAuthUrlError::Backslash);
    }
    let (origin, _) = split(url).ok_or(OAuthUrlError::NotAbsolute)?;
    let scheme = scheme(url).ok_or(OAuthUrlError::NotAbsolute)?;
    if scheme != "https" && scheme != "http" {
        return Err(OAuthUrlError::Scheme(scheme));
    }
    if origin.contains('@') {
        return Err(OAuthUrlError::Credentials);
    }
    let host = host(url).ok_or(OAuthUrlError::NotAbsolute)?;
    match ip_literal(&host).map(class) {
        Some(Class::Unspecified) => return Err(OAuthUrlError::Unspecified),
        Some(Class::LinkLocal) => return Err(OAuthUrlError::LinkLocal),
        _ => {}
    }
    if scheme == "http" && !is_loopback(&host) {
        return Err(OAuthUrlError::PlainHttp);
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Loopback,
    LinkLocal,
    Unspecified,
    Other,
}

fn class(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(ip) => match ip.octets() {
            [0, ..] => Class::Unspecified,
            [127, ..] => Class::Loopback,
            [169, 254, ..] => Class::LinkLocal,
            _ => Class::Other,
        },
        IpAddr::V6(ip) if ip.is_unspecified() => Class::Unspecified,
        IpAddr::V6(ip) if ip.is_loopback() => Class::Loopback,
        IpAddr::V6(ip) if ip.segments()[0] & 0xffc0 == 0xfe80 => Class::LinkLocal,
        IpAddr::V6(ip) => ip.to_ipv4_mapped().map_or(Class::Other, |v4| class(IpAddr::V4(v4))),
    }
}

/// The address a host names literally: `[v6]` (a zone id ignored), or IPv4 in every form
/// that the system resolver accepts (`inet_aton`: one to four parts, decimal, octal with a
/// leading 0, hex with 0x, as in `127.1` or `2130706433`), a trailing dot allowed.
fn ip_literal(host: &str) -> Option<IpAddr> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        let address = inner.split('%').next().unwrap_or(inner);
        return address.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<u64> = host.split('.').map(number).collect::<Option<_>>()?;
    let (last, leading) = parts.split_last()?;
    if leading.len() > 3 || leading.iter().any(|&p| p > 255) || *last >= 1u64 << (8 * (4 - leading.len())) {
        return None;
    }
    let value = leading.iter().enumerate().fold(*last, |acc, (i, &p)| acc | p << (24 - 8 * i));
    Some(IpAddr::V4(Ipv4Addr::from(u32::try_from(value).ok()?)))
}

/// One part of an IPv4 literal: decimal, octal (leading 0) or hex (0x).
fn number(part: &str) -> Option<u64> {
    let (digits, radix) = match part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None if part.len() > 1 && part.starts_with('0') => (&part[1..], 8),
        None => (part, 10),
    };
    if digits.is_empty() && radix == 8 || !digits.is_empty() && !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    if digits.is_empty() {
        return (radix == 16).then_some(0);
    }
    u64::from_str_radix(digits, radix).ok().filter(|&n| n <= u64::from(u32::MAX))
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
        // Four labels starting with 127 are a name, not an address.
        assert!(!is_loopback("127.evil.example.com") && !is_loopback("127.0.0.1.example.com"));
        assert!(is_loopback("127.1") && is_loopback("2130706433") && is_loopback("0x7f.0.0.1"));
        assert!(is_loopback("[::ffff:127.0.0.1]") && is_loopback("127.0.0.1."));
        assert!(!is_loopback("[::2]") && !is_loopback("128.0.0.1") && !is_loopback("localhost.example"));
        assert!(is_absolute("https://a/b") && !is_absolute("/a?u=http://b"));
        // As a browser reads it: the backslash ends the authority.
        assert_eq!(host("https://evil.example\\@bank.example/login").as_deref(), Some("evil.example"));
        assert_eq!(check_oauth_url("https://evil.example\\@bank.example/"), Err(OAuthUrlError::Backslash));
    }

    #[test]
    fn oauth_url_rule() {
        use OAuthUrlError::*;
        let ok = [
            "https://as.example.com/token",
            "https://10.1.2.3/token",
            "http://127.0.0.1:8080/token",
            "http://127.0.0.2:1/authorize?x=1",
            "http://localhost:3000/.well-known/oauth-authorization-server",
            "http://[::1]:9/token",
            "HTTPS://AS.EXAMPLE.COM/",
        ];
        for url in ok {
            assert_eq!(check_oauth_url(url), Ok(()), "{url}");
        }
        let refused = [
            ("http://example.invalid:1", PlainHttp),
            ("http://10.1.2.3:1/token", PlainHttp),
            ("http://127.evil.example.com/token", PlainHttp),
            ("http://[2001:db8::1]/token", PlainHttp),
            ("http://169.254.169.254/latest/meta-data", LinkLocal),
            ("https://169.254.169.254/", LinkLocal),
            ("https://2852039166/", LinkLocal),
            ("https://0xa9.0xfe.0xa9.0xfe/", LinkLocal),
            ("https://[fe80::1%25eth0]:8443/", LinkLocal),
            ("https://[febf::1]/", LinkLocal),
            ("https://[::ffff:169.254.1.1]/", LinkLocal),
            ("http://0.0.0.0:8080/token", Unspecified),
            ("https://0/", Unspecified),
            ("https://[::]/", Unspecified),
            ("file:///etc/passwd", Scheme("file".into())),
            ("javascript:alert(1)", NotAbsolute),
            ("ftp://as.example.com/token", Scheme("ftp".into())),
            ("https://user:pw@as.example.com/token", Credentials),
            ("https://as.example.com/authorize\u{1b}]8;;x\u{7}", Unprintable),
            ("https://as.example.com/a b", Unprintable),
            ("https://as.example.com/\u{202e}", Unprintable),
            ("/token", NotAbsolute),
        ];
        for (url, why) in refused {
            assert_eq!(check_oauth_url(url), Err(why), "{url:?}");
        }
        assert!(PlainHttp.to_string().contains(OAUTH_URL_RULE));
    }
}
