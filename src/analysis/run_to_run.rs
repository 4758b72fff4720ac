//! How far runs of one benchmark in one environment scatter beyond what their own CIs say:
//! the run-to-run term that a comparison of runs measured apart (two kernels, two nights)
//! must add to the runs' own intervals, or it reads the host's drift as change.
//!
//! A random-effects model on the log scale: run i's log-median is `y_i = mu + b_i + e_i`,
//! `e_i` its own estimation error (standard error `s_i`, read back from its 95% CI) and `b_i`
//! the run's level, spread `tau`. `tau^2` is the Paule-Mandel estimate (the between-run
//! variance that leaves the runs' scatter no larger than their own errors and it explain),
//! and a comparison widens by Student's t quantile for that many runs less one, not 1.96:
//! six runs say little about a spread. It is not a robust scale. A benchmark whose level sits
//! in one of two modes run by run (gettid here: five runs at 155.5 ns, one at 163.2) has that
//! scatter; a robust scale called it 0, and every comparison with the odd run a change. Nor
//! is it the sample variance less the typical own variance: there the four runs whose
//! repetitions straddled both modes had CIs wide enough to cover the scatter, and the two
//! precise runs that disagreed were judged on their own CIs alone. A run at another
//! machine speed, where every benchmark moved by one factor, is taken out by that factor
//! before the spread is learned where it is named (`matrix::odd_runs`). Fewer than
//! `MIN_RUNS` runs give no estimate: a comparison then says the spread is unknown rather
//! than guess.

mod projection;
pub use projection::{
    DriftWitness, Judged, MIN_PROJECTED, Projection, ResultWitnesses, judge_apart, learn,
};

/// Runs of one environment needed before a run-to-run spread is stated.
pub const MIN_RUNS: usize = 3;

/// The between-run spread of one benchmark in one environment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Standard deviation of a run's level on the log scale (0.02: runs scatter about 2%);
    /// with a `projection`, of the level projected to one level of its witness (what the
    /// host's drift between runs leaves).
    pub tau: f64,
    /// How many runs it was estimated from.
    pub runs: usize,
    /// How the level follows a witness in these runs, where it does beyond doubt
    /// (`projection::learn`); `None`: the spread is the levels' own.
    pub projection: Option<Projection>,
}

impl Spread {
    /// A spread of the levels as measured (no projection).
    pub fn plain(tau: f64, runs: usize) -> Spread {
        Spread {
            tau,
            runs,
            projection: None,
        }
    }

    /// The 97.5% quantile a 95% interval takes `tau` by: Student's t for `runs - 1` degrees
    /// of freedom (2.57 for six runs, 1.96 in the limit), one fewer where a slope was fitted.
    pub fn quantile(&self) -> f64 {
        let fitted = usize::from(self.projection.is_some());
        t975(self.runs.saturating_sub(1 + fitted))
    }

    /// The spread as a percentage of the level (`run to run ±x%`): the half-width of the
    /// 95% interval one run's level falls in.
    pub fn percent(&self) -> f64 {
        ((self.quantile() * self.tau).exp() - 1.0) * 100.0
    }
}

/// Student's t 97.5% quantile for `df` degrees of freedom (at least 1).
pub fn t975(df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    StudentsT::new(0.0, 1.0, df.max(1) as f64).map_or(1.96, |t| t.inverse_cdf(0.975))
}

/// The run-to-run term a comparison used, as it says it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunToRun {
    /// Half-width of the 95% interval of one run's level, percent.
    pub percent: f64,
    /// How many runs it was learned from.
    pub runs: usize,
    /// The quantile `percent` took the spread by (`Spread::quantile`); 1.96 in what older
    /// versions wrote.
    #[serde(default = "normal_quantile")]
    pub quantile: f64,
    /// Where the two runs were projected to one level of a witness
    /// (`projection::judge_apart`): the factor the host's drift between them put on the
    /// candidate's level, taken out of the ratio (1.12: the host made every cost of the
    /// candidate's minutes 12% dearer). Named `exit_factor` in what older versions wrote,
    /// which projected on the exit witness only.
    #[serde(
        default,
        alias = "exit_factor",
        skip_serializing_if = "Option::is_none"
    )]
    pub drift_factor: Option<f64>,
    /// The slope learned from the store's runs of the environment, where one was: the level's
    /// log change for each of the witness's (what `drift_factor` was taken by).
    #[serde(default, alias = "exit_slope", skip_serializing_if = "Option::is_none")]
    pub drift_slope: Option<f64>,
    /// The witness the slope follows; absent where there is none, and in what older versions
    /// wrote (whose slopes were all on the exit witness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_witness: Option<DriftWitness>,
}

