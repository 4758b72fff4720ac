//! `oscost env`: what the machine is (kernel, CPU, clocks, mitigations, THP, virtualization).

use clap::Args;

use super::print_stdout;
use crate::harness::clock;

#[derive(Debug, Args, Clone)]
/// `oscost env`'s arguments.
pub struct EnvArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

impl EnvArgs {
    /// Describe this machine.
    pub fn run(self) -> anyhow::Result<i32> {
        let e = crate::harness::env::collect(Some(clock::calibrate()));
        let text = if self.json {
            serde_json::to_string_pretty(&e)? + "\n"
        } else {
            crate::report::env::render(&e)
        };
        print_stdout(&text)?;
        Ok(0)
    }
}
