//! Copies of one operation run at once, one per CPU, as processes or as threads of one process:
//! will-it-scale's method, which the kernel test robot reports as `per_process_ops` and
//! `per_thread_ops`. This module is the engine of the `scale/` family: where each copy runs
//! (`layout`: one CPU per core first, SMT siblings last, over a `Topology` that tests fake),
//! the board the copies count on (`Board`: one cache line each, in shared memory so forked
//! copies count there too), starting them together (every copy prepares, then waits on one
//! futex), measuring only while all of them run, and stopping and reaping them on every path.
//!
//! A sample is one window of time (`Shape::window_ns`) while every copy runs: N times the
//! window over the operations all copies completed in it, the cost of one operation per task
//! (1e9 over that task's operations per second). Warm-up windows are left out. The measuring
//! thread sleeps between windows, as will-it-scale's parent does, so it takes nothing from the
//! copies but a wake-up per window. Around the timed windows it reads /proc/interrupts
//! (rescheduling, function-call and TLB-shootdown IPIs: what threads sharing one address space
//! cost each other) and the CPUs' idle time (will-it-scale's `processes_idle`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::case::{BenchError, Outcome};
use super::os::{Ipis, errno, read_ipis};
use super::placement;
use super::sampler::Measurement;
use crate::base::model::{Batch, Placement};

pub mod board;
use board::{Board, GO, SOLO, STOP, Task, TaskError};

/// Processes or threads of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Each copy a process of its own (will-it-scale's `processes`).
    Process,
    /// Each copy a thread of one process, sharing its address space and file table
    /// (`threads`).
    Thread,
}

impl Mode {
    /// The word in result ids and parameters: `process`, `thread`.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Process => "process",
            Mode::Thread => "thread",
        }
    }

    /// The mode a word names.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "process" => Some(Mode::Process),
            "thread" => Some(Mode::Thread),
            _ => None,
        }
    }

    /// Both, in the order results are listed.
    pub const BOTH: [Mode; 2] = [Mode::Process, Mode::Thread];
}

/// Which core each CPU belongs to: the machine's (`SysTopology`), or a fake one in tests.
pub trait Topology {
    /// (package, core) of `cpu`; `None` where the machine does not say (a core of its own).
    fn core_of(&self, cpu: usize) -> Option<(usize, usize)>;
}

/// The topology sysfs describes (`/sys/devices/system/cpu/cpuN/topology`).
pub struct SysTopology;

impl Topology for SysTopology {
    fn core_of(&self, cpu: usize) -> Option<(usize, usize)> {
        let read = |f: &str| -> Option<usize> {
            std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{f}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        Some((read("physical_package_id")?, read("core_id")?))
    }
}

/// The CPUs copies run on, in the order copies take them: one CPU of each core first (the
/// core of `first` first, `first` itself its first CPU), then each core's second hardware
/// thread, and so on: as will-it-scale binds its tasks to hwloc's cores before its PUs, so
/// that N copies share no core while N is at most the number of cores.
pub fn layout(allowed: &[usize], first: usize, topo: &dyn Topology) -> Vec<usize> {
    let mut cores: Vec<((usize, usize, usize), Vec<usize>)> = Vec::new();
    let mut sorted = allowed.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    for &cpu in &sorted {
        // A CPU whose core is unknown is a core of its own (a key no real core has).
        let key = match topo.core_of(cpu) {
            Some((p, c)) => (p, c, usize::MAX),
            None => (usize::MAX, usize::MAX, cpu),
        };
        match cores.iter_mut().find(|(k, _)| *k == key) {
            Some((_, cpus)) => cpus.push(cpu),
            None => cores.push((key, vec![cpu])),
        }
    }
    // The core of `first` leads, `first` first within it; the others keep their order.
    if let Some(i) = cores.iter().position(|(_, c)| c.contains(&first)) {
        let mut core = cores.remove(i);
        core.1.sort_by_key(|&c| c != first);
        cores.insert(0, core);
    }
    let deepest = cores.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    (0..deepest)
        .flat_map(|r| cores.iter().filter_map(move |(_, c)| c.get(r).copied()))
        .collect()
}

/// What one copy runs: prepare, `task.start()`, then operations counted with `task.done`
/// until `task.running()` is false. It must return once stopped.
pub type Body<'b> = dyn Fn(&Task) -> Result<(), TaskError> + Sync + 'b;

/// How a case is measured: the copies, where, and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Processes or threads.
    pub mode: Mode,
    /// The CPU of each copy (`layout`'s first N).
    pub cpus: Vec<usize>,
    /// One sample's window, ns.
    pub window_ns: u64,
    /// Windows left out after the start, ns.
    pub warmup_ns: u64,
    /// Timed windows for at least this long, ns (the repetition's sampling time).
    pub length_ns: u64,
    /// The CPUs whose idle time is the case's idle share: every CPU the run may use (the
    /// worker itself is pinned to one, so its own affinity would say only that one).
    pub watched: Vec<usize>,
}

