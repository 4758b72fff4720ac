//! A matrix whose columns are groups of runs (`oscost matrix --by kernel`): each column the
//! runs sharing one value of the key, each cell that group against the base group. Runs of a
//! group were measured apart, so a group is judged by the scatter of its runs' levels, not by
//! their own CIs: `run_to_run::group_difference` (Welch's t on the runs' log-medians, each
//! group's variance at least its runs' typical own variance). A group of one run has a level
//! but no scatter: its cells show the change and call nothing, and say how many runs to add.

use super::{BenchAcross, Cell, Column, Matrix, RunToRun};
use crate::analysis::compare::verdict;
use crate::analysis::run_to_run::{self, RunLevel};
use crate::analysis::select::GroupKey;
use crate::base::model::ResultRow;
use crate::base::model::RunSummary;

/// One column: the key's value and its runs, in column order.
pub struct Group {
    /// The key's value ("6.18.44", a host's name).
    pub value: String,
    /// The runs with that value, oldest first.
    pub runs: Vec<RunSummary>,
}

/// The column of a group: the first run's identity, the fields every run shares, and a title
/// of the key's value and the number of runs.
fn column(key: GroupKey, g: &Group) -> Column {
    let first = &g.runs[0];
    let shared = |get: fn(&RunSummary) -> &Option<String>| {
        let v = get(first);
        g.runs
            .iter()
            .all(|r| get(r) == v)
            .then(|| v.clone())
            .flatten()
    };
    let value = if g.value.is_empty() {
        "none".to_string()
    } else {
        crate::base::text::printable(&g.value).into_owned()
    };
    let n = g.runs.len();
    Column {
        run_id: first.id,
        started_at: first.started_at.clone(),
        label: shared(|r| &r.label),
        host: shared(|r| &r.host),
        kernel: shared(|r| &r.kernel),
        wrapper: shared(|r| &r.wrapper),
        title: vec![
            format!("{} {value}", key.name()),
            format!("{n} run{}", if n == 1 { "" } else { "s" }),
        ],
        runs: g.runs.iter().map(|r| r.id).collect(),
    }
}

/// The levels of `bench` in a group's runs that measured it with a CI, and the status of one
/// run that did not measure it ("absent" when none has a row).
fn levels(g: &Group, rows: &[(i64, ResultRow)], bench: &str) -> (Vec<RunLevel>, Option<String>) {
    let mut out = Vec::new();
    let mut status = None;
    for r in &g.runs {
        for (_, row) in rows
            .iter()
            .filter(|(id, x)| *id == r.id && x.bench == bench)
        {
            match (row.status.as_str(), row.median, row.ci_lo, row.ci_hi) {
                ("ok", Some(median), Some(lo), Some(hi)) if median > 0.0 => {
                    out.push(RunLevel {
                        median,
                        ci95: [lo, hi],
                    });
                }
                (s, ..) => status = Some(s.to_string()),
            }
        }
    }
    let missing = out
        .is_empty()
        .then(|| status.unwrap_or_else(|| "absent".into()));
    (out, missing)
}

fn geometric_mean(levels: &[RunLevel]) -> f64 {
    let n = levels.len() as f64;
    (levels.iter().map(|l| l.median.ln()).sum::<f64>() / n).exp()
}

/// A group's cell against the base group's levels.
fn cell(base: &[RunLevel], cand: &[RunLevel], threshold: f64) -> Cell {
    let mut c = Cell::bare(Some(geometric_mean(cand)), None, false);
    if base.is_empty() {
        return c;
    }
    let (b, m) = (geometric_mean(base), geometric_mean(cand));
    c.slowdown = Some(m / b);
    c.addition_ns = Some(m - b);
    if let Some(d) = run_to_run::group_difference(base, cand) {
        c.slowdown_ci95 = Some(d.ratio_ci95);
        c.addition_ci95 = Some([b * (d.ratio_ci95[0] - 1.0), b * (d.ratio_ci95[1] - 1.0)]);
        c.verdict = Some(verdict(d.ratio_ci95, d.ratio, threshold).0);
    }
    c
}

