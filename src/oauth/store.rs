//! OAuth credentials: one private file, `$NOD_HOME/credentials.json` (0600, written
//! atomically under a lock), holding one entry per server under `servers`, and the clients
//! nod registered (RFC 7591) per server and authorization server issuer under `clients`. A
//! token entry is used only for a server URL that its resource covers. A malformed entry is
//! isolated: other servers still authenticate, and it is replaced on the server's next
//! successful authorization or removed by logout, which forgets the server's registrations
//! too.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Credential {
    pub issuer: String,
    pub resource: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    /// none, client_secret_basic or client_secret_post.
    pub token_auth: String,
    pub token_endpoint: String,
    pub revocation_endpoint: Option<String>,
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Unix seconds.
    pub expires_at: Option<u64>,
    /// When to refresh (unix seconds).
    pub refresh_at: Option<u64>,
    pub scope: Option<String>,
}

/// A client that nod registered with an authorization server, reused by later
/// authorizations with the same issuer (its redirect URI included, port and all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registration {
    pub client_id: String,
    pub client_secret: Option<String>,
    /// none, client_secret_basic or client_secret_post.
    pub token_auth: String,
    pub redirect_uri: String,
    /// When the secret expires (unix seconds; None or 0: never).
    pub secret_expires_at: Option<u64>,
}

/// What `remove` found for a server.
#[derive(Debug, Default)]
pub struct Removed {
    /// The token entry, when it was well formed.
    pub credential: Option<Credential>,
    /// Whether there was a token entry at all.
    pub entry: bool,
    /// How many client registrations were forgotten.
    pub registrations: usize,
}

/// What the store holds for one server, without its secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    None,
    Valid,
    Malformed,
}

pub fn path() -> anyhow::Result<PathBuf> {
    Ok(crate::config::home()?.join("credentials.json"))
}

fn read_root(path: &Path) -> anyhow::Result<Map<String, Value>> {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(Value::Object(root)) => Ok(root),
            _ => bail!("{} is not a JSON object; nod mcp logout <name> or removing it starts afresh", path.display()),
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
    }
}

pub fn load(path: &Path, server: &str) -> anyhow::Result<Option<Credential>> {
    let root = read_root(path)?;
    let Some(entry) = root.get("servers").and_then(|s| s.get(server)) else { return Ok(None) };
    match from_value(entry) {
        Some(credential) => Ok(Some(credential)),
        None => {
            bail!("the stored credentials for server {server} are malformed; run nod mcp auth {server} to replace them")
        }
    }
}

pub fn state(path: &Path, server: &str) -> Stored {
    match load(path, server) {
        Ok(Some(_)) => Stored::Valid,
        Ok(None) => Stored::None,
        Err(_) => Stored::Malformed,
    }
}

pub fn save(path: &Path, server: &str, credential: &Credential) -> anyhow::Result<()> {
    update(path, "servers", |servers| {
        servers.insert(server.to_string(), to_value(credential));
    })
}

/// Removes the server's token entry and its client registrations.
pub fn remove(path: &Path, server: &str) -> anyhow::Result<Removed> {
    let mut removed = Removed { credential: load(path, server).ok().flatten(), ..Removed::default() };
    update(path, "servers", |servers| removed.entry = servers.shift_remove(server).is_some())?;
    update(path, "clients", |clients| {
        removed.registrations = clients.shift_remove(server).as_ref().and_then(Value::as_object).map_or(0, Map::len);
    })?;
    if !removed.entry && removed.registrations == 0 {
        bail!("no stored credentials for server {server}");
    }
    Ok(removed)
}

/// The client registered for `server` with the authorization server `issuer`.
pub fn registration(path: &Path, server: &str, issuer: &str) -> anyhow::Result<Option<Registration>> {
    let root = read_root(path)?;
    let Some(entry) = root.get("clients").and_then(|c| c.get(server)).and_then(|c| c.get(issuer_key(issuer))) else {
        return Ok(None);
    };
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
    let registration = (|| {
        Some(Registration {
            client_id: text("client_id")?,
            client_secret: text("client_secret"),
            token_auth: text("token_endpoint_auth_method")?,
            redirect_uri: text("redirect_uri")?,
            secret_expires_at: entry.get("client_secret_expires_at").and_then(Value::as_u64),
        })
    })();
    match registration {
        Some(registration) => Ok(Some(registration)),
        None => bail!("the stored client registration for server {server} is malformed; nod registers again"),
    }
}

pub fn save_registration(path: &Path, server: &str, issuer: &str, registration: &Registration) -> anyhow::Result<()> {
    let value = json!({
        "client_id": registration.client_id,
        "client_secret": registration.client_secret,
        "token_endpoint_auth_method": registration.token_auth,
        "redirect_uri": registration.redirect_uri,
        "client_secret_expires_at": registration.secret_expires_at,
    });
    update(path, "clients", |clients| {
        let entry = clients.entry(server.to_string()).or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        entry.as_object_mut().expect("an object").insert(issuer_key(issuer).to_string(), value);
    })
}

