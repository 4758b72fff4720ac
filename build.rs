//! Build steps beside the Rust code:
//! - csrc/calls.c, the C callees of the call/ family, as a static library of its own so they
//!   are never inlined into the Rust loops that time them;
//! - csrc/helper.c, a static no-libc executable that oscost embeds and execs (spawn/fork-exec,
//!   spawn/posix-spawn, spawn/exec). Where it cannot be built (another architecture, no
//!   static linking) the `oscost_helper` cfg is not set and those benchmarks say why they skip.
// Cargo reads a build script's instructions from its stdout: println! is the protocol, and a
// build whose stdout is gone has failed anyway.
#![allow(clippy::disallowed_macros)]

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=csrc/calls.c");
    println!("cargo:rerun-if-changed=csrc/helper.c");
    println!("cargo::rustc-check-cfg=cfg(oscost_helper)");
    cc::Build::new()
        .file("csrc/calls.c")
        .opt_level(2)
        .flag_if_supported("-fno-lto")
        .flag_if_supported("-fno-inline")
        .warnings(true)
        .compile("oscost_calls");

    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let helper = out.join("oscost-helper");
    let compiler = cc::Build::new().get_compiler();
    let status = Command::new(compiler.path())
        .args([
            "-O2",
            "-static",
            "-nostdlib",
            "-fno-stack-protector",
            "-fno-pie",
            "-no-pie",
            "-s",
            "-o",
        ])
        .arg(&helper)
        .arg("csrc/helper.c")
        .status();
    match status {
        Ok(s) if s.success() => println!("cargo:rustc-cfg=oscost_helper"),
        other => {
            println!(
                "cargo:warning=static helper not built ({other:?}); exec benchmarks will skip"
            );
            let _ = std::fs::write(&helper, b"");
        }
    }
}
