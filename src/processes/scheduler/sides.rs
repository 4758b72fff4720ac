//! The sides a plan is measured on, and what stops the measuring. A side is a set of
//! conditions made to hold before each of its repetitions: its repeater (the coordinator of
//! its wrapper, or of none; a fake in tests) and, for `Switched` sides, its kernel settings.
//! One `Sides` value owns every side's conditions, so switching needs no shared state; the
//! next condition (a program running during a side) is another implementation.

use crate::base::stop::Interrupted;
use crate::harness::case::Benchmark;
use crate::harness::runner::{CaseResult, WorkerOptions};
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
