//! timer/: what reading each clock costs, and the resolution it shows. A benchmark that times
//! anything pays for two clock reads, so this is the floor under every other number; the raw
//! syscall variant shows what the vDSO saves. Each result carries the clock's claimed
//! resolution (`clock_getres`) and the smallest step actually observed.

use std::hint::black_box;

use serde_json::json;

use super::{BenchError, Benchmark, Ctx, Outcome};
use crate::harness::clock::{
    Monotonic, claimed_resolution_ns, measure_reader, read_clock, read_gettimeofday,
    read_monotonic_syscall,
};

pub static BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        id: "timer/monotonic",
        definition: "clock_gettime(CLOCK_MONOTONIC) through the vDSO",
        default: true,
        run: monotonic,
    },
    Benchmark {
        id: "timer/monotonic-raw",
        definition: "clock_gettime(CLOCK_MONOTONIC_RAW) through the vDSO",
        default: true,
        run: monotonic_raw,
    },
    Benchmark {
        id: "timer/realtime",
        definition: "clock_gettime(CLOCK_REALTIME) through the vDSO",
        default: true,
        run: realtime,
    },
    Benchmark {
        id: "timer/monotonic-coarse",
        definition: "clock_gettime(CLOCK_MONOTONIC_COARSE): tick resolution, no hardware read",
        default: true,
        run: monotonic_coarse,
    },
    Benchmark {
        id: "timer/gettimeofday",
        definition: "gettimeofday() through the vDSO (microsecond resolution)",
        default: true,
        run: gettimeofday,
    },
    Benchmark {
        id: "timer/clock-gettime-syscall",
        definition: "clock_gettime(CLOCK_MONOTONIC) as a real system call, bypassing the vDSO",
        default: true,
        run: clock_gettime_syscall,
    },
    Benchmark {
        id: "timer/rdtsc",
        definition: "rdtsc instruction (TSC ticks, not core cycles; not ordered)",
        default: true,
        run: rdtsc,
    },
    Benchmark {
        id: "timer/rdtscp",
        definition: "rdtscp instruction (waits for earlier instructions)",
        default: true,
        run: rdtscp,
    },
];

type R = Result<Vec<Outcome>, BenchError>;

/// Time `read` in batches and attach its resolution.
fn clock_bench(
    ctx: &Ctx,
    b: &Benchmark,
    name: &str,
    claimed_ns: Option<f64>,
    read: impl Fn() -> u64,
) -> R {
    let mut o = ctx.batched(b, &mut |n| {
        for _ in 0..n {
            black_box(read());
        }
    });
    let (_, step) = measure_reader(&Monotonic, &read);
    o.params.insert("clock".into(), json!(name));
    if let Some(c) = claimed_ns {
        o.params.insert("claimed_resolution_ns".into(), json!(c));
    }
    o.params
        .insert("observed_step".into(), json!(step.unwrap_or(f64::NAN)));
    Ok(vec![o])
}

fn posix_clock(ctx: &Ctx, b: &Benchmark, id: libc::clockid_t, name: &str) -> R {
    clock_bench(ctx, b, name, Some(claimed_resolution_ns(id)), || {
        read_clock(id)
    })
}

fn monotonic(ctx: &Ctx, b: &Benchmark) -> R {
    posix_clock(ctx, b, libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC")
}
fn monotonic_raw(ctx: &Ctx, b: &Benchmark) -> R {
    posix_clock(ctx, b, libc::CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW")
}
fn realtime(ctx: &Ctx, b: &Benchmark) -> R {
    posix_clock(ctx, b, libc::CLOCK_REALTIME, "CLOCK_REALTIME")
}
fn monotonic_coarse(ctx: &Ctx, b: &Benchmark) -> R {
    posix_clock(
        ctx,
        b,
        libc::CLOCK_MONOTONIC_COARSE,
        "CLOCK_MONOTONIC_COARSE",
    )
}

fn gettimeofday(ctx: &Ctx, b: &Benchmark) -> R {
    clock_bench(ctx, b, "gettimeofday", Some(1000.0), read_gettimeofday)
}

fn clock_gettime_syscall(ctx: &Ctx, b: &Benchmark) -> R {
    clock_bench(
        ctx,
        b,
        "CLOCK_MONOTONIC (syscall)",
        Some(claimed_resolution_ns(libc::CLOCK_MONOTONIC)),
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
fn rdtsc(ctx: &Ctx, b: &Benchmark) -> R {
    if !cpu_has_flag("tsc") {
        return Err(BenchError::Skipped("this CPU has no TSC".into()));
    }
    // SAFETY: rdtsc exists on every CPU with the tsc flag.
    clock_bench(ctx, b, "TSC", None, || unsafe {
        std::arch::x86_64::_rdtsc()
    })
}

#[cfg(target_arch = "x86_64")]
fn rdtscp(ctx: &Ctx, b: &Benchmark) -> R {
    if !cpu_has_flag("rdtscp") {
        return Err(BenchError::Skipped(
            "this CPU does not advertise rdtscp".into(),
        ));
    }
    clock_bench(ctx, b, "TSC (rdtscp)", None, || {
        let mut aux = 0u32;
        // SAFETY: the rdtscp flag was checked above.
        unsafe { std::arch::x86_64::__rdtscp(&mut aux) }
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc(_: &Ctx, _: &Benchmark) -> R {
    Err(BenchError::Skipped("rdtsc is an x86-64 instruction".into()))
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtscp(_: &Ctx, _: &Benchmark) -> R {
    Err(BenchError::Skipped(
        "rdtscp is an x86-64 instruction".into(),
    ))
}
