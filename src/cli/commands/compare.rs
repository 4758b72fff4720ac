//! `oscost compare BASE CAND`: what changed between two runs (files or stored runs), with
//! `--fail-above` for CI gating; also how `ab` reports (`finish`).

use std::path::PathBuf;

use clap::Args;

use super::args::{CompareArgs, OutputArgs, StoreArgs};
use super::{Command, Given};
use super::{color, load_run, print_stdout};
use crate::analysis::compare::{self, Comparison};
use crate::effects::gate::Effects;
use crate::{effects::output, report};

#[derive(Debug, Args, Clone)]
/// `oscost compare`'s arguments.
pub struct CompareCmd {
    /// The base: a JSON file, a stored run id, `last` or `last~N`.
    #[arg(required_unless_present = "base_group", value_parser = super::args::RunRefParser,
          hide_possible_values = true)]
    pub base: Option<String>,
    /// The candidate, in the same forms.
    #[arg(required_unless_present = "base_group")]
    pub cand: Option<String>,
    /// A group of stored runs as the base, selected like --where (repeatable, all must hold),
    /// e.g. --base 'kernel~6.1': the runs' levels are compared as groups (Welch's t on their
    /// log-medians), so the scatter between runs measured apart is in the interval.
    #[arg(long = "base", value_name = "COND", requires = "cand_group",
          conflicts_with_all = ["base", "cand"])]
    pub base_group: Vec<crate::analysis::select::Filter>,
    /// The candidate group, in the same form (e.g. --candidate 'kernel~6.6').
    #[arg(long = "candidate", value_name = "COND", requires = "base_group")]
    pub cand_group: Vec<crate::analysis::select::Filter>,
    #[command(flatten)]
    /// How the runs are judged.
    pub compare: CompareArgs,
    #[command(flatten)]
    /// Where the comparison is written.
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
    /// The store the runs are read from.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Which runs `last` and `last~N` count among.
    pub select: super::args::SelectArgs,
}

/// Two runs measured apart judged with the run-to-run spread the store learned for each
/// benchmark (`compare::apart`), the host's drift between them taken out first where their
/// witnesses and a learned slope allow. Rows whose spread is unknown are marked so.
pub(super) fn judge_apart_by_store(
    cmp: &mut Comparison,
    store: &StoreArgs,
    b: &crate::base::model::Run,
    c: &crate::base::model::Run,
) -> anyhow::Result<()> {
    let spreads = super::matrix::spreads_of_runs(store, &[b, c])?;
    let witnesses = |run: &crate::base::model::Run, bench: &str| {
        use crate::analysis::witness::{result_exit_witness, result_speed_witness};
        let r = run.results.iter().find(|r| r.id == bench)?;
        Some(crate::analysis::run_to_run::ResultWitnesses {
            exit_ns: result_exit_witness(r),
            speed_ns: result_speed_witness(r),
        })
    };
    compare::apart(
        cmp,
        &|bench| {
            crate::analysis::run_to_run::pooled(
                spreads.get(&(bench.to_string(), 0)).copied().flatten(),
                spreads.get(&(bench.to_string(), 1)).copied().flatten(),
            )
        },
        &|bench| witnesses(b, bench).zip(witnesses(c, bench)),
    );
    Ok(())
}

impl Command for CompareCmd {
    /// The comparison's files and page, the run files it reads and the store.
    fn effects(&self) -> Effects {
        let mut e = Effects::new().store(self.store.db.as_ref());
        for r in [&self.base, &self.cand].into_iter().flatten() {
            e = e.reads("a run file", r);
        }
        self.outputs
            .declare(e)
            .writes_report("--report", self.report.as_ref())
    }

