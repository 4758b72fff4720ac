//! Whether a signal has asked oscost to stop, and the one error that says it did. The
//! handlers that set it are `effects::signals`'; everything below them that waits or loops
//! (a counted program, a trace, a worker, a save's commit) asks the same `Stop`, so a signal
//! ends each of them the same way: with `Interrupted`, its number inside.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether a signal has asked this command to stop: the handlers record it, and every place
/// where stopping is safe asks (`check`). The one type for the question, and `Interrupted` the
/// one answer: a save that rolled back, a counted program or a trace cut short all carry it.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicUsize>);

impl Stop {
    /// A stop no handler sets: for commands that install none, and for tests.
    pub fn never() -> Stop {
        Stop::default()
    }

    /// The signal that came, if one has.
    pub fn signal(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s as i32),
        }
    }

    /// `Err(Interrupted)` once a signal has come.
    pub fn check(&self) -> Result<(), Interrupted> {
        self.signal().map_or(Ok(()), |s| Err(Interrupted(s)))
    }

    /// The flag the signal handlers store a signal's number in (`effects::signals`).
    pub fn flag(&self) -> &Arc<AtomicUsize> {
        &self.0
    }

    /// Record `signal` as its handler would (tests of the paths a signal takes).
    pub fn raise(&self, signal: i32) {
        self.0.store(signal as usize, Ordering::SeqCst);
    }
}

/// The run was stopped by a signal; the value is the signal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by signal {0}")]
pub struct Interrupted(pub i32);
