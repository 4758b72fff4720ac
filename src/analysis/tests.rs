//! Tests of `analysis`.

use super::*;
use crate::base::model::{Batch, Placement};
use crate::measuring::noise::parse_proc_stat;
use crate::measuring::sampler::Measurement;

#[test]
fn a_flagged_wait_always_had_its_evidence_looked_for() {
    const { assert!(crate::bench::runner::LOOK_BESIDE_SHARE <= CPU_WAIT_SHARE) };
}

/// A ping-pong result whose counters saw `cs` switches per round trip.
fn pingpong(cs: f64) -> BenchResult {
    let mut r = crate::base::model::testdata::result("switch/pipe-proc@same", vec![5000.0; 50]);
    r.events = Some(crate::base::model::Events {
        per_op: [("context-switches".to_string(), cs)].into_iter().collect(),
        ..Default::default()
    });
    check_definition(&mut r);
    r
}

#[test]
fn a_ping_pong_that_does_not_switch_twice_is_flagged() {
    let bad = pingpong(0.3);
    let check = bad.events.as_ref().unwrap().check.clone().unwrap();
    assert!(!check.met);
    assert!(
        bad.notes
            .iter()
            .any(|n| n.text.contains("definition not met")
                && n.text
                    .contains("2 context-switches per op (±0.1) expected, 0.30 counted")),
        "{:?}",
        bad.notes
    );
    let good = pingpong(2.0);
    assert!(good.events.unwrap().check.unwrap().met);
    assert!(good.notes.iter().all(|n| !n.text.contains("definition")));
    // An event that could not be counted is not checked at all.
    let mut r = crate::base::model::testdata::result("syscall/getpid", vec![100.0; 50]);
    r.events = Some(crate::base::model::Events {
        unavailable: [("context-switches".into(), "not permitted".into())].into(),
        ..Default::default()
    });
    check_definition(&mut r);
    assert!(r.events.unwrap().check.is_none());
}

pub(super) fn case(samples: Vec<f64>) -> CaseResult {
    let n = samples.len() as u64;
    CaseResult {
        id: "call/f0".into(),
        bench: "call/f0".into(),
        params: Default::default(),
        definition: "d".into(),
        placement: Placement::Pinned { cpu: 0 },
        used_cpus: vec![0],
        smt_siblings: vec![],
        cpu_before: vec![],
        cpu_after: vec![],
        measurement: Some(Measurement {
            exits_ns: Vec::new(),
            ends_ns: (1..=n).map(|i| i * 1000).collect(),
            samples_ns: samples,
            preempted: vec![],
            batch: Batch {
                batched: true,
                size: 1000,
            },
            baseline_ns: 0.4,
        }),
        notes: vec![],
        preemption_expected: false,
        error: None,
        events: None,
        profile: None,
        witness_ns: None,
        exit_witness_ns: None,
        memory_events: Default::default(),
        cpu_wait: None,
        throttle: None,
        confinement: None,
    }
}

#[test]
fn a_quota_that_stopped_the_worker_is_flagged_with_its_time_and_none_is_not() {
    let quiet = case(vec![10.0; 50]);
    let (d, _) = judge_noise(&quiet, &[0], 0, 50);
    assert_eq!((d.throttled_ms, d.is_disturbed()), (None, false));
    let mut stopped = quiet.clone();
    stopped.throttle = Some(crate::base::model::Throttle {
        periods: 40,
        throttled: 12,
        throttled_ns: 250_000_000,
    });
    let (d, _) = judge_noise(&stopped, &[0], 0, 50);
    assert_eq!(d.throttled_ms, Some(250.0));
    assert_eq!(
        d.flag,
        vec![
            "its cgroup's CPU quota stopped the worker for 250.0 ms in 12 of 40 periods (cpu.stat)"
        ]
    );
}

/// Repetition `k` of a case: 200 samples around `level`, its own baseline and overhead.
fn rep(k: usize, level: f64) -> RepRun {
    let mut c = case((0..200).map(|i| level + (i % 5) as f64 * 0.01).collect());
    c.measurement.as_mut().unwrap().baseline_ns = 0.1 * (k + 1) as f64;
    c.params
        .insert("overhead_ns".into(), json!(100.0 + k as f64));
    c.params.insert("procs".into(), json!(8));
    RepRun {
        case: c,
        started_ms: 100.0 * k as f64,
        startup_ms: 9.0,
        block: None,
    }
}

