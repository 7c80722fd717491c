//! Fuzz target `url`: see `nod::fuzz::url` for what it reads and what must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        nod::fuzz::url(text);
    }
});
