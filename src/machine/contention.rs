//! Who else took the CPUs while a run measured: every process's CPU time from `/proc` at the
//! run's start and end, oscost's own tree left out, summed by command name. A run on a loaded
//! machine says its contention once, with the figure and the programs that took the CPUs
//! (`analysis::contention_note`), instead of one "other CPU busy" note per result.

use std::collections::BTreeMap;

/// Every process's CPU time at one moment: pid to (command name, start time, CPU ticks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessCpu {
    /// By pid: the command name, the start time (ticks since boot, so a reused pid is not
    /// taken for the old process) and utime+stime in ticks.
    pub by_pid: BTreeMap<i32, (String, u64, u64)>,
}

/// A program's share of the CPUs while the run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramShare {
    /// Its command name (`comm`).
    pub name: String,
    /// How many processes of that name.
    pub processes: usize,
    /// Its CPU time over the wall time, in CPUs (1.0: one CPU all the time).
    pub cpus: f64,
}

/// What `/proc/PID/stat` says of a process: its command name, its parent (field 4), its start
/// time (field 22) and utime+stime (fields 14 and 15), from one read.
fn stat_of(pid: i32) -> Option<(String, i32, u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, tail) = s.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    let f: Vec<&str> = tail.split_whitespace().collect();
    let n = |i: usize| f.get(i - 3).and_then(|x| x.parse::<u64>().ok());
    let ppid = f.get(1)?.parse().ok()?;
    Some((name, ppid, n(22)?, n(14)? + n(15)?))
}

impl ProcessCpu {
    /// Every process visible in `/proc` now, but `own`'s tree (oscost and its workers,
    /// guards, helpers: `own` and every process whose parent chain reaches it).
    pub fn now(own: i32) -> ProcessCpu {
        let mut parent = BTreeMap::new();
        let mut by_pid = BTreeMap::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return ProcessCpu::default();
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some((name, ppid, start, ticks)) = stat_of(pid) {
                parent.insert(pid, ppid);
                by_pid.insert(pid, (name, start, ticks));
            }
        }
        let mine = |mut pid: i32| {
            for _ in 0..64 {
                if pid == own {
                    return true;
                }
                match parent.get(&pid) {
                    Some(&p) if p > 0 => pid = p,
                    _ => return false,
                }
            }
            false
        };
        by_pid.retain(|&pid, _| !mine(pid));
        ProcessCpu { by_pid }
    }

    /// The programs that used CPU time between `self` and `later`, over `wall_ns`, by name,
    /// the most first: a process seen both times counts its difference, one started since
    /// its whole time (one that also ended in between is not seen).
    pub fn programs_since(&self, later: &ProcessCpu, wall_ns: f64) -> Vec<ProgramShare> {
        let mut by_name: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
        for (pid, (name, start, ticks)) in &later.by_pid {
            let before = match self.by_pid.get(pid) {
                Some((_, s, t)) if s == start => *t,
                _ => 0,
            };
            let used = ticks.saturating_sub(before);
            if used > 0 {
                let e = by_name.entry(name).or_default();
                e.0 += 1;
                e.1 += used;
            }
        }
        let mut out: Vec<ProgramShare> = by_name
            .into_iter()
            .map(|(name, (processes, ticks))| ProgramShare {
                name: name.to_string(),
                processes,
                cpus: crate::measuring::os::ticks_ns(ticks) as f64 / wall_ns.max(1.0),
            })
            .collect();
        out.sort_by(|a, b| b.cpus.total_cmp(&a.cpus));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(rows: &[(i32, &str, u64, u64)]) -> ProcessCpu {
        ProcessCpu {
            by_pid: rows
                .iter()
                .map(|&(p, n, s, t)| (p, (n.to_string(), s, t)))
                .collect(),
        }
    }

    #[test]
    fn programs_are_summed_by_name_and_a_reused_pid_counts_whole() {
        let a = snap(&[(10, "dd", 5, 100), (11, "dd", 5, 50), (12, "sshd", 1, 7)]);
        // dd 10 used 200 ticks more; pid 11 is now another dd started later (all 30 new);
        // sshd used none; make is new.
        let b = snap(&[
            (10, "dd", 5, 300),
            (11, "dd", 9, 30),
            (12, "sshd", 1, 7),
            (13, "make", 20, 10),
        ]);
        let hz = ticks_per_s();
        let got = a.programs_since(&b, 1e9);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].name.as_str(), got[0].processes), ("dd", 2));
        assert!((got[0].cpus - 230.0 / hz).abs() < 1e-9, "{got:?}");
        assert_eq!(got[1].name, "make");
    }

    #[test]
    fn this_process_and_its_children_are_left_out() {
        let own = std::process::id() as i32;
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let now = ProcessCpu::now(own);
        let _ = child.kill();
        let _ = child.wait();
        assert!(!now.by_pid.contains_key(&own));
        assert!(!now.by_pid.contains_key(&(child.id() as i32)));
        assert!(now.by_pid.contains_key(&1) || now.by_pid.is_empty());
    }

    fn ticks_per_s() -> f64 {
        1e9 / crate::measuring::os::ticks_ns(1) as f64
    }
}
