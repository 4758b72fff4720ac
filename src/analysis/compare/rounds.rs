//! `ab`'s stop rule: each benchmark's rounds (an A and a B repetition measured next to each
//! other) judged by the paired, group-sequential interval of B's median over A's (`paired`),
//! and an `ab` comparison's rows judged by their rounds (`judge_rounds`). The scheduler asks
//! `paired` after each round whether a benchmark has decided.

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
        .filter(|(b, c)| **b > 0.0 && **c > 0.0 && b.is_finite() && c.is_finite())
        .map(|(b, c)| (c / b).ln())
        .collect();
    let n = logs.len();
    let (mean, [lo, hi]) = crate::base::stats::sequential::interval(&logs)?;
    let p = crate::base::stats::sequential::p_value(&logs);
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
            rounds: n,
            decision,
        },
    })
}

/// Judge an `ab` comparison's rows by their rounds (`paired`): each row whose two results have
/// repetitions in pairs gets the paired slowdown, its sequential CI, the addition on the base
/// median, and `rounds`. A row whose sides lost a repetition (a failed worker) keeps the
/// bootstrap of the two runs: its pairs would no longer be rounds.
pub fn judge_rounds(cmp: &mut Comparison, base: &Run, cand: &Run) {
    let medians = |run: &Run, id: &str| -> Option<Vec<f64>> {
        let r = run.results.iter().find(|r| r.id == id)?;
        Some(r.repetitions.iter().map(|x| x.median_ns).collect())
    };
    for r in &mut cmp.rows {
        let (Some(b), Some(c)) = (medians(base, &r.id), medians(cand, &r.id)) else {
            continue;
        };
        if b.len() != c.len() {
            continue;
        }
        let Some(p) = paired(&b, &c, cmp.threshold) else {
            continue;
        };
        r.slowdown = p.slowdown;
        r.slowdown_ci95 = p.ci;
        r.addition_ns = r.base_median_ns * (p.slowdown - 1.0);
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
