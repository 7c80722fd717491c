//! OAuth against one in-process world (`http_fixture`): an MCP endpoint (Streamable HTTP at
//! `/mcp`, or legacy HTTP+SSE at `/sse`) that answers 401 without the currently valid bearer
//! token, its protected resource metadata, and an authorization server (metadata,
//! registration, authorize with registered redirect URIs only, token with PKCE checks, revoke).
//! The browser is `BROWSER=curl -L`, which follows the 302 to nod's loopback callback. Each
//! test checks exit codes, messages naming the server, time, and what reached the fixture.
//! Token values are canaries that must never show in any output.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use nod::oauth::flow::{base64url, encode, parse_query};
use serde_json::{Value, json};

use crate::http_fixture::{Fixture, Reply, Request, init_result, result_msg, standard, text_result};
use crate::support::{Env, Output};

const NAME: &str = "srv";
const BROWSER: &str = "curl -s -L --max-time 10 -o /dev/null";
const CANARIES: &[&str] = &["tok-canary", "refresh-canary", "secret-canary", "hdr-canary"];
/// Terminal control sequences that a server string must never carry to stderr.
const ESCAPES: &[char] = &['\u{1b}', '\u{7}', '\r', '\u{9b}'];

/// What the world does; tests change it between runs.
#[derive(Clone)]
struct Knobs {
    /// expires_in of every grant, and of the authorization_code grant when that is set.
    expires_in: u64,
    code_expires_in: Option<u64>,
    /// The issuer the AS metadata names instead of the real one.
    metadata_issuer: Option<String>,
    pkce_advertised: bool,
    /// The callback's `iss`: the real issuer when None.
    iss: Option<String>,
    /// The callback carries no `iss` at all.
    omit_iss: bool,
    wrong_state: bool,
    refresh_fails: bool,
    /// tools/call needs these scopes (else 403 insufficient_scope); `always_forbid`: always 403.
    need_scope: Option<&'static str>,
    always_forbid: bool,
    client_secret: Option<&'static str>,
    /// The PRM's authorization_servers[0] instead of the real issuer.
    prm_server: Option<String>,
    /// The challenge's resource_metadata instead of the path-based PRM.
    challenge_prm: Option<String>,
    /// Protected resource metadata only at the root (resource = the origin), and a
    /// challenge without resource_metadata (conformance auth/metadata-var2).
    root_prm: bool,
    /// The authorization server's issuer path (`/tenant2`): another issuer, same endpoints.
    tenant: Option<&'static str>,
    /// AS metadata fields replaced (or added).
    metadata: Vec<(&'static str, Value)>,
    /// /authorize redirects with this error and error_description.
    authorize_error: Option<(String, String)>,
    /// /token answers 400 with this error and error_description.
    token_error: Option<(String, String)>,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            expires_in: 3600,
            code_expires_in: None,
            metadata_issuer: None,
            pkce_advertised: true,
            iss: None,
            omit_iss: false,
            wrong_state: false,
            refresh_fails: false,
            need_scope: None,
            always_forbid: false,
            client_secret: None,
            prm_server: None,
            challenge_prm: None,
            root_prm: false,
            tenant: None,
            metadata: Vec::new(),
            authorize_error: None,
            token_error: None,
        }
    }
}

/// What the authorization server has issued.
#[derive(Default)]
struct Books {
    n: usize,
    /// Valid access tokens and refresh tokens, each with its scope.
    access: HashMap<String, String>,
    refresh: HashMap<String, String>,
    /// code -> (code_challenge, redirect_uri, scope)
    codes: HashMap<String, (String, String, String)>,
    /// Registered clients: client_id -> redirect_uris.
    clients: HashMap<String, Vec<String>>,
    /// Legacy SSE: the open event streams, by the session in their endpoint.
    streams: HashMap<String, crossbeam_channel::Sender<String>>,
    /// Legacy SSE: the next tools/call POST finds every access token revoked.
    expire_on_call: bool,
}

struct World {
    env: Env,
    fx: Fixture,
    knobs: Arc<Mutex<Knobs>>,
    books: Arc<Mutex<Books>>,
    /// The profile's `type`: http or sse.
    kind: String,
}

impl World {
    fn new(tweak: impl FnOnce(&mut Knobs)) -> World {
        World::serving("http", tweak)
    }

    /// A world whose server `srv` is a legacy HTTP+SSE (`type: "sse"`) server at `/sse`.
    fn sse(tweak: impl FnOnce(&mut Knobs)) -> World {
        World::serving("sse", tweak)
    }

    fn serving(kind: &str, tweak: impl FnOnce(&mut Knobs)) -> World {
        let mut knobs = Knobs::default();
        tweak(&mut knobs);
        let knobs = Arc::new(Mutex::new(knobs));
        let books = Arc::new(Mutex::new(Books::default()));
        let base = Arc::new(OnceLock::<String>::new());
        let (k, b, origin) = (knobs.clone(), books.clone(), base.clone());
        let fx = Fixture::start(move |req| {
            let knobs = k.lock().unwrap().clone();
            handle(origin.get().unwrap(), &knobs, &mut b.lock().unwrap(), req)
        });
        base.set(fx.url("")).unwrap();
        let env = Env::new();
        let world = World { env, fx, knobs, books, kind: kind.to_string() };
        world.profile(&[NAME]);
        world
    }

    /// A profile whose servers all point at the one MCP endpoint.
    fn profile(&self, names: &[&str]) {
        let servers: serde_json::Map<String, Value> =
            names.iter().map(|n| (n.to_string(), json!({ "type": self.kind, "url": self.mcp() }))).collect();
        self.env.profile(json!({ "mcp": servers }));
    }

    /// A profile with the one server `srv` at the MCP endpoint, `extra` fields merged in.
    fn profile_with(&self, extra: Value) {
        let mut entry = json!({ "type": self.kind, "url": self.mcp() });
        crate::support::merge(&mut entry, extra);
        self.env.profile(json!({ "mcp": { NAME: entry } }));
    }

    /// The MCP endpoint: `/mcp`, or `/sse` for a legacy server.
    fn mcp(&self) -> String {
        self.fx.url(if self.kind == "sse" { "/sse" } else { "/mcp" })
    }

    /// `http://0.0.0.0:<the world's port>`: the unspecified address, which reaches this
    /// world on Linux.
    fn unspecified(&self) -> String {
        self.fx.url("").replace("127.0.0.1", "0.0.0.0")
    }

    fn issuer(&self) -> String {
        self.fx.url("")
    }

    fn set(&self, change: impl FnOnce(&mut Knobs)) {
        change(&mut self.knobs.lock().unwrap());
    }

