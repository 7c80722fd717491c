//! OAuth credentials: one private file, `$NOD_HOME/credentials.json` (0600, written
//! atomically), holding one entry per server. An entry is used only for the resource (the
//! server URL) and issuer it was issued for. A malformed entry is isolated: other servers
//! still authenticate, and it is replaced on the server's next successful authorization or
//! removed by logout.

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
    update(path, |servers| {
        servers.insert(server.to_string(), to_value(credential));
    })
}

/// Removes the server's entry; returns it when it was well formed.
pub fn remove(path: &Path, server: &str) -> anyhow::Result<Option<Credential>> {
    let old = load(path, server).ok().flatten();
    let mut existed = false;
    update(path, |servers| existed = servers.shift_remove(server).is_some())?;
    if !existed {
        bail!("no stored credentials for server {server}");
    }
    Ok(old)
}

fn update(path: &Path, change: impl FnOnce(&mut Map<String, Value>)) -> anyhow::Result<()> {
    // A file that is not an object at all is replaced: it holds nothing usable.
    let mut root = read_root(path).unwrap_or_default();
    let servers = root.entry("servers").or_insert_with(|| json!({}));
    if !servers.is_object() {
        *servers = json!({});
    }
    change(servers.as_object_mut().expect("an object"));
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
        assert!(remove(&path, "good").unwrap().is_some());
        assert!(remove(&path, "good").is_err());
    }
}
