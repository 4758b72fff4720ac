//! Whether the machine itself changed speed during a run, told from the time order of its
//! repetitions. Every repetition is a fresh worker process, so on a machine that keeps its speed
//! the level one repetition sits at (its median against its result's median) says nothing about
//! the level of the repetition that ran next, whatever benchmark that was. When the machine's
//! speed moves (a host that switches the cost of entering the kernel between two levels for
//! hundreds of ms at a time, a neighbour loading the host, a slow warm-up), repetitions that ran
//! close together in time agree. The test is that agreement: the correlation of each
//! repetition's level with the next one's, in time order, against the same levels shuffled.
//!
//! Cases of one benchmark share a worker, so they count as one repetition (their median level):
//! two cases of one process agreeing is that process's layout, not the machine.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use std::collections::BTreeMap;

use super::repetitions::{repetition_medians, two_levels};
use crate::base::model::BenchResult;
use crate::base::stats;

/// Fewer worker repetitions than this cannot show a change of speed.
pub const MIN_POINTS: usize = 8;
/// Shuffles for the permutation test; fixed seed, so a run's note is reproducible.
const SHUFFLES: usize = 2000;
const SEED: u64 = 0x5eed_0f75;
/// Called a change of speed when the shuffled series reach the observed correlation this rarely…
const MAX_P: f64 = 0.01;
/// …and the correlation is at least this (a long run can make a trivial one significant).
const MIN_CORRELATION: f64 = 0.2;
/// Neighbouring repetitions whose median level describes the machine's speed at a moment.
const SMOOTHING: usize = 5;

/// What the time order of a run's repetitions says about the machine's speed.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedChange {
    /// Worker repetitions in the series.
    pub points: usize,
    /// Correlation of each repetition's level with the next one's.
    pub correlation: f64,
    /// Share of shuffled series whose correlation reached it (with the observed one counted).
    pub p_value: f64,
    /// How far the smoothed level moved, percent (slowest over fastest).
    pub moved_pct: f64,
    /// When the smoothed level was fastest and slowest, ms since the run started.
    pub fastest_ms: f64,
    pub slowest_ms: f64,
}

impl SpeedChange {
    pub fn changed(&self) -> bool {
        self.p_value <= MAX_P && self.correlation >= MIN_CORRELATION
    }
}

/// Each worker repetition's start (ms since the run started) and level (log of its median over
/// its result's median; the median of that over its cases), in time order.
pub fn levels_in_time(results: &[BenchResult]) -> Vec<(f64, f64)> {
    // The cases of one worker repetition carry its start time, copied, so equal bits.
    let mut by_worker: BTreeMap<u64, (f64, Vec<f64>)> = BTreeMap::new();
    for r in results.iter().filter(|r| r.repetitions.len() >= 2) {
        let middle = stats::median(&repetition_medians(r));
        if middle.is_nan() || middle <= 0.0 {
            continue;
        }
        for rep in r.repetitions.iter().filter(|x| x.median_ns > 0.0) {
            by_worker
                .entry(rep.started_ms.to_bits())
                .or_insert_with(|| (rep.started_ms, Vec::new()))
                .1
                .push((rep.median_ns / middle).ln());
        }
    }
    let mut series: Vec<(f64, f64)> = by_worker
        .into_values()
        .map(|(t, levels)| (t, stats::median(&levels)))
        .collect();
    series.sort_by(|a, b| a.0.total_cmp(&b.0));
    series
}

/// Correlation of each value with the next (lag-1 autocorrelation); 0 for a constant series.
fn neighbour_correlation(v: &[f64]) -> f64 {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let spread: f64 = v.iter().map(|x| (x - mean).powi(2)).sum();
    if spread <= 0.0 {
        return 0.0;
    }
    v.windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum::<f64>()
        / spread
}

