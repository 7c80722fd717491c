//! OAuth for remote servers (MCP 2025-11-25 authorization): discovery, client identity
//! (configured client, Client ID Metadata Document, or Dynamic Client Registration), the
//! authorization code flow with PKCE (S256 only), tokens refreshed before expiry and on 401,
//! and step-up on 403 `insufficient_scope`. Tokens live in `store`, never in any output.
//!
//! The transport asks `OAuth` for the Authorization header and tells it about 401 and 403
//! answers through `transport::Credentials`. The browser side of a flow (showing or opening
//! the URL, a pasted redirect URL) belongs to the front end, which passes a `Browser` when a
//! person (or a configured `BROWSER` command) can complete it; without one, a 401 that a
//! refresh cannot answer fails with `AuthError::Required` ("run nod mcp auth <name>").

pub mod discovery;
pub mod flow;
mod register;
pub mod store;

pub use register::logout;

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use crossbeam_channel::Receiver;
use serde_json::{Value, json};

use crate::config::OAuthConfig;
use crate::transport::{AuthFailure, Credentials};
use discovery::Server;
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
    agent: ureq::Agent,
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
                // A token is sent only to the resource it was issued for.
                Ok(Some(c)) if c.resource == resource_of(url, config) => Some(c),
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
            agent: crate::net::agent(Some(std::time::Duration::from_secs(30))),
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
        let scope = params.get("scope").cloned().unwrap_or_default();
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

    fn authorize(
        &self,
        browser: &dyn Browser,
        params: &std::collections::HashMap<String, String>,
        granted: Option<&str>,
    ) -> anyhow::Result<Credential> {
        let resource = resource_of(&self.url, Some(&self.config));
        let (server, prm_scopes) = self.discover(params.get("resource_metadata").map(String::as_str), &resource)?;
        let mut scopes: Vec<String> = match (&self.config.scopes, params.get("scope")) {
            (Some(scopes), _) => scopes.clone(),
            (None, Some(scope)) => scope.split_whitespace().map(str::to_string).collect(),
            (None, None) => prm_scopes,
        };
        // SEP-2207: ask for offline_access (a refresh token) where the server offers it.
        if self.config.scopes.is_none()
            && server.scopes_supported.iter().any(|s| s == "offline_access")
            && !scopes.iter().any(|s| s == "offline_access")
        {
            scopes.push("offline_access".into());
        }
        for scope in granted.unwrap_or("").split_whitespace() {
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_string());
            }
        }
        let callback = flow::Callback::bind()?;
        let (client_id, client_secret, token_auth) =
            register::client(&self.agent, &self.config, &self.server, &server, &callback.redirect_uri)?;
        let verifier = flow::base64url(&flow::random(32)?);
        let challenge = flow::base64url(&crate::sha256::digest(verifier.as_bytes()));
        let state = flow::base64url(&flow::random(16)?);
        let mut url = format!(
            "{}{}response_type=code&client_id={}&redirect_uri={}&code_challenge={}&code_challenge_method=S256&state={}&resource={}",
            server.authorization_endpoint,
            if server.authorization_endpoint.contains('?') { "&" } else { "?" },
            flow::encode(&client_id),
            flow::encode(&callback.redirect_uri),
            challenge,
            state,
            flow::encode(&resource)
        );
        if !scopes.is_empty() {
            url.push_str(&format!("&scope={}", flow::encode(&scopes.join(" "))));
        }
        browser.show(&self.server, &url)?;
        let redirect_uri = callback.redirect_uri.clone();
        let query = callback.wait(&state, browser.pasted())?;
        let get = |key: &str| flow::get(&query, key);
        if let Some(error) = get("error") {
            bail!("the authorization server answered {error}: {}", get("error_description").unwrap_or_default());
        }
        if get("state").as_deref() != Some(state.as_str()) {
            bail!("the callback's state does not match; the authorization was not completed");
        }
        // RFC 9207: a callback that names an issuer must name this one; no override.
        if let Some(iss) = get("iss")
            && iss.trim_end_matches('/') != server.issuer.trim_end_matches('/')
        {
            bail!(
                "the callback names another issuer than the authorization server's ({iss} instead of {}); refusing it",
                server.issuer
            );
        }
        let code = get("code").ok_or_else(|| anyhow!("the callback has no code"))?;
        let mut form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", resource.clone()),
        ];
        let base = Credential {
            issuer: server.issuer.clone(),
            resource,
            client_id,
            client_secret,
            token_auth,
            token_endpoint: server.token_endpoint.clone(),
            revocation_endpoint: server.revocation_endpoint.clone(),
            ..Credential::default()
        };
        let credential = self.token_request(&base, &mut form)?;
        store::save(&self.store, &self.server, &credential)?;
        Ok(credential)
    }

    fn refresh(&self, credential: &Credential) -> anyhow::Result<Credential> {
        let refresh_token = credential.refresh_token.clone().ok_or_else(|| anyhow!("no refresh token"))?;
        let mut form = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh_token.clone()),
            ("resource", credential.resource.clone()),
        ];
        let mut fresh = self
            .token_request(credential, &mut form)
            .map_err(|err| anyhow!("{err:#}; run nod mcp auth {} to authorize again", self.server))?;
        // A server that does not rotate refresh tokens keeps the old one valid.
        if fresh.refresh_token.is_none() {
            fresh.refresh_token = Some(refresh_token);
        }
        store::save(&self.store, &self.server, &fresh)?;
        Ok(fresh)
    }

    /// POSTs to the token endpoint with the client's authentication method.
    fn token_request(&self, base: &Credential, form: &mut Vec<(&'static str, String)>) -> anyhow::Result<Credential> {
        let mut req = self.agent.post(&base.token_endpoint).header("Accept", "application/json");
        match base.token_auth.as_str() {
            "client_secret_basic" => {
                let secret = base.client_secret.clone().unwrap_or_default();
                let pair = format!("{}:{}", flow::encode(&base.client_id), flow::encode(&secret));
                req = req.header("Authorization", format!("Basic {}", flow::base64(pair.as_bytes())));
            }
            "client_secret_post" => {
                form.push(("client_id", base.client_id.clone()));
                form.push(("client_secret", base.client_secret.clone().unwrap_or_default()));
            }
            _ => form.push(("client_id", base.client_id.clone())),
        }
        let mut resp = req
            .send_form(form.iter().map(|(k, v)| (*k, v.as_str())))
            .map_err(|e| anyhow!("token request failed: {e}"))?;
        let status = resp.status().as_u16();
        let body: Value = json_body(&mut resp).unwrap_or(Value::Null);
        if !(200..300).contains(&status) {
            let error = body.get("error").and_then(Value::as_str).unwrap_or("an error");
            bail!("the token endpoint answered HTTP {status} ({error})");
        }
        let access_token = body
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("the token answer has no access_token"))?;
        Ok(Credential {
            access_token: access_token.to_string(),
            refresh_token: body.get("refresh_token").and_then(Value::as_str).map(str::to_string),
            expires_at: body.get("expires_in").and_then(Value::as_u64).map(|s| now() + s),
            // A minute before expiry, or half-way through a short lifetime.
            refresh_at: body.get("expires_in").and_then(Value::as_u64).map(|s| now() + s - REFRESH_LEAD.min(s / 2)),
            scope: body
                .get("scope")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| form.iter().find(|(k, _)| *k == "scope").map(|(_, v)| v.clone())),
            ..base.clone()
        })
    }

    /// Protected resource metadata, then authorization server metadata. Without PRM, the
    /// 2025-03-26 fallback: metadata at the server's origin (its issuer is not checked), or
    /// the default endpoints there.
    fn discover(&self, from_header: Option<&str>, resource: &str) -> anyhow::Result<(Server, Vec<String>)> {
        let mut prm = None;
        for url in discovery::prm_urls(&self.url, from_header) {
            if let Some(doc) = self.get_json(&url)? {
                prm = Some(doc);
                break;
            }
        }
        let Some(prm) = prm else { return self.legacy_discovery().map(|s| (s, Vec::new())) };
        let claimed = prm.get("resource").and_then(Value::as_str).unwrap_or("");
        if !discovery::covers(claimed, resource) && self.config.resource.is_none() {
            bail!("the protected resource metadata is for {claimed}, not this server; refusing it");
        }
        let scopes: Vec<String> = prm
            .get("scopes_supported")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        let issuer = match &self.config.issuer {
            Some(issuer) => issuer.clone(),
            None => prm
                .get("authorization_servers")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .ok_or_else(|| anyhow!("the protected resource metadata names no authorization server"))?
                .to_string(),
        };
        for url in discovery::as_urls(&issuer) {
            if let Some(doc) = self.get_json(&url)? {
                return Ok((discovery::parse_server(&doc, Some(&issuer))?, scopes));
            }
        }
        bail!("no authorization server metadata for {issuer}")
    }

    fn legacy_discovery(&self) -> anyhow::Result<Server> {
        let (origin, _) = discovery::split(&self.url).ok_or_else(|| anyhow!("bad server URL"))?;
        for url in discovery::as_urls(&origin) {
            if let Some(doc) = self.get_json(&url)? {
                let mut doc = doc;
                // 2025-03-26 servers may omit the PKCE field; nod uses S256 regardless.
                if doc.get("code_challenge_methods_supported").is_none() {
                    doc["code_challenge_methods_supported"] = json!(["S256"]);
                }
                return discovery::parse_server(&doc, None);
            }
        }
        Ok(Server {
            issuer: origin.clone(),
            authorization_endpoint: format!("{origin}/authorize"),
            token_endpoint: format!("{origin}/token"),
            registration_endpoint: Some(format!("{origin}/register")),
            ..Server::default()
        })
    }

    fn get_json(&self, url: &str) -> anyhow::Result<Option<Value>> {
        let mut resp = match self
            .agent
            .get(url)
            .header("Accept", "application/json")
            .header("MCP-Protocol-Version", "2025-11-25")
            .call()
        {
            Ok(resp) => resp,
            Err(err) => return Err(anyhow!("{err}")).context("cannot fetch authorization metadata"),
        };
        if !resp.status().is_success() {
            return Ok(None);
        }
        Ok(json_body(&mut resp).filter(Value::is_object))
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

fn resource_of(url: &str, config: Option<&OAuthConfig>) -> String {
    config.and_then(|c| c.resource.clone()).unwrap_or_else(|| discovery::canonical(url))
}

pub(crate) fn json_body(resp: &mut ureq::http::Response<ureq::Body>) -> Option<Value> {
    let bytes = resp.body_mut().with_config().limit(1 << 20).read_to_vec().ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
