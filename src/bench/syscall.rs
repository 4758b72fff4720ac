//! syscall/: the cost of entering and leaving the kernel for calls that do almost nothing once
//! inside. glibc does not cache getpid (since 2.25), so `getpid` through libc is a real system
//! call; the `-raw` variant goes through syscall(2) to show the wrapper's share. The empty loop
//! is subtracted as the baseline. Outside the default suite: getrandom's system call (16 and
//! 256 bytes) and membarrier (private expedited: IPIs to the process's CPUs; global: a wait
//! for every CPU's quiescent state), skipped with the kernel's reason where it lacks them;
//! getrandom through the vDSO (found by name in the vDSO image, `measuring::vdso`, with the
//! opaque state the kernel says it needs); rseq's register and unregister; a Landlock ruleset
//! created and enforced, in a child each time, because enforcement cannot be undone.

use std::hint::black_box;
use std::os::fd::AsRawFd;

use crate::catalogue;

use crate::bench::entry::{Among, Cases, Expect, Param, Variant};
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::os::errno;

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
    "syscall/getrandom-vdso" => getrandom_vdso { cases: Cases::Fixed(RANDOM_SIZES), default: false }:
        "getrandom through the vDSO's function (6.11), called directly with a state of its own: the same bytes without entering the kernel";
    "syscall/rseq-register" => rseq_register { default: false }:
        "rseq registration of a 32-byte area and its unregistration, on a thread whose C library's registration is lifted for the duration";
    "syscall/landlock-enforce" => landlock_enforce { default: false }:
        "a Landlock ruleset created, one path rule added, no_new_privs set and the ruleset enforced on itself, in a fresh child (timed inside it)";
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
    if crate::measuring::os::errno().raw_os_error() == Some(libc::EINVAL) {
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
/// sched_yield with nothing else runnable is a system call that returns at once. With another
/// task runnable on the measuring CPU (a loaded machine) each yield hands it the CPU until its
/// slice ends, and the samples are that task's time, not the call's: the result says so, with
/// the share of yields that gave the CPU away, rather than print a "cost" a thousand times the
/// call's. A yield that switches leaves the thread runnable, so the kernel counts the switch as
/// involuntary (`nivcsw`), as it counts a preemption.
/// The share of yields that must hand the CPU over before `sched_yield` says it measured
/// another task's slices.
const YIELDS_SAID_FROM: f64 = 0.01;

fn sched_yield(m: &Meter, _: &Case) -> Measured {
    let switches = || {
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
            .map_or(0, |u| u.involuntary_context_switches())
    };
    let before = switches();
    let mut o = m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: no arguments.
            black_box(unsafe { libc::sched_yield() });
        }
    });
    let given = switches().saturating_sub(before);
    let m = &o.measurement;
    let yields = m.samples_ns.len() as f64 * m.batch.size.max(1) as f64;
    // A kernel worker taking the CPU once in a pass is no competitor: the median of the
    // batches does not see it. Said from one yield in a hundred.
    if yields > 0.0 && given as f64 >= yields {
        // The switches are counted over the whole pass, its untimed warm-up too: more of them
        // than timed yields is every yield handing the CPU over, not a share past 100%.
        o.notes.push(format!(
            "another task was runnable on this CPU: every yield handed it the CPU ({given} \
             switches over {yields:.0} timed yields and the warm-up), so the samples are its time \
             slices, not the call"
        ));
    } else if yields > 0.0 && given as f64 >= YIELDS_SAID_FROM * yields {
        o.notes.push(format!(
            "another task was runnable on this CPU: {given} of {yields:.0} yields ({:.2}%) handed \
             it the CPU, so the samples hold its time slices as well as the call",
            100.0 * given as f64 / yields
        ));
    }
    Ok(o)
}

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

/// The vDSO's getrandom: `(buffer, len, flags, opaque_state, opaque_len)`.
type VgetrandomFn = unsafe extern "C" fn(*mut u8, usize, u32, *mut libc::c_void, usize) -> isize;

/// What the vDSO's getrandom says its per-thread state needs (`struct
/// vgetrandom_opaque_params`).
#[repr(C)]
#[derive(Default)]
struct VgetrandomParams {
    size_of_opaque_state: u32,
    mmap_prot: u32,
    mmap_flags: u32,
    reserved: [u32; 13],
}

