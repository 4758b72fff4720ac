//! What a path names is never destroyed, a measured run is never lost to a late failure, a
//! failure is never called a success, and nothing is left behind: outputs onto FIFOs, devices,
//! symlinks and stdout; databases refused before measuring; kill -9 of the coordinator and of
//! `ab`; concurrent first uses of a store.
// Tests and examples print to a terminal the harness owns; a failed write there is the
// harness's to report.
#![allow(clippy::disallowed_macros)]

mod common;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// A fast run's arguments (no store).
const QUICK: &[&str] = &["run", "--no-save", "--samples", "20", "call/f0"];

fn quick_with(tag: &str, extra: &[&str]) -> std::process::Output {
    oscost(tag).args(QUICK).args(extra).output().unwrap()
}

#[test]
fn outputs_go_through_fifos_devices_symlinks_and_stdout_and_keep_their_type() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    // A FIFO being read: the data arrives, the FIFO stays a FIFO.
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let reader = {
        let f = fifo.clone();
        std::thread::spawn(move || std::fs::read(f).unwrap())
    };
    let out = quick_with(&unique_tag("fifo"), &["--json", fifo.to_str().unwrap()]);
    assert_success(&out);
    let got = reader.join().unwrap();
    assert!(got.starts_with(b"{\"schema_version\""));
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );

    // `-`: the JSON on stdout, the table moved to stderr.
    let out = quick_with(&unique_tag("dash"), &["--json", "-"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema_version"], oscost::base::model::SCHEMA_VERSION);
    assert!(String::from_utf8_lossy(&out.stderr).contains("call/f0"));

    // A symlink: its target written, the link kept.
    let target = dir.path().join("target.csv");
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = quick_with(&unique_tag("link"), &["--csv", link.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&target)
            .unwrap()
            .contains("call/f0")
    );

    // A device node the test makes (root only): written through, still a device.
    if nix::unistd::geteuid().is_root() {
        let node = dir.path().join("null");
        nix::sys::stat::mknod(
            &node,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        let out = quick_with(&unique_tag("node"), &["--json", node.to_str().unwrap()]);
        assert_success(&out);
        assert!(
            std::fs::symlink_metadata(&node)
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }

    // /dev/full: exit 1 with the reason; the other output is still written.
    if Path::new("/dev/full").exists() {
        let csv = dir.path().join("beside.csv");
        let out = quick_with(
            &unique_tag("full"),
            &["--json", "/dev/full", "--csv", csv.to_str().unwrap()],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        assert!(csv.exists());
        assert!(
            std::fs::metadata("/dev/full")
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }
}

#[test]
fn a_wrapper_that_cannot_measure_is_a_failure_not_a_success() {
    let _g = measuring();
    // A wrapper that exits without running the worker: every result failed, exit 1.
    let out = quick_with(&unique_tag("under"), &["--under", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "--under true: {err}");
    assert!(err.contains("results failed"), "{err}");
    // One that is not a program at all is found before measuring (exit 2, nothing saved).
    let out = quick_with(&unique_tag("under"), &["--under", "/nonexistent/prog"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--under /nonexistent/prog: {err}"
    );
    assert!(err.contains("not a program"), "{err}");
}

/// Exit 2 within half a second, before any measuring.
fn refused_fast(args: &[&str], says: &str) {
    let t0 = Instant::now();
    let out = oscost(&unique_tag("refuse")).args(args).output().unwrap();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    assert!(took < Duration::from_millis(500), "{args:?} took {took:?}");
}

#[test]
fn unusable_databases_and_outputs_are_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("held.db");
    let db_s = db.to_str().unwrap();
    // Make a real store, then hold its write lock as another process would.
    let out = oscost("mk")
        .args(["run", "--samples", "20", "call/f0", "--db", db_s])
        .output()
        .unwrap();
    assert!(out.status.success());
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
    refused_fast(&["run", "call/f0", "--db", db_s], "locked");
    holder.execute_batch("ROLLBACK;").unwrap();
    drop(holder);

    let foreign = dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); PRAGMA user_version = 1;")
        .unwrap();
    refused_fast(
        &["run", "call/f0", "--db", foreign.to_str().unwrap()],
        "not an oscost store",
    );
    let long = dir.path().join("y".repeat(300));
    refused_fast(
        &["run", "call/f0", "--json", long.to_str().unwrap()],
        "too long",
    );
    refused_fast(
        &["run", "call/f0", "--json", "/proc/nonexistent-dir/x"],
        "cannot write",
    );

    // Read-only, for real: as an unprivileged user when the test runs as root.
    let setpriv = Path::new("/usr/bin/setpriv");
    if nix::unistd::geteuid().is_root() && setpriv.exists() {
        let ro = tempfile::tempdir().unwrap();
        let ro_db = ro.path().join("r.db");
        std::fs::copy(&db, &ro_db).unwrap();
        let perm = |p: &Path, m| {
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap()
        };
        perm(ro.path(), 0o755);
        perm(&ro_db, 0o644);
        let t0 = Instant::now();
        let out = std::process::Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin())
            .args(["run", "call/f0", "--db", ro_db.to_str().unwrap()])
            .env("HOME", "/nonexistent")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("cannot save into"), "{err}");
        assert!(t0.elapsed() < Duration::from_millis(500));
    }
}

#[test]
fn one_failed_benchmark_among_many_is_exit_1_with_the_rest_printed_exported_and_saved() {
    if !Path::new("/usr/bin/prlimit").exists() {
        skip_needing(
            "one_failed_benchmark_among_many",
            &["prlimit"],
            "no /usr/bin/prlimit",
        );
        return;
    }
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let (db, json) = (dir.path().join("s.db"), dir.path().join("r.json"));
    let out = oscost(&unique_tag("onefail"))
        .args(["run", "--quick", "--under", "prlimit --nofile=200:200 --"])
        .args([
            "mem/select",
            "ipc/pipe-1b",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        text.contains("ipc/pipe-1b") && text.contains("FAILED"),
        "{text}"
    );
    assert!(
        err.contains("1 of 3 results failed (mem/select/1000)"),
        "{err}"
    );
    let run = read_run(&json);
    assert_eq!(state(&run, "ipc/pipe-1b"), "ok");
    let mut s = oscost::effects::store::Store::open_existing(&file_store(&db)).unwrap();
    assert_eq!(s.list().unwrap().len(), 1);
}

/// Non-zombie processes carrying `tag` (a zombie has exited; this VM's init reaps orphans
/// lazily, in up to ~4 s).
fn alive(tag: &str) -> Vec<i32> {
    tagged_processes(tag)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()
                        .map(|r| r.trim_start().starts_with('Z'))
                })
                == Some(false)
        })
        .collect()
}

