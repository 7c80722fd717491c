//! The lexopt loops: the first word decides, `nod mcp` collects its flags wherever they are,
//! then the words are matched against the command table. Errors name the command's usage,
//! suggest the closest word for a typo, and point to `--help`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use lexopt::prelude::*;

use super::ask::{self, Globals};
use super::help::{self, Page};
use super::lex::{Parsed, Rest, lex, no_argument, string, unknown_option, usage};
use super::suggest;
use super::{Command, ElicitArg, Source, UsageError};

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Parsed<Command> {
    let mut parser = lexopt::Parser::from_args(args);
    let top = Page::Nod;
    // The agent's global flags may come first.
    let mut globals = Globals::default();
    let arg = loop {
        let Some(arg) = parser.next().map_err(lex(top))? else {
            return Ok(Command::Shell(globals));
        };
        match ask::global(&arg) {
            Some(flag) => ask::apply(flag, &mut parser, &mut globals, top)?,
            None => break arg,
        }
    };
    let agent_command =
        |arg: &lexopt::Arg<'_>| matches!(arg, Value(cmd) if cmd == "ask" || cmd == "permissions" || cmd == "acp");
    if globals != Globals::default() && !agent_command(&arg) {
        return Err(usage(
            top,
            "--full-access, --yolo, --context-limit and --add-dir apply to nod ask, nod acp, nod permissions and the shell",
        ));
    }
    // The first word decides; every branch returns.
    match arg {
        Short('h') | Long("help") => Ok(Command::Help(top)),
        Short('V') | Short('v') | Long("version") => Ok(Command::Version),
        Long("generate") => {
            let what = string(&mut parser, top)?;
            if what != "man" {
                return Err(usage(top, format!("--generate takes \"man\", not {what:?}")));
            }
            match parser.next().map_err(lex(top))? {
                Some(Value(name)) if name == "nod" => Ok(Command::GenerateMan(Page::Nod)),
                Some(Value(name)) if name == "nod-mcp" => Ok(Command::GenerateMan(Page::Mcp)),
                _ => Err(usage(top, "usage: nod --generate man nod|nod-mcp")),
            }
        }
        Value(cmd) => {
            let cmd = cmd.into_string().map_err(|_| usage(top, "the command is not valid UTF-8"))?;
            match cmd.as_str() {
                "mcp" => parse_mcp(&mut parser),
                "ask" => ask::parse_ask(&mut parser, globals),
                "acp" => ask::parse_acp(&mut parser, globals),
                "permissions" => ask::parse_permissions(&mut parser, globals),
                "status" | "doctor" => {
                    let path = if cmd == "status" { "status" } else { "doctor" };
                    let page = Page::Command(path);
                    let mut json = false;
                    while let Some(arg) = parser.next().map_err(lex(page))? {
                        match arg {
                            Long("json") => json = true,
                            Short('h') | Long("help") => return Ok(Command::Help(page)),
                            Value(word) => return Err(no_argument(path, &word)),
                            other => return Err(unknown_option(page, other, &["json", "help"], &format!("nod {cmd}"))),
                        }
                    }
                    Ok(if cmd == "status" { Command::Status { json } } else { Command::Doctor { json } })
                }
                "skills" => {
                    let page = Page::Command("skills");
                    let (mut json, mut yes, mut words) = (false, false, Vec::new());
                    while let Some(arg) = parser.next().map_err(lex(page))? {
                        match arg {
                            Long("json") => json = true,
                            Short('y') | Long("yes") => yes = true,
                            Short('h') | Long("help") => return Ok(Command::Help(page)),
                            Value(word) => words.push(word.into_string().map_err(|_| usage(page, "not valid UTF-8"))?),
                            other => return Err(unknown_option(page, other, &["json", "yes", "help"], "nod skills")),
                        }
                    }
                    let words: Vec<&str> = words.iter().map(String::as_str).collect();
                    let action = match words.as_slice() {
                        ["list"] | [] => super::Skills::List,
                        ["show", name] => super::Skills::Show(name.to_string()),
                        ["add", path] => super::Skills::Add(path.into()),
                        ["remove", name] => super::Skills::Remove(name.to_string()),
                        ["trust", "approve", name] => super::Skills::Approve(name.to_string()),
                        ["trust", "reject", name] => super::Skills::Reject(name.to_string()),
                        ["trust", "approve-all"] => super::Skills::ApproveAll { yes },
                        ["trust", "reset"] => super::Skills::Reset,
                        _ => {
                            return Err(usage(
                                page,
                                "usage: nod skills list | show <name> | add <folder> | remove <name> | trust approve|reject <name>",
                            ));
                        }
                    };
                    Ok(Command::Skills { action, json })
                }
                "sessions" => {
                    let page = Page::Command("sessions");
                    let (mut json, mut older, mut words) = (false, None, Vec::new());
                    while let Some(arg) = parser.next().map_err(lex(page))? {
                        match arg {
                            Long("json") => json = true,
                            Long("older-than") => {
                                let text = string(&mut parser, page)?;
                                older = Some(crate::saved::parse_age(&text).ok_or_else(|| {
                                    usage(
                                        page,
                                        format!("--older-than takes an age such as 30d, 12h or 90m, not {text:?}"),
                                    )
                                })?);
                            }
                            Short('h') | Long("help") => return Ok(Command::Help(page)),
                            Value(word) => words.push(word.into_string().map_err(|_| usage(page, "not valid UTF-8"))?),
                            other => {
                                return Err(unknown_option(
                                    page,
                                    other,
                                    &["json", "older-than", "help"],
                                    "nod sessions",
                                ));
                            }
                        }
                    }
                    let words: Vec<&str> = words.iter().map(String::as_str).collect();
                    let action = match (words.as_slice(), older) {
                        (["list"] | [], None) => super::Sessions::List,
                        (["show", id], None) => super::Sessions::Show(id.to_string()),
                        (["rm" | "remove", id], None) => super::Sessions::Remove(id.to_string()),
                        (["prune"], Some(age)) => super::Sessions::Prune(age),
                        (["prune"], None) => {
                            return Err(usage(page, "nod sessions prune needs --older-than AGE (30d, 12h)"));
                        }
                        _ => {
                            return Err(usage(
                                page,
                                "usage: nod sessions list | show <id> | rm <id> | prune --older-than AGE",
                            ));
                        }
                    };
                    Ok(Command::Sessions { action, json })
                }
                "completions" => {
                    let page = Page::Command("completions");
                    let mut shell = None;
                    while let Some(arg) = parser.next().map_err(lex(page))? {
                        match arg {
                            Short('h') | Long("help") => return Ok(Command::Help(page)),
                            Value(word) if shell.is_none() => {
                                let word = word.to_string_lossy().into_owned();
                                shell = Some(super::complete::Shell::parse(&word).ok_or_else(|| {
                                    usage(page, format!("nod completions takes bash, zsh or fish, not {word:?}"))
                                })?);
                            }
                            other => return Err(unknown_option(page, other, &["help"], "nod completions")),
                        }
                    }
                    shell.map(Command::Completions).ok_or_else(|| usage(page, "usage: nod completions bash|zsh|fish"))
                }
                "__complete" => {
                    let words = parser.raw_args().map_err(lex(top))?;
                    Ok(Command::Complete(words.map(|w| w.to_string_lossy().into_owned()).collect()))
                }
                "help" => {
                    let mut topic = Vec::new();
                    while let Some(arg) = parser.next().map_err(lex(top))? {
                        match arg {
                            Value(word) => topic.push(word.to_string_lossy().into_owned()),
                            Short('h') | Long("help") => return Ok(Command::Help(Page::Command("help"))),
                            other => return Err(unknown_option(top, other, &["help"], "nod help")),
                        }
                    }
                    help_page(&topic, "")
                }
                other => Err(usage(
                    top,
                    format!("unknown command {other:?}{}; see nod --help", suggest::hint(other, help::next_words(""))),
                )),
            }
        }
        other => Err(unknown_option(
            top,
            other,
            &["help", "version", "generate", "full-access", "yolo", "context-limit"],
            "nod",
        )),
    }
}

