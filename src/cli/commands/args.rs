//! The argument groups several commands share (the store, the selection of runs, the output
//! files, how a comparison judges), the parsers of raw values (percentages, seconds, sizes, a
//! wrapper's command line), and the usage error they raise: one line, exit status 2, found
//! before anything is measured.

use std::path::PathBuf;

use clap::Args;

/// A mistake in what the user asked for. `main` prints it and exits with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A usage error (exit 2) with message `msg`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
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
    pub filters: Vec<crate::analysis::select::Filter>,
}

impl SelectArgs {
    /// The `--where` filters as one selection.
    pub fn selection(&self) -> crate::analysis::select::RunFilter {
        crate::analysis::select::RunFilter(self.filters.clone())
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
    /// Write Bencher Metric Format JSON: each result's latency (ns) with its 95% CI as
    /// lower/upper value; of a comparison or a matrix, the candidate's (the last column's)
    /// latency and its slowdown with that CI.
    #[arg(long, value_name = "FILE")]
    pub bmf: Option<PathBuf>,
    /// Write github-action-benchmark's customSmallerIsBetter JSON: name, unit ns, the median,
    /// its range from the 95% CI, samples and repetitions (of a comparison or a matrix, the
    /// candidate's median and its slowdown in extra).
    #[arg(long, value_name = "FILE")]
    pub github_benchmark: Option<PathBuf>,
    /// Write KernelCI's KCIDB I/O JSON (schema 5.3): a checkout and a build for the kernel
    /// measured, one test per benchmark with its median as a number in seconds and, for a
    /// comparison or a matrix, the verdict as its status (FAIL a regression).
    #[arg(long, value_name = "FILE")]
    pub kcidb: Option<PathBuf>,
    /// Write JUnit XML: one testcase per benchmark; a regression (beyond --fail-above, or
    /// called slower without it) is a failure saying the slowdown, the addition and the CI;
    /// undecided or not measured is skipped with its reason.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write OpenMetrics text (node_exporter's textfile collector, Prometheus): each
    /// benchmark's median, CI bounds, samples and disturbed flag (and a comparison's slowdown)
    /// as gauges labelled by benchmark, host, kernel and label; replaced whole, never half
    /// written.
    #[arg(long, value_name = "FILE")]
    pub openmetrics: Option<PathBuf>,
}

/// A file format a command can write (`OutputArgs`): what the one table of formats
/// (`OutputArgs::formats`) names, for the gate's declaration, the paths and the exporters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `--json`.
    Json,
    /// `--csv`.
    Csv,
    /// `--markdown`.
    Markdown,
    /// `--bmf`.
    Bmf,
    /// `--github-benchmark`.
    GithubBenchmark,
    /// `--kcidb`.
    Kcidb,
    /// `--junit`.
    Junit,
    /// `--openmetrics`.
    OpenMetrics,
}

impl Format {
    /// Its flag, as the gate and the messages name it.
    pub fn flag(self) -> &'static str {
        match self {
            Format::Json => "--json",
            Format::Csv => "--csv",
            Format::Markdown => "--markdown",
            Format::Bmf => "--bmf",
            Format::GithubBenchmark => "--github-benchmark",
            Format::Kcidb => "--kcidb",
            Format::Junit => "--junit",
            Format::OpenMetrics => "--openmetrics",
        }
    }
}

impl OutputArgs {
    /// The one table of formats: each with the path its flag gave, in flag order. The gate's
    /// declaration, the paths and the exporters (`commands::exporters`) iterate it, so a new
    /// format is a field, a `Format` and a row here (a test checks every flag has its row).
    pub fn formats(&self) -> [(Format, Option<&PathBuf>); 8] {
        [
            (Format::Json, self.json.as_ref()),
            (Format::Csv, self.csv.as_ref()),
            (Format::Markdown, self.markdown.as_ref()),
            (Format::Bmf, self.bmf.as_ref()),
            (Format::GithubBenchmark, self.github_benchmark.as_ref()),
            (Format::Kcidb, self.kcidb.as_ref()),
            (Format::Junit, self.junit.as_ref()),
            (Format::OpenMetrics, self.openmetrics.as_ref()),
        ]
    }

