//! Coordinator and worker (docs/ARCHITECTURE.md §4). Every benchmark runs in a worker: this same binary
//! started as `oscost __worker ID CONFIG`, in a process group of its own, optionally under a
//! wrapper command (`--under`). The worker writes one JSON line per result to fd 3 (not stdout,
//! so a wrapper's or a benchmark's output can never corrupt the stream) and exits.
//!
//! The coordinator owns "no process left behind": it is a child subreaper, so anything a
//! worker forks and orphans is reparented to it; after the worker exits, on a timeout, or on
//! SIGINT/SIGTERM, it SIGKILLs the worker's whole group and reaps every child before going on.
//! The worker also asks for a signal if its parent dies (PR_SET_PDEATHSIG: SIGKILL set by the
//! coordinator before exec, SIGTERM set by the worker itself, whose handler removes the SysV
//! objects it holds), and its peers ask for SIGKILL, so even a `kill -9` of the coordinator
//! leaves no benchmark running; what is left on disk (the run's scratch directory) is
//! reclaimed by the next run (`scratch::reclaim`, called as a run starts). Children that left the worker's process
//! group (a wrapper's daemon after setsid) are reparented to the coordinator, the subreaper,
//! and killed with the group.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::base::stop::{Interrupted, Stop};
use crate::bench;
use crate::bench::entry::Benchmark;
use crate::bench::runner::{self, CaseResult, WorkerOptions};
use crate::measuring::case::{BenchError, Meter};
use crate::measuring::clock::Monotonic;
use crate::measuring::noise::Rusage;
use crate::measuring::placement;
use crate::measuring::sampler::Sampler;

/// The fd the worker writes results to.
pub const RESULT_FD: i32 = 3;
const RESULT_FD_ENV: &str = "OSCOST_RESULT_FD";

// ---------------------------------------------------------------- worker side

/// Entry point of `oscost __worker`. Returns the process exit code.
pub fn worker_main(id: &str, config: &str) -> i32 {
    let fd: i32 = std::env::var(RESULT_FD_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RESULT_FD);
    // SAFETY: fcntl on any integer is harmless; it tells whether the fd is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        crate::say!("oscost: __worker is internal: `oscost run` starts it with a result pipe");
        return 2;
    }
    // Under a wrapper the coordinator's PR_SET_PDEATHSIG covers the wrapper, not us; and a
    // worker that dies with its coordinator must take its SysV objects with it.
    crate::measuring::ipc_guard::on_parent_death();
    // Programs a benchmark execs must not hold the coordinator's pipe open.
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: the coordinator opened this fd for us and nothing else in the worker owns it.
    let mut out = unsafe { std::fs::File::from_raw_fd(fd) };
    let cases = match serde_json::from_str::<WorkerOptions>(config) {
        Ok(opts) => measure(id, opts),
        Err(e) => vec![CaseResult::failed(
            id.to_string(),
            id,
            "",
            BenchError::Failed(format!("bad worker configuration: {e}")),
        )],
    };
    for c in cases {
        let mut line = match serde_json::to_string(&c) {
            Ok(l) => l,
            Err(e) => {
                crate::say!("oscost worker: cannot encode result: {e}");
                return 1;
            }
        };
        line.push('\n');
        if out.write_all(line.as_bytes()).is_err() {
            return 1; // the coordinator is gone
        }
    }
    0
}

