//! Links the `nod` binary as a position-dependent executable on Linux.
//!
//! A position-independent `nod` carries about 17,000 relative relocations that the dynamic
//! loader applies at every start, writing to some 75 pages it then owns privately: measured
//! with callgrind, `nod --version` runs 609,000 instructions as a PIE and 380,000 without,
//! with 174 and 97 page faults, and every `nod mcp` command pays it before its first byte
//! reaches a server. The cost of the trade: the executable's own image is loaded at a fixed
//! address (shared libraries, stack, heap and mappings stay randomized, and full RELRO
//! stays). Set `NOD_BUILD_PIE=1` when building to keep the usual PIE.

fn main() {
    println!("cargo:rerun-if-env-changed=NOD_BUILD_PIE");
    println!("cargo:rerun-if-changed=src/build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let keep_pie = std::env::var_os("NOD_BUILD_PIE").is_some_and(|v| !v.is_empty() && v != "0");
    if linux && !keep_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
