//! switch/: context switches. Two parties ping-pong a token (pipes, a socketpair, eventfds,
//! futexes, semaphores, sched_yield); a sample is one round trip, which is two switches when
//! both parties share a CPU. Every benchmark runs under each requested placement (`same`: both
//! on one CPU; `cross`: two CPUs, recorded; `free`: unpinned) and its id is `BENCH@PLACEMENT`.
//! On these machines placement decides everything: same-CPU ~7 us per pipe round trip, across
//! the two vCPUs 50-120 us (waking an idle vCPU is the expensive part).
//!
//! `switch/ring` is lmbench's lat_ctx: N processes in a ring of pipes pass a token; each sums
//! S KB of its own memory before passing it on. The cost of the work that is not a switch (a
//! pipe write and read, and the sum, in one process with hot caches: lmbench's "ovr") is
//! measured and subtracted, so a result is the cost of one switch in the ring.
//!
//! Peers never outlive the benchmark: process peers are SIGKILLed and reaped, thread peers are
//! stopped and joined. A process peer that dies mid-benchmark is seen (end of file on its
//! pipe, or a watchdog thread reaping it and waking the master) and the benchmark fails with
//! that reason; one that hangs is caught by the coordinator's timeout.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{BenchError, Benchmark, Ctx, Outcome};
use crate::harness::placement;
use crate::model::Placement;

pub static BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        id: "switch/pipe-proc",
        definition: "round trip of 1 byte over two pipes between two processes (2 switches on one CPU)",
        default: true,
        run: pipe_proc,
    },
    Benchmark {
        id: "switch/pipe-thread",
        definition: "round trip of 1 byte over two pipes between two threads",
        default: true,
        run: pipe_thread,
    },
    Benchmark {
        id: "switch/futex-thread",
        definition: "round trip through a private futex (wait/wake) between two threads",
        default: true,
        run: futex_thread,
    },
    Benchmark {
        id: "switch/futex-proc",
        definition: "round trip through a shared-memory futex between two processes",
        default: true,
        run: futex_proc,
    },
    Benchmark {
        id: "switch/sem-thread",
        definition: "round trip through two POSIX semaphores (sem_post/sem_wait) between two threads",
        default: true,
        run: sem_thread,
    },
    Benchmark {
        id: "switch/eventfd-proc",
        definition: "round trip through two eventfds between two processes",
        default: true,
        run: eventfd_proc,
    },
    Benchmark {
        id: "switch/unix-proc",
        definition: "round trip of 1 byte over a unix socketpair between two processes",
        default: true,
        run: unix_proc,
    },
    Benchmark {
        id: "switch/yield-pair",
        definition: "two threads on one CPU calling sched_yield: one round trip is two yields",
        default: true,
        run: yield_pair,
    },
    Benchmark {
        id: "switch/ring",
        definition: "one context switch in lmbench's ring of N processes with S KB each (pipe and sum overhead subtracted)",
        default: true,
        run: ring,
    },
];

/// Where the two parties of a ping-pong run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    Same,
    Cross,
    Free,
}

impl Place {
    pub fn word(self) -> &'static str {
        match self {
            Place::Same => "same",
            Place::Cross => "cross",
            Place::Free => "free",
        }
    }

    pub fn parse(s: &str) -> Option<Place> {
        match s {
            "same" => Some(Place::Same),
            "cross" => Some(Place::Cross),
            "free" => Some(Place::Free),
            _ => None,
        }
    }
}

pub fn default_places() -> Vec<Place> {
    vec![Place::Same, Place::Cross]
}

/// lat_ctx's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingOptions {
    pub procs: Vec<usize>,
    pub sizes_kb: Vec<usize>,
    /// Rings run at once (lat_ctx -P).
    pub parallel: usize,
}

impl Default for RingOptions {
    fn default() -> Self {
        RingOptions {
            procs: vec![2, 4, 8, 16, 32, 64],
            sizes_kb: vec![0, 16],
            parallel: 1,
        }
    }
}

type R = Result<Vec<Outcome>, BenchError>;

