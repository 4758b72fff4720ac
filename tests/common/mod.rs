//! Helpers shared by the integration tests: the binary under test, a tag that marks every
//! process a test starts (so "nothing left behind" can be checked by scanning /proc), a lock
//! that keeps measuring tests from running at the same time, and a busy CPU.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use oscost::base::model::{BenchResult, Run, Status};
pub use oscost::base::stats::Stats;

pub const TAG_VAR: &str = "OSCOST_TEST_TAG";

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_oscost"))
}

/// A command for the binary with a fresh tag in its environment (inherited by every worker and
/// every process a benchmark forks).
pub fn oscost(tag: &str) -> Command {
    let mut c = Command::new(bin());
    // Runs save to a store inside the build's scratch space, never to the user's.
    let db = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("oscost-tests.db");
    c.env(TAG_VAR, tag)
        .env("NO_COLOR", "1")
        .env("OSCOST_DB", db);
    // A shell without job control starts background jobs with SIGINT ignored, and an ignored
    // disposition survives exec: a SIGINT sent before oscost installs its handlers would then
    // be lost instead of fatal. The tests signal oscost as a terminal would, so every child
    // starts with the default dispositions whatever launched the tests.
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls (signal) are made.
    unsafe {
        c.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    c
}

pub fn unique_tag(name: &str) -> String {
    format!(
        "{name}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ rand_bits()
    )
}

fn rand_bits() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Pids of live processes whose environment carries `TAG_VAR=tag`.
pub fn tagged_processes(tag: &str) -> Vec<i32> {
    let needle = format!("{TAG_VAR}={tag}");
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
            && env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Wait up to `limit` for every tagged process to be gone; returns what is still there.
pub fn wait_until_gone(tag: &str, limit: Duration) -> Vec<i32> {
    let end = Instant::now() + limit;
    loop {
        let left = tagged_processes(tag);
        if left.is_empty() || Instant::now() >= end {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait up to `limit` for oscost's own BPF programs to be down to `before` (the kernel frees a
/// program after its last descriptor closes through deferred work, not at the close); returns
/// the count last seen.
pub fn own_bpf_programs_back_to(before: Option<u32>, limit: Duration) -> Option<u32> {
    let end = Instant::now() + limit;
    loop {
        let now = oscost::tracing::observers::own_bpf_programs();
        if now == before || Instant::now() >= end {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

static MEASURE: Mutex<()> = Mutex::new(());

/// Held by every test that measures, so they never run at once (they would disturb each other
/// on a 2-CPU machine).
pub fn measuring() -> MutexGuard<'static, ()> {
    MEASURE.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn allowed_cpus() -> Vec<usize> {
    oscost::measuring::placement::allowed_cpus()
}

/// A thread spinning on `cpu` until dropped.
pub struct BusyCpu {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl BusyCpu {
    pub fn on(cpu: usize) -> BusyCpu {
        BusyCpu::with_duty(cpu, 100)
    }

    /// A task pinned to `cpu` that spins `duty` percent of every 10 ms and sleeps the rest: a
    /// competitor that is often not runnable at the instant anyone looks.
    pub fn with_duty(cpu: usize, duty: u32) -> BusyCpu {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            oscost::measuring::placement::pin_current_thread(cpu).unwrap();
            let period = std::time::Duration::from_millis(10);
            let spin = period * duty.min(100) / 100;
            let mut x = 0u64;
            while !s.load(Ordering::Relaxed) {
                let t = std::time::Instant::now();
                while t.elapsed() < spin {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                if spin < period {
                    std::thread::sleep(period - spin);
                }
            }
        });
        BusyCpu {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for BusyCpu {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The command succeeded; its stderr is the message when it did not.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run to completion and read the run it wrote, through the typed result model.
pub fn run_json(tag: &str, args: &[&str]) -> (std::process::Output, Run) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let out = oscost(tag)
        .arg("run")
        .args(args)
        .arg("--json")
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "oscost failed: {err}"
    );
    let run = read_run(&path);
    // Exit 1 exactly when a benchmark failed, and then with the one-line summary.
    let failed = run.results.iter().any(|r| r.status.word() == "failed");
    assert_eq!(out.status.code(), Some(i32::from(failed)), "{err}");
    assert_eq!(failed, err.contains("results failed"), "{err}");
    (out, run)
}

/// A run file, through the loader users get (schema checks included).
pub fn read_run(path: &std::path::Path) -> Run {
    oscost::base::model::load_run_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn result<'a>(run: &'a Run, id: &str) -> &'a BenchResult {
    run.results
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no result {id}"))
}

pub fn stats<'a>(run: &'a Run, id: &str) -> &'a Stats {
    result(run, id)
        .stats
        .as_ref()
        .unwrap_or_else(|| panic!("{id} has no statistics"))
}

pub fn median(run: &Run, id: &str) -> f64 {
    stats(run, id).median
}

/// A result's state: "ok", "skipped" or "failed".
pub fn state(run: &Run, id: &str) -> &'static str {
    result(run, id).status.word()
}

/// Signal a running oscost, then expect it gone within 1 s with status 128 + signal (or
/// killed by the signal, when it came before the handlers were installed), no tagged process
/// left, and no output file.
pub fn signal_expect_clean_exit(
    child: &mut std::process::Child,
    tag: &str,
    sig: i32,
    what: &str,
    never_written: Option<&std::path::Path>,
) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "still running 1 s after signal {sig} ({what})"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.code() == Some(128 + sig) || status.signal() == Some(sig),
        "signal {sig} ({what}): {status:?}"
    );
    let left = wait_until_gone(tag, Duration::from_millis(500));
    assert!(
        left.is_empty(),
        "left behind after signal {sig} ({what}): {left:?}"
    );
    if let Some(p) = never_written {
        assert!(
            !p.exists(),
            "an interrupted run wrote {} ({what})",
            p.display()
        );
    }
}

/// Parent pid of a process, from /proc/PID/stat.
pub fn ppid_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Tagged processes whose parent is also tagged and whose grandparent is `root`: what a
/// worker (child of `root`) forked.
pub fn grandchildren(tag: &str, root: i32) -> Vec<i32> {
    let tagged = tagged_processes(tag);
    tagged
        .iter()
        .copied()
        .filter(|&p| {
            ppid_of(p).is_some_and(|parent| {
                parent != root && tagged.contains(&parent) && ppid_of(parent) == Some(root)
            })
        })
        .collect()
}

/// 5th percentile of a result: the machine's slow phases (up to ~75% of a window) move the
/// median of close costs, the fast end of the distribution much less.
pub fn p5(run: &Run, id: &str) -> f64 {
    stats(run, id).p5
}

/// The result `id` failed, and its reason says `why`.
pub fn assert_failed_with(run: &Run, id: &str, why: &str) {
    let r = result(run, id);
    assert_eq!(r.status.word(), "failed", "{id}: {:?}", r.status);
    let reason = r.status.reason().unwrap_or_default();
    assert!(
        reason.contains(why),
        "{id}: reason '{reason}' lacks '{why}'"
    );
}

/// Start `cmd`, wait `after`, send SIGINT, and give how long it took to end and how it ended.
pub fn interrupt_after(
    mut cmd: std::process::Command,
    after: std::time::Duration,
) -> (std::time::Duration, Option<i32>, String) {
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let t = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    // Killed by the signal or exited 128+N: the shell shows both as 130.
    let code = out.status.code().or(out.status.signal().map(|s| 128 + s));
    (
        t.elapsed(),
        code,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Say that a test could not run here and why, past the harness's capture (an `eprintln!` of a
/// passing test is swallowed, and a skip must never pass silently).
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("skipped {test}: {why}\n").as_bytes());
}

/// Say that a test could not run here for want of `needs` (words of `OSCOST_CI_HAS`:
/// `root`, a tool such as `strace` or `prlimit`, a Python package such as `kcidb-io`), and
/// why. Where every one of them is in `OSCOST_CI_HAS` (`.ci/run` lists there what it
/// installed and found), the skip is a failure: CI put in place what the test needs, so
/// skipping it would pass a check that never ran.
pub fn skip_needing(test: &str, needs: &[&str], why: &str) {
    let has = std::env::var("OSCOST_CI_HAS").unwrap_or_default();
    let has: Vec<&str> = has.split_whitespace().collect();
    if !needs.is_empty() && needs.iter().all(|n| has.contains(n)) {
        panic!(
            "{test} would be skipped ({why}), but CI has what it needs ({}): a check that must run here did not",
            needs.join(", ")
        );
    }
    skip(test, why);
}

/// Whether the tests run as root (counting and tracing need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `oscost ARGS` run by a user without rights: as it is when the tests are not root; as root,
/// a copy of the binary run as user nobody with no capabilities (setpriv). None, with a skip
/// line for `test`, when setpriv is not installed.
pub fn output_without_rights(test: &str, args: &[&str]) -> Option<std::process::Output> {
    if !is_root() {
        return Some(
            oscost(&unique_tag("no-rights"))
                .args(args)
                .output()
                .unwrap(),
        );
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip(
            test,
            "setpriv (util-linux) is not installed, so a user without rights cannot be played",
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    // A copy of the binary that user nobody can run, in a directory it may write.
    let exe = dir.path().join("oscost");
    std::fs::copy(bin(), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&exe)
        .args(args)
        .env("HOME", dir.path())
        .output()
        .unwrap();
    Some(out)
}

/// One ordering a test claims: `more` costs more than `factor` times `less`, because `why`.
#[derive(Debug, Clone, Copy)]
pub struct Costlier {
    pub more: &'static str,
    pub factor: f64,
    pub less: &'static str,
    pub why: &'static str,
}

/// `more` costs more than `less` (`factor` 1).
pub const fn costlier(more: &'static str, less: &'static str, why: &'static str) -> Costlier {
    Costlier {
        more,
        factor: 1.0,
        less,
        why,
    }
}

/// `more` costs more than `factor` times `less`.
pub const fn costlier_by(
    more: &'static str,
    factor: f64,
    less: &'static str,
    why: &'static str,
) -> Costlier {
    Costlier {
        more,
        factor,
        less,
        why,
    }
}

/// What one run's intervals say of a claim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// The ratio's interval is above `factor`.
    Holds,
    /// The ratio's interval holds `factor`: this run cannot tell.
    Overlap,
    /// The ratio's interval is below `factor`.
    Reversed,
}

/// A result's 95% CI, or its median as a point where it has none (too few repetitions).
pub fn interval(run: &Run, id: &str) -> [f64; 2] {
    let s = stats(run, id);
    if s.ci95[0].is_finite() && s.ci95[1].is_finite() {
        s.ci95
    } else {
        [s.median, s.median]
    }
}

/// Judge `c` by the two results' intervals in `run`, never by two bare medians: by the 95%
/// interval of the ratio of the two medians that their intervals give, on the log scale (each
/// side of an interval 1.96 of its standard errors, the two combined in quadrature), so two
/// results 25% apart with ±10-20% intervals each, as on a busy CI host, are told apart where
/// asking their intervals not to touch would need both narrower than the gap.
pub fn judge(run: &Run, c: &Costlier) -> Verdict {
    let (m, l) = (interval(run, c.more), interval(run, c.less));
    let (mm, ml) = (median(run, c.more), median(run, c.less));
    if !(mm > 0.0 && ml > 0.0 && m[0] > 0.0 && l[0] > 0.0) {
        return Verdict::Overlap;
    }
    let log_ratio = (mm / (c.factor * ml)).ln();
    // One side of an interval as a standard error of the log of its median.
    let se = |from: f64, to: f64| (to / from).ln().abs() / 1.96;
    let down = se(m[0], mm).hypot(se(ml, l[1]));
    let up = se(mm, m[1]).hypot(se(l[0], ml));
    if log_ratio - 1.96 * down > 0.0 {
        Verdict::Holds
    } else if log_ratio + 1.96 * up < 0.0 {
        Verdict::Reversed
    } else {
        Verdict::Overlap
    }
}

/// Tries a claim gets in all before the test fails: the first run's, then runs of only the
/// undecided claims' benchmarks.
pub const ORDERING_TRIES: usize = 4;

/// Assert every claim with the results' intervals: a claim holds once a run's intervals
/// separate the right way; claims whose intervals overlap (or, by accident of a noisy host,
/// separate the wrong way) are measured again in runs of only their benchmarks, up to
/// `ORDERING_TRIES` runs in all, and the test fails only then, printing every try's intervals.
/// `args` are the extra arguments of every run (`--quick`, `--placement same`, ...).
pub fn assert_costlier(tag: &str, first: &Run, args: &[&str], claims: &[Costlier]) {
    let mut open: Vec<(Costlier, Vec<String>)> = Vec::new();
    let said = |run: &Run, c: &Costlier, v: Verdict| {
        let f = |id: &str| {
            let [lo, hi] = interval(run, id);
            format!("{id} {:.1} ns [{lo:.1}, {hi:.1}]", median(run, id))
        };
        format!("{v:?}: {} vs {} x {}", f(c.more), c.factor, f(c.less))
    };
    for c in claims {
        let v = judge(first, c);
        if v != Verdict::Holds {
            open.push((*c, vec![said(first, c, v)]));
        }
    }
    for _ in 1..ORDERING_TRIES {
        if open.is_empty() {
            return;
        }
        let mut ids: Vec<&str> = open.iter().flat_map(|(c, _)| [c.more, c.less]).collect();
        // A case id's benchmark: the run selects by prefix, so `fs/write/1MiB` asks for its
        // family member and `sig/pingpong@same` for its placement's benchmark.
        ids.iter_mut()
            .for_each(|id| *id = id.split('@').next().unwrap_or(id));
        ids.sort();
        ids.dedup();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(ids.iter().map(|id| bench_of(id)));
        let (_, run) = run_json(&format!("{tag}-again"), &all);
        open.retain_mut(|(c, tries)| {
            let v = judge(&run, c);
            tries.push(said(&run, c, v));
            v != Verdict::Holds
        });
    }
    if !open.is_empty() {
        let text: Vec<String> = open
            .iter()
            .map(|(c, tries)| {
                format!(
                    "{} > {} x {} ({}):\n  {}",
                    c.more,
                    c.factor,
                    c.less,
                    c.why,
                    tries.join("\n  ")
                )
            })
            .collect();
        panic!(
            "not decided in {ORDERING_TRIES} runs, or decided the wrong way:\n{}",
            text.join("\n")
        );
    }
}

/// The benchmark id a case id belongs to, as `run` selects it: the id without its size or
/// count part where the catalogue names the benchmark by its first two parts.
fn bench_of(case: &str) -> &str {
    let mut parts = case.splitn(3, '/');
    let (a, b) = (parts.next().unwrap_or(case), parts.next());
    match b {
        Some(b) => &case[..a.len() + 1 + b.len()],
        None => case,
    }
}

/// Wait up to `limit` for a tagged process whose first argument is `arg` (`__worker`: a
/// worker is measuring; `__during`: a program's keeper is up) or whose command name is `arg`
/// (`sleep`: the program a round times is running): the phase a test means to interrupt, in
/// place of a sleep that guesses how long the phases before it take. Whether one was seen.
pub fn wait_for_process(tag: &str, arg: &str, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    let is = |p: &i32| {
        let argv1 = std::fs::read(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| c.split(|&b| b == 0).nth(1) == Some(arg.as_bytes()));
        let comm =
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim_end() == arg);
        argv1 || comm
    };
    loop {
        if tagged_processes(tag).iter().any(is) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
