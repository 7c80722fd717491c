//! `NOD_LOG` (else `RUST_LOG`): the log filter, with the HTTP stack held at debug whatever the
//! filter says. Below debug, ureq and rustls dump raw requests and responses, bearer tokens,
//! header values and OAuth tokens included, split across lines where no redaction can find
//! them. A filter that names those modules (`ureq`, `ureq_proto`, `ureq=trace`,
//! `ureq_proto::client=trace`) or sets everything to trace is rewritten before env_logger
//! reads it.

/// Modules whose trace output carries secrets.
const CLAMPED: [&str; 3] = ["ureq", "ureq_proto", "rustls"];

/// The filter as env_logger should read it: every directive for a clamped module at debug
/// at most, and the clamped modules themselves pinned to debug when the global level is
/// trace. `None` means the default (warn).
pub fn filter(spec: Option<&str>) -> String {
    let spec = spec.unwrap_or("warn");
    // A `/regex` suffix filters messages; it stays as it is.
    let (directives, regex) = match spec.split_once('/') {
        Some((directives, regex)) => (directives, Some(regex)),
        None => (spec, None),
    };
    let mut out: Vec<String> = Vec::new();
    let mut global_trace = false;
    for directive in directives.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (name, level) = match directive.split_once('=') {
            Some((name, level)) => (name.trim(), Some(level.trim())),
            None if is_level(directive) => {
                global_trace |= directive.eq_ignore_ascii_case("trace");
                out.push(directive.to_string());
                continue;
            }
            None => (directive, None),
        };
        let clamped = CLAMPED.iter().any(|m| name == *m || name.starts_with(&format!("{m}::")));
        match (clamped, level) {
            // A bare module name means its every level: trace.
            (true, None) => out.push(format!("{name}=debug")),
            (true, Some(level)) if level.eq_ignore_ascii_case("trace") => out.push(format!("{name}=debug")),
            _ => out.push(directive.to_string()),
        }
    }
    if global_trace {
        for module in CLAMPED {
            if !out.iter().any(|d| d.split('=').next() == Some(module)) {
                out.push(format!("{module}=debug"));
            }
        }
    }
    let mut text = out.join(",");
    if let Some(regex) = regex {
        text.push('/');
        text.push_str(regex);
    }
    text
}

fn is_level(word: &str) -> bool {
    ["off", "error", "warn", "info", "debug", "trace"].iter().any(|l| word.eq_ignore_ascii_case(l))
}

#[cfg(test)]
mod tests {
    use super::filter;

    #[test]
    fn the_http_stack_never_logs_below_debug() {
        assert_eq!(filter(None), "warn");
        assert_eq!(filter(Some("trace")), "trace,ureq=debug,ureq_proto=debug,rustls=debug");
        assert_eq!(filter(Some("ureq_proto")), "ureq_proto=debug");
        assert_eq!(filter(Some("ureq")), "ureq=debug");
        assert_eq!(filter(Some("nod=debug,ureq")), "nod=debug,ureq=debug");
        assert_eq!(filter(Some("ureq_proto::client=trace")), "ureq_proto::client=debug");
        assert_eq!(filter(Some("ureq=info,nod=trace")), "ureq=info,nod=trace");
        assert_eq!(filter(Some("debug/secret")), "debug/secret");
        assert_eq!(filter(Some("TRACE")), "TRACE,ureq=debug,ureq_proto=debug,rustls=debug");
    }
}
