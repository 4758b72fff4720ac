//! What a CI system is told of each benchmark, whatever its format (KCIDB, JUnit,
//! OpenMetrics): one `CiOutcome` per result of a run, per row of a comparison, or per benchmark
//! of a matrix's last column against its base. An outcome carries the numbers (the median
//! and its CI, the change and its CI) and a `CiStatus` decided here once, so the three formats
//! cannot disagree on what a regression is:
//!
//! - a run: measured, skipped or failed;
//! - a comparison: regressed when slower beyond `--fail-above` (without it, when called
//!   slower: the whole CI above the noise band), passed when decided otherwise (no change
//!   inside the band, faster, or slower within `--fail-above`), undecided when nothing could
//!   be called (a CI wider than the band, `ab` stopped at its budget, runs measured apart with
//!   no run-to-run spread), and unknown where `--fail-above` was asked of such a row (the
//!   gate cannot pass it: `compare` exits 1 for it too);
//! - a matrix: as a comparison without `--fail-above`, its last column against the base.

use crate::analysis::compare::{BenchComparison, Comparison, Verdict};
use crate::analysis::matrix::Matrix;
use crate::base::model::{Run, Status as RunStatus};

/// What became of one benchmark, for a CI system.
#[derive(Debug, Clone, PartialEq)]
pub enum CiStatus {
    /// A run's result, measured (no verdict: a number).
    Measured,
    /// A comparison decided, and not a regression.
    Passed,
    /// A regression: slower beyond `--fail-above`, or called slower without it.
    Regressed,
    /// Nothing could be called; the reason in the outcome's message.
    Undecided,
    /// `--fail-above` was asked and could not be answered (runs measured apart with no
    /// run-to-run spread known).
    Unknown,
    /// Not measured here, and why.
    Skipped,
    /// The measurement failed, and how.
    Failed,
}

/// A change against a base: the candidate over the base, with its CI, and the addition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// The base's median, ns.
    pub base_ns: f64,
    /// Candidate over base.
    pub slowdown: f64,
    /// Its 95% CI.
    pub slowdown_ci95: [f64; 2],
    /// Candidate minus base, ns.
    pub addition_ns: f64,
}

/// One benchmark's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct CiOutcome {
    /// The result's id (`switch/pipe-proc@same`).
    pub id: String,
    /// The median, ns per operation (a comparison's: the candidate's); none when not measured.
    pub median_ns: Option<f64>,
    /// The median's 95% CI, ns, where known.
    pub ci95_ns: Option<[f64; 2]>,
    /// Samples behind the median, where known.
    pub samples: Option<usize>,
    /// The measurement was flagged disturbed (either side, for a change).
    pub disturbed: bool,
    /// Against a base, where there is one.
    pub change: Option<Change>,
    /// What became of it.
    pub status: CiStatus,
    /// One line: the number, the change, the verdict or the reason.
    pub message: String,
}

/// "x1.50 slower, +103 ns on a 206 ns base (95% CI x1.11 to x2.02)", every time in the unit
/// that suits it ("+172.7 us on a 131.7 us base").
fn change_words(c: &Change, verdict: &str) -> String {
    format!(
        "x{:.3} {verdict}, {} on a {} base (95% CI x{:.3} to x{:.3})",
        c.slowdown,
        crate::report::signed_ns(c.addition_ns),
        crate::report::format_ns(c.base_ns),
        c.slowdown_ci95[0],
        c.slowdown_ci95[1]
    )
}

/// Every result of a run.
pub fn of_run(run: &Run) -> Vec<CiOutcome> {
    run.results
        .iter()
        .map(|r| {
            let stats = r.stats.as_ref().filter(|s| s.median.is_finite());
            let (status, message) = match (&r.status, stats) {
                (RunStatus::Skipped { reason }, _) => (CiStatus::Skipped, reason.clone()),
                (RunStatus::Failed { reason }, _) => (CiStatus::Failed, reason.clone()),
                (RunStatus::Ok, Some(s)) => (
                    CiStatus::Measured,
                    format!(
                        "median {} (95% CI {} to {}), {} samples{}",
                        crate::report::format_ns(s.median),
                        crate::report::format_ns(s.ci95[0]),
                        crate::report::format_ns(s.ci95[1]),
                        s.count,
                        if r.disturbed.is_disturbed() {
                            format!("; disturbed: {}", r.disturbed.flag.join("; "))
                        } else {
                            String::new()
                        }
                    ),
                ),
                (RunStatus::Ok, None) => (CiStatus::Failed, "no samples".into()),
            };
            CiOutcome {
                id: r.id.clone(),
                median_ns: stats.map(|s| s.median),
                ci95_ns: stats.map(|s| s.ci95),
                samples: stats.map(|s| s.count),
                disturbed: r.disturbed.is_disturbed(),
                change: None,
                status,
                message,
            }
        })
        .collect()
}

