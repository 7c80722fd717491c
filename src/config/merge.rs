//! Which servers a surface gets. Native surfaces (the shell, `nod ask`, `nod mcp`) combine the
//! profile with approved project servers, and the profile wins a same-name entry. ACP combines
//! the client's entries with approved project servers, the client wins, and the profile is
//! not used at all.

use super::ServerConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Native,
    Acp,
}

/// Where each merged server came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Profile,
    Client,
    Project,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Profile => "profile",
            Source::Client => "client",
            Source::Project => "project",
        }
    }
}

pub fn merge(
    surface: Surface,
    profile: Vec<ServerConfig>,
    client: Vec<ServerConfig>,
    project: Vec<ServerConfig>,
) -> Vec<(ServerConfig, Source)> {
    let mut out: Vec<(ServerConfig, Source)> = match surface {
        Surface::Native => profile.into_iter().map(|s| (s, Source::Profile)).collect(),
        Surface::Acp => client.into_iter().map(|s| (s, Source::Client)).collect(),
    };
    for server in project {
        if !out.iter().any(|(s, _)| s.name == server.name) {
            out.push((server, Source::Project));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{StdioConfig, Transport};
    use std::time::Duration;

    fn server(name: &str, program: &str) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            enabled: true,
            required: false,
            startup_timeout: Duration::from_secs(1),
            operation_timeout: Duration::from_secs(1),
            restart_limit: 1,
            protocol_version: None,
            transport: Transport::Stdio(StdioConfig { argv: vec![program.into()], env: vec![], cwd: None }),
        }
    }

    fn names(merged: &[(ServerConfig, Source)]) -> Vec<(String, String, Source)> {
        merged
            .iter()
            .map(|(s, source)| {
                let Transport::Stdio(stdio) = &s.transport else { unreachable!() };
                (s.name.clone(), stdio.argv[0].clone(), *source)
            })
            .collect()
    }

    #[test]
    fn native_profile_wins_and_acp_client_wins_without_the_profile() {
        let profile = vec![server("shared", "from-profile"), server("mine", "profile-only")];
        let client = vec![server("shared", "from-client")];
        let project = vec![server("shared", "from-project"), server("repo", "project-only")];
        let native = merge(Surface::Native, profile.clone(), client.clone(), project.clone());
        assert_eq!(
            names(&native),
            [
                ("shared".into(), "from-profile".into(), Source::Profile),
                ("mine".into(), "profile-only".into(), Source::Profile),
                ("repo".into(), "project-only".into(), Source::Project)
            ]
        );
        let acp = merge(Surface::Acp, profile, client, project);
        assert_eq!(
            names(&acp),
            [
                ("shared".into(), "from-client".into(), Source::Client),
                ("repo".into(), "project-only".into(), Source::Project)
            ]
        );
    }
}
