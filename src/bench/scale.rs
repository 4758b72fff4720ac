//! scale/: what a primitive costs when N copies of it run at once, one per CPU, as processes
//! and as threads of one process: will-it-scale's test cases, which the kernel test robot
//! reports as `per_process_ops` and `per_thread_ops`. Each entry is one will-it-scale test
//! (named in its definition) and expands to `/process-N` and `/thread-N` for each N of
//! `--copies`. A result's median is the cost of one operation per task while N copies run;
//! `harness::scaling` runs the copies and `analysis::scaling` adds each result's efficiency
//! against one copy.
//!
//! The cases follow will-it-scale's definitions: what one iteration does and what it counts
//! (a page fault per page, two per brk or lock cycle, a switch per half round trip), "separate"
//! variants on a file or directory of each copy's own, "same" variants on one file every copy
//! opens. Files live in the run's scratch directory (removed with it, whatever ends the run);
//! files will-it-scale unlinks at once are unlinked at once here too.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::AtomicU32;

use crate::base::model::Curve;
use crate::harness::case::{BenchError, Benchmark, Case, Cases, Measured, Meter};
use crate::harness::os::ensure_fds;
use crate::harness::sampler::StopWhen;
use crate::harness::scaling::{self, Mode, Shape, SysTopology, Task, TaskError};

/// Each case's cost per task against the copies running, processes and threads as two lines.
pub(crate) const SCALE_CURVE: Curve = Curve {
    name: "scale",
    title: "one operation per task while N copies run at once (will-it-scale)",
    x: "copies",
    x_desc: "copies running at once",
    y_desc: "per operation, per task",
    log2_x: false,
    series: Some(("mode", "")),
    across_family: false,
    regime: None,
};

/// The catalogue and its functions from one row per will-it-scale test case: the function's
/// name (and the entry's own fields), the id, will-it-scale's name, what the case prepares,
/// descriptors and memory per copy, a sample's window, what the process sets before its
/// copies, the body, and the definition (will-it-scale's name is added to it from the row).
macro_rules! scale_cases {
    (@before) => { Before::Nothing };
    (@before $b:ident) => { Before::$b };
    (family { $($fkey:ident : $fval:expr),* $(,)? } ;
     $( $f:ident $({ $($key:ident : $val:expr),* $(,)? })? : $id:literal, wis $wis:literal,
        $files:expr, fds $fds:literal, mem $mem:expr, window $w:literal, $({ before $b:ident },)?
        $body:path, $def:literal ; )*) => {
        /// The family's facts over an entry's defaults.
        const fn family(b: Benchmark) -> Benchmark {
            Benchmark { $($fkey: $fval,)* ..b }
        }
        /// The family's catalogue entries, in the order listed.
        pub static BENCHMARKS: &[Benchmark] = &[$(
            Benchmark {
                $($($key: $val,)*)?
                ..family(Benchmark::new(
                    $id,
                    concat!($def, " [will-it-scale ", $wis, "]"),
                    $f,
                ))
            },
        )*];
        $(
            fn $f(m: &Meter, c: &Case) -> Measured {
                measure(m, c, &Testcase {
                    id: $id,
                    wis: $wis,
                    files: $files,
                    fds: $fds,
                    memory: $mem,
                    window_ms: $w,
                    before: scale_cases!(@before $($b)?),
                    body: $body,
                })
            }
        )*
    };
}