pub(crate) fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// CPUs of the master and the peer for a placement, and what the result records.
fn cpus_for(
    ctx: &Ctx,
    place: Place,
) -> Result<(Option<usize>, Option<usize>, Placement), BenchError> {
    let me = ctx.opts.cpu;
    match place {
        Place::Same => Ok((Some(me), Some(me), Placement::Same { cpu: me })),
        Place::Cross => {
            // Prefer the measuring CPU's SMT sibling order: any other allowed CPU.
            let other = ctx
                .opts
                .allowed
                .iter()
                .copied()
                .find(|&c| c != me)
                .ok_or_else(|| {
                    BenchError::Skipped("cross placement needs two allowed CPUs".into())
                })?;
            Ok((
                Some(me),
                Some(other),
                Placement::Cross {
                    cpus: vec![me, other],
                },
            ))
        }
        Place::Free => Ok((None, None, Placement::Free)),
    }
}

/// Pin the calling thread to `cpu`, or let it run anywhere allowed.
fn place_self(ctx: &Ctx, cpu: Option<usize>) -> Result<(), BenchError> {
    match cpu {
        Some(c) => placement::pin_current_thread(c),
        None => placement::allow_cpus(&ctx.opts.allowed),
    }
    .map_err(BenchError::Failed)
}

pub(crate) fn pipe() -> Result<[i32; 2], BenchError> {
    let mut fds = [0; 2];
    // SAFETY: valid out array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(BenchError::failed("pipe", errno()));
    }
    Ok(fds)
}

pub(crate) fn close(fd: i32) {
    // SAFETY: closing an fd this module opened.
    unsafe { libc::close(fd) };
}

/// Write one byte; false on failure.
#[inline(always)]
pub(crate) fn put(fd: i32) -> bool {
    let b = 1u8;
    // SAFETY: one byte from a live local.
    unsafe { libc::write(fd, (&b as *const u8).cast(), 1) == 1 }
}

/// Read one byte; false at end of file or on error.
#[inline(always)]
pub(crate) fn get(fd: i32) -> bool {
    let mut b = 0u8;
    // SAFETY: one byte into a live local.
    unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) == 1 }
}

/// A forked peer process, killed and reaped on drop; a watchdog thread reaps it if it dies
/// early, marks it dead and runs `nudge` to wake a master blocked on it.
pub(crate) struct PeerProc {
    pid: libc::pid_t,
    dead: Arc<AtomicBool>,
    stopping: Arc<AtomicBool>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl PeerProc {
    /// Fork a child that pins itself and runs `body` (which must only make async-signal-safe
    /// calls and must not return normally unless the master went away).
    pub(crate) fn spawn(
        cpu: Option<usize>,
        allowed: &[usize],
        body: impl FnOnce(),
        nudge: impl Fn() + Send + 'static,
    ) -> Result<PeerProc, BenchError> {
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpu
            .as_slice()
            .iter()
            .chain(if cpu.is_none() { allowed } else { &[] })
        {
            // SAFETY: c < CPU_SETSIZE (it came from the allowed set).
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        // SAFETY: the child makes only async-signal-safe calls (affinity, the body, _exit).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(BenchError::failed("fork of the peer", errno()));
        }
        if pid == 0 {
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
            }
            body();
            unsafe { libc::_exit(0) };
        }
        let dead = Arc::new(AtomicBool::new(false));
        let stopping = Arc::new(AtomicBool::new(false));
        let (d, s) = (Arc::clone(&dead), Arc::clone(&stopping));
        let watchdog = std::thread::spawn(move || {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && errno().raw_os_error() == Some(libc::EINTR)
            {}
            if !s.load(Ordering::SeqCst) {
                d.store(true, Ordering::SeqCst);
                nudge();
            }
        });
        Ok(PeerProc {
            pid,
            dead,
            stopping,
            watchdog: Some(watchdog),
        })
    }

    pub(crate) fn check(&self) -> Result<(), BenchError> {
        if self.dead.load(Ordering::Relaxed) {
            Err(BenchError::Failed(
                "the peer process died during the benchmark".into(),
            ))
        } else {
            Ok(())
        }
    }
}

impl Drop for PeerProc {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // SAFETY: our own child (possibly already reaped by the watchdog: then ESRCH).
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
    }
}

