//! Unit tests of `predict`.

use super::*;

fn counts(calls: &[(&str, u64)], processes: u64, threads: u64, execs: u64) -> ProgramCounts {
    ProgramCounts {
        syscalls: calls.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
        processes,
        threads,
        execs,
        ..Default::default()
    }
}

fn price(a: f64, half: f64) -> Price {
    Price {
        addition_ns: a,
        ci95: [a - half, a + half],
    }
}

#[test]
fn a_shell_loop_is_processes_execs_and_the_rest_of_its_calls() {
    // 3 children of a shell, each exec'ing; the shell itself exec'd once (execs 4), one
    // failed execve in a PATH search.
    let c = counts(
        &[
            ("clone", 3),
            ("wait4", 4),
            ("exit_group", 4),
            ("execve", 5),
            ("read", 10),
            ("openat", 7),
            ("close", 5),
        ],
        3,
        0,
        4,
    );
    let k = kinds(&c, None);
    let got: Vec<(&str, u64, &str, bool)> = k
        .iter()
        .map(|k| (k.kind.as_str(), k.count, k.priced_by.as_str(), k.assumed))
        .collect();
    assert_eq!(
        got,
        vec![
            ("process creation", 3, FORK, false),
            ("exec", 4, EXEC, false),
            // An open and its close are one priced pair; the opens left over are not.
            ("openat + close", 5, "fs/open-close", false),
            ("read", 10, "syscall/read-devzero", false),
            ("openat", 2, "fs/open", false),
            ("execve", 1, "fs/open-missing", false),
            ("exit_group", 1, NULL_CALL, true),
            ("wait4", 1, NULL_CALL, true),
        ]
    );
    assert_eq!(
        prices_needed(&k),
        vec![
            "fs/open",
            "fs/open-close",
            "fs/open-missing",
            EXEC,
            FORK,
            "syscall/getppid",
            "syscall/read-devzero"
        ]
    );
}

#[test]
fn with_a_start_profile_each_exec_takes_the_calls_of_a_start() {
    // `true` starts with execve, 3 mmap, 1 openat and exits.
    let start = counts(
        &[("execve", 1), ("mmap", 3), ("openat", 1), ("exit_group", 1)],
        0,
        0,
        1,
    );
    // A shell that ran 2 children (3 execs): 10 mmap, 2 openat (one short), 1 write.
    let c = counts(
        &[
            ("clone", 2),
            ("wait4", 2),
            ("exit_group", 3),
            ("execve", 3),
            ("mmap", 10),
            ("openat", 2),
            ("write", 1),
        ],
        2,
        0,
        3,
    );
    let k = kinds(&c, Some(&start));
    let got: Vec<(&str, u64, &str)> = k
        .iter()
        .map(|k| (k.kind.as_str(), k.count, k.priced_by.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("process creation", 2, FORK),
            ("wrapper start + first program start", 1, WRAPPER_START),
            ("program start (exec, loader)", 2, PROGRAM_START),
            // mmap 10 - 3 x 3 = 1; openat 2 - 3 = 0; exit_group 3 - 2 = 1 (the shell's).
            ("exit_group", 1, NULL_CALL),
            ("mmap", 1, "mem/mmap-only"),
            ("write", 1, "syscall/write-devnull"),
        ]
    );
    assert_eq!(
        prices_needed(&k),
        vec![
            "mem/mmap-only",
            FORK,
            FORK_EXEC_DYNAMIC,
            NULL_CALL,
            "syscall/write-devnull"
        ]
    );
    let d = less(price(500.0, 3.0), price(200.0, 4.0));
    assert_eq!(d.addition_ns, 300.0);
    assert_eq!(d.ci95, [295.0, 305.0]);
}

#[test]
fn threads_take_their_clone_and_exit_first() {
    let c = counts(&[("clone3", 5), ("exit", 2), ("exit_group", 1)], 3, 2, 0);
    let k = kinds(&c, None);
    assert_eq!(k[0].kind, "thread creation");
    assert_eq!(k[0].count, 2);
    assert_eq!(k[1].kind, "process creation");
    assert_eq!(k[1].count, 3);
    // clone3 5 - 2 - 3 = 0, exit 2 - 2 = 0, exit_group 1 - 1 = 0: nothing else.
    assert_eq!(k.len(), 2);
}

