//! `oscost run` (and a bare `oscost`): its flags as a `plan::Request` (`commands/plan.rs`
//! resolves and validates it into the scheduler's `Plan`, refusing a bad one before measuring);
//! run it through the scheduler; save the run, write the exports, print the table and write
//! the report. `--runs N` measures N runs apart, each saved as it ends.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::args::{OutputArgs, StoreArgs, parse_percent, parse_seconds, parse_size_mib, usage};
use super::{Command, Given};
use super::{conclude, print_table, saving_store};
use crate::base::model::Run;
use crate::base::model::{Note, NoteKind};
use crate::bench;
use crate::effects::gate::{Effects, Passed};
use crate::processes::scheduler;
use crate::{effects::output, report};

#[derive(Debug, Args, Clone)]
/// What a measuring command measures and where it keeps it: the flags `run` and `ab` share.
pub struct MeasureArgs {
    /// Benchmark ids or prefixes (`syscall/`, `call/f0`); none means the default suite.
    pub ids: Vec<String>,

    /// Stop adding repetitions once the 95% CI of the median is within this percent.
    #[arg(long, value_name = "PCT", value_parser = parse_percent, default_value = "1",
          allow_negative_numbers = true)]
    pub precision: f64,

    /// Longest sampling time per benchmark, in seconds: caps its repetitions [default: 10
    /// repetitions, 8 in a suite of over 20 cases, 5 with --quick; ab: 40 s over both sides,
    /// 10 with --quick, after which a comparison that has not decided says "undecided"].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub budget: Option<f64>,

    /// Take exactly N samples per result, shared out over 5 repetitions, instead of stopping at
    /// --precision.
    #[arg(long, value_name = "N", conflicts_with = "precision", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(10..=10_000_000))]
    pub samples: Option<u64>,

    /// A shorter, less precise pass: 5 repetitions of 20 ms, 2% precision.
    #[arg(long)]
    pub quick: bool,

    /// Pin single-thread benchmarks to this CPU [default: the last allowed CPU].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub cpu: Option<usize>,

    /// Kill a worker (one repetition) that runs longer than this, in seconds [default: about 30].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub timeout: Option<f64>,

    #[command(flatten)]
    /// Where the run is written besides the store.
    pub outputs: OutputArgs,

    /// Parent resident sizes for spawn/fork-rss: MiB, or with a unit (64M, 1G) [default: 0,64M,256M,1G].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size_mib,
          allow_negative_numbers = true)]
    pub fork_sizes: Option<Vec<u64>>,

    /// Placements of two-party benchmarks: same (one CPU), cross (two CPUs), free (unpinned).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub placement: Option<Vec<String>>,

    /// Copies run at once by scale/ cases, one per CPU, as processes and as threads: a list
    /// of counts, or `all` for every allowed CPU [default: 1 and every allowed CPU].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub copies: Option<Vec<String>>,

    /// perf events to count per operation (perf's names, e.g. context-switches,minor-faults,
    /// cycles), or `none` [default: every event oscost knows; those the machine cannot count
    /// are listed with why].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub events: Option<Vec<String>>,

    /// A label stored with the run.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// Also write an HTML report of the run into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,

    /// Do not save the run to the results database.
    #[arg(long)]
    pub no_save: bool,

    /// Seconds to wait after changing kernel settings before measuring.
    #[arg(long, value_name = "SECS", default_value = "0.2", value_parser = parse_settle)]
    pub settle: f64,

    #[command(flatten)]
    /// The store the run is saved into.
    pub store: StoreArgs,
}

#[derive(Debug, Args, Clone)]
/// `oscost run`'s arguments.
pub struct RunArgs {
    #[command(flatten)]
    /// What is measured and where it is kept.
    pub measure: MeasureArgs,

    /// Run the measuring part under this command, e.g. 'strace -f -o /dev/null'.
    #[arg(long, value_name = "CMD")]
    pub under: Option<String>,

