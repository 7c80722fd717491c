//! The one table of commands and flags. `--help` and the man pages (`nod --generate man`)
//! are both rendered from it, and a test keeps the committed pages in `man/` current.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Nod,
    Mcp,
}

pub struct Entry {
    pub usage: &'static str,
    pub about: &'static str,
}

pub const NOD_COMMANDS: &[Entry] = &[
    Entry {
        usage: "nod mcp <command>",
        about: "Manage and use MCP servers from the shell; see nod mcp --help and nod-mcp(1).",
    },
    Entry { usage: "nod help [mcp]", about: "Show this help, or the help of nod mcp." },
    Entry {
        usage: "nod status [--json]",
        about: "Show configuration: the profile, project servers and their trust, configuration issues, and whether settings and credential files exist. Starts no server and opens no credential storage; the MCP connection is reported as not_checked.",
    },
    Entry {
        usage: "nod doctor [--json]",
        about: "Check the configuration without connecting: file permissions, profile and project issues, project servers awaiting approval. Prints the command that fixes each finding, and exits 2 when it finds a problem.",
    },
];

pub const NOD_FLAGS: &[Entry] = &[
    Entry { usage: "-h, --help", about: "Show help and exit." },
    Entry { usage: "-V, --version", about: "Show the version and exit." },
];

pub const MCP_COMMANDS: &[Entry] = &[
    Entry {
        usage: "nod mcp path",
        about: "Print the path of the MCP profile ($NOD_HOME/mcp.json, by default ~/.nod/mcp.json).",
    },
    Entry {
        usage: "nod mcp add [--env NAME=VALUE]... <name> <command> [args...]",
        about: "Add or replace a local stdio server in the profile. Everything after the command is the server's own arguments, dashes included. The write is atomic, keeps every other entry and field, and leaves the file private (0600).",
    },
    Entry {
        usage: "nod mcp add --transport http|sse <name> <url>",
        about: "Add or replace a remote server: http for Streamable HTTP, sse for a legacy 2024-11-05 HTTP+SSE server. The URL must be https, or http to localhost.",
    },
    Entry { usage: "nod mcp remove <name>", about: "Remove a server from the profile." },
    Entry {
        usage: "nod mcp trust approve|reject <name>",
        about: "Approve or reject a project server from the workspace's .mcp.json. approve first prints what the entry runs or contacts, as written in the file: for a local server the command and every argument in full, the working directory and the environment with its template values; for a remote one the URL and the header names, never header values; and which of your environment variables its ${VAR} templates read. The choice is saved in $NOD_HOME/settings.json under the workspace's path, bound to a fingerprint of what was shown: if the entry's command, arguments, working directory, environment names or values, URL or headers change, it is pending again. If .mcp.json changes between showing and saving, nothing is approved.",
    },
    Entry {
        usage: "nod mcp trust approve-all [--yes]",
        about: "Show every project server of the workspace as approve does, then approve them all. On a terminal nod asks first ([y/N]: only y or yes approves); when stdin is not a terminal it refuses unless --yes is given. A profile server of the same name wins over a project entry, and approving one warns about it.",
    },
    Entry {
        usage: "nod mcp auth <name> [--open]",
        about: "Authorize a remote server with OAuth: nod discovers the authorization server, registers itself once per authorization server and reuses that client (or uses oauth.client_id or a client metadata document), prints the authorization URL and waits for the browser's redirect to a listener on 127.0.0.1. Every URL that OAuth reaches must be https, or http to a loopback host; link-local and unspecified addresses are refused, before anything is sent. --open launches the browser (the BROWSER command, else xdg-open); on a machine without one, paste the final redirect URL on stdin. Tokens and the registered client are stored in $NOD_HOME/credentials.json (0600); tokens are refreshed before they expire.",
    },
    Entry {
        usage: "nod mcp logout <name>",
        about: "Delete the server's stored credentials and client registrations, and revoke the token where the authorization server offers revocation.",
    },
    Entry {
        usage: "nod mcp trust reset",
        about: "Forget the workspace's choices: every project server is pending again.",
    },
    Entry {
        usage: "nod mcp list [--connect]",
        about: "Show configured servers and configuration issues without connecting. With --connect, start every enabled server in parallel, discover its catalogs and show a health snapshot: state, negotiated protocol version, tool, resource, template and prompt counts, and the error of a server that failed. Health output never shows commands, environment values, headers or URLs.",
    },
    Entry { usage: "nod mcp tool list <server>", about: "List the server's tools (every page)." },
    Entry {
        usage: "nod mcp tool call <server> <tool> [arguments-json]",
        about: "Call a tool. The arguments are a JSON object (default {}). Progress from long calls is shown on stderr. With --jsonl, read one arguments object per stdin line and write one result per line, in input order.",
    },
    Entry { usage: "nod mcp resource list <server>", about: "List the server's resources (every page)." },
    Entry { usage: "nod mcp resource templates <server>", about: "List the server's resource templates (every page)." },
    Entry {
        usage: "nod mcp resource read <server> <uri>",
        about: "Read a resource. Text contents are printed; binary contents are written only where --output says, never raw to a terminal.",
    },
    Entry {
        usage: "nod mcp resource complete <server> <uri-template> <variable> [value]",
        about: "Ask the server to complete a template variable. --arg NAME=VALUE passes variables already chosen.",
    },
    Entry { usage: "nod mcp prompt list <server>", about: "List the server's prompts (every page)." },
    Entry {
        usage: "nod mcp prompt get <server> <name> [arguments-json]",
        about: "Get a prompt. The arguments are a JSON object whose values are strings.",
    },
    Entry {
        usage: "nod mcp prompt complete <server> <name> <argument> [value]",
        about: "Ask the server to complete a prompt argument. --arg NAME=VALUE passes arguments already chosen.",
    },
];

