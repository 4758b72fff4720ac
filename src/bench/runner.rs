//! The runner: expands a benchmark's cases, places the parties, snapshots /proc/stat around
//! each case, forms the result id and parameters, and turns a case's error into that case's
//! failure. What it produces (`CaseResult`) is raw: samples and the evidence around them,
//! before any statistics, which the coordinator's analysis computes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::entry::{Benchmark, Cases, Param, VariantOptions};
use crate::base::model::Placement;
use crate::measuring::case::{BenchError, Case, Meter, Outcome};
use crate::measuring::noise::{self, CpuSnapshot};
use crate::measuring::placement::{self, Parties};
use crate::measuring::sampler::{Measurement, SamplerConfig};
use crate::measuring::{confinement, counters, profile, scaling};

/// Options the coordinator passes to every worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerOptions {
    /// How each case is sampled.
    pub sampler: SamplerConfig,
    /// The CPU single-thread benchmarks are pinned to.
    pub cpu: usize,
    /// CPUs the run may use.
    pub allowed: Vec<usize>,
    /// Placements, ring and fork sizes: what each benchmark expands to.
    pub variants: VariantOptions,
    /// Name of the POSIX message queue a worker may create.
    pub mq_name: String,
    /// A private directory for temporary files, removed by the coordinator.
    #[serde(default)]
    pub scratch_dir: Option<PathBuf>,
    /// The run's cgroup, made when a benchmark of the plan asks for one
    /// (`effects::cgroup`), or why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_dir: Option<PathBuf>,
    /// Why the run has no cgroup, where a benchmark asked for one and it could not be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_missing: Option<String>,
    /// perf events to count around each case (`--events`); empty: none.
    #[serde(default)]
    pub events: Vec<String>,
    /// Per-task settings the worker applies to itself before measuring (`--set
    /// spec-store-bypass=disable`): (name, value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_settings: Vec<(String, String)>,
    /// Read the worker's own confinement and send it with the first case: asked of one
    /// repetition (`scheduler::rep_options`), since every worker of a side is started alike.
    #[serde(default)]
    pub read_confinement: bool,
    /// Profile every case in an untimed pass of its own (`--profile`, `measuring::profile`).
    #[serde(default)]
    pub profile: bool,
}

#[cfg(test)]
impl WorkerOptions {
    /// Options for unit tests that start no worker: CPU 0 alone, a 25 ns clock, nothing
    /// counted, no scratch directory or cgroup.
    pub fn for_tests() -> WorkerOptions {
        WorkerOptions {
            sampler: SamplerConfig::for_clock(Some(25.0)),
            cpu: 0,
            allowed: vec![0],
            variants: Default::default(),
            mq_name: String::new(),
            scratch_dir: None,
            cgroup_dir: None,
            cgroup_missing: None,
            events: vec![],
            task_settings: vec![],
            read_confinement: false,
            profile: false,
        }
    }
}

/// The POSIX message queue name of this run.
pub fn default_mq_name() -> String {
    format!("/oscost-{}", std::process::id())
}

/// One case as measured: raw samples and the evidence around them, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The result id (benchmark id, variant suffix, placement).
    pub id: String,
    /// The catalogue id the case belongs to.
    pub bench: String,
    /// The case's parameters.
    pub params: BTreeMap<String, serde_json::Value>,
    /// What one sample is the cost of.
    pub definition: String,
    /// Where its parties ran.
    pub placement: Placement,
    /// CPUs the case ran on; the other allowed ones are watched for load.
    pub used_cpus: Vec<usize>,
    /// SMT siblings of the CPUs it ran on (hardware threads of the same cores).
    #[serde(default)]
    pub smt_siblings: Vec<usize>,
    /// Every CPU's times before the case.
    pub cpu_before: CpuSnapshot,
    /// Every CPU's times after it.
    pub cpu_after: CpuSnapshot,
    /// The samples (`None` when the case failed or was skipped).
    pub measurement: Option<Measurement>,
    /// Notes on the number.
    pub notes: Vec<String>,
    /// Involuntary switches are part of the operation, not a disturbance.
    pub preemption_expected: bool,
    /// Why it has no samples.
    pub error: Option<BenchError>,
    /// Events per operation (none when counting was off or nothing was sampled).
    #[serde(default)]
    pub events: Option<crate::base::model::Events>,
    /// How long the measuring thread ran and waited, runnable, for its CPU during the timed
    /// pass, and what else was runnable there when it waited much.
    #[serde(default)]
    pub cpu_wait: Option<CpuWait>,
    /// The speed witness of the worker that measured it (`measuring::witness`), ns per loop.
    #[serde(default)]
    pub witness_ns: Option<f64>,
    /// The exit witness of that worker (`measuring::witness`), ns per CPUID.
    #[serde(default)]
    pub exit_witness_ns: Option<f64>,
    /// Memory activity beside the worker's cases (`measuring::memory`: counters that moved).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory_events: BTreeMap<String, u64>,
    /// CPU throttling of the worker's cgroups during the case (`measuring::confinement`), when
    /// any quota stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<crate::base::model::Throttle>,
    /// The worker's confinement, read by the worker itself: on the first case it sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<crate::base::model::Confinement>,
    /// This repetition's profile (`--profile`), from an untimed pass of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::base::model::Profile>,
}

