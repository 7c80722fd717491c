//! From words to a typed `nod mcp` command: the words after the command's path are checked
//! against its usage, and the flags that only some commands take are taken here.

use super::help::{self, Page};
use super::lex::{Rest, usage};
use super::{Add, Arguments, Mcp, Source, ToolCall, Trust, UsageError};

/// The command for `words` after its path, checked against its usage.
pub(super) fn build(command: &'static help::Command, args: &[&str], rest: &mut Rest) -> Result<Mcp, UsageError> {
    let page = Page::Command(command.path);
    let wrong = || usage(page, format!("usage: {}; see nod {} --help", command.usage.join(" or "), command.path));
    let owned = |s: &&str| s.to_string();
    let cmd = match (command.path, args) {
        ("mcp path", []) => Mcp::Path,
        ("mcp add", [name, target @ ..]) if !target.is_empty() => {
            let transport = rest.transport.clone().filter(|t| t != "stdio");
            if transport.is_some() && target.len() != 1 {
                return Err(usage(page, "usage: nod mcp add --transport http|sse <name> <url>"));
            }
            if transport.is_some() && !rest.env.is_empty() {
                return Err(usage(page, "--env goes with a stdio server; a remote one takes --header 'NAME: VALUE'"));
            }
            if transport.is_none() && !rest.headers.is_empty() {
                return Err(usage(
                    page,
                    "--header goes with a remote server (--transport http|sse); a stdio one takes --env",
                ));
            }
            if transport.is_none() && looks_like_url(target[0]) {
                return Err(usage(
                    page,
                    format!(
                        "the command of {name} looks like a URL; use --transport http (or sse for a legacy server): nod mcp add --transport http {name} <url>"
                    ),
                ));
            }
            Mcp::Add(Add {
                name: name.to_string(),
                transport,
                target: target.iter().map(owned).collect(),
                env: std::mem::take(&mut rest.env),
                headers: std::mem::take(&mut rest.headers),
            })
        }
        ("mcp add-json", [name, entry]) => Mcp::AddJson { name: name.to_string(), entry: Source::from_word(entry) },
        ("mcp get", [name]) => Mcp::Get { name: name.to_string() },
        ("mcp import", [file]) => Mcp::Import { file: file.into(), yes: rest.yes },
        ("mcp remove", [name]) => Mcp::Remove { name: name.to_string() },
        ("mcp auth", [name]) => Mcp::Auth { name: name.to_string(), open: rest.open },
        ("mcp logout", [name]) => Mcp::Logout { name: name.to_string() },
        ("mcp trust approve", [name]) => Mcp::Trust(Trust::Approve(name.to_string())),
        ("mcp trust reject", [name]) => Mcp::Trust(Trust::Reject(name.to_string())),
        ("mcp trust approve-all", []) => Mcp::Trust(Trust::ApproveAll { yes: rest.yes }),
        ("mcp trust reset", []) => Mcp::Trust(Trust::Reset),
        ("mcp list", []) => Mcp::List { connect: rest.connect },
        ("mcp tool list", [server]) => Mcp::ToolList { server: server.to_string() },
        ("mcp tool show", [server, tool]) => Mcp::ToolShow { server: server.to_string(), tool: tool.to_string() },
        ("mcp tool call", [server, tool, more @ ..]) if more.len() <= 1 => {
            let object = more.first().map(|s| Source::from_word(s));
            if rest.jsonl && (object.is_some() || !rest.pairs.is_empty()) {
                return Err(usage(
                    page,
                    "--jsonl reads the arguments from stdin, one object a line; give no arguments",
                ));
            }
            if rest.parallel.is_some() && !rest.jsonl {
                return Err(usage(page, "--parallel goes with --jsonl"));
            }
            if rest.elicit.is_some() && rest.elicit_answer.is_some() {
                return Err(usage(page, "--elicit and --elicit-answer do not go together: choose one"));
            }
            if object == Some(Source::Stdin) && rest.elicit_answer == Some(Source::Stdin) {
                return Err(usage(page, "stdin can hold the arguments or the elicitation answer, not both"));
            }
            Mcp::ToolCall(ToolCall {
                server: server.to_string(),
                tool: tool.to_string(),
                arguments: Arguments { object, pairs: std::mem::take(&mut rest.pairs) },
                jsonl: rest.jsonl,
                parallel: rest.parallel.unwrap_or(1),
                elicit: rest.elicit,
                elicit_answer: rest.elicit_answer.take(),
                output: rest.output.take(),
            })
        }
        ("mcp resource list", [server]) => Mcp::ResourceList { server: server.to_string() },
        ("mcp resource templates", [server]) => Mcp::ResourceTemplates { server: server.to_string() },
        ("mcp resource read", [server, uri]) => {
            Mcp::ResourceRead { server: server.to_string(), uri: uri.to_string(), output: rest.output.take() }
        }
        ("mcp resource complete", [server, template, variable, more @ ..]) if more.len() <= 1 => {
            Mcp::ResourceComplete {
                server: server.to_string(),
                template: template.to_string(),
                variable: variable.to_string(),
                value: more.first().map_or(String::new(), owned),
                context: std::mem::take(&mut rest.pairs),
            }
        }
        ("mcp prompt list", [server]) => Mcp::PromptList { server: server.to_string() },
        ("mcp skill list", [server]) => Mcp::SkillList { server: server.to_string() },
        ("mcp skill show", [server, name, more @ ..]) if more.len() <= 1 => {
            Mcp::SkillShow { server: server.to_string(), name: name.to_string(), file: more.first().map(owned) }
        }
        ("mcp prompt get", [server, name, more @ ..]) if more.len() <= 1 => Mcp::PromptGet {
            server: server.to_string(),
            name: name.to_string(),
            arguments: Arguments {
                object: more.first().map(|s| Source::from_word(s)),
                pairs: std::mem::take(&mut rest.pairs),
            },
        },
        ("mcp prompt complete", [server, name, argument, more @ ..]) if more.len() <= 1 => Mcp::PromptComplete {
            server: server.to_string(),
            name: name.to_string(),
            argument: argument.to_string(),
            value: more.first().map_or(String::new(), owned),
            context: std::mem::take(&mut rest.pairs),
        },
        _ => return Err(wrong()),
    };
    Ok(cmd)
}

/// `https://...`, `http://...` and the like: a scheme, then `://`.
fn looks_like_url(word: &str) -> bool {
    word.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}
