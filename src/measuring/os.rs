//! The operating-system pieces benchmarks are built from, in one place: descriptors (pipes,
//! eventfds, socket pairs, one-byte and eventfd transfers, the descriptor limit), one mapping
//! type for anonymous memory, and the peers of two-party benchmarks (a forked process or a
//! thread). Each owns what it creates and releases it on drop, so a benchmark that fails half-way
//! leaves nothing behind.
//!
//! Failures are `BenchError`s naming the call and the OS error, ready to become a case's reason.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::error::BenchError;
use super::placement;

/// Where oscost keeps, for the whole machine, the state of what it changes outside itself and
/// the marks on what it makes there (root's, 0700): the same for every user, `XDG_DATA_HOME`
/// and PID namespace.
pub const STATE_DIR: &str = "/run/oscost";

/// Remove `path`, a file oscost keeps in a kind's directory of the state directory (a state,
/// a marker), and then that directory and the state directory itself, each only if empty
/// (`rmdir` refuses otherwise), so that a machine oscost has finished with is left without
/// `/run/oscost`. Another oscost making its file there at the same moment can find a directory
/// gone between making it and opening in it; the makers (`effects::put_back::state::hold`,
/// `marker::Marker::make`) try again.
pub fn remove_kept(path: &std::path::Path) {
    if std::fs::remove_file(path).is_ok()
        && let Some(dir) = path.parent()
    {
        prune_state_dir(dir);
    }
}

/// `dir`, a kind's directory of the state directory, and then the state directory, removed
/// where empty (`remove_kept`); nothing outside the state directory is ever touched.
pub fn prune_state_dir(dir: &std::path::Path) {
    if dir.parent() == Some(std::path::Path::new(STATE_DIR)) {
        prune_empty(dir);
    }
}

/// `dir` and then its parent, each only if empty.
fn prune_empty(dir: &std::path::Path) {
    if std::fs::remove_dir(dir).is_ok()
        && let Some(top) = dir.parent()
    {
        let _ = std::fs::remove_dir(top);
    }
}

/// An exclusive, non-blocking `flock` on `f` (close-on-exec, as std opens files, so no child
/// keeps a dead process's lock alive). The lock is the open file's: it lives while any
/// descriptor of it does.
pub fn lock_now(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Open a file oscost keeps in a directory of its own without trusting what it finds there:
/// read-write, never following a link, never blocking (a FIFO opens at once), made 0600 when
/// `create`. The caller checks what it opened (`fstat`).
pub fn open_untrusted(path: &std::path::Path, create: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// A directory of the euid's own, closed to others, not a link; made (0700) when `create` and
/// missing. `Ok(false)`: missing and not made. `Err`: why it cannot be trusted.
pub fn private_dir(path: &std::path::Path, create: bool) -> Result<bool, String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            match std::fs::DirBuilder::new().mode(0o700).create(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("cannot make {}: {e}", path.display())),
            }
            std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", path.display())),
        Ok(m) => m,
    };
    let euid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() {
        Err(format!(
            "{} is not a directory (a link or a file)",
            path.display()
        ))
    } else if meta.uid() != euid {
        Err(format!(
            "{} is owned by uid {}, not {euid}",
            path.display(),
            meta.uid()
        ))
    } else if meta.mode() & 0o077 != 0 {
        Err(format!(
            "{} is open to others (mode {:o})",
            path.display(),
            meta.mode() & 0o7777
        ))
    } else {
        Ok(true)
    }
}

/// In a child just forked from `parent` (its pid, read before the fork): `sig` when the
/// parent dies, and at once if it already has. `PR_SET_PDEATHSIG` alone misses a parent that
/// dies between the fork and the prctl; the child is then an orphan no signal ever reaches
/// (CI, 2026-11-27: a process of a run killed with SIGKILL at 888 ms was still alive a second
/// later). Only async-signal-safe calls (prctl, getppid, kill, getpid), so it may run between
/// fork and exec in a multi-threaded process.
pub fn die_with_parent(parent: libc::pid_t, sig: libc::c_int) {
    // SAFETY: integer arguments only; each call is async-signal-safe.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0);
        if libc::getppid() != parent {
            libc::kill(libc::getpid(), sig);
        }
    }
}

