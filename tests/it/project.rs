//! Project servers from `.mcp.json`: nothing runs or is read before approval, trust follows
//! the entry's fingerprint, broken files are clear issues, and status/doctor never connect.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{Env, FIXTURE};

/// A temp git repository (the workspace) inside the test's folder.
fn repo(env: &Env) -> PathBuf {
    let repo = env.path("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("src/deep")).unwrap();
    repo
}

fn write_project(repo: &Path, servers: Value) {
    std::fs::write(repo.join(".mcp.json"), serde_json::to_string_pretty(&json!({ "mcpServers": servers })).unwrap())
        .unwrap();
}

/// A project entry that creates `marker` when it starts (through sh), then runs the fixture.
fn marking_entry(env: &Env, marker: &Path) -> Value {
    json!({
        "command": "sh",
        "args": ["-c", format!("touch '{}'; exec '{}' --record '{}'", marker.display(), FIXTURE, env.record_path().display())],
        "env": { "CANARY_USE": "${NOD_IT_CANARY}", "NOD_IT_MARKER": env.marker_env()["NOD_IT_MARKER"] }
    })
}

/// An LD_PRELOAD library that logs every getenv name to `$NOD_IT_GETENV_LOG`, or None when
/// there is no C compiler (then the test says so and checks the rest).
fn getenv_probe(env: &Env) -> Option<PathBuf> {
    let source = env.path("probe.c");
    std::fs::write(
        &source,
        r#"#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
char *getenv(const char *name) {
    static char *(*real)(const char *) = 0;
    if (!real) real = (char *(*)(const char *))dlsym(RTLD_NEXT, "getenv");
    char *log = real("NOD_IT_GETENV_LOG");
    if (log && strcmp(name, "NOD_IT_GETENV_LOG") != 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) { write(fd, name, strlen(name)); write(fd, "\n", 1); close(fd); }
    }
    return real(name);
}
"#,
    )
    .unwrap();
    let lib = env.path("probe.so");
    let built =
        std::process::Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&lib).arg(&source).arg("-ldl").status();
    match built {
        Ok(status) if status.success() => Some(lib),
        _ => {
            eprintln!("skipping the getenv probe: no C compiler");
            None
        }
    }
}