fn normal_quantile() -> f64 {
    1.96
}

impl From<Spread> for RunToRun {
    fn from(s: Spread) -> RunToRun {
        RunToRun {
            percent: s.percent(),
            runs: s.runs,
            quantile: s.quantile(),
            drift_factor: None,
            drift_slope: s.projection.map(|p| p.slope),
            drift_witness: s.projection.map(|p| p.on),
        }
    }
}

impl RunToRun {
    /// The term a judged ratio used, with its projection where it had one.
    pub fn of(j: &Judged) -> RunToRun {
        RunToRun {
            drift_factor: j.drift_factor,
            ..RunToRun::from(j.spread)
        }
    }
}

/// A ratio's interval (`point`, `[lo, hi]`, from two runs' own variation) widened by the
/// run-to-run term of two runs measured apart: each side in quadrature, `quantile x tau` per
/// run.
pub fn widen(point: f64, ci: [f64; 2], spread: Spread) -> [f64; 2] {
    widen_by(point, ci, 2.0 * (spread.quantile() * spread.tau).powi(2))
}

/// `widen` by a drift term given as the square of its half-width on the log scale.
fn widen_by(point: f64, ci: [f64; 2], drift: f64) -> [f64; 2] {
    let [lo, hi] = ci;
    if !(point > 0.0 && lo > 0.0 && hi > 0.0) {
        return ci;
    }
    let down = ((point / lo).ln().max(0.0).powi(2) + drift).sqrt();
    let up = ((hi / point).ln().max(0.0).powi(2) + drift).sqrt();
    [point * (-down).exp(), point * up.exp()]
}

/// One run's result: its median and 95% CI (all positive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLevel {
    /// The run's median.
    pub median: f64,
    /// Its 95% CI.
    pub ci95: [f64; 2],
}

impl RunLevel {
    /// The standard error of the log-median, read back from the CI (`None` without a usable
    /// one).
    pub fn log_se(&self) -> Option<f64> {
        let [lo, hi] = self.ci95;
        (lo > 0.0 && hi >= lo && self.median > 0.0).then(|| (hi / lo).ln() / (2.0 * 1.96))
    }
}

/// The spread of `runs` (one benchmark, one environment), or `None` with fewer than
/// `MIN_RUNS` usable runs.
pub fn estimate(runs: &[RunLevel]) -> Option<Spread> {
    let usable: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| Some((r.median.ln(), r.log_se()?)))
        .filter(|(y, s)| y.is_finite() && s.is_finite())
        .collect();
    if usable.len() < MIN_RUNS {
        return None;
    }
    Some(Spread::plain(paule_mandel(&usable, 0).sqrt(), usable.len()))
}

