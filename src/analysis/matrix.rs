//! Many runs side by side: benchmarks by runs, each cell the slowdown against a base run with
//! its 95% CI, a verdict, and the addition in ns. LEBench's heatmap of kernels against
//! operations, with the uncertainty LEBench does not show.
//!
//! A cell comes from the two runs' stored statistics (median and hierarchical 95% CI per
//! result, the `results` rows), not from their samples: a matrix of 20 runs must answer in
//! well under a second, and 19 bootstrap comparisons would not. The two intervals are
//! independent (fresh processes, different runs), so their relative half-widths combine in
//! quadrature on a log scale, each side of the interval from the sides that push it that way:
//! the slowdown's upper bound from the candidate's upper and the base's lower half-width.
//! With symmetric normal intervals this is the usual interval of a ratio of independent
//! estimates; with the runs' asymmetric ones it keeps their shape. `compare` (bootstrap of the
//! samples) and a matrix cell agree on clear changes and may differ at the edge of the band.
//! A run without a CI (too few repetitions, or a version 1 run) gives cells without one,
//! marked "?", never a narrow interval.

mod groups;

use serde::{Deserialize, Serialize};

use crate::analysis::compare::{Verdict, verdict};
use crate::analysis::run_to_run::{self, Spread};
use crate::base::model::ResultRow;
use crate::base::model::RunSummary;

/// One run, as a column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    /// The run's id.
    pub run_id: i64,
    /// When it started, RFC 3339.
    pub started_at: String,
    /// Its label.
    pub label: Option<String>,
    /// The host it ran on.
    pub host: Option<String>,
    /// The kernel release it ran on.
    pub kernel: Option<String>,
    /// The wrapper it ran under.
    pub wrapper: Option<String>,
    /// "run 12", then the values of what differs between the columns.
    pub title: Vec<String>,
    /// With `--by`, the runs of the column's group (`run_id` is the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// One benchmark in one column: its median and, against the base column, what changed.
pub struct Cell {
    /// The median, ns (`None`: not measured here).
    pub median_ns: Option<f64>,
    /// Candidate over base; none for the base itself or a side without a median.
    pub slowdown: Option<f64>,
    /// The slowdown's 95% CI.
    pub slowdown_ci95: Option<[f64; 2]>,
    /// Candidate minus base, ns.
    pub addition_ns: Option<f64>,
    /// The addition's 95% CI, ns.
    pub addition_ci95: Option<[f64; 2]>,
    /// None where there is nothing to call (the base, a missing side, no CI).
    pub verdict: Option<Verdict>,
    /// Not measured here: the status word ("failed", "skipped", "absent").
    pub missing: Option<String>,
    /// Either side was flagged disturbed.
    pub disturbed: bool,
    /// The run-to-run spread added to the two runs' own CIs (they were measured apart), as
    /// `run to run ±x%` says it, with the runs it was learned from; `None` where no
    /// environment of the two had enough runs (then no change is called).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_to_run: Option<RunToRun>,
}

pub use crate::analysis::run_to_run::RunToRun;
pub use groups::{Group, build_groups};

/// What the matrix knows of runs measured apart: for a benchmark and a run, the run-to-run
/// spread of that run's environment in the store (`None`: fewer than 3 runs there).
pub type SpreadOf<'a> = &'a dyn Fn(&str, i64) -> Option<Spread>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// One benchmark across the matrix's columns.
pub struct BenchAcross {
    /// The result's id.
    pub bench: String,
    /// One cell per column, in column order.
    pub cells: Vec<Cell>,
    /// The base run's environment's run-to-run spread for this benchmark, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_to_run: Option<RunToRun>,
}

/// A level shift along the columns (in their order, oldest first when selected by `--where`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnChange {
    /// The result's id.
    pub bench: String,
    /// The first column of the new level.
    pub column: usize,
    /// The run of that column.
    pub run_id: i64,
    /// The column before it (the last of the old level with a median).
    pub previous_run_id: i64,
    /// The old level's median, ns.
    pub before_ns: f64,
    /// The new level's median, ns.
    pub after_ns: f64,
    /// New over old.
    pub ratio: f64,
    /// The ratio's 95% CI.
    pub ratio_ci95: [f64; 2],
    /// What differs between the two runs' environments (filled in by the command).
    pub differs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// Runs as columns, benchmarks as rows, each cell judged against the base column.
