//! One agent set-up for every surface (`nod ask`, the shell, `nod acp`, `nod permissions`):
//! the servers (the profile with approved project servers, or an ACP client's with the
//! session's project servers), settings, the model provider, the permission policy, the
//! limits and the agent's options, with one precedence (flags, then environment, then the
//! workspace's settings, then the user's, then the surface's default) and configuration
//! issues returned as data. What differs by surface is in `Defaults::of`, one visible table.

use std::path::Path;
use std::sync::Arc;

use crate::agent::limits::Limits;
use crate::agent::permissions::{Mode, Policy, parse_rules};
use crate::agent::{Agent, Options};
use crate::cli::Globals;
use crate::config::agent::AgentSettings;
use crate::config::{self, Loaded, ServerConfig};
use crate::provider::Provider;
use crate::provider::config::{ProviderConfig, resolve};
use crate::session::Access;
use crate::session::elicit::Asked;
use crate::session::runtime::Runtime;
use crate::util::Redactor;

/// Which surface an agent is set up for, with what only it has.
pub enum Surface<'a> {
    /// `nod ask`: `--model`, `--max-steps`, `--system`.
    Ask {
        model: Option<&'a str>,
        max_steps: Option<usize>,
        system: Option<&'a str>,
    },
    Shell,
    /// An ACP session: its `cwd` and the client's servers; `nod acp --model`.
    Acp {
        cwd: &'a Path,
        client: Vec<ServerConfig>,
        model: Option<&'a str>,
    },
    /// `nod permissions`: the policy only.
    Permissions,
}

/// What differs by surface when nothing is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// Model requests in one turn (`usize::MAX`: no limit).
    pub max_steps: usize,
    /// A missing model is an error (`nod ask`) rather than a state to fix later.
    pub model_required: bool,
    /// Servers that cannot be used are named as notices when MCP is first needed (the shell
    /// prints its own start-up lines instead).
    pub report_servers: bool,
}

impl Defaults {
    pub fn of(surface: &Surface<'_>) -> Defaults {
        match surface {
            Surface::Ask { .. } => Defaults { max_steps: 50, model_required: true, report_servers: true },
            Surface::Shell => Defaults { max_steps: usize::MAX, model_required: false, report_servers: false },
            Surface::Acp { .. } => Defaults { max_steps: 50, model_required: false, report_servers: true },
            Surface::Permissions => Defaults { max_steps: 50, model_required: false, report_servers: false },
        }
    }
}

/// Everything an agent needs, before any server starts.
pub struct Setup {
    pub loaded: Loaded,
    pub settings: AgentSettings,
    /// The model, or why there is none.
    pub provider: Result<ProviderConfig, String>,
    pub policy: Arc<Policy>,
    pub limits: Limits,
    pub options: Options,
    /// Configuration problems, each one line, in the order found.
    pub issues: Vec<String>,
}

