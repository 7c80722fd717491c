//! The `nod mcp tool|resource|prompt` commands that only ask one server (all but `tool
//! call`), with what the user gave already read, run on a `&Session` handed in: `nod mcp`
//! connects the server for the command, the shell hands over the one its agent uses. The
//! questions are `session::query` and the catalog's; `tool`, `resource` and `prompt` print.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Context, Exit};
use crate::cli::Mcp;
use crate::session::Session;

/// Whether the session lives on after the query: a one-shot command's ends with it, so
/// what it lists is not kept for later (`tool list` then holds one page at a time).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Lasting {
    OneShot,
    Shared,
}

/// One such command, its server left out.
pub(super) enum Query {
    ToolList,
    ToolShow {
        tool: String,
    },
    ResourceList {
        templates: bool,
    },
    ResourceRead {
        uri: String,
        output: Option<PathBuf>,
    },
    PromptList,
    SkillList,
    SkillShow {
        name: String,
        file: Option<String>,
    },
    PromptGet {
        name: String,
        arguments: Option<Value>,
    },
    /// `resource complete` (a `ref/resource`) or `prompt complete` (a `ref/prompt`).
    Complete {
        reference: Value,
        argument: String,
        value: String,
        known: Vec<(String, String)>,
    },
}

impl Query {
    /// `mcp` as a query, with the server it asks and its arguments read (before any server
    /// starts, so a usage error costs no connection); None when it is none.
    pub fn of(mcp: Mcp) -> Option<anyhow::Result<(String, Query)>> {
        let query = match mcp {
            Mcp::ToolList { server } => (server, Query::ToolList),
            Mcp::ToolShow { server, tool } => (server, Query::ToolShow { tool }),
            Mcp::ResourceList { server } => (server, Query::ResourceList { templates: false }),
            Mcp::ResourceTemplates { server } => (server, Query::ResourceList { templates: true }),
            Mcp::ResourceRead { server, uri, output } => (server, Query::ResourceRead { uri, output }),
            Mcp::ResourceComplete { server, template, variable, value, context } => {
                let reference = json!({ "type": "ref/resource", "uri": template });
                (server, Query::Complete { reference, argument: variable, value, known: context })
            }
            Mcp::PromptList { server } => (server, Query::PromptList),
            Mcp::SkillList { server } => (server, Query::SkillList),
            Mcp::SkillShow { server, name, file } => (server, Query::SkillShow { name, file }),
            Mcp::PromptGet { server, name, arguments } => match super::tool::args::prompt_arguments(&arguments) {
                Ok(arguments) => (server, Query::PromptGet { name, arguments }),
                Err(err) => return Some(Err(err)),
            },
            Mcp::PromptComplete { server, name, argument, value, context } => {
                let reference = json!({ "type": "ref/prompt", "name": name });
                (server, Query::Complete { reference, argument, value, known: context })
            }
            _ => return None,
        };
        Some(Ok(query))
    }

    /// Asks `session` and prints the answer as `nod mcp` does.
    pub fn run(self, session: &Session, lasting: Lasting, ctx: &Context) -> anyhow::Result<Exit> {
        match self {
            Query::ToolList => super::tool::list(session, lasting, ctx),
            Query::ToolShow { tool } => super::tool::show(session, &tool, ctx),
            Query::ResourceList { templates } => super::resource::list(session, templates, ctx),
            Query::ResourceRead { uri, output } => super::resource::read(session, &uri, output.as_deref(), ctx),
            Query::PromptList => super::prompt::list(session, ctx),
            Query::SkillList => super::skills::server_list(session, ctx),
            Query::SkillShow { name, file } => super::skills::server_show(session, &name, file.as_deref(), ctx),
            Query::PromptGet { name, arguments } => super::prompt::get(session, &name, arguments, ctx),
            Query::Complete { reference, argument, value, known } => {
                super::resource::complete(session, reference, &argument, &value, &known, ctx)
            }
        }
    }
}
