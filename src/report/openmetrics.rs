//! OpenMetrics text (`--openmetrics`), for Prometheus and node_exporter's textfile collector:
//! every measured benchmark (`report::outcomes`) as gauges labelled with the benchmark, the
//! host and the kernel release (each only where known; the run's label, free text, only on
//! `oscost_run_info`, value 1, to be joined on): its median and CI bounds in seconds, its
//! samples, whether it was disturbed; against a base (a comparison, a matrix's last column)
//! also the slowdown with its CI and whether it is a regression; and when the report's run
//! started. No sample carries a timestamp (the textfile collector refuses them), and the file
//! ends with `# EOF`. It is written like every file oscost writes: to a temporary file beside
//! it, renamed over it, so a collector reading at any moment reads a whole file. Checked by
//! `promtool check metrics` in `tests/ci_results.rs`.

use std::fmt::Write;

use super::Exporter;
use super::outcomes::{self, CiOutcome, CiStatus, Subject};
use crate::analysis::compare::Comparison;
use crate::analysis::matrix::Matrix;
use crate::base::model::Run;

/// OpenMetrics text; a comparison's regression judged against `fail_above` when given.
pub struct OpenMetrics {
    /// `--fail-above`, percent.
    pub fail_above: Option<f64>,
}

/// A label value as the format quotes it: backslash, double quote and newline escaped.
pub fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// One gauge family: its name (with its unit's suffix), unit, help, and one value per
/// benchmark that has it.
struct Family<'a> {
    name: &'a str,
    unit: Option<&'a str>,
    help: &'a str,
    value: fn(&CiOutcome) -> Option<f64>,
}

const FAMILIES: &[Family<'static>] = &[
    Family {
        name: "oscost_median_seconds",
        unit: Some("seconds"),
        help: "The median time of one operation (a comparison's: the candidate's).",
        value: |o| o.median_ns.map(|v| v * 1e-9),
    },
    Family {
        name: "oscost_ci_lower_seconds",
        unit: Some("seconds"),
        help: "The lower bound of the median's 95% confidence interval.",
        value: |o| o.ci95_ns.map(|c| c[0] * 1e-9),
    },
    Family {
        name: "oscost_ci_upper_seconds",
        unit: Some("seconds"),
        help: "The upper bound of the median's 95% confidence interval.",
        value: |o| o.ci95_ns.map(|c| c[1] * 1e-9),
    },
    Family {
        name: "oscost_samples",
        unit: None,
        help: "Samples behind the median.",
        value: |o| o.samples.map(|n| n as f64),
    },
    Family {
        name: "oscost_disturbed",
        unit: None,
        help: "1 when the measurement was flagged disturbed (preempted, stolen, shared).",
        value: |o| o.median_ns.map(|_| f64::from(u8::from(o.disturbed))),
    },
    Family {
        name: "oscost_slowdown_ratio",
        unit: Some("ratio"),
        help: "The candidate's time over the base's.",
        value: |o| o.change.map(|c| c.slowdown),
    },
    Family {
        name: "oscost_slowdown_ci_lower_ratio",
        unit: Some("ratio"),
        help: "The lower bound of the slowdown's 95% confidence interval.",
        value: |o| o.change.map(|c| c.slowdown_ci95[0]),
    },
    Family {
        name: "oscost_slowdown_ci_upper_ratio",
        unit: Some("ratio"),
        help: "The upper bound of the slowdown's 95% confidence interval.",
        value: |o| o.change.map(|c| c.slowdown_ci95[1]),
    },
    Family {
        name: "oscost_regression",
        unit: None,
        help: "1 when the change is a regression (beyond --fail-above, or called slower).",
        value: |o| {
            o.change
                .map(|_| f64::from(u8::from(o.status == CiStatus::Regressed)))
        },
    },
];

/// A number as the format writes it (`NaN`, `+Inf` spelled its way).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v:e}")
    }
}

/// The whole text.
fn document(s: &Subject, outcomes: &[CiOutcome]) -> Vec<u8> {
    let mut x = body(s, outcomes);
    x.push_str("# EOF\n");
    x.into_bytes()
}

