//! `NOD_LOG` (else `RUST_LOG`): the log filter, read by env_logger as written, behind a logger
//! that never passes on a debug or trace record of the HTTP stack. At those levels ureq,
//! ureq_proto and rustls dump raw requests and responses, bearer tokens, header values and
//! OAuth tokens included, split across lines where no redaction can find them. The records
//! are dropped by their target, whatever the filter says: a filter's spelling (`ureq=`,
//! `warn,ureq=`, `trace`) cannot let them through.

use log::{Level, Log, Metadata, Record};

/// Target prefixes whose debug and trace records carry secrets (`ureq` covers `ureq_proto`;
/// both are named so a reader sees them).
const HELD_BACK: [&str; 3] = ["ureq", "ureq_proto", "rustls"];

/// The filter env_logger reads: `spec`, or warn.
pub fn filter(spec: Option<&str>) -> String {
    spec.unwrap_or("warn").to_string()
}

/// Installs `logger` as the process's logger behind `Guarded`.
pub fn install(mut logger: env_logger::Builder) {
    let logger = logger.build();
    let max = logger.filter();
    if log::set_boxed_logger(Box::new(Guarded(logger))).is_ok() {
        log::set_max_level(max);
    }
}

/// A logger that drops the HTTP stack's debug and trace records before `L` sees them.
pub struct Guarded<L>(pub L);

impl<L: Log> Log for Guarded<L> {
    fn enabled(&self, metadata: &Metadata) -> bool {
        !held_back(metadata) && self.0.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if !held_back(record.metadata()) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

fn held_back(metadata: &Metadata) -> bool {
    metadata.level() >= Level::Debug && HELD_BACK.iter().any(|prefix| metadata.target().starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Keeps every record's target and level.
    #[derive(Default)]
    struct Kept(Mutex<Vec<(String, Level)>>);

    impl Log for Kept {
        fn enabled(&self, _: &Metadata) -> bool {
            true
        }
        fn log(&self, record: &Record) {
            self.0.lock().unwrap().push((record.target().to_string(), record.level()));
        }
        fn flush(&self) {}
    }

    #[test]
    fn the_http_stack_never_logs_below_info() {
        let guarded = Guarded(Kept::default());
        let targets = ["ureq", "ureq::unversioned", "ureq_proto::client", "rustls::client", "nod::wire"];
        for target in targets {
            for level in [Level::Error, Level::Warn, Level::Info, Level::Debug, Level::Trace] {
                guarded.log(&Record::builder().target(target).level(level).args(format_args!("x")).build());
            }
        }
        let kept = guarded.0.0.lock().unwrap();
        for (target, level) in kept.iter() {
            assert!(target == "nod::wire" || *level <= Level::Info, "{target} {level}");
        }
        assert_eq!(kept.len(), 4 * 3 + 5);
        let metadata = Metadata::builder().target("ureq_proto").level(Level::Trace).build();
        assert!(!guarded.enabled(&metadata));
    }
}