/// The matrix of `groups` (columns in their order) against `groups[base]`; benchmarks in
/// `order` first, then any others as found. Each row's run-to-run spread is the base group's
/// own, learned from its runs (`run_to_run::estimate`).
pub fn build_groups(
    key: GroupKey,
    groups: &[Group],
    rows: &[(i64, ResultRow)],
    base: usize,
    order: &[String],
    threshold: f64,
) -> Matrix {
    let columns: Vec<Column> = groups.iter().map(|g| column(key, g)).collect();
    let mut benches: Vec<String> = order.to_vec();
    for (_, r) in rows {
        if !benches.contains(&r.bench) {
            benches.push(r.bench.clone());
        }
    }
    let rows_out = benches
        .iter()
        .map(|bench| {
            let per_group: Vec<_> = groups.iter().map(|g| levels(g, rows, bench)).collect();
            let base_levels = per_group[base].0.clone();
            let cells = per_group
                .iter()
                .enumerate()
                .map(|(i, (lv, missing))| match missing {
                    Some(m) => Cell::bare(None, Some(m.clone()), false),
                    None if i == base => Cell::bare(Some(geometric_mean(lv)), None, false),
                    None => cell(&base_levels, lv, threshold),
                })
                .collect();
            (bench, cells, base_levels)
        })
        .filter(|(_, cells, _): &(_, Vec<Cell>, _)| cells.iter().any(|c| c.missing.is_none()))
        .map(|(bench, cells, base_levels)| BenchAcross {
            bench: bench.clone(),
            cells,
            run_to_run: run_to_run::estimate(&base_levels).map(RunToRun::from),
        })
        .collect();
    Matrix {
        base,
        columns,
        differs: vec![key.name().to_string()],
        threshold,
        rows: rows_out,
        // Change points along columns are a time series of runs; groups are not one.
        changes: vec![],
        by: Some(key.name().to_string()),
        odd_runs: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::Verdict;

    fn run(id: i64, kernel: &str) -> RunSummary {
        RunSummary {
            id,
            started_at: format!("2026-11-{id:02}T00:00:00Z"),
            label: None,
            host: Some("box".into()),
            kernel: Some(kernel.into()),
            wrapper: None,
            benchmarks: 1,
            env_key: None,
        }
    }

    fn row(id: i64, bench: &str, median: f64) -> (i64, ResultRow) {
        (
            id,
            ResultRow {
                bench: bench.into(),
                status: "ok".into(),
                median: Some(median),
                ci_lo: Some(median * 0.995),
                ci_hi: Some(median * 1.005),
                samples: 100,
                disturbed: false,
                exit_witness_ns: None,
                speed_witness_ns: None,
            },
        )
    }

    #[test]
    fn groups_of_runs_are_judged_by_their_scatter() {
        let runs: Vec<RunSummary> = [(1, "6.1"), (2, "6.6"), (3, "6.1"), (4, "6.6"), (5, "6.1")]
            .iter()
            .map(|&(id, k)| run(id, k))
            .chain([run(6, "6.9")])
            .collect();
        let groups: Vec<Group> = GroupKey::Kernel
            .split(&runs)
            .into_iter()
            .map(|(value, runs)| Group { value, runs })
            .collect();
        // getpid: 6.6 is 40% slower beyond the runs' scatter; open: the 6.6 runs scatter
        // around the 6.1 level; 6.9 has one run.
        let rows = vec![
            row(1, "getpid", 150.0),
            row(3, "getpid", 153.0),
            row(5, "getpid", 148.0),
            row(2, "getpid", 212.0),
            row(4, "getpid", 209.0),
            row(6, "getpid", 300.0),
            row(1, "open", 1000.0),
            row(3, "open", 1040.0),
            row(5, "open", 980.0),
            row(2, "open", 1030.0),
            row(4, "open", 990.0),
        ];
        let m = build_groups(GroupKey::Kernel, &groups, &rows, 0, &[], 0.02);
        assert_eq!(m.columns.len(), 3);
        assert_eq!(m.columns[1].runs, vec![2, 4]);
        assert_eq!(m.columns[0].title, ["kernel 6.1", "3 runs"]);
        let getpid = &m.rows[0];
        assert_eq!(getpid.cells[1].verdict, Some(Verdict::Slower));
        let base = (150.0f64 * 153.0 * 148.0).cbrt();
        assert!((getpid.cells[0].median_ns.unwrap() - base).abs() < 1e-9);
        // One run: a change shown, nothing called.
        assert!(getpid.cells[2].slowdown.unwrap() > 1.9);
        assert_eq!(getpid.cells[2].verdict, None);
        assert_eq!(m.rows[1].cells[1].verdict, Some(Verdict::NoChange));
        assert_eq!(m.rows[1].cells[2].missing.as_deref(), Some("absent"));
        // The base group's own scatter is the row's run-to-run spread.
        assert_eq!(getpid.run_to_run.map(|r| r.runs), Some(3));
    }
}
