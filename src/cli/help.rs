//! The one table of commands and flags. `--help` (for nod, nod mcp and every command), both
//! man pages (`nod --generate man`), the usage errors and the shell completions are all
//! rendered from it (`cli::man`, `cli::complete`), and a test keeps the committed pages in
//! `man/` current. A flat declarative table, so one long file.

/// Which help to show: nod's, nod mcp's, or one command's (or group's) by its path
/// (`"mcp tool call"`, `"mcp tool"`, `"status"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Nod,
    Mcp,
    Command(&'static str),
}

/// A flag: `--long`, maybe `-s`, maybe a value.
pub struct Flag {
    pub long: &'static str,
    pub short: Option<char>,
    /// The value's name (`N`, `FILE`, `http|sse`), when the flag takes one.
    pub value: Option<&'static str>,
    pub about: &'static str,
}

impl Flag {
    /// `-o, --output FILE`.
    pub fn usage(&self) -> String {
        let mut out = String::new();
        if let Some(short) = self.short {
            out.push_str(&format!("-{short}, "));
        }
        out.push_str("--");
        out.push_str(self.long);
        if let Some(value) = self.value {
            out.push(' ');
            out.push_str(value);
        }
        out
    }
}

/// What a positional argument is, for completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A configured server (profile and approved project servers).
    Server,
    /// A project server of the workspace's .mcp.json.
    ProjectServer,
    /// A tool of the server before it (from the completion cache).
    Tool,
    /// A prompt of the server before it (from the completion cache).
    Prompt,
    /// bash, zsh or fish.
    Shell,
    /// A command path, for `help`.
    Topic,
    /// Anything else: a name to invent, a URI, JSON, a file.
    Free,
}

/// One command: its path after `nod`, usage lines, what it does, the flags it takes, its
/// positional arguments and examples.
pub struct Command {
    pub path: &'static str,
    pub usage: &'static [&'static str],
    pub about: &'static str,
    /// Long names of the flags it takes (`help` is implied).
    pub flags: &'static [&'static str],
    pub args: &'static [Arg],
    /// (command line, what it does).
    pub examples: &'static [(&'static str, &'static str)],
}

