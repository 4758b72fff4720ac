//! spawn/: creating processes and threads. Every operation is timed on its own and every time
//! is kept (a per-iteration plot shows the spikes). The worker is pinned, so children start on
//! the same CPU; a child preempting its parent is part of the cost, not noise.
//!
//! vfork and clone(CLONE_VM) run their child on a stack of its own through clone(2): that is
//! what vfork() does inside the kernel (CLONE_VM | CLONE_VFORK), without a Rust frame that
//! returns twice. Exec benchmarks run `oscost-helper` (csrc/helper.c: static, no libc), which
//! oscost embeds and executes from a memfd, so nothing is written to disk. Outside the default
//! suite: pidfd_open, pidfd_send_signal, and clone3 with CLONE_PIDFD reaped through the pidfd
//! (`waitid(P_PIDFD)`), also with CLONE_INTO_CGROUP into the cgroup the run makes for it
//! (`Benchmark::cgroup`), each skipped with the kernel's reason where it lacks the call.

use std::ffi::{CString, c_char, c_int, c_void};
use std::ptr::null_mut;

use crate::catalogue;

use crate::base::model::Curve;
use crate::bench::entry::{Among, Cases, Expect};
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::clock::{Clock, Monotonic};
use crate::measuring::memory::AddressSpace;
use crate::measuring::os::{Mapping, errno};
use crate::measuring::sampler::SamplerConfig;

catalogue! {
    family { memory_watch: true };
    "spawn/fork" => fork {
        preempts: true,
        peer: Some("lmbench lat_proc fork"),
        events: crate::expect_events![
            (Among::All, "context-switches", Expect::AtLeast(0.95)),
            (Among::All, "minor-faults", Expect::AtLeast(1.0)),
        ],
        ladder: Some("spawn/fork"),
    }:
        "fork + _exit in the child + waitpid in the parent";
    "spawn/fork-parent" => fork_parent { preempts: true }:
        "fork, until it returns in the parent (the child is reaped untimed)";
    "spawn/fork-child" => fork_child { preempts: true }:
        "fork, until the child first runs (its clock read, via shared memory)";
    "spawn/vfork" => vfork { preempts: true, ladder: Some("spawn/vfork") }:
        "vfork (clone CLONE_VM|CLONE_VFORK) + _exit + waitpid";
    "spawn/clone-vm" => clone_vm { preempts: true }:
        "clone(CLONE_VM) with a 16 KiB stack + _exit + waitpid";
    "spawn/posix-spawn" => posix_spawn { preempts: true }:
        "posix_spawn of a tiny static program + waitpid";
    "spawn/fork-exec" => fork_exec { preempts: true, ladder: Some("spawn/fork-exec") }:
        "fork + execve of a tiny static program (no libc, no loader) + waitpid";
    "spawn/fork-exec-dynamic" => fork_exec_dynamic { preempts: true, ladder: Some("spawn/fork-exec-dynamic") }:
        "fork + execve of /bin/true (adds the dynamic loader and libc) + waitpid";
    "spawn/exec" => exec_chain { preempts: true }:
        "one execve of a tiny static program, from a chain of 20 re-executions";
    "spawn/thread" => thread_default { preempts: true, ladder: Some("spawn/thread") }:
        "pthread_create + pthread_join, default attributes (8 MiB stack)";
    "spawn/thread-64k" => thread_64k { preempts: true }:
        "pthread_create + pthread_join with a 64 KiB stack";
    "spawn/thread-scope-system" => thread_scope_system { preempts: true }:
        "pthread_create + join with PTHREAD_SCOPE_SYSTEM (a kernel thread per thread)";
    "spawn/thread-scope-process" => thread_scope_process { preempts: true }:
        "pthread_create + join with PTHREAD_SCOPE_PROCESS (user-level scheduling)";
    "spawn/fork-rss" => fork_rss {
        cases: Cases::ForkSizes, curve: Some(FORK_RSS_CURVE), preempts: true, default: false,
    }:
        "fork + _exit + waitpid against the parent's resident memory (--fork-sizes)";
    "spawn/shell" => shell { preempts: true, default: false, peer: Some("lmbench lat_proc shell") }:
        "fork + execve of /bin/sh -c exit + waitpid: a shell started to run a command that is a builtin";
    "spawn/pidfd-open" => pidfd_open { default: false }:
        "pidfd_open of the calling process + close of the descriptor";
    "spawn/pidfd-send-signal" => pidfd_send_signal { default: false }:
        "pidfd_send_signal with signal 0 (the right to signal checked, nothing sent) through a pidfd of the calling process";
    "spawn/clone3-pidfd" => clone3_pidfd {
        preempts: true,
        default: false,
        // A process like fork's: its child runs (a switch) and its first write faults.
        events: crate::expect_events![
            (Among::All, "context-switches", Expect::AtLeast(0.95)),
            (Among::All, "minor-faults", Expect::AtLeast(1.0)),
        ],
    }:
        "clone3 with CLONE_PIDFD + _exit in the child + waitid(P_PIDFD) in the parent + close of the pidfd";
    "spawn/clone3-into-cgroup" => clone3_into_cgroup {
        preempts: true,
        default: false,
        cgroup: true,
        events: crate::expect_events![
            (Among::All, "context-switches", Expect::AtLeast(0.95)),
            (Among::All, "minor-faults", Expect::AtLeast(1.0)),
        ],
    }:
        "clone3 with CLONE_PIDFD | CLONE_INTO_CGROUP (5.7) into a cgroup the run made + _exit in the child + waitid(P_PIDFD) + close of the pidfd: spawn/clone3-pidfd with the child started in another cgroup";
}