/// Why a row of a comparison decided nothing, or `None` when it decided.
fn undecided_why(r: &BenchComparison) -> Option<&'static str> {
    if r.apart_unknown {
        return Some(
            "the runs were measured apart and no run-to-run spread is known for either environment",
        );
    }
    if r.rounds
        .as_ref()
        .is_some_and(|x| x.decision == crate::analysis::compare::rounds::Decision::Undecided)
    {
        return Some("ab's rounds ended at the budget before the comparison decided");
    }
    (r.verdict == Verdict::NoChange && !r.within_band)
        .then_some("no change called, but the CI is wider than the noise band")
}

/// Every row of a comparison, a regression judged against `fail_above` (percent) when given.
pub fn of_comparison(c: &Comparison, fail_above: Option<f64>) -> Vec<CiOutcome> {
    let mut out: Vec<CiOutcome> = c
        .rows
        .iter()
        .map(|r| {
            let change = Change {
                base_ns: r.base_median_ns,
                slowdown: r.slowdown,
                slowdown_ci95: r.slowdown_ci95,
                addition_ns: r.addition_ns,
            };
            let words = change_words(&change, r.verdict.word());
            let (status, message) = match (undecided_why(r), fail_above) {
                (Some(_), Some(p)) if r.apart_unknown => (
                    CiStatus::Unknown,
                    format!("{words}; cannot tell whether it regressed by more than {p}%: the runs were measured apart and no run-to-run spread is known"),
                ),
                (Some(why), _) => (CiStatus::Undecided, format!("{words}; undecided: {why}")),
                (None, Some(p)) if r.slowdown_ci95[0] > 1.0 + p / 100.0 => (
                    CiStatus::Regressed,
                    format!("{words}: slower by more than --fail-above {p}%"),
                ),
                (None, Some(p)) => (
                    CiStatus::Passed,
                    format!("{words}: within --fail-above {p}%"),
                ),
                (None, None) if r.verdict == Verdict::Slower => (CiStatus::Regressed, words),
                (None, None) => (CiStatus::Passed, words),
            };
            CiOutcome {
                id: r.id.clone(),
                median_ns: Some(r.cand_median_ns).filter(|v| v.is_finite()),
                ci95_ns: None,
                samples: None,
                disturbed: r.disturbed,
                change: Some(change),
                status,
                message,
            }
        })
        .collect();
    let missing = |ids: &[String], why: &str, status: CiStatus| {
        ids.iter()
            .map(|id| CiOutcome {
                id: id.clone(),
                median_ns: None,
                ci95_ns: None,
                samples: None,
                disturbed: false,
                change: None,
                status: status.clone(),
                message: why.to_string(),
            })
            .collect::<Vec<_>>()
    };
    out.extend(missing(
        &c.unmeasured,
        "not measured on one side (skipped or failed there)",
        CiStatus::Skipped,
    ));
    out.extend(missing(
        &c.only_base,
        "only in the base: not measured in the candidate",
        CiStatus::Skipped,
    ));
    out.extend(missing(
        &c.only_cand,
        "only in the candidate: nothing to compare with",
        CiStatus::Skipped,
    ));
    out
}