/// SysV objects of this user that are not in `before`.
fn new_sysv(before: &[(String, i64)]) -> Vec<(String, i64)> {
    sysv().into_iter().filter(|o| !before.contains(o)).collect()
}

fn sysv() -> Vec<(String, i64)> {
    let uid = nix::unistd::geteuid().as_raw().to_string();
    let mut v = Vec::new();
    for (kind, uid_col) in [("msg", 9), ("shm", 9), ("sem", 6)] {
        let text = std::fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap_or_default();
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(uid_col) == Some(&uid.as_str()) {
                v.push((kind.to_string(), f[1].parse().unwrap_or(-1)));
            }
        }
    }
    v
}

/// Kill -9 a run of `ipc/ switch/` at `after`; check what is left at once, and after the next
/// run in the same temporary directory.
fn kill_coordinator_at(after: Duration) {
    let tmp = tempfile::tempdir().unwrap();
    let tag = unique_tag("kill9");
    let before = sysv();
    let mut child = oscost(&tag)
        .args(["run", "--no-save", "ipc/", "switch/"])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        alive(&tag),
        Vec::<i32>::new(),
        "alive 1 s after a kill at {after:?}"
    );
    let next = oscost(&unique_tag("next"))
        .args(QUICK)
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(next.status.success());
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "after the next run, left: {left:?}");
    assert_eq!(
        new_sysv(&before),
        vec![],
        "SysV objects left by a kill at {after:?}"
    );
}

