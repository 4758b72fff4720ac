//! A confidence interval that may be looked at again and again while data arrive: `ab`'s stop
//! rule. Each round of `ab` gives one paired observation per benchmark (the log of B's
//! repetition median over A's, measured next to each other), and after enough rounds the
//! interval of their mean is asked whether it has decided. Looking after every round and
//! stopping at the first decision would inflate false calls far past 5% (an interval looked at
//! 30 times misses the truth at some look about a quarter of the time). So the interval is a
//! group-sequential one with a Pocock-style constant boundary: looks happen at a fixed
//! schedule (`MIN_ROUNDS`, then every `LOOK_GROWTH` times more rounds, and at the budget's
//! end), each at the same nominal level `PER_LOOK_ALPHA`, chosen so that the chance that any
//! look's interval misses the true mean is at most 5% over the whole schedule. The level was
//! calibrated by simulation for this schedule (`tests::the_schedule_keeps_false_calls_at_5_percent`
//! checks it again); docs/design-notes.md says why this and not a confidence sequence.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The first look: fewer rounds give an interval whose width is mostly chance (with 3 the
/// spread's estimate is off by half or more one time in four; see docs/design-notes.md).
pub const MIN_ROUNDS: usize = 10;

/// Each look after the first comes when the rounds have grown by at least this factor.
pub const LOOK_GROWTH: f64 = 1.15;

/// The schedule is calibrated up to this many rounds; a longer budget only adds looks whose
/// chance of a false call the calibration did not count (`ab` caps its rounds here, or its
/// blocks where the sides alternate in blocks and a block is one pair).
pub const MAX_ROUNDS: usize = 1000;

/// Each look's two-sided nominal level: the family of looks from `MIN_ROUNDS` to `MAX_ROUNDS`
/// then misses the true mean at some look 4.7% of the time (the trimmed interval on normal
/// data, 10000 simulated sequences; 0.0035: 5.0%, 0.004: 5.6%, 0.005: 6.6%; 0.05 at every
/// look: over 20%).
pub const PER_LOOK_ALPHA: f64 = 0.003;

/// The rounds at which the interval is looked at: `MIN_ROUNDS`, then each the previous times
/// `LOOK_GROWTH` (rounded up), to `MAX_ROUNDS`.
pub fn schedule() -> Vec<usize> {
    let mut out = vec![MIN_ROUNDS];
    loop {
        let last = *out.last().unwrap_or(&MIN_ROUNDS);
        let next = ((last as f64 * LOOK_GROWTH).ceil() as usize).max(last + 1);
        if next > MAX_ROUNDS {
            return out;
        }
        out.push(next);
    }
}

/// Whether the interval is looked at after `rounds` rounds (`last`: the budget's final round,
/// which is always a look).
pub fn is_look(rounds: usize, last: bool) -> bool {
    rounds >= MIN_ROUNDS && (last || schedule().contains(&rounds))
}

/// The share trimmed from each end of the rounds' log ratios. A worker now and then runs
/// its whole repetition slow (on this guest 1 round in ~30 sat +5% to +46% while the others
/// agreed within 0.5%); one such round made the plain mean's interval ±1.3% after 333 rounds
/// of an A/A comparison that the trimmed mean's decides in tens.
pub const TRIM: f64 = 0.2;

/// The trimmed mean of `x` and its interval (`None` with fewer than 3 values), valid at every
/// look of the schedule together: Yuen's trimmed t, the mean of the middle 60% ± the t
/// quantile at `PER_LOOK_ALPHA` times the winsorized standard error.
pub fn interval(x: &[f64]) -> Option<(f64, [f64; 2])> {
    interval_at(x, PER_LOOK_ALPHA)
}

/// As `interval`, at a two-sided nominal level `alpha`.
fn interval_at(x: &[f64], alpha: f64) -> Option<(f64, [f64; 2])> {
    let (mean, se, df) = yuen(x)?;
    let t = StudentsT::new(0.0, 1.0, df)
        .ok()?
        .inverse_cdf(1.0 - alpha / 2.0);
    Some((mean, [mean - t * se, mean + t * se]))
}