fn getrandom_vdso(m: &Meter, c: &Case) -> Measured {
    let len = c.int("bytes")? as usize;
    let name = if cfg!(target_arch = "aarch64") {
        "__kernel_getrandom"
    } else {
        "__vdso_getrandom"
    };
    let Some(addr) = crate::measuring::vdso::symbol(name) else {
        return Err(BenchError::Skipped(format!(
            "this kernel's vDSO exports no {name} (it came in Linux 6.11 on x86-64, 6.14 on arm64)"
        )));
    };
    // SAFETY: the vDSO exports `name` with this signature (include/vdso/getrandom.h).
    let vgetrandom: VgetrandomFn = unsafe { std::mem::transmute(addr) };
    let mut params = VgetrandomParams::default();
    // SAFETY: the documented query: no buffer, opaque_len all ones, the params struct.
    let q = unsafe {
        vgetrandom(
            std::ptr::null_mut(),
            0,
            0,
            (&raw mut params).cast(),
            usize::MAX,
        )
    };
    if q != 0 || params.size_of_opaque_state == 0 {
        return Err(BenchError::Skipped(format!(
            "the vDSO's getrandom refused the state query ({q})"
        )));
    }
    let state_len = params.size_of_opaque_state as usize;
    // SAFETY: a fresh anonymous mapping with the protection and flags the kernel asked for.
    let state = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            state_len.next_multiple_of(4096),
            params.mmap_prot as i32,
            params.mmap_flags as i32,
            -1,
            0,
        )
    };
    if state == libc::MAP_FAILED {
        return Err(BenchError::failed(
            "mmap of getrandom's vDSO state",
            errno(),
        ));
    }
    let mut buf = vec![0u8; len];
    // SAFETY: a live buffer of `len` bytes and the state mapped above, of the size given.
    let call = |b: &mut [u8]| unsafe { vgetrandom(b.as_mut_ptr(), len, 0, state, state_len) };
    let r = if call(&mut buf) == len as isize {
        Ok(m.batched(&mut |n| {
            for _ in 0..n {
                black_box(call(&mut buf));
            }
        }))
    } else {
        Err(BenchError::Failed(
            "the vDSO's getrandom did not fill the buffer".into(),
        ))
    };
    // SAFETY: the state mapped above, no longer used.
    unsafe { libc::munmap(state, state_len.next_multiple_of(4096)) };
    r
}

/// The signature an rseq registration carries (the C library's, per architecture).
#[cfg(target_arch = "aarch64")]
const RSEQ_SIG: u32 = 0xd428_bc00;
#[cfg(not(target_arch = "aarch64"))]
const RSEQ_SIG: u32 = 0x5305_3053;
const RSEQ_FLAG_UNREGISTER: i32 = 1;

fn rseq(area: *mut u8, len: u32, flags: i32) -> i64 {
    // SAFETY: the area is live, aligned and `len` bytes long, or the call only compares it.
    unsafe { libc::syscall(libc::SYS_rseq, area, len, flags, RSEQ_SIG) }
}

/// The thread pointer, which the C library's `__rseq_offset` is relative to.
#[cfg(target_arch = "x86_64")]
fn thread_pointer() -> Option<usize> {
    let tp: usize;
    // SAFETY: reads the TCB's self pointer at %fs:0 (x86-64's thread pointer).
    unsafe { std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly)) };
    Some(tp)
}
#[cfg(target_arch = "aarch64")]
fn thread_pointer() -> Option<usize> {
    let tp: usize;
    // SAFETY: reads tpidr_el0, arm64's thread pointer.
    unsafe { std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem)) };
    Some(tp)
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn thread_pointer() -> Option<usize> {
    None
}

/// The C library's rseq registration of the calling thread: its area and length, if it made
/// one (glibc 2.35+ exports `__rseq_offset` and `__rseq_size`; 0 means it did not register).
fn libc_rseq() -> Option<(*mut u8, u32)> {
    // SAFETY: dlsym with static names; a symbol found is glibc's exported data.
    unsafe {
        let off = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr());
        let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
        if off.is_null() || size.is_null() || *(size as *const u32) == 0 {
            return None;
        }
        let area = thread_pointer()?.wrapping_add_signed(*(off as *const isize));
        // The kernel unregisters only with the length registered: glibc registers 32 bytes
        // or its feature size rounded up to the area's alignment.
        let feature = *(size as *const u32);
        let len = [32, feature.next_multiple_of(32), feature]
            .into_iter()
            .find(|&l| rseq(area as *mut u8, l, RSEQ_FLAG_UNREGISTER) == 0)?;
        Some((area as *mut u8, len))
    }
}

