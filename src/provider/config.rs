//! Which endpoint, model and key: environment beats settings beats defaults.
//!
//! | item | environment | settings.json | default |
//! |---|---|---|---|
//! | endpoint | `NOD_BASE_URL` | `base_url` | `https://api.openai.com/v1` |
//! | model | `NOD_MODEL` (or `--model`) | `model` | none: an error that says how to set one |
//! | key | `NOD_API_KEY`, else `OPENAI_API_KEY` | `api_key_env` (a variable's name) | none: no Authorization header |
//! | idle stream timeout | `NOD_REQUEST_TIMEOUT_MS` | `request_timeout_ms` | 120 s |

use std::time::Duration;

use crate::net::url;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone)]
pub struct ProviderConfig {
    pub base_url: String,
    /// Where `base_url` came from (`NOD_BASE_URL`, settings.json's `base_url`, the default),
    /// for errors that name the endpoint.
    pub base_url_from: &'static str,
    pub model: String,
    /// Never printed; the redactor knows it.
    pub api_key: Option<String>,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig").field("model", &self.model).finish_non_exhaustive()
    }
}

pub use crate::config::agent::ModelSettings;

/// Why no provider can be configured is a configuration error, shown as it is.
pub use crate::config::ConfigError;

/// Resolves the provider from `--model`, the environment (`env`: a lookup, so tests need no
/// process environment) and settings.
pub fn resolve(
    model_flag: Option<&str>,
    settings: &ModelSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderConfig, ConfigError> {
    let nonempty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let model = model_flag
        .map(str::to_string)
        .or_else(|| nonempty("NOD_MODEL"))
        .or_else(|| settings.model.clone())
        .ok_or_else(|| {
            ConfigError("no model configured: set NOD_MODEL, pass --model, or set \"model\" in settings.json".into())
        })?;
    let (base_url, base_url_from) = match (nonempty("NOD_BASE_URL"), &settings.base_url) {
        (Some(url), _) => (url, "NOD_BASE_URL"),
        (None, Some(url)) => (url.clone(), "base_url in settings.json"),
        (None, None) => (DEFAULT_BASE_URL.to_string(), "the default; set NOD_BASE_URL for another endpoint"),
    };
    let scheme = url::scheme(&base_url);
    let host = url::host(&base_url);
    let (Some(scheme), Some(host)) = (scheme, host) else {
        return Err(ConfigError(format!("the model endpoint {base_url:?} is not an absolute http(s) URL")));
    };
    if scheme != "https" && scheme != "http" {
        return Err(ConfigError(format!("the model endpoint uses {scheme}; use https (or http)")));
    }
    let api_key = match &settings.api_key_env {
        _ if nonempty("NOD_API_KEY").is_some() => nonempty("NOD_API_KEY"),
        Some(var) => Some(
            nonempty(var)
                .ok_or_else(|| ConfigError(format!("api_key_env in settings.json names {var}, which is not set")))?,
        ),
        None => nonempty("OPENAI_API_KEY"),
    };
    if api_key.is_some() && scheme == "http" && !url::is_loopback(&host) {
        return Err(ConfigError(
            "refusing to send the API key over plain http to another machine; use an https endpoint".into(),
        ));
    }
    let idle =
        nonempty("NOD_REQUEST_TIMEOUT_MS")
            .map(|ms| {
                ms.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ConfigError("NOD_REQUEST_TIMEOUT_MS must be a positive number of milliseconds".into())
                })
            })
            .transpose()?
            .or(settings.request_timeout_ms)
            .map_or(IDLE_TIMEOUT, |ms| Duration::from_millis(ms.min(crate::config::MAX_TIMEOUT_MS)));
    Ok(ProviderConfig { base_url, base_url_from, model, api_key, connect_timeout: CONNECT_TIMEOUT, idle_timeout: idle })
}

impl ProviderConfig {
    /// The endpoint as errors name it: its URL without credentials or query, and where it came
    /// from.
    pub fn endpoint(&self) -> String {
        let bare = self.base_url.split(['?', '#']).next().unwrap_or("");
        let shown = match bare.split_once("://") {
            Some((scheme, rest)) => {
                let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                format!("{scheme}://{host}{path}")
            }
            None => bare.to_string(),
        };
        format!("{} (from {})", crate::util::one_line(&shown), self.base_url_from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn environment_beats_settings_beats_defaults() {
        let settings = ModelSettings { model: Some("from-settings".into()), ..Default::default() };
        let config = resolve(None, &settings, &env(&[("NOD_MODEL", "from-env"), ("OPENAI_API_KEY", "k1")])).unwrap();
        assert_eq!((config.model.as_str(), config.base_url.as_str()), ("from-env", DEFAULT_BASE_URL));
        assert_eq!(config.api_key.as_deref(), Some("k1"));
        let flag = resolve(Some("flag"), &settings, &env(&[("NOD_MODEL", "from-env")])).unwrap();
        assert_eq!(flag.model, "flag");
        let nod_key = resolve(None, &settings, &env(&[("NOD_API_KEY", "k2"), ("OPENAI_API_KEY", "k1")])).unwrap();
        assert_eq!(nod_key.api_key.as_deref(), Some("k2"));
    }

    #[test]
    fn missing_or_unsafe_configuration_is_a_clear_error() {
        let none = ModelSettings::default();
        assert!(resolve(None, &none, &env(&[])).unwrap_err().0.contains("no model configured"));
        let remote_http =
            env(&[("NOD_MODEL", "m"), ("NOD_BASE_URL", "http://10.0.0.2:11434/v1"), ("NOD_API_KEY", "k")]);
        assert!(resolve(None, &none, &remote_http).unwrap_err().0.contains("plain http"));
        let local = env(&[("NOD_MODEL", "m"), ("NOD_BASE_URL", "http://127.0.0.1:11434/v1"), ("NOD_API_KEY", "k")]);
        assert!(resolve(None, &none, &local).is_ok());
        let keyless_lan = env(&[("NOD_MODEL", "m"), ("NOD_BASE_URL", "http://10.0.0.2:11434/v1")]);
        assert!(resolve(None, &none, &keyless_lan).is_ok(), "no key, nothing secret to send");
        let named = ModelSettings { api_key_env: Some("MY_KEY".into()), model: Some("m".into()), ..Default::default() };
        assert!(resolve(None, &named, &env(&[])).unwrap_err().0.contains("MY_KEY"));
    }
}
