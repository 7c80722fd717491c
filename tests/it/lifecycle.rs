//! Server lifecycles: restarts within restart_limit, docker container ownership, faults that
//! leave the other servers working, and connect/shutdown cycles that leak nothing.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::support::{Env, FIXTURE, SERVER, with_method};

#[test]
fn a_crashed_server_is_restarted_up_to_its_limit() {
    let env = Env::new();
    env.fixture(&[], json!({ "restart_limit": 1 }));
    let out = env.nod(["mcp", "tool", "call", SERVER, "crash", "--jsonl"]).stdin("{}\n{}\n{}\n").run();
    out.code(2).within(10.0);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 3, "{}", out.dump());
    // The first crash fails its call, not retried; the restarted server crashes again; then
    // the server stays down with its last error.
    assert!(lines[0]["error"]["message"].as_str().unwrap().contains("exit code 3"), "{}", out.dump());
    assert!(lines[1]["error"]["message"].as_str().unwrap().contains("exit code 3"), "{}", out.dump());
    assert!(lines[2]["error"]["message"].as_str().unwrap().contains("is down after 1 restart"), "{}", out.dump());
    out.stderr_has("restarting");
    let wire = env.wire();
    assert_eq!(with_method(&wire, "initialize").len(), 2, "one start and one restart");
    assert_eq!(with_method(&wire, "tools/call").len(), 2, "a failed call is never sent again");
    env.assert_no_leftovers();
}

#[test]
fn after_a_restart_calls_work_again_and_catalogs_are_fetched_afresh() {
    let env = Env::new();
    let engine = nod::dispatch::Engine::start();
    let config = fixture_config(&env, 1);
    let server = nod::session::supervisor::Supervised::start(
        &engine,
        &config,
        Arc::new(nod::dispatch::NoInbound),
        &Default::default(),
    )
    .unwrap();
    let first = server.session().unwrap();
    assert!(nod::session::catalog::list(&first, nod::session::catalog::Kind::Tools).unwrap().items.len() > 5);
    let crashed = first.wait(first.call_tool("crash", json!({}), None), |_| {});
    assert!(matches!(crashed, Err(nod::dispatch::CallError::Disconnected(_))), "{crashed:?}");
    let second = server.session().expect("restarted");
    assert_ne!(first.conn, second.conn);
    let echoed = second.wait(second.call_tool("echo", json!({ "message": "back" }), None), |_| {}).unwrap();
    assert_eq!(echoed["content"][0]["text"], "back");
    assert!(nod::session::catalog::list(&second, nod::session::catalog::Kind::Tools).unwrap().items.len() > 5);
    assert_eq!(server.restarts(), 1);
    let wire = env.wire();
    assert_eq!(with_method(&wire, "tools/list").len(), 2, "the new session lists its tools itself");
    drop((first, second, server));
    engine.shutdown();
    env.assert_no_leftovers();
}

fn fixture_config(env: &Env, restart_limit: u32) -> nod::config::ServerConfig {
    use nod::config::{ServerConfig, StdioConfig, Transport};
    let record = env.record_path().display().to_string();
    ServerConfig {
        name: "fx".into(),
        enabled: true,
        required: false,
        startup_timeout: Duration::from_secs(10),
        operation_timeout: Duration::from_secs(10),
        restart_limit,
        protocol_version: None,
        transport: Transport::Stdio(StdioConfig {
            argv: vec![FIXTURE.into(), "--record".into(), record],
            env: vec![],
            cwd: None,
        }),
    }
}

#[test]
fn restart_limit_zero_never_restarts() {
    let env = Env::new();
    env.fixture(&[], json!({ "restart_limit": 0 }));
    let out = env.nod(["mcp", "tool", "call", SERVER, "crash", "--jsonl"]).stdin("{}\n{}\n").run();
    out.code(2);
    let lines = out.json_lines();
    assert!(lines[1]["error"]["message"].as_str().unwrap().contains("restart_limit 0"), "{}", out.dump());
    assert_eq!(with_method(&env.wire(), "initialize").len(), 1);
}

