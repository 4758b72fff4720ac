//! The scheduler: runs a plan's benchmarks in workers through the coordinator, after
//! calibrating the clock and describing the machine, and assembles the `Run` (for `ab`, two
//! runs measured alternately). Nothing is exported or saved here, so an interrupted run leaves
//! nothing behind.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;

use crate::analysis::{self, Judging, RepRun};
use crate::base::model::{BenchResult, ClockInfo, Run, SCHEMA_VERSION, Schedule, Tool};
use crate::effects::signals::Interrupted;
use crate::harness::case::Benchmark;
use crate::harness::clock;
use crate::harness::runner::{CaseResult, WorkerOptions};
use crate::harness::sampler::StopWhen;
use crate::processes::worker::Coordinator;

/// Everything a run needs, validated (`commands::plan::build` makes it from a `plan::Request`).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The benchmarks, in the order measured.
    pub benchmarks: Vec<&'static Benchmark>,
    /// What every worker gets; its sampler settings are those of one repetition.
    pub opts: WorkerOptions,
    /// Longest one worker (one repetition) may take.
    pub timeout: Duration,
    /// The wrapper's command line, split (`--under`).
    pub wrapper: Option<Vec<String>>,
    /// The wrapper as the user gave it.
    pub wrapper_text: Option<String>,
    /// The run's label.
    pub label: Option<String>,
    /// How many repetitions and how long each.
    pub reps: RepetitionPlan,
    /// Start the wrapper itself on the measuring CPU (`predict`: a tracer then runs where the
    /// program it prices will run), not only the worker.
    pub pin_wrapper: bool,
    /// The user named the measuring CPU: `plan::settle_cpu` keeps it, busy or not.
    pub cpu_asked: bool,
}

/// How many repetitions each benchmark gets, how long each samples, and when to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepetitionPlan {
    /// Before the stop rule is asked (and the fewest that give a CI).
    pub min: usize,
    /// The budget: a benchmark stops here whatever its CI, unless `undecided_max` says more.
    pub max: usize,
    /// A benchmark still imprecise at `max` whose outlying repetitions could be half of them
    /// (`stats::bootstrap::outliers_could_be_half`) goes on to this many, so that more
    /// repetitions can tell whether the slow ones are a minority (0: never past `max`).
    pub undecided_max: usize,
    /// Sampling time of one repetition of one case.
    pub rep_ns: u64,
    /// Stop once the CI's half-width is within this fraction of the median.
    pub precision: f64,
    /// --samples N: exactly N samples per result, shared out over `min` repetitions.
    pub fixed_total: Option<usize>,
    /// `ab`: stop a benchmark once its comparison has decided against a noise band of this
    /// fraction (`compare::paired`, looked at on `stats::sequential`'s schedule), not once
    /// each side is precise.
    pub decide: Option<f64>,
}

/// Sampling time the repetitions of all selected cases share at their minimum count: the
/// default suite (~100 cases) gets ~40 ms repetitions and finishes in about half a minute; a
/// single benchmark gets 60 ms repetitions and a trustworthy number in well under a second.
const SHARED_SAMPLING_S: f64 = 20.0;
/// A repetition of this long or longer still sits inside one phase of the machine often enough
/// for the repetitions to sample the phases; shorter ones are mostly worker start-up.
const REP_FLOOR_NS: u64 = 20_000_000;
const REP_CEILING_NS: u64 = 60_000_000;
/// The fewest repetitions a benchmark gets (the fewest that give a CI).
pub const MIN_REPETITIONS: usize = crate::base::stats::bootstrap::MIN_REPETITIONS;
/// A selection of more cases than this is a suite: shorter repetitions, a maximum of 8 and no
/// `UNDECIDED_MAX`, so the default suite's time stays bounded however noisy the machine.
const SUITE_CASES: usize = 20;
/// How far a benchmark of a small selection (not a suite, no `--budget`, not `--quick`) goes
/// past its maximum while its outlying repetitions could be half of them. On a host whose slow
/// moments (every kernel-heavy benchmark 20-45% slower for 100-500 ms) fall on 20-40% of the
/// repetitions, ten cannot tell whether the slow ones are a minority: the median of all samples
/// could sit at either level, and the CI rightly spans both (getpid 13-42% wide while 7 of 8
/// runs agreed within 0.3%). Twenty can tell. Only such results go on: every benchmark going
/// to twenty narrowed the CIs of fork and pipe below what the next run sees (check-ci batches
/// of 2026-11-27, docs/design-notes.md, "Slow moments inside a run").
const UNDECIDED_MAX: usize = 4 * MIN_REPETITIONS;

