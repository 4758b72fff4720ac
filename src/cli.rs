//! Command-line definitions (clap derive) and the validation of raw values. Nothing here runs a
//! benchmark: `main` resolves these into real objects. A value that clap cannot parse, or that
//! fails a check here, is a usage error: one line, exit status 2.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    List,
    /// Describe this machine: kernel, CPU, clocks, mitigations, THP, virtualization.
    Env {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stored runs; with a benchmark id, that benchmark across runs with its trend.
    History {
        /// A benchmark id (e.g. syscall/getpid).
        bench: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print a stored run as `run` would.
    Show {
        /// A stored run: its id, `last` or `last~N`.
        run: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Write a stored run to files.
    Export {
        /// A stored run: its id, `last` or `last~N`.
        run: String,
        #[command(flatten)]
        outputs: OutputArgs,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Write an HTML report with figures (SVG; PNG too with --png) of a run.
    Report {
        /// A JSON file, a stored run id, `last` or `last~N`.
        run: String,
        /// The directory to write index.html and fig/ into.
        #[arg(short = 'o', long = "out", value_name = "DIR")]
        out: PathBuf,
        /// Also draw every figure as PNG.
        #[arg(long)]
        png: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Compare two runs: slowdown and addition per benchmark, with CIs and a verdict.
    Compare {
        /// The base: a JSON file, a stored run id, `last` or `last~N`.
        base: String,
        /// The candidate, in the same forms.
        cand: String,
        #[command(flatten)]
        compare: CompareArgs,
        #[command(flatten)]
        outputs: OutputArgs,
        /// Also write an HTML report of the comparison into this directory.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
        /// With --report, also draw the figures as PNG.
        #[arg(long, requires = "report")]
        png: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run the benchmarks on A and B alternately (A B A B ...) and compare B against A; both
    /// sides are saved; --json/--csv/--markdown write the comparison.
    Ab {
        /// The command A runs under [default: nothing, the plain system].
        #[arg(long, value_name = "CMD")]
        a: Option<String>,
        /// The command B runs under, e.g. 'strace -f -o /dev/null'.
        #[arg(long, value_name = "CMD")]
        b: Option<String>,
        /// How many A/B rounds per benchmark.
        #[arg(long, value_name = "K", default_value = "3",
              value_parser = clap::value_parser!(u64).range(1..=100))]
        rounds: u64,
        #[command(flatten)]
        compare: CompareArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// lmbench's lat_ctx: a ring of N processes passing a token; prints its xgraph format.
    #[command(
        override_usage = "oscost ctx [-s KB]... [-P PARALLEL] [-W WARMUP_US] [-N REPETITIONS] N..."
    )]
    Ctx {
        /// Working set each process sums, KB (repeat for several: -s 0 -s 16).
        #[arg(short = 's', value_name = "KB")]
        sizes: Vec<usize>,
        /// Rings run at once (spread over the allowed CPUs).
        #[arg(short = 'P', value_name = "PARALLEL", default_value = "1",
              value_parser = clap::value_parser!(u64).range(1..=64))]
        parallel: u64,
        /// Warm-up before sampling each point, microseconds.
        #[arg(short = 'W', value_name = "US")]
        warmup_us: Option<u64>,
        /// Samples per point (fixed, instead of sampling to a precision).
        #[arg(short = 'N', value_name = "REPETITIONS",
              value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        repetitions: Option<u64>,
        /// Ring sizes (processes), 2 to 1024 and beyond if the fd limit allows.
        #[arg(required = true, value_name = "N",
              value_parser = clap::value_parser!(u64).range(2..=8192))]
        procs: Vec<u64>,
        /// Also write the run (the result model) as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Internal: run one benchmark and stream its results to the coordinator.
    #[command(name = "__worker", hide = true)]
    Worker { id: String, config: String },
}

/// Where runs are kept.
#[derive(Debug, Args, Clone, Default)]
pub struct StoreArgs {
    /// The results database [default: $OSCOST_DB, else $XDG_DATA_HOME/oscost/results.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
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
            "{v} is out of range: give a percentage of 0 or more"
        ));
    }
    Ok(v)
}

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Benchmark ids or prefixes (`syscall/`, `call/f0`); none means the default suite.
    pub ids: Vec<String>,

    /// Stop sampling a benchmark once the 95% CI of its median is within this percent.
    #[arg(long, value_name = "PCT", value_parser = parse_percent, default_value = "1",
          allow_negative_numbers = true)]
    pub precision: f64,

    /// Longest sampling time per benchmark, in seconds [default: 2, 0.5 with --quick].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub budget: Option<f64>,

    /// Take exactly N samples per benchmark instead of stopping at --precision.
    #[arg(long, value_name = "N", conflicts_with = "precision",
          value_parser = clap::value_parser!(u64).range(10..=10_000_000))]
    pub samples: Option<u64>,

    /// A shorter, less precise pass (2% precision, short warm-up, 0.5 s budget).
    #[arg(long)]
    pub quick: bool,

    /// Pin single-thread benchmarks to this CPU [default: the last allowed CPU].
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,

    /// Kill a benchmark that runs longer than this, in seconds [default: 30 + 4 x budget].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub timeout: Option<f64>,

    #[command(flatten)]
    pub outputs: OutputArgs,

    /// Run the measuring part under this command, e.g. 'strace -f -o /dev/null'.
    #[arg(long, value_name = "CMD")]
    pub under: Option<String>,

    /// Parent resident sizes for spawn/fork-rss: MiB, or with a unit (64M, 1G) [default: 0,64M,256M,1G].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size_mib,
          allow_negative_numbers = true)]
    pub fork_sizes: Option<Vec<u64>>,

    /// Placements of two-party benchmarks: same (one CPU), cross (two CPUs), free (unpinned).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub placement: Option<Vec<String>>,

    /// A label stored with the run.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// Also write an HTML report of the run into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,

    /// Do not save the run to the results database.
    #[arg(long)]
    pub no_save: bool,

    #[command(flatten)]
    pub store: StoreArgs,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a number (a percentage such as 1 or 0.5)"))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err(format!(
            "{v} is out of range: give a percentage above 0 and at most 100"
        ));
    }
    Ok(v)
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('s')
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err(format!(
            "{v} is out of range: give seconds above 0 and at most 86400"
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
pub fn split_command(cmd: &str) -> Result<Vec<String>, UsageError> {
    let words = shlex::split(cmd)
        .ok_or_else(|| UsageError(format!("--under '{cmd}': unbalanced quotes")))?;
    if words.is_empty() {
        return Err(UsageError(
            "--under needs a command, e.g. --under 'strace -f -o /dev/null'".into(),
        ));
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
            split_command("strace -f -o '/dev/null'").unwrap(),
            vec!["strace", "-f", "-o", "/dev/null"]
        );
        assert!(split_command("'unbalanced").is_err());
        assert!(split_command("   ").is_err());
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
