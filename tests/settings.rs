//! Kernel settings changed for a measurement are always put back: after a normal end, a failed
//! benchmark, SIGINT, SIGTERM, SIGKILL of oscost (its guard process puts them back), and
//! SIGKILL of oscost and its guard together (the next oscost command puts them back from the
//! state file). Bad input changes nothing. The setting used is ASLR
//! (`kernel.randomize_va_space`), harmless to flip for a second; needs root (skipped without).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

const ASLR: &str = "/proc/sys/kernel/randomize_va_space";

fn aslr() -> String {
    std::fs::read_to_string(ASLR).unwrap().trim().to_string()
}

/// A value other than `now` (1 unless it is 1).
fn other(now: &str) -> &'static str {
    if now == "1" { "2" } else { "1" }
}

fn wait_for(what: &str, limit: Duration, ok: impl Fn() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < limit,
            "{what} did not happen within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn oscost_in(tag: &str, data: &Path) -> std::process::Command {
    let mut c = oscost(tag);
    c.env("XDG_DATA_HOME", data);
    c
}

#[test]
fn a_setting_is_put_back_however_oscost_ends() {
    if !is_root() {
        skip(
            "a_setting_is_put_back_however_oscost_ends",
            "changing kernel settings needs root",
        );
        return;
    }
    let _m = measuring();
    let data = tempfile::tempdir().unwrap();
    let original = aslr();
    let set = format!("aslr={}", other(&original));

    // A normal end: measured under the value, put back after; the run records both.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = oscost_in(&unique_tag("set-ok"), data.path())
        .args([
            "run",
            "--no-save",
            "--samples",
            "40",
            "call/f0",
            "--set",
            &set,
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(aslr(), original, "after a normal end");
    let run = read_run(&json);
    assert_eq!(run.settings, vec![set.clone()]);
    assert_eq!(run.env.settings.get("aslr"), Some(&original));

    // A failed benchmark (a worker killed by its timeout): exit 1, put back.
    let out = oscost_in(&unique_tag("set-fail"), data.path())
        .args([
            "run",
            "--no-save",
            "--samples",
            "40",
            "--timeout",
            "0.001",
            "spawn/fork",
        ])
        .args(["--set", &set])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(aslr(), original, "after a failed benchmark");

    // SIGINT, SIGTERM and SIGKILL of oscost while it measures under the value.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        let tag = unique_tag("set-sig");
        let mut child = oscost_in(&tag, data.path())
            .args([
                "run",
                "--no-save",
                "--quick",
                "syscall/",
                "spawn/",
                "--set",
                &set,
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the setting taking effect", Duration::from_secs(10), || {
            aslr() != original
        });
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill on our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let _ = child.wait();
        wait_for(
            &format!("the put back after signal {sig}"),
            Duration::from_secs(5),
            || aslr() == original,
        );
        assert!(wait_until_gone(&tag, Duration::from_secs(5)).is_empty());
    }

    // SIGKILL of oscost and of its guard at once: the state file stays, and the next oscost
    // command (any) puts the value back and says so.
    let tag = unique_tag("set-all");
    let mut child = oscost_in(&tag, data.path())
        .args([
            "run",
            "--no-save",
            "--quick",
            "syscall/",
            "spawn/",
            "--set",
            &set,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the setting taking effect", Duration::from_secs(10), || {
        aslr() != original
    });
    for pid in tagged_processes(&tag) {
        // SAFETY: kill on processes this test started (they carry its tag).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let _ = child.wait();
    assert!(wait_until_gone(&tag, Duration::from_secs(5)).is_empty());
    assert_ne!(aslr(), original, "nothing was left to put it back");
    let out = oscost_in(&unique_tag("set-next"), data.path())
        .arg("list")
        .output()
        .unwrap();
    assert_success(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("put back"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(aslr(), original, "after the next command");
}

#[test]
fn bad_settings_are_refused_in_one_line_and_change_nothing() {
    if !is_root() {
        skip(
            "bad_settings_are_refused_in_one_line_and_change_nothing",
            "changing kernel settings needs root",
        );
        return;
    }
    let _m = measuring();
    let data = tempfile::tempdir().unwrap();
    let thp = "/sys/kernel/mm/transparent_hugepage/enabled";
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let (aslr_before, thp_before) = (aslr(), read(thp));
    for (args, says) in [
        (vec!["--set", "nosuch=1"], "not a setting"),
        (vec!["--set", "/etc/hostname=x"], "outside"),
        (vec!["--set", "aslr=1", "--set", "aslr=0"], "twice"),
        (vec!["--set", "aslr"], "NAME=VALUE"),
        (vec!["--set", "thp=bogus"], "refuses"),
        (
            vec!["--set", "/proc/sys/kernel/no_such_knob=1"],
            "no such file",
        ),
        (vec!["--set", "/proc/sys/kernel/osrelease=x"], "read-only"),
    ] {
        let out = oscost_in(&unique_tag("set-bad"), data.path())
            .args(["run", "--no-save", "--samples", "40", "call/f0"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("benchmark(s)"), "{args:?} measured: {err}");
        assert_eq!(aslr(), aslr_before, "{args:?} changed ASLR");
        if Path::new(thp).exists() {
            assert_eq!(read(thp), thp_before, "{args:?} changed THP");
        }
    }
    let out = oscost_in(&unique_tag("set-ab"), data.path())
        .args(["ab", "--set", "aslr=1", "call/f0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Without root: one line, nothing written.
    if let Some(out) = output_without_rights(
        "bad_settings_are_refused_in_one_line_and_change_nothing",
        &[
            "run",
            "--no-save",
            "--samples",
            "40",
            "call/f0",
            "--set",
            "aslr=1",
        ],
    ) {
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("not root"));
        assert_eq!(aslr(), aslr_before);
    }
}

/// A/B on one setting switches it before each side's repetitions and puts it back; each side
/// records its own settings and is named by them.
#[test]
fn ab_switches_a_setting_per_side_and_puts_it_back() {
    if !is_root() {
        skip(
            "ab_switches_a_setting_per_side_and_puts_it_back",
            "changing kernel settings needs root",
        );
        return;
    }
    let _m = measuring();
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let original = aslr();
    let out = oscost_in(&unique_tag("set-ab"), data.path())
        .args([
            "ab",
            "--rounds",
            "2",
            "--samples",
            "40",
            "call/f0",
            "--settle",
            "0",
        ])
        .args(["--a-set", "aslr=0", "--b-set", "aslr=2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(aslr(), original);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("B = aslr=2"), "{err}");
    let mut s = oscost::store::Store::open_existing(&oscost::store::Location::File(db)).unwrap();
    let ids: Vec<i64> = s.list().unwrap().iter().map(|r| r.id).collect();
    let (a, b) = (s.load(ids[0]).unwrap(), s.load(ids[1]).unwrap());
    assert_eq!(a.settings, vec!["aslr=0".to_string()]);
    assert_eq!(b.settings, vec!["aslr=2".to_string()]);
    // A run under a setting is an environment of its own (its own run-to-run history).
    assert_ne!(oscost::store::env_key(&a), oscost::store::env_key(&b));
}
