//! The `nod` binary: parse, run, exit. Everything else lives in the library.

use std::io::Write;
use std::process::ExitCode;

use nod::cmd::Context;
use nod::cmd::interrupt::Signals;
use nod::util::{Redactor, Trigger};

fn main() -> ExitCode {
    let redactor = Redactor::default();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let command = match nod::cli::parse(args.clone()) {
        Ok(command) => command,
        Err(err) => {
            init_logging(redactor, None);
            return ExitCode::from(nod::cmd::report_usage(&err, &args) as u8);
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
    ExitCode::from(nod::cmd::run(command, &ctx) as u8)
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