fn kill_moments(n: usize) -> Vec<Duration> {
    // Spread over the run's first seconds (ipc/ then switch/), jittered by the clock.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    (0..n)
        .map(|i| {
            let jitter = (seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(i as u64 * 1442695040888963407)
                >> 33)
                % 400;
            Duration::from_millis(150 + (i as u64 * 4000 / n as u64) + jitter)
        })
        .collect()
}

#[test]
fn kill_9_of_the_coordinator_leaves_nothing_running_and_the_next_run_reclaims_the_rest() {
    let _g = measuring();
    for t in kill_moments(3) {
        kill_coordinator_at(t);
    }
}

#[test]
#[ignore = "slow: ten kills; .ci/run runs it"]
fn kill_9_of_the_coordinator_at_ten_moments() {
    let _g = measuring();
    for t in kill_moments(10) {
        kill_coordinator_at(t);
    }
}

#[test]
fn kill_9_of_ab_never_leaves_one_side_without_the_other() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ab.db");
    let mut completed = 0;
    for (i, t) in kill_moments(6).into_iter().enumerate() {
        let mut child = oscost(&unique_tag("abkill"))
            .args([
                "ab",
                "--quick",
                "--rounds",
                "1",
                "--samples",
                "20",
                "call/f0",
            ])
            .args(["--db", db.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Moments from the start to past the end (a short ab saves after ~1 s).
        std::thread::sleep(t / 3 + Duration::from_millis(i as u64 * 40));
        let _ = child.kill();
        let status = child.wait().unwrap();
        completed += usize::from(status.success());
        if db.exists() {
            let n = oscost::effects::store::Store::open_existing(&file_store(&db))
                .map(|mut s| s.list().unwrap().len())
                .unwrap_or(0);
            assert_eq!(n % 2, 0, "{n} runs after a kill at {t:?}: one side alone");
        }
    }
    eprintln!("{completed} of 6 ab runs finished before their kill");
}

#[test]
fn eight_concurrent_first_uses_of_a_fresh_database_all_succeed() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fresh.db");
    let children: Vec<_> = (0..8)
        .map(|_| {
            oscost(&unique_tag("first"))
                .args([
                    "run",
                    "--samples",
                    "20",
                    "call/f0",
                    "--db",
                    db.to_str().unwrap(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_success(&out);
    }
    let mut s = oscost::effects::store::Store::open_existing(&file_store(&db)).unwrap();
    assert_eq!(s.list().unwrap().len(), 8);
}

#[test]
fn a_wrappers_daemon_does_not_outlive_the_run() {
    let _g = measuring();
    let tag = unique_tag("daemon");
    let out = oscost(&tag)
        .args(QUICK)
        .args([
            "--under",
            "sh -c 'setsid sleep 30 </dev/null >/dev/null 2>&1 & exec \"$@\"' x",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(alive(&tag), Vec::<i32>::new());
}

#[test]
fn thread_limits_and_a_tiny_stack_give_reasons_not_panics() {
    let prlimit = Path::new("/usr/bin/prlimit");
    if !prlimit.exists() {
        skip_needing(
            "thread_limits_and_a_tiny_stack_give_reasons_not_panics",
            &["prlimit"],
            "no /usr/bin/prlimit",
        );
        return;
    }
    let out = std::process::Command::new(prlimit)
        .arg("--stack=32768")
        .arg(bin())
        .arg("list")
        .output()
        .unwrap();
    assert_success(&out);
    let setpriv = Path::new("/usr/bin/setpriv");
    if !(nix::unistd::geteuid().is_root() && setpriv.exists()) {
        skip_needing(
            "thread_limits (RLIMIT_NPROC part)",
            &["root", "setpriv"],
            "needs root and setpriv to run as nobody (RLIMIT_NPROC does not bind root)",
        );
        return;
    }
    let _g = measuring();
    let out = std::process::Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(prlimit)
        // The command's own thread, its watchdog and the worker: the benchmark's threads are
        // the ones that hit the limit.
        .arg("--nproc=4")
        .arg(bin())
        .args([
            "run",
            "--no-save",
            "--quick",
            "spawn/thread",
            "switch/pipe-thread",
        ])
        .env("HOME", "/nonexistent")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !err.contains("panicked") && !text.contains("panicked"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(text.contains("RLIMIT_NPROC"), "{text}");
}

fn file_store(p: &std::path::Path) -> oscost::effects::store::Location {
    oscost::effects::store::Location::File(p.to_path_buf())
}

/// Under an address-space limit (`ulimit -v`) tight enough that memory runs out after
/// measuring, a measured run is saved or kept whole as a run file, never lost; each limit from
/// the smallest at which oscost starts, 1 MiB at a time.
#[test]
fn a_run_measured_under_a_tight_memory_limit_is_saved_or_kept() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let data = dir.path().join("data");
    let limited = |kib: u64, args: &[&str]| {
        let mut c = oscost(&unique_tag("ulimit"));
        c.args(args)
            .env("OSCOST_DB", &db)
            .env("XDG_DATA_HOME", &data);
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; it runs between fork and exec.
        unsafe {
            c.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: kib << 10,
                    rlim_max: kib << 10,
                };
                libc::setrlimit(libc::RLIMIT_AS, &lim);
                Ok(())
            });
        }
        c.output().unwrap()
    };
    // The smallest limit at which the binary starts at all.
    let mut floor = 8_000;
    while !limited(floor, &["list"]).status.success() {
        floor += 1_000;
        assert!(
            floor < 200_000,
            "oscost did not start under any limit tried"
        );
    }
    let kept = || {
        std::fs::read_dir(data.join("oscost/unsaved"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let stored = || {
        oscost::effects::store::Store::open_existing(&oscost::effects::store::Location::File(
            db.clone(),
        ))
        .and_then(|mut s| s.list())
        .map(|l| l.len())
        .unwrap_or(0)
    };
    let mut measured = 0;
    for kib in (floor..floor + 14_000).step_by(1_000) {
        let before = stored() + kept();
        let out = limited(
            kib,
            &["run", "--samples", "40", "call/f0", "syscall/getpid"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        if !err.contains("benchmark(s)") {
            continue; // refused or failed before measuring: nothing to lose
        }
        measured += 1;
        assert_eq!(
            stored() + kept(),
            before + 1,
            "under {kib} KiB a measured run was lost (exit {:?}): {err}",
            out.status.code()
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(
        measured > 0,
        "no limit from {floor} KiB let a run start measuring"
    );
}

/// A stderr that cannot be written (`2>/dev/full`, a pipe whose reader left) is no panic: the
/// run is saved and the exit status is the run's.
#[test]
fn an_unwritable_stderr_loses_no_run_and_panics_nowhere() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = oscost(&unique_tag("devfull"))
        .args(["run", "--samples", "40", "call/f0", "--db"])
        .arg(&db)
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // A stderr pipe whose reader is gone before oscost writes.
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    let out = oscost(&unique_tag("closedpipe"))
        .args(["run", "--samples", "40", "call/f0", "--db"])
        .arg(&db)
        .stderr(std::process::Stdio::from(writer))
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(101));
    let mut s = oscost::effects::store::Store::open_existing(
        &oscost::effects::store::Location::File(db.clone()),
    )
    .unwrap();
    assert_eq!(s.list().unwrap().len(), 2, "both runs saved");
    for args in [&["history"][..], &["matrix"], &["show", "last"], &["list"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = oscost(&unique_tag("devfull-read"))
            .args(args)
            .arg("--db")
            .arg(&db)
            .stderr(full)
            .output();
        // `list` takes no --db: its refusal must not panic either.
        let out = out.unwrap();
        assert_ne!(out.status.code(), Some(101), "{args:?}");
    }
}

/// `--runs N` stopped after saving some of its runs says which were saved (exit 128+N), not
/// "nothing was saved".
#[test]
fn a_series_interrupted_after_a_save_names_the_runs_it_saved() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut child = oscost(&unique_tag("series-int"))
        .args([
            "run",
            "--runs",
            "3",
            "--pause",
            "20",
            "--samples",
            "40",
            "call/f0",
            "--db",
        ])
        .arg(&db)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut err, &mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains("saved as run") {
            break;
        }
    }
    // SAFETY: kill on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(rest.contains("after saving run 1"), "{rest}");
    assert!(!rest.contains("nothing was saved"), "{rest}");
}
