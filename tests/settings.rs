//! Kernel settings changed for a measurement are always put back: after a normal end, a failed
//! benchmark, SIGINT, SIGTERM, SIGKILL of oscost (its guard process puts them back), and
//! SIGKILL of oscost and its guard together (the next oscost command puts them back from the
//! state file). Every writable catalogue entry is put back by the guard alone within a second
//! of a SIGKILL at moments across `run`, `ab` and a `--runs` pause (slow tier). State files
//! planted in the machine's state directory write nothing and hang nothing. A second or third
//! oscost on a setting a live one holds is refused before measuring, whatever its
//! `XDG_DATA_HOME` or PID namespace. Bad input changes nothing. The setting used outside the
//! catalogue sweep is ASLR (`kernel.randomize_va_space`), harmless to flip for a second; needs
//! root (skipped without).

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

/// The measuring lock for a test that needs root; `None`, with a skip line, without root.
fn as_root(test: &str, why: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if !is_root() {
        skip_needing(test, &["root"], why);
        return None;
    }
    Some(measuring())
}

/// The machine's state directory's `held/`, made the way oscost makes it (root's, 0700) where
/// no oscost has made it yet.
fn held_dir_made() -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let held = held_dir();
    std::fs::create_dir_all(&held).unwrap();
    for d in [held.parent().unwrap(), held.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    held
}

fn oscost_in(tag: &str, data: &Path) -> std::process::Command {
    let mut c = oscost(tag);
    c.env("XDG_DATA_HOME", data);
    c
}

