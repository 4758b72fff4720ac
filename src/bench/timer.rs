//! timer/: what reading each clock costs, and the resolution it shows. A benchmark that times
//! anything pays for two clock reads, so this is the floor under every other number; the raw
//! syscall variant shows what the vDSO saves. Each result carries the clock's claimed
//! resolution (`clock_getres`) and the smallest step actually observed.

use std::hint::black_box;

use serde_json::json;

use crate::bench::entry::{Cases, Param, Variant};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::clock::{
    Monotonic, claimed_resolution_ns, measure_reader, read_clock, read_gettimeofday,
    read_monotonic_syscall,
};

catalogue! {
    "timer/monotonic" => monotonic { ladder: Some("timer/monotonic") }:
        "clock_gettime(CLOCK_MONOTONIC) through the vDSO";
    "timer/monotonic-raw" => monotonic_raw:
        "clock_gettime(CLOCK_MONOTONIC_RAW) through the vDSO";
    "timer/realtime" => realtime:
        "clock_gettime(CLOCK_REALTIME) through the vDSO";
    "timer/monotonic-coarse" => monotonic_coarse:
        "clock_gettime(CLOCK_MONOTONIC_COARSE): tick resolution, no hardware read";
    "timer/gettimeofday" => gettimeofday:
        "gettimeofday() through the vDSO (microsecond resolution)";
    "timer/clock-gettime-syscall" => clock_gettime_syscall { ladder: Some("timer/clock-gettime-syscall") }:
        "clock_gettime(CLOCK_MONOTONIC) as a real system call, bypassing the vDSO";
    "timer/rdtsc" => rdtsc { ladder: Some("timer/rdtsc") }:
        "rdtsc instruction (TSC ticks, not core cycles; not ordered)";
    "timer/rdtscp" => rdtscp:
        "rdtscp instruction (waits for earlier instructions)";
    "timer/nanosleep-overshoot" => nanosleep_overshoot {
        cases: Cases::Fixed(SLEEPS), default: false, peer: Some("lmbench lat_usleep nanosleep, which reports the whole sleep"),
    }:
        "how much later than asked nanosleep of 10, 100 and 1000 us returns (the time slept less the time asked)";
}

static SLEEPS: &[Variant] = &[
    Variant {
        suffix: "/10us",
        params: &[("asked_ns", Param::Int(10_000))],
    },
    Variant {
        suffix: "/100us",
        params: &[("asked_ns", Param::Int(100_000))],
    },
    Variant {
        suffix: "/1000us",
        params: &[("asked_ns", Param::Int(1_000_000))],
    },
];

fn nanosleep_overshoot(m: &Meter, c: &Case) -> Measured {
    use crate::measuring::clock::Clock;
    let asked = c.int("asked_ns")?;
    let clock = Monotonic;
    let cfg = crate::measuring::sampler::SamplerConfig {
        // Sleeps of a millisecond need a longer window for enough samples.
        budget_ns: m.sampler.cfg.budget_ns.max(asked * 200),
        ..m.sampler.cfg
    };
    let o = m.individual_with(cfg, &mut || {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: asked as libc::c_long,
        };
        let t0 = clock.now_ns();
        // SAFETY: a valid timespec; an interrupted sleep is timed as it was.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
        let t1 = clock.now_ns();
        Ok::<f64, BenchError>(t1.saturating_sub(t0) as f64 - asked as f64)
    })?;
    // The timer slack the kernel may add to each sleep (50 us by default for normal threads).
    // SAFETY: PR_GET_TIMERSLACK takes no pointer.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    Ok(o.param("timer_slack_ns", slack))
}

/// Time `read` in batches and attach its resolution.
fn clock_bench(m: &Meter, name: &str, claimed_ns: Option<f64>, read: impl Fn() -> u64) -> Measured {
    let o = m.batched(&mut |n| {
        for _ in 0..n {
            black_box(read());
        }
    });
    let (_, step) = measure_reader(&Monotonic, &read);
    let o = o
        .param("clock", name)
        .param("observed_step", json!(step.unwrap_or(f64::NAN)));
    Ok(match claimed_ns {
        Some(c) => o.param("claimed_resolution_ns", c),
        None => o,
    })
}

fn posix_clock(m: &Meter, id: libc::clockid_t, name: &str) -> Measured {
    clock_bench(m, name, Some(claimed_resolution_ns(id)), || read_clock(id))
}

fn monotonic(m: &Meter, _: &Case) -> Measured {
    posix_clock(m, libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC")
}

fn monotonic_raw(m: &Meter, _: &Case) -> Measured {
    posix_clock(m, libc::CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW")
}

fn realtime(m: &Meter, _: &Case) -> Measured {
    posix_clock(m, libc::CLOCK_REALTIME, "CLOCK_REALTIME")
}

fn monotonic_coarse(m: &Meter, _: &Case) -> Measured {
    posix_clock(m, libc::CLOCK_MONOTONIC_COARSE, "CLOCK_MONOTONIC_COARSE")
}

fn gettimeofday(m: &Meter, _: &Case) -> Measured {
    clock_bench(m, "gettimeofday", Some(1000.0), read_gettimeofday)
}

fn clock_gettime_syscall(m: &Meter, _: &Case) -> Measured {
    let claimed = claimed_resolution_ns(libc::CLOCK_MONOTONIC);
    clock_bench(
        m,
        "CLOCK_MONOTONIC (syscall)",
        Some(claimed),
        read_monotonic_syscall,
    )
}

/// Whether /proc/cpuinfo lists a CPU flag.
fn cpu_has_flag(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|f| f == flag))
        })
        .unwrap_or(false)
}

#[cfg(target_arch = "x86_64")]
fn rdtsc(m: &Meter, _: &Case) -> Measured {
    if !cpu_has_flag("tsc") {
        return Err(BenchError::Skipped("this CPU has no TSC".into()));
    }
    clock_bench(m, "TSC", None, || {
        // SAFETY: rdtsc exists on every CPU with the tsc flag.
        unsafe { std::arch::x86_64::_rdtsc() }
    })
}

#[cfg(target_arch = "x86_64")]
fn rdtscp(m: &Meter, _: &Case) -> Measured {
    if !cpu_has_flag("rdtscp") {
        return Err(BenchError::Skipped(
            "this CPU does not advertise rdtscp".into(),
        ));
    }
    clock_bench(m, "TSC (rdtscp)", None, || {
        let mut aux = 0u32;
        // SAFETY: the rdtscp flag was checked above.
        unsafe { std::arch::x86_64::__rdtscp(&mut aux) }
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc(_: &Meter, _: &Case) -> Measured {
    Err(BenchError::Skipped("rdtsc is an x86-64 instruction".into()))
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtscp(_: &Meter, _: &Case) -> Measured {
    Err(BenchError::Skipped(
        "rdtscp is an x86-64 instruction".into(),
    ))
}
