//! How a remote entry authenticates. Its configured credentials (static `headers`,
//! `header_env` and `bearer_token_env`) are read from the environment when it connects, and
//! a 401 to them says which fields were refused, never their values. OAuth answers 401s for
//! an entry without configured credentials, and for one whose headers leave Authorization
//! free when it has an `oauth` object, a stored OAuth token, or `nod mcp auth` runs for it.

use std::sync::Arc;

use super::Access;
use crate::config::RemoteConfig;
use crate::oauth::{OAuth, discovery, store};
use crate::transport::{AuthFailure, Credentials};

/// Static headers, `header_env` values and the bearer token, read now from the environment.
pub(super) fn resolve_headers(remote: &RemoteConfig) -> anyhow::Result<Vec<(String, String)>> {
    let mut headers = remote.headers.clone();
    for (header, var) in &remote.header_env {
        match std::env::var(var) {
            Ok(value) if !value.is_empty() => headers.push((header.clone(), value)),
            _ => return Err(super::MissingVariable { field: header.clone(), variable: var.clone() }.into()),
        }
    }
    if let Some(var) = &remote.bearer_token_env {
        match std::env::var(var) {
            Ok(token) if !token.is_empty() => headers.push(("Authorization".into(), format!("Bearer {token}"))),
            _ => return Err(super::MissingVariable { field: "bearer_token_env".into(), variable: var.clone() }.into()),
        }
    }
    Ok(headers)
}

/// What answers the server's 401s and 403s: OAuth, or the configured credentials.
pub(super) fn credentials(name: &str, remote: &RemoteConfig, access: &Access) -> anyhow::Result<Arc<dyn Credentials>> {
    if uses_oauth(name, remote, access.fresh) {
        let oauth = OAuth::new(
            name,
            &remote.url,
            remote.oauth.as_ref(),
            access.browser.clone(),
            access.fresh,
            access.redactor.clone(),
        )?;
        return Ok(Arc::new(oauth));
    }
    Ok(Arc::new(Configured { fields: fields(remote).join(", "), oauth_possible: !authorization_taken(remote) }))
}

/// Whether OAuth answers the 401s of a remote entry: when it has no configured credentials;
/// or when its headers leave Authorization free and it has an `oauth` object, a stored
/// token, or `fresh` (`nod mcp auth` runs for it).
pub fn uses_oauth(name: &str, remote: &RemoteConfig, fresh: bool) -> bool {
    !authorization_taken(remote) && (fields(remote).is_empty() || remote.oauth.is_some() || fresh || has_token(name))
}

/// `bearer_token_env`, or an Authorization header among `headers` and `header_env`.
fn authorization_taken(remote: &RemoteConfig) -> bool {
    remote.bearer_token_env.is_some()
        || remote.headers.iter().chain(&remote.header_env).any(|(h, _)| h.eq_ignore_ascii_case("authorization"))
}

/// The configured credential fields of an entry, by name: `bearer_token_env VAR`,
/// `header_env Header (from VAR)`, `headers Header`.
fn fields(remote: &RemoteConfig) -> Vec<String> {
    let mut fields = Vec::new();
    if let Some(var) = &remote.bearer_token_env {
        fields.push(format!("bearer_token_env {var}"));
    }
    for (header, var) in &remote.header_env {
        fields.push(format!("header_env {header} (from {var})"));
    }
    for (header, _) in &remote.headers {
        fields.push(format!("headers {header}"));
    }
    fields
}

fn has_token(name: &str) -> bool {
    store::path().is_ok_and(|path| store::state(&path, name) == store::Stored::Valid)
}

/// The credentials of an entry that authenticates with configured headers.
struct Configured {
    fields: String,
    /// Authorization is free, so an `oauth` object would let OAuth answer 401s.
    oauth_possible: bool,
}

impl Credentials for Configured {
    fn authorization(&self) -> Option<String> {
        None
    }

    fn unauthorized(&self, challenge: &str) -> Result<(), AuthFailure> {
        let offers_oauth = self.oauth_possible && discovery::challenge(challenge).contains_key("resource_metadata");
        Err(Arc::new(Refused { fields: self.fields.clone(), offers_oauth }))
    }

    fn forbidden(&self, _challenge: &str) -> Result<bool, AuthFailure> {
        Ok(false)
    }
}

/// A 401 to the configured credentials.
#[derive(Debug)]
pub struct Refused {
    /// Which fields were sent, by name.
    pub fields: String,
    /// The challenge points to OAuth metadata, and the entry could use it.
    pub offers_oauth: bool,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the server refused the configured credentials ({}); check them", self.fields)?;
        if self.offers_oauth {
            f.write_str(", or add \"oauth\": {} to the entry to authorize with OAuth")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refused {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_fields_never_values() {
        let remote = RemoteConfig {
            url: "https://mcp.example/mcp".into(),
            headers: vec![("X-Static".into(), "value-1".into())],
            header_env: vec![("X-Env".into(), "VAR_2".into())],
            bearer_token_env: Some("VAR_3".into()),
            oauth: None,
        };
        let configured = Configured { fields: fields(&remote).join(", "), oauth_possible: false };
        let text = configured.unauthorized("Bearer resource_metadata=\"https://x\"").unwrap_err().to_string();
        assert_eq!(
            text,
            "the server refused the configured credentials (bearer_token_env VAR_3, header_env X-Env (from VAR_2), headers X-Static); check them"
        );
        let configured = Configured { fields: "headers X-Key".into(), oauth_possible: true };
        assert!(configured.unauthorized("Bearer").unwrap_err().to_string().ends_with("check them"));
        assert!(
            configured
                .unauthorized("Bearer resource_metadata=\"https://x\"")
                .unwrap_err()
                .to_string()
                .contains("\"oauth\": {}")
        );
        assert!(!configured.forbidden("Bearer error=\"insufficient_scope\"").unwrap());
    }
}