pub const FLAGS: &[Flag] = &[
    Flag {
        long: "json",
        short: None,
        value: None,
        about: "Print one JSON document on stdout instead of text. For nod mcp, a failure prints {\"error\": {\"kind\", \"message\", \"server\"}} there, with the message on stderr and the same exit code (see JSON OUTPUT in nod-mcp(1)). For nod ask, one object at the end instead of the streamed answer and progress lines (see NOD ASK in nod(1)).",
    },
    Flag {
        long: "timeout",
        short: None,
        value: Some("MS"),
        about: "Use this operation timeout (milliseconds) for every server in this run, instead of its operation_timeout_ms. Progress a server reports extends a call's deadline, up to ten times the timeout.",
    },
    Flag {
        long: "startup-timeout",
        short: None,
        value: Some("MS"),
        about: "Use this startup timeout (milliseconds) for every server in this run, instead of its startup_timeout_ms.",
    },
    Flag {
        long: "protocol-version",
        short: None,
        value: Some("REV"),
        about: "Speak this MCP revision with every server in this run (2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05), or auto: find each server's (the default, or its protocol_version).",
    },
    Flag {
        long: "env",
        short: Some('e'),
        value: Some("NAME=VALUE"),
        about: "With add: an environment variable for the server (repeatable); give it before the name.",
    },
    Flag {
        long: "header",
        short: Some('H'),
        value: Some("'NAME: VALUE'"),
        about: "With add --transport http|sse: a header sent with every request to the server (repeatable), such as 'Authorization: Bearer ...'; give it before the name.",
    },
    Flag {
        long: "transport",
        short: None,
        value: Some("http|sse"),
        about: "With add: add a remote server by URL (http: Streamable HTTP; sse: legacy HTTP+SSE).",
    },
    Flag { long: "open", short: None, value: None, about: "With auth: launch the browser on the authorization URL." },
    Flag {
        long: "older-than",
        short: None,
        value: Some("AGE"),
        about: "With sessions prune: the sessions last written longer ago than AGE go (30d, 12h, 90m, 45s; a bare number is days).",
    },
    Flag {
        long: "yes",
        short: Some('y'),
        value: None,
        about: "With trust approve-all: approve without asking. With import: write what would be added.",
    },
    Flag { long: "connect", short: None, value: None, about: "With list: connect and show live health." },
    Flag {
        long: "arg",
        short: None,
        value: Some("NAME=VALUE"),
        about: "With tool call: one argument (repeatable); the value is parsed as JSON when it parses (3, true, [1], {\"a\": 1}, \"quoted\"), else taken as a string, and wins over the same key in the arguments object. With prompt get: one argument, always a string. With complete: an argument already chosen, sent as context.",
    },
    Flag {
        long: "jsonl",
        short: None,
        value: None,
        about: "With tool call: read one arguments object per stdin line (a local server gets each line as written); write one JSON result per line, in input order.",
    },
    Flag {
        long: "parallel",
        short: None,
        value: Some("N"),
        about: "With --jsonl: keep up to N calls in flight on the one connection (1 to 256; default 1). With 1, `nod mcp` gives the thread that reads the server's answers a short time slice (Linux 6.12 and later), so on a busy CPU it reads each answer before the caller resumes, and with more than one CPU that thread looks for the next answer for up to 50 us before it sleeps. With more than one CPU, whatever N, nod looks for each answer for up to 50 us before it sleeps, so a fast server's answers come without a wakeup; a slow server soon makes it look rarely.",
    },
    Flag {
        long: "elicit",
        short: None,
        value: Some("fail|decline|cancel|defaults"),
        about: "With tool call: how to answer a server that asks for input. fail cancels the call and prints a typed input_required result (exit 3); decline and cancel answer so; defaults accepts a form filled with its default values. Without --elicit, nod asks on a terminal, field by field, and fails elsewhere.",
    },
    Flag {
        long: "elicit-answer",
        short: None,
        value: Some("JSON|@FILE"),
        about: "With tool call: accept a form elicitation with these values (a JSON object, or @FILE to read it from a file) when they satisfy the requested schema; otherwise decline, naming the field.",
    },
    Flag {
        long: "output",
        short: Some('o'),
        value: Some("FILE"),
        about: "With resource read: write the contents, text or binary, to FILE (FILE.2, FILE.3, ... for more than one) instead of printing them. With tool call: write images and audio of the result there, the same way. - writes them to stdout when it is not a terminal.",
    },
    Flag {
        long: "quiet",
        short: Some('q'),
        value: None,
        about: "With ask: no progress lines (tool calls, notices) on stderr; the answer still goes to stdout.",
    },
    Flag {
        long: "prompt-permissions",
        short: None,
        value: None,
        about: "With ask: before an action that needs approval, ask on the terminal (/dev/tty): y runs it once, a allows it for the rest of the run, n refuses (with an optional note for the model); elicitation forms are filled there too. Without it, such an action fails back to the model and the run goes on, and an elicitation ends the run with exit 3.",
    },
    Flag {
        long: "no-stdin",
        short: None,
        value: None,
        about: "With ask: do not read stdin when the prompt is given as arguments (by default piped stdin is attached to the prompt as a <stdin> block).",
    },
    Flag {
        long: "system",
        short: Some('s'),
        value: Some("TEXT"),
        about: "With ask: use TEXT as the system prompt instead of nod's own (the list of configured servers and the runtime context are still added).",
    },
    Flag {
        long: "model",
        short: Some('m'),
        value: Some("ID"),
        about: "With ask and acp: the model for this run, over NOD_MODEL and the model of settings.json.",
    },
    Flag {
        long: "continue",
        short: Some('c'),
        value: None,
        about: "With ask: go on with the most recent saved session of this workspace (the model gets that conversation as it was, with the servers and tools of now).",
    },
    Flag {
        long: "resume",
        short: None,
        value: Some("ID"),
        about: "With ask: go on with saved session ID (a unique prefix is enough; nod sessions list shows them).",
    },
    Flag {
        long: "no-save",
        short: None,
        value: None,
        about: "With ask: do not save this conversation (nor its continuation) in $NOD_HOME/sessions; \"save_sessions\": false in settings.json turns saving off everywhere.",
    },
    Flag {
        long: "max-steps",
        short: None,
        value: Some("N"),
        about: "With ask: at most N model requests in the run (default NOD_MAX_AGENT_STEPS, else max_agent_steps of settings.json, else 50).",
    },
    Flag {
        long: "full-access",
        short: None,
        value: None,
        about: "Permission mode full-access for this process: every tool runs without asking, and no rule is consulted. Also accepted before the command (nod --full-access ask ...).",
    },
    Flag { long: "yolo", short: None, value: None, about: "Same as --full-access." },
    Flag {
        long: "add-dir",
        short: None,
        value: Some("PATH"),
        about: "With ask and the shell: offer PATH to the servers as a root beside the workspace (repeatable); servers that ask for roots (roots/list) get the workspace and these directories, a project server the workspace alone.",
    },
    Flag {
        long: "root",
        short: None,
        value: Some("PATH"),
        about: "With nod mcp commands: offer PATH to the server as a root (repeatable). Without it a nod mcp command declares no roots, so a one-off call never exposes a directory.",
    },
    Flag {
        long: "context-limit",
        short: None,
        value: Some("NAME=BYTES|off"),
        about: "Override one context limit for this run (repeatable; also before the command): mcp_description_bytes, mcp_search_result_bytes, mcp_server_instructions_bytes, mcp_selected_schema_bytes or max_tool_result_bytes. off means the 64 MiB ceiling.",
    },
    Flag {
        long: "log-file",
        short: None,
        value: Some("FILE"),
        about: "With acp: write logs to FILE (appended) instead of stderr.",
    },
    Flag { long: "help", short: Some('h'), value: None, about: "Show help and exit." },
];