#[test]
fn the_prediction_sums_counts_times_additions_and_shared_prices_move_together() {
    let k = vec![
        Operation {
            kind: "read".into(),
            count: 100,
            priced_by: "syscall/read-devzero".into(),
            assumed: false,
        },
        Operation {
            kind: "openat".into(),
            count: 30,
            priced_by: NULL_CALL.into(),
            assumed: true,
        },
        Operation {
            kind: "mmap".into(),
            count: 10,
            priced_by: NULL_CALL.into(),
            assumed: true,
        },
    ];
    let mut prices = BTreeMap::new();
    // Half-widths 1.96 x SE: SE 2 for read, 1 for the null call.
    prices.insert("syscall/read-devzero".into(), price(50.0, 3.92));
    prices.insert(NULL_CALL.into(), price(40.0, 1.96));
    let p = predict(&k, &prices, "under this wrapper").unwrap();
    assert_eq!(p.predicted_added_ns, 100.0 * 50.0 + 40.0 * 40.0);
    // sqrt((100 x 2)^2 + (40 x 1)^2) x 1.96: the 40 null-call calls as one.
    let half = 1.96 * (200.0f64.powi(2) + 40.0f64.powi(2)).sqrt();
    assert!((p.predicted_ci95[1] - p.predicted_added_ns - half).abs() < 1e-9);
    assert_eq!(p.assumed_count, 40);
    assert_eq!(p.assumed_added_ns, 1600.0);
    assert_eq!(p.breakdown[0].kind, "read");
    assert!(p.assumptions[0].starts_with("40 calls of 2 kinds"));
}

#[test]
fn a_kind_without_a_price_falls_back_to_the_null_call_and_says_so() {
    let k = vec![Operation {
        kind: "process creation".into(),
        count: 2,
        priced_by: FORK.into(),
        assumed: false,
    }];
    let mut prices = BTreeMap::new();
    prices.insert(NULL_CALL.into(), price(40.0, 0.0));
    let p = predict(&k, &prices, "under this wrapper").unwrap();
    assert_eq!(p.predicted_added_ns, 80.0);
    assert!(p.breakdown[0].assumed);
    assert!(
        p.assumptions
            .iter()
            .any(|a| a.contains("spawn/fork has no price"))
    );
    assert!(predict(&k, &BTreeMap::new(), "under this wrapper").is_none());
}

#[test]
fn a_miss_says_what_the_assumed_calls_would_have_to_cost() {
    let line = |kind: &str, count: u64, add: f64, assumed: bool| Line {
        kind: kind.into(),
        count,
        priced_by: String::new(),
        assumed,
        addition_ns: add,
        added_ns: count as f64 * add,
    };
    let p = Prediction {
        predicted_added_ns: 1000.0,
        predicted_ci95: [900.0, 1100.0],
        breakdown: vec![
            line("read", 12, 50.0, false),
            line("openat", 10, 40.0, true),
        ],
        assumed_added_ns: 400.0,
        assumed_count: 10,
        assumptions: vec![],
    };
    assert!(miss_note(&p, 1050.0, [980.0, 1200.0]).is_none());
    let n = miss_note(&p, 1600.0, [1500.0, 1700.0]).unwrap();
    assert!(n.contains("under the measurement"), "{n}");
    // (400 + 600) / 10 = 100 ns each instead of 40.
    assert!(n.contains("add 100 ns each instead of 40 ns"), "{n}");
    assert!(!n.contains("unlikely to be the cause"), "{n}");
    let far = miss_note(&p, 3000.0, [2900.0, 3100.0]).unwrap();
    // (400 + 2000) / 10 = 240 ns each: over 3 x 40.
    assert!(far.contains("unlikely to be the cause"), "{far}");
    assert!(far.contains("largest: openat 10"), "{far}");
    assert!(far.contains("largest: read x12 at +50 ns"), "{far}");
}

/// docs/prices.md is the table of what prices each call: every pair here is a row there.
#[test]
fn the_prices_table_in_docs_is_the_one_in_the_code() {
    let doc = include_str!("../../../docs/prices.md");
    for (call, by) in BY_NAME {
        let row = format!("| `{call}` | `{by}` |");
        assert!(doc.contains(&row), "docs/prices.md lacks {row}");
    }
    for (call, by) in WITH_CLOSE {
        let row = format!("| `{call}` with a `close` | `{by}` |");
        assert!(doc.contains(&row), "docs/prices.md lacks {row}");
    }
    let rows = doc.lines().filter(|l| l.starts_with("| `")).count();
    assert_eq!(
        rows,
        BY_NAME.len() + WITH_CLOSE.len(),
        "docs/prices.md has rows the code lacks"
    );
}

/// A price is a benchmark run by id: each named is in the catalogue with one result.
#[test]
fn every_call_is_priced_by_a_benchmark_of_one_result() {
    for (call, by) in BY_NAME.iter().chain(WITH_CLOSE) {
        let b = crate::bench::find(by).unwrap_or_else(|| panic!("{call}: no benchmark {by}"));
        assert!(
            matches!(b.cases, crate::bench::entry::Cases::One),
            "{call}: {by} has several results"
        );
    }
}
