//! The block bootstrap: confidence intervals for medians of samples that are not independent.
//! On a shared machine the cost moves in phases of 50-500 ms, so neighbouring samples share the
//! machine's state; resampling single samples gives intervals far narrower than the variation
//! between runs. Here samples are grouped into blocks of consecutive samples (about 50 ms each),
//! blocks into repetitions (each a fresh process), and the resampling is done repetitions first,
//! then blocks within each chosen repetition.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Consecutive samples spanning about this much time form one bootstrap block.
pub const BLOCK_NS: f64 = 50_000_000.0;
/// Fewer time blocks than this and the series is cut into this many equal blocks instead.
const MIN_BLOCKS: usize = 8;

/// A result's samples cut into blocks of consecutive samples lasting about `BLOCK_NS` each
/// (a sample lasts its value times the batch size), thinned evenly to at most `max` samples.
///
/// Why blocks: on a shared machine the cost moves in phases of 50-500 ms, so neighbouring
/// samples are not independent. A bootstrap that resamples single samples gives intervals of a
/// tenth of a percent that two identical runs then miss by five; resampling blocks carries the
/// phase-to-phase variation into the interval.
pub fn blocks(samples: &[f64], batch: u64, max: usize) -> Vec<Vec<f64>> {
    let n = samples.len();
    if n == 0 {
        return vec![];
    }
    let stride = n.div_ceil(max.max(1));
    let mut out: Vec<Vec<f64>> = vec![];
    let mut cur = vec![];
    let mut acc = 0.0;
    for (i, &x) in samples.iter().enumerate() {
        if i % stride == 0 {
            cur.push(x);
        }
        acc += x.max(0.0) * batch.max(1) as f64;
        if acc >= BLOCK_NS && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
            acc = 0.0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    if out.len() < MIN_BLOCKS {
        let kept: Vec<f64> = out.concat();
        let per = kept.len().div_ceil(MIN_BLOCKS).max(1);
        out = kept.chunks(per).map(<[f64]>::to_vec).collect();
    }
    out
}

/// A block: consecutive samples of one repetition (about 50 ms of them), resampled whole.
pub type Block = Vec<f64>;
/// One repetition (one fresh process) cut into blocks.
pub type RepetitionBlocks = Vec<Block>;
/// Every repetition of one side of a comparison: the two levels the hierarchical bootstrap
/// resamples (repetitions, then blocks within each).
pub type Repetitions = Vec<RepetitionBlocks>;

/// Two-stage resampling of a side's medians: repetitions with replacement, then blocks within
/// each chosen repetition, and the median of everything drawn.
///
/// Why not gather the drawn samples and select their median: that costs a pass over up to
/// `max_samples` values per resample, and a comparison of two default runs spent 1.9 s in it.
/// A resample is only a weight per block (how often it was drawn), so the samples are sorted
/// once and `table` holds, for every global rank g, how many of each block's samples rank at
/// or below g. An order statistic of a resample is then a binary search over g on the dot
/// product of that row with the weights: O(blocks · log n) instead of O(n), with the same
/// draws from the generator and the same median to the bit.
pub struct MedianResampler {
    /// Every sample, ascending.
    sorted: Vec<f64>,
    /// Row g (`blocks` entries): per block, its samples with global rank <= g.
    table: Vec<u32>,
    /// Samples per block.
    sizes: Vec<u32>,
    /// First block of each repetition, and one past the last.
    rep_starts: Vec<usize>,
}

impl MedianResampler {
    /// `None` when memory for its table (samples x blocks counts) cannot be had: the caller
    /// falls back to an interval that needs none, rather than the process aborting with a
    /// measured run in memory.
    pub fn new(reps: &Repetitions) -> Option<MedianResampler> {
        let mut rep_starts = vec![0];
        let mut tagged: Vec<(f64, usize)> = Vec::new();
        let mut sizes = Vec::new();
        for r in reps {
            for b in r {
                tagged.extend(b.iter().map(|&x| (x, sizes.len())));
                sizes.push(b.len() as u32);
            }
            rep_starts.push(sizes.len());
        }
        tagged.sort_by(|a, b| a.0.total_cmp(&b.0));
        let nb = sizes.len();
        let cells = tagged.len().checked_mul(nb)?;
        let mut table: Vec<u32> = Vec::new();
        table.try_reserve_exact(cells).ok()?;
        table.resize(cells, 0);
        let mut row = vec![0u32; nb];
        for (g, &(_, b)) in tagged.iter().enumerate() {
            row[b] += 1;
            table[g * nb..(g + 1) * nb].copy_from_slice(&row);
        }
        Some(MedianResampler {
            sorted: tagged.into_iter().map(|(x, _)| x).collect(),
            table,
            sizes,
            rep_starts,
        })
    }

    fn repetitions(&self) -> usize {
        self.rep_starts.len() - 1
    }

    /// The smallest sample value whose count at or below it, under `weights`, reaches `need`.
    fn order_stat(&self, weights: &[u32], need: u64) -> f64 {
        let nb = self.sizes.len();
        let count = |g: usize| -> u64 {
            self.table[g * nb..(g + 1) * nb]
                .iter()
                .zip(weights)
                .map(|(&c, &w)| u64::from(c) * u64::from(w))
                .sum()
        };
        let (mut lo, mut hi) = (0, self.sorted.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if count(mid) >= need {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        self.sorted[lo]
    }

    /// One resample's median (NaN when there is nothing to draw). `weights` is scratch space.
    pub fn draw(&self, rng: &mut StdRng, weights: &mut Vec<u32>) -> f64 {
        let r = self.repetitions();
        if r == 0 || self.sorted.is_empty() {
            return f64::NAN;
        }
        weights.clear();
        weights.resize(self.sizes.len(), 0);
        for _ in 0..r {
            let k = rng.random_range(0..r);
            let (first, end) = (self.rep_starts[k], self.rep_starts[k + 1]);
            for _ in first..end {
                weights[first + rng.random_range(0..end - first)] += 1;
            }
        }
        let total: u64 = weights
            .iter()
            .zip(&self.sizes)
            .map(|(&w, &s)| u64::from(w) * u64::from(s))
            .sum();
        let mid = total / 2;
        let m = self.order_stat(weights, mid + 1);
        if total.is_multiple_of(2) {
            let below = self.order_stat(weights, mid);
            (m + below) / 2.0
        } else {
            m
        }
    }
}

/// What the bootstrap says about a difference between two sides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    /// 95% CI of cand/base medians.
    pub ratio_ci: [f64; 2],
    /// 95% CI of cand - base medians.
    pub diff_ci: [f64; 2],
    /// Two-sided p-value of "no difference" from the same resampling: twice the share of
    /// resampled ratios on the far side of 1 (at least 1/resamples).
    pub p: f64,
}

/// The factor that turns a percentile-bootstrap interval over `r` clusters into a Student-t
/// interval (see `hierarchical_median_ci`); 1 below the minimum repetitions (older runs
/// resampled blocks of one stream, where the factor does not apply).
pub fn small_sample_expansion(r: usize) -> f64 {
    if r < MIN_REPETITIONS {
        1.0
    } else {
        t975(r - 1) / 1.959_964 * (r as f64 / (r - 1) as f64).sqrt()
    }
}

/// Hierarchical bootstrap of the cand/base and cand-base medians: repetitions (or `ab`'s
/// repetitions) resampled as wholes first, then blocks within them, each side on its own. The
/// intervals are expanded around `point` (ratio, difference) for the number of repetitions,
/// as a run's own CI is, so a comparison and the two runs' CIs tell one story.
pub fn ratio_and_difference(
    base: &Repetitions,
    cand: &Repetitions,
    point: (f64, f64),
    resamples: usize,
    seed: u64,
) -> Difference {
    let none = Difference {
        ratio_ci: [f64::NAN; 2],
        diff_ci: [f64::NAN; 2],
        p: f64::NAN,
    };
    if base.is_empty() || cand.is_empty() || resamples == 0 {
        return none;
    }
    let k = small_sample_expansion(base.len().min(cand.len()));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ratios = Vec::with_capacity(resamples);
    let mut diffs = Vec::with_capacity(resamples);
    let (Some(base), Some(cand)) = (MedianResampler::new(base), MedianResampler::new(cand)) else {
        return none;
    };
    let mut buf = Vec::new();
    for _ in 0..resamples {
        let mb = base.draw(&mut rng, &mut buf);
        let mc = cand.draw(&mut rng, &mut buf);
        diffs.push(point.1 + k * (mc - mb - point.1));
        // Ratios are expanded on a log scale: a slowdown interval stays positive and keeps
        // its asymmetry (x2 and x0.5 are the same distance from x1).
        if mb != 0.0 && mc / mb > 0.0 && point.0 > 0.0 {
            ratios.push(point.0 * (k * (mc / mb / point.0).ln()).exp());
        }
    }
    let ci = |v: &[f64]| {
        if v.is_empty() {
            return [f64::NAN, f64::NAN];
        }
        let s = super::sorted_copy(v);
        [
            super::quantile_sorted(&s, 0.025),
            super::quantile_sorted(&s, 0.975),
        ]
    };
    let below = ratios.iter().filter(|&&r| r <= 1.0).count() as f64;
    let above = ratios.iter().filter(|&&r| r >= 1.0).count() as f64;
    let n = ratios.len().max(1) as f64;
    Difference {
        ratio_ci: ci(&ratios),
        diff_ci: ci(&diffs),
        p: (2.0 * below.min(above) / n).clamp(1.0 / n, 1.0),
    }
}

/// Repetitions needed before an interval is given: with fewer, the spread between processes
/// is not estimated at all and any interval would be the within-process one in disguise.
pub const MIN_REPETITIONS: usize = 5;

/// Student's t quantile (97.5%) for `df` degrees of freedom.
fn t975(df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    StudentsT::new(0.0, 1.0, df.max(1) as f64).map_or(f64::NAN, |t| t.inverse_cdf(0.975))
}

/// 95% CI of the median of all samples, from a hierarchical bootstrap: repetitions resampled
/// with replacement, then blocks within each chosen repetition (Kalibera & Jones 2013's
/// multi-level resampling). `None` with fewer than `MIN_REPETITIONS` repetitions, or where the
/// median is not a positive cost (at or below the loop's baseline: no interval of a cost).
///
/// A percentile bootstrap over R clusters underestimates the between-cluster variance by
/// (R-1)/R and uses normal quantiles where R-1 degrees of freedom call for Student's t; with the
/// 5-10 repetitions a quick run affords that makes intervals ~1.2-1.6x too narrow. So the
/// interval's distances from `point` are scaled by t(R-1)/1.96 * sqrt(R/(R-1)), which turns it
/// into the t interval when the repetitions' levels are normal, and vanishes as R grows.
///
/// The union of that and `repetition_t_interval` is taken. On a host that moves between two
/// levels (getpid at ~156 or ~220 ns, for 100 ms at a time) the pooled median of a resample
/// sits in one mode or the gap and its bootstrap distribution is lumpy; across 8 runs of 10
/// repetitions each the bootstrap interval alone held another run's median in 62-80% of pairs,
/// the union in 87% (docs/design-notes.md, "Repetitions and the CI").
///
/// Only possible numbers: both are expanded on the log scale (a cost is a positive, skewed
/// quantity; x2 and x0.5 are the same distance), so a bound is never at or below zero and the
/// interval is asymmetric where the levels are; and the result is never wider than the
/// distribution-free interval of the repetitions' levels (`levels_interval`): a bound beyond
/// every level a fresh process measured is not something the data support. A symmetric
/// interval around a drifting level printed `238 ns [-362, 839]` (docs/design-notes.md,
/// "Only possible numbers").
pub fn hierarchical_median_ci(
    reps: &Repetitions,
    point: f64,
    resamples: usize,
    seed: u64,
) -> Option<[f64; 2]> {
    if point.is_nan() || point <= 0.0 {
        return None;
    }
    if reps.len() < MIN_REPETITIONS {
        return None;
    }
    let levels = levels(reps);
    let [t_lo, t_hi] = t_interval(&levels, point);
    // No memory for the bootstrap's table: the t interval alone, which needs none.
    let [lo, hi] = match expanded_bootstrap_ci(reps, point, resamples, seed) {
        Some([lo, hi]) => [lo.min(t_lo), hi.max(t_hi)],
        None => [t_lo, t_hi],
    };
    let [l_lo, l_hi] = levels_interval(&levels);
    // The pooled median always lies within the levels' range, but the rank interval of many
    // levels can leave it out: the point stays inside its own interval.
    let (lo, hi) = (lo.max(l_lo).min(point), hi.min(l_hi).max(point));
    // A level at or below zero (a cost lost in the loop's baseline) leaves the lower bound to
    // the lowest positive figure measured, never to zero.
    let lowest_positive = levels
        .iter()
        .copied()
        .filter(|&l| l > 0.0)
        .fold(point, f64::min);
    Some([if lo > 0.0 { lo } else { lowest_positive }, hi])
}

/// Each repetition's level: the median of its samples.
pub fn levels(reps: &Repetitions) -> Vec<f64> {
    reps.iter().map(|b| super::median(&b.concat())).collect()
}

/// The distribution-free 95% interval of the median of the repetitions' levels: order
/// statistics of the levels from the binomial (`median_ci_ranks`); with fewer than six levels
/// their whole range, which then covers with probability 1 - 2^(1-R) (93.75% at R = 5). It
/// assumes nothing of the levels' shape, so it bounds an interval whose t or bootstrap
/// expansion ran past anything measured.
pub fn levels_interval(levels: &[f64]) -> [f64; 2] {
    if levels.is_empty() {
        return [f64::NEG_INFINITY, f64::INFINITY];
    }
    let sorted = super::sorted_copy(levels);
    let (a, b) = super::median_ci_ranks(sorted.len(), 0.95);
    [sorted[a], sorted[b]]
}

/// `point` moved `k` times as far from `at` on the log scale where both are positive, else on
/// the linear scale.
fn expand(point: f64, at: f64, k: f64) -> f64 {
    if point > 0.0 && at > 0.0 {
        point * (k * (at / point).ln()).exp()
    } else {
        point + k * (at - point)
    }
}

/// The bootstrap half of `hierarchical_median_ci`: the percentile interval of resampled
/// medians, its distances from `point` expanded for the number of repetitions (on the log
/// scale, `expand`).
fn expanded_bootstrap_ci(
    reps: &Repetitions,
    point: f64,
    resamples: usize,
    seed: u64,
) -> Option<[f64; 2]> {
    let r = reps.len();
    if r < MIN_REPETITIONS {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let resampler = MedianResampler::new(reps)?;
    let mut buf = Vec::new();
    let mut meds: Vec<f64> = (0..resamples)
        .map(|_| resampler.draw(&mut rng, &mut buf))
        .collect();
    meds.sort_by(f64::total_cmp);
    let lo = super::quantile_sorted(&meds, 0.025).min(point);
    let hi = super::quantile_sorted(&meds, 0.975).max(point);
    let k = small_sample_expansion(r);
    Some([expand(point, lo, k), expand(point, hi, k)])
}

/// Kalibera & Jones's top-level interval from the repetitions' levels (each repetition, a fresh
/// process, is one draw of the level), taken on the log scale: `point` x/÷ exp(t(R-1) · s / √R),
/// where s is the spread (`repetition_spread`) of the levels' logarithms. Where a level is not
/// positive the log is undefined and it is the linear `point` ± t(R-1) · s / √R. `None` with
/// fewer than `MIN_REPETITIONS` repetitions.
///
/// Why the log scale: a cost's repetitions drift by factors (a slower phase of the host
/// multiplies every operation), and their spread is skewed upward; the same spread taken
/// linearly put the lower bound below zero whenever one level sat 3x above the rest.
pub fn repetition_t_interval(reps: &Repetitions, point: f64) -> Option<[f64; 2]> {
    (reps.len() >= MIN_REPETITIONS).then(|| t_interval(&levels(reps), point))
}

/// `repetition_t_interval` of the levels already taken.
fn t_interval(levels: &[f64], point: f64) -> [f64; 2] {
    let r = levels.len();
    let t = t975(r - 1) / (r as f64).sqrt();
    if point > 0.0 && levels.iter().all(|&m| m > 0.0) {
        let logs: Vec<f64> = levels.iter().map(|m| m.ln()).collect();
        let h = t * repetition_spread(&logs);
        return [point * (-h).exp(), point * h.exp()];
    }
    let h = t * repetition_spread(levels);
    [point - h, point + h]
}

/// The spread of the repetitions' medians for the t interval: their robust standard deviation
/// (1.4826 MAD, the spread a departing repetition is measured against), unless the ones beyond
/// 3 robust SDs of the median are too many to set aside, when it is the plain standard
/// deviation, their distance included.
///
/// Why robust: one repetition of ten slowed 35% by a burst of load (named in a note, as it
/// should be) moves the median of all samples by a fraction of a percent, yet its square in a
/// plain standard deviation made pipe-proc 16.5% and fault-write 20-26% wide on a quiet host
/// (2026-11-24). Why not always: repetitions can sit at one of two levels (getpid at 137 or
/// 149 ns there, as the host switched for hundreds of ms at a time), and the median of all
/// samples follows whichever level holds more than half of them. So the outlying repetitions
/// are set aside only when a sign test says they are fewer than half of all repetitions
/// (P(Binomial(R, 1/2) <= k) < 2.5%): 1 of 10 is set aside, 1 of 5 or 2 of 10 are not, and
/// then the interval spans the other level. Replayed on that day's check-ci batches:
/// docs/design-notes.md, "Repetitions and the CI".
pub fn repetition_spread(medians: &[f64]) -> f64 {
    match robust_spread(medians) {
        (_, true) => super::mean_stddev(medians).1,
        (robust, false) => robust,
    }
}

/// Whether the repetitions beyond 3 robust SDs of the median could be half of all of them (a
/// sign test: P(Binomial(R, 1/2) <= k) >= 2.5%): then `repetition_spread` is the plain standard
/// deviation, and more repetitions can still tell (the scheduler's `undecided_max`).
pub fn outliers_could_be_half(medians: &[f64]) -> bool {
    !medians.is_empty() && robust_spread(medians).1
}

/// The robust standard deviation of `medians` (1.4826 MAD) and whether the ones beyond 3 of
/// it could be half of them (`outliers_could_be_half`).
fn robust_spread(medians: &[f64]) -> (f64, bool) {
    use statrs::distribution::{Binomial, DiscreteCDF};
    let center = super::median(medians);
    let robust = 1.4826 * super::mad_of(medians, center);
    let outlying = medians
        .iter()
        .filter(|&&m| (m - center).abs() > 3.0 * robust)
        .count();
    let could_be_half = outlying > 0
        && Binomial::new(0.5, medians.len() as u64).is_ok_and(|b| b.cdf(outlying as u64) >= 0.025);
    (robust, could_be_half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_follow_time_and_fall_back_to_counts() {
        // 1000 samples of 1 ms each (batch 1): 20 blocks of 50 ms, 50 samples each.
        let b = blocks(&vec![1_000_000.0; 1000], 1, 10_000);
        assert_eq!(b.len(), 20);
        assert!(b.iter().all(|x| x.len() == 50));
        // Thinning keeps at most `max` samples in order.
        let b = blocks(&(0..1000).map(f64::from).collect::<Vec<_>>(), 1, 100);
        assert_eq!(b.concat().len(), 100);
        // Too short for time blocks: eight blocks by count.
        let b = blocks(&vec![10.0; 80], 1, 10_000);
        assert_eq!(b.len(), 8);
        assert!(blocks(&[], 1, 10).is_empty());
    }

    /// Repetitions of `per` samples each around level `1000 + offset(i)`, with a little
    /// deterministic jitter inside each.
    fn reps(levels: &[f64], per: usize) -> Repetitions {
        levels
            .iter()
            .map(|&l| {
                let v: Vec<f64> = (0..per).map(|j| l + ((j * 37) % 11) as f64 - 5.0).collect();
                blocks(&v, 1, usize::MAX)
            })
            .collect()
    }

    fn width(ci: [f64; 2]) -> f64 {
        ci[1] - ci[0]
    }

    #[test]
    fn offsets_between_processes_widen_the_interval_and_none_narrow_it() {
        let flat = reps(&[1000.0; 8], 400);
        let spread = reps(
            &[980.0, 1020.0, 995.0, 1010.0, 990.0, 1005.0, 1015.0, 985.0],
            400,
        );
        let wider = reps(
            &[960.0, 1040.0, 990.0, 1020.0, 980.0, 1010.0, 1030.0, 970.0],
            400,
        );
        let ci = |r: &Repetitions| hierarchical_median_ci(r, 1000.0, 2000, 7).unwrap();
        let (f, s, w) = (ci(&flat), ci(&spread), ci(&wider));
        assert!(
            width(f) < width(s) && width(s) < width(w),
            "{f:?} {s:?} {w:?}"
        );
        // No offsets: only the jitter inside a repetition (±5) is left, and the interval is
        // as narrow as the samples' own median allows.
        assert!(width(f) <= 4.0, "{f:?}");
        // Offsets with a spread of ~±15: the interval covers most of the true level's doubt
        // (a t interval on 8 levels with sd 14 is about ±12) and holds the point.
        assert!(width(s) > 10.0 && s[0] < 1000.0 && s[1] > 1000.0, "{s:?}");
    }

    #[test]
    fn the_interval_covers_the_t_interval_of_the_repetitions_levels() {
        // Two levels, as on a host that switches between states: whatever the bootstrap's
        // lumpy distribution gives, the interval is at least the t interval of the levels.
        let levels = [
            1000.0, 1400.0, 1000.0, 1000.0, 1400.0, 1000.0, 1400.0, 1000.0,
        ];
        let r = reps(&levels, 200);
        let logs: Vec<f64> = levels.iter().map(|l: &f64| l.ln()).collect();
        let (_, sd) = crate::base::stats::mean_stddev(&logs);
        let h = t975(7) * sd / 8f64.sqrt();
        let m = 1150.0;
        let t = repetition_t_interval(&r, m).unwrap();
        // On the log scale: m x/÷ exp(h), so the upper side is the longer.
        assert!(
            (t[0] - m * (-h).exp()).abs() < 1.0,
            "{t:?} vs x/÷{}",
            h.exp()
        );
        assert!((t[1] - m * h.exp()).abs() < 1.0, "{t:?} vs x/÷{}", h.exp());
        assert!(t[1] - m > m - t[0], "{t:?}");
        let ci = hierarchical_median_ci(&r, m, 2000, 3).unwrap();
        // ... bounded by the levels measured (1000 and 1400).
        assert!(
            ci[0] <= t[0].max(1000.0) && ci[1] >= t[1].min(1400.0),
            "{ci:?} {t:?}"
        );
    }

    #[test]
    fn a_cost_interval_is_positive_and_within_the_levels_measured() {
        // clock_gettime by system call on a drifting host: most repetitions near 238 ns, two
        // several times slower. The linear t interval was [-362, 839].
        let levels = [
            238.0, 240.0, 236.0, 1900.0, 241.0, 239.0, 2600.0, 237.0, 242.0, 238.0,
        ];
        let r = reps(&levels, 200);
        let ci = hierarchical_median_ci(&r, 239.0, 2000, 5).unwrap();
        assert!(ci[0] >= 236.0 - 5.0, "{ci:?}");
        assert!(ci[1] <= 2600.0 + 5.0, "{ci:?}");
        assert!(ci[0] <= 239.0 && 239.0 <= ci[1], "{ci:?}");
        // A level lost in the baseline (at or below zero) leaves the bound to a positive one.
        let r = reps(&[-20.0, 12.0, 14.0, 13.0, 15.0], 100);
        let ci = hierarchical_median_ci(&r, 13.0, 500, 5).unwrap();
        assert!(ci[0] > 0.0 && ci[0] <= 13.0 && ci[1] >= 13.0, "{ci:?}");
        // No interval for a cost that is not positive.
        assert!(hierarchical_median_ci(&r, 0.0, 500, 5).is_none());
    }

    #[test]
    fn one_wild_repetition_widens_the_interval_by_what_it_moves_the_median() {
        // Ten repetitions with a spread of ~±10, then the same with one at +35% (a burst of
        // load on one process): the median of all samples barely moves, and neither may the
        // interval by much; with a plain standard deviation it was 5x wider.
        let calm = [
            990.0, 1010.0, 1000.0, 995.0, 1005.0, 1012.0, 988.0, 1003.0, 997.0, 1001.0,
        ];
        let mut wild = calm;
        wild[4] = 1350.0;
        let ci = |l: &[f64]| hierarchical_median_ci(&reps(l, 300), 1000.0, 2000, 9).unwrap();
        let (c, w) = (ci(&calm), ci(&wild));
        assert!(width(w) < 2.0 * width(c), "{c:?} {w:?}");
        assert!(width(w) > width(c) * 0.9, "{c:?} {w:?}");
        let (_, sd) = crate::base::stats::mean_stddev(&wild);
        let plain = 2.0 * t975(9) * sd / 10f64.sqrt();
        assert!(
            width(w) * 3.0 < plain,
            "{w:?} vs a plain t interval {plain}"
        );
    }

    #[test]
    fn outlying_repetitions_are_set_aside_only_when_they_must_be_a_minority() {
        // 1 of 10 at another level: a minority by a sign test; the robust spread.
        let mut ten = [
            100.0, 102.0, 98.0, 101.0, 99.0, 100.5, 99.5, 101.5, 98.5, 100.0,
        ];
        ten[3] = 130.0;
        let robust = crate::base::stats::robust_sd(&ten);
        assert!(robust < 2.5 && repetition_spread(&ten) == robust, "{ten:?}");
        // 1 of 5 (getpid, one repetition of five at the other level) or 2 of 10: they could be
        // half of all repetitions, so their distance counts in full.
        let five = [137.5, 137.5, 137.5, 148.3, 137.5];
        let sd = crate::base::stats::mean_stddev(&five).1;
        assert_eq!(repetition_spread(&five), sd);
        ten[7] = 131.0;
        assert_eq!(
            repetition_spread(&ten),
            crate::base::stats::mean_stddev(&ten).1
        );
        // No outliers: the robust spread (0 when all agree).
        assert_eq!(repetition_spread(&[5.0; 6]), 0.0);
    }

    /// What `MedianResampler::draw` replaces: gather the drawn blocks, select their median.
    fn gathered_median(rng: &mut StdRng, reps: &Repetitions) -> f64 {
        let mut buf = Vec::new();
        for _ in 0..reps.len() {
            let blocks = &reps[rng.random_range(0..reps.len())];
            for _ in 0..blocks.len() {
                buf.extend_from_slice(&blocks[rng.random_range(0..blocks.len())]);
            }
        }
        let s = crate::base::stats::sorted_copy(&buf);
        let mid = s.len() / 2;
        if s.len().is_multiple_of(2) {
            (s[mid] + s[mid - 1]) / 2.0
        } else {
            s[mid]
        }
    }

    #[test]
    fn the_weighted_resampler_draws_the_very_medians_of_gathering_the_samples() {
        // Uneven repetitions and blocks, ties, odd and even totals.
        let mut noise = StdRng::seed_from_u64(11);
        let reps: Repetitions = (0..7)
            .map(|r| {
                (0..(3 + r % 4))
                    .map(|b| {
                        (0..(1 + (r * 5 + b * 3) % 9))
                            .map(|_| f64::from(noise.random_range(0..40u32)) * 0.5 + r as f64)
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let fast = MedianResampler::new(&reps).unwrap();
        let (mut a, mut b) = (StdRng::seed_from_u64(5), StdRng::seed_from_u64(5));
        let mut w = Vec::new();
        for _ in 0..500 {
            assert_eq!(fast.draw(&mut a, &mut w), gathered_median(&mut b, &reps));
        }
        assert!(
            MedianResampler::new(&vec![])
                .unwrap()
                .draw(&mut a, &mut w)
                .is_nan()
        );
    }

    proptest::proptest! {
        #[test]
        fn every_interval_of_positive_levels_is_positive_holds_the_point_and_stays_within_them(
            levels in proptest::collection::vec(1.0f64..1e6, 5..14),
            seed in 0u64..1000,
        ) {
            let r = reps(&levels, 40);
            let all: Vec<f64> = r.iter().flat_map(|x| x.concat()).collect();
            let point = crate::base::stats::median(&all);
            let [lo, hi] = hierarchical_median_ci(&r, point, 200, seed).unwrap();
            let (min, max) = crate::base::stats::extent(levels.iter().map(|l| l + 6.0));
            proptest::prop_assert!(lo > 0.0 && lo <= point && point <= hi, "{lo} {point} {hi}");
            proptest::prop_assert!(hi <= max, "{hi} above every level {levels:?}");
            proptest::prop_assert!(lo >= (min - 12.0).min(point), "{lo} below every level");
        }
    }

    #[test]
    fn too_few_repetitions_give_no_interval() {
        assert!(hierarchical_median_ci(&reps(&[1000.0; 4], 100), 1000.0, 200, 1).is_none());
        assert!(hierarchical_median_ci(&reps(&[1000.0; 5], 100), 1000.0, 200, 1).is_some());
    }

    #[test]
    fn the_small_sample_expansion_fades_as_repetitions_grow() {
        let k = |r: usize| t975(r - 1) / 1.959_964 * (r as f64 / (r - 1) as f64).sqrt();
        assert!((k(5) - 1.584).abs() < 0.01, "{}", k(5));
        assert!(k(10) < k(5) && k(100) < 1.02);
    }
}
