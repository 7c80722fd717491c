//! Shell completion. `nod completions bash|zsh|fish` prints a small script that asks
//! `nod __complete WORD...` for the candidates of the word under the cursor; the candidates
//! come from the same table as `--help` and the man pages (commands, flags, flag values),
//! plus names the front end gathers without connecting anything: servers from the profile,
//! project servers, and tools and prompts from the completion cache. One implementation for
//! the three shells, and the script never goes stale against the binary it calls.

use std::collections::HashMap;

use super::help::{self, Arg};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    pub fn parse(word: &str) -> Option<Shell> {
        Some(match word {
            "bash" => Shell::Bash,
            "zsh" => Shell::Zsh,
            "fish" => Shell::Fish,
            _ => return None,
        })
    }

    /// The completion script.
    pub fn script(self) -> &'static str {
        match self {
            Shell::Bash => BASH,
            Shell::Zsh => ZSH,
            Shell::Fish => FISH,
        }
    }
}

const BASH: &str = r#"# nod completion for bash; load it with: source <(nod completions bash)
# Candidates come from `nod __complete`, which reads the profile and a cache of names and
# never connects to a server.
_nod() {
    local IFS=$'\n'
    COMPREPLY=($(command nod __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null | cut -f1))
}
complete -o default -F _nod nod
"#;

