//! Roots: the directories a surface offers its servers (`roots/list`, and at 2026-07-28 the
//! same question as an input request). The shell and `nod ask` offer the workspace and the
//! directories added with `--add-dir` (and the shell's `/add-dir`); an ACP session its `cwd`
//! and the client's additional directories; `nod mcp` commands only what `--root` names, so a
//! one-off call never exposes a directory silently. A project server (from the workspace's
//! `.mcp.json`) sees only the workspace, never a directory added beside it.
//!
//! `WithRoots` wraps a surface's handler: it declares `roots` (with `listChanged`) and
//! answers `roots/list`; everything else goes to the handler it wraps.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::dispatch::{InboundHandler, Responder, ServerRequest};
use crate::mcp::method;

#[derive(Default)]
struct State {
    /// The workspace (or the one root a `nod mcp` command names first).
    workspace: Vec<PathBuf>,
    added: Vec<PathBuf>,
    /// Servers from the workspace's `.mcp.json`: they see the workspace alone.
    project: HashSet<String>,
}

/// The directories offered as roots; shared by a surface and its handler, so an added
/// directory is answered from then on.
#[derive(Default)]
pub struct Roots {
    state: RwLock<State>,
}

impl Roots {
    /// `workspace` and `added` (made absolute; the missing ones are skipped with a warning),
    /// with `project` the servers that see only the workspace.
    pub fn new(workspace: Option<&Path>, added: &[PathBuf], project: impl IntoIterator<Item = String>) -> Roots {
        let roots = Roots::default();
        {
            let mut state = roots.write();
            state.workspace = workspace.and_then(absolute).into_iter().collect();
            state.project = project.into_iter().collect();
        }
        for dir in added {
            if let Err(why) = roots.add(dir) {
                log::warn!("{why}");
            }
        }
        roots
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The roots of an agent surface: `workspace`, and `added` (each must be a directory),
    /// the servers of `loaded` that come from the workspace's `.mcp.json` seeing the workspace
    /// alone.
    pub fn for_workspace(workspace: &Path, added: &[PathBuf], loaded: &crate::config::Loaded) -> anyhow::Result<Roots> {
        if let Some(dir) = added.iter().find(|d| !d.is_dir()) {
            anyhow::bail!("--add-dir {} is not a directory", dir.display());
        }
        Ok(Roots::new(Some(workspace), added, project_servers(loaded)))
    }

    /// After a reload: the servers that see the workspace alone.
    pub fn set_project(&self, loaded: &crate::config::Loaded) {
        self.write().project = project_servers(loaded).collect();
    }

    /// Adds a directory; `Ok(false)` when it was offered already, an error naming it when it
    /// is not a directory.
    pub fn add(&self, dir: &Path) -> Result<bool, String> {
        let Some(dir) = absolute(dir).filter(|d| d.is_dir()) else {
            return Err(format!("{} is not a directory; not added as a root", dir.display()));
        };
        let mut state = self.write();
        if state.workspace.contains(&dir) || state.added.contains(&dir) {
            return Ok(false);
        }
        state.added.push(dir);
        Ok(true)
    }

    /// Every directory offered (to a server that is not a project server).
    pub fn dirs(&self) -> Vec<PathBuf> {
        let state = self.read();
        state.workspace.iter().chain(&state.added).cloned().collect()
    }

    /// The answer to `roots/list` from `server`.
    pub fn answer(&self, server: &str) -> Value {
        let state = self.read();
        let dirs: Vec<&PathBuf> = if state.project.contains(server) {
            state.workspace.iter().collect()
        } else {
            state.workspace.iter().chain(&state.added).collect()
        };
        let roots: Vec<Value> = dirs
            .into_iter()
            .map(|dir| {
                let name =
                    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
                json!({ "uri": file_uri(dir), "name": name })
            })
            .collect();
        json!({ "roots": roots })
    }
}

fn project_servers(loaded: &crate::config::Loaded) -> impl Iterator<Item = String> + '_ {
    let servers = loaded.servers.iter().map(|s| s.name.clone());
    servers.filter(|name| loaded.source(name) == crate::config::merge::Source::Project)
}

/// `path` made absolute and canonical (symlinks resolved), when it exists.
fn absolute(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// A `file://` URI for an absolute path: every byte but unreserved ones and `/` escaped.
pub fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// A surface's handler, with roots declared and answered.
pub struct WithRoots {
    inner: Arc<dyn InboundHandler>,
    roots: Arc<Roots>,
}

impl WithRoots {
    pub fn new(inner: Arc<dyn InboundHandler>, roots: Arc<Roots>) -> WithRoots {
        WithRoots { inner, roots }
    }
}

impl InboundHandler for WithRoots {
    fn capabilities(&self) -> Value {
        let mut capabilities = self.inner.capabilities();
        if let Some(map) = capabilities.as_object_mut() {
            map.insert("roots".into(), json!({ "listChanged": true }));
        }
        capabilities
    }

    fn request(&self, req: ServerRequest, responder: Responder) {
        if req.method == method::ROOTS_LIST {
            log::debug!("server {}: asked for its roots", req.server);
            responder.respond(Ok(self.roots.answer(&req.server)));
            return;
        }
        self.inner.request(req, responder);
    }

    fn notification(&self, server: &str, method_name: &str, params: &Value) {
        self.inner.notification(server, method_name, params);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_file_uris_and_project_servers_see_the_workspace_alone() {
        let base = tempfile::tempdir().unwrap();
        let (work, extra) = (base.path().join("my work"), base.path().join("extra"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&extra).unwrap();
        let roots = Roots::new(Some(&work), &[extra.clone(), base.path().join("missing")], ["proj".to_string()]);
        let work = std::fs::canonicalize(&work).unwrap();
        let uri = file_uri(&work);
        assert!(uri.starts_with("file:///") && uri.ends_with("/my%20work"), "{uri}");
        let all = roots.answer("fs");
        assert_eq!(all["roots"].as_array().unwrap().len(), 2, "{all}");
        assert_eq!(all["roots"][0], json!({ "uri": uri, "name": "my work" }));
        assert_eq!(roots.answer("proj")["roots"], json!([{ "uri": uri, "name": "my work" }]));
        assert_eq!(roots.add(&extra), Ok(false), "offered already");
        assert!(roots.add(&base.path().join("missing")).unwrap_err().contains("not a directory"));
    }
}
