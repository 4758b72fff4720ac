//! The result model: the serde types every output (table, JSON, CSV, Markdown, the store) is a
//! view of. This is the contract (docs/ARCHITECTURE.md §1); `SCHEMA_VERSION` changes when a field's meaning
//! does, and the loader refuses files of another version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::stats::{Outliers, Stats};

/// 2: results carry their repetitions (each in a fresh worker process) and a CI computed across
/// them; runs of version 1 still load, with a note. 3: a note is an object with its kind and
/// numbers beside its words (`note::Note`); the bare words of versions 1 and 2 still load, and
/// are given their kinds once (`load::upgrade`).
pub const SCHEMA_VERSION: u32 = 3;

/// Note added to runs of schema_version 1 when they are loaded.
pub const V1_NOTE: &str = "schema_version 1: measured as one stream of samples in one process; its CIs carry no repetition structure and are narrower than the variation between runs";

/// The machine a run was measured on (collected by `env.rs`, shown by `oscost env`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Env {
    /// The host's name (`uname`), the first thing a comparison titles a column with.
    pub hostname: Option<String>,
    /// The operating system, "linux".
    pub os: String,
    /// The kernel release (`uname -r`), e.g. "6.18.44".
    pub kernel_release: Option<String>,
    /// The kernel build line (`uname -v`).
    pub kernel_version: Option<String>,
    /// /proc/cmdline: the boot parameters (mitigations=, idle=, isolcpus=...).
    pub boot_cmdline: Option<String>,
    /// The CPU's model name from /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// The CPU's clock as /proc/cpuinfo reported it at the start, MHz.
    pub cpu_mhz: Option<f64>,
    /// The CPUs online, as the kernel lists them ("0-1").
    pub online_cpus: Option<String>,
    /// The CPUs this process was allowed to run on.
    pub allowed_cpus: Vec<usize>,
    /// Groups of CPUs that are SMT siblings of one core, e.g. ["0-1"].
    pub smt_siblings: Vec<String>,
    /// The current clocksource (tsc, kvm-clock, hpet...).
    pub clocksource: Option<String>,
    /// The clocksources the kernel offers.
    pub available_clocksources: Option<String>,
    /// The run's clock (CLOCK_MONOTONIC through the vDSO), as calibrated at start.
    #[serde(default)]
    pub clock: Option<ClockInfo>,
    /// Cost of one read of every clock, ns (median of batches), and its smallest step.
    #[serde(default)]
    pub clock_costs: BTreeMap<String, ClockCost>,
    /// /sys/devices/system/cpu/vulnerabilities/*: name -> status line.
    pub vulnerabilities: BTreeMap<String, String>,
    /// Transparent huge pages: the `enabled` line, the bracketed word the mode.
    pub thp_enabled: Option<String>,
    /// Transparent huge pages: the `defrag` line.
    pub thp_defrag: Option<String>,
    /// The CPU's `hypervisor` flag.
    pub hypervisor_flag: bool,
    /// The machine's vendor from DMI (a cloud names itself here).
    pub dmi_vendor: Option<String>,
    /// The machine's product name from DMI.
    pub dmi_product: Option<String>,
    /// cgroup v2 cpu.max of this process's cgroup ("max 100000" = unlimited).
    pub cgroup_cpu_max: Option<String>,
    /// The C library's name and version.
    pub libc_version: Option<String>,
    /// The cpufreq governor of the measuring CPU, where there is one.
    pub scaling_governor: Option<String>,
    /// kernel.perf_event_paranoid, which decides what oscost may count.
    #[serde(default)]
    pub perf_event_paranoid: Option<i32>,
    /// "available", or why hardware counters (cycles, instructions, cache misses) are not.
    #[serde(default)]
    pub hardware_counters: Option<String>,
    /// What in a guest can move memory costs between runs: free page reporting, virtio
    /// balloon and virtio-mem, KSM, DAMON, zswap, swap, khugepaged (fact -> state).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory: BTreeMap<String, String>,
    /// Every kernel setting of the catalogue (`machine::settings`) readable here, as it read
    /// when the run started, before any `--set` (name -> value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// The version of oscost that measured the run.
    pub oscost_version: String,
    /// "release" or "debug": a debug build's loops are not the release build's.
    pub build_profile: String,
    /// The CPU's microcode revision (/proc/cpuinfo), `None` where not shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microcode: Option<String>,
    /// The cpuidle driver (haltpoll, intel_idle, acpi_idle...), `None` without cpuidle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_driver: Option<String>,
    /// The cpuidle governor (menu, teo, haltpoll, ladder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_governor: Option<String>,
    /// The kernel's build configuration, where `/proc/config.gz` or `/boot/config-RELEASE` is
    /// readable: a digest of every option set, and the options that move a primitive's cost
    /// (`env::KERNEL_CONFIG_PREFIXES`) with their values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_config: Option<KernelConfig>,
    /// The measuring process's own confinement, read by a worker (so a `--under` wrapper's
    /// sandbox is seen): `None` for a run made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<Confinement>,
    /// BPF programs loaded on the machine (a tracer's, a security agent's), where they could
    /// be counted (`tracing::observers`; root): a cost attached to the whole system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf_programs: Option<u32>,
    /// Audit rules in force, where they could be listed (`tracing::observers`; root): any
    /// rule puts every system call through audit's slow path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_rules: Option<u32>,
    /// What is attached to the whole system, each thing once ("BPF tracepoint sys_enter",
    /// "trace event raw_syscalls:sys_enter", "kprobe: ..."), where it could be read
    /// (`observers::attached`; root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<Vec<String>>,
    /// Audit's enabled flag (0, 1, 2 locked), where it could be asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_enabled: Option<u32>,
    /// `kernel.bpf_stats_enabled`: on, every BPF program's run is timed (a cost of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf_stats_enabled: Option<bool>,
    /// sched_ext's state, where the kernel has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_ext: Option<String>,
}

