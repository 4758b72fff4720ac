//! ipc/ and mem/: invariants between costs, nothing left in the kernel's IPC namespaces after
//! a run (finished or interrupted), and limits that stop a benchmark named in its reason.

mod common;

use std::time::Duration;

use common::*;

/// Everything SysV and POSIX IPC holds right now, as comparable text.
fn ipc_state() -> Vec<String> {
    let mut v = Vec::new();
    for k in ["msg", "shm", "sem"] {
        let t = std::fs::read_to_string(format!("/proc/sysvipc/{k}")).unwrap_or_default();
        // key and id identify an object; the other columns change as it is used.
        v.extend(t.lines().skip(1).map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            format!("{k} {} {}", f[0], f[1])
        }));
    }
    if let Ok(d) = std::fs::read_dir("/dev/mqueue") {
        v.extend(
            d.flatten()
                .map(|e| format!("mq {}", e.file_name().to_string_lossy())),
        );
    }
    v.sort();
    v
}

#[test]
fn every_ipc_and_memory_benchmark_measures_and_nothing_is_left_in_ipc() {
    let _g = measuring();
    let before = ipc_state();
    let (_, run) = run_json(&unique_tag("ipcmem"), &["--quick", "ipc/", "mem/"]);
    assert_eq!(ipc_state(), before, "IPC objects outlived the run");
    for r in &run.results {
        assert!(
            r.status == Status::Ok || r.id == "mem/fault-thp",
            "{}: {:?}",
            r.id,
            r.status
        );
    }
}

/// Host-dependent orderings (slow tier, default sampling): costs that differ by what the
/// operation does (a fault more, 100x the descriptors, 64 KiB against a byte, two switches).
#[test]
#[ignore = "slow tier (orderings, default sampling): .ci/run runs it with --ignored"]
fn ipc_and_memory_costs_are_ordered() {
    let _g = measuring();
    let ids = [
        "mem/mmap",
        "mem/select",
        "mem/poll",
        "mem/fault-write",
        "mem/fault-read",
        "ipc/shm-attach",
        "ipc/unix-64k",
        "ipc/unix-1b",
        "ipc/msg-pingpong",
        "ipc/msg-roundtrip",
        "ipc/sem-pingpong",
        "ipc/sem",
    ];
    let mut args = vec!["--placement", "same"];
    args.extend(ids);
    let tag = unique_tag("ipcmem-order");
    let (_, run) = run_json(&tag, &args);
    let touched = "the pages touched are faulted in on top of the same mapping";
    assert_costlier(
        &tag,
        &run,
        &["--placement", "same"],
        &[
            costlier("mem/mmap/4KiB-touched", "mem/mmap/4KiB-untouched", touched),
            costlier("mem/mmap/1MiB-touched", "mem/mmap/1MiB-untouched", touched),
            costlier(
                "mem/select/1000",
                "mem/select/10",
                "a hundred times the descriptors",
            ),
            costlier(
                "mem/poll/1000",
                "mem/poll/10",
                "a hundred times the descriptors",
            ),
            costlier(
                "mem/fault-write",
                "mem/fault-read",
                "a page allocated and zeroed against the shared zero page mapped",
            ),
            costlier(
                "ipc/shm-attach/touched",
                "ipc/shm-attach/untouched",
                touched,
            ),
            costlier(
                "ipc/unix-64k",
                "ipc/unix-1b",
                "64 KiB copied twice against a byte",
            ),
            costlier(
                "ipc/msg-pingpong@same",
                "ipc/msg-roundtrip/8B",
                "two processes and two switches against a send and receive in one",
            ),
            costlier(
                "ipc/sem-pingpong@same",
                "ipc/sem",
                "two processes and two switches against both semops in one",
            ),
        ],
    );
}

