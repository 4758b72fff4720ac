//! `oscost push RUN... --to STORE` and `oscost import FILE.json...`: copying runs between
//! stores (a machine's SQLite file into the fleet's PostgreSQL database, or back) and from
//! result files. Each copy is one transaction in the target: all of the runs or none, and a
//! run the target already holds (same identity: `store::rows::digest`) is kept once, so a copy repeated after
//! an interruption, or the same run pushed by two hosts, never makes two.

use std::path::PathBuf;

use clap::Args;

use super::args::StoreArgs;
use super::{Command, Given};
use super::{read_store, store_err, usage};
use crate::base::model::{self, Run};
use crate::effects::gate::Effects;
use crate::effects::store::{self, Saved, Store, StoreError};

#[derive(Debug, Args, Clone)]
/// `oscost push`'s arguments.
pub struct PushArgs {
    /// Stored runs to copy: ids, `last`, `last~N`, or `all` (of the runs --where selects).
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
    /// The store to copy into: a postgres:// URL or a file path (created when missing).
    #[arg(long, value_name = "STORE")]
    pub to: PathBuf,
    /// The store to copy from.
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    /// Which runs are copied.
    pub select: super::args::SelectArgs,
}

#[derive(Debug, Args, Clone)]
/// `oscost import`'s arguments.
pub struct ImportArgs {
    /// Run files written by `--json` (or `oscost export`).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The store to copy into.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Copy `runs` into `target` in one transaction and say what became of each.
fn copy_into(target: &mut Store, runs: &[(String, Run)], verb: &str) -> anyhow::Result<i32> {
    let stop = crate::effects::signals::on_interrupt()?;
    let with: Vec<&Run> = runs.iter().map(|(_, r)| r).collect();
    let saved = match target.copy_in(&with, &stop) {
        Ok(s) => s,
        // The signal's own error: main exits 128+N for it.
        Err(StoreError::Interrupted(i)) => return Err(i.into()),
        Err(e) => return Err(store_err(e)),
    };
    let mut fresh = 0;
    let mut listing = String::new();
    for ((name, _), Saved { id, new }) in runs.iter().zip(&saved) {
        if *new {
            fresh += 1;
            listing.push_str(&format!("{name} -> run {id}\n"));
        } else {
            listing.push_str(&format!("{name} -> run {id} (already there)\n"));
        }
    }
    // The runs are in; a listing that cannot be shown is said by the exit status.
    let shown = super::print_stdout(&listing);
    crate::say!(
        "oscost: {verb} {} run(s) into {}: {fresh} new, {} already there",
        runs.len(),
        target.shown(),
        runs.len() - fresh
    );
    shown.map(|()| 0)
}

impl PushArgs {}

impl Command for PushArgs {
    /// The store read, and the target written.
    fn effects(&self) -> Effects {
        Effects::new()
            .store(self.store.db.as_ref())
            .saves_other("push's target store", &self.to)
    }

    /// Copy the selected runs into the other store.
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut passed = given.passed;
        let to = store::classify(self.to.clone()).map_err(store_err)?;
        let mut source = read_store(&self.store)?;
        if to == store::locate(self.store.db.as_deref()).map_err(store_err)? {
            return Err(usage(
                "--to names the store the runs come from; give another",
            ));
        }
        let sel = self.select.selection();
        let selected = sel.apply(source.list().map_err(store_err)?);
        let mut ids = Vec::new();
        for r in &self.runs {
            if r == "all" {
                ids.extend(selected.iter().map(|s| s.id));
            } else {
                ids.push(store::resolve_among(r, &selected, !sel.is_all()).map_err(store_err)?);
            }
        }
        if ids.is_empty() {
            return Err(usage(
                "no runs to push (none stored, or none --where selects)",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(*id));
        let mut runs = Vec::new();
        for id in ids {
            let run = source.load(id).map_err(store_err)?;
            runs.push((format!("run {id}"), run));
        }
        drop(source);
        let mut target = super::saving_store(&mut passed)?;
        copy_into(&mut target, &runs, "pushed")
    }
}

impl ImportArgs {}

impl Command for ImportArgs {
    /// The run files read, and the store saved into.
    fn effects(&self) -> Effects {
        let mut e = Effects::new().saves(self.store.db.as_ref());
        for f in &self.files {
            e = e.reads("a run file", &f.to_string_lossy());
        }
        e
    }

    /// Read the run files and copy them into the store.
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut passed = given.passed;
        // Every run is held at once (one transaction): room for all of them is asked before
        // any is read whole.
        let mut scanned = Vec::new();
        for f in &self.files {
            scanned.push(model::file::scan(f).map_err(|e| usage(e.to_string()))?);
        }
        let samples = scanned.iter().map(|s| s.samples()).sum();
        let bytes = scanned.iter().map(|s| s.bytes_needed()).sum();
        let what = match self.files.as_slice() {
            [one] => one.display().to_string(),
            many => format!("the {} files", many.len()),
        };
        model::file::room(bytes, samples, &what).map_err(|e| usage(e.to_string()))?;
        let mut runs = Vec::new();
        for (f, s) in self.files.iter().zip(&scanned) {
            let run = model::file::load_scanned(f, s).map_err(|e| usage(e.to_string()))?;
            runs.push((f.display().to_string(), run));
        }
        let mut target = super::saving_store(&mut passed)?;
        copy_into(&mut target, &runs, "imported")
    }
}
