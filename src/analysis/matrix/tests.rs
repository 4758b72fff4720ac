//! Tests of `matrix`.

use super::*;
use crate::report::matrix_views::{render_csv, render_table};

fn summary(id: i64, kernel: &str, label: Option<&str>) -> RunSummary {
    RunSummary {
        id,
        started_at: format!("2026-11-{id:02}T00:00:00Z"),
        label: label.map(Into::into),
        host: Some("box".into()),
        kernel: Some(kernel.into()),
        wrapper: None,
        benchmarks: 2,
        env_key: None,
    }
}

#[test]
fn runs_measured_apart_add_the_run_to_run_spread_or_call_nothing() {
    let base = row("a", 100.0, 99.5, 100.5);
    let drifted = row("a", 104.0, 103.5, 104.5);
    let sandboxed = row("a", 150.0, 149.0, 151.0);
    // Own CIs alone call a 4% drift of the host.
    assert_eq!(
        cell_against(&base, &drifted, 0.02).verdict,
        Some(Verdict::Slower)
    );
    // With a 3% run-to-run spread (tau) it is no change; the sandbox still is one.
    let spread = Some(Spread::plain(0.03, 6));
    let c = cell_apart(&base, &drifted, 0.02, spread);
    assert_eq!(c.verdict, Some(Verdict::NoChange), "{c:?}");
    assert_eq!(c.run_to_run.map(|r| r.runs), Some(6));
    assert_eq!(
        cell_apart(&base, &sandboxed, 0.02, spread).verdict,
        Some(Verdict::Slower)
    );
    // A spread of zero gives exactly the interval of runs measured together.
    let zero = cell_apart(&base, &drifted, 0.02, Some(Spread::plain(0.0, 3)));
    let together = cell_against(&base, &drifted, 0.02);
    let (a, b) = (zero.slowdown_ci95.unwrap(), together.slowdown_ci95.unwrap());
    assert!((a[0] - b[0]).abs() < 1e-12 && (a[1] - b[1]).abs() < 1e-12);
    // No history of either environment: nothing is called, the ratio is still shown.
    let c = cell_apart(&base, &sandboxed, 0.02, None);
    assert_eq!(c.verdict, None);
    assert_eq!(c.slowdown, Some(1.5));
    // Through build: the spread of the base's environment goes on the row too.
    let runs = [summary(1, "6.1", None), summary(2, "6.1", None)];
    let rows = [(1, base.clone()), (2, drifted.clone())];
    let spread_of = |_: &str, _: i64| spread;
    let m = build(&runs, &rows, 0, &[], 0.02, Some(&spread_of));
    assert_eq!(m.rows[0].cells[1].verdict, Some(Verdict::NoChange));
    assert!(m.rows[0].run_to_run.is_some_and(|r| r.percent > 5.0));
    assert!(render_table(&m, false).contains("run to run"));
}

#[test]
fn a_cell_whose_runs_sat_at_two_exit_levels_is_projected_before_it_is_judged() {
    // The store learned that this benchmark follows the exit witness with slope 0.7 and
    // scatters 1% once projected (8% as measured). The candidate ran while the host took 30%
    // longer to answer its guest, and under a sandbox that adds 7%.
    let spread = Spread {
        tau: 0.01,
        runs: 8,
        projection: Some(crate::analysis::run_to_run::Projection {
            on: crate::analysis::run_to_run::DriftWitness::Exit,
            slope: 0.7,
            slope_se: 0.03,
            plain_tau: 0.08,
            corr: 0.97,
        }),
    };
    let witnessed = |median: f64, exit: f64| ResultRow {
        exit_witness_ns: Some(exit),
        ..row("a", median, median / 1.005, median * 1.005)
    };
    let drift = 1.3f64.powf(0.7);
    let base = witnessed(100.0, 4500.0);
    let boxed = witnessed(100.0 * drift * 1.07, 5850.0);
    let c = cell_apart(&base, &boxed, 0.02, Some(spread));
    assert_eq!(c.verdict, Some(Verdict::Slower), "{c:?}");
    let t = c.run_to_run.unwrap();
    assert!((t.drift_factor.unwrap() - drift).abs() < 1e-9 && t.drift_slope == Some(0.7));
    assert!((c.slowdown.unwrap() - 1.07).abs() < 1e-9);
    assert!((c.addition_ns.unwrap() - 7.0).abs() < 1e-6);
    // The host's drift alone is no change; without the candidate's witness the plain spread
    // judges, and cannot tell the sandbox from the host.
    let drifted = witnessed(100.0 * drift, 5850.0);
    let c = cell_apart(&base, &drifted, 0.02, Some(spread));
    assert_eq!(c.verdict, Some(Verdict::NoChange), "{c:?}");
    let blind = ResultRow {
        exit_witness_ns: None,
        speed_witness_ns: None,
        ..boxed.clone()
    };
    let c = cell_apart(&base, &blind, 0.02, Some(spread));
    assert_eq!(c.verdict, Some(Verdict::NoChange), "{c:?}");
    assert_eq!(c.run_to_run.unwrap().drift_factor, None);
}

