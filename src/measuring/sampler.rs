//! The sampler: turns an operation into per-operation samples (docs/ARCHITECTURE.md §2).
//!
//! Cheap operations are timed in batches: n operations between two clock reads, n chosen so a
//! batch lasts `target_batch_ns` (2000 clock reads, so the clock's own cost and resolution are
//! 0.05% of a batch) and far below a scheduler tick. The same loop with the operation
//! removed is timed the same way; its per-operation median is the baseline subtracted from every
//! sample. Expensive operations (fork) are timed one by one, each time kept.
//!
//! After a warm-up, samples are taken until the config's `StopWhen` is met: a time (a
//! repetition of `run`, `ab` or `ctx`, whose precision is the scheduler's rule across
//! repetitions, `scheduler::repetition_plan`), the median's 95% CI within a precision (a
//! single pass, `explain`), or a count (`--samples`); the budget caps all three. Each sample records
//! whether the thread was preempted while it ran, and when it ended, so that slow phases of the
//! machine can be found in the time series and reported.
//!
//! The sampler is generic over the clock and the preemption probe so tests drive it with a fake
//! clock and get exact answers.

use std::convert::Infallible;

use super::clock::Clock;
use super::counters::{self, Phase};
use super::noise::PreemptionProbe;
use crate::base::model::Batch;
use crate::base::stats;

/// When a sampler stops taking samples (the budget, `SamplerConfig::budget_ns`, caps each).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum StopWhen {
    /// After this much sampling time and `min_samples` samples: one repetition of `run`, `ab`
    /// or `ctx`, where the scheduler decides across repetitions whether the median is precise.
    Elapsed {
        /// Sampling time, ns.
        ns: u64,
    },
    /// Once the 95% CI half-width of the median is within `precision` of it, after at least
    /// `min_ns` of sampling and `min_samples` samples: a pass that stands alone (`explain`).
    Precise {
        /// The fraction of the median the CI half-width must be within.
        precision: f64,
        /// Never before this much sampling time (ns): short bursts of noise average out.
        min_ns: u64,
    },
    /// After exactly this many samples (`--samples`, shared out over the repetitions).
    Count {
        /// Samples to take.
        n: usize,
    },
}

/// How a sampler samples: its stop rule and the sizes around it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SamplerConfig {
    /// When to stop.
    pub stop: StopWhen,
    /// Stop after this much sampling time (ns), whatever `stop` says (once 3 samples exist).
    pub budget_ns: u64,
    /// Time the operation runs untimed before sampling starts (ns).
    pub warmup_ns: u64,
    /// No stop by time or precision before this many samples.
    pub min_samples: usize,
    /// Stop at this many samples whatever `stop` says: bounds the memory a stream takes.
    pub max_samples: usize,
    /// Desired duration of one batch (ns).
    pub target_batch_ns: u64,
    /// Per-read cost of the clock (ns), subtracted from individually timed operations. `None`
    /// until the coordinator has calibrated the run's clock (a plan is built before it does);
    /// a sampler given `None` measures the clock itself.
    pub clock_cost_ns: Option<f64>,
}

impl SamplerConfig {
    /// Defaults for a clock whose read costs `clock_cost_ns` (`None`: not known yet).
    pub fn for_clock(clock_cost_ns: Option<f64>) -> SamplerConfig {
        SamplerConfig {
            // The cost of a primitive moves between levels for 50-500 ms at a time on these
            // VMs; a median over a short window is whichever level the window caught. 400 ms
            // spans several phases (a command's repetitions set their own, `plan.rs`).
            stop: StopWhen::Precise {
                precision: 0.01,
                min_ns: 400_000_000,
            },
            budget_ns: 2_000_000_000,
            warmup_ns: 30_000_000,
            min_samples: 10,
            max_samples: 200_000,
            target_batch_ns: target_batch_ns(clock_cost_ns),
            clock_cost_ns,
        }
    }

