//! OpenMetrics text (`--openmetrics`), for Prometheus and node_exporter's textfile collector:
//! every measured benchmark (`report::outcomes`) as gauges labelled with the benchmark, the
//! host, the kernel release and the run's label: its median and CI bounds in seconds, its
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
        let _ = writeln!(
            x,
            "{name}{{benchmark=\"{}\",{common}}} {}",
            label_value(&r.id),
            number(v)
        );
    }
    let name = "oscost_watch_cpu_ratio";
    let _ = writeln!(x, "# TYPE {name} gauge");
    let _ = writeln!(x, "# UNIT {name} ratio");
    let _ = writeln!(
        x,
        "# HELP {name} The share of one CPU the watch has taken, its workers included."
    );
    let _ = writeln!(x, "{name}{{{common}}} {}", number(duty));
    let name = "oscost_watch_windows";
    let _ = writeln!(x, "# TYPE {name} gauge");
    let _ = writeln!(x, "# HELP {name} Windows measured since the watch started.");
    let _ = writeln!(x, "{name}{{{common}}} {windows}");
    x.push_str("# EOF\n");
    x.into_bytes()
}

/// The labels every sample of a report carries.
fn labels(s: &Subject) -> String {
    format!(
        "host=\"{}\",kernel=\"{}\",label=\"{}\"",
        label_value(s.host.as_deref().unwrap_or("")),
        label_value(s.kernel_release.as_deref().unwrap_or("")),
        label_value(s.label.as_deref().unwrap_or(""))
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
            let _ = writeln!(
                x,
                "{}{{benchmark=\"{}\",{common}}} {}",
                f.name,
                label_value(&o.id),
                number(v)
            );
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
        let _ = writeln!(x, "{name}{{{common}}} {}", number(secs));
    }
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