    /// The server stops accepting every access token issued so far.
    fn reject_tokens(&self) {
        self.books.lock().unwrap().access.clear();
    }

    /// The next tools/call (legacy SSE) finds its token revoked, and gets 401.
    fn expire_on_call(&self) {
        self.books.lock().unwrap().expire_on_call = true;
    }

    fn run(&self, args: &[&str], browser: bool, log: Option<&str>) -> Output {
        self.run_with(args, browser, log, &[])
    }

    fn run_with(&self, args: &[&str], browser: bool, log: Option<&str>, env: &[(&str, &str)]) -> Output {
        let mut cmd = self.env.nod(args).timeout(40);
        for (key, value) in env {
            cmd = cmd.env(key, *value);
        }
        if browser {
            cmd = cmd.env("BROWSER", BROWSER);
        }
        if let Some(level) = log {
            cmd = cmd.env("NOD_LOG", level);
        }
        let out = cmd.run();
        for canary in CANARIES {
            out.stdout_lacks(canary).stderr_lacks(canary);
        }
        out
    }

    fn auth(&self) -> Output {
        self.run(&["mcp", "auth", NAME], true, None)
    }

    fn call(&self, browser: bool) -> Output {
        self.run(&["mcp", "tool", "call", NAME, "echo", "{}"], browser, None)
    }

    /// Requests from index `from` on whose path starts with `prefix`.
    fn seen(&self, from: usize, prefix: &str) -> Vec<Request> {
        self.fx.requests().into_iter().filter(|r| r.index >= from && r.path.starts_with(prefix)).collect()
    }

    fn mark(&self) -> usize {
        self.fx.requests().len()
    }

    /// The bearer tokens the MCP endpoint received from `from` on (None: no Authorization).
    fn bearers(&self, from: usize) -> Vec<Option<String>> {
        let strip = |r: &Request| r.header("authorization").map(|h| h.trim_start_matches("Bearer ").to_string());
        let mcp = |r: &Request| ["/mcp", "/sse", "/messages"].iter().any(|p| r.path.starts_with(p));
        self.fx.requests().iter().filter(|r| r.index >= from && mcp(r)).map(strip).collect()
    }

    fn creds(&self) -> Value {
        let text = std::fs::read_to_string(self.env.path("credentials.json")).expect("credentials.json");
        serde_json::from_str(&text).expect("credentials.json is JSON")
    }

    fn write_creds(&self, creds: &Value) {
        std::fs::write(self.env.path("credentials.json"), creds.to_string()).unwrap();
    }

    fn wire(&self) -> String {
        self.fx.summary().join("\n")
    }
}

fn form(req: &Request) -> HashMap<String, String> {
    parse_query(&String::from_utf8_lossy(&req.body)).into_iter().collect()
}

