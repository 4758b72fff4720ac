//! `oscost run` (and a bare `oscost`): its flags as a `plan::Request` (`commands/plan.rs`
//! resolves and validates it into the scheduler's `Plan`, refusing a bad one before measuring);
//! run it through the scheduler; save the run, write the exports, print the table and write
//! the report. `--runs N` measures N runs apart, each saved as it ends.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::args::{OutputArgs, StoreArgs, parse_percent, parse_seconds, parse_size_mib, usage};
use super::print_table;
use super::session::{self, Live, MeasuringCommand};
use super::{Command, Given};
use crate::base::model::Run;
use crate::base::model::{Note, NoteKind};
use crate::bench;
use crate::effects::gate::Effects;
use crate::processes::conditions::{KernelSettings, Side};
use crate::processes::scheduler;
use crate::{effects::output, report};

#[derive(Debug, Args, Clone)]
/// What a measuring command measures and where it keeps it: the flags `run` and `ab` share.
pub struct MeasureArgs {
    /// Benchmark ids or prefixes (`syscall/`, `call/f0`), or result ids as printed
    /// (`switch/ring/n2-s0k`); none means the default suite.
    #[arg(value_name = "IDS", value_parser = super::args::IdParser, hide_possible_values = true)]
    pub ids: Vec<String>,

    /// Stop adding repetitions once the 95% CI of the median is within this percent.
    #[arg(long, value_name = "PCT", value_parser = parse_percent, default_value = "1",
          allow_negative_numbers = true)]
    pub precision: f64,

    /// Longest sampling time per benchmark, in seconds: caps its repetitions [default: the
    /// time of 10 repetitions, 8 in a suite of over 20 cases, 5 with --quick; ab: 40 s over
    /// both sides, 10 with --quick, after which a comparison that has not decided says
    /// "undecided"].
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
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = ["same", "cross", "free"])]
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

    /// Sample where each result's time goes (kernel functions, BPF programs, user code), in
    /// an untimed pass of each repetition after its timed one: `show --profile` lists them,
    /// `ab` and `compare` split a difference by function.
    #[arg(long)]
    pub profile: bool,

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

    /// Run this program during the run, attached to the whole system (a tracer, a security
    /// agent, e.g. 'bpftrace -e "tracepoint:raw_syscalls:sys_enter { @c = count(); }"'):
    /// started before measuring, waited for until ready (--ready, or until what is attached
    /// to the system settles), stopped after (SIGINT, SIGTERM, SIGKILL, 2 s apart), also if
    /// oscost is killed.
    #[arg(long, value_name = "CMD")]
    pub during: Option<String>,

    /// With --during: the program is ready once a line of its output matches this regular
    /// expression [default: once what is attached to the system has not changed for 1 s].
    #[arg(long, value_name = "REGEX", requires = "during")]
    pub ready: Option<String>,

    /// With --during: the longest wait for the program to be ready, seconds [default: 60].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "during")]
    pub ready_timeout: Option<f64>,

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
            fork_sizes: self.fork_sizes.clone(),
            placement: self.placement.clone(),
            copies: self.copies.clone(),
            events: self.events.clone(),
            label: self.label.clone(),
            profile: self.profile,
            ..super::plan::Request::new(vec![])
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
    /// The run's one side as its flags name it: `--under`, `--during` (with `--ready`), `--set`.
    pub fn side_flags(&self) -> super::args::SideFlags {
        super::args::SideFlags {
            wrapper: self.under.clone(),
            during: self.during.clone(),
            ready: self.ready.clone(),
            ready_timeout_s: self.ready_timeout,
            settings: self.set.clone(),
            ..Default::default()
        }
    }
}

impl Command for RunArgs {
    /// What `run` writes and reads, and the kernel settings it changes, for the gate.
    fn effects(&self) -> Effects {
        self.measure.effects().sets(&[&self.side_flags().settings])
    }

