//! uring/: what io_uring costs, through the `io-uring` crate (no ring code of oscost's own): a
//! NOP submitted and reaped one at a time (one io_uring_enter each), the same 32 to an enter
//! (per NOP), with a kernel poller thread (SQPOLL: no enter at all while it is awake, its CPU
//! time said), and a 4 KiB read of a file in the page cache, which `mem/read-file/4KiB` times
//! with pread.
//!
//! A kernel that refuses io_uring (built without it, or `kernel.io_uring_disabled` set) is a
//! skip with the reason the kernel gave.

use std::os::fd::AsRawFd;

use io_uring::{IoUring, opcode, types};

use crate::bench::entry::{Among, Cases, Expect, Param, Variant};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter};

catalogue! {
    family { default: false };
    "uring/nop" => nop {
        cases: Cases::Fixed(BATCHES),
        // Completed inline by the submitting call: nothing sleeps.
        events: crate::expect_events![(Among::All, "context-switches", Expect::NONE)],
    }:
        "an IORING_OP_NOP submitted and its completion reaped: one per io_uring_enter, and 32 per enter (per NOP)";
    "uring/nop-sqpoll" => nop_sqpoll:
        "an IORING_OP_NOP taken by the kernel's submission poller (SQPOLL, on another CPU) and its completion reaped by spinning: no system call while the poller is awake";
    "uring/read-4KiB" => read_4k:
        "a 4 KiB read of a file in the page cache through io_uring, one per enter (pread's is mem/read-file/4KiB)";
}

static BATCHES: &[Variant] = &[
    Variant {
        suffix: "/qd1",
        params: &[("batch", Param::Int(1))],
    },
    Variant {
        suffix: "/batch32",
        params: &[("batch", Param::Int(32))],
    },
];

/// A ring of `entries`, or the kernel's refusal as a skip.
fn ring(builder: &io_uring::Builder, entries: u32) -> Result<IoUring, BenchError> {
    builder.build(entries).map_err(|e| {
        let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let why = match e.raw_os_error() {
            Some(libc::ENOSYS) => "this kernel has no io_uring (ENOSYS)".to_string(),
            Some(libc::EPERM) if !disabled.is_empty() && disabled != "0" => {
                format!("io_uring is disabled here (kernel.io_uring_disabled = {disabled})")
            }
            _ => format!("io_uring_setup refused: {e}"),
        };
        BenchError::Skipped(why)
    })
}

/// Push `k` NOPs, enter once waiting for all, reap them.
fn nops(r: &mut IoUring, k: usize) -> Result<(), BenchError> {
    let nop = opcode::Nop::new().build().user_data(7);
    for _ in 0..k {
        // SAFETY: a NOP references no memory.
        unsafe { r.submission().push(&nop) }
            .map_err(|_| BenchError::Failed("the submission queue is full".into()))?;
    }
    r.submit_and_wait(k)
        .map_err(|e| BenchError::failed("io_uring_enter", e))?;
    let done = r.completion().count();
    if done != k {
        return Err(BenchError::Failed(format!(
            "{k} NOPs submitted, {done} completions reaped"
        )));
    }
    Ok(())
}

fn nop(m: &Meter, c: &Case) -> Measured {
    let batch = c.int("batch")? as usize;
    let mut r = ring(&IoUring::builder(), 64)?;
    m.batched_fallible(&mut |n| {
        let mut left = n as usize;
        while left > 0 {
            let k = left.min(batch);
            nops(&mut r, k)?;
            left -= k;
        }
        Ok(())
    })
}

fn nop_sqpoll(m: &Meter, _: &Case) -> Measured {
    let Some(&poller_cpu) = m.allowed.iter().find(|&&c| c != m.cpu) else {
        return Err(BenchError::Skipped(
            "the submission poller needs a CPU besides the measuring one, and the run has one"
                .into(),
        ));
    };
    let before = thread_ids();
    let mut r = ring(
        IoUring::builder()
            .setup_sqpoll(1000)
            .setup_sqpoll_cpu(poller_cpu as u32),
        64,
    )?;
    // The poller is the thread the ring's setup added (it names itself `iou-sqp-PID` only once
    // it first runs, so its name cannot find it yet).
    let poller = thread_ids().difference(&before).next().copied();
    let nop = opcode::Nop::new().build().user_data(7);
    let wall0 = std::time::Instant::now();
    let poller0 = poller.and_then(thread_cpu_ns);
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: a NOP references no memory.
            unsafe { r.submission().push(&nop) }
                .map_err(|_| BenchError::Failed("the submission queue is full".into()))?;
            // Enters only when the poller has gone to sleep (the crate checks NEED_WAKEUP).
            r.submit()
                .map_err(|e| BenchError::failed("io_uring_enter", e))?;
            let mut spins = 0u64;
            loop {
                let mut cq = r.completion();
                cq.sync();
                if cq.next().is_some() {
                    break;
                }
                spins += 1;
                if spins > 1 << 32 {
                    return Err(BenchError::Failed(
                        "the poller never completed a NOP".into(),
                    ));
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    })?;
    let wall = wall0.elapsed().as_nanos() as f64;
    let mut o = o.param("poller_cpu", poller_cpu as u64);
    if let (Some(a), Some(b)) = (poller0, poller.and_then(thread_cpu_ns)) {
        // The poller's CPU time over the measurement's wall time: what SQPOLL costs besides.
        o = o.param("poller_cpu_share", ((b - a) as f64 / wall).min(1.0));
    }
    Ok(o)
}

/// This process's thread ids.
fn thread_ids() -> std::collections::BTreeSet<u32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|t| t.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A thread's CPU time, ns, from its `stat` (user and system ticks: schedstat's run time reads
/// 0 where schedstats are off).
fn thread_cpu_ns(tid: u32) -> Option<u64> {
    let s = crate::measuring::os::proc_stat(&format!("/proc/self/task/{tid}/stat"))?;
    Some(crate::measuring::os::ticks_ns(s.utime + s.stime))
}

fn read_4k(m: &Meter, _: &Case) -> Measured {
    const LEN: usize = 4096;
    let f = super::cached_file(m, LEN)?;
    let mut r = ring(&IoUring::builder(), 8)?;
    let mut buf = vec![0u8; LEN];
    let fd = types::Fd(f.as_raw_fd());
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            let read = opcode::Read::new(fd, buf.as_mut_ptr(), LEN as u32)
                .offset(0)
                .build()
                .user_data(9);
            // SAFETY: `buf` outlives the read, which is reaped before the next push.
            unsafe { r.submission().push(&read) }
                .map_err(|_| BenchError::Failed("the submission queue is full".into()))?;
            r.submit_and_wait(1)
                .map_err(|e| BenchError::failed("io_uring_enter", e))?;
            let got = r.completion().next().map(|c| c.result());
            if got != Some(LEN as i32) {
                return Err(BenchError::Failed(format!("a 4 KiB read returned {got:?}")));
            }
        }
        Ok(())
    })
}
