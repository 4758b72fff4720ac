use super::*;

/// `cases` cases of `reps` repetitions each at `cost` ns (a little jitter), their exit
/// witnesses near 3800 ns but for the repetitions `slow` picks, which sit at 5000 ns and, with
/// `follows`, 25% dearer.
fn run(
    cases: usize,
    reps: usize,
    slow: impl Fn(usize, usize) -> bool,
    follows: bool,
) -> Vec<Vec<Level>> {
    (0..cases)
        .map(|c| {
            let cost = 100.0 * (c + 1) as f64;
            (0..reps)
                .map(|k| {
                    let jitter = 1.0 + 0.004 * ((c * 7 + k * 3) % 5) as f64;
                    if slow(c, k) {
                        let dearer = if follows { 1.25 } else { 1.0 / jitter / jitter };
                        (cost * jitter * dearer, Some(5000.0 * jitter))
                    } else {
                        (cost * jitter, Some(3800.0 * jitter))
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn a_quiet_host_sets_nothing_aside() {
    assert_eq!(judge(&run(6, 8, |_, _| false, true)), None);
}

#[test]
fn slow_moments_that_reach_the_costs_are_found_and_named() {
    let h = judge(&run(6, 8, |c, k| (c + k) % 4 == 0, true)).expect("judged slow");
    assert!((3790.0..3900.0).contains(&h.quiet_ns), "{h:?}");
    assert!(
        h.slow_above_ns > 3800.0 * LEAST_STEP && h.slow_above_ns < 5000.0,
        "{h:?}"
    );
    assert!((20.0..30.0).contains(&h.dearer_pct), "{h:?}");
}

#[test]
fn a_witness_that_jumps_without_the_costs_sets_nothing_aside() {
    // The witness sat high in a quarter of the repetitions, but their levels did not move:
    // the host's moment did not reach these costs, so nothing is the host's to take out.
    assert_eq!(judge(&run(6, 8, |c, k| (c + k) % 4 == 0, false)), None);
}

#[test]
fn slow_moments_that_move_the_costs_within_their_own_spread_set_nothing_aside() {
    // Every slow repetition 2% dearer: a sign test finds it, but it is no cost of the host's.
    let mut cases = run(6, 8, |c, k| (c + k) % 4 == 0, true);
    for case in &mut cases {
        for (l, w) in case.iter_mut() {
            if w.is_some_and(|w| w > 4500.0) {
                *l *= 1.02 / 1.25;
            }
        }
    }
    assert_eq!(judge(&cases), None);
}

#[test]
fn too_few_witnesses_or_slow_repetitions_judge_nothing() {
    assert_eq!(judge(&run(2, 8, |c, k| (c + k) % 2 == 0, true)), None);
    // Four slow repetitions, all dearer, are not yet a sign test's five.
    assert_eq!(judge(&run(6, 8, |c, k| c < 4 && k == 0, true)), None);
    let none: Vec<Vec<Level>> = vec![vec![(100.0, None); 8]; 6];
    assert_eq!(judge(&none), None);
}

#[test]
fn a_run_of_one_benchmark_measured_half_in_a_slow_moment_is_judged() {
    // `oscost run --cpu 1 syscall/getpid` on a drifting AMD EPYC guest (2026-12-06, 21:08):
    // each repetition's level (ns) and exit witness, in the order measured. Sixteen witnesses
    // were too few for the run to be judged, and the result was the slow moment's 174.4 ns.
    let getpid: Vec<Level> = [
        (185.4, 4565.0),
        (189.8, 5125.0),
        (194.0, 5218.0),
        (183.6, 5227.0),
        (185.7, 4986.0),
        (184.4, 4979.0),
        (186.4, 4891.0),
        (190.0, 4277.0),
        (137.0, 4159.0),
        (141.0, 3551.0),
        (137.3, 3491.0),
        (137.2, 3528.0),
        (137.5, 3495.0),
        (174.1, 3492.0),
        (149.4, 3514.0),
        (148.6, 3493.0),
    ]
    .iter()
    .map(|&(l, w)| (l, Some(w)))
    .collect();
    let h = judge(std::slice::from_ref(&getpid)).expect("half the run in a slow moment is judged");
    assert!((3450.0..3600.0).contains(&h.quiet_ns), "{h:?}");
    assert!(h.dearer_pct > 20.0, "{h:?}");
    let kept: Vec<f64> = getpid
        .iter()
        .filter(|(_, w)| w.is_some_and(|w| w <= h.slow_above_ns))
        .map(|&(l, _)| l)
        .collect();
    assert!(
        kept.len() >= MIN_KEPT && stats::median(&kept) < 150.0,
        "{kept:?}"
    );
    // Its middle nine (five of them slow): fewer witnesses than a sign test with five kept
    // needs, so not judged.
    assert_eq!(judge(&[getpid[4..13].to_vec()]), None);
}

/// A host judged slow above 4300 ns, quiet at 3800.
const HOST: HostQuiet = HostQuiet {
    quiet_ns: 3800.0,
    slow_above_ns: 4300.0,
    dearer_pct: 25.0,
};

/// A repetition of one case: 50 samples at `level` ns, the exit witness `w`.
fn rep(level: f64, w: Option<f64>, started_ms: f64) -> RepRun {
    let mut case = crate::analysis::tests::case(vec![level; 50]);
    case.exit_witness_ns = w;
    RepRun {
        case,
        started_ms,
        startup_ms: 1.0,
        block: None,
    }
}

#[test]
fn a_split_keeps_the_quiet_repetitions_and_records_the_slow_with_the_median_they_made() {
    let mut reps: Vec<RepRun> = (0..6).map(|k| rep(100.0, Some(3800.0), k as f64)).collect();
    reps.extend((0..7).map(|k| rep(125.0, Some(5000.0), 10.0 + k as f64)));
    let (kept, slow) = split(reps, &HOST);
    assert_eq!(kept.len(), 6);
    assert!(kept.iter().all(|r| r.case.exit_witness_ns == Some(3800.0)));
    let slow = slow.expect("set aside");
    assert_eq!(slow.repetitions.len(), 7);
    assert_eq!(slow.repetitions[0].started_ms, 10.0);
    assert_eq!(slow.repetitions[0].median_ns, 125.0);
    assert_eq!(slow.repetitions[0].samples, 50);
    // Seven of thirteen repetitions at 125: the median of every sample is theirs.
    assert_eq!(slow.median_with_ns, 125.0);
}

#[test]
fn a_split_that_would_leave_too_few_keeps_every_repetition() {
    let mut reps: Vec<RepRun> = (0..4).map(|k| rep(100.0, Some(3800.0), k as f64)).collect();
    reps.extend((0..4).map(|k| rep(125.0, Some(5000.0), 10.0 + k as f64)));
    let (kept, slow) = split(reps, &HOST);
    assert_eq!((kept.len(), slow), (8, None));
}

#[test]
fn the_note_says_once_how_many_were_set_aside_and_what_they_would_have_moved() {
    // Six quiet repetitions at 100-105 ns, five slow at 125: with the slow ones the median
    // of every sample is 105, without them 102.5.
    let mut reps: Vec<RepRun> = (0..6)
        .map(|k| rep(100.0 + k as f64, Some(3800.0), k as f64))
        .collect();
    reps.extend((0..5).map(|k| rep(125.0, Some(5000.0), 10.0 + k as f64)));
    let (kept, slow) = split(reps, &HOST);
    let mut r = crate::analysis::merge_repetitions(
        kept,
        &[0],
        crate::analysis::FINAL_JUDGING,
        0.01,
        crate::base::model::RepetitionStop::Budget,
    );
    r.uncertainty.as_mut().unwrap().host_slow = slow;
    assert_eq!(r.repetitions.len(), 6);
    assert_eq!(r.stats.as_ref().unwrap().median, 102.5);
    assert_eq!(
        r.uncertainty
            .as_ref()
            .unwrap()
            .host_slow
            .as_ref()
            .unwrap()
            .median_with_ns,
        105.0
    );
    let n = note(std::slice::from_ref(&r), Some(&HOST)).expect("a note");
    assert_eq!(
        n.kind,
        NoteKind::HostSlow {
            set_aside: 5,
            of: 11,
            results: 1,
            quiet_ns: 3800.0,
            slow_above_ns: 4300.0,
            dearer_pct: 25.0,
        }
    );
    assert!(n.text.contains("slow in 5 of 11 repetitions"), "{}", n.text);
    assert!(n.text.contains("above 4.30 us"), "{}", n.text);
    assert!(n.text.contains("call/f0 would read +2.4%"), "{}", n.text);
    // Nothing set aside, or nothing judged: no note.
    r.uncertainty.as_mut().unwrap().host_slow = None;
    assert_eq!(note(std::slice::from_ref(&r), Some(&HOST)), None);
    assert_eq!(note(&[], None), None);
}