/// Forgets the registration of `client_id` for `server` with `issuer` (the authorization
/// server no longer knows it). Returns whether there was one.
pub fn forget_registration(path: &Path, server: &str, issuer: &str, client_id: &str) -> anyhow::Result<bool> {
    if registration(path, server, issuer).ok().flatten().is_none_or(|r| r.client_id != client_id) {
        return Ok(false);
    }
    update(path, "clients", |clients| {
        if let Some(entry) = clients.get_mut(server).and_then(Value::as_object_mut) {
            entry.shift_remove(issuer_key(issuer));
        }
    })?;
    Ok(true)
}

/// Issuers compare without a trailing slash.
fn issuer_key(issuer: &str) -> &str {
    issuer.trim_end_matches('/')
}

/// Changes one top-level map of the file (`servers` or `clients`) and writes it back, under
/// the file's lock: two nods refreshing tokens at once both keep their entries.
fn update(path: &Path, section: &str, change: impl FnOnce(&mut Map<String, Value>)) -> anyhow::Result<()> {
    crate::config::write::locked(path, || update_unlocked(path, section, change))
}

fn update_unlocked(path: &Path, section: &str, change: impl FnOnce(&mut Map<String, Value>)) -> anyhow::Result<()> {
    // A file that is not an object at all is replaced: it holds nothing usable.
    let mut root = read_root(path).unwrap_or_default();
    let map = root.entry(section).or_insert_with(|| json!({}));
    if !map.is_object() {
        *map = json!({});
    }
    change(map.as_object_mut().expect("an object"));
    let mut text = serde_json::to_string_pretty(&Value::Object(root))?;
    text.push('\n');
    crate::config::write::write_private(path, text.as_bytes())
}

fn to_value(c: &Credential) -> Value {
    json!({
        "issuer": c.issuer,
        "resource": c.resource,
        "client_id": c.client_id,
        "client_secret": c.client_secret,
        "token_endpoint_auth_method": c.token_auth,
        "token_endpoint": c.token_endpoint,
        "revocation_endpoint": c.revocation_endpoint,
        "access_token": c.access_token,
        "refresh_token": c.refresh_token,
        "expires_at": c.expires_at,
        "refresh_at": c.refresh_at,
        "scope": c.scope,
    })
}

fn from_value(v: &Value) -> Option<Credential> {
    let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    Some(Credential {
        issuer: text("issuer")?,
        resource: text("resource")?,
        client_id: text("client_id")?,
        client_secret: text("client_secret"),
        token_auth: text("token_endpoint_auth_method").unwrap_or_else(|| "none".into()),
        token_endpoint: text("token_endpoint")?,
        revocation_endpoint: text("revocation_endpoint"),
        access_token: text("access_token")?,
        refresh_token: text("refresh_token"),
        expires_at: v.get("expires_at").and_then(Value::as_u64),
        refresh_at: v.get("refresh_at").and_then(Value::as_u64),
        scope: text("scope"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_malformed_ones_are_isolated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.json");
        let credential = Credential {
            issuer: "https://as".into(),
            resource: "https://mcp/mcp".into(),
            client_id: "c".into(),
            token_auth: "none".into(),
            token_endpoint: "https://as/token".into(),
            access_token: "at".into(),
            ..Credential::default()
        };
        save(&path, "good", &credential).unwrap();
        let mut root: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        root["servers"]["bad"] = json!({"access_token": 3});
        std::fs::write(&path, root.to_string()).unwrap();
        assert_eq!(load(&path, "good").unwrap(), Some(credential.clone()));
        assert!(load(&path, "bad").is_err());
        assert_eq!(state(&path, "bad"), Stored::Malformed);
        save(&path, "bad", &credential).unwrap();
        assert_eq!(state(&path, "bad"), Stored::Valid);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(remove(&path, "good").unwrap().credential.is_some());
        assert!(remove(&path, "good").is_err());
    }

    #[test]
    fn registrations_are_kept_per_server_and_issuer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.json");
        let kept = Registration {
            client_id: "c1".into(),
            client_secret: Some("s".into()),
            token_auth: "client_secret_basic".into(),
            redirect_uri: "http://127.0.0.1:5/callback".into(),
            secret_expires_at: None,
        };
        save_registration(&path, "a", "https://as/", &kept).unwrap();
        assert_eq!(registration(&path, "a", "https://as").unwrap(), Some(kept.clone()));
        assert_eq!(registration(&path, "a", "https://other").unwrap(), None);
        assert_eq!(registration(&path, "b", "https://as").unwrap(), None);
        // A token entry of its own is not needed, and does not look malformed.
        assert_eq!(state(&path, "a"), Stored::None);
        assert!(!forget_registration(&path, "a", "https://as", "c2").unwrap());
        assert!(forget_registration(&path, "a", "https://as", "c1").unwrap());
        assert_eq!(registration(&path, "a", "https://as").unwrap(), None);
        save_registration(&path, "a", "https://as", &kept).unwrap();
        let removed = remove(&path, "a").unwrap();
        assert!(!removed.entry && removed.credential.is_none() && removed.registrations == 1);
        assert!(remove(&path, "a").is_err());
    }
}
