//! oscost: measure what the operating system charges for its primitives.
//!
//! `main` parses the command line, dispatches, and is the one error boundary: a usage error
//! exits 2, an interrupt 128 + signal, any other error 1, each with one line on stderr.

use clap::Parser;

use oscost::cli::{Cli, UsageError};
use oscost::worker::Interrupted;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => e.exit(), // clap: help/version exit 0, usage errors exit 2
    };
    let code = match cli.dispatch() {
        Ok(code) => code,
        Err(e) => exit_status(&e),
    };
    std::process::exit(code);
}

/// Say what went wrong in one line and give the exit status it means.
fn exit_status(e: &anyhow::Error) -> i32 {
    if let Some(i) = e.downcast_ref::<Interrupted>() {
        eprintln!("oscost: {e}; every benchmark process was stopped, nothing was saved");
        128 + i.0
    } else if e.downcast_ref::<UsageError>().is_some() {
        eprintln!("oscost: {e}");
        2
    } else {
        eprintln!("oscost: {e:#}");
        1
    }
}
