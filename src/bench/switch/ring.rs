//! `switch/ring` is lmbench's lat_ctx: N processes in a ring of pipes pass a token; each sums
//! S KB of its own memory before passing it on. The cost of the work that is not a switch (a
//! pipe write and read, and the sum, in one process with hot caches: lmbench's "ovr") is
//! measured and subtracted, so a result is the cost of one switch in the ring.

use std::sync::Mutex;

use crate::base::model::{Curve, Placement};
use crate::measuring::case::{BenchError, Case, Measured, Meter, Outcome};
use crate::measuring::os::{close, ensure_fds, errno, pipe, read_byte, write_byte};
use crate::measuring::placement;

/// The ring's cost against its size, one line per working set, as reports draw it.
pub(super) const RING_CURVE: Curve = Curve {
    name: "ring",
    title: "context switch in a ring of N processes (lat_ctx), overhead subtracted",
    x: "procs",
    x_desc: "processes in the ring",
    y_desc: "per switch",
    log2_x: true,
    series: Some(("size_kb", "KB per process")),
    across_family: false,
    regime: None,
};

/// lmbench's sumit: read every int of `data` (4-byte ints, all of them, as lat_ctx does).
#[inline(never)]
fn sumit(data: &[i32]) -> i32 {
    data.iter().fold(0i32, |a, &x| a.wrapping_add(x))
}

/// Move `r` and `w` to fds 3 and 4 and close every other fd above 2 (in a forked child).
fn keep_only(r: i32, w: i32) {
    // SAFETY: async-signal-safe fd operations in the child.
    unsafe {
        let r2 = libc::fcntl(r, libc::F_DUPFD, 100);
        let w2 = libc::fcntl(w, libc::F_DUPFD, 100);
        libc::dup2(r2, 3);
        libc::dup2(w2, 4);
        if libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, 0u32) != 0 {
            for fd in 5..65536 {
                libc::close(fd);
            }
        }
    }
}

/// A ring of `n` processes (the master is member 0), killed and reaped on drop.
struct Ring {
    pids: Vec<libc::pid_t>,
    /// Master's write end (to member 1) and read end (from member n-1).
    w: i32,
    r: i32,
}

/// `n` pipes; those already made are closed again if one cannot be.
fn pipes(n: usize) -> Result<Vec<[i32; 2]>, BenchError> {
    let mut v: Vec<[i32; 2]> = Vec::with_capacity(n);
    for _ in 0..n {
        match pipe() {
            Ok(p) => v.push(p),
            Err(e) => {
                v.iter().flatten().for_each(|&fd| close(fd));
                return Err(e);
            }
        }
    }
    Ok(v)
}

/// A ring member, in the forked child: pin, keep only its two pipe ends, make `data` its own,
/// then pass the token on (summing `data` each time) until the ring closes.
fn ring_member(r: i32, w: i32, set: &libc::cpu_set_t, data: &mut [i32]) -> ! {
    // SAFETY: integer prctl and an affinity mask built before fork (async-signal-safe).
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        libc::sched_setaffinity(0, std::mem::size_of_val(set), set);
    }
    batch_policy();
    keep_only(r, w);
    data.iter_mut().for_each(|x| *x = 0); // make the pages this member's own
    let mut sum = 0i32;
    while read_byte(3) {
        sum = sum.wrapping_add(sumit(data));
        if !write_byte(4) {
            break;
        }
    }
    std::hint::black_box(sum);
    // SAFETY: ends the child without running the parent's destructors.
    unsafe { libc::_exit(0) }
}

