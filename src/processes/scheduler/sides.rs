//! The sides a plan is measured on, as the scheduler sees them: how many, how one repetition
//! of a side is measured, whether switching sides asks for blocks, and the end of measuring.
//! In a run every side is `Conditioned`: one repeater (the coordinator) and the sides'
//! conditions (`processes::conditions`), each entered before a repetition of its side and
//! asked after it whether it held. The tests give each side a repeater of its own (`Plain`).

use crate::bench::entry::Benchmark;
use crate::bench::runner::{CaseResult, WorkerOptions};
use crate::processes::conditions::{Condition, Launch, Stopped};
use crate::processes::worker::Coordinator;

/// What measures one repetition of one benchmark: in a run, a worker process started by the
/// coordinator (under the launch's wrapper); in tests, a fake, so that rounds, interleaving,
/// the stop rule and interrupts are checked without starting a process.
pub trait Repeater {
    /// Measure one repetition of `b` in a fresh worker, started as `launch` says.
    fn repeat(&self, b: &Benchmark, launch: &Launch) -> Result<Vec<CaseResult>, Stopped>;
}

impl Repeater for Coordinator {
    /// The worker under the launch's wrapper; a wrapper pinned to the measuring CPU
    /// (`Plan::pin_wrapper`) follows the launch's CPU, which a side may have of its own.
    fn repeat(&self, b: &Benchmark, launch: &Launch) -> Result<Vec<CaseResult>, Stopped> {
        let c = Coordinator {
            wrapper: launch.wrapper.clone(),
            pin_cpu: self.pin_cpu.map(|_| launch.opts.cpu),
            ..self.clone()
        };
        Ok(c.run(b, &launch.opts)?)
    }
}

/// The sides of a measurement (one for a run, A and B for `ab`), and what switching to one
/// takes. One value owns every side's conditions, so switching between sides needs no state
/// shared between them.
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

/// Sides measured by one repeater under their conditions: before each repetition every
/// condition is entered in order (each may change the launch), after it each is asked whether
/// it held.
pub(super) struct Conditioned<'a, 'c> {
    pub(super) repeater: &'a dyn Repeater,
    pub(super) count: usize,
    pub(super) conditions: &'a mut [Box<dyn Condition + 'c>],
}

impl Sides for Conditioned<'_, '_> {
    fn count(&self) -> usize {
        self.count
    }

    fn repeat(
        &mut self,
        side: usize,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<CaseResult>, Stopped> {
        let mut launch = Launch {
            wrapper: vec![],
            opts: opts.clone(),
        };
        for c in self.conditions.iter_mut() {
            c.enter(side, &mut launch)?;
        }
        let out = self.repeater.repeat(b, &launch)?;
        for c in self.conditions.iter_mut() {
            c.held(side)?;
        }
        Ok(out)
    }

    fn blocks(&self) -> bool {
        self.conditions.iter().any(|c| c.blocks())
    }

    fn finish(&mut self) -> Result<(), Stopped> {
        // Every condition is finished, also after one fails: a program still running must be
        // stopped whatever else went wrong.
        let mut first = Ok(());
        for c in self.conditions.iter_mut() {
            let r = c.finish();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Sides that differ only in their repeater (the tests' fakes, one per side).
#[cfg(test)]
pub(super) struct Plain<'a>(pub(super) Vec<&'a dyn Repeater>);

#[cfg(test)]
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
        let launch = Launch {
            wrapper: vec![],
            opts: opts.clone(),
        };
        self.0[side].repeat(b, &launch)
    }
}