#[test]
fn a_run_whose_benchmarks_all_moved_by_one_factor_is_named_and_not_called() {
    // Six runs of one environment, five benchmarks; run 4 ran everything 7% slower, and in
    // run 6 one benchmark really regressed by 30%. A sandboxed run 7 (another environment)
    // moved everything too, and is a comparison, not an outlier.
    let benches = ["a", "b", "c", "d", "e"];
    let base_ns = [150.0, 180.0, 210.0, 5000.0, 1e5];
    let jitter = [1.0, 1.004, 0.997, 1.0, 1.003, 0.998];
    let mut runs: Vec<RunSummary> = (1..=6).map(|i| summary(i, "6.1", None)).collect();
    let mut sandboxed = summary(7, "6.1", None);
    sandboxed.env_key = Some("seccomp".into());
    runs.push(sandboxed);
    let mut rows = Vec::new();
    for (k, run) in runs.iter().enumerate() {
        for (i, (b, ns)) in benches.iter().zip(base_ns).enumerate() {
            let mut x = ns * jitter[k % 6];
            if run.id == 4 {
                x *= 1.07;
            }
            if run.id == 6 && *b == "b" {
                x *= 1.3;
            }
            if run.id == 7 {
                x *= 1.0 + 0.1 * (i + 1) as f64;
            }
            rows.push((run.id, row(b, x, x * 0.996, x * 1.004)));
        }
    }
    let spread_of = |_: &str, _: i64| Some(Spread::plain(0.0, 6));
    let order: Vec<String> = benches.iter().map(|b| b.to_string()).collect();
    let m = build(&runs, &rows, 0, &order, 0.02, Some(&spread_of));
    assert_eq!(m.odd_runs.len(), 1, "{:?}", m.odd_runs);
    let odd = &m.odd_runs[0];
    assert_eq!((odd.run_id, odd.moved, odd.of, odd.against), (4, 5, 5, 5));
    assert!((odd.factor - 1.07).abs() < 0.01, "{odd:?}");
    // Its cells are no change; the real regression in run 6 and the sandbox are called.
    assert!(
        m.rows
            .iter()
            .all(|r| r.cells[3].verdict == Some(Verdict::NoChange))
    );
    assert_eq!(m.rows[1].cells[5].verdict, Some(Verdict::Slower));
    assert!(
        m.rows
            .iter()
            .all(|r| r.cells[6].verdict == Some(Verdict::Slower))
    );
    let text = render_table(&m, false);
    assert!(
        text.contains("run 4: every benchmark x1.07") && text.contains("(5 of 5 moved"),
        "{text}"
    );
    // With the odd run as the base, the others are judged against its level less its factor.
    let m = build(&runs, &rows, 3, &order, 0.02, Some(&spread_of));
    assert_eq!(m.odd_runs.len(), 1);
    assert_eq!(m.rows[0].cells[0].verdict, Some(Verdict::NoChange));
    assert_eq!(m.rows[1].cells[5].verdict, Some(Verdict::Slower));
}

fn row(bench: &str, median: f64, lo: f64, hi: f64) -> ResultRow {
    ResultRow {
        bench: bench.into(),
        status: "ok".into(),
        median: Some(median),
        ci_lo: Some(lo),
        ci_hi: Some(hi),
        samples: 100,
        disturbed: false,
        exit_witness_ns: None,
        speed_witness_ns: None,
    }
}