/// A peer thread, stopped (flag + `unblock`) and joined on drop.
struct PeerThread {
    stop: Arc<AtomicBool>,
    unblock: Box<dyn Fn()>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl PeerThread {
    fn spawn(
        cpu: Option<usize>,
        allowed: Vec<usize>,
        body: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
        unblock: impl Fn() + 'static,
    ) -> PeerThread {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let _ = match cpu {
                Some(c) => placement::pin_current_thread(c),
                None => placement::allow_cpus(&allowed),
            };
            body(s)
        });
        PeerThread {
            stop,
            unblock: Box::new(unblock),
            handle: Some(handle),
        }
    }
}

impl Drop for PeerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        (self.unblock)();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Run a ping-pong benchmark under every requested placement.
pub(crate) fn each_place(
    ctx: &Ctx,
    b: &Benchmark,
    one: impl Fn(&Ctx, &Benchmark, Option<usize>, Option<usize>) -> Result<Outcome, BenchError>,
) -> R {
    let mut outs = Vec::new();
    for &place in &ctx.opts.placements {
        let id = format!("{}@{}", b.id, place.word());
        let r = cpus_for(ctx, place).and_then(|(mc, pc, rec)| {
            place_self(ctx, mc)?;
            let mut o = one(ctx, b, mc, pc)?;
            o.placement = rec;
            o.used_cpus = match (mc, pc) {
                (Some(a), Some(b)) if a == b => vec![a],
                (Some(a), Some(b)) => vec![a, b],
                _ => ctx.opts.allowed.clone(),
            };
            Ok(o)
        });
        // Back on the measuring CPU for whatever comes next.
        let _ = placement::pin_current_thread(ctx.opts.cpu);
        match r {
            Ok(mut o) => {
                o.id = id;
                o.params.insert("placement".into(), json!(place.word()));
                let m = crate::stats::median(&o.measurement.samples_ns);
                if m.is_finite() {
                    o.params
                        .insert("per_switch_median_ns".into(), json!(m / 2.0));
                }
                // Blocking hands the CPU over by design: not a disturbance.
                o.preemption_expected = true;
                outs.push(o);
            }
            Err(e) => outs.push(Outcome::failed(id, b, e)),
        }
    }
    Ok(outs)
}

fn pipe_proc(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, _, peer_cpu| {
        let (to, from) = (pipe()?, pipe()?);
        let peer = PeerProc::spawn(
            peer_cpu,
            &ctx.opts.allowed,
            || {
                close(to[1]);
                close(from[0]);
                while get(to[0]) && put(from[1]) {}
            },
            || {},
        )?;
        close(to[0]);
        close(from[1]);
        let r = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                if !(put(to[1]) && get(from[0])) {
                    return Err(BenchError::Failed(
                        "the peer process exited (end of file on its pipe)".into(),
                    ));
                }
            }
            Ok(())
        });
        close(to[1]);
        close(from[0]);
        drop(peer);
        r
    })
}

/// A connected pair of unix stream sockets.
pub(crate) fn socketpair() -> Result<[i32; 2], BenchError> {
    let mut sv = [0; 2];
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    // SAFETY: valid out array.
    if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, sv.as_mut_ptr()) } != 0 {
        return Err(BenchError::failed("socketpair", errno()));
    }
    Ok(sv)
}

fn unix_proc(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, _, peer_cpu| {
        let sv = socketpair()?;
        let peer = PeerProc::spawn(
            peer_cpu,
            &ctx.opts.allowed,
            || {
                close(sv[0]);
                while get(sv[1]) && put(sv[1]) {}
            },
            || {},
        )?;
        close(sv[1]);
        let r = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                if !(put(sv[0]) && get(sv[0])) {
                    return Err(BenchError::Failed(
                        "the peer process exited (its socket closed)".into(),
                    ));
                }
            }
            Ok(())
        });
        close(sv[0]);
        drop(peer);
        r
    })
}

pub(crate) fn eventfd() -> Result<i32, BenchError> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(BenchError::failed("eventfd", errno()));
    }
    Ok(fd)
}

#[inline(always)]
fn ev_put(fd: i32) -> bool {
    let one: u64 = 1;
    // SAFETY: 8 bytes from a live local.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) == 8 }
}