#[test]
fn nothing_runs_or_is_read_before_approval() {
    let env = Env::new();
    let repo = repo(&env);
    let marker = env.path("started.marker");
    write_project(&repo, json!({ "canary": marking_entry(&env, &marker) }));
    env.profile(json!({ "mcp": {} }));
    let probe = getenv_probe(&env);
    let log = env.path("getenv.log");
    let run = |args: &[&str]| {
        let mut cmd = env.nod(args).cwd(&repo.join("src/deep")).env("NOD_IT_CANARY", "canary-value-5e1");
        if let Some(lib) = &probe {
            cmd = cmd.env("LD_PRELOAD", lib.display().to_string()).env("NOD_IT_GETENV_LOG", log.display().to_string());
        }
        cmd.run()
    };
    for args in [
        &["mcp", "list", "--connect"][..],
        &["mcp", "list", "--json"],
        &["mcp", "tool", "call", "canary", "echo", "{}"],
        &["mcp", "tool", "list", "canary"],
        &["status"],
        &["status", "--json"],
        &["doctor"],
        &["doctor", "--json"],
    ] {
        let out = run(args);
        assert!(!marker.exists(), "{args:?} started a pending project server");
        assert!(!out.text().contains("canary-value-5e1"), "{}", out.dump());
    }
    if probe.is_some() {
        let names = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!names.lines().any(|n| n == "NOD_IT_CANARY"), "a pending entry's variable was read");
        assert!(names.lines().any(|n| n == "NOD_HOME"), "the probe works: {names}");
    }
    run(&["mcp", "tool", "call", "canary", "echo", "{}"]).code(2).stderr_has("nod mcp trust approve canary");
    run(&["mcp", "list", "--connect"]).stderr_has("skipped: project server canary is pending");

    run(&["mcp", "trust", "approve", "canary"]).code(0).stdout_has("approved project server canary");
    let out = run(&["mcp", "tool", "call", "canary", "echo", r#"{"message":"approved"}"#]);
    out.code(0).stdout_has("approved");
    assert!(marker.exists(), "the approved server runs");
    if probe.is_some() {
        let names = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(names.lines().any(|n| n == "NOD_IT_CANARY"), "after approval the variable is expanded");
    }
    env.assert_no_leftovers();
}

/// The agent's surfaces start no pending project server either: `nod ask` (even with
/// --full-access) and an ACP session in the workspace run a whole turn, and the server that
/// would write a marker on start never runs; the model is offered none of its tools.
#[test]
fn nod_ask_and_acp_start_no_pending_project_server() {
    use crate::model::{Model, Step};
    let env = Env::new();
    let repo = repo(&env);
    let marker = env.path("started.marker");
    write_project(&repo, json!({ "canary": marking_entry(&env, &marker) }));
    env.profile(json!({ "mcp": {} }));
    // Each turn searches the tools, which starts every server the turn may use.
    let search = || Step::Calls(String::new(), vec![crate::ask::call("capability_search", json!({ "query": "echo" }))]);
    let model = Model::start(vec![
        search(),
        Step::Text("Nothing to do.".into()),
        search(),
        Step::Text("Nothing here either.".into()),
    ]);
    // The entry's variable is set: only its pending state keeps it from starting.
    let ask = |model: &Model, args: &[&str]| crate::ask::ask(&env, model, args).cwd(&repo).env("NOD_IT_CANARY", "set");
    ask(&model, &["--full-access", "hello"]).run().code(0).stdout_has("Nothing to do.");
    assert!(!marker.exists(), "nod ask started a pending project server");
    let mut client = crate::acp::Client::start_with(&env, &model, &[("NOD_IT_CANARY", "set")]);
    client.initialize(json!({}));
    let session = client.new_session(&repo.display().to_string(), json!([]));
    let id = crate::acp::prompt(&mut client, &session, "hello");
    let answer = client.answer_of(id, |request| panic!("nothing is asked: {request}"));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (code, _) = client.finish();
    assert_eq!(code, Some(0));
    assert!(!marker.exists(), "an ACP session started a pending project server");
    for request in model.requests() {
        assert!(!request.to_string().contains("mcp_canary_"), "a pending server's tool was offered: {request}");
    }
    // Approved, the same run starts it: the marker would have told.
    env.nod(["mcp", "trust", "approve", "canary"]).cwd(&repo).run().code(0);
    let model = Model::start(vec![search(), Step::Text("Now it runs.".into())]);
    ask(&model, &["hello"]).run().code(0);
    assert!(marker.exists(), "the approved server started");
}

#[test]
fn a_changed_entry_is_pending_again_and_says_why() {
    let env = Env::new();
    let repo = repo(&env);
    let entry = |arg: &str| json!({ "command": FIXTURE, "args": ["--record", env.record_path(), "--tools", arg] });
    write_project(&repo, json!({ "fx": entry("1") }));
    env.nod(["mcp", "trust", "approve", "fx"]).cwd(&repo).run().code(0);
    env.nod(["mcp", "tool", "call", "fx", "echo", r#"{"message":"ok"}"#]).cwd(&repo).run().code(0);
    write_project(&repo, json!({ "fx": entry("2") }));
    let out = env.nod(["mcp", "list"]).cwd(&repo).run();
    out.stdout_has("trust=changed").stdout_has("changed since it was approved");
    let listed = env.nod(["mcp", "list", "--json"]).cwd(&repo).run().json();
    assert_eq!(listed["project"]["servers"][0]["trust"], "changed");
    env.nod(["mcp", "tool", "call", "fx", "echo", "{}"])
        .cwd(&repo)
        .run()
        .code(2)
        .stderr_has("changed since it was approved");
}

#[test]
fn a_changed_environment_value_or_working_directory_needs_approval_again() {
    let env = Env::new();
    let repo = repo(&env);
    std::fs::create_dir_all(repo.join("tools")).unwrap();
    let marker = env.path("started.marker");
    // sh writes the directory it runs in to the marker, then becomes the fixture.
    let mut entry = json!({
        "command": "sh",
        "args": ["-c", format!("pwd -P > '{}'; exec '{}'", marker.display(), FIXTURE)],
        "env": { "NODE_OPTIONS": "", "NOD_IT_MARKER": env.marker_env()["NOD_IT_MARKER"] },
    });
    write_project(&repo, json!({ "fx": entry }));
    let nod = |args: &[&str]| env.nod(args).cwd(&repo).run();
    nod(&["mcp", "trust", "approve", "fx"]).code(0);
    nod(&["mcp", "tool", "call", "fx", "echo", r#"{"message":"ok"}"#]).code(0);
    let workspace = repo.canonicalize().unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), workspace.display().to_string());
    let changes = [
        ("an environment value", json!({ "env": { "NODE_OPTIONS": "--require ./evil.js" } }), &workspace),
        ("the working directory", json!({ "cwd": "tools" }), &workspace.join("tools")),
    ];
    for (what, change, runs_in) in changes {
        std::fs::remove_file(&marker).unwrap();
        crate::support::merge(&mut entry, change);
        write_project(&repo, json!({ "fx": entry }));
        nod(&["mcp", "list"]).stdout_has("trust=changed").stdout_has("working directory, environment names or values");
        nod(&["mcp", "tool", "call", "fx", "echo", "{}"]).code(2).stderr_has("changed since it was approved");
        assert!(!marker.exists(), "the entry ran after {what} changed");
        nod(&["mcp", "trust", "approve", "fx"]).code(0);
        nod(&["mcp", "tool", "call", "fx", "echo", r#"{"message":"ok"}"#]).code(0);
        assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), runs_in.display().to_string(), "{what}");
    }
    env.assert_no_leftovers();
}

#[test]
fn approving_shows_exactly_what_runs_or_is_contacted() {
    let env = Env::new();
    let repo = repo(&env);
    let long_arg = format!("{}END-OF-ARG", "a".repeat(300));
    let long_value = format!("{}END-OF-VALUE", "v".repeat(300));
    write_project(
        &repo,
        json!({
            "local": {
                "command": FIXTURE,
                "args": ["--tools", "1", "esc\u{1b}[2Jape", "\u{202E}txt", long_arg],
                "cwd": "tools",
                "env": { "NODE_OPTIONS": "${NOD_IT_OPTIONS:-}", "LONG": long_value },
            },
            "remote": {
                "type": "http",
                "url": "https://mcp.example.com/mcp",
                "headers": { "X-Team": "header-value-4711", "X-Token": "${NOD_IT_TOKEN}" },
            },
        }),
    );
    let approve = |name: &str| {
        env.nod(["mcp", "trust", "approve", name])
            .cwd(&repo)
            .env("NOD_IT_OPTIONS", "expanded-options-13")
            .env("NOD_IT_TOKEN", "expanded-token-14")
            .run()
    };
    let out = approve("local");
    out.code(0)
        .stdout_has("project server local (stdio) runs this program on this machine")
        .stdout_has(&format!("command  {}\n", json!(FIXTURE)))
        .stdout_has("arg      \"--tools\"\n  arg      \"1\"\n")
        .stdout_has("arg      \"esc\\u001b[2Jape\"")
        .stdout_has("arg      \"\u{FFFD}txt\"")
        // The command line is shown in full (STDIO-7); other values are cut and counted.
        .stdout_has(&format!("arg      \"{}END-OF-ARG\"", "a".repeat(300)))
        .stdout_has(&format!("cwd      \"tools\" ({})", repo.canonicalize().unwrap().join("tools").display()))
        .stdout_has("env      NODE_OPTIONS=\"${NOD_IT_OPTIONS:-}\"")
        .stdout_has(&format!("env      LONG=\"{}\"… (112 more characters", "v".repeat(200)))
        .stdout_lacks("END-OF-VALUE")
        .stdout_has("reads    NOD_IT_OPTIONS from your environment")
        .stdout_lacks("expanded-options-13")
        .stdout_has("approved project server local");
    assert!(!out.text().contains(['\u{1b}', '\u{202E}']), "raw control characters reached the terminal");
    approve("remote")
        .code(0)
        .stdout_has("project server remote (http) contacts mcp.example.com")
        .stdout_has("url      \"https://mcp.example.com/mcp\"")
        .stdout_has("header   X-Team (value not shown)")
        .stdout_has("header   X-Token (value not shown)")
        .stdout_lacks("header-value-4711")
        .stdout_lacks("expanded-token-14")
        .stdout_has("reads    NOD_IT_TOKEN from your environment");
}

fn trust_states(env: &Env, repo: &Path) -> Vec<String> {
    let listed = env.nod(["mcp", "list", "--json"]).cwd(repo).run().json();
    listed["project"]["servers"].as_array().unwrap().iter().map(|s| s["trust"].as_str().unwrap().to_string()).collect()
}

#[test]
fn approve_all_asks_on_a_terminal_and_needs_yes_elsewhere() {
    let env = Env::new();
    let repo = repo(&env);
    write_project(
        &repo,
        json!({ "a": { "command": FIXTURE }, "b": { "type": "http", "url": "https://e.example/mcp" } }),
    );
    let out = env.nod(["mcp", "trust", "approve-all"]).cwd(&repo).run();
    out.code(2).stderr_has("stdin is not a terminal").stderr_has("nod mcp trust approve-all --yes");
    out.stdout_has("project server a (stdio) runs this program").stdout_has("contacts e.example");
    assert_eq!(trust_states(&env, &repo), ["pending", "pending"]);
    for yes in ["--yes", "-y"] {
        env.nod(["mcp", "trust", "approve-all", yes])
            .cwd(&repo)
            .run()
            .code(0)
            .stdout_has("approved project servers a, b");
        assert_eq!(trust_states(&env, &repo), ["approved", "approved"]);
        env.nod(["mcp", "trust", "reset"]).cwd(&repo).run().code(0);
    }
    for (answer, approved) in [("n", false), ("", false), ("yes please", false), ("y", true)] {
        let mut terminal = env.nod(["mcp", "trust", "approve-all"]).cwd(&repo).spawn_on_terminal();
        terminal.wait_for("approve these 2 project servers for").wait_for("[y/N] ").type_line(answer);
        let (code, shown) = terminal.wait();
        assert_eq!(code, Some(0), "{answer:?}: {shown}");
        assert!(shown.contains("runs this program on this machine"), "{shown}");
        let expected = if approved { ["approved", "approved"] } else { ["pending", "pending"] };
        assert_eq!(trust_states(&env, &repo), expected, "{answer:?}: {shown}");
        if !approved {
            assert!(shown.contains("nothing was approved"), "{answer:?}: {shown}");
        }
    }
    env.nod(["mcp", "trust", "reset"]).cwd(&repo).run().code(0);
    let mut terminal = env.nod(["mcp", "trust", "approve-all"]).cwd(&repo).spawn_on_terminal();
    terminal.wait_for("[y/N] ").end_input();
    let (code, shown) = terminal.wait();
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("nothing was approved"), "{shown}");
    assert_eq!(trust_states(&env, &repo), ["pending", "pending"], "end of input is a no");
    // Ctrl-C while nod waits for the answer.
    let mut terminal = env.nod(["mcp", "trust", "approve-all"]).cwd(&repo).spawn_on_terminal();
    terminal.wait_for("[y/N] ");
    // SAFETY: signals the nod process this test started and still owns.
    assert_eq!(unsafe { libc::kill(terminal.pid(), libc::SIGINT) }, 0);
    let (code, shown) = terminal.wait();
    assert_eq!(code, Some(130), "{shown}");
    assert_eq!(trust_states(&env, &repo), ["pending", "pending"], "an interrupted question is a no");
}

#[test]
fn a_file_changed_while_asking_is_not_approved() {
    let env = Env::new();
    let repo = repo(&env);
    write_project(&repo, json!({ "a": { "command": FIXTURE, "args": ["--tools", "1"] } }));
    let mut terminal = env.nod(["mcp", "trust", "approve-all"]).cwd(&repo).spawn_on_terminal();
    terminal.wait_for("[y/N] ");
    write_project(&repo, json!({ "a": { "command": FIXTURE, "args": ["--tools", "1", "--evil"] } }));
    terminal.type_line("y");
    let (code, shown) = terminal.wait();
    assert_eq!(code, Some(2), "{shown}");
    assert!(shown.contains(".mcp.json changed while it was being approved"), "{shown}");
    assert_eq!(trust_states(&env, &repo), ["pending"]);
}

#[test]
fn trust_is_recorded_privately_per_workspace_and_can_be_reset() {
    let env = Env::new();
    let repo = repo(&env);
    write_project(&repo, json!({ "a": { "command": FIXTURE }, "b": { "command": FIXTURE } }));
    env.nod(["mcp", "trust", "reject", "a"]).cwd(&repo).run().code(0);
    env.nod(["mcp", "trust", "approve-all", "--yes"]).cwd(&repo).run().code(0);
    let settings: Value = serde_json::from_slice(&std::fs::read(env.path("settings.json")).unwrap()).unwrap();
    let workspace = repo.canonicalize().unwrap().display().to_string();
    assert_eq!(settings["projects"][&workspace]["trust"]["a"]["state"], "approved");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(env.path("settings.json")).unwrap().permissions().mode() & 0o777, 0o600);
    let project_text = std::fs::read_to_string(repo.join(".mcp.json")).unwrap();
    assert!(!project_text.contains("approved"), "trust never goes into .mcp.json");
    env.nod(["mcp", "trust", "reject", "b"]).cwd(&repo).run().code(0);
    env.nod(["mcp", "list"]).cwd(&repo).run().stdout_has("trust=rejected");
    env.nod(["mcp", "trust", "reset"]).cwd(&repo).run().code(0);
    let listed = env.nod(["mcp", "list", "--json"]).cwd(&repo).run().json();
    let states: Vec<&str> =
        listed["project"]["servers"].as_array().unwrap().iter().map(|s| s["trust"].as_str().unwrap()).collect();
    assert_eq!(states, ["pending", "pending"]);
    env.nod(["mcp", "trust", "approve", "nope"]).cwd(&repo).run().code(2).stderr_has("no project server named nope");
    env.nod(["mcp", "trust", "bogus"]).cwd(&repo).run().code(2).stderr_line_has(&[
        "unknown command \"nod mcp trust bogus\"",
        "approve-all",
        "nod mcp trust --help",
    ]);
}

/// Twenty `nod mcp trust approve` at once, one server each: settings.json keeps all twenty.
#[test]
fn concurrent_approvals_all_land() {
    let env = Env::new();
    let repo = repo(&env);
    let names: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
    let servers: serde_json::Map<String, Value> =
        names.iter().map(|name| (name.clone(), json!({ "command": FIXTURE }))).collect();
    write_project(&repo, Value::Object(servers));
    let running: Vec<_> =
        names.iter().map(|name| env.nod(["mcp", "trust", "approve", name]).cwd(&repo).spawn()).collect();
    for run in running {
        run.wait().code(0);
    }
    assert_eq!(trust_states(&env, &repo), vec!["approved"; 20]);
}

#[test]
fn broken_project_files_are_clear_issues() {
    let env = Env::new();
    env.profile(json!({ "mcp": { "good": { "command": [FIXTURE] } } }));
    type Case<'a> = (&'a str, Box<dyn Fn(&Path)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "symlink",
            Box::new(|r: &Path| std::os::unix::fs::symlink("/etc/hostname", r.join(".mcp.json")).unwrap()),
            "symbolic link",
        ),
        (
            "fifo",
            Box::new(|r: &Path| {
                let path = std::ffi::CString::new(r.join(".mcp.json").display().to_string()).unwrap();
                // SAFETY: mkfifo on a path we own.
                assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
            }),
            "not a regular file",
        ),
        (
            "big",
            Box::new(|r: &Path| std::fs::write(r.join(".mcp.json"), vec![b' '; 2 << 20]).unwrap()),
            "over the 1 MiB limit",
        ),
        ("invalid", Box::new(|r: &Path| std::fs::write(r.join(".mcp.json"), "{oops").unwrap()), "not valid JSON"),
        (
            "not-object",
            Box::new(|r: &Path| std::fs::write(r.join(".mcp.json"), r#"{"mcpServers": []}"#).unwrap()),
            "not an object",
        ),
        (
            "bad-name",
            Box::new(|r: &Path| {
                write_project(r, json!({ "bad name": { "command": "x" }, "fine": { "command": "y" } }))
            }),
            "may contain only ASCII letters",
        ),
    ];
    for (label, make, expect) in cases {
        let repo = env.path(&format!("repo-{label}"));
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        make(&repo);
        let out = env.nod(["mcp", "list", "--connect", "--json"]).cwd(&repo).timeout(10).run();
        out.within(8.0);
        let health = out.json();
        let text = health["issues"].to_string();
        assert!(text.contains(expect), "{label}: expected {expect:?} in {text}");
        let good = health["servers"].as_array().unwrap().iter().find(|s| s["name"] == "good").unwrap();
        assert_eq!(good["state"], "ready", "{label}: the profile server still works");
        if label == "bad-name" {
            assert_eq!(health["project"]["servers"][0]["name"], "fine", "the valid entry is unaffected");
        }
        env.nod(["doctor"]).cwd(&repo).timeout(10).run().code(2).stdout_has("fix:");
    }
}

#[test]
fn missing_variables_skip_only_that_server_and_profile_strings_stay_literal() {
    let env = Env::new();
    let repo = repo(&env);
    write_project(
        &repo,
        json!({
            "needs": { "command": FIXTURE, "env": { "K": "${NOD_IT_NOT_SET}" } },
            "dflt": { "command": FIXTURE, "env": { "K": "${NOD_IT_NOT_SET:-fallback}" } },
        }),
    );
    env.profile(json!({ "mcp": { "literal": { "command": [FIXTURE], "env": { "K": "${HOME}" } } } }));
    env.nod(["mcp", "trust", "approve-all", "--yes"]).cwd(&repo).run().code(0);
    let out = env.nod(["mcp", "list", "--connect", "--json"]).cwd(&repo).run();
    let health = out.json();
    let names: Vec<&str> = health["servers"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["literal", "dflt"], "{}", out.dump());
    assert!(health["issues"].to_string().contains("NOD_IT_NOT_SET"), "{}", out.dump());
    env.nod(["mcp", "tool", "call", "dflt", "env", r#"{"name":"K"}"#]).cwd(&repo).run().code(0).stdout_has("fallback");
    env.nod(["mcp", "tool", "call", "literal", "env", r#"{"name":"K"}"#])
        .cwd(&repo)
        .run()
        .code(0)
        .stdout_has("${HOME}");
}

#[test]
fn the_profile_wins_a_same_name_project_entry() {
    let env = Env::new();
    let repo = repo(&env);
    write_project(&repo, json!({ "fx": { "command": FIXTURE, "args": ["--tools", "3"] } }));
    env.profile(json!({ "mcp": { "fx": { "command": [FIXTURE] } } }));
    let warning = ["warning: the profile", "also has a server named fx, which wins"];
    env.nod(["mcp", "trust", "approve", "fx"]).cwd(&repo).run().code(0).stderr_line_has(&warning);
    env.nod(["mcp", "trust", "approve-all", "--yes"]).cwd(&repo).run().code(0).stderr_line_has(&warning);
    let listed = env.nod(["mcp", "tool", "list", "fx", "--json"]).cwd(&repo).run().json();
    assert!(!listed["tools"].to_string().contains("tool_0000"), "the profile's server answered");
    env.nod(["mcp", "list"]).cwd(&repo).run().stdout_has("shadowed");
}

#[test]
fn the_workspace_is_the_nearest_project_file_up_to_the_repository_root() {
    let env = Env::new();
    // A .mcp.json above the repository root is not this workspace's.
    write_project(env.home(), json!({ "outside": { "command": FIXTURE } }));
    let repo = repo(&env);
    let out = env.nod(["mcp", "list", "--json"]).cwd(&repo.join("src/deep")).run().json();
    assert_eq!(out["project"]["file"], Value::Null, "{out}");
    write_project(&repo, json!({ "inside": { "command": FIXTURE } }));
    let out = env.nod(["mcp", "list", "--json"]).cwd(&repo.join("src/deep")).run().json();
    assert_eq!(out["project"]["servers"][0]["name"], "inside");
    assert_eq!(out["project"]["workspace"], repo.canonicalize().unwrap().display().to_string());
}

#[test]
fn status_and_doctor_report_without_connecting_or_showing_secrets() {
    let env = Env::new();
    let repo = repo(&env);
    write_project(&repo, json!({ "proj": { "command": FIXTURE, "env": { "TOKEN": "proj-secret-77" } } }));
    env.profile(json!({ "mcp": {
        "fx": env.fixture_entry(&[], json!({ "env": { "API_KEY": "prof-secret-88" } })),
        "remote": { "type": "http", "url": "https://secret-host.example/mcp", "headers": { "X-Key": "hdr-secret-99" } },
    }}));
    use std::os::unix::fs::PermissionsExt;
    // The test wrote these with the default modes; nod's own writes are private.
    std::fs::set_permissions(env.home(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(env.path("mcp.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
    for args in [&["status"][..], &["status", "--json"], &["doctor"], &["doctor", "--json"]] {
        let out = env.nod(args).cwd(&repo).run();
        let text = out.text();
        for secret in ["proj-secret-77", "prof-secret-88", "hdr-secret-99", "secret-host", FIXTURE] {
            assert!(!text.contains(secret), "{args:?} shows {secret}: {}", out.dump());
        }
        assert!(!env.record_path().exists(), "{args:?} started a server");
    }
    let status = env.nod(["status", "--json"]).cwd(&repo).run().json();
    assert_eq!(status["checks"]["mcp_connection"], "not_checked");
    assert_eq!(status["credentials"]["exists"], false);
    assert_eq!(status["project"]["servers"][0]["trust"], "pending");
    let doctor = env.nod(["doctor", "--json"]).cwd(&repo).run();
    doctor.code(0);
    assert_eq!(doctor.json()["checks"]["mcp_connection"], "not_checked");
    assert!(doctor.json()["findings"].to_string().contains("nod mcp trust approve proj"));
    std::fs::set_permissions(env.path("mcp.json"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let doctor = env.nod(["doctor"]).cwd(&repo).run();
    doctor.code(2).stdout_has("chmod 600");
}

#[test]
#[ignore = "needs server-everything from npm; cargo test -- --include-ignored (README)"]
fn a_real_repository_walks_through_pending_approve_use_change_pending() {
    let npm = std::env::var_os("NOD_TEST_NPM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/nod-ci/npm"));
    let bin = npm.join("node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "server-everything is not installed (no {}); bash .ci/run installs it", bin.display());
    let env = Env::new();
    let repo = env.path("checkout");
    std::fs::create_dir_all(&repo).unwrap();
    let git = std::process::Command::new("git").arg("init").arg("-q").arg(&repo).status();
    if !git.is_ok_and(|s| s.success()) {
        std::fs::create_dir_all(repo.join(".git")).unwrap();
    }
    let entry = |args: Value| json!({ "command": bin, "args": args, "env": env.marker_env() });
    write_project(&repo, json!({ "everything": entry(json!([])) }));
    let nod = |args: &[&str]| env.nod(args).cwd(&repo).timeout(60).run();
    nod(&["mcp", "list"]).stdout_has("trust=pending");
    nod(&["mcp", "tool", "call", "everything", "echo", r#"{"message":"hi"}"#]).code(2).stderr_has("pending approval");
    nod(&["mcp", "trust", "approve", "everything"]).code(0);
    nod(&["mcp", "tool", "call", "everything", "echo", r#"{"message":"from the repo"}"#])
        .code(0)
        .stdout_has("Echo: from the repo");
    let health = nod(&["mcp", "list", "--connect", "--json"]).json();
    assert_eq!(health["servers"][0]["state"], "ready");
    write_project(&repo, json!({ "everything": entry(json!(["stdio"])) }));
    nod(&["mcp", "list"]).stdout_has("trust=changed");
    nod(&["mcp", "tool", "call", "everything", "echo", "{}"]).code(2).stderr_has("changed since it was approved");
    env.assert_no_leftovers();
}
