//! `oscost matrix [RUN...] [--base RUN] [--where COND]...`: benchmarks by runs, each cell the
//! change against the base run (see `crate::analysis::matrix`); a terminal table, CSV/JSON/Markdown
//! with --csv/--json/--markdown, and a heatmap page with --report. Reads only the runs'
//! summary rows and the base run without samples, so it answers at once on a large store.

use std::path::PathBuf;

use std::collections::HashMap;

use clap::Args;

use super::args::{OutputArgs, SelectArgs, StoreArgs, parse_percent};
use super::{Command, Given};
use super::{color, exporters, print_stdout, read_store, store_err, usage};
use crate::analysis::run_to_run::{self, ResultWitnesses, RunLevel, Spread};
use crate::effects::gate::Effects;
use crate::{analysis::matrix, effects::output, effects::store, report};

#[derive(Debug, Args, Clone)]
/// `oscost matrix`'s arguments.
pub struct MatrixArgs {
    /// Stored runs, one column each (ids, `last`, `last~N`); none: every run --where selects.
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
    /// The run the others are compared against [default: the first column]; with --by, the
    /// value of KEY whose group is the base.
    #[arg(long, value_name = "RUN")]
    pub base: Option<String>,
    /// Columns are groups: the runs sharing one value of KEY (label, host, kernel, wrapper or
    /// day), each group compared with the base group by how its runs scatter, as runs measured
    /// apart must be (e.g. `--by kernel`: each kernel's runs against the first kernel's).
    #[arg(long, value_name = "KEY")]
    pub by: Option<crate::analysis::select::GroupKey>,
    /// Half-width of the band called "no change", percent.
    #[arg(long, value_name = "PCT", default_value = "2", value_parser = parse_percent)]
    pub threshold: f64,
    #[command(flatten)]
    /// Where the matrix is written.
    pub outputs: OutputArgs,
    /// Also write the heatmap page into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Print every column; by default the table fits 100 columns, the oldest columns but the
    /// base left out (and said) where there are more.
    #[arg(long)]
    pub wide: bool,
    #[command(flatten)]
    /// Which runs are columns.
    pub select: SelectArgs,
    #[command(flatten)]
    /// The store the runs are read from.
    pub store: StoreArgs,
}

/// More columns than this and the table is unreadable: say so rather than print it.
const MAX_COLUMNS: usize = 60;

impl MatrixArgs {
    /// Write the matrix's files and page, and print its table.
    fn show(&self, m: &matrix::Matrix, stop: &crate::base::stop::Stop) -> anyhow::Result<i32> {
        output::export(m, &exporters::<matrix::Matrix>(&self.outputs, None))?;
        if let Some(d) = &self.report {
            let page = report::matrix_page::render_matrix(m)
                .map_err(|e| anyhow::anyhow!("cannot render the matrix: {e}"))?;
            output::write_page(d, &page, stop)?;
            crate::say!("oscost: matrix page in {}", d.join("index.html").display());
        }
        let table = report::matrix_views::render_fitted(
            m,
            color(),
            report::table::terminal_width(),
            self.wide,
        );
        if output::any_stdout(&self.outputs.paths()) {
            crate::say_part!("{table}");
        } else {
            print_stdout(&table)?;
        }
        Ok(0)
    }
}

impl Command for MatrixArgs {
    /// The matrix's files and page, and the store it reads.
    fn effects(&self) -> Effects {
        self.outputs
            .declare(Effects::new().store(self.store.db.as_ref()))
            .writes_report("--report", self.report.as_ref())
    }