#[inline(always)]
fn ev_get(fd: i32) -> bool {
    let mut v: u64 = 0;
    // SAFETY: 8 bytes into a live local.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) == 8 }
}

fn eventfd_proc(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, _, peer_cpu| {
        let (to, from) = (eventfd()?, eventfd()?);
        // If the peer dies, the watchdog posts `from` so the master wakes and sees it.
        let peer = PeerProc::spawn(
            peer_cpu,
            &ctx.opts.allowed,
            || while ev_get(to) && ev_put(from) {},
            move || {
                ev_put(from);
            },
        )?;
        let r = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                if !(ev_put(to) && ev_get(from)) {
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
    })
}

/// futex(2) wait while `*word == val`, and wake one waiter. `private` for threads of one
/// process, shared for a word in shared memory.
fn futex_wait(word: &AtomicU32, val: u32, private: bool) {
    let op = libc::FUTEX_WAIT | if private { libc::FUTEX_PRIVATE_FLAG } else { 0 };
    // SAFETY: word is a live, aligned u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            std::ptr::null::<libc::timespec>(),
        )
    };
}

fn futex_wake(word: &AtomicU32, private: bool) {
    let op = libc::FUTEX_WAKE | if private { libc::FUTEX_PRIVATE_FLAG } else { 0 };
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, 1) };
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

fn futex_thread(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, _, peer_cpu| {
        let turn = Arc::new(AtomicU32::new(MASTER));
        let (t1, t2) = (Arc::clone(&turn), Arc::clone(&turn));
        let peer = PeerThread::spawn(
            peer_cpu,
            ctx.opts.allowed.clone(),
            move |_| futex_peer(&t1, true),
            move || {
                t2.store(QUIT, Ordering::SeqCst);
                futex_wake(&t2, true);
            },
        );
        let o = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                // A thread peer cannot die alone: nothing sets the flag.
                futex_master(&turn, true, &AtomicBool::new(false));
            }
            Ok(())
        });
        drop(peer);
        o
    })
}

/// One shared anonymous page, unmapped on drop.
struct SharedPage(*mut c_void);

impl SharedPage {
    fn new() -> Result<SharedPage, BenchError> {
        // SAFETY: anonymous shared mapping, checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(BenchError::failed("mmap", errno()));
        }
        Ok(SharedPage(p))
    }

    fn word(&self) -> &AtomicU32 {
        // SAFETY: page-aligned, zero-initialised, lives as long as self.
        unsafe { &*(self.0 as *const AtomicU32) }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: what new() mapped.
        unsafe { libc::munmap(self.0, 4096) };
    }
}

fn futex_proc(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, _, peer_cpu| {
        let page = SharedPage::new()?;
        let turn = page.word();
        let addr = turn as *const AtomicU32 as usize;
        let peer = PeerProc::spawn(
            peer_cpu,
            &ctx.opts.allowed,
            || futex_peer(turn, false),
            move || {
                // SAFETY: the page outlives the peer (dropped after it).
                let w = unsafe { &*(addr as *const AtomicU32) };
                w.store(MASTER, Ordering::SeqCst);
                futex_wake(w, false);
            },
        )?;
        let r = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                futex_master(turn, false, &peer.dead);
                peer.check()?;
            }
            Ok(())
        });
        drop(peer);
        drop(page);
        r
    })
}

fn pipe_thread(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, _, peer_cpu| {
        let (to, from) = (pipe()?, pipe()?);
        let peer = PeerThread::spawn(
            peer_cpu,
            ctx.opts.allowed.clone(),
            move |_| while get(to[0]) && put(from[1]) {},
            move || close(to[1]), // end of file stops the peer
        );
        let r = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                if !(put(to[1]) && get(from[0])) {
                    return Err(BenchError::Failed(
                        "the peer thread stopped answering".into(),
                    ));
                }
            }
            Ok(())
        });
        drop(peer);
        for fd in [to[0], from[0], from[1]] {
            close(fd);
        }
        r
    })
}

/// A POSIX semaphore on the heap, destroyed on drop.
struct Sem(Box<std::cell::UnsafeCell<libc::sem_t>>);