/// The measuring thread's wait for its own CPU over a timed pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuWait {
    /// Time on the CPU, ns.
    pub run_ns: u64,
    /// Time runnable, waiting for the CPU, ns.
    pub wait_ns: u64,
    /// Tasks of other programs runnable on the measuring CPU, "name (pid N)".
    pub beside: Vec<String>,
    /// The measuring CPU's own account of the pass (`noise::CpuShare`): other programs' time
    /// there, which the worker's children and peers waited for while the worker slept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_share: Option<noise::CpuShare>,
}

impl CpuWait {
    /// The share of the thread's time on or waiting for the CPU that it waited.
    pub fn share(&self) -> f64 {
        let all = self.run_ns + self.wait_ns;
        if all == 0 {
            0.0
        } else {
            self.wait_ns as f64 / all as f64
        }
    }
}

/// A wait share above which the case looks for what else was runnable on its CPU: evidence
/// for the analysis, which judges (`analysis::CPU_WAIT_SHARE`, never below this one, so a
/// flagged result always has its evidence looked for).
pub const LOOK_BESIDE_SHARE: f64 = 0.05;

impl CaseResult {
    /// A case with no numbers, only the reason.
    pub fn failed(id: String, bench: &str, definition: &str, e: BenchError) -> CaseResult {
        CaseResult {
            id,
            bench: bench.to_string(),
            params: BTreeMap::new(),
            definition: definition.to_string(),
            placement: Placement::Free,
            used_cpus: vec![],
            smt_siblings: vec![],
            cpu_before: vec![],
            cpu_after: vec![],
            measurement: None,
            notes: vec![],
            preemption_expected: false,
            error: Some(e),
            cpu_wait: None,
            events: None,
            profile: None,
            witness_ns: None,
            exit_witness_ns: None,
            memory_events: BTreeMap::new(),
            throttle: None,
            confinement: None,
        }
    }
}

fn param_value(p: Param) -> serde_json::Value {
    match p {
        Param::Int(i) => json!(i),
        Param::Flag(b) => json!(b),
    }
}

type Params = BTreeMap<String, serde_json::Value>;

/// The cases `b` expands to under `variants`, in the order they are measured.
pub fn expand(b: &Benchmark, variants: &VariantOptions) -> Vec<Case> {
    suffixes_and_params(b, variants)
        .into_iter()
        .filter(|(suffix, _)| variants.measures(b.id, suffix))
        .map(|(suffix, params)| Case {
            definition: b.definition,
            suffix,
            params,
            parties: None,
        })
        .collect()
}

/// Each case's id suffix and parameters.
fn suffixes_and_params(b: &Benchmark, variants: &VariantOptions) -> Vec<(String, Params)> {
    let params = |kv: &[(&str, serde_json::Value)]| -> Params {
        kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    };
    match &b.cases {
        Cases::One => vec![(String::new(), Params::new())],
        Cases::Fixed(list) => list
            .iter()
            .map(|v| {
                let kv: Vec<(&str, serde_json::Value)> =
                    v.params.iter().map(|&(k, p)| (k, param_value(p))).collect();
                (v.suffix.to_string(), params(&kv))
            })
            .collect(),
        Cases::Placements => variants
            .placements
            .iter()
            .map(|p| {
                let suffix = format!("@{}", p.word());
                (suffix, params(&[("placement", json!(p.word()))]))
            })
            .collect(),
        Cases::Ring => {
            let ring = &variants.ring;
            let mut v = Vec::new();
            for &kb in &ring.sizes_kb {
                for &n in &ring.procs {
                    let kv = [
                        ("procs", json!(n)),
                        ("size_kb", json!(kb)),
                        ("parallel", json!(ring.parallel.max(1))),
                    ];
                    v.push((format!("/n{n}-s{kb}k"), params(&kv)));
                }
            }
            v
        }
        Cases::ForkSizes => variants
            .fork_sizes_mib
            .iter()
            .map(|&mib| (format!("/{mib}MiB"), params(&[("rss_mib", json!(mib))])))
            .collect(),
        Cases::Copies => scaling::Mode::BOTH
            .iter()
            .flat_map(|m| {
                variants.copies.iter().map(move |&n| {
                    let kv = [("mode", json!(m.word())), ("copies", json!(n))];
                    (format!("/{}-{n}", m.word()), params(&kv))
                })
            })
            .collect(),
    }
}