const ZSH: &str = r#"#compdef nod
# nod completion for zsh: save as _nod in a folder of $fpath, or: source <(nod completions zsh)
# Candidates come from `nod __complete`, which reads the profile and a cache of names and
# never connects to a server.
_nod() {
    local -a lines candidates
    local line
    lines=("${(@f)$(command nod __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    for line in $lines; do
        [[ -z $line ]] && continue
        candidates+=("${${line%%$'\t'*}//:/\\:}:${line#*$'\t'}")
    done
    if (( ${#candidates} )); then
        _describe 'nod' candidates
    else
        _files
    fi
}
if [[ "$funcstack[1]" = "_nod" ]]; then
    _nod "$@"
else
    compdef _nod nod
fi
"#;

const FISH: &str = r#"# nod completion for fish: nod completions fish > ~/.config/fish/completions/nod.fish
# Candidates come from `nod __complete`, which reads the profile and a cache of names and
# never connects to a server.
function __nod_complete
    set -l words (commandline -opc)[2..-1] (commandline -ct)
    set -l out (command nod __complete $words 2>/dev/null)
    if test (count $out) -eq 0
        __fish_complete_path (commandline -ct)
    else
        printf '%s\n' $out
    end
end
complete -c nod -f -a '(__nod_complete)'
"#;

/// Names the front end found without connecting anything.
#[derive(Debug, Default)]
pub struct Names {
    pub servers: Vec<String>,
    pub project: Vec<String>,
    pub tools: HashMap<String, Vec<String>>,
    pub prompts: HashMap<String, Vec<String>>,
    /// Installed skills (the user's and this workspace's).
    pub skills: Vec<String>,
}

/// The candidates for the last of `words` (the words after `nod`, the last one being the
/// word under the cursor, maybe empty): `(candidate, description)`. Empty means "complete
/// a file name" to the scripts.
pub fn candidates(words: &[String], names: &Names) -> Vec<(String, String)> {
    let Some((current, before)) = words.split_last() else { return Vec::new() };
    if let Some(flag) = before.last().and_then(|w| value_flag(w)) {
        return filter(values(flag.long), current);
    }
    let mut path = String::new();
    let mut positional: Vec<&str> = Vec::new();
    let mut skip = false;
    for word in before {
        if std::mem::take(&mut skip) {
            continue;
        }
        if word.starts_with('-') && word != "-" {
            skip = value_flag(word).is_some();
            continue;
        }
        if positional.is_empty() && help::next_words(&path).contains(&word.as_str()) {
            path = if path.is_empty() { word.clone() } else { format!("{path} {word}") };
        } else {
            positional.push(word);
        }
    }
    let command = help::command(&path);
    // After `nod mcp add <name> <command>` everything is the server's own.
    if path == "mcp add" && positional.len() >= 2 {
        return Vec::new();
    }
    if current.starts_with('-') {
        let flags: Vec<&help::Flag> = match command {
            Some(command) => super::man::flags_of(command),
            None if path.is_empty() => {
                return filter(pairs(&[("--help", "Show help"), ("--version", "Show the version")]), current);
            }
            None => help::FLAGS.iter().filter(|f| f.long == "help" || f.long == "json").collect(),
        };
        let found: Vec<(String, String)> =
            flags.iter().map(|f| (format!("--{}", f.long), first_sentence(f.about))).collect();
        return filter(found, current);
    }
    // `nod skills` takes its words itself: its actions, then skill names.
    if path == "skills" {
        let found = match positional.as_slice() {
            [] => pairs(&[
                ("list", "action"),
                ("show", "action"),
                ("add", "action"),
                ("remove", "action"),
                ("trust", "action"),
            ]),
            ["show" | "remove"] | ["trust", "approve" | "reject"] => described(&names.skills, "skill"),
            ["trust"] => {
                pairs(&[("approve", "action"), ("reject", "action"), ("approve-all", "action"), ("reset", "action")])
            }
            _ => Vec::new(),
        };
        return filter(found, current);
    }
    // `nod sessions` too: its actions (session ids are not completed: list shows them).
    if path == "sessions" {
        let found = match positional.as_slice() {
            [] => pairs(&[("list", "action"), ("show", "action"), ("rm", "action"), ("prune", "action")]),
            _ => Vec::new(),
        };
        return filter(found, current);
    }
    let Some(command) = command else {
        if positional.is_empty() {
            return filter(subcommands(&path), current);
        }
        return Vec::new();
    };
    let found = match command.args.get(positional.len()) {
        Some(Arg::Server) => described(&names.servers, "server"),
        Some(Arg::ProjectServer) => described(&names.project, "project server"),
        Some(Arg::Tool) => described(names.tools.get(positional[0]).map_or(&[][..], Vec::as_slice), "tool"),
        Some(Arg::Prompt) => described(names.prompts.get(positional[0]).map_or(&[][..], Vec::as_slice), "prompt"),
        Some(Arg::Shell) => pairs(&[("bash", "shell"), ("zsh", "shell"), ("fish", "shell")]),
        Some(Arg::Topic) => {
            let base = if command.path == "mcp help" { "mcp" } else { "" };
            let topic: Vec<&str> = base.split_whitespace().chain(positional.iter().copied()).collect();
            subcommands(&topic.join(" "))
        }
        Some(Arg::Free) | None => Vec::new(),
    };
    filter(found, current)
}

/// The flag a word names when it takes its value from the next word.
fn value_flag(word: &str) -> Option<&'static help::Flag> {
    if word.contains('=') {
        return None;
    }
    let flag = match word.strip_prefix("--") {
        Some(long) => help::flag(long),
        None => word.strip_prefix('-').and_then(|s| {
            let mut chars = s.chars();
            let c = chars.next()?;
            chars.next().is_none().then(|| help::FLAGS.iter().find(|f| f.short == Some(c)))?
        }),
    };
    flag.filter(|f| f.value.is_some())
}

fn values(flag: &str) -> Vec<(String, String)> {
    match flag {
        "elicit" => pairs(&[
            ("fail", "cancel the call, report input_required"),
            ("decline", "answer decline"),
            ("cancel", "answer cancel"),
            ("defaults", "accept the form's defaults"),
        ]),
        "transport" => pairs(&[("http", "Streamable HTTP"), ("sse", "legacy HTTP+SSE")]),
        _ => Vec::new(),
    }
}

fn subcommands(path: &str) -> Vec<(String, String)> {
    help::next_words(path)
        .into_iter()
        .filter(|w| !w.starts_with('_'))
        .map(|word| {
            let full = if path.is_empty() { word.to_string() } else { format!("{path} {word}") };
            let about =
                help::command(&full).map(|c| first_sentence(c.about)).unwrap_or_else(|| format!("{word} commands"));
            (word.to_string(), about)
        })
        .collect()
}

fn described(names: &[String], what: &str) -> Vec<(String, String)> {
    names.iter().map(|n| (n.clone(), what.to_string())).collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn filter(found: Vec<(String, String)>, current: &str) -> Vec<(String, String)> {
    found.into_iter().filter(|(c, _)| c.starts_with(current)).collect()
}

fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map_or(text.len(), |i| i);
    text[..end].trim_end_matches('.').to_string()
}

/// Whether a name from a server may be offered to a shell: short, printable, and free of
/// whitespace, quotes and shell syntax (a server chooses its tool names).
pub fn shell_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/' | b'@' | b'+'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
        if line.is_empty() {
            words = vec![String::new()];
        }
        words
    }

    fn names_of(found: Vec<(String, String)>) -> Vec<String> {
        found.into_iter().map(|(c, _)| c).collect()
    }

    #[test]
    fn commands_flags_values_and_names() {
        let mut names = Names {
            servers: vec!["fx".into(), "files".into()],
            skills: vec!["pdf-tools".into(), "notes".into()],
            ..Names::default()
        };
        names.tools.insert("fx".into(), vec!["echo".into(), "add".into()]);
        let c = |line: &str| names_of(candidates(&words(line), &names));
        assert_eq!(
            c(""),
            ["mcp", "ask", "acp", "permissions", "status", "doctor", "skills", "sessions", "completions", "help"]
        );
        assert!(c("ask --pr").contains(&"--prompt-permissions".to_string()));
        assert_eq!(c("mcp to"), ["tool"]);
        assert_eq!(c("skills show p"), ["pdf-tools"]);
        assert_eq!(c("skills trust a"), ["approve", "approve-all"]);
        assert_eq!(c("sessions p"), ["prune"]);

        assert_eq!(c("mcp tool "), ["list", "show", "call"]);
        assert_eq!(c("mcp tool call f"), ["fx", "files"]);
        assert_eq!(c("mcp tool call fx "), ["echo", "add"]);
        assert_eq!(c("mcp tool call --json fx e"), ["echo"]);
        assert!(c("mcp tool call fx echo --el").contains(&"--elicit-answer".to_string()));
        assert!(!c("mcp tool list fx --").contains(&"--elicit".to_string()));
        assert_eq!(c("mcp tool call fx echo --elicit d"), ["decline", "defaults"]);
        assert_eq!(c("mcp tool call fx echo -o "), Vec::<String>::new());
        assert_eq!(c("completions "), ["bash", "zsh", "fish"]);
        assert_eq!(c("mcp help tool c"), ["call"]);
        assert_eq!(c("mcp add x npx -"), Vec::<String>::new());
    }

    #[test]
    fn only_plain_names_reach_a_shell() {
        assert!(shell_safe("get-sum") && shell_safe("fs/read_file"));
        for bad in ["", "a b", "$(rm)", "a;b", "`x`", "a\nb", "é"] {
            assert!(!shell_safe(bad), "{bad:?}");
        }
    }
}
