//! Two runs -> what changed (docs/ARCHITECTURE.md §2). Per benchmark in both: the base and candidate medians,
//! the slowdown (ratio of medians) and the addition (difference) each with a 95% CI from a
//! hierarchical bootstrap over the repetitions, a p-value from that same resampling, and a
//! verdict. A change is called when the CI of the ratio excludes 1 and the ratio lies beyond
//! the noise threshold (`verdict` says why not the whole CI, as criterion.rs asks); otherwise
//! the verdict is "no change", with `within_band` false (shown as `*`) when the CI is wider
//! than the band, so a smaller change cannot be ruled out.
//!
//! Pure: no I/O. The block bootstrap (`stats::bootstrap`) uses a seeded generator, so a
//! comparison is reproducible. Runs measured apart get the run-to-run spread (`apart`); groups
//! of runs are compared in `commands/compare.rs` through `analysis::run_to_run`.

pub mod rounds;
use rounds::Rounds;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::model::{BenchResult, Run, Status};
use crate::base::stats::bootstrap::{Repetitions, blocks, ratio_and_difference};

#[derive(Debug, Clone, Copy, PartialEq)]
/// How a comparison judges: its noise band and its bootstrap.
pub struct Options {
    /// Relative half-width of the band called "no change" (0.02 = ±2%).
    pub threshold: f64,
    /// Bootstrap resamples behind each interval.
    pub resamples: usize,
    /// Samples per side the bootstrap draws from (evenly thinned beyond this).
    pub max_samples: usize,
    /// The bootstrap's seed: the same runs always give the same intervals.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: 0.02,
            resamples: 1000,
            max_samples: 4000,
            seed: 0x0005_c057,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// What a comparison says of one benchmark.
pub enum Verdict {
    /// The candidate is slower: its whole CI lies above the noise band.
    Slower,
    /// The candidate is faster: its whole CI lies below the noise band.
    Faster,
    /// Neither: the CI reaches into the noise band.
    NoChange,
}

impl Verdict {
    /// The verdict as printed: "slower", "faster", "no change".
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::NoChange => "no change",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// One benchmark in two runs: the two medians, the slowdown and the addition with their CIs.
pub struct BenchComparison {
    /// The result's id.
    pub id: String,
    /// The base run's median, ns.
    pub base_median_ns: f64,
    /// The candidate run's median, ns.
    pub cand_median_ns: f64,
    /// cand / base; for runs measured apart and projected to one level of a witness, with the
    /// host's drift between them taken out (`run_to_run.drift_factor`: the measured ratio over
    /// this).
    pub slowdown: f64,
    /// The slowdown's 95% CI.
    pub slowdown_ci95: [f64; 2],
    /// cand - base, ns (base x (slowdown - 1) where projected).
    pub addition_ns: f64,
    /// The addition's 95% CI, ns.
    pub addition_ci95: [f64; 2],
    /// Two-sided p-value of "no difference" from the bootstrap.
    pub p_value: f64,
    /// Slower, faster or no change.
    pub verdict: Verdict,
    /// For "no change": the CI lies inside the noise band (false: it is wider than the band).
    pub within_band: bool,
    /// Either side was flagged disturbed.
    pub disturbed: bool,
    /// Runs measured apart: the run-to-run spread added to the interval (see `apart`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_to_run: Option<crate::analysis::run_to_run::RunToRun>,
    /// Runs measured apart with no run-to-run spread known for either environment: nothing is
    /// called (the verdict is "no change", the CI the runs' own, which cannot see the host's
    /// drift between them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub apart_unknown: bool,
    /// `ab`: the row is judged from its rounds (A and B repetitions measured side by side) by
    /// the stop rule that ended them (`paired`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<Rounds>,
    /// A bandwidth's row: the bytes one operation moves (its medians are times per that
    /// many bytes, so "slower" is a lower rate; views show the rates from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_op: Option<f64>,
    /// Where both sides were profiled (`--profile`): the addition split by function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<super::profile::Attribution>,
}

impl BenchComparison {
    /// A bandwidth row's rates, base and candidate, bytes per second.
    pub fn rates(&self) -> Option<(f64, f64)> {
        let b = self.bytes_per_op?;
        let rate = |ns: f64| (ns > 0.0).then(|| b / ns * 1e9);
        Some((rate(self.base_median_ns)?, rate(self.cand_median_ns)?))
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
/// How many benchmarks went which way, and what they share.
pub struct Summary {
    /// Geometric mean of the slowdowns.
    pub geomean_slowdown: Option<f64>,
    /// Benchmarks called slower.
    pub slower: usize,
    /// Benchmarks called faster.
    pub faster: usize,
    /// Benchmarks not called either way.
    pub no_change: usize,
    /// Of `no_change`, those whose CI is wider than the noise band.
    pub inconclusive: usize,
    /// Not judged: runs measured apart with no run-to-run spread known (not in `no_change`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub apart_unknown: usize,
    /// The changes were about one factor over a wide range of costs (a machine's speed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_factor: Option<OneFactor>,
}

/// The changed benchmarks, all one way and with base costs at least 10x apart, moved by about
/// one factor (their log slowdowns within 2x of each other), and so by very different amounts.
/// That is what a machine running at another speed does (a host, a clock, virtualization); a
/// cost added to each operation (a hook, a mitigation) adds about one amount instead, which
/// over costs 10x apart is factors 10x apart. Two runs measured apart on a host that changed
/// speed between them show it too, and `ab` is the way to tell such drift from a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneFactor {
    /// How many benchmarks changed.
    pub changed: usize,
    /// Which way they all changed.
    pub verdict: Verdict,
    /// Smallest and largest base median, slowdown and addition among them.
    pub base_ns: [f64; 2],
    /// Smallest and largest slowdown among them.
    pub slowdown: [f64; 2],
    /// Smallest and largest addition among them, ns.
    pub addition_ns: [f64; 2],
}

/// At least this many changed benchmarks, all one way...
const ONE_FACTOR_MIN_CHANGED: usize = 3;
/// ...over base costs at least this far apart...
const ONE_FACTOR_MIN_BASE_SPAN: f64 = 10.0;
/// ...whose log slowdowns are within this of each other.
const ONE_FACTOR_AGREEMENT: f64 = 2.0;

fn one_factor(rows: &[BenchComparison]) -> Option<OneFactor> {
    let changed: Vec<&BenchComparison> = rows
        .iter()
        .filter(|r| r.verdict != Verdict::NoChange)
        .collect();
    let verdict = changed.first()?.verdict;
    if changed.len() < ONE_FACTOR_MIN_CHANGED || changed.iter().any(|r| r.verdict != verdict) {
        return None;
    }
    let range = |f: &dyn Fn(&BenchComparison) -> f64| {
        let (lo, hi) = crate::base::stats::extent(changed.iter().map(|r| f(r)));
        [lo, hi]
    };
    let base_ns = range(&|r| r.base_median_ns);
    let excess = range(&|r| r.slowdown.ln().abs());
    let spread = |[lo, hi]: [f64; 2]| hi / lo;
    if !(base_ns[0] > 0.0 && excess[0] > 0.0)
        || spread(base_ns) < ONE_FACTOR_MIN_BASE_SPAN
        || spread(excess) > ONE_FACTOR_AGREEMENT
    {
        return None;
    }
    Some(OneFactor {
        changed: changed.len(),
        verdict,
        base_ns,
        slowdown: range(&|r| r.slowdown),
        addition_ns: range(&|r| r.addition_ns),
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// Two runs (or two sides of an `ab`) compared benchmark by benchmark.
pub struct Comparison {
    /// The base side.
    pub base: ComparedSide,
    /// The candidate side.
    pub cand: ComparedSide,
    /// The noise band's relative half-width (0.02 = ±2%).
    pub threshold: f64,
    /// One line per benchmark both measured, in the base's order.
    pub rows: Vec<BenchComparison>,
    /// Measured in one run only (or not measured in the other), with why.
    pub only_base: Vec<String>,
    /// Measured in the candidate only (or not measured in the base), with why.
    pub only_cand: Vec<String>,
    /// Measured in neither run.
    pub unmeasured: Vec<String>,
    /// The counts and what the changes share.
    pub summary: Summary,
    /// The two sides' repetitions alternated in one session (`ab`), so the machine's drift
    /// fell on both alike; false for two runs measured apart.
    #[serde(default)]
    pub alternated: bool,
    /// What differs between the machines and the confinement of the two runs ("seccomp
    /// filters 0 -> 1", `analysis::changes::machine_differences`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differs: Vec<String>,
}

/// What identifies a side in the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedSide {
    /// "base", "A", or the run's reference as given.
    pub name: String,
    /// When its run started, RFC 3339.
    pub started_at: String,
    /// Its run's label.
    pub label: Option<String>,
    /// The wrapper it ran under.
    pub wrapper: Option<String>,
    /// The kernel settings it was measured under (`--set`, `--a-set`, `--b-set`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<String>,
    /// The program that ran during it (`--during`), attached to the whole system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<String>,
    /// The kernel release it ran on.
    pub kernel: Option<String>,
    /// The host it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The digest of its kernel's build configuration, where it was readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_config: Option<String>,
    /// The run's own notes (the machine changed speed during it; an old schema): a reader
    /// weighing a difference needs them beside it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The run's speed witness, ns per loop (`analysis::witness`); none for a group or a run
    /// made before witnesses were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_ns: Option<f64>,
    /// How many workers timed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_workers: Option<usize>,
    /// The run's exit witness, ns per CPUID (`analysis::witness`); none for a group, a run
    /// made before it was kept, or a CPU without CPUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_witness_ns: Option<f64>,
}

impl ComparedSide {
    /// The side of `run`, named `name`.
    pub fn of(run: &Run, name: &str) -> ComparedSide {
        let witness = crate::analysis::witness::run_witness(run);
        ComparedSide {
            name: name.to_string(),
            started_at: run.started_at.clone(),
            label: run.label.clone(),
            wrapper: run.wrapper.clone(),
            settings: run.settings.clone(),
            during: run.during.clone(),
            kernel: run.env.kernel_release.clone(),
            host: run.env.hostname.clone(),
            kernel_config: run.env.kernel_config.as_ref().map(|k| k.digest.clone()),
            // What confined its workers first: it enters every number of the side.
            notes: crate::analysis::confinement_notes(run)
                .into_iter()
                .chain(run.notes.iter().map(|n| n.text.clone()))
                .collect(),
            witness_ns: witness.map(|w| w.ns),
            witness_workers: witness.map(|w| w.workers),
            exit_witness_ns: crate::analysis::witness::run_exit_witness(run),
        }
    }
}

/// The repetitions of one side (each a fresh process), cut into time blocks.
pub fn repetitions_of(r: &BenchResult, max: usize) -> Repetitions {
    let n = r.samples_ns.len();
    // Version 2: the repetitions; version 1: the rounds of an `ab`, or one stream.
    let mut starts: Vec<usize> = if r.repetitions.is_empty() {
        r.params
            .get("round_starts")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64())
                    .map(|x| x as usize)
                    .collect()
            })
            .unwrap_or_default()
    } else {
        r.repetitions.iter().map(|x| x.start).collect()
    };
    starts.retain(|&s| s < n);
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    starts.push(n);
    let k = (starts.len() - 1).max(1);
    starts
        .windows(2)
        .map(|w| blocks(&r.samples_ns[w[0]..w[1]], r.batch.size, max / k))
        .filter(|b| !b.is_empty())
        .collect()
}

/// The verdict for a ratio (`point`, with its CI) against a band of ±threshold: a change is
/// called when the CI excludes no change (1) and the ratio lies beyond the band, whether or not
/// the whole CI does. Otherwise there is no change, and `within` says whether the CI fits
/// inside the band (a firm "no change") or is wider than it (no change detected: one smaller
/// than the CI cannot be ruled out).
///
/// Why not "the whole CI beyond the band": fork under 32 seccomp layers came out x1.046 with a
/// CI of 1.018-1.075 (p = 0.002) and was called "no change": a change shown beyond doubt and
/// larger than the band, hidden because its lower edge sat inside the band. An A/A run of 29
/// benchmarks has one CI in ~20 that misses 1 by chance; with the ratio also beyond ±2% none
/// did (2026-11-24: the one that missed, x1.007, stays "no change").
pub fn verdict(ci: [f64; 2], point: f64, threshold: f64) -> (Verdict, bool) {
    let (lo, hi) = (ci[0], ci[1]);
    if !(lo.is_finite() && hi.is_finite() && point.is_finite()) {
        return (Verdict::NoChange, false);
    }
    if lo > 1.0 + threshold || (lo > 1.0 && point > 1.0 + threshold) {
        (Verdict::Slower, false)
    } else if hi < 1.0 - threshold || (hi < 1.0 && point < 1.0 - threshold) {
        (Verdict::Faster, false)
    } else {
        (
            Verdict::NoChange,
            lo >= 1.0 - threshold && hi <= 1.0 + threshold,
        )
    }
}

/// The results the `side` run does not have: a line each where there are a few; else one
/// line counting them by family ("75 results are not in the candidate run: call/ 5,
/// syscall/ 21, ...").
fn absent_words(ids: &[&str], side: &str) -> Vec<String> {
    const FEW: usize = 3;
    if ids.len() <= FEW {
        return ids
            .iter()
            .map(|id| format!("{id}: {}", why_missing(None, side)))
            .collect();
    }
    let mut families: Vec<(&str, usize)> = Vec::new();
    for id in ids {
        let f = crate::base::model::family_of(id);
        match families.iter_mut().find(|(x, _)| *x == f) {
            Some((_, n)) => *n += 1,
            None => families.push((f, 1)),
        }
    }
    let counted: Vec<String> = families.iter().map(|(f, n)| format!("{f}/ {n}")).collect();
    vec![format!(
        "{} results are not in the {side} run: {}",
        ids.len(),
        counted.join(", ")
    )]
}

fn why_missing(r: Option<&BenchResult>, side: &str) -> String {
    match r {
        None => format!("not in the {side} run"),
        Some(r) => format!(
            "{} in the {side} run{}",
            r.status.word(),
            r.status
                .reason()
                .map(|x| format!(": {x}"))
                .unwrap_or_default()
        ),
    }
}

/// Both sides measured with samples: one row of the comparison.
fn row(id: &str, b: &BenchResult, c: &BenchResult, opts: &Options) -> Option<BenchComparison> {
    let (bs, cs) = (b.stats.as_ref()?, c.stats.as_ref()?);
    let slowdown = if bs.median != 0.0 {
        cs.median / bs.median
    } else {
        f64::NAN
    };
    let d = ratio_and_difference(
        &repetitions_of(b, opts.max_samples),
        &repetitions_of(c, opts.max_samples),
        (slowdown, cs.median - bs.median),
        opts.resamples,
        opts.seed,
    );
    let (ratio_ci, diff_ci) = (d.ratio_ci, d.diff_ci);
    let (verdict, within_band) = verdict(ratio_ci, slowdown, opts.threshold);
    Some(BenchComparison {
        id: id.to_string(),
        base_median_ns: bs.median,
        cand_median_ns: cs.median,
        slowdown,
        slowdown_ci95: ratio_ci,
        addition_ns: cs.median - bs.median,
        addition_ci95: diff_ci,
        p_value: d.p,
        verdict,
        within_band,
        disturbed: b.disturbed.is_disturbed() || c.disturbed.is_disturbed(),
        run_to_run: None,
        apart_unknown: false,
        rounds: None,
        bytes_per_op: b.bytes_per_op().or(c.bytes_per_op()),
        attribution: super::profile::attribute(b, c),
    })
}

/// The rows of benchmarks measured on both sides, in their order, computed on every CPU: the
/// bootstrap is most of a comparison's time, each row is seeded alike whichever thread takes
/// it, so the answer does not depend on the number of threads.
fn rows_in_parallel(
    both: &[(&str, &BenchResult, &BenchResult)],
    opts: &Options,
) -> Vec<BenchComparison> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = both.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = both
            .chunks(per)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .filter_map(|&(id, b, c)| row(id, b, c, opts))
                        .collect::<Vec<BenchComparison>>()
                })
            })
            .collect();
        // A row cannot panic short of a bug; if one did, say so rather than lose the rows.
        parts
            .into_iter()
            .flat_map(|h| h.join().expect("a comparison thread panicked"))
            .collect()
    })
}