impl Ring {
    fn new(n: usize, data: &mut [i32], cpu: usize) -> Result<Ring, BenchError> {
        ensure_fds(2 * n as u64 + 64)?;
        let pipes = pipes(n)?;
        let mut ring = Ring {
            pids: Vec::with_capacity(n),
            w: pipes[0][1],
            r: pipes[n - 1][0],
        };
        let set = placement::cpu_set(&[cpu]);
        for i in 1..n {
            // Member i reads pipe i-1 and writes pipe i.
            let (r, w) = (pipes[i - 1][0], pipes[i][1]);
            // SAFETY: the child makes only async-signal-safe calls and touches its own
            // copy-on-write copy of `data`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                ring_member(r, w, &set, data);
            }
            if pid < 0 {
                let e = errno();
                let hint = match e.raw_os_error() {
                    Some(libc::EAGAIN) => " (process limit: RLIMIT_NPROC or pids.max)",
                    _ => "",
                };
                // Dropping the ring closes its ends and kills the members made so far.
                pipes
                    .iter()
                    .flatten()
                    .filter(|&&fd| fd != ring.w && fd != ring.r)
                    .for_each(|&fd| close(fd));
                return Err(BenchError::Failed(format!(
                    "fork of ring member {i} of {n}: {e}{hint}"
                )));
            }
            ring.pids.push(pid);
        }
        for (i, p) in pipes.iter().enumerate() {
            if i != 0 {
                close(p[1]);
            }
            if i != n - 1 {
                close(p[0]);
            }
        }
        // Once around to check every member is up and to prime the caches.
        if !(write_byte(ring.w) && read_byte(ring.r)) {
            return Err(BenchError::Failed(
                "a ring member died while starting".into(),
            ));
        }
        Ok(ring)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        close(self.w);
        close(self.r);
        for &pid in &self.pids {
            // SAFETY: our own children.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for &pid in &self.pids {
            let mut st = 0;
            // SAFETY: reaping our own child with a valid status pointer.
            unsafe { libc::waitpid(pid, &mut st, 0) };
        }
    }
}

/// lmbench's overhead for one hop: a pipe write and read in one process, and the sum, with
/// hot caches. Per hop, ns; measured once per working set in a worker, as lat_ctx does.
fn ring_overhead_ns(m: &Meter, kb: usize) -> Result<f64, BenchError> {
    static MEASURED: Mutex<Vec<(usize, f64)>> = Mutex::new(Vec::new());
    let mut known = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, ns)) = known.iter().find(|(k, _)| *k == kb) {
        return Ok(ns);
    }
    let data = vec![0i32; kb * 1024 / 4];
    let p = pipe()?;
    let r = m.batched_fallible(&mut |n| {
        let mut sum = 0i32;
        for _ in 0..n {
            if !(write_byte(p[1]) && read_byte(p[0])) {
                return Err(BenchError::failed("pipe", errno()));
            }
            sum = sum.wrapping_add(sumit(&data));
        }
        std::hint::black_box(sum);
        Ok(())
    });
    close(p[0]);
    close(p[1]);
    let ns = crate::base::stats::median(&r?.measurement.samples_ns);
    known.push((kb, ns));
    Ok(ns)
}

/// Put the calling thread under SCHED_BATCH: no wakeup preemption. Without it a member that
/// writes the token is preempted by the member it woke before it can block on its own read,
/// and a hop costs 1.3-1.4 context switches, not one (counted on this VM with n=16); lat_ctx
/// has the same flaw on current kernels. Async-signal-safe (a forked member calls it).
fn batch_policy() -> libc::c_int {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid sched_param for the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &p) }
}

