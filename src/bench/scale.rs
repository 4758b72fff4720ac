//! scale/: what a primitive costs when N copies of it run at once, one per CPU, as processes
//! and as threads of one process: will-it-scale's test cases, which the kernel test robot
//! reports as `per_process_ops` and `per_thread_ops`. Each entry is one will-it-scale test
//! (named in its definition) and expands to `/process-N` and `/thread-N` for each N of
//! `--copies`. A result's median is the cost of one operation per task while N copies run;
//! `measuring::scaling` runs the copies and `analysis::scaling` adds each result's efficiency
//! against one copy.
//!
//! The cases follow will-it-scale's definitions: what one iteration does and what it counts
//! (a page fault per page, two per brk or lock cycle, a switch per half round trip), "separate"
//! variants on a file or directory of each copy's own, "same" variants on one file every copy
//! opens. Files live in the run's scratch directory (removed with it, whatever ends the run);
//! files will-it-scale unlinks at once are unlinked at once here too.

use std::ffi::CString;
use std::path::PathBuf;

use crate::base::model::Curve;
use crate::bench::entry::{Benchmark, Cases};
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::os::ensure_fds;
use crate::measuring::sampler::StopWhen;
use crate::measuring::scaling::board::{Task, TaskError};
use crate::measuring::scaling::{self, Mode, Shape, SysTopology};