    /// Measure, then save, export, print and report, in the session's order
    /// (`session::run`): everything that can be refused is refused before measuring (exit 2);
    /// after measuring, one step failing does not stop the others (exit 1, naming it); a
    /// signal before the save commits discards the run (128+N). A run is a measurement with
    /// one side: the plain system or `--under`'s wrapper, under `--set`'s settings.
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut live = Live::new(given.passed, !self.measure.no_save, self.measure.settle);
        if self.runs > 1 {
            return session::run(&mut live, &mut Series::new(&self));
        }
        session::run(
            &mut live,
            &mut OneRun {
                args: &self,
                plan: None,
                side: Side::default(),
                run: None,
            },
        )
    }
}

/// The run's one side measured, its run marked with its conditions.
fn measure_one(
    plan: &scheduler::Plan,
    side: &Side,
    settings: Option<KernelSettings<'_>>,
    stop: &crate::base::stop::Stop,
) -> anyhow::Result<Run> {
    Ok(scheduler::measure(plan, std::slice::from_ref(side), stop, settings)?.remove(0))
}

/// Say, before measuring, the settings a run is measured under.
fn say_under(settings: Option<&KernelSettings<'_>>) {
    if let Some(k) = settings
        && let Some(side) = k.held.sides.first()
    {
        crate::say!(
            "oscost: measuring under {} (put back when done; {} s settle)",
            side.given.join(" "),
            k.held.settle_s
        );
    }
}

/// `oscost run`: one run, saved, exported, printed and drawn.
struct OneRun<'a> {
    args: &'a RunArgs,
    plan: Option<scheduler::Plan>,
    side: Side,
    run: Option<Run>,
}

impl OneRun<'_> {
    fn plan(&mut self) -> anyhow::Result<&mut scheduler::Plan> {
        self.plan
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("internal: measured before the plan was built"))
    }
}

impl MeasuringCommand for OneRun<'_> {
    fn prepare(&mut self, _stop: &crate::base::stop::Stop) -> anyhow::Result<()> {
        self.plan = Some(super::plan::build(&self.args.measure.request())?);
        self.side = self.args.side_flags().side()?;
        Ok(())
    }

    fn settle(&mut self, _i: usize) -> anyhow::Result<()> {
        super::plan::settle_cpu(self.plan()?);
        Ok(())
    }

    fn measure(
        &mut self,
        _i: usize,
        settings: Option<KernelSettings<'_>>,
        stop: &crate::base::stop::Stop,
    ) -> anyhow::Result<()> {
        say_under(settings.as_ref());
        let plan = self
            .plan
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("internal: measured before the plan was built"))?;
        let run = measure_one(plan, &self.side, settings, stop)?;
        self.run = Some(run);
        Ok(())
    }

    fn runs(&self, _i: usize) -> Vec<&Run> {
        self.run.iter().collect()
    }

    fn saved(&mut self, _i: usize, ids: &[i64], store: &str) {
        crate::say!("oscost: saved as run {} in {store}", ids[0]);
    }

    /// Exported, printed and drawn: each failure said in `late`, the others still done.
    fn deliver(
        &mut self,
        _saved: Option<&str>,
        stop: &crate::base::stop::Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<i32> {
        let Some(result) = &self.run else {
            return Ok(0);
        };
        let m = &self.args.measure;
        let exports = super::exporters::<Run>(&m.outputs, None);
        if let Err(e) = output::export(result, &exports) {
            late.push(e.to_string());
        }
        let table = crate::report::table::TableOptions {
            verbose: self.args.verbose,
            wide: self.args.wide,
        };
        if let Err(e) = print_table(result, &m.outputs, table) {
            late.push(e.to_string());
        }
        if let Some(d) = &m.report {
            match report::run_page::render_run(result, &bench::curves(), &bench::ladder(), false)
                .map_err(|e| anyhow::anyhow!("cannot render the report: {e}"))
                .and_then(|page| output::write_page(d, &page, stop))
            {
                Ok(_) => crate::say!("oscost: report in {}", d.join("index.html").display()),
                Err(e) if e.is::<crate::base::stop::Interrupted>() => {}
                Err(e) => late.push(e.to_string()),
            }
        }
        Ok(0)
    }

    fn all_runs(&self) -> Vec<&Run> {
        self.run.iter().collect()
    }
}

