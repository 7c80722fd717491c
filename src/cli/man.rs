//! Rendering the table in `help`: `--help` text for nod, nod mcp and each command, and the
//! two man pages in roff (`nod --generate man nod|nod-mcp`).

use super::help::{self, COMMANDS, Command, ENVIRONMENT, EXIT_STATUS, FLAGS, Flag, NOD_FLAGS, NOD_OVERVIEW, Page};
use super::prose;

/// `--help` text.
pub fn render(page: Page) -> String {
    let mut out = String::new();
    match page {
        Page::Nod => {
            out.push_str(&format!(
                "nod {}: a command-line agent whose every capability comes from MCP servers\n\n",
                env!("CARGO_PKG_VERSION")
            ));
            out.push_str("USAGE:\n    nod [FLAGS] <command> ...\n\nCOMMANDS:\n");
            pairs(&mut out, NOD_OVERVIEW);
            out.push_str("\nFLAGS:\n");
            pairs(&mut out, NOD_FLAGS);
            out.push_str("\nEXAMPLES:\n");
            examples(&mut out, &["ask", "status", "doctor", "mcp tool call", "completions"]);
        }
        Page::Mcp => {
            out.push_str(
                "nod mcp: configure, inspect and use MCP servers\n\nUSAGE:\n    nod mcp <command> [FLAGS]\n\nCOMMANDS:\n",
            );
            for command in mcp_commands() {
                entry(&mut out, &command.usage.join("\n    "), command.about);
            }
            out.push_str("\nFLAGS:\n");
            for flag in flags_under(true) {
                entry(&mut out, &flag.usage(), flag.about);
            }
            out.push_str("\nEXAMPLES:\n");
            examples(&mut out, &["mcp add", "mcp list", "mcp tool call"]);
            out.push_str("\nEach command has its own help: nod mcp <command> --help, or nod mcp help <command>.\n");
        }
        Page::Command(path) => match help::command(path) {
            Some(command) => return command_help(command),
            None => {
                out.push_str(&format!("nod {path}: commands\n\nCOMMANDS:\n"));
                for command in help::under(path) {
                    entry(&mut out, &command.usage.join("\n    "), command.about);
                }
                out.push_str(&format!("\nSee nod {path} <command> --help for one of them.\n"));
                return out;
            }
        },
    }
    out.push_str("\nEXIT STATUS:\n");
    pairs(&mut out, EXIT_STATUS);
    out.push_str("\nENVIRONMENT:\n");
    pairs(&mut out, ENVIRONMENT);
    out
}

/// One command's help: usage, what it does, its flags and examples.
fn command_help(command: &Command) -> String {
    let mut out = format!("nod {}\n\nUSAGE:\n", command.path);
    for usage in command.usage {
        out.push_str(&format!("    {usage}\n"));
    }
    out.push('\n');
    for line in wrap(command.about, 76) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("\nFLAGS:\n");
    for flag in flags_of(command) {
        entry(&mut out, &flag.usage(), flag.about);
    }
    out.push_str("\nEXAMPLES:\n");
    for (line, what) in command.examples {
        entry(&mut out, line, what);
    }
    let page = if command.path.starts_with("mcp") { "nod-mcp(1)" } else { "nod(1)" };
    out.push_str(&format!("\nMore in {page}; exit status and JSON output shapes there too.\n"));
    out
}

/// The flags a command takes, in the command's order (its own first), `--help` last.
pub fn flags_of(command: &Command) -> Vec<&'static Flag> {
    command.flags.iter().filter_map(|long| help::flag(long)).chain(help::flag("help")).collect()
}

fn mcp_commands() -> impl Iterator<Item = &'static Command> {
    COMMANDS.iter().filter(|c| c.path.starts_with("mcp "))
}

/// The flags that `nod mcp` commands (`mcp`) or the other commands take, in table order.
fn flags_under(mcp: bool) -> impl Iterator<Item = &'static Flag> {
    FLAGS.iter().filter(move |flag| {
        flag.long == "help"
            || COMMANDS.iter().any(|c| c.path.starts_with("mcp ") == mcp && c.flags.contains(&flag.long))
    })
}

fn examples(out: &mut String, paths: &[&str]) {
    for path in paths {
        if let Some(command) = help::command(path) {
            for (line, what) in command.examples.iter().take(2) {
                entry(out, line, what);
            }
        }
    }
}

fn pairs(out: &mut String, entries: &[(&str, &str)]) {
    for (usage, about) in entries {
        entry(out, usage, about);
    }
}

fn entry(out: &mut String, usage: &str, about: &str) {
    out.push_str("    ");
    out.push_str(usage);
    out.push('\n');
    for line in wrap(about, 72) {
        out.push_str("        ");
        out.push_str(&line);
        out.push('\n');
    }
}