    /// Measure N independent runs, each saved as a run of its own, with --pause between
    /// them: the history a comparison of runs measured apart needs (then the run-to-run
    /// spread of each benchmark is printed).
    #[arg(long, value_name = "N", default_value = "1",
          value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,

    /// Seconds between the runs of --runs [default: 10].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "runs")]
    pub pause: Option<f64>,

    /// Measure under this kernel setting (repeatable): a name `oscost settings` lists, or a
    /// path under /proc/sys or /sys, `=VALUE`. Written before measuring, read back, and always
    /// put back (a guard process does it if oscost is killed).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,

    /// Print every result's note on its departing repetitions, also where the machine moved
    /// many results together (said once by default; the JSON keeps them all).
    #[arg(long)]
    pub verbose: bool,

    /// Print every column of the table (min and events/op too), past 100 columns.
    #[arg(long)]
    pub wide: bool,
}

/// A settle time: 0 to 60 s.
fn parse_settle(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('s')
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(0.0..=60.0).contains(&v) {
        return Err(format!("'{s}' is out of range: give 0 to 60 seconds"));
    }
    Ok(v)
}

impl MeasureArgs {
    /// What these flags ask to measure, as values (`plan::build` validates it).
    pub fn request(&self) -> super::plan::Request {
        super::plan::Request {
            ids: self.ids.clone(),
            precision_pct: self.precision,
            budget_s: self.budget,
            samples: self.samples,
            quick: self.quick,
            cpu: self.cpu,
            timeout_s: self.timeout,
            under: None,
            fork_sizes: self.fork_sizes.clone(),
            placement: self.placement.clone(),
            copies: self.copies.clone(),
            events: self.events.clone(),
            label: self.label.clone(),
        }
    }

    /// What a measuring command writes and reads through these flags, for the gate.
    pub fn effects(&self) -> Effects {
        self.outputs
            .declare(Effects::new())
            .writes_report("--report", self.report.as_ref())
            .saves_unless(self.no_save, self.store.db.as_ref())
    }
}

impl RunArgs {
    /// What these flags ask to measure, the wrapper included.
    pub fn request(&self) -> super::plan::Request {
        super::plan::Request {
            under: self.under.clone(),
            ..self.measure.request()
        }
    }
}

impl Command for RunArgs {
    /// What `run` writes and reads, and the kernel settings it changes, for the gate.
    fn effects(&self) -> Effects {
        self.measure.effects().sets(&[&self.set])
    }