#[test]
fn a_setting_is_put_back_however_oscost_ends() {
    let Some(_m) = as_root(
        "a_setting_is_put_back_however_oscost_ends",
        "changing kernel settings needs root",
    ) else {
        return;
    };
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
    // Stopped first, all of them, so that the guard cannot put the value back between the
    // coordinator's death and its own.
    let tagged = tagged_processes(&tag);
    for sig in [libc::SIGSTOP, libc::SIGKILL] {
        for &pid in &tagged {
            // SAFETY: kill on processes this test started (they carry its tag).
            unsafe { libc::kill(pid, sig) };
        }
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
    let Some(_m) = as_root(
        "bad_settings_are_refused_in_one_line_and_change_nothing",
        "changing kernel settings needs root",
    ) else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let thp = "/sys/kernel/mm/transparent_hugepage/enabled";
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let (aslr_before, thp_before) = (aslr(), read(thp));
    for (args, says) in [
        (vec!["--set", "nosuch=1"], "not a setting"),
        (vec!["--set", "/etc/hostname=x"], "outside"),
        (vec!["--set", "aslr=1", "--set", "aslr=0"], "twice"),
        (
            vec![
                "--set",
                "aslr=1",
                "--set",
                "/proc/sys/kernel/./randomize_va_space=1",
            ],
            "one file",
        ),
        (
            vec![
                "--set",
                "/proc/sys//kernel/randomize_va_space=2",
                "--set",
                "aslr=2",
            ],
            "one file",
        ),
        (
            vec![
                "--set",
                "aslr=1",
                "--set",
                "/proc/sys/kernel/randomize_va_spac*=1",
            ],
            "one file",
        ),
        (vec!["--set", "aslr"], "NAME=VALUE"),
        (vec!["--set", "thp=bogus"], "is not one of always"),
        (vec!["--set", "aslr=7"], "is not one of 0, 1, 2"),
        // Only the kernel judges a path's value: tried first, refused, nothing else written.
        (
            vec![
                "--set",
                "aslr=1",
                "--set",
                "thp=never",
                "--set",
                "/proc/sys/vm/overcommit_memory=9",
            ],
            "no other value was written",
        ),
        (
            vec!["--set", "/proc/sys/kernel/no_such_knob=1"],
            "no such file",
        ),
        (vec!["--set", "/proc/sys/kernel/osrelease=x"], "read-only"),
        (vec!["--set", "/proc/sys/vm/drop_caches=1"], "write-only"),
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
    let Some(_m) = as_root(
        "ab_switches_a_setting_per_side_and_puts_it_back",
        "changing kernel settings needs root",
    ) else {
        return;
    };
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
    let mut s =
        oscost::effects::store::Store::open_existing(&oscost::effects::store::Location::File(db))
            .unwrap();
    let ids: Vec<i64> = s.list().unwrap().iter().map(|r| r.id).collect();
    let (a, b) = (s.load(ids[0]).unwrap(), s.load(ids[1]).unwrap());
    assert_eq!(a.settings, vec!["aslr=0".to_string()]);
    assert_eq!(b.settings, vec!["aslr=2".to_string()]);
    // A run under a setting is an environment of its own (its own run-to-run history).
    assert_ne!(
        oscost::effects::store::rows::env_key(&a),
        oscost::effects::store::rows::env_key(&b)
    );
}

/// The machine's state directory (`oscost::effects::put_back::state::STATE_DIR`) and its states.
fn held_dir() -> std::path::PathBuf {
    Path::new(oscost::effects::put_back::state::STATE_DIR).join("held")
}

/// A value other than `now` that a catalogue setting takes: another of a bracketed file's
/// choices, 0 and 1 swapped, another number.
fn another_value(text: &str) -> Option<String> {
    if let Some(now) = oscost::machine::settings::selected(text) {
        return text
            .split_whitespace()
            .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
            .find(|w| *w != now)
            .map(String::from);
    }
    match text.trim() {
        "0" => Some("1".into()),
        "1" => Some("0".into()),
        t => t
            .parse::<u64>()
            .ok()
            .filter(|n| *n >= 2)
            .map(|n| (n / 2).to_string()),
    }
}

/// One instance of every writable system-wide catalogue entry on this machine, the file it
/// reads from, and another value for it that oscost accepts here (a quick run under it
/// passes). Entries that cannot be changed here are said, not tried.
fn writable_entries() -> Vec<(String, std::path::PathBuf, String)> {
    use oscost::machine::settings::{CATALOGUE, Scope, instances, resolve};
    let cpus = allowed_cpus();
    let all = instances();
    let mut out = Vec::new();
    for e in CATALOGUE.iter().filter(|e| e.scope == Scope::System) {
        let prefix = e.name.trim_end_matches("{arg}");
        // The last instance: the deepest idle state, the largest mTHP size.
        let Some(name) = all
            .iter()
            .rfind(|n| *n == e.name || (prefix != e.name && n.starts_with(prefix)))
        else {
            continue;
        };
        let s = match resolve(name, &cpus) {
            Ok(s) => s,
            Err(e) => {
                skip(
                    "every_writable_setting_is_put_back_by_the_guard_alone",
                    &format!("{name} cannot be changed here: {e}"),
                );
                continue;
            }
        };
        let Some(file) = s.files.first().cloned() else {
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let Some(value) = another_value(&text) else {
            skip(
                "every_writable_setting_is_put_back_by_the_guard_alone",
                &format!("{name}: no other value to try from '{}'", text.trim()),
            );
            continue;
        };
        let out_try = oscost(&unique_tag("sweep-try"))
            .args([
                "run",
                "--no-save",
                "--samples",
                "40",
                "call/f0",
                "--settle",
                "0",
            ])
            .args(["--set", &format!("{name}={value}")])
            .output()
            .unwrap();
        if !out_try.status.success() {
            skip(
                "every_writable_setting_is_put_back_by_the_guard_alone",
                &format!(
                    "{name}={value} cannot be measured under here: {}",
                    String::from_utf8_lossy(&out_try.stderr).trim()
                ),
            );
            continue;
        }
        out.push((name.clone(), file, value));
    }
    out
}

/// For every writable catalogue entry: SIGKILL of oscost at 0.2 s, 1.2 s and 5 s of `run
/// --set`, `ab --b-set` and `run --runs 3 --set` (the later two in its pause) leaves the value
/// as found within 1 s, with no other oscost command run afterwards: the guard alone puts it
/// back. Entries run side by side (each holds its own lock), their moments one after another.
#[test]
#[ignore = "slow: about a minute of runs killed at moments"]
fn every_writable_setting_is_put_back_by_the_guard_alone() {
    let Some(_m) = as_root(
        "every_writable_setting_is_put_back_by_the_guard_alone",
        "changing kernel settings needs root",
    ) else {
        return;
    };
    let entries = writable_entries();
    assert!(
        !entries.is_empty(),
        "no writable catalogue entry here, as root"
    );
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for (name, file, value) in &entries {
            let failures = &failures;
            scope.spawn(move || {
                let read = || std::fs::read_to_string(file).unwrap_or_default();
                let found = read();
                let set = format!("{name}={value}");
                let commands: [(&str, Vec<&str>); 3] = [
                    (
                        "run --set",
                        vec![
                            "run",
                            "--no-save",
                            "--quick",
                            "syscall/",
                            "spawn/",
                            "--settle",
                            "0",
                            "--set",
                            &set,
                        ],
                    ),
                    (
                        "ab --b-set",
                        vec![
                            "ab",
                            "--no-save",
                            "--settle",
                            "0",
                            "syscall/",
                            "mem/",
                            "--b-set",
                            &set,
                        ],
                    ),
                    (
                        "run --runs 3 --set",
                        vec![
                            "run",
                            "--runs",
                            "3",
                            "--pause",
                            "10",
                            "--no-save",
                            "--samples",
                            "40",
                            "call/f0",
                            "--settle",
                            "0",
                            "--set",
                            &set,
                        ],
                    ),
                ];
                for (what, args) in &commands {
                    for at in [0.2, 1.2, 5.0] {
                        let tag = unique_tag("sweep");
                        let mut child = oscost(&tag)
                            .args(args)
                            .stdout(std::process::Stdio::null())
                            .stderr(std::process::Stdio::null())
                            .spawn()
                            .unwrap();
                        std::thread::sleep(Duration::from_secs_f64(at));
                        let _ = child.kill();
                        let _ = child.wait();
                        let t = Instant::now();
                        while read() != found && t.elapsed() < Duration::from_secs(1) {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        if read() != found {
                            failures.lock().unwrap().push(format!(
                                "{name}: {what} killed at {at} s left '{}' (was '{}') 1 s after",
                                read().trim(),
                                found.trim()
                            ));
                            let _ = oscost::machine::settings::write_file(
                                file,
                                &oscost::machine::settings::value_of(
                                    if oscost::machine::settings::selected(&found).is_some() {
                                        oscost::machine::settings::Encoding::Bracketed
                                    } else {
                                        oscost::machine::settings::Encoding::Plain
                                    },
                                    &found,
                                ),
                            );
                        }
                        // The guard is gone too (it exits once it has put the value back).
                        let left = wait_until_gone(&tag, Duration::from_secs(5));
                        if !left.is_empty() {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("{name}: {what} at {at} s left {left:?}"));
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
    // Nothing held is left behind by them.
    for (_, file, _) in &entries {
        let state = held_dir().join(oscost::effects::put_back::state::state_name(file));
        assert!(!state.exists(), "{} left its state", file.display());
    }
}

/// State files nobody but oscost should have written, planted where oscost keeps its own: a
/// `..` path out of /proc/sys, a record under another file's name, a FIFO, a link to
/// /dev/zero, a 2 GB sparse file, a file of another user; and one in the data directory an
/// older oscost used. Nothing is written from any of them, nothing hangs, every command
/// answers within a second, and each is named once.
#[test]
fn planted_states_write_nothing_and_hang_nothing() {
    let Some(_m) = as_root(
        "planted_states_write_nothing_and_hang_nothing",
        "the state directory is root's",
    ) else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let victim = work.path().join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    let held = held_dir_made();
    let boot = oscost::effects::put_back::state::boot_id();
    let through = format!("/proc/sys/../..{}", victim.display());
    let name = |p: &str| oscost::effects::put_back::state::state_name(Path::new(p));
    let record = |file: &str, value: &str| {
        serde_json::json!({"file": file, "original": value, "holder": "planted", "boot": boot})
            .to_string()
    };
    let planted = [
        (name(&through), Some(record(&through, "PWNED"))),
        (
            name("/proc/sys/vm/swappiness"),
            Some(record("/proc/sys/kernel/randomize_va_space", "0")),
        ),
        ("planted-fifo".to_string(), None),
        ("planted-zero".to_string(), None),
        ("planted-sparse".to_string(), None),
        (
            name("/proc/sys/kernel/sched_autogroup_enabled"),
            Some(record("/proc/sys/kernel/sched_autogroup_enabled", "0")),
        ),
    ];
    for (n, text) in &planted {
        let p = held.join(n);
        match n.as_str() {
            "planted-fifo" => {
                nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap()
            }
            "planted-zero" => std::os::unix::fs::symlink("/dev/zero", &p).unwrap(),
            "planted-sparse" => std::fs::File::create(&p).unwrap().set_len(2 << 30).unwrap(),
            _ => std::fs::write(&p, text.as_deref().unwrap_or_default()).unwrap(),
        }
    }
    // Another user's, with a value that would matter.
    let autogroup = held.join(name("/proc/sys/kernel/sched_autogroup_enabled"));
    std::os::unix::fs::chown(&autogroup, Some(65534), Some(65534)).unwrap();
    let legacy = data.path().join("oscost/settings");
    std::fs::create_dir_all(&legacy).unwrap();
    std::fs::write(
        legacy.join("pending-999999.json"),
        serde_json::json!({"pid": 999999, "start": 1, "files": [[through, "PWNED"]]}).to_string(),
    )
    .unwrap();
    let (aslr_before, autogroup_before) = (
        aslr(),
        std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").ok(),
    );

    let answer = |tag: &str| {
        let t = Instant::now();
        let mut child = oscost_in(&unique_tag(tag), data.path())
            .arg("list")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        while child.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(1) {
                let _ = child.kill();
                panic!("oscost list hung on a planted state (over 1 s)");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        assert_success(&out);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let first = answer("planted");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    assert_eq!(aslr(), aslr_before, "a planted state was written from");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").ok(),
        autogroup_before
    );
    for (n, _) in &planted {
        assert!(
            std::fs::symlink_metadata(held.join(n)).is_err(),
            "{n} was left where it would be read again"
        );
        assert_eq!(
            first.matches(n.as_str()).count(),
            1,
            "{n} not named once: {first}"
        );
    }
    assert!(first.contains("pending-999999.json"), "{first}");
    assert!(
        !first.contains("put back /"),
        "something was put back from a planted state: {first}"
    );
    // Named once: the next command says nothing of them.
    let second = answer("planted-again");
    assert!(!second.contains("ignored"), "{second}");
    // Set aside, not deleted (a person may want to look), in the state directory's own place.
    let ignored = held.parent().unwrap().join("ignored");
    for e in std::fs::read_dir(&ignored).into_iter().flatten().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if planted.iter().any(|(p, _)| n.starts_with(p.as_str())) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    // With this test's own files gone, the directories it made go too when empty (oscost's
    // own go with their last file; `ignored/` is kept for a person, so it is the planter's).
    let _ = std::fs::remove_dir(&ignored);
    if let Some(top) = ignored.parent() {
        let _ = std::fs::remove_dir(top);
    }
}

/// Two and three oscosts on one setting at once, under different `XDG_DATA_HOME`s and from a
/// PID namespace: only the first changes it; the others are refused before measuring (exit 2,
/// one line naming the first), the first measures under its own value only, and the value is
/// as found after.
#[test]
fn overlapping_runs_on_one_setting_are_refused_and_leave_it_as_found() {
    let Some(_m) = as_root(
        "overlapping_runs_on_one_setting_are_refused_and_leave_it_as_found",
        "changing kernel settings needs root",
    ) else {
        return;
    };
    let original = aslr();
    let mine = other(&original);
    let theirs = if mine == "1" && original != "0" {
        "0"
    } else {
        "2"
    };
    let namespaces = std::process::Command::new("unshare")
        .args(["-pf", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !namespaces {
        skip(
            "overlapping_runs_on_one_setting_are_refused_and_leave_it_as_found",
            "unshare -pf cannot make a PID namespace here: the namespace case is not tried",
        );
    }
    // The first from the host, then from a PID namespace.
    for first_in_namespace in [false, true] {
        if first_in_namespace && !namespaces {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("first.json");
        let data = [
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        ];
        let in_namespace = |inner: std::process::Command| {
            let mut c = std::process::Command::new("unshare");
            c.args(["-pf", "--mount-proc"])
                .arg(inner.get_program())
                .args(inner.get_args());
            for (k, v) in inner.get_envs() {
                if let Some(v) = v {
                    c.env(k, v);
                }
            }
            c
        };
        let mut first = oscost_in(&unique_tag("overlap-1"), data[0].path());
        first
            .args([
                "run",
                "--no-save",
                "--quick",
                "syscall/",
                "spawn/",
                "--settle",
                "0",
            ])
            .args(["--set", &format!("aslr={mine}"), "--json"])
            .arg(&json)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let first = if first_in_namespace {
            in_namespace(first)
        } else {
            first
        }
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        wait_for("the first run's value", Duration::from_secs(20), || {
            aslr() == mine
        });
        // The second and third: another data directory; another data directory and the
        // other side of the namespace boundary.
        for (i, across) in [(1, false), (2, true)] {
            if across && !namespaces {
                continue;
            }
            let mut c = oscost_in(&unique_tag("overlap-n"), data[i].path());
            c.args([
                "run",
                "--no-save",
                "--samples",
                "40",
                "call/f0",
                "--settle",
                "0",
            ])
            .args(["--set", &format!("aslr={theirs}")]);
            let across_now = across != first_in_namespace;
            let out = if across_now { in_namespace(c) } else { c }
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "run {i} beside the first: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("another oscost"), "{err}");
            assert!(!err.contains("benchmark(s)"), "run {i} measured: {err}");
            assert_eq!(aslr(), mine, "run {i} changed the first run's value");
        }
        // Any command, from either side of the namespace boundary, leaves a live run's value
        // alone (its lock is held: it is not taken for a killed oscost's).
        for across in [false, true] {
            if across && !namespaces {
                continue;
            }
            let mut c = oscost_in(&unique_tag("overlap-list"), data[1].path());
            c.arg("list");
            let out = if across != first_in_namespace {
                in_namespace(c)
            } else {
                c
            }
            .output()
            .unwrap();
            assert_success(&out);
            assert_eq!(
                aslr(),
                mine,
                "a command put the value back under a live run"
            );
        }
        let out = first.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(aslr(), original, "after the first run ended");
        let run = read_run(&json);
        assert_eq!(run.settings, vec![format!("aslr={mine}")]);
    }
    // ab's two sides beside a run on the same setting: refused too.
    let data = tempfile::tempdir().unwrap();
    let mut first = oscost_in(&unique_tag("overlap-ab"), data.path())
        .args([
            "run",
            "--no-save",
            "--quick",
            "syscall/",
            "spawn/",
            "--settle",
            "0",
        ])
        .args(["--set", &format!("aslr={mine}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the first run's value", Duration::from_secs(20), || {
        aslr() == mine
    });
    let out = oscost_in(&unique_tag("overlap-ab2"), data.path())
        .args([
            "ab",
            "--rounds",
            "1",
            "--samples",
            "40",
            "call/f0",
            "--settle",
            "0",
        ])
        .args([
            "--a-set",
            &format!("aslr={theirs}"),
            "--b-set",
            &format!("aslr={original}"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = first.wait();
    assert_eq!(aslr(), original);
}

/// A state whose value cannot be written back (here a read-only kernel file) is kept with the
/// reason and said at every command until it is done, never dropped as if put back.
#[test]
fn a_state_that_cannot_be_put_back_is_kept_and_said_every_time() {
    let Some(_m) = as_root(
        "a_state_that_cannot_be_put_back_is_kept_and_said_every_time",
        "the state directory is root's",
    ) else {
        return;
    };
    let held = held_dir_made();
    let file = "/proc/sys/kernel/osrelease";
    let before = std::fs::read_to_string(file).unwrap();
    let state = held.join(oscost::effects::put_back::state::state_name(Path::new(
        file,
    )));
    std::fs::write(
        &state,
        serde_json::json!({"file": file, "original": "not-this-kernel", "holder": "a test",
                           "boot": oscost::effects::put_back::state::boot_id()})
        .to_string(),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o600)).unwrap();
    let data = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let out = oscost_in(&unique_tag("unput"), data.path())
            .arg("list")
            .output()
            .unwrap();
        assert_success(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("could not put back") && err.contains(file),
            "round {round}: {err}"
        );
        assert!(!err.contains("put back 0"), "{err}");
        assert!(state.exists(), "round {round}: the state was dropped");
        let kept: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        assert!(kept["unput"].is_string(), "the reason is not kept: {kept}");
    }
    assert_eq!(std::fs::read_to_string(file).unwrap(), before);
    std::fs::remove_file(&state).unwrap();
}

/// The guard SIGKILLed while a `--runs` series measures under a value: the coordinator sees
/// its guard go, writes the original back at once (well within 1.5 s, no other command run),
/// stops as on SIGTERM (non-zero, saying why), and leaves no state behind.
#[test]
fn a_run_whose_guard_dies_puts_back_at_once_and_stops() {
    let Some(_m) = as_root(
        "a_run_whose_guard_dies_puts_back_at_once_and_stops",
        "changing kernel settings needs root",
    ) else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let original = aslr();
    let set = format!("aslr={}", other(&original));
    let tag = unique_tag("guard-dies");
    let child = oscost_in(&tag, data.path())
        .args([
            "run", "--runs", "3", "--pause", "3", "--quick", "syscall/", "--settle", "0", "--set",
            &set,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the setting taking effect", Duration::from_secs(10), || {
        aslr() != original
    });
    let guard = tagged_processes(&tag)
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "oscost-guard")
        })
        .expect("a guard process");
    // SAFETY: kill on a process this test started (it carries the test's tag).
    unsafe { libc::kill(guard, libc::SIGKILL) };
    let killed = Instant::now();
    wait_for(
        "the put back by the coordinator",
        Duration::from_millis(1500),
        || aslr() == original,
    );
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "it went on measuring"
    );
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("its guard process (oscost-guard) died"),
        "{stderr}"
    );
    assert_eq!(aslr(), original);
    assert!(wait_until_gone(&tag, Duration::from_secs(5)).is_empty());
    let held = held_dir();
    assert!(
        !held.exists() || std::fs::read_dir(&held).unwrap().next().is_none(),
        "a state was left in {}",
        held.display()
    );
}

/// A per-namespace setting (the default TTL of the machine's network namespace) left changed
/// by an oscost killed with its guard: a command run in a new network namespace, where that
/// path is another file, leaves it alone and says so once; a command in the machine's
/// namespaces puts it back.
#[test]
fn recovery_writes_a_setting_back_only_in_the_namespaces_that_named_it() {
    let Some(_m) = as_root(
        "recovery_writes_a_setting_back_only_in_the_namespaces_that_named_it",
        "changing kernel settings needs root",
    ) else {
        return;
    };
    const TTL: &str = "/proc/sys/net/ipv4/ip_default_ttl";
    let ttl = || std::fs::read_to_string(TTL).unwrap().trim().to_string();
    let data = tempfile::tempdir().unwrap();
    let original = ttl();
    let value = if original == "99" { "98" } else { "99" };
    let tag = unique_tag("netns");
    let mut child = oscost_in(&tag, data.path())
        .args(["run", "--no-save", "--quick", "syscall/", "--set"])
        .arg(format!("{TTL}={value}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the setting taking effect", Duration::from_secs(10), || {
        ttl() == value
    });
    let tagged = tagged_processes(&tag);
    for sig in [libc::SIGSTOP, libc::SIGKILL] {
        for &pid in &tagged {
            // SAFETY: kill on processes this test started (they carry its tag).
            unsafe { libc::kill(pid, sig) };
        }
    }
    let _ = child.wait();
    assert!(wait_until_gone(&tag, Duration::from_secs(5)).is_empty());
    assert_eq!(ttl(), value, "nothing was left to put it back");
    let in_new_netns = |n: usize| {
        use std::os::unix::process::CommandExt;
        let mut c = oscost_in(&unique_tag(&format!("netns-list{n}")), data.path());
        c.arg("list");
        // SAFETY: unshare in the child before exec, no allocation.
        unsafe {
            c.pre_exec(|| match libc::unshare(libc::CLONE_NEWNET) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let out = c.output().unwrap();
        assert_success(&out);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let first = in_new_netns(1);
    assert!(
        first.contains("not putting back") && first.contains("net"),
        "{first}"
    );
    assert_eq!(ttl(), value, "written from another network namespace");
    let second = in_new_netns(2);
    assert!(!second.contains("not putting back"), "said twice: {second}");
    let out = oscost_in(&unique_tag("netns-home"), data.path())
        .arg("list")
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("put back"));
    assert_eq!(
        ttl(),
        original,
        "after a command in the machine's namespaces"
    );
}
