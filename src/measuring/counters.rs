//! Events per operation (perf_event_open, through perf-event2): context switches, migrations,
//! minor and major faults everywhere; cycles, instructions, branch, cache and TLB misses where
//! the PMU allows. They are what proves a benchmark's definition ("a round trip is two
//! switches").
//!
//! How a case is counted: the runner `open`s counters on the measuring thread before the case
//! function runs, disabled and inherited, so every process and thread the case makes after
//! that (a ping-pong's peer, ring members, fork children) counts into them. The sampler enables
//! them around the empty-loop baseline (`Phase::Baseline`) and around an untimed counting
//! window of about 2 ms right after timed sampling (`Phase::Sampling`), telling how many
//! operations each window ran. Never during timed sampling: an enabled task counter makes
//! every context switch about 0.5 us dearer on this VM (`ab --b 'env OSCOST_EVENTS=none'`
//! gave pipe-proc@same x0.88 with counting on in the timed loop). A child's counts join the
//! parent's when the child exits, so the runner reads the totals (`finish`) after the case
//! function has stopped its peers. Per operation: the sampling window's counts over its
//! operations, less the baseline's per operation (`per_op`).
//!
//! Events that cannot be opened are not shown as 0: each is listed with why (no PMU under this
//! hypervisor, kernel.perf_event_paranoid too high).

use std::cell::RefCell;
use std::collections::BTreeMap;

use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, Counter};

use crate::base::model::Events;

/// One countable event: perf's name (as `perf stat -e` takes it) and a short column name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventDef {
    /// perf's name of the event (`perf stat -e` takes it).
    pub name: &'static str,
    /// Its column name in tables.
    pub short: &'static str,
    /// A hardware event (a guest often lacks them), not a software one.
    pub hardware: bool,
}

/// Every event oscost counts, software first.
pub const EVENTS: &[EventDef] = &[
    EventDef {
        name: "context-switches",
        short: "cs",
        hardware: false,
    },
    EventDef {
        name: "cpu-migrations",
        short: "migr",
        hardware: false,
    },
    EventDef {
        name: "minor-faults",
        short: "flt",
        hardware: false,
    },
    EventDef {
        name: "major-faults",
        short: "majflt",
        hardware: false,
    },
    EventDef {
        name: "cycles",
        short: "cyc",
        hardware: true,
    },
    EventDef {
        name: "instructions",
        short: "ins",
        hardware: true,
    },
    EventDef {
        name: "branch-misses",
        short: "brmiss",
        hardware: true,
    },
    EventDef {
        name: "L1-dcache-load-misses",
        short: "l1dmiss",
        hardware: true,
    },
    EventDef {
        name: "LLC-load-misses",
        short: "llcmiss",
        hardware: true,
    },
    EventDef {
        name: "dTLB-load-misses",
        short: "dtlbmiss",
        hardware: true,
    },
];

/// The event named `name`, by perf's name or the short one.
pub fn find(name: &str) -> Option<&'static EventDef> {
    EVENTS.iter().find(|e| e.name == name || e.short == name)
}

fn builder(name: &str) -> Builder<'static> {
    let cache = |which, result| Cache {
        which,
        operation: CacheOp::READ,
        result,
    };
    match name {
        "context-switches" => Builder::new(Software::CONTEXT_SWITCHES),
        "cpu-migrations" => Builder::new(Software::CPU_MIGRATIONS),
        "minor-faults" => Builder::new(Software::PAGE_FAULTS_MIN),
        "major-faults" => Builder::new(Software::PAGE_FAULTS_MAJ),
        "cycles" => Builder::new(Hardware::CPU_CYCLES),
        "instructions" => Builder::new(Hardware::INSTRUCTIONS),
        "branch-misses" => Builder::new(Hardware::BRANCH_MISSES),
        "L1-dcache-load-misses" => Builder::new(cache(CacheId::L1D, CacheResult::MISS)),
        "LLC-load-misses" => Builder::new(cache(CacheId::LL, CacheResult::MISS)),
        _ => Builder::new(cache(CacheId::DTLB, CacheResult::MISS)),
    }
}

