//! Noise guards: evidence that something other than the benchmark took the CPU. Per sample, the
//! measuring thread's involuntary context switches (`getrusage(RUSAGE_THREAD)`); around a whole
//! benchmark, `/proc/stat` for steal time on the CPUs used and the busy share of the others
//! (on these machines the two vCPUs share a core, so load on one slows the other 1.4-2x).
//! `analysis::assess` turns the evidence into a flag with reasons (DESIGN §3.5).

use serde::{Deserialize, Serialize};

/// Counts times the current thread was switched out against its will. Behind a trait so the
/// sampler can be tested with scripted preemptions.
pub trait PreemptionProbe {
    fn involuntary_switches(&self) -> u64;
}

/// The real probe: `getrusage(RUSAGE_THREAD).ru_nivcsw`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rusage;

impl PreemptionProbe for Rusage {
    fn involuntary_switches(&self) -> u64 {
        use nix::sys::resource::{UsageWho, getrusage};
        getrusage(UsageWho::RUSAGE_THREAD)
            .map(|u| u.involuntary_context_switches() as u64)
            .unwrap_or(0)
    }
}

/// A probe that never reports a preemption (for parties that are not the measuring thread).
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProbe;

#[cfg(test)]
impl PreemptionProbe for NoProbe {
    fn involuntary_switches(&self) -> u64 {
        0
    }
}

/// Cumulative jiffies of one CPU from /proc/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }
}

/// Per-CPU times indexed by CPU number (missing CPUs are `None`).
pub type CpuSnapshot = Vec<Option<CpuTimes>>;

/// Parse the `cpuN ...` lines of /proc/stat. Fields: user nice system idle iowait irq softirq
/// steal guest guest_nice; guest time is already included in user, so it is not added again.
pub fn parse_proc_stat(text: &str) -> CpuSnapshot {
    let mut out: CpuSnapshot = Vec::new();
    for line in text.lines() {
        // "cpu0 ..." lines; the aggregate "cpu  ..." line has no number right after "cpu".
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let mut it = rest.split_whitespace();
        let Some(Ok(n)) = it.next().map(|s| s.parse::<usize>()) else {
            continue; // the aggregate "cpu " line
        };
        let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        let f = |i: usize| v.get(i).copied().unwrap_or(0);
        let t = CpuTimes {
            busy: f(0) + f(1) + f(2) + f(5) + f(6),
            idle: f(3) + f(4),
            steal: f(7),
        };
        if out.len() <= n {
            out.resize(n + 1, None);
        }
        out[n] = Some(t);
    }
    out
}

pub fn read_proc_stat() -> CpuSnapshot {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  10 0 10 100 0 0 0 0 0 0\n\
cpu0 5 0 5 50 0 0 0 0 0 0\n\
cpu1 5 0 5 50 0 0 0 0 0 0\n\
intr 1 2 3\n";
    #[test]
    fn parses_per_cpu_lines_and_skips_the_aggregate() {
        let s = parse_proc_stat(STAT_A);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0],
            Some(CpuTimes {
                busy: 10,
                idle: 50,
                steal: 0
            })
        );
    }
}