pub struct Matrix {
    /// Index of the base column.
    pub base: usize,
    /// The runs (or groups of runs), in order.
    pub columns: Vec<Column>,
    /// What differs between the columns (host, kernel, label, wrapper, then the rest of the
    /// environment, `name_environment`), in that order.
    pub differs: Vec<String>,
    /// Half-width of the no-change band (0.02 = ±2%).
    pub threshold: f64,
    /// One line per benchmark, in the base run's order.
    pub rows: Vec<BenchAcross>,
    /// Level shifts along the columns, per benchmark (`history --changes`'s method); searched
    /// only with at least `2 * MIN_SEGMENT` columns.
    pub changes: Vec<ColumnChange>,
    /// With `--by KEY`: the key whose values the columns are (each a group of runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Runs at another machine speed than the other runs of their environment (`odd_runs`):
    /// their cells are judged with that factor taken out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub odd_runs: Vec<OddRun>,
}

/// A run among runs of one environment measured apart whose benchmarks all moved by about one
/// factor against the others': the machine ran at another speed, and calling each of its
/// benchmarks a change would report that one fact as many regressions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OddRun {
    /// Its column.
    pub column: usize,
    /// Its run.
    pub run_id: i64,
    /// The factor: the median over its benchmarks of its median over the other runs'.
    pub factor: f64,
    /// Benchmarks that moved with it (the same way, at least half as far).
    pub moved: usize,
    /// Benchmarks it was judged on.
    pub of: usize,
    /// The runs of its environment it was held against.
    pub against: usize,
}

/// An odd run needs at least this many other runs of its environment to be held against...
const ODD_OTHERS: usize = 3;
/// ...and at least this many benchmarks with a median in it and in them...
const ODD_BENCHMARKS: usize = 4;
/// ...of which this share moved with it...
const ODD_TOGETHER: f64 = 0.75;
/// ...by a factor at least this far from 1...
const ODD_MIN_SHIFT: f64 = 0.02;
/// ...and this many times the typical shift of the other runs of its environment. The run the
/// issue found sat ~7% off in getpgid-0, getuid, read-devzero and write-devnull while the
/// other runs' shifts were ~1%.
const ODD_DOMINANCE: f64 = 3.0;

/// The runs (single-run columns, measured apart) whose benchmarks moved by one factor against
/// the other runs of the same environment (`environment_of` a column: runs that are not the
/// same environment are what is compared, never an outlier).
pub fn odd_runs(m: &Matrix, environment_of: &dyn Fn(usize) -> String) -> Vec<OddRun> {
    let n = m.columns.len();
    let mut out = Vec::new();
    // Each column's shift against the others of its environment, benchmark by benchmark.
    let mut shifts: Vec<Option<(f64, usize, usize, usize)>> = vec![None; n];
    for (j, shift) in shifts.iter_mut().enumerate() {
        let env = environment_of(j);
        let others: Vec<usize> = (0..n)
            .filter(|&k| k != j && environment_of(k) == env)
            .collect();
        if others.len() < ODD_OTHERS {
            continue;
        }
        let logs: Vec<f64> = m
            .rows
            .iter()
            .filter_map(|r| {
                let own = r.cells[j].median_ns.filter(|x| *x > 0.0)?;
                let theirs: Vec<f64> = others
                    .iter()
                    .filter_map(|&k| r.cells[k].median_ns.filter(|x| *x > 0.0))
                    .collect();
                (theirs.len() >= ODD_OTHERS)
                    .then(|| (own / crate::base::stats::median(&theirs)).ln())
            })
            .collect();
        if logs.len() < ODD_BENCHMARKS {
            continue;
        }
        let f = crate::base::stats::median(&logs);
        let moved = logs
            .iter()
            .filter(|d| d.signum() == f.signum() && d.abs() >= f.abs() / 2.0)
            .count();
        *shift = Some((f, moved, logs.len(), others.len()));
    }
    for (j, shift) in shifts.iter().enumerate() {
        let Some((f, moved, of, against)) = *shift else {
            continue;
        };
        let env = environment_of(j);
        let typical: Vec<f64> = (0..n)
            .filter(|&k| k != j && environment_of(k) == env)
            .filter_map(|k| shifts[k].map(|s| s.0.abs()))
            .collect();
        let typical = if typical.is_empty() {
            0.0
        } else {
            crate::base::stats::median(&typical)
        };
        if f.abs() >= ODD_MIN_SHIFT.ln_1p()
            && f.abs() >= ODD_DOMINANCE * typical
            && moved as f64 >= ODD_TOGETHER * of as f64
        {
            out.push(OddRun {
                column: j,
                run_id: m.columns[j].run_id,
                factor: f.exp(),
                moved,
                of,
                against,
            });
        }
    }
    out
}

