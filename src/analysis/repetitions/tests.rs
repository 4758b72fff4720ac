//! Tests of `repetitions`.

use super::*;

#[test]
fn two_levels_are_found_only_where_one_gap_dominates() {
    // getpid on a host that moved between two speeds (a run measured here).
    let host = [
        156.0, 232.0, 224.0, 157.0, 156.0, 157.0, 156.0, 156.0, 201.0, 218.0,
    ];
    let t = two_levels(&host).unwrap();
    assert_eq!(t.low, vec![0, 3, 4, 5, 6, 7]);
    assert_eq!(t.high, vec![1, 2, 8, 9]);
    assert_eq!((t.low_level, t.high_level), (156.0, 221.0));
    // fork on the same host: noisy, but no gap stands out (largest 14.5%, next 9.2%).
    let noisy = [
        199385.0, 199093.0, 177904.0, 152788.0, 174924.0, 187362.0, 143195.0, 178641.0, 194546.0,
        217278.0,
    ];
    assert_eq!(two_levels(&noisy), None);
    // One repetition apart is a departure, not a level; a small gap is not a level.
    assert_eq!(two_levels(&[10.0, 10.0, 10.1, 10.0, 10.0, 13.0]), None);
    assert_eq!(two_levels(&[10.0, 10.0, 10.1, 10.3, 10.3, 10.4]), None);
    // getpid on a host switching between 137 and 149 ns (2026-11-24): an 8.7% gap
    // between two tight groups is two levels.
    let switching = [
        149.9, 137.6, 137.3, 137.3, 137.5, 149.4, 149.7, 149.6, 149.4, 149.4,
    ];
    let t = two_levels(&switching).unwrap();
    assert_eq!(t.low, vec![1, 2, 3, 4]);
    assert_eq!(two_levels(&[10.0, 10.0, 13.0]), None);
}

#[test]
fn memory_activity_is_said_with_its_counts_and_the_level_it_went_with() {
    let mut r = crate::base::model::testdata::result("spawn/fork", vec![1.0]);
    r.repetitions = [100.0, 102.0, 131.0, 99.0, 128.0]
        .iter()
        .enumerate()
        .map(|(k, &m)| crate::base::model::testdata::repetition(m, 50.0 * k as f64))
        .collect();
    assert_eq!(memory_note(&r), None, "nothing counted, nothing said");
    for k in [2, 4] {
        r.repetitions[k]
            .memory_events
            .insert("pgscan_kswapd".into(), 2048);
    }
    r.repetitions[4]
        .memory_events
        .insert("compact_stall".into(), 1);
    let note = memory_note(&r).unwrap();
    assert_eq!(
        note,
        "memory activity during repetitions 3, 5 of 5 (4096 pages scanned by kswapd, 1 \
         compaction stalls): their level 130 ns against 100 ns in the other 3 (x1.29)"
    );
}

#[test]
fn two_levels_are_said_once_and_the_smaller_group_departs() {
    let meds = [10.0, 13.0, 10.0, 13.0, 10.0, 13.0, 13.0];
    let mut reps: Vec<Repetition> = meds
        .iter()
        .enumerate()
        .map(|(k, &m)| Repetition {
            start: 100 * k,
            samples: 100,
            preempted: 1,
            ..crate::base::model::testdata::repetition(m, 50.0 * k as f64)
        })
        .collect();
    let t = two_levels(&meds).unwrap();
    let note = t.describe(&mut reps, false);
    assert_eq!(
        note,
        "two levels, not one: repetitions 1, 3, 5 at 10.0 ns (3 of 300 of their samples \
         preempted), the other 4 at 13.0 ns (x1.30), each whole repetition at one or the \
         other (the machine's speed, or how processes were laid out); kept: the median \
         follows the larger group, the CI spans both"
    );
    let departs: Vec<Option<i64>> = reps
        .iter()
        .map(|r| r.departs_pct.map(|p| p.round() as i64))
        .collect();
    assert_eq!(
        departs,
        vec![Some(-23), None, Some(-23), None, Some(-23), None, None]
    );
    // On a tie the slower group is the one named.
    let tie = [10.0, 13.0, 10.0, 13.0];
    let mut reps4 = reps[..4].to_vec();
    reps4.iter_mut().for_each(|r| r.departs_pct = None);
    let note = two_levels(&tie).unwrap().describe(&mut reps4, true);
    assert!(note.starts_with("two levels, not one: repetitions 2, 4 at 13.0 ns, the other 2"));
}

/// Windows of one benchmark (one repetition each) joined as one result: every sample kept,
/// each window a repetition at its place, the CI from the windows and holding the median.
#[test]
fn windows_join_as_the_repetitions_of_one_result() {
    use crate::base::model::testdata;
    let window = |level: f64, at: f64| {
        let samples: Vec<f64> = (0..50).map(|i| level + (i % 5) as f64).collect();
        let mut r = testdata::result("syscall/getppid", samples);
        let mut rep = testdata::repetition(level + 2.0, at);
        rep.samples = 50;
        r.repetitions = vec![rep];
        r.preempted = vec![3];
        r
    };
    let parts: Vec<BenchResult> = (0..8)
        .map(|k| window(180.0 + (k % 3) as f64, k as f64 * 20_000.0))
        .collect();
    let refs: Vec<&BenchResult> = parts.iter().collect();
    let joined = join_windows(&refs).unwrap();
    assert_eq!(joined.samples_ns.len(), 400);
    assert_eq!(joined.repetitions.len(), 8);
    assert_eq!(joined.repetitions[3].start, 150);
    assert_eq!(joined.preempted[1], 53, "indices follow their samples");
    let s = joined.stats.as_ref().unwrap();
    assert!(s.ci95[0] <= s.median && s.median <= s.ci95[1], "{s:?}");
    assert!(s.ci95[1] - s.ci95[0] > 0.0);
    // A window that measured nothing adds nothing; none at all is none.
    let mut skipped = window(1.0, 0.0);
    skipped.status = crate::base::model::Status::Skipped {
        reason: "no".into(),
    };
    assert!(join_windows(&[&skipped]).is_none());
}