/// One ring of `n` members with `kb` KB each on `cpu`: samples are per-hop switch costs.
fn measure_ring(m: &Meter, n: usize, kb: usize, cpu: usize, ovr_ns: f64) -> Measured {
    placement::pin_current_thread(cpu).map_err(BenchError::Failed)?;
    // SAFETY: reading the calling thread's policy.
    let policy = unsafe { libc::sched_getscheduler(0) };
    batch_policy();
    let restore = || {
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: back to the policy read above (a normal one: priority 0).
        unsafe { libc::sched_setscheduler(0, policy.max(0), &p) };
    };
    let mut data = vec![0i32; kb * 1024 / 4];
    let ring = Ring::new(n, &mut data, cpu).inspect_err(|_| restore())?;
    let o = m.batched_fallible(&mut |k| {
        let mut sum = 0i32;
        for _ in 0..k {
            if !(write_byte(ring.w) && read_byte(ring.r)) {
                return Err(BenchError::Failed(
                    "a ring member died (end of file on the ring)".into(),
                ));
            }
            sum = sum.wrapping_add(sumit(&data));
        }
        std::hint::black_box(sum);
        Ok(())
    });
    drop(ring);
    restore();
    let mut o = o?;
    // One sample was a trip around the ring: per hop, minus the overhead.
    let ms = &mut o.measurement;
    for x in &mut ms.samples_ns {
        *x = *x / n as f64 - ovr_ns;
    }
    ms.baseline_ns = ms.baseline_ns / n as f64 + ovr_ns;
    o.placed = Some((Placement::Same { cpu }, vec![cpu]));
    Ok(o)
}

/// One point of lat_ctx: a ring of `procs` processes with `size_kb` KB each, or `parallel`
/// such rings at once on successive allowed CPUs (lat_ctx -P).
pub(super) fn ring(m: &Meter, c: &Case) -> Measured {
    let (n, kb) = (c.int("procs")? as usize, c.int("size_kb")? as usize);
    let p = (c.int("parallel")? as usize).max(1);
    if n < 2 {
        return Err(BenchError::Skipped(
            "a ring needs at least 2 processes".into(),
        ));
    }
    let ovr_ns = ring_overhead_ns(m, kb)?;
    // Events count the ring's trips only, each n hops.
    crate::measuring::counters::restart();
    crate::measuring::counters::set_unit(n as f64);
    let mut o = if p == 1 {
        measure_ring(m, n, kb, m.cpu, ovr_ns)?
    } else {
        let start = m.allowed.iter().position(|&x| x == m.cpu).unwrap_or(0);
        let cpus: Vec<usize> = (0..p)
            .map(|i| m.allowed[(start + i) % m.allowed.len()])
            .collect();
        let parts: Vec<Measured> = std::thread::scope(|s| {
            let hs: Vec<_> = cpus
                .iter()
                .map(|&cpu| {
                    std::thread::Builder::new()
                        .spawn_scoped(s, move || measure_ring(m, n, kb, cpu, ovr_ns))
                        .map_err(|e| crate::measuring::os::thread_failed("a ring's thread", e))
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h?.join().unwrap_or_else(|_| {
                        Err(BenchError::Failed("a ring thread panicked".into()))
                    })
                })
                .collect()
        });
        let _ = placement::pin_current_thread(m.cpu);
        merge_parallel(parts, &cpus)?
    };
    o.definition = Some(format!(
        "one switch in a ring of {n} processes with {kb} KB each: trip / {n} - {:.2} us overhead (pipe write+read and sum, hot caches)",
        ovr_ns / 1e3
    ));
    Ok(o.param("overhead_ns", ovr_ns))
}

/// Parallel rings as one outcome: every ring's samples, in ring order.
fn merge_parallel(parts: Vec<Measured>, cpus: &[usize]) -> Measured {
    let mut it = parts.into_iter();
    let mut first: Outcome = it
        .next()
        .ok_or_else(|| BenchError::Failed("no ring ran".into()))??;
    for part in it {
        let o = part?.measurement;
        let ms = &mut first.measurement;
        let off = ms.samples_ns.len();
        ms.samples_ns.extend(o.samples_ns);
        ms.preempted.extend(o.preempted.iter().map(|i| i + off));
        ms.ends_ns.extend(o.ends_ns);
    }
    let mut used = cpus.to_vec();
    used.sort_unstable();
    used.dedup();
    let record = Placement::Cross {
        cpus: cpus.to_vec(),
    };
    first.placed = Some((record, used));
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sumit_reads_every_int() {
        assert_eq!(sumit(&[1, 2, 3, 4]), 10);
        assert_eq!(sumit(&[]), 0);
    }
}
