//! `oscost history [ID]`: the stored runs; with a benchmark id, that benchmark across runs with
//! its trend.

use clap::Args;

use super::args::{StoreArgs, usage};
use super::{Command, Given};
use super::{color, print_stdout, read_store, store_err};
use crate::effects::gate::Effects;
use crate::{effects::output, report};

#[derive(Debug, Args, Clone)]
/// `oscost history`'s arguments.
pub struct HistoryArgs {
    /// A benchmark id (e.g. syscall/getpid).
    #[arg(value_parser = super::args::IdParser, hide_possible_values = true)]
    pub bench: Option<String>,
    /// With a benchmark id: find the runs where its level shifted, with the size of each
    /// shift and what differed between the runs on either side.
    #[arg(long, requires = "bench")]
    pub changes: bool,
    /// With a benchmark id: also write its history page (medians with CIs across runs, the
    /// levels between change points, every run) into this directory.
    #[arg(long, value_name = "DIR", requires = "bench")]
    pub report: Option<std::path::PathBuf>,
    /// With a benchmark id: also judge its runs as groups sharing one value of KEY (label,
    /// host, kernel, wrapper or day): each group's level with the interval its runs' scatter
    /// gives, and its change against the first group.
    #[arg(long, value_name = "KEY", requires = "bench")]
    pub by: Option<crate::analysis::select::GroupKey>,
    #[command(flatten)]
    /// The store the runs are read from.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Which runs are listed.
    pub select: super::args::SelectArgs,
}

impl HistoryArgs {
    /// One benchmark across the selected runs: its trend, and with --by, --changes and
    /// --report, its groups, level shifts and page.
    fn bench_history(
        &self,
        s: &mut crate::effects::store::Store,
        b: &str,
        runs: &[crate::base::model::RunSummary],
        stop: &crate::base::stop::Stop,
    ) -> anyhow::Result<String> {
        let sel = self.select.selection();
        let mut points = s.history(b).map_err(store_err)?;
        if !sel.is_all() {
            let keep: std::collections::HashSet<i64> = runs.iter().map(|r| r.id).collect();
            points.retain(|p| keep.contains(&p.run_id));
            if points.is_empty() {
                return Err(usage(format!("no selected run has '{b}'")));
            }
        }
        if points.is_empty() {
            let known = s.known_benchmarks().map_err(store_err)?;
            return Err(usage(unknown_benchmark(b, &known)));
        }
        let mut text = report::history::trend(b, &points, color(), terminal_columns());
        if let Some(key) = self.by {
            text.push('\n');
            text.push_str(&by_groups(b, key, runs, &points));
        }
        if self.changes || self.report.is_some() {
            let (found, lines) = level_shifts(s, &points);
            if self.changes {
                if lines.is_empty() {
                    text.push_str(&format!(
                        "changes: none (no level shift beyond the noise of these {} runs)\n",
                        points.len()
                    ));
                }
                for (what, why) in &lines {
                    text.push_str(&format!("{what}\n  {why}\n"));
                }
            }
            if let Some(dir) = &self.report {
                let joined: Vec<String> = lines.iter().map(|(w, y)| format!("{w}; {y}")).collect();
                let shown: Vec<String> = self
                    .select
                    .filters
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                let page = report::history_page::render_history(
                    b,
                    &points,
                    &found,
                    &joined,
                    &shown.join(", "),
                )
                .map_err(|e| anyhow::anyhow!("cannot render the history page: {e}"))?;
                output::write_page(dir, &page, stop)?;
                crate::say!(
                    "oscost: history page in {}",
                    dir.join("index.html").display()
                );
            }
        }
        Ok(text)
    }
}

impl Command for HistoryArgs {
    /// The page, and the store it reads.
    fn effects(&self) -> Effects {
        Effects::new()
            .store(self.store.db.as_ref())
            .writes_report("--report", self.report.as_ref())
    }