    /// This config for a clock whose read costs `cost_ns`: the cost and the batch length.
    pub fn with_clock(self, cost_ns: f64) -> SamplerConfig {
        SamplerConfig {
            clock_cost_ns: Some(cost_ns),
            target_batch_ns: target_batch_ns(Some(cost_ns)),
            ..self
        }
    }
}

/// 2000 clock reads, kept between 20 us and 1 ms: long enough that the clock's cost and
/// resolution are noise (0.05%), short enough that a batch is rarely interrupted, and few
/// enough samples per second to keep every raw sample.
pub fn target_batch_ns(clock_cost_ns: Option<f64>) -> u64 {
    let t = match clock_cost_ns {
        Some(c) if c.is_finite() => c * 2000.0,
        _ => 50_000.0,
    };
    t.clamp(20_000.0, 1_000_000.0) as u64
}

/// What the sampler produced for one operation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Measurement {
    /// Per-operation cost of each sample, baseline already subtracted.
    pub samples_ns: Vec<f64>,
    /// When each sample ended, ns since sampling started.
    pub ends_ns: Vec<u64>,
    /// Indices of samples during which the thread was preempted.
    pub preempted: Vec<usize>,
    /// How samples were taken.
    pub batch: Batch,
    /// What was subtracted from each sample.
    pub baseline_ns: f64,
    /// The exit witness timed between its samples, ns per CPUID each: one CPUID after the
    /// sample that ends each `EXIT_EVERY_NS` of sampling (`witness::during_ns` makes the
    /// repetition's witness of them). Empty without CPUID, and for a counting pass. Reduced
    /// to `CaseResult::exit_witness_ns` in the worker, so neither the pipe to the parent nor
    /// the store carries it (about 120 a repetition).
    #[serde(skip)]
    pub exits_ns: Vec<f64>,
}

impl Measurement {
    fn finish(
        samples_ns: Vec<f64>,
        ends_ns: Vec<u64>,
        preempted: Vec<usize>,
        batch: Batch,
        baseline_ns: f64,
    ) -> Measurement {
        Measurement {
            samples_ns,
            ends_ns,
            preempted,
            batch,
            baseline_ns,
            exits_ns: Vec::new(),
        }
    }
}

/// How often, in sampling time, the exit witness is timed between two samples (ns): about 120
/// CPUIDs in a 60 ms repetition, 0.6 ms of it where an exit takes 5 us. Timed beside a
/// repetition's cases (before and after, `witness::exit_timings`), the witness followed a 60 ms
/// window's getppid level with a correlation of 0.66 on a drifting 2-vCPU AMD EPYC guest; timed
/// between its samples, 0.92 (every batch) and 0.92 (every 16th batch), and a CPUID after
/// every 20 us batch moved getppid by +0.3% (every 4th: -0.25%), within the windows' noise
/// (docs/design-notes.md, "A host busy most of the time, and the exit witness timed
/// between the samples").
pub const EXIT_EVERY_NS: u64 = 500_000;

/// When the next exit witness is due, and the ones timed so far.
struct ExitsDuring {
    next_at_ns: u64,
    exits_ns: Vec<f64>,
}

impl ExitsDuring {
    fn new() -> ExitsDuring {
        ExitsDuring {
            next_at_ns: 0,
            exits_ns: Vec::new(),
        }
    }

    /// After a sample that ended `at_ns` into sampling: one CPUID timed on `clock` (less a
    /// clock read) where one is due.
    fn after_sample(&mut self, clock: &impl Clock, clock_cost_ns: f64, at_ns: u64) {
        if at_ns < self.next_at_ns {
            return;
        }
        self.next_at_ns = at_ns + EXIT_EVERY_NS;
        let t0 = clock.now_ns();
        if super::witness::one_exit() {
            let t = clock.now_ns().saturating_sub(t0) as f64 - clock_cost_ns;
            self.exits_ns.push(t.max(0.0));
        }
    }
}

/// Why sampling stopped (for tests and diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `StopWhen::Precise` was met.
    Precision,
    /// `StopWhen::Elapsed` was met.
    Elapsed,
    /// The budget ended first.
    Budget,
    /// `StopWhen::Count` was met.
    FixedCount,
    /// `max_samples` were taken.
    MaxSamples,
}

