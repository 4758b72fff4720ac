//! wake/: wake-up latency against how long the wakee's CPU was idle. A sleeper thread blocks on
//! another CPU than the measuring one (futex, pipe or eventfd); the waker, on the measuring
//! CPU, waits until the sleeper has said it is about to block, spins for the case's gap (0,
//! 1 us, 10 us, 100 us, 1 ms, 10 ms: as long as the sleeper's CPU has to fall idle), then wakes
//! it. A sample is the time from just before the waker's system call to the sleeper's first
//! clock read after its own call returns: one CLOCK_MONOTONIC (vDSO) both CPUs read, so the
//! difference holds the wake-up system call, the inter-processor interrupt, the idle CPU
//! coming back and the switch to the sleeper.
//!
//! With each result: the sleeper CPU's idle states (cpuidle's per-state entries and idle time,
//! differenced around the sampling and divided by the operations), the cpuidle driver and
//! governor, and the driver's parameters (`/sys/module/haltpoll/parameters` on a guest that
//! idles by halt-polling), so a reader sees what the idle CPU did at each gap.
//!
//! Needs two CPUs; on one it is skipped, saying so.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{futex_wait, futex_wake};
use crate::base::model::{Curve, Placement};
use crate::bench::entry::{Cases, Param, Variant};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::clock::{Clock, Monotonic};
use crate::measuring::os::{
    PeerThread, close, eventfd, eventfd_post, eventfd_take, pipe, read_byte, write_byte,
};

catalogue! {
    "wake/futex" => futex { cases: Cases::Fixed(GAPS), preempts: true, default: false, curve: Some(WAKE_CURVE) }:
        "FUTEX_WAKE until the thread blocked in FUTEX_WAIT on another CPU runs, after a gap";
    "wake/pipe" => pipe_wake { cases: Cases::Fixed(GAPS), preempts: true, default: false, curve: Some(WAKE_CURVE) }:
        "a 1-byte pipe write until the thread blocked in read on another CPU runs, after a gap";
    "wake/eventfd" => eventfd_wake { cases: Cases::Fixed(GAPS), preempts: true, default: false, curve: Some(WAKE_CURVE) }:
        "an eventfd write until the thread blocked in read on another CPU runs, after a gap";
}

macro_rules! gap {
    ($suffix:literal, $ns:expr, $decade:expr) => {
        Variant {
            suffix: $suffix,
            params: &[
                ("gap_ns", Param::Int($ns)),
                ("gap_decade", Param::Int($decade)),
            ],
        }
    };
}

/// The gaps: how long the sleeper has been blocked (and its CPU free to idle) before the wake.
/// `gap_decade` places them on the curve's axis (0: none, then 1 us = 1 ... 10 ms = 5).
pub static GAPS: &[Variant] = &[
    gap!("/gap-0", 0, 0),
    gap!("/gap-1us", 1_000, 1),
    gap!("/gap-10us", 10_000, 2),
    gap!("/gap-100us", 100_000, 3),
    gap!("/gap-1ms", 1_000_000, 4),
    gap!("/gap-10ms", 10_000_000, 5),
];

/// Latency against the gap, one line per mechanism, as reports draw it.
const WAKE_CURVE: Curve = Curve {
    name: "wake",
    title: "wake-up latency against how long the wakee's CPU could idle",
    x: "gap_decade",
    x_desc: "gap before the wake (0: none, 1: 1 us, 2: 10 us, 3: 100 us, 4: 1 ms, 5: 10 ms)",
    y_desc: "per wake-up",
    log2_x: false,
    series: None,
    across_family: true,
    regime: Some("idle_state"),
};

/// What the two threads share: the generation the sleeper is ready for, the word it blocks on
/// (futex), the generation it finished and its clock read on waking.
#[derive(Default)]
struct Shared {
    ready: AtomicU32,
    word: AtomicU32,
    done: AtomicU32,
    stamp: AtomicU64,
}

/// The word value that tells the sleeper to leave.
const QUIT: u32 = u32::MAX;

/// How the sleeper blocks and how the waker wakes it.
#[derive(Clone, Copy)]
enum Mechanism {
    Futex,
    Pipe { r: i32, w: i32 },
    Eventfd { fd: i32 },
}

impl Mechanism {
    /// Sleeper: block until generation `gen` is posted (or QUIT).
    fn block(self, s: &Shared, generation: u32) {
        match self {
            Mechanism::Futex => loop {
                let v = s.word.load(Ordering::SeqCst);
                if v == generation || v == QUIT {
                    return;
                }
                futex_wait(&s.word, v, true);
            },
            Mechanism::Pipe { r, .. } => {
                read_byte(r);
            }
            Mechanism::Eventfd { fd } => {
                eventfd_take(fd);
            }
        }
    }