/// kernel.perf_event_paranoid (2 when it cannot be read: the kernel's default).
pub fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

/// Why an event could not be opened, in words a user can act on.
fn why(e: &std::io::Error, hardware: bool) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) if hardware => {
            "not supported: no hardware counters here (a hypervisor that exposes no PMU?)".into()
        }
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => {
            "not supported by this kernel".into()
        }
        Some(libc::EACCES | libc::EPERM) => format!(
            "not permitted: kernel.perf_event_paranoid is {}; counting a process's kernel events needs 1 or less (sysctl kernel.perf_event_paranoid=1) or CAP_PERFMON",
            paranoid()
        ),
        Some(libc::ENOSYS) => "this kernel has no perf_event_open".into(),
        Some(libc::EMFILE) => "no file descriptor left for the counter".into(),
        _ => e.to_string(),
    }
}

/// Events of one window, scaled for multiplexing, less the baseline's share: see the module
/// doc. `total` counts both windows (the counter ran in each), so the sampling window's count
/// is `total - base`.
pub fn per_op(total: f64, base: f64, base_ops: u64, ops: u64) -> f64 {
    if ops == 0 {
        return f64::NAN;
    }
    let sampling = (total - base).max(0.0) / ops as f64;
    let base_per = if base_ops > 0 {
        base / base_ops as f64
    } else {
        0.0
    };
    sampling - base_per
}

/// Which window the sampler is about to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The empty loop's window.
    Baseline,
    /// The operation's window.
    Sampling,
}