    /// Build the matrix and write it.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let stop = crate::effects::signals::on_interrupt()?;
        let mut s = read_store(&self.store)?;
        let sel = self.select.selection();
        // One listing serves the selection, every reference and the columns.
        let all = s.list().map_err(store_err)?;
        let selected = sel.apply(all.clone());
        if let Some(key) = self.by {
            let m = self.groups(&mut s, key, &selected)?;
            return self.show(&m, &stop);
        }
        let (ids, base_id) = self.column_ids(&selected, !sel.is_all())?;
        let runs: Vec<_> = ids
            .iter()
            .filter_map(|id| all.iter().find(|r| r.id == *id).cloned())
            .collect();
        let base = runs.iter().position(|r| r.id == base_id).unwrap_or(0);
        let order = result_order(&mut s, base_id)?;
        let rows = s.result_rows(&ids).map_err(store_err)?;
        let threshold = self.threshold / 100.0;
        let columns = Columns {
            all: &all,
            runs: &runs,
            rows: &rows,
            base,
            order: &order,
        };
        let mut m = columns.build(&mut s, threshold, &HashMap::new())?;
        // A run at another machine speed is one fact, not every benchmark's scatter: its
        // factor is taken out of its levels and the spreads learned again (the odd runs
        // themselves come from the medians alone, so they are the same the second time).
        if !m.odd_runs.is_empty() {
            let factors: HashMap<i64, f64> =
                m.odd_runs.iter().map(|o| (o.run_id, o.factor)).collect();
            m = columns.build(&mut s, threshold, &factors)?;
        }
        name_differences(&mut s, &mut m);
        self.show(&m, &stop)
    }
}

impl MatrixArgs {
    /// The runs to put in columns (named, or every one selected) with the base first when it
    /// was not among them, each once; and the base's id.
    fn column_ids(
        &self,
        selected: &[crate::base::model::RunSummary],
        within: bool,
    ) -> anyhow::Result<(Vec<i64>, i64)> {
        let resolve = |r: &str| store::resolve_among(r, selected, within).map_err(store_err);
        let mut ids: Vec<i64> = if self.runs.is_empty() {
            selected.iter().map(|r| r.id).collect()
        } else {
            self.runs
                .iter()
                .map(|r| resolve(r))
                .collect::<anyhow::Result<_>>()?
        };
        let base_id = match &self.base {
            Some(b) => resolve(b)?,
            None => *ids.first().ok_or_else(|| {
                usage("no runs to put in a matrix (none stored, or none --where selects)")
            })?,
        };
        if !ids.contains(&base_id) {
            ids.insert(0, base_id);
        }
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(*id));
        if ids.len() > MAX_COLUMNS {
            return Err(usage(format!(
                "{} runs are too many columns (at most {MAX_COLUMNS}); narrow them with --where or name them",
                ids.len()
            )));
        }
        Ok((ids, base_id))
    }

    /// `--by KEY`: the selected (or named) runs split by the key's value, each group a column.
    fn groups(
        &self,
        s: &mut crate::effects::store::Store,
        key: crate::analysis::select::GroupKey,
        selected: &[crate::base::model::RunSummary],
    ) -> anyhow::Result<matrix::Matrix> {
        let runs: Vec<crate::base::model::RunSummary> = if self.runs.is_empty() {
            selected.to_vec()
        } else {
            let mut ids = Vec::new();
            for r in &self.runs {
                ids.push(store::resolve_among(r, selected, true).map_err(store_err)?);
            }
            selected
                .iter()
                .filter(|r| ids.contains(&r.id))
                .cloned()
                .collect()
        };
        let groups: Vec<matrix::Group> = key
            .split(&runs)
            .into_iter()
            .map(|(value, runs)| matrix::Group { value, runs })
            .collect();
        if groups.is_empty() {
            return Err(usage(
                "no runs to put in a matrix (none stored, or none --where selects)",
            ));
        }
        if groups.len() > MAX_COLUMNS {
            return Err(usage(format!(
                "{} groups are too many columns (at most {MAX_COLUMNS}); narrow them with --where",
                groups.len()
            )));
        }
        let base = match &self.base {
            None => 0,
            Some(v) => groups.iter().position(|g| g.value == *v).ok_or_else(|| {
                let values: Vec<String> = groups
                    .iter()
                    .map(|g| format!("'{}'", report::printable(&g.value)))
                    .collect();
                usage(format!(
                    "no selected run has {} '{}'; with --by {} the base is one of: {}",
                    key.name(),
                    report::printable(v),
                    key.name(),
                    values.join(", ")
                ))
            })?,
        };
        let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
        let order = result_order(s, groups[base].runs[0].id)?;
        let rows = s.result_rows(&ids).map_err(store_err)?;
        Ok(matrix::build_groups(
            key,
            &groups,
            &rows,
            base,
            &order,
            self.threshold / 100.0,
        ))
    }
}

