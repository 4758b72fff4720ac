//! Tests of `compare`.

use super::rounds::{Decision, Rounds, paired, paired_blocks};
use super::*;
use crate::base::model::testdata;

fn run_with(id: &str, samples: Vec<f64>) -> Run {
    let mut r = testdata::run();
    r.results = vec![testdata::result(id, samples)];
    r
}

fn noisy(center: f64, n: usize) -> Vec<f64> {
    // Deterministic jitter of ±0.5%.
    (0..n)
        .map(|i| center * (1.0 + 0.005 * (((i * 7919) % 101) as f64 / 50.0 - 1.0)))
        .collect()
}

#[test]
fn exact_ratio_and_difference_with_cis_that_contain_them() {
    let base = run_with("syscall/getpid", noisy(150.0, 500));
    let cand = run_with("syscall/getpid", noisy(570.0, 500));
    let c = compare(&base, &cand, "base", "cand", &Options::default());
    let r = &c.rows[0];
    assert!((r.slowdown - 3.8).abs() < 1e-9, "{}", r.slowdown);
    assert!((r.addition_ns - 420.0).abs() < 1e-9);
    assert!(r.slowdown_ci95[0] <= r.slowdown && r.slowdown <= r.slowdown_ci95[1]);
    assert!(r.addition_ci95[0] <= r.addition_ns && r.addition_ns <= r.addition_ci95[1]);
    assert_eq!(r.verdict, Verdict::Slower);
    assert!(r.p_value <= 1e-3, "{}", r.p_value);
    assert!((c.summary.geomean_slowdown.unwrap() - 3.8).abs() < 1e-9);
    assert_eq!(c.summary.slower, 1);
    // The same comparison again gives the same CIs (seeded).
    let again = compare(&base, &cand, "base", "cand", &Options::default());
    assert_eq!(again.rows, c.rows);
}

#[test]
fn identical_runs_are_no_change_and_faster_is_faster() {
    let base = run_with("call/f0", noisy(100.0, 400));
    let c = compare(&base, &base, "a", "b", &Options::default());
    assert_eq!(c.rows[0].verdict, Verdict::NoChange);
    assert!(c.rows[0].within_band, "{:?}", c.rows[0].slowdown_ci95);
    assert!((c.rows[0].slowdown - 1.0).abs() < 1e-12);
    let fast = run_with("call/f0", noisy(50.0, 400));
    let c = compare(&base, &fast, "a", "b", &Options::default());
    assert_eq!(c.rows[0].verdict, Verdict::Faster);
}

#[test]
fn rounds_are_judged_by_their_paired_ratios_with_the_sequential_interval() {
    let base = [
        100.0, 108.0, 100.0, 108.0, 100.0, 100.0, 108.0, 100.0, 100.0, 108.0,
    ];
    // B 3% above A in every round, whichever level the round's processes sat at: the
    // ratios agree though the levels swing 8%.
    let cand: Vec<f64> = base.iter().map(|x| x * 1.03).collect();
    let p = paired(&base, &cand, 0.01).unwrap();
    assert!((p.slowdown - 1.03).abs() < 1e-9, "{p:?}");
    assert_eq!(p.verdict, Verdict::Slower);
    assert_eq!(
        p.rounds,
        Rounds {
            rounds: 10,
            decision: Decision::Called,
            blocks: None,
        }
    );
    // The same medians unpaired (B's levels in another order) decide nothing.
    let mut shuffled = cand.clone();
    shuffled.rotate_left(1);
    let q = paired(&base, &shuffled, 0.01).unwrap();
    assert_eq!(q.rounds.decision, Decision::Undecided, "{q:?}");
    assert!(q.ci[0] < 1.0 && q.ci[1] > 1.02, "{q:?}");
    // Identical sides: no change, inside the band, p = 1.
    let same = paired(&base, &base, 0.01).unwrap();
    assert_eq!(
        (same.rounds.decision, same.within_band, same.p),
        (Decision::NoChange, true, 1.0)
    );
    assert!(
        paired(&[1.0], &[1.0], 0.01).is_none(),
        "one round: no interval"
    );
}

/// Repetitions of `blocks.len()` blocks of `per` rounds, each block's at `level * factor(j)`
/// with a little jitter, as (block, median).
fn blocked(per: usize, factor: &[f64], level: f64) -> Vec<(usize, f64)> {
    factor
        .iter()
        .enumerate()
        .flat_map(|(j, f)| {
            (0..per).map(move |k| (j, level * f * (1.0 + 0.001 * ((k % 5) as f64 - 2.0))))
        })
        .collect()
}