/// A case's copies: measured with every copy running, then stopped and reaped.
pub fn measure(shape: &Shape, body: &Body) -> Result<Outcome, BenchError> {
    let n = shape.cpus.len();
    if n == 0 {
        return Err(BenchError::Failed("no copies to run".into()));
    }
    let board = Board::new(n)?;
    let timed = |board: &Board| timed_windows(shape, board);
    let w = match shape.mode {
        Mode::Process => with_processes(shape, &board, body, timed)?,
        Mode::Thread => with_threads(shape, &board, body, timed)?,
    };
    let (ipis, idle) = (w.ipis, w.idle);
    let (ms, ops, wall_ns) = w.timed?;
    let all_ns = median_of(&ms.samples_ns);
    let mut o = Outcome::of(ms);
    let per_task = if wall_ns > 0 {
        ops as f64 / n as f64 * 1e9 / wall_ns as f64
    } else {
        0.0
    };
    o = o
        .param("ops_per_s_per_task", per_task)
        .param("ops_per_s_total", per_task * n as f64)
        .param("cpus", serde_json::json!(shape.cpus));
    if let Some(i) = ipis
        && ops > 0
    {
        let per = |x: u64| x as f64 / ops as f64;
        o = o
            .param("ipis_per_op", per(i.resched + i.call))
            .param("tlb_ipis_per_op", per(i.tlb))
            .param("resched_ipis_per_op", per(i.resched))
            .param("call_ipis_per_op", per(i.call));
    }
    if let Some(idle) = idle {
        o = o.param("idle_pct", idle * 100.0);
    }
    if let Some(solo) = w.solo_ns
        && let Some(all) = all_ns
        && all > 0.0
    {
        o = o.param("paired_efficiency", solo / all);
    }
    o.placed = Some(placement_of(&shape.cpus));
    Ok(o)
}

fn placement_of(cpus: &[usize]) -> (Placement, Vec<usize>) {
    let mut used = cpus.to_vec();
    used.sort_unstable();
    used.dedup();
    let record = match cpus {
        [one] => Placement::Pinned { cpu: *one },
        _ => Placement::Cross {
            cpus: cpus.to_vec(),
        },
    };
    (record, used)
}

/// What the timed windows give: the samples, the operations and the time they covered.
type Timed = Result<(Measurement, u64, u64), BenchError>;

/// Idle time of `cpus` so far, µs, from /proc/stat. Not cpuidle's per-state `time`: that is
/// added when a CPU leaves idle, so a CPU halted through a whole repetition (the one no copy
/// runs on) shows none, where /proc/stat counts the idle period under way. Its unit is a
/// clock tick (10 ms), which a repetition's tens of milliseconds make coarse: the median over
/// repetitions is what a result gives.
fn idle_us(cpus: &[usize]) -> Option<u64> {
    let snap = super::noise::read_proc_stat();
    // SAFETY: sysconf takes no pointers.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    cpus.iter()
        .map(|&c| {
            snap.get(c)
                .copied()
                .flatten()
                .map(|t| t.idle * 1_000_000 / hz)
        })
        .sum()
}

/// Copies as forked processes (each pinned, killed if the worker dies), measured, then
/// stopped and reaped on every path.
fn with_processes(
    shape: &Shape,
    board: &Board,
    body: &Body,
    timed: impl FnOnce(&Board) -> Windows,
) -> Result<Windows, BenchError> {
    struct Reaper<'a> {
        pids: Vec<libc::pid_t>,
        board: &'a Board,
    }
    impl Drop for Reaper<'_> {
        fn drop(&mut self) {
            self.board.set_state(STOP);
            // Copies stop at their next operation; one stuck past a second is killed.
            let deadline = Instant::now() + Duration::from_secs(1);
            let mut left: Vec<libc::pid_t> = self.pids.clone();
            while !left.is_empty() && Instant::now() < deadline {
                left.retain(|&pid| {
                    // SAFETY: our own child; WNOHANG.
                    unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) == 0 }
                });
                if !left.is_empty() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            for &pid in &left {
                // SAFETY: our own children that did not stop: killed and reaped.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
            }
        }
    }
    let mut reaper = Reaper {
        pids: Vec::with_capacity(shape.cpus.len()),
        board,
    };
    for (i, &cpu) in shape.cpus.iter().enumerate() {
        let set = placement::cpu_set(&[cpu]);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the child pins itself, runs the body (which prepares with system calls and
        // counts on shared memory) and leaves with _exit, running none of the parent's
        // destructors; glibc's allocator is safe across fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(BenchError::failed(
                &format!("fork of copy {i} of {}", shape.cpus.len()),
                errno(),
            ));
        }
        if pid == 0 {
            super::os::die_with_parent(parent, libc::SIGKILL);
            // SAFETY: an affinity mask built before fork.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
            }
            let task = Task::new(i, cpu, Mode::Process, board);
            let rc = match body(&task) {
                Ok(()) => 0,
                Err(e) => {
                    task.record(e);
                    1
                }
            };
            // SAFETY: ends the copy without the parent's destructors or atexit handlers.
            unsafe { libc::_exit(rc) };
        }
        reaper.pids.push(pid);
    }
    Ok(timed(board))
}

