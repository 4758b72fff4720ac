//! `oscost env`: what the machine is (kernel, CPU, clocks, mitigations, THP, virtualization).

use clap::Args;

use super::print_stdout;
use super::{Command, Given};
use crate::effects::gate::Effects;
use crate::measuring::clock;

#[derive(Debug, Args, Clone)]
/// `oscost env`'s arguments.
pub struct EnvArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

impl Command for EnvArgs {
    /// It writes only to standard output; the default store is still kept safe.
    fn effects(&self) -> Effects {
        Effects::new().store(None)
    }

    /// Describe this machine.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let e = crate::machine::env::collect(Some(clock::calibrate()));
        let text = if self.json {
            serde_json::to_string_pretty(&e)? + "\n"
        } else {
            crate::report::env::render(&e)
        };
        print_stdout(&text)?;
        Ok(0)
    }
}
