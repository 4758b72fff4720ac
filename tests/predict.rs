//! `oscost predict`: bad input refused in one line with the right status; without the rights
//! to count, exit 2 saying what is missing; as root, a whole prediction of a small program
//! (counted, priced, measured, written), a program that fails plainly or only under the
//! wrapper, and an interrupt during the rounds that leaves nothing running.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// Counting needs root: elsewhere the test says it skipped, and why.
fn root_or_skip(test: &str) -> bool {
    is_root() || {
        skip_needing(
            test,
            &["root"],
            "counting system calls needs root (tracepoints)",
        );
        false
    }
}

/// `oscost predict --quick [--rounds N] --no-save --under WRAPPER`, the program to follow.
fn quick_predict(tag: &str, rounds: Option<&str>, under: &str) -> std::process::Command {
    let mut c = oscost(tag);
    c.args(["predict", "--quick"]);
    if let Some(n) = rounds {
        c.args(["--rounds", n]);
    }
    c.args(["--no-save", "--under", under]);
    c
}

fn one_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr).to_string();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("debug build"))
        .collect();
    lines.last().map_or(String::new(), |l| l.to_string())
}

#[test]
fn bad_input_is_refused_in_one_line_with_status_2() {
    // With the default CPU busy, so that a look at the CPUs before refusing would show.
    let _busy = allowed_cpus().last().map(|&c| BusyCpu::on(c));
    let cases: &[(&[&str], &str)] = &[
        (
            &["predict", "--under", "env", "--", "/no/such/program"],
            "not a program",
        ),
        (
            &["predict", "--under", "/no/such/wrapper", "--", "true"],
            "--under",
        ),
        (&["predict", "--", "true"], "--under"),
        (&["predict", "--under", "env"], "CMD"),
        (
            &["predict", "--under", "'unbalanced", "--", "true"],
            "--under",
        ),
        (
            &["predict", "--under", "env", "--rounds", "1", "--", "true"],
            "rounds",
        ),
    ];
    for (args, word) in cases {
        let out = oscost(&unique_tag("predict-bad"))
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(word), "{args:?} should mention {word}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    }
}

#[test]
fn without_the_rights_to_count_it_says_what_is_missing_and_exits_2() {
    let Some(out) = output_without_rights(
        "without_the_rights_to_count_it_says_what_is_missing_and_exits_2",
        &["predict", "--no-save", "--under", "env", "--", "true"],
    ) else {
        return;
    };
    let line = one_line(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{line}");
    assert!(line.contains("root"), "says how to get the rights: {line}");
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

#[test]
fn a_small_program_is_counted_priced_measured_and_written() {
    if !root_or_skip("a_small_program_is_counted_priced_measured_and_written") {
        return;
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let tag = unique_tag("predict-e2e");
    let out = quick_predict(&tag, Some("3"), "env")
        .arg("--json")
        .arg(&json)
        .arg("--report")
        .arg(dir.path().join("page"))
        .args(["--", "sh", "-c", "for i in 1 2 3; do /bin/true; done"])
        .output()
        .unwrap();
    assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // 3 children, each exec'ing /bin/true, and the shell's own exec.
    assert!(v["processes"].as_u64().unwrap() >= 3, "{v}");
    assert!(v["execs"].as_u64().unwrap() >= 4, "{v}");
    assert!(v["syscalls"]["execve"].as_u64().unwrap() >= 4, "{v}");
    assert_eq!(v["rounds"].as_u64(), Some(3));
    for k in ["predicted_added_ns", "measured_added_ns"] {
        assert!(v[k].as_f64().unwrap().is_finite(), "{k}: {v}");
    }
    let kinds: Vec<&str> = v["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"process creation"), "{kinds:?}");
    assert!(dir.path().join("page/index.html").is_file());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("predicted added time"), "{text}");
    assert!(wait_until_gone(&tag, Duration::from_millis(500)).is_empty());
}

#[test]
fn a_program_that_fails_plainly_or_only_under_the_wrapper_is_one_line_and_exit_1() {
    if !root_or_skip(
        "a_program_that_fails_plainly_or_only_under_the_wrapper_is_one_line_and_exit_1",
    ) {
        return;
    }
    let _m = measuring();
    let plain = quick_predict(&unique_tag("predict-fails"), None, "env")
        .args(["--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(1));
    assert!(
        one_line(&plain.stderr).contains("failed when run plainly"),
        "{}",
        one_line(&plain.stderr)
    );
    // A wrapper that changes what the program does: it runs it with an empty environment, and
    // the program fails without HOME.
    let wrapped = quick_predict(&unique_tag("predict-fails-wrapped"), Some("3"), "env -i")
        .args(["--", "sh", "-c", "test -n \"$HOME\""])
        .env("HOME", "/root")
        .output()
        .unwrap();
    let line = one_line(&wrapped.stderr);
    assert_eq!(wrapped.status.code(), Some(1), "{line}");
    assert!(line.contains("but not without it"), "{line}");
}

#[test]
fn an_interrupt_during_the_rounds_leaves_nothing_running() {
    if !root_or_skip("an_interrupt_during_the_rounds_leaves_nothing_running") {
        return;
    }
    let _m = measuring();
    let tag = unique_tag("predict-int");
    let mut child = quick_predict(&tag, Some("1000"), "env")
        .args(["--", "sleep", "0.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr until the rounds start, then keep draining it (a closed pipe would turn
    // oscost's last line into an error of its own).
    let (tx, rx) = std::sync::mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in err.lines().map_while(Result::ok) {
            if line.contains("timing `sleep") {
                let _ = tx.send(());
            }
            seen.push(line);
        }
        seen
    });
    let started = rx.recv_timeout(Duration::from_secs(120)).is_ok();
    assert!(started, "the rounds never started");
    // Into the rounds: the program a round times is running.
    assert!(
        wait_for_process(&tag, "sleep", Duration::from_secs(30)),
        "no round ran the program"
    );
    signal_expect_clean_exit(&mut child, &tag, libc::SIGINT, "predict's rounds", None);
    let seen = reader.join().unwrap();
    assert!(
        seen.last().is_some_and(|l| l.contains("interrupted")),
        "{seen:?}"
    );
}

/// predict's program, and what it started, die with oscost on SIGINT, SIGTERM, SIGKILL of
/// oscost and SIGKILL of oscost's whole process group, while it is being counted.
#[test]
fn the_counted_program_dies_with_oscost_however_oscost_ends() {
    if !root_or_skip("the_counted_program_dies_with_oscost_however_oscost_ends") {
        return;
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    for (how, sig, group) in [
        ("SIGINT", libc::SIGINT, false),
        ("SIGTERM", libc::SIGTERM, false),
        ("SIGKILL", libc::SIGKILL, false),
        ("SIGKILL of the group", libc::SIGKILL, true),
    ] {
        let tag = unique_tag("predict-dies");
        let mut c = oscost(&tag);
        c.args(["predict", "--no-save", "--under", "env", "--"])
            .args(["sh", "-c", "sleep 600 & sleep 600; wait"])
            .env("OSCOST_DB", dir.path().join("s.db"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if group {
            use std::os::unix::process::CommandExt;
            c.process_group(0);
        }
        let mut child = c.spawn().unwrap();
        // Both sleeps started: the program is being counted.
        let t = std::time::Instant::now();
        while tagged_processes(&tag).len() < 4 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let target = if group {
            -(child.id() as i32)
        } else {
            child.id() as i32
        };
        // SAFETY: kill on our own child (or its group).
        unsafe { libc::kill(target, sig) };
        let _ = child.wait();
        let left = wait_until_gone(&tag, Duration::from_secs(5));
        assert!(left.is_empty(), "{how}: left running: {left:?}");
    }
}
