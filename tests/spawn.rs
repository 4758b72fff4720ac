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
    let rises = "fork copies the page tables of the parent's resident memory";
    assert_costlier(
        &tag,
        &run,
        &["--budget", "0.4", "--fork-sizes", "0,64M,256M"],
        &[
            costlier(
                "spawn/fork",
                "spawn/vfork",
                "vfork shares the parent's memory where fork copies its mappings",
            ),
            costlier(
                "spawn/fork-exec",
                "spawn/fork",
                "fork-exec is fork plus an exec",
            ),
            costlier(
                "spawn/fork-exec-dynamic",
                "spawn/fork-exec",
                "the dynamic loader costs something",
            ),
            costlier("spawn/fork-rss/64MiB", "spawn/fork-rss/0MiB", rises),
            costlier("spawn/fork-rss/256MiB", "spawn/fork-rss/64MiB", rises),
        ],
    );
    let last = result(&run, "spawn/fork-rss/256MiB");
    assert!(last.params["slope_ns_per_mib"].as_f64().unwrap() > 0.0);
    // The parent a fork copied is said beside its cost: its mappings, anonymous memory and
    // page tables, the 256 MiB the curve's last point holds resident among them.
    let anon = |id: &str| result(&run, id).params["parent_anon_kib"].as_u64().unwrap();
    assert!(
        result(&run, "spawn/fork").params["parent_mappings"]
            .as_u64()
            .unwrap()
            >= 5
    );
    assert!(anon("spawn/fork-rss/256MiB") >= anon("spawn/fork") + (256 << 10));
    let tables = result(&run, "spawn/fork").params["parent_page_table_kib"].as_u64();
    assert!(tables.is_some_and(|kib| kib >= 4), "{tables:?}");
    // The fork-rss point's resident block is one mapping with anonymous pages over at least
    // 128 2 MiB regions. Not "the plain fork's count + 128": each parent is a fresh process
    // whose mappings land at random offsets, so two neighbours share a region in one and
    // not in the other, and the rest of the count moves by a few either way.
    let count = |id: &str, p: &str| result(&run, id).params[p].as_u64().unwrap();
    assert!(count("spawn/fork", "parent_anon_mappings") >= 1);
    let (plain, big) = (
        count("spawn/fork", "parent_anon_regions"),
        count("spawn/fork-rss/256MiB", "parent_anon_regions"),
    );
    assert!(
        big >= 128 && big > plain,
        "{big} regions at 256 MiB, {plain} at none"
    );
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
        skip_needing(
            "spawn limits",
            &["root", "setpriv", "prlimit"],
            "needs root, setpriv and prlimit",
        );
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

/// The cgroups under the unified hierarchy's root and under this process's own that a run of
/// oscost made (`oscost-<pid>-<nonce>`).
fn oscost_cgroups() -> Vec<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(root) = mounts.lines().find_map(|l| {
        let (m, rest) = l.split_once(" - ")?;
        (rest.split_whitespace().next()? == "cgroup2").then(|| m.split_whitespace().nth(4))?
    }) else {
        return vec![];
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    let dir = std::path::Path::new(root).join(own.trim_start_matches('/'));
    std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("oscost-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// clone3 into a cgroup: the run makes the cgroup, measures, and removes it; a SIGKILL of
/// oscost mid-run still removes it (its guard does), and a run that cannot make one skips the
/// benchmark saying why.
#[test]
fn the_cgroup_clone3_starts_children_in_is_removed_on_every_exit() {
    let _g = measuring();
    let before = oscost_cgroups();
    let (_, run) = run_json(
        &unique_tag("cgroup"),
        &["--quick", "spawn/clone3-into-cgroup"],
    );
    let r = result(&run, "spawn/clone3-into-cgroup");
    match &r.status {
        Status::Ok => {}
        Status::Skipped { reason } => {
            assert!(reason.contains("cgroup"), "{reason}");
            skip(
                "the_cgroup_clone3_starts_children_in_is_removed_on_every_exit",
                reason,
            );
            return;
        }
        s => panic!("{s:?}"),
    }
    assert_eq!(oscost_cgroups(), before, "the run left its cgroup");
    // Killed while measuring: the cgroup is there, then gone within two seconds of the kill.
    let tag = unique_tag("cgroup-kill");
    let mut child = oscost(&tag)
        .args([
            "run",
            "--no-save",
            "--budget",
            "20",
            "spawn/clone3-into-cgroup",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let made = (0..100).find_map(|_| {
        std::thread::sleep(Duration::from_millis(50));
        oscost_cgroups().into_iter().find(|p| !before.contains(p))
    });
    let made = made.expect("no cgroup appeared while the benchmark ran");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let gone = (0..40).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        !made.exists()
    });
    assert!(gone, "{} outlived a SIGKILL of oscost", made.display());
    wait_until_gone(&tag, Duration::from_secs(5));
}
