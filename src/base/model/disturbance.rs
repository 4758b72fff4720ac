//! A result's evidence of disturbance: the machine's figures while it was measured (preempted
//! samples, the hypervisor's steal, other CPUs' load, the CPU wait, a cgroup's throttling), the
//! reasons it crossed the line in words, and the kind of each reason, so views can group them
//! without reading the words.

use serde::{Deserialize, Serialize};

/// Evidence that the machine disturbed the measurement, and whether it crossed the line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Disturbance {
    /// Samples during which the measuring thread was involuntarily switched out.
    pub preempted_samples: usize,
    /// Steal time on the measuring CPUs over the benchmark, percent of their time.
    pub steal_pct: f64,
    /// Busy share of the CPUs the benchmark did not use, percent. `None` when every CPU was used.
    pub other_cpu_busy_pct: Option<f64>,
    /// Samples in a slow phase of the machine (schema_version 1, which looked for phases in one
    /// long stream; version 2 names departing repetitions instead).
    #[serde(default)]
    pub phase_samples: usize,
    /// How much slower the slow phase was than the rest, percent.
    #[serde(default)]
    pub phase_shift_pct: Option<f64>,
    /// Share of the measuring thread's time it spent runnable but waiting for its CPU, percent
    /// (schedstat); `None` where the kernel keeps no schedstat, or the operation hands its CPU
    /// over (a same-CPU ping-pong).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait_pct: Option<f64>,
    /// Share of the measuring CPU's time that other programs took while the result was
    /// measured, percent (the CPU's idle time and the worker tree's CPU time leave it:
    /// `noise::CpuShare`); `None` without cpuidle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_foreign_pct: Option<f64>,
    /// Time the worker's cgroup was stopped by its CPU quota while the result was measured,
    /// ms, summed over its repetitions; `None` where no quota throttled it (or none is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_ms: Option<f64>,
    /// Human-readable reasons; empty when undisturbed.
    pub flag: Vec<String>,
    /// What kind of evidence each reason in `flag` is, for views that group them; empty in
    /// runs stored before it was kept (their reasons are then said in words only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<DisturbanceCause>,
}

/// What kind of evidence a disturbance's reason states.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DisturbanceCause {
    /// An SMT sibling of the measuring CPU was busy.
    SiblingBusy,
    /// The hypervisor took time from the measuring CPUs (`steal_pct`).
    Steal,
    /// Too many samples were preempted (`preempted_samples`).
    Preempted,
    /// The measuring thread waited for its own CPU (`cpu_wait_pct`).
    CpuWait,
    /// Other programs took the measuring CPU (`cpu_foreign_pct`).
    ForeignShare,
    /// The worker's cgroup quota stopped it (`throttled_ms`).
    Throttled,
}

impl Disturbance {
    /// Whether anything disturbed the result (its flag says what).
    pub fn is_disturbed(&self) -> bool {
        !self.flag.is_empty()
    }

    /// Add a reason of kind `cause`.
    pub fn add(&mut self, cause: DisturbanceCause, reason: String) {
        self.flag.push(reason);
        if !self.causes.contains(&cause) {
            self.causes.push(cause);
        }
    }

    /// Whether every reason is the hypervisor's steal or preempted samples, both stated by
    /// figures of their own (`steal_pct`, `preempted_samples`), and the kind of each is known.
    pub fn only_steal_or_preempted(&self) -> bool {
        self.is_disturbed()
            && self.causes.len() == self.flag.len()
            && self
                .causes
                .iter()
                .all(|c| matches!(c, DisturbanceCause::Steal | DisturbanceCause::Preempted))
    }
}
