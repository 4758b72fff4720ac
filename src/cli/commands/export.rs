//! `oscost export RUN --json/--csv/--markdown FILE`: a stored run written to files.

use clap::Args;

use super::args::{OutputArgs, StoreArgs, usage};
use super::load_run;
use super::{Command, Given};
use crate::base::model::Run;
use crate::effects::gate::Effects;
use crate::effects::output;

#[derive(Debug, Args, Clone)]
/// `oscost export`'s arguments.
pub struct ExportArgs {
    /// A stored run: its id, `last` or `last~N`.
    pub run: String,
    #[command(flatten)]
    /// Where the run is written.
    pub outputs: OutputArgs,
    #[command(flatten)]
    /// The store the run is read from.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Which runs `last` counts among.
    pub select: super::args::SelectArgs,
}

impl ExportArgs {}

impl Command for ExportArgs {
    /// The files, the run file it reads and the store.
    fn effects(&self) -> Effects {
        self.outputs.declare(
            Effects::new()
                .store(self.store.db.as_ref())
                .reads("RUN", &self.run),
        )
    }

    /// Write the stored run to the files asked for.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let _stop = crate::effects::signals::on_interrupt()?;
        if self.outputs.paths().is_empty() {
            return Err(usage("export needs --json, --csv or --markdown FILE"));
        }
        let (run, _) = load_run(&self.run, &self.store, &self.select)?;
        output::export(&run, &super::exporters::<Run>(&self.outputs, None))?;
        Ok(0)
    }
}