/// Measure every case of `b`, in order, with the measuring thread on `meter.cpu` between cases.
pub fn run_cases(meter: &Meter, b: &Benchmark, variants: &VariantOptions) -> Vec<CaseResult> {
    expand(b, variants)
        .into_iter()
        .map(|c| run_case(meter, b, c, variants))
        .collect()
}

/// The measuring thread's run and wait over a timed pass, from its schedstat before and after,
/// with what else was runnable on its CPU when it waited much.
fn cpu_wait(
    cpu: usize,
    before: Option<noise::SchedStat>,
    after: Option<noise::SchedStat>,
) -> Option<CpuWait> {
    let (a, z) = (before?, after?);
    let mut w = CpuWait {
        run_ns: z.run_ns.saturating_sub(a.run_ns),
        wait_ns: z.wait_ns.saturating_sub(a.wait_ns),
        beside: vec![],
        cpu_share: None,
    };
    if w.share() > LOOK_BESIDE_SHARE {
        // SAFETY: getpgrp takes no arguments and cannot fail.
        let own = unsafe { libc::getpgrp() };
        w.beside = noise::runnable_on(cpu, own, 4);
        // One instant misses a competitor that runs in bursts (a 60% duty loop was between
        // bursts at the look in one CI run: "another task shared it", unnamed); a short look
        // at who ran there finds it.
        if w.beside.is_empty() {
            w.beside = noise::running_on(cpu, own, RUNNING_ON_LOOK, 4);
        }
    }
    Some(w)
}

/// How long a worker looks at who runs on its CPU when another program took a share of it.
const RUNNING_ON_LOOK: std::time::Duration = std::time::Duration::from_millis(20);

/// Add the measuring CPU's own account of the pass to `w` and, when other programs took more
/// than `LOOK_BESIDE_SHARE` of it, who ran there.
fn add_cpu_share(w: &mut CpuWait, cpu: usize, share: Option<noise::CpuShare>) {
    let Some(c) = share else { return };
    w.cpu_share = Some(c);
    if c.wall_ns > 0 && c.foreign_ns() as f64 / c.wall_ns as f64 > LOOK_BESIDE_SHARE {
        // SAFETY: getpgrp takes no arguments and cannot fail.
        let own = unsafe { libc::getpgrp() };
        for name in noise::running_on(cpu, own, RUNNING_ON_LOOK, 4) {
            if !w.beside.contains(&name) {
                w.beside.push(name);
            }
        }
    }
}

/// A second, untimed pass of the case that counts events; read after the case function
/// returns, when its peers have exited and their counts have joined ours.
fn count_events(meter: &Meter, b: &Benchmark, c: &Case) -> Option<crate::base::model::Events> {
    if meter.events.is_empty() {
        return None;
    }
    counters::open(&meter.events);
    let counted = (b.run)(meter, c);
    let events = counters::finish();
    events.map(|mut e| {
        if let Err(err) = counted {
            e.per_op.clear();
            e.unavailable
                .insert("all".into(), format!("the counting pass failed: {err}"));
        }
        e
    })
}

