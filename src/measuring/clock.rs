//! Clock sources and their calibration. Every sample in oscost is a difference of two reads of
//! a `Clock`; the real one is `CLOCK_MONOTONIC` through the vDSO. At the start of a run its cost
//! (what one read adds to a measurement) and its resolution (the smallest step it shows) are
//! measured, recorded in the run, and used to size batches (docs/ARCHITECTURE.md §2).

use crate::base::model::{ClockInfo, ClockSource};
use crate::base::stats;

/// A monotonic nanosecond clock. Behind a trait so the sampler can be driven by a fake clock in
/// tests and give exact answers.
pub trait Clock {
    /// Now, ns.
    fn now_ns(&self) -> u64;
}

/// `clock_gettime(CLOCK_MONOTONIC)`; glibc serves it from the vDSO without entering the kernel.
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotonic;

impl Clock for Monotonic {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        read_clock(libc::CLOCK_MONOTONIC)
    }
}

/// Read any POSIX clock in nanoseconds through libc (the vDSO where the kernel offers it).
#[inline(always)]
pub fn read_clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; clock ids passed here are compile-time constants
    // of this platform. A failing call leaves ts at zero, which calibration would show.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// gettimeofday through the vDSO, in ns (microsecond resolution).
#[inline(always)]
pub fn read_gettimeofday() -> u64 {
    let mut tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    // SAFETY: valid out pointer, null timezone.
    unsafe { libc::gettimeofday(&mut tv, std::ptr::null_mut()) };
    (tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64) * 1000
}

/// clock_gettime(CLOCK_MONOTONIC) as a real system call, bypassing the vDSO, in ns.
#[inline(always)]
pub fn read_monotonic_syscall() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: raw clock_gettime with a valid out pointer.
    unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC,
            &mut ts as *mut libc::timespec,
        )
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What `clock_getres` claims for a clock, in ns.
pub fn claimed_resolution_ns(id: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    let rc = unsafe { libc::clock_getres(id, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// Cost of one read of `read`, as the median over batches of back-to-back reads timed by
/// `clock`, and the smallest non-zero step between consecutive reads of `read` itself (its
/// observable resolution; `None` if it never stepped).
pub fn measure_reader(clock: &impl Clock, mut read: impl FnMut() -> u64) -> (f64, Option<f64>) {
    const PER_BATCH: u64 = 2000;
    let mut costs = Vec::with_capacity(31);
    for _ in 0..31 {
        let t0 = clock.now_ns();
        for _ in 0..PER_BATCH {
            std::hint::black_box(read());
        }
        let t1 = clock.now_ns();
        costs.push((t1 - t0) as f64 / PER_BATCH as f64);
    }
    let mut min_step: Option<u64> = None;
    let mut prev = read();
    for _ in 0..20_000 {
        let now = read();
        if now > prev {
            let d = now - prev;
            min_step = Some(min_step.map_or(d, |m| m.min(d)));
        }
        prev = now;
    }
    (stats::median(&costs), min_step.map(|s| s as f64))
}

/// Calibrate the run's clock.
pub fn calibrate() -> ClockInfo {
    let clock = Monotonic;
    // Warm the vDSO page and the caches before timing it.
    for _ in 0..10_000 {
        std::hint::black_box(clock.now_ns());
    }
    let (cost, step) = measure_reader(&clock, || clock.now_ns());
    ClockInfo {
        source: ClockSource::ClockMonotonic,
        cost_ns: cost,
        resolution_ns: step.unwrap_or(f64::NAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_is_monotonic_and_calibrates_to_something_sane() {
        let c = Monotonic;
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        let info = calibrate();
        assert!(info.cost_ns > 0.0, "a clock read cannot be free");
        assert!(info.resolution_ns >= 1.0);
    }
}
