//! The kernel-settings condition: each side's sysfs and /proc/sys values (`run --set`, `ab
//! --a-set/--b-set`), switched to before each of its repetitions. What is held and put back
//! is the session's: the gate declares the settings, the session hands them to the settings
//! guard (which outlives a SIGKILL of oscost) and puts them back after the last measurement,
//! whatever it returned. A measurement is lent the held values and what switches them
//! (`KernelSettings`), a `Switch` the guard implements and the tests fake. A value the kernel
//! did not keep ends the measurement (`Stopped::SettingNotHeld`): what was measured would not
//! be of that side.

use std::collections::BTreeMap;

use super::{Condition, Launch, Marking, Stopped};
use crate::base::model::{Note, NoteKind, Run};
use crate::effects::settings_guard::{Guard, NotHeld, SideSettings};

/// The kernel settings held for a command's sides: each side's values, every catalogue
/// setting as it read before anything changed, and the settle time.
#[derive(Debug, Clone, Default)]
pub struct HeldSettings {
    /// Each side's settings (side 0 is a run's one side, or A).
    pub sides: Vec<SideSettings>,
    /// Every catalogue setting as it read before anything was changed.
    pub before: BTreeMap<String, String>,
    /// Seconds waited after a setting is written.
    pub settle_s: f64,
}

/// What switches the system between the sides' settings.
pub trait Switch {
    /// Make side `i`'s system-wide settings hold: written where they differ, read back,
    /// settled.
    fn apply(&mut self, i: usize) -> Result<(), NotHeld>;
    /// Side `i`'s per-task settings, which each worker applies to itself.
    fn task_settings(&self, i: usize) -> Vec<(String, String)>;
}

impl Switch for Guard {
    fn apply(&mut self, i: usize) -> Result<(), NotHeld> {
        Guard::apply(self, i)
    }

    fn task_settings(&self, i: usize) -> Vec<(String, String)> {
        Guard::task_settings(self, i)
    }
}

/// The settings a measurement is lent: the held values and their switch.
pub struct KernelSettings<'a> {
    /// What is held, side by side.
    pub held: &'a HeldSettings,
    /// What switches between them.
    pub guard: &'a mut dyn Switch,
}

impl Condition for KernelSettings<'_> {
    fn words(&self, side: usize) -> Option<String> {
        self.held.sides.get(side).and_then(SideSettings::text)
    }

    fn enter(&mut self, side: usize, launch: &mut Launch) -> Result<(), Stopped> {
        self.guard.apply(side)?;
        launch.opts.task_settings = self.guard.task_settings(side);
        Ok(())
    }

    /// The run keeps its side's settings (`Run::settings`) and every catalogue value as it
    /// was before (`env.settings`); a run's label says the settings too, since history, the
    /// matrix and the pages title a run by it (a comparison's sides are named by them).
    fn mark(&self, side: usize, run: &mut Run, marking: &Marking) {
        let Some(s) = self.held.sides.get(side) else {
            return;
        };
        let settle = self.held.settle_s;
        run.settings = s.given.clone();
        run.env.settings = self.held.before.clone();
        let text = if marking.compared {
            format!(
                "kernel settings switched before each repetition, read back, {settle} s settle, put back after: {}",
                s.text().unwrap_or_else(|| "as found".into())
            )
        } else {
            let set = format!("set {}", s.given.join(" "));
            run.label = Some(match run.label.take() {
                Some(l) => format!("{l} ({set})"),
                None => set,
            });
            format!(
                "measured under {} (set by oscost, read back, {settle} s settle, put back after)",
                s.given.join(" "),
            )
        };
        run.notes.push(Note::new(NoteKind::Settings, text));
    }
}
