//! syscall/: the cost of entering and leaving the kernel for calls that do almost nothing once
//! inside. glibc does not cache getpid (since 2.25), so `getpid` through libc is a real system
//! call; the `-raw` variant goes through syscall(2) to show the wrapper's share. The empty loop
//! is subtracted as the baseline. Outside the default suite: getrandom's system call (16 and
//! 256 bytes) and membarrier (private expedited: IPIs to the process's CPUs; global: a wait
//! for every CPU's quiescent state), skipped with the kernel's reason where it lacks them.

use std::hint::black_box;
use std::os::fd::AsRawFd;

use crate::catalogue;

use crate::harness::case::{
    Among, BenchError, Case, Cases, Expect, Measured, Meter, Param, Variant,
};

catalogue! {
    "syscall/getpid" => getpid { events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)] }:
        "getpid() through glibc (a real system call, not cached)";
    "syscall/getpid-raw" => getpid_raw:
        "syscall(SYS_getpid), bypassing the glibc wrapper";
    "syscall/getppid" => getppid { events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)], ladder: Some("syscall/getppid"), peer: Some("lmbench lat_syscall null; perf bench syscall basic") }:
        "getppid() (what `perf bench syscall basic` times)";
    "syscall/getsid" => getsid:
        "getsid(0): the session id of the caller";
    "syscall/getpgid-self" => getpgid_self:
        "getpgid(own pid): the kernel looks the pid up";
    "syscall/getpgid-0" => getpgid_0:
        "getpgid(0): no pid lookup";
    "syscall/getuid" => getuid:
        "getuid(): the real user id of the caller";
    "syscall/gettid" => gettid:
        "gettid(): the thread id of the caller";
    "syscall/close-badfd" => close_badfd:
        "close(-1), failing with EBADF: entry, fd check, exit";
    "syscall/read-devzero" => read_devzero { ladder: Some("syscall/read-devzero"), peer: Some("lmbench lat_syscall read") }:
        "read of 1 byte from /dev/zero";
    "syscall/write-devnull" => write_devnull { peer: Some("lmbench lat_syscall write") }:
        "write of 1 byte to /dev/null";
    "syscall/sched-yield" => sched_yield { ladder: Some("syscall/sched-yield") }:
        "sched_yield() with nothing else runnable on the CPU";
    "syscall/fcntl-getfd" => fcntl_getfd { default: false, events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)] }:
        "fcntl(F_GETFD) on an open descriptor: its close-on-exec flag read";
    "syscall/lseek" => lseek { default: false }:
        "lseek(SEEK_CUR, 0) on an open file: its offset read";
    "syscall/ioctl-notty" => ioctl_notty { default: false }:
        "ioctl(TCGETS) on /dev/null, failing with ENOTTY: what isatty() asks of a descriptor that is no terminal";
    "syscall/getrandom" => getrandom { cases: Cases::Fixed(RANDOM_SIZES), default: false }:
        "the getrandom system call filling 16 and 256 bytes (not glibc's wrapper, which may use the vDSO)";
    "syscall/membarrier-private-expedited" => membarrier_private { default: false }:
        "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) in a process registered for it (IPIs to the CPUs running its threads)";
    "syscall/membarrier-global" => membarrier_global { default: false }:
        "membarrier(MEMBARRIER_CMD_GLOBAL): waits until every CPU has passed through a quiescent state";
}

static RANDOM_SIZES: &[Variant] = &[
    Variant {
        suffix: "/16B",
        params: &[("bytes", Param::Int(16))],
    },
    Variant {
        suffix: "/256B",
        params: &[("bytes", Param::Int(256))],
    },
];

/// A call the kernel does not have (ENOSYS) or refuses for this use (EINVAL: membarrier's
/// commands where it was built without them) is a skip with that reason.
fn absent_or_failed(what: &str, since: &str) -> BenchError {
    if crate::harness::os::errno().raw_os_error() == Some(libc::EINVAL) {
        return BenchError::Skipped(format!(
            "this kernel refuses {what} (EINVAL: built without it, or the command is unknown)"
        ));
    }
    BenchError::of_call(what, since)
}

