//! `oscost completions SHELL` and `oscost man`: the command line described for the shell and
//! for man(1), generated from the same clap definition that parses it (so they cannot drift).

use clap::{Args, CommandFactory};

use super::print_stdout;
use crate::cli::Cli;

#[derive(Debug, Args, Clone)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Bash: `source <(oscost completions
    /// bash)`; zsh: write it to a directory on $fpath as `_oscost`; fish: to
    /// ~/.config/fish/completions/oscost.fish.
    pub shell: clap_complete::Shell,
}

impl CompletionsArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let mut out = Vec::new();
        clap_complete::generate(self.shell, &mut Cli::command(), "oscost", &mut out);
        print_stdout(&String::from_utf8_lossy(&out))?;
        Ok(0)
    }
}

#[derive(Debug, Args, Clone)]
pub struct ManArgs {}

impl ManArgs {
    /// The page in roff: `oscost man | man -l -`, or save it as oscost.1 on $MANPATH.
    pub fn run(self) -> anyhow::Result<i32> {
        let mut out = Vec::new();
        clap_mangen::Man::new(Cli::command()).render(&mut out)?;
        print_stdout(&String::from_utf8_lossy(&out))?;
        Ok(0)
    }
}
