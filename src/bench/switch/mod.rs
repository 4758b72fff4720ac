//! switch/: context switches. Two parties ping-pong a token (pipes, a socketpair, eventfds,
//! futexes, semaphores, sched_yield); a sample is one round trip, which is two switches when
//! both parties share a CPU. Every benchmark runs under each requested placement (`same`: both
//! on one CPU; `cross`: two CPUs, recorded; `free`: unpinned) and its id is `BENCH@PLACEMENT`.
//! On these machines placement decides everything: same-CPU ~7 us per pipe round trip, across
//! the two vCPUs 50-120 us (waking an idle vCPU is the expensive part).
//!
//! `switch/ring` (lmbench's lat_ctx) is in `ring.rs`.
//!
//! Peers never outlive the benchmark: process peers are SIGKILLed and reaped, thread peers are
//! stopped and joined. A process peer that dies mid-benchmark is seen (end of file on its
//! pipe, or a watchdog thread reaping it and waking the master) and the benchmark fails with
//! that reason; one that hangs is caught by the coordinator's timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

mod ring;

use super::{futex_wait, futex_wake, round_trips};
use crate::catalogue;

use crate::bench::entry::{Among, Cases, Expect};
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::os::{
    Mapping, PeerProc, PeerThread, close, errno, eventfd, eventfd_post, eventfd_take, pipe,
    read_byte, socketpair, write_byte,
};

catalogue! {
    "switch/pipe-proc" => pipe_proc {
        cases: Cases::Placements, preempts: true, ladder: Some("switch/pipe-proc@same"),
        peer: Some("lmbench lat_pipe; perf bench sched pipe"),
    }:
        "round trip of 1 byte over two pipes between two processes (2 switches on one CPU)";
    "switch/pipe-thread" => pipe_thread {
        cases: Cases::Placements, preempts: true,
    }:
        "round trip of 1 byte over two pipes between two threads";
    "switch/futex-thread" => futex_thread {
        cases: Cases::Placements, preempts: true, ladder: Some("switch/futex-thread@same"),
    }:
        "round trip through a private futex (wait/wake) between two threads";
    "switch/futex-waitv-thread" => futex_waitv_thread {
        cases: Cases::Placements, preempts: true, default: false,
    }:
        "round trip between two threads, each waiting in futex_waitv (5.16) on a vector of its turn word and a stop word, woken by FUTEX_WAKE";
    "switch/futex-proc" => futex_proc {
        cases: Cases::Placements, preempts: true,
    }:
        "round trip through a shared-memory futex between two processes";
    "switch/sem-thread" => sem_thread {
        cases: Cases::Placements, preempts: true,
    }:
        "round trip through two POSIX semaphores (sem_post/sem_wait) between two threads";
    "switch/eventfd-proc" => eventfd_proc {
        cases: Cases::Placements, preempts: true,
    }:
        "round trip through two eventfds between two processes";
    // Two to six switches on one CPU, not two: the reader's freeing of each byte wakes the
    // sender early, and the scheduler decides whether it runs (`Expect::UNIX_STREAM_ROUND_TRIP`).
    "switch/unix-proc" => unix_proc {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench lat_unix"),
        events: crate::expect_events![
            (Among::SameCpu, "context-switches", Expect::UNIX_STREAM_ROUND_TRIP)
        ],
    }:
        "round trip of 1 byte over a unix socketpair between two processes";
    "switch/yield-pair" => yield_pair {
        cases: Cases::Placements, preempts: true,
    }:
        "two threads on one CPU calling sched_yield: one round trip is two yields";
    "switch/ring" => ring::ring {
        cases: Cases::Ring, curve: Some(ring::RING_CURVE), preempts: true,
        peer: Some("lmbench lat_ctx"),
        events: crate::expect_events![(Among::All, "context-switches", Expect::ONE)],
    }:
        "one context switch in lmbench's ring of N processes with S KB each (pipe and sum overhead subtracted)";
}

fn pipe_proc(m: &Meter, c: &Case) -> Measured {
    pipe_round_trips(m, c.peer_cpu())
}

/// Round trips of 1 byte over two pipes with a peer process on `peer_cpu` (`None`:
/// unpinned): `switch/pipe-proc`, and the hook ladder's round trip (`hook/pipe-*`).
pub(crate) fn pipe_round_trips(m: &Meter, peer_cpu: Option<usize>) -> Measured {
    let (to, from) = (pipe()?, pipe()?);
    let peer = PeerProc::spawn(
        peer_cpu,
        &m.allowed,
        || {
            close(to[1]);
            close(from[0]);
            while read_byte(to[0]) && write_byte(from[1]) {}
        },
        || {},
    )?;
    close(to[0]);
    close(from[1]);
    let r = round_trips(
        m,
        to[1],
        from[0],
        "the peer process exited (end of file on its pipe)",
    );
    close(to[1]);
    close(from[0]);
    drop(peer);
    r
}