/// `nod help WORDS` or `nod mcp help WORDS` (`prefix` "mcp").
fn help_page(topic: &[String], prefix: &str) -> Parsed<Command> {
    let mut words: Vec<&str> = prefix.split_whitespace().collect();
    words.extend(topic.iter().map(String::as_str));
    help::page(&words).map(Command::Help).ok_or_else(|| {
        let known = words.len() - 1;
        let parent = words[..known].join(" ");
        let hint = suggest::hint(words[known], help::next_words(&parent));
        usage(Page::Nod, format!("no help for {:?}{hint}; see nod help", words.join(" ")))
    })
}

fn parse_mcp(parser: &mut lexopt::Parser) -> Parsed<Command> {
    let page = Page::Mcp;
    let mut rest = Rest::default();
    while let Some(arg) = parser.next().map_err(lex(page))? {
        let given = match &arg {
            Long(name) => help::FLAGS.iter().find(|f| f.long == *name).map(|f| f.long),
            Short(c) => help::FLAGS.iter().find(|f| f.short == Some(*c)).map(|f| f.long),
            Value(_) => None,
        };
        if let Some(long) = given
            && !rest.given.contains(&long)
        {
            rest.given.push(long);
        }
        match arg {
            Short('h') | Long("help") => rest.help = true,
            Long("json") => rest.options.json = true,
            Long("timeout") => rest.options.timeout = Some(millis(parser, "--timeout")?),
            Long("startup-timeout") => rest.options.startup_timeout = Some(millis(parser, "--startup-timeout")?),
            Long("protocol-version") => {
                let text = string(parser, page)?;
                rest.options.protocol_version = Some(match text.as_str() {
                    "auto" => None,
                    other => Some(crate::mcp::Version::parse(other).ok_or_else(|| {
                        usage(page, format!("--protocol-version takes auto, 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26 or 2024-11-05, not {other:?}"))
                    })?),
                });
            }
            Long("root") => rest.options.roots.push(string(parser, page)?.into()),
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
                rest.elicit = Some(ElicitArg::parse(&text).ok_or_else(|| {
                    usage(page, format!("--elicit takes fail, decline, cancel or defaults, not {text:?}"))
                })?);
            }
            Long("elicit-answer") => rest.elicit_answer = Some(Source::from_word(&string(parser, page)?)),
            Short('o') | Long("output") => rest.output = Some(PathBuf::from(parser.value().map_err(lex(page))?)),
            Long("arg") => rest.pairs.push(pair(parser, "--arg")?),
            Long("transport") => {
                let text = string(parser, page)?;
                if text != "http" && text != "sse" && text != "stdio" {
                    return Err(usage(page, format!("--transport takes http, sse or stdio, not {text:?}")));
                }
                rest.transport = Some(text);
            }
            Short('e') | Long("env") => rest.env.push(pair(parser, "--env")?),
            Short('H') | Long("header") => {
                let text = string(parser, page)?;
                match text.split_once(':') {
                    Some((name, value)) if !name.trim().is_empty() && !name.contains(char::is_whitespace) => {
                        rest.headers.push((name.trim().to_string(), value.trim().to_string()));
                    }
                    _ => return Err(usage(page, format!("--header takes 'NAME: VALUE', not {text:?}"))),
                }
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
            other => {
                let known: Vec<&str> = help::FLAGS.iter().map(|f| f.long).collect();
                return Err(unknown_option(page, other, &known, "nod mcp"));
            }
        }
    }
    let values = std::mem::take(&mut rest.values);
    let words: Vec<&str> = values.iter().map(String::as_str).collect();
    if words.first() == Some(&"help") {
        return help_page(&values[1..], "mcp");
    }
    let Some((command, args)) = resolve(&words) else {
        if rest.help {
            return Ok(Command::Help(group_page(&words)));
        }
        return Err(unknown_command(&words));
    };
    let page = Page::Command(command.path);
    if rest.help {
        return Ok(Command::Help(page));
    }
    for flag in &rest.given {
        if *flag != "help" && !command.flags.contains(flag) {
            let takers: Vec<String> =
                help::COMMANDS.iter().filter(|c| c.flags.contains(flag)).map(|c| format!("nod {}", c.path)).collect();
            let goes = match takers.len() {
                0 => String::new(),
                1..=3 => format!("; it goes with {}", takers.join(", ")),
                _ => "; see nod mcp --help".to_string(),
            };
            return Err(usage(page, format!("--{flag} does not go with nod {}{goes}", command.path)));
        }
    }
    let cmd = super::build::build(command, args, &mut rest)?;
    Ok(Command::Mcp(cmd, rest.options))
}