struct Counting {
    counters: Vec<(&'static str, Counter)>,
    unavailable: BTreeMap<String, String>,
    base: BTreeMap<&'static str, f64>,
    base_ops: u64,
    ops: u64,
    /// Reported operations per sampled one (a ring trip is n hops; a fault sample, n pages).
    unit: f64,
}

thread_local! {
    static SESSION: RefCell<Option<Counting>> = const { RefCell::new(None) };
}

/// A count scaled for the time the counter was not on the PMU (multiplexed hardware events).
fn scaled(c: &mut Counter) -> std::io::Result<f64> {
    let d = c.read_count_and_time()?;
    Ok(if d.time_running > 0 && d.time_running < d.time_enabled {
        d.count as f64 * d.time_enabled as f64 / d.time_running as f64
    } else {
        d.count as f64
    })
}

/// Open `events` on this thread, disabled and inherited, for the case about to run.
pub fn open(events: &[String]) {
    // Kernel-side events (a switch, a fault) need the kernel included; that needs
    // paranoid <= 1 or privilege, else every such count would be a silent 0.
    let include_kernel = paranoid() <= 1 || nix::unistd::geteuid().is_root();
    let mut s = Counting {
        counters: Vec::new(),
        unavailable: BTreeMap::new(),
        base: BTreeMap::new(),
        base_ops: 0,
        ops: 0,
        unit: 1.0,
    };
    for def in events.iter().filter_map(|e| find(e)) {
        if !include_kernel {
            s.unavailable.insert(
                def.name.into(),
                why(&std::io::Error::from_raw_os_error(libc::EACCES), false),
            );
            continue;
        }
        let built = builder(def.name)
            .observe_self()
            .any_cpu()
            .inherit(true)
            .include_kernel()
            .build();
        match built {
            Ok(c) => s.counters.push((def.name, c)),
            Err(e) => {
                s.unavailable.insert(def.name.into(), why(&e, def.hardware));
            }
        }
    }
    SESSION.with(|x| *x.borrow_mut() = Some(s));
}

/// Whether this thread has counters open (a case is being counted).
pub fn active() -> bool {
    SESSION.with(|x| x.borrow().as_ref().is_some_and(|s| !s.counters.is_empty()))
}

/// Start counting a window (no-op without open counters).
pub fn begin() {
    SESSION.with(|x| {
        if let Some(s) = x.borrow_mut().as_mut() {
            for (_, c) in &mut s.counters {
                let _ = c.enable();
            }
        }
    });
}

/// Stop counting the window `phase`, which ran `ops` operations.
pub fn end(phase: Phase, ops: u64) {
    SESSION.with(|x| {
        let mut b = x.borrow_mut();
        let Some(s) = b.as_mut() else { return };
        for (_, c) in &mut s.counters {
            let _ = c.disable();
        }
        match phase {
            Phase::Baseline => {
                s.base_ops += ops;
                for (name, c) in &mut s.counters {
                    if let Ok(v) = scaled(c) {
                        s.base.insert(name, v);
                    }
                }
            }
            Phase::Sampling => s.ops += ops,
        }
    });
}

/// One sampled operation is `n` of the operations the result reports (a trip around a ring of
/// n is n hops; a fault sample touches n pages): events are divided by it.
pub fn set_unit(n: f64) {
    SESSION.with(|x| {
        if let Some(s) = x.borrow_mut().as_mut() {
            s.unit = n.max(1.0);
        }
    });
}

/// Forget what was counted so far in this case (a helper measurement that is not the case's
/// operation, like the ring's overhead).
pub fn restart() {
    SESSION.with(|x| {
        if let Some(s) = x.borrow_mut().as_mut() {
            for (_, c) in &mut s.counters {
                let _ = c.reset();
            }
            s.base.clear();
            s.base_ops = 0;
            s.ops = 0;
        }
    });
}

/// Read the totals once the case (and its peers) are done, and close the counters. `None`
/// when nothing was opened or nothing was sampled.
pub fn finish() -> Option<Events> {
    let s = SESSION.with(|x| x.borrow_mut().take())?;
    let mut out = Events {
        per_op: BTreeMap::new(),
        unavailable: s.unavailable,
        check: None,
    };
    if s.ops == 0 {
        return (!out.unavailable.is_empty()).then_some(out);
    }
    for (name, mut c) in s.counters {
        match scaled(&mut c) {
            Ok(total) => {
                let base = s.base.get(name).copied().unwrap_or(0.0);
                let v = per_op(total, base, s.base_ops, s.ops) / s.unit;
                out.per_op.insert(name.into(), v);
            }
            Err(e) => {
                out.unavailable.insert(name.into(), e.to_string());
            }
        }
    }
    Some(out)
}

/// Whether a hardware counter can be opened here, and if not, why (for `oscost env`).
pub fn hardware_status() -> Result<(), String> {
    builder("cycles")
        .observe_self()
        .any_cpu()
        .build()
        .map(drop)
        .map_err(|e| why(&e, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_op_divides_the_sampling_window_and_subtracts_the_baseline() {
        // 2000 switches over 1000 round trips, an empty loop with 0: exactly 2.
        assert_eq!(per_op(2000.0, 0.0, 500, 1000), 2.0);
        // The total includes the baseline window's 50 events over 500 empty iterations.
        assert_eq!(per_op(2050.0, 50.0, 500, 1000), 2.0 - 0.1);
        assert!(per_op(10.0, 0.0, 0, 0).is_nan());
    }

    #[test]
    fn software_events_count_a_process_switching_and_faulting() {
        open(&[
            "context-switches".into(),
            "minor-faults".into(),
            "cycles".into(),
        ]);
        let opened = SESSION.with(|x| x.borrow().as_ref().map(|s| s.counters.len()));
        if opened == Some(0) {
            return; // perf_event_open refused here (a container); said in `unavailable`
        }
        begin();
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // A fresh mapping, not a Vec: the allocator may hand a Vec memory another test already
        // faulted in (glibc raises its mmap threshold after a large free), and then nothing
        // faults (seen once in CI: 0 minor faults).
        let pages = 64;
        let m = crate::measuring::os::Mapping::anonymous(pages * 4096, false, 0).unwrap();
        m.touch_pages();
        end(Phase::Sampling, 1);
        drop(m);
        let c = finish().unwrap();
        assert!(c.per_op["context-switches"] >= 19.0, "{c:?}");
        assert!(c.per_op["minor-faults"] >= 32.0, "{c:?}");
        assert!(c.per_op.contains_key("cycles") || c.unavailable.contains_key("cycles"));
    }
}