/// The Paule-Mandel estimate of `tau^2` from `(y_i, s_i)`: the between-run variance at which
/// the generalized Q statistic, `sum (y_i - ybar_w)^2 / (s_i^2 + tau^2)` with `ybar_w` the
/// mean weighted alike, equals its expectation `k - 1 - fitted` (0 when it is below that
/// already). With equal `s_i` it is the sample variance less `s^2`; with unequal ones it weighs
/// each run by how precisely it knows its level, so two precise runs that disagree say more
/// than four vague ones that straddle them. `fitted` counts what the `y_i` were already fitted
/// by beyond their mean (1 for levels projected on a slope learned from the same runs): a line
/// through six points leaves their residuals a fifth smaller than their scatter about it, and
/// an estimate that expected `k - 1` of them learned 0.72 of the true `tau^2` in simulated
/// drifting stores (`projection`'s tests), where 0.90 is learned now.
fn paule_mandel(runs: &[(f64, f64)], fitted: usize) -> f64 {
    let k = runs.len() as f64;
    let expected = (k - 1.0 - fitted as f64).max(1.0);
    let q = |tau2: f64| {
        // A run whose CI has no width (all repetitions at one value) knows its level to
        // within a part in a million, not infinitely well.
        let w: Vec<f64> = runs
            .iter()
            .map(|(_, s)| 1.0 / ((s * s).max(1e-12) + tau2))
            .collect();
        let sum_w: f64 = w.iter().sum();
        let mean = runs.iter().zip(&w).map(|((y, _), w)| w * y).sum::<f64>() / sum_w;
        runs.iter()
            .zip(&w)
            .map(|((y, _), w)| w * (y - mean).powi(2))
            .sum::<f64>()
    };
    if q(0.0).partial_cmp(&expected) != Some(std::cmp::Ordering::Greater) {
        return 0.0;
    }
    // Q falls as tau^2 grows, and at the runs' plain sample sum of squares over `expected` it
    // is at most `expected`.
    let mean = runs.iter().map(|(y, _)| y).sum::<f64>() / k;
    let mut hi = runs.iter().map(|(y, _)| (y - mean).powi(2)).sum::<f64>() / expected;
    let mut lo = 0.0;
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if q(mid) > expected {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The run-to-run term for a comparison of a run of environment A with one of B: the larger
/// of the two where both are known; the known one where only one is (the other environment
/// is assumed to scatter alike, which a comparison says); `None` where neither is.
pub fn pooled(a: Option<Spread>, b: Option<Spread>) -> Option<Spread> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if x.tau >= y.tau { x } else { y }),
        (x, y) => x.or(y),
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(median: f64, half_pct: f64) -> RunLevel {
        let f = 1.0 + half_pct / 100.0;
        RunLevel {
            median,
            ci95: [median / f, median * f],
        }
    }

    #[test]
    fn runs_that_agree_within_their_own_cis_have_no_spread_beyond_them() {
        let runs: Vec<RunLevel> = [100.0, 100.2, 99.9, 100.1]
            .iter()
            .map(|&m| level(m, 1.0))
            .collect();
        let s = estimate(&runs).unwrap();
        assert_eq!(s.runs, 4);
        assert!(s.tau < 1e-9, "{s:?}");
    }

    #[test]
    fn runs_at_different_levels_give_their_spread_taken_by_t_for_few_runs() {
        // Levels scattered about 3%, each with a 0.5% CI: tau is about their spread.
        let levels = [100.0, 103.0, 97.0, 101.0, 99.0, 104.0, 96.0, 102.0];
        let runs: Vec<RunLevel> = levels.iter().map(|&m| level(m, 0.5)).collect();
        let s = estimate(&runs).unwrap();
        assert!(s.tau > 0.02 && s.tau < 0.04, "{s:?}");
        // Student's t for 7 degrees of freedom, not 1.96.
        assert!((s.quantile() - 2.3646).abs() < 1e-3, "{}", s.quantile());
        assert!(s.percent() > 5.0 && s.percent() < 10.0, "{}", s.percent());
        let many = Spread::plain(s.tau, 1000);
        assert!((many.quantile() - 1.962).abs() < 1e-2);
    }

    #[test]
    fn a_benchmark_in_two_modes_run_by_run_has_that_spread() {
        // gettid in six runs measured apart (check-runs, 2026-11-26): five at ~155.5 ns, one
        // at 163.2. A robust scale said 0 and called that run's comparisons -4.8%; the plain
        // variance says ~2%, and the run's comparison with another is no change.
        let runs: Vec<RunLevel> = [
            (163.23, 162.38, 163.56),
            (155.41, 149.5, 164.92),
            (155.99, 150.95, 164.43),
            (155.72, 149.74, 164.85),
            (155.97, 153.68, 164.45),
            (155.42, 154.98, 156.32),
        ]
        .iter()
        .map(|&(m, lo, hi)| RunLevel {
            median: m,
            ci95: [lo, hi],
        })
        .collect();
        let s = estimate(&runs).unwrap();
        assert!(s.tau > 0.01 && s.tau < 0.03, "{s:?}");
        let (b, c) = (runs[0], runs[5]);
        let r = c.median / b.median;
        let own = [
            r / ((c.median / c.ci95[0])
                .ln()
                .hypot((b.ci95[1] / b.median).ln()))
            .exp(),
            r * ((c.ci95[1] / c.median)
                .ln()
                .hypot((b.median / b.ci95[0]).ln()))
            .exp(),
        ];
        assert!(own[1] < 1.0, "its own CIs call it: {own:?}");
        let apart = widen(r, own, s);
        assert!(apart[0] < 1.0 && apart[1] > 1.0, "{apart:?}");
    }

    #[test]
    fn runs_with_no_width_to_their_cis_still_give_their_scatter() {
        let flat = |m: f64| RunLevel {
            median: m,
            ci95: [m, m],
        };
        let s = estimate(&[flat(100.0), flat(102.0), flat(98.0)]).unwrap();
        assert!((s.tau - 0.02).abs() < 0.002, "{s:?}");
        assert_eq!(estimate(&[flat(100.0); 3]).unwrap().tau, 0.0);
    }

    #[test]
    fn too_few_runs_or_no_cis_give_no_estimate() {
        assert!(estimate(&[level(1.0, 1.0), level(1.1, 1.0)]).is_none());
        let no_ci = RunLevel {
            median: 1.0,
            ci95: [f64::NAN, f64::NAN],
        };
        assert!(estimate(&[no_ci, no_ci, level(1.0, 1.0)]).is_none());
    }

    #[test]
    fn the_interval_of_runs_measured_apart_widens_by_the_run_to_run_term() {
        let (b, c) = (level(100.0, 1.0), level(104.0, 1.0));
        // The interval of the two runs measured together: their own sides in quadrature.
        let r = c.median / b.median;
        let side = |x: f64, y: f64| (x.ln().powi(2) + y.ln().powi(2)).sqrt();
        let together = [
            r / side(c.median / c.ci95[0], b.ci95[1] / b.median).exp(),
            r * side(c.ci95[1] / c.median, b.median / b.ci95[0]).exp(),
        ];
        let own = widen(r, together, Spread::plain(0.0, 5));
        assert!(own[0] > 1.0, "own CIs alone call +4%: {own:?}");
        let apart = widen(r, together, Spread::plain(0.03, 5));
        assert!(apart[0] < 1.0 && apart[1] > 1.08, "{apart:?}");
        let spread = |tau| Some(Spread::plain(tau, 5));
        assert_eq!(pooled(spread(0.01), spread(0.02)), spread(0.02));
        assert_eq!(pooled(None, spread(0.02)), spread(0.02));
        assert_eq!(pooled(None, None), None);
    }
}