/// Fork's cost against the parent's resident memory, as reports draw it.
const FORK_RSS_CURVE: Curve = Curve {
    name: "fork-rss",
    title: "fork + exit + wait against the parent's resident memory",
    x: "rss_mib",
    x_desc: "parent resident memory (MiB)",
    y_desc: "per fork",
    log2_x: false,
    series: None,
    across_family: false,
    regime: None,
};

/// A failed fork or clone, with what to check.
fn spawn_error(what: &str) -> BenchError {
    let e = errno();
    let hint = match e.raw_os_error() {
        Some(libc::EAGAIN) => {
            " (a process limit was reached: RLIMIT_NPROC, see `ulimit -u`, or the cgroup's pids.max)"
        }
        Some(libc::ENOMEM) => " (out of memory, or the memory limit was reached)",
        _ => "",
    };
    BenchError::Failed(format!("{what}: {e}{hint}"))
}

/// Reap `pid`; its exit must be 0.
fn reap(pid: libc::pid_t) -> Result<(), BenchError> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && errno().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Err(BenchError::failed("waitpid", errno()));
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(BenchError::Failed(format!(
            "child exited with status {}",
            libc::WEXITSTATUS(status)
        )))
    } else {
        Err(BenchError::Failed(format!(
            "child killed by signal {}",
            libc::WTERMSIG(status)
        )))
    }
}

fn fork(m: &Meter, _: &Case) -> Measured {
    with_parent(m.individual(&mut || fork_once(&Monotonic)))
}

/// A fork's outcome with the parent that forked (`AddressSpace`: its mappings, those with
/// anonymous pages, its anonymous KiB, the 2 MiB regions they lie in, its page-table KiB), read
/// once after the samples. A fork's cost is per mapping, per anonymous page and per table page
/// it copies, and the worker is a Rust process (here 36 mappings, 16 of them with 672 KiB
/// anonymous in 6 regions, most of it the binary's relocated read-only data), not a course
/// program's few pages: the figures say which a fork here is set beside (docs/design-notes.md,
/// "Why the fork profiles differ").
fn with_parent(o: Measured) -> Measured {
    let o = o?;
    Ok(match AddressSpace::own() {
        Some(a) => o
            .param("parent_mappings", a.mappings)
            .param("parent_anon_mappings", a.anon_mappings)
            .param("parent_anon_kib", a.anon_kib)
            .param("parent_anon_regions", a.anon_regions)
            .param("parent_page_table_kib", a.page_table_kib),
        None => o,
    })
}

/// One fork + _exit + waitpid, timed.
fn fork_once(clock: &Monotonic) -> Result<f64, BenchError> {
    let t0 = clock.now_ns();
    // SAFETY: the child calls only _exit.
    match unsafe { libc::fork() } {
        -1 => Err(spawn_error("fork")),
        // SAFETY: ends the child at once.
        0 => unsafe { libc::_exit(0) },
        pid => {
            reap(pid)?;
            Ok((clock.now_ns() - t0) as f64)
        }
    }
}

