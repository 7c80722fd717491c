//! The `nod` binary: parse, run, exit. Everything else lives in the library.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let filter = std::env::var("NOD_LOG").or_else(|_| std::env::var("RUST_LOG")).unwrap_or_else(|_| "warn".into());
    let mut logger = env_logger::Builder::new();
    logger.parse_filters(&filter);
    if filter.to_ascii_lowercase().contains("trace") {
        // The HTTP stack's trace level dumps raw requests, headers and credentials included:
        // it is held at debug whatever the filter says.
        for module in ["ureq", "ureq_proto", "rustls"] {
            logger.filter_module(module, log::LevelFilter::Debug);
        }
    }
    logger
        .format(|buf, record| {
            let level = record.level().as_str().to_ascii_lowercase();
            // Log lines may quote server output: secrets are scrubbed here too.
            writeln!(buf, "nod: {level}: {}", nod::util::scrub(&record.args().to_string()))
        })
        .init();
    let command = match nod::cli::parse(std::env::args_os().skip(1)) {
        Ok(command) => command,
        Err(err) if err.message.is_empty() => nod::cli::Command::Help(err.page),
        Err(err) => {
            eprintln!("nod: {err}");
            return ExitCode::from(nod::cmd::Exit::Failure as u8);
        }
    };
    nod::cmd::install_interrupts();
    ExitCode::from(nod::cmd::run(command) as u8)
}
