//! A result's sampled profile (`--profile`): where the measured operation's time went, as the
//! samples of a clock event taken in untimed passes of their own, one a repetition
//! (`measuring::profile`), kept as counts by function and by call chain. Counts stay counts
//! here; what they come to in ns per operation, with intervals, and what grew between two
//! sides are `analysis::profile`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a sampled function lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Space {
    /// The kernel (its image or a module), named from /proc/kallsyms.
    Kernel,
    /// A JIT-compiled BPF program (a seccomp filter, a tracer's program), named from
    /// /proc/kallsyms where `net.core.bpf_jit_kallsyms` lists it.
    Bpf,
    /// The measuring process's own code or its libraries (and the vDSO).
    User,
}

impl Space {
    /// "kernel", "bpf" or "user".
    pub fn word(self) -> &'static str {
        match self {
            Space::Kernel => "kernel",
            Space::Bpf => "bpf",
            Space::User => "user",
        }
    }
}

/// How the samples were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// perf's name of the sampled event: "cpu-clock" (the software clock, where there is no
    /// PMU) or "cycles".
    pub event: String,
    /// Samples a second of the measuring thread's time asked for (cpu-clock: one every
    /// 1/rate of its CPU time; cycles: a frequency the kernel keeps by adjusting the period).
    pub rate_hz: u64,
    /// Whether kernel code was sampled; where it was not, why (perf_event_paranoid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_refused: Option<String>,
    /// What the clock followed: every task on the case's CPUs, or the measuring task and
    /// the children it inherited to (profiles stored before this was kept are the latter).
    #[serde(default)]
    pub scope: SamplingScope,
}

/// What a sampling clock follows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingScope {
    /// One clock per CPU the case ran on, whatever task runs there, as `perf record -C`; only
    /// the samples of the measuring process and its descendants are kept.
    Cpu,
    /// One clock per task, inherited by the children the measuring task starts. A child's
    /// clock starts a whole period from its first run, so a child that lives less than a
    /// period is not sampled at all: a short-lived child's time is under-counted.
    #[default]
    Task,
}

/// One repetition's profile: its samples by the function they landed in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileRepetition {
    /// Samples taken.
    pub samples: u64,
    /// Samples the kernel could not write (a full buffer).
    #[serde(default)]
    pub lost: u64,
    /// What one operation took in the profiled window, ns: the repetition's median plus the
    /// loop's baseline, since the window holds both (set when repetitions are merged).
    #[serde(default, deserialize_with = "crate::base::stats::nan::f64")]
    pub window_ns_per_op: f64,
    /// Samples by the function they landed in (the leaf, "self" time).
    pub functions: BTreeMap<String, u64>,
}

/// Samples with one call chain, root first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stack {
    /// Functions, the outermost first; a kernel chain below its system call's entry, a user
    /// sample as its function alone (user call chains are not walked: the binary keeps no
    /// frame pointers).
    pub frames: Vec<String>,
    /// Samples with this chain, over every repetition.
    pub samples: u64,
}

/// A result's profile: how it was sampled, each repetition's counts, and the call chains
/// summed over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// How the samples were taken.
    pub sampling: Sampling,
    /// One per profiled repetition, in the result's repetition order.
    pub repetitions: Vec<ProfileRepetition>,
    /// Where each function named lives.
    pub spaces: BTreeMap<String, Space>,
    /// Call chains, the most sampled first; those past `STACKS_KEPT` summed into one
    /// "[other chains]".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<Stack>,
}

/// Call chains a profile keeps (the rest are summed into one).
pub const STACKS_KEPT: usize = 400;

/// Functions a repetition keeps by name (the rest are summed into `OTHER`).
pub const FUNCTIONS_KEPT: usize = 250;

/// The name the functions and chains past what is kept are summed under.
pub const OTHER: &str = "[other]";

/// The `FUNCTIONS_KEPT` most sampled functions, the rest summed as `OTHER`.
pub fn kept_functions(all: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    if all.len() <= FUNCTIONS_KEPT {
        return all;
    }
    let mut v: Vec<(String, u64)> = all.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let rest: u64 = v[FUNCTIONS_KEPT..].iter().map(|x| x.1).sum();
    v.truncate(FUNCTIONS_KEPT);
    let mut out: BTreeMap<String, u64> = v.into_iter().collect();
    *out.entry(OTHER.into()).or_insert(0) += rest;
    out
}

/// The `STACKS_KEPT` most sampled chains, most first, the rest summed as one `OTHER` chain.
pub fn kept_stacks(mut all: Vec<(Vec<String>, u64)>) -> Vec<Stack> {
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let rest: u64 = all.iter().skip(STACKS_KEPT).map(|x| x.1).sum();
    all.truncate(STACKS_KEPT);
    let mut out: Vec<Stack> = all
        .into_iter()
        .map(|(frames, samples)| Stack { frames, samples })
        .collect();
    if rest > 0 {
        out.push(Stack {
            frames: vec![OTHER.into()],
            samples: rest,
        });
    }
    out
}

impl Profile {
    /// Samples over every repetition.
    pub fn samples(&self) -> u64 {
        self.repetitions.iter().map(|r| r.samples).sum()
    }

    /// Where `name` lives (user space for a name the profile did not place).
    pub fn space(&self, name: &str) -> Space {
        self.spaces.get(name).copied().unwrap_or(Space::User)
    }
}