const CONNECTS: &[&str] = &["json", "timeout", "startup-timeout", "protocol-version", "root"];

pub const COMMANDS: &[Command] = &[
    Command {
        path: "mcp path",
        usage: &["nod mcp path"],
        about: "Print the path of the MCP profile ($NOD_HOME/mcp.json, by default ~/.nod/mcp.json).",
        flags: &["json"],
        args: &[],
        examples: &[("nod mcp path", "Where the profile is."), ("$EDITOR \"$(nod mcp path)\"", "Edit it by hand.")],
    },
    Command {
        path: "mcp add",
        usage: &[
            "nod mcp add [--env NAME=VALUE]... <name> <command> [args...]",
            "nod mcp add --transport http|sse [--header 'NAME: VALUE']... <name> <url>",
        ],
        about: "Add or replace a server in the profile. A local stdio server runs <command> with everything after it as its own arguments, dashes included; a remote one is reached at <url> (https, or http to localhost) over Streamable HTTP (http) or legacy HTTP+SSE (sse). A command that looks like a URL is refused: use --transport. Names contain only ASCII letters, digits, _ and -. The write is atomic, keeps every other entry and field, and leaves the file private (0600); it holds a lock (.mcp.json.lock beside the file), so concurrent edits all land.",
        flags: &["env", "header", "transport", "json"],
        args: &[Arg::Free, Arg::Free],
        examples: &[
            ("nod mcp add files npx -y @modelcontextprotocol/server-filesystem ~/notes", "A local server."),
            (
                "nod mcp add --env LOG_LEVEL=warn memory npx -y @modelcontextprotocol/server-memory",
                "With an environment variable.",
            ),
            ("nod mcp add --transport http remote https://mcp.example.com/mcp", "A remote server."),
            ("nod mcp add --transport http -H 'X-Api-Key: ...' remote https://mcp.example.com/mcp", "With a header."),
        ],
    },
    Command {
        path: "mcp add-json",
        usage: &["nod mcp add-json <name> <json | - | @FILE>"],
        about: "Add or replace a server from a whole profile entry in JSON (as in mcp.json, or as Claude Code and VS Code write one: command, args, env, type, url, headers). The entry is checked as the profile would read it before anything is written; the write is as add's.",
        flags: &["json"],
        args: &[Arg::Free, Arg::Free],
        examples: &[(
            "nod mcp add-json memory '{\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-memory\"]}'",
            "An entry given whole.",
        )],
    },
    Command {
        path: "mcp import",
        usage: &["nod mcp import <file> [--yes]"],
        about: "Add the servers of another tool's configuration: Claude Desktop's claude_desktop_config.json and Claude Code's JSON (mcpServers, and Claude Code's entry for this folder), VS Code's mcp.json (servers), Codex's config.toml (mcp_servers). Each entry is checked as the profile would read it; what would be added (+), replaced (~) or cannot be taken (✗, with why) is shown, secret values hidden, and nothing is written without --yes.",
        flags: &["yes", "json"],
        args: &[Arg::Free],
        examples: &[
            ("nod mcp import ~/.config/Claude/claude_desktop_config.json", "See what would be added."),
            ("nod mcp import .vscode/mcp.json --yes", "Add them."),
            ("nod mcp import ~/.codex/config.toml --yes", "From Codex."),
        ],
    },
    Command {
        path: "mcp get",
        usage: &["nod mcp get <name>"],
        about: "Show one server's entry as configured (the profile's, or the project's .mcp.json), with the values of environment variables and headers and any URL query hidden, where it comes from, and how to remove it.",
        flags: &["json"],
        args: &[Arg::Server],
        examples: &[("nod mcp get files", "The entry of files.")],
    },
    Command {
        path: "mcp remove",
        usage: &["nod mcp remove <name>"],
        about: "Remove a server from the profile.",
        flags: &["json"],
        args: &[Arg::Server],
        examples: &[("nod mcp remove files", "Forget the server files.")],
    },
    Command {
        path: "mcp list",
        usage: &["nod mcp list [--connect]"],
        about: "Show configured servers and configuration issues without connecting. With --connect, start every enabled server in parallel, discover its catalogs and show a health snapshot: state, negotiated protocol version, tool, resource, template and prompt counts, and the error of a server that failed. On a terminal each server's lines appear as it becomes ready, with the time waited so far on stderr; piped or with --json, one document at the end. Health output never shows commands, environment values, headers or URLs.",
        flags: &["connect", "json", "timeout", "startup-timeout", "protocol-version", "root"],
        args: &[],
        examples: &[
            ("nod mcp list", "The configuration, without connecting."),
            ("nod mcp list --connect", "Start everything and show health."),
            ("nod mcp list --connect --json | jq '.servers[] | select(.state != \"ready\")'", "Servers that failed."),
        ],
    },
    Command {
        path: "mcp auth",
        usage: &["nod mcp auth <name> [--open]"],
        about: "Authorize a remote server with OAuth: nod discovers the authorization server, registers itself once per authorization server and reuses that client (or uses oauth.client_id or a client metadata document), prints the authorization URL and waits for the browser's redirect to a listener on 127.0.0.1. Every URL that OAuth reaches must be https, or http to a loopback host; link-local and unspecified addresses are refused, before anything is sent. --open launches the browser (the BROWSER command, else xdg-open); on a machine without one, paste the final redirect URL on stdin. Tokens and the registered client are stored in $NOD_HOME/credentials.json (0600); tokens are refreshed before they expire.",
        flags: &["open", "json", "timeout", "startup-timeout", "protocol-version", "root"],
        args: &[Arg::Server],
        examples: &[
            ("nod mcp auth notion --open", "Authorize in the browser."),
            ("nod mcp auth notion", "Headless: open the printed URL anywhere, paste the redirect URL."),
        ],
    },
    Command {
        path: "mcp logout",
        usage: &["nod mcp logout <name>"],
        about: "Delete the server's stored credentials and client registrations, and revoke the token where the authorization server offers revocation.",
        flags: &["json"],
        args: &[Arg::Server],
        examples: &[("nod mcp logout notion", "Forget and revoke the tokens.")],
    },
    Command {
        path: "mcp trust approve",
        usage: &["nod mcp trust approve <name>"],
        about: "Approve a project server from the workspace's .mcp.json. nod first prints what the entry runs or contacts, as written in the file: for a local server the command and every argument in full, the working directory and the environment with its template values; for a remote one the URL and the header names, never header values; and which of your environment variables its ${VAR} templates read. The choice is saved in $NOD_HOME/settings.json under the workspace's path, bound to a fingerprint of what was shown: if the entry's command, arguments, working directory, environment names or values, URL or headers change, it is pending again. If .mcp.json changes between showing and saving, nothing is approved.",
        flags: &["json"],
        args: &[Arg::ProjectServer],
        examples: &[("nod mcp trust approve everything", "Review the entry and approve it.")],
    },
    Command {
        path: "mcp trust reject",
        usage: &["nod mcp trust reject <name>"],
        about: "Reject a project server: it stays off in this workspace until approved.",
        flags: &["json"],
        args: &[Arg::ProjectServer],
        examples: &[("nod mcp trust reject everything", "Keep it off.")],
    },
    Command {
        path: "mcp trust approve-all",
        usage: &["nod mcp trust approve-all [--yes]"],
        about: "Show every project server of the workspace as approve does, then approve them all. On a terminal nod asks first ([y/N]: only y or yes approves); when stdin is not a terminal it refuses unless --yes is given. A profile server of the same name wins over a project entry, and approving one warns about it.",
        flags: &["yes", "json"],
        args: &[],
        examples: &[
            ("nod mcp trust approve-all", "Review them all and answer y."),
            ("nod mcp trust approve-all --yes", "In a script, after reviewing .mcp.json."),
        ],
    },
    Command {
        path: "mcp trust reset",
        usage: &["nod mcp trust reset"],
        about: "Forget the workspace's choices: every project server is pending again.",
        flags: &["json"],
        args: &[],
        examples: &[("nod mcp trust reset", "Start over.")],
    },
    Command {
        path: "mcp tool list",
        usage: &["nod mcp tool list <server>"],
        about: "List the server's tools (every page), one a line with how to call it: the name, each parameter as name:type (optional ones in brackets), the description's first line, and [task required] or [unusable: reason] for tools nod will not call.",
        flags: CONNECTS,
        args: &[Arg::Server],
        examples: &[
            ("nod mcp tool list everything", "get-sum a:number b:number  Returns the sum of two numbers"),
            ("nod mcp tool list everything --json | jq -r '.tools[].name'", "Just the names."),
        ],
    },
    Command {
        path: "mcp tool show",
        usage: &["nod mcp tool show <server> <tool>"],
        about: "Show one tool: its signature, full description, annotations, and its input and output schemas.",
        flags: CONNECTS,
        args: &[Arg::Server, Arg::Tool],
        examples: &[("nod mcp tool show everything get-sum", "What get-sum takes and returns.")],
    },
    Command {
        path: "mcp tool call",
        usage: &["nod mcp tool call <server> <tool> [arguments-json | - | @FILE] [--arg NAME=VALUE]..."],
        about: "Call a tool. The arguments are a JSON object (default {}): given inline, read from stdin with -, or from a file with @FILE; --arg adds one argument at a time. Over stdio the call goes out at once; when the server refuses it or the tool reports an error, nod reads the server's listing and says why: a tool it does not list is named with the closest name (exit 2), a missing required or unexpected argument is named on stderr. A remote server, and with --jsonl any server, is listed first: a tool nod will not call is refused before anything is sent (exit 2). Text results are printed; images and audio are summarized, or written with -o. Progress from long calls is shown on stderr (one line per notification, with its message and how far it is), and extends the call's deadline; --timeout MS sets that deadline for this run. With --jsonl, read one arguments object per stdin line and write one result per line, in input order; a failed line is {\"error\": {\"kind\", \"message\", \"server\"}} and a summary goes to stderr.",
        flags: &[
            "arg",
            "jsonl",
            "parallel",
            "elicit",
            "elicit-answer",
            "output",
            "json",
            "timeout",
            "startup-timeout",
            "protocol-version",
            "root",
        ],
        args: &[Arg::Server, Arg::Tool, Arg::Free],
        examples: &[
            ("nod mcp tool call everything get-sum --arg a=2 --arg b=3", "Arguments one by one."),
            ("nod mcp tool call files write_file @args.json", "Arguments from a file (any size)."),
            (
                "printf '{\"message\":\"a\"}\\n{\"message\":\"b\"}\\n' | nod mcp tool call everything echo --jsonl --parallel 8",
                "Many calls, eight in flight.",
            ),
        ],
    },
    Command {
        path: "mcp resource list",
        usage: &["nod mcp resource list <server>"],
        about: "List the server's resources (every page).",
        flags: CONNECTS,
        args: &[Arg::Server],
        examples: &[("nod mcp resource list everything", "URIs, names and types.")],
    },
    Command {
        path: "mcp resource templates",
        usage: &["nod mcp resource templates <server>"],
        about: "List the server's resource templates (every page).",
        flags: CONNECTS,
        args: &[Arg::Server],
        examples: &[("nod mcp resource templates everything", "URI templates.")],
    },
    Command {
        path: "mcp resource read",
        usage: &["nod mcp resource read <server> <uri> [-o FILE]"],
        about: "Read a resource. Text contents are printed, binary ones are never written raw to a terminal; with -o every content, text or binary, goes to FILE instead.",
        flags: &["output", "json", "timeout", "startup-timeout", "protocol-version", "root"],
        args: &[Arg::Server, Arg::Free],
        examples: &[
            (
                "nod mcp resource read everything demo://resource/static/document/architecture.md",
                "Print a text resource.",
            ),
            ("nod mcp resource read everything demo://resource/dynamic/blob/1 -o blob.bin", "Save a binary one."),
        ],
    },
    Command {
        path: "mcp resource complete",
        usage: &["nod mcp resource complete <server> <uri-template> <variable> [value]"],
        about: "Ask the server to complete a template variable. --arg NAME=VALUE passes variables already chosen.",
        flags: &["arg", "json", "timeout", "startup-timeout", "protocol-version", "root"],
        args: &[Arg::Server, Arg::Free, Arg::Free, Arg::Free],
        examples: &[(
            "nod mcp resource complete everything 'demo://resource/dynamic/text/{resourceId}' resourceId 1",
            "Values for resourceId.",
        )],
    },
    Command {
        path: "mcp prompt list",
        usage: &["nod mcp prompt list <server>"],
        about: "List the server's prompts (every page), with their arguments (optional ones in brackets).",
        flags: CONNECTS,
        args: &[Arg::Server],
        examples: &[("nod mcp prompt list everything", "Prompts and their arguments.")],
    },
    Command {
        path: "mcp prompt get",
        usage: &["nod mcp prompt get <server> <name> [arguments-json | - | @FILE] [--arg NAME=VALUE]..."],
        about: "Get a prompt. The arguments are a JSON object whose values are strings: inline, from stdin with -, from a file with @FILE, or one at a time with --arg.",
        flags: &["arg", "json", "timeout", "startup-timeout", "protocol-version", "root"],
        args: &[Arg::Server, Arg::Prompt, Arg::Free],
        examples: &[
            ("nod mcp prompt get everything args-prompt --arg city=Paris", "A prompt with one argument."),
            ("nod mcp prompt get everything simple-prompt --json", "The raw messages."),
        ],
    },
    Command {
        path: "mcp prompt complete",
        usage: &["nod mcp prompt complete <server> <name> <argument> [value]"],
        about: "Ask the server to complete a prompt argument. --arg NAME=VALUE passes arguments already chosen.",
        flags: &["arg", "json", "timeout", "startup-timeout", "protocol-version", "root"],
        args: &[Arg::Server, Arg::Prompt, Arg::Free, Arg::Free],
        examples: &[(
            "nod mcp prompt complete everything completable-prompt department E",
            "Departments starting with E.",
        )],
    },
    Command {
        path: "mcp skill list",
        usage: &["nod mcp skill list <server>"],
        about: "List the skills the server offers (the MCP skills extension): name, description and files, from the listing alone. Nothing of a skill is read until it is shown.",
        flags: CONNECTS,
        args: &[Arg::Server],
        examples: &[("nod mcp skill list docs", "The server's skills.")],
    },
    Command {
        path: "mcp skill show",
        usage: &["nod mcp skill show <server> <name> [file]"],
        about: "Load a server skill: read its SKILL.md and print its instructions, only when its size, its SHA-256 digest and its front matter agree with the server's listing (else it fails, printing nothing of it). With a file (a path inside the skill, as skill list shows it), the skill is loaded first, then that file is read and checked the same way.",
        flags: CONNECTS,
        args: &[Arg::Server, Arg::Free, Arg::Free],
        examples: &[
            ("nod mcp skill show docs pdf-processing", "The skill's instructions."),
            ("nod mcp skill show docs pdf-processing references/FORMS.md", "One of its files."),
        ],
    },
    Command {
        path: "mcp help",
        usage: &["nod mcp help [command]"],
        about: "Show the help of nod mcp, or of one of its commands.",
        flags: &[],
        args: &[Arg::Topic, Arg::Topic, Arg::Topic],
        examples: &[("nod mcp help tool call", "Same as nod mcp tool call --help.")],
    },
    Command {
        path: "ask",
        usage: &["nod ask [FLAGS] [--] [prompt...]"],
        about: "Ask the model a question for a script. The prompt is the words given (flags may come before or after them; after -- everything is prompt text, dashes included), or all of stdin when there are none; with both, piped stdin is attached to the prompt as a <stdin> block (up to 4 MiB in all). The model finds MCP tools with capability_search and calls them; the answer streams to stdout, and tool lines (● name and its arguments, ✗ why on failure), notices and errors go to stderr. Required servers start first; the others start on the first use of MCP; pending project servers are named and skipped; nod ask never starts an OAuth flow. Exit status: 0 answered, 1 the model or the provider failed, 2 usage or configuration error, 3 a server asked for input nobody could give, 130 interrupted.",
        flags: &[
            "json",
            "quiet",
            "prompt-permissions",
            "no-stdin",
            "system",
            "model",
            "max-steps",
            "continue",
            "resume",
            "no-save",
            "full-access",
            "yolo",
            "context-limit",
            "add-dir",
        ],
        args: &[Arg::Free],
        examples: &[
            (
                "nod ask \"what is in my notes about the Q3 plan?\"",
                "One question; the model searches the MCP tools it needs.",
            ),
            ("git diff | nod ask review this change", "Piped input rides along with the question."),
            ("nod ask --json \"list open issues\" | jq -r .final_output", "For scripts: one JSON object at the end."),
            ("nod ask -c \"and the closed ones?\"", "A follow-up: the last conversation of this workspace goes on."),
            ("nod ask --prompt-permissions \"tidy ~/notes\"", "Approve each action on the terminal."),
        ],
    },
    Command {
        path: "acp",
        usage: &["nod acp [FLAGS]"],
        about: "Run as an Agent Client Protocol (ACP v1) agent for an editor: newline-delimited JSON-RPC on stdin and stdout (stdout carries the protocol only; logs go to stderr or --log-file). Each session gets the MCP servers the client sends (stdio, http, sse) plus the approved project servers of its cwd, never the profile's; permissions become session/request_permission; a server's elicitation is relayed as ACP elicitation/create in the modes the client advertised, and refused otherwise. nod acp never starts an OAuth flow: authorize servers beforehand with nod mcp auth.",
        flags: &["model", "log-file", "full-access", "yolo", "context-limit"],
        args: &[],
        examples: &[
            ("nod acp", "What an editor runs (see the Zed snippet in the README)."),
            ("nod acp --model qwen3 --log-file /tmp/nod-acp.log", "A model of its own, logs in a file."),
        ],
    },
    Command {
        path: "permissions",
        usage: &["nod permissions [--json]"],
        about: "Show the effective permission mode and rules, each with where it comes from (default, settings.json, its workspaces entry, NOD_PERMISSION_MODE, --full-access), in the order they apply: the last matching rule wins.",
        flags: &["json", "full-access", "yolo"],
        args: &[],
        examples: &[("nod permissions", "The mode and the rules."), ("nod permissions --json | jq .rules", "As JSON.")],
    },
    Command {
        path: "status",
        usage: &["nod status [--json]"],
        about: "Show configuration: the profile, project servers and their trust, configuration issues, whether settings and credential files exist, and the model side: the model, its endpoint and where the URL came from, and whether a key is set (never the key). Starts no server, sends nothing to the model and opens no credential storage; the MCP connection is reported as not_checked.",
        flags: &["json"],
        args: &[],
        examples: &[
            ("nod status", "What nod would use here."),
            ("nod status --json | jq .project", "Project servers and their trust."),
        ],
    },
    Command {
        path: "doctor",
        usage: &["nod doctor [--json]"],
        about: "Check the configuration without connecting or running anything: file and folder permissions, profile and project issues, stdio programs that are not on PATH, project servers awaiting approval, and a model that is configured but cannot be used (a key variable that is not set, the default endpoint without a key). Prints the command that fixes each finding, and exits 2 when it finds a problem.",
        flags: &["json"],
        args: &[],
        examples: &[
            ("nod doctor", "Findings with their fixes."),
            ("nod doctor --json | jq .problems", "How many problems."),
        ],
    },
    Command {
        path: "skills",
        usage: &[
            "nod skills [list] [--json]",
            "nod skills show <name>",
            "nod skills add <folder>",
            "nod skills remove <name>",
            "nod skills trust approve|reject <name>",
            "nod skills trust approve-all [--yes]",
            "nod skills trust reset",
        ],
        about: "Agent Skills: folders holding a SKILL.md (YAML front matter with name and description, then Markdown instructions) that the model finds with capability_search and loads with its skill tool. User skills are in $NOD_HOME/skills/<name>; project skills in the workspace's .nod/skills and .agents/skills, pending until approved (a changed skill is pending again); a user skill wins over a project skill of the same name. list shows each with its origin, state and description, and the problems of those that cannot be read; show prints one; add copies a local skill folder into the user's skills once it reads as a skill (and says what it installed); remove deletes a user skill; trust approve|reject records the choice for this workspace; trust approve-all shows every pending or changed project skill and approves them with --yes; trust reset forgets the choices, so they are pending again. A skill never grants permissions: its allowed-tools is shown, not obeyed.",
        flags: &["json", "yes"],
        args: &[],
        examples: &[
            ("nod skills", "The skills, their origin and state."),
            ("nod skills show pdf-tools", "One skill's instructions and files."),
            ("nod skills trust approve release-notes", "Let the model use a project skill."),
        ],
    },
    Command {
        path: "sessions",
        usage: &[
            "nod sessions [list] [--json]",
            "nod sessions show <id> [--json]",
            "nod sessions rm <id>",
            "nod sessions prune --older-than AGE",
        ],
        about: "The saved conversations. nod ask saves each conversation as it goes in $NOD_HOME/sessions/<id>.jsonl (0600): what the model saw, with configured secrets redacted; nod ask -c goes on with the most recent one of this workspace, --resume <id> with any (a unique prefix of the id is enough), --no-save (or \"save_sessions\": false in settings.json) saves nothing. list shows each with its id, age, workspace, surface, message count and title, the most recent first; show prints one conversation with its tool calls summarised; rm deletes one; prune deletes those last written longer ago than AGE (30d, 12h, 90m).",
        flags: &["json", "older-than"],
        args: &[],
        examples: &[
            ("nod sessions", "The saved conversations, the most recent first."),
            ("nod sessions show 3fa9", "One conversation."),
            ("nod sessions prune --older-than 30d", "Forget those a month old."),
        ],
    },
    Command {
        path: "completions",
        usage: &["nod completions bash|zsh|fish"],
        about: "Print a completion script for the shell. It completes commands and flags, server names from the profile, and tool and prompt names that earlier listings (tool list, tool call, prompt list, list --connect) saved in $NOD_HOME/completion.json; nothing connects to a server while you complete.",
        flags: &[],
        args: &[Arg::Shell],
        examples: &[
            ("source <(nod completions bash)", "In ~/.bashrc."),
            ("nod completions zsh > \"${fpath[1]}/_nod\"", "For zsh."),
            ("nod completions fish > ~/.config/fish/completions/nod.fish", "For fish."),
        ],
    },
    Command {
        path: "help",
        usage: &["nod help [command]"],
        about: "Show this help, or the help of a command (nod help mcp, nod help mcp tool call).",
        flags: &[],
        args: &[Arg::Topic, Arg::Topic, Arg::Topic, Arg::Topic],
        examples: &[("nod help mcp", "The nod mcp commands.")],
    },
];