fn fork_parent(m: &Meter, _: &Case) -> Measured {
    let clock = Monotonic;
    with_parent(m.individual(&mut || {
        let t0 = clock.now_ns();
        // SAFETY: the child calls only _exit.
        match unsafe { libc::fork() } {
            -1 => Err(spawn_error("fork")),
            // SAFETY: ends the child at once.
            0 => unsafe { libc::_exit(0) },
            pid => {
                let t1 = clock.now_ns();
                reap(pid)?;
                Ok((t1 - t0) as f64)
            }
        }
    }))
}

fn fork_child(m: &Meter, _: &Case) -> Measured {
    let clock = Monotonic;
    // A page shared with the children (MAP_SHARED survives fork) for their timestamp.
    let stamp = Mapping::anonymous(4096, true, 0)?;
    let p = stamp.ptr().cast::<u64>();
    with_parent(m.individual(&mut || {
        // SAFETY: p points into the live shared page.
        unsafe { p.write_volatile(0) };
        let t0 = clock.now_ns();
        // SAFETY: the child reads the vDSO clock, stores to shared memory and _exits: all
        // async-signal-safe.
        match unsafe { libc::fork() } {
            -1 => Err(spawn_error("fork")),
            // SAFETY: in the child: a store to the live shared page, then _exit.
            0 => unsafe {
                p.write_volatile(clock.now_ns());
                libc::_exit(0)
            },
            pid => {
                reap(pid)?;
                // SAFETY: as above; the child has exited.
                let t1 = unsafe { p.read_volatile() };
                if t1 < t0 {
                    return Err(BenchError::Failed("the child left no timestamp".into()));
                }
                Ok((t1 - t0) as f64)
            }
        }
    }))
}

extern "C" fn child_exit(_: *mut c_void) -> c_int {
    // SAFETY: ends this child only (no CLONE_THREAD, so exit_group is its own group).
    unsafe { libc::_exit(0) }
}

/// clone(2) with `flags` running `child_exit` on a stack of `stack_size` bytes; timed to reaped.
fn clone_bench(m: &Meter, flags: c_int, stack_size: usize) -> Measured {
    let clock = Monotonic;
    let mut stack = vec![0u8; stack_size];
    // The stack grows down on every Linux architecture oscost runs on; keep 16-byte alignment.
    let top = ((stack.as_mut_ptr() as usize + stack_size) & !15) as *mut c_void;
    m.individual(&mut || {
        let t0 = clock.now_ns();
        // SAFETY: the child runs child_exit on its own stack and exits; the parent reaps it
        // before the stack can be reused.
        let pid = unsafe { libc::clone(child_exit, top, flags | libc::SIGCHLD, null_mut()) };
        if pid < 0 {
            return Err(spawn_error("clone"));
        }
        reap(pid)?;
        Ok((clock.now_ns() - t0) as f64)
    })
}

fn vfork(m: &Meter, _: &Case) -> Measured {
    clone_bench(m, libc::CLONE_VM | libc::CLONE_VFORK, 64 * 1024)
}

fn clone_vm(m: &Meter, _: &Case) -> Measured {
    clone_bench(m, libc::CLONE_VM, 16 * 1024)
}

/// The embedded static helper, materialised in a memfd for as long as this lives.
struct Helper {
    /// Keeps the memfd (and so `path`) alive.
    _fd: std::os::fd::OwnedFd,
    path: CString,
}

#[cfg(oscost_helper)]
const HELPER_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/oscost-helper"));
#[cfg(not(oscost_helper))]
const HELPER_BYTES: &[u8] = &[];

impl Helper {
    fn load() -> Result<Helper, BenchError> {
        use std::io::Write;
        use std::os::fd::{AsRawFd, FromRawFd};
        if HELPER_BYTES.is_empty() {
            return Err(BenchError::Skipped(
                "the static helper could not be built for this architecture".into(),
            ));
        }
        let name = CString::new("oscost-helper").expect("no NUL");
        // SAFETY: valid name; the fd is owned below.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(BenchError::failed("memfd_create", errno()));
        }
        // SAFETY: raw is a fresh fd we own.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        let mut f = std::fs::File::from(fd.try_clone().map_err(|e| BenchError::failed("dup", e))?);
        f.write_all(HELPER_BYTES)
            .map_err(|e| BenchError::failed("write helper", e))?;
        let path = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL");
        Ok(Helper { _fd: fd, path })
    }
}