/// The series' moving median over 5 neighbours, at the middle one's time: the machine's speed
/// at a moment, with one repetition's own variation damped.
pub fn smoothed(series: &[(f64, f64)]) -> Vec<(f64, f64)> {
    series
        .windows(SMOOTHING)
        .map(|w| {
            let levels: Vec<f64> = w.iter().map(|p| p.1).collect();
            (w[SMOOTHING / 2].0, stats::median(&levels))
        })
        .collect()
}

/// The test, on a run's results (`None` with fewer than 8 worker repetitions, or none at all:
/// a run of schema version 1).
pub fn speed_change(results: &[BenchResult]) -> Option<SpeedChange> {
    let series = levels_in_time(results);
    if series.len() < MIN_POINTS {
        return None;
    }
    let levels: Vec<f64> = series.iter().map(|p| p.1).collect();
    let correlation = neighbour_correlation(&levels);
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut shuffled = levels.clone();
    let reached = (0..SHUFFLES)
        .filter(|_| {
            shuffled.shuffle(&mut rng);
            neighbour_correlation(&shuffled) >= correlation
        })
        .count();
    let smoothed = smoothed(&series);
    let fastest = smoothed.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let slowest = smoothed.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(SpeedChange {
        points: series.len(),
        correlation,
        p_value: (reached + 1) as f64 / (SHUFFLES + 1) as f64,
        moved_pct: 100.0 * ((slowest.1 - fastest.1).exp() - 1.0),
        fastest_ms: fastest.0,
        slowest_ms: slowest.0,
    })
}