#[test]
fn repetitions_merge_into_one_result_with_their_ci_and_medians_of_what_each_measured() {
    let j = Judging {
        resamples: 500,
        max_samples: 4000,
    };
    let levels = [10.0, 10.2, 9.9, 10.1, 10.0];
    let reps: Vec<RepRun> = levels.iter().enumerate().map(|(k, &l)| rep(k, l)).collect();
    let r = merge_repetitions(
        reps,
        &[0],
        j,
        0.01,
        crate::base::model::RepetitionStop::Precision,
    );
    assert_eq!(r.samples_ns.len(), 1000);
    assert_eq!(r.repetitions.len(), 5);
    assert_eq!(r.repetitions[3].start, 600);
    assert!((r.baseline_ns - 0.3).abs() < 1e-12, "median of 0.1..0.5");
    assert_eq!(r.params["overhead_ns"], json!(102.0));
    assert_eq!(
        r.params["procs"],
        json!(8),
        "integers are the case's, not medians"
    );
    let st = r.stats.as_ref().unwrap();
    assert!(st.ci95[0] < st.median && st.median < st.ci95[1]);
    let u = r.uncertainty.as_ref().unwrap();
    assert_eq!(
        (u.repetitions, u.stopped),
        (5, crate::base::model::RepetitionStop::Precision)
    );
    // Four repetitions: no interval, and a note says why.
    let few: Vec<RepRun> = levels[..4]
        .iter()
        .enumerate()
        .map(|(k, &l)| rep(k, l))
        .collect();
    let r = merge_repetitions(
        few,
        &[0],
        j,
        0.01,
        crate::base::model::RepetitionStop::Budget,
    );
    assert!(r.stats.as_ref().unwrap().ci95[0].is_nan());
    assert!(
        r.notes
            .iter()
            .any(|n| n.text.contains("too few for a confidence interval"))
    );
}

#[test]
fn a_departing_repetition_cites_preemptions_only_where_they_are_not_the_operation() {
    let j = Judging {
        resamples: 200,
        max_samples: 2000,
    };
    let levels = [10.0, 10.0, 10.0, 10.0, 10.0, 13.0];
    for expected in [false, true] {
        let reps: Vec<RepRun> = levels
            .iter()
            .enumerate()
            .map(|(k, &l)| {
                let mut r = rep(k, l);
                r.case.preemption_expected = expected;
                r.case.measurement.as_mut().unwrap().preempted = (0..150).collect();
                r
            })
            .collect();
        let r = merge_repetitions(
            reps,
            &[0],
            j,
            0.01,
            crate::base::model::RepetitionStop::Budget,
        );
        let note = r
            .notes
            .iter()
            .find(|n| n.text.contains("repetition 6"))
            .unwrap();
        assert_eq!(r.repetitions[5].departs_pct.map(f64::round), Some(30.0));
        if expected {
            assert!(!note.text.contains("preempted"), "{note}");
            assert!(r.repetitions.iter().all(|x| x.preempted == 0));
        } else {
            assert!(note.text.contains("150 of 200 samples preempted"), "{note}");
        }
    }
}

#[test]
fn a_long_list_of_departures_names_the_first_few_and_counts_the_rest() {
    let j = Judging {
        resamples: 200,
        max_samples: 4000,
    };
    // 20 repetitions at one level, then 8 climbing away from it (no one gap: not two levels).
    let levels: Vec<f64> = (0..20)
        .map(|_| 10.0)
        .chain((0..8).map(|i| 11.0 + 0.5 * i as f64))
        .collect();
    let reps: Vec<RepRun> = levels.iter().enumerate().map(|(k, &l)| rep(k, l)).collect();
    let r = merge_repetitions(
        reps,
        &[0],
        j,
        0.01,
        crate::base::model::RepetitionStop::Budget,
    );
    let note = r.notes.iter().find(|n| n.text.starts_with("kept")).unwrap();
    assert!(
        note.text
            .contains("repetition 21 (at 2000 ms) sat +10.0% from the others"),
        "{note}"
    );
    assert!(note.text.contains("repetition 25 (at 2400 ms)"), "{note}");
    assert!(!note.text.contains("repetition 26"), "{note}");
    assert!(
        note.text.ends_with(
            "; and 3 more of the 28 repetitions, from +34.9% to +44.9% (each marked \
             `departs_pct` in the JSON)"
        ),
        "{note}"
    );
    assert_eq!(
        r.repetitions
            .iter()
            .filter(|x| x.departs_pct.is_some())
            .count(),
        8
    );
}

