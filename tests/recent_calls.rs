//! The calls of the 2020s (io_uring, getrandom, membarrier, pidfd and clone3, memfd, mremap,
//! madvise, close_range): each measures, or is skipped with the kernel's reason, never faked;
//! and the costs keep the order what each operation does implies.

mod common;

use common::*;

const IDS: [&str; 17] = [
    "uring/",
    "syscall/getrandom",
    "syscall/rseq-register",
    "syscall/landlock-enforce",
    "switch/futex-waitv-thread",
    "mem/process-vm-readv",
    "mem/userfaultfd-copy",
    "mem/mseal",
    "mem/mseal-mprotect-refused",
    "syscall/membarrier-private-expedited",
    "spawn/pidfd-open",
    "spawn/pidfd-send-signal",
    "spawn/clone3-pidfd",
    "mem/memfd-create",
    "mem/mremap-grow",
    "mem/madvise",
    "fs/close-range",
];

#[test]
fn every_recent_call_measures_or_says_why_not() {
    let _g = measuring();
    let mut args = vec!["--quick"];
    args.extend(IDS);
    let (_, run) = run_json(&unique_tag("recent"), &args);
    assert!(run.results.len() >= 24, "{} results", run.results.len());
    for r in &run.results {
        match &r.status {
            Status::Ok => {}
            // What a kernel may lack or refuse, said with its reason.
            Status::Skipped { reason } => {
                assert!(
                    [
                        "ENOSYS",
                        "EINVAL",
                        "EPERM",
                        "io_uring",
                        "CPU besides",
                        "vDSO",
                        "Landlock",
                        "rseq",
                        "userfaultfd",
                    ]
                    .iter()
                    .any(|w| reason.contains(w)),
                    "{} skipped without the kernel's reason: {reason}",
                    r.id
                );
                skip(&r.id, reason);
            }
            s => panic!("{}: {s:?}", r.id),
        }
    }
    // SQPOLL says what its poller cost besides, where it ran.
    let sqpoll = run.results.iter().find(|r| r.id == "uring/nop-sqpoll");
    if let Some(r) = sqpoll.filter(|r| r.status == Status::Ok) {
        let share = r.params.get("poller_cpu_share").and_then(|v| v.as_f64());
        assert!(share.is_some_and(|s| (0.0..=1.0).contains(&s)), "{share:?}");
    }
}

/// Host-dependent orderings (slow tier, default sampling).
#[test]
#[ignore = "slow tier (orderings, default sampling): .ci/run runs it with --ignored"]
fn recent_call_costs_are_ordered() {
    let _g = measuring();
    let tag = unique_tag("recent-order");
    let (_, run) = run_json(
        &tag,
        &[
            "uring/nop",
            "syscall/getrandom",
            "spawn/pidfd-open",
            "spawn/clone3-pidfd",
            "spawn/shell",
            "timer/nanosleep-overshoot",
            "syscall/getppid",
            "syscall/rseq-register",
            "syscall/landlock-enforce",
            "mem/process-vm-readv",
            "mem/userfaultfd-copy",
            "mem/fault-write",
        ],
    );
    let ok = |id: &str| result(&run, id).status == Status::Ok;
    let mut claims = vec![
        costlier(
            "syscall/getrandom/256B",
            "syscall/getrandom/16B",
            "sixteen times the bytes generated and copied",
        ),
        costlier(
            "spawn/clone3-pidfd",
            "spawn/pidfd-open",
            "a process made and reaped against a descriptor made and closed",
        ),
        costlier(
            "spawn/shell",
            "spawn/clone3-pidfd",
            "a shell is a process and an exec of a dynamic program on top of a bare process",
        ),
    ];
    let optional = [
        costlier_by(
            "uring/nop/qd1",
            2.0,
            "uring/nop/batch32",
            "one enter per NOP against one per 32",
        ),
        costlier(
            "syscall/rseq-register",
            "syscall/getppid",
            "two calls (register, unregister) against one",
        ),
        costlier_by(
            "syscall/landlock-enforce",
            3.0,
            "syscall/getppid",
            "a ruleset built and enforced in a process against one call",
        ),
        costlier_by(
            "mem/process-vm-readv/64KiB",
            1.5,
            "mem/process-vm-readv/8B",
            "64 KiB copied against 8 bytes, the same walk of the child's page tables",
        ),
        costlier_by(
            "mem/userfaultfd-copy",
            2.0,
            "mem/fault-write",
            "a fault resolved by another thread (two switches and a copy) against one the \
             kernel resolves itself",
        ),
    ];
    // Each only where this kernel has the call (the result says skipped, with the reason).
    claims.extend(optional.into_iter().filter(|c| ok(c.more)));
    assert_costlier(&tag, &run, &[], &claims);
    // A sleep never ends before the time asked (POSIX): the overshoot is never below zero.
    for asked in ["10us", "100us", "1000us"] {
        let id = format!("timer/nanosleep-overshoot/{asked}");
        assert!(p5(&run, &id) >= 0.0, "{id}: a sleep ended early");
    }
}

