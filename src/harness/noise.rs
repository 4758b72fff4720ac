//! Noise guards: evidence that something other than the benchmark took the CPU. Per sample, the
//! measuring thread's involuntary context switches (`getrusage(RUSAGE_THREAD)`); around a whole
//! benchmark, `/proc/stat` for steal time on the CPUs used and the busy share of the others
//! (on these machines the two vCPUs share a core, so load on one slows the other 1.4-2x).
//! `assess` turns the evidence into a flag with reasons (DESIGN §3.5).

use crate::model::Disturbance;

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
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

/// Thresholds above which a benchmark is called disturbed.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    pub other_busy_pct: f64,
    pub steal_pct: f64,
    pub preempted_share: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            // An idle vCPU shows a few percent from the coordinator and interrupts; a competing
            // task shows tens.
            other_busy_pct: 20.0,
            steal_pct: 5.0,
            preempted_share: 0.05,
        }
    }
}

/// Judge one benchmark. `used` are the CPUs the benchmark ran on; `other` the CPUs it did not
/// use but that share the machine with it (the allowed, online ones).
pub fn assess(
    before: &CpuSnapshot,
    after: &CpuSnapshot,
    used: &[usize],
    other: &[usize],
    preempted_samples: usize,
    samples: usize,
    th: Thresholds,
) -> Disturbance {
    let delta = |cpus: &[usize]| -> Option<CpuTimes> {
        let mut d = CpuTimes::default();
        let mut any = false;
        for &c in cpus {
            if let (Some(Some(a)), Some(Some(b))) = (before.get(c), after.get(c)) {
                d.busy += b.busy.saturating_sub(a.busy);
                d.idle += b.idle.saturating_sub(a.idle);
                d.steal += b.steal.saturating_sub(a.steal);
                any = true;
            }
        }
        any.then_some(d)
    };
    let pct = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            100.0 * part as f64 / whole as f64
        }
    };
    let steal_pct = delta(used).map_or(0.0, |d| pct(d.steal, d.total()));
    let other_cpu_busy_pct = if other.is_empty() {
        None
    } else {
        delta(other).map(|d| pct(d.busy + d.steal, d.total()))
    };
    let mut flag = Vec::new();
    if let Some(b) = other_cpu_busy_pct
        && b > th.other_busy_pct
    {
        flag.push(format!(
            "other CPU busy {b:.0}% (it shares the core: expect a slowdown)"
        ));
    }
    if steal_pct > th.steal_pct {
        flag.push(format!(
            "steal {steal_pct:.0}% (the hypervisor took the CPU)"
        ));
    }
    if samples > 0 && preempted_samples as f64 / samples as f64 > th.preempted_share {
        flag.push(format!(
            "{preempted_samples} of {samples} samples preempted"
        ));
    }
    Disturbance {
        preempted_samples,
        steal_pct,
        other_cpu_busy_pct,
        flag,
        ..Disturbance::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  10 0 10 100 0 0 0 0 0 0\n\
cpu0 5 0 5 50 0 0 0 0 0 0\n\
cpu1 5 0 5 50 0 0 0 0 0 0\n\
intr 1 2 3\n";
    const STAT_B: &str = "cpu  10 0 10 100 0 0 0 0 0 0\n\
cpu0 6 0 6 98 0 0 0 0 0 0\n\
cpu1 85 0 5 70 0 0 0 10 0 0\n";

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

    #[test]
    fn busy_other_cpu_and_steal_are_flagged_with_reasons() {
        let a = parse_proc_stat(STAT_A);
        let b = parse_proc_stat(STAT_B);
        // cpu1 went +80 busy +20 idle +10 steal: 90/110 = 81.8% busy.
        let d = assess(&a, &b, &[0], &[1], 0, 100, Thresholds::default());
        assert!((d.other_cpu_busy_pct.unwrap() - 900.0 / 11.0).abs() < 1e-9);
        assert_eq!(d.steal_pct, 0.0);
        assert_eq!(d.flag.len(), 1);
        assert!(d.flag[0].contains("other CPU busy 82%"));
        // Measured on cpu1: steal 10/110.
        let d = assess(&a, &b, &[1], &[0], 0, 100, Thresholds::default());
        assert!((d.steal_pct - 1000.0 / 110.0).abs() < 1e-9);
        assert!(d.flag.iter().any(|f| f.starts_with("steal 9%")));
        assert!(!d.flag.iter().any(|f| f.contains("other CPU")));
    }

    #[test]
    fn quiet_benchmark_is_not_flagged_and_preemption_share_is() {
        let a = parse_proc_stat(STAT_A);
        let d = assess(&a, &a, &[0], &[1], 5, 100, Thresholds::default());
        assert!(!d.is_disturbed());
        let d = assess(&a, &a, &[0], &[1], 6, 100, Thresholds::default());
        assert_eq!(d.flag, vec!["6 of 100 samples preempted".to_string()]);
        let d = assess(&a, &a, &[0, 1], &[], 0, 100, Thresholds::default());
        assert_eq!(d.other_cpu_busy_pct, None);
    }
}