/// Judge the cells of `m` again with each odd run's factor taken out of its side (the base's
/// too, when the base is one): a benchmark that moved with its run is no change, one that
/// moved much further is still called.
pub fn judge_without_odd_runs(m: &mut Matrix) {
    let factor = |j: usize| {
        m.odd_runs
            .iter()
            .find(|o| o.column == j)
            .map_or(1.0, |o| o.factor)
    };
    let base_factor = factor(m.base);
    let factors: Vec<f64> = (0..m.columns.len()).map(factor).collect();
    let threshold = m.threshold;
    for r in &mut m.rows {
        for (j, c) in r.cells.iter_mut().enumerate() {
            let f = factors[j] / base_factor;
            // A cell projected by its witnesses had the host's drift taken out already.
            let projected = c.run_to_run.is_some_and(|t| t.drift_factor.is_some());
            if j == m.base || (f - 1.0).abs() < 1e-12 || projected {
                continue;
            }
            if let (Some(ratio), Some([lo, hi]), Some(_)) = (c.slowdown, c.slowdown_ci95, c.verdict)
            {
                c.verdict = Some(verdict([lo / f, hi / f], ratio / f, threshold).0);
            }
        }
    }
}

/// The columns for `runs`, titled by what differs between them (the start time when nothing
/// does), and the names of what differs.
fn columns(runs: &[RunSummary]) -> (Vec<Column>, Vec<String>) {
    type Get = fn(&RunSummary) -> Option<String>;
    let keys: [(&str, Get); 4] = [
        ("host", |r| r.host.clone()),
        ("kernel", |r| r.kernel.clone()),
        ("label", |r| r.label.clone()),
        ("wrapper", |r| r.wrapper.clone()),
    ];
    let differs: Vec<(&str, Get)> = keys
        .into_iter()
        .filter(|(_, get)| runs.iter().any(|r| get(r) != get(&runs[0])))
        .collect();
    let cols = runs
        .iter()
        .map(|r| {
            let mut title = vec![format!("run {}", r.id)];
            for (name, get) in &differs {
                // Shown in terminals and files: a label's escape sequences are not obeyed.
                let v = get(r).map_or_else(
                    || "-".into(),
                    |v| crate::base::text::printable(&v).into_owned(),
                );
                title.push(if *name == "kernel" || *name == "host" {
                    v
                } else {
                    format!("{name} {v}")
                });
            }
            if differs.is_empty() {
                title.push(crate::base::text::printable(&r.started_at).into_owned());
            }
            Column {
                run_id: r.id,
                started_at: r.started_at.clone(),
                label: r.label.clone(),
                host: r.host.clone(),
                kernel: r.kernel.clone(),
                wrapper: r.wrapper.clone(),
                title,
                runs: vec![],
            }
        })
        .collect();
    (cols, differs.iter().map(|(n, _)| n.to_string()).collect())
}

/// Most environment facts a column's title carries; `differs` names them all.
const TITLE_FACTS: usize = 3;

/// Name what differs between the columns' environments beyond host, kernel, label and wrapper
/// (`analysis::changes::machine_facts`: a boot parameter, THP, a kernel setting, a kernel
/// config option, the workers' confinement...): each differing fact joins `differs`, and the
/// first few join every column's title ("seccomp filters 1"). `facts` is each column's run's
/// facts, `None` where the run could not be read. A fact a column did not record (a run made
/// before it was) neither differs nor titles that column; a boot parameter is "(absent)" from
/// a column that recorded its command line without it.
pub fn name_environment(m: &mut Matrix, facts: &[Option<Vec<(String, String)>>]) {
    let value = |col: &Option<Vec<(String, String)>>, name: &str| -> Option<String> {
        let f = col.as_ref()?;
        match f.iter().find(|(n, _)| n == name) {
            Some((_, v)) => Some(v.clone()),
            None if name.starts_with("boot parameter ")
                && f.iter().any(|(n, _)| n.starts_with("boot parameter ")) =>
            {
                Some("(absent)".into())
            }
            None => None,
        }
    };
    let mut names: Vec<&str> = Vec::new();
    for (n, _) in facts.iter().flatten().flatten() {
        if !names.contains(&n.as_str()) {
            names.push(n);
        }
    }
    let kernels_differ = {
        let k: Vec<String> = facts
            .iter()
            .filter_map(|c| value(c, "kernel release"))
            .collect();
        k.iter().any(|x| *x != k[0])
    };
    let mut titled = 0;
    for name in names {
        // Host and kernel title the columns already; a new kernel is a new build.
        if name == "host"
            || name == "kernel release"
            || (name == "kernel version" && kernels_differ)
        {
            continue;
        }
        let values: Vec<Option<String>> = facts.iter().map(|c| value(c, name)).collect();
        let known: Vec<&String> = values.iter().flatten().collect();
        if known.iter().all(|v| *v == known[0]) {
            continue;
        }
        m.differs.push(name.to_string());
        if titled < TITLE_FACTS {
            titled += 1;
            for (col, v) in m.columns.iter_mut().zip(&values) {
                if let Some(v) = v {
                    col.title
                        .push(format!("{name} {}", crate::base::text::printable(v)));
                }
            }
        }
    }
}

