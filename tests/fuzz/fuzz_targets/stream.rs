//! Fuzz target `stream`: see `nod::fuzz::stream` for what it reads and what must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nod::fuzz::stream(data);
});