scale_cases! {
    family { default: false, cases: Cases::Copies, curve: Some(SCALE_CURVE), preempts: true };
    getppid: "scale/getppid", wis "getppid1", Files::None, fds 0, mem 0, window 5, b_getppid,
        "one getppid()";
    page_fault_anon { memory_watch: true }: "scale/page-fault-anon", wis "page_fault1", Files::None, fds 0, mem MIB128, window 50, b_page_fault_anon,
        "a write fault on a page of a fresh 128 MiB private anonymous mapping, its munmap shared out over its pages";
    page_fault_file { memory_watch: true }: "scale/page-fault-file", wis "page_fault2", Files::None, fds 1, mem MIB128, window 50, b_page_fault_file,
        "a write fault on a page of a 128 MiB private mapping of the copy's own file (copy on write), its munmap shared out";
    page_fault_shared { memory_watch: true }: "scale/page-fault-shared", wis "page_fault3", Files::None, fds 1, mem MIB128, window 50, b_page_fault_shared,
        "a write fault on a page of a 128 MiB shared mapping of the copy's own file, its munmap shared out";
    mmap_anon: "scale/mmap-anon", wis "mmap1", Files::None, fds 0, mem 0, window 5, b_mmap_anon,
        "mmap + munmap of 128 MiB of private anonymous memory, untouched";
    mmap_file: "scale/mmap-file", wis "mmap2", Files::None, fds 1, mem 0, window 5, b_mmap_file,
        "mmap + munmap of a 128 MiB private mapping of the copy's own file, untouched";
    brk: "scale/brk", wis "brk1", Files::None, fds 0, mem 0, window 5, { before ReadBreak }, b_brk,
        "one brk() moving the break a page up or back down";
    tlb_flush { memory_watch: true }: "scale/tlb-flush", wis "tlb_flush1", Files::None, fds 1, mem MIB128, window 20, b_tlb_flush,
        "a page of a private file mapping written, madvise(MADV_DONTNEED)d and read back: a TLB flush across the CPUs the address space runs on";
    open_separate: "scale/open-separate", wis "open1", Files::Own, fds 1, mem 0, window 5, b_open,
        "open + close of the copy's own file, every copy's in one directory";
    open_dirs: "scale/open-dirs", wis "open2", Files::OwnDirs, fds 1, mem 0, window 5, b_open,
        "open + close of the copy's own file in a directory of its own";
    open_same: "scale/open-same", wis "open3", Files::Shared, fds 1, mem 0, window 5, b_open_same,
        "open + close of one file every copy opens";
    dup: "scale/dup", wis "dup1", Files::None, fds 2, mem 0, window 5, b_dup,
        "dup + close of a descriptor of the copy's own file";
    lseek_separate: "scale/lseek-separate", wis "lseek1", Files::None, fds 1, mem 0, window 5, b_lseek_separate,
        "lseek(0, SEEK_SET) on the copy's own file";
    lseek_same: "scale/lseek-same", wis "lseek2", Files::Shared, fds 1, mem 0, window 5, b_lseek_same,
        "lseek(0, SEEK_SET) on one file each copy opened";
    read_separate: "scale/read-separate", wis "read1", Files::None, fds 1, mem 0, window 5, b_read_separate,
        "read of 4 KiB of the copy's own 1 MiB file, back to its start at the end";
    read_same: "scale/read-same", wis "read2", Files::Shared, fds 1, mem 0, window 5, b_read_same,
        "read of 4 KiB of one 1 MiB file each copy opened, back to its start at the end";
    pread_separate: "scale/pread-separate", wis "pread1", Files::None, fds 1, mem 0, window 5, b_pread_separate,
        "pread of 4 KiB at offset 0 of the copy's own file";
    pread_same: "scale/pread-same", wis "pread2", Files::Shared, fds 1, mem 0, window 5, b_pread_same,
        "pread of 4 KiB at offset 0 of one file each copy opened";
    write_separate: "scale/write-separate", wis "write1", Files::None, fds 1, mem 0, window 5, b_write_separate,
        "write of 4 KiB to the copy's own file, back to its start every 1 MiB";
    pwrite_separate: "scale/pwrite-separate", wis "pwrite1", Files::None, fds 1, mem 0, window 5, b_pwrite_separate,
        "pwrite of 4 KiB at offset 0 of the copy's own file";
    pwrite_same: "scale/pwrite-same", wis "pwrite2", Files::Shared, fds 1, mem 0, window 5, b_pwrite_same,
        "pwrite of 4 KiB at offset 0 of one file each copy opened";
    lock_separate: "scale/lock-separate", wis "lock1", Files::None, fds 1, mem 0, window 5, b_lock_separate,
        "one fcntl(F_SETLKW) taking or dropping a write lock on a byte of the copy's own file";
    lock_same: "scale/lock-same", wis "lock2", Files::Shared, fds 1, mem 0, window 5, b_lock_same,
        "one fcntl(F_SETLKW) taking or dropping a write lock on a byte of one file each copy opened";
    unlink_separate: "scale/unlink-separate", wis "unlink1", Files::OwnNames, fds 1, mem 0, window 5, b_unlink,
        "create (open O_CREAT) + close + unlink of the copy's own file, every copy's in one directory";
    unlink_dirs: "scale/unlink-dirs", wis "unlink2", Files::OwnDirNames, fds 1, mem 0, window 5, b_unlink,
        "create + close + unlink of the copy's own file in a directory of its own";
    futex_wake: "scale/futex-wake", wis "futex3", Files::None, fds 0, mem 0, window 5, b_futex_wake,
        "FUTEX_WAKE_PRIVATE with no waiter";
    futex_wake_shared: "scale/futex-wake-shared", wis "futex1", Files::None, fds 0, mem 0, window 5, b_futex_wake_shared,
        "FUTEX_WAKE (shared: the key is looked up through the mapping) with no waiter";
    futex_wait: "scale/futex-wait", wis "futex4", Files::None, fds 0, mem 0, window 5, b_futex_wait,
        "FUTEX_WAIT_PRIVATE on a word that does not hold the value (returns EAGAIN at once)";
    futex_wait_shared: "scale/futex-wait-shared", wis "futex2", Files::None, fds 0, mem 0, window 5, b_futex_wait_shared,
        "FUTEX_WAIT (shared) on a word that does not hold the value";
    pipe_pair: "scale/pipe-pair", wis "context_switch1", Files::None, fds 4, mem 0, window 5, b_pipe_pair,
        "one switch of a pipe ping-pong between each copy and a partner of its own on its CPU: half a round trip";
    eventfd: "scale/eventfd", wis "eventfd1", Files::None, fds 1, mem 0, window 5, b_eventfd,
        "write + read of 8 bytes on an eventfd of the copy's own";
    poll_1: "scale/poll-1", wis "poll1", Files::None, fds 1, mem 0, window 5, b_poll_1,
        "poll of 1 descriptor of the copy's own, ready";
    poll_128: "scale/poll-128", wis "poll2", Files::None, fds 128, mem 0, window 5, b_poll_128,
        "poll of 128 descriptors of the copy's own files, all ready";
    posix_sem: "scale/posix-sem", wis "posix_semaphore1", Files::None, fds 0, mem 0, window 5, b_posix_sem,
        "sem_wait + sem_post on an uncontended POSIX semaphore of the copy's own";
    signal: "scale/signal", wis "signal1", Files::None, fds 0, mem 0, window 5, { before EmptySigusr1Handler }, b_signal,
        "raise(SIGUSR1) to the copy itself, delivered to an empty handler";
    sched_yield: "scale/sched-yield", wis "sched_yield", Files::None, fds 0, mem 0, window 5, b_sched_yield,
        "sched_yield() with nothing else runnable on the copy's CPU";
    unix: "scale/unix", wis "unix1", Files::None, fds 2, mem 0, window 5, b_unix,
        "write + read of 1 byte through a unix stream socket pair of the copy's own";
}