/// A batch of n operations that may fail.
pub type Op<'a, E> = dyn FnMut(u64) -> Result<(), E> + 'a;

fn infallible<T>(r: Result<T, Infallible>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => match e {},
    }
}

/// Batches of the empty loop timed for the baseline.
const BASELINE_BATCHES: u64 = 21;

/// How long the untimed counting window after sampling lasts (events per operation are
/// counted there, see `measuring::counters`): at least 2 ms, and at least two batches.
const COUNTING_NS: f64 = 2e6;

/// Run `step` (which performs `ops_per_step` operations and lasts about `step_ns`) for about
/// `COUNTING_NS` with the counters on, untimed.
fn counted_window<E>(
    step_ns: f64,
    ops_per_step: u64,
    step: &mut dyn FnMut() -> Result<(), E>,
) -> Result<(), E> {
    let profiling = super::profile::active();
    let window_ns = if profiling {
        super::profile::WINDOW_NS
    } else {
        COUNTING_NS
    };
    let k = counting_repeats(step_ns, window_ns);
    counters::begin();
    super::profile::begin();
    for _ in 0..k {
        step()?;
        super::ipc_guard::unwind_if_dying();
        if profiling {
            super::profile::step();
        }
    }
    super::profile::end();
    counters::end(Phase::Sampling, k * ops_per_step);
    Ok(())
}

/// Whether this is an untimed pass (counting events or profiling) rather than the timed one.
fn untimed_pass() -> bool {
    counters::active() || super::profile::active()
}

/// Batches (or single operations) of an untimed window of `window_ns` for batches of
/// `batch_ns` each.
fn counting_repeats(batch_ns: f64, window_ns: f64) -> u64 {
    if !(batch_ns.is_finite() && batch_ns > 0.0) {
        return 2;
    }
    ((window_ns / batch_ns).ceil() as u64).clamp(2, 10_000_000)
}

/// Takes samples of one operation with a clock and a preemption probe (both fakes in tests).
pub struct Sampler<C: Clock, P: PreemptionProbe> {
    /// The clock that times batches and operations.
    pub clock: C,
    /// Says whether the thread was preempted during a sample.
    pub probe: P,
    /// The stop rule and sizes; its clock cost is always known (`Sampler::new`).
    pub cfg: SamplerConfig,
}

/// Decides when to stop; shared by batched and individual sampling.
struct StopRule {
    cfg: SamplerConfig,
    next_check: usize,
}

impl StopRule {
    fn new(cfg: SamplerConfig) -> StopRule {
        StopRule {
            cfg,
            next_check: cfg.min_samples.max(1),
        }
    }

    /// `ends` are the samples' end times since sampling started.
    fn check(&mut self, samples: &[f64], ends: &[u64]) -> Option<StopReason> {
        let n = samples.len();
        let elapsed = ends.last().copied().unwrap_or(0);
        let cfg = &self.cfg;
        match cfg.stop {
            StopWhen::Count { n: count } if n >= count => return Some(StopReason::FixedCount),
            StopWhen::Count { .. } => {}
            _ if n >= cfg.max_samples => return Some(StopReason::MaxSamples),
            StopWhen::Elapsed { ns } if elapsed >= ns && n >= cfg.min_samples => {
                return Some(StopReason::Elapsed);
            }
            StopWhen::Elapsed { .. } => {}
            StopWhen::Precise { precision, min_ns } => {
                if n >= self.next_check && elapsed >= min_ns && n >= cfg.min_samples {
                    // The CI costs a sort; check at geometrically spaced counts (every ~5%
                    // more samples).
                    self.next_check = n + (n / 20).max(1);
                    if let Some(st) = stats::summarize(samples)
                        && stats::relative_ci_halfwidth(&st) <= precision
                    {
                        return Some(StopReason::Precision);
                    }
                }
            }
        }
        (elapsed >= cfg.budget_ns && n >= cfg.min_samples.min(3)).then_some(StopReason::Budget)
    }
}

