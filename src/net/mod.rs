//! HTTP plumbing for everything nod sends over the network: one way to build a ureq agent
//! (TLS with the platform's roots, so a private CA in `SSL_CERT_FILE` works everywhere;
//! proxies from the environment; no automatic redirects), redirects followed on the same
//! origin only, URL helpers, and the one SSE parser that MCP transports and the model
//! provider share.

pub(crate) mod sse;
pub(crate) mod url;

use std::time::Duration;

/// A response as ureq returns it.
pub type Response = ureq::http::Response<ureq::Body>;

/// How long one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The most redirects nod follows for one request.
pub const MAX_REDIRECTS: usize = 5;

/// An agent for nod's requests. `global` bounds each whole request (None: no bound, for
/// event streams that stay open). Statuses are not errors: callers read them.
pub fn agent(global: Option<Duration>) -> ureq::Agent {
    builder(CONNECT_TIMEOUT).timeout_global(global).build().into()
}

/// An agent for a long answer read as it comes: each read may wait up to `idle`.
pub fn streaming_agent(connect: Duration, idle: Duration) -> ureq::Agent {
    builder(connect).timeout_per_read(Some(idle)).build().into()
}

fn builder(connect: Duration) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    let tls = ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        // Redirects are followed by `follow` (same origin only): ureq would send the
        // configured headers to another origin, and does not re-send a POST body.
        .max_redirects(0)
        .timeout_connect(Some(connect))
        .tls_config(tls)
        .user_agent(concat!("nod/", env!("CARGO_PKG_VERSION")))
}

/// The method of a redirected request: 307 and 308 keep it, 303 turns it into GET (and
/// 301/302 keep it, as nod's requests are POSTs whose body must not be lost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The request's own method.
    Original,
    /// GET without a body, after a 303.
    Get,
}

/// Why `follow` gave up.
#[derive(Debug, Clone)]
pub enum NetError {
    /// A redirect nod does not follow.
    Redirect(&'static str),
    Timeout,
    HostNotFound,
    Io(String),
}

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetError::Redirect(why) => f.write_str(why),
            NetError::Timeout => f.write_str("the HTTP request timed out"),
            NetError::HostNotFound => f.write_str("host not found"),
            NetError::Io(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for NetError {}

impl From<ureq::Error> for NetError {
    fn from(err: ureq::Error) -> NetError {
        match err {
            ureq::Error::Timeout(_) => NetError::Timeout,
            ureq::Error::HostNotFound => NetError::HostNotFound,
            ureq::Error::Io(io) => NetError::Io(io.to_string()),
            ureq::Error::ConnectionFailed => NetError::Io("connection refused".into()),
            ureq::Error::TooManyRedirects => NetError::Redirect("too many redirects"),
            other => NetError::Io(other.to_string()),
        }
    }
}

/// Sends a request, following redirects on the same origin only: the configured headers and
/// credentials belong to the configured server. 307/308 keep the method and body; 303 turns
/// the request into a GET.
pub fn follow(
    start: &str,
    mut send: impl FnMut(&str, Method) -> Result<Response, ureq::Error>,
) -> Result<Response, NetError> {
    let mut url = start.to_string();
    let mut method = Method::Original;
    for _ in 0..=MAX_REDIRECTS {
        let resp = send(&url, method)?;
        let status = resp.status().as_u16();
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            return Ok(resp);
        }
        let Some(location) = resp.headers().get("location").and_then(|v| v.to_str().ok()) else {
            return Ok(resp);
        };
        url = url::resolve_same_origin(&url, location.trim()).ok_or(NetError::Redirect(
            "the server redirected to another origin; nod does not follow that with its headers",
        ))?;
        if status == 303 {
            method = Method::Get;
        }
    }
    Err(NetError::Redirect("too many redirects"))
}

/// A response header as text.
pub fn header<'r>(resp: &'r Response, name: &str) -> Option<&'r str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}
