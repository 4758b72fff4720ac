//! `oscost run`: resolve the command line into a plan (benchmarks, sampler settings, CPU,
//! outputs) and refuse a bad one before measuring anything; calibrate the clock; run each
//! benchmark in a worker through the coordinator; assemble the `Run`; print and export it.
//! Exports happen only after the last benchmark, each atomically, so an interrupted run writes
//! nothing.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;

use crate::bench;
use crate::cli::{OutputArgs, RunArgs, split_command, usage};
use crate::harness::case::{Benchmark, RingOptions, VariantOptions, default_fork_sizes};
use crate::harness::placement::Place;
use crate::harness::runner::{SamplerConfigWire, WorkerOptions, default_mq_name};
use crate::harness::{clock, placement, sampler};
use crate::model::{BenchResult, ClockInfo, Run, SCHEMA_VERSION, Tool};
use crate::report::{self, Exporter};
use crate::worker::{Coordinator, Interrupted};

/// Everything a run needs, validated.
pub struct Plan {
    pub benchmarks: Vec<&'static Benchmark>,
    pub opts: WorkerOptions,
    pub timeout: Duration,
    pub wrapper: Option<Vec<String>>,
    pub wrapper_text: Option<String>,
    pub label: Option<String>,
    pub outputs: Vec<(PathBuf, Box<dyn Exporter>)>,
}

/// Validate arguments into a plan. Every error here is a usage error (exit 2).
/// The clock-dependent sampler settings (clock cost, batch length) are filled in by the
/// session once the clock is calibrated.
pub fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
    // `switch/pipe-proc@cross` is a result id: the benchmark, at that placement.
    let mut id_places: Vec<String> = Vec::new();
    let ids: Vec<String> = args
        .ids
        .iter()
        .map(|id| match id.split_once('@') {
            Some((base, place)) => {
                id_places.push(place.to_string());
                base.to_string()
            }
            None => id.clone(),
        })
        .collect();
    let benchmarks = bench::select(&ids).map_err(usage)?;
    let allowed = placement::allowed_cpus();
    if allowed.is_empty() {
        return Err(usage(
            "this process may run on no CPU (sched_getaffinity failed)",
        ));
    }
    let cpu = match args.cpu {
        Some(c) if allowed.contains(&c) => c,
        Some(c) => {
            return Err(usage(format!(
                "--cpu {c}: not an allowed CPU; allowed: {}",
                allowed
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )));
        }
        None => placement::default_cpu(&allowed).expect("allowed is not empty"),
    };
    report::check_outputs(&args.outputs.paths()).map_err(usage)?;
    let outputs = run_exporters(&args.outputs);
    let wrapper = args
        .under
        .as_deref()
        .map(split_command)
        .transpose()
        .map_err(|e| usage(e.0))?;
    let quick = args.quick;
    let defaults = sampler::SamplerConfig::for_clock(f64::NAN);
    let min_time_ns = if quick {
        30_000_000
    } else {
        min_sampling_ns(benchmarks.len(), defaults.min_time_ns)
    };
    // Without --budget a benchmark may sample up to twice its minimum (2 s at most), which
    // bounds the default suite's time however noisy the machine is.
    let budget_s = args.budget.unwrap_or(if quick {
        0.5
    } else {
        (2.0 * min_time_ns as f64 / 1e9).min(2.0)
    });
    let precision = if quick && args.precision == 1.0 {
        0.02
    } else {
        args.precision / 100.0
    };
    let budget_ns = (budget_s * 1e9) as u64;
    let sampler = SamplerConfigWire {
        precision,
        budget_ns,
        min_time_ns: min_time_ns.min(budget_ns),
        warmup_ns: if quick {
            10_000_000
        } else {
            defaults.warmup_ns
        },
        fixed_samples: args.samples.map(|n| n as usize),
        // Not known until the session calibrates the clock.
        target_batch_ns: defaults.target_batch_ns,
        clock_cost_ns: f64::NAN,
    };
    let fork_sizes_mib = match &args.fork_sizes {
        Some(v) => {
            let mut v = v.clone();
            v.sort_unstable();
            v.dedup();
            if let (Some(&max), Some(avail)) = (v.last(), mem_available_mib())
                && max > avail
            {
                return Err(usage(format!(
                    "--fork-sizes: {max} MiB is more than the {avail} MiB of memory available"
                )));
            }
            v
        }
        None => {
            // The default curve stops where this machine's free memory does.
            let avail = mem_available_mib().unwrap_or(u64::MAX);
            default_fork_sizes()
                .into_iter()
                .filter(|&m| m * 2 <= avail)
                .collect()
        }
    };
    let placements = match args
        .placement
        .as_ref()
        .or((!id_places.is_empty()).then_some(&id_places))
    {
        None => Place::defaults(),
        Some(list) => {
            let mut v = Vec::new();
            for w in list {
                let p = Place::parse(w.trim()).ok_or_else(|| {
                    usage(format!(
                        "--placement: '{w}' is not one of same, cross, free"
                    ))
                })?;
                if !v.contains(&p) {
                    v.push(p);
                }
            }
            v
        }
    };
    let timeout = Duration::from_secs_f64(args.timeout.unwrap_or(30.0 + 4.0 * budget_s));
    Ok(Plan {
        benchmarks,
        opts: WorkerOptions {
            sampler,
            cpu,
            allowed,
            variants: VariantOptions {
                placements,
                ring: RingOptions::default(),
                fork_sizes_mib,
            },
            mq_name: default_mq_name(),
            scratch_dir: None,
        },
        timeout,
        wrapper_text: args.under.clone(),
        wrapper,
        label: args.label.clone(),
        outputs,
    })
}

