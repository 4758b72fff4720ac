//! The session's order, one test per guarantee, on fakes: surroundings and a measurement
//! that write each step they are asked to take into one log, and fail or see a signal where a
//! test says.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::base::model::testdata;

/// Where a fake fails, or a signal comes.
#[derive(Default, Clone)]
struct Script {
    /// Measurements the fake takes (a series: more than 1).
    count: usize,
    refuse_prepare: bool,
    refuse_store: bool,
    refuse_conditions: bool,
    /// The command has kernel settings to hold.
    conditions: bool,
    /// A measurement that fails with an error.
    fail_measure: Option<usize>,
    /// A measurement during which a signal comes.
    signal_in_measure: Option<usize>,
    /// A signal during the delivery (after the save).
    signal_in_deliver: bool,
    /// The store refuses: the runs are kept as files.
    store_refuses: bool,
}

type Log = Rc<RefCell<Vec<String>>>;

struct FakeSurroundings {
    log: Log,
    script: Script,
    stop: Stop,
    held: bool,
    settings: HeldSettings,
    switch: NoSwitch,
    next_id: i64,
}

/// Settings that are never switched: the session only lends them.
struct NoSwitch;

impl crate::processes::conditions::Switch for NoSwitch {
    fn apply(&mut self, _i: usize) -> Result<(), crate::effects::settings_guard::NotHeld> {
        Ok(())
    }

    fn task_settings(&self, _i: usize) -> Vec<(String, String)> {
        vec![]
    }
}

impl Surroundings for FakeSurroundings {
    fn guard_processes(&mut self) -> anyhow::Result<Stop> {
        self.log.borrow_mut().push("guard processes".into());
        Ok(self.stop.clone())
    }

    fn prove_store(&mut self) -> anyhow::Result<()> {
        self.log.borrow_mut().push("prove store".into());
        if self.script.refuse_store {
            anyhow::bail!("the store cannot be written");
        }
        Ok(())
    }

    fn hold_settings(&mut self) -> anyhow::Result<bool> {
        if !self.script.conditions {
            return Ok(false);
        }
        self.log.borrow_mut().push("hold conditions".into());
        if self.script.refuse_conditions {
            anyhow::bail!("a setting was refused");
        }
        self.held = true;
        Ok(true)
    }

    fn settings(&mut self) -> Option<KernelSettings<'_>> {
        self.held.then_some(KernelSettings {
            held: &self.settings,
            guard: &mut self.switch,
        })
    }

    fn put_back(&mut self) -> Vec<String> {
        if std::mem::take(&mut self.held) {
            self.log.borrow_mut().push("put back".into());
        }
        vec![]
    }

    fn save(
        &mut self,
        runs: &[&Run],
        stop: &Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<Option<(Vec<i64>, String)>> {
        stop.check()?;
        if self.script.store_refuses {
            self.log.borrow_mut().push("keep".into());
            late.push("the run was not saved: kept as a file".into());
            return Ok(None);
        }
        let ids: Vec<i64> = runs
            .iter()
            .map(|_| {
                self.next_id += 1;
                self.next_id
            })
            .collect();
        self.log.borrow_mut().push(format!("save {ids:?}"));
        Ok(Some((ids, "s.db".into())))
    }
}

struct FakeMeasurement {
    log: Log,
    script: Script,
    runs: Vec<Run>,
}

impl MeasuringCommand for FakeMeasurement {
    fn prepare(&mut self, _stop: &Stop) -> anyhow::Result<()> {
        self.log.borrow_mut().push("prepare".into());
        if self.script.refuse_prepare {
            return Err(super::super::usage("no such benchmark"));
        }
        Ok(())
    }

    fn count(&self) -> usize {
        self.script.count.max(1)
    }

    fn settle(&mut self, i: usize) -> anyhow::Result<()> {
        self.log.borrow_mut().push(format!("settle {i}"));
        Ok(())
    }

