//! spawn/: creating processes and threads. Every operation is timed on its own and every time
//! is kept (a per-iteration plot shows the spikes). The worker is pinned, so children start on
//! the same CPU; a child preempting its parent is part of the cost, not noise.
//!
//! vfork and clone(CLONE_VM) run their child on a stack of its own through clone(2): that is
//! what vfork() does inside the kernel (CLONE_VM | CLONE_VFORK), without a Rust frame that
//! returns twice. Exec benchmarks run `oscost-helper` (csrc/helper.c: static, no libc), which
//! oscost embeds and executes from a memfd, so nothing is written to disk.

use std::ffi::{CString, c_char, c_int, c_void};
use std::ptr::null_mut;

use serde_json::json;

use super::{BenchError, Benchmark, Ctx, Outcome};
use crate::harness::clock::{Clock, Monotonic};
use crate::harness::sampler::SamplerConfig;

pub static BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        id: "spawn/fork",
        definition: "fork + _exit in the child + waitpid in the parent",
        default: true,
        run: fork,
    },
    Benchmark {
        id: "spawn/fork-parent",
        definition: "fork, until it returns in the parent (the child is reaped untimed)",
        default: true,
        run: fork_parent,
    },
    Benchmark {
        id: "spawn/fork-child",
        definition: "fork, until the child first runs (its clock read, via shared memory)",
        default: true,
        run: fork_child,
    },
    Benchmark {
        id: "spawn/vfork",
        definition: "vfork (clone CLONE_VM|CLONE_VFORK) + _exit + waitpid",
        default: true,
        run: vfork,
    },
    Benchmark {
        id: "spawn/clone-vm",
        definition: "clone(CLONE_VM) with a 16 KiB stack + _exit + waitpid",
        default: true,
        run: clone_vm,
    },
    Benchmark {
        id: "spawn/posix-spawn",
        definition: "posix_spawn of a tiny static program + waitpid",
        default: true,
        run: posix_spawn,
    },
    Benchmark {
        id: "spawn/fork-exec",
        definition: "fork + execve of a tiny static program (no libc, no loader) + waitpid",
        default: true,
        run: fork_exec,
    },
    Benchmark {
        id: "spawn/fork-exec-dynamic",
        definition: "fork + execve of /bin/true (adds the dynamic loader and libc) + waitpid",
        default: true,
        run: fork_exec_dynamic,
    },
    Benchmark {
        id: "spawn/exec",
        definition: "one execve of a tiny static program, from a chain of 20 re-executions",
        default: true,
        run: exec_chain,
    },
    Benchmark {
        id: "spawn/thread",
        definition: "pthread_create + pthread_join, default attributes (8 MiB stack)",
        default: true,
        run: thread_default,
    },
    Benchmark {
        id: "spawn/thread-64k",
        definition: "pthread_create + pthread_join with a 64 KiB stack",
        default: true,
        run: thread_64k,
    },
    Benchmark {
        id: "spawn/thread-scope-system",
        definition: "pthread_create + join with PTHREAD_SCOPE_SYSTEM (a kernel thread per thread)",
        default: true,
        run: thread_scope_system,
    },
    Benchmark {
        id: "spawn/thread-scope-process",
        definition: "pthread_create + join with PTHREAD_SCOPE_PROCESS (user-level scheduling)",
        default: true,
        run: thread_scope_process,
    },
    Benchmark {
        id: "spawn/fork-rss",
        definition: "fork + _exit + waitpid against the parent's resident memory (--fork-sizes)",
        default: false,
        run: fork_rss,
    },
];

type R = Result<Vec<Outcome>, BenchError>;

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

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

/// Every spawn outcome: a child preempting its parent is the operation, not a disturbance.
fn spawned(mut o: Outcome) -> Outcome {
    o.preemption_expected = true;
    o
}

fn fork(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![spawned(
        ctx.individual(b, &mut || fork_once(&Monotonic))?,
    )])
}

/// One fork + _exit + waitpid, timed.
fn fork_once(clock: &Monotonic) -> Result<f64, BenchError> {
    let t0 = clock.now_ns();
    // SAFETY: the child calls only _exit.
    match unsafe { libc::fork() } {
        -1 => Err(spawn_error("fork")),
        0 => unsafe { libc::_exit(0) },
        pid => {
            reap(pid)?;
            Ok((clock.now_ns() - t0) as f64)
        }
    }
}

fn fork_parent(ctx: &Ctx, b: &Benchmark) -> R {
    let clock = Monotonic;
    Ok(vec![spawned(ctx.individual(b, &mut || {
        let t0 = clock.now_ns();
        // SAFETY: the child calls only _exit.
        match unsafe { libc::fork() } {
            -1 => Err(spawn_error("fork")),
            0 => unsafe { libc::_exit(0) },
            pid => {
                let t1 = clock.now_ns();
                reap(pid)?;
                Ok((t1 - t0) as f64)
            }
        }
    })?)])
}

/// A page shared with children (MAP_SHARED survives fork).
struct SharedWord(*mut u64);

