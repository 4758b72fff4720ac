//! The session's own steps (ARCHITECTURE section 4): kernel settings held for the sides
//! (step 4), a run saved or, when the store refuses, kept whole as a file (step 8), what a
//! signal after a save means (step 10), and the exit status once everything is written.

use std::io::Write;
use std::path::PathBuf;

use crate::base::model::{self, Run};
use crate::base::stop::{Interrupted, Stop};
use crate::cli::commands::args::usage;
use crate::effects::store::{self, Store, StoreError};

/// Each run written whole as a run file that `oscost import` reads, in the first of
/// `$XDG_DATA_HOME/oscost/unsaved/`, the current directory and the temporary directory that
/// takes it; streamed, so that a process short of memory can still write it. `None` when a run
/// could be written nowhere.
fn keep_files(runs: &[&Run]) -> Option<Vec<PathBuf>> {
    let dirs: Vec<PathBuf> = [
        store::data_dir().ok().map(|d| d.join("unsaved")),
        Some(PathBuf::from(".")),
        Some(std::env::temp_dir()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut kept = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        // ab's two sides start in the same second: the index keeps their names apart.
        let name = format!(
            "run-{}-{}-{i}.json",
            run.started_at
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-"),
            std::process::id()
        );
        let mut fill = |w: &mut dyn Write| {
            serde_json::to_writer(&mut *w, *run).map_err(std::io::Error::other)?;
            w.write_all(b"\n")
        };
        kept.push(
            dirs.iter()
                .find_map(|d| crate::effects::output::write_new_with(d, &name, &mut fill).ok())?,
        );
    }
    Some(kept)
}

/// The line that says where runs were kept and how to import them.
fn kept_line(kept: &[PathBuf], store: &str) -> String {
    let kept: Vec<String> = kept.iter().map(|p| p.display().to_string()).collect();
    format!(
        "kept in {}: `oscost import {} --db {store}` once the store takes it",
        kept.join(" and "),
        kept.join(" ")
    )
}

/// A measured run is never lost: save `runs` in one transaction, or, when the store refuses,
/// keep each as a run file (`keep_files`) and say where in `late`. Short of memory (the
/// emergency reserve spent, or never mapped: `reserve::short`), the runs are written to disk first, so that an abort in
/// the save still leaves them, and the line naming them is printed before the save is tried.
/// `Ok(Some(ids))` when saved, `Ok(None)` when kept or lost (said in `late`), and the
/// interrupt's error when a signal came before the commit (nothing saved, nothing kept).
pub fn save_or_keep(
    store: &mut Store,
    runs: &[&Run],
    stop: &Stop,
    late: &mut Vec<String>,
) -> anyhow::Result<Option<Vec<i64>>> {
    let what = if runs.len() == 1 {
        "the run was"
    } else {
        "the runs were"
    };
    let shown = store.shown();
    let early = if crate::base::reserve::short() {
        let kept = keep_files(runs);
        if let Some(k) = &kept {
            let files: Vec<String> = k.iter().map(|p| p.display().to_string()).collect();
            crate::say!(
                "oscost: memory is short: written first to {} (removed once saved; if oscost dies saving, `oscost import` it)",
                files.join(" and ")
            );
        }
        kept
    } else {
        None
    };
    let forget = |k: &Option<Vec<PathBuf>>| {
        for p in k.iter().flatten() {
            let _ = std::fs::remove_file(p);
        }
    };
    match store.save_all(runs, stop) {
        Ok(ids) => {
            forget(&early);
            Ok(Some(ids))
        }
        Err(StoreError::Interrupted(i)) => {
            forget(&early);
            Err(i.into())
        }
        Err(why) => {
            let kept = early.or_else(|| keep_files(runs));
            late.push(match kept {
                Some(k) => format!(
                    "{what} not saved in {shown}: {why}; {}",
                    kept_line(&k, &shown)
                ),
                None => format!(
                    "{what} not saved in {shown}: {why}; and could not be written anywhere to keep"
                ),
            });
            Ok(None)
        }
    }
}

/// Kernel settings being measured under: the guard that puts them back, each side's settings,
/// and every catalogue setting as it read before anything was changed.
pub type Guarded = (
    crate::effects::settings_guard::Guard,
    Vec<crate::effects::settings_guard::SideSettings>,
    std::collections::BTreeMap<String, String>,
);

/// Kernel settings for the sides of a measurement (`run --set`, `ab --a-set/--b-set`),
/// resolved and checked by the gate (`passed`): the originals read and guarded, every side's
/// values tried once and put back, all before measuring (a refusal is a usage error, nothing
/// left changed). `None` when the command declared none. Also returns every catalogue setting
/// as it read before.
pub fn kernel_settings(
    passed: &mut crate::effects::gate::Passed,
    settle_s: f64,
) -> anyhow::Result<Option<Guarded>> {
    let Some(prepared) = passed.settings() else {
        return Ok(None);
    };
    let cpus = crate::measuring::placement::allowed_cpus();
    let before = crate::machine::settings::snapshot(&cpus);
    let mut said = Vec::new();
    let started = crate::effects::settings_guard::Guard::start(
        prepared.clone(),
        std::time::Duration::from_secs_f64(settle_s),
        &mut said,
    );
    for line in said {
        crate::say!("oscost: {line}");
    }
    // Refused before anything was changed: another oscost holds a file, or its state cannot
    // be kept.
    let mut guard = started.map_err(|e| usage(e.to_string()))?;
    guard.trial().map_err(|e| usage(e.to_string()))?;
    Ok(Some((guard, prepared, before)))
}

/// After a save: a signal that came since ends the command as an interrupt that names what was
/// saved (exit 128+N), whatever else was left to write.
pub fn after_save(stop: &Stop, saved: Option<String>) -> anyhow::Result<()> {
    match (stop.signal(), saved) {
        (None, _) => Ok(()),
        (Some(signal), Some(saved)) => {
            Err(crate::effects::signals::InterruptedAfterSave { signal, saved }.into())
        }
        (Some(s), None) => Err(Interrupted(s).into()),
    }
}

/// The exit status of a measuring command once everything is written: 1, with one line each,
/// when a benchmark failed or something after measuring (`late`) could not be done; else 0.
pub fn conclude(runs: &[&Run], late: &[String]) -> i32 {
    for l in late {
        crate::say!("oscost: {l}");
    }
    let results = runs.iter().flat_map(|r| &r.results);
    let failed: Vec<&str> = results
        .clone()
        .filter(|r| matches!(r.status, model::Status::Failed { .. }))
        .map(|r| r.id.as_str())
        .collect();
    if !failed.is_empty() {
        // ab's two sides share ids: name each once.
        let mut names: Vec<&str> = Vec::new();
        for id in &failed {
            if !names.contains(id) {
                names.push(id);
            }
        }
        let shown = names.iter().take(6).copied().collect::<Vec<_>>().join(", ");
        let more = if names.len() > 6 { ", ..." } else { "" };
        crate::say!(
            "oscost: {} of {} results failed ({shown}{more}); see the table's reasons",
            failed.len(),
            results.count()
        );
    }
    i32::from(!failed.is_empty() || !late.is_empty())
}
