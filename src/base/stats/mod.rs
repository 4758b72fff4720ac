//! Descriptive statistics of one benchmark's samples: order statistics, a distribution-free
//! confidence interval of the median, dispersion, and Tukey outlier counts.
//!
//! Pure functions on slices: no I/O, no clock, no randomness except where a caller passes a
//! seeded generator (the bootstrap in `compare`). Outliers are counted and reported, never
//! removed: on an OS benchmark the slow tail (a preemption, a page fault) is part of the cost.

pub mod bootstrap;
pub mod sequential;
pub mod units;

/// JSON has no NaN: serde_json writes a NaN as `null`. These read `null` back as NaN, so a
/// number that does not exist (no CI from too few repetitions) survives a round trip.
pub mod nan {
    use serde::{Deserialize, Deserializer};

    /// A number, `null` read as NaN.
    pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }

    /// A pair of numbers, each `null` read as NaN.
    pub fn pair<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 2], D::Error> {
        let v = <[Option<f64>; 2]>::deserialize(d)?;
        Ok([v[0].unwrap_or(f64::NAN), v[1].unwrap_or(f64::NAN)])
    }
}

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

/// Summary of a sample set. All values are in the samples' unit (ns in oscost).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Samples summarised.
    pub count: usize,
    /// The smallest.
    pub min: f64,
    /// The 1st percentile.
    pub p1: f64,
    /// The 5th percentile.
    pub p5: f64,
    /// The first quartile.
    pub p25: f64,
    /// The median.
    pub median: f64,
    /// The third quartile.
    pub p75: f64,
    /// The 95th percentile.
    pub p95: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The largest.
    pub max: f64,
    /// The mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1 denominator), computed with Welford's update.
    pub stddev: f64,
    /// Median absolute deviation from the median, unscaled (multiply by 1.4826 to estimate a
    /// normal sigma).
    pub mad: f64,
    /// 95% confidence interval of the median. `summarize` gives the order-statistics interval
    /// of the samples as one stream; a run replaces it with the interval across repetitions
    /// (NaN, `null` in JSON, when there were too few).
    #[serde(deserialize_with = "nan::pair")]
    pub ci95: [f64; 2],
}

/// Tukey-fence outlier counts: mild lies beyond 1.5 IQR from the quartiles, severe beyond 3 IQR.
/// A severe outlier is not also counted as mild.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outliers {
    /// Samples beyond 1.5 IQR from the quartiles (and within 3).
    pub mild: usize,
    /// Samples beyond 3 IQR from the quartiles.
    pub severe: usize,
}

/// Quantile `q` in [0, 1] of already sorted data, by linear interpolation between closest ranks
/// (Hyndman-Fan type 7, the default of R and numpy). `sorted` must be non-empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let q = q.clamp(0.0, 1.0);
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Copy and sort; NaNs are ordered last so they cannot break the sort.
pub fn sorted_copy(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The smallest and largest of `values` ((inf, -inf) when there are none); NaNs are skipped.
pub fn extent(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    values
        .into_iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
}

/// Median of any slice (empty gives NaN).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    quantile_sorted(&sorted_copy(samples), 0.5)
}