/// argv/envp for execve, built before any fork (allocation is not safe in the child).
struct ExecArgs {
    path: CString,
    _strings: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

impl ExecArgs {
    fn new(path: &CString, args: &[&str]) -> ExecArgs {
        let strings: Vec<CString> = args
            .iter()
            .map(|a| CString::new(*a).expect("no NUL"))
            .collect();
        let mut argv: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        argv.push(std::ptr::null());
        ExecArgs {
            path: path.clone(),
            _strings: strings,
            argv,
            envp: vec![std::ptr::null()],
        }
    }

    /// fork + execve + waitpid, timed.
    fn fork_exec(&self, clock: &Monotonic) -> Result<f64, BenchError> {
        let t0 = clock.now_ns();
        // SAFETY: the child calls only execve and _exit with pointers prepared before fork.
        match unsafe { libc::fork() } {
            -1 => Err(spawn_error("fork")),
            // SAFETY: in the child: execve with pointers prepared before fork, then _exit.
            0 => unsafe {
                libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
                libc::_exit(127)
            },
            pid => {
                reap(pid).map_err(|e| match e {
                    BenchError::Failed(r) if r.contains("127") => {
                        BenchError::Failed(format!("execve {:?} failed in the child", self.path))
                    }
                    e => e,
                })?;
                Ok((clock.now_ns() - t0) as f64)
            }
        }
    }
}

fn fork_exec(m: &Meter, _: &Case) -> Measured {
    let h = Helper::load()?;
    let args = ExecArgs::new(&h.path, &["oscost-helper"]);
    m.individual(&mut || args.fork_exec(&Monotonic))
}

fn fork_exec_dynamic(m: &Meter, _: &Case) -> Measured {
    let path = ["/bin/true", "/usr/bin/true"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or_else(|| BenchError::Skipped("no /bin/true on this system".into()))?;
    let c = CString::new(path).expect("no NUL");
    let args = ExecArgs::new(&c, &["true"]);
    Ok(m.individual(&mut || args.fork_exec(&Monotonic))?
        .param("program", path))
}

fn shell(m: &Meter, _: &Case) -> Measured {
    let path = "/bin/sh";
    if !std::path::Path::new(path).exists() {
        return Err(BenchError::Skipped("no /bin/sh on this system".into()));
    }
    let c = CString::new(path).expect("no NUL");
    let args = ExecArgs::new(&c, &["sh", "-c", "exit"]);
    Ok(m.individual(&mut || args.fork_exec(&Monotonic))?
        .param("program", path))
}

fn posix_spawn(m: &Meter, _: &Case) -> Measured {
    let h = Helper::load()?;
    let args = ExecArgs::new(&h.path, &["oscost-helper"]);
    let clock = Monotonic;
    m.individual(&mut || {
        let t0 = clock.now_ns();
        let mut pid: libc::pid_t = 0;
        // SAFETY: valid path, argv and envp arrays, null file actions and attributes.
        let rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                args.path.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                args.argv.as_ptr() as *const *mut c_char,
                args.envp.as_ptr() as *const *mut c_char,
            )
        };
        if rc != 0 {
            return Err(BenchError::Failed(format!(
                "posix_spawn: {}",
                std::io::Error::from_raw_os_error(rc)
            )));
        }
        reap(pid)?;
        Ok((clock.now_ns() - t0) as f64)
    })
}

/// execs per chain in spawn/exec.
const EXEC_CHAIN: u64 = 20;

fn exec_chain(m: &Meter, _: &Case) -> Measured {
    let h = Helper::load()?;
    let clock = Monotonic;
    let zero = ExecArgs::new(&h.path, &["oscost-helper", "0"]);
    let chain_arg = EXEC_CHAIN.to_string();
    let chain = ExecArgs::new(&h.path, &["oscost-helper", &chain_arg]);
    // What a chain costs besides its re-executions: fork, the first exec, exit, wait.
    let mut base = Vec::new();
    for _ in 0..15 {
        base.push(zero.fork_exec(&clock)?);
    }
    let base_ns = crate::base::stats::median(&base);
    let mut o = m
        .individual(&mut || Ok((chain.fork_exec(&clock)? - base_ns) / EXEC_CHAIN as f64))?
        .param("chain", EXEC_CHAIN)
        .param("chain_overhead_ns", base_ns);
    o.definition = Some(format!(
        "one execve of a tiny static program: (a chain of {EXEC_CHAIN} re-executions - {:.1} us for its fork, first exec, exit and wait) / {EXEC_CHAIN}",
        base_ns / 1e3
    ));
    Ok(o)
}

