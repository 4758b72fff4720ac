//! Sampling where a case's time goes (`--profile`): a clock event opened with
//! perf_event_open (cycles where a PMU exists, else the software cpu-clock), kernel call
//! chains included where perf_event_paranoid allows. Where the kernel allows it (root,
//! CAP_PERFMON or perf_event_paranoid <= 0) one event follows each CPU the case ran on,
//! whatever task runs there, as `perf record -C` does, and only the samples of the measuring
//! process and its descendants are kept (a second event on each CPU reports every fork there
//! from `open` on, so the tree is known; the idle task, kernel threads and any competitor
//! are not the case's). A clock that follows a task and is inherited by its children starts
//! each child's clock a whole period from its first run, so a fork's child, which lives less
//! than a period, is never sampled; measured on the 2-vCPU AMD guest, a C fork loop took 211 samples of 3000
//! forks that way and 3.5 thousand CPU-wide, and the per-task profile was the parent's RCU
//! callbacks rather than the fork (docs/design-notes.md, "A clock that follows a task misses
//! the children"). Elsewhere one inherited event per allowed CPU follows the measuring task,
//! as before (the kernel refuses to map the buffer of an inherited event that follows a task
//! on every CPU), and the profile says what that cannot see (`Sampling::scope`).
//!
//! How a case is profiled: the runner `open`s the event, disabled, and runs the case function
//! once more, untimed, as it does for the counting pass (`measuring::counters`); the sampler
//! sees `active()` and runs its counting path, whose window lasts `WINDOW_NS` instead of 2 ms,
//! and `begin`s and `end`s the event around it only (the empty loop's baseline is not
//! sampled). The timed pass ran before, with no event open: sampling moves no headline
//! figure. Every `DRAIN_NS` of the window the event is paused and its buffer read
//! (`step`), so a small buffer loses nothing whatever the rate. `finish` names every address
//! (`measuring::symbols`) and returns the repetition's counts by function and by chain.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, SampleFlag, Sampler};

use super::symbols::{self, UserSymbols};
use crate::base::model::profile::{
    Profile, ProfileRepetition, Sampling, SamplingScope, Space, kept_functions, kept_stacks,
};

/// Samples a second of the measured thread's time.
pub const RATE_HZ: u64 = 10_000;

/// How long a profiled window lasts, ns: about 2000 samples a repetition at `RATE_HZ`.
pub const WINDOW_NS: f64 = 200e6;

/// How often the buffer is read during a window, ns (at most ~200 samples between reads).
const DRAIN_NS: u128 = 20_000_000;

/// The ring buffer's data size: 64 pages, far above `DRAIN_NS`' samples at any chain depth.
const BUFFER_BYTES: usize = 256 * 1024;

/// Kernel frames kept of a chain.
const MAX_STACK: u16 = 48;

/// perf's markers in a call chain (PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER, ...): every value
/// from -4095 up.
const CONTEXT_MARKERS: u64 = (-4095i64) as u64;
/// PERF_CONTEXT_KERNEL: the kernel's frames follow.
const CONTEXT_KERNEL: u64 = (-128i64) as u64;

/// The kernel frames of a call chain, the sampled address's own excluded: those after
/// PERF_CONTEXT_KERNEL up to the next marker (user frames, walked by frame pointers the binary
/// does not keep, are not used).
fn kernel_frames(chain: &[u64], ip: u64) -> impl Iterator<Item = u64> + '_ {
    chain
        .iter()
        .copied()
        .skip_while(|&a| a != CONTEXT_KERNEL)
        .skip(1)
        .take_while(|&a| a < CONTEXT_MARKERS)
        .skip_while(move |&a| a == ip)
        .take(MAX_STACK as usize)
}