const MIB128: usize = 128 << 20;
const PAGE: usize = 4096;
const BUF: usize = 4096;
const FILE_1MIB: usize = 1 << 20;

/// What a case prepares before its copies start, in a directory of its own under the run's
/// scratch directory: the copies' files and directories, and one file for the "same" variants.
/// Removed on drop.
struct Prepared {
    root: PathBuf,
    dir: CString,
    /// One path per copy: a file in `root` (or in `dirs[i]`).
    own: Vec<CString>,
    /// One file every copy opens.
    shared: CString,
    /// The break every brk copy moves from (threads share one).
    brk_base: usize,
    /// The signal action before `signal` set its handler, put back on drop.
    old_sigusr1: Option<libc::sigaction>,
}

/// Where a case's files go and what it makes before its copies start.
#[derive(Clone, Copy, PartialEq)]
enum Files {
    /// Nothing in advance (files a copy makes for itself, unlinked at once, are in `root`).
    None,
    /// A file per copy, all in one directory.
    Own,
    /// A file per copy, each in a directory of its own.
    OwnDirs,
    /// Paths per copy in one directory, not created (the copy creates and unlinks them).
    OwnNames,
    /// Paths per copy, each in a directory of its own, not created.
    OwnDirNames,
    /// One file of 1 MiB every copy opens.
    Shared,
}

fn cstr(p: &std::path::Path) -> Result<CString, BenchError> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| BenchError::Failed(format!("a path with a NUL byte: {}", p.display())))
}

