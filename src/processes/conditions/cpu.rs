//! The measuring-CPU condition: a side measured on a CPU of its own (`ab --a-cpu/--b-cpu`),
//! to compare two CPUs of one machine (an isolated CPU and a housekeeping one, two SMT
//! siblings, a big core and a little one) in alternation, as two wrappers are. Entering a
//! side points its next worker at that CPU; single-thread benchmarks are pinned there, and
//! two-party ones place their second party from it as from any measuring CPU.

use super::{Condition, Launch, Side, Stopped};

/// Every side's own measuring CPU (`None`: the plan's).
pub struct MeasuringCpus(Vec<Option<usize>>);

impl MeasuringCpus {
    /// The CPUs of `sides`, in order.
    pub fn of(sides: &[Side]) -> MeasuringCpus {
        MeasuringCpus(sides.iter().map(|s| s.cpu).collect())
    }

    fn get(&self, side: usize) -> Option<usize> {
        self.0.get(side).copied().flatten()
    }
}

impl Condition for MeasuringCpus {
    fn words(&self, side: usize) -> Option<String> {
        self.get(side).map(|c| format!("CPU {c}"))
    }

    fn enter(&mut self, side: usize, launch: &mut Launch) -> Result<(), Stopped> {
        if let Some(c) = self.get(side) {
            launch.opts.cpu = c;
        }
        Ok(())
    }
}
