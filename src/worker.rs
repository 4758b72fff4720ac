//! Coordinator and worker (DESIGN §5). Every benchmark runs in a worker: this same binary
//! started as `oscost __worker ID CONFIG`, in a process group of its own, optionally under a
//! wrapper command (`--under`). The worker writes one JSON line per result to fd 3 (not stdout,
//! so a wrapper's or a benchmark's output can never corrupt the stream) and exits.
//!
//! The coordinator owns "no process left behind": it is a child subreaper, so anything a
//! worker forks and orphans is reparented to it; after the worker exits, on a timeout, or on
//! SIGINT/SIGTERM, it SIGKILLs the worker's whole group and reaps every child before going on.
//! The worker also asks for SIGKILL if the coordinator dies (PR_SET_PDEATHSIG), so even a
//! `kill -9` of the coordinator leaves no benchmark running.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::bench::{self, BenchError, Benchmark, Ctx, Outcome, WorkerOptions};
use crate::harness::clock::Monotonic;
use crate::harness::noise::{self, Rusage, Thresholds};
use crate::harness::placement;
use crate::harness::sampler::Sampler;
use crate::model::{BenchResult, Status, family_of};
use crate::stats;

/// The fd the worker writes results to.
pub const RESULT_FD: i32 = 3;
const RESULT_FD_ENV: &str = "OSCOST_RESULT_FD";

/// The run was stopped by a signal; the value is the signal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by signal {0}")]
pub struct Interrupted(pub i32);

// ---------------------------------------------------------------- worker side

/// Entry point of `oscost __worker`. Returns the process exit code.
pub fn worker_main(id: &str, config: &str) -> i32 {
    let fd: i32 = std::env::var(RESULT_FD_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RESULT_FD);
    // SAFETY: fcntl on any integer is harmless; it tells whether the fd is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        eprintln!("oscost: __worker is internal: `oscost run` starts it with a result pipe");
        return 2;
    }
    // Programs a benchmark execs must not hold the coordinator's pipe open.
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: the coordinator opened this fd for us and nothing else in the worker owns it.
    let mut out = unsafe { std::fs::File::from_raw_fd(fd) };
    let results = match serde_json::from_str::<WorkerOptions>(config) {
        Ok(opts) => run_in_worker(id, opts),
        Err(e) => vec![BenchResult::not_measured(
            id,
            "",
            Status::Failed {
                reason: format!("bad worker configuration: {e}"),
            },
        )],
    };
    for r in results {
        let mut line = match serde_json::to_string(&r) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("oscost worker: cannot encode result: {e}");
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

fn run_in_worker(id: &str, opts: WorkerOptions) -> Vec<BenchResult> {
    let Some(b) = bench::find(id) else {
        return vec![BenchResult::not_measured(
            id,
            "",
            Status::Failed {
                reason: format!("no benchmark '{id}' in this oscost"),
            },
        )];
    };
    if let Err(e) = placement::pin_current_thread(opts.cpu) {
        return vec![BenchResult::not_measured(
            b.id,
            b.definition,
            Status::Failed { reason: e },
        )];
    }
    let ctx = Ctx {
        sampler: Sampler::new(Monotonic, Rusage, opts.sampler.into()),
        opts,
    };
    match (b.run)(&ctx, b) {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|o| finalize(o, &ctx.opts.allowed))
            .collect(),
        Err(e) => vec![BenchResult::not_measured(
            b.id,
            b.definition,
            match e {
                BenchError::Skipped(reason) => Status::Skipped { reason },
                BenchError::Failed(reason) => Status::Failed { reason },
            },
        )],
    }
}

/// Statistics, outliers, disturbance and notes for one outcome.
pub fn finalize(o: Outcome, allowed: &[usize]) -> BenchResult {
    if let Some(e) = o.error {
        let mut r = BenchResult::not_measured(
            &o.id,
            &o.definition,
            match e {
                BenchError::Skipped(reason) => Status::Skipped { reason },
                BenchError::Failed(reason) => Status::Failed { reason },
            },
        );
        r.params = o.params;
        return r;
    }
    let mut m = o.measurement;
    // Picoseconds are below any clock's resolution; rounding keeps result files small.
    for x in &mut m.samples_ns {
        *x = (*x * 1000.0).round() / 1000.0;
    }
    let st = stats::summarize(&m.samples_ns);
    let other: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !o.used_cpus.contains(c))
        .collect();
    let mut disturbed = noise::assess(
        &o.cpu_before,
        &o.cpu_after,
        &o.used_cpus,
        &other,
        if o.preemption_expected {
            0
        } else {
            m.preempted.len()
        },
        m.samples_ns.len(),
        Thresholds::default(),
    );
    let mut notes = o.notes;
    if let Some(s) = &st
        && s.median <= 0.0
    {
        notes.push(format!(
            "median {:.3} ns is at or below the baseline ({:.3} ns/iteration): the operation costs less than the loop's own jitter",
            s.median, m.baseline_ns
        ));
    }
    if let Some(p) = &m.phase {
        disturbed.phase_samples = p.samples;
        disturbed.phase_shift_pct = Some(p.shift * 100.0);
    }
    BenchResult {
        family: family_of(&o.id).to_string(),
        id: o.id,
        params: o.params,
        unit: "ns".into(),
        definition: o.definition,
        placement: o.placement,
        batch: m.batch,
        baseline_ns: m.baseline_ns,
        outliers: stats::tukey_outliers(&m.samples_ns),
        samples_ns: m.samples_ns,
        preempted: m.preempted,
        stats: st,
        disturbed,
        notes,
        status: Status::Ok,
    }
}

