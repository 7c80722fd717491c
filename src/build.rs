//! How the `nod` binaries are linked on Linux.
//!
//! **Position-dependent.** A position-independent `nod` carries about 17,000 relative
//! relocations that the dynamic loader applies at every start, writing to some 75 pages it
//! then owns privately: measured with callgrind, `nod --version` runs 609,000 instructions as
//! a PIE and 380,000 without, with 174 and 97 page faults, and every `nod mcp` command pays it
//! before its first byte reaches a server. The cost of the trade: the executable's own image
//! is loaded at a fixed address (shared libraries, stack, heap and mappings stay randomized,
//! and full RELRO stays). Set `NOD_BUILD_PIE=1` when building to keep the usual PIE.
//!
//! **GCC's unwinder linked in.** std links `-lgcc_s`, so every start loaded and relocated
//! `libgcc_s.so.1` and ran its constructor, `__cpu_indicator_init`, whose `cpuid`
//! instructions a virtual machine traps (6.6 us each measured here): `nod --version` took
//! 1.26 ms with it and 1.06 without. A linker script named `libgcc_s.so` that stands for
//! `libgcc_eh.a` (the same unwinder, as a static archive) goes first on the binaries' search
//! path. Where `cc` does not know `libgcc_eh.a`, or with `NOD_BUILD_STATIC_LIBGCC=0`, the
//! shared library stays.
//!
//! **Start-up code together.** `src/startup.order` names the functions the one-shot commands
//! run (written by `.ci/startup-order`); LLD places them side by side. The kernel maps a
//! binary's pages 64 KiB at a time around each fault, so scattered start-up code made a cold
//! `nod mcp tool list` map 3.9 MiB of the 11 MiB binary; grouped (about 800 KiB), its peak
//! RSS goes from 6.9 to 3.9 MiB and its CPU time from about 3.9 to 3.1 ms. Only LLD takes
//! the option, and Rust links x86_64 Linux with its own LLD from 1.90 on; where the linker
//! may be another (a configured linker, linker flags, another target) the file is left out,
//! as it is with `NOD_BUILD_ORDER=0`. A stale file costs speed, never a build: LLD ignores
//! the names a build lacks. The names carry a hash of the build's profile, so the file is
//! written from the release build itself (`NOD_BUILD_MAP` asks LLD for the map that names
//! its addresses).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=NOD_BUILD_PIE");
    println!("cargo:rerun-if-env-changed=NOD_BUILD_ORDER");
    println!("cargo:rerun-if-env-changed=NOD_BUILD_MAP");
    println!("cargo:rerun-if-env-changed=NOD_BUILD_STATIC_LIBGCC");
    println!("cargo:rerun-if-changed=src/build.rs");
    println!("cargo:rerun-if-changed=src/startup.order");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux && !set("NOD_BUILD_PIE") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    if linux && std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu") && !off("NOD_BUILD_STATIC_LIBGCC") {
        static_libgcc();
    }
    let order = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("src/startup.order");
    let wanted = std::env::var_os("NOD_BUILD_ORDER").is_none_or(|v| v != "0");
    if wanted && order.is_file() && links_with_rust_lld() {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", order.display());
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        // For .ci/startup-order: where each function of this very build lies.
        if let Some(map) = std::env::var_os("NOD_BUILD_MAP") {
            println!("cargo:rustc-link-arg-bin=nod=-Wl,-Map={}", Path::new(&map).display());
        }
    }
}

/// Puts the `libgcc_s.so` that stands for `libgcc_eh.a` first on the binaries' search path
/// (see the module's notes), when `cc` knows where `libgcc_eh.a` is.
fn static_libgcc() {
    // `cc` is asked where the archive is, so only where `cc` is the linker's own compiler: a
    // native build with no linker chosen (a cross or other linker would get this GCC's file).
    let native = std::env::var("HOST").is_ok_and(|host| std::env::var("TARGET").is_ok_and(|target| host == target));
    if !native || linker_chosen() {
        return;
    }
    println!("cargo:rerun-if-env-changed=PATH");
    let Ok(out) = Command::new("cc").arg("-print-file-name=libgcc_eh.a").output() else { return };
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !Path::new(&path).is_absolute() || !Path::new(&path).is_file() || path.contains(['(', ')', '"']) {
        return;
    }
    let Some(dir) = std::env::var_os("OUT_DIR").map(|d| Path::new(&d).join("static-libgcc")) else { return };
    let script = format!("/* nod's build: GCC's unwinder linked in (src/build.rs) */\nINPUT(\"{path}\")\n");
    if std::fs::create_dir_all(&dir).is_err() || std::fs::write(dir.join("libgcc_s.so"), script).is_err() {
        return;
    }
    // A compiler upgrade moves the archive: the script is written again.
    println!("cargo:rerun-if-changed={path}");
    println!("cargo:rustc-link-arg-bins=-L{}", dir.display());
}

fn off(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v == "0")
}

fn set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether configuration or flags choose the linker (or how it links).
fn linker_chosen() -> bool {
    let configured = std::env::var_os("RUSTC_LINKER").is_some()
        || std::env::vars_os().any(|(key, _)| {
            let key = key.to_string_lossy();
            key.starts_with("CARGO_TARGET_") && key.ends_with("_LINKER")
        });
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    configured || flags.contains("linker") || flags.contains("link-self-contained") || flags.contains("fuse-ld")
}

/// Whether this build links with the LLD that rustc brings: x86_64 Linux (GNU), rustc 1.90 or
/// later, and no linker chosen by configuration or flags.
fn links_with_rust_lld() -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu" {
        return false;
    }
    if linker_chosen() {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else { return false };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let text = String::from_utf8_lossy(&out.stdout);
    let mut version = text.split_whitespace().nth(1).unwrap_or("").split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
