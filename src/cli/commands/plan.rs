//! What a measuring command asks for, without clap (`Request`), and its validation into the
//! scheduler's `Plan` (`build`): benchmark ids and placements, the measuring CPU (the named or
//! the default one), sampling and repetitions (a comparison's rounds too), fork sizes, events.
//! `build` reads only what validating needs (the CPUs this process may use, MemAvailable for
//! fork sizes) and measures nothing, and the plan it returns is final: no command patches
//! it after (a side's conditions are the side's, `args::SideFlags`); `settle_cpu`, called by each command once
//! it has accepted every input, watches the CPUs for 100 ms and trades a busy default CPU for
//! an idle one unless the user named it (`measuring_cpu` does the same for `predict`, which
//! runs no plan of its own). `run` makes a request from its flags,
//! `ab` from the same flags (with its rounds), `ctx` from lmbench's, `predict` and
//! `explain` from theirs; none of them builds another command's arguments.

use std::time::Duration;

use super::args::usage;
use crate::bench;
use crate::bench::entry::{Benchmark, RingOptions, VariantOptions, default_fork_sizes};
use crate::bench::runner::{self, WorkerOptions, default_mq_name};
use crate::measuring::placement::{self, Place};
use crate::measuring::sampler::{SamplerConfig, StopWhen};
use crate::processes::scheduler::{Plan, RepetitionPlan, repetition_plan};

/// A measurement asked for, as values (what `oscost run`'s flags say, defaults included).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Ids or prefixes, a placement allowed after `@`; none: the default suite.
    pub ids: Vec<String>,
    /// Stop once the CI's half-width is within this percent of the median.
    pub precision_pct: f64,
    /// A limit on each benchmark's time, seconds.
    pub budget_s: Option<f64>,
    /// Exactly this many samples per result.
    pub samples: Option<u64>,
    /// Fewer repetitions and a looser precision.
    pub quick: bool,
    /// The measuring CPU, when the user named one.
    pub cpu: Option<usize>,
    /// Longest one worker may take, seconds.
    pub timeout_s: Option<f64>,
    /// The parent sizes of spawn/fork-rss, MiB.
    pub fork_sizes: Option<Vec<u64>>,
    /// The placements of two-party benchmarks (same, cross, default).
    pub placement: Option<Vec<String>>,
    /// Copies run at once by scale/ (counts or `all`; `None`: 1 and every allowed CPU).
    pub copies: Option<Vec<String>>,
    /// The events to count (`None`: every known one).
    pub events: Option<Vec<String>>,
    /// The run's label.
    pub label: Option<String>,
    /// Profile every case (`--profile`).
    pub profile: bool,
    /// A comparison's rounds (`ab`, `predict`): none for a run.
    pub rounds: Option<ComparisonRounds>,
    /// Start a side's wrapper itself on the measuring CPU, not only the worker (`predict`: a
    /// tracer then runs where the program it prices will run).
    pub pin_wrapper: bool,
    /// How long a block of one side's rounds lasts, at least, where a program runs during a
    /// side (`scheduler::BLOCK_S`; `predict` asks for `PRICE_BLOCK_S`).
    pub block_s: f64,
}

/// How many rounds the sides of a comparison take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ComparisonRounds {
    /// At least this many rounds per benchmark.
    pub min: usize,
    /// Then until the comparison has decided against this noise band (`ab`), within the
    /// budget; `None`: exactly `min` rounds at least, as a run's repetitions stop (`predict`).
    pub decide: Option<f64>,
    /// A program runs during a side: the sides alternate in blocks, and the sequential
    /// schedule's cap counts blocks.
    pub in_blocks: bool,
}

impl Request {
    /// The default request for `ids`: 1% precision, the default CPU, placements and events.
    pub fn new(ids: Vec<String>) -> Request {
        Request {
            ids,
            precision_pct: 1.0,
            budget_s: None,
            samples: None,
            quick: false,
            cpu: None,
            timeout_s: None,
            fork_sizes: None,
            placement: None,
            copies: None,
            events: None,
            label: None,
            profile: false,
            rounds: None,
            pin_wrapper: false,
            block_s: crate::processes::scheduler::BLOCK_S,
        }
    }
}

