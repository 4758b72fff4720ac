//! The command line's shape (clap derive): the commands, each with the argument struct its
//! module in `commands/` defines, the argument groups several share, and the validation of raw
//! values. Nothing here runs a benchmark: each command resolves its arguments into real objects. A value that clap cannot parse, or that
//! fails a check here, is a usage error: one line, exit status 2.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::commands::ab::AbArgs;
use crate::commands::compare::CompareCmd;
use crate::commands::ctx::CtxArgs;
use crate::commands::env::EnvArgs;
use crate::commands::export::ExportArgs;
use crate::commands::history::HistoryArgs;
use crate::commands::list::ListArgs;
use crate::commands::report::ReportArgs;
use crate::commands::run::RunArgs;
use crate::commands::show::ShowArgs;
pub use crate::report::printable;

/// A mistake in what the user asked for. `main` prints it and exits with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

#[derive(Debug, Parser)]
#[command(
    name = "oscost",
    version,
    about = "Measure what the operating system charges for its primitives",
    long_about = "Measure what the operating system charges for its primitives: function calls, \
system calls, clocks, process and thread creation, context switches, IPC, page faults.\n\n\
With no command, runs the default suite (same as `oscost run`).",
    after_long_help = "Exit status: 0 all measured (or skipped with a reason); 1 a benchmark or an \
output failed (what was measured is still saved and written) or --fail-above was breached; \
2 a usage error, found before measuring; 128+N stopped by signal N before saving (nothing saved, \
nothing left behind).",
    args_conflicts_with_subcommands = true,
    allow_negative_numbers = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run benchmarks (all of the default suite, or the ids and prefixes given).
    Run(RunArgs),
    /// List every benchmark: id, what one sample measures, unit.
    List(ListArgs),
    /// Describe this machine: kernel, CPU, clocks, mitigations, THP, virtualization.
    Env(EnvArgs),
    /// Stored runs; with a benchmark id, that benchmark across runs with its trend.
    History(HistoryArgs),
    /// Print a stored run as `run` would.
    Show(ShowArgs),
    /// Write a stored run to files.
    Export(ExportArgs),
    /// Write an HTML report with figures (SVG; PNG too with --png) of a run.
    Report(ReportArgs),
    /// Compare two runs: slowdown and addition per benchmark, with CIs and a verdict.
    Compare(CompareCmd),
    /// Run the benchmarks on A and B alternately (A B A B ...) and compare B against A; both
    /// sides are saved; --json/--csv/--markdown write the comparison.
    Ab(AbArgs),
    /// Benchmarks by runs: each cell the change against a base run with its CI and a verdict
    /// ("~" no change); --report writes a heatmap page.
    Matrix(crate::commands::matrix::MatrixArgs),
    /// Copy stored runs into another store (a postgres:// URL or a file): one transaction,
    /// and a run the target already holds is kept once.
    Push(crate::commands::copy::PushArgs),
    /// Copy run files (--json output) into the store.
    Import(crate::commands::copy::ImportArgs),
    /// lmbench's lat_ctx: a ring of N processes passing a token; prints its xgraph format.
    #[command(
        override_usage = "oscost ctx [-s KB]... [-P PARALLEL] [-W WARMUP_US] [-N REPETITIONS] N..."
    )]
    Ctx(CtxArgs),
    /// Print a completion script for a shell (bash: `source <(oscost completions bash)`).
    Completions(crate::commands::shell::CompletionsArgs),
    /// Print the manual page (roff): `oscost man | man -l -`.
    Man(crate::commands::shell::ManArgs),
    /// Internal: run one benchmark and stream its results to the coordinator.
    #[command(name = "__worker", hide = true)]
    Worker { id: String, config: String },
}

impl Cli {
    /// Run the command (a bare `oscost` runs the default suite) and give the exit status.
    pub fn dispatch(self) -> anyhow::Result<i32> {
        match self.command {
            None => self.run.run(),
            Some(Command::Run(a)) => a.run(),
            Some(Command::List(a)) => a.run(),
            Some(Command::Env(a)) => a.run(),
            Some(Command::History(a)) => a.run(),
            Some(Command::Show(a)) => a.run(),
            Some(Command::Export(a)) => a.run(),
            Some(Command::Report(a)) => a.run(),
            Some(Command::Compare(a)) => a.run(),
            Some(Command::Ab(a)) => a.run(),
            Some(Command::Ctx(a)) => a.run(),
            Some(Command::Push(a)) => a.run(),
            Some(Command::Matrix(a)) => a.run(),
            Some(Command::Import(a)) => a.run(),
            Some(Command::Completions(a)) => a.run(),
            Some(Command::Man(a)) => a.run(),
            Some(Command::Worker { id, config }) => Ok(crate::worker::worker_main(&id, &config)),
        }
    }
}

/// Where runs are kept.
#[derive(Debug, Args, Clone, Default)]
pub struct StoreArgs {
    /// The results store: a file, or a postgres:// URL [default: $OSCOST_DB, else
    /// $XDG_DATA_HOME/oscost/results.db].
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}

/// Which stored runs a command considers: `last`, `last~N` and `all` count within them, and an
/// id outside them is refused.
#[derive(Debug, Args, Clone, Default)]
pub struct SelectArgs {
    /// Only runs where this holds (repeatable, all must hold): KEY=VALUE, KEY!=VALUE,
    /// KEY~TEXT (contains), and for date and id also >=, <=, >, <. Keys: label, host, kernel,
    /// wrapper, date (prefix of 2026-11-23T00:40:55Z), id.
    #[arg(long = "where", value_name = "COND")]
    pub filters: Vec<crate::select::Filter>,
}

