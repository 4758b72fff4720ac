//! `ab`'s stop rule: each benchmark's rounds (an A and a B repetition measured next to each
//! other) judged by the paired, group-sequential interval of B's median over A's (`paired`),
//! and an `ab` comparison's rows judged by their rounds (`judge_rounds`). The scheduler asks
//! `paired` after each round whether a benchmark has decided.
//!
//! Where the sides alternated in blocks of rounds (a program runs during a side and is started
//! and stopped between them), a round's two repetitions are seconds apart and a block's rounds
//! share the host's level of those seconds: pairing them round by round would count one
//! drift many times over and give a CI far narrower than the comparison is sure (an A/A with
//! `sleep infinity` during B was called x0.985, 0.978-0.993, on two blocks). There the pairs
//! are blocks (`paired_blocks`): each block's B median over its A median, and the sequential
//! interval over blocks.

use serde::{Deserialize, Serialize};

use super::{Comparison, Verdict, summarize, verdict};
use crate::base::model::Run;

/// How `ab`'s stop rule ended for one benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The slowdown's sequential CI excludes 1 and the slowdown lies beyond the noise band.
    Called,
    /// The CI lies inside the noise band.
    NoChange,
    /// The budget ended first: the CI reaches into the band and past it.
    Undecided,
}

/// The rounds behind an `ab` row and how its stop rule ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    /// Rounds (pairs of an A and a B repetition) the row was judged on.
    pub rounds: usize,
    /// What the stop rule decided at the last look.
    pub decision: Decision,
    /// Where the sides alternated in blocks: the blocks, which were the pairs judged (`rounds`
    /// then counts the repetitions of a side over all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<usize>,
}

/// One benchmark's rounds judged as `ab`'s stop rule judges them: per round, the log of B's
/// repetition median over A's (measured next to each other, so the machine's drift between
/// rounds cancels), and the group-sequential interval of their mean (`stats::sequential`),
/// valid at every look of the schedule together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// The rounds' ratios' trimmed geometric mean (`stats::sequential::TRIM` of each end).
    pub slowdown: f64,
    /// Its sequential 95% CI.
    pub ci: [f64; 2],
    /// Two-sided p of the trimmed paired t test at this look (not adjusted for the looks).
    pub p: f64,
    /// The verdict for that CI and slowdown (`verdict`).
    pub verdict: Verdict,
    /// For "no change": the CI lies inside the band.
    pub within_band: bool,
    /// The rounds and what they decided.
    pub rounds: Rounds,
}

/// Judge the rounds whose repetition medians are `base` and `cand` (index k of each measured
/// in round k) against a noise band of ±`threshold`. `None` with fewer than 2 usable rounds.
pub fn paired(base: &[f64], cand: &[f64], threshold: f64) -> Option<Paired> {
    let logs: Vec<f64> = base
        .iter()
        .zip(cand)
        .filter_map(|(b, c)| log_ratio(*b, *c))
        .collect();
    judge_pairs(&logs, threshold, logs.len(), None)
}

/// Judge repetitions measured in blocks, each `(block, repetition median)`: per block that
/// both sides measured, the log of B's median of its repetition medians over A's, and the
/// sequential interval over those blocks. `None` with fewer than 3 such blocks.
pub fn paired_blocks(
    base: &[(usize, f64)],
    cand: &[(usize, f64)],
    threshold: f64,
) -> Option<Paired> {
    let by_block = |reps: &[(usize, f64)]| {
        let mut m: std::collections::BTreeMap<usize, Vec<f64>> = Default::default();
        for &(b, v) in reps {
            if v > 0.0 && v.is_finite() {
                m.entry(b).or_default().push(v);
            }
        }
        m
    };
    let (a, b) = (by_block(base), by_block(cand));
    let logs: Vec<f64> = a
        .iter()
        .filter_map(|(k, va)| {
            let vb = b.get(k)?;
            log_ratio(
                crate::base::stats::median(va),
                crate::base::stats::median(vb),
            )
        })
        .collect();
    let rounds = base.len().min(cand.len());
    judge_pairs(&logs, threshold, rounds, Some(logs.len()))
}