/// Two groups of runs measured apart (a kernel's runs against another's), one benchmark:
/// each run one level (its log-median), the groups compared by Welch's t interval on those
/// levels, so the scatter between runs is in the interval by construction. A group's variance
/// is at least its runs' typical own variance (three runs that agree by chance must not claim
/// more precision than each run had).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupDifference {
    /// Geometric means of the groups' medians.
    pub base: f64,
    /// See `base`.
    pub cand: f64,
    /// cand / base, with its 95% interval.
    pub ratio: f64,
    /// The ratio's 95% interval.
    pub ratio_ci95: [f64; 2],
    /// Two-sided p-value of Welch's t test on the log levels.
    pub p: f64,
}

/// A group's runs on the log scale: mean of the log-medians, their variance (at least the
/// runs' typical own variance), and how many; `None` with fewer than 2 runs.
fn moments(g: &[RunLevel]) -> Option<(f64, f64, f64)> {
    let ys: Vec<f64> = g
        .iter()
        .filter(|r| r.median > 0.0)
        .map(|r| r.median.ln())
        .collect();
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return None;
    }
    let mean = ys.iter().sum::<f64>() / n;
    let var = ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let own: Vec<f64> = g.iter().filter_map(|r| r.log_se()).map(|s| s * s).collect();
    let floor = if own.is_empty() { 0.0 } else { median(&own) };
    Some((mean, var.max(floor), n))
}