// SAFETY: sem_t is designed to be used from several threads at once.
unsafe impl Send for Sem {}
unsafe impl Sync for Sem {}

impl Sem {
    fn new() -> Result<Sem, BenchError> {
        // SAFETY: zeroed storage is initialised by sem_init.
        let s = Sem(Box::new(std::cell::UnsafeCell::new(unsafe {
            std::mem::zeroed()
        })));
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

fn sem_thread(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, _, peer_cpu| {
        let to = Arc::new(Sem::new()?);
        let from = Arc::new(Sem::new()?);
        let (t, f, u) = (Arc::clone(&to), Arc::clone(&from), Arc::clone(&to));
        let peer = PeerThread::spawn(
            peer_cpu,
            ctx.opts.allowed.clone(),
            move |stop| loop {
                t.wait();
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                f.post();
            },
            move || u.post(),
        );
        let o = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                to.post();
                from.wait();
            }
            Ok(())
        });
        drop(peer);
        o
    })
}

fn yield_pair(ctx: &Ctx, b: &Benchmark) -> R {
    each_place(ctx, b, |ctx, b, master_cpu, peer_cpu| {
        if master_cpu.is_none() || master_cpu != peer_cpu {
            return Err(BenchError::Skipped(
                "sched_yield only hands the CPU to a thread on the same CPU: run with placement same".into(),
            ));
        }
        let peer = PeerThread::spawn(
            peer_cpu,
            ctx.opts.allowed.clone(),
            |stop| {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: plain syscall.
                    unsafe { libc::sched_yield() };
                }
            },
            || {},
        );
        // Let the peer start and settle on the CPU.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let o = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                // SAFETY: plain syscall.
                unsafe { libc::sched_yield() };
            }
            Ok(())
        });
        drop(peer);
        o
    })
}

// ---------------------------------------------------------------- the ring (lat_ctx)

/// lmbench's sumit: read every int of `data` (4-byte ints, all of them, as lat_ctx does).
#[inline(never)]
fn sumit(data: &[i32]) -> i32 {
    data.iter().fold(0i32, |a, &x| a.wrapping_add(x))
}

/// Raise RLIMIT_NOFILE's soft limit to fit `needed` descriptors, or say why not.
pub(crate) fn ensure_fds(needed: u64) -> Result<(), BenchError> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    if rl.rlim_cur >= needed {
        return Ok(());
    }
    if rl.rlim_max < needed {
        return Err(BenchError::Failed(format!(
            "a ring this size needs {needed} file descriptors; the hard limit is {} (raise it with `ulimit -Hn` or limits.conf)",
            rl.rlim_max
        )));
    }
    rl.rlim_cur = needed;
    // SAFETY: valid pointer; raising the soft limit up to the hard one is always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
        return Err(BenchError::failed("setrlimit(RLIMIT_NOFILE)", errno()));
    }
    Ok(())
}

/// Move `r` and `w` to fds 3 and 4 and close every other fd above 2 (in a forked child).
fn keep_only(r: i32, w: i32) {
    // SAFETY: async-signal-safe fd operations in the child.
    unsafe {
        let r2 = libc::fcntl(r, libc::F_DUPFD, 100);
        let w2 = libc::fcntl(w, libc::F_DUPFD, 100);
        libc::dup2(r2, 3);
        libc::dup2(w2, 4);
        if libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, 0u32) != 0 {
            for fd in 5..65536 {
                libc::close(fd);
            }
        }
    }
}

/// A ring of `n` processes (the master is member 0), killed and reaped on drop.
struct Ring {
    pids: Vec<libc::pid_t>,
    /// Master's write end (to member 1) and read end (from member n-1).
    w: i32,
    r: i32,
}

