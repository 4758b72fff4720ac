//! Change points in a benchmark's history: where its level shifted between runs.
//!
//! Binary segmentation with a robust statistic, deterministic: in a segment, every split
//! leaving at least `MIN_SEGMENT` runs on each side is scored by the difference of the two
//! sides' means (of values clipped to the segment's median ± 3 noise) over its standard error,
//! the noise being estimated from successive differences (1.4826 * MAD of x[i] - x[i-1], over
//! sqrt 2), which a level shift barely moves. The best split counts when its score passes `THRESHOLD`, and both sides
//! are searched again. On 60 runs with this machine's run-to-run noise (~3%) a 10% shift scores
//! ~13 and pure noise stays under ~4; the threshold sits between (tests check both).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::base::stats;

/// Fewest runs on either side of a change.
pub const MIN_SEGMENT: usize = 5;
/// Score a split must pass to be called a change.
pub const THRESHOLD: f64 = 6.0;

/// A level shift: the first run of the new level, the levels on either side (medians of the
/// segments) and their ratio with a 95% bootstrap CI.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelShift {
    /// The first run of the new level.
    pub index: usize,
    /// The last run of the old level (gaps, runs without a median, are skipped).
    pub previous: usize,
    /// The old level: the median of its segment.
    pub before: f64,
    /// The new level: the median of its segment.
    pub after: f64,
    /// New over old.
    pub ratio: f64,
    /// The ratio's 95% bootstrap CI.
    pub ratio_ci: [f64; 2],
}

/// Noise of one value, from successive differences.
fn scale(x: &[f64]) -> f64 {
    let d: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
    if d.is_empty() {
        return 0.0;
    }
    stats::robust_sd(&d) / std::f64::consts::SQRT_2
}

/// The best split of `x` and its score. Values are first clipped to the segment's median ±
/// 3 noise (one wild run cannot make a change), then sides are compared by their means, which
/// place a shift to the run (medians of the sides stay flat near it and blur the place).
fn best_split(x: &[f64], noise: f64) -> Option<(usize, f64)> {
    let n = x.len();
    if n < 2 * MIN_SEGMENT || noise <= 0.0 {
        return None;
    }
    let m = stats::median(x);
    let c: Vec<f64> = x
        .iter()
        .map(|v| v.clamp(m - 3.0 * noise, m + 3.0 * noise))
        .collect();
    let total: f64 = c.iter().sum();
    let mut left = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for k in 1..n {
        left += c[k - 1];
        if k < MIN_SEGMENT || n - k < MIN_SEGMENT {
            continue;
        }
        let (nl, nr) = (k as f64, (n - k) as f64);
        let se = noise * (1.0 / nl + 1.0 / nr).sqrt();
        let score = ((total - left) / nr - left / nl).abs() / se;
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((k, score));
        }
    }
    best
}

/// 95% CI of median(after) / median(before), resampling each side (seeded: deterministic).
fn ratio_ci(before: &[f64], after: &[f64]) -> [f64; 2] {
    let mut rng = StdRng::seed_from_u64(0x0c4a_96e5);
    let pick = |v: &[f64], rng: &mut StdRng| {
        let s: Vec<f64> = (0..v.len())
            .map(|_| v[rng.random_range(0..v.len())])
            .collect();
        stats::median(&s)
    };
    let mut ratios: Vec<f64> = (0..2000)
        .map(|_| pick(after, &mut rng) / pick(before, &mut rng))
        .filter(|r| r.is_finite())
        .collect();
    ratios.sort_by(f64::total_cmp);
    if ratios.is_empty() {
        return [f64::NAN; 2];
    }
    [
        stats::quantile_sorted(&ratios, 0.025),
        stats::quantile_sorted(&ratios, 0.975),
    ]
}

/// Every change in `series` (NaN entries, runs where the benchmark was not measured, are
/// skipped; indices refer to `series`), in order.
pub fn find_changes(series: &[f64]) -> Vec<LevelShift> {
    let kept: Vec<usize> = (0..series.len())
        .filter(|&i| series[i].is_finite())
        .collect();
    let x: Vec<f64> = kept.iter().map(|&i| series[i]).collect();
    let noise = scale(&x);
    let mut cuts = Vec::new();
    let mut todo = vec![(0, x.len())];
    while let Some((a, b)) = todo.pop() {
        if let Some((k, score)) = best_split(&x[a..b], noise)
            && score > THRESHOLD
        {
            cuts.push(a + k);
            todo.push((a, a + k));
            todo.push((a + k, b));
        }
    }
    cuts.sort_unstable();
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(x.len()))
        .collect();
    cuts.iter()
        .enumerate()
        .map(|(j, &c)| {
            let (before, after) = (&x[bounds[j]..c], &x[c..bounds[j + 2]]);
            let (mb, ma) = (stats::median(before), stats::median(after));
            LevelShift {
                index: kept[c],
                previous: kept[c - 1],
                before: mb,
                after: ma,
                ratio: ma / mb,
                ratio_ci: ratio_ci(before, after),
            }
        })
        .collect()
}

