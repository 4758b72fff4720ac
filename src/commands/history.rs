//! `oscost history [ID]`: the stored runs; with a benchmark id, that benchmark across runs with
//! its trend.

use clap::Args;

use super::{color, print_stdout, read_store, store_err};
use crate::cli::{StoreArgs, usage};
use crate::report;

#[derive(Debug, Args, Clone)]
pub struct HistoryArgs {
    /// A benchmark id (e.g. syscall/getpid).
    pub bench: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

impl HistoryArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let s = read_store(&self.store)?;
        let text = match self.bench.as_deref() {
            None => report::history::runs(&s.list().map_err(store_err)?, color()),
            Some(b) => {
                let points = s.history(b).map_err(store_err)?;
                if points.is_empty() {
                    let known = s.known_benchmarks().map_err(store_err)?;
                    return Err(usage(unknown_benchmark(b, &known)));
                }
                report::history::trend(b, &points, color(), terminal_columns())
            }
        };
        print_stdout(&text)?;
        Ok(0)
    }
}

/// Why `b` has no history, with the nearest stored id when one is close.
fn unknown_benchmark(b: &str, known: &[String]) -> String {
    let near = known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(b, k), k))
        .min()
        .filter(|(d, _)| *d <= b.len() / 2 + 1);
    match near {
        Some((_, k)) => format!("no stored run has '{b}'; did you mean '{k}'?"),
        None => format!("no stored run has '{b}' (`oscost history` lists the runs)"),
    }
}

/// Columns of the terminal on stdout: $COLUMNS, else the window size, else 80.
fn terminal_columns() -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|v| v.parse().ok()) {
        return c;
    }
    // SAFETY: an all-zero winsize is valid, and TIOCGWINSZ fills it or fails.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ on stdout with a valid out pointer.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        80
    }
}
