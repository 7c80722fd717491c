//! The one place nod starts server processes. A child runs in its own process group (so the
//! group can be signalled as a whole, grandchildren included) and is watched through a pidfd
//! so its exit wakes the worker even when a grandchild still holds its pipes.
//!
//! No `pre_exec` hook is installed: it would force `fork` instead of `posix_spawn`, which
//! measured 25 ms slower for 20 servers started at once. The price: a nod killed with SIGKILL
//! cannot stop its servers; they see their stdin close, and well-behaved servers exit on
//! that. Every other way nod ends (exit, error, Ctrl-C, SIGTERM, SIGHUP) shuts them down.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct Spawn {
    pub argv: Vec<String>,
    /// Overrides on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// Inherited variables the server must not see (nod's own secrets); an override in `env`
    /// still sets one.
    pub env_remove: Vec<String>,
    pub cwd: Option<PathBuf>,
}

/// A running server process. Dropping it kills the process group and reaps the child.
pub struct ChildGuard {
    child: Child,
    pidfd: Option<OwnedFd>,
    reaped: Option<ExitStatus>,
    docker: Option<Docker>,
}

pub struct Pipes {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

impl ChildGuard {
    pub fn spawn(spec: &Spawn) -> std::io::Result<(ChildGuard, Pipes)> {
        let docker = Docker::rewrite(&spec.argv)?;
        let argv = docker.as_ref().map_or(&spec.argv, |d| &d.argv);
        let (program, args) = argv.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
        let mut command = Command::new(program);
        command.args(args);
        // Only the variables that are set: one removal makes the spawn copy the whole
        // environment, and most runs have none of them.
        for name in spec.env_remove.iter().filter(|name| std::env::var_os(name).is_some()) {
            command.env_remove(name);
        }
        command
            .envs(spec.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(err) => {
                if let Some(docker) = docker {
                    docker.cleanup();
                }
                return Err(err);
            }
        };
        let pipes = Pipes {
            stdin: child.stdin.take().expect("piped stdin"),
            stdout: child.stdout.take().expect("piped stdout"),
            stderr: child.stderr.take().expect("piped stderr"),
        };
        let pidfd = pidfd_open(child.id());
        Ok((ChildGuard { child, pidfd, reaped: None, docker }, pipes))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A descriptor that becomes readable when the process exits, where the kernel has pidfds.
    pub fn exit_fd(&self) -> Option<i32> {
        self.pidfd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reaps the child if it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.reaped = Some(status);
        }
        self.reaped
    }

    /// Signals the whole process group. After the leader is reaped the group id stays
    /// reserved while any member lives, so this reaches only the server's own processes.
    pub fn signal_group(&self, signal: i32) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: plain syscall; a stale group gives ESRCH, which is fine.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }

    /// Whether any process of the group is still alive.
    pub fn group_alive(&self) -> bool {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::kill(-pgid, 0) == 0 }
    }

    /// Kills the group and reaps the leader. Blocks only as long as SIGKILL takes.
    pub fn kill_and_reap(&mut self) -> ExitStatus {
        self.signal_group(libc::SIGKILL);
        if let Some(status) = self.reaped {
            return status;
        }
        let status = self.child.wait().unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(9));
        self.reaped = Some(status);
        status
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.reaped.is_none() || self.group_alive() {
            self.kill_and_reap();
        }
        if let Some(docker) = self.docker.take() {
            docker.cleanup();
        }
    }
}

/// A `docker run` that nod owns: it injected `--cidfile` into a private folder, so after the
/// process ends it removes the container (`docker rm -f`) and the folder. With the user's own
/// `--cidfile`, nod touches nothing.
struct Docker {
    argv: Vec<String>,
    program: String,
    dir: PathBuf,
    cidfile: PathBuf,
}

/// How long `docker rm -f` may take before nod stops waiting.
const DOCKER_RM_TIMEOUT: Duration = Duration::from_secs(10);

impl Docker {
    /// Rewrites an exact `docker run ...` (program named docker, first argument `run`) that
    /// has no `--cidfile` anywhere in it.
    fn rewrite(argv: &[String]) -> std::io::Result<Option<Docker>> {
        let is_docker = argv.first().is_some_and(|p| Path::new(p).file_name().is_some_and(|n| n == "docker"));
        if !is_docker || argv.get(1).map(String::as_str) != Some("run") {
            return Ok(None);
        }
        if argv.iter().any(|a| a == "--cidfile" || a.starts_with("--cidfile=")) {
            return Ok(None);
        }
        let dir = private_dir()?;
        let cidfile = dir.join("container.cid");
        let mut rewritten =
            vec![argv[0].clone(), "run".into(), "--cidfile".into(), cidfile.to_string_lossy().into_owned()];
        rewritten.extend(argv[2..].iter().cloned());
        Ok(Some(Docker { argv: rewritten, program: argv[0].clone(), dir, cidfile }))
    }

    fn cleanup(self) {
        let id = std::fs::read_to_string(&self.cidfile).map(|s| s.trim().to_string()).unwrap_or_default();
        if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            let rm = Command::new(&self.program)
                .args(["rm", "-f", &id])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            match rm {
                Ok(mut rm) => {
                    let deadline = Instant::now() + DOCKER_RM_TIMEOUT;
                    loop {
                        match rm.try_wait() {
                            Ok(Some(_)) | Err(_) => break,
                            Ok(None) if Instant::now() >= deadline => {
                                log::warn!(
                                    "docker rm -f {id} did not finish within {} s; left running",
                                    DOCKER_RM_TIMEOUT.as_secs()
                                );
                                let _ = rm.kill();
                                let _ = rm.wait();
                                break;
                            }
                            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                        }
                    }
                }
                Err(err) => log::warn!("could not run docker rm -f {id}: {err}"),
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a helper program (a browser) that runs on its own: no pipes, its own process
/// group, reaped in the background. `last` is appended after `args`.
pub fn launch_detached(program: &str, args: &[String], last: &str) -> std::io::Result<()> {
    let mut command = Command::new(program);
    command.args(args).arg(last).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
    // A browser is no batch work.
    let mut child = super::sched::normal_for(|| command.spawn())?;
    let _ = std::thread::Builder::new().name("nod-reap".into()).spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

/// A new 0700 folder under the system temp folder.
fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = std::env::temp_dir();
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("nod-docker-{}-{n}-{nanos:08x}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other("could not create a private folder for the docker container id"))
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor we own, or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Describes how a process ended, for an error message.
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "unknown status".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn docker_run_gets_a_private_cidfile() {
        let docker = Docker::rewrite(&argv("docker run -i --rm mcp/fetch")).unwrap().unwrap();
        assert_eq!(&docker.argv[..3], &argv("docker run --cidfile")[..]);
        assert_eq!(&docker.argv[4..], &argv("-i --rm mcp/fetch")[..]);
        assert!(docker.argv[3].ends_with("container.cid"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&docker.dir).unwrap().permissions().mode() & 0o777, 0o700);
        let dir = docker.dir.clone();
        docker.cleanup();
        assert!(!dir.exists());
        assert!(Docker::rewrite(&argv("/usr/bin/docker run img")).unwrap().is_some_and(|d| {
            let dir = d.dir.clone();
            d.cleanup();
            !dir.exists()
        }));
    }

    #[test]
    fn other_commands_and_user_cidfiles_are_left_alone() {
        for text in [
            "docker run --cidfile /x img",
            "docker run --cidfile=/x img",
            "docker ps",
            "podman run img",
            "node docker run",
        ] {
            assert!(Docker::rewrite(&argv(text)).unwrap().is_none(), "{text}");
        }
    }
}
