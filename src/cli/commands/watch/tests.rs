//! Unit tests of `watch`.

use super::{BURSTS, Duration, bursts_that_fit, lasting_change, split_windows};
use crate::base::model::testdata::repetition;

#[test]
fn a_window_takes_the_bursts_the_duty_allows_and_none_where_one_does_not_fit() {
    let ms = Duration::from_millis;
    let twenty = Duration::from_secs(20);
    // 1% of 20 s is 200 ms; 85% of it fitted: 40 ms a burst gives 4.
    assert_eq!(bursts_that_fit(ms(40), 1, twenty, 0.01), Some(4));
    assert_eq!(bursts_that_fit(ms(200), 5, twenty, 0.01), Some(4));
    assert_eq!(bursts_that_fit(ms(1), 1, twenty, 0.01), Some(BURSTS));
    // 180 ms fits in 200, if not in 85% of it: one.
    assert_eq!(bursts_that_fit(ms(180), 1, twenty, 0.01), Some(1));
    assert_eq!(bursts_that_fit(ms(460), 1, twenty, 0.01), None);
}

#[test]
fn stored_windows_are_told_apart_by_their_start() {
    let at = |ms: &[f64]| -> Vec<_> { ms.iter().map(|&t| repetition(100.0, t)).collect() };
    let twenty = Duration::from_secs(20);
    // Windows of 1, 3 and 2 bursts a second apart, timed from the run's start.
    let reps = at(&[50.0, 20_040.0, 21_050.0, 22_060.0, 40_030.0, 41_040.0]);
    let sizes: Vec<usize> = split_windows(&reps, twenty)
        .iter()
        .map(|w| w.len())
        .collect();
    assert_eq!(sizes, [1, 3, 2]);
    // An older run: each window timed from its own start.
    let reps = at(&[50.0, 1050.0, 40.0, 1060.0, 2070.0]);
    let sizes: Vec<usize> = split_windows(&reps, twenty)
        .iter()
        .map(|w| w.len())
        .collect();
    assert_eq!(sizes, [2, 3]);
    assert!(split_windows(&[], twenty).is_empty());
}

#[test]
fn a_change_is_called_at_once_or_once_its_level_has_settled() {
    let steady = [330.0, 329.0, 331.0, 330.0, 329.0, 330.0, 331.0, 330.0];
    assert!(lasting_change(&steady).is_none());
    // Two windows far above a steady level: at once.
    let jump: Vec<f64> = steady.iter().copied().chain([520.0, 530.0]).collect();
    let c = lasting_change(&jump).unwrap();
    assert_eq!(c.index, 8);
    // A baseline of five with a stray window, then an uneven new level (a tracer's cost
    // on one CPU and on the other): beyond every old window, called after two.
    let uneven = [
        329.0, 329.0, 448.0, 330.0, 328.0, 521.0, 944.0, 521.0, 944.0, 521.0,
    ];
    let c = lasting_change(&uneven[..7]).unwrap();
    assert_eq!(c.index, 5, "{c:?}");
    assert!(c.ratio > 1.4, "{c:?}");
}

/// The window levels of `scripts/check-watch.sh`'s 20-minute run of 2026-11-27 (getppid,
/// ns; bpftrace counting every system call from window 28 on), replayed as the watch
/// looks at them, the level restarting where a change was called: nothing before the
/// tracer, the change called at window 29 (the second after it), and said once.
#[test]
fn the_twenty_minute_check_replayed() {
    let levels = [
        331.0, 332.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0,
        331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0, 331.0,
        331.0, 522.0, 947.0, 522.0, 948.0, 523.0, 947.0, 523.0, 1210.0, 522.0, 947.0, 522.0, 946.0,
        523.0, 947.0, 522.0, 945.0, 522.0, 947.0, 523.0, 947.0, 523.0, 947.0, 522.0,
    ];
    let mut since = 0;
    let mut called = Vec::new();
    for end in 1..=levels.len() {
        if let Some(c) = lasting_change(&levels[since..end]) {
            called.push((end, since + c.index));
            since += c.index;
        }
    }
    assert_eq!(
        called,
        vec![(29, 27)],
        "(window seen, first window of the new level)"
    );
}