/// A `docker` first on PATH that records its calls, writes the container id file it is given,
/// and runs the fixture in place of a container.
fn fake_docker(env: &Env) -> String {
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = env.path("docker.log");
    let script = format!(
        r#"#!/bin/sh
echo "$*" >> '{log}'
if [ "$1" = run ]; then
  shift
  if [ "$1" = --cidfile ]; then printf 'fakecid123' > "$2"; fi
  exec '{fixture}' --record '{record}'
fi
exit 0
"#,
        log = log.display(),
        fixture = FIXTURE,
        record = env.record_path().display()
    );
    let path = bin.join("docker");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

#[test]
fn docker_run_gets_a_private_cidfile_and_its_container_is_removed() {
    let env = Env::new();
    let path = fake_docker(&env);
    env.profile(json!({ "mcp": { "box": { "command": ["docker", "run", "-i", "--rm", "mcp/fixture"] } } }));
    env.nod(["mcp", "tool", "call", "box", "echo", r#"{"message":"in a box"}"#])
        .env("PATH", path)
        .run()
        .code(0)
        .stdout_has("in a box");
    let log = std::fs::read_to_string(env.path("docker.log")).unwrap();
    let calls: Vec<&str> = log.lines().collect();
    assert_eq!(calls.len(), 2, "{log}");
    let run: Vec<&str> = calls[0].split(' ').collect();
    assert_eq!(run[0..2], ["run", "--cidfile"], "{log}");
    assert_eq!(run[3..], ["-i", "--rm", "mcp/fixture"], "{log}");
    assert_eq!(calls[1], "rm -f fakecid123");
    let cid_dir = std::path::Path::new(run[2]).parent().unwrap();
    assert!(!cid_dir.exists(), "the private folder is removed");
}

#[test]
fn docker_cleanup_also_follows_a_failed_start() {
    let env = Env::new();
    let path = fake_docker(&env);
    // The fixture exits before initialize: the container must still be removed.
    let bin = env.path("bin/docker");
    let script = std::fs::read_to_string(&bin).unwrap().replace("--record", "--scenario exit-before-init --record");
    std::fs::write(&bin, script).unwrap();
    env.profile(json!({ "mcp": { "box": { "command": ["docker", "run", "-i", "img"] } } }));
    env.nod(["mcp", "tool", "list", "box"]).env("PATH", path).run().code(2).stderr_has("server box");
    let log = std::fs::read_to_string(env.path("docker.log")).unwrap();
    assert!(log.lines().any(|l| l == "rm -f fakecid123"), "{log}");
}

#[test]
fn a_users_own_cidfile_is_left_alone() {
    let env = Env::new();
    let path = fake_docker(&env);
    let cid = env.path("mine.cid");
    env.profile(json!({ "mcp": { "box": { "command": ["docker", "run", "--cidfile", cid, "-i", "img"] } } }));
    env.nod(["mcp", "tool", "list", "box"]).env("PATH", path).run().code(0);
    let log = std::fs::read_to_string(env.path("docker.log")).unwrap();
    assert_eq!(log.lines().count(), 1, "no docker rm: {log}");
    assert!(log.starts_with(&format!("run --cidfile {} -i img", cid.display())), "{log}");
}

/// Every fault in the matrix, next to a good server: `list --connect` names the broken one
/// and still serves the good one.
#[test]
fn faults_leave_the_other_servers_working() {
    for (scenario, expect) in [
        ("exit-before-init", "exit code 2"),
        ("crash-after-init", "exit code 4"),
        ("never-init", "initialize"),
        ("stdout-close", "closed its stdout"),
        ("ignore-sigterm", "ready"),
        ("grandchild", "ready"),
        ("notify-flood", "ready"),
        ("stderr-flood", "ready"),
    ] {
        let env = Env::new();
        env.profile(json!({ "mcp": {
            "bad": env.fixture_entry(&["--scenario", scenario], json!({ "startup_timeout_ms": if scenario == "never-init" { 1500 } else { 10000 } })),
            "good": { "command": [FIXTURE], "env": env.marker_env() },
        }}));
        let out = env.nod(["mcp", "list", "--connect", "--json"]).run();
        out.within(8.0);
        let health = out.json();
        let servers = health["servers"].as_array().unwrap();
        let good = servers.iter().find(|s| s["name"] == "good").unwrap();
        assert_eq!(good["state"], "ready", "{scenario}: {}", out.dump());
        let bad = servers.iter().find(|s| s["name"] == "bad").unwrap();
        let shown = format!("{} {}", bad["state"], bad["error"]);
        assert!(shown.contains(expect), "{scenario}: expected {expect:?} in {shown}");
        env.assert_no_leftovers();
    }
}

/// A shorter run of `cargo bench --bench leak`: connect and shut down in one process, and
/// nothing accumulates.
#[test]
fn connect_shutdown_cycles_leak_nothing() {
    use nod::config::{ServerConfig, StdioConfig, Transport};
    let config = ServerConfig {
        name: "cycle".into(),
        enabled: true,
        required: false,
        startup_timeout: Duration::from_secs(10),
        operation_timeout: Duration::from_secs(10),
        restart_limit: 0,
        protocol_version: None,
        transport: Transport::Stdio(StdioConfig { argv: vec![FIXTURE.into()], env: vec![], cwd: None }),
    };
    let engine = nod::dispatch::Engine::start();
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let warm =
        nod::session::Session::connect(&engine, &config, Arc::new(nod::dispatch::NoInbound), &Default::default())
            .unwrap();
    warm.close();
    let before = fds();
    for _ in 0..50 {
        let session =
            nod::session::Session::connect(&engine, &config, Arc::new(nod::dispatch::NoInbound), &Default::default())
                .unwrap();
        nod::session::catalog::list(&session, nod::session::catalog::Kind::Tools).unwrap();
        session.close();
    }
    // Other tests run in this process too, so allow their descriptors some slack; a leak of
    // one descriptor per cycle would be 50 or more.
    let after = fds();
    engine.shutdown();
    assert!(after < before + 10, "descriptors grew from {before} to {after} over 50 cycles");
}

/// A library user that drops its engine without shutting it down: the dispatcher still
/// ends, the server is stopped, and the drop returns (it used to wait forever for the
/// dispatcher, which held a sender of its own command channel).
#[test]
fn dropping_an_engine_without_a_shutdown_ends_everything() {
    let env = Env::new();
    let config = fixture_config(&env, 0);
    let engine = nod::dispatch::Engine::start();
    let session =
        nod::session::Session::connect(&engine, &config, Arc::new(nod::dispatch::NoInbound), &Default::default())
            .unwrap();
    nod::session::catalog::list(&session, nod::session::catalog::Kind::Tools).unwrap();
    let (done, dropped) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        drop(session);
        drop(engine);
        let _ = done.send(());
    });
    dropped.recv_timeout(std::time::Duration::from_secs(20)).expect("the engine dropped");
    env.assert_no_leftovers();
}
