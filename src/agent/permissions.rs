//! Permissions (agent-reference 5): the mode (`ask`, the default, or `full-access`), rules
//! from settings.json (user rules, then the workspace's; the last match wins), and grants a
//! person gave for this session. Project files never define rules, and server text never
//! grants anything. A decision is made before a tool runs and made again, without asking,
//! immediately before the request reaches the transport.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::names::Identity;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ask,
    FullAccess,
}

impl Mode {
    pub fn parse(text: &str) -> Option<Mode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "ask" => Some(Mode::Ask),
            "full-access" | "full access" | "yolo" => Some(Mode::FullAccess),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::FullAccess => "full-access",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

impl Action {
    fn parse(text: &str) -> Option<Action> {
        match text.trim().to_ascii_lowercase().as_str() {
            "allow" => Some(Action::Allow),
            "ask" => Some(Action::Ask),
            "deny" => Some(Action::Deny),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub permission: String,
    pub pattern: String,
    pub action: Action,
    /// "user" or "workspace".
    pub source: &'static str,
}

/// Why a tool did not run, as the model sees it (agent-reference 5.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denial {
    /// A person said no (with an optional note, delivered separately).
    UserDenied,
    /// A rule denies it, or the decision changed before transport.
    PolicyDenied,
    /// It needs approval and nobody can be asked.
    PermissionRequired,
}

impl Denial {
    /// The failure result the model receives.
    pub fn to_json(&self, tool: &str) -> Value {
        let (reason, message, suggestion) = match self {
            Denial::UserDenied => (
                "user_denied",
                "Permission denied by user",
                "The tool did not run. Do not retry unchanged; explain the denial or use a safer allowed alternative.",
            ),
            Denial::PolicyDenied => (
                "policy_denied",
                "Tool access was denied by configured policy",
                "The tool did not run. Do not retry unchanged; explain the configured policy blocker or use an allowed alternative.",
            ),
            Denial::PermissionRequired => (
                "permission_required",
                "Tool approval is required before this tool can run",
                "The tool did not run. Noninteractive mode cannot show an approval prompt. Rerun interactively to approve, or configure a narrow permission rule before retrying.",
            ),
        };
        json!({ "error": { "type": "tool_permission_denied", "tool_name": tool, "message": message,
            "reason": reason, "denied": true, "suggestion": suggestion } })
    }
}

impl Denial {
    /// The one line a person sees.
    pub fn message(&self) -> &'static str {
        match self {
            Denial::UserDenied => "Permission denied by user",
            Denial::PolicyDenied => "Tool access was denied by configured policy",
            Denial::PermissionRequired => "Tool approval is required before this tool can run",
        }
    }
}

/// What the policy says before a tool runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Ask,
    Deny(Denial),
}

/// How a tool is treated when no rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sensitivity {
    /// Never needs approval (capability_search, mcp_select_tool).
    Free,
    /// Runs unless a rule says otherwise (read-only: mcp_read_resource).
    ReadOnly,
    /// Needs approval in ask mode (every MCP tool).
    Sensitive,
}

/// What a decision is about: a built-in by its name, or an MCP tool by its identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Builtin(&'static str),
    Tool {
        identity: Identity,
        alias: String,
        /// Another identity shares this one's canonical name: a `deny` that names it wins.
        contested: bool,
    },
}

impl Subject {
    pub fn tool(identity: Identity, alias: &str, contested: bool) -> Subject {
        Subject::Tool { identity, alias: alias.to_string(), contested }
    }

    /// The model-facing name (the built-in's name, or the tool's alias).
    pub fn name(&self) -> &str {
        match self {
            Subject::Builtin(name) => name,
            Subject::Tool { alias, .. } => alias,
        }
    }

    /// Whether a rule's permission pattern names this subject: a built-in by its name, a tool
    /// by its canonical name `mcp_<server>_<tool>` or its alias.
    fn named_by(&self, pattern: &str) -> bool {
        match self {
            Subject::Builtin(name) => wildcard(pattern, name),
            Subject::Tool { identity, alias, .. } => {
                wildcard(pattern, alias) || wildcard(pattern, &identity.canonical())
            }
        }
    }