/// Validate a request into a plan. Every error here is a usage error (exit 2). The
/// clock-dependent sampler settings (clock cost, batch length) are filled in by the scheduler
/// once the clock is calibrated.
pub fn build(args: &Request) -> anyhow::Result<Plan> {
    let (_, id_places) = split_placements(&args.ids);
    let selection = bench::select(&args.ids).map_err(|e| usage(command_typo(&args.ids, e)))?;
    let benchmarks = selection.benchmarks;
    let allowed = placement::allowed_cpus();
    let cpu = resolve_cpu(args.cpu, &allowed).map_err(usage)?;
    let avail = mem_available_mib();
    let fork_sizes_mib = resolve_fork_sizes(args.fork_sizes.as_deref(), avail).map_err(usage)?;
    let placements = resolve_placements(args.placement.as_deref(), &id_places).map_err(usage)?;
    let copies = resolve_copies(args.copies.as_deref(), allowed.len()).map_err(usage)?;
    let variants = VariantOptions {
        placements,
        ring: RingOptions::default(),
        fork_sizes_mib,
        copies,
        only: selection.cases,
    };
    no_case_unmatched(&benchmarks, &variants).map_err(usage)?;
    let (sampler, mut reps) = resolve_sampling(args, &benchmarks, &variants);
    if let Some(r) = &args.rounds {
        plan_rounds(&mut reps, r, args.budget_s, args.quick);
    }
    let events = resolve_events(args.events.as_deref()).map_err(usage)?;
    if args.profile {
        crate::measuring::profile::probe(&allowed)
            .map_err(|why| usage(format!("--profile: {why}; run without --profile")))?;
    }
    let rep_s = reps.rep_ns as f64 / 1e9;
    let timeout = Duration::from_secs_f64(args.timeout_s.unwrap_or(30.0 + 40.0 * rep_s));
    Ok(Plan {
        benchmarks,
        opts: WorkerOptions {
            sampler,
            cpu,
            allowed,
            variants,
            mq_name: default_mq_name(),
            scratch_dir: None,
            cgroup_dir: None,
            cgroup_missing: None,
            events,
            task_settings: vec![],
            read_confinement: false,
            profile: args.profile,
        },
        timeout,
        label: args.label.clone(),
        reps,
        pin_wrapper: args.pin_wrapper,
        cpu_asked: args.cpu.is_some(),
        quiet: false,
        round_gap: std::time::Duration::ZERO,
        block_s: args.block_s,
    })
}

/// ab's longest time on one benchmark, both sides, when --budget is not given, seconds. Enough
/// here to decide x1.02 on a null system call: its rounds' ratios spread ~4% (fresh processes
/// sit at one of two levels ~8% apart), so a CI of ±1% at the sequential level needs ~150
/// rounds, ~25 s with 60 ms repetitions (docs/design-notes.md, "ab decides").
pub const AB_BUDGET_S: f64 = 40.0;

/// ab's budget with --quick, seconds: x1.05 on a null call decides well within it.
pub const AB_QUICK_BUDGET_S: f64 = 10.0;

/// A comparison's rounds: at least `rounds.min` (and `stats::sequential::MIN_ROUNDS` where
/// it decides), then until the comparison has decided against its noise band, or `budget_s`
/// (both sides' sampling time) ends. With --samples (a fixed total), or without a band to
/// decide against, the sides take at least `rounds.min` repetitions as a run takes its own.
/// In blocks (a program runs during a side) the blocks are the pairs the sequential schedule
/// counts, so its cap (`MAX_ROUNDS`) bounds blocks, not rounds.
fn plan_rounds(
    reps: &mut RepetitionPlan,
    rounds: &ComparisonRounds,
    budget_s: Option<f64>,
    quick: bool,
) {
    use crate::base::stats::sequential::{MAX_ROUNDS, MIN_ROUNDS};
    let Some(band) = rounds.decide.filter(|_| reps.fixed_total.is_none()) else {
        reps.min = reps.min.max(rounds.min);
        reps.max = reps.max.max(reps.min);
        return;
    };
    let rep_s = reps.rep_ns as f64 / 1e9;
    let budget = budget_s.unwrap_or(if quick {
        AB_QUICK_BUDGET_S
    } else {
        AB_BUDGET_S
    });
    reps.min = rounds.min.max(MIN_ROUNDS);
    let cap = if rounds.in_blocks {
        MAX_ROUNDS * crate::processes::scheduler::BLOCK_MAX_ROUNDS
    } else {
        MAX_ROUNDS
    };
    reps.max = ((budget / (2.0 * rep_s)) as usize).clamp(reps.min, cap);
    reps.decide = Some(band);
}

/// A look at the CPUs right before measuring, once the command has accepted every input (so
/// that bad input is refused in one line, whatever the CPUs are doing): the default CPU may be
/// where the user pinned other work (`taskset -c 1`), and gives way to an idle one, said on
/// stderr. A CPU the user named (`asked`) is taken as given.
pub fn settle_cpu(plan: &mut Plan) {
    if !plan.cpu_asked {
        plan.opts.cpu = settled(plan.opts.cpu, &plan.opts.allowed);
    }
}