/// Mean and sample standard deviation by Welford's method, which does not lose precision when
/// the values are large and close together (nanosecond timestamps are).
pub fn mean_stddev(samples: &[f64]) -> (f64, f64) {
    let mut mean = 0.0;
    let mut m2 = 0.0;
    for (i, &x) in samples.iter().enumerate() {
        let delta = x - mean;
        mean += delta / (i + 1) as f64;
        m2 += delta * (x - mean);
    }
    let n = samples.len();
    let sd = if n > 1 {
        (m2 / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    (mean, sd)
}

/// A standard deviation estimated robustly: 1.4826 x the median absolute deviation from the
/// median (equal to the standard deviation for normal data; one wild value moves it little).
pub fn robust_sd(values: &[f64]) -> f64 {
    1.4826 * mad_of(values, median(values))
}

/// 0-based ranks (lo, hi) into sorted data such that [x(lo), x(hi)] covers the median with
/// probability of at least `level`, from the Binomial(n, 1/2) distribution of the number of
/// samples below the median. For n < 6 no such interval exists at 95%; the full range is
/// returned (and is honest: it is the widest statement the data supports).
pub fn median_ci_ranks(n: usize, level: f64) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    let alpha = (1.0 - level) / 2.0;
    let binom = match Binomial::new(0.5, n as u64) {
        Ok(b) => b,
        Err(_) => return (0, n - 1),
    };
    // Largest k (1-based order statistic) with P(X <= k - 1) <= alpha.
    // The interval [x(k), x(n + 1 - k)] then has coverage >= 1 - 2 alpha.
    let mut k = 0u64;
    // Start near the normal approximation and walk, to stay O(sqrt n).
    let guess = (n as f64 / 2.0 - 1.96 * (n as f64).sqrt() / 2.0 - 2.0).max(0.0) as u64;
    let mut j = guess.max(1);
    if binom.cdf(j - 1) > alpha {
        j = 1;
    }
    while j <= n as u64 && binom.cdf(j - 1) <= alpha {
        k = j;
        j += 1;
    }
    if k == 0 {
        return (0, n - 1);
    }
    let lo = (k - 1) as usize;
    let hi = n - k as usize;
    (lo, hi)
}

/// Median absolute deviation of `values` (in any order) from `med`, unscaled.
fn mad_of(values: &[f64], med: f64) -> f64 {
    let dev: Vec<f64> = values.iter().map(|x| (x - med).abs()).collect();
    median(&dev)
}

/// Full summary. Returns `None` for an empty slice.
pub fn summarize(samples: &[f64]) -> Option<Stats> {
    if samples.is_empty() {
        return None;
    }
    let s = sorted_copy(samples);
    let q = |p| quantile_sorted(&s, p);
    let med = q(0.5);
    let (mean, stddev) = mean_stddev(samples);
    let (lo, hi) = median_ci_ranks(s.len(), 0.95);
    Some(Stats {
        count: s.len(),
        min: s[0],
        p1: q(0.01),
        p5: q(0.05),
        p25: q(0.25),
        median: med,
        p75: q(0.75),
        p95: q(0.95),
        p99: q(0.99),
        max: s[s.len() - 1],
        mean,
        stddev,
        mad: mad_of(&s, med),
        ci95: [s[lo], s[hi]],
    })
}

/// Relative half-width of the median's CI: (hi - lo) / 2 / |median|. Infinite when the median
/// is zero, so that a "precision reached" test never passes on it.
pub fn relative_ci_halfwidth(st: &Stats) -> f64 {
    if st.median == 0.0 {
        return f64::INFINITY;
    }
    (st.ci95[1] - st.ci95[0]) / 2.0 / st.median.abs()
}

/// Count Tukey outliers (both tails).
pub fn tukey_outliers(samples: &[f64]) -> Outliers {
    if samples.len() < 4 {
        return Outliers::default();
    }
    let s = sorted_copy(samples);
    let q1 = quantile_sorted(&s, 0.25);
    let q3 = quantile_sorted(&s, 0.75);
    let iqr = q3 - q1;
    let mut o = Outliers::default();
    for &x in &s {
        if x < q1 - 3.0 * iqr || x > q3 + 3.0 * iqr {
            o.severe += 1;
        } else if x < q1 - 1.5 * iqr || x > q3 + 1.5 * iqr {
            o.mild += 1;
        }
    }
    o
}

/// Least-squares slope of y over x; None with fewer than two distinct x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    Some(points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx)
}