    /// What a "yes for this session" covers: a tool's identity; a resource read's server
    /// (the target is `<server>:<uri>`); another built-in as a whole.
    fn grant(&self, target: &str) -> Grant {
        match self {
            Subject::Tool { identity, alias, .. } => Grant::Tool(identity.clone(), alias.clone()),
            Subject::Builtin(name) if *name == crate::agent::builtin::READ_RESOURCE => {
                Grant::Resources(target.split_once(':').map_or(target, |(server, _)| server).to_string())
            }
            Subject::Builtin(name) => Grant::Builtin(name),
        }
    }
}

/// A session grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grant {
    /// One MCP tool (and the alias it was granted under, for display).
    Tool(Identity, String),
    /// Every resource read of one server.
    Resources(String),
    Builtin(&'static str),
}

impl Grant {
    fn matches(&self, other: &Grant) -> bool {
        match (self, other) {
            (Grant::Tool(a, _), Grant::Tool(b, _)) => a == b,
            _ => self == other,
        }
    }

    /// (the permission name, the target) as `nod permissions` shows them.
    pub fn shown(&self) -> (String, String) {
        match self {
            Grant::Tool(identity, alias) => {
                (alias.clone(), format!("server {} tool {}", identity.server, identity.tool))
            }
            Grant::Resources(server) => (crate::agent::builtin::READ_RESOURCE.to_string(), format!("{server}:*")),
            Grant::Builtin(name) => (name.to_string(), "*".to_string()),
        }
    }
}

pub struct Policy {
    mode: Mutex<Mode>,
    configured: Mode,
    rules: Vec<Rule>,
    grants: Mutex<Vec<Grant>>,
    /// A subagent's policy follows its parent's: never a broader mode than the parent has now.
    parent: Option<Arc<Policy>>,
}

impl Policy {
    pub fn new(mode: Mode, rules: Vec<Rule>) -> Policy {
        Policy { mode: Mutex::new(mode), configured: mode, rules, grants: Mutex::new(Vec::new()), parent: None }
    }

    /// A subagent's policy: the parent's rules and current mode, no grants (the parent's
    /// "yes for this session" answers are not the child's). Its mode is never broader than
    /// the parent's mode at the time of a decision.
    pub fn child(parent: &Arc<Policy>) -> Policy {
        let mode = parent.mode();
        Policy {
            mode: Mutex::new(mode),
            configured: mode,
            rules: parent.rules.clone(),
            grants: Mutex::new(Vec::new()),
            parent: Some(parent.clone()),
        }
    }

    pub fn mode(&self) -> Mode {
        let own = *self.mode.lock().unwrap_or_else(PoisonError::into_inner);
        match &self.parent {
            Some(parent) if parent.mode() == Mode::Ask => Mode::Ask,
            _ => own,
        }
    }

