//! One module per command, each with its clap argument struct and its `Command`: the effects
//! it declares from its arguments alone, and a `run` that resolves the arguments, calls the
//! parts below it (the scheduler, the store, `compare`, the report views) and prints; this file
//! holds the trait and what several commands share (the store, loading a run, stdout).

pub mod ab;
pub mod args;
pub mod compare;
pub mod copy;
pub mod ctx;
pub mod env;
pub mod explain;
pub mod export;
pub mod history;
pub mod list;
pub mod matrix;
pub mod plan;
pub mod predict;
pub mod report;
pub mod run;
pub mod scale;
pub mod session;
pub mod settings;
pub mod shell;
pub mod show;
pub mod watch;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::base::model::{self, Run};
use crate::base::stop::{Interrupted, Stop};
use crate::effects::store::{self, Store, StoreError};
use crate::report::Exporter;
use crate::report::ci_formats::{Bmf, GithubBenchmark};
use crate::report::csv::Csv;
use crate::report::json::Json;
use crate::report::junit::Junit;
use crate::report::kcidb::Kcidb;
use crate::report::markdown::Markdown;
use crate::report::openmetrics::OpenMetrics;
use args::{OutputArgs, SelectArgs, StoreArgs, usage};

/// One command of the command line. A new command is its module with this impl, and one arm
/// in `cli::Verb::command`; the gate (`effects`) cannot be skipped, because the one place that
/// runs a command (`cli::Cli::dispatch`) asks for its effects and passes the gate first.
pub trait Command {
    /// What it will write and read, declared from its arguments alone, before any work.
    fn effects(&self) -> crate::effects::gate::Effects;
    /// Run it, once the gate has passed.
    fn run(self, given: Given) -> anyhow::Result<i32>;
}

/// What a command is handed once the gate has passed.
pub struct Given {
    /// What the gate proved and prepared: the store saved into, the kernel settings.
    pub passed: crate::effects::gate::Passed,
    /// The whole command line's clap tree (completions and the manual page are made from
    /// it), built only when asked.
    pub cli: fn() -> clap::Command,
}

/// Whether to color: a terminal and no NO_COLOR (https://no-color.org: any non-empty value).
pub fn use_color(stream_is_tty: bool) -> bool {
    stream_is_tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Whether stdout gets colour.
fn color() -> bool {
    use_color(std::io::stdout().is_terminal())
}

/// Write a view to stdout, made `terminal_safe`; a closed pipe (`| head`) is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    // Views hold labels, hosts and notes read from stores and files: whatever a view forgot,
    // no control character reaches the terminal raw (its own colours excepted).
    let text = crate::base::text::terminal_safe(text, color());
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to stdout"),
    }
}

/// A store error the user can fix is a usage error (exit 2).
fn store_err(e: StoreError) -> anyhow::Error {
    if e.is_usage() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

/// The store to read from: it must exist; nothing is created.
pub fn read_store(args: &StoreArgs) -> anyhow::Result<Store> {
    let at = store::locate(args.db.as_deref()).map_err(store_err)?;
    Store::open_existing(&at).map_err(store_err)
}

/// Print a run's table: on stdout, or on stderr when an export took stdout (`--json -`).
pub fn print_table(
    run: &Run,
    outputs: &OutputArgs,
    opts: crate::report::table::TableOptions,
) -> anyhow::Result<()> {
    let profiles = crate::report::profile::summary(run);
    if crate::effects::output::any_stdout(&outputs.paths()) {
        crate::say_part!("{}", crate::report::table::render(run, false, opts));
        crate::say_part!("{profiles}");
        Ok(())
    } else {
        print_stdout(&crate::report::table::render(run, color(), opts))?;
        print_stdout(&profiles)
    }
}

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

/// Check, before measuring, that a wrapper's program can be started: an absolute or relative
/// path must name an executable file, a bare name must be found in PATH.
pub fn check_program(flag: &str, argv: &[String]) -> anyhow::Result<()> {
    use nix::unistd::{AccessFlags, access};
    let Some(prog) = argv.first() else {
        return Ok(());
    };
    let runnable = |p: &Path| p.is_file() && access(p, AccessFlags::X_OK).is_ok();
    let found = if prog.contains('/') {
        runnable(Path::new(prog))
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| runnable(&d.join(prog))))
    };
    if found {
        Ok(())
    } else {
        Err(usage(format!(
            "{flag}: '{}' is not a program that can be run here (not found, or not executable)",
            crate::base::text::printable(prog)
        )))
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
    let cpus = crate::harness::placement::allowed_cpus();
    let before = crate::harness::settings::snapshot(&cpus);
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

/// Pass the gate (`crate::effects::gate`): a refusal is a usage error, a store that cannot take a run
/// is the store's error.
pub fn pass(e: &crate::effects::gate::Effects) -> anyhow::Result<crate::effects::gate::Passed> {
    crate::effects::gate::pass(e).map_err(|e| match e {
        crate::effects::gate::GateError::Refused(s) => usage(s),
        crate::effects::gate::GateError::Store(e) => store_err(e),
    })
}

/// The store a saving command declared, proven by the gate (created now when new).
pub fn saving_store(passed: &mut crate::effects::gate::Passed) -> anyhow::Result<Store> {
    match passed.store() {
        Some(r) => r.map_err(store_err),
        None => Err(anyhow::anyhow!(
            "internal: this command saves but did not declare its store to the gate"
        )),
    }
}

/// A run from a JSON file or the store, and the name to show for it.
pub fn load_run(
    reference: &str,
    store: &StoreArgs,
    select: &SelectArgs,
) -> anyhow::Result<(Run, String)> {
    let path = Path::new(reference);
    if path.is_file() {
        let run = model::load_run_file(path).map_err(|e| usage(e.to_string()))?;
        return Ok((run, reference.to_string()));
    }
    if store::RunRef::parse(reference).is_some() {
        let mut s = read_store(store)?;
        let id = s
            .resolve_in(reference, &select.selection())
            .map_err(store_err)?;
        let run = s.load(id).map_err(store_err)?;
        return Ok((run, format!("run {id}")));
    }
    Err(usage(format!(
        "'{reference}' is neither a file nor a stored run (an id, `last` or `last~N`)"
    )))
}

/// The exporters `o` asks for, each with its path; the CI formats judge a comparison's
/// regression against `fail_above` (percent) when given.
pub fn exporters<T>(o: &OutputArgs, fail_above: Option<f64>) -> Vec<(PathBuf, Box<dyn Exporter<T>>)>
where
    Json: Exporter<T>,
    Csv: Exporter<T>,
    Markdown: Exporter<T>,
    Bmf: Exporter<T>,
    GithubBenchmark: Exporter<T>,
    Kcidb: Exporter<T>,
    Junit: Exporter<T>,
    OpenMetrics: Exporter<T>,
{
    let mut v: Vec<(PathBuf, Box<dyn Exporter<T>>)> = Vec::new();
    let mut add = |p: &Option<PathBuf>, e: Box<dyn Exporter<T>>| {
        if let Some(p) = p {
            v.push((p.clone(), e));
        }
    };
    add(&o.json, Box::new(Json));
    add(&o.csv, Box::new(Csv));
    add(&o.markdown, Box::new(Markdown));
    add(&o.bmf, Box::new(Bmf));
    add(&o.github_benchmark, Box::new(GithubBenchmark));
    add(&o.kcidb, Box::new(Kcidb { fail_above }));
    add(&o.junit, Box::new(Junit { fail_above }));
    add(&o.openmetrics, Box::new(OpenMetrics { fail_above }));
    v
}