    fn measure(
        &mut self,
        i: usize,
        settings: Option<KernelSettings<'_>>,
        stop: &Stop,
    ) -> anyhow::Result<()> {
        let under = if settings.is_some() { " under" } else { "" };
        self.log.borrow_mut().push(format!("measure {i}{under}"));
        if self.script.signal_in_measure == Some(i) {
            stop.raise(libc::SIGTERM);
        }
        if self.script.fail_measure == Some(i) {
            anyhow::bail!("a worker failed");
        }
        self.runs.push(testdata::run());
        Ok(())
    }

    fn runs(&self, i: usize) -> Vec<&Run> {
        vec![&self.runs[i]]
    }

    fn saved(&mut self, i: usize, ids: &[i64], _store: &str) {
        self.log.borrow_mut().push(format!("say saved {i} {ids:?}"));
    }

    fn between(&mut self, i: usize, stop: &Stop) -> anyhow::Result<()> {
        self.log.borrow_mut().push(format!("pause {i}"));
        Ok(stop.check()?)
    }

    fn deliver(
        &mut self,
        saved: Option<&str>,
        stop: &Stop,
        _late: &mut Vec<String>,
    ) -> anyhow::Result<i32> {
        self.log
            .borrow_mut()
            .push(format!("deliver {}", saved.unwrap_or("nothing saved")));
        if self.script.signal_in_deliver {
            stop.raise(libc::SIGINT);
        }
        Ok(0)
    }

    fn all_runs(&self) -> Vec<&Run> {
        self.runs.iter().collect()
    }
}

/// The session run on fakes following `script`: its outcome and the steps taken, in order.
fn session(script: Script) -> (anyhow::Result<i32>, Vec<String>) {
    let log: Log = Rc::default();
    let mut s = FakeSurroundings {
        log: log.clone(),
        script: script.clone(),
        stop: Stop::never(),
        held: false,
        settings: HeldSettings::default(),
        switch: NoSwitch,
        next_id: 6,
    };
    let mut m = FakeMeasurement {
        log: log.clone(),
        script,
        runs: vec![],
    };
    let out = run(&mut s, &mut m);
    let steps = log.borrow().clone();
    (out, steps)
}

