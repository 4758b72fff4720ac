//! The CI formats, each checked by its own ecosystem's tool, not by a hand check: KCIDB I/O
//! JSON by the `kcidb-io` package's validator, JUnit XML read back by `junitparser` (as a CI
//! system would, with its counts of failures, errors and skips), OpenMetrics text by
//! `promtool check metrics`. `.ci/run` installs all three; where one is missing its check
//! skips, saying so. Written by run, compare, ab and matrix; a regression is a KCIDB `FAIL`
//! and a JUnit failure.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// Python with `module` importable.
fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// kcidb-io's validation of `path` against its latest schema: the statuses of its tests.
fn kcidb_statuses(test: &str, path: &Path) -> Option<Vec<String>> {
    if !python_has("kcidb_io") {
        skip_needing(
            test,
            &["kcidb-io"],
            "the kcidb-io Python package is not installed (pip install kcidb-io)",
        );
        return None;
    }
    let script = "import json, sys, kcidb_io\n\
        data = json.load(open(sys.argv[1]))\n\
        kcidb_io.schema.LATEST.validate(data)\n\
        assert kcidb_io.schema.LATEST.is_compatible_exactly(data)\n\
        print(' '.join(t.get('status', '-') for t in data['tests']))\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kcidb-io refused {}: {}\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap_or_default()
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    )
}

/// What junitparser reads of `path`: (tests, failures, errors, skipped) counted case by case,
/// and the failures' messages.
fn junit_counts(test: &str, path: &Path) -> Option<([usize; 4], Vec<String>)> {
    if !python_has("junitparser") {
        skip_needing(
            test,
            &["junitparser"],
            "the junitparser Python package is not installed (pip install junitparser)",
        );
        return None;
    }
    let script = "import sys\n\
        from junitparser import JUnitXml, Failure, Error, Skipped\n\
        xml = JUnitXml.fromfile(sys.argv[1])\n\
        n = [0, 0, 0, 0]\n\
        msgs = []\n\
        for suite in xml:\n\
        \x20   for case in suite:\n\
        \x20       n[0] += 1\n\
        \x20       for r in case.result:\n\
        \x20           if isinstance(r, Failure):\n\
        \x20               n[1] += 1; msgs.append(r.message)\n\
        \x20           elif isinstance(r, Error):\n\
        \x20               n[2] += 1\n\
        \x20           elif isinstance(r, Skipped):\n\
        \x20               n[3] += 1\n\
        print(*n)\n\
        for m in msgs: print(m)\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "junitparser could not read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let n: Vec<usize> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    Some((
        [n[0], n[1], n[2], n[3]],
        lines.map(str::to_string).collect(),
    ))
}

/// `promtool check metrics` on `path`: accepted without a problem.
fn promtool_accepts(test: &str, path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        skip_needing(
            test,
            &["promtool"],
            "promtool is not installed (Debian: apt-get install prometheus)",
        );
        return;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The three formats' flags writing into `dir` with the prefix `name`.
fn flags(dir: &Path, name: &str) -> Vec<String> {
    ["kcidb", "junit", "openmetrics"]
        .iter()
        .flat_map(|f| {
            [
                format!("--{f}"),
                dir.join(format!("{name}.{f}"))
                    .to_string_lossy()
                    .into_owned(),
            ]
        })
        .collect()
}

#[test]
fn a_run_writes_the_three_formats_each_accepted_by_its_tool() {
    let test = "a_run_writes_the_three_formats_each_accepted_by_its_tool";
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let out = oscost(&unique_tag("ci-results"))
        .args([
            "run",
            "--samples",
            "100",
            "call/f0",
            "syscall/getppid",
            "timer/rdtscp",
            "--no-save",
        ])
        .args(flags(dir.path(), "run"))
        .output()
        .unwrap();
    assert_success(&out);
    let p = |f: &str| dir.path().join(format!("run.{f}"));
    if let Some(statuses) = kcidb_statuses(test, &p("kcidb")) {
        // Measured results are DONE (a number, no judgement); one not measured here is SKIP.
        assert!(
            statuses.iter().filter(|s| *s == "DONE").count() >= 2,
            "{statuses:?}"
        );
        assert!(
            statuses.iter().all(|s| s == "DONE" || s == "SKIP"),
            "{statuses:?}"
        );
    }
    let kcidb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("kcidb")).unwrap()).unwrap();
    let getppid = kcidb["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["path"] == "oscost.syscall.getppid")
        .expect("a test for syscall/getppid");
    assert_eq!(getppid["number"]["unit"], "s");
    let v = getppid["number"]["value"].as_f64().unwrap();
    assert!(v > 1e-9 && v < 1e-3, "a system call in seconds: {v}");
    if let Some(([tests, failures, errors, _], _)) = junit_counts(test, &p("junit")) {
        assert!(tests >= 2, "{tests}");
        assert_eq!((failures, errors), (0, 0));
    }
    promtool_accepts(test, &p("openmetrics"));
    let om = std::fs::read_to_string(p("openmetrics")).unwrap();
    assert!(
        om.lines()
            .any(|l| l.starts_with("oscost_median_seconds{benchmark=\"syscall/getppid\"")),
        "{om}"
    );
}

