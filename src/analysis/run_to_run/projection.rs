//! Runs measured apart projected to one host speed: where a benchmark's level follows one of
//! the witnesses every worker times across the stored runs of one environment, the slope is
//! learned there, the run-to-run spread is what the projected levels still scatter, and a
//! comparison of two runs takes the host's drift between them out of the ratio before it is
//! judged, paying for the slope's own uncertainty.
//!
//! Two witnesses, for a host drifts in two ways. The exit witness (CPUID, a round trip through
//! the hypervisor; `witness::result_exit_witness`) follows a host whose own load slows its
//! answers to the guest: on a 2-vCPU KVM guest whose host drifted it followed getppid with a
//! correlation of 0.8-0.97. The speed witness (a fixed user-space loop;
//! `witness::result_speed_witness`) follows a CPU that is itself slower in some minutes (a
//! busy sibling thread, a lower clock): on another evening the levels of six syscalls
//! followed it with a correlation of 0.90-0.99 while the exit witness stayed within 1%
//! (docs/design-notes.md, "A witness that follows the host"). Each is learned apart, and the
//! one whose projected levels scatter least is used.
//!
//! Why these and not a witness inside the compared system: a kernel-entry loop under a
//! seccomp sandbox or on another kernel is slower for the very reason the comparison exists,
//! and projecting on it would cancel the difference being measured. CPUID's time in a guest is
//! the host's, and a loop of multiplies in user space enters no kernel: a filter, a kernel
//! setting or a wrapper moves neither. (A kernel that slows user space itself, such as one
//! that turns on STIBP beside a busy sibling, moves the speed witness too, and the comparison
//! says by what factor it projected so that such a case can be read.)
//!
//! The projection is used only where the data say so: at least `MIN_PROJECTED` runs with the
//! witness, a slope above zero beyond its own 95% interval, and a projected spread below the
//! plain one. On a quiet host the witnesses sit within 1% of each other, no slope is learned,
//! and every comparison is judged as before.

use super::{RunLevel, Spread, paule_mandel, t975, widen_by};

/// Runs of one environment with a witness needed before a slope is learned: a line through
/// fewer says little about a host's drift.
pub const MIN_PROJECTED: usize = 5;

/// A slope steeper than this is not a host's drift followed (a cost that moves twice as much
/// as the witness) but two things that happened to move together.
const MAX_SLOPE: f64 = 2.0;

/// Which witness a projection follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftWitness {
    /// CPUID's time: how fast the host answers its guest.
    Exit,
    /// The fixed user-space loop: how fast the CPU itself runs.
    Speed,
}

impl DriftWitness {
    /// Its name in a sentence.
    pub fn words(self) -> &'static str {
        match self {
            DriftWitness::Exit => "exit witness (CPUID)",
            DriftWitness::Speed => "speed witness (a user-space loop)",
        }
    }
}

/// One result's two witnesses, ns (medians of its repetitions'); `None` where none was timed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ResultWitnesses {
    /// ns per CPUID.
    pub exit_ns: Option<f64>,
    /// ns per loop of the speed witness.
    pub speed_ns: Option<f64>,
}

impl ResultWitnesses {
    /// The value of witness `w`, where it is usable (finite, above zero).
    pub fn of(&self, w: DriftWitness) -> Option<f64> {
        let v = match w {
            DriftWitness::Exit => self.exit_ns,
            DriftWitness::Speed => self.speed_ns,
        };
        v.filter(|v| v.is_finite() && *v > 0.0)
    }
}

/// How one benchmark's level follows a witness across an environment's runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projection {
    /// The witness followed.
    pub on: DriftWitness,
    /// The level's log change for each log change of the witness (0.6: a host 10% slower to
    /// answer made this cost 6% dearer).
    pub slope: f64,
    /// The slope's standard error.
    pub slope_se: f64,
    /// The levels' own run-to-run spread, before projection (for a comparison in which a run
    /// has no witness).
    pub plain_tau: f64,
    /// The correlation of level and witness the slope came from.
    pub corr: f64,
}

/// The run-to-run spread of `runs` (each a run's level and its result's witnesses), projected
/// on the witness that explains the scatter best where one does (see the module doc), as
/// measured where none does; `None` with fewer than `MIN_RUNS` usable runs.
pub fn learn(runs: &[(RunLevel, ResultWitnesses)]) -> Option<Spread> {
    let levels: Vec<RunLevel> = runs.iter().map(|(l, _)| *l).collect();
    let plain = super::estimate(&levels)?;
    [DriftWitness::Exit, DriftWitness::Speed]
        .into_iter()
        .filter_map(|w| project(runs, w, plain))
        .min_by(|a, b| a.tau.total_cmp(&b.tau))
        .or(Some(plain))
}