/// Measure one case. Placement: for a ping-pong, the master goes where the placement says and
/// comes back to the measuring CPU afterwards.
fn run_case(meter: &Meter, b: &Benchmark, mut c: Case, variants: &VariantOptions) -> CaseResult {
    let id = format!("{}{}", b.id, c.suffix);
    let fail = |e: BenchError, params: BTreeMap<String, serde_json::Value>| {
        let mut r = CaseResult::failed(id.clone(), b.id, b.definition, e);
        r.params = params;
        r
    };
    let placed = match place_parties(meter, b, &mut c, variants) {
        Ok(p) => p,
        Err(e) => return fail(e, c.params),
    };
    let before = noise::read_proc_stat();
    let throttle_before = confinement::throttle_now();
    let sched_before = noise::thread_schedstat();
    let share_start = noise::CpuShareStart::now(meter.cpu);
    let outcome = (b.run)(meter, &c);
    let share = share_start.and_then(|s| s.end(meter.cpu));
    let sched_after = noise::thread_schedstat();
    let throttle = throttled_between(throttle_before, confinement::throttle_now());
    let after = noise::read_proc_stat();
    // The host's steal and interrupts over the pass, from the snapshots that bracket it.
    let share = share.map(|c| noise::CpuShare {
        host_ns: crate::measuring::os::ticks_ns(noise::host_ticks(&before, &after, meter.cpu)),
        ..c
    });
    let mut cpu_wait = cpu_wait(meter.cpu, sched_before, sched_after);
    if let Some(w) = cpu_wait.as_mut() {
        add_cpu_share(w, meter.cpu, share);
    }
    // A second, untimed pass counts events; read after the case function returns, when its
    // peers have exited and their counts have joined ours.
    let events = if outcome.is_err() {
        None
    } else {
        count_events(meter, b, &c)
    };
    let (profile, not_profiled) = match (&outcome, meter.profile) {
        (Ok(timed), true) => profile_pass(meter, b, &c, &timed_cpus(meter, timed, &placed)),
        _ => (None, None),
    };
    if placed.is_some() {
        let _ = placement::pin_current_thread(meter.cpu);
    }
    let o: Outcome = match outcome {
        Ok(o) => o,
        Err(e) => return fail(e, c.params),
    };
    let (placement, used_cpus) = o.placed.clone().unwrap_or_else(|| match &placed {
        Some(p) => (p.record.clone(), p.used.clone()),
        None => (Placement::Pinned { cpu: meter.cpu }, vec![meter.cpu]),
    });
    let mut params = c.params;
    params.extend(o.params);
    let mut notes = o.notes;
    notes.extend(not_profiled);
    CaseResult {
        smt_siblings: siblings_outside(&used_cpus),
        id,
        bench: b.id.to_string(),
        params,
        definition: o.definition.unwrap_or_else(|| b.definition.to_string()),
        placement,
        used_cpus,
        cpu_before: before,
        cpu_after: after,
        measurement: Some(o.measurement),
        notes,
        preemption_expected: b.preempts,
        error: None,
        events,
        cpu_wait,
        witness_ns: None,
        exit_witness_ns: None,
        memory_events: BTreeMap::new(),
        throttle,
        confinement: None,
        profile,
    }
}