/// Counts of verdicts and the geometric mean slowdown.
fn summarize(rows: &[BenchComparison]) -> Summary {
    let logs: Vec<f64> = rows
        .iter()
        .filter(|r| r.slowdown.is_finite() && r.slowdown > 0.0)
        .map(|r| r.slowdown.ln())
        .collect();
    let count = |v: Verdict| {
        rows.iter()
            .filter(|r| r.verdict == v && !r.apart_unknown)
            .count()
    };
    Summary {
        geomean_slowdown: (!logs.is_empty())
            .then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp()),
        slower: count(Verdict::Slower),
        faster: count(Verdict::Faster),
        no_change: count(Verdict::NoChange),
        inconclusive: rows
            .iter()
            .filter(|r| r.verdict == Verdict::NoChange && !r.within_band && !r.apart_unknown)
            .count(),
        apart_unknown: rows.iter().filter(|r| r.apart_unknown).count(),
        one_factor: one_factor(rows),
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A result with numbers to compare.
fn measured(r: Option<&BenchResult>) -> Option<&BenchResult> {
    r.filter(|r| r.status == Status::Ok && r.stats.is_some() && !r.samples_ns.is_empty())
}

/// Compare `cand` against `base`, benchmark by benchmark (base order first, then what only the
/// candidate has); what one side lacks is listed with the reason.
pub fn compare<'a>(
    base: &'a Run,
    cand: &'a Run,
    base_name: &str,
    cand_name: &str,
    opts: &Options,
) -> Comparison {
    let by_id = |run: &'a Run| -> BTreeMap<&'a str, &'a BenchResult> {
        run.results.iter().map(|r| (r.id.as_str(), r)).collect()
    };
    let (bm, cm) = (by_id(base), by_id(cand));
    let mut cmp = Comparison {
        base: ComparedSide::of(base, base_name),
        cand: ComparedSide::of(cand, cand_name),
        threshold: opts.threshold,
        rows: vec![],
        only_base: vec![],
        only_cand: vec![],
        unmeasured: vec![],
        summary: Summary::default(),
        alternated: false,
        differs: crate::analysis::changes::machine_differences(base, cand),
    };
    let mut ids: Vec<&String> = base.results.iter().map(|r| &r.id).collect();
    ids.extend(
        cand.results
            .iter()
            .map(|r| &r.id)
            .filter(|id| !bm.contains_key(id.as_str())),
    );
    let mut both = Vec::new();
    // Results one run has and the other never measured at all (a subset run): said once, by
    // family, where there are more than a few.
    let (mut absent_cand, mut absent_base): (Vec<&str>, Vec<&str>) = (vec![], vec![]);
    for id in ids {
        let (b, c) = (bm.get(id.as_str()).copied(), cm.get(id.as_str()).copied());
        match (measured(b), measured(c)) {
            (Some(b), Some(c)) => both.push((id.as_str(), b, c)),
            (Some(_), None) if c.is_none() => absent_cand.push(id),
            (None, Some(_)) if b.is_none() => absent_base.push(id),
            (Some(_), None) => cmp
                .only_base
                .push(format!("{id}: {}", why_missing(c, "candidate"))),
            (None, Some(_)) => cmp
                .only_cand
                .push(format!("{id}: {}", why_missing(b, "base"))),
            (None, None) => cmp.unmeasured.push(format!(
                "{id}: {}; {}",
                why_missing(b, "base"),
                why_missing(c, "candidate")
            )),
        }
    }
    cmp.only_base
        .splice(0..0, absent_words(&absent_cand, "candidate"));
    cmp.only_cand
        .splice(0..0, absent_words(&absent_base, "base"));
    cmp.rows = rows_in_parallel(&both, opts);
    cmp.summary = summarize(&cmp.rows);
    cmp
}