struct Session {
    samplers: Vec<Sampler>,
    /// With `SamplingScope::Cpu`: an event on each of the same CPUs that samples nothing and
    /// reports every fork there, enabled from `open` on (a case's peers are started before
    /// its window), so `tree` follows the measuring process's descendants.
    forks: Vec<Sampler>,
    /// This process and every descendant a fork record named; a CPU-wide sample of another
    /// task (a competitor, a kernel thread) is not the case's and is dropped.
    tree: HashSet<u32>,
    /// Forks (child, parent) whose parent is not yet known to be in `tree`: its own fork may
    /// be in another CPU's buffer, read later.
    unplaced: Vec<(u32, u32)>,
    sampling: Sampling,
    samples: u64,
    lost: u64,
    /// Raw chains (leaf first, the sample's address at 0) and whether the sample was this
    /// process's, counted.
    chains: HashMap<(Vec<u64>, bool), u64>,
    last_drain: Instant,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

fn builder(hardware: bool, kernel: bool, cpu: usize, scope: SamplingScope) -> Builder<'static> {
    let mut b = if hardware {
        let mut b = Builder::new(Hardware::CPU_CYCLES);
        b.sample_frequency(RATE_HZ);
        b
    } else {
        let mut b = Builder::new(Software::CPU_CLOCK);
        b.sample_period(1_000_000_000 / RATE_HZ);
        b
    };
    match scope {
        SamplingScope::Cpu => b.any_pid().inherit(false),
        SamplingScope::Task => b.observe_self().inherit(true),
    };
    b.one_cpu(cpu)
        .enabled(false)
        .exclude_hv(true)
        .exclude_kernel(!kernel)
        // Not excluding user call chains: on 6.18 an event that excludes them records no
        // sample taken in user mode at all (measured: 0 of ~1000 in a user loop). The user
        // frames it walks are dropped in `drain`.
        .exclude_callchain_user(false)
        .sample_max_stack(MAX_STACK)
        .sample(SampleFlag::IP | SampleFlag::TID | SampleFlag::CALLCHAIN);
    b
}

/// The event `make` builds for each of `cpus`, each with its buffer mapped, or the first
/// error.
fn sampled_on(
    cpus: &[usize],
    make: impl Fn(usize) -> Builder<'static>,
) -> std::io::Result<Vec<Sampler>> {
    cpus.iter()
        .map(|&cpu| make(cpu).build().and_then(|c| c.sampled(BUFFER_BYTES)))
        .collect()
}

/// On each of `cpus`, an event that samples nothing and reports every fork, enabled now.
fn fork_watchers(cpus: &[usize]) -> std::io::Result<Vec<Sampler>> {
    sampled_on(cpus, |cpu| {
        let mut b = Builder::new(Software::DUMMY);
        b.any_pid().one_cpu(cpu).task(true).enabled(true);
        b
    })
}

/// One sampler on each of `cpus`, or the first error.
fn samplers(
    hardware: bool,
    kernel: bool,
    cpus: &[usize],
    scope: SamplingScope,
) -> std::io::Result<Vec<Sampler>> {
    sampled_on(cpus, |cpu| builder(hardware, kernel, cpu, scope))
}