impl Prepared {
    fn new(m: &Meter, name: &str, n: usize, files: Files) -> Result<Prepared, BenchError> {
        let base = m.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
        let root = base.join(format!(
            "scale-{}-{}",
            name.replace('/', "-"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root)
            .map_err(|e| BenchError::failed(&format!("creating {}", root.display()), e))?;
        let mut p = Prepared {
            dir: cstr(&root)?,
            root,
            own: vec![],
            shared: CString::default(),
            brk_base: 0,
            old_sigusr1: None,
        };
        let made = |path: &std::path::Path, bytes: usize| -> Result<(), BenchError> {
            std::fs::write(path, vec![0u8; bytes])
                .map_err(|e| BenchError::failed(&format!("creating {}", path.display()), e))
        };
        for i in 0..n {
            let path = match files {
                Files::OwnDirs | Files::OwnDirNames => {
                    let d = p.root.join(format!("d{i}"));
                    std::fs::create_dir(&d)
                        .map_err(|e| BenchError::failed(&format!("creating {}", d.display()), e))?;
                    d.join("file")
                }
                _ => p.root.join(format!("f{i}")),
            };
            if matches!(files, Files::Own | Files::OwnDirs) {
                made(&path, 0)?;
            }
            p.own.push(cstr(&path)?);
        }
        if files == Files::Shared {
            let path = p.root.join("shared");
            made(&path, FILE_1MIB)?;
            p.shared = cstr(&path)?;
        }
        Ok(p)
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if let Some(old) = self.old_sigusr1.take() {
            // SAFETY: putting back the action read when the handler was set.
            unsafe { libc::sigaction(libc::SIGUSR1, &old, std::ptr::null_mut()) };
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One will-it-scale test: what each copy runs, and how it is measured.
struct Testcase {
    /// The catalogue id (names the case's directory).
    id: &'static str,
    /// will-it-scale's name of the test.
    wis: &'static str,
    /// What the case prepares.
    files: Files,
    /// Descriptors each copy holds at most.
    fds: u64,
    /// Memory each copy maps at once, bytes (checked against MemAvailable).
    memory: usize,
    /// One sample's window, ms: long enough to hold many of the case's cycles (a 128 MiB
    /// fault cycle with its munmap takes ~10 ms).
    window_ms: u64,
    /// What the process needs before its copies start, beyond files.
    before: Before,
    /// What one copy does.
    body: fn(&Task, &Prepared) -> Result<(), TaskError>,
}

/// Process-wide state a case sets before its copies start (threads share it; forked copies
/// inherit it), undone when `Prepared` drops.
#[derive(Clone, Copy)]
enum Before {
    /// Nothing.
    Nothing,
    /// Read the break once, so every brk copy moves it from the same place.
    ReadBreak,
    /// SIGUSR1 handled by a handler that does nothing (put back on drop).
    EmptySigusr1Handler,
}

/// Measure one case of `t`: its mode and copies from the case, its CPUs from the layout.
fn measure(m: &Meter, c: &Case, t: &Testcase) -> Measured {
    let mode = c
        .params
        .get("mode")
        .and_then(|v| v.as_str())
        .and_then(Mode::parse)
        .ok_or_else(|| BenchError::Failed("a scale case without its mode".into()))?;
    let n = c.int("copies")? as usize;
    if n == 0 {
        return Err(BenchError::Skipped("0 copies".into()));
    }
    if n > m.allowed.len() {
        return Err(BenchError::Skipped(format!(
            "{n} copies need {n} CPUs of their own; this run may use {} (never run oversubscribed)",
            m.allowed.len()
        )));
    }
    if let Some(avail_mib) = crate::harness::os::mem_available_mib()
        && ((t.memory * n) >> 20) as u64 > avail_mib / 2
    {
        return Err(BenchError::Skipped(format!(
            "{n} copies map {} MiB at once; {avail_mib} MiB is available",
            (t.memory * n) >> 20
        )));
    }
    ensure_fds(t.fds * 2 * n as u64 + 64)?;
    let cpus: Vec<usize> = scaling::layout(&m.allowed, m.cpu, &SysTopology)
        .into_iter()
        .take(n)
        .collect();
    let mut prepared = Prepared::new(m, t.id, n, t.files)?;
    match t.before {
        Before::Nothing => {}
        Before::ReadBreak => {
            // SAFETY: brk(0) returns the current break and changes nothing.
            prepared.brk_base = unsafe { libc::syscall(libc::SYS_brk, 0usize) } as usize;
        }
        Before::EmptySigusr1Handler => prepared.old_sigusr1 = Some(set_empty_handler()?),
    }
    let window_ns = t.window_ms * 1_000_000;
    let length_ns = match m.sampler.cfg.stop {
        StopWhen::Elapsed { ns } => ns,
        StopWhen::Precise { min_ns, .. } => min_ns,
        StopWhen::Count { n } => n as u64 * window_ns,
    }
    .max(4 * window_ns);
    let shape = Shape {
        mode,
        cpus,
        window_ns,
        warmup_ns: window_ns.max(5_000_000),
        length_ns,
        watched: m.allowed.clone(),
    };
    let body = |task: &Task| (t.body)(task, &prepared);
    let mut o = scaling::measure(&shape, &body)?;
    let tasks = match (mode, n) {
        (Mode::Process, 1) => "1 process".to_string(),
        (Mode::Thread, 1) => "1 thread".to_string(),
        (Mode::Process, n) => format!("{n} processes"),
        (Mode::Thread, n) => format!("{n} threads of one process"),
    };
    o.definition = Some(format!(
        "{}, per task while {tasks} run it at once, one per CPU (will-it-scale {}): 1e9 over one task's operations per second",
        c.definition.split(" [").next().unwrap_or(c.definition),
        t.wis
    ));
    Ok(o.param("wis", t.wis))
}

extern "C" fn empty_handler(_: libc::c_int) {}

/// Set SIGUSR1's handler to one that does nothing; returns the action it replaced.
fn set_empty_handler() -> Result<libc::sigaction, BenchError> {
    // SAFETY: zeroed sigaction structs are valid; the handler is an extern "C" fn that does
    // nothing (async-signal-safe).
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = empty_handler as *const () as usize;
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGUSR1, &act, &mut old) != 0 {
            return Err(BenchError::failed(
                "sigaction(SIGUSR1)",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(old)
    }
}

type R = Result<(), TaskError>;

/// Start with the others, then `op` until stopped; `op` says how many operations it did.
fn looped(t: &Task, mut op: impl FnMut() -> Result<u64, TaskError>) -> R {
    if !t.start() {
        return Ok(());
    }
    while t.running() {
        let k = op()?;
        t.done(k);
    }
    Ok(())
}

/// A descriptor closed on drop.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closing a descriptor this value owns.
        unsafe { libc::close(self.0) };
    }
}

fn check(rc: libc::c_long, what: &'static str) -> Result<libc::c_long, TaskError> {
    if rc < 0 {
        Err(TaskError::last(what))
    } else {
        Ok(rc)
    }
}

/// A file of the copy's own in `dir`, unlinked at once, with `bytes` of zeros written.
fn own_file(p: &Prepared, t: &Task, bytes: usize) -> Result<Fd, TaskError> {
    // SAFETY: a NUL-terminated path; O_TMPFILE makes a file with no name.
    let mut fd = unsafe { libc::open(p.dir.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, 0o600) };
    if fd < 0 {
        // A filesystem without O_TMPFILE: a name of the copy's own, unlinked at once.
        let name = format!(
            "{}/t{}-{}\0",
            p.dir.to_string_lossy(),
            t.index,
            t.mode.word()
        );
        // SAFETY: a NUL-terminated path.
        fd = unsafe {
            libc::open(
                name.as_ptr().cast(),
                libc::O_CREAT | libc::O_RDWR | libc::O_TRUNC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(TaskError::last("creating its file"));
        }
        // SAFETY: as above.
        unsafe { libc::unlink(name.as_ptr().cast()) };
    }
    let f = Fd(fd);
    let buf = [0u8; BUF];
    let mut left = bytes;
    while left > 0 {
        let k = left.min(BUF);
        check(
            // SAFETY: writing from a live buffer of at least k bytes.
            unsafe { libc::write(f.0, buf.as_ptr().cast(), k) } as libc::c_long,
            "writing its file",
        )?;
        left -= k;
    }
    Ok(f)
}

/// A sparse file of `bytes` of the copy's own, unlinked, read through once so that its pages
/// are in the page cache before timing: will-it-scale's first second does that work, and a
/// repetition (a fresh worker, a fresh file) is shorter than one pass over 128 MiB.
fn own_sparse_file(p: &Prepared, t: &Task, bytes: usize) -> Result<Fd, TaskError> {
    let f = own_file(p, t, 0)?;
    check(
        // SAFETY: a descriptor we own.
        unsafe { libc::ftruncate(f.0, bytes as libc::off_t) } as libc::c_long,
        "ftruncate of its file",
    )?;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0usize;
    while off < bytes {
        let n = check(
            // SAFETY: reading into a live buffer of its length.
            unsafe { libc::pread(f.0, buf.as_mut_ptr().cast(), buf.len(), off as libc::off_t) }
                as libc::c_long,
            "reading its file",
        )?;
        if n == 0 {
            break;
        }
        off += n as usize;
    }
    Ok(f)
}

fn open_path(path: &CString, flags: i32) -> Result<Fd, TaskError> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600) };
    if fd < 0 {
        return Err(TaskError::last("opening its file"));
    }
    Ok(Fd(fd))
}

fn b_getppid(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        // SAFETY: no arguments.
        std::hint::black_box(unsafe { libc::getppid() });
        Ok(1)
    })
}

