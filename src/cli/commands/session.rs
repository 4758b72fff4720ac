//! One measuring session: the ordered steps every measuring command goes through (`run`, a
//! `--runs` series, `ab`, `predict`), owned by one function so that the guarantees of
//! ARCHITECTURE sections 4 and 5b hold for each command by construction, not by each
//! command's care. The steps, in order:
//!
//! 1. signals caught and the watchdog set (`signals::guard_processes`), before anything starts;
//! 2. the measurement prepared: everything that can be refused (ids, the CPU, programs, the
//!    plan) refused before anything changes;
//! 3. the store proven (created when new): a run that cannot be saved is found before minutes
//!    of measuring, and nothing has been changed to put back yet;
//! 4. the sides' kernel settings held: checked, handed to a guard process that outlives a
//!    SIGKILL, and tried once (`session::kernel_settings`);
//! 5. each measurement (one; N in a series): the CPU settled, then measured, each side's
//!    conditions (`processes::conditions`, the held settings lent to it) entered before each
//!    of its repetitions;
//! 6. the settings put back after the last measurement, whatever it returned, before
//!    anything is saved or written (and on every error path; the guard's drop and the guard
//!    process are the backstops);
//! 7. a signal before the save discards the measurement (nothing saved, nothing written);
//! 8. saved in one transaction, or kept whole as a file when the store refuses, and said; in a
//!    series, a store that refuses ends it (the next run would be refused too);
//! 9. delivered (exported, printed, drawn) only after the save, so a terminal that cannot be
//!    written loses no run; one part failing does not stop the others (exit 1, naming it);
//! 10. a signal since the first save ends the command naming what was saved (exit 128+N).
//!
//! The effects are behind `Surroundings` (`Live`: signals, the store, the settings guard; a
//! recording fake in the tests), the command's own parts behind `MeasuringCommand`, so the
//! order is written once (`run`) and tested once, on fakes (`session/tests.rs`).

use crate::base::model::Run;
use crate::base::stop::{Interrupted, Stop};
use crate::effects::gate::Passed;
use crate::effects::settings_guard::Guard;
use crate::effects::store::Store;
use crate::processes::conditions::{HeldSettings, KernelSettings};

mod steps;
pub use steps::{Guarded, after_save, conclude, kernel_settings, save_or_keep};

