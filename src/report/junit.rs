//! JUnit XML (`--junit`), as GitLab, Jenkins and most CI systems show test results: one
//! `testsuite` for the run, comparison or matrix, one `testcase` per benchmark
//! (`report::outcomes`), its class the benchmark's family. A regression is a `failure` whose
//! message says the slowdown, the addition and the CI; undecided or not measured is
//! `skipped` with its reason; a benchmark that failed, or a `--fail-above` that could not be
//! answered, is an `error`; the numbers of every case are in its `system-out`. Read back by
//! junitparser in `tests/ci_results.rs`, as a CI system would.

use super::Exporter;
use super::outcomes::{self, CiOutcome, CiStatus, Subject};
use crate::analysis::compare::Comparison;
use crate::analysis::matrix::Matrix;
use crate::base::model::Run;

/// JUnit XML; a comparison's regression judged against `fail_above` when given.
pub struct Junit {
    /// `--fail-above`, percent.
    pub fail_above: Option<f64>,
}

/// `text` as XML attribute or element text: the five markup characters escaped, and the
/// characters XML 1.0 cannot hold at all (controls other than tab and newlines) left out.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The counts a `testsuite` carries.
#[derive(Default)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

fn counts(outcomes: &[CiOutcome]) -> Counts {
    let mut c = Counts {
        tests: outcomes.len(),
        ..Counts::default()
    };
    for o in outcomes {
        match o.status {
            CiStatus::Regressed => c.failures += 1,
            CiStatus::Unknown | CiStatus::Failed => c.errors += 1,
            CiStatus::Undecided | CiStatus::Skipped => c.skipped += 1,
            CiStatus::Measured | CiStatus::Passed => {}
        }
    }
    c
}

/// One benchmark as a `testcase`.
fn testcase(o: &CiOutcome) -> String {
    let family = o.id.split('/').next().unwrap_or("oscost");
    // The time its timed operations took (samples x median), as a CI system sums test
    // times; absent where nothing was measured.
    let time = match (o.samples, o.median_ns) {
        (Some(n), Some(m)) if m.is_finite() => format!(" time=\"{:.6}\"", n as f64 * m / 1e9),
        _ => String::new(),
    };
    let mut x = format!(
        "    <testcase classname=\"oscost.{}\" name=\"{}\"{time}>\n",
        escape(family),
        escape(&o.id)
    );
    let message = escape(&o.message);
    match o.status {
        CiStatus::Regressed => x.push_str(&format!(
            "      <failure type=\"regression\" message=\"{message}\">{message}</failure>\n"
        )),
        CiStatus::Unknown => x.push_str(&format!(
            "      <error type=\"cannot tell\" message=\"{message}\">{message}</error>\n"
        )),
        CiStatus::Failed => x.push_str(&format!(
            "      <error type=\"failed\" message=\"{message}\">{message}</error>\n"
        )),
        CiStatus::Undecided | CiStatus::Skipped => {
            x.push_str(&format!("      <skipped message=\"{message}\"/>\n"))
        }
        CiStatus::Measured | CiStatus::Passed => {}
    }
    x.push_str(&format!("      <system-out>{message}</system-out>\n"));
    x.push_str("    </testcase>\n");
    x
}

/// The whole document.
fn document(s: &Subject, outcomes: &[CiOutcome]) -> Vec<u8> {
    let c = counts(outcomes);
    let name = format!(
        "oscost {}{}",
        s.what,
        s.label
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default()
    );
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"oscost\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
        c.tests, c.failures, c.errors, c.skipped
    ));
    x.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" timestamp=\"{}\" hostname=\"{}\">\n",
        escape(&name),
        c.tests,
        c.failures,
        c.errors,
        c.skipped,
        escape(&s.started_at),
        escape(s.host.as_deref().unwrap_or("unknown"))
    ));
    x.push_str("    <properties>\n");
    for (k, v) in [
        ("kernel", s.kernel_release.as_deref()),
        ("kernel version", s.kernel_version.as_deref()),
        ("kernel config", s.kernel_config.as_deref()),
        ("label", s.label.as_deref()),
    ] {
        if let Some(v) = v {
            x.push_str(&format!(
                "      <property name=\"{}\" value=\"{}\"/>\n",
                escape(k),
                escape(v)
            ));
        }
    }
    x.push_str("    </properties>\n");
    for o in outcomes {
        x.push_str(&testcase(o));
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x.into_bytes()
}

impl Exporter<Run> for Junit {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        Ok(document(&Subject::of_run(run), &outcomes::of_run(run)))
    }
}

impl Exporter<Comparison> for Junit {
    fn serialize(&self, c: &Comparison) -> anyhow::Result<Vec<u8>> {
        let o = outcomes::of_comparison(c, self.fail_above);
        Ok(document(&Subject::of_comparison(c), &o))
    }
}

impl Exporter<Matrix> for Junit {
    fn serialize(&self, m: &Matrix) -> anyhow::Result<Vec<u8>> {
        Ok(document(&Subject::of_matrix(m), &outcomes::of_matrix(m)))
    }
}
