//! Command-line parsing: pure lexopt, one function per subcommand, nothing read from the
//! environment or the disk here. `help` holds the one table that feeds `--help` and the man
//! pages.

mod ask;
pub mod help;

pub use ask::{Ask, Globals};

use std::ffi::OsString;
use std::path::PathBuf;

use lexopt::prelude::*;

use crate::session::elicit::Policy;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Help(help::Page),
    Version,
    /// `nod` with no command: the interactive shell (not built yet).
    Shell,
    /// `nod ask`: one request to the model, for scripts.
    Ask(Ask),
    /// `nod permissions [--json]`.
    Permissions {
        globals: Globals,
        json: bool,
    },
    /// `nod --generate man <page>`: print a man page.
    GenerateMan(help::Page),
    Mcp(Mcp),
    Status {
        json: bool,
    },
    Doctor {
        json: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Mcp {
    Path,
    Add(Add),
    Remove {
        name: String,
    },
    Trust(Trust),
    Auth {
        name: String,
        open: bool,
    },
    Logout {
        name: String,
    },
    List {
        connect: bool,
        json: bool,
    },
    ToolList {
        server: String,
        json: bool,
    },
    ToolCall(ToolCall),
    ResourceList {
        server: String,
        json: bool,
    },
    ResourceTemplates {
        server: String,
        json: bool,
    },
    ResourceRead {
        server: String,
        uri: String,
        output: Option<PathBuf>,
        json: bool,
    },
    ResourceComplete {
        server: String,
        template: String,
        variable: String,
        value: String,
        context: Vec<(String, String)>,
        json: bool,
    },
    PromptList {
        server: String,
        json: bool,
    },
    PromptGet {
        server: String,
        name: String,
        arguments: Option<String>,
        json: bool,
    },
    PromptComplete {
        server: String,
        name: String,
        argument: String,
        value: String,
        context: Vec<(String, String)>,
        json: bool,
    },
}

/// `nod mcp trust ...`.
#[derive(Debug, Clone, PartialEq)]
pub enum Trust {
    Approve(String),
    Reject(String),
    /// `yes`: `--yes`, approve without asking on a terminal.
    ApproveAll {
        yes: bool,
    },
    Reset,
}

/// `nod mcp add`: a stdio command, or a remote URL with `--transport`.
#[derive(Debug, Clone, PartialEq)]
pub struct Add {
    pub name: String,
    /// `None` for stdio; `http` or `sse`.
    pub transport: Option<String>,
    /// The command and its arguments, or the URL alone.
    pub target: Vec<String>,
    pub env: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub server: String,
    pub tool: String,
    pub arguments: Option<String>,
    pub jsonl: bool,
    pub parallel: usize,
    pub elicit: Policy,
    pub json: bool,
}

/// A usage error: the message and the help page that explains the command.
#[derive(Debug)]
pub struct UsageError {
    pub message: String,
    pub page: help::Page,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

type Parsed<T> = Result<T, UsageError>;

fn usage(page: help::Page, message: impl Into<String>) -> UsageError {
    UsageError { message: message.into(), page }
}

fn lex(page: help::Page) -> impl Fn(lexopt::Error) -> UsageError {
    move |e| usage(page, e.to_string())
}

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Parsed<Command> {
    let mut parser = lexopt::Parser::from_args(args);
    let top = help::Page::Nod;
    let mut globals = Globals::default();
    // Global flags first; then the first word decides, and every branch returns.
    while let Some(arg) = parser.next().map_err(lex(top))? {
        if let Some(flag) = ask::global(&arg) {
            ask::apply(flag, &mut parser, &mut globals)?;
            continue;
        }
        match arg {
            Short('h') | Long("help") => return Ok(Command::Help(top)),
            Short('V') | Short('v') | Long("version") => return Ok(Command::Version),
            Long("generate") => {
                let what = string(&mut parser, top)?;
                if what != "man" {
                    return Err(usage(top, format!("--generate takes \"man\", not {what:?}")));
                }
                let page = match parser.next().map_err(lex(top))? {
                    Some(Value(name)) if name == "nod" => help::Page::Nod,
                    Some(Value(name)) if name == "nod-mcp" => help::Page::Mcp,
                    _ => return Err(usage(top, "usage: nod --generate man nod|nod-mcp")),
                };
                return Ok(Command::GenerateMan(page));
            }
            Value(cmd) => {
                let cmd = cmd.into_string().map_err(|_| usage(top, "the command is not valid UTF-8"))?;
                return match cmd.as_str() {
                    "mcp" => parse_mcp(&mut parser).map(Command::Mcp),
                    "ask" => ask::parse_ask(&mut parser, globals).map(Command::Ask),
                    "permissions" => ask::parse_permissions(&mut parser, globals)
                        .map(|(globals, json)| Command::Permissions { globals, json }),
                    "status" | "doctor" => {
                        let mut json = false;
                        while let Some(arg) = parser.next().map_err(lex(top))? {
                            match arg {
                                Long("json") => json = true,
                                Short('h') | Long("help") => return Ok(Command::Help(top)),
                                other => return Err(usage(top, other.unexpected().to_string())),
                            }
                        }
                        Ok(if cmd == "status" { Command::Status { json } } else { Command::Doctor { json } })
                    }
                    "help" => Ok(Command::Help(match parser.next().map_err(lex(top))? {
                        Some(Value(topic)) if topic == "mcp" => help::Page::Mcp,
                        _ => top,
                    })),
                    other => Err(usage(top, format!("unknown command {other:?}"))),
                };
            }
            other => return Err(usage(top, other.unexpected().to_string())),
        }
    }
    Ok(Command::Shell)
}

/// Flags every `nod mcp` subcommand shares, plus positional values in order.
#[derive(Default)]
struct Rest {
    values: Vec<String>,
    json: bool,
    connect: bool,
    jsonl: bool,
    parallel: Option<usize>,
    elicit: Option<Policy>,
    output: Option<PathBuf>,
    context: Vec<(String, String)>,
    transport: Option<String>,
    env: Vec<(String, String)>,
    open: bool,
    yes: bool,
    help: bool,
}

fn parse_mcp(parser: &mut lexopt::Parser) -> Parsed<Mcp> {
    let page = help::Page::Mcp;
    let mut rest = Rest::default();
    while let Some(arg) = parser.next().map_err(lex(page))? {
        match arg {
            Short('h') | Long("help") => rest.help = true,
            Long("json") => rest.json = true,
            Long("open") => rest.open = true,
            Short('y') | Long("yes") => rest.yes = true,
            Long("connect") => rest.connect = true,
            Long("jsonl") => rest.jsonl = true,
            Long("parallel") => {
                let n: usize = string(parser, page)?
                    .parse()
                    .map_err(|_| usage(page, "--parallel takes a number from 1 to 256"))?;
                if !(1..=256).contains(&n) {
                    return Err(usage(page, "--parallel takes a number from 1 to 256"));
                }
                rest.parallel = Some(n);
            }
            Long("elicit") => {
                let text = string(parser, page)?;
                rest.elicit = Some(Policy::parse(&text).ok_or_else(|| {
                    usage(page, format!("--elicit takes fail, decline, cancel or defaults, not {text:?}"))
                })?);
            }
            Short('o') | Long("output") => rest.output = Some(PathBuf::from(parser.value().map_err(lex(page))?)),
            Long("arg") => {
                let text = string(parser, page)?;
                let (k, v) = text.split_once('=').ok_or_else(|| usage(page, "--arg takes NAME=VALUE"))?;
                rest.context.push((k.to_string(), v.to_string()));
            }
            Long("transport") => {
                let text = string(parser, page)?;
                if text != "http" && text != "sse" && text != "stdio" {
                    return Err(usage(page, format!("--transport takes http, sse or stdio, not {text:?}")));
                }
                rest.transport = Some(text);
            }
            Short('e') | Long("env") => {
                let text = string(parser, page)?;
                let (k, v) = text.split_once('=').ok_or_else(|| usage(page, "--env takes NAME=VALUE"))?;
                rest.env.push((k.to_string(), v.to_string()));
            }
            Value(value) => {
                rest.values.push(value.into_string().map_err(|_| usage(page, "arguments must be valid UTF-8"))?);
                // After `add <name> <command>`, everything is the server's own argument list,
                // dashes included (`nod mcp add fs npx -y @scope/server /tmp`).
                if rest.values.len() == 3 && rest.values[0] == "add" {
                    for raw in parser.raw_args().map_err(lex(page))? {
                        rest.values.push(raw.into_string().map_err(|_| usage(page, "arguments must be valid UTF-8"))?);
                    }
                }
            }
            other => return Err(usage(page, other.unexpected().to_string())),
        }
    }
    if rest.help {
        return Err(usage(page, ""));
    }
    let words: Vec<&str> = rest.values.iter().map(String::as_str).collect();
    let json = rest.json;
    let cmd = match words.as_slice() {
        [] => return Err(usage(page, "usage: nod mcp <command>; see nod mcp --help")),
        ["path"] => Mcp::Path,
        ["add", name, target @ ..] if !target.is_empty() => {
            let transport = rest.transport.clone().filter(|t| t != "stdio");
            if transport.is_some() && target.len() != 1 {
                return Err(usage(page, "usage: nod mcp add --transport http|sse <name> <url>"));
            }
            if transport.is_some() && !rest.env.is_empty() {
                return Err(usage(page, "--env goes with a stdio server"));
            }
            let target: Vec<String> = target.iter().map(|s| s.to_string()).collect();
            Mcp::Add(Add { name: name.to_string(), transport, target, env: rest.env.clone() })
        }
        ["add", ..] => {
            return Err(usage(
                page,
                "usage: nod mcp add [--env NAME=VALUE]... <name> <command> [args...] or nod mcp add --transport http|sse <name> <url>",
            ));
        }
        ["remove", name] => Mcp::Remove { name: name.to_string() },
        ["auth", name] => Mcp::Auth { name: name.to_string(), open: rest.open },
        ["logout", name] => Mcp::Logout { name: name.to_string() },
        ["trust", "approve", name] => Mcp::Trust(Trust::Approve(name.to_string())),
        ["trust", "reject", name] => Mcp::Trust(Trust::Reject(name.to_string())),
        ["trust", "approve-all"] => Mcp::Trust(Trust::ApproveAll { yes: rest.yes }),
        ["trust", "reset"] => Mcp::Trust(Trust::Reset),
        ["trust", ..] => {
            return Err(usage(page, "usage: nod mcp trust approve|reject <name> | approve-all [--yes] | reset"));
        }
        ["list"] => Mcp::List { connect: rest.connect, json },
        ["tool", "list", server] => Mcp::ToolList { server: server.to_string(), json },
        ["tool", "call", server, tool, more @ ..] if more.len() <= 1 => {
            let arguments = more.first().map(|s| s.to_string());
            if rest.jsonl && arguments.is_some() {
                return Err(usage(page, "--jsonl reads arguments from stdin; give no arguments-json"));
            }
            if rest.parallel.is_some() && !rest.jsonl {
                return Err(usage(page, "--parallel goes with --jsonl"));
            }
            Mcp::ToolCall(ToolCall {
                server: server.to_string(),
                tool: tool.to_string(),
                arguments,
                jsonl: rest.jsonl,
                parallel: rest.parallel.unwrap_or(1),
                elicit: rest.elicit.unwrap_or(Policy::Fail),
                json,
            })
        }
        ["resource", "list", server] => Mcp::ResourceList { server: server.to_string(), json },
        ["resource", "templates", server] => Mcp::ResourceTemplates { server: server.to_string(), json },
        ["resource", "read", server, uri] => {
            Mcp::ResourceRead { server: server.to_string(), uri: uri.to_string(), output: rest.output.clone(), json }
        }
        ["resource", "complete", server, template, variable, more @ ..] if more.len() <= 1 => Mcp::ResourceComplete {
            server: server.to_string(),
            template: template.to_string(),
            variable: variable.to_string(),
            value: more.first().map_or(String::new(), |s| s.to_string()),
            context: rest.context.clone(),
            json,
        },
        ["prompt", "list", server] => Mcp::PromptList { server: server.to_string(), json },
        ["prompt", "get", server, name, more @ ..] if more.len() <= 1 => Mcp::PromptGet {
            server: server.to_string(),
            name: name.to_string(),
            arguments: more.first().map(|s| s.to_string()),
            json,
        },
        ["prompt", "complete", server, name, argument, more @ ..] if more.len() <= 1 => Mcp::PromptComplete {
            server: server.to_string(),
            name: name.to_string(),
            argument: argument.to_string(),
            value: more.first().map_or(String::new(), |s| s.to_string()),
            context: rest.context.clone(),
            json,
        },
        [cmd, ..] => {
            let known = help::MCP_COMMANDS.iter().find(|c| c.usage.split(' ').nth(2) == Some(cmd));
            return Err(usage(
                page,
                match known {
                    Some(c) => format!("usage: {}", c.usage),
                    None => format!("unknown command \"nod mcp {cmd}\"; see nod mcp --help"),
                },
            ));
        }
    };
    if (rest.transport.is_some() || !rest.env.is_empty()) && !matches!(cmd, Mcp::Add(_)) {
        return Err(usage(page, "--transport and --env go with nod mcp add"));
    }
    if rest.output.is_some() && !matches!(cmd, Mcp::ResourceRead { .. }) {
        return Err(usage(page, "--output goes with nod mcp resource read"));
    }
    if rest.yes && !matches!(cmd, Mcp::Trust(Trust::ApproveAll { .. })) {
        return Err(usage(page, "--yes goes with nod mcp trust approve-all"));
    }
    if rest.connect && !matches!(cmd, Mcp::List { .. }) {
        return Err(usage(page, "--connect goes with nod mcp list"));
    }
    if (rest.jsonl || rest.elicit.is_some()) && !matches!(cmd, Mcp::ToolCall(_)) {
        return Err(usage(page, "--jsonl, --parallel and --elicit go with nod mcp tool call"));
    }
    Ok(cmd)
}

fn string(parser: &mut lexopt::Parser, page: help::Page) -> Parsed<String> {
    parser.value().map_err(lex(page))?.into_string().map_err(|_| usage(page, "option values must be valid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &str) -> Parsed<Command> {
        parse(args.split_whitespace().map(OsString::from))
    }

    #[test]
    fn tool_call_flags() {
        let Ok(Command::Mcp(Mcp::ToolCall(call))) = p("mcp tool call fs read --jsonl --parallel 8 --elicit defaults")
        else {
            panic!()
        };
        assert_eq!((call.jsonl, call.parallel, call.elicit), (true, 8, Policy::Defaults));
        assert!(p("mcp tool call fs read {} --jsonl").is_err());
        assert!(p("mcp tool call fs read --parallel 0").is_err());
        assert!(p("mcp tool call fs read --elicit maybe").is_err());
        assert!(p("mcp list --jsonl").is_err());
    }

    #[test]
    fn add_keeps_the_servers_own_flags() {
        let Ok(Command::Mcp(Mcp::Add(add))) = p("mcp add --env K=V fs npx -y @scope/server --read-only /tmp") else {
            panic!()
        };
        assert_eq!(add.name, "fs");
        assert_eq!(add.target, ["npx", "-y", "@scope/server", "--read-only", "/tmp"]);
        assert_eq!(add.env, [("K".to_string(), "V".to_string())]);
        let Ok(Command::Mcp(Mcp::Add(add))) = p("mcp add --transport http remote https://e.com/mcp") else { panic!() };
        assert_eq!(add.transport.as_deref(), Some("http"));
        assert!(p("mcp add --transport http remote https://e.com/mcp extra").is_err());
        assert!(p("mcp add name").is_err());
        assert_eq!(p("mcp remove x").unwrap(), Command::Mcp(Mcp::Remove { name: "x".into() }));
    }

    #[test]
    fn every_shape() {
        assert_eq!(p("").unwrap(), Command::Shell);
        assert_eq!(p("--version").unwrap(), Command::Version);
        assert_eq!(p("mcp path").unwrap(), Command::Mcp(Mcp::Path));
        assert_eq!(p("mcp list --connect --json").unwrap(), Command::Mcp(Mcp::List { connect: true, json: true }));
        assert!(matches!(
            p("mcp resource read s u -o f").unwrap(),
            Command::Mcp(Mcp::ResourceRead { output: Some(_), .. })
        ));
        assert!(
            matches!(p("mcp prompt complete s n a").unwrap(), Command::Mcp(Mcp::PromptComplete { value, .. }) if value.is_empty())
        );
        assert!(
            matches!(p("mcp resource complete s t v 1 --arg a=b").unwrap(), Command::Mcp(Mcp::ResourceComplete { context, .. }) if context.len() == 1)
        );
        let err = p("mcp tool call").unwrap_err();
        assert!(err.message.contains("nod mcp tool"), "{}", err.message);
        assert!(p("mcp frobnicate").unwrap_err().message.contains("unknown command"));
        assert_eq!(p("mcp trust approve-all").unwrap(), Command::Mcp(Mcp::Trust(Trust::ApproveAll { yes: false })));
        for yes in ["--yes", "-y"] {
            let all = p(&format!("mcp trust approve-all {yes}")).unwrap();
            assert_eq!(all, Command::Mcp(Mcp::Trust(Trust::ApproveAll { yes: true })));
        }
        assert!(p("mcp trust approve fx --yes").unwrap_err().message.contains("--yes goes with"));
        assert!(p("mcp list -y").is_err());
        assert!(p("bogus").is_err());
    }
}