/// `text` in lines of at most `width` characters, broken between words (a word longer than
/// the width stands alone). The help pages and the shell's `/help` wrap with it.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The man page, in roff.
pub fn man(page: Page) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mcp = page != Page::Nod;
    let mut out = String::new();
    let (name, title, synopsis, description) = if mcp {
        ("nod-mcp", "NOD-MCP", "nod mcp <command> [FLAGS]", prose::MCP_DESCRIPTION)
    } else {
        ("nod", "NOD", "nod [FLAGS] <command> ...", prose::NOD_DESCRIPTION)
    };
    out.push_str(&format!(".TH {title} 1 \"\" \"nod {version}\" \"User Commands\"\n"));
    let summary = if mcp {
        "configure, inspect and use MCP servers"
    } else {
        "a command-line agent whose every capability comes from MCP servers"
    };
    out.push_str(&format!(".SH NAME\n{name} \\- {summary}\n"));
    out.push_str(&format!(".SH SYNOPSIS\n.B {}\n", roff(synopsis)));
    paragraphs(&mut out, "DESCRIPTION", description);
    let commands: Vec<&Command> =
        if mcp { mcp_commands().collect() } else { COMMANDS.iter().filter(|c| !c.path.starts_with("mcp ")).collect() };
    out.push_str(".SH COMMANDS\n");
    if !mcp {
        // The shell and the nod mcp group, which have no entry of their own in the table.
        for (usage, about) in &NOD_OVERVIEW[..2] {
            out.push_str(&format!(".TP\n.B {}\n{}\n", roff(usage), roff(about)));
        }
    }
    for command in &commands {
        // The first usage is the tag; another one opens the body, in bold on its own line.
        out.push_str(&format!(".TP\n.B {}\n", roff(command.usage[0])));
        for usage in &command.usage[1..] {
            out.push_str(&format!(".B {}\n.br\n", roff(usage)));
        }
        out.push_str(&format!("{}\n", roff(command.about)));
    }
    out.push_str(".SH FLAGS\n");
    if !mcp {
        for (usage, about) in NOD_FLAGS {
            out.push_str(&format!(".TP\n.B {}\n{}\n", roff(usage), roff(about)));
        }
    }
    for flag in flags_under(mcp).filter(|f| mcp || f.long != "help") {
        out.push_str(&format!(".TP\n.B {}\n{}\n", roff(&flag.usage()), roff(flag.about)));
    }
    if mcp {
        paragraphs(&mut out, "JSON OUTPUT", prose::JSON_OUTPUT);
    } else {
        paragraphs(&mut out, "THE INTERACTIVE SHELL", prose::SHELL);
        paragraphs(&mut out, "NOD ASK", prose::ASK);
        paragraphs(&mut out, "NOD ACP", prose::ACP);
        paragraphs(&mut out, "THE MODEL", prose::MODEL);
        paragraphs(&mut out, "MCP TOOLS FOR THE MODEL", prose::TOOLS);
        paragraphs(&mut out, "SUBAGENTS", prose::SUBAGENTS);
        paragraphs(&mut out, "PERMISSIONS", prose::PERMISSIONS);
        paragraphs(&mut out, "CONTEXT LIMITS AND SETTINGS", prose::LIMITS);
    }
    out.push_str(".SH EXAMPLES\n");
    for command in &commands {
        for (line, what) in command.examples {
            out.push_str(&format!(".TP\n.B {}\n{}\n", roff(line), roff(what)));
        }
    }
    if mcp {
        paragraphs(&mut out, "PROFILE", prose::PROFILE);
        paragraphs(&mut out, "PROTOCOL REVISIONS", prose::REVISIONS);
        paragraphs(&mut out, "AUTHENTICATION", prose::AUTH);
        paragraphs(&mut out, "PROJECT SERVERS AND TRUST", prose::PROJECT);
    }
    out.push_str(".SH EXIT STATUS\n");
    for (usage, about) in EXIT_STATUS {
        out.push_str(&format!(".TP\n.B {}\n{}\n", roff(usage), roff(about)));
    }
    out.push_str(".SH ENVIRONMENT\n");
    for (usage, about) in ENVIRONMENT {
        out.push_str(&format!(".TP\n.B {}\n{}\n", roff(usage), roff(about)));
    }
    out.push_str(".SH SEE ALSO\n");
    out.push_str(if mcp { "nod(1)\n" } else { "nod-mcp(1)\n" });
    out
}

fn paragraphs(out: &mut String, title: &str, text: &str) {
    out.push_str(&format!(".SH {title}\n"));
    for para in text.split("\n\n") {
        out.push_str(&roff(para.trim()));
        out.push_str("\n.PP\n");
    }
}

/// Text for roff: a backslash as `\e` (which prints one in text and in macro arguments alike;
/// `\\` in a `.B` line is read again as an escape, so `\\n{` became a register), `-` as `\-`,
/// and a leading `.` or `'` made literal.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| if l.starts_with('.') || l.starts_with('\'') { format!("\\&{l}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mcp_command_and_flag_is_in_help_and_man() {
        let help = render(Page::Mcp);
        let man = man(Page::Mcp);
        for command in mcp_commands() {
            for usage in command.usage {
                assert!(help.contains(usage), "{usage}");
                assert!(man.contains(&roff(usage)), "{usage}");
            }
        }
        for flag in flags_under(true) {
            assert!(help.contains(&flag.usage()), "{}", flag.long);
            assert!(man.contains(&roff(&flag.usage())), "{}", flag.long);
        }
        assert!(!help.contains("--prompt-permissions"), "nod ask's flags stay out of nod mcp --help");
        assert!(man.contains(".SH EXAMPLES") && man.contains(".SH JSON OUTPUT"));
        let nod = super::man(Page::Nod);
        assert!(nod.contains(".SH EXAMPLES") && nod.contains(".SH NOD ASK") && nod.contains(".SH PERMISSIONS"));
        for flag in flags_under(false) {
            assert!(flag.long == "help" || nod.contains(&roff(&flag.usage())), "{}", flag.long);
        }
    }

    #[test]
    fn a_command_page_has_its_flags_and_examples_only() {
        let page = render(Page::Command("mcp tool call"));
        assert!(page.contains("--elicit-answer") && page.contains("EXAMPLES:") && page.contains("--arg a=2"));
        assert!(!page.contains("--connect"), "{page}");
        let status = render(Page::Command("status"));
        assert!(status.contains("nod status [--json]") && status.contains("EXAMPLES:"), "{status}");
    }
}
