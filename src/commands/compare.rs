//! `oscost compare BASE CAND`: what changed between two runs (files or stored runs), with
//! `--fail-above` for CI gating; also how `ab` reports (`finish`).

use std::path::PathBuf;

use clap::Args;

use super::{check_outputs, check_report_dir, color, load_run, print_stdout, stopper};
use crate::cli::{CompareArgs, OutputArgs, StoreArgs};
use crate::compare::{self, Comparison};
use crate::{output, report};

#[derive(Debug, Args, Clone)]
pub struct CompareCmd {
    /// The base: a JSON file, a stored run id, `last` or `last~N`.
    pub base: String,
    /// The candidate, in the same forms.
    pub cand: String,
    #[command(flatten)]
    pub compare: CompareArgs,
    #[command(flatten)]
    pub outputs: OutputArgs,
    /// Also write an HTML report of the comparison into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// With --report, also draw the figures as PNG.
    #[arg(long, requires = "report")]
    pub png: bool,
    /// The two runs' repetitions were interleaved (as `ab` does): judge on their own CIs.
    /// Without it, two runs are taken as measured apart: the run-to-run spread learned from
    /// the store is added, and without one nothing is called.
    #[arg(long)]
    pub together: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub select: crate::cli::SelectArgs,
}

impl CompareCmd {
    pub fn run(self) -> anyhow::Result<i32> {
        let interrupted = crate::signals::on_interrupt()?;
        check_outputs(&self.outputs, Some(&self.store), &[&self.base, &self.cand])?;
        if let Some(d) = &self.report {
            check_report_dir(d)?;
        }
        let (b, bn) = load_run(&self.base, &self.store, &self.select)?;
        let (c, cn) = load_run(&self.cand, &self.store, &self.select)?;
        let mut cmp = compare::compare(&b, &c, &bn, &cn, &options(&self.compare));
        if !self.together {
            let spreads = super::matrix::spreads_of_runs(&self.store, &[&b, &c])?;
            compare::apart(&mut cmp, &|bench| {
                crate::analysis::run_to_run::pooled(
                    spreads.get(&(bench.to_string(), 0)).copied().flatten(),
                    spreads.get(&(bench.to_string(), 1)).copied().flatten(),
                )
            });
        }
        if let Some(d) = &self.report {
            let page = report::compare_page::render_comparison(&cmp, self.png)
                .map_err(|e| anyhow::anyhow!("cannot render the comparison: {e}"))?;
            output::write_page(d, &page, &stopper(&interrupted))?;
            eprintln!(
                "oscost: comparison report in {}",
                d.join("index.html").display()
            );
        }
        finish(&cmp, &self.compare, &self.outputs)
    }
}

pub(super) fn options(args: &CompareArgs) -> compare::Options {
    compare::Options {
        threshold: args.threshold / 100.0,
        ..compare::Options::default()
    }
}

/// Print a comparison, write its files, and give the exit code (1 on a --fail-above breach).
pub(super) fn finish(
    cmp: &Comparison,
    args: &CompareArgs,
    outputs: &OutputArgs,
) -> anyhow::Result<i32> {
    let exported = output::export(cmp, &super::exporters::<Comparison>(outputs));
    let text = report::comparison::render(cmp, color() && !output::any_stdout(&outputs.paths()));
    if output::any_stdout(&outputs.paths()) {
        eprint!("{text}");
    } else {
        print_stdout(&text)?;
    }
    if let Err(e) = exported {
        eprintln!("oscost: {e}");
        return Ok(1);
    }
    if let Some(pct) = args.fail_above {
        let unknown = compare::unknown_apart(cmp);
        if !unknown.is_empty() {
            // A gate that cannot tell must not pass silently.
            eprintln!(
                "oscost: cannot tell whether {} benchmark(s) regressed by more than {pct}%: the runs were measured apart and no run-to-run spread is known (give --together if their repetitions were interleaved, or store 3 runs of each environment)",
                unknown.len()
            );
            return Ok(1);
        }
        let bad = compare::regressions(cmp, pct);
        if !bad.is_empty() {
            let ids: Vec<&str> = bad.iter().map(|r| r.id.as_str()).collect();
            eprintln!(
                "oscost: {} benchmark(s) slower by more than {pct}%: {}",
                bad.len(),
                ids.join(", ")
            );
            return Ok(1);
        }
    }
    Ok(0)
}