/// The mount points of file systems of type `fstype` in a mountinfo text (`/proc/PID/mountinfo`),
/// in its order; a point with an escaped character (a space, `\040`) is left out.
pub fn mount_points<'a>(mountinfo: &'a str, fstype: &str) -> Vec<&'a str> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let (fields, rest) = l.split_once(" - ")?;
            (rest.split_whitespace().next()? == fstype)
                .then(|| fields.split_whitespace().nth(4))
                .flatten()
        })
        .filter(|p| !p.contains('\\'))
        .collect()
}

/// The calling thread's last OS error.
pub fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A pipe, both ends close-on-exec: `[read, write]`.
pub fn pipe() -> Result<[i32; 2], BenchError> {
    let mut fds = [0; 2];
    // SAFETY: a valid out array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(BenchError::failed("pipe", errno()));
    }
    Ok(fds)
}

/// A connected pair of unix stream sockets.
pub fn socketpair() -> Result<[i32; 2], BenchError> {
    let mut sv = [0; 2];
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    // SAFETY: a valid out array of two ints.
    if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, sv.as_mut_ptr()) } != 0 {
        return Err(BenchError::failed("socketpair", errno()));
    }
    Ok(sv)
}

/// A counting eventfd, close-on-exec.
pub fn eventfd() -> Result<i32, BenchError> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(BenchError::failed("eventfd", errno()));
    }
    Ok(fd)
}

/// Close a descriptor the caller owns.
pub fn close(fd: i32) {
    // SAFETY: the caller owns `fd` and does not use it afterwards.
    unsafe { libc::close(fd) };
}

/// Write one byte; false on failure.
#[inline(always)]
pub fn write_byte(fd: i32) -> bool {
    let b = 1u8;
    // SAFETY: one byte from a live local.
    unsafe { libc::write(fd, (&b as *const u8).cast(), 1) == 1 }
}

/// Read one byte; false at end of file or on error.
#[inline(always)]
pub fn read_byte(fd: i32) -> bool {
    let mut b = 0u8;
    // SAFETY: one byte into a live local.
    unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) == 1 }
}

/// Add one to an eventfd's counter; false on failure.
#[inline(always)]
pub fn eventfd_post(fd: i32) -> bool {
    let one: u64 = 1;
    // SAFETY: eight bytes from a live local.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) == 8 }
}

/// Take an eventfd's counter, blocking while it is zero; false on failure.
#[inline(always)]
pub fn eventfd_take(fd: i32) -> bool {
    let mut v: u64 = 0;
    // SAFETY: eight bytes into a live local.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) == 8 }
}

/// Raise RLIMIT_NOFILE's soft limit to fit `needed` descriptors, or say why not.
/// A thread that could not be started, with the limits that may be why: creating a thread
/// takes a task (RLIMIT_NPROC, threads-max, pids.max) and memory for its stack (RLIMIT_DATA,
/// RLIMIT_AS); EAGAIN does not say which.
pub fn thread_failed(what: &str, e: std::io::Error) -> BenchError {
    let why = if e.raw_os_error() == Some(libc::EAGAIN)
        || e.kind() == std::io::ErrorKind::OutOfMemory
    {
        " (a task or memory limit: RLIMIT_NPROC, threads-max, pids.max, or RLIMIT_DATA/RLIMIT_AS for its stack)"
    } else {
        ""
    };
    BenchError::Failed(format!("cannot start {what}: {e}{why}"))
}

