//! Runs that measure: the result file, invariants between costs (never absolute times), the
//! noise guard, failures of one benchmark, and interrupts that leave nothing behind. Each test
//! holds the measuring lock: two benchmarks at once would disturb each other.

mod common;

use std::time::{Duration, Instant};

use common::*;

const QUICK: &[&str] = &["--quick", "--budget", "0.3"];

#[test]
fn json_follows_the_result_model_and_costs_are_ordered() {
    let _g = measuring();
    let tag = unique_tag("model");
    let mut args = QUICK.to_vec();
    args.extend([
        "call/f0",
        "call/f-struct",
        "syscall/getppid",
        "syscall/getpid",
        "timer/monotonic",
    ]);
    let (out, run) = run_json(&tag, &args);
    assert_eq!(run.schema_version, oscost::base::model::SCHEMA_VERSION);
    assert_eq!(run.tool.name, "oscost");
    assert!(run.clock.cost_ns > 0.0);
    assert!(run.env.kernel_release.is_some());
    for r in &run.results {
        assert_eq!(r.status, Status::Ok, "{}", r.id);
        let st = stats(&run, &r.id);
        assert!(st.count >= 10);
        assert!(st.ci95[0] <= st.median && st.median <= st.ci95[1]);
        assert!(!r.samples_ns.is_empty());
        assert!(r.baseline_ns > 0.0);
        assert!(matches!(
            r.placement,
            oscost::base::model::Placement::Pinned { .. }
        ));
    }
    // A positive call cost, or a note saying why not.
    assert!(median(&run, "call/f0") > 0.0 || !result(&run, "call/f0").notes.is_empty());
    // A system call costs more than a function call; a clock read through the vDSO less than
    // a system call.
    assert_costlier(
        &tag,
        &run,
        QUICK,
        &[
            costlier(
                "syscall/getppid",
                "call/f0",
                "a kernel entry against a call",
            ),
            costlier(
                "syscall/getpid",
                "timer/monotonic",
                "a kernel entry against a read of the vDSO's page",
            ),
        ],
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("syscall/getppid") && table.contains("median"));
    assert!(!table.contains('\u{1b}'), "NO_COLOR means no escape codes");
    assert!(tagged_processes(&tag).is_empty());
}

#[test]
fn every_export_is_written_and_parses() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let (j, c, m) = (
        dir.path().join("r.json"),
        dir.path().join("r.csv"),
        dir.path().join("r.md"),
    );
    let out = oscost(&unique_tag("exports"))
        .args(QUICK)
        .args(["syscall/getuid", "timer/rdtsc"])
        .arg("--json")
        .arg(&j)
        .arg("--csv")
        .arg(&c)
        .arg("--markdown")
        .arg(&m)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(&c).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert!(
        csv.lines()
            .any(|l| l.starts_with("syscall/getuid,syscall,ok,")),
        "{csv}"
    );
    let md = std::fs::read_to_string(&m).unwrap();
    assert!(md.contains("| syscall/getuid |"));
    assert_eq!(read_run(&j).results.len(), 2);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        3,
        "no temporary files left"
    );
}

#[test]
fn fixed_sample_count_is_honoured() {
    let _g = measuring();
    let (_, run) = run_json(&unique_tag("fixed"), &["--samples", "37", "syscall/getuid"]);
    let r = result(&run, "syscall/getuid");
    assert_eq!(r.samples_ns.len(), 37);
}