/// Copies as threads of this process (each pinned), measured, then stopped and joined.
fn with_threads(
    shape: &Shape,
    board: &Board,
    body: &Body,
    timed: impl FnOnce(&Board) -> Windows,
) -> Result<Windows, BenchError> {
    std::thread::scope(|s| {
        // Stops the copies when the scope ends, however it ends (the scope then joins them).
        struct Stop<'a>(&'a Board);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.set_state(STOP);
            }
        }
        let _stop = Stop(board);
        for (i, &cpu) in shape.cpus.iter().enumerate() {
            let spawned = std::thread::Builder::new()
                .name(format!("oscost-copy{i}"))
                .spawn_scoped(s, move || {
                    let task = Task::new(i, cpu, Mode::Thread, board);
                    let r = placement::pin_current_thread(cpu)
                        .map_err(|_| TaskError::last("pinning to its CPU"))
                        .and_then(|()| body(&task));
                    if let Err(e) = r {
                        task.record(e);
                    }
                });
            if let Err(e) = spawned {
                return Err(super::os::thread_failed(
                    &format!("copy {i} of {}", shape.cpus.len()),
                    e,
                ));
            }
        }
        Ok(timed(board))
    })
}

/// What one repetition's windows give: the all-copies windows (samples, operations, time),
/// the IPIs and idle share around them, and copy 0's cost alone beside them.
pub struct Windows {
    timed: Timed,
    ipis: Option<Ipis>,
    idle: Option<f64>,
    /// Copy 0's ns per operation while it ran alone, just before and just after the
    /// all-copies windows (the median of those windows): efficiency's other half, measured
    /// at the same moment of the host.
    solo_ns: Option<f64>,
}

impl Windows {
    fn failed(why: String) -> Windows {
        Windows {
            timed: Err(BenchError::Failed(why)),
            ipis: None,
            idle: None,
            solo_ns: None,
        }
    }
}

/// The median of `xs` (none when empty).
fn median_of(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| crate::base::stats::median(xs))
}