/// A kernel's build configuration, compactly: the whole of it as a digest, the options that
/// move costs by name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct KernelConfig {
    /// SHA-256 (16 hex digits) of every `CONFIG_*=value` line, sorted.
    pub digest: String,
    /// The options that move a primitive's cost, name -> value ("y", "m", a number...);
    /// an option not set is absent.
    pub options: BTreeMap<String, String>,
}

/// What confines a process: every field read from the process itself (`measuring::confinement`),
/// `None` or absent where it could not be read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Confinement {
    /// Seccomp mode: 0 none, 1 strict, 2 filter.
    pub seccomp_mode: Option<u32>,
    /// Seccomp filters attached: every system call runs each of them.
    pub seccomp_filters: Option<u32>,
    /// The no_new_privs bit (set by a sandbox before it installs a filter).
    pub no_new_privs: Option<bool>,
    /// Effective capabilities, hex as /proc shows them.
    pub cap_eff: Option<String>,
    /// The task's Speculative Store Bypass control, as /proc words it.
    pub speculation_store_bypass: Option<String>,
    /// The task's indirect branch speculation control, as /proc words it.
    pub speculation_indirect_branch: Option<String>,
    /// The CPUs the process may run on ("0-1").
    pub cpus_allowed: Option<String>,
    /// Its cgroup (the v2 path, or v1's cpu controller's).
    pub cgroup: Option<String>,
    /// The cgroup's limits by file name (`cpu.max`, `cpu.weight`, `cpuset.cpus.effective`,
    /// `memory.max`; v1's `cpu.cfs_quota_us`, `cpu.cfs_period_us`, `cpu.shares`,
    /// `memory.limit_in_bytes`), where readable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cgroup_limits: BTreeMap<String, String>,
    /// The scheduling policy ("SCHED_OTHER").
    pub sched_policy: Option<String>,
    /// The nice value.
    pub nice: Option<i32>,
    /// Namespaces not shared with the machine's init ("user", "pid", "net"...): a container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// The active LSMs (/sys/kernel/security/lsm).
    pub lsm: Option<String>,
    /// The process's LSM label (AppArmor profile, SELinux context), where it has one.
    pub lsm_label: Option<String>,
    /// The rlimits that cap a benchmark (nofile, nproc, memlock, stack), "soft/hard".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rlimits: BTreeMap<String, String>,
}