/// What differed where a level shifted along the columns: the two runs' environments, each
/// read once.
fn name_differences(s: &mut crate::effects::store::Store, m: &mut matrix::Matrix) {
    let mut bare = std::collections::HashMap::new();
    // The environment's facts are in the run itself, not the store's summary rows.
    let ids: Vec<i64> = m.columns.iter().map(|c| c.run_id).collect();
    let facts: Vec<Option<Vec<(String, String)>>> = ids
        .iter()
        .map(|&id| {
            bare.entry(id)
                .or_insert_with(|| s.load_bare(id).ok())
                .as_ref()
                .map(crate::analysis::changes::machine_facts)
        })
        .collect();
    matrix::name_environment(m, &facts);
    for c in &mut m.changes {
        for id in [c.previous_run_id, c.run_id] {
            bare.entry(id).or_insert_with(|| s.load_bare(id).ok());
        }
        if let (Some(Some(a)), Some(Some(b))) = (bare.get(&c.previous_run_id), bare.get(&c.run_id))
        {
            c.differs = crate::analysis::changes::env_differences(a, b);
        }
    }
}

/// What a matrix of single runs is built from.
struct Columns<'a> {
    /// Every stored run (the spreads are learned from all of an environment's).
    all: &'a [crate::base::model::RunSummary],
    /// The columns' runs, in order.
    runs: &'a [crate::base::model::RunSummary],
    rows: &'a [(i64, crate::base::model::ResultRow)],
    base: usize,
    order: &'a [String],
}

impl Columns<'_> {
    /// The matrix, each cell widened by the run-to-run spread of its environment, learned with
    /// the runs in `factors` divided by their factor.
    fn build(
        &self,
        s: &mut crate::effects::store::Store,
        threshold: f64,
        factors: &HashMap<i64, f64>,
    ) -> anyhow::Result<matrix::Matrix> {
        let benches = self.rows.iter().map(|(_, r)| r.bench.as_str());
        let spreads = run_to_run_spreads(s, self.all, benches, factors)?;
        let env_of: HashMap<i64, Environment> =
            self.all.iter().map(|r| (r.id, environment(r))).collect();
        let spread_of = |bench: &str, run: i64| {
            let env = env_of.get(&run)?;
            spreads
                .get(&(bench.to_string(), env.clone()))
                .copied()
                .flatten()
        };
        Ok(matrix::build(
            self.runs,
            self.rows,
            self.base,
            self.order,
            threshold,
            Some(&spread_of),
        ))
    }
}

/// What runs must share for their scatter to be one environment's: host, kernel, wrapper and
/// the rest of the environment as `store::rows::env_key` hashes it (CPU model, mitigations, THP,
/// boot parameters, oscost's version and build), all from the store's summary rows.
type Environment = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn environment(r: &crate::base::model::RunSummary) -> Environment {
    (
        r.host.clone(),
        r.kernel.clone(),
        r.wrapper.clone(),
        r.env_key.clone(),
    )
}

