//! Who nod is to an authorization server (configured client, client metadata document, or
//! dynamic registration), and `nod mcp logout` with token revocation. A registered client
//! is kept in the store per server and issuer, and reused by the next authorization with the
//! same issuer on the same callback port; another issuer, an expired secret or a taken port
//! registers again.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use super::discovery::Server;
use super::http::{Http, Role, check};
use super::store::{self, Registration};
use super::{flow, now};
use crate::config::OAuthConfig;

/// The client nod authenticates as at the token endpoint.
pub(super) struct Client {
    pub id: String,
    pub secret: Option<String>,
    /// none, client_secret_basic or client_secret_post.
    pub token_auth: String,
}

/// The callback listener and the client to use: the configured client, a client metadata
/// document where the server supports one, the client registered before with this issuer,
/// else a new registration (stored at once, so an authorization that fails later still
/// reuses it).
pub(super) fn client(
    http: &Http,
    config: &OAuthConfig,
    name: &str,
    server: &Server,
    store_path: &Path,
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
    if let Some(reused) = registered(name, server, store_path) {
        return Ok(reused);
    }
    let Some(endpoint) = &server.registration_endpoint else {
        bail!("the authorization server offers no client registration; set oauth.client_id for server {}", name);
    };
    let callback = flow::Callback::bind()?;
    let registration = register(http, endpoint, server, &callback.redirect_uri)?;
    if let Err(err) = store::save_registration(store_path, name, &server.issuer, &registration) {
        log::warn!("server {name}: cannot keep the client registration: {err:#}");
    }
    let client =
        Client { id: registration.client_id, secret: registration.client_secret, token_auth: registration.token_auth };
    Ok((callback, client))
}

/// The client registered before for this server and issuer, with its callback port bound.
fn registered(name: &str, server: &Server, store_path: &Path) -> Option<(flow::Callback, Client)> {
    let registration = match store::registration(store_path, name, &server.issuer) {
        Ok(found) => found?,
        Err(err) => {
            log::warn!("{err:#}");
            return None;
        }
    };
    if registration.secret_expires_at.is_some_and(|at| at != 0 && at <= now()) {
        log::info!("server {name}: the registered client's secret has expired; registering again");
        return None;
    }
    let port = flow::callback_port(&registration.redirect_uri)?;
    let Ok(callback) = flow::Callback::bind_port(port) else {
        log::info!("server {name}: the registered client's callback port {port} is in use; registering again");
        return None;
    };
    let client =
        Client { id: registration.client_id, secret: registration.client_secret, token_auth: registration.token_auth };
    Some((callback, client))
}

/// Dynamic Client Registration (RFC 7591) as a native app with a loopback redirect.
fn register(http: &Http, endpoint: &str, server: &Server, redirect_uri: &str) -> anyhow::Result<Registration> {
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
    Ok(Registration {
        client_id: client_id.to_string(),
        client_secret: doc.get("client_secret").and_then(Value::as_str).map(str::to_string),
        token_auth: doc.get("token_endpoint_auth_method").and_then(Value::as_str).unwrap_or(method).to_string(),
        redirect_uri: redirect_uri.to_string(),
        secret_expires_at: doc.get("client_secret_expires_at").and_then(Value::as_u64),
    })
}

/// `nod mcp logout`: forget the server's credentials and registrations, and revoke the token
/// where the server can.
pub fn logout(server: &str) -> anyhow::Result<String> {
    let path = store::path()?;
    let removed = store::remove(&path, server)?;
    let Some(credential) = removed.credential else {
        return Ok(if removed.entry {
            format!("removed the malformed credentials of server {server}")
        } else {
            format!("forgot the client registration for server {server}; it held no token")
        });
    };
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