fn unix_proc(m: &Meter, c: &Case) -> Measured {
    let peer_cpu = c.peer_cpu();
    let sv = socketpair()?;
    let peer = PeerProc::spawn(
        peer_cpu,
        &m.allowed,
        || {
            close(sv[0]);
            while read_byte(sv[1]) && write_byte(sv[1]) {}
        },
        || {},
    )?;
    close(sv[1]);
    let r = round_trips(
        m,
        sv[0],
        sv[0],
        "the peer process exited (its socket closed)",
    );
    close(sv[0]);
    drop(peer);
    r
}

fn eventfd_proc(m: &Meter, c: &Case) -> Measured {
    let peer_cpu = c.peer_cpu();
    let (to, from) = (eventfd()?, eventfd()?);
    // If the peer dies, the watchdog posts `from` so the master wakes and sees it.
    let peer = PeerProc::spawn(
        peer_cpu,
        &m.allowed,
        || while eventfd_take(to) && eventfd_post(from) {},
        move || {
            eventfd_post(from);
        },
    )?;
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            if !(eventfd_post(to) && eventfd_take(from)) {
                return Err(BenchError::failed("eventfd", errno()));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    close(to);
    close(from);
    r
}

/// The turn word: PEER means the peer's move, MASTER the master's.
const MASTER: u32 = 0;
const PEER: u32 = 1;
const QUIT: u32 = 2;

/// Master side of one futex round trip. `peer_dead` is checked before every wait: a watchdog
/// that finds the peer dead sets it and then hands the turn back, but the master may have
/// taken the turn away again in between (its store of PEER overwrites the hand-back), so the
/// flag, not the turn, is what ends the wait.
#[inline(always)]
fn futex_master(turn: &AtomicU32, private: bool, peer_dead: &AtomicBool) {
    turn.store(PEER, Ordering::SeqCst);
    futex_wake(turn, private);
    while turn.load(Ordering::SeqCst) == PEER && !peer_dead.load(Ordering::SeqCst) {
        futex_wait(turn, PEER, private);
    }
}

/// Peer side: answer until told to quit.
fn futex_peer(turn: &AtomicU32, private: bool) {
    loop {
        let t = turn.load(Ordering::SeqCst);
        if t == QUIT {
            return;
        }
        if t == PEER {
            turn.store(MASTER, Ordering::SeqCst);
            futex_wake(turn, private);
        } else {
            futex_wait(turn, MASTER, private);
        }
    }
}

fn futex_thread(m: &Meter, c: &Case) -> Measured {
    let peer_cpu = c.peer_cpu();
    let turn = Arc::new(AtomicU32::new(MASTER));
    let (t1, t2) = (Arc::clone(&turn), Arc::clone(&turn));
    let peer = PeerThread::spawn(
        peer_cpu,
        m.allowed.clone(),
        move |_| futex_peer(&t1, true),
        move || {
            t2.store(QUIT, Ordering::SeqCst);
            futex_wake(&t2, true);
        },
    )?;
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // A thread peer cannot die alone: nothing sets the flag.
            futex_master(&turn, true, &AtomicBool::new(false));
        }
        Ok(())
    });
    drop(peer);
    o
}

/// `struct futex_waitv`: one word futex_waitv waits on.
#[repr(C)]
struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// FUTEX2_SIZE_U32 | FUTEX2_PRIVATE.
const FUTEX2_U32_PRIVATE: u32 = 0x02 | 128;

/// futex_waitv on the turn word (while it is `val`) and the stop word (while it is 0), as a
/// program waits on several events at once. Returns whether the call was made (not ENOSYS).
fn waitv(turn: &AtomicU32, val: u32, stop: &AtomicU32) -> bool {
    let word = |w: &AtomicU32, v: u32| FutexWaitv {
        val: v as u64,
        uaddr: w.as_ptr() as u64,
        flags: FUTEX2_U32_PRIVATE,
        reserved: 0,
    };
    let v = [word(turn, val), word(stop, 0)];
    // SAFETY: a vector of two live words of this process, no timeout.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            v.as_ptr(),
            2,
            0,
            std::ptr::null::<libc::timespec>(),
            libc::CLOCK_MONOTONIC,
        )
    };
    r >= 0 || errno().raw_os_error() != Some(libc::ENOSYS)
}