/// `runs` projected on witness `on`, where its slope is beyond doubt and the projected levels
/// scatter less than `plain`.
fn project(
    runs: &[(RunLevel, ResultWitnesses)],
    on: DriftWitness,
    plain: Spread,
) -> Option<Spread> {
    let points: Vec<(f64, f64, f64)> = runs
        .iter()
        .filter_map(|(l, w)| Some((w.of(on)?.ln(), l.median.ln(), l.log_se()?)))
        .filter(|(x, y, s)| x.is_finite() && y.is_finite() && s.is_finite())
        .collect();
    if points.len() < MIN_PROJECTED {
        return None;
    }
    let (slope, slope_se, corr) = fit(&points)?;
    let n = points.len();
    if !(slope > 0.0 && slope <= MAX_SLOPE && slope > t975(n - 2) * slope_se) {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let projected: Vec<(f64, f64)> = points
        .iter()
        .map(|(x, y, s)| (y - slope * (x - mx), *s))
        .collect();
    // The slope was fitted to these same levels: one degree of freedom fewer.
    let tau = paule_mandel(&projected, 1).sqrt();
    (tau < plain.tau).then_some(Spread {
        tau,
        runs: n,
        projection: Some(Projection {
            on,
            slope,
            slope_se,
            plain_tau: plain.tau,
            corr,
        }),
    })
}

/// Least squares of y on x over `(x, y, _)`: slope, its standard error and the correlation;
/// `None` where x or y does not vary.
fn fit(points: &[(f64, f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if !(sxx > 1e-12 && syy > 0.0) {
        return None;
    }
    let slope = sxy / sxx;
    let residual = (syy - slope * sxy).max(0.0) / (n - 2.0);
    Some((slope, (residual / sxx).sqrt(), sxy / (sxx * syy).sqrt()))
}

/// A ratio of two runs measured apart, as judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// The ratio (candidate over base), with the host's drift between the runs taken out
    /// where they were projected.
    pub point: f64,
    /// Its 95% interval: the runs' own, the run-to-run term and the slope's uncertainty.
    pub ci95: [f64; 2],
    /// The spread it was judged with (the plain one where a run had no witness).
    pub spread: Spread,
    /// The factor taken out of the ratio, where the runs were projected.
    pub drift_factor: Option<f64>,
}

/// The ratio `point` with its own interval `ci` (two runs measured apart, their own CIs in
/// quadrature) judged with `spread`: where it carries a projection and both runs timed its
/// witness (`witnesses`: base's, candidate's), the candidate is projected to the base's level
/// of that witness (the ratio divided by `(cand / base) ^ slope`) and the interval widened by
/// the projected spread and the slope's uncertainty over that distance; otherwise by the
/// levels' own spread.
pub fn judge_apart(
    point: f64,
    ci: [f64; 2],
    spread: Spread,
    witnesses: Option<(ResultWitnesses, ResultWitnesses)>,
) -> Judged {
    let usable = spread.projection.and_then(|p| {
        let (b, c) = witnesses?;
        Some((p, b.of(p.on)?, c.of(p.on)?))
    });
    let Some((p, base, cand)) = usable else {
        let spread = match spread.projection {
            Some(p) => Spread::plain(p.plain_tau, spread.runs),
            None => spread,
        };
        return Judged {
            point,
            ci95: super::widen(point, ci, spread),
            spread,
            drift_factor: None,
        };
    };
    let dx = (cand / base).ln();
    let factor = (p.slope * dx).exp();
    let q = spread.quantile();
    let drift = 2.0 * (q * spread.tau).powi(2) + (q * p.slope_se * dx).powi(2);
    let (point, ci) = (point / factor, [ci[0] / factor, ci[1] / factor]);
    Judged {
        point,
        ci95: widen_by(point, ci, drift),
        spread,
        drift_factor: Some(factor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(median: f64) -> RunLevel {
        RunLevel {
            median,
            ci95: [median / 1.005, median * 1.005],
        }
    }

    fn exit(ns: f64) -> ResultWitnesses {
        ResultWitnesses {
            exit_ns: Some(ns),
            speed_ns: None,
        }
    }

    /// Eight runs whose levels followed the host: exit witness 4500-6300 ns, the level by the
    /// witness's 0.7th power (and a little of its own scatter).
    fn drifting() -> Vec<(RunLevel, ResultWitnesses)> {
        let own = [0.004, -0.003, 0.002, -0.004, 0.001, 0.003, -0.002, 0.0];
        [
            4500.0, 5200.0, 4600.0, 6300.0, 4800.0, 5900.0, 4550.0, 5500.0,
        ]
        .iter()
        .zip(own)
        .map(|(&w, e): (&f64, f64)| {
            (
                level(190.0 * (w / 4500.0f64).powf(0.7) * (1.0 + e)),
                exit(w),
            )
        })
        .collect()
    }

    #[test]
    fn levels_that_follow_the_witness_learn_its_slope_and_a_narrower_spread() {
        let s = learn(&drifting()).unwrap();
        let p = s.projection.expect("a slope this clear is learned");
        assert!((p.slope - 0.7).abs() < 0.05, "{p:?}");
        assert!(s.tau < p.plain_tau / 4.0, "{s:?}");
        // One fewer degree of freedom for the slope.
        assert!((s.quantile() - t975(6)).abs() < 1e-9);
    }

    #[test]
    fn the_spread_left_after_a_slope_is_not_taken_too_small_and_an_aa_pair_is_held() {
        // Six runs of a host that drifted (the exit witness's log scattering 8%), each level
        // the witness's 0.7th power times a run-to-run spread of 2% of its own and a 0.3% CI;
        // then two more runs of the same host, judged apart with what the six taught. Over
        // many such stores the spread learned must be about the true one (a slope fitted to
        // the same six levels leaves residuals a fifth smaller: expecting `k - 1` of them
        // learned 0.72 of it here, 0.90 now), and the A/A pair's 95% interval must hold 1 (94.0%
        // of pairs; 92.5% before).
        use crate::base::stats::standard_normal as normal;
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x0063);
        let (tau, own) = (0.02f64, 0.003f64);
        let draw = |rng: &mut rand::rngs::StdRng| {
            let x = 0.08 * normal(rng);
            let y = 0.7 * x + tau * normal(rng) + own * normal(rng);
            let m = 190.0 * y.exp();
            (
                RunLevel {
                    median: m,
                    ci95: [m * (-1.96 * own).exp(), m * (1.96 * own).exp()],
                },
                exit(4500.0 * x.exp()),
            )
        };
        let (mut learned, mut held, mut stores) = (0.0, 0, 0);
        for _ in 0..4000 {
            let runs: Vec<_> = (0..6).map(|_| draw(&mut rng)).collect();
            let s = learn(&runs).unwrap();
            let (base, cand) = (draw(&mut rng), draw(&mut rng));
            if s.projection.is_none() {
                continue;
            }
            stores += 1;
            learned += s.tau.powi(2);
            let r = cand.0.median / base.0.median;
            let o = (2.0f64).sqrt() * 1.96 * own;
            let j = judge_apart(r, [r * (-o).exp(), r * o.exp()], s, Some((base.1, cand.1)));
            held += usize::from(j.ci95[0] <= 1.0 && 1.0 <= j.ci95[1]);
        }
        assert!(stores > 3500, "a slope this clear is learned: {stores}");
        let ratio = learned / stores as f64 / tau.powi(2);
        assert!(
            (0.85..1.15).contains(&ratio),
            "mean tau^2 learned / true: {ratio:.3}"
        );
        let coverage = held as f64 / stores as f64;
        assert!(coverage >= 0.93, "A/A pairs held: {coverage:.3}");
    }

    #[test]
    fn a_quiet_host_or_too_few_runs_learn_no_slope() {
        // Witnesses within 1%, levels scattered on their own: no slope beyond doubt.
        let quiet: Vec<_> = [100.0, 102.0, 99.0, 101.0, 98.0, 100.5]
            .iter()
            .zip([4510.0, 4530.0, 4505.0, 4540.0, 4520.0, 4515.0])
            .map(|(&m, w)| (level(m), exit(w)))
            .collect();
        assert_eq!(learn(&quiet).unwrap().projection, None);
        let few: Vec<_> = drifting().into_iter().take(MIN_PROJECTED - 1).collect();
        assert_eq!(learn(&few).unwrap().projection, None);
        let blind: Vec<_> = drifting()
            .into_iter()
            .map(|(l, _)| (l, ResultWitnesses::default()))
            .collect();
        let s = learn(&blind).unwrap();
        assert_eq!(s.projection, None);
        assert_eq!(
            Some(s),
            super::super::estimate(&blind.iter().map(|p| p.0).collect::<Vec<_>>())
        );
    }

    #[test]
    fn a_run_on_a_slower_host_is_no_change_and_a_true_addition_is_called() {
        let s = learn(&drifting()).unwrap();
        let own = |r: f64| [r / 1.007, r * 1.007];
        // The candidate's minutes had the host 30% slower to answer, and nothing else changed:
        // measured x1.20, projected x1.00, no change.
        let r = (1.3f64).powf(0.7);
        let j = judge_apart(r, own(r), s, Some((exit(4500.0), exit(5850.0))));
        assert!(j.ci95[0] < 1.0 && j.ci95[1] > 1.0, "{j:?}");
        assert!(
            (j.point - 1.0).abs() < 0.02 && j.drift_factor.is_some(),
            "{j:?}"
        );
        // The same drift and a true +7%: called.
        let j = judge_apart(
            1.07 * r,
            own(1.07 * r),
            s,
            Some((exit(4500.0), exit(5850.0))),
        );
        assert!(j.ci95[0] > 1.0, "{j:?}");
        // As measured, the plain spread cannot tell the +7% from the host.
        let plain = Spread::plain(s.projection.unwrap().plain_tau, s.runs);
        let w = judge_apart(
            1.07 * r,
            own(1.07 * r),
            plain,
            Some((exit(4500.0), exit(5850.0))),
        );
        assert!(w.ci95[0] < 1.0, "{w:?}");
    }

    #[test]
    fn a_run_without_a_witness_is_judged_with_the_plain_spread() {
        let s = learn(&drifting()).unwrap();
        let j = judge_apart(1.05, [1.04, 1.06], s, None);
        assert_eq!(j.drift_factor, None);
        assert_eq!(j.spread.projection, None);
        assert!((j.spread.tau - s.projection.unwrap().plain_tau).abs() < 1e-12);
    }

    #[test]
    fn a_witness_far_from_the_base_pays_for_the_slopes_uncertainty() {
        let s = learn(&drifting()).unwrap();
        let near = judge_apart(1.0, [0.99, 1.01], s, Some((exit(5000.0), exit(5050.0))));
        let far = judge_apart(1.0, [0.99, 1.01], s, Some((exit(5000.0), exit(8000.0))));
        let width = |j: Judged| j.ci95[1] / j.ci95[0];
        assert!(width(far) > width(near), "{near:?} {far:?}");
    }

    #[test]
    fn levels_that_follow_the_speed_witness_are_projected_on_it() {
        // The exit witness flat within 1% (scattered on its own), the user-space loop moving
        // 4.0-5.6 ns and the levels with it: the speed witness is chosen.
        let flat = [
            4510.0, 4530.0, 4505.0, 4540.0, 4520.0, 4515.0, 4525.0, 4500.0,
        ];
        let runs: Vec<_> = drifting()
            .into_iter()
            .zip(flat)
            .map(|((l, w), e)| {
                let speed = w.exit_ns.unwrap() / 1125.0;
                let w = ResultWitnesses {
                    exit_ns: Some(e),
                    speed_ns: Some(speed),
                };
                (l, w)
            })
            .collect();
        let s = learn(&runs).unwrap();
        let p = s
            .projection
            .expect("the speed witness explains the scatter");
        assert_eq!(p.on, DriftWitness::Speed);
        assert!((p.slope - 0.7).abs() < 0.05, "{p:?}");
        // A candidate whose CPU ran 30% slower, judged on the speed witness: no change.
        let r = (1.3f64).powf(0.7);
        let (b, c) = (
            runs[0].1,
            ResultWitnesses {
                speed_ns: Some(4.0 * 1.3),
                ..runs[0].1
            },
        );
        let j = judge_apart(r, [r / 1.007, r * 1.007], s, Some((b, c)));
        assert!(j.ci95[0] < 1.0 && j.ci95[1] > 1.0, "{j:?}");
        assert!((j.drift_factor.unwrap() - r).abs() < 0.05, "{j:?}");
        // Without the speed witness on one side the plain spread judges it.
        let blind = ResultWitnesses {
            speed_ns: None,
            ..c
        };
        assert_eq!(
            judge_apart(r, [r / 1.007, r * 1.007], s, Some((b, blind))).drift_factor,
            None
        );
    }
}