fn map(len: usize, flags: i32, fd: i32) -> Result<*mut u8, TaskError> {
    // SAFETY: a new mapping at an address the kernel chooses.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(TaskError::last("mmap"));
    }
    Ok(p.cast())
}

fn unmap(p: *mut u8, len: usize) {
    // SAFETY: unmapping a mapping `map` made.
    unsafe { libc::munmap(p.cast(), len) };
}

/// will-it-scale's fault loop: map 128 MiB, write a byte of each page (one operation each),
/// unmap; again. Stops between pages.
fn fault_loop(t: &Task, flags: i32, fd: i32) -> R {
    if !t.start() {
        return Ok(());
    }
    while t.running() {
        let p = map(MIB128, flags, fd)?;
        for off in (0..MIB128).step_by(PAGE) {
            if !t.running() {
                break;
            }
            // SAFETY: inside the writable mapping just made.
            unsafe { p.add(off).write_volatile(0) };
            t.done(1);
        }
        unmap(p, MIB128);
    }
    Ok(())
}

fn b_page_fault_anon(t: &Task, _: &Prepared) -> R {
    fault_loop(t, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
}

fn b_page_fault_file(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    fault_loop(t, libc::MAP_PRIVATE, f.0)
}

fn b_page_fault_shared(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    fault_loop(t, libc::MAP_SHARED, f.0)
}

fn b_mmap_anon(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        let p = map(MIB128, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)?;
        unmap(p, MIB128);
        Ok(1)
    })
}

fn b_mmap_file(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    looped(t, || {
        let m = map(MIB128, libc::MAP_PRIVATE, f.0)?;
        unmap(m, MIB128);
        Ok(1)
    })
}

