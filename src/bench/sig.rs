//! sig/: what signals cost, by lmbench's `lat_sig` definitions: installing a handler, a signal
//! sent to oneself and caught (the send subtracted, as lat_sig does), a protection fault
//! delivered as SIGSEGV and returned from, and the signal mask set; and a signal's round trip
//! between two processes (lat_sig has none: "should really do a two process version"), taken by
//! sigwaitinfo at both ends.
//!
//! Signals go to the measuring thread itself (`tgkill`), never to the process: a worker may
//! hold other threads, and a process-directed signal may be delivered to any of them, after the
//! sender's call returned. Each benchmark puts back the handler and mask it found.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::bench::entry::{Among, Cases, Expect};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::os::{Mapping, PeerProc, errno};

catalogue! {
    family { default: false };
    "sig/install" => install { events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)], peer: Some("lmbench lat_sig install") }:
        "sigaction installing a handler for SIGUSR1 (the old action read back)";
    "sig/catch" => catch { events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)], peer: Some("lmbench lat_sig catch") }:
        "SIGUSR1 sent to oneself, delivered to an empty handler and returned from, less the send (tgkill with signal 0)";
    "sig/prot" => prot { peer: Some("lmbench lat_sig prot, which reports this less sig/catch") }:
        "a write to a read-only page, delivered as SIGSEGV to a handler and returned from (the write retried)";
    "sig/sigprocmask" => sigprocmask:
        "rt_sigprocmask setting the mask the thread already has";
    "sig/pingpong" => pingpong { cases: Cases::Placements, preempts: true }:
        "round trip of a signal between two processes: SIGUSR1 to the peer, SIGUSR2 back to the measuring thread, each taken by sigwaitinfo (no handler)";
}

/// SIGUSR1s caught by `count_caught`.
static CAUGHT: AtomicU64 = AtomicU64::new(0);
/// Faults `on_fault` still lets through before it makes the page writable.
static FAULTS_LEFT: AtomicU64 = AtomicU64::new(0);
/// The read-only page of `sig/prot` and its length.
static PAGE: AtomicUsize = AtomicUsize::new(0);
static PAGE_LEN: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count_caught(_: libc::c_int) {
    CAUGHT.fetch_add(1, Ordering::Relaxed);
}

extern "C" fn empty_handler(_: libc::c_int) {}

/// SIGSEGV on the benchmark's page: count it; at the last of the batch, make the page writable
/// so the write goes through. A fault anywhere else is a real one: the default action is put
/// back and the retried access ends the process as it would have without oscost.
extern "C" fn on_fault(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (page, len) = (
        PAGE.load(Ordering::Relaxed),
        PAGE_LEN.load(Ordering::Relaxed),
    );
    if page == 0 || !(page..page + len).contains(&addr) {
        // SAFETY: resetting a signal's action is async-signal-safe.
        unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
        return;
    }
    if FAULTS_LEFT.fetch_sub(1, Ordering::Relaxed) <= 1 {
        // SAFETY: mprotect of the benchmark's own mapping; async-signal-safe.
        unsafe {
            libc::mprotect(
                page as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
    }
}

/// A handler installed for a signal while it lives; the old action put back on drop.
struct Installed {
    signal: i32,
    old: libc::sigaction,
}

impl Installed {
    fn new(signal: i32, handler: usize, flags: i32) -> Result<Installed, BenchError> {
        // SAFETY: an all-zero sigaction is a valid value to fill.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        // SAFETY: an all-zero sigaction is a valid value to fill.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: valid sigaction structures.
        if unsafe { libc::sigaction(signal, &sa, &mut old) } != 0 {
            return Err(BenchError::failed("sigaction", errno()));
        }
        Ok(Installed { signal, old })
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        // SAFETY: putting back the action read when this was installed.
        unsafe { libc::sigaction(self.signal, &self.old, std::ptr::null_mut()) };
    }
}

/// Send `signal` to the calling thread; 0 checks the right to without sending.
fn to_self(pid: i32, tid: i32, signal: i32) -> bool {
    // SAFETY: no pointer arguments.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) == 0 }
}

fn install(m: &Meter, _: &Case) -> Measured {
    let keep = Installed::new(libc::SIGUSR1, libc::SIG_IGN, 0)?;
    // SAFETY: an all-zero sigaction is a valid value to fill.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = empty_handler as *const () as usize;
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: valid sigaction structures.
            if unsafe { libc::sigaction(libc::SIGUSR1, &sa, &mut old) } != 0 {
                return Err(BenchError::failed("sigaction", errno()));
            }
        }
        Ok(())
    });
    drop(keep);
    o
}