/// Wait for every copy to be ready (or one to fail, or 10 s to pass).
fn all_ready(board: &Board) -> Result<(), String> {
    let n = board.copies as u32;
    let h = board.header();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(why) = board.failure() {
            return Err(why);
        }
        let ready = h.ready.load(Ordering::SeqCst);
        if ready >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {ready} of {n} copies were ready after 10 s"));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Copy 0 alone: `windows` windows after `settle`, its ns per operation in each.
fn solo_windows(shape: &Shape, board: &Board, settle: Duration, windows: usize) -> Vec<f64> {
    board.set_state(SOLO);
    std::thread::sleep(settle);
    let ops = || board.slot(0).ops.load(Ordering::Relaxed);
    let (mut t_prev, mut ops_prev) = (Instant::now(), ops());
    let mut out = Vec::with_capacity(windows);
    let give_up = t_prev + Duration::from_nanos(shape.window_ns * windows as u64 * 20);
    while out.len() < windows && Instant::now() < give_up {
        std::thread::sleep(Duration::from_nanos(shape.window_ns));
        let (t, k) = (Instant::now(), ops());
        if k > ops_prev {
            out.push(t.duration_since(t_prev).as_nanos() as f64 / (k - ops_prev) as f64);
            (t_prev, ops_prev) = (t, k);
        }
    }
    out
}

/// Wait for every copy, then time the all-copies windows until the length is reached, with
/// IPIs and idle time read around them. With several copies, copy 0 also runs alone for a
/// few windows just before and just after (the others waiting on the board), so that
/// efficiency is a ratio of two rates taken at one moment of the host, not of two results
/// measured seconds apart (`analysis::scaling`).
fn timed_windows(shape: &Shape, board: &Board) -> Windows {
    if let Err(why) = all_ready(board) {
        return Windows::failed(why);
    }
    let n = shape.cpus.len();
    let warmup = Duration::from_nanos(shape.warmup_ns);
    if crate::measuring::counters::active() {
        board.set_state(GO);
        std::thread::sleep(warmup);
        return Windows {
            timed: count_window(shape, board),
            ipis: None,
            idle: None,
            solo_ns: None,
        };
    }
    let go_windows = (shape.length_ns / shape.window_ns.max(1)).max(3) as usize;
    // A quarter of the all-copies windows alone on each side; the settle covers the waiting
    // copies' wake-up (a cross-CPU wake-up is 30-65 us on these guests) and their stopping.
    let solo_each = (go_windows / 4).max(2);
    let settle = Duration::from_nanos((shape.window_ns / 5).max(1_000_000));
    let mut solo = Vec::new();
    if n > 1 {
        solo = solo_windows(shape, board, warmup, solo_each);
    }
    board.set_state(GO);
    std::thread::sleep(warmup);
    let mut w = go_phase(shape, board, go_windows);
    if n > 1 && w.timed.is_ok() {
        solo.extend(solo_windows(shape, board, settle, solo_each));
        w.solo_ns = median_of(&solo);
    }
    match board.failure() {
        Some(why) => Windows::failed(why),
        None => w,
    }
}

/// The all-copies windows, every copy running, until `windows` are timed and the length
/// reached; IPIs and idle time around them.
fn go_phase(shape: &Shape, board: &Board, windows: usize) -> Windows {
    let n = shape.cpus.len();
    let mut samples = Vec::with_capacity(windows * 2);
    let mut ends = Vec::with_capacity(windows * 2);
    let idle0 = idle_us(&shape.watched);
    let ipis0 = read_ipis(None);
    let start = Instant::now();
    let ops0 = board.total();
    let (mut t_prev, mut ops_prev) = (start, ops0);
    let give_up = start + Duration::from_nanos(shape.length_ns * 20 + 2_000_000_000);
    loop {
        std::thread::sleep(Duration::from_nanos(shape.window_ns));
        if let Some(why) = board.failure() {
            return Windows::failed(why);
        }
        let (t, ops) = (Instant::now(), board.total());
        let elapsed = t.duration_since(start).as_nanos() as u64;
        if ops > ops_prev {
            // N copies ran for the window: per task, the window over its share of the
            // operations.
            let dt = t.duration_since(t_prev).as_nanos() as f64;
            samples.push(n as f64 * dt / (ops - ops_prev) as f64);
            ends.push(elapsed);
            (t_prev, ops_prev) = (t, ops);
        }
        if (elapsed >= shape.length_ns && samples.len() >= 3) || t > give_up {
            break;
        }
    }
    let wall_ns = t_prev.duration_since(start).as_nanos() as u64;
    let ops = ops_prev - ops0;
    let ipis = match (ipis0, read_ipis(None)) {
        (Some(a), Some(z)) => Some(Ipis {
            resched: z.resched.saturating_sub(a.resched),
            call: z.call.saturating_sub(a.call),
            tlb: z.tlb.saturating_sub(a.tlb),
        }),
        _ => None,
    };
    let watched = shape.watched.len().max(1) as f64;
    let idle = match (idle0, idle_us(&shape.watched)) {
        (Some(a), Some(z)) if wall_ns > 0 => {
            Some((z.saturating_sub(a) as f64 * 1e3 / (wall_ns as f64 * watched)).min(1.0))
        }
        _ => None,
    };
    if samples.is_empty() {
        return Windows::failed(format!(
            "no copy completed an operation in {:.1} s",
            wall_ns as f64 / 1e9
        ));
    }
    let m = Measurement {
        exits_ns: Vec::new(),
        samples_ns: samples,
        ends_ns: ends,
        preempted: vec![],
        batch: Batch {
            batched: true,
            size: (ops / n as u64).max(1),
        },
        baseline_ns: 0.0,
    };
    Windows {
        timed: Ok((m, ops, wall_ns)),
        ipis,
        idle,
        solo_ns: None,
    }
}

/// The untimed counting pass: events over one window of every copy running, per operation.
fn count_window(shape: &Shape, board: &Board) -> Timed {
    use crate::measuring::counters::{self, Phase};
    let window = Duration::from_nanos(shape.window_ns.max(20_000_000));
    let (t0, ops0) = (Instant::now(), board.total());
    counters::begin();
    std::thread::sleep(window);
    let ops = board.total() - ops0;
    counters::end(Phase::Sampling, ops);
    let wall = t0.elapsed().as_nanos() as u64;
    let n = shape.cpus.len() as f64;
    let sample = if ops > 0 {
        n * wall as f64 / ops as f64
    } else {
        f64::NAN
    };
    let m = Measurement {
        exits_ns: Vec::new(),
        samples_ns: vec![sample],
        ends_ns: vec![wall],
        preempted: vec![],
        batch: Batch {
            batched: true,
            size: 1,
        },
        baseline_ns: 0.0,
    };
    Ok((m, ops, wall))
}

#[cfg(test)]
mod tests;
