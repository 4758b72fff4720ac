//! `oscost export RUN --json/--csv/--markdown/... FILE`: a stored run written to files, its
//! profiles too as folded stacks (`--folded`).

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
    /// Write the profiled results' call chains as folded stacks (`frame;frame;leaf count`, the
    /// result's id as the root), as flamegraph.pl and inferno-flamegraph read them (a run
    /// measured with --profile).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<std::path::PathBuf>,
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
                .reads("RUN", &self.run)
                .writes("--folded", self.folded.as_ref()),
        )
    }

    /// Write the stored run to the files asked for.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let _stop = crate::effects::signals::on_interrupt()?;
        if self.outputs.paths().is_empty() && self.folded.is_none() {
            return Err(usage(
                "export needs --json, --csv, --markdown, --folded or another format's FILE",
            ));
        }
        let (run, _) = load_run(&self.run, &self.store, &self.select)?;
        if self.folded.is_some() && run.results.iter().all(|r| r.profile.is_none()) {
            return Err(usage(
                "--folded: no result of this run was profiled; measure it with --profile",
            ));
        }
        let mut exporters = super::exporters::<Run>(&self.outputs, None);
        if let Some(p) = &self.folded {
            exporters.push((p.clone(), Box::new(crate::report::profile::Folded)));
        }
        output::export(&run, &exporters)?;
        Ok(0)
    }
}