/// Every benchmark of a matrix's last column, against its base column.
pub fn of_matrix(m: &Matrix) -> Vec<CiOutcome> {
    let last = m.columns.len().saturating_sub(1);
    m.rows
        .iter()
        .filter_map(|row| {
            let cell = row.cells.get(last)?;
            let base = row.cells.get(m.base)?;
            let change = match (cell.slowdown, cell.slowdown_ci95, cell.addition_ns, base.median_ns)
            {
                (Some(s), Some(ci), Some(a), Some(b)) => Some(Change {
                    base_ns: b,
                    slowdown: s,
                    slowdown_ci95: ci,
                    addition_ns: a,
                }),
                _ => None,
            };
            let (status, message) = match (&cell.missing, cell.verdict, &change) {
                (Some(word), _, _) => (CiStatus::Skipped, format!("not measured in this run: {word}")),
                (None, Some(v), Some(c)) => {
                    let words = change_words(c, v.word());
                    match v {
                        Verdict::Slower => (CiStatus::Regressed, words),
                        Verdict::NoChange if c.slowdown_ci95[1] - c.slowdown_ci95[0]
                            > 2.0 * m.threshold => (
                            CiStatus::Undecided,
                            format!("{words}; undecided: the CI is wider than the noise band"),
                        ),
                        _ => (CiStatus::Passed, words),
                    }
                }
                (None, None, _) if last == m.base => (
                    CiStatus::Measured,
                    "the base column itself".to_string(),
                ),
                (None, _, _) => (
                    CiStatus::Undecided,
                    "no change called: a run without a CI, or runs measured apart with no run-to-run spread known".to_string(),
                ),
            };
            Some(CiOutcome {
                id: row.bench.clone(),
                median_ns: cell.median_ns,
                ci95_ns: None,
                samples: None,
                disturbed: cell.disturbed,
                change,
                status,
                message,
            })
        })
        .collect()
}

/// What was measured, for the formats that name it (KCIDB's checkout and build, OpenMetrics'
/// labels): a run's machine, a comparison's candidate, a matrix's last column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Subject {
    /// The host's name.
    pub host: Option<String>,
    /// `uname -r`.
    pub kernel_release: Option<String>,
    /// `uname -v`, where known (a run's).
    pub kernel_version: Option<String>,
    /// The digest of the kernel's build configuration, where it was readable.
    pub kernel_config: Option<String>,
    /// The label the run was given.
    pub label: Option<String>,
    /// When it started, RFC 3339.
    pub started_at: String,
    /// What the document reports: "run", "comparison of B against A", "matrix".
    pub what: String,
    /// A text that identifies this report among oscost's (digested into KCIDB's ids).
    pub identity: String,
}

impl Subject {
    /// A run's.
    pub fn of_run(run: &Run) -> Subject {
        Subject {
            host: run.env.hostname.clone(),
            kernel_release: run.env.kernel_release.clone(),
            kernel_version: run.env.kernel_version.clone(),
            kernel_config: run.env.kernel_config.as_ref().map(|k| k.digest.clone()),
            label: run.label.clone(),
            started_at: run.started_at.clone(),
            what: "run".into(),
            identity: format!(
                "run {} {}",
                run.started_at,
                run.env.hostname.as_deref().unwrap_or("")
            ),
        }
    }

    /// A comparison's candidate side.
    pub fn of_comparison(c: &Comparison) -> Subject {
        Subject {
            host: c.cand.host.clone(),
            kernel_release: c.cand.kernel.clone(),
            kernel_version: None,
            kernel_config: c.cand.kernel_config.clone(),
            label: c.cand.label.clone(),
            started_at: c.cand.started_at.clone(),
            what: format!("comparison of {} against {}", c.cand.name, c.base.name),
            identity: format!(
                "comparison {} {} {} {}",
                c.base.started_at, c.cand.started_at, c.base.name, c.cand.name
            ),
        }
    }

    /// A matrix's last column.
    pub fn of_matrix(m: &Matrix) -> Subject {
        let last = m.columns.last();
        let base = m.columns.get(m.base);
        Subject {
            host: last.and_then(|c| c.host.clone()),
            kernel_release: last.and_then(|c| c.kernel.clone()),
            kernel_version: None,
            kernel_config: None,
            label: last.and_then(|c| c.label.clone()),
            started_at: last.map(|c| c.started_at.clone()).unwrap_or_default(),
            what: format!(
                "matrix: {} against its base column, {}",
                last.map(|c| c.title.join(" ")).unwrap_or_default(),
                base.map(|c| c.title.join(" ")).unwrap_or_default()
            ),
            identity: format!(
                "matrix {}",
                m.columns
                    .iter()
                    .map(|c| c.run_id.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

#[cfg(test)]
mod tests;