impl SelectArgs {
    pub fn selection(&self) -> crate::select::Selection {
        crate::select::Selection(self.filters.clone())
    }
}

/// Files a command can write: for a run, the result model (JSON, raw samples included), one
/// CSV row of statistics per result, the table as Markdown; for a comparison, its rows.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Write JSON (a run: the result model with raw samples; a comparison: its rows).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write CSV (one row of statistics per result, or per compared benchmark).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the table as Markdown.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

impl OutputArgs {
    /// The paths given, in flag order.
    pub fn paths(&self) -> Vec<&PathBuf> {
        [&self.json, &self.csv, &self.markdown]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// How a comparison judges.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// Half-width of the band called "no change", percent.
    #[arg(long, value_name = "PCT", default_value = "2", value_parser = parse_percent,
          allow_negative_numbers = true)]
    pub threshold: f64,
    /// Exit 1 when a benchmark is slower by more than PCT percent beyond doubt (CI gating).
    #[arg(long, value_name = "PCT", value_parser = parse_fail_above, allow_negative_numbers = true)]
    pub fail_above: Option<f64>,
}

fn parse_fail_above(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a number (a percentage such as 5)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!(
            "'{s}' is out of range: give a percentage of 0 or more"
        ));
    }
    Ok(v)
}

pub fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a number (a percentage such as 1 or 0.5)"))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err(format!(
            "'{s}' is out of range: give a percentage above 0 and at most 100"
        ));
    }
    Ok(v)
}

pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('s')
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err(format!(
            "'{s}' is out of range: give seconds above 0 and at most 86400"
        ));
    }
    Ok(v)
}

/// A memory size in MiB: a plain number is MiB; K, M, G (KiB, MiB, GiB) may follow.
pub fn parse_size_mib(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((0, _)) => return Err(format!("'{s}' is not a size (e.g. 64, 64M, 1G)")),
        Some((i, _)) => {
            let unit = t[i..].to_ascii_uppercase();
            let unit = unit.trim_end_matches("IB").trim_end_matches('B');
            let m = match unit {
                "K" => 1.0 / 1024.0,
                "M" => 1.0,
                "G" => 1024.0,
                _ => return Err(format!("'{s}': unknown unit (use K, M or G)")),
            };
            (&t[..i], m)
        }
        None => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 64, 64M, 1G)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{s}': a size cannot be negative"));
    }
    let mib = v * mult;
    if mib.fract() != 0.0 {
        return Err(format!("'{s}': give whole MiB"));
    }
    Ok(mib as u64)
}

/// Split a wrapper command the way a shell would (quotes, escapes), without running a shell.
/// A wrapper command given to `flag` (--under, --a, --b), split like a shell would.
pub fn split_command(flag: &str, cmd: &str) -> Result<Vec<String>, UsageError> {
    let words = shlex::split(cmd)
        .ok_or_else(|| UsageError(format!("{flag} '{cmd}': unbalanced quotes")))?;
    if words.is_empty() {
        return Err(UsageError(format!(
            "{flag} needs a command, e.g. {flag} 'strace -f -o /dev/null'"
        )));
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn control_characters_are_escaped_for_the_terminal() {
        assert_eq!(printable("plain"), "plain");
        assert_eq!(printable("a\u{1b}[2Jb\r"), "a\\u{1b}[2Jb\\r");
        assert_eq!(printable("two\nlines"), "two\nlines");
    }

    #[test]
    fn numbers_are_validated() {
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        assert_eq!(parse_percent("2%"), Ok(2.0));
        assert!(parse_percent("0").is_err());
        assert!(parse_percent("abc").is_err());
        assert!(parse_percent("NaN").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("inf").is_err());
        assert_eq!(parse_seconds("1.5"), Ok(1.5));
    }

    #[test]
    fn sizes_take_units() {
        assert_eq!(parse_size_mib("64"), Ok(64));
        assert_eq!(parse_size_mib("64M"), Ok(64));
        assert_eq!(parse_size_mib("1G"), Ok(1024));
        assert_eq!(parse_size_mib("1GiB"), Ok(1024));
        assert_eq!(parse_size_mib("2048k"), Ok(2));
        assert!(parse_size_mib("-1").is_err());
        assert!(parse_size_mib("abc").is_err());
        assert!(parse_size_mib("1T").is_err());
        assert!(parse_size_mib("1k").is_err());
    }

    #[test]
    fn wrapper_is_split_like_a_shell() {
        assert_eq!(
            split_command("--under", "strace -f -o '/dev/null'").unwrap(),
            vec!["strace", "-f", "-o", "/dev/null"]
        );
        assert!(split_command("--b", "'unbalanced").is_err());
        assert!(
            split_command("--b", "   ")
                .unwrap_err()
                .0
                .starts_with("--b needs")
        );
    }

    #[test]
    fn bare_options_mean_run() {
        let c = Cli::try_parse_from(["oscost", "--quick", "syscall/"]).unwrap();
        assert!(c.command.is_none());
        assert!(c.run.quick);
        assert_eq!(c.run.ids, vec!["syscall/"]);
        let e = Cli::try_parse_from(["oscost", "run", "--samples", "20", "--precision", "2"]);
        assert!(e.is_err(), "--samples conflicts with --precision");
    }
}
