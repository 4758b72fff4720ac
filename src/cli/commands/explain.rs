//! `oscost explain ID`: where a ping-pong's round trip goes. The benchmark runs in this
//! process twice: untraced (its median round trip), then briefly with the scheduler's and idle
//! tracepoints (and with `--syscalls` the system calls') recorded on every allowed CPU in an
//! ftrace instance of oscost's own (`tracing::trace`); the trace is read after the pass and
//! split into stages (`analysis::explain`). The output says how far tracing moved the round
//! trip against the untraced median.
//!
//! In this process, not in a worker: the measuring thread is then this thread, found in the
//! trace by a name it takes for the traced pass (the tracepoints record the initial PID
//! namespace's ids, which `gettid` in a container does not give), and the peer is the thread
//! it wakes. Needs root (mounting tracefs in
//! a namespace of the helper's own); without, exit 2 saying what is missing. Nothing stays
//! traced or mounted: the helper removes the instance when the tracer is dropped (or the
//! command dies), and its mount dies with its namespace.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::args::usage;
use super::{Command, Given};
use crate::analysis::explain::{self, Split};
use crate::bench::entry::Cases;
use crate::bench::runner;
use crate::effects::gate::Effects;
use crate::measuring::case::Meter;
use crate::measuring::clock::{Monotonic, calibrate};
use crate::measuring::noise::Rusage;
use crate::measuring::placement;
use crate::measuring::sampler::{Sampler, SamplerConfig, StopWhen};
use crate::report::explain::Explanation;
use crate::tracing::trace::{Tracer, ipis_received};

/// The measuring thread's name for the traced pass, unique to it (a nonce), and its own
/// name again when dropped, on every path out of the pass.
struct PassName {
    name: String,
    before: std::ffi::CString,
}

impl PassName {
    fn set() -> anyhow::Result<PassName> {
        let before = nix::sys::prctl::get_name().context("cannot read the thread's name")?;
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id();
        // 15 bytes at most: the kernel's command names are 16 with the NUL.
        let name = format!("oscost-m{:07x}", nonce & 0x0fff_ffff);
        let c = std::ffi::CString::new(name.clone()).context("a thread name")?;
        nix::sys::prctl::set_name(&c).context("cannot name the measuring thread")?;
        Ok(PassName { name, before })
    }
}

impl Drop for PassName {
    fn drop(&mut self) {
        let _ = nix::sys::prctl::set_name(&self.before);
    }
}

#[derive(Debug, Args, Clone)]
/// `oscost explain`'s arguments.
pub struct ExplainArgs {
    /// A two-party benchmark with its placement, e.g. switch/pipe-proc@cross.
    pub id: String,
    /// Pin the measuring thread to this CPU [default: as `run`].
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Write `{id, round_trip_ns, untraced_median_ns, stages: [...]}` as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a page with the round trip's waterfall into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Also trace system call entries and exits, splitting each side's turn into its return
    /// to user space, its own code and its next call. Costs the traced pass more (every call
    /// takes the kernel's slow path), said against the untraced median.
    #[arg(long)]
    pub syscalls: bool,
}

/// Sampler settings of a pass: `untraced` long enough for a median, the traced one short
/// (every event of it is kept in memory until the pass ends).
fn pass_config(clock_cost_ns: f64, traced: bool) -> SamplerConfig {
    let c = SamplerConfig::for_clock(Some(clock_cost_ns));
    if traced {
        SamplerConfig {
            stop: StopWhen::Elapsed { ns: 15_000_000 },
            warmup_ns: 2_000_000,
            budget_ns: 30_000_000,
            ..c
        }
    } else {
        SamplerConfig {
            stop: StopWhen::Precise {
                precision: 0.01,
                min_ns: 300_000_000,
            },
            budget_ns: 1_000_000_000,
            ..c
        }
    }
}

fn median_of(cases: &[runner::CaseResult]) -> Option<f64> {
    let m = cases.first()?.measurement.as_ref()?;
    (!m.samples_ns.is_empty()).then(|| crate::base::stats::median(&m.samples_ns))
}

impl ExplainArgs {
    /// The plan of the one benchmark and placement asked for, or a usage error; its measuring
    /// CPU is settled once the tracer is open (a refusal comes first, in one line).
    fn plan(&self) -> anyhow::Result<crate::processes::scheduler::Plan> {
        let mut req = super::plan::Request::new(vec![self.id.clone()]);
        req.cpu = self.cpu;
        req.events = Some(vec!["none".into()]);
        let plan = super::plan::build(&req)?;
        let b = plan.benchmarks[0];
        if plan.benchmarks.len() != 1 || !matches!(b.cases, Cases::Placements) {
            return Err(usage(format!(
                "explain splits a two-party round trip; '{}' is not one ping-pong (try \
                 switch/pipe-proc@cross, or `oscost list switch/`)",
                self.id
            )));
        }
        if plan.opts.variants.placements.len() != 1 {
            return Err(usage(format!(
                "explain one placement at a time: {}@same, @cross or @free",
                b.id
            )));
        }
        Ok(plan)
    }