    /// Waker: post generation `gen` (or QUIT) and wake the sleeper.
    fn wake(self, s: &Shared, generation: u32) {
        s.word.store(generation, Ordering::SeqCst);
        match self {
            Mechanism::Futex => futex_wake(&s.word, true),
            Mechanism::Pipe { w, .. } => {
                write_byte(w);
            }
            Mechanism::Eventfd { fd } => {
                eventfd_post(fd);
            }
        }
    }
}

/// The sleeper: announce each generation, block, stamp the clock on waking.
fn sleeper(s: &Shared, mech: Mechanism) {
    let clock = Monotonic;
    let mut generation: u32 = 1;
    loop {
        s.ready.store(generation, Ordering::SeqCst);
        mech.block(s, generation);
        let t1 = clock.now_ns();
        if s.word.load(Ordering::SeqCst) == QUIT {
            return;
        }
        s.stamp.store(t1, Ordering::SeqCst);
        s.done.store(generation, Ordering::SeqCst);
        generation = generation.wrapping_add(1).max(1);
    }
}

/// Spin until `cond` holds; a sleeper that never answers within a second is a failure.
fn spin_until(cond: impl Fn() -> bool, what: &str) -> Result<(), BenchError> {
    let start = Instant::now();
    let mut n = 0u32;
    while !cond() {
        std::hint::spin_loop();
        n = n.wrapping_add(1);
        if n.is_multiple_of(4096) && start.elapsed() > Duration::from_secs(1) {
            return Err(BenchError::Failed(format!("the sleeper never {what}")));
        }
    }
    Ok(())
}

/// One CPU's idle states: (name, entries, idle time in us), from cpuidle's sysfs.
fn idle_states(cpu: usize) -> Vec<(String, u64, u64)> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let read = |p: String| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    (0..16)
        .map_while(|i| {
            let st = format!("{dir}/state{i}");
            let name = read(format!("{st}/name"))?;
            let usage = read(format!("{st}/usage"))?.parse().ok()?;
            let time = read(format!("{st}/time"))?.parse().ok()?;
            Some((name, usage, time))
        })
        .collect()
}

/// The cpuidle driver, governor and the halt-polling driver's parameters, as parameters.
fn idle_setup() -> BTreeMap<String, serde_json::Value> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut out = BTreeMap::new();
    let base = "/sys/devices/system/cpu/cpuidle";
    if let Some(d) = read(&format!("{base}/current_driver")) {
        out.insert("cpuidle_driver".into(), json!(d));
    }
    if let Some(g) = read(&format!("{base}/current_governor_ro"))
        .or_else(|| read(&format!("{base}/current_governor")))
    {
        out.insert("cpuidle_governor".into(), json!(g));
    }
    if let Ok(entries) = std::fs::read_dir("/sys/module/haltpoll/parameters") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(v) = read(&e.path().to_string_lossy()) {
                out.insert(format!("haltpoll.{name}"), json!(v));
            }
        }
    }
    out
}

/// Per operation, each idle state's entries and idle time between two snapshots.
fn idle_per_op(
    before: &[(String, u64, u64)],
    after: &[(String, u64, u64)],
    ops: u64,
) -> Vec<(String, f64, f64)> {
    if ops == 0 {
        return vec![];
    }
    before
        .iter()
        .zip(after)
        .filter(|(b, a)| b.0 == a.0)
        .map(|(b, a)| {
            (
                b.0.clone(),
                a.1.saturating_sub(b.1) as f64 / ops as f64,
                a.2.saturating_sub(b.2) as f64 / ops as f64,
            )
        })
        .collect()
}

/// The idle state the sleeper's CPU spent most of its idle time in, among those it entered at
/// least once in 20 wake-ups; "none" when it entered none; None without cpuidle states.
fn dominant_state(per_op: &[(String, f64, f64)]) -> Option<String> {
    if per_op.is_empty() {
        return None;
    }
    Some(
        per_op
            .iter()
            .filter(|(_, n, _)| *n >= 0.05)
            .max_by(|a, b| a.2.total_cmp(&b.2))
            .map_or_else(|| "none".to_string(), |s| s.0.clone()),
    )
}

/// The idle states as a note: "the sleeper's CPU 0 entered haltpoll 0.98 times a wake-up
/// (idle 9.7 ms each time), POLL 0.00".
fn idle_note(cpu: usize, per_op: &[(String, f64, f64)]) -> String {
    let parts: Vec<String> = per_op
        .iter()
        .map(|(name, n, us)| {
            if *n > 0.0 {
                format!(
                    "{name} {n:.2} times (idle {} each)",
                    crate::base::stats::units::format_ns(us / n * 1000.0)
                )
            } else {
                format!("{name} 0 times")
            }
        })
        .collect();
    format!(
        "the sleeper's CPU {cpu}, per wake-up: {}",
        if parts.is_empty() {
            "no cpuidle states to read".to_string()
        } else {
            parts.join(", ")
        }
    )
}