unsafe extern "C" {
    // Not in the libc crate for Linux; glibc has it (and refuses PROCESS scope).
    fn pthread_attr_setscope(attr: *mut libc::pthread_attr_t, scope: c_int) -> c_int;
}
const PTHREAD_SCOPE_SYSTEM: c_int = 0;
const PTHREAD_SCOPE_PROCESS: c_int = 1;

extern "C" fn thread_body(_: *mut c_void) -> *mut c_void {
    null_mut()
}

/// Thread attributes, destroyed on drop.
struct Attr(libc::pthread_attr_t);

impl Attr {
    fn new() -> Result<Attr, BenchError> {
        // SAFETY: pthread_attr_init initialises the zeroed storage.
        let mut a: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to the attributes' storage.
        let rc = unsafe { libc::pthread_attr_init(&mut a) };
        if rc != 0 {
            return Err(BenchError::Failed(format!("pthread_attr_init: error {rc}")));
        }
        Ok(Attr(a))
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in new().
        unsafe { libc::pthread_attr_destroy(&mut self.0) };
    }
}

fn thread_bench(m: &Meter, attr: Option<Attr>) -> Measured {
    let clock = Monotonic;
    let attr_ptr: *const libc::pthread_attr_t =
        attr.as_ref().map_or(std::ptr::null(), |a| &a.0 as *const _);
    m.individual(&mut || {
        let t0 = clock.now_ns();
        let mut tid: libc::pthread_t = 0;
        // SAFETY: valid out pointer and attributes; the thread does nothing and is joined.
        let rc = unsafe { libc::pthread_create(&mut tid, attr_ptr, thread_body, null_mut()) };
        if rc != 0 {
            return Err(crate::measuring::os::thread_failed(
                "a thread (pthread_create)",
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        // SAFETY: joining the thread just created.
        let rc = unsafe { libc::pthread_join(tid, null_mut()) };
        if rc != 0 {
            return Err(BenchError::Failed(format!("pthread_join: error {rc}")));
        }
        Ok((clock.now_ns() - t0) as f64)
    })
}

fn thread_default(m: &Meter, _: &Case) -> Measured {
    thread_bench(m, None)
}

fn thread_64k(m: &Meter, _: &Case) -> Measured {
    let mut a = Attr::new()?;
    // SAFETY: initialised attributes.
    let rc = unsafe { libc::pthread_attr_setstacksize(&mut a.0, 64 * 1024) };
    if rc != 0 {
        return Err(BenchError::Failed(format!(
            "pthread_attr_setstacksize(64 KiB): error {rc}"
        )));
    }
    thread_bench(m, Some(a))
}

fn scoped(scope: c_int, name: &str) -> Result<Attr, BenchError> {
    let mut a = Attr::new()?;
    // SAFETY: initialised attributes.
    let rc = unsafe { pthread_attr_setscope(&mut a.0, scope) };
    match rc {
        0 => Ok(a),
        libc::ENOTSUP => Err(BenchError::Skipped(format!(
            "{name} is not supported here (Linux threads are all system scope: one kernel task each)"
        ))),
        e => Err(BenchError::Failed(format!(
            "pthread_attr_setscope({name}): {}",
            std::io::Error::from_raw_os_error(e)
        ))),
    }
}

fn thread_scope_system(m: &Meter, _: &Case) -> Measured {
    thread_bench(
        m,
        Some(scoped(PTHREAD_SCOPE_SYSTEM, "PTHREAD_SCOPE_SYSTEM")?),
    )
}

fn thread_scope_process(m: &Meter, _: &Case) -> Measured {
    thread_bench(
        m,
        Some(scoped(PTHREAD_SCOPE_PROCESS, "PTHREAD_SCOPE_PROCESS")?),
    )
}

/// One point of the curve: fork with the parent holding `rss_mib` MiB resident.
fn fork_rss(m: &Meter, c: &Case) -> Measured {
    let clock = Monotonic;
    // Big forks take tens of ms: every repetition takes ten of them at least, then stops at
    // its time (the repetitions, not the stream, give the CI).
    let cfg = SamplerConfig {
        budget_ns: m.sampler.cfg.budget_ns.max(3_000_000_000),
        min_samples: 10,
        ..m.sampler.cfg
    };
    let mem = Mapping::resident((c.int("rss_mib")? as usize) << 20)?;
    let o = with_parent(m.individual_with(cfg, &mut || fork_once(&clock)));
    drop(mem);
    o
}

/// A pidfd of the calling process.
fn own_pidfd() -> Result<i32, BenchError> {
    // SAFETY: no pointer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
    if fd < 0 {
        return Err(BenchError::of_call("pidfd_open", "5.3"));
    }
    Ok(fd)
}

fn pidfd_open(m: &Meter, _: &Case) -> Measured {
    crate::measuring::os::close(own_pidfd()?);
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            crate::measuring::os::close(own_pidfd()?);
        }
        Ok(())
    })
}