/// Two stored runs, the second 1.5x the first: a comparison calls the regression, which is a
/// KCIDB FAIL and a JUnit failure naming the slowdown; with a --fail-above it stays under,
/// both pass; the matrix of the two says the same.
#[test]
fn a_regression_is_a_kcidb_failure_and_a_junit_failure() {
    let test = "a_regression_is_a_kcidb_failure_and_a_junit_failure";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let base = {
        let _m = measuring();
        run_json(
            &unique_tag("ci-regression"),
            &["--samples", "200", "syscall/getppid", "--no-save"],
        )
        .1
    };
    let _m = measuring();
    let scaled = |i: usize, f: f64| {
        let mut run = base.clone();
        run.started_at = format!("2026-11-27T10:00:{i:02}Z");
        run.label = Some(format!("k{i}"));
        // The samples are made, not measured: a noisy host's getppid blocks can spread wider
        // than 1.5x (CI's machine once made this comparison undecided), and this test is
        // about the formats, not the host. Each is the measured median within ±1%.
        for r in &mut run.results {
            let median = r.stats.as_ref().map_or(100.0, |s| s.median);
            let n = r.samples_ns.len();
            r.samples_ns = (0..n)
                .map(|k| median * f * (0.99 + 0.02 * ((k * 37) % 101) as f64 / 100.0))
                .collect();
            r.stats = oscost::base::stats::summarize(&r.samples_ns);
        }
        let p = dir.path().join(format!("k{i}.json"));
        std::fs::write(&p, serde_json::to_vec(&run).unwrap()).unwrap();
        p
    };
    let files = [scaled(1, 1.0), scaled(2, 1.5)];
    let out = oscost("import")
        .arg("import")
        .args(&files)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    let compare = |name: &str, extra: &[&str]| {
        oscost("compare")
            .args(["compare", "1", "2", "--together", "--db"])
            .arg(&db)
            .args(extra)
            .args(flags(dir.path(), name))
            .output()
            .unwrap()
    };
    let out = compare("slower", &[]);
    assert_success(&out);
    let p = |name: &str, f: &str| dir.path().join(format!("{name}.{f}"));
    if let Some(statuses) = kcidb_statuses(test, &p("slower", "kcidb")) {
        assert_eq!(statuses, ["FAIL"]);
    }
    if let Some(([tests, failures, errors, skipped], msgs)) =
        junit_counts(test, &p("slower", "junit"))
    {
        assert_eq!((tests, failures, errors, skipped), (1, 1, 0, 0));
        assert!(
            msgs[0].contains("x1.5") && msgs[0].contains(" base") && msgs[0].contains("95% CI"),
            "{msgs:?}"
        );
    }
    promtool_accepts(test, &p("slower", "openmetrics"));
    let om = std::fs::read_to_string(p("slower", "openmetrics")).unwrap();
    assert!(
        om.contains("oscost_regression{benchmark=\"syscall/getppid\""),
        "{om}"
    );
    // A 60% allowance: slower, but within it.
    let out = compare("allowed", &["--fail-above", "60"]);
    assert_success(&out);
    if let Some(statuses) = kcidb_statuses(test, &p("allowed", "kcidb")) {
        assert_eq!(statuses, ["PASS"]);
    }
    if let Some((counts, _)) = junit_counts(test, &p("allowed", "junit")) {
        assert_eq!(counts, [1, 0, 0, 0]);
    }
    // A 10% allowance: beyond it, and the exit status says so too.
    let out = compare("gated", &["--fail-above", "10"]);
    assert_eq!(out.status.code(), Some(1));
    if let Some(statuses) = kcidb_statuses(test, &p("gated", "kcidb")) {
        assert_eq!(statuses, ["FAIL"]);
    }
    // The matrix of the two: its last column against the first.
    let out = oscost("matrix")
        .args(["matrix", "--db"])
        .arg(&db)
        .args(flags(dir.path(), "matrix"))
        .output()
        .unwrap();
    assert_success(&out);
    kcidb_statuses(test, &p("matrix", "kcidb"));
    if let Some((counts, _)) = junit_counts(test, &p("matrix", "junit")) {
        assert_eq!(counts[0], 1);
    }
    promtool_accepts(test, &p("matrix", "openmetrics"));
}

/// ab writes the comparison of its two sides in the three formats.
#[test]
fn ab_writes_the_three_formats() {
    let test = "ab_writes_the_three_formats";
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let out = oscost(&unique_tag("ci-ab"))
        .args([
            "ab",
            "--samples",
            "100",
            "--rounds",
            "2",
            "call/f0",
            "--no-save",
        ])
        .args(flags(dir.path(), "ab"))
        .output()
        .unwrap();
    assert_success(&out);
    let p = |f: &str| dir.path().join(format!("ab.{f}"));
    if let Some(statuses) = kcidb_statuses(test, &p("kcidb")) {
        assert_eq!(statuses.len(), 1, "{statuses:?}");
    }
    if let Some((counts, _)) = junit_counts(test, &p("junit")) {
        assert_eq!(counts[0], 1);
    }
    promtool_accepts(test, &p("openmetrics"));
}