#[test]
fn interrupted_ipc_runs_leave_nothing_behind() {
    let _g = measuring();
    let before = ipc_state();
    for (i, delay) in [40u64, 150, 300, 600, 900, 1300].into_iter().enumerate() {
        let tag = unique_tag("ipc-intr");
        let mut child = oscost(&tag)
            .args(["run", "--no-save", "ipc/"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let sig = if i % 2 == 0 {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        signal_expect_clean_exit(&mut child, &tag, sig, &format!("at {delay} ms"), None);
        assert_eq!(
            ipc_state(),
            before,
            "left behind after a signal at {delay} ms"
        );
    }
}

#[test]
fn too_few_descriptors_fail_with_the_limit_named_and_the_run_goes_on() {
    if !std::path::Path::new("/usr/bin/prlimit").exists() {
        skip_needing(
            "too_few_descriptors_fail_with_the_limit_named_and_the_run_goes_on",
            &["prlimit"],
            "no /usr/bin/prlimit",
        );
        return;
    }
    let _g = measuring();
    let (_, run) = run_json(
        &unique_tag("nofile"),
        &[
            "--quick",
            "--under",
            "prlimit --nofile=200:200 --",
            "mem/select",
            "mem/epoll",
            "ipc/pipe-1b",
        ],
    );
    for id in ["mem/select/1000", "mem/epoll/1000"] {
        assert_failed_with(&run, id, "hard limit is 200");
    }
    assert_eq!(state(&run, "mem/select/10"), "ok");
    assert_eq!(state(&run, "ipc/pipe-1b"), "ok");
}

/// Another program of the same user (as root: any root program) making private SysV objects
/// while `ipc/` runs keeps every one of them: oscost's workers make theirs in an IPC namespace
/// of their own and oscost removes nothing it did not make.
#[test]
fn another_programs_private_objects_survive_an_ipc_run() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let _g = measuring();
    let stop = Arc::new(AtomicBool::new(false));
    let maker = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut made: Vec<(char, i32)> = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                // SAFETY: plain SysV calls creating private objects this test removes after.
                unsafe {
                    made.push((
                        'm',
                        libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600),
                    ));
                    made.push((
                        's',
                        libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600),
                    ));
                    made.push((
                        'e',
                        libc::semget(libc::IPC_PRIVATE, 1, libc::IPC_CREAT | 0o600),
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            made
        })
    };
    let (_, run) = run_json(&unique_tag("ipcns"), &["--quick", "ipc/"]);
    stop.store(true, Ordering::SeqCst);
    let made = maker.join().unwrap();
    // SAFETY: IPC_STAT into zeroed buffers, then IPC_RMID of the objects this test made.
    let gone: Vec<(char, i32)> = made
        .iter()
        .filter(|(_, id)| *id >= 0)
        .filter(|(k, id)| unsafe {
            let alive = match k {
                'm' => {
                    let mut ds: libc::msqid_ds = std::mem::zeroed();
                    libc::msgctl(*id, libc::IPC_STAT, &mut ds) == 0
                }
                's' => {
                    let mut ds: libc::shmid_ds = std::mem::zeroed();
                    libc::shmctl(*id, libc::IPC_STAT, &mut ds) == 0
                }
                _ => libc::semctl(*id, 0, libc::IPC_STAT, &mut [0u8; 256]) == 0,
            };
            match k {
                'm' => libc::msgctl(*id, libc::IPC_RMID, std::ptr::null_mut()),
                's' => libc::shmctl(*id, libc::IPC_RMID, std::ptr::null_mut()),
                _ => libc::semctl(*id, 0, libc::IPC_RMID),
            };
            !alive
        })
        .copied()
        .collect();
    assert!(
        made.len() >= 30,
        "the other program made only {}",
        made.len()
    );
    assert!(
        gone.is_empty(),
        "oscost removed {} of {}: {gone:?}",
        gone.len(),
        made.len()
    );
    for r in run.results.iter().filter(|r| r.id.starts_with("ipc/")) {
        assert_eq!(r.status, Status::Ok, "{}", r.id);
    }
}
