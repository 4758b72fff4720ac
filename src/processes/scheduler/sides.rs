//! The sides a plan is measured on, and what stops the measuring. A side is a set of
//! conditions made to hold before each of its repetitions: its repeater (the coordinator of
//! its wrapper, or of none; a fake in tests) and, for `Switched` sides, its kernel settings.
//! One `Sides` value owns every side's conditions, so switching needs no shared state. A
//! program running during a side (`WithDuring`) wraps the others: it is started when its side
//! begins a block, stopped when the block ends, and asks for blocks of repetitions rather than
//! one repetition a side.

use crate::base::stop::Interrupted;
use crate::harness::case::Benchmark;
use crate::harness::observers::Inventory;
use crate::harness::runner::{CaseResult, WorkerOptions};
use crate::processes::during::{Agent, DuringRecord, DuringSpec};
use crate::processes::worker::Coordinator;

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
    ConditionFailed(#[from] crate::effects::settings_guard::NotHeld),
    /// A program that runs during a side did not start, get ready, keep running or stop as
    /// it must: the side is void.
    #[error(transparent)]
    DuringFailed(#[from] crate::processes::during::DuringFailed),
}

impl From<crate::processes::during::NotReady> for Stopped {
    fn from(e: crate::processes::during::NotReady) -> Stopped {
        match e {
            crate::processes::during::NotReady::Signal(i) => Stopped::Signal(i),
            crate::processes::during::NotReady::Failed(f) => Stopped::DuringFailed(f),
        }
    }
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

/// The sides of a measurement (one for a run, A and B for `ab`), and what switching to one
/// takes: before each repetition of a side its conditions are made to hold, then its repeater
/// (the coordinator of its wrapper, or of none) measures. One value owns every side's
/// conditions, so switching between sides needs no state shared between them.
pub(super) trait Sides {
    /// How many there are.
    fn count(&self) -> usize;
    /// One repetition of `b` on side `side`, its conditions made to hold first.
    fn repeat(
        &mut self,
        side: usize,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<CaseResult>, Stopped>;
    /// Whether switching sides is dear (a program started and stopped): the scheduler then
    /// measures a block of rounds of one side before the other's, not one repetition each.
    fn blocks(&self) -> bool {
        false
    }
    /// Measuring is over: whatever a side still holds is ended (a program stopped).
    fn finish(&mut self) -> Result<(), Stopped> {
        Ok(())
    }
}

/// Sides that differ only in their repeater: a wrapper, or none.
pub(super) struct Plain<'a>(pub(super) Vec<&'a dyn Repeater>);

impl Sides for Plain<'_> {
    fn count(&self) -> usize {
        self.0.len()
    }

    fn repeat(
        &mut self,
        side: usize,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<CaseResult>, Stopped> {
        self.0[side].repeat(b, opts)
    }
}

/// Sides whose kernel settings are switched to before each of their repetitions
/// (`Guard::apply` writes only what differs, reads it back and waits the settle time), and
/// whose workers get the side's per-task settings. A value the kernel did not keep ends the
/// comparison (`Stopped::ConditionFailed`): what was measured would not be of that side.
pub(super) struct Switched<'a> {
    pub(super) repeaters: Plain<'a>,
    pub(super) guard: &'a mut crate::effects::settings_guard::Guard,
}

impl Sides for Switched<'_> {
    fn count(&self) -> usize {
        self.repeaters.count()
    }

    fn repeat(
        &mut self,
        side: usize,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<CaseResult>, Stopped> {
        self.guard.apply(side)?;
        let mut o = opts.clone();
        o.task_settings = self.guard.task_settings(side);
        self.repeaters.repeat(side, b, &o)
    }
}

/// Sides some of which run a program during them (`--during`): before a block of a side's
/// repetitions, the other side's program is stopped (and the system must return to what it
/// was before that program started), then this side's started and waited for until ready.
/// What each program did is kept in `records`, one per side.
pub(super) struct WithDuring<'a> {
    pub(super) inner: &'a mut dyn Sides,
    pub(super) specs: Vec<Option<DuringSpec>>,
    pub(super) records: Vec<DuringRecord>,
    pub(super) stop: crate::base::stop::Stop,
    /// When each program was up, ms since `started` (the run's start): from ready to the
    /// stop asked, in order.
    pub(super) spans: Vec<[f64; 2]>,
    started: std::time::Instant,
    running: Option<Running>,
}

