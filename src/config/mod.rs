//! Server configuration. Problems are data (`ConfigIssue`), never a failure of the whole
//! load: a bad entry is reported with its name and the fix, and the good entries still load.

pub(crate) mod acp;
pub(crate) mod agent;
pub(crate) mod merge;
pub mod profile;
pub(crate) mod project;
mod server;
pub(crate) mod settings;
pub mod skills;
mod url;
pub(crate) mod write;

pub use server::{MAX_TIMEOUT_MS, OAuthConfig, RemoteConfig, ServerConfig, StdioConfig, Transport};

use std::path::PathBuf;

/// Where nod keeps its private files: `$NOD_HOME`, else `~/.nod`.
pub fn home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("NOD_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let Some(user) = dirs::home_dir() else {
        anyhow::bail!("cannot find the home directory; set NOD_HOME");
    };
    Ok(user.join(".nod"))
}

/// A configuration problem, shown to the user with its fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The entry it concerns, when it concerns one.
    pub server: Option<String>,
    pub severity: Severity,
    pub message: String,
    pub fix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The entry (or the file) was not loaded.
    Error,
    /// Loaded, but something was ignored.
    Warning,
}

impl ConfigIssue {
    /// The issue without its severity: `server x: message (fix)`.
    pub fn plain(&self) -> String {
        let mut out = match &self.server {
            Some(name) => format!("server {name}: {}", self.message),
            None => self.message.clone(),
        };
        if !self.fix.is_empty() {
            out.push_str(&format!(" ({})", self.fix));
        }
        out
    }
}

impl std::fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{kind}: {}", self.plain())
    }
}

/// A configuration problem found only when a server is used (a variable it reads is not
/// set): front ends report it as a configuration error, not a connection failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The result of reading configuration: every server that loaded, and every issue.
#[derive(Debug, Default)]
pub struct Loaded {
    pub path: PathBuf,
    pub servers: Vec<ServerConfig>,
    pub issues: Vec<ConfigIssue>,
    /// Where each server of `servers` came from (by name); profile when absent.
    pub sources: std::collections::HashMap<String, merge::Source>,
    /// The workspace's project file and the trust state of its entries.
    pub project: project::Project,
}

/// What the native surfaces use: the profile, then the approved project servers of the
/// workspace around the current directory (the profile wins a same-name entry).
pub fn load_native() -> anyhow::Result<Loaded> {
    let loaded = profile::load(&profile::path()?);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    Ok(with_project(loaded, &cwd, merge::Surface::Native, Vec::new()))
}

/// `loaded` (the profile's servers, or none) merged for `surface` with `client`'s servers
/// and the approved project servers of the workspace around `cwd`; project issues added.
pub(crate) fn with_project(
    mut loaded: Loaded,
    cwd: &std::path::Path,
    surface: merge::Surface,
    client: Vec<ServerConfig>,
) -> Loaded {
    let located = project::locate(cwd);
    let choices = match settings::path().and_then(|path| settings::choices(&path, &located.0)) {
        Ok(choices) => choices,
        Err(err) => {
            loaded.issues.push(ConfigIssue {
                server: None,
                severity: Severity::Error,
                message: format!("{err:#}; project servers stay pending"),
                fix: "fix or remove settings.json".into(),
            });
            Default::default()
        }
    };
    let project = project::load(located, &choices);
    loaded.issues.extend(project.issues.iter().cloned());
    let approved = project::approved(&project, &mut loaded.issues);
    let profile_servers = std::mem::take(&mut loaded.servers);
    for (server, source) in merge::merge(surface, profile_servers, client, approved) {
        loaded.sources.insert(server.name.clone(), source);
        loaded.servers.push(server);
    }
    loaded.project = project;
    loaded
}

impl Loaded {
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }

    pub fn source(&self, name: &str) -> merge::Source {
        self.sources.get(name).copied().unwrap_or(merge::Source::Profile)
    }

    /// Every configured secret value (environment and header values, the values of the
    /// variables entries read, configured URLs), for redaction.
    /// The environment variables entries take secrets from (`bearer_token_env`, `header_env`,
    /// `client_secret_env`): nod's own, which no stdio server inherits.
    pub fn private_env(&self) -> Vec<String> {
        let mut out = Vec::new();
        for server in &self.servers {
            if let Transport::Http(remote) | Transport::Sse(remote) = &server.transport {
                let client_secret = remote.oauth.as_ref().and_then(|o| o.client_secret_env.clone());
                out.extend(remote.header_env.iter().map(|(_, var)| var.clone()));
                out.extend(remote.bearer_token_env.clone());
                out.extend(client_secret);
            }
        }
        out
    }

    pub fn secrets(&self) -> Vec<String> {
        let mut out = Vec::new();
        for server in &self.servers {
            match &server.transport {
                Transport::Stdio(stdio) => out.extend(stdio.env.iter().map(|(_, v)| v.clone())),
                Transport::Http(remote) | Transport::Sse(remote) => {
                    out.extend(remote.headers.iter().map(|(_, v)| v.clone()));
                    // The configured URL, also without its query (which may hold a key) and
                    // as its origin, the forms errors quote it in.
                    out.push(remote.url.clone());
                    let bare = remote.url.split(['?', '#']).next().unwrap_or("");
                    out.push(bare.to_string());
                    if let Some((scheme, rest)) = bare.split_once("://") {
                        out.push(format!("{scheme}://{}", rest.split('/').next().unwrap_or("")));
                    }
                    // Values the entry takes from the environment are secrets too.
                    let client_secret = remote.oauth.as_ref().and_then(|o| o.client_secret_env.as_ref());
                    let vars = remote.header_env.iter().map(|(_, var)| var).chain(&remote.bearer_token_env);
                    let vars = vars.chain(client_secret);
                    out.extend(vars.filter_map(|var| std::env::var(var).ok()).filter(|v| !v.is_empty()));
                }
            }
        }
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out
    }
}

/// Server names: ASCII letters, digits, `_` and `-`.
/// The variables no stdio server of `loaded` inherits: the model's key (`NOD_API_KEY`,
/// `OPENAI_API_KEY`, settings' `api_key_env`) and the variables entries take secrets from.
pub fn private_env(loaded: &Loaded) -> std::sync::Arc<[String]> {
    let workspace = &loaded.project.workspace;
    let key_env = settings::path().ok().and_then(|path| agent::load(&path, workspace).model.api_key_env);
    private_names(loaded.private_env().into_iter().chain(key_env))
}

/// The model's fixed key variables and `more`, sorted and without repeats.
pub fn private_names(more: impl IntoIterator<Item = String>) -> std::sync::Arc<[String]> {
    let mut names: Vec<String> = ["NOD_API_KEY", "OPENAI_API_KEY"].map(String::from).into_iter().chain(more).collect();
    names.sort();
    names.dedup();
    names.into()
}

pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