/// Open the sampling events for the case about to run: one on each of `used` (the CPUs the
/// case ran on) following every task there, or where the kernel refuses that, one on each
/// of `allowed` (those the run may use) following the measuring task; where none can be
/// opened at all, the reason (the profile is then absent, said on the result).
pub fn open(used: &[usize], allowed: &[usize]) -> Result<(), String> {
    let mut last = String::new();
    for kernel in [true, false] {
        for (scope, hardware) in [
            (SamplingScope::Cpu, true),
            (SamplingScope::Cpu, false),
            (SamplingScope::Task, true),
            (SamplingScope::Task, false),
        ] {
            let cpus = match scope {
                SamplingScope::Cpu => used,
                SamplingScope::Task => allowed,
            };
            let opened = samplers(hardware, kernel, cpus, scope).and_then(|x| {
                let forks = match scope {
                    SamplingScope::Cpu => fork_watchers(cpus)?,
                    SamplingScope::Task => Vec::new(),
                };
                Ok((x, forks))
            });
            match opened {
                Ok((samplers, forks)) => {
                    let kernel_refused = (!kernel).then(|| {
                        format!(
                            "kernel code not sampled: {}",
                            why(&last, super::counters::paranoid())
                        )
                    });
                    let event = if hardware { "cycles" } else { "cpu-clock" };
                    let sampling = Sampling {
                        event: event.into(),
                        rate_hz: RATE_HZ,
                        kernel_refused,
                        scope,
                    };
                    let s = Session {
                        samplers,
                        forks,
                        tree: HashSet::from([std::process::id()]),
                        unplaced: Vec::new(),
                        sampling,
                        samples: 0,
                        lost: 0,
                        chains: HashMap::new(),
                        last_drain: Instant::now(),
                    };
                    SESSION.with(|x| *x.borrow_mut() = Some(s));
                    return Ok(());
                }
                // Why the kernel was refused is the last refusal with it; refusals of
                // user-only events after that (a PMU that is absent) do not say it.
                Err(e) if kernel || last.is_empty() => last = e.to_string(),
                Err(_) => {}
            }
        }
    }
    Err(format!("perf_event_open refused a sampling event: {last}"))
}

fn why(error: &str, paranoid: i32) -> String {
    format!(
        "{error}; kernel.perf_event_paranoid is {paranoid}: sampling the kernel needs 1 or \
less (sysctl kernel.perf_event_paranoid=1), or CAP_PERFMON"
    )
}

/// Whether a sampling event can be opened here at all (before any measuring): the reason
/// where it cannot.
pub fn probe(cpus: &[usize]) -> Result<(), String> {
    open(cpus, cpus)?;
    SESSION.with(|x| x.borrow_mut().take());
    Ok(())
}

/// Whether this thread is in a profiling pass.
pub fn active() -> bool {
    SESSION.with(|x| x.borrow().is_some())
}

/// Start sampling the operation's window (no-op outside a profiling pass).
pub fn begin() {
    SESSION.with(|x| {
        if let Some(s) = x.borrow_mut().as_mut() {
            s.last_drain = Instant::now();
            switch(s, true);
        }
    });
}

fn switch(s: &mut Session, on: bool) {
    for x in &mut s.samplers {
        let _ = if on { x.enable() } else { x.disable() };
    }
}

/// Stop sampling the window and read what it took.
pub fn end() {
    SESSION.with(|x| {
        if let Some(s) = x.borrow_mut().as_mut() {
            switch(s, false);
            drain(s);
        }
    });
}

/// Between steps of a window: read the buffer, paused, once `DRAIN_NS` have passed.
pub fn step() {
    SESSION.with(|x| {
        if let Some(s) = x.borrow_mut().as_mut()
            && s.last_drain.elapsed().as_nanos() >= DRAIN_NS
        {
            switch(s, false);
            drain(s);
            s.last_drain = Instant::now();
            switch(s, true);
        }
    });
}

/// Move every fork whose parent is in `tree` into it, until none moves: a grandchild's fork
/// may have been read before its parent's, from another CPU's buffer.
fn grow_tree(tree: &mut HashSet<u32>, unplaced: &mut Vec<(u32, u32)>) {
    loop {
        let before = unplaced.len();
        unplaced.retain(|&(child, parent)| {
            if tree.contains(&parent) {
                tree.insert(child);
                false
            } else {
                true
            }
        });
        if unplaced.len() == before {
            break;
        }
    }
}