#[test]
fn a_cost_at_or_below_the_baseline_is_never_reported_without_a_note() {
    let r = analyze(case(vec![-0.2, -0.1, 0.0, -0.05]), &[0, 1]);
    assert!(r.stats.as_ref().unwrap().median <= 0.0);
    assert!(
        r.notes
            .iter()
            .any(|n| n.text.contains("at or below the baseline")),
        "{:?}",
        r.notes
    );
    let r = analyze(case(vec![1.0, 1.1, 0.9]), &[0, 1]);
    assert!(r.notes.is_empty());
}

#[test]
fn samples_are_rounded_to_picoseconds_and_failures_carry_their_reason() {
    let r = analyze(case(vec![1.23456789]), &[0]);
    assert_eq!(r.samples_ns, vec![1.235]);
    let mut failed = CaseResult::failed(
        "x/y@cross".into(),
        "x/y",
        "d",
        BenchError::Skipped("one CPU".into()),
    );
    failed.params.insert("placement".into(), json!("cross"));
    let f = analyze(failed, &[0]);
    assert_eq!(
        f.status,
        Status::Skipped {
            reason: "one CPU".into()
        }
    );
    assert_eq!(f.id, "x/y@cross");
    assert_eq!(f.params["placement"], json!("cross"));
    assert!(f.stats.is_none());
}

#[test]
fn ping_pongs_get_half_their_round_trip_and_fork_sizes_a_slope() {
    let mut rs = vec![analyze(case(vec![10.0, 10.0, 10.0]), &[0])];
    derive(&Cases::Placements, &mut rs);
    assert_eq!(rs[0].params["per_switch_median_ns"], json!(5.0));
    let mut curve: Vec<BenchResult> = [(0.0, 100.0), (64.0, 164.0), (256.0, 356.0)]
        .iter()
        .map(|&(mib, ns)| {
            let mut r = analyze(case(vec![ns]), &[0]);
            r.params.insert("rss_mib".into(), json!(mib));
            r
        })
        .collect();
    derive(&Cases::ForkSizes, &mut curve);
    assert_eq!(curve[2].params["slope_ns_per_mib"], json!(1.0));
    assert!(curve[2].notes[0].text.contains("grows 0.00 us per MiB"));
    assert!(!curve[0].params.contains_key("slope_ns_per_mib"));
}

const STAT_A: &str = "cpu  10 0 10 100 0 0 0 0 0 0\n\
cpu0 5 0 5 50 0 0 0 0 0 0\n\
cpu1 5 0 5 50 0 0 0 0 0 0\n\
intr 1 2 3\n";
const STAT_B: &str = "cpu  10 0 10 100 0 0 0 0 0 0\n\
cpu0 6 0 6 98 0 0 0 0 0 0\n\
cpu1 85 0 5 70 0 0 0 10 0 0\n";

fn on(
    used: &'static [usize],
    other: &'static [usize],
    siblings: &'static [usize],
) -> Cpus<'static> {
    Cpus {
        used,
        other,
        siblings,
    }
}