/// The longest command path the words begin with, and the words after it.
fn resolve<'a, 'w>(words: &'a [&'w str]) -> Option<(&'static help::Command, &'a [&'w str])> {
    (1..=words.len().min(3)).rev().find_map(|n| {
        let path = format!("mcp {}", words[..n].join(" "));
        help::command(&path).map(|command| (command, &words[n..]))
    })
}

/// The help page for words that name no command: their group, else nod mcp's.
fn group_page(words: &[&str]) -> Page {
    let mut path = vec!["mcp"];
    let mut page = Page::Mcp;
    for word in words {
        path.push(word);
        match help::page(&path) {
            Some(found) => page = found,
            None => break,
        }
    }
    page
}

fn unknown_command(words: &[&str]) -> UsageError {
    if words.is_empty() {
        return usage(Page::Mcp, "usage: nod mcp <command>; see nod mcp --help");
    }
    // The longest group the words name, then the word that fits none of its commands.
    let mut group = String::from("mcp");
    for word in words {
        let next = help::next_words(&group);
        if !next.contains(word) {
            let hint = suggest::hint(word, next.iter().copied()).replace("mean ", &format!("mean nod {group} "));
            let list = if group == "mcp" { String::new() } else { format!("; its commands are {}", next.join(", ")) };
            return usage(
                group_page(words),
                format!("unknown command \"nod {group} {word}\"{hint}{list}; see nod {group} --help"),
            );
        }
        group = format!("{group} {word}");
    }
    let next = help::next_words(&group);
    usage(group_page(words), format!("nod {group} needs a command: {}; see nod {group} --help", next.join(", ")))
}

fn millis(parser: &mut lexopt::Parser, flag: &str) -> Parsed<Duration> {
    let text = string(parser, Page::Mcp)?;
    match text.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms.min(crate::config::MAX_TIMEOUT_MS))),
        _ => Err(usage(Page::Mcp, format!("{flag} takes a positive number of milliseconds, not {text:?}"))),
    }
}