// ---------------------------------------------------------------- coordinator side

/// Install SIGINT/SIGTERM/SIGHUP handlers that record the signal number in the returned flag
/// (0 = none), and make this process a child subreaper.
pub fn install_guards() -> std::io::Result<Arc<AtomicUsize>> {
    let flag = Arc::new(AtomicUsize::new(0));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), sig as usize)?;
    }
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    Ok(flag)
}

/// Runs benchmarks in workers, one at a time.
pub struct Coordinator {
    pub exe: PathBuf,
    /// argv of the wrapper, if any.
    pub wrapper: Vec<String>,
    pub timeout: Duration,
    pub interrupted: Arc<AtomicUsize>,
}

impl Coordinator {
    pub fn check_interrupted(&self) -> Result<(), Interrupted> {
        match self.interrupted.load(Ordering::SeqCst) {
            0 => Ok(()),
            s => Err(Interrupted(s as i32)),
        }
    }

    /// Run one benchmark in a fresh worker and collect its results. A crash, a hang or garbage
    /// from the worker becomes a failed result; only an interrupt is an error.
    pub fn run(
        &self,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<BenchResult>, Interrupted> {
        self.check_interrupted()?;
        let ipc_before = crate::harness::ipc_guard::snapshot();
        let started = crate::harness::ipc_guard::now_secs();
        let r = self.run_worker(b, opts);
        // Whatever happened to the worker, nothing it made in the kernel stays behind.
        let removed = crate::harness::ipc_guard::clean(&ipc_before, started, &opts.mq_name);
        if !removed.is_empty() {
            eprintln!(
                "oscost: removed what {} left behind: {}",
                b.id,
                removed.join(", ")
            );
        }
        r
    }

    fn run_worker(
        &self,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<BenchResult>, Interrupted> {
        let failed = |reason: String| {
            vec![BenchResult::not_measured(
                b.id,
                b.definition,
                Status::Failed { reason },
            )]
        };
        let config = serde_json::to_string(opts).expect("worker options serialize");
        let (res_r, res_w) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok(p) => p,
            Err(e) => return Ok(failed(format!("cannot create a pipe: {e}"))),
        };
        let mut cmd = match self.wrapper.split_first() {
            Some((prog, args)) => {
                let mut c = Command::new(prog);
                c.args(args).arg(&self.exe);
                c
            }
            None => Command::new(&self.exe),
        };
        cmd.arg("__worker")
            .arg(b.id)
            .arg(&config)
            .env(RESULT_FD_ENV, RESULT_FD.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let w = res_w.as_raw_fd();
        // SAFETY: only async-signal-safe calls (dup2, fcntl, prctl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if w == RESULT_FD {
                    libc::fcntl(w, libc::F_SETFD, 0);
                } else if libc::dup2(w, RESULT_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let what = self.wrapper.first().map_or("the worker", |s| s.as_str());
                return Ok(failed(format!("cannot start {what}: {e}")));
            }
        };
        drop(res_w);
        let pgid = Pid::from_raw(child.id() as i32);
        let mut res_file = std::fs::File::from(res_r);
        let mut err_pipe = child
            .stderr
            .take()
            .map(OwnedFd::from)
            .map(std::fs::File::from);
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut res_open = true;
        let deadline = Instant::now() + self.timeout;
        let mut exited_at: Option<Instant> = None;
        let outcome: Result<Option<String>, Interrupted> = loop {
            if let Err(i) = self.check_interrupted() {
                break Err(i);
            }
            if Instant::now() >= deadline {
                break Ok(Some(format!(
                    "timed out after {:.0} s (raise --timeout if it is just slow)",
                    self.timeout.as_secs_f64()
                )));
            }
            if !res_open && err_pipe.is_none() {
                break Ok(None);
            }
            // The worker has exited but something it forked still holds the pipes open: what
            // the worker wrote is already in them; read it and stop waiting for an end of file
            // that only the group kill below will bring.
            if exited_at.is_none() && matches!(child.try_wait(), Ok(Some(_))) {
                exited_at = Some(Instant::now());
            }
            if exited_at.is_some_and(|t| t.elapsed() > Duration::from_millis(200)) {
                break Ok(None);
            }
            let mut fds = Vec::with_capacity(2);
            if res_open {
                fds.push(nix::poll::PollFd::new(
                    res_file.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                ));
            }
            if let Some(e) = &err_pipe {
                fds.push(nix::poll::PollFd::new(
                    e.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                ));
            }
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u8)) {
                Ok(0) | Err(Errno::EINTR) => continue,
                Err(e) => break Ok(Some(format!("poll: {e}"))),
                Ok(_) => {}
            }
            let ready: Vec<bool> = fds
                .iter()
                .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                .collect();
            drop(fds);
            let mut idx = 0;
            if res_open {
                if ready[idx] && !read_some(&mut res_file, &mut out, usize::MAX) {
                    res_open = false;
                }
                idx += 1;
            }
            if let Some(e) = &mut err_pipe
                && ready[idx]
                && !read_some(e, &mut err, 64 * 1024)
            {
                err_pipe = None;
            }
        };
        let abnormal = !matches!(outcome, Ok(None));
        if abnormal {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        let status = child.wait();
        reap_group(pgid);
        let trouble = outcome?;
        let stderr_tail = String::from_utf8_lossy(&err)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string());
        if let Some(reason) = trouble {
            return Ok(failed(reason));
        }
        let mut results = Vec::new();
        for line in String::from_utf8_lossy(&out).lines() {
            match serde_json::from_str::<BenchResult>(line) {
                Ok(r) => results.push(r),
                Err(e) => {
                    results.extend(failed(format!("worker sent an unreadable result: {e}")));
                }
            }
        }
        let exit = match status {
            Ok(s) if s.success() => None,
            Ok(s) => Some(describe_exit(s)),
            Err(e) => Some(format!("cannot wait for the worker: {e}")),
        };
        if let Some(why) = exit {
            let why = match stderr_tail {
                Some(t) => format!("{why}: {t}"),
                None => why,
            };
            if results.is_empty() {
                return Ok(failed(why));
            }
            results.extend(failed(format!("after {} result(s), {why}", results.len())));
        } else if results.is_empty() {
            return Ok(failed("the worker exited without a result".into()));
        }
        Ok(results)
    }
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

