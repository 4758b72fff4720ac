//! CPU affinity: which CPUs this process may use, and pinning the calling thread to one. Single
//! thread benchmarks are pinned by default so migrations and the other CPU's caches stay out of
//! the number (DESIGN §3.5-3.6).

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// CPUs this process is allowed to run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => vec![],
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
