//! Who nod is to an authorization server (configured client, client metadata document, or
//! dynamic registration), and `nod mcp logout` with token revocation.

use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use super::discovery::Server;
use super::{flow, json_body, store};
use crate::config::OAuthConfig;

/// The client id, secret and token endpoint authentication to use: the configured client, a
/// client metadata document where the server supports one, else dynamic registration.
pub(super) fn client(
    agent: &ureq::Agent,
    config: &OAuthConfig,
    name: &str,
    server: &Server,
    redirect_uri: &str,
) -> anyhow::Result<(String, Option<String>, String)> {
    let supports = |m: &str| server.auth_methods.is_empty() || server.auth_methods.iter().any(|x| x == m);
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
        return Ok((client_id.clone(), secret, method.to_string()));
    }
    if let (Some(url), true) = (&config.client_metadata_url, server.cimd) {
        return Ok((url.clone(), None, "none".into()));
    }
    let Some(endpoint) = &server.registration_endpoint else {
        bail!("the authorization server offers no client registration; set oauth.client_id for server {}", name);
    };
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
    let mut resp = agent
        .post(endpoint)
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes())
        .map_err(|e| anyhow!("client registration failed: {e}"))?;
    let status = resp.status().as_u16();
    let doc: Value = json_body(&mut resp).unwrap_or(Value::Null);
    if !(200..300).contains(&status) {
        bail!("client registration answered HTTP {status}");
    }
    let client_id =
        doc.get("client_id").and_then(Value::as_str).ok_or_else(|| anyhow!("the registration has no client_id"))?;
    let secret = doc.get("client_secret").and_then(Value::as_str).map(str::to_string);
    let method = doc.get("token_endpoint_auth_method").and_then(Value::as_str).unwrap_or(method).to_string();
    Ok((client_id.to_string(), secret, method))
}

/// `nod mcp logout`: forget the server's credentials and revoke them where the server can.
pub fn logout(server: &str) -> anyhow::Result<String> {
    let path = store::path()?;
    let removed = store::remove(&path, server)?;
    let Some(credential) = removed else { return Ok(format!("removed the malformed credentials of server {server}")) };
    let Some(endpoint) = &credential.revocation_endpoint else {
        return Ok(format!("logged out of server {server} locally; its authorization server offers no revocation"));
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let token = credential.refresh_token.clone().unwrap_or_else(|| credential.access_token.clone());
    let hint = if credential.refresh_token.is_some() { "refresh_token" } else { "access_token" };
    let mut form = vec![("token", token), ("token_type_hint", hint.to_string())];
    let mut req = agent.post(endpoint);
    if credential.token_auth == "client_secret_basic" {
        let pair = format!(
            "{}:{}",
            flow::encode(&credential.client_id),
            flow::encode(credential.client_secret.as_deref().unwrap_or(""))
        );
        req = req.header("Authorization", format!("Basic {}", flow::base64(pair.as_bytes())));
    } else {
        form.push(("client_id", credential.client_id.clone()));
    }
    match req.send_form(form.iter().map(|(k, v)| (*k, v.as_str()))) {
        Ok(resp) if resp.status().is_success() => Ok(format!("logged out of server {server} and revoked its token")),
        Ok(resp) => {
            Ok(format!("logged out of server {server} locally; revocation answered HTTP {}", resp.status().as_u16()))
        }
        Err(_) => Ok(format!("logged out of server {server} locally; revocation failed")),
    }
}