fn b_brk(t: &Task, p: &Prepared) -> R {
    let base = p.brk_base;
    if base == 0 {
        return Err(TaskError {
            what: "the break was not read",
            errno: 0,
        });
    }
    let r = looped(t, || {
        for addr in [base + PAGE, base] {
            // SAFETY: moving the break between the one read before the copies started and a
            // page above it; brk returns the break it set (the old one on failure).
            let now = unsafe { libc::syscall(libc::SYS_brk, addr) } as usize;
            if now != addr {
                return Err(TaskError::last("brk"));
            }
        }
        Ok(2)
    });
    // SAFETY: the break back where it was.
    unsafe { libc::syscall(libc::SYS_brk, base) };
    r
}

fn b_tlb_flush(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    if !t.start() {
        return Ok(());
    }
    while t.running() {
        let m = map(MIB128, libc::MAP_PRIVATE, f.0)?;
        let mut bad = false;
        for off in (0..MIB128).step_by(PAGE) {
            if !t.running() {
                break;
            }
            // SAFETY: inside the mapping; madvise of one of its pages.
            unsafe {
                let a = m.add(off);
                a.write_volatile(1);
                libc::madvise(a.cast(), PAGE, libc::MADV_DONTNEED);
                bad |= a.read_volatile() != 0;
            }
            t.done(1);
        }
        unmap(m, MIB128);
        if bad {
            return Err(TaskError {
                what: "a page read back after MADV_DONTNEED was not zero",
                errno: 0,
            });
        }
    }
    Ok(())
}

fn b_open(t: &Task, p: &Prepared) -> R {
    let path = &p.own[t.index];
    looped(t, || {
        drop(open_path(path, libc::O_RDWR)?);
        Ok(1)
    })
}

fn b_open_same(t: &Task, p: &Prepared) -> R {
    looped(t, || {
        drop(open_path(&p.shared, libc::O_RDWR)?);
        Ok(1)
    })
}

fn b_dup(t: &Task, p: &Prepared) -> R {
    let f = own_file(p, t, 0)?;
    looped(t, || {
        // SAFETY: duplicating a descriptor we own; the copy is closed at once.
        let d = check(unsafe { libc::dup(f.0) } as libc::c_long, "dup")?;
        drop(Fd(d as i32));
        Ok(1)
    })
}

fn lseek_loop(t: &Task, f: &Fd) -> R {
    looped(t, || {
        check(
            // SAFETY: a descriptor we own.
            unsafe { libc::lseek(f.0, 0, libc::SEEK_SET) } as libc::c_long,
            "lseek",
        )?;
        Ok(1)
    })
}

fn b_lseek_separate(t: &Task, p: &Prepared) -> R {
    lseek_loop(t, &own_file(p, t, 0)?)
}

fn b_lseek_same(t: &Task, p: &Prepared) -> R {
    lseek_loop(t, &open_path(&p.shared, libc::O_RDWR)?)
}

fn read_loop(t: &Task, f: &Fd) -> R {
    let mut buf = [0u8; BUF];
    looped(t, || {
        let n = check(
            // SAFETY: reading into a live buffer of BUF bytes.
            unsafe { libc::read(f.0, buf.as_mut_ptr().cast(), BUF) } as libc::c_long,
            "read",
        )?;
        if n == 0 {
            // SAFETY: a descriptor we own.
            unsafe { libc::lseek(f.0, 0, libc::SEEK_SET) };
        }
        Ok(1)
    })
}

fn b_read_separate(t: &Task, p: &Prepared) -> R {
    read_loop(t, &own_file(p, t, FILE_1MIB)?)
}

fn b_read_same(t: &Task, p: &Prepared) -> R {
    read_loop(t, &open_path(&p.shared, libc::O_RDONLY)?)
}

fn pread_loop(t: &Task, f: &Fd) -> R {
    let mut buf = [0u8; BUF];
    looped(t, || {
        check(
            // SAFETY: reading into a live buffer of BUF bytes.
            unsafe { libc::pread(f.0, buf.as_mut_ptr().cast(), BUF, 0) } as libc::c_long,
            "pread",
        )?;
        Ok(1)
    })
}

fn b_pread_separate(t: &Task, p: &Prepared) -> R {
    pread_loop(t, &own_file(p, t, BUF)?)
}

fn b_pread_same(t: &Task, p: &Prepared) -> R {
    pread_loop(t, &open_path(&p.shared, libc::O_RDONLY)?)
}

fn b_write_separate(t: &Task, p: &Prepared) -> R {
    let f = own_file(p, t, 0)?;
    let buf = [0u8; BUF];
    let mut size = 0usize;
    looped(t, || {
        let n = check(
            // SAFETY: writing from a live buffer of BUF bytes.
            unsafe { libc::write(f.0, buf.as_ptr().cast(), BUF) } as libc::c_long,
            "write",
        )?;
        size += n as usize;
        if size >= FILE_1MIB {
            size = 0;
            // SAFETY: a descriptor we own.
            unsafe { libc::lseek(f.0, 0, libc::SEEK_SET) };
        }
        Ok(1)
    })
}

