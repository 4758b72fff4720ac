//! `oscost run` (and a bare `oscost`): resolve the command line into a `Plan`, refusing a bad
//! one before measuring anything; run it through the scheduler; print the table, write the
//! exports, save the run and write the report. Each part of the plan comes from a small
//! resolver of its own (ids, CPU, sampling, fork sizes, placements), each tested alone.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::args::{OutputArgs, StoreArgs, parse_percent, parse_seconds, parse_size_mib};
use super::args::{split_command, usage};
use super::{check_outputs, check_report_dir, conclude, open_store, print_table, stopper};
use crate::bench;
use crate::harness::case::{Benchmark, RingOptions, VariantOptions, default_fork_sizes};
use crate::harness::placement::{self, Place};
use crate::harness::runner;
use crate::harness::runner::{SamplerConfigWire, WorkerOptions, default_mq_name};
use crate::harness::sampler::SamplerConfig;
use crate::model::Run;
use crate::scheduler::{self, Plan, Repetitions, repetition_plan};
use crate::store::StoreError;
use crate::{output, report};
use std::sync::Arc;

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Benchmark ids or prefixes (`syscall/`, `call/f0`); none means the default suite.
    pub ids: Vec<String>,

    /// Stop adding repetitions once the 95% CI of the median is within this percent.
    #[arg(long, value_name = "PCT", value_parser = parse_percent, default_value = "1",
          allow_negative_numbers = true)]
    pub precision: f64,

    /// Longest sampling time per benchmark, in seconds: caps its repetitions [default: 10
    /// repetitions, 8 in a suite of over 20 cases, 5 with --quick].
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
    pub outputs: OutputArgs,

    /// Run the measuring part under this command, e.g. 'strace -f -o /dev/null'.
    #[arg(long, value_name = "CMD")]
    pub under: Option<String>,

    /// Parent resident sizes for spawn/fork-rss: MiB, or with a unit (64M, 1G) [default: 0,64M,256M,1G].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size_mib,
          allow_negative_numbers = true)]
    pub fork_sizes: Option<Vec<u64>>,

    /// Placements of two-party benchmarks: same (one CPU), cross (two CPUs), free (unpinned).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub placement: Option<Vec<String>>,

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

    /// Measure N independent runs, each saved as a run of its own, with --pause between
    /// them: the history a comparison of runs measured apart needs (then the run-to-run
    /// spread of each benchmark is printed).
    #[arg(long, value_name = "N", default_value = "1",
          value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,

    /// Seconds between the runs of --runs [default: 10].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "runs")]
    pub pause: Option<f64>,

    /// Do not save the run to the results database.
    #[arg(long)]
    pub no_save: bool,

    #[command(flatten)]
    pub store: StoreArgs,
}

impl RunArgs {
    /// Measure, then save, export, print and report. Everything that can be refused is
    /// refused before measuring (exit 2); after measuring, one step failing does not stop the
    /// others (exit 1, naming it); a signal before the save commits discards the run (128+N).
    pub fn run(self) -> anyhow::Result<i32> {
        let interrupted = crate::signals::guard_processes()?;
        if self.runs > 1 {
            return self.series(&interrupted);
        }
        let plan = plan(&self)?;
        let exports = super::exporters::<Run>(&self.outputs);
        if let Some(d) = &self.report {
            check_report_dir(d)?;
        }
        let mut store = if self.no_save {
            None
        } else {
            Some(open_store(&self.store)?)
        };
        let result = scheduler::execute(&plan, Arc::clone(&interrupted))?;
        let stop = stopper(&interrupted);
        stop()?;
        let mut late = Vec::new();
        if let Some(s) = &mut store {
            match s.save_all(&[&result], &|| stop().is_err()) {
                Ok(ids) => eprintln!("oscost: saved as run {} in {}", ids[0], s.shown()),
                Err(StoreError::Interrupted) => stop()?,
                Err(e) => late.push(super::keep_unsaved(&[&result], &e, &s.shown())),
            }
        }
        if let Err(e) = output::export(&result, &exports) {
            late.push(e.to_string());
        }
        if let Err(e) = print_table(&result, &self.outputs) {
            late.push(e.to_string());
        }
        if let Some(d) = &self.report {
            match report::html::render_run(&result, &bench::curves(), &bench::ladder(), false)
                .map_err(|e| anyhow::anyhow!("cannot render the report: {e}"))
                .and_then(|page| output::write_page(d, &page, &|| Ok(())))
            {
                Ok(_) => eprintln!("oscost: report in {}", d.join("index.html").display()),
                Err(e) => late.push(e.to_string()),
            }
        }
        Ok(conclude(&[&result], &late))
    }
}