    /// `--json` and `--report`; exit 1 when one could not be written.
    fn write(&self, out: &Explanation, stop: &crate::base::stop::Stop) -> anyhow::Result<i32> {
        let mut late = Vec::new();
        if let Some(j) = &self.json {
            let bytes = serde_json::to_vec_pretty(out)?;
            if let Err(e) = crate::effects::output::write_file(j, &bytes) {
                late.push(e.to_string());
            }
        }
        if let Some(d) = &self.report {
            let page = crate::report::explain::render_page(out).map_err(anyhow::Error::msg)?;
            match crate::effects::output::write_page(d, &page, stop) {
                Ok(_) => crate::say!("oscost: report in {}", d.join("index.html").display()),
                Err(e) => late.push(e.to_string()),
            }
        }
        for l in &late {
            crate::say!("oscost: {l}");
        }
        Ok(i32::from(!late.is_empty()))
    }
}

impl Command for ExplainArgs {
    /// The JSON and the page; the store is kept safe though explain saves nothing.
    fn effects(&self) -> Effects {
        Effects::new()
            .store(None)
            .writes("--json", self.json.as_ref())
            .writes_report("--report", self.report.as_ref())
    }

    /// Trace a pass, split its round trips into stages and write what it found.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let stop = crate::effects::signals::guard_processes()?;
        let mut plan = self.plan()?;
        let allowed = plan.opts.allowed.clone();
        let mut tracer = Tracer::open(&allowed, self.syscalls).map_err(|e| usage(e.to_string()))?;
        super::plan::settle_cpu(&mut plan);
        let b = plan.benchmarks[0];
        let id = format!("{}@{}", b.id, plan.opts.variants.placements[0].word());
        placement::pin_current_thread(plan.opts.cpu).map_err(anyhow::Error::msg)?;
        let clock = calibrate();
        let meter = |traced: bool| Meter {
            sampler: Sampler::new(Monotonic, Rusage, pass_config(clock.cost_ns, traced)),
            cpu: plan.opts.cpu,
            allowed: allowed.clone(),
            mq_name: plan.opts.mq_name.clone(),
            scratch_dir: None,
            // explain traces two-party round trips, none of which start processes in a cgroup.
            cgroup: Err("explain makes no cgroup".into()),
            events: vec![],
            profile: false,
        };
        crate::say!("oscost: {id}: untraced pass, then a traced one");
        let untraced = runner::run_cases(&meter(false), b, &plan.opts.variants);
        stop.check()?;
        let untraced_median = median_of(&untraced).ok_or_else(|| {
            anyhow::anyhow!(
                "{id} could not be measured: {}",
                untraced
                    .first()
                    .and_then(|c| c.error.as_ref())
                    .map_or("no result".into(), |e| e.to_string())
            )
        })?;
        // The measuring thread is found in the trace by a name of its own for the pass: the
        // tracepoints record the initial PID namespace's ids, not `gettid`'s (`tid_named`).
        let named = PassName::set()?;
        let ipis_before = ipis_received(&allowed);
        tracer.enable()?;
        let traced = runner::run_cases(&meter(true), b, &plan.opts.variants);
        tracer.disable()?;
        let master = tracer.tid_named(&named.name);
        drop(named);
        let master = master.ok_or_else(|| {
            anyhow::anyhow!("the measuring thread was not seen switching in the trace of {id}")
        })?;
        let ipis = ipis_before
            .zip(ipis_received(&allowed))
            .map(|(a, b)| b.saturating_sub(a));
        stop.check()?;
        let (events, lost) = tracer.read();
        let missing = tracer.missing.clone();
        let recorder = tracer.recorder;
        drop(tracer);
        let Some(traced_median) = median_of(&traced) else {
            anyhow::bail!("{id} failed in the traced pass");
        };
        let split: Split = explain::split(&events, master).map_err(anyhow::Error::msg)?;
        let out = Explanation {
            id: id.clone(),
            round_trip_ns: split.round_trip_ns,
            untraced_median_ns: untraced_median,
            tracing_factor: split.round_trip_ns / untraced_median,
            traced_pass_median_ns: traced_median,
            round_trips: split.round_trips,
            incomplete: split.incomplete,
            lost_records: lost,
            ipis_per_round_trip: ipis
                .map(|n| n as f64 / (split.round_trips + split.incomplete).max(1) as f64),
            switches_unseen: split.switches_unseen,
            unwoken: split.unwoken,
            syscalls: self.syscalls,
            command_name_recorder: recorder,
            stages: split.stages,
            missing_events: missing,
        };
        super::print_stdout(&crate::report::explain::render_text(&out))?;
        self.write(&out, &stop)
    }
}