/// A 32-byte rseq area, aligned as the kernel requires.
#[repr(C, align(32))]
struct RseqArea([u8; 32]);

fn rseq_register(m: &Meter, _: &Case) -> Measured {
    // A thread of its own (it inherits the measuring CPU), so lifting the C library's
    // registration touches no thread that goes on running.
    std::thread::scope(|s| {
        s.spawn(|| {
            let lifted = libc_rseq();
            let mut area = Box::new(RseqArea([0; 32]));
            let ours = area.0.as_mut_ptr();
            let r = if rseq(ours, 32, 0) != 0 {
                Err(match crate::measuring::os::errno().raw_os_error() {
                    Some(libc::EBUSY) => BenchError::Skipped(
                        "this thread's rseq area is registered by a C library oscost cannot \
                         lift it from (no __rseq_offset)"
                            .into(),
                    ),
                    _ => BenchError::of_call("rseq", "4.18"),
                })
            } else {
                rseq(ours, 32, RSEQ_FLAG_UNREGISTER);
                Ok(m.batched(&mut |n| {
                    for _ in 0..n {
                        black_box(rseq(ours, 32, 0));
                        black_box(rseq(ours, 32, RSEQ_FLAG_UNREGISTER));
                    }
                }))
            };
            if let Some((area, len)) = lifted {
                // Back as the C library left it (sched_getcpu reads it).
                rseq(area, len, 0);
            }
            r
        })
        .join()
        .unwrap_or_else(|_| Err(BenchError::Failed("the rseq thread panicked".into())))
    })
}

const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
const LANDLOCK_RULE_PATH_BENEATH: i32 = 1;
/// Landlock ABI 1's file-system rights, all handled.
const LANDLOCK_ACCESS_FS_ALL_V1: u64 = (1 << 13) - 1;
/// LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR.
const LANDLOCK_READ: u64 = (1 << 2) | (1 << 3);

/// `struct landlock_path_beneath_attr` (packed in the kernel's ABI).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

fn landlock_enforce(m: &Meter, _: &Case) -> Measured {
    // SAFETY: the version query takes no attribute.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi < 1 {
        return Err(match crate::measuring::os::errno().raw_os_error() {
            Some(libc::EOPNOTSUPP) => BenchError::Skipped(
                "Landlock is built in but not enabled (add landlock to the lsm= boot parameter)"
                    .into(),
            ),
            _ => BenchError::of_call("landlock_create_ruleset", "5.13"),
        });
    }
    let root = std::fs::File::open("/").map_err(|e| BenchError::failed("open /", e))?;
    let root_fd = root.as_raw_fd();
    let page = crate::measuring::os::Mapping::anonymous(4096, true, 0)?;
    // SAFETY: the shared page is aligned and outlives every child that writes it.
    let took = unsafe { &*(page.ptr() as *const std::sync::atomic::AtomicI64) };
    let clock = crate::measuring::clock::Monotonic;
    use crate::measuring::clock::Clock;
    m.individual(&mut || {
        took.store(-1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: the child makes only system calls and reads the vDSO clock, then _exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(BenchError::failed("fork", errno()));
        }
        if pid == 0 {
            let attr: u64 = LANDLOCK_ACCESS_FS_ALL_V1;
            let rule = PathBeneath {
                allowed_access: LANDLOCK_READ,
                parent_fd: root_fd,
            };
            let t0 = clock.now_ns();
            // SAFETY: a ruleset attribute of the 8 bytes ABI 1 reads; a packed rule; flags 0.
            let ok = unsafe {
                let fd = libc::syscall(libc::SYS_landlock_create_ruleset, &attr, 8, 0);
                fd >= 0
                    && libc::syscall(
                        libc::SYS_landlock_add_rule,
                        fd,
                        LANDLOCK_RULE_PATH_BENEATH,
                        &rule,
                        0,
                    ) == 0
                    && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                    && libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) == 0
                    && libc::close(fd as i32) == 0
            };
            let t1 = clock.now_ns();
            if ok {
                took.store((t1 - t0) as i64, std::sync::atomic::Ordering::SeqCst);
            }
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: reaps the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        match took.load(std::sync::atomic::Ordering::SeqCst) {
            t if t >= 0 => Ok(t as f64),
            _ => Err(BenchError::Failed(
                "a child could not create and enforce a Landlock ruleset".into(),
            )),
        }
    })
}
