//! Finding the authorization server: the `WWW-Authenticate` challenge, Protected Resource
//! Metadata (RFC 9728) and authorization server metadata (RFC 8414 and OpenID Connect
//! Discovery), in the order MCP 2025-11-25 gives, with issuer checks.

use std::collections::HashMap;

use anyhow::{anyhow, bail};
use serde_json::Value;

use super::http::shown;

/// The parameters of a Bearer challenge (`resource_metadata`, `scope`, `error`, ...).
pub fn challenge(header: &str) -> HashMap<String, String> {
    let mut params = HashMap::new();
    let rest = header.trim();
    let rest = rest.strip_prefix("Bearer").or_else(|| rest.strip_prefix("bearer")).unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i] == b',' || bytes[i].is_ascii_whitespace()) {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && bytes[i] != b',' && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = rest[start..i].to_ascii_lowercase();
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'=' {
            continue;
        }
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < bytes.len() && bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                value.push(bytes[i] as char);
                i += 1;
            }
            i += 1;
        } else {
            let start = i;
            while i < bytes.len() && bytes[i] != b',' && !bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            value.push_str(&rest[start..i]);
        }
        if !key.is_empty() {
            params.insert(key, value);
        }
    }
    params
}

/// Splits a URL into (origin, path) with no query or fragment; the path has no trailing `/`.
pub fn split(url: &str) -> Option<(String, String)> {
    let scheme_end = url.find("://")? + 3;
    let path_start = url[scheme_end..].find(['/', '?', '#']).map_or(url.len(), |i| scheme_end + i);
    let origin = url[..path_start].to_ascii_lowercase();
    let path = url[path_start..].split(['?', '#']).next().unwrap_or("").trim_end_matches('/').to_string();
    Some((origin, path))
}

/// The canonical resource URI of an MCP server: lowercase scheme and host, no fragment, no
/// trailing slash.
pub fn canonical(url: &str) -> String {
    match split(url) {
        Some((origin, path)) => {
            let query = url.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or("")).filter(|q| !q.is_empty());
            match query {
                Some(query) => format!("{origin}{path}?{query}"),
                None => format!("{origin}{path}"),
            }
        }
        None => url.to_string(),
    }
}

/// Whether protected resource metadata for `claimed` applies to `resource`: the same origin,
/// and the same path or a parent of it (metadata at the root names the origin). Metadata for
/// anything else must not be used (RFC 9728).
pub fn covers(claimed: &str, resource: &str) -> bool {
    let (Some((claimed_origin, claimed_path)), Some((origin, path))) = (split(claimed), split(resource)) else {
        return false;
    };
    claimed_origin == origin
        && (claimed_path.is_empty() || path == claimed_path || path.starts_with(&format!("{claimed_path}/")))
}

/// Protected resource metadata URLs to try, in order.
pub fn prm_urls(server_url: &str, from_header: Option<&str>) -> Vec<String> {
    if let Some(url) = from_header {
        return vec![url.to_string()];
    }
    let Some((origin, path)) = split(server_url) else { return Vec::new() };
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    urls
}

/// Authorization server metadata URLs for an issuer, in the spec's order. An issuer with a
/// path never has its root probed.
pub fn as_urls(issuer: &str) -> Vec<String> {
    let Some((origin, path)) = split(issuer) else { return Vec::new() };
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// What nod needs from authorization server metadata.
#[derive(Debug, Clone, Default)]
pub struct Server {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub revocation_endpoint: Option<String>,
    pub auth_methods: Vec<String>,
    pub cimd: bool,
    pub scopes_supported: Vec<String>,
    /// `authorization_response_iss_parameter_supported` (RFC 9207): a callback without `iss`
    /// is then refused.
    pub iss_in_response: bool,
}

pub fn parse_server(doc: &Value, expected_issuer: Option<&str>) -> anyhow::Result<Server> {
    let text = |key: &str| doc.get(key).and_then(Value::as_str).map(str::to_string);
    let list = |key: &str| -> Vec<String> {
        doc.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let issuer = text("issuer").ok_or_else(|| anyhow!("the authorization server metadata has no issuer"))?;
    // Exactly the string the metadata was fetched for: no trailing-slash, case or port
    // normalisation (RFC 8414 section 3.3).
    if let Some(expected) = expected_issuer
        && issuer != expected
    {
        bail!(
            "the authorization server metadata names another issuer than the one it was fetched for ({} instead of {}); refusing it",
            shown(&issuer),
            shown(expected)
        );
    }
    // PKCE with S256 is required; metadata that does not say so is refused (MCP 2025-11-25).
    if !list("code_challenge_methods_supported").iter().any(|m| m == "S256") {
        bail!(
            "the authorization server does not advertise PKCE with S256 (code_challenge_methods_supported); nod refuses to authorize without it"
        );
    }
    Ok(Server {
        issuer,
        authorization_endpoint: text("authorization_endpoint")
            .ok_or_else(|| anyhow!("the metadata has no authorization_endpoint"))?,
        token_endpoint: text("token_endpoint").ok_or_else(|| anyhow!("the metadata has no token_endpoint"))?,
        registration_endpoint: text("registration_endpoint"),
        revocation_endpoint: text("revocation_endpoint"),
        auth_methods: list("token_endpoint_auth_methods_supported"),
        cimd: doc.get("client_id_metadata_document_supported").and_then(Value::as_bool).unwrap_or(false),
        scopes_supported: list("scopes_supported"),
        iss_in_response: doc.get("authorization_response_iss_parameter_supported").and_then(Value::as_bool)
            == Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_quoted_and_bare() {
        let p = challenge(r#"Bearer resource_metadata="https://a/b", scope="x y", error=insufficient_scope"#);
        assert_eq!(p["resource_metadata"], "https://a/b");
        assert_eq!(p["scope"], "x y");
        assert_eq!(p["error"], "insufficient_scope");
    }

    #[test]
    fn discovery_orders() {
        assert_eq!(
            prm_urls("http://h:1/mcp", None),
            ["http://h:1/.well-known/oauth-protected-resource/mcp", "http://h:1/.well-known/oauth-protected-resource"]
        );
        assert_eq!(prm_urls("http://h:1/", None), ["http://h:1/.well-known/oauth-protected-resource"]);
        assert_eq!(
            as_urls("http://a:2/tenant1"),
            [
                "http://a:2/.well-known/oauth-authorization-server/tenant1",
                "http://a:2/.well-known/openid-configuration/tenant1",
                "http://a:2/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            as_urls("http://a:2"),
            ["http://a:2/.well-known/oauth-authorization-server", "http://a:2/.well-known/openid-configuration"]
        );
        assert_eq!(canonical("HTTP://Host:1/mcp/#x"), "http://host:1/mcp");
        assert!(covers("http://h:1", "http://h:1/mcp"));
        assert!(covers("http://h:1/mcp/", "http://h:1/mcp"));
        assert!(!covers("https://evil.example.com/mcp", "http://h:1/mcp"));
        assert!(!covers("http://h:1/other", "http://h:1/mcp"));
    }
}
