//! Compiles the C callees of the call/ family (csrc/calls.c) as a separate static library, so
//! that they are never inlined into the Rust loops that time them.

fn main() {
    println!("cargo:rerun-if-changed=csrc/calls.c");
    cc::Build::new()
        .file("csrc/calls.c")
        .opt_level(2)
        .flag_if_supported("-fno-lto")
        .flag_if_supported("-fno-inline")
        .warnings(true)
        .compile("oscost_calls");
}