    /// Measure, then save, export, print and report. Everything that can be refused is
    /// refused before measuring (exit 2); after measuring, one step failing does not stop the
    /// others (exit 1, naming it); a signal before the save commits discards the run (128+N).
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut passed = given.passed;
        let stop = crate::effects::signals::guard_processes()?;
        let mut plan = super::plan::build(&self.request())?;
        // Kernel settings: checked, guarded and tried before measuring; applied now and put
        // back when this returns, however it returns (the guard's drop).
        let settings = super::kernel_settings(&mut passed, self.measure.settle)?;
        let mut kernel = None;
        if let Some((mut guard, sides, before)) = settings {
            guard
                .apply(0)
                .map_err(|e| anyhow::anyhow!("cannot set {e}"))?;
            plan.opts.task_settings = guard.task_settings(0);
            crate::say!(
                "oscost: measuring under {} (put back when done; {} s settle)",
                sides[0].given.join(" "),
                self.measure.settle
            );
            kernel = Some((guard, sides[0].given.clone(), before));
        }
        let under = |run: &mut Run| {
            if let Some((_, given, before)) = &kernel {
                measured_under(run, given, before, self.measure.settle);
            }
        };
        if self.runs > 1 {
            let code = self.series(&stop, passed, plan, &under);
            return finish_settings(kernel.map(|k| k.0), code);
        }
        let exports = super::exporters::<Run>(&self.measure.outputs);
        let mut store = if self.measure.no_save {
            None
        } else {
            Some(saving_store(&mut passed)?)
        };
        super::plan::settle_cpu(&mut plan);
        let mut result = scheduler::execute(&plan, &stop)?;
        under(&mut result);
        // Put back before saving and writing: the settings' life is the measurement's.
        let mut late = Vec::new();
        if let Some((guard, ..)) = kernel.take() {
            late.extend(guard.restore());
        }
        stop.check()?;
        let mut saved = None;
        if let Some(s) = &mut store
            && let Some(ids) = super::save_or_keep(s, &[&result], &stop, &mut late)?
        {
            crate::say!("oscost: saved as run {} in {}", ids[0], s.shown());
            saved = Some(format!("run {} in {}", ids[0], s.shown()));
        }
        if let Err(e) = output::export(&result, &exports) {
            late.push(e.to_string());
        }
        if let Err(e) = print_table(
            &result,
            &self.measure.outputs,
            crate::report::table::TableOptions {
                verbose: self.verbose,
                wide: self.wide,
            },
        ) {
            late.push(e.to_string());
        }
        if let Some(d) = &self.measure.report {
            match report::run_page::render_run(&result, &bench::curves(), &bench::ladder(), false)
                .map_err(|e| anyhow::anyhow!("cannot render the report: {e}"))
                .and_then(|page| output::write_page(d, &page, &stop))
            {
                Ok(_) => crate::say!("oscost: report in {}", d.join("index.html").display()),
                Err(e) if e.is::<crate::base::stop::Interrupted>() => {}
                Err(e) => late.push(e.to_string()),
            }
        }
        super::after_save(&stop, saved)?;
        Ok(conclude(&[&result], &late))
    }
}

/// Mark `run` as measured under the kernel settings `given` (`settle` seconds after each was
/// written), with every catalogue value as it was before (`before`).
fn measured_under(
    run: &mut Run,
    given: &[String],
    before: &std::collections::BTreeMap<String, String>,
    settle: f64,
) {
    run.settings = given.to_vec();
    // The label is what history, matrix and the pages title a run by: it says the settings
    // too (as `ab` labels its sides).
    let set = format!("set {}", given.join(" "));
    run.label = Some(match run.label.take() {
        Some(l) => format!("{l} ({set})"),
        None => set,
    });
    run.env.settings = before.clone();
    run.notes.push(Note::new(
        NoteKind::Settings,
        format!(
            "measured under {} (set by oscost, read back, {settle} s settle, put back after)",
            given.join(" "),
        ),
    ));
}

