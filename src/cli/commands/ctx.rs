//! `oscost ctx`: lmbench's lat_ctx on oscost's engine. stdout is lat_ctx's xgraph format
//! (`"size=Nk ovr=X` then `N cost` lines, microseconds); the CI of each point and any flag go
//! to stderr. Unlike lat_ctx, a point at or below the overhead is printed, not dropped.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::args::usage;
use super::print_stdout;
use super::{Command, Given};
use crate::bench::entry::RingOptions;
use crate::effects::gate::Effects;
use crate::measuring::sampler::StopWhen;
use crate::processes::scheduler::{self, Plan, repetition_plan};
use crate::{effects::output, report};

#[derive(Debug, Args, Clone)]
/// `oscost ctx`'s arguments (lmbench's lat_ctx's).
pub struct CtxArgs {
    /// Working set each process sums, KB (repeat for several: -s 0 -s 16).
    #[arg(short = 's', value_name = "KB")]
    pub sizes: Vec<usize>,
    /// Rings run at once (spread over the allowed CPUs).
    #[arg(short = 'P', value_name = "PARALLEL", default_value = "1",
          value_parser = clap::value_parser!(u64).range(1..=64))]
    pub parallel: u64,
    /// Warm-up before sampling each point, microseconds (at most 10 s).
    #[arg(short = 'W', value_name = "US",
          value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub warmup_us: Option<u64>,
    /// Samples per point (fixed, instead of sampling to a precision).
    #[arg(short = 'N', value_name = "REPETITIONS",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub repetitions: Option<u64>,
    /// Ring sizes (processes), 2 to 1024 and beyond if the fd limit allows.
    #[arg(required = true, value_name = "N",
          value_parser = clap::value_parser!(u64).range(2..=8192))]
    pub procs: Vec<u64>,
    /// Also write the run (the result model) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl CtxArgs {
    /// switch/ring with lat_ctx's points, the repetitions sized for them.
    fn plan(&self, max: u64) -> anyhow::Result<Plan> {
        let mut request = super::plan::Request::new(vec!["switch/ring".into()]);
        request.samples = self.repetitions;
        let mut plan = super::plan::build(&request)?;
        super::plan::settle_cpu(&mut plan);
        let ring = RingOptions {
            procs: self.procs.iter().map(|&n| n as usize).collect(),
            sizes_kb: if self.sizes.is_empty() {
                vec![0]
            } else {
                self.sizes.clone()
            },
            parallel: self.parallel as usize,
        };
        let points = ring.procs.len() * ring.sizes_kb.len();
        plan.opts.variants.ring = ring;
        let fixed = self.repetitions.map(|n| n as usize);
        plan.reps = repetition_plan(points, plan.reps.precision, None, fixed, false);
        let cfg = &mut plan.opts.sampler;
        if fixed.is_none() {
            cfg.stop = StopWhen::Elapsed {
                ns: plan.reps.rep_ns,
            };
            cfg.budget_ns = plan.reps.rep_ns;
        }
        if let Some(w) = self.warmup_us {
            cfg.warmup_ns = w * 1000;
        }
        // A big ring is slow to set up.
        plan.timeout = plan.timeout.max(Duration::from_secs(60 + 2 * max));
        Ok(plan)
    }
}

impl Command for CtxArgs {
    /// The run's JSON; the store is kept safe though ctx saves nothing.
    fn effects(&self) -> Effects {
        Effects::new()
            .store(None)
            .writes("--json", self.json.as_ref())
    }

    /// Measure the ring and print its points in xgraph's format.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let stop = crate::effects::signals::guard_processes()?;
        let max = self.procs.iter().copied().max().unwrap_or(2) * self.parallel;
        check_fd_limit(max)?;
        check_memory(&self.sizes, max, super::plan::mem_available_mib())?;
        let plan = self.plan(max)?;
        let run = scheduler::execute(&plan, &stop)?;
        let mut late = Vec::new();
        if let Some(p) = &self.json
            && let Err(e) = output::export(&run, &[(p.clone(), Box::new(report::json::Json) as _)])
        {
            late.push(e.to_string());
        }
        let (text, notes) = report::xgraph::lat_ctx(&run);
        crate::say_part!("{notes}");
        print_stdout(&text)?;
        Ok(super::session::conclude(&[&run], &late))
    }
}

/// Every process of a ring holds its working set: refuse sizes the memory cannot hold (the
/// worker would otherwise abort on the allocation after the run had started).
fn check_memory(sizes_kb: &[usize], max: u64, avail_mib: Option<u64>) -> anyhow::Result<()> {
    let biggest = sizes_kb.iter().copied().max().unwrap_or(0) as u64;
    let need_mib = biggest.saturating_mul(max) / 1024;
    match avail_mib {
        Some(avail) if need_mib > avail / 2 => Err(usage(format!(
            "-s {biggest} with {max} processes needs {need_mib} MiB, more than half of the {avail} MiB available; use a smaller working set or fewer processes"
        ))),
        _ => Ok(()),
    }
}

/// A ring of `max` processes needs two descriptors each: refuse at once when the hard limit
/// cannot allow it.
fn check_fd_limit(max: u64) -> anyhow::Result<()> {
    let needed = 2 * max + 64;
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    if rl.rlim_max < needed {
        return Err(usage(format!(
            "a ring of {max} processes needs {needed} file descriptors, but the hard limit is {}: raise it (ulimit -Hn, limits.conf) or use fewer processes",
            rl.rlim_max
        )));
    }
    Ok(())
}