/// CPU throttling counters of a cgroup (`cpu.stat`), summed over the process's cgroup and its
/// ancestors.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Throttle {
    /// Quota periods that elapsed.
    pub periods: u64,
    /// Periods in which the group ran out of quota and was stopped.
    pub throttled: u64,
    /// Time the group was stopped, ns.
    pub throttled_ns: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
/// What reading one clock costs here and how finely it steps.
pub struct ClockCost {
    /// Cost of one read, ns (median of batches of back-to-back reads).
    pub cost_ns: f64,
    /// Smallest non-zero step between consecutive reads; `None` if it never moved.
    pub step_ns: Option<f64>,
}

/// Results of one benchmark that form a curve over a parameter (lat_ctx's ring, fork against
/// resident memory), declared by the catalogue so views can draw it without knowing benchmarks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Curve {
    /// The figure's file stem ("ring": fig/ring.svg).
    pub name: &'static str,
    /// The figure's title.
    pub title: &'static str,
    /// The parameter on the x axis, and how to describe it.
    pub x: &'static str,
    /// The x axis's label.
    pub x_desc: &'static str,
    /// The y axis's label.
    pub y_desc: &'static str,
    /// Whether the x axis is drawn in powers of two.
    pub log2_x: bool,
    /// The parameter that splits points into series, and the words after its value in the
    /// legend ("16 KB per process").
    pub series: Option<(&'static str, &'static str)>,
    /// One figure for the whole family, one line per benchmark (wake/: a line per mechanism),
    /// instead of one figure per benchmark.
    pub across_family: bool,
    /// A parameter (a string) naming each point's regime (wake/: the idle state the sleeper's
    /// CPU spent most of its idle time in); the figure marks where it starts and changes.
    pub regime: Option<&'static str>,
}

/// One invocation of `oscost run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The run file's format version (`SCHEMA_VERSION`).
    pub schema_version: u32,
    /// The program that measured it.
    pub tool: Tool,
    /// RFC 3339, UTC.
    pub started_at: String,
    #[serde(default)]
    /// The user's name for the run (`--label`), shown beside its id.
    pub label: Option<String>,
    /// The command the measuring part ran under (`--under`), if any.
    #[serde(default)]
    pub wrapper: Option<String>,
    /// The machine it was measured on.
    pub env: Env,
    /// The clock every sample was taken with.
    pub clock: ClockInfo,
    /// One result per case measured, in the order measured.
    pub results: Vec<BenchResult>,
    /// How repetitions were scheduled (absent in version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// Things to know about the whole run (added on load for older versions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
    /// The kernel settings this run (or this side of an `ab`) was measured under
    /// (`--set`, `--a-set`, `--b-set`): `NAME=VALUE`, as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<String>,
    /// The program that ran during this run or side, attached to the whole system (`--during`,
    /// `--a-during`, `--b-during`), as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<String>,
}

/// The order repetitions ran in: round by round, each round one repetition of every benchmark
/// still sampling, so drift of the machine spreads over all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// "round robin".
    pub order: String,
    /// Benchmark ids of each round, in the order their workers ran.
    pub rounds: Vec<Vec<String>>,
    /// Sampling time of one repetition, ms.
    pub repetition_ms: f64,
    /// Repetitions every benchmark gets before the stop rule is asked.
    pub min_repetitions: usize,
    /// Median start-up of a worker (exec to first sample), ms.
    #[serde(deserialize_with = "crate::base::stats::nan::f64")]
    pub worker_startup_ms: f64,
}