/// The files a run is written to, each with its format.
pub fn run_exporters(o: &OutputArgs) -> Vec<(PathBuf, Box<dyn Exporter>)> {
    let mut v: Vec<(PathBuf, Box<dyn Exporter>)> = Vec::new();
    if let Some(p) = &o.json {
        v.push((p.clone(), Box::new(report::json::Json)));
    }
    if let Some(p) = &o.csv {
        v.push((p.clone(), Box::new(report::csv::Csv)));
    }
    if let Some(p) = &o.markdown {
        v.push((p.clone(), Box::new(report::markdown::Markdown)));
    }
    v
}

/// MemAvailable from /proc/meminfo, MiB.
fn mem_available_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Sampling time every benchmark gets at least. Slow phases of a shared VM last 50-500 ms and
/// take a quarter of the time: a window must be long to contain a fast phase at all. A few
/// benchmarks share `SUITE_SAMPLING_S` (so `oscost run syscall/getpid` samples for 2 s and
/// agrees with itself run after run); a suite gives each at least `floor_ns`.
pub fn min_sampling_ns(benchmarks: usize, floor_ns: u64) -> u64 {
    const SUITE_SAMPLING_S: f64 = 4.0;
    const CEILING_NS: u64 = 2_000_000_000;
    let share = (SUITE_SAMPLING_S * 1e9 / benchmarks.max(1) as f64) as u64;
    share.clamp(floor_ns, CEILING_NS.max(floor_ns))
}