/// The SMT siblings of `used` that the case did not use itself, sorted, once each.
fn siblings_outside(used: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = used
        .iter()
        .flat_map(|&u| placement::smt_siblings(u))
        .filter(|s| !used.contains(s))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The CPUs the timed pass ran on: where the case placed its own parties, where the runner
/// placed them, else the measuring CPU.
fn timed_cpus(meter: &Meter, timed: &Outcome, placed: &Option<placement::Parties>) -> Vec<usize> {
    match (&timed.placed, placed) {
        (Some((_, used)), _) => used.clone(),
        (None, Some(p)) => p.used.clone(),
        (None, None) => vec![meter.cpu],
    }
}

/// A third, untimed pass of the case, sampled (`measuring::profile`) on `used`, the CPUs the
/// timed pass ran on: its profile (`None` where the case's loop took no sample), or the note
/// saying why there is none.
fn profile_pass(
    meter: &Meter,
    b: &Benchmark,
    c: &Case,
    used: &[usize],
) -> (Option<crate::base::model::Profile>, Option<String>) {
    if let Err(why) = profile::open(used, &meter.allowed) {
        return (None, Some(format!("not profiled: {why}")));
    }
    let profiled = (b.run)(meter, c);
    let profile = profile::finish();
    match profiled {
        Ok(_) => (profile, None),
        Err(e) => (
            None,
            Some(format!("not profiled: the profiling pass failed: {e}")),
        ),
    }
}

/// The throttling between two readings, when it stopped the group at all.
fn throttled_between(
    before: Option<crate::base::model::Throttle>,
    after: Option<crate::base::model::Throttle>,
) -> Option<crate::base::model::Throttle> {
    let (a, z) = (before?, after?);
    let d = crate::base::model::Throttle {
        periods: z.periods.saturating_sub(a.periods),
        throttled: z.throttled.saturating_sub(a.throttled),
        throttled_ns: z.throttled_ns.saturating_sub(a.throttled_ns),
    };
    (d.throttled > 0 || d.throttled_ns > 0).then_some(d)
}

/// For `Cases::Placements`: resolve and apply where the master runs, and tell the case where
/// its peer goes. Nothing for other benchmarks, which run on the measuring CPU.
fn place_parties(
    meter: &Meter,
    b: &Benchmark,
    c: &mut Case,
    variants: &VariantOptions,
) -> Result<Option<Parties>, BenchError> {
    if !matches!(b.cases, Cases::Placements) {
        return Ok(None);
    }
    let word = c.params.get("placement").and_then(|v| v.as_str());
    let place = variants
        .placements
        .iter()
        .copied()
        .find(|p| Some(p.word()) == word)
        .ok_or_else(|| BenchError::Failed("a placement case without its placement".into()))?;
    let parties = Parties::resolve(place, meter.cpu, &meter.allowed)?;
    placement::place_current_thread(parties.master, &meter.allowed).map_err(BenchError::Failed)?;
    c.parties = Some(parties.clone());
    Ok(Some(parties))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::entry::{RingOptions, Variant};
    use crate::measuring::placement::Place;

    fn nothing(_: &Meter, _: &Case) -> Result<Outcome, BenchError> {
        Err(BenchError::Skipped("test".into()))
    }

    static SIZES: &[Variant] = &[
        Variant {
            suffix: "/4KiB",
            params: &[("bytes", Param::Int(4096)), ("touched", Param::Flag(true))],
        },
        Variant {
            suffix: "/1MiB",
            params: &[("bytes", Param::Int(1 << 20))],
        },
    ];

    #[test]
    fn cases_expand_to_the_ids_and_params_of_each_kind() {
        let v = VariantOptions {
            placements: vec![Place::Same, Place::Free],
            ring: RingOptions {
                procs: vec![2, 8],
                sizes_kb: vec![0, 16],
                parallel: 1,
            },
            fork_sizes_mib: vec![0, 64],
            copies: vec![1, 4],
            only: vec![],
        };
        let suffixes = |cases: Cases| -> Vec<String> {
            let b = Benchmark {
                cases,
                ..Benchmark::new("x/y", "d", nothing)
            };
            expand(&b, &v).into_iter().map(|c| c.suffix).collect()
        };
        assert_eq!(suffixes(Cases::One), vec![""]);
        assert_eq!(suffixes(Cases::Fixed(SIZES)), vec!["/4KiB", "/1MiB"]);
        assert_eq!(suffixes(Cases::Placements), vec!["@same", "@free"]);
        assert_eq!(
            suffixes(Cases::Ring),
            vec!["/n2-s0k", "/n8-s0k", "/n2-s16k", "/n8-s16k"]
        );
        assert_eq!(suffixes(Cases::ForkSizes), vec!["/0MiB", "/64MiB"]);
        assert_eq!(
            suffixes(Cases::Copies),
            vec!["/process-1", "/process-4", "/thread-1", "/thread-4"]
        );
        let b = Benchmark {
            cases: Cases::Fixed(SIZES),
            ..Benchmark::new("x/y", "d", nothing)
        };
        let c = &expand(&b, &v)[0];
        assert_eq!(c.int("bytes").unwrap(), 4096);
        assert!(c.flag("touched"));
        assert!(!expand(&b, &v)[1].flag("touched"));
        // Result ids narrow their benchmark to their cases; another benchmark's are ignored.
        let only = VariantOptions {
            only: vec!["x/y/n8".into(), "x/y@free".into(), "x/yy/n2-s0k".into()],
            ..v.clone()
        };
        let narrowed = |cases: Cases| -> Vec<String> {
            let b = Benchmark {
                cases,
                ..Benchmark::new("x/y", "d", nothing)
            };
            expand(&b, &only).into_iter().map(|c| c.suffix).collect()
        };
        assert_eq!(narrowed(Cases::Ring), vec!["/n8-s0k", "/n8-s16k"]);
        assert_eq!(narrowed(Cases::Placements), vec!["@free"]);
    }
}
