//! The command line's shape (clap derive): the commands, each with the argument struct its
//! module in `commands/` defines, and the dispatch to them. The argument groups several
//! commands share and the validation of raw values live in `commands/args.rs`; nothing in
//! `commands/` imports this file, so arrows only point down.

pub mod commands;

use clap::{Parser, Subcommand};

use crate::cli::commands::ab::AbArgs;
use crate::cli::commands::compare::CompareCmd;
use crate::cli::commands::ctx::CtxArgs;
use crate::cli::commands::env::EnvArgs;
use crate::cli::commands::export::ExportArgs;
use crate::cli::commands::history::HistoryArgs;
use crate::cli::commands::list::ListArgs;
use crate::cli::commands::report::ReportArgs;
use crate::cli::commands::run::RunArgs;
use crate::cli::commands::show::ShowArgs;
use crate::cli::commands::{Command, Given};

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
    allow_negative_numbers = true,
    // Wrapped to the terminal, and to 100 columns in a pipe or a wider terminal.
    max_term_width = 100
)]
/// oscost's command line: a subcommand, or `run`'s arguments alone.
pub struct Cli {
    #[command(subcommand)]
    /// The subcommand (none: run).
    pub command: Option<Verb>,
    #[command(flatten)]
    /// `run`'s arguments when no subcommand is given.
    pub run: RunArgs,
}