/// Raise the soft limit on open files to `needed`, or say why a case cannot have them.
pub fn ensure_fds(needed: u64) -> Result<(), BenchError> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    if rl.rlim_cur >= needed {
        return Ok(());
    }
    if rl.rlim_max < needed {
        return Err(BenchError::Failed(format!(
            "this needs {needed} file descriptors; the hard limit is {} (raise it with `ulimit -Hn` or limits.conf)",
            rl.rlim_max
        )));
    }
    rl.rlim_cur = needed;
    // SAFETY: a valid pointer; raising the soft limit up to the hard one is always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
        return Err(BenchError::failed("setrlimit(RLIMIT_NOFILE)", errno()));
    }
    Ok(())
}

/// futex(2) wait while `*word == val`: returns at once when it does not hold `val`, else when
/// woken (or on a signal). `private` for threads of one process, shared for a word in shared
/// memory (forked processes).
pub fn futex_wait(word: &AtomicU32, val: u32, private: bool) {
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

/// futex(2): wake up to `n` waiters on `word`.
pub fn futex_wake(word: &AtomicU32, n: i32, private: bool) {
    let op = libc::FUTEX_WAKE | if private { libc::FUTEX_PRIVATE_FLAG } else { 0 };
    // SAFETY: word is a live, aligned u32.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, n) };
}

/// IPIs counted in /proc/interrupts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ipis {
    /// Rescheduling interrupts (RES).
    pub resched: u64,
    /// Function-call interrupts (CAL), TLB shootdowns among them on x86.
    pub call: u64,
    /// TLB shootdowns (TLB).
    pub tlb: u64,
}

/// The IPI rows of /proc/interrupts, summed over the CPUs `cpus` (every CPU: `None`), each
/// column matched to its CPU by the header.
pub fn parse_ipis(text: &str, cpus: Option<&[usize]>) -> Ipis {
    let mut lines = text.lines();
    let header: Vec<usize> = lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("CPU")?.parse().ok())
        .collect();
    let mut out = Ipis::default();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let sum: u64 = header
            .iter()
            .zip(rest.split_whitespace().map_while(|w| w.parse::<u64>().ok()))
            .filter(|(c, _)| cpus.is_none_or(|want| want.contains(c)))
            .map(|(_, n)| n)
            .sum();
        match name.trim() {
            "RES" => out.resched += sum,
            "CAL" => out.call += sum,
            "TLB" => out.tlb += sum,
            _ => {}
        }
    }
    out
}

/// The IPIs received so far by `cpus` (every CPU: `None`).
pub fn read_ipis(cpus: Option<&[usize]>) -> Option<Ipis> {
    std::fs::read_to_string("/proc/interrupts")
        .ok()
        .map(|t| parse_ipis(&t, cpus))
}

/// MemAvailable from /proc/meminfo, MiB.
pub fn mem_available_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some(kib_field(&text, "MemAvailable")? / 1024)
}

/// The `Name:   N kB` field `name` of /proc/meminfo, a status or an smaps rollup, KiB.
pub fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Anonymous memory mapped for a benchmark, unmapped on drop. Shared mappings survive fork
/// (a word both parties see); private ones are a process's own pages.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// Map `len` bytes (0 maps nothing). `extra` flags are or-ed into MAP_ANONYMOUS and
    /// MAP_PRIVATE or MAP_SHARED.
    pub fn anonymous(len: usize, shared: bool, extra: i32) -> Result<Mapping, BenchError> {
        if len == 0 {
            return Ok(Mapping {
                ptr: std::ptr::null_mut(),
                len,
            });
        }
        let kind = if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
        // SAFETY: an anonymous mapping at an address the kernel chooses; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                kind | libc::MAP_ANONYMOUS | extra,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(BenchError::failed(&format!("mmap of {len} bytes"), errno()));
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// A private mapping with every page written, so it is resident.
    pub fn resident(len: usize) -> Result<Mapping, BenchError> {
        let m = Mapping::anonymous(len, false, libc::MAP_NORESERVE)?;
        m.touch_pages();
        Ok(m)
    }

    /// The mapping's first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length, bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Write one byte in every 4 KiB page.
    pub fn touch_pages(&self) {
        for off in (0..self.len).step_by(4096) {
            // SAFETY: `off` is inside the mapping, which is readable and writable.
            unsafe { self.ptr.add(off).write_volatile(1) };
        }
    }

    /// madvise the whole mapping.
    pub fn advise(&self, advice: i32) -> Result<(), BenchError> {
        // SAFETY: advising our own mapping over its whole length.
        if unsafe { libc::madvise(self.ptr.cast::<c_void>(), self.len, advice) } != 0 {
            return Err(BenchError::failed("madvise", errno()));
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping exactly what `anonymous` mapped.
            unsafe { libc::munmap(self.ptr.cast::<c_void>(), self.len) };
        }
    }
}