impl Ring {
    fn new(n: usize, data: &mut [i32], cpu: usize) -> Result<Ring, BenchError> {
        ensure_fds(2 * n as u64 + 64)?;
        let mut pipes = Vec::with_capacity(n);
        let cleanup = |pipes: &Vec<[i32; 2]>| {
            for p in pipes {
                close(p[0]);
                close(p[1]);
            }
        };
        for _ in 0..n {
            match pipe() {
                Ok(p) => pipes.push(p),
                Err(e) => {
                    cleanup(&pipes);
                    return Err(e);
                }
            }
        }
        let mut ring = Ring {
            pids: Vec::with_capacity(n),
            w: pipes[0][1],
            r: pipes[n - 1][0],
        };
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe { libc::CPU_SET(cpu, &mut set) };
        let data_ptr = data.as_mut_ptr();
        let data_len = data.len();
        for i in 1..n {
            // Member i reads pipe i-1 and writes pipe i.
            let (r, w) = (pipes[i - 1][0], pipes[i][1]);
            // SAFETY: the child makes only async-signal-safe calls and touches its own
            // copy-on-write copy of `data`.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                let e = BenchError::Failed(format!(
                    "fork of ring member {i} of {n}: {}{}",
                    errno(),
                    if errno().raw_os_error() == Some(libc::EAGAIN) {
                        " (process limit: RLIMIT_NPROC or pids.max)"
                    } else {
                        ""
                    }
                ));
                cleanup(&pipes);
                drop(ring);
                return Err(e);
            }
            if pid == 0 {
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
                    keep_only(r, w);
                    let mine = std::slice::from_raw_parts_mut(data_ptr, data_len);
                    mine.iter_mut().for_each(|x| *x = 0); // make the pages this member's own
                    let mut sum = 0i32;
                    while get(3) {
                        sum = sum.wrapping_add(sumit(mine));
                        if !put(4) {
                            break;
                        }
                    }
                    std::hint::black_box(sum);
                    libc::_exit(0);
                }
            }
            ring.pids.push(pid);
        }
        for (i, p) in pipes.iter().enumerate() {
            if i != 0 {
                close(p[1]);
            }
            if i != n - 1 {
                close(p[0]);
            }
        }
        // Once around to check every member is up and to prime the caches.
        if !(put(ring.w) && get(ring.r)) {
            return Err(BenchError::Failed(
                "a ring member died while starting".into(),
            ));
        }
        Ok(ring)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        close(self.w);
        close(self.r);
        for &pid in &self.pids {
            // SAFETY: our own children.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for &pid in &self.pids {
            let mut st = 0;
            unsafe { libc::waitpid(pid, &mut st, 0) };
        }
    }
}

/// lmbench's overhead for one hop: a pipe write and read in one process, and the sum, with
/// hot caches. Per hop, ns.
fn ring_overhead(ctx: &Ctx, b: &Benchmark, data: &[i32]) -> Result<Outcome, BenchError> {
    let p = pipe()?;
    let r = ctx.batched_fallible(b, &mut |n| {
        let mut sum = 0i32;
        for _ in 0..n {
            if !(put(p[1]) && get(p[0])) {
                return Err(BenchError::failed("pipe", errno()));
            }
            sum = sum.wrapping_add(sumit(data));
        }
        std::hint::black_box(sum);
        Ok(())
    });
    close(p[0]);
    close(p[1]);
    r
}

/// One ring of `n` members with `kb` KB each on `cpu`: samples are per-hop switch costs.
fn measure_ring(
    ctx: &Ctx,
    b: &Benchmark,
    n: usize,
    kb: usize,
    cpu: usize,
    ovr_ns: f64,
) -> Result<Outcome, BenchError> {
    placement::pin_current_thread(cpu).map_err(BenchError::Failed)?;
    let mut data = vec![0i32; kb * 1024 / 4];
    let ring = Ring::new(n, &mut data, cpu)?;
    let mut o = ctx.batched_fallible(b, &mut |k| {
        let mut sum = 0i32;
        for _ in 0..k {
            if !(put(ring.w) && get(ring.r)) {
                return Err(BenchError::Failed(
                    "a ring member died (end of file on the ring)".into(),
                ));
            }
            sum = sum.wrapping_add(sumit(&data));
        }
        std::hint::black_box(sum);
        Ok(())
    })?;
    drop(ring);
    // One sample was a trip around the ring: per hop, minus the overhead.
    let m = &mut o.measurement;
    for x in &mut m.samples_ns {
        *x = *x / n as f64 - ovr_ns;
    }
    m.baseline_ns = m.baseline_ns / n as f64 + ovr_ns;
    o.placement = Placement::Same { cpu };
    o.used_cpus = vec![cpu];
    Ok(o)
}

