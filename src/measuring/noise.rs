//! Noise guards: evidence that something other than the benchmark took the CPU. Per sample, the
//! measuring thread's involuntary context switches (`getrusage(RUSAGE_THREAD)`); around a whole
//! benchmark, `/proc/stat` for steal time on the CPUs used and the busy share of the others
//! (on these machines the two vCPUs share a core, so load on one slows the other 1.4-2x).
//! Around the timed pass, the measuring thread's own schedstat: how long it waited, runnable,
//! for its CPU, and which tasks were runnable there (a CPU shared with a spinning task halves
//! the operation's throughput while the median of short batches barely moves). Where the
//! worker sleeps while its children or peers run on that CPU (fork, exec, a ping-pong on one
//! CPU), its schedstat shows nothing: then the CPU's own account does (`CpuShare`: its idle
//! time from cpuidle, less the worker tree's CPU time, leaves other programs' time there), and
//! `running_on` names who ran. `analysis::assess` turns the evidence into a flag with reasons.

use crate::base::helpers::KEEPER as DURING_KEEPER_ARG;
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
    /// Ticks in interrupts (irq and softirq), also counted in `busy`.
    #[serde(default)]
    pub interrupt: u64,
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
            interrupt: f(5) + f(6),
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

/// What one task's `/proc/PID/task/TID/stat` says: its name, state, parent, process group and
/// the CPU it last ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskState {
    /// The task's command name.
    pub comm: String,
    /// Its state letter (R running, S sleeping...).
    pub state: char,
    /// Its parent process.
    pub ppid: i32,
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
    // After the name: state is field 3 of proc(5), ppid field 4, pgrp field 5, processor
    // field 39.
    Some(TaskState {
        comm,
        state: rest.first()?.chars().next()?,
        ppid: rest.get(1)?.parse().ok()?,
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
                let name = task_label(&pid, &st.comm);
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

/// Time CPU `cpu` has spent idle, µs, from its cpuidle states (`/sys/devices/system/cpu/
/// cpuN/cpuidle/state*/time`, microseconds, where /proc/stat counts 10 ms ticks). `None`
/// without a cpuidle driver.
pub fn cpu_idle_us(cpu: usize) -> Option<u64> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let mut total = 0u64;
    let mut any = false;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        if !e.file_name().to_string_lossy().starts_with("state") {
            continue;
        }
        if let Some(t) = std::fs::read_to_string(e.path().join("time"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
        {
            total += t;
            any = true;
        }
    }
    any.then_some(total)
}

/// CPU time of this process and of its children it has waited for, µs (`getrusage` SELF and
/// CHILDREN, user and system): everything a worker's own processes ran.
pub fn own_tree_us() -> u64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let us = |t: nix::sys::time::TimeVal| (t.tv_sec() as u64) * 1_000_000 + t.tv_usec() as u64;
    [UsageWho::RUSAGE_SELF, UsageWho::RUSAGE_CHILDREN]
        .into_iter()
        .filter_map(|w| getrusage(w).ok())
        .map(|u| us(u.user_time()) + us(u.system_time()))
        .sum()
}

/// What CPU `cpu` did over an interval: how long it was, how long the CPU idled, how long
/// this process and its children ran (anywhere) and how long the host took it (the
/// hypervisor's steal, the CPU's interrupts). The rest is other programs' time there: what a
/// worker whose children or peers share its CPU cannot see in its own schedstat, since it
/// sleeps while they wait.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuShare {
    /// The interval, ns.
    pub wall_ns: u64,
    /// The CPU's idle time in it, ns.
    pub idle_ns: u64,
    /// This process tree's CPU time in it, ns.
    pub own_ns: u64,
    /// The CPU's steal, irq and softirq time in it (`/proc/stat`, whole ticks), ns. A guest's
    /// kernel takes steal (and, with IRQ_TIME_ACCOUNTING, interrupts) out of every task's
    /// time, so without it a cloud guest whose host is busy reads as other programs on the
    /// CPU: CI's flagged getpid at 22-35% with nothing else running there.
    #[serde(default)]
    pub host_ns: u64,
}

impl CpuShare {
    /// Time on the CPU that was neither idle, nor this process tree's, nor the host's, ns.
    pub fn foreign_ns(&self) -> u64 {
        self.wall_ns
            .saturating_sub(self.idle_ns)
            .saturating_sub(self.own_ns)
            .saturating_sub(self.host_ns)
    }
}

/// CPU `cpu`'s steal and interrupt ticks between two `/proc/stat` snapshots (`os::ticks_ns`
/// makes them `CpuShare::host_ns` for an interval they bracket); 0 where either lacks the CPU.
pub fn host_ticks(before: &CpuSnapshot, after: &CpuSnapshot, cpu: usize) -> u64 {
    match (
        before.get(cpu).copied().flatten(),
        after.get(cpu).copied().flatten(),
    ) {
        (Some(a), Some(b)) => (b.steal + b.interrupt).saturating_sub(a.steal + a.interrupt),
        _ => 0,
    }
}

/// The start of a `CpuShare` interval: (when, the CPU's idle µs, the tree's CPU µs).
#[derive(Debug, Clone, Copy)]
pub struct CpuShareStart(std::time::Instant, u64, u64);

