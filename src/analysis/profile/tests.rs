use super::*;
use crate::base::model::profile::{ProfileRepetition, Sampling};
use crate::base::model::testdata;
use rand::{RngExt, SeedableRng};

fn profile(reps: Vec<(u64, Vec<(&str, u64)>)>, window: f64) -> Profile {
    let mut spaces = BTreeMap::new();
    let repetitions = reps
        .into_iter()
        .map(|(samples, f)| ProfileRepetition {
            samples,
            lost: 0,
            window_ns_per_op: window,
            functions: f
                .into_iter()
                .map(|(k, v)| {
                    spaces.insert(k.to_string(), Space::Kernel);
                    (k.to_string(), v)
                })
                .collect(),
        })
        .collect();
    Profile {
        sampling: Sampling {
            event: "cpu-clock".into(),
            rate_hz: 10_000,
            kernel_refused: None,
            scope: Default::default(),
        },
        repetitions,
        spaces,
        stacks: vec![],
    }
}

fn result(median: f64, p: Profile) -> BenchResult {
    let mut r = testdata::result("syscall/getppid", vec![median; 5]);
    r.profile = Some(p);
    r
}

/// Samples of `shares` (function, share) in `n` samples, drawn.
fn drawn(
    rng: &mut rand::rngs::StdRng,
    n: u64,
    shares: &[(&'static str, f64)],
) -> Vec<(&'static str, u64)> {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for _ in 0..n {
        let mut u: f64 = rng.random();
        for (name, share) in shares {
            u -= share;
            if u <= 0.0 {
                *counts.entry(name).or_insert(0) += 1;
                break;
            }
        }
    }
    counts.into_iter().collect()
}

#[test]
fn functions_cost_their_share_of_the_window_and_sum_to_it() {
    let p = profile(
        vec![
            (1000, vec![("do_syscall_64", 500), ("getppid", 500)]),
            (1000, vec![("do_syscall_64", 600), ("getppid", 400)]),
        ],
        100.0,
    );
    let c = costs(&p);
    assert_eq!(c[0].symbol, "do_syscall_64");
    assert!((c[0].ns - 55.0).abs() < 1e-9);
    assert!(c[0].ci95[0] < 55.0 && c[0].ci95[1] > 55.0);
    let sum: f64 = c.iter().map(|x| x.ns).sum();
    assert!((sum - 100.0).abs() < 1e-9, "sum {sum}");
    assert!((c[0].share - 0.55).abs() < 1e-9);
}

#[test]
fn merged_repetitions_keep_their_windows_and_sum_their_chains() {
    let mut a = profile(vec![(10, vec![("f", 10)])], f64::NAN);
    a.stacks = vec![Stack {
        frames: vec!["entry".into(), "f".into()],
        samples: 10,
    }];
    let mut b = a.clone();
    b.stacks[0].samples = 5;
    let m = merge(vec![(a, 100.0), (b, 120.0)]).unwrap();
    assert_eq!(m.repetitions.len(), 2);
    assert_eq!(m.repetitions[1].window_ns_per_op, 120.0);
    assert_eq!(m.stacks[0].samples, 15);
    assert!(merge(vec![]).is_none());
}

#[test]
fn an_addition_is_split_into_the_functions_that_grew_and_sums_to_what_was_measured() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let base_shares = [("do_syscall_64", 0.5), ("entry", 0.3), ("getppid", 0.2)];
    // The candidate spends 60 of 160 ns in a filter: the rest as before.
    let cand_shares = [
        ("do_syscall_64", 0.5 * 100.0 / 160.0),
        ("entry", 0.3 * 100.0 / 160.0),
        ("getppid", 0.2 * 100.0 / 160.0),
        ("__seccomp_filter", 60.0 / 160.0),
    ];
    let reps = |rng: &mut rand::rngs::StdRng, s: &[(&'static str, f64)]| {
        (0..8)
            .map(|_| (2000, drawn(rng, 2000, s)))
            .collect::<Vec<_>>()
    };
    let a = result(100.0, profile(reps(&mut rng, &base_shares), 100.0));
    let b = result(160.0, profile(reps(&mut rng, &cand_shares), 160.0));
    let att = attribute(&a, &b).unwrap();
    assert_eq!(att.parts[0].symbol, "__seccomp_filter");
    assert!((att.parts[0].added_ns - 60.0).abs() < 5.0, "{att:?}");
    assert!(att.parts[0].ci95[0] < 60.0 && att.parts[0].ci95[1] > 55.0);
    let called: f64 = att.parts.iter().map(|p| p.added_ns).sum();
    let total = called + att.within_noise_ns + att.remainder_ns;
    assert!((total - att.measured_ns).abs() < 1e-6);
    assert!(att.remainder_ns.abs() < 1e-6, "{att:?}");
    let w = words(&att);
    assert!(w.starts_with("+60.0 ns: __seccomp_filter +"), "{w}");
}

#[test]
fn a_side_against_itself_calls_no_function() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let shares = [
        ("do_syscall_64", 0.35),
        ("entry_SYSCALL_64", 0.2),
        ("syscall_exit_to_user_mode", 0.15),
        ("__x64_sys_getppid", 0.1),
        ("[user]", 0.1),
        ("__task_pid_nr_ns", 0.06),
        ("fpregs_assert_state_consistent", 0.04),
    ];
    let mut calls = 0;
    for _ in 0..100 {
        let side = |rng: &mut rand::rngs::StdRng| {
            let reps = (0..6)
                .map(|_| (2000, drawn(rng, 2000, &shares)))
                .collect::<Vec<_>>();
            let level = 100.0 + rng.random_range(-2.0..2.0);
            result(level, profile(reps, level))
        };
        let (a, b) = (side(&mut rng), side(&mut rng));
        calls += attribute(&a, &b).unwrap().parts.len();
    }
    // Corrected for the functions judged, about 5 in 100 comparisons may call one by chance.
    assert!(
        calls <= 8,
        "{calls} functions called in 100 A/A comparisons"
    );
}
