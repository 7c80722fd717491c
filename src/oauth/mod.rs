//! OAuth for remote servers (MCP 2025-11-25 authorization): discovery, client identity
//! (configured client, Client ID Metadata Document, or Dynamic Client Registration), the
//! authorization code flow with PKCE (S256 only), tokens refreshed before expiry and on 401,
//! and step-up on 403 `insufficient_scope`. Tokens live in `store`, never in any output.
//!
//! The transport asks `OAuth` (through `transport::http::Auth`) for the Authorization header
//! and tells it about 401 and 403 answers. The browser flow runs only where a person (or a
//! configured `BROWSER` command) can complete it: always for `nod mcp auth`, and for other
//! commands when `BROWSER` is set; elsewhere they report "run nod mcp auth <name>".

pub mod discovery;
pub mod flow;
mod register;
pub mod store;

pub use register::logout;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

use crate::config::OAuthConfig;
use discovery::Server;
use store::Credential;

/// Refresh this long before a token expires.
const REFRESH_LEAD: u64 = 60;
/// Authorizations in one process (the first one and step-ups) before nod gives up on a
/// server that keeps asking for more scopes.
const MAX_AUTHORIZATIONS: u32 = 3;

static INTERACTIVE: AtomicBool = AtomicBool::new(false);

/// Lets this process run the browser flow (set by `nod mcp auth`).
pub fn allow_browser_flow() {
    INTERACTIVE.store(true, Ordering::SeqCst);
}

fn may_run_flow() -> bool {
    INTERACTIVE.load(Ordering::SeqCst) || std::env::var_os("BROWSER").is_some_and(|b| !b.is_empty())
}

pub struct OAuth {
    server: String,
    url: String,
    config: OAuthConfig,
    store: std::path::PathBuf,
    agent: ureq::Agent,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    credential: Option<Credential>,
    authorizations: u32,
    /// Set when a 401 could not be answered; the error the user sees.
    failure: Option<String>,
}

impl OAuth {
    /// Under `nod mcp auth` stored tokens are ignored: the flow starts over.
    pub fn new(server: &str, url: &str, config: Option<&OAuthConfig>) -> anyhow::Result<OAuth> {
        let fresh = INTERACTIVE.load(Ordering::SeqCst);
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
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .max_redirects(0)
            .build()
            .into();
        Ok(OAuth {
            server: server.to_string(),
            url: url.to_string(),
            config: config.cloned().unwrap_or_default(),
            store,
            agent,
            state: Mutex::new(State { credential, ..State::default() }),
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
        state.credential.as_ref().map(|c| format!("Bearer {}", c.access_token))
    }

    /// A 401: refresh if possible, else authorize if a browser flow can run. True: retry.
    pub fn unauthorized(&self, challenge: &str) -> bool {
        let params = discovery::challenge(challenge);
        let mut state = self.lock();
        if let Some(credential) = state.credential.clone() {
            if credential.refresh_token.is_some() {
                match self.refresh(&credential) {
                    Ok(fresh) => {
                        state.credential = Some(fresh);
                        return true;
                    }
                    Err(err) => log::warn!("server {}: token refresh failed: {err:#}", self.server),
                }
            }
            state.credential = None;
        }
        if !may_run_flow() {
            state.failure = Some(format!("the server requires authorization; run nod mcp auth {}", self.server));
            return false;
        }
        state.authorizations += 1;
        match self.authorize(&params, None) {
            Ok(credential) => {
                state.credential = Some(credential);
                true
            }
            Err(err) => {
                state.failure = Some(format!("authorization failed: {err:#}"));
                false
            }
        }
    }

    /// A 403: step up with the union of scopes when it is `insufficient_scope`. True: retry.
    pub fn forbidden(&self, challenge: &str) -> bool {
        let params = discovery::challenge(challenge);
        if params.get("error").map(String::as_str) != Some("insufficient_scope") {
            return false;
        }
        let mut state = self.lock();
        if state.authorizations >= MAX_AUTHORIZATIONS || !may_run_flow() {
            let scope = params.get("scope").map_or("", String::as_str);
            state.failure = Some(if may_run_flow() {
                format!(
                    "the server still asks for more scopes ({scope}); stopped after {} authorizations",
                    state.authorizations
                )
            } else {
                format!("the server asks for more scopes ({scope}); run nod mcp auth {} to grant them", self.server)
            });
            return false;
        }
        state.authorizations += 1;
        let granted = state.credential.as_ref().and_then(|c| c.scope.clone());
        match self.authorize(&params, granted.as_deref()) {
            Ok(credential) => {
                state.credential = Some(credential);
                true
            }
            Err(err) => {
                state.failure = Some(format!("step-up authorization failed: {err:#}"));
                false
            }
        }
    }

    /// Why the last 401 or 403 could not be answered.
    pub fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }

    /// Whether a token is held now.
    pub fn has_token(&self) -> bool {
        self.lock().credential.is_some()
    }

    fn authorize(
        &self,
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
        eprintln!("nod: to authorize server {}, open this URL in a browser:\n{url}", self.server);
        eprintln!("nod: waiting for the browser; on a machine without one, paste the final redirect URL here");
        if std::env::var_os("BROWSER").is_some() || INTERACTIVE_OPEN.load(Ordering::SeqCst) {
            flow::open(&url)?;
        }
        let redirect_uri = callback.redirect_uri.clone();
        let query = callback.wait(true)?;
        let get = |key: &str| query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
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

static INTERACTIVE_OPEN: AtomicBool = AtomicBool::new(false);

/// `nod mcp auth --open`: launch the browser even without `BROWSER`.
pub fn open_browser() {
    INTERACTIVE_OPEN.store(true, Ordering::SeqCst);
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
