//! syscall/: the cost of entering and leaving the kernel for calls that do almost nothing once
//! inside. glibc does not cache getpid (since 2.25), so `getpid` through libc is a real system
//! call; the `-raw` variant goes through syscall(2) to show the wrapper's share. The empty loop
//! is subtracted as the baseline.

use std::hint::black_box;
use std::os::fd::AsRawFd;

use super::{BenchError, Benchmark, Ctx, Outcome};

pub static BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        id: "syscall/getpid",
        definition: "getpid() through glibc (a real system call, not cached)",
        default: true,
        run: getpid,
    },
    Benchmark {
        id: "syscall/getpid-raw",
        definition: "syscall(SYS_getpid), bypassing the glibc wrapper",
        default: true,
        run: getpid_raw,
    },
    Benchmark {
        id: "syscall/getppid",
        definition: "getppid() (what `perf bench syscall basic` times)",
        default: true,
        run: getppid,
    },
    Benchmark {
        id: "syscall/getsid",
        definition: "getsid(0): the session id of the caller",
        default: true,
        run: getsid,
    },
    Benchmark {
        id: "syscall/getpgid-self",
        definition: "getpgid(own pid): the kernel looks the pid up",
        default: true,
        run: getpgid_self,
    },
    Benchmark {
        id: "syscall/getpgid-0",
        definition: "getpgid(0): no pid lookup",
        default: true,
        run: getpgid_0,
    },
    Benchmark {
        id: "syscall/getuid",
        definition: "getuid(): the real user id of the caller",
        default: true,
        run: getuid,
    },
    Benchmark {
        id: "syscall/gettid",
        definition: "gettid(): the thread id of the caller",
        default: true,
        run: gettid,
    },
    Benchmark {
        id: "syscall/close-badfd",
        definition: "close(-1), failing with EBADF: entry, fd check, exit",
        default: true,
        run: close_badfd,
    },
    Benchmark {
        id: "syscall/read-devzero",
        definition: "read of 1 byte from /dev/zero",
        default: true,
        run: read_devzero,
    },
    Benchmark {
        id: "syscall/write-devnull",
        definition: "write of 1 byte to /dev/null",
        default: true,
        run: write_devnull,
    },
    Benchmark {
        id: "syscall/sched-yield",
        definition: "sched_yield() with nothing else runnable on the CPU",
        default: true,
        run: sched_yield,
    },
];

type R = Result<Vec<Outcome>, BenchError>;

// SAFETY (unsafe blocks below): each is a libc call with no pointer arguments, or with a pointer
// to a live local buffer of the stated length.

/// A batched benchmark of a call that takes no arguments.
macro_rules! simple {
    ($name:ident, $call:expr) => {
        fn $name(ctx: &Ctx, b: &Benchmark) -> R {
            Ok(vec![ctx.batched(b, &mut |n| {
                for _ in 0..n {
                    black_box(unsafe { $call });
                }
            })])
        }
    };
}

simple!(getpid, libc::getpid());
simple!(getpid_raw, libc::syscall(libc::SYS_getpid));
simple!(getppid, libc::getppid());
simple!(getsid, libc::getsid(0));
simple!(getpgid_0, libc::getpgid(0));
simple!(getuid, libc::getuid());
simple!(gettid, libc::gettid());
simple!(close_badfd, libc::close(-1));
simple!(sched_yield, libc::sched_yield());

fn getpgid_self(ctx: &Ctx, b: &Benchmark) -> R {
    let me = black_box(std::process::id() as libc::pid_t);
    Ok(vec![ctx.batched(b, &mut |n| {
        for _ in 0..n {
            black_box(unsafe { libc::getpgid(me) });
        }
    })])
}

fn open(path: &str, write: bool) -> Result<std::fs::File, BenchError> {
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .open(path)
        .map_err(|e| BenchError::failed(&format!("open {path}"), e))
}

fn read_devzero(ctx: &Ctx, b: &Benchmark) -> R {
    let f = open("/dev/zero", false)?;
    let fd = f.as_raw_fd();
    let mut buf = [0u8; 1];
    Ok(vec![ctx.batched(b, &mut |n| {
        for _ in 0..n {
            black_box(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), 1) });
        }
    })])
}

fn write_devnull(ctx: &Ctx, b: &Benchmark) -> R {
    let f = open("/dev/null", true)?;
    let fd = f.as_raw_fd();
    let buf = [0u8; 1];
    Ok(vec![ctx.batched(b, &mut |n| {
        for _ in 0..n {
            black_box(unsafe { libc::write(fd, buf.as_ptr().cast(), 1) });
        }
    })])
}