impl SharedWord {
    fn new() -> Result<SharedWord, BenchError> {
        // SAFETY: anonymous shared mapping of one page; checked for failure.
        let p = unsafe {
            libc::mmap(
                null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(BenchError::failed("mmap shared page", errno()));
        }
        Ok(SharedWord(p.cast()))
    }
}

impl Drop for SharedWord {
    fn drop(&mut self) {
        // SAFETY: unmapping the page mapped in new().
        unsafe { libc::munmap(self.0.cast(), 4096) };
    }
}

fn fork_child(ctx: &Ctx, b: &Benchmark) -> R {
    let clock = Monotonic;
    let stamp = SharedWord::new()?;
    let p = stamp.0;
    Ok(vec![spawned(ctx.individual(b, &mut || {
        // SAFETY: p points into the live shared page.
        unsafe { p.write_volatile(0) };
        let t0 = clock.now_ns();
        // SAFETY: the child reads the vDSO clock, stores to shared memory and _exits: all
        // async-signal-safe.
        match unsafe { libc::fork() } {
            -1 => Err(spawn_error("fork")),
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
    })?)])
}

extern "C" fn child_exit(_: *mut c_void) -> c_int {
    // SAFETY: ends this child only (no CLONE_THREAD, so exit_group is its own group).
    unsafe { libc::_exit(0) }
}

/// clone(2) with `flags` running `child_exit` on a stack of `stack_size` bytes; timed to reaped.
fn clone_bench(ctx: &Ctx, b: &Benchmark, flags: c_int, stack_size: usize) -> R {
    let clock = Monotonic;
    let mut stack = vec![0u8; stack_size];
    // The stack grows down on every Linux architecture oscost runs on; keep 16-byte alignment.
    let top = ((stack.as_mut_ptr() as usize + stack_size) & !15) as *mut c_void;
    Ok(vec![spawned(ctx.individual(b, &mut || {
        let t0 = clock.now_ns();
        // SAFETY: the child runs child_exit on its own stack and exits; the parent reaps it
        // before the stack can be reused.
        let pid = unsafe { libc::clone(child_exit, top, flags | libc::SIGCHLD, null_mut()) };
        if pid < 0 {
            return Err(spawn_error("clone"));
        }
        reap(pid)?;
        Ok((clock.now_ns() - t0) as f64)
    })?)])
}

fn vfork(ctx: &Ctx, b: &Benchmark) -> R {
    clone_bench(ctx, b, libc::CLONE_VM | libc::CLONE_VFORK, 64 * 1024)
}

fn clone_vm(ctx: &Ctx, b: &Benchmark) -> R {
    clone_bench(ctx, b, libc::CLONE_VM, 16 * 1024)
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

fn fork_exec(ctx: &Ctx, b: &Benchmark) -> R {
    let h = Helper::load()?;
    let args = ExecArgs::new(&h.path, &["oscost-helper"]);
    let o = ctx.individual(b, &mut || args.fork_exec(&Monotonic))?;
    drop(h);
    Ok(vec![spawned(o)])
}

fn fork_exec_dynamic(ctx: &Ctx, b: &Benchmark) -> R {
    let path = ["/bin/true", "/usr/bin/true"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or_else(|| BenchError::Skipped("no /bin/true on this system".into()))?;
    let c = CString::new(path).expect("no NUL");
    let args = ExecArgs::new(&c, &["true"]);
    let mut o = ctx.individual(b, &mut || args.fork_exec(&Monotonic))?;
    o.params.insert("program".into(), json!(path));
    Ok(vec![spawned(o)])
}

fn posix_spawn(ctx: &Ctx, b: &Benchmark) -> R {
    let h = Helper::load()?;
    let args = ExecArgs::new(&h.path, &["oscost-helper"]);
    let clock = Monotonic;
    let o = ctx.individual(b, &mut || {
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
    })?;
    drop(h);
    Ok(vec![spawned(o)])
}

/// execs per chain in spawn/exec.
const EXEC_CHAIN: u64 = 20;

fn exec_chain(ctx: &Ctx, b: &Benchmark) -> R {
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
    let base_ns = crate::stats::median(&base);
    let mut o = ctx.individual(b, &mut || {
        Ok((chain.fork_exec(&clock)? - base_ns) / EXEC_CHAIN as f64)
    })?;
    drop(h);
    o.params.insert("chain".into(), json!(EXEC_CHAIN));
    o.params.insert("chain_overhead_ns".into(), json!(base_ns));
    o.definition = format!(
        "one execve of a tiny static program: (a chain of {EXEC_CHAIN} re-executions - {:.1} us for its fork, first exec, exit and wait) / {EXEC_CHAIN}",
        base_ns / 1e3
    );
    Ok(vec![spawned(o)])
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

fn thread_bench(ctx: &Ctx, b: &Benchmark, attr: Option<Attr>) -> R {
    let clock = Monotonic;
    let attr_ptr: *const libc::pthread_attr_t =
        attr.as_ref().map_or(std::ptr::null(), |a| &a.0 as *const _);
    let o = ctx.individual(b, &mut || {
        let t0 = clock.now_ns();
        let mut tid: libc::pthread_t = 0;
        // SAFETY: valid out pointer and attributes; the thread does nothing and is joined.
        let rc = unsafe { libc::pthread_create(&mut tid, attr_ptr, thread_body, null_mut()) };
        if rc != 0 {
            let e = std::io::Error::from_raw_os_error(rc);
            return Err(BenchError::Failed(format!(
                "pthread_create: {e}{}",
                if rc == libc::EAGAIN {
                    " (thread or process limit: RLIMIT_NPROC, threads-max, pids.max)"
                } else {
                    ""
                }
            )));
        }
        // SAFETY: joining the thread just created.
        let rc = unsafe { libc::pthread_join(tid, null_mut()) };
        if rc != 0 {
            return Err(BenchError::Failed(format!("pthread_join: error {rc}")));
        }
        Ok((clock.now_ns() - t0) as f64)
    })?;
    drop(attr);
    Ok(vec![spawned(o)])
}

fn thread_default(ctx: &Ctx, b: &Benchmark) -> R {
    thread_bench(ctx, b, None)
}

fn thread_64k(ctx: &Ctx, b: &Benchmark) -> R {
    let mut a = Attr::new()?;
    // SAFETY: initialised attributes.
    let rc = unsafe { libc::pthread_attr_setstacksize(&mut a.0, 64 * 1024) };
    if rc != 0 {
        return Err(BenchError::Failed(format!(
            "pthread_attr_setstacksize(64 KiB): error {rc}"
        )));
    }
    thread_bench(ctx, b, Some(a))
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

fn thread_scope_system(ctx: &Ctx, b: &Benchmark) -> R {
    thread_bench(
        ctx,
        b,
        Some(scoped(PTHREAD_SCOPE_SYSTEM, "PTHREAD_SCOPE_SYSTEM")?),
    )
}

fn thread_scope_process(ctx: &Ctx, b: &Benchmark) -> R {
    thread_bench(
        ctx,
        b,
        Some(scoped(PTHREAD_SCOPE_PROCESS, "PTHREAD_SCOPE_PROCESS")?),
    )
}

/// Anonymous memory, every page written (resident), unmapped on drop.
struct Resident {
    ptr: *mut c_void,
    len: usize,
}

impl Resident {
    fn new(len: usize) -> Result<Resident, BenchError> {
        if len == 0 {
            return Ok(Resident {
                ptr: null_mut(),
                len,
            });
        }
        // SAFETY: anonymous private mapping, checked.
        let ptr = unsafe {
            libc::mmap(
                null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(BenchError::failed(
                &format!("mmap {} MiB", len >> 20),
                errno(),
            ));
        }
        let r = Resident { ptr, len };
        let page = 4096;
        for off in (0..len).step_by(page) {
            // SAFETY: inside the mapping.
            unsafe { (ptr as *mut u8).add(off).write_volatile(1) };
        }
        Ok(r)
    }
}

impl Drop for Resident {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping what new() mapped.
            unsafe { libc::munmap(self.ptr, self.len) };
        }
    }
}

/// Least-squares slope of y over x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    Some(points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx)
}

fn fork_rss(ctx: &Ctx, b: &Benchmark) -> R {
    let clock = Monotonic;
    // Big forks take tens of ms: give each point enough time for ten of them.
    let cfg = SamplerConfig {
        budget_ns: ctx.sampler.cfg.budget_ns.max(3_000_000_000),
        ..ctx.sampler.cfg
    };
    let mut outs = Vec::new();
    for &mib in &ctx.opts.fork_sizes_mib {
        let mem = Resident::new((mib as usize) << 20)?;
        let mut o = ctx.individual_with(b, cfg, &mut || fork_once(&clock))?;
        drop(mem);
        o.id = format!("{}/{mib}MiB", b.id);
        o.params.insert("rss_mib".into(), json!(mib));
        outs.push(spawned(o));
    }
    let points: Vec<(f64, f64)> = outs
        .iter()
        .filter_map(|o| {
            let mib = o.params.get("rss_mib")?.as_f64()?;
            Some((mib, crate::stats::median(&o.measurement.samples_ns)))
        })
        .collect();
    if let (Some(s), Some(last)) = (slope(&points), outs.last_mut()) {
        last.params.insert("slope_ns_per_mib".into(), json!(s));
        last.notes.push(format!(
            "fork cost grows {:.2} us per MiB of resident memory ({:.1} ms per GiB; least squares over {} sizes)",
            s / 1e3,
            s * 1024.0 / 1e6,
            points.len()
        ));
    }
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_is_exact_on_a_line() {
        let pts = [
            (0.0, 100.0),
            (64.0, 164.0),
            (256.0, 356.0),
            (1024.0, 1124.0),
        ];
        assert!((slope(&pts).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(slope(&pts[..1]), None);
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }
}
