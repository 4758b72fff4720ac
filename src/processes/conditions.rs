//! What a side is measured under: its conditions. A side (`Side`) is one value, the spec of
//! each condition it has; a measurement turns its sides into a list of `Condition`s
//! (`of`), one per kind, each in a file of its own: the wrapper its workers start under
//! (`wrapper`), the kernel settings switched to before its repetitions (`settings`), a program
//! run during it (`during`), the CPU it is measured on (`cpu`). The scheduler knows only the
//! trait: before each repetition of a side it enters every condition in order (each may
//! change how the worker is launched, `Launch`), measures, asks each whether it still held,
//! and once measuring is over finishes them; each then marks the side's run with what it was
//! measured under. Holding what must be put back (the settings guard) and declaring it to the
//! gate stay with the session that owns the command's effects; a condition is lent what it
//! switches (`settings::KernelSettings`).
//!
//! A new kind of condition is a file here, a field of `Side`, a line of `of` and its flags
//! (`cli::commands::args::SideFlags`).

use crate::base::model::Run;
use crate::base::stop::{Interrupted, Stop};
use crate::bench::runner::WorkerOptions;
use crate::processes::during::DuringSpec;

pub mod cpu;
pub mod during;
pub mod settings;
#[cfg(test)]
mod tests;
pub mod wrapper;

pub use settings::{HeldSettings, KernelSettings, Switch};
pub use wrapper::Wrapper;

/// One side of a measurement, as specified: each condition it is measured under (none: the
/// plain system). Its kernel settings, where it has any, are the session's
/// (`KernelSettings`), by the side's index.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// The command its workers start under (`--under`, `--a`, `--b`).
    pub wrapper: Option<Wrapper>,
    /// A program run during the side (`--during`, `--a-during`), started before each block
    /// of its repetitions and stopped after.
    pub during: Option<DuringSpec>,
    /// The CPU the side is measured on, where it is not the plan's (`ab --a-cpu/--b-cpu`).
    pub cpu: Option<usize>,
}

/// How one repetition's worker is started: the command it runs under and its options, as
/// the side's conditions made them.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The wrapper's command line (empty: none).
    pub wrapper: Vec<String>,
    /// What the worker is given.
    pub opts: WorkerOptions,
}

/// Why measuring stopped before its plan was done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// A signal came (SIGINT, SIGTERM, SIGHUP).
    #[error(transparent)]
    Signal(#[from] Interrupted),
    /// A side's kernel setting did not hold (the kernel did not keep the value): what was
    /// measured would not be of that side, so the comparison is void.
    #[error("a kernel setting did not hold, so the comparison is void: {0}")]
    SettingNotHeld(#[from] crate::effects::settings_guard::NotHeld),
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

/// One case's repetitions as a condition may weigh them: (started, ms since the run began;
/// the repetition's median, ns), in the order measured.
pub type CaseLevels = Vec<(String, Vec<(f64, f64)>)>;

/// What marking a side's run may look at besides the run.
pub struct Marking<'a> {
    /// The side is one of a comparison's (`ab`, `predict`), not a run's only side.
    pub compared: bool,
    /// Each of the side's cases' repetitions.
    pub levels: &'a CaseLevels,
}

/// One kind of condition a measurement's sides are measured under, for every side at once
/// (a side without it is left as it is). The scheduler calls `enter` before each repetition
/// of a side, `held` after it, `finish` once at the end, and `mark` on each side's run.
pub trait Condition {
    /// The side's condition in words ("strace -f", "during `perf stat -a`"); `None` where
    /// the side does not have it.
    fn words(&self, side: usize) -> Option<String>;
    /// Whether switching to another side is dear (a program started and stopped): the
    /// scheduler then measures blocks of one side's rounds rather than one repetition each.
    fn blocks(&self) -> bool {
        false
    }
    /// Make the condition hold for a repetition of `side`, and say how its worker starts.
    fn enter(&mut self, side: usize, launch: &mut Launch) -> Result<(), Stopped>;
    /// After the repetition: whether the condition still held through it.
    fn held(&mut self, _side: usize) -> Result<(), Stopped> {
        Ok(())
    }
    /// Measuring is over: whatever the condition still holds is ended (a program stopped).
    fn finish(&mut self) -> Result<(), Stopped> {
        Ok(())
    }
    /// Mark `side`'s run with what it was measured under (fields, notes, label).
    fn mark(&self, _side: usize, _run: &mut Run, _marking: &Marking) {}
}

/// The conditions of `sides`, one per kind some side has, in the order they are entered:
/// the wrapper, the program during (started before the settings are switched, as it would
/// run on a system set so), the kernel settings (`settings`, the session's), the CPU.
/// `started` is the run's start, which the program's spans are timed from.
pub fn of<'a>(
    sides: &[Side],
    settings: Option<KernelSettings<'a>>,
    stop: &Stop,
    started: std::time::Instant,
) -> Vec<Box<dyn Condition + 'a>> {
    let mut out: Vec<Box<dyn Condition + 'a>> = Vec::new();
    if sides.iter().any(|s| s.wrapper.is_some()) {
        out.push(Box::new(wrapper::Wrappers::of(sides)));
    }
    if sides.iter().any(|s| s.during.is_some()) {
        out.push(Box::new(during::DuringProgram::new(
            sides,
            stop.clone(),
            started,
        )));
    }
    if let Some(s) = settings {
        out.push(Box::new(s));
    }
    if sides.iter().any(|s| s.cpu.is_some()) {
        out.push(Box::new(cpu::MeasuringCpus::of(sides)));
    }
    out
}

/// A side in words: each of its conditions' words joined by " + ", or `None` for the plain
/// system.
pub fn side_words(conditions: &[Box<dyn Condition + '_>], side: usize) -> Option<String> {
    let words: Vec<String> = conditions.iter().filter_map(|c| c.words(side)).collect();
    (!words.is_empty()).then(|| words.join(" + "))
}