mod bodies;

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
    getppid: "scale/getppid", wis "getppid1", Files::None, fds 0, mem 0, window 5, bodies::b_getppid,
        "one getppid()";
    page_fault_anon { memory_watch: true }: "scale/page-fault-anon", wis "page_fault1", Files::None, fds 0, mem MIB128, window 50, bodies::b_page_fault_anon,
        "a write fault on a page of a fresh 128 MiB private anonymous mapping, its munmap shared out over its pages";
    page_fault_file { memory_watch: true }: "scale/page-fault-file", wis "page_fault2", Files::None, fds 1, mem MIB128, window 50, bodies::b_page_fault_file,
        "a write fault on a page of a 128 MiB private mapping of the copy's own file (copy on write), its munmap shared out";
    page_fault_shared { memory_watch: true }: "scale/page-fault-shared", wis "page_fault3", Files::None, fds 1, mem MIB128, window 50, bodies::b_page_fault_shared,
        "a write fault on a page of a 128 MiB shared mapping of the copy's own file, its munmap shared out";
    mmap_anon: "scale/mmap-anon", wis "mmap1", Files::None, fds 0, mem 0, window 5, bodies::b_mmap_anon,
        "mmap + munmap of 128 MiB of private anonymous memory, untouched";
    mmap_file: "scale/mmap-file", wis "mmap2", Files::None, fds 1, mem 0, window 5, bodies::b_mmap_file,
        "mmap + munmap of a 128 MiB private mapping of the copy's own file, untouched";
    brk: "scale/brk", wis "brk1", Files::None, fds 0, mem 0, window 5, { before ReadBreak }, bodies::b_brk,
        "one brk() moving the break a page up or back down";
    tlb_flush { memory_watch: true }: "scale/tlb-flush", wis "tlb_flush1", Files::None, fds 1, mem MIB128, window 20, bodies::b_tlb_flush,
        "a page of a private file mapping written, madvise(MADV_DONTNEED)d and read back: a TLB flush across the CPUs the address space runs on";
    open_separate: "scale/open-separate", wis "open1", Files::Own, fds 1, mem 0, window 5, bodies::b_open,
        "open + close of the copy's own file, every copy's in one directory";
    open_dirs: "scale/open-dirs", wis "open2", Files::OwnDirs, fds 1, mem 0, window 5, bodies::b_open,
        "open + close of the copy's own file in a directory of its own";
    open_same: "scale/open-same", wis "open3", Files::Shared, fds 1, mem 0, window 5, bodies::b_open_same,
        "open + close of one file every copy opens";
    dup: "scale/dup", wis "dup1", Files::None, fds 2, mem 0, window 5, bodies::b_dup,
        "dup + close of a descriptor of the copy's own file";
    lseek_separate: "scale/lseek-separate", wis "lseek1", Files::None, fds 1, mem 0, window 5, bodies::b_lseek_separate,
        "lseek(0, SEEK_SET) on the copy's own file";
    lseek_same: "scale/lseek-same", wis "lseek2", Files::Shared, fds 1, mem 0, window 5, bodies::b_lseek_same,
        "lseek(0, SEEK_SET) on one file each copy opened";
    read_separate: "scale/read-separate", wis "read1", Files::None, fds 1, mem 0, window 5, bodies::b_read_separate,
        "read of 4 KiB of the copy's own 1 MiB file, back to its start at the end";
    read_same: "scale/read-same", wis "read2", Files::Shared, fds 1, mem 0, window 5, bodies::b_read_same,
        "read of 4 KiB of one 1 MiB file each copy opened, back to its start at the end";
    pread_separate: "scale/pread-separate", wis "pread1", Files::None, fds 1, mem 0, window 5, bodies::b_pread_separate,
        "pread of 4 KiB at offset 0 of the copy's own file";
    pread_same: "scale/pread-same", wis "pread2", Files::Shared, fds 1, mem 0, window 5, bodies::b_pread_same,
        "pread of 4 KiB at offset 0 of one file each copy opened";
    write_separate: "scale/write-separate", wis "write1", Files::None, fds 1, mem 0, window 5, bodies::b_write_separate,
        "write of 4 KiB to the copy's own file, back to its start every 1 MiB";
    pwrite_separate: "scale/pwrite-separate", wis "pwrite1", Files::None, fds 1, mem 0, window 5, bodies::b_pwrite_separate,
        "pwrite of 4 KiB at offset 0 of the copy's own file";
    pwrite_same: "scale/pwrite-same", wis "pwrite2", Files::Shared, fds 1, mem 0, window 5, bodies::b_pwrite_same,
        "pwrite of 4 KiB at offset 0 of one file each copy opened";
    lock_separate: "scale/lock-separate", wis "lock1", Files::None, fds 1, mem 0, window 5, bodies::b_lock_separate,
        "one fcntl(F_SETLKW) taking or dropping a write lock on a byte of the copy's own file";
    lock_same: "scale/lock-same", wis "lock2", Files::Shared, fds 1, mem 0, window 5, bodies::b_lock_same,
        "one fcntl(F_SETLKW) taking or dropping a write lock on a byte of one file each copy opened";
    unlink_separate: "scale/unlink-separate", wis "unlink1", Files::OwnNames, fds 1, mem 0, window 5, bodies::b_unlink,
        "create (open O_CREAT) + close + unlink of the copy's own file, every copy's in one directory";
    unlink_dirs: "scale/unlink-dirs", wis "unlink2", Files::OwnDirNames, fds 1, mem 0, window 5, bodies::b_unlink,
        "create + close + unlink of the copy's own file in a directory of its own";
    futex_wake: "scale/futex-wake", wis "futex3", Files::None, fds 0, mem 0, window 5, bodies::b_futex_wake,
        "FUTEX_WAKE_PRIVATE with no waiter";
    futex_wake_shared: "scale/futex-wake-shared", wis "futex1", Files::None, fds 0, mem 0, window 5, bodies::b_futex_wake_shared,
        "FUTEX_WAKE (shared: the key is looked up through the mapping) with no waiter";
    futex_wait: "scale/futex-wait", wis "futex4", Files::None, fds 0, mem 0, window 5, bodies::b_futex_wait,
        "FUTEX_WAIT_PRIVATE on a word that does not hold the value (returns EAGAIN at once)";
    futex_wait_shared: "scale/futex-wait-shared", wis "futex2", Files::None, fds 0, mem 0, window 5, bodies::b_futex_wait_shared,
        "FUTEX_WAIT (shared) on a word that does not hold the value";
    pipe_pair: "scale/pipe-pair", wis "context_switch1", Files::None, fds 4, mem 0, window 5, bodies::b_pipe_pair,
        "one switch of a pipe ping-pong between each copy and a partner of its own on its CPU: half a round trip";
    eventfd: "scale/eventfd", wis "eventfd1", Files::None, fds 1, mem 0, window 5, bodies::b_eventfd,
        "write + read of 8 bytes on an eventfd of the copy's own";
    poll_1: "scale/poll-1", wis "poll1", Files::None, fds 1, mem 0, window 5, bodies::b_poll_1,
        "poll of 1 descriptor of the copy's own, ready";
    poll_128: "scale/poll-128", wis "poll2", Files::None, fds 128, mem 0, window 5, bodies::b_poll_128,
        "poll of 128 descriptors of the copy's own files, all ready";
    posix_sem: "scale/posix-sem", wis "posix_semaphore1", Files::None, fds 0, mem 0, window 5, bodies::b_posix_sem,
        "sem_wait + sem_post on an uncontended POSIX semaphore of the copy's own";
    signal: "scale/signal", wis "signal1", Files::None, fds 0, mem 0, window 5, { before EmptySigusr1Handler }, bodies::b_signal,
        "raise(SIGUSR1) to the copy itself, delivered to an empty handler";
    sched_yield: "scale/sched-yield", wis "sched_yield", Files::None, fds 0, mem 0, window 5, bodies::b_sched_yield,
        "sched_yield() with nothing else runnable on the copy's CPU";
    unix: "scale/unix", wis "unix1", Files::None, fds 2, mem 0, window 5, bodies::b_unix,
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
    if let Some(avail_mib) = crate::measuring::os::mem_available_mib()
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

#[cfg(test)]
mod tests;