/// The repetition plan for `cases` cases in all. `budget_s` (per benchmark) caps the repetitions;
/// without it a benchmark may take up to twice the minimum (fewer in a big suite, so the
/// default suite's time stays bounded however noisy the machine), and up to `UNDECIDED_MAX`
/// in a small selection while its outlying repetitions could be half. --quick stops at the
/// minimum.
pub fn repetition_plan(
    cases: usize,
    precision: f64,
    budget_s: Option<f64>,
    fixed_total: Option<usize>,
    quick: bool,
) -> RepetitionPlan {
    let share = SHARED_SAMPLING_S * 1e9 / (cases.max(1) * MIN_REPETITIONS) as f64;
    let rep_ns = if quick {
        REP_FLOOR_NS
    } else {
        (share as u64).clamp(REP_FLOOR_NS, REP_CEILING_NS)
    };
    let default_max = if quick {
        MIN_REPETITIONS
    } else if cases > SUITE_CASES {
        8
    } else {
        2 * MIN_REPETITIONS
    };
    let max = match budget_s {
        Some(b) => ((b * 1e9 / rep_ns as f64) as usize).max(MIN_REPETITIONS),
        None => default_max,
    };
    RepetitionPlan {
        min: MIN_REPETITIONS,
        max,
        undecided_max: if quick
            || budget_s.is_some()
            || fixed_total.is_some()
            || cases > SUITE_CASES
        {
            0
        } else {
            UNDECIDED_MAX
        },
        rep_ns,
        precision,
        fixed_total,
        decide: None,
    }
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
}

