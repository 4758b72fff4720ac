//! The speed witness: a fixed user-space loop that every worker times on its measuring CPU just
//! before and just after its cases, so each repetition carries the speed the machine ran plain
//! user code at that moment. Runs measured apart (two kernels, two nights) can then say how
//! much of a difference the machine's own speed could explain.
//!
//! The loop is a dependent chain of multiplies and adds on registers (no memory traffic, no
//! system call, no branch the predictor can miss): its time follows the core's clock and what
//! shares the core (an SMT sibling, a neighbour's steal), not the kernel. That is also what it
//! assumes: a kernel change that slows system calls leaves it unmoved, but one that changes the
//! clock (a governor, a frequency cap) or the core's sharing moves it, and then the witness
//! rightly says the machine changed. It does not see what moves only the kernel's costs (a
//! hypervisor that changes the price of entering the kernel), which is why it is shown as
//! evidence beside a comparison and never divides a result (see docs/design-notes.md).
//!
//! Beside it, the exit witness: CPUID timed in a loop. A hypervisor traps every CPUID (KVM
//! on Intel and AMD, unconditionally), so in a guest its time is a round trip through the
//! host, and follows what the host is doing; the guest kernel takes no part in it, so a
//! change compared inside the guest (a seccomp filter, a kernel setting, another guest kernel)
//! does not move it. On a 2-vCPU KVM guest whose getppid drifted 188-281 ns over 24 s, 20 ms
//! windows of the two correlated 0.80 (0.96 over 0.6 s), the user-space loop's 0.22
//! (docs/design-notes.md, "A witness that follows the host"). On bare metal CPUID is an
//! instruction of ~100-200 cycles that follows the clock.

use std::hint::black_box;
use std::time::Instant;

/// Iterations of one timing: about 16 us on a 3 GHz core (6 cycles an iteration).
const ITERATIONS: u64 = 8_000;
/// Timings each side of the cases; their median is the repetition's witness.
const TRIALS: usize = 7;

/// One timing of the loop, ns.
fn time_once() -> f64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    let start = Instant::now();
    for _ in 0..ITERATIONS {
        // A linear congruential step with a shift-xor: each depends on the one before, and
        // the xor keeps the compiler from folding the chain into a closed form.
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x ^= x >> 29;
    }
    black_box(x);
    start.elapsed().as_nanos() as f64
}

/// `TRIALS` timings of the loop, ns each (the caller keeps them for the other side's).
pub fn timings() -> Vec<f64> {
    // One untimed pass brings the code and the core's clock up.
    black_box(time_once());
    (0..TRIALS).map(|_| time_once()).collect()
}

/// The witness of a repetition from its timings before and after its cases: their median, ns
/// per loop (`None` without timings).
pub fn witness_ns(timings: &[f64]) -> Option<f64> {
    let ok: Vec<f64> = timings
        .iter()
        .copied()
        .filter(|t| t.is_finite() && *t > 0.0)
        .collect();
    (!ok.is_empty()).then(|| crate::base::stats::median(&ok))
}

/// CPUIDs in one timing of the exit witness: ~160 us in a guest whose exits take 5 us (a
/// nested one), ~30 us where they take 1 us, a few us on bare metal.
const EXITS: u32 = 32;
/// Timings of the exit witness each side of the cases: 448 CPUIDs a worker, 2.2 ms where an
/// exit takes 5 us, about a tenth of a worker's start-up (~20 ms). Half as many (3 timings of
/// 16) left quiet runs' medians 5% apart on that guest, against 1% with these.
const EXIT_TRIALS: usize = 7;

/// One timing of `EXITS` CPUIDs (leaf 0), ns per CPUID; `None` where the architecture has no
/// CPUID.
fn time_exits_once() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let start = Instant::now();
        for _ in 0..EXITS {
            // CPUID exists on every x86-64 CPU and only reads identification.
            black_box(std::arch::x86_64::__cpuid(black_box(0)));
        }
        Some(start.elapsed().as_nanos() as f64 / f64::from(EXITS))
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// One CPUID (leaf 0), untimed: the sampler times it between two samples with its own clock
/// (`sampler::EXIT_EVERY_NS`). `false` where the architecture has no CPUID.
pub fn one_exit() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID exists on every x86-64 CPU and only reads identification.
        black_box(std::arch::x86_64::__cpuid(black_box(0)));
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Fewer exits timed between a repetition's samples than this, and its witness is the one
/// timed beside its cases instead: a median of a few single CPUIDs jitters more than the
/// beside timings' (14 of 32 CPUIDs each).
pub const MIN_DURING: usize = 16;

/// A repetition's exit witness from the exits timed between its samples: their median, ns
/// per CPUID (`None` with fewer than `MIN_DURING`).
pub fn during_ns(exits_ns: &[f64]) -> Option<f64> {
    (exits_ns.len() >= MIN_DURING)
        .then(|| witness_ns(exits_ns))
        .flatten()
}

/// `EXIT_TRIALS` timings of the exit witness, ns per CPUID each (empty without CPUID).
pub fn exit_timings() -> Vec<f64> {
    (0..EXIT_TRIALS).filter_map(|_| time_exits_once()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_takes_time_and_its_median_is_the_witness() {
        let t = timings();
        assert_eq!(t.len(), TRIALS);
        assert!(t.iter().all(|x| *x > 0.0));
        assert_eq!(witness_ns(&[3.0, 1.0, 2.0, f64::NAN]), Some(2.0));
        assert_eq!(witness_ns(&[]), None);
        assert_eq!(during_ns(&[5.0; MIN_DURING - 1]), None);
        let mut during = vec![4.0; MIN_DURING];
        during[0] = 90.0;
        assert_eq!(during_ns(&during), Some(4.0));
        assert_eq!(one_exit(), cfg!(target_arch = "x86_64"));
        let exits = exit_timings();
        if cfg!(target_arch = "x86_64") {
            assert_eq!(exits.len(), EXIT_TRIALS);
            assert!(exits.iter().all(|x| *x > 0.0), "{exits:?}");
        } else {
            assert!(exits.is_empty());
        }
    }
}