/// The program running now, for its side.
struct Running {
    side: usize,
    agent: Agent,
    /// The system's inventory before it started: what must be back once it stops.
    before: Inventory,
    ready_at: std::time::Instant,
    cpu_at_ready: crate::processes::during::CpuTime,
}

impl<'a> WithDuring<'a> {
    pub(super) fn new(
        inner: &'a mut dyn Sides,
        specs: Vec<Option<DuringSpec>>,
        stop: crate::base::stop::Stop,
        started: std::time::Instant,
    ) -> WithDuring<'a> {
        let records = vec![DuringRecord::default(); specs.len()];
        WithDuring {
            inner,
            specs,
            records,
            stop,
            spans: vec![],
            started,
            running: None,
        }
    }

    fn now_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1e3
    }

    /// Make `side`'s program the one running (none, if it has none).
    fn switch_to(&mut self, side: usize) -> Result<(), Stopped> {
        if self.running.as_ref().is_some_and(|r| r.side == side) {
            return Ok(());
        }
        self.end_running()?;
        let Some(spec) = self.specs.get(side).cloned().flatten() else {
            return Ok(());
        };
        let before = Inventory::read();
        let mut agent = Agent::start(&spec)?;
        let (secs, how) = agent.wait_ready(&self.stop)?;
        let rec = &mut self.records[side];
        rec.blocks += 1;
        rec.ready_s.push(secs);
        rec.ready_by = how;
        if rec.attached.is_empty() {
            rec.attached = Inventory::read().differences(&before);
        }
        let cpu_at_ready = agent.cpu_time().unwrap_or_default();
        let now = self.now_ms();
        self.spans.push([now, f64::INFINITY]);
        self.running = Some(Running {
            side,
            agent,
            before,
            ready_at: std::time::Instant::now(),
            cpu_at_ready,
        });
        Ok(())
    }

    /// Stop the running program, its CPU use while measured kept, and wait for the system to
    /// return to what it was before it started.
    fn end_running(&mut self) -> Result<(), Stopped> {
        let Some(mut r) = self.running.take() else {
            return Ok(());
        };
        let measured = r.ready_at.elapsed().as_secs_f64();
        let now = self.now_ms();
        if let Some(span) = self.spans.last_mut() {
            span[1] = now;
        }
        let cpu = r.agent.cpu_time();
        let text = self.specs[r.side]
            .as_ref()
            .map(|s| s.text.clone())
            .unwrap_or_default();
        let (signal, _) = r.agent.stop()?;
        let rec = &mut self.records[r.side];
        rec.measured_s += measured;
        if let Some(c) = &cpu {
            rec.cpu_s += c.total_ns.saturating_sub(r.cpu_at_ready.total_ns) as f64 / 1e9;
            rec.add_by_cpu(&c.by_cpu_s_since(&r.cpu_at_ready));
        }
        rec.stopped_by.push(signal);
        let until = std::time::Instant::now() + crate::processes::during::RETURN_WAIT;
        loop {
            let left = Inventory::read().differences(&r.before);
            if left.is_empty() {
                return Ok(());
            }
            if std::time::Instant::now() > until {
                return Err(crate::processes::during::DuringFailed(format!(
                    "after `{text}` stopped, the system did not return to what it was before it started ({}): the other side would be measured with it still attached, so the comparison is void",
                    left.join("; ")
                ))
                .into());
            }
            self.stop.check()?;
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Sides for WithDuring<'_> {
    fn count(&self) -> usize {
        self.inner.count()
    }

    fn repeat(
        &mut self,
        side: usize,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<CaseResult>, Stopped> {
        self.switch_to(side)?;
        let out = self.inner.repeat(side, b, opts)?;
        if let Some(r) = self.running.as_mut()
            && let Some(f) = r.agent.exited()
        {
            return Err(f.into());
        }
        Ok(out)
    }

    fn blocks(&self) -> bool {
        true
    }

    fn finish(&mut self) -> Result<(), Stopped> {
        self.end_running()?;
        self.inner.finish()
    }
}