fn pidfd_send_signal(m: &Meter, _: &Case) -> Measured {
    let fd = own_pidfd()?;
    // SAFETY: signal 0 with no siginfo: only the right to signal is checked.
    let send =
        || unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd, 0, null_mut::<c_void>(), 0) };
    let r = if send() != 0 {
        Err(BenchError::of_call("pidfd_send_signal", "5.1"))
    } else {
        m.batched_fallible(&mut |n| {
            for _ in 0..n {
                if send() != 0 {
                    return Err(BenchError::failed("pidfd_send_signal", errno()));
                }
            }
            Ok(())
        })
    };
    crate::measuring::os::close(fd);
    r
}

/// clone3's arguments (`struct clone_args`, the fields up to `cgroup`: size 88).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_PIDFD: u64 = 0x1000;
const P_PIDFD: libc::idtype_t = 3;

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

fn clone3_pidfd(m: &Meter, _: &Case) -> Measured {
    clone3_reaped(m, None)
}

fn clone3_into_cgroup(m: &Meter, _: &Case) -> Measured {
    let dir = m.cgroup.clone().map_err(BenchError::Skipped)?;
    let cg = std::fs::File::open(&dir)
        .map_err(|e| BenchError::failed(&format!("open the cgroup {}", dir.display()), e))?;
    clone3_reaped(m, Some(std::os::fd::AsRawFd::as_raw_fd(&cg)))
}

/// clone3 with CLONE_PIDFD (and CLONE_INTO_CGROUP of the cgroup `cgroup`, when given), the
/// child reaped through its pidfd.
fn clone3_reaped(m: &Meter, cgroup: Option<i32>) -> Measured {
    let clock = Monotonic;
    m.individual(&mut || {
        let mut pidfd: i32 = -1;
        let args = CloneArgs {
            flags: CLONE_PIDFD | cgroup.map_or(0, |_| CLONE_INTO_CGROUP),
            pidfd: &mut pidfd as *mut i32 as u64,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: cgroup.map_or(0, |fd| fd as u64),
            ..CloneArgs::default()
        };
        let t0 = clock.now_ns();
        // SAFETY: clone3 without CLONE_VM is fork: the child gets a copy of this thread and
        // calls only _exit.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        match pid {
            -1 if cgroup.is_some() => {
                Err(BenchError::of_call("clone3 with CLONE_INTO_CGROUP", "5.7"))
            }
            -1 => Err(BenchError::of_call("clone3", "5.3")),
            // SAFETY: ends the child at once.
            0 => unsafe { libc::_exit(0) },
            _ => {
                // SAFETY: an all-zero siginfo is a valid buffer.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: waiting through the pidfd clone3 returned, with a valid buffer.
                let r =
                    unsafe { libc::waitid(P_PIDFD, pidfd as libc::id_t, &mut info, libc::WEXITED) };
                crate::measuring::os::close(pidfd);
                if r != 0 {
                    return Err(BenchError::failed("waitid(P_PIDFD)", errno()));
                }
                Ok((clock.now_ns() - t0) as f64)
            }
        }
    })
}