/// A group's level (geometric mean of its runs' medians) with the 95% t interval its runs'
/// scatter gives; `None` with fewer than 2 runs.
pub fn group_level(g: &[RunLevel]) -> Option<(f64, [f64; 2])> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let (mean, var, n) = moments(g)?;
    let q = StudentsT::new(0.0, 1.0, n - 1.0).ok()?.inverse_cdf(0.975);
    let half = q * (var / n).sqrt();
    Some((mean.exp(), [(mean - half).exp(), (mean + half).exp()]))
}

/// Two groups of runs compared by their levels (`None` with fewer than two runs a side).
pub fn group_difference(base: &[RunLevel], cand: &[RunLevel]) -> Option<GroupDifference> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let (mb, vb, nb) = moments(base)?;
    let (mc, vc, nc) = moments(cand)?;
    let (qb, qc) = (vb / nb, vc / nc);
    let se = (qb + qc).sqrt();
    let diff = mc - mb;
    let (half, p) = if se > 0.0 {
        // Welch-Satterthwaite degrees of freedom.
        let df = (qb + qc).powi(2) / (qb * qb / (nb - 1.0) + qc * qc / (nc - 1.0));
        let t = StudentsT::new(0.0, 1.0, df.max(1.0)).ok()?;
        let q = t.inverse_cdf(0.975);
        (q * se, 2.0 * (1.0 - t.cdf((diff / se).abs())))
    } else {
        (0.0, if diff == 0.0 { 1.0 } else { 0.0 })
    };
    Some(GroupDifference {
        base: mb.exp(),
        cand: mc.exp(),
        ratio: diff.exp(),
        ratio_ci95: [(diff - half).exp(), (diff + half).exp()],
        p,
    })
}

#[cfg(test)]
mod group_tests {
    use super::*;

    fn levels(medians: &[f64]) -> Vec<RunLevel> {
        medians
            .iter()
            .map(|&m| RunLevel {
                median: m,
                ci95: [m * 0.995, m * 1.005],
            })
            .collect()
    }

    #[test]
    fn groups_that_differ_by_more_than_their_scatter_are_told_apart() {
        let plain = levels(&[150.0, 153.0, 148.0]);
        let filtered = levels(&[212.0, 216.0, 209.0]);
        let d = group_difference(&plain, &filtered).unwrap();
        assert!((d.ratio - 212.3 / 150.3).abs() < 0.01, "{d:?}");
        assert!(d.ratio_ci95[0] > 1.3 && d.ratio_ci95[1] < 1.5, "{d:?}");
        assert!(d.p < 0.001);
        // The same runs split in two: the interval holds 1.
        let all = levels(&[150.0, 153.0, 148.0, 151.0, 149.0, 154.0]);
        let same = group_difference(&all[..3], &all[3..]).unwrap();
        assert!(
            same.ratio_ci95[0] < 1.0 && same.ratio_ci95[1] > 1.0,
            "{same:?}"
        );
        // A single run is no group.
        assert!(group_difference(&plain[..1], &filtered).is_none());
        assert!(group_level(&plain[..1]).is_none());
        let (level, [lo, hi]) = group_level(&plain).unwrap();
        assert!((level - (150.0f64 * 153.0 * 148.0).cbrt()).abs() < 1e-9);
        // t(2) = 4.303: three runs give a wide interval, and it holds every run's level.
        assert!(lo < 148.0 && hi > 153.0 && hi < 160.0, "{lo} {hi}");
    }

    #[test]
    fn runs_agreeing_by_chance_claim_no_more_than_their_own_precision() {
        let a = levels(&[100.0, 100.0, 100.0]);
        let b = levels(&[100.4, 100.4, 100.4]);
        let d = group_difference(&a, &b).unwrap();
        // Each run's own CI is ±0.5%: the difference of 0.4% is not beyond doubt.
        assert!(d.ratio_ci95[0] < 1.0, "{d:?}");
    }
}