/// Measure every case of benchmark `id`, pinned to the measuring CPU.
fn measure(id: &str, opts: WorkerOptions) -> Vec<CaseResult> {
    let Some(b) = bench::find(id) else {
        let why = BenchError::Failed(format!("no benchmark '{id}' in this oscost"));
        return vec![CaseResult::failed(id.to_string(), id, "", why)];
    };
    // Read before pinning (which narrows the allowed CPUs) and before an IPC namespace of
    // the worker's own: what confines the process as it was started.
    let confinement = opts
        .read_confinement
        .then(crate::measuring::confinement::read);
    if let Err(e) = placement::pin_current_thread(opts.cpu) {
        let why = BenchError::Failed(e);
        return vec![CaseResult::failed(b.id.into(), b.id, b.definition, why)];
    }
    // Per-task settings (speculation controls) are the worker's own: nothing system-wide.
    for (name, value) in &opts.task_settings {
        if let Err(e) = crate::machine::settings::apply_to_self(name, value) {
            let why = BenchError::Failed(e.to_string());
            return vec![CaseResult::failed(b.id.into(), b.id, b.definition, why)];
        }
    }
    // The ipc/ family's objects live and die in a namespace of the worker's own.
    let namespace = b
        .ipc_namespace
        .then(crate::measuring::ipc_guard::private_namespace);
    let meter = Meter {
        sampler: Sampler::new(Monotonic, Rusage, opts.sampler),
        cpu: opts.cpu,
        allowed: opts.allowed,
        mq_name: opts.mq_name,
        scratch_dir: opts.scratch_dir,
        cgroup: opts.cgroup_dir.ok_or_else(|| {
            opts.cgroup_missing
                .unwrap_or_else(|| "the run made no cgroup for this benchmark".into())
        }),
        events: events_override().unwrap_or(opts.events),
        profile: opts.profile,
    };
    let memory = b
        .memory_watch
        .then(crate::measuring::memory::snapshot)
        .flatten();
    // The exits first: a round trip through the hypervisor may leave the core's caches and
    // predictors cold, and the user-space loop then stands between it and the cases.
    let mut exits = crate::measuring::witness::exit_timings();
    let mut witness = crate::measuring::witness::timings();
    let mut cases = runner::run_cases(&meter, b, &opts.variants);
    witness.extend(crate::measuring::witness::timings());
    exits.extend(crate::measuring::witness::exit_timings());
    let witness_ns = crate::measuring::witness::witness_ns(&witness);
    let exit_witness_ns = crate::measuring::witness::witness_ns(&exits);
    let memory_events = match (memory, crate::measuring::memory::snapshot()) {
        (Some(before), Some(after)) => crate::measuring::memory::delta(&before, &after),
        _ => Default::default(),
    };
    for c in &mut cases {
        c.witness_ns = witness_ns;
        // Timed between its samples where enough were, for that follows the host's state
        // while the case ran (`sampler::EXIT_EVERY_NS`); beside the cases otherwise.
        c.exit_witness_ns = c
            .measurement
            .as_ref()
            .and_then(|m| crate::measuring::witness::during_ns(&m.exits_ns))
            .or(exit_witness_ns);
        c.memory_events = memory_events.clone();
    }
    if let Some(ns) = namespace {
        let said = match ns {
            Ok(()) => "its own".to_string(),
            Err(why) => format!("the coordinator's ({why}); objects removed by the worker"),
        };
        for c in &mut cases {
            c.params.insert("ipc_namespace".into(), said.clone().into());
        }
    }
    if let Some(first) = cases.first_mut() {
        first.confinement = confinement;
    }
    cases
}

/// `OSCOST_EVENTS=none` (or a list) in a worker's environment overrides `--events`: a wrapper
/// can then turn counting off for one side of an `ab`, which is how "counting does not move
/// the measurement" is checked (`ab --b 'env OSCOST_EVENTS=none'`).
fn events_override() -> Option<Vec<String>> {
    let v = std::env::var("OSCOST_EVENTS").ok()?;
    Some(match v.as_str() {
        "none" | "" => vec![],
        list => list.split(',').map(str::to_string).collect(),
    })
}

// ---------------------------------------------------------------- coordinator side

/// Runs benchmarks in workers, one at a time.
#[derive(Clone)]
pub struct Coordinator {
    /// This executable, started again as a worker.
    pub exe: PathBuf,
    /// argv of the wrapper, if any.
    pub wrapper: Vec<String>,
    /// Longest one worker may take before it is killed.
    pub timeout: Duration,
    /// Where the signal handlers record a signal.
    pub stop: Stop,
    /// Start the worker (its wrapper, if any) on this CPU; `None`: where the coordinator runs.
    pub pin_cpu: Option<usize>,
}

impl Coordinator {
    /// Run one repetition of a benchmark in a fresh worker: its cases as measured. A crash, a
    /// hang or garbage from the worker becomes a failed case; only an interrupt is an error.
    pub fn run(&self, b: &Benchmark, opts: &WorkerOptions) -> Result<Vec<CaseResult>, Interrupted> {
        self.stop.check()?;
        let cases = self.run_worker(b, opts);
        // SysV objects die with the worker's own IPC namespace (`ipc_guard`); only the run's
        // POSIX queue name, oscost's own, is unlinked here in case a worker without a
        // namespace was killed holding it.
        if let Some(removed) = crate::measuring::ipc_guard::unlink_queue(&opts.mq_name) {
            crate::say!("oscost: removed what {} left behind: {removed}", b.id);
        }
        cases
    }

