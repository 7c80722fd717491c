//! Every request that OAuth sends goes through here, and each URL is held to
//! `net::url::check_oauth_url` first: https, or http to a loopback host, never a link-local
//! or unspecified address. A URL that breaks the rule is refused before anything is sent,
//! with a message naming what it was for. Answers are read bounded, as JSON; nothing that a
//! server wrote reaches a message without passing through `shown`.

use std::time::Duration;

use anyhow::{Context, anyhow};
use serde_json::Value;

use crate::net::url;

/// What a URL is for, in messages ("refusing the token endpoint ...").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    ResourceMetadata,
    AuthorizationServer,
    ServerMetadata,
    Authorization,
    Token,
    Registration,
    Revocation,
    ClientMetadata,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::ResourceMetadata => "protected resource metadata",
            Role::AuthorizationServer => "authorization server",
            Role::ServerMetadata => "authorization server metadata",
            Role::Authorization => "authorization endpoint",
            Role::Token => "token endpoint",
            Role::Registration => "registration endpoint",
            Role::Revocation => "revocation endpoint",
            Role::ClientMetadata => "client metadata document",
        })
    }
}

/// Refuses `url` for `role` unless it keeps the OAuth URL rule.
pub(crate) fn check(url: &str, role: Role) -> anyhow::Result<()> {
    url::check_oauth_url(url).map_err(|why| {
        let at = url::host(url).map(|host| format!(" at host {}", shown(&host))).unwrap_or_default();
        anyhow::Error::new(why).context(format!("refusing the {role}{at}"))
    })
}

/// A server's string as it may appear in a message or a log line: one line, no control
/// characters or bidi overrides, at most 200 characters.
pub(crate) fn shown(text: &str) -> String {
    const MAX: usize = 200;
    let line = crate::util::terminal_safe(&crate::util::one_line(text)).into_owned();
    match line.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}...", &line[..end]),
        None => line,
    }
}

/// The answer to a POST: its status and its body as JSON (Null when it is not).
pub(crate) struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// `error` and `error_description` of an OAuth error answer, shown safely.
    pub fn error(&self) -> String {
        let field = |key: &str| self.body.get(key).and_then(Value::as_str).map(shown).filter(|s| !s.is_empty());
        match (field("error"), field("error_description")) {
            (Some(error), Some(description)) => format!("{error}: {description}"),
            (Some(error), None) => error,
            (None, _) => "no OAuth error code".to_string(),
        }
    }

    /// The `error` code, verbatim, for decisions.
    pub fn error_code(&self) -> Option<&str> {
        self.body.get("error").and_then(Value::as_str)
    }
}

/// OAuth's HTTP client: nod's agent, every URL checked.
pub(crate) struct Http {
    agent: ureq::Agent,
}

impl Http {
    /// Each whole request is bounded by `timeout`.
    pub fn new(timeout: Duration) -> Http {
        Http { agent: crate::net::agent(Some(timeout)) }
    }

    /// GETs a metadata document: `None` when the server has none there (any status other
    /// than 2xx, or an answer that is not a JSON object).
    pub fn get_json(&self, url: &str, role: Role) -> anyhow::Result<Option<Value>> {
        check(url, role)?;
        let mut resp = self
            .agent
            .get(url)
            .header("Accept", "application/json")
            .header("MCP-Protocol-Version", "2025-11-25")
            .call()
            .map_err(|err| anyhow!("{}", shown(&err.to_string())))
            .with_context(|| format!("cannot fetch the {role}"))?;
        if !resp.status().is_success() {
            return Ok(None);
        }
        Ok(json_body(&mut resp).filter(Value::is_object))
    }

    /// POSTs a form, with an Authorization header when `authorization` is given.
    pub fn post_form(
        &self,
        url: &str,
        role: Role,
        authorization: Option<&str>,
        form: &[(&str, String)],
    ) -> anyhow::Result<Answer> {
        check(url, role)?;
        let mut req = self.agent.post(url).header("Accept", "application/json");
        if let Some(value) = authorization {
            req = req.header("Authorization", value);
        }
        let resp = req.send_form(form.iter().map(|(k, v)| (*k, v.as_str())));
        answer(resp, role)
    }

    /// POSTs a JSON document.
    pub fn post_json(&self, url: &str, role: Role, body: &Value) -> anyhow::Result<Answer> {
        check(url, role)?;
        let resp = self
            .agent
            .post(url)
            .header("Accept", "application/json")
            .header("Content-Type", "application/json")
            .send(body.to_string().as_bytes());
        answer(resp, role)
    }
}

fn answer(resp: Result<crate::net::Response, ureq::Error>, role: Role) -> anyhow::Result<Answer> {
    let mut resp =
        resp.map_err(|err| anyhow!("{}", shown(&err.to_string()))).with_context(|| format!("the {role} failed"))?;
    let status = resp.status().as_u16();
    Ok(Answer { status, body: json_body(&mut resp).unwrap_or(Value::Null) })
}

fn json_body(resp: &mut crate::net::Response) -> Option<Value> {
    let bytes = resp.body_mut().with_config().limit(1 << 20).read_to_vec().ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_role_and_the_rule() {
        let err = check("http://0.0.0.0:9/token", Role::Token).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.starts_with("refusing the token endpoint at host 0.0.0.0: "), "{text}");
        assert!(text.contains("unspecified address"), "{text}");
        let err = check("http://as.example:1", Role::AuthorizationServer).unwrap_err();
        assert!(format!("{err:#}").contains(url::OAUTH_URL_RULE));
        assert!(check("https://as.example/token", Role::Token).is_ok());
    }

    #[test]
    fn server_strings_are_shown_on_one_safe_line() {
        assert_eq!(shown("a\u{1b}[2Jb\r\nc\u{9b}d\u{202e}e"), "a [2Jb  c d\u{FFFD}e");
        assert_eq!(shown(&"x".repeat(500)).len(), 203);
        let answer = Answer { status: 400, body: serde_json::json!({"error": "bad\u{7}", "error_description": "no"}) };
        assert_eq!(answer.error(), "bad : no");
    }
}