impl Cell {
    /// A cell with only a median (the base column) or nothing (`missing` says why).
    fn bare(median_ns: Option<f64>, missing: Option<String>, disturbed: bool) -> Cell {
        Cell {
            median_ns,
            slowdown: None,
            slowdown_ci95: None,
            addition_ns: None,
            addition_ci95: None,
            verdict: None,
            missing,
            disturbed,
            run_to_run: None,
        }
    }
}

/// The slowdown and addition of `cand` against `base` with intervals from theirs (see the
/// module doc), for runs measured together (no run-to-run term).
pub fn cell_against(base: &ResultRow, cand: &ResultRow, threshold: f64) -> Cell {
    let mut cell = Cell::bare(cand.median, None, base.disturbed || cand.disturbed);
    let (Some(b), Some(c)) = (base.median, cand.median) else {
        return cell;
    };
    cell.addition_ns = Some(c - b);
    if b > 0.0 && c > 0.0 {
        cell.slowdown = Some(c / b);
    }
    let (Some((blo, bhi)), Some((clo, chi))) = (row_ci(base), row_ci(cand)) else {
        return cell;
    };
    let q = |x: f64, y: f64| (x * x + y * y).sqrt();
    cell.addition_ci95 = Some([(c - b) - q(c - clo, bhi - b), (c - b) + q(chi - c, b - blo)]);
    if let Some(r) = cell.slowdown
        && blo > 0.0
        && clo > 0.0
    {
        let up = q((chi / c).ln(), (b / blo).ln());
        let down = q((c / clo).ln(), (bhi / b).ln());
        let interval = [r * (-down).exp(), r * up.exp()];
        cell.slowdown_ci95 = Some(interval);
        cell.verdict = Some(verdict(interval, r, threshold).0);
    }
    cell
}

