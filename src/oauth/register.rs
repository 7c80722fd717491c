//! Who nod is to an authorization server (configured client, client metadata document, or
//! dynamic registration), and `nod mcp logout` with token revocation.

use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use super::discovery::Server;
use super::http::{Http, Role, check};
use super::{flow, store};
use crate::config::OAuthConfig;

/// The client nod authenticates as at the token endpoint.
pub(super) struct Client {
    pub id: String,
    pub secret: Option<String>,
    /// none, client_secret_basic or client_secret_post.
    pub token_auth: String,
}

/// The callback listener and the client to use: the configured client, a client metadata
/// document where the server supports one, else dynamic registration.
pub(super) fn client(
    http: &Http,
    config: &OAuthConfig,
    name: &str,
    server: &Server,
) -> anyhow::Result<(flow::Callback, Client)> {
    if let Some(client_id) = &config.client_id {
        let secret = match &config.client_secret_env {
            Some(var) => {
                Some(std::env::var(var).map_err(|_| anyhow!("oauth.client_secret_env names {var}, which is not set"))?)
            }
            None => None,
        };
        let method = match &secret {
            None => "none",
            Some(_)
                if server.auth_methods.iter().any(|m| m == "client_secret_basic") || server.auth_methods.is_empty() =>
            {
                "client_secret_basic"
            }
            Some(_) => "client_secret_post",
        };
        let client = Client { id: client_id.clone(), secret, token_auth: method.to_string() };
        return Ok((flow::Callback::bind()?, client));
    }
    if let (Some(url), true) = (&config.client_metadata_url, server.cimd) {
        check(url, Role::ClientMetadata)?;
        let client = Client { id: url.clone(), secret: None, token_auth: "none".into() };
        return Ok((flow::Callback::bind()?, client));
    }
    let Some(endpoint) = &server.registration_endpoint else {
        bail!("the authorization server offers no client registration; set oauth.client_id for server {}", name);
    };
    let callback = flow::Callback::bind()?;
    let client = register(http, endpoint, server, &callback.redirect_uri)?;
    Ok((callback, client))
}

/// Dynamic Client Registration (RFC 7591) as a native app with a loopback redirect.
fn register(http: &Http, endpoint: &str, server: &Server, redirect_uri: &str) -> anyhow::Result<Client> {
    let supports = |m: &str| server.auth_methods.is_empty() || server.auth_methods.iter().any(|x| x == m);
    let method = if supports("none") {
        "none"
    } else if supports("client_secret_basic") {
        "client_secret_basic"
    } else {
        "client_secret_post"
    };
    let body = json!({
        "client_name": "nod",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    });
    let answer = http.post_json(endpoint, Role::Registration, &body)?;
    if !answer.is_success() {
        bail!("client registration answered HTTP {} ({})", answer.status, answer.error());
    }
    let doc = &answer.body;
    let client_id =
        doc.get("client_id").and_then(Value::as_str).ok_or_else(|| anyhow!("the registration has no client_id"))?;
    Ok(Client {
        id: client_id.to_string(),
        secret: doc.get("client_secret").and_then(Value::as_str).map(str::to_string),
        token_auth: doc.get("token_endpoint_auth_method").and_then(Value::as_str).unwrap_or(method).to_string(),
    })
}

/// `nod mcp logout`: forget the server's credentials and revoke them where the server can.
pub fn logout(server: &str) -> anyhow::Result<String> {
    let path = store::path()?;
    let removed = store::remove(&path, server)?;
    let Some(credential) = removed else { return Ok(format!("removed the malformed credentials of server {server}")) };
    let Some(endpoint) = &credential.revocation_endpoint else {
        return Ok(format!("logged out of server {server} locally; its authorization server offers no revocation"));
    };
    if let Err(err) = check(endpoint, Role::Revocation) {
        return Ok(format!("logged out of server {server} locally; nod did not revoke the token: {err:#}"));
    }
    let token = credential.refresh_token.clone().unwrap_or_else(|| credential.access_token.clone());
    let hint = if credential.refresh_token.is_some() { "refresh_token" } else { "access_token" };
    let mut form = vec![("token", token), ("token_type_hint", hint.to_string())];
    let mut authorization = None;
    match credential.token_auth.as_str() {
        "client_secret_basic" => {
            let pair = format!(
                "{}:{}",
                flow::encode(&credential.client_id),
                flow::encode(credential.client_secret.as_deref().unwrap_or(""))
            );
            authorization = Some(format!("Basic {}", flow::base64(pair.as_bytes())));
        }
        "client_secret_post" => {
            form.push(("client_id", credential.client_id.clone()));
            form.push(("client_secret", credential.client_secret.clone().unwrap_or_default()));
        }
        _ => form.push(("client_id", credential.client_id.clone())),
    }
    let http = Http::new(Duration::from_secs(10));
    match http.post_form(endpoint, Role::Revocation, authorization.as_deref(), &form) {
        Ok(answer) if answer.is_success() => Ok(format!("logged out of server {server} and revoked its token")),
        Ok(answer) => Ok(format!("logged out of server {server} locally; revocation answered HTTP {}", answer.status)),
        Err(_) => Ok(format!("logged out of server {server} locally; revocation failed")),
    }
}
