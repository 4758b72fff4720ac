//! Events per operation prove each definition: on this kind of machine a ring hop is one
//! context switch, a ping-pong round trip on one CPU two, a first write one fault per page, a
//! getpid none; events that cannot be counted are listed with why, never shown as 0.

mod common;

use common::*;

#[test]
fn counted_events_match_the_definitions() {
    let _g = measuring();
    let (_, run) = run_json(
        &unique_tag("events"),
        &[
            "--quick",
            "--placement",
            "same",
            "syscall/getpid",
            "switch/pipe-proc",
            "switch/ring",
            "mem/fault-write",
        ],
    );
    let events = |id: &str| result(&run, id).events.clone().expect("events counted");
    let getpid = events("syscall/getpid");
    if getpid.per_op.is_empty() {
        // perf_event_open refused (a container, paranoid sysctl): every event says why.
        assert!(!getpid.unavailable.is_empty());
        assert!(getpid.unavailable.values().all(|w| !w.is_empty()));
        skip(
            "events",
            &format!("events not countable here: {:?}", getpid.unavailable),
        );
        return;
    }
    let per_op = |id: &str, ev: &str| events(id).per_op[ev];
    for (id, ev, want, tol) in [
        ("syscall/getpid", "context-switches", 0.0, 0.02),
        ("syscall/getpid", "minor-faults", 0.0, 0.02),
        ("switch/pipe-proc@same", "context-switches", 2.0, 0.1),
        ("switch/ring/n16-s0k", "context-switches", 1.0, 0.05),
        ("mem/fault-write", "minor-faults", 1.0, 0.05),
    ] {
        let got = per_op(id, ev);
        assert!(
            (got - want).abs() <= tol,
            "{id}: {got} {ev} per op, want {want}"
        );
        assert!(
            events(id).check.is_some_and(|c| c.met),
            "{id}: definition check"
        );
    }
    // Hardware events: counted, or named with a reason; never a silent zero.
    for hw in ["cycles", "instructions"] {
        let e = events("syscall/getpid");
        match (e.per_op.get(hw), e.unavailable.get(hw)) {
            (Some(v), None) => assert!(*v > 0.0, "{hw} counted as {v}"),
            (None, Some(why)) => assert!(!why.is_empty()),
            other => panic!("{hw}: {other:?}"),
        }
    }
}