#[test]
fn a_cell_combines_the_two_intervals_in_quadrature_on_a_log_scale() {
    // Both ±1% (symmetric on the log scale): the ratio's half-width is √2 %.
    let e = 0.01f64.ln_1p();
    let b = row("x", 100.0, 100.0 / e.exp(), 100.0 * e.exp());
    let c = row("x", 110.0, 110.0 / e.exp(), 110.0 * e.exp());
    let cell = cell_against(&b, &c, 0.02);
    let [lo, hi] = cell.slowdown_ci95.unwrap();
    let k = (2f64.sqrt() * e).exp();
    assert!((lo - 1.1 / k).abs() < 1e-12 && (hi - 1.1 * k).abs() < 1e-12);
    assert_eq!(cell.verdict, Some(Verdict::Slower));
    assert_eq!(cell.addition_ns, Some(10.0));
    let [alo, ahi] = cell.addition_ci95.unwrap();
    assert!(alo < 10.0 && ahi > 10.0);
    // Within the band: no change; wider intervals: no change either.
    let same = cell_against(&b, &row("x", 100.5, 99.5, 101.5), 0.02);
    assert_eq!(same.verdict, Some(Verdict::NoChange));
    let vague = cell_against(&b, &row("x", 110.0, 80.0, 140.0), 0.02);
    assert_eq!(vague.verdict, Some(Verdict::NoChange));
    // No interval on one side: no verdict, never a narrow one.
    let mut none = row("x", 120.0, 0.0, 0.0);
    (none.ci_lo, none.ci_hi) = (None, None);
    let cell = cell_against(&b, &none, 0.02);
    assert_eq!((cell.verdict, cell.slowdown_ci95), (None, None));
    assert_eq!(cell.slowdown, Some(1.2));
}

#[test]
fn a_level_shift_along_the_columns_is_found_at_its_run() {
    // 12 runs, the kernel changes at run 7 and getpid gets 10% slower with it.
    let runs: Vec<RunSummary> = (1..=12)
        .map(|i| summary(i, if i < 7 { "6.1.0" } else { "6.18.44" }, None))
        .collect();
    let noise = [
        0.0, 0.8, -0.6, 0.3, -0.9, 0.5, -0.2, 0.7, -0.4, 0.1, -0.7, 0.6,
    ];
    let rows: Vec<(i64, ResultRow)> = runs
        .iter()
        .zip(noise)
        .flat_map(|(r, e)| {
            let level = if r.id < 7 { 100.0 } else { 110.0 };
            [
                (
                    r.id,
                    row("syscall/getpid", level + e, level - 2.0, level + 2.0),
                ),
                (r.id, row("call/f0", 1.0 + e / 100.0, 0.98, 1.02)),
            ]
        })
        .collect();
    let m = build(&runs, &rows, 0, &[], 0.02, None);
    assert_eq!(m.changes.len(), 1, "{:?}", m.changes);
    let c = &m.changes[0];
    assert_eq!(
        (c.bench.as_str(), c.run_id, c.previous_run_id),
        ("syscall/getpid", 7, 6)
    );
    assert!((c.ratio - 1.1).abs() < 0.02 && c.ratio_ci95[0] > 1.0);
    assert!(render_table(&m, false).contains("syscall/getpid at run 7: x1."));
}

