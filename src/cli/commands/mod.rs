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
    use args::Format;
    o.formats()
        .into_iter()
        .filter_map(|(f, p)| {
            let e: Box<dyn Exporter<T>> = match f {
                Format::Json => Box::new(Json),
                Format::Csv => Box::new(Csv),
                Format::Markdown => Box::new(Markdown),
                Format::Bmf => Box::new(Bmf),
                Format::GithubBenchmark => Box::new(GithubBenchmark),
                Format::Kcidb => Box::new(Kcidb { fail_above }),
                Format::Junit => Box::new(Junit { fail_above }),
                Format::OpenMetrics => Box::new(OpenMetrics { fail_above }),
            };
            Some((p?.clone(), e))
        })
        .collect()
}
