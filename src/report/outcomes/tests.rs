use super::*;
use crate::analysis::compare::{Options, compare};
use crate::base::model::testdata;
use crate::report::Exporter;

fn status_of<'a>(o: &'a [CiOutcome], id: &str) -> &'a CiStatus {
    &o.iter().find(|x| x.id == id).expect(id).status
}

#[test]
fn a_runs_results_are_measured_skipped_or_failed() {
    let run = testdata::run();
    let o = of_run(&run);
    assert_eq!(o.len(), run.results.len());
    assert_eq!(status_of(&o, "call/f0"), &CiStatus::Measured);
    assert_eq!(status_of(&o, "timer/rdtscp"), &CiStatus::Skipped);
    let getppid = o.iter().find(|x| x.id == "syscall/getppid").unwrap();
    assert!(getppid.disturbed && getppid.message.contains("disturbed"));
    assert!(getppid.median_ns.is_some() && getppid.ci95_ns.is_some());
}

#[test]
fn a_comparison_calls_a_regression_against_the_gate_or_the_verdict() {
    let (base, cand) = (testdata::run(), testdata::run_scaled(3.0));
    let c = compare(&base, &cand, "base", "cand", &Options::default());
    let slower: Vec<&str> = c
        .rows
        .iter()
        .filter(|r| r.verdict == Verdict::Slower)
        .map(|r| r.id.as_str())
        .collect();
    assert!(!slower.is_empty());
    // Without --fail-above: called slower is a regression.
    let o = of_comparison(&c, None);
    for id in &slower {
        assert_eq!(status_of(&o, id), &CiStatus::Regressed, "{id}");
        let m = &o.iter().find(|x| x.id == *id).unwrap().message;
        assert!(
            m.contains("slower") && m.contains("95% CI") && m.contains("base"),
            "{m}"
        );
    }
    // A gate of 500% lets a 3x slowdown through; one of 10% does not.
    let o = of_comparison(&c, Some(500.0));
    for id in &slower {
        assert_eq!(status_of(&o, id), &CiStatus::Passed, "{id}");
    }
    let o = of_comparison(&c, Some(10.0));
    for id in &slower {
        assert_eq!(status_of(&o, id), &CiStatus::Regressed, "{id}");
    }
    // A run against itself regresses nothing.
    let same = compare(&base, &base, "a", "b", &Options::default());
    assert!(
        of_comparison(&same, None)
            .iter()
            .all(|x| x.status != CiStatus::Regressed)
    );
}

#[test]
fn rows_measured_apart_without_a_spread_are_undecided_or_unknown_under_a_gate() {
    let (base, cand) = (testdata::run(), testdata::run_scaled(3.0));
    let mut c = compare(&base, &cand, "base", "cand", &Options::default());
    for r in &mut c.rows {
        r.apart_unknown = true;
    }
    assert!(
        of_comparison(&c, None)
            .iter()
            .filter(|x| x.change.is_some())
            .all(|x| x.status == CiStatus::Undecided)
    );
    assert!(
        of_comparison(&c, Some(10.0))
            .iter()
            .filter(|x| x.change.is_some())
            .all(|x| x.status == CiStatus::Unknown)
    );
}

#[test]
fn xml_and_label_values_are_escaped_and_paths_are_kcidbs() {
    assert_eq!(
        crate::report::junit::escape("a<b>&\"c'\u{1}d"),
        "a&lt;b&gt;&amp;&quot;c&apos;d"
    );
    assert_eq!(
        crate::report::openmetrics::label_value("a\"b\\c\nd"),
        "a\\\"b\\\\c\\nd"
    );
    assert_eq!(
        crate::report::kcidb::path("switch/pipe-proc@same"),
        "oscost.switch.pipe-proc_same"
    );
    assert_eq!(crate::report::kcidb::path("a.b/c"), "oscost.a_b.c");
}

#[test]
fn the_three_formats_agree_on_a_comparisons_regressions() {
    let (base, cand) = (testdata::run(), testdata::run_scaled(3.0));
    let c = compare(&base, &cand, "base", "cand", &Options::default());
    let regressed = of_comparison(&c, None)
        .iter()
        .filter(|x| x.status == CiStatus::Regressed)
        .count();
    let kcidb: serde_json::Value = serde_json::from_slice(
        &crate::report::kcidb::Kcidb { fail_above: None }
            .serialize(&c)
            .unwrap(),
    )
    .unwrap();
    let fails = kcidb["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "FAIL")
        .count();
    assert_eq!(fails, regressed);
    let junit = String::from_utf8(
        crate::report::junit::Junit { fail_above: None }
            .serialize(&c)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(junit.matches("<failure ").count(), regressed);
    let om = String::from_utf8(
        crate::report::openmetrics::OpenMetrics { fail_above: None }
            .serialize(&c)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        om.lines()
            .filter(|l| l.starts_with("oscost_regression{") && l.ends_with(" 1e0"))
            .count(),
        regressed
    );
    assert!(om.ends_with("# EOF\n"));
}