#[test]
fn columns_are_titled_by_what_differs_and_missing_results_say_why() {
    let runs = [
        summary(1, "6.1.0", None),
        summary(2, "6.18.44", None),
        summary(3, "6.18.44", Some("tracer")),
    ];
    let rows = vec![
        (1, row("a", 100.0, 99.0, 101.0)),
        (1, row("b", 10.0, 9.9, 10.1)),
        (2, row("a", 150.0, 148.0, 152.0)),
        (2, row("b", 10.0, 9.9, 10.1)),
        (3, row("a", 60.0, 59.0, 61.0)),
        (
            3,
            ResultRow {
                status: "failed".into(),
                median: None,
                ..row("b", 0.0, 0.0, 0.0)
            },
        ),
    ];
    let m = build(&runs, &rows, 0, &["b".into(), "a".into()], 0.02, None);
    assert_eq!(m.differs, vec!["kernel", "label"]);
    assert_eq!(m.columns[2].title, vec!["run 3", "6.18.44", "label tracer"]);
    // The environment's facts join what differs where recorded columns differ; an old
    // run (None) is neither compared nor titled by them.
    let mut named = m.clone();
    let open = crate::base::model::Confinement {
        seccomp_mode: Some(0),
        seccomp_filters: Some(0),
        ..Default::default()
    };
    let filtered = crate::base::model::Confinement {
        seccomp_mode: Some(2),
        seccomp_filters: Some(2),
        ..Default::default()
    };
    let facts = |c: Option<crate::base::model::Confinement>| {
        let mut r = crate::base::model::testdata::run();
        r.env.confinement = c;
        Some(crate::analysis::changes::machine_facts(&r))
    };
    name_environment(
        &mut named,
        &[None, facts(Some(open.clone())), facts(Some(filtered))],
    );
    assert_eq!(named.differs, vec!["kernel", "label", "seccomp filters"]);
    assert_eq!(named.columns[0].title, m.columns[0].title);
    assert_eq!(named.columns[1].title.last().unwrap(), "seccomp filters 0");
    assert_eq!(named.columns[2].title.last().unwrap(), "seccomp filters 2");
    let mut same = m.clone();
    name_environment(
        &mut same,
        &[facts(Some(open.clone())), None, facts(Some(open))],
    );
    assert_eq!(same, m);
    assert_eq!(m.columns[0].title, vec!["run 1", "6.1.0", "label -"]);
    assert_eq!(
        m.rows.iter().map(|r| r.bench.as_str()).collect::<Vec<_>>(),
        ["b", "a"]
    );
    let a = &m.rows[1];
    assert_eq!(a.cells[1].verdict, Some(Verdict::Slower));
    assert_eq!(a.cells[2].verdict, Some(Verdict::Faster));
    assert_eq!(m.rows[0].cells[1].verdict, Some(Verdict::NoChange));
    assert_eq!(m.rows[0].cells[2].missing.as_deref(), Some("failed"));
    let text = render_table(&m, false);
    assert!(text.contains("+50.0%") && text.contains("-40.0%"), "{text}");
    // A cell within the band still shows the change measured.
    assert!(text.contains("~+") || text.contains("~-"), "{text}");
    assert!(text.contains(" ±") && text.contains("failed"), "{text}");
    let csv = render_csv(&m);
    assert_eq!(csv.lines().count(), 1 + 2 * 3);
    assert!(m.changes.is_empty(), "three columns are too few to look");
    assert!(
        csv.contains("a,2,run 2 / 6.18.44 / label -,false,150,1.5,"),
        "{csv}"
    );
}

#[test]
fn the_printed_matrix_fits_100_columns_keeping_the_base_and_says_what_it_left_out() {
    let runs: Vec<RunSummary> = (1..=9).map(|i| summary(i, "6.1", None)).collect();
    let rows: Vec<(i64, ResultRow)> = (1..=9)
        .flat_map(|i| {
            let x = 100.0 + i as f64;
            [
                (i, row("syscall/getpid", x, x - 0.5, x + 0.5)),
                (
                    i,
                    row("spawn/fork", 10.0 * x, 10.0 * x - 5.0, 10.0 * x + 5.0),
                ),
            ]
        })
        .collect();
    let m = build(&runs, &rows, 0, &[], 0.02, None);
    let every = render_table(&m, false);
    assert!(every.lines().any(|l| l.chars().count() > 100), "{every}");
    let fitted = crate::report::matrix_views::render_fitted(&m, false, 100, false);
    assert!(fitted.lines().all(|l| l.chars().count() <= 100), "{fitted}");
    let header = fitted.lines().next().unwrap();
    assert!(
        header.contains("run 1") && header.contains("run 9"),
        "{fitted}"
    );
    assert!(
        !header.contains("run 2 "),
        "the oldest but the base go: {fitted}"
    );
    assert!(
        fitted.contains("columns not shown, the oldest but the base"),
        "{fitted}"
    );
    let wide = crate::report::matrix_views::render_fitted(&m, false, 100, true);
    assert!(wide.lines().next().unwrap().contains("run 2"), "{wide}");
    assert!(!wide.contains("not shown"));
}