    /// Compare the two runs and write the comparison.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let stop = crate::effects::signals::on_interrupt()?;
        let (Some(base), Some(cand)) = (&self.base, &self.cand) else {
            let cmp = self.groups()?;
            return finish(&cmp, &self.compare, &self.outputs);
        };
        let (b, bn) = load_run(base, &self.store, &self.select)?;
        let (c, cn) = load_run(cand, &self.store, &self.select)?;
        let mut cmp = compare::compare(&b, &c, &bn, &cn, &options(&self.compare));
        if !self.together {
            judge_apart_by_store(&mut cmp, &self.store, &b, &c)?;
        }
        if let Some(d) = &self.report {
            let page = report::compare_page::render_comparison(&cmp, self.png)
                .map_err(|e| anyhow::anyhow!("cannot render the comparison: {e}"))?;
            output::write_page(d, &page, &stop)?;
            crate::say!(
                "oscost: comparison report in {}",
                d.join("index.html").display()
            );
        }
        finish(&cmp, &self.compare, &self.outputs)
    }
}

impl CompareCmd {
    /// `--base COND... --candidate COND...`: two groups of stored runs, each benchmark compared
    /// on the runs' levels (`run_to_run::group_difference`), from the stored summary rows.
    fn groups(&self) -> anyhow::Result<Comparison> {
        use crate::analysis::run_to_run::RunLevel;
        use crate::analysis::select::RunFilter;
        let mut s = super::read_store(&self.store)?;
        let all = self
            .select
            .selection()
            .apply(s.list().map_err(super::store_err)?);
        let pick = |conds: &[crate::analysis::select::Filter], which: &str| {
            let runs = RunFilter(conds.to_vec()).apply(all.clone());
            if runs.len() < 2 {
                return Err(super::usage(format!(
                    "the {which} group has {} run(s); a group needs at least 2 (`oscost run --runs 3` measures a series)",
                    runs.len()
                )));
            }
            Ok(runs)
        };
        let (bg, cg) = (
            pick(&self.base_group, "base")?,
            pick(&self.cand_group, "candidate")?,
        );
        let ids = |g: &[crate::base::model::RunSummary]| g.iter().map(|r| r.id).collect::<Vec<_>>();
        let (bids, cids) = (ids(&bg), ids(&cg));
        if bids.iter().any(|id| cids.contains(id)) {
            return Err(super::usage(
                "the two groups share runs; give conditions that select different runs",
            ));
        }
        let rows = s
            .result_rows(&[bids.clone(), cids.clone()].concat())
            .map_err(super::store_err)?;
        let levels = |group: &[i64], bench: &str| -> Vec<RunLevel> {
            rows.iter()
                .filter(|(id, r)| group.contains(id) && r.bench == bench && r.status == "ok")
                .filter_map(|(_, r)| {
                    Some(RunLevel {
                        median: r.median?,
                        ci95: [r.ci_lo?, r.ci_hi?],
                    })
                })
                .collect()
        };
        let mut benches: Vec<&str> = Vec::new();
        for (_, r) in &rows {
            if !benches.contains(&r.bench.as_str()) {
                benches.push(&r.bench);
            }
        }
        let threshold = self.compare.threshold / 100.0;
        let mut cmp = Comparison {
            base: group_side(&bg, &self.base_group),
            cand: group_side(&cg, &self.cand_group),
            threshold,
            rows: vec![],
            only_base: vec![],
            only_cand: vec![],
            unmeasured: vec![],
            summary: compare::Summary::default(),
            alternated: false,
            // Groups are chosen by what they share (`--where`), not compared run to run.
            differs: vec![],
        };
        for bench in benches {
            group_row(
                &mut cmp,
                bench,
                &levels(&bids, bench),
                &levels(&cids, bench),
            );
        }
        compare::resummarize(&mut cmp);
        Ok(cmp)
    }
}

/// The value every run of a group has, or `None` where they differ or none has one.
fn shared(
    g: &[crate::base::model::RunSummary],
    of: impl Fn(&crate::base::model::RunSummary) -> Option<String>,
) -> Option<String> {
    let first = of(g.first()?)?;
    g.iter()
        .all(|r| of(r).as_ref() == Some(&first))
        .then_some(first)
}