fn drain(s: &mut Session) {
    let me = std::process::id();
    let Session {
        samplers,
        forks,
        tree,
        unplaced,
        sampling,
        samples,
        lost,
        chains,
        ..
    } = s;
    // The forks first: a child's samples follow its fork record, and every fork record of
    // this drain's samples is already written.
    for x in forks.iter_mut() {
        while let Some(record) = x.next_record() {
            match record.parse_record() {
                Ok(perf_event::data::Record::Fork(f)) => unplaced.push((f.pid, f.ppid)),
                Ok(perf_event::data::Record::Lost(l)) => *lost += l.lost,
                _ => {}
            }
        }
    }
    grow_tree(tree, unplaced);
    let cpu_wide = sampling.scope == SamplingScope::Cpu;
    for x in samplers.iter_mut() {
        while let Some(record) = x.next_record() {
            match record.parse_record() {
                Ok(perf_event::data::Record::Sample(sample)) => {
                    let Some(ip) = sample.ip() else { continue };
                    // A CPU-wide clock samples every task there, the idle task included:
                    // only the measuring process's tree is the case's.
                    if cpu_wide && !sample.pid().is_some_and(|p| tree.contains(&p)) {
                        continue;
                    }
                    let mut chain = vec![ip];
                    // The kernel's chain starts at the sampled address itself.
                    chain.extend(kernel_frames(sample.callchain().unwrap_or(&[]), ip));
                    let own = sample.pid() == Some(me);
                    *samples += 1;
                    *chains.entry((chain, own)).or_insert(0) += 1;
                }
                Ok(perf_event::data::Record::Lost(l)) => *lost += l.lost,
                _ => {}
            }
        }
    }
}

/// Close the event and name what it sampled: this repetition's profile, `None` outside a
/// profiling pass or where the window took no sample.
pub fn finish() -> Option<Profile> {
    let s = SESSION.with(|x| x.borrow_mut().take())?;
    if s.samples == 0 {
        return None;
    }
    let mut users = UserSymbols::now();
    let mut spaces = BTreeMap::new();
    let mut name = |addr: u64, own: bool, spaces: &mut BTreeMap<String, Space>| {
        let (n, space) = if symbols::in_kernel(addr) {
            symbols::kernel(addr)
        } else if own {
            (users.resolve(addr), Space::User)
        } else {
            // After an exec a child's addresses are another program's: not named from ours.
            ("[user: a child process]".to_string(), Space::User)
        };
        spaces.insert(n.clone(), space);
        n
    };
    let mut functions: BTreeMap<String, u64> = BTreeMap::new();
    let mut stacks: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for ((chain, own), n) in &s.chains {
        let names: Vec<String> = chain.iter().map(|&a| name(a, *own, &mut spaces)).collect();
        *functions.entry(names[0].clone()).or_insert(0) += n;
        let mut frames = names;
        frames.reverse();
        *stacks.entry(frames).or_insert(0) += n;
    }
    let repetition = ProfileRepetition {
        samples: s.samples,
        lost: s.lost,
        window_ns_per_op: f64::NAN,
        functions: kept_functions(functions),
    };
    Some(Profile {
        sampling: s.sampling,
        repetitions: vec![repetition],
        spaces,
        stacks: kept_stacks(stacks.into_iter().collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_takes_a_grandchild_read_before_its_parent_and_no_stranger() {
        let mut tree = HashSet::from([100]);
        // 300's parent 200 was forked by 100 on another CPU, read second; 900 is a
        // competitor's child.
        let mut unplaced = vec![(300, 200), (900, 800), (200, 100)];
        grow_tree(&mut tree, &mut unplaced);
        assert_eq!(tree, HashSet::from([100, 200, 300]));
        assert_eq!(unplaced, vec![(900, 800)]);
        // A later drain places what it can with what is known by then.
        unplaced.push((400, 300));
        grow_tree(&mut tree, &mut unplaced);
        assert!(tree.contains(&400) && unplaced == vec![(900, 800)]);
    }

    #[test]
    fn a_chain_keeps_its_kernel_frames_only() {
        let user = (-512i64) as u64;
        let chain = [
            CONTEXT_KERNEL,
            0xffff_0001,
            0xffff_0002,
            0xffff_0003,
            user,
            0x0040_0000,
            0x0040_0100,
        ];
        let k: Vec<u64> = kernel_frames(&chain, 0xffff_0001).collect();
        assert_eq!(k, vec![0xffff_0002, 0xffff_0003]);
        assert_eq!(kernel_frames(&[user, 0x0040_0000], 0x0040_0000).count(), 0);
    }
}