fn futex_waitv_thread(m: &Meter, c: &Case) -> Measured {
    let (turn, stop) = (
        Arc::new(AtomicU32::new(MASTER)),
        Arc::new(AtomicU32::new(0)),
    );
    if !waitv(&turn, PEER, &stop) {
        return Err(BenchError::of_call("futex_waitv", "5.16"));
    }
    let (t1, s1, t2, s2) = (
        Arc::clone(&turn),
        Arc::clone(&stop),
        Arc::clone(&turn),
        Arc::clone(&stop),
    );
    let peer = PeerThread::spawn(
        c.peer_cpu(),
        m.allowed.clone(),
        move |_| {
            while s1.load(Ordering::SeqCst) == 0 {
                if t1.load(Ordering::SeqCst) == PEER {
                    t1.store(MASTER, Ordering::SeqCst);
                    futex_wake(&t1, true);
                } else {
                    waitv(&t1, MASTER, &s1);
                }
            }
        },
        move || {
            s2.store(1, Ordering::SeqCst);
            futex_wake(&s2, true);
            futex_wake(&t2, true);
        },
    )?;
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            turn.store(PEER, Ordering::SeqCst);
            futex_wake(&turn, true);
            while turn.load(Ordering::SeqCst) == PEER {
                waitv(&turn, PEER, &stop);
            }
        }
        Ok(())
    });
    drop(peer);
    o
}

fn futex_proc(m: &Meter, c: &Case) -> Measured {
    let peer_cpu = c.peer_cpu();
    // The turn word lives in a page shared with the forked peer.
    let page = Mapping::anonymous(4096, true, 0)?;
    // SAFETY: the page is aligned, zero-initialised and outlives every use of `turn`.
    let turn = unsafe { &*(page.ptr() as *const AtomicU32) };
    let addr = turn as *const AtomicU32 as usize;
    let peer = PeerProc::spawn(
        peer_cpu,
        &m.allowed,
        || futex_peer(turn, false),
        move || {
            // SAFETY: the page outlives the peer (dropped after it).
            let w = unsafe { &*(addr as *const AtomicU32) };
            w.store(MASTER, Ordering::SeqCst);
            futex_wake(w, false);
        },
    )?;
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            futex_master(turn, false, &peer.dead);
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    drop(page);
    r
}

fn pipe_thread(m: &Meter, c: &Case) -> Measured {
    let peer_cpu = c.peer_cpu();
    let (to, from) = (pipe()?, pipe()?);
    let peer = PeerThread::spawn(
        peer_cpu,
        m.allowed.clone(),
        move |_| while read_byte(to[0]) && write_byte(from[1]) {},
        move || close(to[1]), // end of file stops the peer
    )?;
    let r = round_trips(m, to[1], from[0], "the peer thread stopped answering");
    drop(peer);
    for fd in [to[0], from[0], from[1]] {
        close(fd);
    }
    r
}

/// A POSIX semaphore on the heap, destroyed on drop.
struct Sem(Box<std::cell::UnsafeCell<libc::sem_t>>);

// SAFETY: sem_t is designed to be used from several threads at once.
unsafe impl Send for Sem {}
// SAFETY: as above.
unsafe impl Sync for Sem {}

impl Sem {
    fn new() -> Result<Sem, BenchError> {
        // SAFETY: zeroed storage, initialised by sem_init below before any other use.
        let s = Sem(Box::new(std::cell::UnsafeCell::new(unsafe {
            std::mem::zeroed()
        })));
        // SAFETY: a valid pointer to the semaphore's storage.
        if unsafe { libc::sem_init(s.0.get(), 0, 0) } != 0 {
            return Err(BenchError::failed("sem_init", errno()));
        }
        Ok(s)
    }
    fn post(&self) {
        // SAFETY: initialised semaphore.
        unsafe { libc::sem_post(self.0.get()) };
    }
    fn wait(&self) {
        // SAFETY: initialised semaphore; retried on EINTR.
        while unsafe { libc::sem_wait(self.0.get()) } != 0 {}
    }
}

impl Drop for Sem {
    fn drop(&mut self) {
        // SAFETY: no thread waits on it any more.
        unsafe { libc::sem_destroy(self.0.get()) };
    }
}

fn sem_thread(m: &Meter, c: &Case) -> Measured {
    let peer_cpu = c.peer_cpu();
    let to = Arc::new(Sem::new()?);
    let from = Arc::new(Sem::new()?);
    let (t, f, u) = (Arc::clone(&to), Arc::clone(&from), Arc::clone(&to));
    let peer = PeerThread::spawn(
        peer_cpu,
        m.allowed.clone(),
        move |stop| loop {
            t.wait();
            if stop.load(Ordering::SeqCst) {
                return;
            }
            f.post();
        },
        move || u.post(),
    )?;
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            to.post();
            from.wait();
        }
        Ok(())
    });
    drop(peer);
    o
}

fn yield_pair(m: &Meter, c: &Case) -> Measured {
    let peer_cpu = c.peer_cpu();
    if !c.same_cpu() {
        return Err(BenchError::Skipped(
            "sched_yield only hands the CPU to a thread on the same CPU: run with placement same"
                .into(),
        ));
    }
    let peer = PeerThread::spawn(
        peer_cpu,
        m.allowed.clone(),
        |stop| {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: plain syscall.
                unsafe { libc::sched_yield() };
            }
        },
        || {},
    )?;
    // Let the peer start and settle on the CPU.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: plain syscall.
            unsafe { libc::sched_yield() };
        }
        Ok(())
    });
    drop(peer);
    o
}