/// Kill whatever is left of a worker's group and reap every child of ours (orphans of the
/// worker are reparented to us, the subreaper). Bounded: gives up after two seconds.
pub fn reap_group(pgid: Pid) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                let _ = killpg(pgid, Signal::SIGKILL);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{BenchError, Benchmark, Outcome};
    use crate::harness::sampler::Measurement;
    use crate::model::{Batch, Placement};

    fn bench() -> &'static Benchmark {
        crate::bench::find("call/f0").expect("registered")
    }

    fn outcome(samples: Vec<f64>) -> Outcome {
        let n = samples.len() as u64;
        Outcome {
            id: "call/f0".into(),
            params: Default::default(),
            definition: "d".into(),
            placement: Placement::Pinned { cpu: 0 },
            measurement: Measurement {
                ends_ns: (1..=n).map(|i| i * 1000).collect(),
                samples_ns: samples,
                preempted: vec![],
                batch: Batch {
                    batched: true,
                    size: 1000,
                },
                baseline_ns: 0.4,
                phase: None,
            },
            used_cpus: vec![0],
            cpu_before: vec![],
            cpu_after: vec![],
            notes: vec![],
            preemption_expected: false,
            error: None,
        }
    }

    #[test]
    fn a_cost_at_or_below_the_baseline_is_never_reported_without_a_note() {
        let r = finalize(outcome(vec![-0.2, -0.1, 0.0, -0.05]), &[0, 1]);
        assert!(r.stats.as_ref().unwrap().median <= 0.0);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("at or below the baseline")),
            "{:?}",
            r.notes
        );
        let r = finalize(outcome(vec![1.0, 1.1, 0.9]), &[0, 1]);
        assert!(r.notes.is_empty());
    }

    #[test]
    fn samples_are_rounded_to_picoseconds_and_failures_carry_their_reason() {
        let r = finalize(outcome(vec![1.23456789]), &[0]);
        assert_eq!(r.samples_ns, vec![1.235]);
        let f = finalize(
            Outcome::failed(
                "x/y@cross".into(),
                bench(),
                BenchError::Skipped("one CPU".into()),
            ),
            &[0],
        );
        assert_eq!(
            f.status,
            Status::Skipped {
                reason: "one CPU".into()
            }
        );
        assert_eq!(f.id, "x/y@cross");
        assert!(f.stats.is_none());
    }
}