/// The effects a session orders around a measurement: `Live` on a machine, a fake in tests.
pub trait Surroundings {
    /// Step 1: signals caught, the watchdog set; the stop every later step checks.
    fn guard_processes(&mut self) -> anyhow::Result<Stop>;
    /// Step 3: the store saved into proven (and created when new); nothing when the command
    /// saves nothing.
    fn prove_store(&mut self) -> anyhow::Result<()>;
    /// Step 4: the kernel settings of the sides checked, guarded and tried; false when the
    /// command sets none.
    fn hold_settings(&mut self) -> anyhow::Result<bool>;
    /// The settings held, lent to a measurement with what switches them (`None`: none held).
    fn settings(&mut self) -> Option<KernelSettings<'_>>;
    /// Step 6: everything held put back; what would not go back, in words. A second call
    /// finds nothing held.
    fn put_back(&mut self) -> Vec<String>;
    /// Step 8: `runs` saved in one transaction: their ids and the store as shown, or `None`
    /// when nothing is saved (--no-save) or the store refused (the runs kept as files, said
    /// in `late`). An `Interrupted` error when a signal came before the commit.
    fn save(
        &mut self,
        runs: &[&Run],
        stop: &Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<Option<(Vec<i64>, String)>>;
}

/// A measuring command's own parts, called by `run` in the session's order.
pub trait MeasuringCommand {
    /// Step 2: refuse what can be refused (exit 2) before anything changes.
    fn prepare(&mut self, stop: &Stop) -> anyhow::Result<()>;
    /// How many measurements the session takes, each saved as it ends (a series: N).
    fn count(&self) -> usize {
        1
    }
    /// Step 5, first half: look at the CPUs (`plan::settle_cpu`) for measurement `i`.
    fn settle(&mut self, i: usize) -> anyhow::Result<()>;
    /// Step 5: measurement `i`, its sides under the kernel settings held (`settings`,
    /// switched before each repetition of a side), its runs marked with them.
    fn measure(
        &mut self,
        i: usize,
        settings: Option<KernelSettings<'_>>,
        stop: &Stop,
    ) -> anyhow::Result<()>;
    /// The runs measurement `i` gave, saved together.
    fn runs(&self, i: usize) -> Vec<&Run>;
    /// Measurement `i`'s runs were saved as `ids` in `store`: say so.
    fn saved(&mut self, i: usize, ids: &[i64], store: &str);
    /// Between measurements `i` and `i + 1` (a series' pause): a signal ends it at once.
    fn between(&mut self, _i: usize, _stop: &Stop) -> anyhow::Result<()> {
        Ok(())
    }
    /// Step 9: export, print and draw what was measured; a part that fails goes to `late`.
    /// `saved` names what was saved, for the message of a signal that comes now.
    fn deliver(
        &mut self,
        saved: Option<&str>,
        stop: &Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<i32>;
    /// Every run measured, for the exit status (a failed benchmark is exit 1).
    fn all_runs(&self) -> Vec<&Run>;
}

/// Run the session: the steps of the module's comment, in that order. The exit status of a
/// command that measured (0, or 1 when a benchmark or a late step failed); an error before
/// measuring (usage, exit 2; the store's), or the interrupt that stopped it.
pub fn run(s: &mut dyn Surroundings, m: &mut dyn MeasuringCommand) -> anyhow::Result<i32> {
    let stop = s.guard_processes()?;
    m.prepare(&stop)?;
    s.prove_store()?;
    s.hold_settings()?;
    let mut late = Vec::new();
    let measured = measure_all(s, m, &stop, &mut late);
    // On the error paths the settings are still held: put back now, and said, since no
    // table follows.
    for l in s.put_back() {
        crate::say!("oscost: {l}");
    }
    let saved = saved_text(&measured?);
    let code = m.deliver(saved.as_deref(), &stop, &mut late)?;
    after_save(&stop, saved)?;
    Ok(code.max(conclude(&m.all_runs(), &late)))
}

/// Steps 5 to 8 for every measurement: the saves made, as (ids, store); the settings put
/// back once the last has measured. An error names the runs saved before it.
fn measure_all(
    s: &mut dyn Surroundings,
    m: &mut dyn MeasuringCommand,
    stop: &Stop,
    late: &mut Vec<String>,
) -> anyhow::Result<Vec<(Vec<i64>, String)>> {
    let n = m.count();
    let mut saved: Vec<(Vec<i64>, String)> = Vec::new();
    for i in 0..n {
        let last = i + 1 == n;
        let measured = m.settle(i).and_then(|()| m.measure(i, s.settings(), stop));
        if last {
            late.extend(s.put_back());
        }
        measured
            .and_then(|()| Ok(stop.check()?))
            .map_err(|e| after_saves(e, &saved))?;
        match s.save(&m.runs(i), stop, late) {
            Ok(Some((ids, store))) => {
                m.saved(i, &ids, &store);
                saved.push((ids, store));
            }
            // Kept as files (said in `late`), or not saving: a series stops at a store that
            // refuses, since its next run would be refused too.
            Ok(None) if !last => break,
            Ok(None) => {}
            Err(e) => return Err(after_saves(e, &saved)),
        }
        if !last {
            m.between(i, stop).map_err(|e| after_saves(e, &saved))?;
        }
    }
    Ok(saved)
}

/// What was saved, in words: "run 7 in S", "runs 7 and 8 in S", "runs 7, 8, 9 in S".
pub(super) fn saved_text(saved: &[(Vec<i64>, String)]) -> Option<String> {
    let (_, store) = saved.first()?;
    let ids: Vec<String> = saved
        .iter()
        .flat_map(|(ids, _)| ids)
        .map(i64::to_string)
        .collect();
    Some(match ids.as_slice() {
        [one] => format!("run {one} in {store}"),
        [a, b] => format!("runs {a} and {b} in {store}"),
        many => format!("runs {} in {store}", many.join(", ")),
    })
}

/// An interrupt after some saves names them (exit 128+N, not "nothing was saved"); any other
/// error is itself.
fn after_saves(e: anyhow::Error, saved: &[(Vec<i64>, String)]) -> anyhow::Error {
    match (e.downcast_ref::<Interrupted>(), saved_text(saved)) {
        (Some(i), Some(saved)) => {
            crate::effects::signals::InterruptedAfterSave { signal: i.0, saved }.into()
        }
        _ => e,
    }
}

/// The surroundings on a machine: the gate's pass (the store and the settings it resolved),
/// the store once proven, the guard while settings are held.
pub struct Live {
    passed: Passed,
    saves: bool,
    settle_s: f64,
    store: Option<Store>,
    guard: Option<Guard>,
    held: HeldSettings,
}

impl Live {
    /// Around a command that passed the gate: `saves` unless --no-save; `settle_s` after each
    /// setting written.
    pub fn new(passed: Passed, saves: bool, settle_s: f64) -> Live {
        Live {
            passed,
            saves,
            settle_s,
            store: None,
            guard: None,
            held: HeldSettings::default(),
        }
    }
}

impl Surroundings for Live {
    fn guard_processes(&mut self) -> anyhow::Result<Stop> {
        Ok(crate::effects::signals::guard_processes()?)
    }

    fn prove_store(&mut self) -> anyhow::Result<()> {
        if self.saves {
            self.store = Some(super::saving_store(&mut self.passed)?);
        }
        Ok(())
    }

    fn hold_settings(&mut self) -> anyhow::Result<bool> {
        let Some((guard, sides, before)) = kernel_settings(&mut self.passed, self.settle_s)? else {
            return Ok(false);
        };
        self.guard = Some(guard);
        self.held = HeldSettings {
            sides,
            before,
            settle_s: self.settle_s,
        };
        Ok(true)
    }

    fn settings(&mut self) -> Option<KernelSettings<'_>> {
        let guard = self.guard.as_mut()?;
        Some(KernelSettings {
            held: &self.held,
            guard,
        })
    }

    fn put_back(&mut self) -> Vec<String> {
        self.guard.take().map(Guard::restore).unwrap_or_default()
    }

    fn save(
        &mut self,
        runs: &[&Run],
        stop: &Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<Option<(Vec<i64>, String)>> {
        let Some(store) = self.store.as_mut() else {
            return Ok(None);
        };
        Ok(save_or_keep(store, runs, stop, late)?.map(|ids| (ids, store.shown())))
    }
}

#[cfg(test)]
mod tests;