/// The calls `predict` prices by name that have no family test of their own measure here.
#[test]
fn the_calls_predict_prices_by_name_measure() {
    let _g = measuring();
    let ids = [
        "syscall/fcntl-getfd",
        "syscall/lseek",
        "syscall/ioctl-notty",
        "mem/mmap-only",
        "mem/munmap-only",
        "mem/mprotect",
        "mem/brk",
    ];
    let mut args = vec!["--quick"];
    args.extend(ids);
    let (_, run) = run_json(&unique_tag("priced"), &args);
    for id in ids {
        let r = result(&run, id);
        match &r.status {
            Status::Ok => {}
            // brk refuses to run beside other threads, saying so.
            Status::Skipped { reason } if id == "mem/brk" && reason.contains("threads") => {
                skip(id, reason)
            }
            s => panic!("{id}: {s:?}"),
        }
    }
}

/// The vDSO's getrandom leaves out the kernel entry and exit (and the kernel's per-call
/// reseeding check): for 16 bytes the system call costs more than the vDSO's call by at least
/// most of a null call, where the kernel exports it. Not a fixed ratio: issue 48 asked for 5x,
/// which held only while audit's slow path made every entry dearer (a boot with audit once
/// enabled); on a fresh boot here the system call is 237 ns, the vDSO 53 ns and the null call
/// 116 ns: 4.45x, the entry's part 184 ns.
#[test]
fn the_vdso_getrandom_saves_at_least_a_kernel_entry() {
    let _g = measuring();
    let tag = unique_tag("vgetrandom");
    let ids = [
        "syscall/getrandom/16B",
        "syscall/getrandom-vdso/16B",
        "syscall/getppid",
    ];
    let mut tries = Vec::new();
    // Decided with the three results' intervals, never three bare medians: the saving holds
    // once its lowest value (the system call's lower bound less the vDSO's upper) is above
    // 0.8 of the null call's upper bound, fails where even its highest is below 0.8 of the
    // null call's lower bound, and is measured again while the intervals cannot tell.
    for _ in 0..ORDERING_TRIES {
        let (_, run) = run_json(
            &tag,
            &[
                "--quick",
                "syscall/getrandom",
                "syscall/getrandom-vdso",
                "syscall/getppid",
            ],
        );
        let v = result(&run, ids[1]);
        if let Status::Skipped { reason } = &v.status {
            assert!(reason.contains("vDSO"), "{reason}");
            skip(&v.id, reason);
            return;
        }
        let [sys, vdso, null] = ids.map(|id| interval(&run, id));
        tries.push(format!(
            "system call {sys:.0?} ns, vDSO {vdso:.0?} ns, null call {null:.0?} ns"
        ));
        if sys[0] - vdso[1] > 0.8 * null[1] {
            return;
        }
        assert!(
            sys[1] - vdso[0] >= 0.8 * null[0],
            "the vDSO saves less than 0.8 of a null call: {tries:?}"
        );
    }
    panic!("not decided in {ORDERING_TRIES} runs: {tries:?}");
}