/// The subcommands, each a variant holding its module's argument struct (a
/// `commands::Command`), declared once: the macro writes the enum clap parses and the one
/// arm per command that runs it through the gate. A new command is its module and one line
/// here.
macro_rules! verbs {
    ($($(#[$meta:meta])* $name:ident($args:ty),)*) => {
        #[derive(Debug, Subcommand)]
        /// oscost's subcommands.
        pub enum Verb {
            $($(#[$meta])* $name($args),)*
            /// Internal: run one benchmark and stream its results to the coordinator.
            #[command(name = crate::base::helpers::WORKER, hide = true)]
            Worker {
                /// The benchmark's id.
                id: String,
                /// The worker options, as JSON.
                config: String,
            },
        }

        impl Verb {
            /// The command's own `Command`, run through the gate.
            fn command(self) -> anyhow::Result<i32> {
                match self {
                    $(Verb::$name(a) => gated(a),)*
                    // A worker was started by oscost itself, which passed the gate.
                    Verb::Worker { id, config } => {
                        Ok(crate::processes::worker::worker_main(&id, &config))
                    }
                }
            }
        }
    };
}

verbs! {
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
    Matrix(crate::cli::commands::matrix::MatrixArgs),
    /// Copy stored runs into another store (a postgres:// URL or a file): one transaction,
    /// and a run the target already holds is kept once.
    Push(crate::cli::commands::copy::PushArgs),
    /// Copy run files (--json output) into the store.
    Import(crate::cli::commands::copy::ImportArgs),
    /// lmbench's lat_ctx: a ring of N processes passing a token; prints its xgraph format.
    #[command(
        override_usage = "oscost ctx [-s KB]... [-P PARALLEL] [-W WARMUP_US] [-N REPETITIONS] N..."
    )]
    Ctx(CtxArgs),
    /// will-it-scale's runtest.py: one scale/ case at 1 to N copies, as processes and as
    /// threads; prints its table (tasks,processes,processes_idle,threads,threads_idle,linear).
    Scale(crate::cli::commands::scale::ScaleArgs),
    /// Where a ping-pong's round trip goes: a traced pass split into stages (waking, idle
    /// exit, switch, return to user space), set against the untraced median.
    Explain(crate::cli::commands::explain::ExplainArgs),
    /// What a wrapper costs a program: its system calls counted, each kind priced under the
    /// wrapper, the added time predicted, then measured in alternating rounds.
    #[command(override_usage = "oscost predict --under WRAPPER [OPTIONS] -- CMD [ARGS]...")]
    Predict(crate::cli::commands::predict::PredictArgs),
    /// Watch a few primitives' costs on this machine at a low duty: a short window every
    /// interval, saved hourly, a lasting change said once with what about the machine changed.
    Watch(crate::cli::commands::watch::WatchArgs),
    /// The kernel settings `run --set` and `ab --a-set/--b-set` can change: value here, scope,
    /// whether it can be changed here (or why not), what it moves.
    Settings(crate::cli::commands::settings::SettingsArgs),
    /// Print a completion script for a shell (bash: `source <(oscost completions bash)`).
    Completions(crate::cli::commands::shell::CompletionsArgs),
    /// Print the manual page (roff): `oscost man | man -l -`.
    Man(crate::cli::commands::shell::ManArgs),
}

impl Cli {
    /// The command line parsed as `main` parses it: the top level's `-h` lists the commands
    /// and says where `run`'s options are, instead of printing all of them (they are the top
    /// level's too, for a bare `oscost`, and made `-h` 134 lines); `--help` keeps every one.
    pub fn parse_args(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let matches = Cli::command()
            .mut_args(|a| a.hide_short_help(true))
            .after_help(
                "With no command, runs the default suite (`oscost run`); its options: \
`oscost run -h`. Everything: `oscost --help`.",
            )
            .try_get_matches_from(args)?;
        Cli::from_arg_matches(&matches)
    }

    /// Pass the gate (`crate::effects::gate`), then run the command (a bare `oscost` runs the
    /// default suite) and give the exit status.
    pub fn dispatch(self) -> anyhow::Result<i32> {
        match self.command {
            None => gated(self.run),
            Some(v) => v.command(),
        }
    }
}

/// Run `command` once the gate has passed what it declares. What a killed oscost left on the
/// machine (its guard and helpers killed too: settings, cgroups, ftrace instances, audit
/// rules) is reclaimed first.
fn gated(command: impl Command) -> anyhow::Result<i32> {
    for line in crate::effects::reclaim::recover() {
        crate::say!("oscost: {line}");
    }
    let passed = crate::cli::commands::pass(&command.effects())?;
    command.run(Given {
        passed,
        cli: <Cli as clap::CommandFactory>::command,
    })
}

/// The command line with every negative or non-finite value joined to its option
/// (`--precision -inf` becomes `--precision=-inf`), so that clap hands it to the option's own
/// parser, which says what is wrong with it, instead of reading `-inf` as the flags `-i -n -f`.
/// Which options take a value is read from clap's tree, so a new option is covered as it is
/// added. Nothing after `--` is touched (predict's program and its arguments).
pub fn join_hyphen_values(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use std::ffi::OsString;
    let looks_negative = |s: &str| {
        s.strip_prefix('-').is_some_and(|rest| {
            !rest.is_empty() && !rest.starts_with('-') && rest.parse::<f64>().is_ok()
        })
    };
    // The common command line has no such value: clap's tree is not built for it.
    if !args.iter().any(|a| a.to_str().is_some_and(&looks_negative)) {
        return args;
    }
    let root = <Cli as clap::CommandFactory>::command();
    let mut cmd = &root;
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let Some(text) = a.to_str() else {
            out.push(a.clone());
            i += 1;
            continue;
        };
        if text == "--" {
            out.extend(args[i..].iter().cloned());
            break;
        }
        if i > 0
            && !text.starts_with('-')
            && let Some(sub) = cmd.find_subcommand(text)
        {
            cmd = sub;
        }
        let takes_value = |c: &clap::Command| {
            c.get_arguments().any(|arg| {
                let named = match text.strip_prefix("--") {
                    Some(long) => arg.get_long() == Some(long),
                    None => {
                        let mut chars = text.chars();
                        chars.next() == Some('-')
                            && chars.next().is_some_and(|c| arg.get_short() == Some(c))
                            && chars.next().is_none()
                    }
                };
                named && arg.get_action().takes_values()
            })
        };
        let next = args.get(i + 1).and_then(|n| n.to_str());
        if text.starts_with('-')
            && !text.contains('=')
            && let Some(v) = next.filter(|v| looks_negative(v))
            && takes_value(cmd)
        {
            out.push(OsString::from(format!("{text}={v}")));
            i += 2;
            continue;
        }
        out.push(a.clone());
        i += 1;
    }
    out
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
    fn negative_and_non_finite_values_reach_their_option() {
        let j = |v: &[&str]| -> Vec<String> {
            join_hyphen_values(v.iter().map(Into::into).collect())
                .into_iter()
                .map(|s| s.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            j(&["oscost", "run", "--precision", "-inf", "call/f0"]),
            ["oscost", "run", "--precision=-inf", "call/f0"]
        );
        assert_eq!(
            j(&["oscost", "run", "--runs", "-1"]),
            ["oscost", "run", "--runs=-1"]
        );
        assert_eq!(
            j(&["oscost", "ctx", "-s", "-1", "2"]),
            ["oscost", "ctx", "-s=-1", "2"]
        );
        // A flag that takes no value, and anything after `--`, are left alone.
        assert_eq!(
            j(&["oscost", "run", "--quick", "-1"]),
            ["oscost", "run", "--quick", "-1"]
        );
        let p = [
            "oscost", "predict", "--under", "env", "--", "prog", "--n", "-1",
        ];
        assert_eq!(j(&p), p);
        for args in [
            ["oscost", "run", "--precision", "-inf"],
            ["oscost", "run", "--runs", "-1"],
            ["oscost", "run", "--budget", "-nan"],
        ] {
            let e = Cli::try_parse_from(join_hyphen_values(args.iter().map(Into::into).collect()))
                .unwrap_err();
            assert!(!e.to_string().contains("unexpected argument"), "{e}");
        }
    }

    #[test]
    fn bare_options_mean_run() {
        let c = Cli::try_parse_from(["oscost", "--quick", "syscall/"]).unwrap();
        assert!(c.command.is_none());
        assert!(c.run.measure.quick);
        assert_eq!(c.run.measure.ids, vec!["syscall/"]);
        let e = Cli::try_parse_from(["oscost", "run", "--samples", "20", "--precision", "2"]);
        assert!(e.is_err(), "--samples conflicts with --precision");
    }
}