impl RunArgs {
    /// `--runs N`: N runs measured apart, each a fresh plan (so a busy CPU is looked for
    /// anew), each saved on its own as soon as it ends (an interrupted series keeps the runs
    /// it finished); then each benchmark's run-to-run spread over the series.
    fn series(self, interrupted: &Arc<std::sync::atomic::AtomicUsize>) -> anyhow::Result<i32> {
        if self.no_save {
            return Err(usage(
                "--runs saves every run (that is its point); drop --no-save, or use --runs 1",
            ));
        }
        if !self.outputs.paths().is_empty() || self.report.is_some() {
            return Err(usage(
                "--runs writes no files: each run is saved in the store; `oscost export ID` or `oscost matrix` them after",
            ));
        }
        let pause = Duration::from_secs_f64(self.pause.unwrap_or(10.0));
        let mut store = open_store(&self.store)?;
        let stop = stopper(interrupted);
        let n = self.runs as usize;
        let mut runs = Vec::new();
        for i in 0..n {
            let plan = plan(&self)?;
            let mut result = scheduler::execute(&plan, Arc::clone(interrupted))?;
            stop()?;
            result.notes.push(format!(
                "run {} of a series of {n} measured apart (--runs)",
                i + 1
            ));
            match store.save_all(&[&result], &|| stop().is_err()) {
                Ok(ids) => eprintln!(
                    "oscost: run {} of {n} saved as run {} in {}",
                    i + 1,
                    ids[0],
                    store.shown()
                ),
                Err(StoreError::Interrupted) => stop()?,
                Err(e) => {
                    let line = super::keep_unsaved(&[&result], &e, &store.shown());
                    return Ok(conclude(&[&result], &[line]));
                }
            }
            runs.push(result);
            if i + 1 < n {
                // The pause is a wait like any other: a signal ends it at once.
                let until = std::time::Instant::now() + pause;
                while std::time::Instant::now() < until {
                    stop()?;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        super::print_stdout(&series_table(&runs))?;
        Ok(conclude(&runs.iter().collect::<Vec<_>>(), &[]))
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
            crate::text::printable(&r.id).into_owned(),
            medians.join(" "),
            spread,
        ]);
    }
    format!(
        "{t}\nrun to run: the half-width of the interval one run's level falls in beyond its own CI (0 where the runs' own CIs already cover their scatter); comparisons of runs measured apart add it\n"
    )
}

/// Validate arguments into a plan. Every error here is a usage error (exit 2). The
/// clock-dependent sampler settings (clock cost, batch length) are filled in by the scheduler
/// once the clock is calibrated.
pub fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
    let (ids, id_places) = split_placements(&args.ids);
    let benchmarks = bench::select(&ids).map_err(usage)?;
    let allowed = placement::allowed_cpus();
    let mut cpu = resolve_cpu(args.cpu, &allowed).map_err(usage)?;
    check_outputs(&args.outputs, Some(&args.store), &[])?;
    if args.cpu.is_none() && allowed.len() > 1 {
        // A look at the CPUs before measuring: the default one may be where the user pinned
        // other work (`taskset -c 1`). Named CPUs are taken as given.
        let busy = placement::busy_now(&allowed, Duration::from_millis(100));
        let (chosen, said) = placement::choose_idle(cpu, &busy);
        if let Some(line) = said {
            eprintln!("oscost: {line}");
        }
        cpu = chosen;
    }
    let wrapper = args
        .under
        .as_deref()
        .map(|c| split_command("--under", c))
        .transpose()
        .map_err(|e| usage(e.0))?;
    if let Some(w) = &wrapper {
        super::check_program("--under", w)?;
    }
    let avail = mem_available_mib();
    let fork_sizes_mib = resolve_fork_sizes(args.fork_sizes.as_deref(), avail).map_err(usage)?;
    let placements = resolve_placements(args.placement.as_deref(), &id_places).map_err(usage)?;
    let variants = VariantOptions {
        placements,
        ring: RingOptions::default(),
        fork_sizes_mib,
    };
    let (sampler, reps) = resolve_sampling(args, &benchmarks, &variants);
    let rep_s = reps.rep_ns as f64 / 1e9;
    let timeout = Duration::from_secs_f64(args.timeout.unwrap_or(30.0 + 40.0 * rep_s));
    Ok(Plan {
        benchmarks,
        opts: WorkerOptions {
            sampler,
            cpu,
            allowed,
            variants,
            mq_name: default_mq_name(),
            scratch_dir: None,
            events: resolve_events(args.events.as_deref()).map_err(usage)?,
        },
        timeout,
        wrapper_text: args.under.clone(),
        wrapper,
        label: args.label.clone(),
        reps,
    })
}

