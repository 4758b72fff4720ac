//! spawn/: invariants between creation costs (never absolute times), every time kept, limits
//! that stop fork turning into a failed result, bad --fork-sizes, and interrupts mid-spawn.

mod common;

use std::time::Duration;

use common::*;

#[test]
#[ignore = "slow tier (statistical, forks of up to 256 MiB): .ci/run runs it with --ignored"]
fn creation_costs_are_ordered_and_every_time_is_kept() {
    let _g = measuring();
    let tag = unique_tag("spawn-order");
    let (_, run) = run_json(
        &tag,
        &[
            "--budget",
            "0.4",
            "--fork-sizes",
            "0,64M,256M",
            "spawn/fork",
            "spawn/vfork",
            "spawn/fork-exec",
            "spawn/fork-exec-dynamic",
            "spawn/fork-rss",
            "spawn/thread",
            "spawn/thread-scope-process",
        ],
    );
    let fork = median(&run, "spawn/fork");
    assert!(fork > median(&run, "spawn/vfork"), "fork > vfork");
    // fork-exec is fork plus an exec: compared at the fast end, where phases do not reach.
    assert!(
        p5(&run, "spawn/fork-exec") > p5(&run, "spawn/fork"),
        "fork-exec > fork"
    );
    assert!(
        median(&run, "spawn/fork-exec-dynamic") > median(&run, "spawn/fork-exec"),
        "the dynamic loader costs something"
    );
    let (r0, r64, r256) = (
        median(&run, "spawn/fork-rss/0MiB"),
        median(&run, "spawn/fork-rss/64MiB"),
        median(&run, "spawn/fork-rss/256MiB"),
    );
    assert!(r0 < r64 && r64 < r256, "fork-rss rises: {r0} {r64} {r256}");
    let last = result(&run, "spawn/fork-rss/256MiB");
    assert!(last.params["slope_ns_per_mib"].as_f64().unwrap() > 0.0);
    for id in ["spawn/fork", "spawn/thread"] {
        let r = result(&run, id);
        assert!(!r.batch.batched);
        assert_eq!(
            r.samples_ns.len(),
            stats(&run, id).count,
            "{id}: one sample per operation, each kept"
        );
    }
    let scope = result(&run, "spawn/thread-scope-process");
    assert_eq!(scope.status.word(), "skipped");
    assert!(scope.status.reason().unwrap().contains("not supported"));
    assert!(wait_until_gone(&tag, Duration::from_millis(500)).is_empty());
}

#[test]
fn bad_fork_sizes_are_usage_errors() {
    for (arg, expect) in [
        ("-1", "negative"),
        ("abc", "not a size"),
        ("64X", "unknown unit"),
        ("100000G", "available"),
    ] {
        let out = oscost(&unique_tag("sizes"))
            .args(["run", "spawn/fork-rss", "--fork-sizes", arg])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(expect), "{arg}: {err}");
    }
}

#[test]
fn a_process_limit_fails_fork_with_a_clear_reason_and_the_run_goes_on() {
    // Root ignores RLIMIT_NPROC, so the worker runs as nobody with a limit of one process.
    let wrapper = "setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --nproc=1 --";
    let has = |p: &str| std::path::Path::new(p).exists();
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 || !(has("/usr/bin/setpriv") && has("/usr/bin/prlimit")) {
        skip("spawn limits", "needs root, setpriv and prlimit");
        return;
    }
    let _g = measuring();
    let tag = unique_tag("nproc");
    let (_, run) = run_json(
        &tag,
        &[
            "--quick",
            "--under",
            wrapper,
            "spawn/fork",
            "spawn/thread",
            "syscall/getuid",
        ],
    );
    assert_failed_with(&run, "spawn/fork", "RLIMIT_NPROC");
    // A thread is a task too: the same limit stops it.
    assert_eq!(state(&run, "spawn/thread"), "failed");
    // The run went on.
    assert_eq!(state(&run, "syscall/getuid"), "ok");
    assert!(wait_until_gone(&tag, Duration::from_millis(500)).is_empty());
}

#[test]
fn interrupting_spawn_benchmarks_leaves_no_process() {
    let _g = measuring();
    for (delay, sig) in [
        (150u64, libc::SIGTERM),
        (700, libc::SIGINT),
        (1500, libc::SIGTERM),
    ] {
        let tag = unique_tag("spawn-intr");
        let mut child = oscost(&tag)
            .args(["run", "spawn/", "--fork-sizes", "0,64"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        signal_expect_clean_exit(&mut child, &tag, sig, &format!("at {delay} ms"), None);
    }
}
