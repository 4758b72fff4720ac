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
    }
}