/// The events `--events` names (every known one by default, none for `none`).
fn resolve_events(asked: Option<&[String]>) -> Result<Vec<String>, String> {
    use crate::harness::counters::{EVENTS, find};
    match asked {
        None => Ok(EVENTS.iter().map(|e| e.name.to_string()).collect()),
        Some([none]) if none == "none" => Ok(vec![]),
        Some(list) => list
            .iter()
            .map(|e| {
                find(e).map(|d| d.name.to_string()).ok_or_else(|| {
                    let known: Vec<&str> = EVENTS.iter().map(|d| d.name).collect();
                    format!(
                        "--events: unknown event '{e}'; known: {}, or none",
                        known.join(", ")
                    )
                })
            })
            .collect(),
    }
}

/// `switch/pipe-proc@cross` is a result id: the benchmark, at that placement. Returns the
/// benchmark ids and the placements named this way.
fn split_placements(ids: &[String]) -> (Vec<String>, Vec<String>) {
    let mut places = Vec::new();
    let bare = ids
        .iter()
        .map(|id| match id.split_once('@') {
            Some((base, place)) => {
                places.push(place.to_string());
                base.to_string()
            }
            None => id.clone(),
        })
        .collect();
    (bare, places)
}

/// The measuring CPU: the one asked for if it is allowed, else the default.
fn resolve_cpu(asked: Option<usize>, allowed: &[usize]) -> Result<usize, String> {
    let list = || {
        let v: Vec<String> = allowed.iter().map(|c| c.to_string()).collect();
        v.join(",")
    };
    match asked {
        _ if allowed.is_empty() => {
            Err("this process may run on no CPU (sched_getaffinity failed)".into())
        }
        Some(c) if allowed.contains(&c) => Ok(c),
        Some(c) => Err(format!(
            "--cpu {c}: not an allowed CPU; allowed: {}",
            list()
        )),
        None => placement::default_cpu(allowed).ok_or_else(|| "no allowed CPU".into()),
    }
}

/// The repetitions (how many, how long each, when to stop: see `scheduler::repetition_plan`)
/// and the sampler settings of one repetition: it samples for exactly the repetition's time
/// after a short warm-up (or takes its share of --samples).
fn resolve_sampling(
    args: &RunArgs,
    benchmarks: &[&Benchmark],
    variants: &VariantOptions,
) -> (SamplerConfigWire, Repetitions) {
    let cases: usize = benchmarks
        .iter()
        .map(|b| runner::expand(b, variants).len())
        .sum();
    let precision = if args.quick && args.precision == 1.0 {
        0.02
    } else {
        args.precision / 100.0
    };
    let fixed = args.samples.map(|n| n as usize);
    let reps = repetition_plan(cases, precision, args.budget, fixed, args.quick);
    let defaults = SamplerConfig::for_clock(f64::NAN);
    let wire = SamplerConfigWire {
        precision,
        // A fixed count may take longer than a repetition's time: --budget still caps it.
        budget_ns: match fixed {
            Some(_) => args.budget.map_or(60_000_000_000, |b| (b * 1e9) as u64),
            None => reps.rep_ns,
        },
        min_time_ns: reps.rep_ns,
        warmup_ns: 5_000_000,
        fixed_samples: None,
        // Not known until the scheduler calibrates the clock.
        target_batch_ns: defaults.target_batch_ns,
        clock_cost_ns: f64::NAN,
    };
    (wire, reps)
}

/// The parent sizes of spawn/fork-rss: those asked for (sorted, at most the memory available),
/// or the default curve cut where this machine's free memory stops.
fn resolve_fork_sizes(asked: Option<&[u64]>, avail_mib: Option<u64>) -> Result<Vec<u64>, String> {
    match asked {
        Some(v) => {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.dedup();
            if let (Some(&max), Some(avail)) = (v.last(), avail_mib)
                && max > avail
            {
                return Err(format!(
                    "--fork-sizes: {max} MiB is more than the {avail} MiB of memory available"
                ));
            }
            Ok(v)
        }
        None => {
            let avail = avail_mib.unwrap_or(u64::MAX);
            Ok(default_fork_sizes()
                .into_iter()
                .filter(|&m| m.saturating_mul(2) <= avail)
                .collect())
        }
    }
}

