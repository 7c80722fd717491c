//! The agent's settings in `$NOD_HOME/settings.json`: the model (`model`, `base_url`,
//! `api_key_env`, `request_timeout_ms`), `permission_mode` and `permission` rules (top level
//! for the user, and `workspaces["<canonical workspace path>"]` for one workspace, which
//! comes after and so wins), `max_agent_steps`, `max_tool_result_bytes`, `context_limits` and
//! `first_call_tool_choice`, and the shell's `prompt_history.enabled`. A value of the wrong type is reported and ignored; project files
//! never set any of this.

use std::path::Path;

use serde_json::{Map, Value};

/// What settings.json says about the model (the provider resolves it with the flags and
/// the environment).
#[derive(Debug, Clone, Default)]
pub struct ModelSettings {
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub request_timeout_ms: Option<u64>,
}

/// What settings.json says for the agent, with the problems found.
#[derive(Debug, Clone, Default)]
pub struct AgentSettings {
    pub model: ModelSettings,
    pub permission_mode: Option<String>,
    /// `permission` values: the user's, then the workspace's.
    pub permission: Vec<(&'static str, Value)>,
    pub max_agent_steps: Option<u64>,
    pub max_tool_result_bytes: Option<u64>,
    /// `context_limits` values: the user's, then the workspace's.
    pub context_limits: Vec<Value>,
    pub first_call_tool_choice_none: bool,
    /// `prompt_history.enabled: false`: the shell keeps no history file.
    pub prompt_history_off: bool,
    /// `save_sessions: false`: no conversation is saved.
    pub save_sessions_off: bool,
    /// `sampling` values (per server allow or deny): the user's, then the workspace's.
    pub sampling: Vec<Value>,
    pub issues: Vec<String>,
}

/// Reads the settings for `workspace`. A missing file is no settings; one that cannot be read
/// is an issue and no settings.
pub fn load(path: &Path, workspace: &Path) -> AgentSettings {
    let mut settings = AgentSettings::default();
    let root = match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(root)) => root,
            Ok(_) => {
                settings.issues.push(format!("{} is not a JSON object; its settings are ignored", path.display()));
                return settings;
            }
            Err(err) => {
                settings.issues.push(format!(
                    "{} is not valid JSON (line {}); its settings are ignored",
                    path.display(),
                    err.line()
                ));
                return settings;
            }
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return settings,
        Err(err) => {
            settings.issues.push(format!("cannot read {}: {err}", path.display()));
            return settings;
        }
    };
    read_layer(&root, "user", &mut settings);
    let key = workspace.to_string_lossy();
    if let Some(Value::Object(layer)) = root.get("workspaces").and_then(|w| w.get(key.as_ref())) {
        read_layer(layer, "workspace", &mut settings);
    }
    settings
}

fn read_layer(layer: &Map<String, Value>, source: &'static str, settings: &mut AgentSettings) {
    let mut issue = |key: &str, what: &str| settings_issue(&mut settings.issues, source, key, what);
    let text = |key: &str, issue: &mut dyn FnMut(&str, &str)| match layer.get(key) {
        None => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(_) => {
            issue(key, "a non-empty string");
            None
        }
    };
    let number = |key: &str, issue: &mut dyn FnMut(&str, &str)| match layer.get(key) {
        None => None,
        Some(v) => v.as_u64().or_else(|| {
            issue(key, "a non-negative integer");
            None
        }),
    };
    if source == "user" {
        if let Some(model) = text("model", &mut issue) {
            settings.model.model = Some(model);
        }
        if let Some(url) = text("base_url", &mut issue) {
            settings.model.base_url = Some(url);
        }
        if let Some(var) = text("api_key_env", &mut issue) {
            settings.model.api_key_env = Some(var);
        }
        if let Some(ms) = number("request_timeout_ms", &mut issue) {
            settings.model.request_timeout_ms = Some(ms);
        }
        match layer.get("save_sessions") {
            None => {}
            Some(Value::Bool(save)) => settings.save_sessions_off = !save,
            Some(_) => issue("save_sessions", "true or false"),
        }
        match layer.get("prompt_history").map(|h| h.get("enabled")) {
            None | Some(None) => {}
            Some(Some(Value::Bool(enabled))) => settings.prompt_history_off = !enabled,
            Some(Some(_)) => issue("prompt_history.enabled", "true or false"),
        }
    }
    if let Some(mode) = text("permission_mode", &mut issue) {
        settings.permission_mode = Some(mode);
    }
    if let Some(steps) = number("max_agent_steps", &mut issue) {
        settings.max_agent_steps = Some(steps);
    }
    if let Some(bytes) = number("max_tool_result_bytes", &mut issue) {
        settings.max_tool_result_bytes = Some(bytes);
    }
    if let Some(choice) = text("first_call_tool_choice", &mut issue) {
        settings.first_call_tool_choice_none = choice == "none";
    }
    if let Some(rules) = layer.get("permission") {
        settings.permission.push((source, rules.clone()));
    }
    if let Some(limits) = layer.get("context_limits") {
        settings.context_limits.push(limits.clone());
    }
    if let Some(sampling) = layer.get("sampling") {
        settings.sampling.push(sampling.clone());
    }
}

fn settings_issue(issues: &mut Vec<String>, source: &str, key: &str, what: &str) {
    let place = if source == "user" { "settings.json".to_string() } else { format!("settings.json ({source})") };
    issues.push(format!("{key} in {place} must be {what}; ignored"));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn layers_and_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let workspace = dir.path().join("ws");
        let text = json!({
            "model": "m1", "base_url": "http://127.0.0.1:1/v1", "max_agent_steps": 7, "permission_mode": 5,
            "permission": { "*": "ask" },
            "workspaces": { workspace.to_string_lossy(): { "permission": { "mcp_docs_*": "allow" }, "model": "ignored" } },
            "projects": {},
        });
        std::fs::write(&path, text.to_string()).unwrap();
        let settings = load(&path, &workspace);
        assert_eq!(settings.model.model.as_deref(), Some("m1"));
        assert_eq!(settings.max_agent_steps, Some(7));
        assert_eq!(settings.permission.len(), 2);
        assert_eq!(settings.permission[1].0, "workspace");
        assert_eq!(settings.issues.len(), 1, "{:?}", settings.issues);
        assert!(load(&dir.path().join("none.json"), &workspace).issues.is_empty());
    }
}