fn catch(m: &Meter, _: &Case) -> Measured {
    let _handler = Installed::new(libc::SIGUSR1, count_caught as *const () as usize, 0)?;
    let _unblocked = Mask::change(libc::SIG_UNBLOCK, &[libc::SIGUSR1]);
    // SAFETY: no arguments.
    let (pid, tid) = (unsafe { libc::getpid() }, unsafe { libc::gettid() });
    let mut sent = 0u64;
    let before = CAUGHT.load(Ordering::Relaxed);
    let o = m.batched_with_baseline_fallible(
        &mut |n| {
            for _ in 0..n {
                if !to_self(pid, tid, libc::SIGUSR1) {
                    return Err(BenchError::failed("tgkill", errno()));
                }
            }
            sent += n;
            Ok(())
        },
        // lat_sig's baseline: the send alone.
        &mut |n| {
            for _ in 0..n {
                std::hint::black_box(to_self(pid, tid, 0));
            }
        },
    )?;
    let caught = CAUGHT.load(Ordering::Relaxed) - before;
    if caught != sent {
        return Err(BenchError::Failed(format!(
            "{sent} signals sent to the measuring thread, {caught} caught"
        )));
    }
    Ok(o)
}

fn prot(m: &Meter, _: &Case) -> Measured {
    let page = Mapping::anonymous(4096, false, 0)?;
    let at = page.ptr();
    PAGE_LEN.store(4096, Ordering::Relaxed);
    PAGE.store(at as usize, Ordering::Relaxed);
    let handler = Installed::new(
        libc::SIGSEGV,
        on_fault as *const () as usize,
        libc::SA_SIGINFO,
    );
    let result = handler.and_then(|_h| {
        let _unblocked = Mask::change(libc::SIG_UNBLOCK, &[libc::SIGSEGV]);
        m.batched_fallible(&mut |n| {
            if n == 0 {
                return Ok(());
            }
            FAULTS_LEFT.store(n, Ordering::Relaxed);
            // SAFETY: the benchmark's own mapping.
            if unsafe { libc::mprotect(at.cast(), 4096, libc::PROT_READ) } != 0 {
                return Err(BenchError::failed("mprotect", errno()));
            }
            // Faults n times: the handler returns, the write is retried, until the n-th fault
            // makes the page writable.
            // SAFETY: inside the mapping; the handler makes the write succeed in the end.
            unsafe { at.write_volatile(1) };
            if FAULTS_LEFT.load(Ordering::Relaxed) != 0 {
                return Err(BenchError::Failed(format!(
                    "{n} faults expected, {} were not taken",
                    FAULTS_LEFT.load(Ordering::Relaxed)
                )));
            }
            Ok(())
        })
    });
    PAGE.store(0, Ordering::Relaxed);
    drop(page);
    result
}

fn sigprocmask(m: &Meter, _: &Case) -> Measured {
    // SAFETY: reading the current mask into a local set.
    let mut cur: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut cur) };
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: a valid mask; glibc passes it to rt_sigprocmask.
            if unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &cur, std::ptr::null_mut()) } != 0
            {
                return Err(BenchError::failed("rt_sigprocmask", errno()));
            }
        }
        Ok(())
    })
}

/// A set of these signals.
fn signal_set(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigset operations on a local value.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// This thread's signal mask changed (`how`: SIG_BLOCK or SIG_UNBLOCK `signals`) while it
/// lives, the old mask put back on drop; a fork meanwhile inherits the changed one.
struct Mask {
    old: libc::sigset_t,
}

impl Mask {
    fn change(how: i32, signals: &[i32]) -> Mask {
        let set = signal_set(signals);
        // SAFETY: a local set and a buffer for the old mask.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(how, &set, &mut old) };
        Mask { old }
    }
}

impl Drop for Mask {
    fn drop(&mut self) {
        // SAFETY: the mask read when this was made.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

fn pingpong(m: &Meter, c: &Case) -> Measured {
    // SAFETY: no arguments.
    let (pid, tid) = (unsafe { libc::getpid() }, unsafe { libc::gettid() });
    // Both blocked before the fork, so a signal that comes before its waiter waits pending in
    // either process instead of ending it.
    let _blocked = Mask::change(libc::SIG_BLOCK, &[libc::SIGUSR1, libc::SIGUSR2]);
    // The nudge wakes the measuring thread if the peer dies.
    let nudge = move || {
        to_self(pid, tid, libc::SIGUSR2);
    };
    let peer = PeerProc::spawn(
        c.peer_cpu(),
        &m.allowed,
        move || {
            let ping = signal_set(&[libc::SIGUSR1]);
            // SAFETY: a valid set; no siginfo wanted. Ends when the measuring thread is gone.
            while unsafe { libc::sigwaitinfo(&ping, std::ptr::null_mut()) } == libc::SIGUSR1
                && to_self(pid, tid, libc::SIGUSR2)
            {}
        },
        nudge,
    )?;
    let (peer_pid, pong) = (peer.pid(), signal_set(&[libc::SIGUSR2]));
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: signalling our own child; waiting on a valid set.
            let ok = unsafe {
                libc::kill(peer_pid, libc::SIGUSR1) == 0
                    && libc::sigwaitinfo(&pong, std::ptr::null_mut()) == libc::SIGUSR2
            };
            if !ok {
                return Err(BenchError::failed("kill/sigwaitinfo", errno()));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    // A nudge or a late answer may be pending: take it before the mask is put back.
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid set and a zero timeout.
    while unsafe { libc::sigtimedwait(&pong, std::ptr::null_mut(), &zero) } == libc::SIGUSR2 {}
    r
}