/// Yuen's trimmed mean of `x`, its winsorized standard error and degrees of freedom (`None`
/// with fewer than 3 values).
fn yuen(x: &[f64]) -> Option<(f64, f64, f64)> {
    let n = x.len();
    if n < 3 {
        return None;
    }
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    let g = (TRIM * n as f64).floor() as usize;
    let h = n - 2 * g;
    let mean = v[g..n - g].iter().sum::<f64>() / h as f64;
    // Winsorized: the trimmed ends replaced by the nearest kept value.
    let (lo, hi) = (v[g], v[n - g - 1]);
    let w: Vec<f64> = v.iter().map(|&x| x.clamp(lo, hi)).collect();
    let wmean = w.iter().sum::<f64>() / n as f64;
    let wvar = w.iter().map(|x| (x - wmean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = wvar.sqrt() / ((h as f64 / n as f64) * (n as f64).sqrt());
    Some((mean, se, (h - 1).max(1) as f64))
}

/// The two-sided p-value of Yuen's trimmed t test of "mean 0" on `x`, at one look (not
/// adjusted for the schedule): what a reader compares with other tools' p.
pub fn p_value(x: &[f64]) -> f64 {
    match yuen(x) {
        Some((mean, se, df)) if se > 0.0 => {
            StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |t| 2.0 * (1.0 - t.cdf(mean.abs() / se)))
        }
        Some((mean, _, _)) => {
            if mean == 0.0 {
                1.0
            } else {
                0.0
            }
        }
        None => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use crate::base::stats::standard_normal as normal;

    /// The share of `sequences` simulated null sequences (mean 0) whose interval misses 0 at
    /// some look of the schedule, at level `alpha`; `draw` gives one observation.
    fn false_calls(alpha: f64, sequences: usize, seed: u64, draw: fn(&mut StdRng) -> f64) -> f64 {
        let looks = schedule();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut missed = 0;
        let mut x = Vec::with_capacity(MAX_ROUNDS);
        for _ in 0..sequences {
            x.clear();
            let mut hit = false;
            for &n in &looks {
                while x.len() < n {
                    x.push(draw(&mut rng));
                }
                // Running sums would be faster; the plain interval is what ab uses.
                if let Some((_, [lo, hi])) = interval_at(&x, alpha)
                    && (lo > 0.0 || hi < 0.0)
                {
                    hit = true;
                    break;
                }
            }
            missed += usize::from(hit);
        }
        missed as f64 / sequences as f64
    }

    #[test]
    fn the_schedule_starts_at_the_minimum_grows_by_15_percent_and_ends_at_the_cap() {
        let s = schedule();
        assert_eq!(&s[..6], &[10, 12, 14, 17, 20, 23]);
        assert!(*s.last().unwrap() <= MAX_ROUNDS && s.len() > 25, "{s:?}");
        assert!(is_look(10, false) && !is_look(11, false) && is_look(11, true));
        assert!(!is_look(9, true), "never before the minimum");
    }

    #[test]
    fn the_interval_is_yuens_trimmed_t_at_the_nominal_level() {
        // Below 5 values nothing is trimmed: the plain t interval.
        let x = [1.0, 2.0, 3.0, 4.0];
        let (mean, [lo, hi]) = interval_at(&x, 0.05).unwrap();
        // mean 2.5, sd 1.291, se 0.6455, t(3, 0.975) = 3.182
        assert_eq!(mean, 2.5);
        assert!((lo - (2.5 - 3.182 * 0.6455)).abs() < 1e-3, "{lo}");
        assert!((hi - (2.5 + 3.182 * 0.6455)).abs() < 1e-3, "{hi}");
        assert!(interval(&[1.0, 2.0]).is_none());
        // Ten values: 2 trimmed from each end; an outlier moves neither the mean nor the width.
        let calm = [0.0, 0.1, -0.1, 0.05, -0.05, 0.0, 0.1, -0.1, 0.02, -0.02];
        let mut wild = calm;
        wild[3] = 40.0;
        let (m1, c1) = interval_at(&calm, 0.05).unwrap();
        let (m2, c2) = interval_at(&wild, 0.05).unwrap();
        assert!(m1.abs() < 1e-12 && (m2 - 0.00833).abs() < 1e-4, "{m1} {m2}");
        // Winsorizing widens it a little (the kept ends move); the plain t would be 100x.
        assert!((c2[1] - c2[0]) < 2.0 * (c1[1] - c1[0]), "{c1:?} {c2:?}");
        assert!(p_value(&calm) > 0.99 && p_value(&[1.0, 1.1, 0.9, 1.05, 0.95]) < 0.01);
    }

    #[test]
    fn the_schedule_keeps_false_calls_at_5_percent() {
        // At the calibrated level the whole schedule misses a null mean about 5% of the time;
        // one look per schedule entry at the plain 5% level would miss far more often.
        let calibrated = false_calls(PER_LOOK_ALPHA, 1500, 7, normal);
        assert!(
            (0.03..=0.06).contains(&calibrated),
            "calibrated: {calibrated}"
        );
        let naive = false_calls(0.05, 500, 7, normal);
        assert!(naive > 0.15, "naive: {naive}");
        // Fresh processes sit at one of two levels (30% of them 8% higher here, each with a
        // little noise); a round's log ratio is the difference of two such draws, symmetric
        // under no change but with heavy shoulders. The interval keeps its level there too.
        let two_levels = |rng: &mut StdRng| {
            let mut one = || {
                let high = rng.random::<f64>() < 0.3;
                f64::from(u8::from(high)) * 0.08 + 0.005 * normal(rng)
            };
            one() - one()
        };
        let mixed = false_calls(PER_LOOK_ALPHA, 1000, 9, two_levels);
        assert!(mixed <= 0.06, "two levels: {mixed}");
    }

    /// The calibration itself, over 10,000 null sequences at levels around `PER_LOOK_ALPHA`
    /// (the slow tier; `--nocapture` prints them): the family error grows with the level, the
    /// chosen level spends most of the 5% (at least 4%, at most 5% and two standard errors,
    /// 0.0022 at this count) and the next level of the grid would spend more than 5%. Here
    /// (seeded): 0.0387, 0.0474, 0.0496, 0.0557.
    #[test]
    #[ignore = "slow: 10,000 null sequences at each of four levels"]
    #[allow(clippy::disallowed_macros)]
    fn the_per_look_level_spends_the_5_percent_family_error() {
        let grid = [0.0025, PER_LOOK_ALPHA, 0.0035, 0.004];
        let errors: Vec<f64> = grid
            .iter()
            .map(|&alpha| {
                let e = false_calls(alpha, 10_000, 11, normal);
                println!("per-look alpha {alpha}: family error {e:.4}");
                e
            })
            .collect();
        assert!(
            errors.windows(2).all(|w| w[1] >= w[0] - 0.003),
            "the family error does not grow with the level: {errors:?}"
        );
        assert!(
            (0.04..=0.0545).contains(&errors[1]),
            "at {PER_LOOK_ALPHA}: {}",
            errors[1]
        );
        assert!(errors[3] > 0.05, "at 0.004: {}", errors[3]);
    }
}