/// Repetitions given as `(block, median)`, as `paired_blocks` takes them: `None` where one
/// was not measured in a block (the sides alternated repetition by repetition).
pub fn in_blocks(reps: &[(Option<usize>, f64)]) -> Option<Vec<(usize, f64)>> {
    reps.iter().map(|&(k, m)| Some((k?, m))).collect()
}

/// The log of `cand` over `base`, where both are usable times.
fn log_ratio(base: f64, cand: f64) -> Option<f64> {
    (base > 0.0 && cand > 0.0 && base.is_finite() && cand.is_finite()).then(|| (cand / base).ln())
}

/// The pairs' log ratios judged: their trimmed mean's sequential interval, the verdict, and
/// the decision. `rounds` and `blocks` are what the pairs were made of, for the record.
fn judge_pairs(
    logs: &[f64],
    threshold: f64,
    rounds: usize,
    blocks: Option<usize>,
) -> Option<Paired> {
    let (mean, [lo, hi]) = crate::base::stats::sequential::interval(logs)?;
    let p = crate::base::stats::sequential::p_value(logs);
    let (slowdown, ci) = (mean.exp(), [lo.exp(), hi.exp()]);
    let (v, within_band) = verdict(ci, slowdown, threshold);
    let decision = match v {
        Verdict::Slower | Verdict::Faster => Decision::Called,
        Verdict::NoChange if within_band => Decision::NoChange,
        Verdict::NoChange => Decision::Undecided,
    };
    Some(Paired {
        slowdown,
        ci,
        p,
        verdict: v,
        within_band,
        rounds: Rounds {
            rounds,
            decision,
            blocks,
        },
    })
}

/// Judge an `ab` comparison's rows by their rounds (`paired`): each row whose two results have
/// repetitions in pairs gets the paired slowdown, its sequential CI, the addition on the base
/// median, and `rounds`. A row whose sides lost a repetition (a failed worker) keeps the
/// bootstrap of the two runs: its pairs would no longer be rounds. Repetitions measured in
/// blocks are judged by their blocks (`paired_blocks`), which a lost repetition does not
/// unpair.
pub fn judge_rounds(cmp: &mut Comparison, base: &Run, cand: &Run) {
    let repetitions = |run: &Run, id: &str| -> Option<Vec<(Option<usize>, f64)>> {
        let r = run.results.iter().find(|r| r.id == id)?;
        Some(
            r.repetitions
                .iter()
                .map(|x| (x.block, x.median_ns))
                .collect(),
        )
    };
    for r in &mut cmp.rows {
        let (Some(b), Some(c)) = (repetitions(base, &r.id), repetitions(cand, &r.id)) else {
            continue;
        };
        let p = match (in_blocks(&b), in_blocks(&c)) {
            // Measured in blocks: the blocks are the pairs, whatever a side lost in one.
            (Some(bb), Some(cb)) if !bb.is_empty() => paired_blocks(&bb, &cb, cmp.threshold),
            _ if b.len() != c.len() => None,
            _ => {
                let medians =
                    |v: &[(Option<usize>, f64)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
                paired(&medians(&b), &medians(&c), cmp.threshold)
            }
        };
        let Some(p) = p else {
            continue;
        };
        r.slowdown = p.slowdown;
        r.slowdown_ci95 = p.ci;
        r.addition_ns = r.base_median_ns * (p.slowdown - 1.0);
        if let Some(a) = r.attribution.as_mut() {
            a.measure_against(r.addition_ns);
        }
        r.addition_ci95 = [
            r.base_median_ns * (p.ci[0] - 1.0),
            r.base_median_ns * (p.ci[1] - 1.0),
        ];
        r.p_value = p.p;
        r.verdict = p.verdict;
        r.within_band = p.within_band;
        r.rounds = Some(p.rounds);
    }
    cmp.summary = summarize(&cmp.rows);
}
