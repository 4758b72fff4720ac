//! The wrapper condition: the command a side's workers start under (`run --under`, `ab
//! --a/--b`, `predict --under`), a tracer or a sandbox that wraps the measured process and
//! its children. Entering a side only names the command its next worker is started under;
//! the run is marked with it as given (`Run::wrapper`).

use super::{Condition, Launch, Side, Stopped};
use crate::base::model::Run;

/// A side's wrapper: its command line split like a shell, and as the user gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapper {
    /// The command line, split.
    pub argv: Vec<String>,
    /// As given.
    pub text: String,
}

/// Every side's wrapper (`None`: its workers start directly).
pub struct Wrappers(Vec<Option<Wrapper>>);

impl Wrappers {
    /// The wrappers of `sides`, in order.
    pub fn of(sides: &[Side]) -> Wrappers {
        Wrappers(sides.iter().map(|s| s.wrapper.clone()).collect())
    }

    fn get(&self, side: usize) -> Option<&Wrapper> {
        self.0.get(side).and_then(Option::as_ref)
    }
}

impl Condition for Wrappers {
    fn words(&self, side: usize) -> Option<String> {
        self.get(side).map(|w| w.text.clone())
    }

    fn enter(&mut self, side: usize, launch: &mut Launch) -> Result<(), Stopped> {
        launch.wrapper = self.get(side).map(|w| w.argv.clone()).unwrap_or_default();
        Ok(())
    }

    fn mark(&self, side: usize, run: &mut Run, _marking: &super::Marking) {
        run.wrapper = self.get(side).map(|w| w.text.clone());
    }
}