/// One repetition of a result: a stretch of its samples, measured by one fresh worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repetition {
    /// Index of its first sample in `samples_ns`.
    pub start: usize,
    /// How many samples it took.
    pub samples: usize,
    #[serde(deserialize_with = "crate::base::stats::nan::f64")]
    /// The median of its samples, ns per operation.
    pub median_ns: f64,
    /// When it started, ms since the run started.
    pub started_ms: f64,
    /// Worker start-up before its first sample (exec, pinning, setup, warm-up), ms.
    pub startup_ms: f64,
    /// Its samples during which another task preempted the measuring thread (0 where the
    /// operation itself hands the CPU over, as in the result's `disturbed`).
    pub preempted: usize,
    /// How far its level sat from the others, percent, when that is more than its own spread
    /// and the others' explain (a phase of the machine, or this process's layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub departs_pct: Option<f64>,
    /// The speed witness its worker timed around its cases (`measuring::witness`): ns per loop
    /// of fixed user-space work, the machine's speed at that moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_ns: Option<f64>,
    /// The exit witness its worker timed around its cases (`measuring::witness`): ns per
    /// CPUID, a round trip through the hypervisor in a guest, the host's state at that moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_witness_ns: Option<f64>,
    /// Memory activity counted while its worker ran (`measuring::memory`: reclaim, compaction,
    /// swapping, migration, khugepaged, balloon; only counters that moved), for the benchmarks
    /// whose cost it moves.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory_events: BTreeMap<String, u64>,
    /// The block it was measured in, where the sides of `ab` alternated in blocks of
    /// repetitions (a program ran during a side, `--b-during`): the same number on both sides
    /// for the blocks measured back to back. `None` where the sides alternated repetition by
    /// repetition. Blocks, not repetitions, are then the pairs a comparison is judged on
    /// (`compare::rounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
}

/// Where `stats.ci95` comes from and how sure it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Uncertainty {
    /// How the CI was computed, in words.
    pub method: String,
    /// How many repetitions gave the CI.
    pub repetitions: usize,
    /// Half-width of the CI, percent of the median (NaN, `null` in JSON, when there is no CI).
    #[serde(deserialize_with = "crate::base::stats::nan::f64")]
    pub halfwidth_pct: f64,
    /// The precision asked for, percent.
    pub target_pct: f64,
    /// Why its repetitions stopped.
    pub stopped: RepetitionStop,
    /// The order-statistics CI of all samples as one stream: how well this run knows its own
    /// samples, not what the operation costs.
    #[serde(deserialize_with = "crate::base::stats::nan::pair")]
    pub within_stream_ci95: [f64; 2],
    /// The repetitions set aside because the host was slow while they ran
    /// (`analysis::host_quiet`); the median, the CI and `repetitions` are the others'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_slow: Option<HostSlow>,
}

/// Repetitions of a result that ran while the host was slow, set aside (`analysis::host_quiet`):
/// their workers timed the exit witness above `slow_above_ns`, and the run's slow repetitions
/// sat dearer than their results' others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSlow {
    /// The run's quiet exit level: the lower quartile of every exit witness its workers timed,
    /// ns per CPUID.
    pub quiet_ns: f64,
    /// The exit witness above which a repetition ran in a slow moment of the host, ns.
    pub slow_above_ns: f64,
    /// The median of every sample, the set-aside repetitions' included: what the result
    /// would have said with them.
    pub median_with_ns: f64,
    /// Each set-aside repetition.
    pub repetitions: Vec<HostSlowRepetition>,
}

/// One repetition set aside for the host's slowness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSlowRepetition {
    /// When it started, ms since the run started.
    pub started_ms: f64,
    /// The median of its samples, ns per operation.
    pub median_ns: f64,
    /// How many samples it took.
    pub samples: usize,
    /// The exit witness its worker timed, ns per CPUID.
    pub exit_witness_ns: f64,
}