fn getrandom(m: &Meter, c: &Case) -> Measured {
    let len = c.int("bytes")? as usize;
    let mut buf = vec![0u8; len];
    // SAFETY: a live buffer of the length passed.
    let call = |b: &mut [u8]| unsafe { libc::syscall(libc::SYS_getrandom, b.as_mut_ptr(), len, 0) };
    if call(&mut buf) != len as i64 {
        return Err(absent_or_failed("getrandom", "3.17"));
    }
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            black_box(call(&mut buf));
        }
    }))
}

const MEMBARRIER_CMD_GLOBAL: i64 = 1;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: i64 = 8;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: i64 = 16;

fn membarrier(cmd: i64) -> i64 {
    // SAFETY: no pointer arguments.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) }
}

fn membarrier_private(m: &Meter, _: &Case) -> Measured {
    if membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0 {
        return Err(absent_or_failed(
            "membarrier's private expedited command",
            "4.14",
        ));
    }
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            black_box(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED));
        }
    }))
}

fn membarrier_global(m: &Meter, _: &Case) -> Measured {
    if membarrier(MEMBARRIER_CMD_GLOBAL) != 0 {
        return Err(absent_or_failed("membarrier's global command", "4.3"));
    }
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            black_box(membarrier(MEMBARRIER_CMD_GLOBAL));
        }
    }))
}

/// A batched benchmark of a call that takes no arguments.
macro_rules! simple {
    ($name:ident, $call:expr) => {
        fn $name(m: &Meter, _: &Case) -> Measured {
            Ok(m.batched(&mut |n| {
                for _ in 0..n {
                    // SAFETY: a libc call with no pointer arguments.
                    black_box(unsafe { $call });
                }
            }))
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

fn getpgid_self(m: &Meter, _: &Case) -> Measured {
    let me = black_box(std::process::id() as libc::pid_t);
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: no pointer arguments.
            black_box(unsafe { libc::getpgid(me) });
        }
    }))
}

fn open(path: &str, write: bool) -> Result<std::fs::File, BenchError> {
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .open(path)
        .map_err(|e| BenchError::failed(&format!("open {path}"), e))
}

fn read_devzero(m: &Meter, _: &Case) -> Measured {
    let f = open("/dev/zero", false)?;
    let fd = f.as_raw_fd();
    let mut buf = [0u8; 1];
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: one byte into a live local buffer.
            black_box(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), 1) });
        }
    }))
}

fn write_devnull(m: &Meter, _: &Case) -> Measured {
    let f = open("/dev/null", true)?;
    let fd = f.as_raw_fd();
    let buf = [0u8; 1];
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: one byte from a live local buffer.
            black_box(unsafe { libc::write(fd, buf.as_ptr().cast(), 1) });
        }
    }))
}

fn fcntl_getfd(m: &Meter, _: &Case) -> Measured {
    let f = open("/dev/null", false)?;
    let fd = f.as_raw_fd();
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: no pointer arguments.
            black_box(unsafe { libc::fcntl(fd, libc::F_GETFD) });
        }
    }))
}

fn lseek(m: &Meter, _: &Case) -> Measured {
    let f = open("/dev/zero", false)?;
    let fd = f.as_raw_fd();
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: no pointer arguments.
            black_box(unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) });
        }
    }))
}

fn ioctl_notty(m: &Meter, _: &Case) -> Measured {
    let f = open("/dev/null", false)?;
    let fd = f.as_raw_fd();
    // SAFETY: an all-zero termios is a valid buffer.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: TCGETS into a live termios.
            black_box(unsafe { libc::ioctl(fd, libc::TCGETS, &mut t) });
        }
    }))
}