/// The measuring CPU of a command that runs no plan of its own (`predict`'s program): the one
/// asked for, checked against the allowed CPUs, or the default settled as `settle_cpu` does.
pub fn measuring_cpu(asked: Option<usize>) -> anyhow::Result<usize> {
    let allowed = placement::allowed_cpus();
    let cpu = asked_cpu(asked)?;
    Ok(match asked {
        Some(_) => cpu,
        None => settled(cpu, &allowed),
    })
}

/// The CPU asked for (`--cpu`), or the default one, checked against the allowed CPUs
/// without looking at how busy they are: a bad `--cpu` refused before anything changes.
pub fn asked_cpu(asked: Option<usize>) -> anyhow::Result<usize> {
    resolve_cpu(asked, &placement::allowed_cpus()).map_err(usage)
}

/// `default` unless it is busy and another allowed CPU is idle.
fn settled(default: usize, allowed: &[usize]) -> usize {
    if allowed.len() < 2 {
        return default;
    }
    let busy = placement::busy_now(allowed, Duration::from_millis(100));
    let (chosen, said) = placement::choose_idle(default, &busy);
    if let Some(line) = said {
        crate::say!("oscost: {line}");
    }
    chosen
}

/// The events `--events` names (every known one by default, none for `none`).
fn resolve_events(asked: Option<&[String]>) -> Result<Vec<String>, String> {
    use crate::measuring::counters::{EVENTS, find};
    match asked {
        None => Ok(EVENTS.iter().map(|e| e.name.to_string()).collect()),
        Some([none]) if none == "none" => Ok(vec![]),
        Some(list) => list
            .iter()
            .map(|e| {
                find(e).map(|d| d.name.to_string()).ok_or_else(|| {
                    let known: Vec<&str> = EVENTS.iter().map(|d| d.name).collect();
                    format!(
                        "--events: unknown event '{e}'; known: {}, or none",
                        known.join(", ")
                    )
                })
            })
            .collect(),
    }
}

/// The copies scale/ runs at once: the counts asked (`all`: every allowed CPU), sorted and
/// each once, or 1 and every allowed CPU. A count past the allowed CPUs is refused here,
/// before measuring: a copy never shares a CPU with another.
fn resolve_copies(asked: Option<&[String]>, cpus: usize) -> Result<Vec<usize>, String> {
    let mut v: Vec<usize> = match asked {
        None => vec![1, cpus.max(1)],
        Some(list) => list
            .iter()
            .map(|w| match w.trim() {
                "all" => Ok(cpus.max(1)),
                t => match t.parse::<usize>() {
                    Ok(0) | Err(_) => Err(format!(
                        "--copies: '{w}' is not a count of copies; give numbers from 1 to {cpus}, or all"
                    )),
                    Ok(n) if n > cpus => Err(format!(
                        "--copies: {n} copies need {n} CPUs of their own; this process may use {cpus} (give at most {cpus}, or all)"
                    )),
                    Ok(n) => Ok(n),
                },
            })
            .collect::<Result<_, _>>()?,
    };
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Every result id given (`VariantOptions::only`) names at least one case of this plan: one
/// that names none is refused with the cases its benchmark has.
fn no_case_unmatched(benchmarks: &[&Benchmark], variants: &VariantOptions) -> Result<(), String> {
    let every = VariantOptions {
        only: vec![],
        ..variants.clone()
    };
    for p in &variants.only {
        let Some(b) = benchmarks.iter().find(|b| {
            p.strip_prefix(b.id)
                .is_some_and(|rest| rest.starts_with(['/', '@']))
        }) else {
            continue;
        };
        let ids: Vec<String> = runner::expand(b, &every)
            .into_iter()
            .map(|c| format!("{}{}", b.id, c.suffix))
            .collect();
        if !ids.iter().any(|id| id.starts_with(p.as_str())) {
            let shown: Vec<&str> = ids.iter().take(8).map(String::as_str).collect();
            return Err(format!(
                "no case of {} is '{p}'; its cases here: {}{}",
                b.id,
                shown.join(", "),
                if ids.len() > shown.len() { ", ..." } else { "" }
            ));
        }
    }
    Ok(())
}

/// A bare word that matches no benchmark but is a command mistyped (`oscost lsit`): said as
/// the command it is closest to, not as the nearest benchmark id.
fn command_typo(ids: &[String], matched: String) -> String {
    let Some(word) = ids.first().filter(|w| !w.contains(['/', '@'])) else {
        return matched;
    };
    let cmd = <crate::cli::Cli as clap::CommandFactory>::command();
    let best = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name())
        .map(|n| (strsim::damerau_levenshtein(word, n), n))
        .min();
    match best {
        Some((d, name)) if d <= 2 && d < word.len() => {
            format!(
                "'{word}' is neither a command nor a benchmark; did you mean `oscost {name}`? (`oscost --help` lists the commands)"
            )
        }
        _ => matched,
    }
}