/// `oscost watch`'s file: the last window's results as a run's, then the watch's own gauges:
/// each benchmark's last change called (new level over old; 1 until one is), the CPU share
/// the watch has taken, and the windows measured.
pub fn watch(
    last: &Run,
    changes: &std::collections::BTreeMap<String, f64>,
    duty: f64,
    windows: u64,
) -> Vec<u8> {
    let s = Subject::of_run(last);
    let o = outcomes::of_run(last);
    let mut x = body(&s, &o);
    let common = labels(&s);
    let name = "oscost_watch_change_ratio";
    let _ = writeln!(x, "# TYPE {name} gauge");
    let _ = writeln!(x, "# UNIT {name} ratio");
    let _ = writeln!(
        x,
        "# HELP {name} The last lasting change the watch called: new level over old (1: none yet)."
    );
    for r in &o {
        let v = changes.get(&r.id).copied().unwrap_or(1.0);
        x.push_str(&sample(name, Some(&r.id), &common, &number(v)));
    }
    let name = "oscost_watch_cpu_ratio";
    let _ = writeln!(x, "# TYPE {name} gauge");
    let _ = writeln!(x, "# UNIT {name} ratio");
    let _ = writeln!(
        x,
        "# HELP {name} The share of one CPU the watch has taken, its workers included."
    );
    x.push_str(&sample(name, None, &common, &number(duty)));
    // A counter, so `_total`; its TYPE and HELP under the sample's own name, as the classic
    // text format that promtool and the textfile collector parse wants them.
    let name = "oscost_watch_windows_total";
    let _ = writeln!(x, "# TYPE {name} counter");
    let _ = writeln!(x, "# HELP {name} Windows measured since the watch started.");
    x.push_str(&sample(name, None, &common, &windows.to_string()));
    x.push_str("# EOF\n");
    x.into_bytes()
}

/// The labels every sample of a report carries: the host and the kernel release, each only
/// where known (an empty label value is no label in Prometheus, and reads as a mistake).
fn labels(s: &Subject) -> Vec<(&'static str, String)> {
    [("host", &s.host), ("kernel", &s.kernel_release)]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.clone().filter(|v| !v.is_empty())?)))
        .collect()
}

/// One sample line: `name{k="v",...} value`, the `benchmark` label first where there is one,
/// no braces without labels.
fn sample(name: &str, benchmark: Option<&str>, common: &[(&str, String)], value: &str) -> String {
    let pairs: Vec<String> = benchmark
        .map(|b| ("benchmark", b))
        .into_iter()
        .chain(common.iter().map(|(k, v)| (*k, v.as_str())))
        .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
        .collect();
    if pairs.is_empty() {
        format!("{name} {value}\n")
    } else {
        format!("{name}{{{}}} {value}\n", pairs.join(","))
    }
}

/// The run's label, free text (`ab B: strace -f -o /dev/null`), as the one info-style sample
/// that carries it, so that no other series has a free-text label value: joined in PromQL by
/// `* on(host, kernel) group_left(label) oscost_run_info`. Nothing without a label.
fn run_info(s: &Subject, common: &[(&str, String)]) -> String {
    let Some(label) = s.label.as_deref().filter(|l| !l.is_empty()) else {
        return String::new();
    };
    let name = "oscost_run_info";
    let mut with = common.to_vec();
    with.push(("label", label.to_string()));
    format!(
        "# TYPE {name} gauge\n# HELP {name} The label the measurement was given (value 1).\n{}",
        sample(name, None, &with, "1")
    )
}

/// Every family of `outcomes`, and the start time, without the end marker.
fn body(s: &Subject, outcomes: &[CiOutcome]) -> String {
    let common = labels(s);
    let mut x = String::new();
    for f in FAMILIES {
        // A value not known (a CI from one repetition) is left out, not written as NaN.
        let values: Vec<(&CiOutcome, f64)> = outcomes
            .iter()
            .filter_map(|o| Some((o, (f.value)(o).filter(|v| v.is_finite())?)))
            .collect();
        if values.is_empty() {
            continue;
        }
        let _ = writeln!(x, "# TYPE {} gauge", f.name);
        if let Some(u) = f.unit {
            let _ = writeln!(x, "# UNIT {} {u}", f.name);
        }
        let _ = writeln!(x, "# HELP {} {}", f.name, f.help);
        for (o, v) in values {
            x.push_str(&sample(f.name, Some(&o.id), &common, &number(v)));
        }
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&s.started_at) {
        let name = "oscost_start_time_seconds";
        let _ = writeln!(x, "# TYPE {name} gauge");
        let _ = writeln!(x, "# UNIT {name} seconds");
        let _ = writeln!(
            x,
            "# HELP {name} When the measurement reported started (Unix time)."
        );
        let secs = t.timestamp() as f64 + f64::from(t.timestamp_subsec_millis()) / 1e3;
        x.push_str(&sample(name, None, &common, &number(secs)));
    }
    x.push_str(&run_info(s, &common));
    x
}

impl Exporter<Run> for OpenMetrics {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        Ok(document(&Subject::of_run(run), &outcomes::of_run(run)))
    }
}

impl Exporter<Comparison> for OpenMetrics {
    fn serialize(&self, c: &Comparison) -> anyhow::Result<Vec<u8>> {
        let o = outcomes::of_comparison(c, self.fail_above);
        Ok(document(&Subject::of_comparison(c), &o))
    }
}

impl Exporter<Matrix> for OpenMetrics {
    fn serialize(&self, m: &Matrix) -> anyhow::Result<Vec<u8>> {
        Ok(document(&Subject::of_matrix(m), &outcomes::of_matrix(m)))
    }
}