fn pair(parser: &mut lexopt::Parser, flag: &str) -> Parsed<(String, String)> {
    let text = string(parser, Page::Mcp)?;
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(usage(Page::Mcp, format!("{flag} takes NAME=VALUE, not {text:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Mcp, Trust};

    fn p(args: &str) -> Parsed<Command> {
        parse(args.split_whitespace().map(OsString::from))
    }

    fn mcp(args: &str) -> Mcp {
        match p(args) {
            Ok(Command::Mcp(mcp, _)) => mcp,
            other => panic!("{args}: {other:?}"),
        }
    }

    #[test]
    fn tool_call_flags() {
        let Mcp::ToolCall(call) = mcp("mcp tool call fs read --jsonl --parallel 8 --elicit defaults") else { panic!() };
        assert_eq!((call.jsonl, call.parallel, call.elicit), (true, 8, Some(ElicitArg::Defaults)));
        assert!(p("mcp tool call fs read {} --jsonl").is_err());
        assert!(p("mcp tool call fs read --parallel 0").is_err());
        assert!(p("mcp tool call fs read --elicit maybe").is_err());
        assert!(p("mcp list --jsonl").is_err());
        let Mcp::ToolCall(call) = mcp("mcp tool call fs read @args.json --arg a=1 --arg b=x") else { panic!() };
        assert_eq!(call.arguments.object, Some(Source::File("args.json".into())));
        assert_eq!(call.arguments.pairs.len(), 2);
        let Mcp::ToolCall(call) = mcp("mcp tool call fs read - -o out.png") else { panic!() };
        assert_eq!((call.arguments.object, call.output), (Some(Source::Stdin), Some("out.png".into())));
        assert!(p("mcp tool call fs read --elicit fail --elicit-answer {}").is_err());
    }

    #[test]
    fn add_keeps_the_servers_own_flags_and_refuses_a_url_command() {
        let Mcp::Add(add) = mcp("mcp add --env K=V fs npx -y @scope/server --read-only /tmp") else { panic!() };
        assert_eq!(add.name, "fs");
        assert_eq!(add.target, ["npx", "-y", "@scope/server", "--read-only", "/tmp"]);
        assert_eq!(add.env, [("K".to_string(), "V".to_string())]);
        let Mcp::Add(add) = mcp("mcp add --transport http remote https://e.com/mcp") else { panic!() };
        assert_eq!(add.transport.as_deref(), Some("http"));
        assert!(p("mcp add --transport http remote https://e.com/mcp extra").is_err());
        assert!(p("mcp add name").is_err());
        assert!(p("mcp add web https://e.com/mcp").unwrap_err().message.contains("looks like a URL"));
        assert_eq!(mcp("mcp remove x"), Mcp::Remove { name: "x".into() });
    }

    #[test]
    fn ask_takes_its_flags_then_the_prompt_and_globals_anywhere_before_it() {
        let Ok(Command::Ask(ask)) = p("--yolo ask --context-limit mcp_description_bytes=9 -q what is this --json")
        else {
            panic!()
        };
        assert!(ask.globals.full_access && ask.json && ask.quiet, "flags after the words are flags");
        assert_eq!(ask.globals.context_limits, ["mcp_description_bytes=9"]);
        assert_eq!(ask.prompt, "what is this");
        let Ok(Command::Ask(ask)) = p("ask hello -m gpt -s terse -- what is -x --json") else { panic!() };
        assert_eq!((ask.model.as_deref(), ask.system.as_deref(), ask.json), (Some("gpt"), Some("terse"), false));
        assert_eq!(ask.prompt, "hello what is -x --json", "after -- everything is the prompt");
        let err = p("ask what is -x").unwrap_err().message;
        assert!(err.contains("unknown option -x") && err.contains("put them after --"), "{err}");
        let Ok(Command::Ask(ask)) = p("ask --max-steps 3 --model m --system s -- --help") else { panic!() };
        assert_eq!((ask.max_steps, ask.model.as_deref(), ask.system.as_deref()), (Some(3), Some("m"), Some("s")));
        assert_eq!(ask.prompt, "--help");
        assert_eq!(p("ask --help").unwrap(), Command::Help(Page::Command("ask")));
        assert!(p("ask --max-steps 0 hi").unwrap_err().message.contains("positive"));
        assert!(p("ask --quite hi").unwrap_err().message.contains("did you mean --quiet"));
        assert!(p("--yolo mcp list").unwrap_err().message.contains("apply to nod ask"));
        let Ok(Command::Permissions { globals, json: true }) = p("permissions --full-access --json") else { panic!() };
        assert!(globals.full_access);
        assert!(p("permissions extra").is_err());
        assert_eq!(p("--yolo").unwrap(), Command::Shell(Globals { full_access: true, ..Globals::default() }));
    }

    #[test]
    fn every_shape() {
        assert_eq!(p("").unwrap(), Command::Shell(Globals::default()));
        assert_eq!(p("--version").unwrap(), Command::Version);
        assert_eq!(mcp("mcp path"), Mcp::Path);
        let Ok(Command::Mcp(Mcp::List { connect: true }, options)) = p("mcp list --connect --json --timeout 5000")
        else {
            panic!()
        };
        assert!(options.json && options.timeout == Some(Duration::from_secs(5)));
        assert!(matches!(mcp("mcp resource read s u -o f"), Mcp::ResourceRead { output: Some(_), .. }));
        assert!(matches!(mcp("mcp prompt complete s n a"), Mcp::PromptComplete { value, .. } if value.is_empty()));
        assert!(
            matches!(mcp("mcp resource complete s t v 1 --arg a=b"), Mcp::ResourceComplete { context, .. } if context.len() == 1)
        );
        assert_eq!(mcp("mcp tool show s t"), Mcp::ToolShow { server: "s".into(), tool: "t".into() });
        let err = p("mcp tool call").unwrap_err();
        assert!(err.message.contains("nod mcp tool call <server>"), "{}", err.message);
        assert!(p("mcp frobnicate").unwrap_err().message.contains("unknown command"));
        assert_eq!(mcp("mcp trust approve-all"), Mcp::Trust(Trust::ApproveAll { yes: false }));
        for yes in ["--yes", "-y"] {
            assert_eq!(mcp(&format!("mcp trust approve-all {yes}")), Mcp::Trust(Trust::ApproveAll { yes: true }));
        }
        assert!(p("mcp trust approve fx --yes").unwrap_err().message.contains("--yes does not go with"));
        assert!(p("mcp list -y").is_err());
        assert!(p("bogus").is_err());
        assert!(p("mcp list --timeout 0").is_err());
    }

    #[test]
    fn typos_are_named_with_a_suggestion() {
        let err = p("mcp tool cal x y").unwrap_err().message;
        assert!(err.contains("did you mean nod mcp tool call?") && !err.contains("tool list"), "{err}");
        let err = p("mcp lsit").unwrap_err().message;
        assert!(err.contains("did you mean nod mcp list?"), "{err}");
        let err = p("mcp list --jsn").unwrap_err().message;
        assert!(err.contains("did you mean --json?") && err.contains("--help"), "{err}");
        let err = p("statsu").unwrap_err().message;
        assert!(err.contains("did you mean status?"), "{err}");
        assert!(p("help foo").is_err());
        assert_eq!(p("help mcp tool call").unwrap(), Command::Help(Page::Command("mcp tool call")));
        assert_eq!(p("mcp help tool").unwrap(), Command::Help(Page::Command("mcp tool")));
        assert_eq!(p("mcp tool call --help").unwrap(), Command::Help(Page::Command("mcp tool call")));
        assert_eq!(p("status --help").unwrap(), Command::Help(Page::Command("status")));
        assert_eq!(p("mcp tool --help").unwrap(), Command::Help(Page::Command("mcp tool")));
    }
}