    /// The files these flags write, declared to the gate.
    pub fn declare(&self, e: crate::effects::gate::Effects) -> crate::effects::gate::Effects {
        self.formats()
            .into_iter()
            .fold(e, |e, (f, p)| e.writes(f.flag(), p))
    }

    /// The paths given, in flag order.
    pub fn paths(&self) -> Vec<&PathBuf> {
        self.formats().into_iter().filter_map(|(_, p)| p).collect()
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

/// A percentage above 0 and at most 100, a `%` allowed after it.
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

/// A number of seconds above 0.
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

/// A program to run during a side, from `flag`'s command and `--ready`'s pattern: split like
/// a shell, its program found and executable, the pattern a valid regular expression; a
/// usage error (exit 2, before measuring) otherwise. `None` when no command was given.
pub fn during_spec(
    flag: &str,
    cmd: Option<&str>,
    ready: Option<&str>,
    ready_timeout_s: Option<f64>,
) -> anyhow::Result<Option<crate::processes::during::DuringSpec>> {
    let Some(cmd) = cmd else {
        return Ok(None);
    };
    let argv = split_command(flag, cmd).map_err(|e| usage(e.0))?;
    super::check_program(flag, &argv)?;
    let ready = ready
        .map(|r| {
            regex::Regex::new(r).map_err(|e| {
                usage(format!(
                    "--ready '{r}' is not a regular expression: {}",
                    e.to_string().lines().last().unwrap_or("invalid")
                ))
            })
        })
        .transpose()?;
    Ok(Some(crate::processes::during::DuringSpec {
        argv,
        text: cmd.to_string(),
        ready,
        ready_timeout: ready_timeout_s
            .map(std::time::Duration::from_secs_f64)
            .unwrap_or(crate::processes::during::READY_TIMEOUT),
    }))
}

/// `cpu` as `flag` named it, if this process may run on it (`--cpu`, a side's `--a-cpu`).
pub fn allowed_cpu(flag: &str, cpu: usize, allowed: &[usize]) -> Result<usize, String> {
    if allowed.contains(&cpu) {
        return Ok(cpu);
    }
    let list: Vec<String> = allowed.iter().map(usize::to_string).collect();
    Err(format!(
        "{flag} {cpu}: not an allowed CPU; allowed: {}",
        list.join(",")
    ))
}

/// The flags that name one side's conditions, by command: `run` and `predict` say `--under`
/// and `--during`, `ab` `--a`/`--a-during`/`--a-cpu` and the same for B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideFlagNames {
    /// The wrapper's flag.
    pub wrapper: &'static str,
    /// The program-during's flag.
    pub during: &'static str,
    /// The measuring CPU's flag.
    pub cpu: &'static str,
}

impl SideFlagNames {
    /// `run`'s and `predict`'s one side.
    pub const ONE: SideFlagNames = SideFlagNames {
        wrapper: "--under",
        during: "--during",
        cpu: "--cpu",
    };
    /// `ab`'s side A.
    pub const A: SideFlagNames = SideFlagNames {
        wrapper: "--a",
        during: "--a-during",
        cpu: "--a-cpu",
    };
    /// `ab`'s side B.
    pub const B: SideFlagNames = SideFlagNames {
        wrapper: "--b",
        during: "--b-during",
        cpu: "--b-cpu",
    };
}

impl Default for SideFlagNames {
    fn default() -> SideFlagNames {
        SideFlagNames::ONE
    }
}

/// What the user said of one side, as `run`, `ab` and `predict` take it: each condition's
/// flag as given. `side` checks every one of them once and makes the side; its kernel
/// settings (`settings`) are declared to the gate and held by the session.
#[derive(Debug, Clone, Default)]
pub struct SideFlags {
    /// The flags' names, for messages.
    pub names: SideFlagNames,
    /// The command the side's workers run under.
    pub wrapper: Option<String>,
    /// A program run during the side.
    pub during: Option<String>,
    /// When the program during is ready: a line of its output matching this.
    pub ready: Option<String>,
    /// The longest wait for it to be ready, seconds.
    pub ready_timeout_s: Option<f64>,
    /// The CPU the side is measured on, where it is not the command's.
    pub cpu: Option<usize>,
    /// Its kernel settings, NAME=VALUE.
    pub settings: Vec<String>,
}

impl SideFlags {
    /// The side these flags name, every condition checked (a usage error, exit 2, before
    /// anything changes): the wrapper and the program during can be started, the ready
    /// expression parses, the CPU is one this process may run on.
    pub fn side(&self) -> anyhow::Result<crate::processes::conditions::Side> {
        let n = self.names;
        let wrapper = match &self.wrapper {
            Some(c) => {
                let argv = split_command(n.wrapper, c).map_err(|e| usage(e.0))?;
                super::check_program(n.wrapper, &argv)?;
                Some(crate::processes::conditions::Wrapper {
                    argv,
                    text: c.clone(),
                })
            }
            None => None,
        };
        let during = during_spec(
            n.during,
            self.during.as_deref(),
            self.ready.as_deref(),
            self.ready_timeout_s,
        )?;
        if let Some(c) = self.cpu {
            let allowed = crate::measuring::placement::allowed_cpus();
            allowed_cpu(n.cpu, c, &allowed).map_err(usage)?;
        }
        Ok(crate::processes::conditions::Side {
            wrapper,
            during,
            cpu: self.cpu,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_output_flag_has_its_row_in_the_table_of_formats() {
        #[derive(clap::Parser)]
        struct Outputs {
            #[command(flatten)]
            o: OutputArgs,
        }
        let cmd = <Outputs as clap::CommandFactory>::command();
        let flags: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .collect();
        let o = OutputArgs::default();
        let rows: Vec<&str> = o.formats().iter().map(|(f, _)| f.flag()).collect();
        assert_eq!(flags, rows);
        // Each row's path is its own flag's.
        let p = |s: &str| Some(PathBuf::from(s));
        let o = OutputArgs {
            json: p("j"),
            openmetrics: p("o"),
            ..Default::default()
        };
        let given: Vec<(&str, &PathBuf)> = o
            .formats()
            .into_iter()
            .filter_map(|(f, p)| Some((f.flag(), p?)))
            .collect();
        assert_eq!(
            given,
            [
                ("--json", &PathBuf::from("j")),
                ("--openmetrics", &PathBuf::from("o"))
            ]
        );
    }
    use crate::base::text::printable;

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
}

/// A value the command line takes as any text (judged later, where its meaning is known),
/// whose completions offer `words`, hidden from `--help`: benchmark ids for the id arguments
/// (`IdParser`), stored runs for the run arguments (`RunRefParser`).
#[derive(Clone, Debug)]
pub struct Completing(fn() -> &'static [&'static str]);

impl clap::builder::TypedValueParser for Completing {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            (self.0)()
                .iter()
                .copied()
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

/// A benchmark id (`bench::select`'s grammar; `select` judges it before measuring): completes
/// every family, benchmark id and result id of the default variants (`run syscall/get<TAB>`).
#[allow(non_upper_case_globals)]
pub const IdParser: Completing = Completing(|| {
    // Made once and kept for the process: clap's possible values are `'static` words.
    static IDS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        completable_ids()
            .into_iter()
            .map(|s| &*Box::leak(s.into_boxed_str()))
            .collect()
    })
});

/// A stored run (an id, a file, `last~N`, judged when the store is read): completes `last` and
/// the few before it.
#[allow(non_upper_case_globals)]
pub const RunRefParser: Completing = Completing(|| &["last", "last~1", "last~2", "last~3"]);

/// Every family (`syscall/`), benchmark id and result id of the default variants, in
/// registry order, each once.
pub fn completable_ids() -> Vec<String> {
    let variants = crate::bench::entry::VariantOptions::default();
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    for b in crate::bench::registry() {
        push(format!("{}/", b.family()));
        push(b.id.to_string());
        for c in crate::bench::runner::expand(b, &variants) {
            if !c.suffix.is_empty() {
                push(format!("{}{}", b.id, c.suffix));
            }
        }
    }
    out
}