#[test]
fn where_sides_alternated_in_blocks_the_blocks_are_the_pairs() {
    // An A/A whose blocks caught the host at a slightly different level on each side (B's
    // seconds 1.5% faster, then 1% faster, then 1% slower...): 20 rounds a block. Paired round
    // by round, one block's drift counts twenty times and the mean is called faster.
    let drift = [0.985, 0.99, 1.01, 0.98];
    let a = blocked(20, &[1.0; 4], 100.0);
    let b = blocked(20, &drift, 100.0);
    let medians = |v: &[(usize, f64)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
    let by_round = paired(&medians(&a), &medians(&b), 0.005).unwrap();
    assert_eq!(by_round.verdict, Verdict::Faster, "{by_round:?}");
    // As four pairs, it is four observations: nothing is called.
    let by_block = paired_blocks(&a, &b, 0.005).unwrap();
    assert_eq!(
        by_block.rounds.decision,
        Decision::Undecided,
        "{by_block:?}"
    );
    assert_eq!(
        (by_block.rounds.blocks, by_block.rounds.rounds),
        (Some(4), 80)
    );
    // B 3% slower in every one of twelve blocks, whatever the host's level of each (±5%):
    // called, at about x1.03.
    let level = [
        1.0, 1.05, 0.95, 1.02, 0.98, 1.04, 0.96, 1.0, 1.03, 0.97, 1.01, 0.99,
    ];
    let a = blocked(10, &level, 100.0);
    let b = blocked(10, &level.map(|l| l * 1.03), 100.0);
    let p = paired_blocks(&a, &b, 0.01).unwrap();
    assert_eq!(
        (p.verdict, p.rounds.decision, p.rounds.blocks),
        (Verdict::Slower, Decision::Called, Some(12))
    );
    assert!((p.slowdown - 1.03).abs() < 0.002, "{p:?}");
    // A block one side did not measure is no pair; fewer than three pairs give no interval.
    let only_a: Vec<(usize, f64)> = a.iter().copied().filter(|x| x.0 < 10).collect();
    assert_eq!(
        paired_blocks(&only_a, &b, 0.01).unwrap().rounds.blocks,
        Some(10)
    );
    assert!(paired_blocks(&a[..20], &b[..20], 0.01).is_none());
}

#[test]
fn verdicts_at_the_edges_of_the_threshold() {
    let t = 0.02;
    assert_eq!(verdict([1.021, 1.05], 1.03, t), (Verdict::Slower, false));
    assert_eq!(
        verdict([1.02, 1.05], 1.02, t),
        (Verdict::NoChange, false),
        "touching the edge is not beyond it"
    );
    assert_eq!(
        verdict([0.98, 1.02], 1.0, t),
        (Verdict::NoChange, true),
        "the edges belong to the band"
    );
    assert_eq!(verdict([0.979, 1.0], 0.99, t), (Verdict::NoChange, false));
    assert_eq!(verdict([0.90, 0.979], 0.95, t), (Verdict::Faster, false));
    assert_eq!(verdict([f64::NAN, 1.0], 1.0, t), (Verdict::NoChange, false));
    // A change shown beyond doubt whose CI reaches into the band: called by its ratio.
    assert_eq!(verdict([1.018, 1.075], 1.046, t), (Verdict::Slower, false));
    assert_eq!(verdict([0.93, 0.995], 0.97, t), (Verdict::Faster, false));
    // A CI that misses 1 by a little, with a ratio inside the band: no change.
    assert_eq!(
        verdict([1.001, 1.061], 1.007, t),
        (Verdict::NoChange, false)
    );
    // A ratio beyond the band whose CI holds 1: not shown, no change.
    assert_eq!(verdict([0.99, 1.08], 1.03, t), (Verdict::NoChange, false));
}

#[test]
fn benchmarks_in_one_run_only_are_listed_with_why() {
    let mut base = testdata::run();
    let cand = run_with("call/f0", noisy(1.5, 50));
    base.results.truncate(2);
    let c = compare(&base, &cand, "a", "b", &Options::default());
    assert_eq!(c.rows.len(), 1);
    assert_eq!(
        c.only_base,
        vec!["syscall/getppid: not in the candidate run".to_string()]
    );
    let skipped = testdata::run();
    let c = compare(&cand, &skipped, "a", "b", &Options::default());
    assert!(
        c.only_cand
            .contains(&"syscall/getppid: not in the base run".to_string())
    );
    assert_eq!(
        c.unmeasured,
        vec![
            "timer/rdtscp: not in the base run; skipped in the candidate run: no rdtscp"
                .to_string()
        ]
    );
}

/// A subset run against a whole one: the results the subset never measured are one line,
/// counted by family, not a line each.
#[test]
fn results_a_subset_run_lacks_are_said_once_by_family() {
    let cand = run_with("call/f0", noisy(1.5, 50));
    let mut base = cand.clone();
    for i in 0..6 {
        let mut r = base.results[0].clone();
        r.id = format!("syscall/x{i}");
        base.results.push(r);
    }
    let c = compare(&base, &cand, "a", "b", &Options::default());
    assert_eq!(
        c.only_base,
        vec!["6 results are not in the candidate run: syscall/ 6".to_string()]
    );
}

#[test]
fn regressions_need_the_whole_ci_beyond_the_limit() {
    let base = run_with("x/y", noisy(100.0, 400));
    let cand = run_with("x/y", noisy(110.0, 400));
    let c = compare(&base, &cand, "a", "b", &Options::default());
    assert_eq!(regressions(&c, 5.0).len(), 1);
    assert_eq!(regressions(&c, 15.0).len(), 0);
}

#[test]
fn a_phase_that_hits_one_side_widens_the_interval_instead_of_calling_a_change() {
    // Same operation; the machine was slow (+40%) for 45% of the base run and 55% of the
    // candidate's, so the medians sit at different levels. Resampling single samples calls
    // that a 40% change with a CI of a fraction of a percent; blocks do not.
    let mut base: Vec<f64> = noisy(100.0, 2000);
    base[..900].iter_mut().for_each(|x| *x *= 1.4);
    let mut cand = noisy(100.0, 2000);
    cand[900..].iter_mut().for_each(|x| *x *= 1.4);
    let mut b = testdata::result("x/y", base);
    let mut c = testdata::result("x/y", cand);
    b.batch.size = 2500; // 100 ns x 2500 = 250 us a sample: 200 samples a block
    c.batch.size = 2500;
    let (rb, rc) = (
        Run {
            results: vec![b],
            ..testdata::run()
        },
        Run {
            results: vec![c],
            ..testdata::run()
        },
    );
    let cmp = compare(&rb, &rc, "a", "b", &Options::default());
    assert_eq!(cmp.rows[0].verdict, Verdict::NoChange, "{:?}", cmp.rows[0]);
}

/// A row changed by `ratio` on a base of `base` ns, called as the ratio says.
fn changed(id: &str, base: f64, ratio: f64) -> BenchComparison {
    let verdict = match ratio {
        r if r > 1.02 => Verdict::Slower,
        r if r < 0.98 => Verdict::Faster,
        _ => Verdict::NoChange,
    };
    BenchComparison {
        id: id.into(),
        base_median_ns: base,
        cand_median_ns: base * ratio,
        slowdown: ratio,
        slowdown_ci95: [ratio * 0.99, ratio * 1.01],
        addition_ns: base * (ratio - 1.0),
        addition_ci95: [base * (ratio - 1.0) - 1.0, base * (ratio - 1.0) + 1.0],
        p_value: 0.001,
        verdict,
        within_band: true,
        disturbed: false,
        run_to_run: None,
        apart_unknown: false,
        rounds: None,
        bytes_per_op: None,
        attribution: None,
    }
}

#[test]
fn changes_by_one_factor_over_a_wide_range_of_costs_are_said() {
    // Two runs of one build 19 s apart on a host that moved between two speeds.
    let machine = [
        changed("syscall/getpid", 138.0, 1.356),
        changed("spawn/fork", 107_000.0, 1.390),
        changed("switch/pipe-proc@same", 5_200.0, 1.318),
        changed("mem/fault-write", 1_330.0, 1.279),
        changed("call/f0", 1.08, 1.001),
    ];
    let f = one_factor(&machine).unwrap();
    assert_eq!((f.changed, f.verdict), (4, Verdict::Slower));
    assert_eq!(f.base_ns, [138.0, 107_000.0]);
    assert_eq!(f.slowdown, [1.279, 1.390]);
    assert_eq!(f.addition_ns[0].round(), 49.0);
    assert_eq!(f.addition_ns[1].round(), 41_730.0);
    // Faster by one factor is said as such.
    let faster: Vec<BenchComparison> = machine
        .iter()
        .map(|r| changed(&r.id, r.base_median_ns, 1.0 / r.slowdown))
        .collect();
    assert_eq!(one_factor(&faster).unwrap().verdict, Verdict::Faster);
}

#[test]
fn one_factor_is_not_claimed_where_the_changes_cannot_show_it() {
    // 43 ns added to each system call: about one amount, factors 10x apart.
    let hook = [
        changed("syscall/getpid", 138.0, 181.0 / 138.0),
        changed("syscall/read-devzero", 263.0, 306.0 / 263.0),
        changed("mem/read-file/4KiB", 612.0, 655.0 / 612.0),
        changed("x/one-entry", 1_380.0, 1_423.0 / 1_380.0),
    ];
    assert_eq!(one_factor(&hook), None, "one amount, not one factor");
    let close_costs = [
        changed("syscall/getpid", 138.0, 1.30),
        changed("syscall/getppid", 150.0, 1.28),
        changed("syscall/read-devzero", 263.0, 1.29),
    ];
    assert_eq!(one_factor(&close_costs), None, "bases under 10x apart");
    let two = [changed("a/b", 100.0, 1.3), changed("a/c", 1e5, 1.3)];
    assert_eq!(one_factor(&two), None, "two are not a pattern");
    let both_ways = [
        changed("syscall/getpid", 138.0, 1.30),
        changed("spawn/fork", 107_000.0, 1.0 / 1.30),
        changed("mem/fault-write", 1_330.0, 1.30),
    ];
    assert_eq!(one_factor(&both_ways), None, "some slower, some faster");
}

#[test]
fn repetitions_are_the_repetitions_of_the_bootstrap() {
    let mut r = testdata::result("x/y", vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(
        repetitions_of(&r, 100).len(),
        1,
        "one stream: one repetition"
    );
    r.repetitions = [0usize, 3]
        .iter()
        .zip([3usize, 2])
        .map(|(&start, samples)| crate::base::model::Repetition {
            start,
            samples,
            ..testdata::repetition(0.0, 0.0)
        })
        .collect();
    let reps = repetitions_of(&r, 100);
    assert_eq!(reps.len(), 2);
    assert_eq!(reps[0].concat(), vec![1.0, 2.0, 3.0]);
    assert_eq!(reps[1].concat(), vec![4.0, 5.0]);
}

#[test]
fn runs_measured_apart_are_judged_with_their_spread_or_not_at_all() {
    let base = run_with(
        "call/f0",
        (0..400).map(|i| 100.0 + (i % 7) as f64 * 0.1).collect(),
    );
    let cand = run_with(
        "call/f0",
        (0..400).map(|i| 104.0 + (i % 7) as f64 * 0.1).collect(),
    );
    let together = compare(&base, &cand, "a", "b", &Options::default());
    assert_eq!(
        together.rows[0].verdict,
        Verdict::Slower,
        "{:?}",
        together.rows[0]
    );
    let mut wide = together.clone();
    let spread = crate::analysis::run_to_run::Spread::plain(0.05, 4);
    apart(&mut wide, &|_| Some(spread), &|_| None);
    assert_eq!(wide.rows[0].verdict, Verdict::NoChange);
    assert!(wide.rows[0].slowdown_ci95[0] < together.rows[0].slowdown_ci95[0]);
    assert_eq!(wide.rows[0].run_to_run.map(|r| r.runs), Some(4));
    let mut unknown = together.clone();
    apart(&mut unknown, &|_| None, &|_| None);
    assert!(unknown.rows[0].apart_unknown);
    assert_eq!(unknown.summary.apart_unknown, 1);
    assert_eq!((unknown.summary.slower, unknown.summary.no_change), (0, 0));
    assert_eq!(unknown_apart(&unknown).len(), 1);
}

/// A bandwidth is stored as a time per mebibyte: a drop in its rate is a longer time, called
/// slower by the same rule as any time, and the row carries what one operation moves, so a
/// view can say the rates.
#[test]
fn a_bandwidth_that_drops_is_called_slower_with_its_rates() {
    let bw = |ns: f64| {
        let mut r = run_with("bw/pipe@same", noisy(ns, 400));
        r.results[0]
            .params
            .insert("bytes_per_op".into(), serde_json::json!(1 << 20));
        r
    };
    // 3.2 GiB/s (about 305 us a MiB) falling to 2.7 GiB/s (about 362 us).
    let (base, cand) = (bw(305_000.0), bw(362_000.0));
    let rate = base.results[0].rate().unwrap();
    assert!(
        (rate.bytes_per_s / (1u64 << 30) as f64 - 3.2).abs() < 0.01,
        "{rate:?}"
    );
    assert!(rate.ci95[0] <= rate.bytes_per_s && rate.bytes_per_s <= rate.ci95[1]);
    let c = compare(&base, &cand, "base", "cand", &Options::default());
    let r = &c.rows[0];
    assert_eq!(r.verdict, Verdict::Slower);
    let (b, k) = r.rates().unwrap();
    assert!(
        k < b,
        "the candidate's rate {k} is not below the base's {b}"
    );
    assert_eq!(c.summary.slower, 1);
    // And a rise is faster; a time without bytes_per_op has no rates.
    let c = compare(&cand, &base, "base", "cand", &Options::default());
    assert_eq!(c.rows[0].verdict, Verdict::Faster);
    let plain = run_with("syscall/getpid", noisy(150.0, 400));
    let c = compare(&plain, &plain, "a", "b", &Options::default());
    assert!(c.rows[0].rates().is_none());
}
