//! A program that runs during a run or a side (`--during`, `--b-during`): started, waited for
//! until ready, noted on the run, and stopped on every exit path (done, failed, SIGINT, SIGKILL
//! of oscost) as a user would stop it, with its descendants, also one that left its group.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

/// An executable shell script `name` in `dir` holding `body`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Wait up to `limit` for `path` to exist.
fn wait_for(path: &Path, limit: Duration) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

#[test]
fn a_program_during_a_run_is_ready_by_its_output_noted_and_stopped_by_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let cleaned = dir.path().join("cleaned");
    let agent = script(
        dir.path(),
        "agent.sh",
        &format!(
            "trap 'echo bye > {}; exit 0' INT\necho attaching\necho attached and ready\nwhile :; do sleep 0.05; done",
            cleaned.display()
        ),
    );
    let tag = unique_tag("during-ready");
    let _m = measuring();
    let (out, run) = run_json(
        &tag,
        &[
            "--samples",
            "40",
            "syscall/getppid",
            "--no-save",
            "--during",
            &agent,
            "--ready",
            "and ready$",
        ],
    );
    assert_success(&out);
    assert_eq!(run.during.as_deref(), Some(agent.as_str()));
    let note = run
        .notes
        .iter()
        .find(|n| matches!(n.kind, oscost::base::model::NoteKind::During { .. }))
        .expect("a note on the program");
    assert!(
        note.text.contains("its output matched --ready") && note.text.contains("stopped by SIGINT"),
        "{}",
        note.text
    );
    // It cleaned up on SIGINT, and nothing of it is left.
    assert_eq!(std::fs::read_to_string(&cleaned).unwrap().trim(), "bye");
    let left = wait_until_gone(&tag, Duration::from_secs(2));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_daemon_that_left_the_group_and_signals_ignored_are_still_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // A daemon in a session of its own, and a leader that ignores SIGINT and SIGTERM: only
    // SIGKILL, to the group and to every descendant, ends both.
    let agent = script(
        dir.path(),
        "stubborn.sh",
        "trap '' INT TERM\nsetsid sh -c \"trap '' INT TERM; while :; do sleep 0.05; done\" &\nwhile :; do sleep 0.05; done",
    );
    let tag = unique_tag("during-stubborn");
    let _m = measuring();
    let (out, run) = run_json(
        &tag,
        &[
            "--samples",
            "40",
            "syscall/getppid",
            "--no-save",
            "--during",
            &agent,
        ],
    );
    assert_success(&out);
    let note = run
        .notes
        .iter()
        .map(|n| n.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(note.contains("stopped by SIGKILL"), "{note}");
    assert!(
        note.contains("what is attached to the system settled"),
        "{note}"
    );
    let left = wait_until_gone(&tag, Duration::from_secs(2));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_program_that_exits_or_never_gets_ready_voids_the_run_with_its_last_lines() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let quits = script(
        dir.path(),
        "quits.sh",
        "echo 'cannot attach: no rights' >&2\nexit 3",
    );
    let tag = unique_tag("during-quits");
    let _m = measuring();
    let out = oscost(&tag)
        .args(["run", "--samples", "40", "syscall/getppid", "--no-save"])
        .args(["--during", &quits, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("exited (with status 3) before it was ready")
            && err.contains("cannot attach: no rights"),
        "{err}"
    );
    assert!(!json.exists(), "a void run was written");

    let silent = script(dir.path(), "silent.sh", "echo hello\nexec sleep 1000");
    let out = oscost(&tag)
        .args(["run", "--samples", "40", "syscall/getppid", "--no-save"])
        .args([
            "--during",
            &silent,
            "--ready",
            "^never$",
            "--ready-timeout",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("printed no line matching --ready '^never$' in 1 s") && err.contains("hello"),
        "{err}"
    );
    let left = wait_until_gone(&tag, Duration::from_secs(2));
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `run --runs 2 --during`: each run of the series is measured during the program.
#[test]
fn each_run_of_a_series_is_measured_during_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let tag = unique_tag("during-series");
    let _m = measuring();
    let out = oscost(&tag)
        .args([
            "run",
            "--runs",
            "2",
            "--pause",
            "0.1",
            "--samples",
            "40",
            "call/f0",
        ])
        .args(["--during", "sleep 1000", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    for id in ["1", "2"] {
        let f = dir.path().join(format!("{id}.json"));
        let out = oscost(&tag)
            .args(["export", id, "--json"])
            .arg(&f)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert_success(&out);
        assert_eq!(
            read_run(&f).during.as_deref(),
            Some("sleep 1000"),
            "run {id}"
        );
    }
    let left = wait_until_gone(&tag, Duration::from_secs(2));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bad_during_flags_are_refused_before_measuring() {
    let tag = unique_tag("during-usage");
    for (args, says) in [
        (
            vec!["run", "call/f0", "--during", "no-such-program-here"],
            "no-such-program-here",
        ),
        (
            vec!["run", "call/f0", "--during", "sleep 'x"],
            "unbalanced quotes",
        ),
        (
            vec!["run", "call/f0", "--during", "sleep 9", "--ready", "("],
            "not a regular expression",
        ),
        (vec!["ab", "call/f0", "--ready", "x"], "give one"),
    ] {
        let out = oscost(&tag).args(&args).arg("--no-save").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert!(tagged_processes(&tag).is_empty());
}

/// oscost killed while its program runs: the keeper stops the program the graceful way all
/// the same (SIGKILL of oscost), or oscost does (SIGINT).
#[test]
fn the_program_is_stopped_gracefully_when_oscost_is_killed_or_interrupted() {
    for sig in [libc::SIGKILL, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let (up, cleaned) = (dir.path().join("up"), dir.path().join("cleaned"));
        let agent = script(
            dir.path(),
            "agent.sh",
            &format!(
                "trap 'echo bye > {}; exit 0' INT\ntouch {}\nwhile :; do sleep 0.05; done",
                cleaned.display(),
                up.display()
            ),
        );
        let tag = unique_tag("during-killed");
        let _m = measuring();
        let mut child = oscost(&tag)
            .args(["run", "syscall/getppid", "--budget", "30", "--no-save"])
            .args(["--during", &agent])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            wait_for(&up, Duration::from_secs(10)),
            "the program never started"
        );
        // Past its readiness (1 s of a settled system), into the measuring: a worker is up.
        assert!(
            wait_for_process(&tag, "__worker", Duration::from_secs(30)),
            "measuring never started"
        );
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.signal() == Some(sig) || status.code() == Some(128 + sig),
            "{sig}: {status:?}"
        );
        let left = wait_until_gone(&tag, Duration::from_secs(5));
        assert!(left.is_empty(), "signal {sig}: left behind: {left:?}");
        assert!(
            std::fs::read_to_string(&cleaned).is_ok_and(|s| s.trim() == "bye"),
            "signal {sig}: the program was not stopped with SIGINT first"
        );
    }
}

/// The first of the checks, where perf is here and we are root: a system-wide perf
/// counter on every system call entry, run during B, makes getppid slower; afterwards no perf
/// is left and tracefs is as it was (perf mounts it to resolve the tracepoint).
#[test]
fn a_system_wide_perf_counter_during_b_makes_getppid_slower() {
    let test = "a_system_wide_perf_counter_during_b_makes_getppid_slower";
    if !is_root() {
        return skip_needing(test, &["root"], "perf's system-wide counters need root");
    }
    let tracefs_before = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .contains(" - tracefs ");
    let perf_works = std::process::Command::new("perf")
        .args([
            "stat",
            "-a",
            "-e",
            "raw_syscalls:sys_enter",
            "-o",
            "/dev/null",
            "true",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !perf_works {
        put_tracefs_back(tracefs_before);
        return skip(test, "perf cannot count raw_syscalls:sys_enter here");
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cmp.json");
    let tag = unique_tag("during-perf");
    let _m = measuring();
    let out = oscost(&tag)
        // ab's whole budget, not --quick's: a noisy host (CI's, 2026-11-29) left x1.43 with
        // a CI of 0.93-2.20 after --quick's 5 blocks, undecided; ab stops once it has called
        // the change (~10 blocks here), so a quiet host pays nothing for the longer cap.
        .args(["ab", "syscall/getppid", "--budget", "40", "--no-save"])
        .args([
            "--b-during",
            "perf stat -a -e raw_syscalls:sys_enter -o /dev/null",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    put_tracefs_back(tracefs_before);
    assert_success(&out);
    let cmp: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let row = &cmp["rows"][0];
    assert_eq!(row["verdict"], "slower", "{row}");
    assert_eq!(
        cmp["cand"]["during"],
        "perf stat -a -e raw_syscalls:sys_enter -o /dev/null"
    );
    let left = wait_until_gone(&tag, Duration::from_secs(2));
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Unmount the tracefs perf mounted, where none was mounted before.
fn put_tracefs_back(was_mounted: bool) {
    if !was_mounted {
        for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
            let _ = nix::mount::umount(root);
        }
    }
}

/// A BPF program loaded by this test and held by its descriptor: a socket filter that returns
/// 0, attached to nothing, named `name` (the kernel keeps 15 bytes). `None` where the kernel
/// refuses (no CAP_BPF, no BPF).
fn load_bpf_program(name: &str) -> Option<std::os::fd::OwnedFd> {
    // mov r0, 0; exit.
    let insns: [u64; 2] = [0xb7, 0x95];
    let license = b"GPL\0";
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // BPF_PROG_TYPE_SOCKET_FILTER
    attr[4..8].copy_from_slice(&2u32.to_ne_bytes());
    attr[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    let n = name.len().min(15);
    attr[48..48 + n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: BPF_PROG_LOAD (5) reads the attribute and the memory it points at, all alive.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 5, attr.as_mut_ptr(), attr.len() as u32) };
    (fd >= 0).then(|| {
        // SAFETY: a descriptor the kernel just gave us.
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) }
    })
}

/// What is attached to the system is on record: a BPF program loaded outside the run is
/// listed by `oscost env`, and `compare` of a run made with it against one made without names
/// it; a run's environment key moves only when something is attached.
#[test]
fn a_bpf_program_attached_outside_the_run_is_listed_and_named_by_compare() {
    let test = "a_bpf_program_attached_outside_the_run_is_listed_and_named_by_compare";
    if !is_root() {
        return skip_needing(test, &["root"], "listing BPF programs needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let tag = unique_tag("attached");
    let _m = measuring();
    let measure = |name: &str| {
        let out = oscost(&tag)
            .args(["run", "--samples", "40", "call/f0", "--label", name, "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert_success(&out);
    };
    measure("without");
    let Some(fd) = load_bpf_program("oscost_probe") else {
        return skip(test, "the kernel refused a BPF socket filter");
    };
    let env = oscost(&tag).arg("env").output().unwrap();
    assert_success(&env);
    let text = String::from_utf8_lossy(&env.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("attached to the system")
            && l.contains("BPF socket filter oscost_probe")),
        "{text}"
    );
    measure("with");
    drop(fd);
    let out = oscost(&tag)
        .args(["compare", "1", "2", "--together", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("the runs differ in: "))
        .unwrap_or_else(|| panic!("no difference named: {text}"));
    assert!(line.contains("BPF programs"), "{line}");
    assert!(line.contains("oscost_probe"), "{line}");
}

/// `predict --during`: the program's cost predicted and measured with an agent running during
/// the wrapped side (here one that attaches nothing), in blocks; the agent is gone after.
#[test]
fn predict_during_prices_and_times_a_program_beside_an_agent() {
    if !is_root() {
        return skip_needing(
            "predict_during_prices_and_times_a_program_beside_an_agent",
            &["root"],
            "counting a program's system calls needs root",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let tag = unique_tag("during-predict");
    let _m = measuring();
    let out = oscost(&tag)
        .args([
            "predict",
            "--during",
            "sleep 1000",
            "--quick",
            "--rounds",
            "3",
        ])
        .args(["--no-save", "--json"])
        .arg(&json)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["during"], "sleep 1000");
    assert_eq!(v["wrapper"], "");
    assert!(v["rounds"].as_u64().unwrap() >= 3, "{v}");
    // No wrapper: the first start is priced as a program start, not as a wrapper's.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("wrapper start"), "{text}");
    let left = wait_until_gone(&tag, Duration::from_secs(2));
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `syscall/getppid` measured on CPU `measured` during a program spinning pinned to CPU
/// `spinning` (ready once it says so).
fn run_beside_a_spinner(
    name: &str,
    spinning: usize,
    measured: usize,
) -> (std::process::Output, oscost::base::model::Run) {
    let dir = tempfile::tempdir().unwrap();
    let agent = script(
        dir.path(),
        "spin.sh",
        &format!("echo ready\nexec taskset -c {spinning} sh -c 'while :; do :; done'"),
    );
    let tag = unique_tag(name);
    let _m = measuring();
    run_json(
        &tag,
        &[
            "--samples",
            "200",
            "syscall/getppid",
            "--no-save",
            "--cpu",
            &measured.to_string(),
            "--during",
            &agent,
            "--ready",
            "^ready$",
        ],
    )
}

#[test]
fn a_program_during_a_run_has_its_cpu_time_counted_on_each_cpu() {
    let test = "a_program_during_a_run_has_its_cpu_time_counted_on_each_cpu";
    let allowed = allowed_cpus();
    if allowed.len() < 2 {
        return skip(test, "one CPU: nothing to tell apart");
    }
    if !Path::new("/usr/bin/taskset").exists() {
        return skip_needing(test, &["taskset"], "no taskset to pin the spinning program");
    }
    // A program spinning on the first allowed CPU; oscost measures on the last.
    let spinner = allowed[0];
    let (out, run) = run_beside_a_spinner("during-by-cpu", spinner, *allowed.last().unwrap());
    assert_success(&out);
    let (cpu_s, measured_s, by_cpu) = run
        .notes
        .iter()
        .find_map(|n| match &n.kind {
            oscost::base::model::NoteKind::During {
                cpu_s,
                measured_s,
                cpu_s_by_cpu,
                ..
            } => Some((*cpu_s, *measured_s, cpu_s_by_cpu.clone())),
            _ => None,
        })
        .expect("a note on the program");
    if by_cpu.is_empty() {
        return skip(
            test,
            "the keeper could not count by CPU (perf_event_open refused)",
        );
    }
    let sum: f64 = by_cpu.iter().map(|(_, s)| s).sum();
    // Two accounts of one tree's time agree (the tick-based one is coarse: 10 ms a tick).
    assert!(
        (sum - cpu_s).abs() <= 0.1 * cpu_s + 0.05,
        "by CPU {by_cpu:?} sum {sum} against {cpu_s}"
    );
    let on = |c: usize| {
        by_cpu
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(0.0, |(_, s)| *s)
    };
    // Spinning, pinned: most of the measured time on its CPU, next to none elsewhere.
    assert!(
        on(spinner) > 0.5 * measured_s,
        "{by_cpu:?} over {measured_s} s"
    );
    assert!(
        on(*allowed.last().unwrap()) < 0.1 * measured_s,
        "{by_cpu:?} over {measured_s} s"
    );
}

#[test]
fn a_program_that_shares_the_measuring_cpu_is_named_as_the_sides_program() {
    let test = "a_program_that_shares_the_measuring_cpu_is_named_as_the_sides_program";
    if !Path::new("/usr/bin/taskset").exists() {
        return skip_needing(test, &["taskset"], "no taskset to pin the spinning program");
    }
    let last = *allowed_cpus().last().unwrap();
    let (out, run) = run_beside_a_spinner("during-named", last, last);
    assert_success(&out);
    // A spinning task on the measuring CPU takes about half of it: the result is flagged, and
    // the flag names the task as the side's program.
    let text = serde_json::to_string(&run).unwrap();
    assert!(
        text.contains("of the program run during the side"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_keeper_counts_by_cpu_without_perf_events() {
    // An inherited perf task counter anywhere turns on the scheduler's perf hooks for every
    // context switch of the machine (an A/A ab with such counters in the keeper called a pipe
    // round trip 1.8% slower): neither the keeper nor its program may hold one.
    let tag = unique_tag("during-no-perf");
    let _m = measuring();
    let mut child = oscost(&tag)
        .args([
            "run",
            "--budget",
            "3",
            "syscall/getppid",
            "--no-save",
            "--during",
            "sleep 60",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let is_keeper = |p: &i32| {
        std::fs::read(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| c.split(|&b| b == 0).nth(1) == Some(b"__during".as_slice()))
    };
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while !tagged_processes(&tag).iter().any(is_keeper) && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Past its settling (a second) and its first look by CPU.
    std::thread::sleep(Duration::from_millis(1500));
    let tagged = tagged_processes(&tag);
    let keepers: Vec<i32> = tagged.iter().copied().filter(is_keeper).collect();
    let mut looked = 0;
    for p in tagged
        .iter()
        .filter(|p| keepers.contains(p) || ppid_of(**p).is_some_and(|pp| keepers.contains(&pp)))
    {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
            continue;
        };
        looked += 1;
        for fd in fds.flatten() {
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            assert!(
                !target.to_string_lossy().contains("perf_event"),
                "{p} (the keeper or its program) holds a perf event"
            );
        }
    }
    let _ = child.wait();
    assert!(looked >= 2, "the keeper and its program were not both seen");
    assert!(wait_until_gone(&tag, Duration::from_secs(5)).is_empty());
}