/// A lasting change at the end of `series`, seen as it happens (`watch`): each of the last
/// `tail` values lies beyond the level before them, on the same side, by more than
/// `THRESHOLD` times the noise of one value (the noise `find_changes` uses, from successive
/// differences of the values before, so a shift within the tail cannot hide itself) and by
/// more than `band` (a fraction: the noise band comparisons use), or beyond every value before
/// them by twice the band. The values before must be
/// at least `MIN_SEGMENT`. `index` is the first value of the new level in `series`; the CI
/// is the bootstrap of the two sides' medians.
pub fn recent_change(series: &[f64], tail: usize, band: f64) -> Option<LevelShift> {
    let x: Vec<f64> = series.iter().copied().filter(|v| v.is_finite()).collect();
    if tail == 0 || x.len() < MIN_SEGMENT + tail {
        return None;
    }
    let (before, after) = x.split_at(x.len() - tail);
    let noise = scale(before);
    let level = stats::median(before);
    if level <= 0.0 {
        return None;
    }
    // One new value against the old level: its own noise and the level's uncertainty.
    let reach = (THRESHOLD * noise * (1.0 + 1.0 / before.len() as f64).sqrt()).max(band * level);
    // Or beyond every value of the old level by the band: one stray window among a few
    // widens the noise measured from their differences, never their range.
    let (lo, hi) = before
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let up = after
        .iter()
        .all(|v| v - level > reach || *v > hi * (1.0 + 2.0 * band));
    let down = after
        .iter()
        .all(|v| level - v > reach || *v < lo * (1.0 - 2.0 * band));
    if !(up || down) {
        return None;
    }
    let index = series
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .nth(before.len())
        .map(|(i, _)| i)?;
    let previous = series[..index].iter().rposition(|v| v.is_finite())?;
    let after_level = stats::median(after);
    Some(LevelShift {
        index,
        previous,
        before: level,
        after: after_level,
        ratio: after_level / level,
        ratio_ci: ratio_ci(before, after),
    })
}

/// What differs between two runs' environments, as "kernel a -> b": the machine's
/// (`machine_differences`), then the wrapper and the label.
pub fn env_differences(a: &crate::base::model::Run, b: &crate::base::model::Run) -> Vec<String> {
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    let mut d = machine_differences(a, b);
    for (what, x, y) in [
        ("wrapper", o(&a.wrapper), o(&b.wrapper)),
        ("label", o(&a.label), o(&b.label)),
    ] {
        if x != y {
            d.push(format!("{what} {x} -> {y}"));
        }
    }
    d
}

/// What differs between the machines two runs were measured on and what confined them, one
/// entry a fact of `machine_facts` ("THP enabled madvise -> always", "setting halt-poll-ns 0
/// -> 200000"), boot parameters as added, removed or changed. A fact either run did not record
/// (an older oscost, a file this machine lacks) is not named: it is not known to differ. A
/// comparison names these; its sides already say their wrapper and label.
pub fn machine_differences(
    a: &crate::base::model::Run,
    b: &crate::base::model::Run,
) -> Vec<String> {
    let (fa, fb) = (machine_facts(a), machine_facts(b));
    let mut d = Vec::new();
    for (name, x) in &fa {
        if name.starts_with("boot parameter ") {
            continue;
        }
        // A new release is a new build: the build line is said only within one release.
        if name == "kernel version" && a.env.kernel_release != b.env.kernel_release {
            continue;
        }
        if let Some((_, y)) = fb.iter().find(|(n, _)| n == name)
            && x != y
        {
            d.push(format!("{name} {x} -> {y}"));
        }
    }
    if let (Some(p), Some(q)) = (&a.env.boot_cmdline, &b.env.boot_cmdline) {
        d.extend(boot_parameter_differences(p, q));
    }
    d
}

/// Every recorded fact of a run's machine and confinement that two machines are compared by,
/// as (label, value), in the table's order (`analysis::facts`: the host, the kernel, the CPU,
/// each vulnerability, each kernel setting as it read when the run started, THP's modes, each
/// boot parameter, the frequency governor, the libc, the idle driver and governor, the kernel
/// config's digest and its cost-moving options, the confinement's aspects, oscost). Facts not
/// recorded are absent.
pub fn machine_facts(run: &crate::base::model::Run) -> Vec<(String, String)> {
    super::facts::facts(&run.env)
        .into_iter()
        .filter_map(|f| Some((f.label, f.compared?)))
        .collect()
}