#[test]
fn a_busy_other_cpu_is_flagged_when_a_sibling_and_named_when_a_separate_core() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        skip(
            "a_busy_other_cpu_is_flagged_when_a_sibling_and_named_when_a_separate_core",
            "one allowed CPU: nothing to load beside the benchmark",
        );
        return;
    }
    let _g = measuring();
    let (mine, other) = (cpus[cpus.len() - 1], cpus[0]);
    let busy = BusyCpu::on(other);
    std::thread::sleep(Duration::from_millis(100));
    let cpu = mine.to_string();
    let (_, run) = run_json(
        &unique_tag("busy"),
        &[
            "--quick",
            "--budget",
            "0.3",
            "--cpu",
            &cpu,
            "syscall/getppid",
            "call/f0",
        ],
    );
    drop(busy);
    // The evidence decides: a busy SMT sibling of the measuring CPU is a disturbance; a busy
    // separate core is named in a note (it need not slow anything down).
    let sibling = oscost::measuring::placement::smt_siblings(mine).contains(&other);
    for r in &run.results {
        let d = &r.disturbed;
        assert!(d.other_cpu_busy_pct.unwrap() > 50.0, "{d:?}");
        let flagged = d.flag.iter().any(|f| f.contains("other CPU busy"));
        let noted = r.notes.iter().any(|n| {
            matches!(
                n.kind,
                oscost::base::model::NoteKind::OtherCpuBusy { busy_pct } if busy_pct > 50.0
            )
        });
        assert_eq!(
            (flagged, noted),
            (sibling, !sibling),
            "{}: {d:?} {:?}",
            r.id,
            r.notes
        );
    }
}

#[test]
fn a_crashing_worker_fails_one_benchmark_and_the_run_goes_on() {
    let _g = measuring();
    let tag = unique_tag("crash");
    // The wrapper kills itself with SIGSEGV instead of running the worker.
    let (out, run) = run_json(
        &tag,
        &[
            "--quick",
            "--under",
            "sh -c 'kill -SEGV $$'",
            "syscall/getuid",
            "syscall/gettid",
        ],
    );
    assert_eq!(run.results.len(), 2);
    for id in ["syscall/getuid", "syscall/gettid"] {
        assert_failed_with(&run, id, "SIGSEGV");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAILED"));
    assert!(tagged_processes(&tag).is_empty());
}

#[test]
fn a_hanging_worker_times_out_and_its_group_is_killed() {
    let _g = measuring();
    let tag = unique_tag("hang");
    let t0 = Instant::now();
    let (_, run) = run_json(
        &tag,
        &[
            "--quick",
            "--timeout",
            "1",
            "--under",
            "sh -c 'sleep 60 & sleep 60'",
            "syscall/getuid",
        ],
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_failed_with(&run, "syscall/getuid", "timed out");
    assert!(
        wait_until_gone(&tag, Duration::from_secs(1)).is_empty(),
        "sleepers left behind"
    );
}

/// SIGINT or SIGTERM at any moment: exit within 1 s, status 128 + signal, no process left,
/// no output file.
#[test]
fn interrupts_at_any_moment_stop_everything_within_a_second() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("never.json");
    let delays = [0u64, 30, 120, 400, 900];
    for (i, &delay) in delays.iter().enumerate() {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            let tag = unique_tag(&format!("intr{i}-{sig}"));
            let mut child = oscost(&tag)
                .args(["run", "syscall/", "call/", "--json"])
                .arg(&out_path)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(delay));
            let what = format!("at {delay} ms");
            signal_expect_clean_exit(&mut child, &tag, sig, &what, Some(&out_path));
        }
    }
}

/// Something the worker started outlives it and keeps its pipes open: the coordinator takes the
/// results the worker wrote, kills the straggler, and does not wait for the timeout.
#[test]
fn a_straggler_holding_the_pipes_neither_delays_nor_survives_the_run() {
    let _g = measuring();
    let tag = unique_tag("straggler");
    let t0 = Instant::now();
    let (_, run) = run_json(
        &tag,
        &[
            "--quick",
            "--timeout",
            "30",
            "--under",
            r#"sh -c 'sleep 60 & exec "$0" "$@"'"#,
            "syscall/getuid",
        ],
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "waited {:?}",
        t0.elapsed()
    );
    assert_eq!(state(&run, "syscall/getuid"), "ok");
    assert!(
        wait_until_gone(&tag, Duration::from_millis(500)).is_empty(),
        "the sleeper survived"
    );
}