fn pwrite_loop(t: &Task, f: &Fd) -> R {
    let buf = [0u8; BUF];
    looped(t, || {
        check(
            // SAFETY: writing from a live buffer of BUF bytes.
            unsafe { libc::pwrite(f.0, buf.as_ptr().cast(), BUF, 0) } as libc::c_long,
            "pwrite",
        )?;
        Ok(1)
    })
}

fn b_pwrite_separate(t: &Task, p: &Prepared) -> R {
    pwrite_loop(t, &own_file(p, t, 0)?)
}

fn b_pwrite_same(t: &Task, p: &Prepared) -> R {
    pwrite_loop(t, &open_path(&p.shared, libc::O_RDWR)?)
}

fn lock_loop(t: &Task, f: &Fd) -> R {
    // SAFETY: a zeroed flock is valid; its fields are set below.
    let mut lk: libc::flock = unsafe { std::mem::zeroed() };
    lk.l_whence = libc::SEEK_SET as i16;
    lk.l_start = 0;
    lk.l_len = 1;
    looped(t, || {
        for kind in [libc::F_WRLCK, libc::F_UNLCK] {
            lk.l_type = kind as i16;
            check(
                // SAFETY: a descriptor we own and a valid flock.
                unsafe { libc::fcntl(f.0, libc::F_SETLKW, &lk) } as libc::c_long,
                "fcntl(F_SETLKW)",
            )?;
        }
        Ok(2)
    })
}

fn b_lock_separate(t: &Task, p: &Prepared) -> R {
    lock_loop(t, &own_file(p, t, 0)?)
}

fn b_lock_same(t: &Task, p: &Prepared) -> R {
    lock_loop(t, &open_path(&p.shared, libc::O_RDWR)?)
}

fn b_unlink(t: &Task, p: &Prepared) -> R {
    let path = &p.own[t.index];
    looped(t, || {
        drop(open_path(path, libc::O_RDWR | libc::O_CREAT)?);
        check(
            // SAFETY: a NUL-terminated path.
            unsafe { libc::unlink(path.as_ptr()) } as libc::c_long,
            "unlink",
        )?;
        Ok(1)
    })
}

/// A futex call that returns at once, each operation: a wake with no waiter, or a wait on a
/// value the word does not hold (0, not 1).
fn futex_loop(t: &Task, wake: bool, private: bool) -> R {
    let word = AtomicU32::new(0);
    looped(t, || {
        if wake {
            super::futex_wake(&word, private);
        } else {
            super::futex_wait(&word, 1, private);
        }
        Ok(1)
    })
}

fn b_futex_wake(t: &Task, _: &Prepared) -> R {
    futex_loop(t, true, true)
}

fn b_futex_wake_shared(t: &Task, _: &Prepared) -> R {
    futex_loop(t, true, false)
}

fn b_futex_wait(t: &Task, _: &Prepared) -> R {
    futex_loop(t, false, true)
}

fn b_futex_wait_shared(t: &Task, _: &Prepared) -> R {
    futex_loop(t, false, false)
}

