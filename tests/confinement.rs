//! What confines oscost is recorded, said and named: a seccomp filter over the whole process
//! (as a container runtime's profile would be), a cgroup with a CPU quota, a nice value, and a
//! user and pid namespace of its own (`unshare`). Each case installs the confinement itself
//! between fork and exec; those that need root or a kernel feature say so and skip.
#![allow(clippy::disallowed_macros)]

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Install one permissive seccomp filter that reads the first argument (so the kernel cannot
/// cache its verdict), as `scripts/ref/seccomp-layers.c` does.
fn under_seccomp(c: &mut Command) -> &mut Command {
    // SAFETY: between fork and exec only prctl and seccomp on a stack-held program.
    unsafe {
        c.pre_exec(|| {
            let insns = [
                // A = the low word of args[0] (offset 16 in struct seccomp_data).
                libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: 16,
                },
                libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: 0x5ecc,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                },
            ];
            let prog = libc::sock_fprog {
                len: insns.len() as u16,
                filter: insns.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

fn run_into(c: &mut Command, db: &Path, json: &Path, label: &str) -> String {
    let out = c
        .args(["run", "syscall/getppid", "--quick", "--label", label])
        .arg("--db")
        .arg(db)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_run_under_a_seccomp_filter_says_so_at_the_top_and_is_an_environment_of_its_own() {
    let _m = measuring();
    let tag = unique_tag("confined-seccomp");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for i in 0..3 {
        let text = run_into(
            &mut oscost(&tag),
            &db,
            &dir.path().join(format!("plain-{i}.json")),
            "plain",
        );
        assert!(!text.contains("seccomp"), "{text}");
        let run = read_run(&dir.path().join(format!("plain-{i}.json")));
        let c = run
            .env
            .confinement
            .expect("a plain run records its confinement");
        assert_eq!(c.seccomp_filters.unwrap_or(0), 0, "{c:?}");
    }
    let json = dir.path().join("sandboxed.json");
    let text = run_into(under_seccomp(&mut oscost(&tag)), &db, &json, "sandboxed");
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("note: measured under 1 seccomp filter: every system call includes"),
        "said at the top: {text}"
    );
    let run = read_run(&json);
    let c = run.env.confinement.expect("recorded");
    assert_eq!((c.seccomp_mode, c.seccomp_filters), (Some(2), Some(1)));
    assert_eq!(c.no_new_privs, Some(true));

    // The matrix of the three plain runs and that run names seccomp among the differences,
    // and the plain runs' spread is learned from the plain runs alone.
    let m_json = dir.path().join("matrix.json");
    let out = oscost(&tag)
        .args(["matrix", "--db"])
        .arg(&db)
        .arg("--json")
        .arg(&m_json)
        .output()
        .unwrap();
    assert_success(&out);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&m_json).unwrap()).unwrap();
    let differs: Vec<&str> = m["differs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    assert!(differs.contains(&"seccomp filters"), "{differs:?}");
    let last = &m["columns"][3]["title"];
    assert!(
        last.as_array()
            .unwrap()
            .iter()
            .any(|t| t == "seccomp filters 1"),
        "{last}"
    );
    let row = &m["rows"][0];
    assert_eq!(row["run_to_run"]["runs"], 3, "plain runs alone: {row}");

    // compare names it too.
    let out = oscost(&tag)
        .args(["compare", "1", "4", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the runs differ in: seccomp filters 0 -> 1"),
        "{text}"
    );
}

#[test]
fn nice_19_and_namespaces_of_its_own_are_recorded_and_said() {
    let _m = measuring();
    let tag = unique_tag("confined-nice");
    // SAFETY: between fork and exec only setpriority.
    let out = unsafe {
        oscost(&tag)
            .arg("env")
            .pre_exec(|| {
                libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                Ok(())
            })
            .output()
            .unwrap()
    };
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SCHED_OTHER, nice 19"), "{text}");
    assert!(
        text.contains("note: measured at nice 19: other work on the CPU takes it first"),
        "{text}"
    );

    let probe = Command::new("unshare")
        .args(["-Urpf", "--mount-proc", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        skip(
            "nice_19_and_namespaces_of_its_own_are_recorded_and_said",
            "unshare -Urpf --mount-proc is not possible here: the namespaces case is not tried",
        );
        return;
    }
    let out = Command::new("unshare")
        .args(["-Urpf", "--mount-proc"])
        .arg(bin())
        .arg("env")
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("namespaces"))
        .unwrap_or_default();
    assert!(
        line.contains("its own") && line.contains("user") && line.contains("pid"),
        "{text}"
    );
}

/// A CPU cgroup made for the test (v1's cpu hierarchy or v2's), removed when dropped.
struct QuotaGroup(PathBuf);

impl QuotaGroup {
    /// A group allowed `quota_us` of every 100 ms, or why none can be made here.
    fn new(name: &str, quota_us: u64) -> Result<QuotaGroup, String> {
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let (dir, file, value) = if v1.join("cpu.cfs_quota_us").exists() {
            (v1.join(name), "cpu.cfs_quota_us", quota_us.to_string())
        } else {
            let v2 = Path::new("/sys/fs/cgroup");
            let controllers =
                std::fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap_or_default();
            if !controllers.split_whitespace().any(|c| c == "cpu") {
                return Err("the v2 root does not delegate the cpu controller".into());
            }
            (v2.join(name), "cpu.max", format!("{quota_us} 100000"))
        };
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let g = QuotaGroup(dir);
        std::fs::write(g.0.join(file), value).map_err(|e| format!("{file}: {e}"))?;
        Ok(g)
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        // The run's processes are all reaped by now; a group still busy is retried briefly.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

#[test]
fn a_cpu_quota_that_throttles_the_worker_flags_its_results_and_none_flags_nothing() {
    if !is_root() {
        skip_needing(
            "a_cpu_quota_that_throttles_the_worker_flags_its_results_and_none_flags_nothing",
            &["root"],
            "making a cgroup needs root",
        );
        return;
    }
    let _m = measuring();
    let tag = unique_tag("confined-quota");
    let group = match QuotaGroup::new(&format!("oscost-test-{}", std::process::id()), 10_000) {
        Ok(g) => g,
        Err(why) => {
            skip(
                "a_cpu_quota_that_throttles_the_worker_flags_its_results_and_none_flags_nothing",
                &format!("no CPU cgroup can be made here ({why})"),
            );
            return;
        }
    };
    let procs = std::ffi::CString::new(
        group
            .0
            .join("cgroup.procs")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    let (_, plain) = run_json(&tag, &["syscall/getppid", "--quick", "--no-save"]);
    let r = result(&plain, "syscall/getppid");
    assert_eq!(r.disturbed.throttled_ms, None, "{:?}", r.disturbed);

    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("quota.json");
    let mut c = oscost(&tag);
    // SAFETY: between fork and exec only open, write and close (no allocation): "0" moves
    // the writing process itself into the group.
    unsafe {
        c.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            libc::close(fd);
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let out = c
        .args(["run", "syscall/getppid", "--quick", "--no-save", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: the worker's cgroup has a CPU quota of 10000 of every 100000 us"),
        "{text}"
    );
    let run = read_run(&json);
    let r = result(&run, "syscall/getppid");
    let ms = r.disturbed.throttled_ms.expect("throttled");
    assert!(ms > 0.0);
    assert!(
        r.disturbed
            .flag
            .iter()
            .any(|f| f.starts_with("its cgroup's CPU quota stopped the worker for")),
        "{:?}",
        r.disturbed.flag
    );
}
