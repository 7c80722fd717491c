//! The `nod` binary: parse, run, exit. Everything else lives in the library.
//!
//! On Linux the binary brings its own C `main` instead of std's start-up, which costs every
//! command more than nod needs of it: it reads and parses `/proc/self/maps` to find the main
//! thread's stack, and gives every thread nod starts a signal stack of its own (five system
//! calls and a mapping per thread, two threads per server) only to print "has overflowed its
//! stack" before a process that overflowed one dies anyway. What nod does need of it is done
//! here: SIGPIPE ignored (a closed pipe is an error on the write, not the end of nod), the
//! standard descriptors open (so a server's pipe can never take number 0, 1 or 2), a panic
//! in the main thread unwound (dropping the servers it owns) and answered with exit 101, and
//! standard output flushed at the end. (A panic there names the thread `<unnamed>`: std names
//! the main thread in its start-up.) Elsewhere, and in the unit-test build of this file,
//! std's `main` does it all.
#![cfg_attr(all(target_os = "linux", not(test)), no_main)]

use std::io::Write;

use nod::cmd::Context;
use nod::cmd::interrupt::Signals;
use nod::util::{Redactor, Trigger};

#[cfg(all(target_os = "linux", not(test)))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: setting a signal's disposition before any thread exists; `fill_standard_fds`
    // makes plain system calls on descriptors 0-2.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        fill_standard_fds();
    }
    // std::env::args is filled from the loader's arguments on Linux without std's start-up.
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    let _ = std::io::stdout().flush();
    code.into()
}

#[cfg(any(not(target_os = "linux"), test))]
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(run())
}

/// Opens `/dev/null` on any of descriptors 0-2 that is closed, as std's start-up does.
#[cfg(all(target_os = "linux", not(test)))]
unsafe fn fill_standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: `fds` is a valid array of three pollfd for the duration of the call.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } < 0 {
        return;
    }
    for pollfd in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
        // SAFETY: opening a path given as a NUL-terminated literal. The lowest free descriptor
        // is taken, which is the closed one: 0, 1 and 2 are filled in order.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if fd != pollfd.fd && fd >= 0 {
            // SAFETY: `fd` was just opened here and is owned by nobody else.
            unsafe { libc::close(fd) };
        }
    }
}

fn run() -> u8 {
    let redactor = Redactor::default();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let command = match nod::cli::parse(args.clone()) {
        Ok(command) => command,
        Err(err) => {
            init_logging(redactor, None);
            return nod::cmd::report_usage(&err, &args) as u8;
        }
    };
    let log_file = match &command {
        nod::cli::Command::Acp(acp) => acp.log_file.clone(),
        _ => None,
    };
    init_logging(redactor.clone(), log_file);
    let interrupt = Trigger::default();
    let signals = Signals::install(interrupt.clone());
    let ctx = Context { redactor, interrupt, options: Default::default(), signals: Some(signals) };
    nod::cmd::run(command, &ctx) as u8
}

/// `NOD_LOG` (else `RUST_LOG`, else warn) to stderr (or `file`, appended), every line
/// redacted, the HTTP stack's debug and trace records dropped (see `cmd::logging`).
#[allow(clippy::print_stderr)]
fn init_logging(redactor: Redactor, file: Option<std::path::PathBuf>) {
    let spec = std::env::var("NOD_LOG").or_else(|_| std::env::var("RUST_LOG")).ok();
    let mut logger = env_logger::Builder::new();
    logger.parse_filters(&nod::cmd::logging::filter(spec.as_deref()));
    if let Some(path) = file {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(&path) {
            Ok(file) => {
                logger.target(env_logger::Target::Pipe(Box::new(file)));
            }
            Err(err) => eprintln!("nod: cannot open the log file {}: {err}; logging to stderr", path.display()),
        }
    }
    logger.format(move |buf, record| {
        let level = record.level().as_str().to_ascii_lowercase();
        // Log lines may quote server output: secrets are scrubbed here too.
        writeln!(buf, "nod: {level}: {}", redactor.redact(&record.args().to_string()))
    });
    nod::cmd::logging::install(logger);
}