use crate::analysis::run_to_run::ResultWitnesses;

/// Treat the two runs as measured apart (two kernels, two nights): each row's interval is
/// widened by the run-to-run spread `spread_of` gives for its benchmark (learned from the
/// store) and judged again; a row with none known calls nothing (`apart_unknown`).
pub fn apart(
    cmp: &mut Comparison,
    spread_of: &dyn Fn(&str) -> Option<crate::analysis::run_to_run::Spread>,
    witnesses_of: &dyn Fn(&str) -> Option<(ResultWitnesses, ResultWitnesses)>,
) {
    use crate::analysis::run_to_run::{RunToRun, judge_apart};
    for r in &mut cmp.rows {
        match spread_of(&r.id) {
            Some(s) => {
                // The host's drift the two runs' witnesses saw is taken out first where the
                // store learned how this benchmark follows one of them.
                let j = judge_apart(r.slowdown, r.slowdown_ci95, s, witnesses_of(&r.id));
                if j.drift_factor.is_some() {
                    r.slowdown = j.point;
                    r.addition_ns = r.base_median_ns * (j.point - 1.0);
                }
                let ci = j.ci95;
                r.slowdown_ci95 = ci;
                r.addition_ci95 = [
                    r.base_median_ns * (ci[0] - 1.0),
                    r.base_median_ns * (ci[1] - 1.0),
                ];
                (r.verdict, r.within_band) = verdict(ci, r.slowdown, cmp.threshold);
                r.run_to_run = Some(RunToRun::of(&j));
            }
            None => {
                r.verdict = Verdict::NoChange;
                r.within_band = false;
                r.apart_unknown = true;
            }
        }
    }
    cmp.summary = summarize(&cmp.rows);
}

/// The summary again after the rows were made elsewhere (groups of runs).
pub fn resummarize(cmp: &mut Comparison) {
    cmp.summary = summarize(&cmp.rows);
}

/// The rows that could not be judged: measured apart, run-to-run spread unknown.
pub fn unknown_apart(cmp: &Comparison) -> Vec<&BenchComparison> {
    cmp.rows.iter().filter(|r| r.apart_unknown).collect()
}

/// Benchmarks slower than `pct` percent beyond doubt (the CI's lower end), for --fail-above.
pub fn regressions(cmp: &Comparison, pct: f64) -> Vec<&BenchComparison> {
    cmp.rows
        .iter()
        .filter(|r| r.slowdown_ci95[0] > 1.0 + pct / 100.0)
        .collect()
}

#[cfg(test)]
mod tests;