/// The run's note when the machine changed speed during it, in words a reader comparing this
/// run with another needs.
pub fn machine_speed_note(results: &[BenchResult]) -> Option<String> {
    let change = speed_change(results).filter(SpeedChange::changed)?;
    let split = results
        .iter()
        .filter(|r| r.repetitions.len() >= 4)
        .filter(|r| two_levels(&repetition_medians(r)).is_some())
        .count();
    let p = if change.p_value < 0.001 {
        "p < 0.001".to_string()
    } else {
        format!("p = {:.3}", change.p_value)
    };
    let levels = match split {
        0 => String::new(),
        1 => "; 1 result sat at two levels".to_string(),
        n => format!("; {n} results sat at two levels"),
    };
    Some(format!(
        "the machine changed speed during this run: repetitions run one after another agreed in \
         level (correlation {:.2} over {}; shuffled, {p}), which fresh processes on a steady \
         machine do not; smoothed, the level moved {:.0}% (fastest near {:.1} s, slowest near \
         {:.1} s){levels}. Each CI includes that movement, but a run that sits mostly at one \
         speed can differ from this one by as much",
        change.correlation,
        change.points,
        change.moved_pct,
        change.fastest_ms / 1e3,
        change.slowest_ms / 1e3,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    /// A result whose repetition k started at `starts[k]` with median `meds[k]`.
    fn result(id: &str, starts: &[f64], meds: &[f64]) -> BenchResult {
        let mut r = testdata::result(id, vec![1.0; 4]);
        r.repetitions = starts
            .iter()
            .zip(meds)
            .map(|(&t, &m)| testdata::repetition(m, t))
            .collect();
        r
    }

    /// Four benchmarks run round robin, 10 rounds of 4 x 50 ms; `speed(t)` scales every
    /// repetition's level, `own(b, k)` is benchmark b's repetition k's own variation.
    fn round_robin(
        speed: impl Fn(f64) -> f64,
        own: impl Fn(usize, usize) -> f64,
    ) -> Vec<BenchResult> {
        let base = [150.0, 120_000.0, 5_000.0, 1_400.0];
        (0..4)
            .map(|b| {
                let starts: Vec<f64> = (0..10)
                    .map(|k| 200.0 * k as f64 + 50.0 * b as f64)
                    .collect();
                let meds: Vec<f64> = starts
                    .iter()
                    .enumerate()
                    .map(|(k, &t)| base[b] * speed(t) * own(b, k))
                    .collect();
                result(&format!("x/b{b}"), &starts, &meds)
            })
            .collect()
    }

    /// Repetition-by-repetition variation with no order in time: a fixed scramble.
    fn scrambled(b: usize, k: usize) -> f64 {
        1.0 + 0.01 * (((b * 7 + k * 13) * 37) % 11) as f64
    }

    #[test]
    fn a_steady_machine_is_not_called_changed() {
        let results = round_robin(|_| 1.0, scrambled);
        let s = speed_change(&results).unwrap();
        assert_eq!(s.points, 40);
        assert!(!s.changed(), "{s:?}");
        assert_eq!(machine_speed_note(&results), None);
        // Nothing moves at all: no correlation, and nothing to say.
        let flat = round_robin(|_| 1.0, |_, _| 1.0);
        assert_eq!(speed_change(&flat).unwrap().correlation, 0.0);
        assert_eq!(machine_speed_note(&flat), None);
    }

    #[test]
    fn a_machine_that_switches_speed_for_stretches_is_called_changed() {
        // Slower by 1.4x from 0.6 s to 1.2 s: every benchmark that ran then sat higher.
        let slow = |t: f64| {
            if (600.0..1200.0).contains(&t) {
                1.4
            } else {
                1.0
            }
        };
        let results = round_robin(slow, scrambled);
        let s = speed_change(&results).unwrap();
        assert!(s.changed(), "{s:?}");
        assert!(s.correlation > 0.5, "{s:?}");
        assert!(s.p_value < 0.001, "{s:?}");
        assert!((600.0..1200.0).contains(&s.slowest_ms), "{s:?}");
        assert!(!(600.0..1200.0).contains(&s.fastest_ms), "{s:?}");
        // 1.4x, times the scramble's 1.00-1.10 that survives smoothing: exactly this.
        assert_eq!((s.moved_pct * 10.0).round() / 10.0, 50.3, "{s:?}");
        let note = machine_speed_note(&results).unwrap();
        assert!(
            note.starts_with(
                "the machine changed speed during this run: repetitions run one after another \
                 agreed in level (correlation "
            ),
            "{note}"
        );
        assert!(note.contains(" over 40; shuffled, p < 0.001)"), "{note}");
        // As many slow repetitions (3 of 10 per benchmark), each benchmark's in other rounds:
        // every result varies as much, but not with its neighbours in time, so not the machine.
        let own_phases = |b: usize, k: usize| {
            let slow = (b * 3 + k * 7) % 10 < 3;
            scrambled(b, k) * if slow { 1.4 } else { 1.0 }
        };
        let s = speed_change(&round_robin(|_| 1.0, own_phases)).unwrap();
        assert!(!s.changed(), "{s:?}");
    }

    #[test]
    fn cases_of_one_worker_count_once_and_short_runs_say_nothing() {
        // Two cases of one benchmark share their workers' start times: 10 points, not 20.
        let starts: Vec<f64> = (0..10).map(|k| 100.0 * k as f64).collect();
        let a: Vec<f64> = (0..10).map(|k| 10.0 + (k % 3) as f64).collect();
        let results = vec![result("m/a", &starts, &a), result("m/b", &starts, &a)];
        assert_eq!(speed_change(&results).unwrap().points, 10);
        // Fewer than 8 worker repetitions, or none (a run of schema version 1).
        assert_eq!(speed_change(&[result("m/a", &starts[..7], &a[..7])]), None);
        assert_eq!(speed_change(&[result("m/a", &[], &[])]), None);
    }

    #[test]
    fn the_note_counts_the_results_at_two_levels() {
        let slow = |t: f64| if t >= 1000.0 { 1.4 } else { 1.0 };
        let note = machine_speed_note(&round_robin(slow, |_, _| 1.0)).unwrap();
        // Every benchmark's repetitions 6-10 ran after 1 s: all four split at the same gap.
        assert!(
            note.ends_with(
                "; 4 results sat at two levels. Each CI includes that movement, but a run that \
                 sits mostly at one speed can differ from this one by as much"
            ),
            "{note}"
        );
        assert!(
            note.contains("smoothed, the level moved 40% (fastest near "),
            "{note}"
        );
    }
}