/// A forked peer process, killed and reaped on drop; a watchdog thread reaps it if it dies
/// early, marks it dead and runs `nudge` to wake a master blocked on it.
pub struct PeerProc {
    pid: libc::pid_t,
    /// Set by the watchdog once the peer has died.
    pub dead: Arc<AtomicBool>,
    stopping: Arc<AtomicBool>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl PeerProc {
    /// Fork a child that pins itself (to `cpu`, or to every allowed CPU) and runs `body`,
    /// which must make only async-signal-safe calls and return only when the master went away.
    pub fn spawn(
        cpu: Option<usize>,
        allowed: &[usize],
        body: impl FnOnce(),
        nudge: impl Fn() + Send + 'static,
    ) -> Result<PeerProc, BenchError> {
        let set = match cpu {
            Some(c) => placement::cpu_set(&[c]),
            None => placement::cpu_set(allowed),
        };
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the child makes only async-signal-safe calls (prctl, affinity, the body,
        // _exit); the parent goes on as usual.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(BenchError::failed("fork of the peer", errno()));
        }
        if pid == 0 {
            die_with_parent(parent, libc::SIGKILL);
            // SAFETY: in the child: an affinity mask built before fork.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
            }
            body();
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        let dead = Arc::new(AtomicBool::new(false));
        let stopping = Arc::new(AtomicBool::new(false));
        let (d, s) = (Arc::clone(&dead), Arc::clone(&stopping));
        let watchdog = std::thread::Builder::new().spawn(move || {
            let mut status = 0;
            // SAFETY: waiting for our own child with a valid status pointer.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && errno().raw_os_error() == Some(libc::EINTR)
            {}
            if !s.load(Ordering::SeqCst) {
                d.store(true, Ordering::SeqCst);
                nudge();
            }
        });
        let watchdog = match watchdog {
            Ok(w) => w,
            Err(e) => {
                // SAFETY: killing and reaping our own child, which no watchdog will reap.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
                return Err(thread_failed("the peer's watchdog thread", e));
            }
        };
        Ok(PeerProc {
            pid,
            dead,
            stopping,
            watchdog: Some(watchdog),
        })
    }

    /// The peer's process id (to signal it).
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Fails once the watchdog has seen the peer die.
    pub fn check(&self) -> Result<(), BenchError> {
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

/// A peer thread, stopped (its flag set, then `unblock`) and joined on drop.
pub struct PeerThread {
    stop: Arc<AtomicBool>,
    unblock: Box<dyn Fn()>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl PeerThread {
    /// Start a thread pinned to `cpu` (or allowed every CPU in `allowed`) running `body`, which
    /// returns once its stop flag is set (after `unblock` has woken it).
    pub fn spawn(
        cpu: Option<usize>,
        allowed: Vec<usize>,
        body: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
        unblock: impl Fn() + 'static,
    ) -> Result<PeerThread, BenchError> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .spawn(move || {
                let _ = match cpu {
                    Some(c) => placement::pin_current_thread(c),
                    None => placement::allow_cpus(&allowed),
                };
                body(s)
            })
            .map_err(|e| thread_failed("the peer thread", e))?;
        Ok(PeerThread {
            stop,
            unblock: Box::new(unblock),
            handle: Some(handle),
        })
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

/// A process's start time (clock ticks after boot, `/proc/PID/stat` field 22): with the pid,
/// what names one process and never a later one that reused the pid.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Spawn `cmd` as a grandchild reparented away from this process, in a session of its own:
/// its parent (the middle child) exits at once, and this process's child-subreaper flag is off
/// until that child has been reaped, so the program is no child of ours (the coordinator's reaping of every
/// child cannot reach it) and a signal to our process group or a hangup of our terminal does
/// not either. `in_child` runs in the grandchild just before exec and may call only
/// async-signal-safe functions on integers. The returned child is the middle one, already
/// reaped; its pipes (stdin, stdout) are the program's. Used for what must outlive oscost
/// long enough to put things back: the settings guard, a `--during` program's keeper.
pub fn spawn_reparented(
    cmd: &mut std::process::Command,
    in_child: impl Fn() + Send + Sync + 'static,
) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let subreaper = {
        let mut was: libc::c_int = 0;
        // SAFETY: prctl writes one int to a local that outlives the call.
        unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &raw mut was, 0, 0, 0) };
        was != 0
    };
    // A subreaper would have the program back as its child when its parent exits: the flag
    // is off for this instant (callers do this when no worker exists to lose an orphan).
    if subreaper {
        // SAFETY: integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) };
    }
    // SAFETY: between fork and exec only async-signal-safe calls (fork, _exit, setsid, and
    // what `in_child` promises).
    unsafe {
        cmd.pre_exec(move || {
            match libc::fork() {
                -1 => return Err(std::io::Error::last_os_error()),
                0 => {}
                _ => libc::_exit(0),
            }
            libc::setsid();
            in_child();
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // The flag comes back only once the middle child has been reaped. `spawn` returns when the
    // middle child's end of its exec pipe closes, which the kernel does when it closes the
    // exiting child's files, a moment before it hands that child's children to a new parent:
    // a flag set back in that moment made the grandchild ours after all, and the coordinator's
    // reaping of every child would SIGKILL it: a `--during` program's keeper (and its program,
    // given no chance to clean up) or the settings guard (nothing put back). `ab --b-during
    // 'sleep infinity'` once ended so mid-block ("its keeper ended"). A reaped child has
    // handed its children on.
    let mut middle = match spawned {
        Ok(m) => m,
        Err(e) => {
            if subreaper {
                // SAFETY: as above.
                unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            }
            return Err(e);
        }
    };
    // The pipes stay with the caller: waiting would close the child's stdin.
    let pipes = (
        middle.stdin.take(),
        middle.stdout.take(),
        middle.stderr.take(),
    );
    let _ = middle.wait();
    if subreaper {
        // SAFETY: as above.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    }
    (middle.stdin, middle.stdout, middle.stderr) = pipes;
    Ok(middle)
}

mod proc_stat;
pub use proc_stat::{ProcStat, proc_stat, ticks_ns};

/// The running kernel's configuration as text, from /proc/config.gz or
/// /boot/config-RELEASE (`release`: the running kernel's, or `None` to ask uname).
pub fn kernel_config_text(release: Option<&str>) -> Option<String> {
    use std::io::Read;
    match std::fs::File::open("/proc/config.gz") {
        Ok(f) => {
            let mut s = String::new();
            flate2::read::GzDecoder::new(f)
                .read_to_string(&mut s)
                .ok()?;
            Some(s)
        }
        Err(_) => {
            let uname = nix::sys::utsname::uname().ok();
            let release = match release {
                Some(r) => r.to_string(),
                None => uname?.release().to_string_lossy().into_owned(),
            };
            std::fs::read_to_string(format!("/boot/config-{release}")).ok()
        }
    }
}

#[cfg(test)]
mod tests;
