//! `oscost show RUN`: a stored run (or a run file) printed as `run` prints it.

use clap::Args;

use super::args::StoreArgs;
use super::{Command, Given};
use super::{color, load_run, print_stdout};
use crate::effects::gate::Effects;

#[derive(Debug, Args, Clone)]
/// `oscost show`'s arguments.
pub struct ShowArgs {
    /// A stored run: its id, `last` or `last~N`.
    pub run: String,
    #[command(flatten)]
    /// The store the run is read from.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Which runs `last` counts among.
    pub select: super::args::SelectArgs,
    /// Print every result's note on its departing repetitions (as `run --verbose`).
    #[arg(long)]
    pub verbose: bool,
    /// Print every column of the table (as `run --wide`).
    #[arg(long)]
    pub wide: bool,
    /// After the table, list where each profiled result's time went (runs measured with
    /// --profile): every function's share and ns per operation with its interval.
    #[arg(long)]
    pub profile: bool,
}

impl ShowArgs {}

impl Command for ShowArgs {
    /// The run file it reads and the store; nothing is written.
    fn effects(&self) -> Effects {
        Effects::new()
            .store(self.store.db.as_ref())
            .reads("RUN", &self.run)
    }

    /// Print the stored run as `run` would.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let (run, name) = load_run(&self.run, &self.store, &self.select)?;
        crate::say!("oscost: {name}, started {}", run.started_at);
        print_stdout(&crate::report::table::render(
            &run,
            color(),
            crate::report::table::TableOptions {
                verbose: self.verbose,
                wide: self.wide,
            },
        ))?;
        if self.profile {
            print_stdout(&crate::report::profile::render(&run))?;
        }
        Ok(0)
    }
}