/// `switch/pipe-proc@cross` is a result id: the benchmark, at that placement. Returns the
/// benchmark ids and the placements named this way.
fn split_placements(ids: &[String]) -> (Vec<String>, Vec<String>) {
    let mut places = Vec::new();
    let bare = ids
        .iter()
        .map(|id| match id.split_once('@') {
            Some((base, place)) => {
                places.push(place.to_string());
                base.to_string()
            }
            None => id.clone(),
        })
        .collect();
    (bare, places)
}

/// The measuring CPU: the one asked for if it is allowed, else the default.
fn resolve_cpu(asked: Option<usize>, allowed: &[usize]) -> Result<usize, String> {
    match asked {
        _ if allowed.is_empty() => {
            Err("this process may run on no CPU (sched_getaffinity failed)".into())
        }
        Some(c) => super::args::allowed_cpu("--cpu", c, allowed),
        None => placement::default_cpu(allowed).ok_or_else(|| "no allowed CPU".into()),
    }
}

/// The repetitions (how many, how long each, when to stop: see `scheduler::repetition_plan`)
/// and the sampler settings of one repetition: it samples for exactly the repetition's time
/// after a short warm-up (or takes its share of --samples).
fn resolve_sampling(
    args: &Request,
    benchmarks: &[&Benchmark],
    variants: &VariantOptions,
) -> (SamplerConfig, RepetitionPlan) {
    let cases: usize = benchmarks
        .iter()
        .map(|b| runner::expand(b, variants).len())
        .sum();
    let precision = if args.quick && args.precision_pct == 1.0 {
        0.02
    } else {
        args.precision_pct / 100.0
    };
    let fixed = args.samples.map(|n| n as usize);
    let reps = repetition_plan(cases, precision, args.budget_s, fixed, args.quick);
    let sampler = SamplerConfig {
        // The scheduler shares a fixed count out over the repetitions (`rep_options`).
        stop: match fixed {
            Some(n) => StopWhen::Count { n },
            None => StopWhen::Elapsed { ns: reps.rep_ns },
        },
        // A fixed count may take longer than a repetition's time: --budget still caps it.
        budget_ns: match fixed {
            Some(_) => args.budget_s.map_or(60_000_000_000, |b| (b * 1e9) as u64),
            None => reps.rep_ns,
        },
        warmup_ns: 5_000_000,
        // The clock is calibrated when the scheduler's session starts.
        ..SamplerConfig::for_clock(None)
    };
    (sampler, reps)
}

/// The parent sizes of spawn/fork-rss: those asked for (sorted, at most the memory available),
/// or the default curve cut where this machine's free memory stops.
fn resolve_fork_sizes(asked: Option<&[u64]>, avail_mib: Option<u64>) -> Result<Vec<u64>, String> {
    match asked {
        Some(v) => {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.dedup();
            if let (Some(&max), Some(avail)) = (v.last(), avail_mib)
                && max > avail
            {
                return Err(format!(
                    "--fork-sizes: {max} MiB is more than the {avail} MiB of memory available"
                ));
            }
            Ok(v)
        }
        None => {
            let avail = avail_mib.unwrap_or(u64::MAX);
            Ok(default_fork_sizes()
                .into_iter()
                .filter(|&m| m.saturating_mul(2) <= avail)
                .collect())
        }
    }
}

/// Placements from ids written `ID@PLACE` (the most specific thing the user wrote: it wins),
/// else from --placement, else the defaults.
fn resolve_placements(asked: Option<&[String]>, from_ids: &[String]) -> Result<Vec<Place>, String> {
    let words = match asked {
        _ if !from_ids.is_empty() => from_ids,
        Some(list) => list,
        None => return Ok(Place::defaults()),
    };
    let mut v = Vec::new();
    for w in words {
        let p = Place::parse(w.trim())
            .ok_or_else(|| format!("--placement: '{w}' is not one of same, cross, free"))?;
        if !v.contains(&p) {
            v.push(p);
        }
    }
    Ok(v)
}