/// The run-to-run spread of every benchmark of `rows` in every environment of the store,
/// learned from all of its stored runs (one query a benchmark), with the runs in `factors`
/// (runs at another machine speed) divided by their factor first.
fn run_to_run_spreads<'a>(
    s: &mut crate::effects::store::Store,
    all: &[crate::base::model::RunSummary],
    benches: impl Iterator<Item = &'a str>,
    factors: &HashMap<i64, f64>,
) -> anyhow::Result<HashMap<(String, Environment), Option<Spread>>> {
    let env_of: HashMap<i64, Environment> = all.iter().map(|r| (r.id, environment(r))).collect();
    let mut benches: Vec<&str> = benches.collect();
    benches.sort_unstable();
    benches.dedup();
    let mut out = HashMap::new();
    for bench in benches {
        let mut groups: HashMap<Environment, Vec<(i64, RunLevel, ResultWitnesses)>> =
            HashMap::new();
        for p in s.history(bench).map_err(store_err)? {
            let (Some(median), Some(lo), Some(hi)) = (p.median, p.ci_lo, p.ci_hi) else {
                continue;
            };
            if p.status != "ok" {
                continue;
            }
            if let Some(env) = env_of.get(&p.run_id) {
                let level = RunLevel {
                    median,
                    ci95: [lo, hi],
                };
                let witnesses = ResultWitnesses {
                    exit_ns: p.exit_witness_ns,
                    speed_ns: p.speed_witness_ns,
                };
                let at = (p.run_id, level, witnesses);
                groups.entry(env.clone()).or_default().push(at);
            }
        }
        for (env, runs) in groups {
            out.insert((bench.to_string(), env), learned(&runs, factors));
        }
    }
    Ok(out)
}

/// One benchmark's run-to-run spread in one environment from its stored runs (id, level,
/// witnesses): projected on a witness where one explains the runs' scatter
/// (`run_to_run::learn`), on the raw levels, for the witness sees a run at another speed
/// itself; otherwise the levels' own, with the runs in `factors` (at another machine speed,
/// `matrix::odd_runs`) divided by their factor first.
fn learned(
    runs: &[(i64, RunLevel, ResultWitnesses)],
    factors: &HashMap<i64, f64>,
) -> Option<Spread> {
    let raw: Vec<(RunLevel, ResultWitnesses)> = runs.iter().map(|(_, l, w)| (*l, *w)).collect();
    if let Some(s) = run_to_run::learn(&raw).filter(|s| s.projection.is_some()) {
        return Some(s);
    }
    let levels: Vec<RunLevel> = runs
        .iter()
        .map(|(id, l, _)| {
            let f = factors.get(id).copied().unwrap_or(1.0);
            RunLevel {
                median: l.median / f,
                ci95: [l.ci95[0] / f, l.ci95[1] / f],
            }
        })
        .collect();
    run_to_run::estimate(&levels)
}

/// For `compare`: each benchmark's run-to-run spread in the environment of each of `runs`
/// (keyed by benchmark and the run's index), learned from the store when there is one; no
/// store, or one that cannot be read, gives none.
pub fn spreads_of_runs(
    store: &StoreArgs,
    runs: &[&crate::base::model::Run],
) -> anyhow::Result<HashMap<(String, usize), Option<Spread>>> {
    let mut out = HashMap::new();
    let Ok(mut s) = read_store(store) else {
        return Ok(out);
    };
    let all = s.list().map_err(store_err)?;
    let benches = runs
        .iter()
        .flat_map(|r| r.results.iter().map(|x| x.id.as_str()));
    let by_env = run_to_run_spreads(&mut s, &all, benches, &HashMap::new())?;
    for (i, run) in runs.iter().enumerate() {
        let env: Environment = (
            run.env.hostname.clone(),
            run.env.kernel_release.clone(),
            run.wrapper.clone(),
            Some(crate::effects::store::rows::env_key(run)),
        );
        for r in &run.results {
            let spread = by_env.get(&(r.id.clone(), env.clone())).copied().flatten();
            out.insert((r.id.clone(), i), spread);
        }
    }
    Ok(out)
}

/// The ids of a run's results in the order it measured them: the matrix's row order.
fn result_order(s: &mut crate::effects::store::Store, run: i64) -> anyhow::Result<Vec<String>> {
    Ok(s.load_bare(run)
        .map_err(store_err)?
        .results
        .into_iter()
        .map(|r| r.id)
        .collect())
}