impl RunArgs {
    /// `--runs N`: N runs measured apart, each a fresh plan (so a busy CPU is looked for
    /// anew), each saved on its own as soon as it ends (an interrupted series keeps the runs
    /// it finished); then each benchmark's run-to-run spread over the series.
    fn series(
        &self,
        stop: &crate::base::stop::Stop,
        mut passed: Passed,
        first: scheduler::Plan,
        under: &dyn Fn(&mut Run),
    ) -> anyhow::Result<i32> {
        if self.measure.no_save {
            return Err(usage(
                "--runs saves every run (that is its point); drop --no-save, or use --runs 1",
            ));
        }
        if !self.measure.outputs.paths().is_empty() || self.measure.report.is_some() {
            return Err(usage(
                "--runs writes no files: each run is saved in the store; `oscost export ID` or `oscost matrix` them after",
            ));
        }
        let pause = Duration::from_secs_f64(self.pause.unwrap_or(10.0));
        let mut store = saving_store(&mut passed)?;
        let n = self.runs as usize;
        let mut runs = Vec::new();
        let mut saved: Vec<i64> = Vec::new();
        for i in 0..n {
            let mut plan = super::plan::build(&self.request())?;
            plan.opts.task_settings = first.opts.task_settings.clone();
            super::plan::settle_cpu(&mut plan);
            let mut result =
                scheduler::execute(&plan, stop).map_err(|e| series_stopped(e, &saved, &store))?;
            stop.check()
                .map_err(|e| series_stopped(e.into(), &saved, &store))?;
            under(&mut result);
            result.notes.push(Note::new(
                NoteKind::Series { run: i + 1, of: n },
                format!("run {} of a series of {n} measured apart (--runs)", i + 1),
            ));
            let mut late = Vec::new();
            match super::save_or_keep(&mut store, &[&result], stop, &mut late) {
                Ok(Some(ids)) => {
                    crate::say!(
                        "oscost: run {} of {n} saved as run {} in {}",
                        i + 1,
                        ids[0],
                        store.shown()
                    );
                    saved.push(ids[0]);
                }
                Ok(None) => return Ok(conclude(&[&result], &late)),
                Err(e) => return Err(series_stopped(e, &saved, &store)),
            }
            runs.push(result);
            if i + 1 < n {
                // The pause is a wait like any other: a signal ends it at once.
                let until = std::time::Instant::now() + pause;
                while std::time::Instant::now() < until {
                    stop.check()
                        .map_err(|e| series_stopped(e.into(), &saved, &store))?;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        super::print_stdout(&series_table(&runs))?;
        Ok(conclude(&runs.iter().collect::<Vec<_>>(), &[]))
    }
}

/// The settings put back at the end of a series, whatever its outcome; what would not go back
/// is said (exit 1 at least).
fn finish_settings(
    guard: Option<crate::effects::settings_guard::Guard>,
    code: anyhow::Result<i32>,
) -> anyhow::Result<i32> {
    let failed = guard.map(|g| g.restore()).unwrap_or_default();
    for l in &failed {
        crate::say!("oscost: {l}");
    }
    code.map(|c| if failed.is_empty() { c } else { c.max(1) })
}

/// A series stopped by a signal: the runs it saved before are named (they stay saved).
fn series_stopped(
    e: anyhow::Error,
    saved: &[i64],
    store: &crate::effects::store::Store,
) -> anyhow::Error {
    match e.downcast_ref::<crate::base::stop::Interrupted>() {
        Some(i) if !saved.is_empty() => {
            let ids: Vec<String> = saved.iter().map(i64::to_string).collect();
            let what = if saved.len() == 1 { "run" } else { "runs" };
            crate::effects::signals::InterruptedAfterSave {
                signal: i.0,
                saved: format!("{what} {} in {}", ids.join(", "), store.shown()),
            }
            .into()
        }
        _ => e,
    }
}

/// Each benchmark's medians over a series and its run-to-run spread beyond the runs' own CIs.
fn series_table(runs: &[Run]) -> String {
    use crate::analysis::run_to_run::{RunLevel, estimate};
    let Some(first) = runs.first() else {
        return String::new();
    };
    let mut t = crate::report::plain_table(false, vec!["benchmark", "medians", "run to run"]);
    for r in &first.results {
        let levels: Vec<RunLevel> = runs
            .iter()
            .filter_map(|run| run.results.iter().find(|x| x.id == r.id))
            .filter_map(|x| {
                let s = x.stats.as_ref()?;
                Some(RunLevel {
                    median: s.median,
                    ci95: s.ci95,
                })
            })
            .collect();
        let medians: Vec<String> = levels
            .iter()
            .map(|l| crate::report::format_ns(l.median))
            .collect();
        let spread = estimate(&levels).map_or("?".into(), |s| {
            format!("±{:.1}% ({} runs)", s.percent(), s.runs)
        });
        t.add_row(vec![
            crate::base::text::printable(&r.id).into_owned(),
            medians.join(" "),
            spread,
        ]);
    }
    format!(
        "{t}\nrun to run: the half-width of the interval one run's level falls in beyond its own CI (0 where the runs' own CIs already cover their scatter); comparisons of runs measured apart add it\n"
    )
}