/// Placements from --placement, else from ids written `ID@PLACE`, else the defaults.
fn resolve_placements(asked: Option<&[String]>, from_ids: &[String]) -> Result<Vec<Place>, String> {
    let words = match asked {
        Some(list) => list,
        None if !from_ids.is_empty() => from_ids,
        None => return Ok(Place::defaults()),
    };
    let mut v = Vec::new();
    for w in words {
        let p = Place::parse(w.trim())
            .ok_or_else(|| format!("--placement: '{w}' is not one of same, cross, free"))?;
        if !v.contains(&p) {
            v.push(p);
        }
    }
    Ok(v)
}

/// MemAvailable from /proc/meminfo, MiB.
pub(super) fn mem_available_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(argv: &[&str]) -> RunArgs {
        let full: Vec<&str> = ["oscost", "run"].iter().chain(argv).copied().collect();
        match Cli::try_parse_from(full).unwrap().command {
            Some(Command::Run(a)) => a,
            _ => unreachable!("a run command line"),
        }
    }

    #[test]
    fn ids_with_a_placement_name_the_benchmark_and_the_placement() {
        let (ids, places) = split_placements(&["switch/pipe-proc@cross".into(), "syscall/".into()]);
        assert_eq!(ids, vec!["switch/pipe-proc", "syscall/"]);
        assert_eq!(places, vec!["cross"]);
    }

    #[test]
    fn cpu_must_be_allowed_and_defaults_to_the_last() {
        assert_eq!(resolve_cpu(None, &[0, 1]), Ok(1));
        assert_eq!(resolve_cpu(Some(0), &[0, 1]), Ok(0));
        let e = resolve_cpu(Some(7), &[0, 1]).unwrap_err();
        assert!(e.contains("allowed: 0,1"), "{e}");
        assert!(resolve_cpu(None, &[]).is_err());
    }

    #[test]
    fn sampling_follows_quick_budget_samples_and_the_suite_size() {
        let v = VariantOptions::default();
        let getpid = bench::select(&["syscall/getpid".into()]).unwrap();
        let (w, reps) = resolve_sampling(&args(&[]), &getpid, &v);
        assert_eq!((w.min_time_ns, w.budget_ns), (reps.rep_ns, reps.rep_ns));
        assert_eq!((reps.min, reps.max, reps.precision), (5, 10, 0.01));
        let (_, quick) = resolve_sampling(&args(&["--quick"]), &getpid, &v);
        assert_eq!((quick.max, quick.precision), (5, 0.02));
        let (w, fixed) =
            resolve_sampling(&args(&["--budget", "0.1", "--samples", "50"]), &getpid, &v);
        assert_eq!((w.budget_ns, fixed.fixed_total), (100_000_000, Some(50)));
        // The suite's cases share the time: shorter repetitions than one benchmark gets.
        let suite = bench::select(&[]).unwrap();
        let (_, many) = resolve_sampling(&args(&[]), &suite, &v);
        assert!(many.rep_ns < reps.rep_ns && many.max < reps.max);
    }

    #[test]
    fn fork_sizes_are_sorted_and_bounded_by_memory() {
        assert_eq!(
            resolve_fork_sizes(Some(&[64, 0, 64]), Some(1000)),
            Ok(vec![0, 64])
        );
        assert!(resolve_fork_sizes(Some(&[2048]), Some(1000)).is_err());
        assert_eq!(resolve_fork_sizes(None, Some(600)), Ok(vec![0, 64, 256]));
        assert_eq!(resolve_fork_sizes(None, None), Ok(default_fork_sizes()));
    }

    #[test]
    fn placements_come_from_the_flag_then_the_ids_then_the_defaults() {
        let same = vec![Place::Same];
        assert_eq!(
            resolve_placements(Some(&["same".into()]), &["cross".into()]),
            Ok(same)
        );
        assert_eq!(
            resolve_placements(None, &["free".into()]),
            Ok(vec![Place::Free])
        );
        assert_eq!(resolve_placements(None, &[]), Ok(Place::defaults()));
        let dup = ["cross".into(), " cross".into()];
        assert_eq!(resolve_placements(Some(&dup), &[]), Ok(vec![Place::Cross]));
        assert!(resolve_placements(Some(&["both".into()]), &[]).is_err());
    }
}
