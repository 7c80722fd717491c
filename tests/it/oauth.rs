//! OAuth against one in-process world (`http_fixture`): an MCP endpoint that answers 401
//! without the currently valid bearer token, its protected resource metadata, and an
//! authorization server (metadata, registration, authorize, token with PKCE checks, revoke).
//! The browser is `BROWSER=curl -L`, which follows the 302 to nod's loopback callback. Each
//! test checks exit codes, messages naming the server, time, and what reached the fixture.
//! Token values are canaries that must never show in any output.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use nod::oauth::flow::{base64url, encode, parse_query};
use serde_json::{Value, json};

use crate::http_fixture::{Fixture, Reply, Request, standard};
use crate::support::{Env, Output};

const NAME: &str = "srv";
const BROWSER: &str = "curl -s -L --max-time 10 -o /dev/null";
const CANARIES: &[&str] = &["tok-canary", "refresh-canary", "secret-canary"];

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
    wrong_state: bool,
    refresh_fails: bool,
    /// tools/call needs these scopes (else 403 insufficient_scope); `always_forbid`: always 403.
    need_scope: Option<&'static str>,
    always_forbid: bool,
    client_secret: Option<&'static str>,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            expires_in: 3600,
            code_expires_in: None,
            metadata_issuer: None,
            pkce_advertised: true,
            iss: None,
            wrong_state: false,
            refresh_fails: false,
            need_scope: None,
            always_forbid: false,
            client_secret: None,
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
}

struct World {
    env: Env,
    fx: Fixture,
    knobs: Arc<Mutex<Knobs>>,
    books: Arc<Mutex<Books>>,
}

impl World {
    fn new(tweak: impl FnOnce(&mut Knobs)) -> World {
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
        let world = World { env, fx, knobs, books };
        world.profile(&[NAME]);
        world
    }

    /// A profile whose servers all point at the one MCP endpoint.
    fn profile(&self, names: &[&str]) {
        let servers: serde_json::Map<String, Value> =
            names.iter().map(|n| (n.to_string(), json!({ "type": "http", "url": self.mcp() }))).collect();
        self.env.profile(json!({ "mcp": servers }));
    }

    fn mcp(&self) -> String {
        self.fx.url("/mcp")
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

    fn run(&self, args: &[&str], browser: bool, log: Option<&str>) -> Output {
        let mut cmd = self.env.nod(args).timeout(40);
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
        self.seen(from, "/mcp").iter().map(strip).collect()
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
    match (req.method.as_str(), path) {
        (_, "/mcp") => {
            let token = req.header("authorization").and_then(|h| h.strip_prefix("Bearer "));
            let Some(scope) = token.and_then(|t| b.access.get(t)) else {
                let prm = format!("{base}/.well-known/oauth-protected-resource/mcp");
                return Reply::status(401).header("WWW-Authenticate", &format!("Bearer resource_metadata=\"{prm}\""));
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
        ("GET", "/.well-known/oauth-protected-resource/mcp") => Reply::json(&json!({
            "resource": format!("{base}/mcp"), "authorization_servers": [base], "scopes_supported": ["base"],
        })),
        ("GET", "/.well-known/oauth-authorization-server") => {
            let mut doc = json!({
                "issuer": k.metadata_issuer.clone().unwrap_or_else(|| base.to_string()),
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
            Reply::json(&doc)
        }
        ("POST", "/register") => {
            let mut doc = json!({ "client_id": "client-1", "redirect_uris": req.json["redirect_uris"] });
            if let Some(secret) = k.client_secret {
                doc["client_secret"] = json!(secret);
                doc["token_endpoint_auth_method"] = json!("client_secret_basic");
            }
            Reply::json(&doc).code(201)
        }
        ("GET", "/authorize") => {
            let q = query(req);
            let get = |key: &str| q.get(key).cloned().unwrap_or_default();
            let code = format!("code-{}", b.codes.len() + 1);
            b.codes.insert(code.clone(), (get("code_challenge"), get("redirect_uri"), get("scope")));
            let state = if k.wrong_state { "not-the-state".to_string() } else { get("state") };
            let iss = k.iss.clone().unwrap_or_else(|| base.to_string());
            let location = format!("{}?code={code}&state={}&iss={}", get("redirect_uri"), encode(&state), encode(&iss));
            Reply::status(302).header("Location", &location)
        }
        ("POST", "/token") => token(k, b, &form(req)),
        ("POST", "/revoke") => Reply::status(200),
        _ => Reply::status(404),
    }
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
    assert!((1..=3).contains(&rounds), "{rounds} authorizations in one process: {}", w.wire());
}