impl CpuShareStart {
    /// Start an interval on CPU `cpu` (`None` without cpuidle).
    pub fn now(cpu: usize) -> Option<CpuShareStart> {
        Some(CpuShareStart(
            std::time::Instant::now(),
            cpu_idle_us(cpu)?,
            own_tree_us(),
        ))
    }

    /// The interval from the start to now; the host's part of it (`host_ns`) is the caller's
    /// to add from the `/proc/stat` snapshots it takes around the same interval.
    pub fn end(self, cpu: usize) -> Option<CpuShare> {
        let own = own_tree_us();
        let idle = cpu_idle_us(cpu)?;
        Some(CpuShare {
            wall_ns: self.0.elapsed().as_nanos() as u64,
            idle_ns: idle.saturating_sub(self.1) * 1000,
            own_ns: own.saturating_sub(self.2) * 1000,
            host_ns: 0,
        })
    }
}

/// How a task found on the measuring CPU is named: its command and pid, and whether it is
/// part of a program run during the side (`--during`: a descendant of its keeper, `oscost
/// __during`, which is a subreaper, so a daemon that left the program's group is one too).
fn task_label(pid: &str, comm: &str) -> String {
    let comm = crate::base::text::printable(comm);
    if under_during_keeper(pid) {
        format!("{comm} (pid {pid}, of the program run during the side)")
    } else {
        format!("{comm} (pid {pid})")
    }
}

/// Whether `pid` descends from a `--during` keeper (its parents walked up, at most 64).
fn under_during_keeper(pid: &str) -> bool {
    let mut at: i32 = pid.parse().unwrap_or(0);
    for _ in 0..64 {
        let Some(parent) = std::fs::read_to_string(format!("/proc/{at}/stat"))
            .ok()
            .and_then(|s| parse_task_stat(&s))
            .map(|s| s.ppid)
        else {
            return false;
        };
        if parent <= 1 {
            return false;
        }
        let cmdline = std::fs::read(format!("/proc/{parent}/cmdline")).unwrap_or_default();
        if cmdline
            .split(|&b| b == 0)
            .nth(1)
            .is_some_and(|a| a == DURING_KEEPER_ARG.as_bytes())
        {
            return true;
        }
        at = parent;
    }
    false
}

/// Tasks of other process groups than `own_pgid` that ran on CPU `cpu` during a short look
/// (their schedstat run time grew over `window`), "name (pid N)", at most `limit`: who took
/// the CPU from a worker's children, which a look at the runnable tasks of one instant misses
/// when the competitor runs in bursts.
pub fn running_on(
    cpu: usize,
    own_pgid: i32,
    window: std::time::Duration,
    limit: usize,
) -> Vec<String> {
    // (task dir, name, run ns) of the candidates: last on `cpu`, not ours.
    let look = || -> Vec<(std::path::PathBuf, String, u64)> {
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
                let dir = t.path();
                let Some(st) = std::fs::read_to_string(dir.join("stat"))
                    .ok()
                    .and_then(|s| parse_task_stat(&s))
                else {
                    continue;
                };
                if st.cpu != cpu || st.pgid == own_pgid {
                    continue;
                }
                if let Some(ss) = std::fs::read_to_string(dir.join("schedstat"))
                    .ok()
                    .and_then(|s| parse_schedstat(&s))
                {
                    let name = task_label(&pid, &st.comm);
                    out.push((dir, name, ss.run_ns));
                }
            }
        }
        out
    };
    let before = look();
    std::thread::sleep(window);
    let mut grew: Vec<(u64, String)> = before
        .into_iter()
        .filter_map(|(dir, name, run)| {
            let now = std::fs::read_to_string(dir.join("schedstat"))
                .ok()
                .and_then(|s| parse_schedstat(&s))?;
            (now.run_ns > run).then(|| (now.run_ns - run, name))
        })
        .collect();
    grew.sort_by_key(|g| std::cmp::Reverse(g.0));
    let mut out: Vec<String> = Vec::new();
    for (_, name) in grew {
        if !out.contains(&name) {
            out.push(name);
        }
        if out.len() >= limit {
            break;
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
    fn a_cpus_host_ticks_are_its_steal_and_interrupts_between_two_snapshots() {
        let a = parse_proc_stat("cpu1 1 2 3 4 5 6 7 8 0 0\n");
        let b = parse_proc_stat("cpu1 9 9 9 9 9 16 17 18 0 0\n");
        assert_eq!(a[1].unwrap().interrupt, 6 + 7);
        assert_eq!(host_ticks(&a, &b, 1), 30);
        assert_eq!(host_ticks(&a, &b, 0), 0, "no line for cpu0");
        assert_eq!(host_ticks(&a, &b, 7), 0, "no such CPU");
    }

    #[test]
    fn parses_per_cpu_lines_and_skips_the_aggregate() {
        let s = parse_proc_stat(STAT_A);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0],
            Some(CpuTimes {
                busy: 10,
                idle: 50,
                steal: 0,
                interrupt: 0
            })
        );
    }
}