fn pipe_pair_fds() -> Result<[Fd; 4], TaskError> {
    let (mut a, mut b) = ([0i32; 2], [0i32; 2]);
    // SAFETY: valid out arrays of two descriptors.
    if unsafe { libc::pipe2(a.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(TaskError::last("pipe"));
    }
    // SAFETY: as above.
    if unsafe { libc::pipe2(b.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let e = TaskError::last("pipe");
        drop((Fd(a[0]), Fd(a[1])));
        return Err(e);
    }
    Ok([Fd(a[0]), Fd(a[1]), Fd(b[0]), Fd(b[1])])
}

/// The partner: a byte in from `r`, a byte out to `w`, until end of file.
fn partner(r: i32, w: i32) {
    let mut c = 0u8;
    loop {
        // SAFETY: one byte into a live byte, then out of it.
        let n = unsafe { libc::read(r, (&raw mut c).cast(), 1) };
        if n == 1 {
            // SAFETY: as above.
            if unsafe { libc::write(w, (&raw const c).cast(), 1) } != 1 {
                return;
            }
        } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

fn b_pipe_pair(t: &Task, _: &Prepared) -> R {
    let [to_r, to_w, back_r, back_w] = pipe_pair_fds()?;
    let (pr, pw) = (to_r.0, back_w.0);
    // The partner runs on the copy's CPU (it inherits the copy's affinity), as
    // will-it-scale's new_task does.
    let pingpong = |tw: i32, br: i32| {
        let mut c = 0u8;
        looped(t, || {
            // SAFETY: one byte out of and back into a live byte.
            unsafe {
                if libc::write(tw, (&raw const c).cast(), 1) != 1 {
                    return Err(TaskError::last("write to the partner"));
                }
                if libc::read(br, (&raw mut c).cast(), 1) != 1 {
                    return Err(TaskError::last("read from the partner"));
                }
            }
            Ok(2)
        })
    };
    match t.mode {
        Mode::Thread => std::thread::scope(|s| {
            let h = std::thread::Builder::new()
                .spawn_scoped(s, move || partner(pr, pw))
                .map_err(|_| TaskError::last("starting the partner thread"))?;
            let r = pingpong(to_w.0, back_r.0);
            // End of file tells the partner to leave.
            drop(to_w);
            let _ = h.join();
            r
        }),
        Mode::Process => {
            // SAFETY: the child pins nothing new (it inherits the copy's CPU), makes only
            // read/write calls, and leaves with _exit.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(TaskError::last("fork of the partner"));
            }
            if pid == 0 {
                // SAFETY: integer prctl; the write end to itself closed so EOF can come.
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    libc::close(to_w.0);
                    libc::close(back_r.0);
                }
                partner(pr, pw);
                // SAFETY: leaves without destructors.
                unsafe { libc::_exit(0) };
            }
            drop((to_r, back_w));
            let r = pingpong(to_w.0, back_r.0);
            drop(to_w);
            // SAFETY: our own child, which leaves at end of file (killed if it did not).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            r
        }
    }
}

fn b_eventfd(t: &Task, _: &Prepared) -> R {
    // SAFETY: a new eventfd.
    let f = Fd(check(unsafe { libc::eventfd(0, 0) } as libc::c_long, "eventfd")? as i32);
    let one: u64 = 1;
    let mut got: u64 = 0;
    looped(t, || {
        // SAFETY: 8 bytes out of and into live u64s.
        unsafe {
            if libc::write(f.0, (&raw const one).cast(), 8) != 8 {
                return Err(TaskError::last("write to the eventfd"));
            }
            if libc::read(f.0, (&raw mut got).cast(), 8) != 8 {
                return Err(TaskError::last("read of the eventfd"));
            }
        }
        Ok(1)
    })
}

fn poll_loop(t: &Task, p: &Prepared, n: usize) -> R {
    let files: Vec<Fd> = (0..n)
        .map(|_| own_file(p, t, 0))
        .collect::<Result<_, _>>()?;
    let mut fds: Vec<libc::pollfd> = files
        .iter()
        .map(|f| libc::pollfd {
            fd: f.0,
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    looped(t, || {
        check(
            // SAFETY: a live array of n pollfds; timeout 0.
            unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, 0) } as libc::c_long,
            "poll",
        )?;
        Ok(1)
    })
}

fn b_poll_1(t: &Task, p: &Prepared) -> R {
    poll_loop(t, p, 1)
}

fn b_poll_128(t: &Task, p: &Prepared) -> R {
    poll_loop(t, p, 128)
}

fn b_posix_sem(t: &Task, _: &Prepared) -> R {
    // SAFETY: a zeroed sem_t initialised below, private to this copy, destroyed after.
    let mut sem: libc::sem_t = unsafe { std::mem::zeroed() };
    // SAFETY: initialising the semaphore we own.
    if unsafe { libc::sem_init(&mut sem, 0, 1) } != 0 {
        return Err(TaskError::last("sem_init"));
    }
    let r = looped(t, || {
        // SAFETY: an initialised semaphore of value 1: the wait takes it, the post gives it
        // back.
        unsafe {
            libc::sem_wait(&mut sem);
            libc::sem_post(&mut sem);
        }
        Ok(1)
    });
    // SAFETY: no one waits on it.
    unsafe { libc::sem_destroy(&mut sem) };
    r
}

fn b_signal(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        // SAFETY: SIGUSR1's handler (set before the copies started) does nothing.
        if unsafe { libc::raise(libc::SIGUSR1) } != 0 {
            return Err(TaskError::last("raise"));
        }
        Ok(1)
    })
}

fn b_sched_yield(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        // SAFETY: no arguments.
        unsafe { libc::sched_yield() };
        Ok(1)
    })
}

fn b_unix(t: &Task, _: &Prepared) -> R {
    let mut sv = [0i32; 2];
    // SAFETY: a valid out array of two descriptors.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) } != 0 {
        return Err(TaskError::last("socketpair"));
    }
    let (a, b) = (Fd(sv[0]), Fd(sv[1]));
    let mut c = 0u8;
    looped(t, || {
        // SAFETY: one byte out of and into a live byte.
        unsafe {
            if libc::write(a.0, (&raw const c).cast(), 1) != 1 {
                return Err(TaskError::last("write to the socket"));
            }
            if libc::read(b.0, (&raw mut c).cast(), 1) != 1 {
                return Err(TaskError::last("read from the socket"));
            }
        }
        Ok(1)
    })
}

#[cfg(test)]
mod tests;