/// MemAvailable from /proc/meminfo, MiB.
pub use crate::measuring::os::mem_available_mib;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Verb};
    use clap::Parser;

    /// The request `oscost run ARGV` makes.
    fn args(argv: &[&str]) -> Request {
        let full: Vec<&str> = ["oscost", "run"].iter().chain(argv).copied().collect();
        match Cli::try_parse_from(full).unwrap().command {
            Some(Verb::Run(a)) => a.measure.request(),
            _ => unreachable!("a run command line"),
        }
    }

    #[test]
    fn the_default_request_is_what_run_without_flags_asks_for() {
        assert_eq!(args(&["syscall/"]), Request::new(vec!["syscall/".into()]));
    }

    #[test]
    fn ids_with_a_placement_name_the_benchmark_and_the_placement() {
        let (ids, places) = split_placements(&["switch/pipe-proc@cross".into(), "syscall/".into()]);
        assert_eq!(ids, vec!["switch/pipe-proc", "syscall/"]);
        assert_eq!(places, vec!["cross"]);
    }

    #[test]
    fn cpu_must_be_allowed_and_defaults_to_the_last() {
        assert_eq!(resolve_cpu(None, &[0, 1]), Ok(1));
        assert_eq!(resolve_cpu(Some(0), &[0, 1]), Ok(0));
        let e = resolve_cpu(Some(7), &[0, 1]).unwrap_err();
        assert!(e.contains("allowed: 0,1"), "{e}");
        assert!(resolve_cpu(None, &[]).is_err());
    }

    #[test]
    fn sampling_follows_quick_budget_samples_and_the_suite_size() {
        let v = VariantOptions::default();
        let getpid = bench::matching(&["syscall/getpid".into()]).unwrap();
        let (w, reps) = resolve_sampling(&args(&[]), &getpid, &v);
        assert_eq!(
            (w.stop, w.budget_ns),
            (StopWhen::Elapsed { ns: reps.rep_ns }, reps.rep_ns)
        );
        assert_eq!((reps.min, reps.max, reps.precision), (5, 10, 0.01));
        let (_, quick) = resolve_sampling(&args(&["--quick"]), &getpid, &v);
        assert_eq!((quick.max, quick.precision), (5, 0.02));
        let (w, fixed) =
            resolve_sampling(&args(&["--budget", "0.1", "--samples", "50"]), &getpid, &v);
        assert_eq!((w.budget_ns, fixed.fixed_total), (100_000_000, Some(50)));
        assert_eq!(w.stop, StopWhen::Count { n: 50 });
        // The suite's cases share the time: shorter repetitions than one benchmark gets.
        let suite = bench::matching(&[]).unwrap();
        let (_, many) = resolve_sampling(&args(&[]), &suite, &v);
        assert!(many.rep_ns < reps.rep_ns && many.max < reps.max);
    }

    #[test]
    fn copies_default_to_one_and_every_cpu_and_never_exceed_them() {
        assert_eq!(resolve_copies(None, 16), Ok(vec![1, 16]));
        assert_eq!(resolve_copies(None, 1), Ok(vec![1]));
        let asked = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            resolve_copies(Some(&asked(&["8", "all", "2", "8"])), 16),
            Ok(vec![2, 8, 16])
        );
        assert!(
            resolve_copies(Some(&asked(&["17"])), 16)
                .unwrap_err()
                .contains("16")
        );
        assert!(resolve_copies(Some(&asked(&["0"])), 16).is_err());
        assert!(resolve_copies(Some(&asked(&["two"])), 16).is_err());
    }

    #[test]
    fn fork_sizes_are_sorted_and_bounded_by_memory() {
        assert_eq!(
            resolve_fork_sizes(Some(&[64, 0, 64]), Some(1000)),
            Ok(vec![0, 64])
        );
        assert!(resolve_fork_sizes(Some(&[2048]), Some(1000)).is_err());
        assert_eq!(resolve_fork_sizes(None, Some(600)), Ok(vec![0, 64, 256]));
        assert_eq!(resolve_fork_sizes(None, None), Ok(default_fork_sizes()));
    }

    #[test]
    fn placements_come_from_the_ids_then_the_flag_then_the_defaults() {
        assert_eq!(
            resolve_placements(Some(&["cross".into()]), &["same".into()]),
            Ok(vec![Place::Same])
        );
        assert_eq!(
            resolve_placements(Some(&["same".into()]), &[]),
            Ok(vec![Place::Same])
        );
        assert_eq!(
            resolve_placements(None, &["free".into()]),
            Ok(vec![Place::Free])
        );
        assert_eq!(resolve_placements(None, &[]), Ok(Place::defaults()));
        let dup = ["cross".into(), " cross".into()];
        assert_eq!(resolve_placements(Some(&dup), &[]), Ok(vec![Place::Cross]));
        assert!(resolve_placements(Some(&["both".into()]), &[]).is_err());
    }
}