    /// List the runs, or one benchmark across them with its trend.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let stop = crate::effects::signals::on_interrupt()?;
        let mut s = read_store(&self.store)?;
        let sel = self.select.selection();
        let all = s.list().map_err(store_err)?;
        let stored = all.len();
        let runs = sel.apply(all);
        let text = match self.bench.as_deref() {
            None if runs.is_empty() && stored > 0 => {
                let conds: Vec<String> =
                    self.select.filters.iter().map(|f| f.to_string()).collect();
                format!(
                    "none of the {stored} stored runs has {}\n",
                    crate::base::text::printable(&conds.join(" and "))
                )
            }
            None => report::history::runs(&runs, color()),
            Some(b) => self.bench_history(&mut s, b, &runs, &stop)?,
        };
        print_stdout(&text)?;
        Ok(0)
    }
}

/// `--by KEY`: the benchmark's points split by the key's value of their runs.
fn by_groups(
    bench: &str,
    key: crate::analysis::select::GroupKey,
    runs: &[crate::base::model::RunSummary],
    points: &[crate::base::model::HistoryPoint],
) -> String {
    let groups: Vec<(String, Vec<crate::base::model::HistoryPoint>)> = key
        .split(runs)
        .into_iter()
        .map(|(value, rs)| {
            let ps = points
                .iter()
                .filter(|p| rs.iter().any(|r| r.id == p.run_id))
                .cloned()
                .collect();
            (value, ps)
        })
        .filter(|(_, ps): &(String, Vec<_>)| !ps.is_empty())
        .collect();
    report::history::groups(bench, key.name(), &groups, DEFAULT_THRESHOLD, color())
}

/// The no-change band of `history --by`, as `compare` and `matrix` default it.
const DEFAULT_THRESHOLD: f64 = 0.02;

/// Why `b` has no history, with the nearest stored id when one is close.
fn unknown_benchmark(b: &str, known: &[String]) -> String {
    let near = known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(b, k), k))
        .min()
        .filter(|(d, _)| *d <= b.len() / 2 + 1);
    match near {
        Some((_, k)) => format!("no stored run has '{b}'; did you mean '{k}'?"),
        None => format!("no stored run has '{b}' (`oscost history` lists the runs)"),
    }
}

/// Columns of the terminal on stdout: $COLUMNS, else the window size, else 80.
fn terminal_columns() -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|v| v.parse().ok()) {
        return c;
    }
    // SAFETY: an all-zero winsize is valid, and TIOCGWINSZ fills it or fails.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ on stdout with a valid out pointer.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        80
    }
}

/// The level shifts of a benchmark's history, each with the run it happened at, its size, and
/// what differed in the environment between the runs on either side (as two lines of text).
fn level_shifts(
    s: &mut crate::effects::store::Store,
    points: &[crate::base::model::HistoryPoint],
) -> (
    Vec<crate::analysis::changes::LevelShift>,
    Vec<(String, String)>,
) {
    use crate::report::format_ns;
    let series: Vec<f64> = points
        .iter()
        .map(|p| p.median.unwrap_or(f64::NAN))
        .collect();
    let found = crate::analysis::changes::find_changes(&series);
    let mut lines = Vec::new();
    for c in &found {
        let at = &points[c.index];
        let prev = &points[c.previous];
        let what = format!(
            "change at run {} ({}): {} ({})",
            at.run_id,
            at.started_at,
            report::shift_words(c.ratio, c.ratio_ci, c.before, c.after),
            format_ns(c.after - c.before)
        );
        let differs = match (s.load_bare(prev.run_id), s.load_bare(at.run_id)) {
            (Ok(a), Ok(b)) => crate::analysis::changes::env_differences(&a, &b),
            _ => vec!["(a run could not be read)".into()],
        };
        let why = format!(
            "between run {} and run {}: {}",
            prev.run_id,
            at.run_id,
            report::differences_words(&differs)
        );
        lines.push((what, why));
    }
    (found, lines)
}