fn query(req: &Request) -> HashMap<String, String> {
    parse_query(req.path.split_once('?').map_or("", |(_, q)| q)).into_iter().collect()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn handle(base: &str, k: &Knobs, b: &mut Books, req: &Request) -> Reply {
    let path = req.path.split('?').next().unwrap_or("");
    let issuer = format!("{base}{}", k.tenant.map(|t| format!("/{t}")).unwrap_or_default());
    let prm = |resource: String| {
        let server = k.prm_server.clone().unwrap_or_else(|| issuer.clone());
        Reply::json(&json!({ "resource": resource, "authorization_servers": [server], "scopes_supported": ["base"] }))
    };
    match (req.method.as_str(), path) {
        (_, "/mcp") => {
            let scope = match bearer_scope(base, k, b, req, "/mcp") {
                Ok(scope) => scope,
                Err(reply) => return reply,
            };
            let granted: Vec<&str> = scope.split_whitespace().collect();
            let lacking = k.need_scope.is_some_and(|need| need.split_whitespace().any(|s| !granted.contains(&s)));
            if req.rpc() == Some("tools/call") && (k.always_forbid || lacking) {
                let need = k.need_scope.unwrap_or("more");
                let challenge = format!("Bearer error=\"insufficient_scope\", scope=\"{need}\"");
                return Reply::status(403).header("WWW-Authenticate", &challenge);
            }
            standard(req)
        }
        // Legacy HTTP+SSE: the stream announces its own message endpoint and carries answers.
        ("GET", "/sse") => {
            if let Err(reply) = bearer_scope(base, k, b, req, "/sse") {
                return reply;
            }
            let session = format!("s{}", b.streams.len() + 1);
            let (tx, rx) = crossbeam_channel::unbounded();
            b.streams.insert(session.clone(), tx);
            Reply::sse(&[format!("event: endpoint\ndata: /messages?session={session}\n\n")]).fed_by(rx)
        }
        ("POST", "/messages") => {
            if req.rpc() == Some("tools/call") && std::mem::take(&mut b.expire_on_call) {
                b.access.clear();
            }
            if let Err(reply) = bearer_scope(base, k, b, req, "/sse") {
                return reply;
            }
            let session = query(req).get("session").cloned().unwrap_or_default();
            let answer = match req.rpc() {
                Some("initialize") => Some(result_msg(req, init_result(req))),
                Some("tools/list") => {
                    Some(result_msg(req, json!({ "tools": [{ "name": "echo", "inputSchema": { "type": "object" } }] })))
                }
                Some("tools/call") => {
                    let name = req.json["params"]["name"].as_str().unwrap_or("?");
                    Some(result_msg(req, text_result(&format!("called {name}"))))
                }
                Some(_) if req.json.get("id").is_some() => Some(result_msg(req, json!({}))),
                _ => None,
            };
            if let (Some(answer), Some(stream)) = (answer, b.streams.get(&session)) {
                let _ = stream.send(format!("event: message\ndata: {answer}\n\n"));
            }
            Reply::status(202)
        }
        ("GET", "/.well-known/oauth-protected-resource/mcp") if !k.root_prm => prm(format!("{base}/mcp")),
        ("GET", "/.well-known/oauth-protected-resource/sse") if !k.root_prm => prm(format!("{base}/sse")),
        ("GET", "/.well-known/oauth-protected-resource") if k.root_prm => prm(base.to_string()),
        ("GET", p) if p == format!("/.well-known/oauth-authorization-server{}", &issuer[base.len()..]) => {
            let mut doc = json!({
                "issuer": k.metadata_issuer.clone().unwrap_or_else(|| issuer.clone()),
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "revocation_endpoint": format!("{base}/revoke"),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            });
            if !k.pkce_advertised {
                doc.as_object_mut().unwrap().remove("code_challenge_methods_supported");
            }
            for (key, value) in &k.metadata {
                doc[*key] = value.clone();
            }
            Reply::json(&doc)
        }
        ("POST", "/register") => {
            let client_id = format!("client-{}", b.clients.len() + 1);
            let redirect_uris: Vec<String> = req.json["redirect_uris"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            b.clients.insert(client_id.clone(), redirect_uris);
            let mut doc = json!({ "client_id": client_id, "redirect_uris": req.json["redirect_uris"] });
            if let Some(secret) = k.client_secret {
                doc["client_secret"] = json!(secret);
                doc["token_endpoint_auth_method"] = json!("client_secret_basic");
            }
            Reply::json(&doc).code(201)
        }
        ("GET", "/authorize") => {
            let q = query(req);
            let get = |key: &str| q.get(key).cloned().unwrap_or_default();
            // A strict authorization server: only a registered redirect URI, exactly.
            if !b.clients.get(&get("client_id")).is_some_and(|uris| uris.contains(&get("redirect_uri"))) {
                return Reply::status(400).body("text/plain", "unknown client or redirect_uri");
            }
            let state = if k.wrong_state { "not-the-state".to_string() } else { get("state") };
            if let Some((error, description)) = &k.authorize_error {
                let location = format!(
                    "{}?error={}&error_description={}&state={}",
                    get("redirect_uri"),
                    encode(error),
                    encode(description),
                    encode(&state)
                );
                return Reply::status(302).header("Location", &location);
            }
            let code = format!("code-{}", b.codes.len() + 1);
            b.codes.insert(code.clone(), (get("code_challenge"), get("redirect_uri"), get("scope")));
            let iss = k.iss.clone().unwrap_or_else(|| issuer.clone());
            let mut location = format!("{}?code={code}&state={}", get("redirect_uri"), encode(&state));
            if !k.omit_iss {
                location.push_str(&format!("&iss={}", encode(&iss)));
            }
            Reply::status(302).header("Location", &location)
        }
        ("POST", "/token") => match &k.token_error {
            Some((error, description)) => {
                Reply::json(&json!({ "error": error, "error_description": description })).code(400)
            }
            None => token(k, b, &form(req)),
        },
        ("POST", "/revoke") => Reply::status(200),
        _ => Reply::status(404),
    }
}

/// The scope of the request's valid bearer token, or the 401 that answers it.
fn bearer_scope(base: &str, k: &Knobs, b: &Books, req: &Request, endpoint: &str) -> Result<String, Reply> {
    let token = req.header("authorization").and_then(|h| h.strip_prefix("Bearer "));
    if let Some(scope) = token.and_then(|t| b.access.get(t)) {
        return Ok(scope.clone());
    }
    let challenge = match (&k.challenge_prm, k.root_prm) {
        (Some(url), _) => format!("Bearer resource_metadata=\"{url}\""),
        (None, true) => "Bearer".to_string(),
        (None, false) => format!("Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource{endpoint}\""),
    };
    Err(Reply::status(401).header("WWW-Authenticate", &challenge))
}

fn token(k: &Knobs, b: &mut Books, f: &HashMap<String, String>) -> Reply {
    let invalid = || Reply::json(&json!({ "error": "invalid_grant" })).code(400);
    let get = |key: &str| f.get(key).cloned().unwrap_or_default();
    let (scope, expires_in) = match get("grant_type").as_str() {
        "authorization_code" => {
            let Some((challenge, redirect_uri, scope)) = b.codes.remove(&get("code")) else { return invalid() };
            let computed = base64url(&nod::sha256::digest(get("code_verifier").as_bytes()));
            if computed != challenge || redirect_uri != get("redirect_uri") {
                return invalid();
            }
            (scope, k.code_expires_in.unwrap_or(k.expires_in))
        }
        "refresh_token" if !k.refresh_fails => match b.refresh.remove(&get("refresh_token")) {
            Some(scope) => (scope, k.expires_in),
            None => return invalid(),
        },
        _ => return invalid(),
    };
    b.n += 1;
    let (access, refresh) = (format!("tok-canary-{}", b.n), format!("refresh-canary-{}", b.n));
    b.access.insert(access.clone(), scope.clone());
    b.refresh.insert(refresh.clone(), scope.clone());
    Reply::json(&json!({
        "access_token": access, "token_type": "Bearer", "expires_in": expires_in,
        "refresh_token": refresh, "scope": scope,
    }))
}

/// An authorized world: `nod mcp auth srv` has run and stored tok-canary-1.
fn authorized(tweak: impl FnOnce(&mut Knobs)) -> World {
    let w = World::new(tweak);
    w.auth().code(0).within(15.0).stdout_has("authorized server srv");
    assert_eq!(w.creds()["servers"][NAME]["access_token"], "tok-canary-1", "{}", w.wire());
    w
}

#[test]
fn oauth_full_flow_registers_authorizes_with_pkce_and_stores_the_token_privately() {
    let w = World::new(|_| {});
    let out = w.auth();
    out.code(0).within(15.0).stdout_has("authorized server srv").stderr_line_has(&["authorize server srv"]);
    out.stderr_has(&format!("{}/authorize?", w.issuer()));
    let wire = w.wire();
    let registrations = w.seen(0, "/register");
    assert_eq!(registrations.len(), 1, "{wire}");
    let authorize = w.seen(0, "/authorize");
    assert_eq!(authorize.len(), 1, "{wire}");
    let q = query(&authorize[0]);
    assert_eq!(q["response_type"], "code", "{wire}");
    assert_eq!(q["code_challenge_method"], "S256", "{wire}");
    assert!(q["state"].len() >= 16, "{wire}");
    assert_eq!(q["resource"], w.mcp(), "{wire}");
    assert_eq!(q["client_id"], "client-1", "{wire}");
    let redirect = &q["redirect_uri"];
    assert!(redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"), "{wire}");
    assert_eq!(registrations[0].json["redirect_uris"], json!([redirect]), "{wire}");
    let tokens = w.seen(0, "/token");
    assert_eq!(tokens.len(), 1, "{wire}");
    let f = form(&tokens[0]);
    assert_eq!(f["grant_type"], "authorization_code", "{wire}");
    assert_eq!(base64url(&nod::sha256::digest(f["code_verifier"].as_bytes())), q["code_challenge"], "{wire}");
    assert_eq!((&f["resource"], &f["redirect_uri"], &f["client_id"]), (&w.mcp(), redirect, &q["client_id"]));
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(w.env.path("credentials.json")).expect("credentials.json exists");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let entry = &w.creds()["servers"][NAME];
    assert_eq!((&entry["access_token"], &entry["resource"]), (&json!("tok-canary-1"), &json!(w.mcp())));
    let bearers = w.bearers(0);
    assert_eq!(bearers[0], None, "the first request carries no token: {wire}");
    assert!(bearers[1..].iter().all(|b| b.as_deref() == Some("tok-canary-1")), "{wire}");

    let mark = w.mark();
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    let bearers = w.bearers(mark);
    assert!(!bearers.is_empty() && bearers.iter().all(|b| b.as_deref() == Some("tok-canary-1")), "{}", w.wire());
    assert!(w.seen(mark, "/authorize").is_empty() && w.seen(mark, "/token").is_empty(), "{}", w.wire());
}

#[test]
fn oauth_token_about_to_expire_is_refreshed_before_it_is_used() {
    // A token that lives 30 s is used, not refreshed at once: nod refreshes half-way through
    // a lifetime under two minutes (else a minute before expiry), so short tokens do not cause
    // a refresh before every request.
    let w = World::new(|k| k.code_expires_in = Some(30));
    w.auth().code(0).within(15.0);
    let grants: Vec<_> = w.seen(0, "/token").iter().map(form).collect();
    assert_eq!(grants.len(), 1, "{}", w.wire());
    assert!(w.bearers(0).contains(&Some("tok-canary-1".into())), "{}", w.wire());
    let entry = &w.creds()["servers"][NAME];
    let (expires, refresh) = (entry["expires_at"].as_u64().unwrap(), entry["refresh_at"].as_u64().unwrap());
    assert!(refresh < expires && expires - refresh <= 16, "{entry}");

    // A later command finds a stored token past its refresh time, 30 s before expiry.
    let mut creds = w.creds();
    creds["servers"][NAME]["expires_at"] = json!(now() + 30);
    creds["servers"][NAME]["refresh_at"] = json!(now() - 1);
    w.write_creds(&creds);
    let mark = w.mark();
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    let grants: Vec<_> = w.seen(mark, "/token").iter().map(form).collect();
    assert_eq!(grants.len(), 1, "{}", w.wire());
    assert_eq!((&grants[0]["grant_type"], &grants[0]["resource"]), (&"refresh_token".into(), &w.mcp()));
    assert_eq!(grants[0]["refresh_token"], "refresh-canary-1");
    let bearers = w.bearers(mark);
    assert!(bearers.iter().all(|b| b.as_deref() == Some("tok-canary-2")), "{}", w.wire());
    let entry = &w.creds()["servers"][NAME];
    assert_eq!(entry["access_token"], "tok-canary-2");
    assert!(entry["expires_at"].as_u64().unwrap() > now() + 3000, "{entry}");
}

#[test]
fn oauth_401_with_a_stored_token_refreshes_and_retries_once() {
    let w = authorized(|_| {});
    w.reject_tokens();
    let mark = w.mark();
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    let grants: Vec<_> = w.seen(mark, "/token").iter().map(form).collect();
    assert_eq!(grants.len(), 1, "{}", w.wire());
    assert_eq!((&grants[0]["grant_type"], &grants[0]["resource"]), (&"refresh_token".into(), &w.mcp()));
    let bearers = w.bearers(mark);
    assert_eq!(bearers[0].as_deref(), Some("tok-canary-1"), "{}", w.wire());
    assert!(bearers[1..].iter().all(|b| b.as_deref() == Some("tok-canary-2")), "{}", w.wire());
    assert!(w.seen(mark, "/authorize").is_empty(), "{}", w.wire());
    assert_eq!(w.creds()["servers"][NAME]["access_token"], "tok-canary-2");
}

#[test]
fn oauth_revoked_refresh_token_without_a_browser_tells_the_user_to_authorize() {
    let w = authorized(|_| {});
    w.reject_tokens();
    w.set(|k| k.refresh_fails = true);
    let mark = w.mark();
    let out = w.call(false);
    out.code(2).within(5.0).stderr_line_has(&["srv", "run nod mcp auth srv"]);
    assert_eq!(w.seen(mark, "/token").len(), 1, "one refresh attempt: {}", w.wire());
    assert!(w.seen(mark, "/authorize").is_empty() && w.seen(mark, "/register").is_empty(), "{}", w.wire());
}

#[test]
fn oauth_malformed_entry_of_another_server_is_isolated_and_replaced() {
    let w = authorized(|_| {});
    w.profile(&[NAME, "other"]);
    let mut creds = w.creds();
    creds["servers"]["other"] = json!({ "access_token": 3, "resource": null });
    w.write_creds(&creds);
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    let list = w.run(&["mcp", "list"], false, None);
    list.code(0).within(5.0).stdout_has("other").stdout_has("malformed");
    // Under --json, auth prints one document (issue 11).
    let auth = w.run(&["mcp", "auth", "other", "--json"], true, None);
    auth.code(0).within(15.0);
    assert_eq!(
        (&auth.json()["server"], &auth.json()["authorized"]),
        (&json!("other"), &json!(true)),
        "{}",
        auth.dump()
    );
    let creds = w.creds();
    assert_eq!(creds["servers"]["other"]["access_token"], "tok-canary-2");
    assert_eq!(creds["servers"][NAME]["access_token"], "tok-canary-1", "srv's entry is kept");

    let mut creds = creds;
    creds["servers"]["other"] = json!("garbage");
    w.write_creds(&creds);
    let out = w.run(&["mcp", "logout", "other", "--json"], false, None);
    out.code(0).within(5.0);
    assert_eq!(out.json()["server"], "other", "{}", out.dump());
    let creds = w.creds();
    assert!(creds["servers"].get("other").is_none() && creds["servers"].get(NAME).is_some(), "{creds}");
    w.call(false).code(0).within(10.0).stdout_has("called echo");
}

#[test]
fn oauth_metadata_naming_another_issuer_is_refused_before_authorizing() {
    let w = World::new(|k| k.metadata_issuer = Some("http://127.0.0.1:1/elsewhere".into()));
    let out = w.auth();
    // nod scrubs URLs from messages, so the issuers themselves show as <url>.
    out.code(2).within(10.0).stderr_line_has(&["server srv", "authorization failed", "issuer", "refusing"]);
    assert!(w.seen(0, "/authorize").is_empty() && w.seen(0, "/register").is_empty(), "{}", w.wire());
    assert!(!w.env.path("credentials.json").exists());
}

#[test]
fn oauth_callback_from_another_issuer_is_refused_before_the_token_request() {
    let w = World::new(|k| k.iss = Some("http://127.0.0.1:1/elsewhere".into()));
    let out = w.auth();
    out.code(2).within(10.0).stderr_line_has(&["server srv", "callback names another issuer", "refusing"]);
    assert_eq!(w.seen(0, "/authorize").len(), 1, "{}", w.wire());
    assert!(w.seen(0, "/token").is_empty(), "{}", w.wire());
}

#[test]
fn oauth_issuers_compare_exactly_and_a_promised_iss_must_be_there() {
    // The issuer with a slash added is another issuer (RFC 9207: no normalisation).
    let w = World::new(|_| {});
    let slashed = format!("{}/", w.issuer());
    w.set(|k| k.iss = Some(slashed));
    w.auth().code(2).within(10.0).stderr_line_has(&["server srv", "callback names another issuer"]);
    assert!(w.seen(0, "/token").is_empty(), "{}", w.wire());
    // authorization_response_iss_parameter_supported: a callback without iss is refused.
    let w = World::new(|k| {
        k.omit_iss = true;
        k.metadata.push(("authorization_response_iss_parameter_supported", json!(true)));
    });
    w.auth().code(2).within(10.0).stderr_line_has(&["server srv", "callback has no iss"]);
    assert!(w.seen(0, "/token").is_empty(), "{}", w.wire());
    // Without that promise, no iss is fine.
    let w = World::new(|k| k.omit_iss = true);
    w.auth().code(0).within(10.0);
}

/// Any local process can reach the callback listener: a redirect with another state is
/// answered 404 and ignored, and the authorization goes on until the right one arrives.
#[test]
fn oauth_callback_with_the_wrong_state_is_ignored_and_the_flow_goes_on() {
    let w = World::new(|k| k.wrong_state = true);
    let running = w.env.nod(["mcp", "auth", NAME]).env("BROWSER", BROWSER).timeout(40).spawn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let authorize = loop {
        if let Some(req) = w.seen(0, "/authorize").pop() {
            break req;
        }
        assert!(std::time::Instant::now() < deadline, "no /authorize: {}", w.wire());
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let q = query(&authorize);
    // The browser (curl) followed the redirect with the wrong state; nod must still wait.
    let callback =
        format!("{}?code=code-1&state={}&iss={}", q["redirect_uri"], encode(&q["state"]), encode(&w.issuer()));
    let status = get_status(&callback.replace("state=", "state=x"));
    assert_eq!(status, 404, "a wrong state is refused");
    assert!(w.seen(0, "/token").is_empty(), "{}", w.wire());
    assert_eq!(get_status(&callback), 200, "the right state completes the flow");
    let out = running.wait();
    out.code(0).stdout_has("authorized server srv");
    assert_eq!(w.seen(0, "/token").len(), 1, "{}", w.wire());
}

/// A plain HTTP GET to a loopback URL; its status.
fn get_status(url: &str) -> u16 {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest.split_once('/').expect("a path");
    let mut stream = std::net::TcpStream::connect(host).expect("connect to the callback");
    write!(stream, "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").expect("send the callback");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn oauth_metadata_without_pkce_is_refused_before_authorizing() {
    let w = World::new(|k| k.pkce_advertised = false);
    w.auth().code(2).within(10.0).stderr_line_has(&["srv", "S256"]);
    assert!(w.seen(0, "/authorize").is_empty() && w.seen(0, "/register").is_empty(), "{}", w.wire());
}

#[test]
fn oauth_logout_revokes_the_refresh_token_and_forgets_it() {
    let w = authorized(|_| {});
    let mark = w.mark();
    let out = w.run(&["mcp", "logout", NAME], false, None);
    out.code(0).within(5.0).stdout_has("logged out of server srv").stdout_has("revoked");
    let revokes = w.seen(mark, "/revoke");
    assert_eq!(revokes.len(), 1, "{}", w.wire());
    let f = form(&revokes[0]);
    assert_eq!((&f["token"], &f["token_type_hint"]), (&"refresh-canary-1".into(), &"refresh_token".into()));
    assert!(w.creds()["servers"].get(NAME).is_none(), "{}", w.creds());
    let again = w.run(&["mcp", "logout", NAME], false, None);
    again.code(2).within(5.0).stderr_line_has(&["no stored credentials", "srv"]);
    assert_eq!(w.seen(mark, "/revoke").len(), 1, "{}", w.wire());
}

#[test]
fn oauth_tokens_and_client_secrets_never_reach_any_output() {
    // Every run goes through `World::run`, which fails on a canary in stdout or stderr.
    let w = World::new(|k| k.client_secret = Some("secret-canary-1"));
    w.run(&["mcp", "auth", NAME], true, Some("trace")).code(0);
    let basic = w.seen(0, "/token")[0].header("authorization").map(str::to_string);
    assert!(basic.is_some_and(|b| b.starts_with("Basic ")), "{}", w.wire());
    w.call(false).code(0).stdout_has("called echo");
    w.run(&["mcp", "tool", "call", NAME, "echo", "{}"], false, Some("debug")).code(0);
    // An empty level is every level to env_logger: the HTTP stack's records stay out anyway.
    for spelling in ["ureq=", "warn,ureq_proto=,rustls="] {
        w.run(&["mcp", "tool", "call", NAME, "echo", "{}"], false, Some(spelling)).code(0);
    }
    w.run(&["mcp", "list"], false, None).code(0).stdout_has("srv");
    w.run(&["mcp", "list", "--connect", "--json"], false, None).code(0);
    w.run(&["status", "--json"], false, None).code(0);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(w.env.home(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(w.env.path("mcp.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
    w.run(&["doctor"], false, None).code(0).stdout_lacks("credentials");
    w.reject_tokens();
    w.run(&["mcp", "tool", "call", NAME, "echo", "{}"], false, Some("trace")).code(0);
    assert_eq!(w.seen(0, "/token").len(), 2, "the traced run refreshed: {}", w.wire());
    w.run(&["mcp", "logout", NAME], false, Some("trace")).code(0);
}

#[test]
fn oauth_noninteractive_without_a_token_fails_fast_and_never_starts_the_flow() {
    let w = World::new(|_| {});
    let out = w.call(false);
    out.code(2).within(5.0).stderr_line_has(&["srv", "run nod mcp auth srv"]).stderr_lacks("/authorize?");
    let wire = w.wire();
    assert!(w.seen(0, "/authorize").is_empty() && w.seen(0, "/register").is_empty(), "{wire}");
    assert!(w.seen(0, "/token").is_empty(), "{wire}");
    assert!(!w.env.path("credentials.json").exists());
}

#[test]
fn oauth_insufficient_scope_steps_up_with_the_union_and_gives_up_after_three() {
    let w = authorized(|k| k.need_scope = Some("a b"));
    assert_eq!(query(&w.seen(0, "/authorize")[0])["scope"], "base", "{}", w.wire());
    let mark = w.mark();
    w.call(true).code(0).within(15.0).stdout_has("called echo");
    let authorize = w.seen(mark, "/authorize");
    assert_eq!(authorize.len(), 1, "{}", w.wire());
    let scope = query(&authorize[0])["scope"].clone();
    let mut scopes: Vec<&str> = scope.split_whitespace().collect();
    scopes.sort_unstable();
    assert_eq!(scopes, ["a", "b", "base"], "{}", w.wire());
    let calls: Vec<_> = w.seen(mark, "/mcp").into_iter().filter(|r| r.rpc() == Some("tools/call")).collect();
    assert_eq!(calls.len(), 2, "{}", w.wire());
    assert_eq!(calls[1].header("authorization"), Some("Bearer tok-canary-2"), "{}", w.wire());

    w.set(|k| k.always_forbid = true);
    let mark = w.mark();
    let out = w.call(true);
    out.code(2).within(20.0).stderr_line_has(&["srv", "scope"]);
    let rounds = w.seen(mark, "/authorize").len();
    assert_eq!(rounds, 3, "authorizations in one process: {}", w.wire());
}

/// No control character of a server string reaches stderr.
fn assert_no_escapes(out: &Output) {
    for escape in ESCAPES {
        out.stderr_lacks(&escape.to_string());
    }
}

/// No request after `mark` reached the authorization server's registration, authorize or
/// token endpoints.
fn assert_no_flow(w: &World, mark: usize) {
    let wire = w.wire();
    assert!(w.seen(mark, "/register").is_empty(), "{wire}");
    assert!(w.seen(mark, "/authorize").is_empty(), "{wire}");
    assert!(w.seen(mark, "/token").is_empty(), "{wire}");
}

/// Issue 10, item 1: a loopback resource naming a plain-http authorization server elsewhere
/// would get the code, the verifier and later refresh tokens in cleartext.
#[test]
fn oauth_plain_http_authorization_server_on_another_host_is_refused_before_any_request() {
    let w = World::new(|k| k.prm_server = Some("http://example.invalid:1".into()));
    let out = w.auth();
    // No connection attempt: refused at once, well under the 15 s connect timeout.
    out.code(2).within(5.0).stderr_line_has(&["server srv", "authorization server", "https", "loopback"]);
    assert_no_flow(&w, 0);
    assert!(!w.env.path("credentials.json").exists());
}

#[test]
fn oauth_urls_on_the_unspecified_address_are_refused_before_any_request() {
    // 0.0.0.0 reaches this machine on Linux: without the rule the world would see requests.
    let w = World::new(|_| {});
    let zero = w.unspecified();
    w.set(|k| k.metadata = vec![("token_endpoint", json!(format!("{zero}/token")))]);
    let out = w.auth();
    out.code(2).within(5.0).stderr_line_has(&["server srv", "token endpoint", "unspecified address"]);
    assert_no_flow(&w, 0);

    w.set(|k| {
        k.metadata.clear();
        k.challenge_prm = Some(format!("{zero}/.well-known/oauth-protected-resource/mcp"));
    });
    let mark = w.mark();
    let out = w.auth();
    out.code(2).within(5.0).stderr_line_has(&["server srv", "protected resource metadata", "unspecified address"]);
    assert!(w.seen(mark, "/.well-known").is_empty(), "{}", w.wire());
    assert_no_flow(&w, mark);
}

#[test]
fn oauth_stored_endpoints_that_break_the_url_rule_are_never_contacted() {
    let w = authorized(|_| {});
    let zero = w.unspecified();
    let mut creds = w.creds();
    creds["servers"][NAME]["token_endpoint"] = json!(format!("{zero}/token"));
    creds["servers"][NAME]["revocation_endpoint"] = json!(format!("{zero}/revoke"));
    w.write_creds(&creds);
    w.reject_tokens();
    let mark = w.mark();
    let out = w.call(false);
    out.code(2).within(5.0).stderr_line_has(&["srv", "token endpoint", "unspecified address"]);
    assert!(w.seen(mark, "/token").is_empty(), "{}", w.wire());
    let out = w.run(&["mcp", "logout", NAME], false, None);
    out.code(0).within(5.0).stdout_has("logged out of server srv locally").stdout_has("unspecified address");
    assert!(w.seen(mark, "/revoke").is_empty(), "{}", w.wire());
    assert!(w.creds()["servers"].get(NAME).is_none(), "{}", w.creds());
}

/// Issue 10, item 5: an OSC-8 link, a screen clear and a line rewrite in server strings.
#[test]
fn oauth_server_strings_never_reach_the_terminal_with_their_escapes() {
    let trap = "\u{1b}]8;;http://evil.example/\u{7}click\u{1b}]8;;\u{7}\u{1b}[2K\r\u{9b}1A";
    let w = World::new(|k| k.authorize_error = Some((format!("access_denied{trap}"), format!("denied{trap}"))));
    let out = w.auth();
    out.code(2).within(10.0).stderr_line_has(&["server srv", "access_denied", "denied"]);
    assert_no_escapes(&out);
    assert!(w.seen(0, "/token").is_empty(), "{}", w.wire());

    w.set(|k| {
        k.authorize_error = None;
        k.token_error = Some((format!("invalid_grant{trap}"), format!("the code is used{trap}")));
    });
    let out = w.auth();
    out.code(2).within(10.0).stderr_line_has(&["server srv", "token endpoint", "invalid_grant", "the code is used"]);
    assert_no_escapes(&out);

    w.set(|k| {
        k.token_error = None;
        k.metadata = vec![("authorization_endpoint", json!(format!("{}/authorize{trap}", w.issuer())))];
    });
    let mark = w.mark();
    let out = w.auth();
    out.code(2).within(10.0).stderr_line_has(&["server srv", "authorization endpoint"]);
    assert_no_escapes(&out);
    assert_no_flow(&w, mark);

    // Not https: neither printed nor opened.
    w.set(|k| k.metadata = vec![("authorization_endpoint", json!("file:///etc/passwd"))]);
    let mark = w.mark();
    let out = w.auth();
    out.code(2).within(10.0).stderr_line_has(&["server srv", "authorization endpoint", "https"]);
    out.stderr_lacks("passwd").stderr_lacks("open this URL");
    assert_no_flow(&w, mark);
}

/// Issue 10, item 9 (conformance auth/metadata-var2): metadata at the root names the origin
/// as the resource, and that is the resource indicator, on every request.
#[test]
fn oauth_resource_is_sent_exactly_as_the_protected_resource_metadata_names_it() {
    let w = World::new(|k| k.root_prm = true);
    w.auth().code(0).within(15.0).stdout_has("authorized server srv");
    let origin = w.issuer();
    let wire = w.wire();
    assert_eq!(w.seen(0, "/.well-known/oauth-protected-resource/mcp").len(), 1, "path first: {wire}");
    assert_eq!(query(&w.seen(0, "/authorize")[0])["resource"], origin, "{wire}");
    assert_eq!(form(&w.seen(0, "/token")[0])["resource"], origin, "{wire}");
    assert_eq!(w.creds()["servers"][NAME]["resource"], json!(origin));

    // The stored credential covers the server URL: it is used, and refreshed for the origin.
    w.reject_tokens();
    let mark = w.mark();
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    let grants: Vec<_> = w.seen(mark, "/token").iter().map(form).collect();
    assert_eq!(grants.len(), 1, "{}", w.wire());
    assert_eq!((&grants[0]["grant_type"], &grants[0]["resource"]), (&"refresh_token".into(), &origin));
    assert!(w.bearers(mark)[1..].iter().all(|b| b.as_deref() == Some("tok-canary-2")), "{}", w.wire());

    // A credential for another resource is never sent here.
    let mut creds = w.creds();
    creds["servers"][NAME]["resource"] = json!("http://127.0.0.2:1");
    w.write_creds(&creds);
    let mark = w.mark();
    w.call(false).code(2).within(5.0).stderr_line_has(&["srv", "run nod mcp auth srv"]);
    assert!(w.bearers(mark).iter().all(Option::is_none), "{}", w.wire());
}

/// Issue 10, item 11: a `type: "sse"` server gets the same 401 handling, discovery, token
/// use and refresh as Streamable HTTP, on its GET stream and on its POSTs.
#[test]
fn oauth_protects_a_legacy_sse_server_as_it_does_streamable_http() {
    let w = World::sse(|_| {});
    w.auth().code(0).within(15.0).stdout_has("authorized server srv");
    let wire = w.wire();
    assert_eq!(query(&w.seen(0, "/authorize")[0])["resource"], w.mcp(), "{wire}");
    assert_eq!(w.creds()["servers"][NAME]["access_token"], "tok-canary-1");

    let mark = w.mark();
    // Traced: the canaries must not show in nod's own log either.
    let out = w.run(&["mcp", "tool", "call", NAME, "echo", "{}"], false, Some("trace"));
    out.code(0).within(10.0).stdout_has("called echo");
    let bearers = w.bearers(mark);
    assert!(bearers.len() >= 3 && bearers.iter().all(|b| b.as_deref() == Some("tok-canary-1")), "{}", w.wire());
    assert!(w.seen(mark, "/token").is_empty(), "{}", w.wire());

    // A 401 to the GET stream: refresh, then the stream again.
    w.reject_tokens();
    let mark = w.mark();
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    let grants: Vec<_> = w.seen(mark, "/token").iter().map(form).collect();
    assert_eq!(grants.len(), 1, "{}", w.wire());
    assert_eq!((&grants[0]["grant_type"], &grants[0]["resource"]), (&"refresh_token".into(), &w.mcp()));
    let bearers = w.bearers(mark);
    assert_eq!(bearers[0].as_deref(), Some("tok-canary-1"), "{}", w.wire());
    assert!(bearers[1..].iter().all(|b| b.as_deref() == Some("tok-canary-2")), "{}", w.wire());

    // A 401 to a POST: refresh, then the POST again.
    w.expire_on_call();
    let mark = w.mark();
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    assert_eq!(w.seen(mark, "/token").len(), 1, "{}", w.wire());
    let calls: Vec<_> = w.seen(mark, "/messages").into_iter().filter(|r| r.rpc() == Some("tools/call")).collect();
    let tokens: Vec<_> = calls.iter().map(|r| r.header("authorization")).collect();
    assert_eq!(tokens, [Some("Bearer tok-canary-2"), Some("Bearer tok-canary-3")], "{}", w.wire());

    // A POST whose refresh is refused says what to do.
    w.expire_on_call();
    w.set(|k| k.refresh_fails = true);
    let out = w.call(false);
    out.code(2).within(10.0).stderr_line_has(&["nod: server srv", "tool echo", "run nod mcp auth srv"]);
}

/// Issue 10, item 23: the registered client is kept per server and issuer.
#[test]
fn oauth_registered_client_is_reused_per_issuer_and_registered_anew_for_another() {
    let w = authorized(|k| k.client_secret = Some("secret-canary-1"));
    let first = w.seen(0, "/register")[0].json["redirect_uris"][0].as_str().unwrap().to_string();
    let kept = &w.creds()["clients"][NAME][w.issuer()];
    assert_eq!((&kept["client_id"], &kept["redirect_uri"]), (&json!("client-1"), &json!(first)), "{kept}");
    let basic = format!("Basic {}", nod::oauth::flow::base64(b"client-1:secret-canary-1"));
    let mark = w.mark();
    // Traced: the stored client secret must not show in nod's own log.
    let out = w.run(&["mcp", "auth", NAME], true, Some("trace"));
    out.code(0).within(15.0).stdout_has("authorized server srv");
    let wire = w.wire();
    assert!(w.seen(mark, "/register").is_empty(), "registered again: {wire}");
    let q = query(&w.seen(mark, "/authorize")[0]);
    assert_eq!((q["client_id"].as_str(), q["redirect_uri"].as_str()), ("client-1", first.as_str()), "{wire}");
    assert_eq!(w.seen(mark, "/token")[0].header("authorization"), Some(basic.as_str()), "{wire}");

    // Another issuer: another registration, kept beside the first.
    w.set(|k| k.tenant = Some("tenant2"));
    let mark = w.mark();
    w.auth().code(0).within(15.0).stdout_has("authorized server srv");
    assert_eq!(w.seen(mark, "/register").len(), 1, "{}", w.wire());
    assert_eq!(query(&w.seen(mark, "/authorize")[0])["client_id"], "client-2", "{}", w.wire());

    w.set(|k| k.tenant = None);
    let mark = w.mark();
    w.auth().code(0).within(15.0).stdout_has("authorized server srv");
    assert!(w.seen(mark, "/register").is_empty(), "{}", w.wire());
    assert_eq!(query(&w.seen(mark, "/authorize")[0])["client_id"], "client-1", "{}", w.wire());

    // An authorization server that no longer knows the client: it is forgotten.
    w.set(|k| k.token_error = Some(("invalid_client".into(), "unknown client".into())));
    let out = w.auth();
    out.code(2).within(15.0).stderr_line_has(&["server srv", "invalid_client", "registers again"]);
    w.set(|k| k.token_error = None);
    let mark = w.mark();
    w.auth().code(0).within(15.0).stdout_has("authorized server srv");
    assert_eq!(w.seen(mark, "/register").len(), 1, "{}", w.wire());
    assert_eq!(query(&w.seen(mark, "/authorize")[0])["client_id"], "client-3", "{}", w.wire());

    // Logout forgets the registrations too.
    w.run(&["mcp", "logout", NAME], false, None).code(0).within(5.0);
    let mark = w.mark();
    w.auth().code(0).within(15.0);
    assert_eq!(w.seen(mark, "/register").len(), 1, "{}", w.wire());
}

/// Issue 10, item 23: a 401 to configured credentials names the field, never the value,
/// and does not send the user to OAuth.
#[test]
fn oauth_401_to_configured_header_credentials_names_the_field_and_starts_no_oauth() {
    let w = World::new(|_| {});
    let env = [("NOD_IT_TOKEN", "hdr-canary-2"), ("NOD_IT_KEY", "hdr-canary-3")];
    let cases = [
        (json!({ "bearer_token_env": "NOD_IT_TOKEN" }), "bearer_token_env"),
        (json!({ "header_env": { "X-Api-Key": "NOD_IT_KEY" } }), "header_env"),
        (json!({ "headers": { "X-Api-Key": "hdr-canary-1" } }), "headers"),
    ];
    for (extra, field) in cases {
        w.profile_with(extra);
        let mark = w.mark();
        let out = w.run_with(&["mcp", "tool", "call", NAME, "echo", "{}"], false, Some("trace"), &env);
        out.code(2).within(5.0).stderr_line_has(&["server srv", "refused the configured credentials", field]);
        out.stderr_lacks("nod mcp auth");
        assert!(w.seen(mark, "/.well-known").is_empty(), "{}", w.wire());
        assert!(!w.seen(mark, "/mcp").is_empty(), "{}", w.wire());
    }

    // With an oauth object, OAuth runs beside the headers.
    w.profile_with(json!({ "headers": { "X-Workspace": "w1" }, "oauth": {} }));
    w.auth().code(0).within(15.0).stdout_has("authorized server srv");
    let mark = w.mark();
    w.call(false).code(0).within(10.0).stdout_has("called echo");
    let calls = w.seen(mark, "/mcp");
    assert!(calls.iter().all(|r| r.header("x-workspace") == Some("w1")), "{}", w.wire());
    assert!(w.bearers(mark).iter().all(|b| b.is_some()), "{}", w.wire());
}

#[test]
fn oauth_from_the_shell_runs_in_place_with_a_hidden_paste_and_the_server_connects() {
    let w = World::new(|_| {});
    let mut term = w.env.nod(Vec::<String>::new()).timeout(40).spawn_on_terminal();
    term.next("✗ srv needs authorization: /mcp auth srv --open").next("nod> ").type_line("/mcp auth srv");
    term.next("open this URL in a browser:\n");
    term.next("\nnod: waiting for the browser");
    let shown = term.shown();
    let start = shown.find("open this URL in a browser:\n").unwrap() + "open this URL in a browser:\n".len();
    let url = shown[start..].lines().next().unwrap().trim().to_string();
    assert!(url.starts_with(&format!("{}/authorize?", w.issuer())), "{url}");
    // A browser elsewhere: the authorization server's redirect, pasted on the terminal.
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{redirect_url}", &url])
        .output()
        .expect("curl");
    let redirect = String::from_utf8(out.stdout).unwrap();
    assert!(redirect.contains("/callback?") && redirect.contains("code="), "{redirect}");
    term.next("paste the final redirect URL here").type_line(&redirect);
    term.next("authorized server srv").next("✓ srv ready").next("nod> ");
    term.type_line("/mcp list").next("srv  transport=http state=ready").next("nod> ");
    term.keys(&[4]);
    let (code, shown) = term.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("code="), "the pasted redirect is not echoed: {shown}");
    for canary in CANARIES {
        assert!(!shown.contains(canary), "{canary} shown: {shown}");
    }
    assert_eq!(w.creds()["servers"][NAME]["access_token"], "tok-canary-1", "{}", w.wire());
}

#[test]
fn oauth_in_acp_never_starts_a_flow_and_uses_stored_tokens() {
    use crate::acp::Client;
    use crate::ask::call;
    use crate::model::{Model, Step, tool_messages};
    let w = World::new(|_| {});
    let ws = w.env.path("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let entry = json!([{ "type": "http", "name": NAME, "url": w.mcp(), "headers": [] }]);
    let model = Model::start(vec![
        Step::Calls(String::new(), vec![call("capability_search", json!({ "query": "srv echo" }))]),
        Step::Text("It needs authorization.".into()),
        Step::Calls(String::new(), vec![call("mcp_select_tool", json!({ "name": "mcp_srv_echo" }))]),
        Step::Calls(String::new(), vec![call("mcp_srv_echo", json!({}))]),
        Step::Text("Called.".into()),
    ]);
    let mut client = Client::start_with(&w.env, &model, &[("NOD_PERMISSION_MODE", "full-access")]);
    client.initialize(json!({}));
    let session = client.new_session(&ws.display().to_string(), entry.clone());
    let id = client
        .request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "use srv" }] }));
    let answer = client.answer_of(id, |r| panic!("nothing is asked: {r}"));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notices: Vec<String> = client
        .updates()
        .into_iter()
        .filter(|(kind, _)| kind == "agent_thought_chunk")
        .map(|(_, u)| u["content"]["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(notices.iter().any(|n| n.contains("authentication required: run nod mcp auth srv")), "{notices:?}");
    let search = &tool_messages(&model.requests()[1])[0].1;
    assert!(search.contains("authentication_required"), "{search}");
    assert!(w.seen(0, "/authorize").is_empty() && w.seen(0, "/register").is_empty(), "{}", w.wire());
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "nod acp exits 0 when its client leaves: {stderr}");

    // Tokens stored by nod mcp auth serve the ACP session.
    w.auth().code(0);
    let mut client = Client::start_with(&w.env, &model, &[("NOD_PERMISSION_MODE", "full-access")]);
    client.initialize(json!({}));
    let session = client.new_session(&ws.display().to_string(), entry);
    let id = client
        .request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "again" }] }));
    let answer = client.answer_of(id, |r| panic!("nothing is asked: {r}"));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(tool_messages(&model.requests()[4])[1].1.contains("called echo"));
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
    for canary in CANARIES {
        assert!(!stderr.contains(canary) && !client_text(&model).contains(canary), "{canary}");
    }
}

/// Everything the model was sent.
fn client_text(model: &crate::model::Model) -> String {
    model.requests().iter().map(|r| r.to_string()).collect()
}