impl<C: Clock, P: PreemptionProbe> Sampler<C, P> {
    /// A sampler with `cfg`; a clock cost not given is measured on `clock` now.
    pub fn new(clock: C, probe: P, cfg: SamplerConfig) -> Self {
        let cfg = match cfg.clock_cost_ns {
            Some(_) => cfg,
            None => {
                let (cost, _) = super::clock::measure_reader(&clock, || clock.now_ns());
                cfg.with_clock(cost)
            }
        };
        Sampler { clock, probe, cfg }
    }

    fn time_batch<E>(&self, op: &mut Op<'_, E>, n: u64) -> Result<(u64, bool), E> {
        let sw0 = self.probe.involuntary_switches();
        let t0 = self.clock.now_ns();
        op(n)?;
        let t1 = self.clock.now_ns();
        let sw1 = self.probe.involuntary_switches();
        super::ipc_guard::unwind_if_dying();
        Ok((t1.saturating_sub(t0), sw1 > sw0))
    }

    /// Smallest power of two whose batch lasts at least the target, then scaled to the target.
    fn batch_size<E>(&self, op: &mut Op<'_, E>) -> Result<u64, E> {
        let target = self.cfg.target_batch_ns.max(1);
        let mut n: u64 = 1;
        loop {
            // The fastest of three: one batch stretched by an interrupt would size every
            // batch of the measurement far too small.
            let mut t = u64::MAX;
            for _ in 0..3 {
                t = t.min(self.time_batch(op, n)?.0);
            }
            if t >= target / 4 || n >= 1 << 40 {
                if t == 0 {
                    return Ok(n);
                }
                let scaled = (n as f64 * target as f64 / t as f64).round() as u64;
                return Ok(scaled.clamp(1, 1 << 40));
            }
            n = n.saturating_mul(if t == 0 { 16 } else { 2 });
        }
    }

    /// Per-operation median of the loop without the operation, timed at batch size `n`.
    fn baseline(&self, baseline: &mut dyn FnMut(u64), n: u64) -> f64 {
        let mut base = |k: u64| -> Result<(), Infallible> {
            baseline(k);
            Ok(())
        };
        let per_op: Vec<f64> = (0..BASELINE_BATCHES)
            .map(|_| infallible(self.time_batch(&mut base, n)).0 as f64 / n as f64)
            .collect();
        stats::median(&per_op)
    }

    /// Time `op(n)` (which must perform the operation n times) in batches, subtracting the
    /// per-operation cost of `baseline(n)` (the same loop without the operation).
    pub fn batched(
        &self,
        op: &mut dyn FnMut(u64),
        baseline: &mut dyn FnMut(u64),
    ) -> (Measurement, StopReason) {
        let mut op = |n: u64| -> Result<(), Infallible> {
            op(n);
            Ok(())
        };
        infallible(self.batched_fallible(&mut op, baseline))
    }

    /// As `batched`, for an operation that can fail (a peer that died): the first error ends
    /// sampling and is returned.
    pub fn batched_fallible<E>(
        &self,
        op: &mut Op<'_, E>,
        baseline: &mut dyn FnMut(u64),
    ) -> Result<(Measurement, StopReason), E> {
        // Sized once cold, then again once warm: in a fresh process the first calls fault in
        // code and data, and a batch sized on them would be far too small.
        let n = self.batch_size(op)?;
        if untimed_pass() {
            return self.count_batched(op, baseline, n);
        }
        let warm_start = self.clock.now_ns();
        while self.clock.now_ns().saturating_sub(warm_start) < self.cfg.warmup_ns {
            self.time_batch(op, n)?;
        }
        let n = self.batch_size(op)?;
        let base = self.baseline(baseline, n);
        let start = self.clock.now_ns();
        let mut rule = StopRule::new(self.cfg);
        let (mut samples, mut ends, mut preempted) = (Vec::new(), Vec::new(), Vec::new());
        let mut exits = ExitsDuring::new();
        let clock_cost = self.cfg.clock_cost_ns.unwrap_or(0.0);
        let reason = loop {
            let (t, pre) = self.time_batch(op, n)?;
            if pre {
                preempted.push(samples.len());
            }
            samples.push(t as f64 / n as f64 - base);
            let end = self.clock.now_ns().saturating_sub(start);
            ends.push(end);
            if let Some(r) = rule.check(&samples, &ends) {
                break r;
            }
            exits.after_sample(&self.clock, clock_cost, end);
        };
        let batch = Batch {
            batched: true,
            size: n,
        };
        let mut m = Measurement::finish(samples, ends, preempted, batch, base);
        m.exits_ns = exits.exits_ns;
        Ok((m, reason))
    }

