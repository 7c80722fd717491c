//! OAuth for remote servers (MCP 2025-11-25 authorization): discovery, client identity
//! (configured client, Client ID Metadata Document, or Dynamic Client Registration), the
//! authorization code flow with PKCE (S256 only), tokens refreshed before expiry and on 401,
//! and step-up on 403 `insufficient_scope`. Tokens live in `store`, never in any output.
//! Every URL that OAuth reaches keeps one rule (`http`): https, or http to a loopback host,
//! never a link-local or unspecified address; and every server string in a message passes
//! through `http::shown`, so none carries terminal escapes.
//!
//! The transport asks `OAuth` for the Authorization header and tells it about 401 and 403
//! answers through `transport::Credentials`. The browser side of a flow (showing or opening
//! the URL, a pasted redirect URL) belongs to the front end, which passes a `Browser` when a
//! person (or a configured `BROWSER` command) can complete it; without one, a 401 that a
//! refresh cannot answer fails with `AuthError::Required` ("run nod mcp auth <name>").

mod authorize;
pub(crate) mod discovery;
pub mod flow;
mod http;
mod register;
pub(crate) mod store;
mod token;

pub use register::logout;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use crossbeam_channel::Receiver;

use crate::config::OAuthConfig;
use crate::transport::{AuthFailure, Credentials};
use http::Http;
use store::Credential;

/// Refresh this long before a token expires.
const REFRESH_LEAD: u64 = 60;
/// Authorizations in one process (the first one and step-ups) before nod gives up on a
/// server that keeps asking for more scopes.
const MAX_AUTHORIZATIONS: u32 = 3;

/// The browser side of an authorization, supplied by the front end.
pub trait Browser: Send + Sync {
    /// Shows the authorization URL to the user, and opens it where that is wanted.
    fn show(&self, server: &str, url: &str) -> Result<(), AuthError>;
    /// Redirect URLs the user pastes (on a machine without a browser).
    fn pasted(&self) -> Option<Receiver<String>> {
        None
    }
}

/// Why a server's authorization failed. Each variant is shown after the server's name.
#[derive(Debug)]
#[non_exhaustive]
pub enum AuthError {
    /// The server needs an authorization that only `nod mcp auth` can run here.
    Required { server: String },
    /// The server wants more scopes than nod may ask for here.
    MoreScopes { server: String, scope: String },
    /// The server kept asking for more scopes after `count` authorizations.
    StepUpLimit { scope: String, count: u32 },
    /// Discovery, registration, the browser flow or the token endpoint failed.
    Flow(anyhow::Error),
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthError::Required { server } => {
                write!(f, "the server requires authorization; run nod mcp auth {server}")
            }
            AuthError::MoreScopes { server, scope } => {
                write!(f, "the server asks for more scopes ({scope}); run nod mcp auth {server} to grant them")
            }
            AuthError::StepUpLimit { scope, count } => {
                write!(f, "the server still asks for more scopes ({scope}); stopped after {count} authorizations")
            }
            AuthError::Flow(err) => write!(f, "{err:#}"),
        }
    }
}

impl std::error::Error for AuthError {}

impl From<anyhow::Error> for AuthError {
    fn from(err: anyhow::Error) -> AuthError {
        AuthError::Flow(err)
    }
}

pub struct OAuth {
    server: String,
    url: String,
    config: OAuthConfig,
    store: std::path::PathBuf,
    http: Http,
    browser: Option<Arc<dyn Browser>>,
    /// The front end's redactor: every token sent is added to it.
    redactor: crate::util::Redactor,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    credential: Option<Credential>,
    authorizations: u32,
}

