//! CPU affinity: which CPUs this process may use, pinning the calling thread to one, and where
//! the two parties of a ping-pong run (`Place`). Single-thread benchmarks are pinned by default
//! so migrations and the other CPU's caches stay out of the number (docs/ARCHITECTURE.md §2).

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::error::BenchError;
use crate::base::model::Placement;

/// Where the two parties of a ping-pong run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Both on the measuring CPU.
    Same,
    /// The master on the measuring CPU, the peer on another allowed one.
    Cross,
    /// Both unpinned, anywhere allowed.
    Free,
}

impl Place {
    /// The placement as in ids: "same", "cross", "default".
    pub fn word(self) -> &'static str {
        match self {
            Place::Same => "same",
            Place::Cross => "cross",
            Place::Free => "free",
        }
    }

    /// A placement from its word.
    pub fn parse(s: &str) -> Option<Place> {
        match s {
            "same" => Some(Place::Same),
            "cross" => Some(Place::Cross),
            "free" => Some(Place::Free),
            _ => None,
        }
    }

    /// The placements measured when the user names none.
    pub fn defaults() -> Vec<Place> {
        vec![Place::Same, Place::Cross]
    }
}

/// The CPUs of a two-party benchmark's master and peer (`None`: unpinned) and what the result
/// records, for placement `place` with the master's CPU `me`.
#[derive(Debug, Clone, PartialEq)]
pub struct Parties {
    /// The master's CPU.
    pub master: Option<usize>,
    /// The peer's CPU.
    pub peer: Option<usize>,
    /// What the result records.
    pub record: Placement,
    /// CPUs the benchmark runs on; the other allowed ones are watched for load.
    pub used: Vec<usize>,
}

impl Parties {
    /// The parties of `place` with the master on `me`, among `allowed`.
    pub fn resolve(place: Place, me: usize, allowed: &[usize]) -> Result<Parties, BenchError> {
        match place {
            Place::Same => Ok(Parties {
                master: Some(me),
                peer: Some(me),
                record: Placement::Same { cpu: me },
                used: vec![me],
            }),
            Place::Cross => {
                let other = allowed.iter().copied().find(|&c| c != me).ok_or_else(|| {
                    BenchError::Skipped("cross placement needs two allowed CPUs".into())
                })?;
                Ok(Parties {
                    master: Some(me),
                    peer: Some(other),
                    record: Placement::Cross {
                        cpus: vec![me, other],
                    },
                    used: vec![me, other],
                })
            }
            Place::Free => Ok(Parties {
                master: None,
                peer: None,
                record: Placement::Free,
                used: allowed.to_vec(),
            }),
        }
    }
}

/// A raw affinity mask of `cpus`, for a forked child to apply with async-signal-safe calls.
pub fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET checks nothing; `c` came from the allowed set, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Start what `cmd` runs on `cpu` (a wrapper and the program it starts inherit it).
pub fn pin_on_exec(cmd: &mut std::process::Command, cpu: usize) {
    use std::os::unix::process::CommandExt;
    let set = cpu_set(&[cpu]);
    // SAFETY: sched_setaffinity is async-signal-safe; the set was built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Pin the calling thread to `cpu`, or allow it every CPU in `allowed` when `cpu` is None.
pub fn place_current_thread(cpu: Option<usize>, allowed: &[usize]) -> Result<(), String> {
    match cpu {
        Some(c) => pin_current_thread(c),
        None => allow_cpus(allowed),
    }
}

/// CPUs this process is allowed to run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    sched_getaffinity(Pid::from_raw(0)).map_or(vec![], |set| cpus_of(&set))
}

/// The CPUs of an affinity mask, ascending.
fn cpus_of(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

/// Every thread of this process moved off one CPU until dropped, then given back the CPUs
/// they had. The coordinator holds it while a worker measures there: the coordinator's own
/// wakeups (its poll of the worker's pipes, a signal) then land elsewhere instead of in the
/// measuring thread's wait, where they would be counted as another program sharing its CPU.
pub struct KeptOff {
    /// The CPUs the process had before (ascending), which a worker it starts is given.
    pub before: Vec<usize>,
    restore: Option<CpuSet>,
}

/// Move every thread of this process off `cpu`, onto the others it may use; nothing when
/// `cpu` is the only one.
pub fn keep_off(cpu: usize) -> KeptOff {
    let Ok(original) = sched_getaffinity(Pid::from_raw(0)) else {
        return KeptOff {
            before: vec![],
            restore: None,
        };
    };
    let before = cpus_of(&original);
    if !before.contains(&cpu) || before.len() < 2 {
        return KeptOff {
            before,
            restore: None,
        };
    }
    let mut elsewhere = original;
    // `cpu` is in the set, so below CpuSet::count().
    let _ = elsewhere.unset(cpu);
    set_every_thread(&elsewhere);
    KeptOff {
        before,
        restore: Some(original),
    }
}

impl Drop for KeptOff {
    fn drop(&mut self) {
        if let Some(set) = &self.restore {
            set_every_thread(set);
        }
    }
}

/// Set the affinity of every thread of this process (a mask is per thread; new threads
/// inherit their creator's).
fn set_every_thread(set: &CpuSet) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        let _ = sched_setaffinity(Pid::from_raw(0), set);
        return;
    };
    for t in tasks.flatten() {
        if let Ok(tid) = t.file_name().to_string_lossy().parse::<i32>() {
            // A thread that has just exited is no error.
            let _ = sched_setaffinity(Pid::from_raw(tid), set);
        }
    }
}

/// Pin the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .map_err(|e| format!("CPU {cpu} is out of range: {e}"))?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))
}