pub const MCP_FLAGS: &[Entry] = &[
    Entry {
        usage: "-e, --env NAME=VALUE",
        about: "With add: an environment variable for the server (repeatable); give it before the name.",
    },
    Entry { usage: "--transport http|sse", about: "With add: add a remote server by URL." },
    Entry { usage: "--open", about: "With auth: launch the browser on the authorization URL." },
    Entry { usage: "-y, --yes", about: "With trust approve-all: approve without asking." },
    Entry { usage: "--json", about: "Print machine-readable JSON on stdout instead of text." },
    Entry { usage: "--connect", about: "With list: connect and show live health." },
    Entry {
        usage: "--jsonl",
        about: "With tool call: read one arguments object per stdin line; write one JSON result per line.",
    },
    Entry {
        usage: "--parallel N",
        about: "With --jsonl: keep up to N calls in flight on the one connection (1 to 256; default 1).",
    },
    Entry {
        usage: "--elicit fail|decline|cancel|defaults",
        about: "With tool call: how to answer a server that asks for input. fail (the default) cancels the call and prints a typed input-required result (exit 3); decline and cancel answer so; defaults accepts a form filled with its default values.",
    },
    Entry {
        usage: "-o, --output FILE",
        about: "With resource read: write binary contents to FILE (FILE.2, FILE.3, ... for more than one); - writes them to stdout when it is not a terminal.",
    },
    Entry {
        usage: "--arg NAME=VALUE",
        about: "With complete: an argument already chosen, sent as context (repeatable).",
    },
    Entry { usage: "-h, --help", about: "Show help and exit." },
];

pub const EXIT_STATUS: &[Entry] = &[
    Entry { usage: "0", about: "Success." },
    Entry {
        usage: "1",
        about: "A tool call failed: the tool reported an error (isError), or the server refused the call with a JSON-RPC error; in --jsonl mode, any line failed.",
    },
    Entry { usage: "2", about: "Usage, configuration or connection error." },
    Entry { usage: "3", about: "A server asked for input that nod could not collect (--elicit fail)." },
    Entry { usage: "130", about: "Interrupted (Ctrl-C): requests in flight were cancelled and servers shut down." },
];

pub const ENVIRONMENT: &[Entry] = &[
    Entry { usage: "NOD_HOME", about: "nod's private folder, instead of ~/.nod." },
    Entry {
        usage: "NOD_LOG, RUST_LOG",
        about: "Log filter for stderr (env_logger syntax, e.g. debug or nod::wire=trace). Default: warn. The HTTP stack (ureq, ureq_proto, rustls) never logs below debug, whatever the filter says: its trace output would show credentials.",
    },
];

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
            section(&mut out, NOD_COMMANDS);
            out.push_str("\nFLAGS:\n");
            section(&mut out, NOD_FLAGS);
        }
        Page::Mcp => {
            out.push_str("nod mcp: configure, inspect and use MCP servers\n\nUSAGE:\n    nod mcp <command> [FLAGS]\n\nCOMMANDS:\n");
            section(&mut out, MCP_COMMANDS);
            out.push_str("\nFLAGS:\n");
            section(&mut out, MCP_FLAGS);
        }
    }
    out.push_str("\nEXIT STATUS:\n");
    section(&mut out, EXIT_STATUS);
    out.push_str("\nENVIRONMENT:\n");
    section(&mut out, ENVIRONMENT);
    out
}

