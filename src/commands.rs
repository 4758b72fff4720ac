//! The commands that read history rather than measure: `history`, `show`, `export`, `compare`,
//! and `ab`, which measures two sides and then compares them. Each resolves its arguments,
//! calls the pure parts (store queries, `compare`, the report views) and prints.

use clap::Parser;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use crate::cli::{CompareArgs, OutputArgs, RunArgs, StoreArgs, split_command, usage};
use crate::compare::{self, Comparison};
use crate::model::{self, Run};
use crate::report::{self, Exporter};
use crate::run::{self, AbSide, print_stdout, use_color};
use crate::store::{self, Store, StoreError};

fn color() -> bool {
    use_color(std::io::stdout().is_terminal())
}

/// A store error the user can fix is a usage error (exit 2).
fn store_err(e: StoreError) -> anyhow::Error {
    if e.is_usage() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

pub fn open_store(args: &StoreArgs) -> anyhow::Result<Store> {
    Store::open(&store::default_path(args.db.as_deref())).map_err(store_err)
}

/// True for "7", "last", "last~2".
fn looks_like_run_ref(s: &str) -> bool {
    s.parse::<i64>().is_ok()
        || s == "last"
        || s.strip_prefix("last~")
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// A run from a JSON file or the store, and the name to show for it.
pub fn load_run(reference: &str, store: &StoreArgs) -> anyhow::Result<(Run, String)> {
    let path = Path::new(reference);
    if path.is_file() {
        let run = model::load_run_file(path).map_err(|e| usage(e.to_string()))?;
        return Ok((run, reference.to_string()));
    }
    if looks_like_run_ref(reference) {
        let s = open_store(store)?;
        let id = s.resolve(reference).map_err(store_err)?;
        let run = s.load(id).map_err(store_err)?;
        return Ok((run, format!("run {id}")));
    }
    Err(usage(format!(
        "'{reference}' is neither a file nor a stored run (an id, `last` or `last~N`)"
    )))
}

pub fn history(bench: Option<&str>, store: &StoreArgs) -> anyhow::Result<()> {
    let s = open_store(store)?;
    let text = match bench {
        None => report::history::runs(&s.list().map_err(store_err)?, color()),
        Some(b) => {
            let points = s.history(b).map_err(store_err)?;
            if points.is_empty() {
                let known = s.known_benchmarks().map_err(store_err)?;
                let near = known
                    .iter()
                    .map(|k| (strsim::damerau_levenshtein(b, k), k))
                    .min()
                    .filter(|(d, _)| *d <= b.len() / 2 + 1);
                return Err(usage(match near {
                    Some((_, k)) => format!("no stored run has '{b}'; did you mean '{k}'?"),
                    None => format!("no stored run has '{b}' (`oscost history` lists the runs)"),
                }));
            }
            report::history::trend(b, &points, color())
        }
    };
    print_stdout(&text)
}

pub fn show(reference: &str, store: &StoreArgs) -> anyhow::Result<()> {
    let (run, name) = load_run(reference, store)?;
    eprintln!("oscost: {name}, started {}", run.started_at);
    print_stdout(&report::table::render(&run, color()))
}

fn check_outputs(outputs: &OutputArgs) -> anyhow::Result<()> {
    report::check_outputs(&outputs.paths()).map_err(usage)
}

pub fn export(reference: &str, outputs: &OutputArgs, store: &StoreArgs) -> anyhow::Result<()> {
    check_outputs(outputs)?;
    if outputs.paths().is_empty() {
        return Err(usage("export needs --json, --csv or --markdown FILE"));
    }
    let (run, _) = load_run(reference, store)?;
    // Serialise everything first, so a failing format leaves no file half of the set.
    let files = run::run_exporters(outputs)
        .into_iter()
        .map(|(p, e)| Ok((p, e.serialize(&run)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (p, bytes) in &files {
        report::write_atomic(p, bytes)?;
    }
    Ok(())
}

fn compare_options(args: &CompareArgs) -> compare::Options {
    compare::Options {
        threshold: args.threshold / 100.0,
        ..compare::Options::default()
    }
}

/// Print a comparison, write its files, and give the exit code (1 on a --fail-above breach).
fn finish_comparison(
    cmp: &Comparison,
    args: &CompareArgs,
    outputs: &OutputArgs,
) -> anyhow::Result<i32> {
    let mut files = Vec::new();
    if let Some(p) = &outputs.json {
        files.push((p.clone(), serde_json::to_vec_pretty(cmp)?));
    }
    if let Some(p) = &outputs.csv {
        files.push((p.clone(), report::comparison::csv(cmp).into_bytes()));
    }
    if let Some(p) = &outputs.markdown {
        files.push((p.clone(), report::comparison::markdown(cmp).into_bytes()));
    }
    for (p, bytes) in &files {
        report::write_atomic(p, bytes)?;
    }
    print_stdout(&report::comparison::render(cmp, color()))?;
    if let Some(pct) = args.fail_above {
        let bad = compare::regressions(cmp, pct);
        if !bad.is_empty() {
            eprintln!(
                "oscost: {} benchmark(s) slower by more than {pct}%: {}",
                bad.len(),
                bad.iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return Ok(1);
        }
    }
    Ok(0)
}

/// A directory a report can be written into: it exists or can be made, and is writable.
pub fn check_report_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!(
            "{} exists and is not a directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| usage(format!("cannot create {}: {e}", dir.display())))?;
    report::check_writable(&dir.join("index.html")).map_err(usage)
}

pub fn report(reference: &str, out: &Path, png: bool, store: &StoreArgs) -> anyhow::Result<()> {
    check_report_dir(out)?;
    let (run, name) = load_run(reference, store)?;
    let files = report::html::write_run(&run, out, png)?;
    eprintln!(
        "oscost: report of {name} in {} ({} files)",
        out.join("index.html").display(),
        files.len()
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn compare_cmd(
    base: &str,
    cand: &str,
    args: &CompareArgs,
    outputs: &OutputArgs,
    report_dir: Option<&Path>,
    png: bool,
    store: &StoreArgs,
) -> anyhow::Result<i32> {
    check_outputs(outputs)?;
    if let Some(d) = report_dir {
        check_report_dir(d)?;
    }
    let (b, bn) = load_run(base, store)?;
    let (c, cn) = load_run(cand, store)?;
    let cmp = compare::compare(&b, &c, &bn, &cn, &compare_options(args));
    if let Some(d) = report_dir {
        report::html::write_comparison(&cmp, d, png)?;
        eprintln!(
            "oscost: comparison report in {}",
            d.join("index.html").display()
        );
    }
    finish_comparison(&cmp, args, outputs)
}

pub fn ab(
    a: Option<&str>,
    b: Option<&str>,
    rounds: u64,
    args: &CompareArgs,
    run_args: &RunArgs,
    interrupted: Arc<AtomicUsize>,
) -> anyhow::Result<i32> {
    if run_args.under.is_some() {
        return Err(usage("ab takes its wrappers as --a and --b, not --under"));
    }
    let side = |cmd: Option<&str>| -> anyhow::Result<AbSide> {
        Ok(match cmd {
            Some(c) => AbSide {
                wrapper: split_command(c).map_err(|e| usage(e.0))?,
                text: Some(c.to_string()),
            },
            None => AbSide {
                wrapper: vec![],
                text: None,
            },
        })
    };
    let (sa, sb) = (side(a)?, side(b)?);
    // The run's own exports are not written by ab: its files are the comparison's.
    let outputs = run_args.outputs.clone();
    let mut plan_args = run_args.clone();
    plan_args.outputs = OutputArgs::default();
    check_outputs(&outputs)?;
    let plan = run::plan(&plan_args)?;
    let mut store = if run_args.no_save {
        None
    } else {
        Some(open_store(&run_args.store)?)
    };
    let (ra, rb) = run::execute_ab(&plan, &sa, &sb, rounds as usize, interrupted)?;
    let (mut na, mut nb) = ("A".to_string(), "B".to_string());
    if let Some(s) = &mut store {
        let ia = s.save(&ra).map_err(store_err)?;
        let ib = s.save(&rb).map_err(store_err)?;
        eprintln!(
            "oscost: saved A as run {ia} and B as run {ib} in {}",
            s.path().display()
        );
        na = format!("A (run {ia})");
        nb = format!("B (run {ib})");
    }
    let cmp = compare::compare(&ra, &rb, &na, &nb, &compare_options(args));
    finish_comparison(&cmp, args, &outputs)
}

/// `oscost ctx`: lmbench's lat_ctx on oscost's engine. stdout is lat_ctx's xgraph format
/// (`"size=Nk ovr=X` then `N cost` lines, microseconds); the CI of each point and any flag
/// go to stderr. Unlike lat_ctx, a point at or below the overhead is printed, not dropped.
#[allow(clippy::too_many_arguments)]
pub fn ctx(
    sizes: &[usize],
    parallel: u64,
    warmup_us: Option<u64>,
    repetitions: Option<u64>,
    procs: &[u64],
    json: Option<&Path>,
    interrupted: Arc<AtomicUsize>,
) -> anyhow::Result<()> {
    if let Some(p) = json {
        report::check_writable(p).map_err(usage)?;
    }
    let max = procs.iter().copied().max().unwrap_or(2) * parallel;
    let needed = 2 * max + 64;
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    if rl.rlim_max < needed {
        return Err(usage(format!(
            "a ring of {max} processes needs {needed} file descriptors, but the hard limit is {}: raise it (ulimit -Hn, limits.conf) or use fewer processes",
            rl.rlim_max
        )));
    }
    let mut args =
        match crate::cli::Cli::try_parse_from(["oscost", "run", "switch/ring", "--no-save"])? {
            crate::cli::Cli {
                command: Some(crate::cli::Command::Run(a)),
                ..
            } => a,
            _ => unreachable!("a fixed command line"),
        };
    args.samples = repetitions;
    let mut plan = run::plan(&args)?;
    plan.opts.variants.ring = crate::harness::case::RingOptions {
        procs: procs.iter().map(|&n| n as usize).collect(),
        sizes_kb: if sizes.is_empty() {
            vec![0]
        } else {
            sizes.to_vec()
        },
        parallel: parallel as usize,
    };
    // The sampling time a suite gives: shared by the points, not 2 s each.
    let points = plan.opts.variants.ring.procs.len() * plan.opts.variants.ring.sizes_kb.len();
    let cfg = &mut plan.opts.sampler;
    cfg.min_time_ns = run::min_sampling_ns(points, 400_000_000);
    cfg.budget_ns = cfg.budget_ns.max(2 * cfg.min_time_ns);
    if let Some(w) = warmup_us {
        plan.opts.sampler.warmup_ns = w * 1000;
    }
    // Each point gets the time a benchmark of a suite gets; a big ring is slow to set up.
    plan.timeout = plan
        .timeout
        .max(std::time::Duration::from_secs(60 + 2 * max));
    let run = run::execute(&plan, interrupted)?;
    if let Some(p) = json {
        report::write_atomic(p, &report::json::Json.serialize(&run)?)?;
    }
    let (text, notes) = report::xgraph::lat_ctx(&run);
    eprint!("{notes}");
    print_stdout(&text)
}