/// A standard normal draw (Box-Muller), for tests that simulate what a host gives.
#[cfg(test)]
pub fn standard_normal(rng: &mut rand::rngs::StdRng) -> f64 {
    use rand::RngExt;
    let (u, v): (f64, f64) = (rng.random(), rng.random());
    (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_is_exact_on_a_line() {
        let pts = [
            (0.0, 100.0),
            (64.0, 164.0),
            (256.0, 356.0),
            (1024.0, 1124.0),
        ];
        assert!((slope(&pts).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(slope(&pts[..1]), None);
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }
    use proptest::prelude::*;

    #[test]
    fn quantiles_match_type7_on_one_to_ten() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = summarize(&v).unwrap();
        assert_eq!(s.count, 10);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 10.0);
        assert_eq!(s.median, 5.5);
        assert_eq!(s.p25, 3.25);
        assert_eq!(s.p75, 7.75);
        assert!((s.p99 - 9.91).abs() < 1e-12);
        assert!((s.p1 - 1.09).abs() < 1e-12);
        assert_eq!(s.mean, 5.5);
        // Var of 1..10 with n-1 = 82.5 / 9.
        assert!((s.stddev - (82.5f64 / 9.0).sqrt()).abs() < 1e-12);
        // |x - 5.5| = 4.5,3.5,..,0.5 twice: median 2.5.
        assert_eq!(s.mad, 2.5);
    }

    #[test]
    fn median_ci_ranks_match_published_tables() {
        // Conover's table for 95%: n=10 -> x(2)..x(9); n=20 -> x(6)..x(15); n=100 -> x(40)..x(61).
        assert_eq!(median_ci_ranks(10, 0.95), (1, 8));
        assert_eq!(median_ci_ranks(20, 0.95), (5, 14));
        assert_eq!(median_ci_ranks(100, 0.95), (39, 60));
        // Too few samples for a 95% interval: whole range.
        assert_eq!(median_ci_ranks(5, 0.95), (0, 4));
        assert_eq!(median_ci_ranks(1, 0.95), (0, 0));
    }

    #[test]
    fn welford_is_stable_on_large_close_values() {
        let v = [1e12 + 4.0, 1e12 + 7.0, 1e12 + 13.0, 1e12 + 16.0];
        let (m, sd) = mean_stddev(&v);
        assert_eq!(m, 1e12 + 10.0);
        assert!((sd - 30f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn tukey_counts_mild_and_severe_separately() {
        // q1 = 2.25 (of 1..=8 plus two), build explicitly.
        let mut v: Vec<f64> = (1..=20).map(f64::from).collect();
        // q1 = 5.75, q3 = 15.25, iqr = 9.5 for 1..=20; after pushes quartiles move a little.
        v.push(40.0); // beyond 1.5 IQR, inside 3 IQR
        v.push(100.0); // beyond 3 IQR
        let o = tukey_outliers(&v);
        assert_eq!(o, Outliers { mild: 1, severe: 1 });
    }

    #[test]
    fn empty_has_no_summary_and_relative_width_of_zero_median_is_infinite() {
        assert!(summarize(&[]).is_none());
        let s = summarize(&[0.0, 0.0, 0.0]).unwrap();
        assert!(relative_ci_halfwidth(&s).is_infinite());
    }

    proptest! {
        #[test]
        fn quantiles_are_ordered_and_ci_contains_median(v in prop::collection::vec(-1e6f64..1e6, 1..400)) {
            let s = summarize(&v).unwrap();
            let chain = [s.min, s.p1, s.p5, s.p25, s.median, s.p75, s.p95, s.p99, s.max];
            for w in chain.windows(2) {
                prop_assert!(w[0] <= w[1]);
            }
            prop_assert!(s.ci95[0] <= s.median && s.median <= s.ci95[1]);
            prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
            prop_assert!(s.stddev >= 0.0 && s.mad >= 0.0);
        }

        #[test]
        fn shifting_shifts_every_location_statistic(v in prop::collection::vec(0f64..1e4, 1..200), c in -1e4f64..1e4) {
            let a = summarize(&v).unwrap();
            let shifted: Vec<f64> = v.iter().map(|x| x + c).collect();
            let b = summarize(&shifted).unwrap();
            let tol = 1e-6;
            for (x, y) in [(a.min, b.min), (a.p25, b.p25), (a.median, b.median), (a.p75, b.p75),
                           (a.p99, b.p99), (a.max, b.max), (a.mean, b.mean),
                           (a.ci95[0], b.ci95[0]), (a.ci95[1], b.ci95[1])] {
                prop_assert!((x + c - y).abs() < tol, "{} + {} != {}", x, c, y);
            }
            prop_assert!((a.stddev - b.stddev).abs() < 1e-6);
            prop_assert!((a.mad - b.mad).abs() < 1e-6);
        }
    }
}