/// The commands `nod --help` lists; `mcp` stands for the whole group.
pub const NOD_OVERVIEW: &[(&str, &str)] = &[
    ("nod [FLAGS]", "The interactive shell: talk to the model, browse and use MCP servers (/help inside)."),
    ("nod mcp <command>", "Manage and use MCP servers from the shell; see nod mcp --help and nod-mcp(1)."),
    (
        "nod ask [FLAGS] <prompt>",
        "Ask the model; it finds and calls MCP tools, and may delegate to subagents. For scripts and pipelines.",
    ),
    ("nod acp [FLAGS]", "Serve editors as an Agent Client Protocol agent on stdin and stdout."),
    ("nod permissions [--json]", "Show the permission mode and rules, with their sources."),
    ("nod status [--json]", "Show configuration, without connecting."),
    ("nod doctor [--json]", "Check the configuration and print the fix for each finding."),
    ("nod skills [command]", "The installed Agent Skills, their origin and trust."),
    ("nod sessions [command]", "The saved conversations: list, show, rm, prune."),
    ("nod completions bash|zsh|fish", "Print a shell completion script."),
    ("nod help [command]", "Show this help, or a command's."),
];

/// Flags of `nod` itself, before the command.
pub const NOD_FLAGS: &[(&str, &str)] = &[
    ("-h, --help", "Show help and exit."),
    ("-V, --version", "Show the version and exit."),
    ("--full-access, --yolo", "Before ask, permissions or the shell: permission mode full-access for this process."),
    (
        "--context-limit NAME=BYTES|off",
        "Before ask, permissions or the shell: override one context limit (repeatable).",
    ),
    (
        "--add-dir PATH",
        "Before ask or the shell: offer PATH to the servers as a root beside the workspace (repeatable).",
    ),
];