/// Whether to color: a terminal and no NO_COLOR (https://no-color.org: any non-empty value).
pub fn use_color(stream_is_tty: bool) -> bool {
    stream_is_tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// What every run of a plan shares: the calibrated clock, the machine, the start time and the
/// worker options completed with the clock's real cost.
struct Session {
    clock: ClockInfo,
    env: crate::model::Env,
    started_at: String,
    opts: WorkerOptions,
    exe: std::path::PathBuf,
    /// Benchmarks' temporary files live here; removed when the session ends, however it ends.
    _scratch: tempfile::TempDir,
}

fn session(plan: &Plan) -> anyhow::Result<Session> {
    let clock = clock::calibrate();
    let mut opts = plan.opts.clone();
    let scratch = tempfile::Builder::new()
        .prefix("oscost-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    opts.scratch_dir = Some(scratch.path().to_path_buf());
    opts.sampler.clock_cost_ns = clock.cost_ns;
    opts.sampler.target_batch_ns = sampler::target_batch_ns(clock.cost_ns);
    if cfg!(debug_assertions) {
        eprintln!(
            "oscost: this is a debug build; for representative numbers use `cargo run --release`"
        );
    }
    Ok(Session {
        env: crate::env::collect(Some(clock)),
        started_at: now_rfc3339(),
        clock,
        opts,
        exe: std::env::current_exe().context("cannot find the oscost executable")?,
        _scratch: scratch,
    })
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Session {
    fn coordinator(
        &self,
        plan: &Plan,
        wrapper: Vec<String>,
        interrupted: &Arc<AtomicUsize>,
    ) -> Coordinator {
        Coordinator {
            exe: self.exe.clone(),
            wrapper,
            timeout: plan.timeout,
            interrupted: Arc::clone(interrupted),
        }
    }

    fn run_model(
        &self,
        plan: &Plan,
        wrapper: Option<String>,
        label: Option<String>,
        results: Vec<BenchResult>,
    ) -> Run {
        Run {
            schema_version: SCHEMA_VERSION,
            tool: Tool::this(),
            started_at: self.started_at.clone(),
            label: label.or_else(|| plan.label.clone()),
            wrapper,
            env: self.env.clone(),
            clock: self.clock,
            results,
        }
    }
}

/// A progress bar on stderr, drawn only on a terminal.
fn progress(len: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(len as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Run the plan. `Err(Interrupted)` (inside anyhow) when a signal stopped it.
pub fn execute(plan: &Plan, interrupted: Arc<AtomicUsize>) -> anyhow::Result<Run> {
    let s = session(plan)?;
    let coord = s.coordinator(plan, plan.wrapper.clone().unwrap_or_default(), &interrupted);
    eprintln!(
        "oscost: {} benchmark(s), pinned to CPU {}, clock {:.1} ns/read{}",
        plan.benchmarks.len(),
        s.opts.cpu,
        s.clock.cost_ns,
        plan.wrapper_text
            .as_deref()
            .map(|w| format!(", under `{w}`"))
            .unwrap_or_default()
    );
    let bar = progress(plan.benchmarks.len());
    let mut results = Vec::new();
    for b in &plan.benchmarks {
        bar.set_message(b.id);
        let rs = coord
            .run(b, &s.opts)
            .inspect_err(|_| bar.finish_and_clear())?;
        results.extend(rs);
        bar.inc(1);
    }
    bar.finish_and_clear();
    coord.check_interrupted()?;
    Ok(s.run_model(plan, plan.wrapper_text.clone(), None, results))
}

/// One side of an A/B comparison: a wrapper (none for the plain system) and its text.
pub struct AbSide {
    pub wrapper: Vec<String>,
    pub text: Option<String>,
}

/// Run A and B alternately, benchmark by benchmark (A B A B ... for `rounds` rounds), so that
/// drift of the machine hits both alike; each side's rounds are merged into one run.
pub fn execute_ab(
    plan: &Plan,
    a: &AbSide,
    b: &AbSide,
    rounds: usize,
    interrupted: Arc<AtomicUsize>,
) -> anyhow::Result<(Run, Run)> {
    let mut s = session(plan)?;
    // Each round gets its share of the sampling time, so ab costs what two runs cost.
    let cfg = &mut s.opts.sampler;
    cfg.min_time_ns = (cfg.min_time_ns / rounds as u64).max(100_000_000);
    cfg.budget_ns = (cfg.budget_ns / rounds as u64).max(cfg.min_time_ns);
    let ca = s.coordinator(plan, a.wrapper.clone(), &interrupted);
    let cb = s.coordinator(plan, b.wrapper.clone(), &interrupted);
    let name = |side: &AbSide| side.text.clone().unwrap_or_else(|| "(nothing)".into());
    eprintln!(
        "oscost: A = {}, B = {}: {} benchmark(s) x {rounds} round(s), pinned to CPU {}",
        name(a),
        name(b),
        plan.benchmarks.len(),
        s.opts.cpu
    );
    let bar = progress(plan.benchmarks.len() * rounds * 2);
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for bench in &plan.benchmarks {
        // Results grouped by id in first-seen order (a benchmark may give several).
        let mut per_id: Vec<(String, Vec<BenchResult>, Vec<BenchResult>)> = Vec::new();
        for round in 0..rounds {
            for (side, coord) in [(0, &ca), (1, &cb)] {
                bar.set_message(format!(
                    "{} {} round {}",
                    ["A", "B"][side],
                    bench.id,
                    round + 1
                ));
                let rs = coord
                    .run(bench, &s.opts)
                    .inspect_err(|_| bar.finish_and_clear())?;
                for r in rs {
                    let i = match per_id.iter().position(|(id, _, _)| *id == r.id) {
                        Some(i) => i,
                        None => {
                            per_id.push((r.id.clone(), Vec::new(), Vec::new()));
                            per_id.len() - 1
                        }
                    };
                    if side == 0 {
                        per_id[i].1.push(r)
                    } else {
                        per_id[i].2.push(r)
                    }
                }
                bar.inc(1);
            }
        }
        for (_, xa, xb) in per_id {
            ra.extend(crate::compare::merge_rounds(&xa));
            rb.extend(crate::compare::merge_rounds(&xb));
        }
    }
    bar.finish_and_clear();
    ca.check_interrupted()?;
    let label = |side: &str, x: &AbSide| Some(format!("ab {side}: {}", name(x)));
    Ok((
        s.run_model(plan, a.text.clone(), label("A", a), ra),
        s.run_model(plan, b.text.clone(), label("B", b), rb),
    ))
}

/// Print the table and write the exports.
pub fn output(plan: &Plan, run: &Run) -> anyhow::Result<()> {
    for (path, exporter) in &plan.outputs {
        report::write_atomic(path, &exporter.serialize(run)?)?;
    }
    let text = report::table::render(run, use_color(std::io::stdout().is_terminal()));
    print_stdout(&text)
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to stdout"),
    }
}

/// Exit status for a run stopped by a signal: 128 + the signal number, as a shell reports it.
pub fn interrupted_status(e: &anyhow::Error) -> Option<i32> {
    e.downcast_ref::<Interrupted>().map(|i| 128 + i.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_benchmarks_sample_longer_and_a_suite_gets_the_floor() {
        let floor = 500_000_000; // the floor is a parameter; 400 ms is the default
        assert_eq!(min_sampling_ns(1, floor), 2_000_000_000);
        assert_eq!(min_sampling_ns(4, floor), 1_000_000_000);
        assert_eq!(min_sampling_ns(28, floor), floor);
        assert_eq!(min_sampling_ns(8, floor), floor);
        assert_eq!(min_sampling_ns(0, floor), 2_000_000_000);
    }
}
