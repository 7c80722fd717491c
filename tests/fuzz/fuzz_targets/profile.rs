//! Fuzz the profile parser: any bytes give servers and issues, never a panic, and every
//! loaded server satisfies the name rule.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut loaded = nod::config::Loaded::default();
    nod::config::profile::parse(data, &mut loaded);
    for server in &loaded.servers {
        assert!(nod::config::valid_name(&server.name));
    }
    for issue in &loaded.issues {
        let _ = issue.to_string();
    }
});