pub const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Success."),
    (
        "1",
        "A tool call failed: the tool reported an error (isError), or the server refused the call with a JSON-RPC error; in --jsonl mode, any line failed. For nod ask: the model or the provider failed (a refused key, a content filter, retries used up). Reaching the step limit is not a failure.",
    ),
    ("2", "Usage, configuration or connection error, or a timeout."),
    (
        "3",
        "A server asked for input that nod could not collect (--elicit fail, or no terminal to ask on); the typed input_required result names the server, the mode, the message and the schema or URL.",
    ),
    ("130", "Interrupted (Ctrl-C): requests in flight were cancelled and servers shut down."),
];

pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("NOD_HOME", "nod's private folder, instead of ~/.nod."),
    (
        "NOD_BASE_URL",
        "The model endpoint, an OpenAI-compatible Chat Completions base URL (default https://api.openai.com/v1; Ollama: http://localhost:11434/v1). Over settings.json base_url.",
    ),
    ("NOD_MODEL", "The model (required unless settings.json has model, or --model is given)."),
    (
        "NOD_API_KEY, OPENAI_API_KEY",
        "The API key, sent as a bearer token (NOD_API_KEY first; settings.json api_key_env names another variable). Never printed; never sent over plain http except to this machine.",
    ),
    ("NOD_REQUEST_TIMEOUT_MS", "How long a model stream may stay silent before it is retried (default 120000)."),
    ("NOD_PERMISSION_MODE", "ask or full-access, over settings.json permission_mode."),
    (
        "NOD_MAX_AGENT_STEPS",
        "The step limit of nod ask, the shell and ACP sessions (digits; 0: no limit), over max_agent_steps.",
    ),
    (
        "NOD_LOG, RUST_LOG",
        "Log filter for stderr (env_logger syntax, e.g. debug or nod::wire=trace). Default: warn. The HTTP stack's debug and trace records (targets ureq, ureq_proto, rustls) are dropped whatever the filter says (ureq=, trace and all): they would show credentials.",
    ),
];