/// A result row's CI, when it has a usable one.
fn row_ci(r: &ResultRow) -> Option<(f64, f64)> {
    match (r.ci_lo, r.ci_hi) {
        (Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() && lo <= hi => Some((lo, hi)),
        _ => None,
    }
}

/// `cell_against` for runs measured apart: the run-to-run spread `spread` (see
/// `run_to_run::pooled`) is added to both runs' own standard errors. Without one, the cell
/// keeps its own-CI interval for reading but calls nothing: the host's drift between the runs
/// is unknown.
pub fn cell_apart(
    base: &ResultRow,
    cand: &ResultRow,
    threshold: f64,
    spread: Option<Spread>,
) -> Cell {
    let mut cell = cell_against(base, cand, threshold);
    let (Some(r), Some(together)) = (cell.slowdown, cell.slowdown_ci95) else {
        return cell;
    };
    let Some(spread) = spread else {
        cell.verdict = None;
        return cell;
    };
    // The together-interval's sides are the two runs' own in quadrature; the drift between
    // runs joins them there, after the host's drift the witnesses saw is taken out where the
    // store learned how this benchmark follows one of them (`run_to_run::judge_apart`).
    let witnesses = |row: &ResultRow| run_to_run::ResultWitnesses {
        exit_ns: row.exit_witness_ns,
        speed_ns: row.speed_witness_ns,
    };
    let judged = run_to_run::judge_apart(
        r,
        together,
        spread,
        Some((witnesses(base), witnesses(cand))),
    );
    let interval = judged.ci95;
    let b = base.median.unwrap_or(f64::NAN);
    if judged.drift_factor.is_some() {
        cell.slowdown = Some(judged.point);
        cell.addition_ns = Some(b * (judged.point - 1.0));
    }
    cell.slowdown_ci95 = Some(interval);
    cell.addition_ci95 = Some([b * (interval[0] - 1.0), b * (interval[1] - 1.0)]);
    cell.verdict = Some(verdict(interval, judged.point, threshold).0);
    cell.run_to_run = Some(run_to_run::RunToRun::of(&judged));
    cell
}

/// One cell of `bench`: the run's row `c` against the base run's `b` (`None` in the base
/// column, or where the base has no usable result), apart with both runs' run-to-run spread
/// (`ids`: the base run's and this run's) when `apart` gives it.
fn cell_of(
    bench: &str,
    b: Option<&ResultRow>,
    c: Option<&ResultRow>,
    ids: (i64, i64),
    threshold: f64,
    apart: Option<SpreadOf>,
) -> Cell {
    let missing = match c {
        None => Some("absent".to_string()),
        Some(r) if r.status != "ok" => Some(r.status.clone()),
        Some(_) => None,
    };
    match (b, c, missing) {
        (_, _, Some(m)) => Cell::bare(None, Some(m), false),
        (Some(b), Some(c), None) => match apart {
            Some(spread_of) => {
                let spread = run_to_run::pooled(spread_of(bench, ids.0), spread_of(bench, ids.1));
                cell_apart(b, c, threshold, spread)
            }
            None => cell_against(b, c, threshold),
        },
        (_, Some(c), None) => Cell::bare(c.median, None, c.disturbed),
        (_, None, None) => unreachable!("a missing cell has its reason"),
    }
}

/// The matrix of `runs` (in column order) against `runs[base]`, from their result rows.
/// Benchmarks come in `order` first (the base run's order), then any others as found.
pub fn build(
    runs: &[RunSummary],
    rows: &[(i64, ResultRow)],
    base: usize,
    order: &[String],
    threshold: f64,
    apart: Option<SpreadOf>,
) -> Matrix {
    let (columns, differs) = columns(runs);
    let mut benches: Vec<String> = order.to_vec();
    let mut known: std::collections::HashSet<&str> = order.iter().map(String::as_str).collect();
    for (_, r) in rows {
        if known.insert(&r.bench) {
            benches.push(r.bench.clone());
        }
    }
    let by_cell: std::collections::HashMap<(i64, &str), &ResultRow> = rows
        .iter()
        .map(|(id, r)| ((*id, r.bench.as_str()), r))
        .collect();
    let find = |run: i64, bench: &str| by_cell.get(&(run, bench)).copied();
    let base_id = runs[base].id;
    let rows_out = benches
        .iter()
        .filter(|b| runs.iter().any(|r| find(r.id, b).is_some()))
        .map(|bench| {
            let b = find(base_id, bench).filter(|r| r.status == "ok");
            let cells = runs
                .iter()
                .enumerate()
                .map(|(i, run)| {
                    let against = (i != base).then_some(b).flatten();
                    cell_of(
                        bench,
                        against,
                        find(run.id, bench),
                        (base_id, run.id),
                        threshold,
                        apart,
                    )
                })
                .collect();
            BenchAcross {
                bench: bench.clone(),
                cells,
                run_to_run: apart
                    .and_then(|spread_of| spread_of(bench, base_id))
                    .map(RunToRun::from),
            }
        })
        .collect();
    let mut m = Matrix {
        base,
        columns,
        differs,
        threshold,
        rows: rows_out,
        changes: vec![],
        by: None,
        odd_runs: vec![],
    };
    m.changes = column_changes(&m);
    if apart.is_some() {
        let environment_of = |j: usize| {
            let r = &runs[j];
            format!("{:?}", (&r.host, &r.kernel, &r.wrapper, &r.env_key))
        };
        m.odd_runs = odd_runs(&m, &environment_of);
        judge_without_odd_runs(&mut m);
    }
    m
}

/// The level shifts of every benchmark's medians along the columns.
fn column_changes(m: &Matrix) -> Vec<ColumnChange> {
    if !looked_for_changes(m) {
        return vec![];
    }
    let mut out = Vec::new();
    for r in &m.rows {
        let series: Vec<f64> = r
            .cells
            .iter()
            .map(|c| c.median_ns.unwrap_or(f64::NAN))
            .collect();
        for c in crate::analysis::changes::find_changes(&series) {
            out.push(ColumnChange {
                bench: r.bench.clone(),
                column: c.index,
                run_id: m.columns[c.index].run_id,
                previous_run_id: m.columns[c.previous].run_id,
                before_ns: c.before,
                after_ns: c.after,
                ratio: c.ratio,
                ratio_ci95: c.ratio_ci,
                differs: vec![],
            });
        }
    }
    out
}

/// Whether the columns are enough to look for change points along them.
pub fn looked_for_changes(m: &Matrix) -> bool {
    m.columns.len() >= 2 * crate::analysis::changes::MIN_SEGMENT
}

#[cfg(test)]
mod tests;