/// Why a benchmark's repetitions stopped (`Uncertainty::stopped`), stored as the words runs
/// have always carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RepetitionStop {
    /// Every case's CI reached the precision asked.
    #[serde(rename = "precision")]
    Precision,
    /// The most repetitions the plan allows were taken.
    #[serde(rename = "budget")]
    Budget,
    /// `--samples N`: the fixed samples were taken.
    #[serde(rename = "fixed")]
    Fixed,
    /// `ab`: the comparison decided (called, or no change inside the band).
    #[serde(rename = "decided")]
    Decided,
    /// No repetition measured anything (skipped or failed each time).
    #[serde(rename = "not measured")]
    NotMeasured,
    /// `watch`: a benchmark's windows joined, each window's repetitions as they were taken.
    #[serde(rename = "windows")]
    Windows,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
/// The program that wrote a run, and its version.
pub struct Tool {
    /// The program's name, "oscost".
    pub name: String,
    /// Its version (Cargo's package version).
    pub version: String,
}

impl Tool {
    /// This oscost.
    pub fn this() -> Tool {
        Tool {
            name: "oscost".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// The clock every sample was taken with, as calibrated at the start of the run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ClockInfo {
    /// e.g. "CLOCK_MONOTONIC (vDSO)".
    pub source: ClockSource,
    /// Cost of one clock read, median of batches.
    pub cost_ns: f64,
    /// Smallest non-zero step seen between consecutive reads (clock_getres may claim 1 ns).
    pub resolution_ns: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
/// The clock samples are taken with.
pub enum ClockSource {
    /// CLOCK_MONOTONIC, read through the vDSO.
    ClockMonotonic,
}

/// Where the parties of a benchmark ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Placement {
    /// One thread pinned to one CPU.
    Pinned {
        /// The CPU.
        cpu: usize,
    },
    /// Every party on this one CPU.
    Same {
        /// The CPU.
        cpu: usize,
    },
    /// Parties on distinct CPUs, in party order.
    Cross {
        /// One CPU per party.
        cpus: Vec<usize>,
    },
    /// Left to the scheduler.
    Free,
}

/// How a sample was taken: a batch of `size` operations between two clock reads (the sample is
/// the batch time divided by `size`), or one operation per sample (`size` = 1, `batched` false).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Batch {
    /// Whether samples are batches of operations (true) or one operation each.
    pub batched: bool,
    /// Operations per sample.
    pub size: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
/// Whether a result was measured.
pub enum Status {
    /// Measured.
    Ok,
    /// Not measured here, and why (a missing privilege, a feature this kernel lacks).
    Skipped {
        /// Why, in words.
        reason: String,
    },
    /// The measurement went wrong, and how.
    Failed {
        /// What went wrong, in words.
        reason: String,
    },
}

impl Status {
    /// "ok", "skipped" or "failed".
    pub fn word(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Skipped { .. } => "skipped",
            Status::Failed { .. } => "failed",
        }
    }
    /// Why it was skipped or failed (`None` when measured).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Status::Ok => None,
            Status::Skipped { reason } | Status::Failed { reason } => Some(reason),
        }
    }
}

/// One benchmark's result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchResult {
    /// `family/name`, with `@placement` for multi-party benchmarks.
    pub id: String,
    /// The family, the part of the id before the first slash ("syscall").
    pub family: String,
    /// Parameters that distinguish this result (sizes, clock names, ...).
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// What the median is in ("ns/op").
    pub unit: String,
    /// What one sample is the cost of.
    pub definition: String,
    /// Where its parties ran.
    pub placement: Placement,
    /// How its samples were taken.
    pub batch: Batch,
    /// Per-operation cost of the loop without the operation, already subtracted from every
    /// sample.
    pub baseline_ns: f64,
    /// Raw per-operation samples after baseline subtraction, in the order taken.
    pub samples_ns: Vec<f64>,
    /// Indices into `samples_ns` of samples that were preempted.
    #[serde(default)]
    pub preempted: Vec<usize>,
    /// The median, its CI and the summary statistics (`None` without samples).
    pub stats: Option<Stats>,
    /// Samples far from the rest, counted, never removed.
    pub outliers: Outliers,
    /// What disturbed the measurement, with the evidence.
    pub disturbed: Disturbance,
    /// Notes on the number itself (at or below baseline, under the clock resolution, ...).
    #[serde(default)]
    pub notes: Vec<Note>,
    /// Measured, skipped or failed, with why.
    pub status: Status,
    /// The repetitions the samples came from, in order (empty in version 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repetitions: Vec<Repetition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Where `stats.ci95` comes from and how sure it is.
    pub uncertainty: Option<Uncertainty>,
    /// Events per operation counted around its repetitions (absent in runs before counting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Events>,
    /// Where its time went, sampled in passes of their own (`--profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
}