    /// The counting pass of a batched operation (`measuring::counters`): the empty loop and
    /// about 2 ms of the operation, each counted, untimed; one token sample comes back.
    fn count_batched<E>(
        &self,
        op: &mut Op<'_, E>,
        baseline: &mut dyn FnMut(u64),
        n: u64,
    ) -> Result<(Measurement, StopReason), E> {
        let (t, _) = self.time_batch(op, n)?;
        counters::begin();
        for _ in 0..BASELINE_BATCHES {
            baseline(n);
        }
        counters::end(Phase::Baseline, BASELINE_BATCHES * n);
        counted_window(t as f64, n, &mut || op(n))?;
        let batch = Batch {
            batched: true,
            size: n,
        };
        let m = Measurement::finish(vec![t as f64 / n as f64], vec![t], vec![], batch, 0.0);
        Ok((m, StopReason::FixedCount))
    }

    /// The counting pass of an operation timed one by one: one operation sizes the window (by
    /// the wall clock: what `op` returns may be scaled, per page say), then about 2 ms is
    /// counted; one token sample comes back.
    fn count_individual<E>(
        &self,
        op: &mut dyn FnMut() -> Result<f64, E>,
    ) -> Result<(Measurement, StopReason), E> {
        let t0 = self.clock.now_ns();
        let t = op()?;
        let wall = self.clock.now_ns().saturating_sub(t0) as f64;
        counted_window(wall, 1, &mut || op().map(drop))?;
        let batch = Batch {
            batched: false,
            size: 1,
        };
        let m = Measurement::finish(vec![t], vec![t as u64], vec![], batch, 0.0);
        Ok((m, StopReason::FixedCount))
    }

    /// Time an operation that times itself: `op` performs one operation and returns its
    /// duration in ns as read from the clock (so it can time exactly the part that matters, as
    /// fork-child does through shared memory). One clock read's cost is subtracted.
    pub fn individual<E>(
        &self,
        op: &mut dyn FnMut() -> Result<f64, E>,
    ) -> Result<(Measurement, StopReason), E> {
        if untimed_pass() {
            return self.count_individual(op);
        }
        let warm_start = self.clock.now_ns();
        let mut warm = 0;
        while warm < 3 || self.clock.now_ns().saturating_sub(warm_start) < self.cfg.warmup_ns / 3 {
            op()?;
            super::ipc_guard::unwind_if_dying();
            warm += 1;
        }
        let base = self.cfg.clock_cost_ns.unwrap_or(0.0);
        let start = self.clock.now_ns();
        let mut rule = StopRule::new(self.cfg);
        let (mut samples, mut ends, mut preempted) = (Vec::new(), Vec::new(), Vec::new());
        let mut exits = ExitsDuring::new();
        let reason = loop {
            let sw0 = self.probe.involuntary_switches();
            let t = op()?;
            super::ipc_guard::unwind_if_dying();
            if self.probe.involuntary_switches() > sw0 {
                preempted.push(samples.len());
            }
            samples.push(t - base);
            let end = self.clock.now_ns().saturating_sub(start);
            ends.push(end);
            if let Some(r) = rule.check(&samples, &ends) {
                break r;
            }
            exits.after_sample(&self.clock, base, end);
        };
        let batch = Batch {
            batched: false,
            size: 1,
        };
        let mut m = Measurement::finish(samples, ends, preempted, batch, base);
        m.exits_ns = exits.exits_ns;
        Ok((m, reason))
    }
}

#[cfg(test)]
mod tests;
