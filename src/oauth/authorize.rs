//! One authorization: discovery (protected resource metadata, then authorization server
//! metadata, or the 2025-03-26 fallback), the scopes to ask for, the client, the browser step
//! through the front end's `Browser`, the callback's checks, and the code exchange. The
//! resource indicator is `oauth.resource` when configured, else the protected resource
//! metadata's `resource` exactly as published (RFC 8707, RFC 9728), else the server URL.
//! Every endpoint that discovery finds is held to the OAuth URL rule before anything is sent.

use std::collections::HashMap;

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use super::discovery::{self, Server};
use super::http::{Role, check, shown};
use super::store::{self, Credential};
use super::{Browser, OAuth, flow, register};

/// What discovery found.
struct Discovered {
    server: Server,
    /// The protected resource metadata's `resource`, when there is such metadata.
    resource: Option<String>,
    /// Its `scopes_supported`.
    scopes: Vec<String>,
}

impl OAuth {
    /// Runs the authorization code flow with PKCE and stores the credential it yields.
    pub(super) fn authorize(
        &self,
        browser: &dyn Browser,
        params: &HashMap<String, String>,
        granted: Option<&str>,
    ) -> anyhow::Result<Credential> {
        let found = self.discover(params.get("resource_metadata").map(String::as_str))?;
        let resource = match (&self.config.resource, found.resource) {
            (Some(configured), _) => configured.clone(),
            (None, Some(published)) => published,
            (None, None) => discovery::canonical(&self.url),
        };
        let server = found.server;
        let scopes = self.scopes(&server, params, found.scopes, granted);
        let (callback, client) = register::client(&self.http, &self.config, &self.server, &server, &self.store)?;
        let verifier = flow::base64url(&flow::random(32)?);
        let challenge = flow::base64url(&crate::sha256::digest(verifier.as_bytes()));
        let state = flow::base64url(&flow::random(16)?);
        let mut url = format!(
            "{}{}response_type=code&client_id={}&redirect_uri={}&code_challenge={}&code_challenge_method=S256&state={}&resource={}",
            server.authorization_endpoint,
            if server.authorization_endpoint.contains('?') { "&" } else { "?" },
            flow::encode(&client.id),
            flow::encode(&callback.redirect_uri),
            challenge,
            state,
            flow::encode(&resource)
        );
        if !scopes.is_empty() {
            url.push_str(&format!("&scope={}", flow::encode(&scopes.join(" "))));
        }
        // The URL goes to a terminal and to a browser: it keeps the rule, so it is printable.
        check(&url, Role::Authorization)?;
        browser.show(&self.server, &url)?;
        let redirect_uri = callback.redirect_uri.clone();
        let query = callback.wait(&state, browser.pasted())?;
        let get = |key: &str| flow::get(&query, key);
        // RFC 9207 first: a callback from another issuer is not acted on, nor is its error
        // shown. The comparison is exact (no trailing-slash or case normalisation); when the
        // server advertises authorization_response_iss_parameter_supported, iss must be there.
        match get("iss") {
            Some(iss) if iss != server.issuer => bail!(
                "the callback names another issuer than the authorization server's ({} instead of {}); refusing it",
                shown(&iss),
                shown(&server.issuer)
            ),
            None if server.iss_in_response => bail!(
                "the callback has no iss, which this authorization server promises (authorization_response_iss_parameter_supported); refusing it"
            ),
            _ => {}
        }
        if let Some(error) = get("error") {
            let description = get("error_description").map(|d| format!(": {}", shown(&d))).unwrap_or_default();
            bail!("the authorization server answered {}{description}", shown(&error));
        }
        if get("state").as_deref() != Some(state.as_str()) {
            bail!("the callback's state does not match; the authorization was not completed");
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
            client_id: client.id,
            client_secret: client.secret,
            token_auth: client.token_auth,
            token_endpoint: server.token_endpoint.clone(),
            revocation_endpoint: server.revocation_endpoint.clone(),
            ..Credential::default()
        };
        let credential = self.token_request(&base, &mut form)?;
        store::save(&self.store, &self.server, &credential)?;
        Ok(credential)
    }

    /// The configured scopes, else the challenge's, else the metadata's; offline_access where
    /// the server offers it; and, on a step-up, every scope granted before.
    fn scopes(
        &self,
        server: &Server,
        params: &HashMap<String, String>,
        prm_scopes: Vec<String>,
        granted: Option<&str>,
    ) -> Vec<String> {
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
        scopes
    }

    /// Protected resource metadata, then authorization server metadata. Without PRM, the
    /// 2025-03-26 fallback: metadata at the server's origin (its issuer is not checked), or
    /// the default endpoints there.
    fn discover(&self, from_header: Option<&str>) -> anyhow::Result<Discovered> {
        let mut prm = None;
        for url in discovery::prm_urls(&self.url, from_header) {
            if let Some(doc) = self.http.get_json(&url, Role::ResourceMetadata)? {
                prm = Some(doc);
                break;
            }
        }
        let Some(prm) = prm else {
            return Ok(Discovered { server: self.legacy_discovery()?, resource: None, scopes: Vec::new() });
        };
        let claimed = prm.get("resource").and_then(Value::as_str).unwrap_or("");
        if self.config.resource.is_none() && !discovery::covers(claimed, &discovery::canonical(&self.url)) {
            bail!("the protected resource metadata is for {}, not this server; refusing it", shown(claimed));
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
        check(&issuer, Role::AuthorizationServer)?;
        for url in discovery::as_urls(&issuer) {
            if let Some(doc) = self.http.get_json(&url, Role::ServerMetadata)? {
                let server = discovery::parse_server(&doc, Some(&issuer))?;
                endpoints_keep_the_rule(&server)?;
                return Ok(Discovered { server, resource: Some(claimed.to_string()), scopes });
            }
        }
        bail!("no authorization server metadata for {}", shown(&issuer))
    }

    fn legacy_discovery(&self) -> anyhow::Result<Server> {
        let (origin, _) = discovery::split(&self.url).ok_or_else(|| anyhow!("bad server URL"))?;
        for url in discovery::as_urls(&origin) {
            if let Some(mut doc) = self.http.get_json(&url, Role::ServerMetadata)? {
                // 2025-03-26 servers may omit the PKCE field; nod uses S256 regardless.
                if doc.get("code_challenge_methods_supported").is_none() {
                    doc["code_challenge_methods_supported"] = json!(["S256"]);
                }
                let server = discovery::parse_server(&doc, None)?;
                endpoints_keep_the_rule(&server)?;
                return Ok(server);
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
}

/// Refuses an authorization server any of whose endpoints breaks the OAuth URL rule, before
/// registering or showing anything: the code, the verifier and tokens would go there later.
fn endpoints_keep_the_rule(server: &Server) -> anyhow::Result<()> {
    check(&server.authorization_endpoint, Role::Authorization)?;
    check(&server.token_endpoint, Role::Token)?;
    if let Some(url) = &server.registration_endpoint {
        check(url, Role::Registration)?;
    }
    if let Some(url) = &server.revocation_endpoint {
        check(url, Role::Revocation)?;
    }
    Ok(())
}