/// A bandwidth's figure as a rate: what a time per operation that moves a known number of
/// bytes comes to in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// At the median.
    pub bytes_per_s: f64,
    /// The median's 95% CI as rates, lower first (its longer time is the lower rate).
    pub ci95: [f64; 2],
}

impl BenchResult {
    /// The bytes one operation moves, for a bandwidth (`bytes_per_op`, set by bw/).
    pub fn bytes_per_op(&self) -> Option<f64> {
        self.params
            .get("bytes_per_op")
            .and_then(|v| v.as_f64())
            .filter(|b| *b > 0.0)
    }

    /// For a bandwidth, its rate. A bandwidth is stored as every result is, a time per
    /// operation (lower is better), so every comparison calls a drop in bandwidth slower with
    /// no rule of its own; a view that shows the rate derives it here.
    pub fn rate(&self) -> Option<Rate> {
        let bytes = self.bytes_per_op()?;
        let s = self.stats.as_ref()?;
        let of = |ns: f64| if ns > 0.0 { bytes / ns * 1e9 } else { f64::NAN };
        (s.median > 0.0).then(|| Rate {
            bytes_per_s: of(s.median),
            ci95: [of(s.ci95[1]), of(s.ci95[0])],
        })
    }

    /// A result that carries no measurement.
    pub fn not_measured(id: &str, definition: &str, status: Status) -> BenchResult {
        BenchResult {
            id: id.to_string(),
            family: family_of(id).to_string(),
            params: BTreeMap::new(),
            unit: "ns".into(),
            definition: definition.to_string(),
            placement: Placement::Free,
            batch: Batch {
                batched: false,
                size: 0,
            },
            baseline_ns: 0.0,
            samples_ns: vec![],
            preempted: vec![],
            stats: None,
            outliers: Outliers::default(),
            disturbed: Disturbance::default(),
            notes: vec![],
            status,
            repetitions: vec![],
            uncertainty: None,
            events: None,
            profile: None,
        }
    }
}

/// `call/f0` -> `call`.
pub fn family_of(id: &str) -> &str {
    id.split('/').next().unwrap_or(id)
}

/// Events per operation (`measuring::counters`): perf's event names to values, the empty loop's
/// events subtracted; the events that could not be counted, with why (never shown as 0); and
/// whether the benchmark's definition held.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Events {
    /// Events per operation, by perf's event name, the empty loop's subtracted.
    pub per_op: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    /// Events that could not be counted, with why (never shown as 0).
    pub unavailable: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The definition held against these counts (`None`: nothing to check).
    pub check: Option<DefinitionCheck>,
}

/// What the benchmark's definition says one operation costs in events, and whether it held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefinitionCheck {
    /// e.g. "2 context-switches per op (±0.1)".
    pub expected: String,
    /// Whether the counts matched the expectation.
    pub met: bool,
}

pub mod disturbance;
pub mod file;
pub use file::load_run_file;
pub mod load;
pub mod note;
pub mod profile;
pub use disturbance::{Disturbance, DisturbanceCause};
pub use note::{Note, NoteKind};
pub use profile::Profile;
pub mod store_rows;
pub use store_rows::{HistoryPoint, ResultRow, RunSummary};

#[cfg(test)]
pub mod testdata;
