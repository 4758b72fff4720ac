//! The block bootstrap: confidence intervals for medians of samples that are not independent.
//! On a shared machine the cost moves in phases of 50-500 ms, so neighbouring samples share the
//! machine's state; resampling single samples gives intervals far narrower than the variation
//! between runs. Here samples are grouped into blocks of consecutive samples (about 50 ms each),
//! blocks into rounds (the repetitions of `ab`), and the resampling is done rounds first, then
//! blocks within each chosen round.

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

/// Rounds (clusters of blocks) of one side of a comparison.
pub type Rounds = Vec<Vec<Vec<f64>>>;

/// Two-stage resample: rounds with replacement, then blocks within each chosen round.
fn resample_median(rng: &mut StdRng, rounds: &Rounds, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    for _ in 0..rounds.len() {
        let blocks = &rounds[rng.random_range(0..rounds.len())];
        for _ in 0..blocks.len() {
            buf.extend_from_slice(&blocks[rng.random_range(0..blocks.len())]);
        }
    }
    let mid = buf.len() / 2;
    let (_, m, _) = buf.select_nth_unstable_by(mid, f64::total_cmp);
    let m = *m;
    if buf.len().is_multiple_of(2) {
        let below = buf[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (m + below) / 2.0
    } else {
        m
    }
}

/// Block-bootstrap 95% CIs of the cand/base and cand-base medians. Rounds of `ab` are
/// resampled as wholes first: a phase of the machine can span a round, and the interval must
/// carry that.
pub fn ratio_and_difference(
    base: &Rounds,
    cand: &Rounds,
    resamples: usize,
    seed: u64,
) -> ([f64; 2], [f64; 2]) {
    if base.is_empty() || cand.is_empty() {
        return ([f64::NAN; 2], [f64::NAN; 2]);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ratios = Vec::with_capacity(resamples);
    let mut diffs = Vec::with_capacity(resamples);
    let mut buf = Vec::new();
    for _ in 0..resamples {
        let mb = resample_median(&mut rng, base, &mut buf);
        let mc = resample_median(&mut rng, cand, &mut buf);
        diffs.push(mc - mb);
        if mb != 0.0 {
            ratios.push(mc / mb);
        }
    }
    let ci = |v: Vec<f64>| {
        if v.is_empty() {
            return [f64::NAN, f64::NAN];
        }
        let s = super::sorted_copy(&v);
        [
            super::quantile_sorted(&s, 0.025),
            super::quantile_sorted(&s, 0.975),
        ]
    };
    (ci(ratios), ci(diffs))
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
}