/// One group as a side of the comparison: its conditions, its runs.
fn group_side(
    g: &[crate::base::model::RunSummary],
    conds: &[crate::analysis::select::Filter],
) -> compare::ComparedSide {
    let words: Vec<String> = conds.iter().map(ToString::to_string).collect();
    let ids: Vec<String> = g.iter().map(|r| r.id.to_string()).collect();
    compare::ComparedSide {
        name: format!(
            "{} ({} runs: {})",
            words.join(" and "),
            g.len(),
            ids.join(", ")
        ),
        started_at: g.first().map(|r| r.started_at.clone()).unwrap_or_default(),
        label: None,
        wrapper: None,
        settings: vec![],
        during: None,
        // What every run of the group shares, where they share it.
        kernel: shared(g, |r| r.kernel.clone()),
        host: shared(g, |r| r.host.clone()),
        kernel_config: None,
        notes: vec![],
        witness_ns: None,
        witness_workers: None,
        exit_witness_ns: None,
    }
}

/// One benchmark's row of a group comparison, or why it has none.
fn group_row(
    cmp: &mut Comparison,
    bench: &str,
    lb: &[crate::analysis::run_to_run::RunLevel],
    lc: &[crate::analysis::run_to_run::RunLevel],
) {
    let Some(d) = crate::analysis::run_to_run::group_difference(lb, lc) else {
        let why = format!(
            "{bench}: measured in {} and {} of the runs",
            lb.len(),
            lc.len()
        );
        if lb.len() >= 2 {
            cmp.only_base.push(why);
        } else if lc.len() >= 2 {
            cmp.only_cand.push(why);
        } else {
            cmp.unmeasured.push(why);
        }
        return;
    };
    let (verdict, within_band) = compare::verdict(d.ratio_ci95, d.ratio, cmp.threshold);
    cmp.rows.push(compare::BenchComparison {
        id: bench.to_string(),
        base_median_ns: d.base,
        cand_median_ns: d.cand,
        slowdown: d.ratio,
        slowdown_ci95: d.ratio_ci95,
        addition_ns: d.cand - d.base,
        addition_ci95: [
            d.base * (d.ratio_ci95[0] - 1.0),
            d.base * (d.ratio_ci95[1] - 1.0),
        ],
        p_value: d.p,
        verdict,
        within_band,
        disturbed: false,
        run_to_run: None,
        apart_unknown: false,
        rounds: None,
        bytes_per_op: None,
        attribution: None,
    });
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
    let exported = output::export(
        cmp,
        &super::exporters::<Comparison>(outputs, args.fail_above),
    );
    let text = report::comparison::render(cmp, color() && !output::any_stdout(&outputs.paths()));
    if output::any_stdout(&outputs.paths()) {
        crate::say_part!("{text}");
    } else {
        print_stdout(&text)?;
    }
    if let Err(e) = exported {
        crate::say!("oscost: {e}");
        return Ok(1);
    }
    if let Some(pct) = args.fail_above {
        let unknown = compare::unknown_apart(cmp);
        if !unknown.is_empty() {
            // A gate that cannot tell must not pass silently.
            crate::say!(
                "oscost: cannot tell whether {} benchmark(s) regressed by more than {pct}%: the runs were measured apart and no run-to-run spread is known (give --together if their repetitions were interleaved, or store 3 runs of each environment)",
                unknown.len()
            );
            return Ok(1);
        }
        let bad = compare::regressions(cmp, pct);
        if !bad.is_empty() {
            let ids: Vec<&str> = bad.iter().map(|r| r.id.as_str()).collect();
            crate::say!(
                "oscost: {} benchmark(s) slower by more than {pct}%: {}",
                bad.len(),
                ids.join(", ")
            );
            return Ok(1);
        }
    }
    Ok(0)
}