/// The flag with this long name.
pub fn flag(long: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.long == long)
}

/// The command at exactly this path.
pub fn command(path: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.path == path)
}

/// The commands under a group path (`"mcp tool"`), or the one command at that path.
pub fn under(path: &str) -> Vec<&'static Command> {
    COMMANDS.iter().filter(|c| c.path == path || c.path.starts_with(&format!("{path} "))).collect()
}

/// The words that may follow `path` (`"mcp"` → path, add, ..., tool, ...), in table order.
pub fn next_words(path: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for command in COMMANDS {
        let rest = if path.is_empty() {
            Some(command.path)
        } else {
            command.path.strip_prefix(path).and_then(|r| r.strip_prefix(' '))
        };
        if let Some(word) = rest.and_then(|r| r.split(' ').next())
            && !out.contains(&word)
        {
            out.push(word);
        }
    }
    out
}

/// The page for a path of words, when it names a command or a group.
pub fn page(words: &[&str]) -> Option<Page> {
    let path = words.join(" ");
    match path.as_str() {
        "" => return Some(Page::Nod),
        "mcp" => return Some(Page::Mcp),
        _ => {}
    }
    let known = COMMANDS.iter().find(|c| c.path == path).map(|c| c.path);
    let group = COMMANDS.iter().find(|c| c.path.starts_with(&format!("{path} "))).map(|c| {
        let n = path.split(' ').count();
        let end = c.path.match_indices(' ').nth(n - 1).map_or(c.path.len(), |(i, _)| i);
        &c.path[..end]
    });
    known.or(group).map(Page::Command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_named_by_a_command_exists_and_every_example_is_nod() {
        for command in COMMANDS {
            for name in command.flags {
                assert!(flag(name).is_some(), "{}: no flag {name}", command.path);
            }
            for usage in command.usage {
                assert!(usage.starts_with(&format!("nod {}", command.path)), "{usage}");
            }
            assert!(!command.examples.is_empty(), "{} has no example", command.path);
        }
    }

    #[test]
    fn paths_and_groups() {
        assert_eq!(
            next_words(""),
            ["mcp", "ask", "acp", "permissions", "status", "doctor", "skills", "sessions", "completions", "help"]
        );
        assert_eq!(next_words("mcp tool"), ["list", "show", "call"]);
        assert_eq!(page(&["mcp", "tool"]), Some(Page::Command("mcp tool")));
        assert_eq!(page(&["mcp", "tool", "call"]), Some(Page::Command("mcp tool call")));
        assert_eq!(page(&["status"]), Some(Page::Command("status")));
        assert_eq!(page(&["mcp", "tol"]), None);
        assert_eq!(under("mcp trust").len(), 4);
    }
}