fn session(plan: &Plan) -> anyhow::Result<RunSetup> {
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
    opts.sampler = opts.sampler.with_clock(clock.cost_ns);
    if cfg!(debug_assertions) {
        crate::say!(
            "oscost: this is a debug build; for representative numbers use `cargo run --release`"
        );
    }
    Ok(RunSetup {
        started: std::time::Instant::now(),
        env: crate::harness::env::collect(Some(clock)),
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

impl RunSetup {
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
            pin_cpu: plan.pin_wrapper.then_some(plan.opts.cpu),
        }
    }

    fn run_model(
        &self,
        plan: &Plan,
        wrapper: Option<String>,
        label: Option<String>,
        results: Vec<BenchResult>,
    ) -> Run {
        let notes = analysis::machine_speed_note(&results)
            .map(|t| crate::base::model::Note::new(crate::base::model::NoteKind::MachineSpeed, t))
            .into_iter()
            .collect();
        Run {
            schema_version: SCHEMA_VERSION,
            tool: Tool::this(),
            started_at: self.started_at.clone(),
            label: label.or_else(|| plan.label.clone()),
            wrapper,
            env: self.env.clone(),
            clock: self.clock,
            results,
            schedule: None,
            notes,
            settings: vec![],
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

/// What measures one repetition of one benchmark: in a run, a worker process started by the
/// coordinator (under a side's wrapper); in tests, a fake, so that rounds, interleaving, the
/// stop rule and interrupts are checked without starting a process.
pub trait Repeater {
    /// Measure one repetition of `b` in a fresh worker.
    fn repeat(&self, b: &Benchmark, opts: &WorkerOptions) -> Result<Vec<CaseResult>, Stopped>;
}

/// Why measuring stopped before its plan was done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// A signal came (SIGINT, SIGTERM, SIGHUP).
    #[error(transparent)]
    Signal(#[from] Interrupted),
    /// A side's condition did not hold (a kernel setting the kernel did not keep): what was
    /// measured would not be of that side, so the comparison is void.
    #[error("a kernel setting did not hold, so the comparison is void: {0}")]
    ConditionFailed(String),
}

impl Stopped {
    /// As the command's error: a signal stays an `Interrupted` (main exits 128+N for it).
    pub fn into_error(self) -> anyhow::Error {
        match self {
            Stopped::Signal(i) => i.into(),
            other => anyhow::Error::new(other),
        }
    }
}

impl Repeater for Coordinator {
    fn repeat(&self, b: &Benchmark, opts: &WorkerOptions) -> Result<Vec<CaseResult>, Stopped> {
        Ok(self.run(b, opts)?)
    }
}

/// One side being measured: what measures it (its wrapper) and every benchmark's repetitions.
struct MeasuredSide<'a> {
    coord: &'a dyn Repeater,
    tracks: Vec<Track>,
}

/// One benchmark's repetitions so far, per case id in first-seen order, and why it stopped.
struct Track {
    bench: &'static Benchmark,
    cases: Vec<(String, Vec<RepRun>)>,
    stopped: Option<&'static str>,
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
    /// skipped or failed, do not hold the benchmark back).
    fn precise_enough(&self, precision: f64) -> bool {
        self.cases.iter().all(|(_, reps)| {
            let samples: Vec<&[f64]> = reps
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

    /// Nothing was measured in the first repetition (skipped or failed throughout): repeating
    /// would only say so again.
    fn nothing_to_repeat(&self) -> bool {
        self.cases
            .iter()
            .all(|(_, r)| r.iter().all(|x| x.case.measurement.is_none()))
    }
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
    // (see `harness::counters`), and what one operation costs in events does not drift
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

/// One side per repeater, each with a fresh track for every benchmark of the plan.
fn measured_sides<'a>(plan: &Plan, repeaters: &[&'a dyn Repeater]) -> Vec<MeasuredSide<'a>> {
    repeaters
        .iter()
        .map(|&coord| MeasuredSide {
            coord,
            tracks: plan.benchmarks.iter().map(|b| Track::new(b)).collect(),
        })
        .collect()
}

/// Run round after round: each round one repetition (a fresh worker) of every benchmark still
/// sampling, side by side for `ab` (A then B for each benchmark). A benchmark stops once every
/// case's CI is within the precision (after the minimum repetitions), or at its maximum.
/// Times are taken from `started`; `opts` are the session's worker options.
fn run_rounds(
    plan: &Plan,
    opts: &WorkerOptions,
    started: std::time::Instant,
    sides: &mut [MeasuredSide],
    bar: &indicatif::ProgressBar,
) -> Result<Vec<Vec<String>>, Stopped> {
    let mut order = Vec::new();
    for k in 0..plan.reps.max.max(plan.reps.undecided_max) {
        let active: Vec<usize> = (0..plan.benchmarks.len())
            .filter(|&i| sides.iter().any(|s| s.tracks[i].stopped.is_none()))
            .collect();
        if active.is_empty() {
            break;
        }
        let opts = rep_options(opts, plan, k);
        let mut round = Vec::new();
        // A B in even rounds, B A in odd ones: a drift within a round, or whatever the first
        // of a pair does to the second (a warm cache, a cold CPU), falls on both sides alike.
        let first_last: Vec<usize> = if k % 2 == 0 {
            (0..sides.len()).collect()
        } else {
            (0..sides.len()).rev().collect()
        };
        for &i in &active {
            for &si in &first_last {
                let side = &mut sides[si];
                let b = side.tracks[i].bench;
                bar.set_message(format!("{} (repetition {})", b.id, k + 1));
                let t0 = started.elapsed();
                let cases = side.coord.repeat(b, &opts)?;
                let wall = started.elapsed().saturating_sub(t0);
                let startup_ms =
                    (wall.as_nanos() as f64 - sampling_ns(&cases) as f64).max(0.0) / 1e6;
                for case in cases {
                    side.tracks[i].add(RepRun {
                        case,
                        started_ms: t0.as_secs_f64() * 1e3,
                        startup_ms,
                    });
                }
                bar.inc(1);
            }
            round.push(plan.benchmarks[i].id.to_string());
            judge(plan, sides, i, k + 1);
        }
        order.push(round);
    }
    Ok(order)
}

/// After `done` repetitions of benchmark `i` on every side: stop it when it may.
fn judge(plan: &Plan, sides: &mut [MeasuredSide], i: usize, done: usize) {
    let reps = &plan.reps;
    let stop = if sides.iter().all(|s| s.tracks[i].nothing_to_repeat()) {
        Some("not measured")
    } else if done < reps.min {
        None
    } else if reps.fixed_total.is_some() {
        Some("fixed")
    } else if let (Some(band), [a, b]) = (reps.decide, &*sides) {
        let last = done >= reps.max;
        if !crate::base::stats::sequential::is_look(done, last) {
            None
        } else if decided(&a.tracks[i], &b.tracks[i], band) {
            Some("decided")
        } else if last {
            Some("budget")
        } else {
            None
        }
    } else if sides
        .iter()
        .all(|s| s.tracks[i].precise_enough(reps.precision))
    {
        Some("precision")
    } else if done >= reps.max
        && done < reps.undecided_max
        && sides.iter().any(|s| s.tracks[i].outliers_undecided())
    {
        None
    } else if done >= reps.max {
        Some("budget")
    } else {
        None
    };
    if let Some(why) = stop {
        for s in sides.iter_mut() {
            s.tracks[i].stopped = Some(why);
        }
    }
}

/// Whether every case both sides measured has decided (`compare::paired`: called, or no
/// change inside the band). A case one side could not measure decides nothing and holds
/// nothing back.
fn decided(a: &Track, b: &Track, band: f64) -> bool {
    a.medians().iter().zip(b.medians()).all(|(ma, mb)| {
        if ma.is_empty() || mb.is_empty() {
            return true;
        }
        let n = ma.len().min(mb.len());
        crate::analysis::compare::paired(&ma[..n], &mb[..n], band)
            .is_some_and(|p| p.rounds.decision != crate::analysis::compare::Decision::Undecided)
    })
}

impl RunSetup {
    /// Every case's repetitions as one result each, with the derived values of its benchmark.
    fn results(&self, plan: &Plan, tracks: Vec<Track>) -> Vec<BenchResult> {
        let mut out = Vec::new();
        for t in tracks {
            let stopped = t.stopped.unwrap_or("budget");
            let mut rs: Vec<BenchResult> = t
                .cases
                .into_iter()
                .map(|(_, reps)| {
                    analysis::merge_repetitions(
                        reps,
                        &self.opts.allowed,
                        analysis::FINAL_JUDGING,
                        plan.reps.precision,
                        stopped,
                    )
                })
                .collect();
            analysis::derive(&t.bench.cases, &mut rs);
            out.extend(rs);
        }
        out
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
    repeaters: &[&dyn Repeater],
) -> Result<(RoundOrder, Vec<Vec<Track>>), Stopped> {
    let bar = progress(plan.benchmarks.len() * plan.reps.min * repeaters.len());
    let mut sides = measured_sides(plan, repeaters);
    let order = run_rounds(plan, &s.opts, s.started, &mut sides, &bar);
    bar.finish_and_clear();
    Ok((order?, sides.into_iter().map(|x| x.tracks).collect()))
}

/// Run the plan. `Err(Interrupted)` (inside anyhow) when a signal stopped it.
pub fn execute(plan: &Plan, interrupted: Arc<AtomicUsize>) -> anyhow::Result<Run> {
    let s = session(plan)?;
    let coord = s.coordinator(plan, plan.wrapper.clone().unwrap_or_default(), &interrupted);
    crate::say!(
        "oscost: {} benchmark(s), {}-{} repetitions of {:.0} ms each, pinned to CPU {}, clock {:.1} ns/read{}",
        plan.benchmarks.len(),
        plan.reps.min,
        plan.reps.max,
        plan.reps.rep_ns as f64 / 1e6,
        s.opts.cpu,
        s.clock.cost_ns,
        plan.wrapper_text
            .as_deref()
            .map(|w| format!(", under `{w}`"))
            .unwrap_or_default()
    );
    let (order, mut tracks) = measure_sides(plan, &s, &[&coord]).map_err(Stopped::into_error)?;
    coord.check_interrupted()?;
    let tracks = tracks.remove(0);
    let confinement = confinement_of(&tracks);
    let results = s.results(plan, tracks);
    let mut run = s.run_model(plan, plan.wrapper_text.clone(), None, results);
    // The coordinator's own stands for its workers only where no wrapper came between.
    run.env.confinement = confinement.or(run.env.confinement.filter(|_| plan.wrapper.is_none()));
    run.schedule = Some(s.schedule(plan, order, &run.results));
    Ok(run)
}

/// What confined the side's workers, as the first of them to say read it of itself.
fn confinement_of(tracks: &[Track]) -> Option<crate::base::model::Confinement> {
    tracks
        .iter()
        .flat_map(|t| &t.cases)
        .flat_map(|(_, reps)| reps)
        .find_map(|r| r.case.confinement.clone())
}

/// One side of an A/B comparison: a wrapper (none for the plain system) and its text.
pub struct AbSide {
    /// The wrapper's command line (empty: none).
    pub wrapper: Vec<String>,
    /// The wrapper as the user gave it.
    pub text: Option<String>,
}

/// A side whose kernel settings are switched to before each of its repetitions (`Guard::apply`
/// writes only what differs, reads it back and waits the settle time), and whose workers get
/// its per-task settings. A value the kernel did not keep ends the comparison
/// (`Stopped::ConditionFailed`).
struct Switching<'a> {
    inner: &'a dyn Repeater,
    side: usize,
    guard: &'a std::cell::RefCell<crate::effects::settings_guard::Guard>,
}

impl Repeater for Switching<'_> {
    fn repeat(&self, b: &Benchmark, opts: &WorkerOptions) -> Result<Vec<CaseResult>, Stopped> {
        self.guard
            .borrow_mut()
            .apply(self.side)
            .map_err(Stopped::ConditionFailed)?;
        let mut o = opts.clone();
        o.task_settings = self.guard.borrow().task_settings(self.side);
        self.inner.repeat(b, &o)
    }
}

/// Run A and B alternately, repetition by repetition (A B A B ...), so that drift of the
/// machine hits both alike; the repetitions are `ab`'s rounds, judged by the same stop rule as
/// a run (at least `rounds` of them). With `settings`, each side's kernel settings are
/// switched to before each of its repetitions (side 0 is A, 1 is B).
pub fn execute_ab(
    plan: &Plan,
    a: &AbSide,
    b: &AbSide,
    rounds: usize,
    interrupted: Arc<AtomicUsize>,
    settings: Option<&std::cell::RefCell<crate::effects::settings_guard::Guard>>,
) -> anyhow::Result<(Run, Run)> {
    let s = session(plan)?;
    // The sides' wrappers are their coordinators'; the plan's own is not used.
    let mut plan_ab = plan.clone();
    plan_ab.reps.min = plan_ab.reps.min.max(rounds);
    plan_ab.reps.max = plan_ab.reps.max.max(plan_ab.reps.min);
    let plan = &plan_ab;
    let ca = s.coordinator(plan, a.wrapper.clone(), &interrupted);
    let cb = s.coordinator(plan, b.wrapper.clone(), &interrupted);
    let name = |side: &AbSide| side.text.clone().unwrap_or_else(|| "(nothing)".into());
    crate::say!(
        "oscost: A = {}, B = {}: {} benchmark(s) x {}-{} repetitions each, pinned to CPU {}",
        name(a),
        name(b),
        plan.benchmarks.len(),
        plan.reps.min,
        plan.reps.max,
        s.opts.cpu
    );
    let measured = match settings {
        Some(guard) => {
            let sa = Switching {
                inner: &ca,
                side: 0,
                guard,
            };
            let sb = Switching {
                inner: &cb,
                side: 1,
                guard,
            };
            measure_sides(plan, &s, &[&sa, &sb])
        }
        None => measure_sides(plan, &s, &[&ca, &cb]),
    };
    let (order, mut tracks) = measured.map_err(Stopped::into_error)?;
    ca.check_interrupted()?;
    let (sb_tracks, sa_tracks) = (tracks.pop().expect("two sides"), tracks.remove(0));
    // The user's --label leads; the side says which of the pair a stored run is.
    let label = |side: &str, x: &AbSide| {
        Some(match &plan.label {
            Some(l) => format!("{l} (ab {side}: {})", name(x)),
            None => format!("ab {side}: {}", name(x)),
        })
    };
    let mut runs = Vec::new();
    for (side, tracks, text, l) in [
        (a, sa_tracks, a.text.clone(), "A"),
        (b, sb_tracks, b.text.clone(), "B"),
    ] {
        let confinement = confinement_of(&tracks);
        let results = s.results(plan, tracks);
        let mut run = s.run_model(plan, text, label(l, side), results);
        run.env.confinement =
            confinement.or(run.env.confinement.filter(|_| side.wrapper.is_empty()));
        run.schedule = Some(s.schedule(plan, order.clone(), &run.results));
        runs.push(run);
    }
    let rb = runs.pop().expect("two sides");
    let ra = runs.pop().expect("two sides");
    Ok((ra, rb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    use crate::harness::case::BenchError;
    use crate::harness::sampler::SamplerConfig;

    fn count_of(stop: StopWhen) -> Option<usize> {
        match stop {
            StopWhen::Count { n } => Some(n),
            _ => None,
        }
    }
    use crate::harness::sampler::Measurement;

    /// A worker that never starts: each call logs "SIDE id", and returns 200 samples around a
    /// level that depends on the benchmark and how many repetitions of it came before.
    struct Fake<'a> {
        side: &'static str,
        log: &'a RefCell<Vec<String>>,
        /// The k-th repetition of a benchmark sits at `levels(id)[k % len]`; empty: skipped.
        levels: fn(&str) -> Vec<f64>,
        /// The call (counted over every side) that a signal interrupts.
        interrupt_at: Option<usize>,
        /// What each call was given: (events asked for, fixed sample count).
        given: RefCell<Vec<(bool, Option<usize>)>>,
    }

    impl Repeater for Fake<'_> {
        fn repeat(&self, b: &Benchmark, opts: &WorkerOptions) -> Result<Vec<CaseResult>, Stopped> {
            if Some(self.log.borrow().len()) == self.interrupt_at {
                return Err(Interrupted(libc::SIGINT).into());
            }
            let k = self
                .log
                .borrow()
                .iter()
                .filter(|l| **l == format!("{} {}", self.side, b.id))
                .count();
            self.log
                .borrow_mut()
                .push(format!("{} {}", self.side, b.id));
            self.given
                .borrow_mut()
                .push((!opts.events.is_empty(), count_of(opts.sampler.stop)));
            let levels = (self.levels)(b.id);
            let mut case = CaseResult::failed(
                b.id.to_string(),
                b.id,
                b.definition,
                BenchError::Skipped("not here".into()),
            );
            if levels.is_empty() {
                return Ok(vec![case]);
            }
            let level = levels[k % levels.len()];
            let samples: Vec<f64> = (0..200)
                .map(|j| level * (1.0 + 0.001 * ((j % 7) as f64 - 3.0)))
                .collect();
            case.error = None;
            case.measurement = Some(Measurement {
                ends_ns: (1..=200).map(|j| j * 100_000).collect(),
                samples_ns: samples,
                preempted: vec![],
                batch: crate::base::model::Batch {
                    batched: true,
                    size: 100,
                },
                baseline_ns: 0.0,
            });
            Ok(vec![case])
        }
    }

    fn fake<'a>(
        side: &'static str,
        log: &'a RefCell<Vec<String>>,
        levels: fn(&str) -> Vec<f64>,
    ) -> Fake<'a> {
        Fake {
            side,
            log,
            levels,
            interrupt_at: None,
            given: RefCell::new(vec![]),
        }
    }

    fn plan(ids: &[&str], fixed_total: Option<usize>) -> Plan {
        Plan {
            benchmarks: ids
                .iter()
                .map(|id| crate::bench::find(id).unwrap())
                .collect(),
            opts: WorkerOptions {
                sampler: SamplerConfig {
                    stop: StopWhen::Elapsed { ns: 20_000_000 },
                    budget_ns: 20_000_000,
                    warmup_ns: 0,
                    ..SamplerConfig::for_clock(Some(25.0))
                },
                cpu: 0,
                allowed: vec![0],
                variants: Default::default(),
                mq_name: String::new(),
                scratch_dir: None,
                events: vec!["context-switches".into()],
                task_settings: vec![],
                read_confinement: false,
            },
            timeout: Duration::from_secs(1),
            wrapper: None,
            wrapper_text: None,
            label: None,
            reps: RepetitionPlan {
                min: 5,
                max: 10,
                undecided_max: 20,
                rep_ns: 20_000_000,
                precision: 0.01,
                fixed_total,
                decide: None,
            },
            pin_wrapper: false,
            cpu_asked: false,
        }
    }

    /// The rounds of `repeaters` over `plan`: the order, and each side's benchmarks' stop
    /// reasons and repetition counts.
    type Outcome = Result<(Vec<Vec<String>>, Vec<Vec<(Option<&'static str>, usize)>>), Stopped>;

    fn rounds_of(plan: &Plan, repeaters: &[&dyn Repeater]) -> Outcome {
        let mut sides = measured_sides(plan, repeaters);
        let bar = indicatif::ProgressBar::hidden();
        let order = run_rounds(
            plan,
            &plan.opts,
            std::time::Instant::now(),
            &mut sides,
            &bar,
        )?;
        let stops = sides
            .iter()
            .map(|s| {
                s.tracks
                    .iter()
                    .map(|t| (t.stopped, t.cases.first().map_or(0, |(_, r)| r.len())))
                    .collect()
            })
            .collect();
        Ok((order, stops))
    }

    fn steady(_: &str) -> Vec<f64> {
        vec![100.0]
    }

    #[test]
    fn ab_sides_alternate_within_each_round_and_steady_benchmarks_stop_at_the_minimum() {
        let log = RefCell::new(vec![]);
        let (a, b) = (fake("A", &log, steady), fake("B", &log, steady));
        let plan = plan(&["call/f0", "syscall/getppid"], None);
        let (order, stops) = rounds_of(&plan, &[&a, &b]).unwrap();
        assert_eq!(order.len(), 5);
        assert!(order.iter().all(|r| r == &["call/f0", "syscall/getppid"]));
        assert_eq!(
            log.borrow()[..4],
            [
                "A call/f0",
                "B call/f0",
                "A syscall/getppid",
                "B syscall/getppid"
            ]
        );
        assert_eq!(log.borrow().len(), 20);
        for side in &stops {
            assert_eq!(side, &[(Some("precision"), 5), (Some("precision"), 5)]);
        }
        // Events are counted in the first repetition only.
        let given = a.given.borrow();
        assert!(given[0].0 && given[1].0 && given[2..].iter().all(|g| !g.0));
    }

    #[test]
    fn ab_rounds_go_on_until_the_comparison_decides_or_the_budget_ends() {
        let ab_plan = |ids: &[&str]| {
            let mut p = plan(ids, None);
            p.reps.min = crate::base::stats::sequential::MIN_ROUNDS;
            p.reps.max = 40;
            p.reps.decide = Some(0.01);
            p
        };
        // B 5% slower with the same little noise: called at the first look.
        let log = RefCell::new(vec![]);
        let a = fake("A", &log, |_| vec![100.0, 101.0, 99.0, 100.5, 99.5, 100.2]);
        let b = fake("B", &log, |_| {
            vec![105.0, 106.0, 104.0, 105.5, 104.5, 105.2]
        });
        let (order, stops) = rounds_of(&ab_plan(&["syscall/getppid"]), &[&a, &b]).unwrap();
        assert_eq!(stops[0], [(Some("decided"), 10)]);
        assert_eq!(order.len(), 10);
        // A B, then B A: each side goes first in every other round.
        assert_eq!(
            log.borrow()[..4],
            [
                "A syscall/getppid",
                "B syscall/getppid",
                "B syscall/getppid",
                "A syscall/getppid"
            ]
        );
        // The two sides alike: no change, inside the band, at the first look.
        let log = RefCell::new(vec![]);
        let a = fake("A", &log, |_| vec![100.0, 101.0, 99.0]);
        let b = fake("B", &log, |_| vec![100.0, 101.0, 99.0]);
        let (_, stops) = rounds_of(&ab_plan(&["syscall/getppid"]), &[&a, &b]).unwrap();
        assert_eq!(stops[0], [(Some("decided"), 10)]);
        // Rounds whose ratios swing ±8% around 1: neither called nor inside ±1% by round 40.
        let log = RefCell::new(vec![]);
        let a = fake("A", &log, |_| vec![100.0, 108.0]);
        let b = fake("B", &log, |_| vec![108.0, 100.0, 100.0]);
        let (order, stops) = rounds_of(&ab_plan(&["syscall/getppid"]), &[&a, &b]).unwrap();
        assert_eq!(stops[0], [(Some("budget"), 40)]);
        assert_eq!(order.len(), 40);
    }

    #[test]
    fn a_noisy_benchmark_runs_to_its_budget_while_a_steady_one_stops() {
        let log = RefCell::new(vec![]);
        let noisy = |id: &str| match id {
            "syscall/getppid" => vec![100.0, 140.0, 80.0, 120.0, 95.0],
            _ => vec![100.0],
        };
        let run = fake("run", &log, noisy);
        let plan = plan(&["call/f0", "syscall/getppid"], None);
        let (order, stops) = rounds_of(&plan, &[&run]).unwrap();
        assert_eq!(stops[0], [(Some("precision"), 5), (Some("budget"), 10)]);
        assert_eq!(order.len(), 10);
        assert!(order[5..].iter().all(|r| r == &["syscall/getppid"]));
    }

    #[test]
    fn slow_moments_that_could_be_half_are_outvoted_by_more_repetitions() {
        // 3 of the first 10 repetitions in a slow moment: they could be half (P = 17%), so the
        // benchmark goes past 10; with none in the next ones, at 15 they cannot (P = 1.8%).
        let log = RefCell::new(vec![]);
        let moments = |_: &str| {
            let mut v = vec![100.0; 20];
            for (k, slow) in [(2, 130.0), (6, 135.0), (9, 128.0)] {
                v[k] = slow;
            }
            v
        };
        let run = fake("run", &log, moments);
        let (order, stops) = rounds_of(&plan(&["syscall/getppid"], None), &[&run]).unwrap();
        assert_eq!(stops[0], [(Some("precision"), 15)]);
        assert_eq!(order.len(), 15);
        // Slow moments in 2 of every 5 repetitions stay undecided: the budget ends at 20.
        let log = RefCell::new(vec![]);
        let half = |_: &str| vec![100.0, 100.0, 131.0, 100.0, 131.0];
        let run = fake("run", &log, half);
        let (_, stops) = rounds_of(&plan(&["syscall/getppid"], None), &[&run]).unwrap();
        assert_eq!(stops[0], [(Some("budget"), 20)]);
        // Without the extension (a suite, --budget, --quick) the budget ends at the maximum.
        let log = RefCell::new(vec![]);
        let run = fake("run", &log, moments);
        let mut suite = plan(&["syscall/getppid"], None);
        suite.reps.undecided_max = 0;
        let (_, stops) = rounds_of(&suite, &[&run]).unwrap();
        assert_eq!(stops[0], [(Some("budget"), 10)]);
    }

    #[test]
    fn a_benchmark_measured_nowhere_stops_after_one_round_and_fixed_counts_are_shared_out() {
        let log = RefCell::new(vec![]);
        let skipped = fake("run", &log, |_| vec![]);
        let (order, stops) = rounds_of(&plan(&["call/f0"], None), &[&skipped]).unwrap();
        assert_eq!(order.len(), 1);
        assert_eq!(stops[0], [(Some("not measured"), 1)]);
        // --samples 1003 over the 5 minimum repetitions: 201 201 201 200 200, then "fixed".
        let log = RefCell::new(vec![]);
        let fixed = fake("run", &log, steady);
        let (_, stops) = rounds_of(&plan(&["call/f0"], Some(1003)), &[&fixed]).unwrap();
        assert_eq!(stops[0], [(Some("fixed"), 5)]);
        let counts: Vec<Option<usize>> = fixed.given.borrow().iter().map(|g| g.1).collect();
        assert_eq!(counts, [201, 201, 201, 200, 200].map(Some));
    }

    #[test]
    fn an_interrupt_stops_the_rounds_at_once() {
        let log = RefCell::new(vec![]);
        let a = Fake {
            interrupt_at: Some(3),
            ..fake("A", &log, steady)
        };
        let b = Fake {
            interrupt_at: Some(3),
            ..fake("B", &log, steady)
        };
        let plan = plan(&["call/f0", "syscall/getppid"], None);
        let e = rounds_of(&plan, &[&a, &b]).unwrap_err();
        assert_eq!(e, Stopped::Signal(Interrupted(libc::SIGINT)));
        assert_eq!(log.borrow().len(), 3, "no repetition after the signal");
    }

    #[test]
    fn repetitions_shrink_with_the_suite_and_stop_where_asked() {
        let one = repetition_plan(1, 0.01, None, None, false);
        assert_eq!((one.min, one.max, one.rep_ns), (5, 10, REP_CEILING_NS));
        let suite = repetition_plan(100, 0.01, None, None, false);
        assert_eq!((suite.max, suite.rep_ns), (8, 40_000_000));
        let quick = repetition_plan(100, 0.02, None, None, true);
        assert_eq!((quick.max, quick.rep_ns), (5, REP_FLOOR_NS));
        assert_eq!(
            (one.undecided_max, suite.undecided_max, quick.undecided_max),
            (20, 0, 0)
        );
        let budget = repetition_plan(1, 0.01, Some(0.6), None, false);
        assert_eq!((budget.max, budget.undecided_max), (10, 0));
        assert_eq!(repetition_plan(1, 0.01, Some(0.01), None, false).max, 5);
        assert_eq!(
            repetition_plan(1, 0.01, None, Some(37), false).fixed_total,
            Some(37)
        );
    }

    #[test]
    fn a_condition_that_did_not_hold_is_its_own_error_not_a_signal() {
        let e =
            Stopped::ConditionFailed("thp: the kernel did not keep 'always'".into()).into_error();
        assert!(e.downcast_ref::<Interrupted>().is_none(), "{e}");
        assert!(e.to_string().contains("did not keep"), "{e}");
        let e = Stopped::Signal(Interrupted(libc::SIGINT)).into_error();
        assert_eq!(
            e.downcast_ref::<Interrupted>(),
            Some(&Interrupted(libc::SIGINT))
        );
    }
}
