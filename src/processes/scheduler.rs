//! The scheduler: runs a plan's benchmarks in workers through the coordinator, after
//! calibrating the clock and describing the machine, and assembles the `Run` (for `ab`, two
//! runs measured alternately). Nothing is exported or saved here, so an interrupted run leaves
//! nothing behind.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;

use crate::analysis::host_quiet::{self, HostQuiet};
use crate::analysis::{self, Judging, RepRun};
use crate::base::model::{
    BenchResult, ClockInfo, RepetitionStop, Run, SCHEMA_VERSION, Schedule, Tool,
};
use crate::base::stop::Stop;
use crate::bench::entry::Benchmark;
use crate::bench::runner::{CaseResult, WorkerOptions};
use crate::measuring::clock;
use crate::measuring::sampler::StopWhen;
use crate::processes::worker::Coordinator;

mod repetition_plan;
mod rounds;
mod sides;
pub use repetition_plan::{MIN_REPETITIONS, RepetitionPlan, repetition_plan};
#[cfg(test)]
use repetition_plan::{REP_CEILING_NS, REP_FLOOR_NS};
#[cfg(test)]
use rounds::rounds_per_block;
use rounds::run_rounds;
pub use rounds::{BLOCK_MAX_ROUNDS, BLOCK_S, PRICE_BLOCK_S};
#[cfg(test)]
use sides::Plain;
use sides::{Conditioned, Sides};

use crate::processes::conditions::{self, CaseLevels, KernelSettings, Marking, Side, Stopped};

/// Everything a run needs, validated (`commands::plan::build` makes it from a `plan::Request`).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The benchmarks, in the order measured.
    pub benchmarks: Vec<&'static Benchmark>,
    /// What every worker gets; its sampler settings are those of one repetition.
    pub opts: WorkerOptions,
    /// Longest one worker (one repetition) may take.
    pub timeout: Duration,
    /// The run's label.
    pub label: Option<String>,
    /// How many repetitions and how long each.
    pub reps: RepetitionPlan,
    /// Start the wrapper itself on the measuring CPU (`predict`: a tracer then runs where the
    /// program it prices will run), not only the worker.
    pub pin_wrapper: bool,
    /// The user named the measuring CPU: `plan::settle_cpu` keeps it, busy or not.
    pub cpu_asked: bool,
    /// Say nothing of what is about to be measured (`watch` measures a window a minute).
    pub quiet: bool,
    /// A wait between rounds (`watch`: its bursts spread over seconds, so that a slow moment
    /// of the host, 100-500 ms here, falls on one of them rather than all); zero for a run.
    pub round_gap: std::time::Duration,
    /// How long a block of one side's rounds lasts, at least, where switching sides starts
    /// and stops a program (`BLOCK_S`; `predict` asks for shorter ones, `PRICE_BLOCK_S`).
    pub block_s: f64,
}

/// What every run of a plan shares: the calibrated clock, the machine, the start time and the
/// worker options completed with the clock's real cost.
struct RunSetup {
    /// When the run started; repetitions are timed from here.
    started: std::time::Instant,
    clock: ClockInfo,
    env: crate::base::model::Env,
    started_at: String,
    opts: WorkerOptions,
    exe: std::path::PathBuf,
    /// Benchmarks' temporary files live here; removed when the session ends, however it ends.
    _scratch: crate::processes::scratch::Scratch,
    /// The cgroup the plan's benchmarks start processes in, where one asks (removed on drop,
    /// and by its guard if oscost is killed).
    _cgroup: Option<crate::effects::cgroup::RunCgroup>,
    /// Every other process's CPU time when the run started: who took the CPUs meanwhile is
    /// said once for the run (`analysis::contention`).
    others_cpu: crate::machine::contention::ProcessCpu,
}