fn steps(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The whole order: processes guarded first; everything refusable refused, the store
/// proven and the conditions held before measuring; put back before saving; delivered only
/// after the save.
#[test]
fn every_step_comes_in_its_order() {
    let (out, log) = session(Script {
        conditions: true,
        ..Script::default()
    });
    assert_eq!(out.unwrap(), 0);
    assert_eq!(
        log,
        steps(&[
            "guard processes",
            "prepare",
            "prove store",
            "hold conditions",
            "settle 0",
            "measure 0 under",
            "put back",
            "save [7]",
            "say saved 0 [7]",
            "deliver run 7 in s.db",
        ])
    );
}

/// A refusal before measuring changes nothing: no store created, no setting touched, nothing
/// measured.
#[test]
fn a_refusal_comes_before_anything_changes() {
    let (out, log) = session(Script {
        refuse_prepare: true,
        conditions: true,
        ..Script::default()
    });
    assert!(out.is_err());
    assert_eq!(log, steps(&["guard processes", "prepare"]));
    let (out, log) = session(Script {
        refuse_store: true,
        conditions: true,
        ..Script::default()
    });
    assert!(out.is_err());
    assert_eq!(log, steps(&["guard processes", "prepare", "prove store"]));
    let (out, log) = session(Script {
        refuse_conditions: true,
        conditions: true,
        ..Script::default()
    });
    assert!(out.is_err());
    assert!(!log.iter().any(|s| s.starts_with("measure")), "{log:?}");
}

/// A measurement that fails puts the conditions back and saves and writes nothing.
#[test]
fn a_failed_measurement_puts_back_and_keeps_nothing() {
    let (out, log) = session(Script {
        conditions: true,
        fail_measure: Some(0),
        ..Script::default()
    });
    assert!(out.unwrap_err().to_string().contains("a worker failed"));
    assert_eq!(log.last().map(String::as_str), Some("put back"), "{log:?}");
    assert!(
        !log.iter()
            .any(|s| s.starts_with("save") || s.starts_with("deliver"))
    );
}

/// A signal during measuring: put back, nothing saved, nothing written, the interrupt
/// returned (exit 128+N, "nothing was saved").
#[test]
fn a_signal_before_the_save_discards_the_measurement() {
    let (out, log) = session(Script {
        conditions: true,
        signal_in_measure: Some(0),
        ..Script::default()
    });
    let e = out.unwrap_err();
    assert_eq!(
        e.downcast_ref::<Interrupted>(),
        Some(&Interrupted(libc::SIGTERM))
    );
    assert!(log.contains(&"put back".to_string()));
    assert!(
        !log.iter()
            .any(|s| s.starts_with("save") || s.starts_with("deliver"))
    );
}

/// A signal after the save: the rest is still delivered, and the command ends as an
/// interrupt naming what was saved.
#[test]
fn a_signal_after_the_save_names_what_was_saved() {
    let (out, log) = session(Script {
        signal_in_deliver: true,
        ..Script::default()
    });
    let e = out.unwrap_err();
    let after = e
        .downcast_ref::<crate::effects::signals::InterruptedAfterSave>()
        .expect("an interrupt after a save");
    assert_eq!(after.saved, "run 7 in s.db");
    assert!(log.iter().any(|s| s.starts_with("deliver")));
}

/// A store that refuses at the save keeps the run (said, exit 1) and still delivers it.
#[test]
fn a_refused_save_keeps_the_run_and_delivers_it() {
    let (out, log) = session(Script {
        store_refuses: true,
        ..Script::default()
    });
    assert_eq!(out.unwrap(), 1);
    assert_eq!(
        &log[log.len() - 2..],
        &steps(&["keep", "deliver nothing saved"])[..]
    );
}

/// A series: the conditions are held over every run and put back after the last measures,
/// before its save; each run is saved as it ends; a pause between runs.
#[test]
fn a_series_holds_its_conditions_to_the_last_run_and_saves_each() {
    let (out, log) = session(Script {
        count: 3,
        conditions: true,
        ..Script::default()
    });
    assert_eq!(out.unwrap(), 0);
    assert_eq!(
        log[3..],
        steps(&[
            "hold conditions",
            "settle 0",
            "measure 0 under",
            "save [7]",
            "say saved 0 [7]",
            "pause 0",
            "settle 1",
            "measure 1 under",
            "save [8]",
            "say saved 1 [8]",
            "pause 1",
            "settle 2",
            "measure 2 under",
            "put back",
            "save [9]",
            "say saved 2 [9]",
            "deliver runs 7, 8, 9 in s.db",
        ])[..]
    );
}

/// A series stopped by a signal after some saves names them, and puts back.
#[test]
fn a_series_interrupted_names_the_runs_it_saved() {
    let (out, log) = session(Script {
        count: 3,
        conditions: true,
        signal_in_measure: Some(1),
        ..Script::default()
    });
    let e = out.unwrap_err();
    let after = e
        .downcast_ref::<crate::effects::signals::InterruptedAfterSave>()
        .expect("an interrupt after a save");
    assert_eq!(after.saved, "run 7 in s.db");
    assert_eq!(log.last().map(String::as_str), Some("put back"), "{log:?}");
    assert!(!log.iter().any(|s| s.starts_with("deliver")));
}

/// A series whose store refuses a run stops there (the next would be refused too), puts
/// back, and delivers what it measured.
#[test]
fn a_series_stops_at_a_store_that_refuses() {
    let (out, log) = session(Script {
        count: 3,
        conditions: true,
        store_refuses: true,
        ..Script::default()
    });
    assert_eq!(out.unwrap(), 1);
    assert!(!log.contains(&"measure 1 under".to_string()), "{log:?}");
    let put_back = log.iter().position(|s| s == "put back").unwrap();
    let delivered = log.iter().position(|s| s.starts_with("deliver")).unwrap();
    assert!(put_back < delivered, "{log:?}");
}