fn section(out: &mut String, entries: &[Entry]) {
    for entry in entries {
        out.push_str("    ");
        out.push_str(entry.usage);
        out.push('\n');
        for line in wrap(entry.about, 72) {
            out.push_str("        ");
            out.push_str(&line);
            out.push('\n');
        }
    }
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
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
    let mut out = String::new();
    let (name, title, synopsis, description, commands, flags): (_, _, _, &str, _, _) = match page {
        Page::Nod => ("nod", "NOD", "nod [FLAGS] <command> ...", NOD_DESCRIPTION, NOD_COMMANDS, NOD_FLAGS),
        Page::Mcp => ("nod-mcp", "NOD-MCP", "nod mcp <command> [FLAGS]", MCP_DESCRIPTION, MCP_COMMANDS, MCP_FLAGS),
    };
    out.push_str(&format!(".TH {title} 1 \"\" \"nod {version}\" \"User Commands\"\n"));
    out.push_str(&format!(
        ".SH NAME\n{name} \\- {}\n",
        if page == Page::Nod {
            "a command-line agent whose every capability comes from MCP servers"
        } else {
            "configure, inspect and use MCP servers"
        }
    ));
    out.push_str(&format!(".SH SYNOPSIS\n.B {}\n", roff(synopsis)));
    out.push_str(".SH DESCRIPTION\n");
    for para in description.split("\n\n") {
        out.push_str(&roff(para.trim()));
        out.push_str("\n.PP\n");
    }
    man_section(&mut out, "COMMANDS", commands);
    man_section(&mut out, "FLAGS", flags);
    if page == Page::Mcp {
        out.push_str(".SH PROFILE\n");
        for para in PROFILE.split("\n\n") {
            out.push_str(&roff(para.trim()));
            out.push_str("\n.PP\n");
        }
        out.push_str(".SH AUTHENTICATION\n");
        for para in AUTH.split("\n\n") {
            out.push_str(&roff(para.trim()));
            out.push_str("\n.PP\n");
        }
        out.push_str(".SH PROJECT SERVERS AND TRUST\n");
        for para in PROJECT.split("\n\n") {
            out.push_str(&roff(para.trim()));
            out.push_str("\n.PP\n");
        }
    }
    man_section(&mut out, "EXIT STATUS", EXIT_STATUS);
    man_section(&mut out, "ENVIRONMENT", ENVIRONMENT);
    out.push_str(".SH SEE ALSO\n");
    out.push_str(if page == Page::Nod { "nod-mcp(1)\n" } else { "nod(1)\n" });
    out
}

fn man_section(out: &mut String, title: &str, entries: &[Entry]) {
    out.push_str(&format!(".SH {title}\n"));
    for entry in entries {
        out.push_str(&format!(".TP\n.B {}\n{}\n", roff(entry.usage), roff(entry.about)));
    }
}

fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| if l.starts_with('.') || l.starts_with('\'') { format!("\\&{l}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

const NOD_DESCRIPTION: &str = "nod is a command-line agent whose every capability comes from MCP (Model Context Protocol) servers. It starts local servers over stdio (newline-delimited JSON-RPC) and talks to remote ones over Streamable HTTP or the legacy HTTP+SSE transport, negotiating protocol 2025-11-25 (and accepting 2025-06-18, 2025-03-26 and, for stdio and legacy SSE, 2024-11-05).

Servers are configured in a private profile, $NOD_HOME/mcp.json (by default ~/.nod/mcp.json). nod mcp uses them from the shell without a model; see nod-mcp(1).

The interactive shell, nod ask and nod acp are not built yet.";

const MCP_DESCRIPTION: &str = "nod mcp manages and uses the MCP servers of the profile without the shell or a model. Each command that needs a server starts it, runs the MCP handshake within the entry's startup_timeout_ms, does its work with operation_timeout_ms per request, and shuts the server down: stdin is closed, then after 1 s SIGTERM goes to the server's process group, then after another 1 s SIGKILL; the process is always reaped.

Lists follow nextCursor to the end. Server output is untrusted: control characters are not written to a terminal, frames over 8 MiB end the connection with a clear error, and a line that is not JSON-RPC is ignored with a warning. Errors name the server, and show the last lines the server wrote to stderr when it died; configured environment values and header values are redacted from every error.

For an exact docker run command without --cidfile, nod injects a container id file in a private temporary folder and removes the container it owns (docker rm -f) after shutdown or a failed start. With your own --cidfile, cleanup remains yours.

A stdio server that dies after a successful start is restarted when it is next needed, up to its restart_limit, after a backoff that doubles from 250 ms; calls in flight when it died fail at once and are not retried. Past the limit it stays down with its last error.

A tool call carries a progress token; the server's progress notifications are shown on stderr, and each one may extend the call's deadline, up to ten times operation_timeout_ms in all. Ctrl-C cancels the requests in flight (notifications/cancelled), shuts the servers down and exits 130.

Answers are checked before they are used: a result that is not an object, a tool result without a content array or with an isError that is not true or false, a prompt without messages or a read without contents is a protocol error naming the server and the method (exit 2). A request whose capability the server did not declare (tools, resources, prompts, completions) is not sent: the error says the server does not offer it. A listing the server answers with method-not-found counts as empty. If initialize is refused without a list of supported versions, nod offers 2025-06-18, then 2025-03-26.

Tool schemas must be JSON Schema 2020-12 (the default) or Draft 7 and valid against their meta-schema; nod never fetches a $ref from the network. A tool whose input or output schema fails is listed with [unusable: reason] and never called; the server's other tools stay usable. A tool that requires MCP Tasks (execution.taskSupport \"required\") is listed with [task required] and never called: nod does not implement tasks. tool call lists the server's tools first to know this. --elicit defaults accepts a form only when the defaults satisfy the requested schema (types, enum, bounds, lengths, formats); otherwise it declines, naming the field. A server that cancels its own request gets no answer to it. A -32042 error (URL elicitation required) is reported like a URL elicitation: the input_required result with the URL, exit 3.";

const AUTH: &str = "A remote server may take static \"headers\", a \"header_env\" map (header name to environment variable), or \"bearer_token_env\"; when it answers 401 to them, the error names the refused fields (never their values). Otherwise nod speaks OAuth when the server answers 401, over Streamable HTTP and legacy HTTP+SSE alike; OAuth also runs beside headers other than Authorization when the entry has an \"oauth\" object (\"oauth\": {} will do) or once nod mcp auth has run for it. nod mcp auth <name> discovers the authorization server (protected resource metadata from the challenge or the well-known URLs, then RFC 8414 or OpenID Connect metadata, whose issuer must match), identifies itself with oauth.client_id (and client_secret_env), or oauth.client_metadata_url where the server supports client metadata documents, or else registers itself, and runs the authorization code flow with PKCE (S256 only; a server that does not advertise it is refused). The state and, when present, the iss of the callback are checked. The resource parameter of the authorization request and of every token request, refreshes included, is the resource that the protected resource metadata publishes, exactly (without such metadata, the server URL). The profile's \"oauth\" fields (resource, issuer, client_id, client_secret_env, client_metadata_url, scopes) override discovery; all are optional.

Every URL that OAuth reaches (resource and authorization server metadata, the authorization, token, registration and revocation endpoints, the client metadata document) must be https, or http to a loopback host (127.0.0.0/8, localhost, [::1]); link-local (169.254.0.0/16, fe80::/10) and unspecified (0.0.0.0, [::]) addresses are refused whatever the scheme, and so are URLs with credentials, whitespace or control characters. nod checks each URL before it sends anything there, and refuses an authorization server any of whose endpoints breaks the rule before registering or showing a URL. Strings from the authorization server (endpoints, callback errors, token errors) are shown on one line without control characters.

A client that nod registers is kept with the credentials, per server and authorization server issuer, and reused by the next authorization with that issuer (with the same callback port, which its redirect URI names); another issuer, an expired client secret, a callback port in use, or a token endpoint that answers invalid_client registers again. nod mcp logout forgets the registrations too.

The callback listens on 127.0.0.1 on a random port and accepts the one request that carries this authorization's state; any other request gets 404 and the flow keeps waiting, so no other local process can end it. --open starts the browser named by BROWSER (a program and its arguments, without a shell), else xdg-open. On a machine without a browser, open the printed URL elsewhere and paste the final redirect URL on nod's standard input.

Tokens are stored in $NOD_HOME/credentials.json (0600, written atomically), per server, and are sent only to a server URL that the resource they were issued for covers (the same origin, and the same path or one below it). They are refreshed a minute before they expire and after a 401 (the request is retried once). A 403 insufficient_scope re-authorizes with the union of the granted and requested scopes, at most three authorizations in one run. A malformed entry affects only its own server and is replaced by the next nod mcp auth, or removed by nod mcp logout, which also revokes the token where the server offers revocation. Commands other than nod mcp auth never start the browser flow by themselves, unless BROWSER is set: they report run nod mcp auth <name>, and the other servers go on. Tokens never appear in output or logs.";

const PROJECT: &str = "A repository can ship Claude-compatible project servers in <workspace>/.mcp.json, of which nod reads only the top-level \"mcpServers\" object: local entries with \"command\" (a string), \"args\", \"env\" and \"cwd\" (a working directory, relative to the workspace unless absolute), remote entries with \"type\" http or sse, \"url\" and \"headers\". The workspace is the nearest folder, from the current directory's canonical path upward, that holds .mcp.json; the search stops at the repository root (the first folder with .git). Without such a file the workspace is the current directory. The file is opened without following a symlink, must be a regular file, and is read up to 1 MiB; anything else is a configuration issue and the profile's servers still work.

Every project server begins pending. Until you approve it, nod does not start its process, contact its endpoint, read an environment variable for it, or load stored credentials for it: nod mcp list shows it as pending, nod mcp list --connect and the other commands skip it with a note on stderr. Approve with nod mcp trust approve <name> (or approve-all), reject with nod mcp trust reject <name>, forget the workspace's choices with nod mcp trust reset. Approving prints exactly what will run: the command and each argument in full, the working directory, and every environment variable with its value as written (templates unexpanded); for a remote server, the host, the URL and the header names. Values are quoted like JSON strings, so control characters show as escapes, and values other than the command line are cut at 200 characters with the rest counted. approve-all asks for confirmation on a terminal and needs --yes elsewhere. Choices live in $NOD_HOME/settings.json, never in .mcp.json, bound to a fingerprint of the entry as shown; if the file changes before the choice is saved, nothing is approved. An approved entry whose command, arguments, working directory, environment names or values, URL or headers change is pending again, and nod mcp list says why.

After approval, ${VAR} and ${VAR:-default} expand in the command, arguments, environment values, headers and URL (not in cwd). A variable that is not set and has no default skips that server with a configuration issue naming the variable, never a value; expanded values share a 1 MiB budget. Strings in the profile are never expanded. Project servers are always optional. The profile wins a same-name project entry.";

const PROFILE: &str = "The profile is a JSON object with one \"mcp\" map from server name to entry (\"mcpServers\" is accepted as an alias; \"mcp\" wins when both exist). Names contain only letters, digits, _ and -.

A local entry has \"type\": \"stdio\" (or \"local\"), and \"command\": [\"program\", \"arg\", ...]; the compatibility form \"command\": \"program\" with \"args\": [...] also works. \"environment\" (or its alias \"env\") maps variable names to string values that override the inherited environment. \"cwd\" sets the working directory.

A remote entry has \"type\": \"http\" (Streamable HTTP) or \"sse\" (legacy HTTP+SSE) and a \"url\", plus optionally \"headers\", \"header_env\", \"bearer_token_env\" and \"oauth\". \"headers\" are sent as they are; \"header_env\" maps a header name to an environment variable read when nod connects; \"bearer_token_env\" names a variable holding a bearer token. A missing variable fails that server alone, naming the variable, never a value. A literal Authorization header is rejected. Header values never appear in output or logs. The URL must be https, or http to localhost, 127.0.0.1 or [::1].

Over Streamable HTTP nod keeps the Mcp-Session-Id the server assigns and sends MCP-Protocol-Version on every request after initialize; answers may be JSON or SSE streams; a stream that ends before its answer is resumed with Last-Event-ID after the server's retry delay, for as long as resumptions deliver events (five empty ones in a row give up), within the request's timeout; a cancelled request's stream is closed at once; a 404 on an expired session starts one new session however many requests noticed, and replays each once; the session is ended with DELETE. An http entry whose initialize gets 400, 404 or 405 (without a JSON-RPC error) falls back to legacy HTTP+SSE. Proxies come from the usual HTTP_PROXY, HTTPS_PROXY and NO_PROXY variables; TLS uses the system's roots.

Every entry may set \"enabled\" (default true), \"required\" (default false), \"startup_timeout_ms\" (default 30000: start, handshake and first discovery), \"operation_timeout_ms\" (default 60000: each request) and \"restart_limit\" (default 1, stdio only). Timeouts above 30 days are taken as 30 days. A broken entry is reported with its name and the fix, and the other entries still load; unknown fields give a warning.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mcp_command_is_in_help_and_man() {
        let help = render(Page::Mcp);
        let man = man(Page::Mcp);
        for entry in MCP_COMMANDS.iter().chain(MCP_FLAGS) {
            assert!(help.contains(entry.usage), "{}", entry.usage);
            assert!(man.contains(&roff(entry.usage)), "{}", entry.usage);
        }
    }
}