/// Measure one gap of one mechanism.
fn measure(m: &Meter, c: &Case, mech: Mechanism) -> Measured {
    let Some(&other) = m.allowed.iter().find(|&&cpu| cpu != m.cpu) else {
        return Err(BenchError::Skipped(
            "a wake-up across CPUs needs two allowed CPUs".into(),
        ));
    };
    let gap = c.int("gap_ns")?;
    let shared = Arc::new(Shared::default());
    let (s1, s2) = (Arc::clone(&shared), Arc::clone(&shared));
    let peer = PeerThread::spawn(
        Some(other),
        m.allowed.clone(),
        move |_| sleeper(&s1, mech),
        move || mech.wake(&s2, QUIT),
    )?;
    let clock = Monotonic;
    let mut generation: u32 = 1;
    let mut ops = 0u64;
    let before = idle_states(other);
    let outcome = m.individual(&mut || {
        let s = &*shared;
        spin_until(|| s.ready.load(Ordering::SeqCst) == generation, "got ready")?;
        let ready_at = clock.now_ns();
        while clock.now_ns().saturating_sub(ready_at) < gap {
            std::hint::spin_loop();
        }
        let t0 = clock.now_ns();
        mech.wake(s, generation);
        spin_until(|| s.done.load(Ordering::SeqCst) == generation, "woke up")?;
        let t1 = s.stamp.load(Ordering::SeqCst);
        generation = generation.wrapping_add(1).max(1);
        ops += 1;
        Ok(t1.saturating_sub(t0) as f64)
    });
    let after = idle_states(other);
    drop(peer);
    let mut o = outcome?;
    let per_op = idle_per_op(&before, &after, ops);
    o.notes.push(idle_note(other, &per_op));
    let idle: serde_json::Map<String, serde_json::Value> = per_op
        .iter()
        .map(|(name, n, us)| {
            (
                name.clone(),
                json!({"entries_per_op": n, "idle_ns_per_op": us * 1000.0}),
            )
        })
        .collect();
    // Used CPUs: the other CPU's load is then the sleeper's own, not a disturbance.
    o.placed = Some((
        Placement::Cross {
            cpus: vec![m.cpu, other],
        },
        vec![m.cpu, other],
    ));
    o.params.insert("sleeper_cpu".into(), json!(other));
    o.params.insert("idle_states".into(), json!(idle));
    if let Some(state) = dominant_state(&per_op) {
        o.params.insert("idle_state".into(), json!(state));
    }
    o.params.insert(
        "clock".into(),
        json!("CLOCK_MONOTONIC (vDSO), read on both CPUs"),
    );
    o.params.extend(idle_setup());
    Ok(o)
}

fn futex(m: &Meter, c: &Case) -> Measured {
    measure(m, c, Mechanism::Futex)
}

fn pipe_wake(m: &Meter, c: &Case) -> Measured {
    let [r, w] = pipe()?;
    let out = measure(m, c, Mechanism::Pipe { r, w });
    close(r);
    close(w);
    out
}

fn eventfd_wake(m: &Meter, c: &Case) -> Measured {
    let fd = eventfd()?;
    let out = measure(m, c, Mechanism::Eventfd { fd });
    close(fd);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_deltas_are_per_operation_and_said_in_a_note() {
        let before = vec![
            ("POLL".to_string(), 10, 100),
            ("haltpoll".to_string(), 50, 1000),
        ];
        let after = vec![
            ("POLL".to_string(), 10, 100),
            ("haltpoll".to_string(), 150, 1_001_000),
        ];
        let per = idle_per_op(&before, &after, 100);
        assert_eq!(
            per,
            vec![
                ("POLL".to_string(), 0.0, 0.0),
                ("haltpoll".to_string(), 1.0, 10_000.0)
            ]
        );
        let n = idle_note(1, &per);
        assert_eq!(
            n,
            "the sleeper's CPU 1, per wake-up: POLL 0 times, haltpoll 1.00 times (idle 10.0 ms each)"
        );
        assert!(idle_per_op(&before, &after, 0).is_empty());
        assert_eq!(dominant_state(&per).as_deref(), Some("haltpoll"));
        let busy = [
            ("POLL".to_string(), 0.01, 0.0),
            ("C1".to_string(), 0.0, 0.0),
        ];
        assert_eq!(dominant_state(&busy).as_deref(), Some("none"));
        assert_eq!(dominant_state(&[]), None);
    }

    #[test]
    fn the_gaps_run_from_none_to_ten_milliseconds() {
        let ns: Vec<i64> = GAPS
            .iter()
            .map(|g| match g.params[0].1 {
                Param::Int(v) => v,
                Param::Flag(_) => -1,
            })
            .collect();
        assert_eq!(ns, [0, 1_000, 10_000, 100_000, 1_000_000, 10_000_000]);
    }
}
