//! `oscost report RUN -o DIR [--png]`: the HTML report of a run, with its figures.

use std::path::PathBuf;

use clap::Args;

use super::args::StoreArgs;
use super::load_run;
use super::{Command, Given};
use crate::effects::gate::Effects;
use crate::{bench, effects::output, report};

#[derive(Debug, Args, Clone)]
/// `oscost report`'s arguments.
pub struct ReportArgs {
    /// A JSON file, a stored run id, `last` or `last~N`.
    pub run: String,
    /// The directory to write index.html and fig/ into (`--report DIR`, as every other
    /// command spells it; `-o` and `--out` too).
    #[arg(
        short = 'o',
        long = "report",
        visible_alias = "out",
        value_name = "DIR"
    )]
    pub out: PathBuf,
    /// Also draw every figure as PNG.
    #[arg(long)]
    pub png: bool,
    #[command(flatten)]
    /// The store the run is read from.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Which runs `last` counts among.
    pub select: super::args::SelectArgs,
}

impl ReportArgs {}

impl Command for ReportArgs {
    /// The page's directory, the run file it reads and the store.
    fn effects(&self) -> Effects {
        Effects::new()
            .store(self.store.db.as_ref())
            .reads("RUN", &self.run)
            .writes_report("-o", Some(&self.out))
    }

    /// Write the stored run's page.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let stop = crate::effects::signals::on_interrupt()?;
        let (run, name) = load_run(&self.run, &self.store, &self.select)?;
        let page = report::run_page::render_run(&run, &bench::curves(), &bench::ladder(), self.png)
            .map_err(|e| anyhow::anyhow!("cannot render the report: {e}"))?;
        let files = output::write_page(&self.out, &page, &stop)?;
        crate::say!(
            "oscost: report of {name} in {} ({} files)",
            self.out.join("index.html").display(),
            files.len()
        );
        Ok(0)
    }
}
