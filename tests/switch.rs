//! switch/: invariants (cross-CPU costs more than same-CPU; a bigger working set never makes a
//! ring cheaper), lat_ctx's output format, a killed peer failing its benchmark instead of
//! hanging it, and SIGTERM in the middle of a ring leaving no process.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Both placements measured and recorded as such (whichever costs more depends on the host:
/// its idle states, whether the two CPUs share a core; that ordering is the slow tier's).
#[test]
fn ping_pong_is_placed_on_one_cpu_and_across_two() {
    if allowed_cpus().len() < 2 {
        skip(
            "ping_pong_is_placed_on_one_cpu_and_across_two",
            "one allowed CPU: no cross placement",
        );
        return;
    }
    let _g = measuring();
    let (_, run) = run_json(
        &unique_tag("places"),
        &[
            "--quick",
            "--placement",
            "same,cross",
            "switch/pipe-proc",
            "switch/futex-thread",
        ],
    );
    for b in ["switch/pipe-proc", "switch/futex-thread"] {
        let r = result(&run, &format!("{b}@cross"));
        assert!(
            matches!(&r.placement, oscost::base::model::Placement::Cross { cpus } if cpus.len() == 2),
            "{:?}",
            r.placement
        );
        assert!(r.params["per_switch_median_ns"].as_f64().unwrap() > 0.0);
    }
    let y = result(&run, "switch/futex-thread@same");
    assert!(matches!(
        y.placement,
        oscost::base::model::Placement::Same { .. }
    ));
}

/// On these VMs a round trip across two CPUs waits for the other CPU to wake (32-35 us against
/// 4-5 us on one): a host-dependent ordering, so the slow tier's.
#[test]
#[ignore = "slow tier (host-dependent ordering): .ci/run runs it with --ignored"]
fn cross_cpu_ping_pong_costs_more_than_same_cpu() {
    if allowed_cpus().len() < 2 {
        skip(
            "cross_cpu_ping_pong_costs_more_than_same_cpu",
            "one allowed CPU: no cross placement",
        );
        return;
    }
    let _g = measuring();
    let tag = unique_tag("places-order");
    let placements = ["--placement", "same,cross"];
    let mut args = placements.to_vec();
    args.extend(["switch/pipe-proc", "switch/futex-thread"]);
    let (_, run) = run_json(&tag, &args);
    let why = "a cross-CPU round trip waits for the other CPU to wake";
    assert_costlier(
        &tag,
        &run,
        &placements,
        &[
            costlier("switch/pipe-proc@cross", "switch/pipe-proc@same", why),
            costlier("switch/futex-thread@cross", "switch/futex-thread@same", why),
        ],
    );
}

/// `oscost ctx ARGS` with a JSON copy of the run: (stdout, stderr, run).
fn ctx(args: &[&str]) -> (String, String, Run) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ctx.json");
    let out = oscost(&unique_tag("ctx"))
        .arg("ctx")
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8(out.stdout).unwrap(), err, read_run(&json))
}

#[test]
fn ctx_prints_lat_ctx_format() {
    let _g = measuring();
    let (text, err, _) = ctx(&["-s", "0", "-s", "16", "-N", "100", "2", "16"]);
    // lat_ctx: blank line, "size=Sk ovr=X, then "N cost" lines.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "{text}");
    for block in lines.chunks(4) {
        assert_eq!(block[0], "");
        assert!(
            block[1].starts_with("\"size=") && block[1].contains("k ovr="),
            "{text}"
        );
        for l in &block[2..] {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 2, "{l}");
            f[0].parse::<u32>().unwrap();
            f[1].parse::<f64>().unwrap();
        }
    }
    assert!(err.contains("95% CI"));
}

#[test]
#[ignore = "slow tier (statistical, 2 s a point): .ci/run runs it with --ignored"]
fn a_bigger_working_set_costs_at_least_as_much_within_noise() {
    let _g = measuring();
    // Default sampling (2 s a point here): windows long enough to span the machine's phases,
    // which move a switch by up to 30% for tenths of a second.
    let (_, _, run) = ctx(&["-s", "0", "-s", "64", "16"]);
    // Summing 64 KB per hop misses caches the overhead (measured hot) does not. Decided with
    // the two results' intervals: the test fails only where they say the 64 KB ring is below
    // 0.85 of the empty one, never on two bare medians.
    let claim = costlier_by(
        "switch/ring/n16-s64k",
        0.85,
        "switch/ring/n16-s0k",
        "a bigger working set never makes a ring cheaper",
    );
    let [lo0, hi0] = interval(&run, claim.less);
    let [lo64, hi64] = interval(&run, claim.more);
    assert_ne!(
        judge(&run, &claim),
        Verdict::Reversed,
        "ring of 16: 64 KB [{lo64:.0}, {hi64:.0}] ns below 0.85 of 0 KB [{lo0:.0}, {hi0:.0}]"
    );
}

#[test]
fn ctx_refuses_bad_arguments() {
    for args in [
        vec!["ctx"],
        vec!["ctx", "1"],
        vec!["ctx", "-s", "x", "4"],
        vec!["ctx", "-P", "0", "4"],
    ] {
        let out = oscost("ctx-bad").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// Kill the worker's child (the peer) while the benchmark runs: the result must say so.
fn killed_peer_fails(bench: &str, expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("peer.json");
    let tag = unique_tag("peer");
    let child = oscost(&tag)
        .args([
            "run",
            "--no-save",
            "--placement",
            "same",
            "--budget",
            "20",
            "--samples",
            "10000000",
            bench,
            "--json",
        ])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let root = child.id() as i32;
    let t0 = Instant::now();
    let peers = loop {
        let p = grandchildren(&tag, root);
        if !p.is_empty() || t0.elapsed() > Duration::from_secs(5) {
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        peers.len(),
        1,
        "{bench}: expected one peer, found {peers:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: killing the peer process this test found (a grandchild of ours).
    unsafe { libc::kill(peers[0], libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a failed benchmark is exit 1");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "{bench}: waited for its budget"
    );
    let run = read_run(&json);
    assert_failed_with(&run, &format!("{bench}@same"), expect);
    assert!(wait_until_gone(&tag, Duration::from_millis(500)).is_empty());
}

#[test]
fn a_killed_peer_fails_the_benchmark_with_a_reason() {
    let _g = measuring();
    killed_peer_fails("switch/pipe-proc", "peer process exited");
    // No end of file with eventfds: the watchdog notices.
    killed_peer_fails("switch/eventfd-proc", "peer process died");
    killed_peer_fails("switch/futex-proc", "peer process died");
}

#[test]
fn sigterm_mid_ring_leaves_no_process() {
    let _g = measuring();
    let tag = unique_tag("ring-term");
    let mut child = oscost(&tag)
        .args(["ctx", "256", "512"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the ring is up (hundreds of tagged processes), then stop it.
    let t0 = Instant::now();
    while tagged_processes(&tag).len() < 100 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        tagged_processes(&tag).len() >= 100,
        "the ring never came up"
    );
    signal_expect_clean_exit(&mut child, &tag, libc::SIGTERM, "mid-ring", None);
}
