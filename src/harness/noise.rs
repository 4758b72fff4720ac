//! Noise guards: evidence that something other than the benchmark took the CPU. Per sample, the
//! measuring thread's involuntary context switches (`getrusage(RUSAGE_THREAD)`); around a whole
//! benchmark, `/proc/stat` for steal time on the CPUs used and the busy share of the others
//! (on these machines the two vCPUs share a core, so load on one slows the other 1.4-2x).
//! Around the timed pass, the measuring thread's own schedstat: how long it waited, runnable,
//! for its CPU, and which tasks were runnable there (a CPU shared with a spinning task halves
//! the operation's throughput while the median of short batches barely moves).
//! `analysis::assess` turns the evidence into a flag with reasons.

use serde::{Deserialize, Serialize};

/// Counts times the current thread was switched out against its will. Behind a trait so the
/// sampler can be tested with scripted preemptions.
pub trait PreemptionProbe {
    /// The thread's involuntary context switches so far.
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
    /// Ticks spent running (user, nice, system, irq, softirq).
    pub busy: u64,
    /// Ticks spent idle (idle and iowait).
    pub idle: u64,
    /// Ticks stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTimes {
    /// Every tick counted.
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

/// Every CPU's times now, from /proc/stat.
pub fn read_proc_stat() -> CpuSnapshot {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

/// The calling thread's scheduler accounting (`/proc/thread-self/schedstat`): time on a CPU
/// and time spent runnable but waiting for one, both cumulative nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedStat {
    /// Time on the CPU, ns.
    pub run_ns: u64,
    /// Time runnable, waiting for the CPU, ns.
    pub wait_ns: u64,
}

/// A task's schedstat line ("run wait timeslices").
pub fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut it = text.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some(SchedStat {
        run_ns: it.next()??,
        wait_ns: it.next()??,
    })
}

/// This thread's schedstat (`None` where the kernel keeps none: CONFIG_SCHED_INFO off).
pub fn thread_schedstat() -> Option<SchedStat> {
    parse_schedstat(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
}

/// What one task's `/proc/PID/task/TID/stat` says: its name, state, process group and the CPU
/// it last ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskState {
    /// The task's command name.
    pub comm: String,
    /// Its state letter (R running, S sleeping...).
    pub state: char,
    /// Its process group.
    pub pgid: i32,
    /// The CPU it last ran on.
    pub cpu: usize,
}

/// A task's /proc stat line.
pub fn parse_task_stat(text: &str) -> Option<TaskState> {
    // The name is in parentheses and may hold anything, spaces and ')' included.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name: state is field 3 of proc(5), pgrp field 5, processor field 39.
    Some(TaskState {
        comm,
        state: rest.first()?.chars().next()?,
        pgid: rest.get(2)?.parse().ok()?,
        cpu: rest.get(36)?.parse().ok()?,
    })
}

/// Tasks runnable on `cpu` right now that are not of process group `own_pgid` (the worker and
/// what it started), as "name (pid N)", at most `limit` of them.
pub fn runnable_on(cpu: usize, own_pgid: i32, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(st) = std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|s| parse_task_stat(&s))
            else {
                continue;
            };
            if st.state == 'R' && st.cpu == cpu && st.pgid != own_pgid {
                let name = format!("{} (pid {pid})", crate::text::printable(&st.comm));
                if !out.contains(&name) {
                    out.push(name);
                }
                if out.len() >= limit {
                    return out;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_and_task_stat_lines_are_read() {
        assert_eq!(
            parse_schedstat("123456 7890 42\n"),
            Some(SchedStat {
                run_ns: 123456,
                wait_ns: 7890
            })
        );
        assert_eq!(parse_schedstat("garbage"), None);
        let mut line = String::from("4242 (spin (x) y) R 1 4242 4242 0 -1");
        for i in 9..=38 {
            line.push_str(&format!(" {i}"));
        }
        line.push_str(" 1 0 0");
        let t = parse_task_stat(&line).unwrap();
        assert_eq!(t.comm, "spin (x) y");
        assert_eq!((t.state, t.pgid, t.cpu), ('R', 4242, 1));
        // Our own thread is on the list of the CPU it runs on unless its group is excluded.
        let me = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        assert!(parse_task_stat(&me).is_some_and(|t| t.state == 'R'));
    }

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