    /// Changes the mode for this session (`/permissions <mode>`); `None` goes back to the
    /// configured one.
    pub fn set_mode(&self, mode: Option<Mode>) {
        *self.mode.lock().unwrap_or_else(PoisonError::into_inner) = mode.unwrap_or(self.configured);
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The number of `deny` rules (what `--full-access` sets aside).
    pub fn deny_rules(&self) -> usize {
        self.rules.iter().filter(|r| r.action == Action::Deny).count()
    }

    pub fn grants(&self) -> Vec<Grant> {
        self.grants.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// "Yes for this session" for `subject` (on `target`, for a resource read's server).
    pub fn grant(&self, subject: &Subject, target: &str) {
        let grant = subject.grant(target);
        let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        if !grants.iter().any(|g| g.matches(&grant)) {
            grants.push(grant);
        }
    }

    pub fn clear_grants(&self) {
        self.grants.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The rule that decides `subject` on `target`: the last one that names it, except that a
    /// contested tool (its canonical name shared with another) is denied by any `deny` that
    /// names it.
    fn rule(&self, subject: &Subject, target: &str) -> Option<Action> {
        let applies = |r: &&Rule| subject.named_by(&r.permission) && (r.pattern == "*" || wildcard(&r.pattern, target));
        if matches!(subject, Subject::Tool { contested: true, .. })
            && self.rules.iter().filter(applies).any(|r| r.action == Action::Deny)
        {
            return Some(Action::Deny);
        }
        self.rules.iter().rev().find(applies).map(|r| r.action)
    }

    /// The decision for `subject` on `target` (`*` for MCP tools, `<server>:<uri>` for a
    /// resource read).
    pub fn decide(&self, subject: &Subject, target: &str, sensitivity: Sensitivity) -> Decision {
        if self.mode() == Mode::FullAccess {
            return Decision::Allow;
        }
        match self.rule(subject, target) {
            Some(Action::Deny) => Decision::Deny(Denial::PolicyDenied),
            Some(Action::Allow) => Decision::Allow,
            Some(Action::Ask) | None if self.granted(subject, target) => Decision::Allow,
            Some(Action::Ask) => Decision::Ask,
            None => match sensitivity {
                Sensitivity::Free | Sensitivity::ReadOnly => Decision::Allow,
                Sensitivity::Sensitive => Decision::Ask,
            },
        }
    }

    /// The check right before transport: the same decision, without asking. `approved`
    /// says a person approved this one call.
    pub fn recheck(
        &self,
        subject: &Subject,
        target: &str,
        sensitivity: Sensitivity,
        approved: bool,
    ) -> Result<(), Denial> {
        match self.decide(subject, target, sensitivity) {
            Decision::Allow => Ok(()),
            Decision::Ask if approved => Ok(()),
            Decision::Ask => Err(Denial::PermissionRequired),
            Decision::Deny(denial) => Err(denial),
        }
    }

    /// Whether a rule denies `subject` whatever the target (a tool to keep out of search
    /// results and out of a subagent's view).
    pub fn always_denied(&self, subject: &Subject) -> bool {
        if self.mode() == Mode::FullAccess {
            return false;
        }
        let applies = |r: &&Rule| subject.named_by(&r.permission) && r.pattern == "*";
        if matches!(subject, Subject::Tool { contested: true, .. })
            && self.rules.iter().filter(applies).any(|r| r.action == Action::Deny)
        {
            return true;
        }
        self.rules.iter().rev().find(applies).is_some_and(|r| r.action == Action::Deny)
    }

    fn granted(&self, subject: &Subject, target: &str) -> bool {
        let grant = subject.grant(target);
        self.grants.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|g| g.matches(&grant))
    }

    /// `nod permissions` as text (agent-reference 5.8).
    pub fn describe(&self) -> String {
        let mut out = format!("[permissions] mode={}\n", self.mode().as_str());
        if self.rules.is_empty() {
            out.push_str("[permissions] configured rules: (none)\n");
        } else {
            out.push_str("[permissions] configured rules:\n");
            for rule in &self.rules {
                out.push_str(&format!(
                    " - {} {} -> {} ({})\n",
                    rule.action.as_str(),
                    rule.permission,
                    rule.pattern,
                    rule.source
                ));
            }
        }
        let grants = self.grants();
        if grants.is_empty() {
            out.push_str("[permissions] session grants: (none)\n");
        } else {
            out.push_str("[permissions] session grants:\n");
            for grant in grants {
                let (name, target) = grant.shown();
                out.push_str(&format!(" - {name} -> {target}\n"));
            }
        }
        out
    }

    /// `nod permissions --json`.
    pub fn describe_json(&self) -> Value {
        let rules: Vec<Value> = self
            .rules
            .iter()
            .map(|r| json!({ "permission": r.permission, "pattern": r.pattern, "action": r.action.as_str(), "source": r.source }))
            .collect();
        let grants: Vec<Value> = self
            .grants()
            .iter()
            .map(|g| {
                let (name, target) = g.shown();
                json!({ "tool_name": name, "target_path": target, "display_target": target })
            })
            .collect();
        json!({ "kind": "permissions", "mode": self.mode().as_str(), "grant_count": grants.len(),
            "grant_scope": "session", "runtime_grants_available": true, "rules_scope": "persistent_config",
            "rules": rules, "grants": grants })
    }
}

/// Rules from a settings value (agent-reference 5.2): `"ask"`, `{"perm": "action"}` or
/// `{"perm": {"pattern": "action"}}`. Bad entries are skipped with a diagnostic.
pub fn parse_rules(value: &Value, source: &'static str, issues: &mut Vec<String>) -> Vec<Rule> {
    let mut rules = Vec::new();
    let rule = |permission: &str, pattern: &str, action: Action| Rule {
        permission: permission.to_string(),
        pattern: pattern.to_string(),
        action,
        source,
    };
    match value {
        Value::String(action) => match Action::parse(action) {
            Some(action) => rules.push(rule("*", "*", action)),
            None => issues.push(format!("permission: invalid action {action:?}")),
        },
        Value::Object(map) => {
            for (permission, entry) in map {
                if permission.is_empty() {
                    issues.push("permission: empty permission name".into());
                    continue;
                }
                match entry {
                    Value::String(action) => match Action::parse(action) {
                        Some(action) => rules.push(rule(permission, "*", action)),
                        None => issues.push(format!("permission.{permission}: invalid action {action:?}")),
                    },
                    Value::Object(patterns) => {
                        for (pattern, action) in patterns {
                            match action.as_str().and_then(Action::parse) {
                                Some(action) => rules.push(rule(permission, pattern, action)),
                                None => issues.push(format!("permission.{permission}: invalid action {action}")),
                            }
                        }
                    }
                    _ => issues.push(format!("permission.{permission}: expected an action or a pattern map")),
                }
            }
        }
        _ => issues.push("permission: expected a string or an object".into()),
    }
    rules
}

/// `*` (any run, `**` too) and `?` (one character), case-sensitive, with backtracking.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            while pi < p.len() && p[pi] == '*' {
                pi += 1;
            }
            star = Some(pi);
            mark = ti;
        } else if let Some(after) = star {
            pi = after;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(alias: &str) -> Subject {
        let rest = alias.strip_prefix("mcp_").unwrap();
        let (server, tool) = rest.split_once('_').unwrap();
        Subject::tool(Identity::new(server, tool), alias, false)
    }

    const READ: Subject = Subject::Builtin("mcp_read_resource");

    fn rules(value: Value) -> Vec<Rule> {
        let mut issues = Vec::new();
        let rules = parse_rules(&value, "user", &mut issues);
        assert!(issues.is_empty(), "{issues:?}");
        rules
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("mcp_docs_*", "mcp_docs_search"));
        assert!(wildcard("*", "anything"));
        assert!(wildcard("mcp_?s_*", "mcp_fs_write"));
        assert!(!wildcard("mcp_docs_*", "mcp_fs_write"));
        assert!(wildcard("a*b*c", "aXXbYYc"));
        assert!(!wildcard("MCP_*", "mcp_x"));
    }

    #[test]
    fn the_last_matching_rule_wins_and_deny_beats_grants() {
        let policy =
            Policy::new(Mode::Ask, rules(json!({ "*": "ask", "mcp_docs_*": "allow", "mcp_fs_write_file": "deny" })));
        assert_eq!(policy.decide(&tool("mcp_docs_search"), "*", Sensitivity::Sensitive), Decision::Allow);
        assert_eq!(policy.decide(&tool("mcp_fs_read"), "*", Sensitivity::Sensitive), Decision::Ask);
        assert_eq!(
            policy.decide(&tool("mcp_fs_write_file"), "*", Sensitivity::Sensitive),
            Decision::Deny(Denial::PolicyDenied)
        );
        policy.grant(&tool("mcp_fs_write_file"), "*");
        policy.grant(&tool("mcp_fs_read"), "*");
        assert_eq!(policy.decide(&tool("mcp_fs_read"), "*", Sensitivity::Sensitive), Decision::Allow);
        assert_eq!(
            policy.decide(&tool("mcp_fs_write_file"), "*", Sensitivity::Sensitive),
            Decision::Deny(Denial::PolicyDenied)
        );
        assert!(policy.always_denied(&tool("mcp_fs_write_file")));
        policy.set_mode(Some(Mode::FullAccess));
        assert_eq!(policy.decide(&tool("mcp_fs_write_file"), "*", Sensitivity::Sensitive), Decision::Allow);
    }

    #[test]
    fn defaults_without_rules() {
        let policy = Policy::new(Mode::Ask, Vec::new());
        assert_eq!(policy.decide(&tool("mcp_x_y"), "*", Sensitivity::Sensitive), Decision::Ask);
        assert_eq!(policy.decide(&READ, "s:u", Sensitivity::ReadOnly), Decision::Allow);
        assert_eq!(policy.decide(&Subject::Builtin("capability_search"), "*", Sensitivity::Free), Decision::Allow);
        assert_eq!(
            policy.recheck(&tool("mcp_x_y"), "*", Sensitivity::Sensitive, false),
            Err(Denial::PermissionRequired)
        );
        assert_eq!(policy.recheck(&tool("mcp_x_y"), "*", Sensitivity::Sensitive, true), Ok(()));
    }

    #[test]
    fn a_child_policy_is_never_broader_than_its_parent() {
        let parent = Arc::new(Policy::new(Mode::FullAccess, rules(json!({ "mcp_fs_*": "deny" }))));
        parent.grant(&tool("mcp_docs_search"), "*");
        let child = Policy::child(&parent);
        assert_eq!(child.mode(), Mode::FullAccess);
        assert!(child.grants().is_empty(), "grants are not inherited");
        parent.set_mode(Some(Mode::Ask));
        assert_eq!(child.mode(), Mode::Ask, "the parent went back to ask: so does the child");
        assert_eq!(
            child.decide(&tool("mcp_fs_write"), "*", Sensitivity::Sensitive),
            Decision::Deny(Denial::PolicyDenied)
        );
        assert_eq!(child.decide(&tool("mcp_docs_search"), "*", Sensitivity::Sensitive), Decision::Ask);
    }

    #[test]
    fn rule_shapes_and_bad_entries() {
        assert_eq!(rules(json!("deny"))[0].permission, "*");
        let patterns = rules(json!({ "mcp_read_resource": { "docs:*": "allow", "fs:*": "deny" } }));
        assert_eq!(patterns.len(), 2);
        let policy = Policy::new(Mode::Ask, patterns);
        assert_eq!(policy.decide(&READ, "fs:file:///etc", Sensitivity::ReadOnly), Decision::Deny(Denial::PolicyDenied));
        let mut issues = Vec::new();
        parse_rules(&json!({ "x": "maybe", "": "allow", "y": 3 }), "user", &mut issues);
        assert_eq!(issues.len(), 3, "{issues:?}");
    }

    #[test]
    fn rules_apply_to_identities_and_a_shared_canonical_name_is_denied_for_both() {
        // github + corp_delete_repo and github_corp + delete_repo share mcp_github_corp_delete_repo.
        let policy = Policy::new(
            Mode::Ask,
            rules(json!({ "mcp_github_corp_delete_repo": "deny", "mcp_github_corp_*": "allow" })),
        );
        let plain = Subject::tool(Identity::new("github", "corp_delete_repo"), "mcp_github_corp_delete_repo", true);
        let hashed_alias = crate::agent::names::alias("github_corp", "delete_repo");
        let hashed = Subject::tool(Identity::new("github_corp", "delete_repo"), &hashed_alias, true);
        for subject in [&plain, &hashed] {
            assert_eq!(policy.decide(subject, "*", Sensitivity::Sensitive), Decision::Deny(Denial::PolicyDenied));
            assert!(policy.always_denied(subject));
        }
        // Uncontested, the last matching rule wins as always: the hashed alias cannot escape
        // a rule written against the canonical name.
        let alone = Subject::tool(Identity::new("github_corp", "delete_repo"), &hashed_alias, false);
        assert_eq!(policy.decide(&alone, "*", Sensitivity::Sensitive), Decision::Allow);
        let strict = Policy::new(Mode::Ask, rules(json!({ "mcp_github_corp_delete_repo": "deny" })));
        assert_eq!(strict.decide(&alone, "*", Sensitivity::Sensitive), Decision::Deny(Denial::PolicyDenied));
        // A grant is the identity's, never another tool's under a similar name.
        let other = Subject::tool(Identity::new("github", "corp_delete_repo"), "mcp_github_corp_delete_repo", false);
        let open = Policy::new(Mode::Ask, Vec::new());
        open.grant(&alone, "*");
        assert_eq!(open.decide(&alone, "*", Sensitivity::Sensitive), Decision::Allow);
        assert_eq!(open.decide(&other, "*", Sensitivity::Sensitive), Decision::Ask);
    }

    #[test]
    fn rules_apply_to_built_ins_and_resource_grants_are_per_server() {
        let policy = Policy::new(Mode::Ask, rules(json!({ "subagent": "deny", "mcp_read_resource": "ask" })));
        assert!(policy.always_denied(&Subject::Builtin("subagent")));
        assert_eq!(policy.decide(&READ, "docs:file:///a", Sensitivity::ReadOnly), Decision::Ask);
        policy.grant(&READ, "docs:file:///a");
        assert_eq!(policy.decide(&READ, "docs:file:///b", Sensitivity::ReadOnly), Decision::Allow);
        assert_eq!(policy.decide(&READ, "fs:file:///etc/passwd", Sensitivity::ReadOnly), Decision::Ask);
    }

    #[test]
    fn denials_have_the_documented_shape() {
        let denial = Denial::PermissionRequired.to_json("mcp_a_b");
        assert_eq!(denial["error"]["type"], "tool_permission_denied");
        assert_eq!(denial["error"]["reason"], "permission_required");
        assert_eq!(denial["error"]["denied"], true);
    }
}
