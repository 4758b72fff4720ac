//! The scheduler: runs a plan's benchmarks in workers through the coordinator, after
//! calibrating the clock and describing the machine, and assembles the `Run` (for `ab`, two
//! runs measured alternately). Nothing is exported or saved here, so an interrupted run leaves
//! nothing behind.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;

use crate::harness::case::Benchmark;
use crate::harness::runner::WorkerOptions;
use crate::harness::{clock, sampler};
use crate::model::{BenchResult, ClockInfo, Run, SCHEMA_VERSION, Tool};
use crate::worker::Coordinator;

/// Everything a run needs, validated (`commands::run::plan` builds it from the command line).
pub struct Plan {
    pub benchmarks: Vec<&'static Benchmark>,
    pub opts: WorkerOptions,
    pub timeout: Duration,
    pub wrapper: Option<Vec<String>>,
    pub wrapper_text: Option<String>,
    pub label: Option<String>,
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
