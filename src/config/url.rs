//! Just enough URL checking for server entries: an absolute `https` URL, or `http` to a
//! loopback host, with no credentials and no fragment. The URL itself is kept verbatim.

use crate::net::url::{host, is_loopback, scheme, split};

/// What is wrong with a server URL; shown after "the url ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlProblem {
    NotAbsolute,
    Scheme(String),
    Fragment,
    Whitespace,
    Credentials,
    NoHost,
    PlainHttp,
}

impl std::fmt::Display for UrlProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlProblem::NotAbsolute => f.write_str("is not an absolute URL"),
            UrlProblem::Scheme(scheme) => {
                write!(f, "uses the scheme {scheme:?}; only https (or http to localhost) is allowed")
            }
            UrlProblem::Fragment => f.write_str("has a fragment (#...), which MCP server URLs must not have"),
            UrlProblem::Whitespace => f.write_str("contains whitespace"),
            UrlProblem::Credentials => {
                f.write_str("contains credentials (user@host); use headers, header_env or oauth instead")
            }
            UrlProblem::NoHost => f.write_str("has no host"),
            UrlProblem::PlainHttp => f.write_str("uses plain http to a host that is not loopback; use https"),
        }
    }
}

pub fn check(url: &str) -> Result<(), UrlProblem> {
    let (origin, _) = split(url).ok_or(UrlProblem::NotAbsolute)?;
    let scheme = scheme(url).ok_or(UrlProblem::NotAbsolute)?;
    if scheme != "https" && scheme != "http" {
        return Err(UrlProblem::Scheme(scheme));
    }
    if url.contains('#') {
        return Err(UrlProblem::Fragment);
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlProblem::Whitespace);
    }
    if origin.contains('@') {
        return Err(UrlProblem::Credentials);
    }
    let host = host(url).ok_or(UrlProblem::NoHost)?;
    if scheme == "http" && !is_loopback(&host) {
        return Err(UrlProblem::PlainHttp);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{UrlProblem, check};

    #[test]
    fn urls() {
        assert!(check("https://mcp.example.com/mcp").is_ok());
        assert!(check("http://127.0.0.1:3000/mcp").is_ok());
        assert!(check("http://localhost:3000/mcp").is_ok());
        assert!(check("http://[::1]:3000/mcp").is_ok());
        assert_eq!(check("http://example.com/mcp"), Err(UrlProblem::PlainHttp));
        assert_eq!(check("https://u:p@example.com/"), Err(UrlProblem::Credentials));
        assert_eq!(check("https://example.com/#x"), Err(UrlProblem::Fragment));
        assert!(matches!(check("ftp://example.com/"), Err(UrlProblem::Scheme(_))));
        assert_eq!(check("example.com/mcp"), Err(UrlProblem::NotAbsolute));
    }
}
