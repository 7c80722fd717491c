//! The token endpoint: the authorization code exchange and refreshes, each with the client's
//! authentication method and the resource indicator the credential was issued for, and the
//! credential that an answer makes. An `invalid_client` answer forgets nod's stored
//! registration with that authorization server, so the next authorization registers again.

use anyhow::{anyhow, bail};
use serde_json::Value;

use super::http::Role;
use super::store::{self, Credential};
use super::{OAuth, REFRESH_LEAD, flow, now};

impl OAuth {
    /// A refresh_token grant for the credential's own resource.
    pub(super) fn refresh(&self, credential: &Credential) -> anyhow::Result<Credential> {
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
    pub(super) fn token_request(
        &self,
        base: &Credential,
        form: &mut Vec<(&'static str, String)>,
    ) -> anyhow::Result<Credential> {
        let mut authorization = None;
        match base.token_auth.as_str() {
            "client_secret_basic" => {
                let secret = base.client_secret.clone().unwrap_or_default();
                let pair = format!("{}:{}", flow::encode(&base.client_id), flow::encode(&secret));
                authorization = Some(format!("Basic {}", flow::base64(pair.as_bytes())));
            }
            "client_secret_post" => {
                form.push(("client_id", base.client_id.clone()));
                form.push(("client_secret", base.client_secret.clone().unwrap_or_default()));
            }
            _ => form.push(("client_id", base.client_id.clone())),
        }
        let answer = self.http.post_form(&base.token_endpoint, Role::Token, authorization.as_deref(), form)?;
        if !answer.is_success() {
            let forgotten = answer.error_code() == Some("invalid_client")
                && store::forget_registration(&self.store, &self.server, &base.issuer, &base.client_id)
                    .unwrap_or(false);
            let then = if forgotten { "; nod forgot its registered client and registers again next time" } else { "" };
            bail!("the token endpoint answered HTTP {} ({}){then}", answer.status, answer.error());
        }
        let body = answer.body;
        let access_token = body
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("the token answer has no access_token"))?;
        let expires_in = body.get("expires_in").and_then(Value::as_u64);
        Ok(Credential {
            access_token: access_token.to_string(),
            refresh_token: body.get("refresh_token").and_then(Value::as_str).map(str::to_string),
            expires_at: expires_in.map(|s| now() + s),
            // A minute before expiry, or half-way through a short lifetime.
            refresh_at: expires_in.map(|s| now() + s - REFRESH_LEAD.min(s / 2)),
            scope: body
                .get("scope")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| form.iter().find(|(k, _)| *k == "scope").map(|(_, v)| v.clone())),
            ..base.clone()
        })
    }
}