/// Allow the calling thread every CPU in `cpus` (unpinned placement).
pub fn allow_cpus(cpus: &[usize]) -> Result<(), String> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).map_err(|e| format!("CPU {c}: {e}"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("cannot set affinity: {e}"))
}

/// The CPU a benchmark is pinned to when the user does not say: the last allowed one. CPU 0
/// takes more interrupts (timers, virtio) on most VMs, so the last one is the quieter choice.
pub fn default_cpu(allowed: &[usize]) -> Option<usize> {
    allowed.last().copied()
}

/// A CPU busier than this (percent, over a short look before measuring) is not chosen by
/// default when another is free.
pub const BUSY_PCT: f64 = 50.0;

/// The measuring CPU when the user named none: `default`, unless it is busy (another task
/// runs there: pinned work, `taskset -c 1`) and another allowed CPU is not; then the least
/// busy, the last of equals. `busy` is each allowed CPU's busy share, percent. Returns the CPU
/// and, when it is not the default, or every CPU is busy, a line saying so.
pub fn choose_idle(default: usize, busy: &[(usize, f64)]) -> (usize, Option<String>) {
    let of = |cpu: usize| busy.iter().find(|(c, _)| *c == cpu).map(|(_, b)| *b);
    let Some(here) = of(default) else {
        return (default, None);
    };
    if here <= BUSY_PCT {
        return (default, None);
    }
    let best = busy
        .iter()
        .filter(|(c, _)| *c != default)
        .min_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
    match best {
        Some(&(c, b)) if b <= BUSY_PCT => (
            c,
            Some(format!(
                "CPU {default} was {here:.0}% busy with other work before measuring: measuring on CPU {c} ({b:.0}% busy; --cpu {default} to insist)"
            )),
        ),
        _ => (
            default,
            Some(format!(
                "every allowed CPU was busy with other work before measuring (CPU {default}: {here:.0}%); results will say where the measuring thread waited for its CPU"
            )),
        ),
    }
}

/// Each of `cpus`' busy share (percent) over `window`, from /proc/stat.
pub fn busy_now(cpus: &[usize], window: std::time::Duration) -> Vec<(usize, f64)> {
    let a = super::noise::read_proc_stat();
    std::thread::sleep(window);
    let z = super::noise::read_proc_stat();
    cpus.iter()
        .filter_map(|&c| {
            let (Some(Some(x)), Some(Some(y))) = (a.get(c), z.get(c)) else {
                return None;
            };
            let total = y.total().saturating_sub(x.total());
            let busy = (y.busy + y.steal).saturating_sub(x.busy + x.steal);
            (total > 0).then(|| (c, 100.0 * busy as f64 / total as f64))
        })
        .collect()
}

/// A kernel CPU list ("0-1", "0,2,4-5") as CPU numbers.
pub fn parse_cpu_list(text: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.trim().parse::<usize>()),
        }
    }
    v
}

/// The other hardware threads of `cpu`'s core (empty when it has none, or the topology is not
/// exposed): load there slows `cpu` down; load on a separate core need not.
pub fn smt_siblings(cpu: usize) -> Vec<usize> {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    std::fs::read_to_string(path)
        .map(|t| {
            parse_cpu_list(&t)
                .into_iter()
                .filter(|&c| c != cpu)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_ranges_and_singles() {
        assert_eq!(parse_cpu_list("0-1\n"), vec![0, 1]);
        assert_eq!(parse_cpu_list("0,2,4-5"), vec![0, 2, 4, 5]);
        assert!(parse_cpu_list("").is_empty());
    }

    #[test]
    fn places_parse_name_and_resolve_to_parties() {
        for p in [Place::Same, Place::Cross, Place::Free] {
            assert_eq!(Place::parse(p.word()), Some(p));
        }
        assert_eq!(Place::parse("both"), None);
        let cross = Parties::resolve(Place::Cross, 1, &[0, 1]).unwrap();
        assert_eq!((cross.master, cross.peer), (Some(1), Some(0)));
        assert_eq!(cross.used, vec![1, 0]);
        assert!(matches!(
            Parties::resolve(Place::Cross, 0, &[0]),
            Err(BenchError::Skipped(_))
        ));
        let free = Parties::resolve(Place::Free, 1, &[0, 1]).unwrap();
        assert_eq!((free.master, free.used), (None, vec![0, 1]));
    }

    #[test]
    fn this_process_is_allowed_at_least_one_cpu_and_can_pin_to_it() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let c = default_cpu(&cpus).unwrap();
        std::thread::spawn(move || {
            pin_current_thread(c).unwrap();
            assert_eq!(allowed_cpus(), vec![c]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_busy_default_cpu_gives_way_to_an_idle_one_unless_all_are_busy() {
        assert_eq!(choose_idle(1, &[(0, 3.0), (1, 10.0)]), (1, None));
        let (cpu, said) = choose_idle(1, &[(0, 3.0), (1, 99.0)]);
        assert_eq!(cpu, 0);
        assert!(said.unwrap().contains("CPU 1 was 99% busy"));
        let (cpu, said) = choose_idle(3, &[(0, 90.0), (1, 5.0), (2, 5.0), (3, 95.0)]);
        assert_eq!(cpu, 2, "the last of equals");
        assert!(said.is_some());
        let (cpu, said) = choose_idle(1, &[(0, 80.0), (1, 99.0)]);
        assert_eq!(cpu, 1);
        assert!(said.unwrap().contains("every allowed CPU was busy"));
        assert_eq!(choose_idle(1, &[]), (1, None));
    }
}