fn setup(plan: &Plan) -> anyhow::Result<RunSetup> {
    let clock = clock::calibrate();
    let mut opts = plan.opts.clone();
    for gone in crate::processes::scratch::reclaim() {
        crate::say!(
            "oscost: removed {}, left by a run that was killed",
            gone.display()
        );
    }
    let scratch = crate::processes::scratch::Scratch::create()
        .context("cannot create a temporary directory")?;
    opts.scratch_dir = Some(scratch.path().to_path_buf());
    // What killed runs left (cgroups, ftrace instances, audit rules) was reclaimed as this
    // command started (`effects::reclaim::recover`, in `cli::gated`).
    // Made before any worker starts, its guard first, only when a benchmark needs it.
    let cgroup = match plan.benchmarks.iter().any(|b| b.cgroup) {
        false => None,
        true => match crate::effects::cgroup::RunCgroup::create() {
            Ok(c) => {
                opts.cgroup_dir = Some(c.path().to_path_buf());
                Some(c)
            }
            Err(why) => {
                opts.cgroup_missing = Some(why);
                None
            }
        },
    };
    opts.sampler = opts.sampler.with_clock(clock.cost_ns);
    if cfg!(debug_assertions) {
        crate::say!(
            "oscost: this is a debug build; for representative numbers use `cargo run --release`"
        );
    }
    Ok(RunSetup {
        others_cpu: crate::machine::contention::ProcessCpu::now(std::process::id() as i32),
        started: std::time::Instant::now(),
        env: crate::machine::env::collect(Some(clock)),
        started_at: now_rfc3339(),
        clock,
        opts,
        exe: std::env::current_exe().context("cannot find the oscost executable")?,
        _scratch: scratch,
        _cgroup: cgroup,
    })
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl RunSetup {
    fn coordinator(&self, plan: &Plan, stop: &Stop) -> Coordinator {
        Coordinator {
            exe: self.exe.clone(),
            wrapper: vec![],
            timeout: plan.timeout,
            stop: stop.clone(),
            pin_cpu: plan.pin_wrapper.then_some(plan.opts.cpu),
        }
    }

    fn run_model(
        &self,
        plan: &Plan,
        label: Option<String>,
        (results, host): (Vec<BenchResult>, Option<HostQuiet>),
    ) -> Run {
        let programs = self.others_cpu.programs_since(
            &crate::machine::contention::ProcessCpu::now(std::process::id() as i32),
            self.started.elapsed().as_nanos() as f64,
        );
        let notes = analysis::machine_speed_note(&results)
            .map(|t| crate::base::model::Note::new(crate::base::model::NoteKind::MachineSpeed, t))
            .into_iter()
            .chain(host_quiet::note(&results, host.as_ref()))
            .chain(analysis::contention::contention_note(&results, &programs))
            .collect();
        Run {
            schema_version: SCHEMA_VERSION,
            tool: Tool::this(),
            started_at: self.started_at.clone(),
            label: label.or_else(|| plan.label.clone()),
            wrapper: None,
            env: self.env.clone(),
            clock: self.clock,
            results,
            schedule: None,
            notes,
            settings: vec![],
            during: None,
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

/// One side's record so far: every benchmark's repetitions.
struct MeasuredSide {
    tracks: Vec<Track>,
}

/// One benchmark's repetitions so far, per case id in first-seen order, and why it stopped.
struct Track {
    bench: &'static Benchmark,
    cases: Vec<(String, Vec<RepRun>)>,
    stopped: Option<RepetitionStop>,
}

impl Track {
    fn new(bench: &'static Benchmark) -> Track {
        Track {
            bench,
            cases: vec![],
            stopped: None,
        }
    }

    fn add(&mut self, rep: RepRun) {
        match self.cases.iter_mut().find(|(id, _)| *id == rep.case.id) {
            Some((_, v)) => v.push(rep),
            None => self.cases.push((rep.case.id.clone(), vec![rep])),
        }
    }

    /// Whether every measured case's CI is within `precision` (cases that never measured,
    /// skipped or failed, do not hold the benchmark back), of the repetitions the result will
    /// be of: with `host`, the quiet ones where the slow are set aside.
    fn precise_enough(&self, precision: f64, host: Option<&HostQuiet>) -> bool {
        self.cases.iter().all(|(_, reps)| {
            let kept = match host {
                Some(h) => h.kept(reps),
                None => reps.iter().collect(),
            };
            let samples: Vec<&[f64]> = kept
                .iter()
                .filter_map(|r| r.case.measurement.as_ref())
                .map(|m| m.samples_ns.as_slice())
                .collect();
            let Some(m) = reps.iter().find_map(|r| r.case.measurement.as_ref()) else {
                return true;
            };
            let all: Vec<f64> = samples.concat();
            let point = crate::base::stats::median(&all);
            let ci = analysis::repetition_ci(&samples, m.batch.size, point, STOP_JUDGING);
            analysis::halfwidth(ci, point) <= precision
        })
    }

    /// Whether some case's outlying repetitions could still be half of its repetitions: more
    /// of them can tell whether they are a minority (`RepetitionPlan::undecided_max`).
    fn outliers_undecided(&self) -> bool {
        self.medians()
            .iter()
            .any(|m| crate::base::stats::bootstrap::outliers_could_be_half(m))
    }

    /// Each measured case's repetition medians, in the order measured.
    fn medians(&self) -> Vec<Vec<f64>> {
        self.cases
            .iter()
            .map(|(_, reps)| {
                reps.iter()
                    .filter_map(|r| r.case.measurement.as_ref())
                    .map(|m| crate::base::stats::median(&m.samples_ns))
                    .collect()
            })
            .collect()
    }

    /// Each measured case's repetition medians with the block each was measured in, in the
    /// order measured.
    fn block_medians(&self) -> Vec<Vec<(Option<usize>, f64)>> {
        self.cases
            .iter()
            .map(|(_, reps)| {
                reps.iter()
                    .filter_map(|r| {
                        let m = r.case.measurement.as_ref()?;
                        Some((r.block, crate::base::stats::median(&m.samples_ns)))
                    })
                    .collect()
            })
            .collect()
    }

    /// The blocks it has been measured in (0 where sides alternate repetition by repetition).
    fn blocks(&self) -> usize {
        let mut seen: Vec<usize> = self
            .cases
            .iter()
            .flat_map(|(_, reps)| reps.iter().filter_map(|r| r.block))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    }

    /// Nothing was measured in the first repetition (skipped or failed throughout): repeating
    /// would only say so again.
    fn nothing_to_repeat(&self) -> bool {
        self.cases
            .iter()
            .all(|(_, r)| r.iter().all(|x| x.case.measurement.is_none()))
    }
}

/// What a side's repetitions so far say of the host's slow moments (`host_quiet::judge`).
fn host_of(tracks: &[Track]) -> Option<HostQuiet> {
    let cases: Vec<&[RepRun]> = tracks
        .iter()
        .flat_map(|t| t.cases.iter().map(|(_, reps)| reps.as_slice()))
        .collect();
    host_quiet::judge(&host_quiet::levels(&cases))
}

/// Bootstrap effort of the stop rule (asked after every round) and of the final interval.
const STOP_JUDGING: Judging = Judging {
    resamples: 300,
    max_samples: 2000,
};

/// Sampling time of a repetition's cases: the last sample's end.
fn sampling_ns(cases: &[CaseResult]) -> u64 {
    cases
        .iter()
        .filter_map(|c| c.measurement.as_ref())
        .map(|m| m.ends_ns.last().copied().unwrap_or(0))
        .sum()
}

/// The worker options of repetition `k` (0-based) from the session's: fixed counts are
/// shared out over the minimum repetitions.
fn rep_options(opts: &WorkerOptions, plan: &Plan, k: usize) -> WorkerOptions {
    let mut o = opts.clone();
    // Events are counted in the first repetition only: a counting pass re-runs the case
    // (see `measuring::counters`), and what one operation costs in events does not drift
    // between processes as its time does.
    if k > 0 {
        o.events.clear();
    }
    // Likewise what confines the worker: every worker of a side is started alike.
    o.read_confinement = k == 0;
    if let Some(total) = plan.reps.fixed_total {
        let r = plan.reps.min;
        o.sampler.stop = StopWhen::Count {
            n: total / r + usize::from(k < total % r),
        };
    }
    o
}

/// `count` sides, each with a fresh track for every benchmark of the plan.
fn measured_sides(plan: &Plan, count: usize) -> Vec<MeasuredSide> {
    (0..count)
        .map(|_| MeasuredSide {
            tracks: plan.benchmarks.iter().map(|b| Track::new(b)).collect(),
        })
        .collect()
}

impl RunSetup {
    /// Every case's repetitions as one result each, with the derived values of its benchmark.
    /// With `judge_host` (a run in a guest, not a side of a comparison), the repetitions that
    /// ran while the host was slow are set aside where the run shows they were dearer
    /// (`analysis::host_quiet`); what was judged comes back for the run's note.
    fn results(
        &self,
        plan: &Plan,
        tracks: Vec<Track>,
        judge_host: bool,
    ) -> (Vec<BenchResult>, Option<HostQuiet>) {
        let host = judge_host.then(|| host_of(&tracks)).flatten();
        let mut out = Vec::new();
        for t in tracks {
            let stopped = t.stopped.unwrap_or(RepetitionStop::Budget);
            let mut rs: Vec<BenchResult> = t
                .cases
                .into_iter()
                .map(|(_, reps)| {
                    let (reps, slow) = match &host {
                        Some(h) => host_quiet::split(reps, h),
                        None => (reps, None),
                    };
                    let mut r = analysis::merge_repetitions(
                        reps,
                        &self.opts.allowed,
                        analysis::FINAL_JUDGING,
                        plan.reps.precision,
                        stopped,
                    );
                    if let Some(u) = r.uncertainty.as_mut() {
                        u.host_slow = slow;
                    }
                    r
                })
                .collect();
            analysis::derive(&t.bench.cases, &mut rs);
            out.extend(rs);
        }
        // The hook ladder's rungs against the unhooked call of the same rounds.
        analysis::hooks::additions(&mut out);
        (out, host)
    }

    fn schedule(&self, plan: &Plan, order: Vec<Vec<String>>, results: &[BenchResult]) -> Schedule {
        let startups: Vec<f64> = results
            .iter()
            .flat_map(|r| r.repetitions.iter().map(|x| x.startup_ms))
            .collect();
        Schedule {
            order: "round robin".into(),
            rounds: order,
            repetition_ms: plan.reps.rep_ns as f64 / 1e6,
            min_repetitions: plan.reps.min,
            worker_startup_ms: crate::base::stats::median(&startups),
        }
    }
}

/// Which benchmarks each round measured, in order (the run's `schedule.rounds`).
type RoundOrder = Vec<Vec<String>>;

/// The rounds of every side (one for a run, A and B for `ab`), with a progress bar: the order
/// of the rounds and each side's tracks.
fn measure_sides(
    plan: &Plan,
    s: &RunSetup,
    measuring: &mut dyn Sides,
    stop: &Stop,
) -> Result<(RoundOrder, Vec<Vec<Track>>), Stopped> {
    let bar = progress(plan.benchmarks.len() * plan.reps.min * measuring.count());
    let mut sides = measured_sides(plan, measuring.count());
    let each = rounds::RoundsSetup {
        plan,
        opts: &s.opts,
        started: s.started,
        bar: &bar,
        judge_host: judges_host(measuring.count(), &s.env),
    };
    let order = run_rounds(&each, measuring, &mut sides, stop);
    bar.finish_and_clear();
    let order = order?;
    measuring.finish()?;
    Ok((order, sides.into_iter().map(|x| x.tracks).collect()))
}

/// Run the plan on the plain system, one side under no condition: `measure` for commands
/// that have no sides (`scale`, `ctx`, `watch`).
pub fn execute(plan: &Plan, stop: &Stop) -> anyhow::Result<Run> {
    let mut runs = measure(plan, &[Side::default()], stop, None)?;
    Ok(runs.remove(0))
}

/// What confined the side's workers, as the first of them to say read it of itself.
fn confinement_of(tracks: &[Track]) -> Option<crate::base::model::Confinement> {
    tracks
        .iter()
        .flat_map(|t| &t.cases)
        .flat_map(|(_, reps)| reps)
        .find_map(|r| r.case.confinement.clone())
}

/// The letters that name the sides of a comparison.
const SIDE_NAMES: [&str; 2] = ["A", "B"];

/// Measure the plan on `sides`: one for a run (a run is a comparison with one side), A and B
/// for `ab`, plain and wrapped for `predict`. Each round takes one repetition of every
/// benchmark still sampling on every side in turn (A B A B ...), so that drift of the machine
/// hits every side alike; the stop rule judges a run's CI, or with `plan.reps.decide` the
/// comparison's. Before each repetition of a side its conditions are entered
/// (`processes::conditions`: its wrapper, the program during it, its kernel settings from
/// `settings`, its CPU), and each side's run is marked with them. One `Run` per side, in
/// order. `Err(Interrupted)` (inside anyhow) when a signal stopped it.
pub fn measure(
    plan: &Plan,
    sides: &[Side],
    stop: &Stop,
    settings: Option<KernelSettings<'_>>,
) -> anyhow::Result<Vec<Run>> {
    if sides.is_empty() || sides.len() > SIDE_NAMES.len() {
        anyhow::bail!(
            "internal: a measurement has one or two sides, not {}",
            sides.len()
        );
    }
    let s = setup(plan)?;
    let coordinator = s.coordinator(plan, stop);
    // Dropped at the end of this function: a program still running (an error, a signal) is
    // stopped by its keeper before the command goes on.
    let mut conditions = conditions::of(sides, settings, stop, s.started);
    let names: Vec<String> = (0..sides.len())
        .map(|i| conditions::side_words(&conditions, i).unwrap_or_else(|| "(nothing)".into()))
        .collect();
    say_measuring(plan, &s, &names, sides);
    let mut measuring = Conditioned {
        repeater: &coordinator,
        count: sides.len(),
        conditions: &mut conditions,
    };
    let (order, tracks) =
        measure_sides(plan, &s, &mut measuring, stop).map_err(Stopped::into_error)?;
    stop.check()?;
    let compared = sides.len() > 1;
    let runs = tracks
        .into_iter()
        .zip(sides.iter().zip(SIDE_NAMES))
        .enumerate()
        .map(|(i, (tracks, (side, letter)))| {
            // A side of a comparison says which of the pair a stored run is; the user's
            // --label leads. A run's label is the plan's.
            let label = compared.then(|| match &plan.label {
                Some(l) => format!("{l} (ab {letter}: {})", names[i]),
                None => format!("ab {letter}: {}", names[i]),
            });
            let levels = case_levels(&tracks);
            let confinement = confinement_of(&tracks);
            let results = s.results(plan, tracks, judges_host(sides.len(), &s.env));
            let mut run = s.run_model(plan, label, results);
            // The coordinator's own stands for its workers only where no wrapper came between.
            run.env.confinement =
                confinement.or(run.env.confinement.filter(|_| side.wrapper.is_none()));
            run.schedule = Some(s.schedule(plan, order.clone(), &run.results));
            let marking = Marking {
                compared,
                levels: &levels,
            };
            for c in &conditions {
                c.mark(i, &mut run, &marking);
            }
            run
        })
        .collect();
    Ok(runs)
}

/// Whether a measurement of `sides` sets aside the repetitions measured while the host was
/// slow (`analysis::host_quiet`): a run, not a side of a comparison, which is judged with its
/// pair; and in a guest, whose host is what the exit witness times.
fn judges_host(sides: usize, env: &crate::base::model::Env) -> bool {
    sides == 1 && env.hypervisor_flag
}

/// Each case's repetitions as (started, ms since the run's start; median, ns).
fn case_levels(tracks: &[Track]) -> CaseLevels {
    tracks
        .iter()
        .flat_map(|t| &t.cases)
        .map(|(id, reps)| {
            let levels = reps
                .iter()
                .filter_map(|r| {
                    let m = r.case.measurement.as_ref()?;
                    Some((r.started_ms, crate::base::stats::median(&m.samples_ns)))
                })
                .collect();
            (id.clone(), levels)
        })
        .collect()
}

/// What is about to be measured, on stderr: a run's plan (and its wrapper), or a
/// comparison's sides by `names`.
fn say_measuring(plan: &Plan, s: &RunSetup, names: &[String], sides: &[Side]) {
    if plan.quiet {
        return;
    }
    if let [a, b] = names {
        // A side measured on a CPU of its own says so in its name.
        let pinned = match sides.iter().all(|x| x.cpu.is_none()) {
            true => format!("pinned to CPU {}", s.opts.cpu),
            false => "each pinned to its side's CPU".into(),
        };
        crate::say!(
            "oscost: A = {a}, B = {b}: {} benchmark(s) x {}-{} repetitions each, {pinned}",
            plan.benchmarks.len(),
            plan.reps.min,
            plan.reps.max,
        );
        return;
    }
    let wrapper = sides[0].wrapper.as_ref();
    crate::say!(
        "oscost: {} benchmark(s), {}-{} repetitions of {:.0} ms each, pinned to CPU {}, clock {:.1} ns/read{}",
        plan.benchmarks.len(),
        plan.reps.min,
        plan.reps.max,
        plan.reps.rep_ns as f64 / 1e6,
        s.opts.cpu,
        s.clock.cost_ns,
        wrapper
            .map(|w| format!(", under `{}`", w.text))
            .unwrap_or_default()
    );
}

#[cfg(test)]
mod tests;