fn ring(ctx: &Ctx, b: &Benchmark) -> R {
    let cpu = ctx.opts.cpu;
    let p = ctx.opts.ring.parallel.max(1);
    // Parallel rings (lat_ctx -P) go round the allowed CPUs, starting at the measuring one.
    let start = ctx.opts.allowed.iter().position(|&c| c == cpu).unwrap_or(0);
    let ring_cpus: Vec<usize> = (0..p)
        .map(|i| ctx.opts.allowed[(start + i) % ctx.opts.allowed.len()])
        .collect();
    let mut outs = Vec::new();
    for &kb in &ctx.opts.ring.sizes_kb {
        let data = vec![0i32; kb * 1024 / 4];
        let ovr = ring_overhead(ctx, b, &data)?;
        let ovr_ns = crate::stats::median(&ovr.measurement.samples_ns);
        for &n in &ctx.opts.ring.procs {
            let id = format!("{}/n{n}-s{kb}k", b.id);
            if n < 2 {
                outs.push(Outcome::failed(
                    id,
                    b,
                    BenchError::Skipped("a ring needs at least 2 processes".into()),
                ));
                continue;
            }
            let result = if p == 1 {
                measure_ring(ctx, b, n, kb, cpu, ovr_ns)
            } else {
                let parts: Vec<Result<Outcome, BenchError>> = std::thread::scope(|s| {
                    let hs: Vec<_> = ring_cpus
                        .iter()
                        .map(|&c| s.spawn(move || measure_ring(ctx, b, n, kb, c, ovr_ns)))
                        .collect();
                    hs.into_iter()
                        .map(|h| {
                            h.join().unwrap_or_else(|_| {
                                Err(BenchError::Failed("a ring thread panicked".into()))
                            })
                        })
                        .collect()
                });
                merge_parallel(parts, &ring_cpus)
            };
            let _ = placement::pin_current_thread(cpu);
            match result {
                Ok(mut o) => {
                    o.id = id;
                    o.preemption_expected = true;
                    o.params.insert("procs".into(), json!(n));
                    o.params.insert("size_kb".into(), json!(kb));
                    o.params.insert("overhead_ns".into(), json!(ovr_ns));
                    o.params.insert("parallel".into(), json!(p));
                    o.definition = format!(
                        "one switch in a ring of {n} processes with {kb} KB each: trip / {n} - {:.2} us overhead (pipe write+read and sum, hot caches)",
                        ovr_ns / 1e3
                    );
                    outs.push(o);
                }
                Err(e) => outs.push(Outcome::failed(id, b, e)),
            }
        }
    }
    Ok(outs)
}

/// Parallel rings as one result: every ring's samples, in ring order.
fn merge_parallel(
    parts: Vec<Result<Outcome, BenchError>>,
    cpus: &[usize],
) -> Result<Outcome, BenchError> {
    let mut it = parts.into_iter();
    let mut first = it
        .next()
        .ok_or_else(|| BenchError::Failed("no ring ran".into()))??;
    for part in it {
        let o = part?;
        let off = first.measurement.samples_ns.len();
        first
            .measurement
            .samples_ns
            .extend(o.measurement.samples_ns);
        first
            .measurement
            .preempted
            .extend(o.measurement.preempted.iter().map(|i| i + off));
        first.measurement.ends_ns.extend(o.measurement.ends_ns);
        first.cpu_after = o.cpu_after;
    }
    first.measurement.phase = None; // interleaved series: phases are not meaningful
    let mut used = cpus.to_vec();
    used.sort_unstable();
    used.dedup();
    first.placement = Placement::Cross {
        cpus: cpus.to_vec(),
    };
    first.used_cpus = used;
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_parse_and_name() {
        for p in [Place::Same, Place::Cross, Place::Free] {
            assert_eq!(Place::parse(p.word()), Some(p));
        }
        assert_eq!(Place::parse("both"), None);
    }

    #[test]
    fn sumit_reads_every_int() {
        assert_eq!(sumit(&[1, 2, 3, 4]), 10);
        assert_eq!(sumit(&[]), 0);
    }
}
