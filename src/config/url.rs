//! Just enough URL checking for server entries: an absolute `https` URL, or `http` to a
//! loopback host, with no credentials and no fragment. The URL itself is kept verbatim.

pub fn check(url: &str) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("is not an absolute URL".into());
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err(format!("uses the scheme {scheme:?}; only https (or http to localhost) is allowed"));
    }
    if url.contains('#') {
        return Err("has a fragment (#...), which MCP server URLs must not have".into());
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("contains whitespace".into());
    }
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if authority.contains('@') {
        return Err("contains credentials (user@host); use headers, header_env or oauth instead".into());
    }
    let host = host_of(authority).ok_or("has no host")?;
    if scheme == "http" && !matches!(host, "localhost" | "127.0.0.1" | "[::1]") {
        return Err("uses plain http to a host that is not loopback; use https".into());
    }
    Ok(())
}

fn host_of(authority: &str) -> Option<&str> {
    let host = if authority.starts_with('[') {
        &authority[..=authority.find(']')?]
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn urls() {
        assert!(check("https://mcp.example.com/mcp").is_ok());
        assert!(check("http://127.0.0.1:3000/mcp").is_ok());
        assert!(check("http://[::1]:3000/mcp").is_ok());
        assert!(check("http://example.com/mcp").is_err());
        assert!(check("https://u:p@example.com/").is_err());
        assert!(check("https://example.com/#x").is_err());
        assert!(check("ftp://example.com/").is_err());
        assert!(check("example.com/mcp").is_err());
    }
}