#[test]
fn a_busy_sibling_is_flagged_a_busy_separate_core_only_named() {
    let a = parse_proc_stat(STAT_A);
    let b = parse_proc_stat(STAT_B);
    let th = Thresholds::default();
    // cpu1 went +80 busy +20 idle +10 steal: 90/110 = 81.8% busy.
    let (d, notes) = assess(&a, &b, on(&[0], &[1], &[1]), 0, 100, th);
    assert!((d.other_cpu_busy_pct.unwrap() - 900.0 / 11.0).abs() < 1e-9);
    assert_eq!(d.steal_pct, 0.0);
    assert_eq!(d.flag.len(), 1);
    assert!(d.flag[0].contains("other CPU busy 82%") && d.flag[0].contains("SMT sibling"));
    assert!(notes.is_empty());
    // The same load on a separate core: a note, not a flag.
    let (d, notes) = assess(&a, &b, on(&[0], &[1], &[]), 0, 100, th);
    assert!(!d.is_disturbed(), "{:?}", d.flag);
    assert!(
        notes[0].text.contains("other CPU busy 82%") && notes[0].text.contains("separate core")
    );
    // Measured on cpu1: steal 10/110.
    let (d, _) = assess(&a, &b, on(&[1], &[0], &[]), 0, 100, th);
    assert!((d.steal_pct - 1000.0 / 110.0).abs() < 1e-9);
    assert!(d.flag.iter().any(|f| f.starts_with("steal 9%")));
    assert!(!d.flag.iter().any(|f| f.contains("other CPU")));
}

#[test]
fn quiet_benchmark_is_not_flagged_and_preemption_share_is() {
    let a = parse_proc_stat(STAT_A);
    let th = Thresholds::default();
    let (d, _) = assess(&a, &a, on(&[0], &[1], &[]), 5, 100, th);
    assert!(!d.is_disturbed());
    let (d, _) = assess(&a, &a, on(&[0], &[1], &[]), 6, 100, th);
    assert_eq!(d.flag, vec!["6 of 100 samples preempted".to_string()]);
    let (d, _) = assess(&a, &a, on(&[0, 1], &[], &[]), 0, 100, th);
    assert_eq!(d.other_cpu_busy_pct, None);
}

#[test]
fn other_programs_on_the_cpu_are_flagged_from_its_account_when_large_in_share_and_time() {
    use crate::bench::runner::CpuWait;
    use crate::measuring::noise::CpuShare;
    let w = |wall_ms: u64, idle_ms: u64, own_ms: u64| CpuWait {
        beside: vec!["spin (pid 7)".into()],
        cpu_share: Some(CpuShare {
            wall_ns: wall_ms * 1_000_000,
            idle_ns: idle_ms * 1_000_000,
            own_ns: own_ms * 1_000_000,
            host_ns: 0,
        }),
        ..CpuWait::default()
    };
    // fork under a 60% competitor: 100 ms, never idle, the worker's tree ran 57 ms.
    let flag = foreign_share_flag(&w(100, 0, 57)).unwrap();
    assert!(
        flag.contains("ran 43%") && flag.contains("spin (pid 7)"),
        "{flag}"
    );
    assert!(
        foreign_share_flag(&w(100, 40, 53)).is_none(),
        "7%: the kernel's own"
    );
    assert!(
        foreign_share_flag(&w(20, 0, 16)).is_none(),
        "4 ms: too little time"
    );
    assert!(
        foreign_share_flag(&CpuWait::default()).is_none(),
        "no account"
    );
    // More idle and own time than the interval (clock granularity) is none, not a wrap.
    assert!(foreign_share_flag(&w(100, 60, 60)).is_none());
    // A guest whose host stole 35 ms of a getpid loop's 100: the worker ran 65, nobody else.
    let mut stolen = w(100, 0, 65);
    stolen.cpu_share.as_mut().unwrap().host_ns = 35_000_000;
    assert!(
        foreign_share_flag(&stolen).is_none(),
        "steal is not a program"
    );
}

#[test]
fn a_wait_for_the_cpu_is_flagged_only_when_large_in_share_and_in_time() {
    use crate::bench::runner::CpuWait;
    let w = |run_ms: u64, wait_ms: u64| CpuWait {
        run_ns: run_ms * 1_000_000,
        wait_ns: wait_ms * 1_000_000,
        beside: vec!["spin (pid 7)".into()],
        cpu_share: None,
    };
    let flag = cpu_wait_flag(&w(60, 60)).unwrap();
    assert!(
        flag.contains("waited 50%") && flag.contains("spin (pid 7)"),
        "{flag}"
    );
    assert!(
        cpu_wait_flag(&w(5, 1)).is_none(),
        "a short blip in a short pass"
    );
    assert!(cpu_wait_flag(&w(600, 30)).is_none(), "5% of the time");
}