/// Sets an agent up for `surface`. `env` reads the environment (a closure, so tests can give
/// their own). An error is a configuration error the surface cannot run with (a bad flag or
/// variable, a missing model for `nod ask`, an unreadable profile).
pub fn prepare(
    surface: &Surface<'_>,
    globals: &Globals,
    redactor: &Redactor,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Setup> {
    let defaults = Defaults::of(surface);
    let mut issues = Vec::new();
    let (loaded, cwd) = match surface {
        Surface::Acp { cwd, client, .. } => (config::acp::load(cwd, client.clone()), cwd.to_path_buf()),
        Surface::Permissions => (Loaded::default(), std::env::current_dir().unwrap_or_default()),
        _ => {
            let loaded = config::load_native()?;
            crate::cmd::one::note_skipped(&loaded);
            (loaded, std::env::current_dir().unwrap_or_default())
        }
    };
    redactor.add(loaded.secrets());
    issues.extend(loaded.issues.iter().map(ToString::to_string));
    let workspace = config::project::locate(&cwd).0;
    let settings = config::agent::load(&config::settings::path()?, &workspace);
    issues.extend(settings.issues.iter().cloned());
    let model_flag = match surface {
        Surface::Ask { model, .. } | Surface::Acp { model, .. } => *model,
        _ => None,
    };
    let provider = match resolve(model_flag, &settings.model, env) {
        Ok(config) => {
            redactor.add(config.api_key.clone());
            Ok(config)
        }
        Err(err) if defaults.model_required => return Err(err.into()),
        Err(err) => Err(err.to_string()),
    };
    let mode = mode(&settings, globals, env, &mut issues);
    let mut rule_issues = Vec::new();
    let rules =
        settings.permission.iter().flat_map(|(source, value)| parse_rules(value, source, &mut rule_issues)).collect();
    issues.extend(rule_issues);
    let limits = limits(&settings, globals, &mut issues)?;
    let (flag_steps, system) = match surface {
        Surface::Ask { max_steps, system, .. } => (*max_steps, system.map(str::to_string)),
        _ => (None, None),
    };
    let skills = match surface {
        Surface::Permissions => Default::default(),
        _ => {
            let choices = config::settings::path()
                .ok()
                .and_then(|p| config::settings::choices(&p, &workspace).ok())
                .unwrap_or_default();
            let skills = config::skills::load(&config::home()?, &workspace, &choices);
            issues.extend(skills.issues.iter().cloned());
            std::sync::Arc::new(skills)
        }
    };
    let options = Options {
        max_steps: max_steps(flag_steps, env, &settings, defaults.max_steps)?,
        system,
        first_call_tool_choice_none: settings.first_call_tool_choice_none,
        report_servers: defaults.report_servers,
        redactor: redactor.clone(),
        skills,
    };
    Ok(Setup { loaded, settings, provider, policy: Arc::new(Policy::new(mode, rules)), limits, options, issues })
}

impl Setup {
    /// The runtime of this set-up's servers; `access` says how they connect (its redactor is
    /// replaced by the set-up's, so every error from a server is redacted alike).
    pub fn runtime(&self, handler: Arc<dyn crate::dispatch::InboundHandler>, access: Access) -> Arc<Runtime> {
        let private = self.loaded.private_env().into_iter().chain(self.settings.model.api_key_env.clone());
        let access = Access {
            redactor: self.options.redactor.clone(),
            private_env: crate::config::private_names(private),
            ..access
        };
        Arc::new(Runtime::new(crate::dispatch::Engine::start(), self.loaded.servers.clone(), handler, access))
    }

    /// What answers the servers' sampling requests: the configured model, under the sampling
    /// rules of settings.json and the permission mode; none without a model (then nod does
    /// not declare sampling).
    pub fn sampler(
        &self,
        asks: Option<crossbeam_channel::Sender<crate::session::elicit::Asked>>,
    ) -> Option<Arc<crate::session::sampling::Sampler>> {
        let config = self.provider.as_ref().ok()?;
        let model = Arc::new(Provider::new(config.clone())) as Arc<dyn crate::provider::Model>;
        Some(sampler(model, &self.settings, &self.policy, asks))
    }

    /// `handler` with sampling answered by `sampler`, when there is one.
    pub fn with_sampling(
        handler: Arc<dyn crate::dispatch::InboundHandler>,
        sampler: Option<&Arc<crate::session::sampling::Sampler>>,
    ) -> Arc<dyn crate::dispatch::InboundHandler> {
        match sampler {
            Some(sampler) => Arc::new(crate::session::sampling::WithSampling::new(handler, sampler.clone())),
            None => handler,
        }
    }

    /// The agent over `runtime`, whose servers' elicitations arrive on `asked`.
    pub fn agent(&self, runtime: Arc<Runtime>, asked: crossbeam_channel::Receiver<Asked>) -> Agent {
        let provider =
            self.provider.as_ref().ok().map(|c| Arc::new(Provider::new(c.clone())) as Arc<dyn crate::provider::Model>);
        Agent::new(provider, runtime, asked, self.policy.clone(), self.limits, self.options.clone())
    }

    /// What `--full-access` sets aside, said once: how many deny rules are not applied.
    pub fn full_access_notice(&self) -> Option<String> {
        if self.policy.mode() != Mode::FullAccess {
            return None;
        }
        let denies = self.policy.deny_rules();
        Some(match denies {
            0 => "full access: nod permission checks are off for this process".to_string(),
            n => format!(
                "full access: nod permission checks are off for this process ({n} deny rule{} not applied)",
                if n == 1 { " is" } else { "s are" }
            ),
        })
    }
}

/// The permission mode: settings, then `NOD_PERMISSION_MODE`, then `--full-access`.
fn mode(
    settings: &AgentSettings,
    globals: &Globals,
    env: &dyn Fn(&str) -> Option<String>,
    issues: &mut Vec<String>,
) -> Mode {
    let mut mode = Mode::Ask;
    for text in settings.permission_mode.clone().into_iter().chain(env("NOD_PERMISSION_MODE")) {
        match Mode::parse(&text) {
            Some(parsed) => mode = parsed,
            None if text.trim().eq_ignore_ascii_case("auto") => {
                issues.push("permission mode \"auto\" is not supported; using \"ask\"".into());
                mode = Mode::Ask;
            }
            None => issues.push(format!("unknown permission mode {text:?}; using \"{}\"", mode.as_str())),
        }
    }
    if globals.full_access {
        mode = Mode::FullAccess;
    }
    mode
}

/// The context limits: defaults, then settings, then `--context-limit`.
fn limits(settings: &AgentSettings, globals: &Globals, issues: &mut Vec<String>) -> anyhow::Result<Limits> {
    let mut limits = Limits::default();
    if let Some(bytes) = settings.max_tool_result_bytes {
        let _ = limits.apply_flag(&format!("max_tool_result_bytes={bytes}"));
    }
    for value in &settings.context_limits {
        issues.extend(limits.apply_settings(value));
    }
    for spec in &globals.context_limits {
        limits.apply_flag(spec)?;
    }
    Ok(limits)
}

/// The step limit: the flag, else `NOD_MAX_AGENT_STEPS`, else settings, else the surface's
/// default (0 means no limit).
fn max_steps(
    flag: Option<usize>,
    env: &dyn Fn(&str) -> Option<String>,
    settings: &AgentSettings,
    default: usize,
) -> anyhow::Result<usize> {
    if let Some(steps) = flag {
        return Ok(if steps == 0 { usize::MAX } else { steps });
    }
    let configured = match env("NOD_MAX_AGENT_STEPS") {
        Some(text) => {
            Some(text.trim().parse::<u64>().map_err(|_| anyhow::anyhow!("NOD_MAX_AGENT_STEPS must be digits"))?)
        }
        None => settings.max_agent_steps,
    };
    Ok(match configured {
        Some(0) => usize::MAX,
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => default,
    })
}

/// The process environment, for `prepare`.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The sampler of a surface whose model is `model`: the sampling rules of `settings`, full
/// access as `policy` says at each request, questions to `asks`.
pub fn sampler(
    model: Arc<dyn crate::provider::Model>,
    settings: &crate::config::agent::AgentSettings,
    policy: &Arc<Policy>,
    asks: Option<crossbeam_channel::Sender<crate::session::elicit::Asked>>,
) -> Arc<crate::session::sampling::Sampler> {
    let (rules, issues) = crate::session::sampling::rules(&settings.sampling);
    for issue in issues {
        log::warn!("{issue}");
    }
    let policy = policy.clone();
    let full_access = Box::new(move || policy.mode() == crate::agent::permissions::Mode::FullAccess);
    Arc::new(crate::session::sampling::Sampler::new(model, rules, full_access, asks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_limit_has_one_precedence_and_a_default_per_surface() {
        let settings = AgentSettings { max_agent_steps: Some(7), ..AgentSettings::default() };
        let none = |_: &str| None;
        let env = |name: &str| (name == "NOD_MAX_AGENT_STEPS").then(|| "3".to_string());
        assert_eq!(max_steps(Some(2), &env, &settings, 50).unwrap(), 2, "the flag wins");
        assert_eq!(max_steps(None, &env, &settings, 50).unwrap(), 3, "then the environment");
        assert_eq!(max_steps(None, &none, &settings, 50).unwrap(), 7, "then settings");
        assert_eq!(max_steps(None, &none, &AgentSettings::default(), 50).unwrap(), 50, "then the default");
        let zero = |_: &str| Some("0".to_string());
        assert_eq!(max_steps(None, &zero, &settings, 50).unwrap(), usize::MAX, "0 is no limit");
        let bad = |_: &str| Some("ten".to_string());
        assert!(max_steps(None, &bad, &settings, 50).is_err());
        assert_eq!(Defaults::of(&Surface::Shell).max_steps, usize::MAX);
        assert_eq!(Defaults::of(&Surface::Ask { model: None, max_steps: None, system: None }).max_steps, 50);
    }
}