    /// Spawn, watch, stop and reap one worker, and read what it sent.
    fn run_worker(
        &self,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<CaseResult>, Interrupted> {
        let failed = |reason: String| vec![failed_case(b, reason)];
        // The coordinator moves off the measuring CPU while the worker lives, back where it
        // was after it is reaped; the worker starts on the CPUs it had before.
        let off = crate::measuring::placement::keep_off(opts.cpu);
        let mut worker = match self.spawn(b, opts, &off.before) {
            Ok(w) => w,
            Err(reason) => return Ok(failed(reason)),
        };
        let watched = self.watch(&mut worker);
        if !matches!(watched, Ok(None)) {
            // SIGTERM first: a worker without an IPC namespace of its own removes its objects
            // as it goes (see `ipc_guard`); SIGKILL for whatever is still there after that.
            let _ = killpg(worker.pgid, Signal::SIGTERM);
            let grace = Instant::now() + Duration::from_millis(300);
            while Instant::now() < grace && matches!(worker.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = killpg(worker.pgid, Signal::SIGKILL);
        }
        let status = worker.child.wait();
        reap_group(worker.pgid);
        if let Some(reason) = watched? {
            return Ok(failed(reason));
        }
        Ok(interpret(b, &worker, status))
    }

    /// Start `oscost __worker ID CONFIG` (under the wrapper, if any) in a process group of its
    /// own, with the result pipe on fd 3.
    fn spawn(
        &self,
        b: &Benchmark,
        opts: &WorkerOptions,
        allowed: &[usize],
    ) -> Result<Worker, String> {
        let config = serde_json::to_string(opts).map_err(|e| format!("worker options: {e}"))?;
        let (res_r, res_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot create a pipe: {e}"))?;
        let mut cmd = match self.wrapper.split_first() {
            Some((prog, args)) => {
                let mut c = Command::new(prog);
                c.args(args).arg(&self.exe);
                c
            }
            None => Command::new(&self.exe),
        };
        cmd.arg(crate::base::helpers::WORKER)
            .arg(b.id)
            .arg(&config)
            .env(RESULT_FD_ENV, RESULT_FD.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let w = res_w.as_raw_fd();
        // The worker starts where it was asked to, or on every CPU the coordinator was allowed
        // before it moved off the measuring one (`placement::keep_off`).
        let start_on = match self.pin_cpu {
            Some(c) => vec![c],
            None => allowed.to_vec(),
        };
        let pin = (!start_on.is_empty()).then(|| crate::measuring::placement::cpu_set(&start_on));
        let coordinator = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls (dup2, fcntl, prctl, getppid, kill,
        // sched_setaffinity) between fork and exec; the CPU set was built before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(set) = &pin {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                }
                if w == RESULT_FD {
                    libc::fcntl(w, libc::F_SETFD, 0);
                } else if libc::dup2(w, RESULT_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                crate::measuring::os::die_with_parent(coordinator, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            let what = self.wrapper.first().map_or("the worker", |s| s.as_str());
            let limit = if e.raw_os_error() == Some(libc::EAGAIN) {
                " (RLIMIT_NPROC, kernel.threads-max or pids.max reached)"
            } else {
                ""
            };
            format!("cannot start {what}: {e}{limit}")
        })?;
        drop(res_w);
        let err_pipe = child
            .stderr
            .take()
            .map(OwnedFd::from)
            .map(std::fs::File::from);
        Ok(Worker {
            pgid: Pid::from_raw(child.id() as i32),
            child,
            results: Some(std::fs::File::from(res_r)),
            stderr: err_pipe,
            out: Vec::new(),
            err: Vec::new(),
        })
    }

    /// Read the worker's pipes until both close. `Ok(Some(reason))` when it must be killed (a
    /// timeout, a poll error); `Err` on an interrupt.
    fn watch(&self, w: &mut Worker) -> Result<Option<String>, Interrupted> {
        let deadline = Instant::now() + self.timeout;
        let mut exited_at: Option<Instant> = None;
        loop {
            self.stop.check()?;
            if Instant::now() >= deadline {
                let t = self.timeout.as_secs_f64();
                let after = if t < 1.0 {
                    format!("{:.0} ms", t * 1e3)
                } else {
                    format!("{t:.0} s")
                };
                return Ok(Some(format!(
                    "timed out after {after} (raise --timeout if it is just slow)"
                )));
            }
            if w.results.is_none() && w.stderr.is_none() {
                return Ok(None);
            }
            // The worker has exited but something it forked still holds the pipes open: what
            // the worker wrote is already in them; read it and stop waiting for an end of file
            // that only the group kill will bring.
            if exited_at.is_none() && matches!(w.child.try_wait(), Ok(Some(_))) {
                exited_at = Some(Instant::now());
            }
            if exited_at.is_some_and(|t| t.elapsed() > Duration::from_millis(200)) {
                return Ok(None);
            }
            if let Err(e) = w.read_ready() {
                return Ok(Some(format!("poll: {e}")));
            }
        }
    }
}

/// A running worker: its process, group and pipes, and what it has sent so far.
struct Worker {
    child: std::process::Child,
    pgid: Pid,
    /// The result pipe and stderr, until each reaches end of file.
    results: Option<std::fs::File>,
    stderr: Option<std::fs::File>,
    out: Vec<u8>,
    err: Vec<u8>,
}

impl Worker {
    /// Wait up to 50 ms for either pipe, and read what is there.
    fn read_ready(&mut self) -> nix::Result<()> {
        let mut fds = Vec::with_capacity(2);
        for f in [&self.results, &self.stderr].into_iter().flatten() {
            fds.push(nix::poll::PollFd::new(
                f.as_fd(),
                nix::poll::PollFlags::POLLIN,
            ));
        }
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u8)) {
            Ok(0) | Err(Errno::EINTR) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        let mut ready = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect::<Vec<_>>()
            .into_iter();
        drop(fds);
        if let Some(f) = &mut self.results
            && ready.next() == Some(true)
            && !read_some(f, &mut self.out, usize::MAX)
        {
            self.results = None;
        }
        if let Some(f) = &mut self.stderr
            && ready.next() == Some(true)
            && !read_some(f, &mut self.err, 64 * 1024)
        {
            self.stderr = None;
        }
        Ok(())
    }
}

fn failed_case(b: &Benchmark, reason: String) -> CaseResult {
    CaseResult::failed(b.id.into(), b.id, b.definition, BenchError::Failed(reason))
}

/// What a finished worker's output and exit mean: its cases, plus a failure when it exited
/// abnormally (with the last line it wrote to stderr) or sent nothing.
fn interpret(
    b: &Benchmark,
    w: &Worker,
    status: std::io::Result<std::process::ExitStatus>,
) -> Vec<CaseResult> {
    // Only this benchmark's cases, each once: a wrapper that writes on fd 3 must not turn its
    // bytes into results (one failure says so, however many lines it wrote).
    let mut cases: Vec<CaseResult> = Vec::new();
    let mut unreadable = (0usize, None);
    for line in String::from_utf8_lossy(&w.out).lines() {
        match serde_json::from_str::<CaseResult>(line) {
            Ok(c) if c.id.starts_with(b.id) && !cases.iter().any(|x| x.id == c.id) => cases.push(c),
            Ok(c) => {
                unreadable = (
                    unreadable.0 + 1,
                    unreadable.1.or(Some(format!("a result for '{}'", c.id))),
                )
            }
            Err(e) => unreadable = (unreadable.0 + 1, unreadable.1.or(Some(e.to_string()))),
        }
    }
    if let (n @ 1.., Some(first)) = unreadable {
        cases.push(failed_case(
            b,
            format!("the worker's result pipe carried {n} line(s) that are not its results (first: {first}); is the --under command writing on fd 3?"),
        ));
    }
    let exit = match status {
        Ok(s) if s.success() => None,
        Ok(s) => Some(describe_exit(s)),
        Err(e) => Some(format!("cannot wait for the worker: {e}")),
    };
    let stderr_tail = String::from_utf8_lossy(&w.err)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string());
    match exit {
        Some(why) => {
            let why = match stderr_tail {
                Some(t) => format!("{why}: {t}"),
                None => why,
            };
            if cases.is_empty() {
                return vec![failed_case(b, why)];
            }
            let n = cases.len();
            cases.push(failed_case(b, format!("after {n} result(s), {why}")));
        }
        None if cases.is_empty() => {
            cases.push(failed_case(b, "the worker exited without a result".into()))
        }
        None => {}
    }
    cases
}

/// Read what is available; false at end of file or on error. At most `cap` bytes are kept.
fn read_some(f: &mut std::fs::File, buf: &mut Vec<u8>, cap: usize) -> bool {
    let mut chunk = [0u8; 8192];
    match f.read(&mut chunk) {
        Ok(0) => false,
        Ok(k) => {
            if buf.len() < cap {
                buf.extend_from_slice(&chunk[..k.min(cap - buf.len())]);
            }
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
        Err(_) => false,
    }
}

fn describe_exit(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("worker exited with status {c}"),
        (None, Some(sig)) => {
            let name = Signal::try_from(sig).map_or(format!("signal {sig}"), |s| s.to_string());
            format!("worker killed by {name}")
        }
        _ => "worker ended abnormally".into(),
    }
}

/// SIGKILL every child of this process: between workers the coordinator has none of its
/// own, so any child is an orphan of the last worker that left its group (a daemon that
/// called setsid), reparented to us as the subreaper.
fn kill_children() {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for t in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        for pid in list
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Kill whatever is left of a worker's group and reap every child of ours (orphans of the
/// worker are reparented to us, the subreaper). Bounded: gives up after two seconds.
pub fn reap_group(pgid: Pid) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                let _ = killpg(pgid, Signal::SIGKILL);
                kill_children();
                if Instant::now() >= deadline {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(_) => continue,
            Err(Errno::EINTR) => continue,
            Err(_) => return, // ECHILD: nothing left
        }
    }
}