impl OAuth {
    /// `browser` lets the flow run; `fresh` ignores stored tokens (`nod mcp auth` starts
    /// over).
    pub fn new(
        server: &str,
        url: &str,
        config: Option<&OAuthConfig>,
        browser: Option<Arc<dyn Browser>>,
        fresh: bool,
        redactor: crate::util::Redactor,
    ) -> anyhow::Result<OAuth> {
        let store = store::path()?;
        let credential = if fresh {
            None
        } else {
            match store::load(&store, server) {
                Ok(Some(c)) if usable(&c, url, config) => Some(c),
                Ok(_) => None,
                Err(err) => {
                    log::warn!("{err:#}");
                    None
                }
            }
        };
        Ok(OAuth {
            server: server.to_string(),
            url: url.to_string(),
            config: config.cloned().unwrap_or_default(),
            store,
            http: Http::new(Duration::from_secs(30)),
            browser,
            redactor,
            state: Mutex::new(State { credential, authorizations: 0 }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Authorization header value, refreshing a token that is about to expire.
    pub fn header(&self) -> Option<String> {
        let mut state = self.lock();
        let credential = state.credential.clone()?;
        let refresh_at = credential.refresh_at.or(credential.expires_at.map(|at| at.saturating_sub(REFRESH_LEAD)));
        if refresh_at.is_some_and(|at| now() >= at) && credential.refresh_token.is_some() {
            match self.refresh(&credential) {
                Ok(fresh) => state.credential = Some(fresh),
                Err(err) => log::warn!("server {}: token refresh failed: {err:#}", self.server),
            }
        }
        let credential = state.credential.as_ref()?;
        // Whatever echoes a token back (a server's error, a log line) is redacted.
        self.redactor.add(credential.refresh_token.iter().chain([&credential.access_token]).cloned());
        Some(format!("Bearer {}", credential.access_token))
    }

    /// A 401: refresh if possible, else authorize if a browser flow can run.
    pub fn unauthorized(&self, challenge: &str) -> Result<(), AuthError> {
        let params = discovery::challenge(challenge);
        let mut state = self.lock();
        if let Some(credential) = state.credential.clone() {
            if credential.refresh_token.is_some() {
                match self.refresh(&credential) {
                    Ok(fresh) => {
                        state.credential = Some(fresh);
                        return Ok(());
                    }
                    Err(err) => log::warn!("server {}: token refresh failed: {err:#}", self.server),
                }
            }
            state.credential = None;
        }
        let Some(browser) = &self.browser else {
            return Err(AuthError::Required { server: self.server.clone() });
        };
        state.authorizations += 1;
        let credential = self.authorize(browser.as_ref(), &params, None).context("authorization failed")?;
        state.credential = Some(credential);
        Ok(())
    }

    /// A 403: step up with the union of scopes when it is `insufficient_scope`. `Ok(true)`:
    /// retry; `Ok(false)`: the 403 is not about scopes.
    pub fn forbidden(&self, challenge: &str) -> Result<bool, AuthError> {
        let params = discovery::challenge(challenge);
        if params.get("error").map(String::as_str) != Some("insufficient_scope") {
            return Ok(false);
        }
        let mut state = self.lock();
        // The scope is shown in messages: the server wrote it.
        let scope = http::shown(params.get("scope").map_or("", String::as_str));
        let Some(browser) = &self.browser else {
            return Err(AuthError::MoreScopes { server: self.server.clone(), scope });
        };
        if state.authorizations >= MAX_AUTHORIZATIONS {
            return Err(AuthError::StepUpLimit { scope, count: state.authorizations });
        }
        state.authorizations += 1;
        let granted = state.credential.as_ref().and_then(|c| c.scope.clone());
        let credential =
            self.authorize(browser.as_ref(), &params, granted.as_deref()).context("step-up authorization failed")?;
        state.credential = Some(credential);
        Ok(true)
    }

    /// Whether a token is held now.
    pub fn has_token(&self) -> bool {
        self.lock().credential.is_some()
    }
}

impl std::fmt::Debug for OAuth {
    // Never prints tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OAuth({})", self.server)
    }
}

impl Credentials for OAuth {
    fn authorization(&self) -> Option<String> {
        self.header()
    }

    fn unauthorized(&self, challenge: &str) -> Result<(), AuthFailure> {
        OAuth::unauthorized(self, challenge).map_err(|e| Arc::new(e) as AuthFailure)
    }

    fn forbidden(&self, challenge: &str) -> Result<bool, AuthFailure> {
        OAuth::forbidden(self, challenge).map_err(|e| Arc::new(e) as AuthFailure)
    }
}

/// Whether a stored credential may be sent to `url`: a token goes only to the resource it
/// was issued for, which is the configured `oauth.resource`, or a resource that covers the
/// server URL (metadata at the root names the origin, and covers every path under it).
fn usable(credential: &Credential, url: &str, config: Option<&OAuthConfig>) -> bool {
    match config.and_then(|c| c.resource.as_deref()) {
        Some(resource) => credential.resource == resource,
        None => discovery::covers(&credential.resource, &discovery::canonical(url)),
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_tokens_go_only_where_their_resource_covers() {
        let at = |resource: &str| Credential { resource: resource.into(), ..Credential::default() };
        assert!(usable(&at("http://h:1"), "http://h:1/mcp", None));
        assert!(usable(&at("http://h:1/mcp"), "http://H:1/mcp/", None));
        assert!(!usable(&at("http://h:1/mcp"), "http://h:1/other", None));
        assert!(!usable(&at("http://h:1"), "http://h:2/mcp", None));
        let config = OAuthConfig { resource: Some("https://api.example/".into()), ..OAuthConfig::default() };
        assert!(usable(&at("https://api.example/"), "http://h:1/mcp", Some(&config)));
        assert!(!usable(&at("http://h:1"), "http://h:1/mcp", Some(&config)));
    }
}