/// Each boot parameter added, removed or changed between two command lines ("boot parameter
/// mitigations=off added", "boot parameter idle: poll -> halt").
pub fn boot_parameter_differences(a: &str, b: &str) -> Vec<String> {
    let params = |line: &str| -> Vec<(String, Option<String>)> {
        line.split_whitespace()
            .map(|w| match w.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (w.to_string(), None),
            })
            .collect()
    };
    let (pa, pb) = (params(a), params(b));
    let word = |k: &str, v: &Option<String>| match v {
        Some(v) => format!("{k}={v}"),
        None => k.to_string(),
    };
    let mut d = Vec::new();
    for (k, v) in &pa {
        match pb.iter().find(|(kb, _)| kb == k) {
            None => d.push(format!("boot parameter {} removed", word(k, v))),
            Some((_, w)) if w != v => d.push(format!(
                "boot parameter {k}: {} -> {}",
                v.as_deref().unwrap_or("(set)"),
                w.as_deref().unwrap_or("(set)")
            )),
            Some(_) => {}
        }
    }
    for (k, v) in &pb {
        if !pa.iter().any(|(ka, _)| ka == k) {
            d.push(format!("boot parameter {} added", word(k, v)));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_boot_parameter_thp_mode_or_setting_changed_is_named_exactly() {
        let base = crate::base::model::testdata::run();
        let mut a = base.clone();
        a.env.boot_cmdline = Some("BOOT_IMAGE=/vmlinuz ro quiet mitigations=auto".into());
        a.env.thp_enabled = Some("always [madvise] never".into());
        a.env.settings = [("halt-poll-ns".to_string(), "0".to_string())].into();
        let mut b = a.clone();
        assert!(machine_differences(&a, &b).is_empty());
        b.env.boot_cmdline = Some("BOOT_IMAGE=/vmlinuz ro quiet mitigations=off".into());
        assert_eq!(
            machine_differences(&a, &b),
            vec!["boot parameter mitigations: auto -> off"]
        );
        let mut c = a.clone();
        c.env.thp_enabled = Some("[always] madvise never".into());
        assert_eq!(
            machine_differences(&a, &c),
            vec!["THP enabled madvise -> always"]
        );
        let mut e = a.clone();
        e.env
            .settings
            .insert("halt-poll-ns".into(), "200000".into());
        assert_eq!(
            machine_differences(&a, &e),
            vec!["setting halt-poll-ns 0 -> 200000"]
        );
        // A fact one run did not record is not named.
        let mut old = a.clone();
        old.env.settings.clear();
        old.env.thp_enabled = None;
        assert!(machine_differences(&old, &e).is_empty());
        assert_eq!(
            boot_parameter_differences("ro quiet", "ro nosmt"),
            vec!["boot parameter quiet removed", "boot parameter nosmt added"]
        );
    }

    /// A history with this machine's run-to-run noise (~3% sd), seeded.
    fn noisy(n: usize, seed: u64, level: impl Fn(usize) -> f64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                // Sum of uniforms: roughly normal, sd 3%.
                let u: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
                level(i) * (1.0 + 0.03 * u)
            })
            .collect()
    }

    #[test]
    fn a_ten_percent_shift_is_found_within_one_run() {
        for seed in 0..20 {
            let x = noisy(60, seed, |i| if i < 30 { 200.0 } else { 220.0 });
            let c = find_changes(&x);
            assert_eq!(c.len(), 1, "seed {seed}: {c:?}");
            assert!(
                c[0].index.abs_diff(30) <= 1,
                "seed {seed}: at {}",
                c[0].index
            );
            assert!((c[0].ratio - 1.1).abs() < 0.04, "{c:?}");
            assert!(c[0].ratio_ci[0] > 1.0 && c[0].ratio_ci[1] < 1.25, "{c:?}");
        }
    }

    #[test]
    fn pure_noise_has_no_change_and_gaps_are_skipped() {
        for seed in 100..140 {
            let x = noisy(60, seed, |_| 200.0);
            assert!(find_changes(&x).is_empty(), "seed {seed}");
        }
        let mut x = noisy(40, 7, |i| if i < 20 { 100.0 } else { 130.0 });
        x.insert(5, f64::NAN);
        let c = find_changes(&x);
        assert_eq!(c.len(), 1);
        assert!(c[0].index.abs_diff(21) <= 1, "{c:?}");
        assert!(find_changes(&[1.0, 2.0]).is_empty());
    }

    #[test]
    fn a_lasting_jump_is_seen_after_two_values_and_noise_is_not() {
        for seed in 0..20 {
            // 30 windows at the old level, then two at +40%: called, at the first of them.
            let mut x = noisy(30, seed, |_| 186.0);
            x.extend([186.0 * 1.4, 186.0 * 1.41]);
            let c = recent_change(&x, 2, 0.02).unwrap_or_else(|| panic!("seed {seed}"));
            assert_eq!(c.index, 30);
            assert!((c.ratio - 1.4).abs() < 0.06, "{c:?}");
            // One window up is not yet lasting.
            assert!(recent_change(&x[..31], 2, 0.02).is_none(), "seed {seed}");
            // 200 windows of noise, looked at after each: never called.
            let quiet = noisy(200, seed + 100, |_| 186.0);
            for end in 10..=quiet.len() {
                assert!(
                    recent_change(&quiet[..end], 2, 0.02).is_none(),
                    "seed {seed} at {end}"
                );
            }
        }
        // Two levels 8% apart, as fresh processes sit at: not a change either.
        let two: Vec<f64> = (0..40)
            .map(|i| if i % 3 == 0 { 200.0 } else { 216.0 })
            .collect();
        for end in 10..=two.len() {
            assert!(recent_change(&two[..end], 2, 0.02).is_none(), "at {end}");
        }
        assert!(recent_change(&[1.0, 2.0], 2, 0.02).is_none());
    }
}