/// `--runs N`: N runs measured apart, each a fresh plan (so a busy CPU is looked for anew),
/// each saved on its own as soon as it ends (an interrupted series keeps the runs it
/// finished), the settings held over all of them; then each benchmark's run-to-run spread
/// over the series.
struct Series<'a> {
    args: &'a RunArgs,
    plan: Option<scheduler::Plan>,
    side: Side,
    runs: Vec<Run>,
}

impl<'a> Series<'a> {
    fn new(args: &'a RunArgs) -> Series<'a> {
        Series {
            args,
            plan: None,
            side: Side::default(),
            runs: Vec::new(),
        }
    }
}

impl MeasuringCommand for Series<'_> {
    fn prepare(&mut self, _stop: &crate::base::stop::Stop) -> anyhow::Result<()> {
        let m = &self.args.measure;
        if m.no_save {
            return Err(usage(
                "--runs saves every run (that is its point); drop --no-save, or use --runs 1",
            ));
        }
        if !m.outputs.paths().is_empty() || m.report.is_some() {
            return Err(usage(
                "--runs writes no files: each run is saved in the store; `oscost export ID` or `oscost matrix` them after",
            ));
        }
        // Built once now so that a bad request is refused before anything changes.
        super::plan::build(&self.args.measure.request())?;
        // Each run of the series measured under the same side (a program during is started
        // and stopped with each run).
        self.side = self.args.side_flags().side()?;
        Ok(())
    }

    fn count(&self) -> usize {
        self.args.runs as usize
    }

    fn settle(&mut self, _i: usize) -> anyhow::Result<()> {
        let mut plan = super::plan::build(&self.args.measure.request())?;
        super::plan::settle_cpu(&mut plan);
        self.plan = Some(plan);
        Ok(())
    }

    fn measure(
        &mut self,
        i: usize,
        settings: Option<KernelSettings<'_>>,
        stop: &crate::base::stop::Stop,
    ) -> anyhow::Result<()> {
        if i == 0 {
            say_under(settings.as_ref());
        }
        let plan = self
            .plan
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("internal: measured before the plan was built"))?;
        let mut run = measure_one(plan, &self.side, settings, stop)?;
        let n = self.count();
        run.notes.push(Note::new(
            NoteKind::Series { run: i + 1, of: n },
            format!("run {} of a series of {n} measured apart (--runs)", i + 1),
        ));
        self.runs.push(run);
        Ok(())
    }

    fn runs(&self, i: usize) -> Vec<&Run> {
        self.runs.get(i).into_iter().collect()
    }

    fn saved(&mut self, i: usize, ids: &[i64], store: &str) {
        let n = self.count();
        crate::say!(
            "oscost: run {} of {n} saved as run {} in {store}",
            i + 1,
            ids[0]
        );
    }

    /// The pause is a wait like any other: a signal ends it at once.
    fn between(&mut self, _i: usize, stop: &crate::base::stop::Stop) -> anyhow::Result<()> {
        let pause = Duration::from_secs_f64(self.args.pause.unwrap_or(10.0));
        let until = std::time::Instant::now() + pause;
        while std::time::Instant::now() < until {
            stop.check()?;
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn deliver(
        &mut self,
        _saved: Option<&str>,
        _stop: &crate::base::stop::Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<i32> {
        if let Err(e) = super::print_stdout(&series_table(&self.runs)) {
            late.push(e.to_string());
        }
        Ok(0)
    }

    fn all_runs(&self) -> Vec<&Run> {
        self.runs.iter().collect()
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
