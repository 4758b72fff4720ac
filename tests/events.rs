//! Events per operation prove each definition: on this kind of machine a ring hop is one
//! context switch, a ping-pong round trip on one CPU two, a first write one fault per page, a
//! getpid none; events that cannot be counted are listed with why, never shown as 0.

mod common;

use common::*;

/// Every benchmark whose catalogue entry declares events per operation, measured with both
/// parties on one CPU: each of its results that counted the events meets them. Driven by the
/// catalogue, so a new entry's expectations are checked here without editing this test.
#[test]
fn counted_events_match_the_definitions() {
    let _g = measuring();
    let declared: Vec<&str> = oscost::bench::registry()
        .iter()
        .filter(|b| !b.expectations().is_empty())
        .map(|b| b.id)
        .collect();
    assert!(declared.len() >= 10, "{declared:?}");
    let mut args = vec!["--quick", "--placement", "same"];
    args.extend(&declared);
    let (_, run) = run_json(&unique_tag("events"), &args);
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
    let mut checked = 0;
    for r in &run.results {
        let expected = oscost::bench::expected_events(&r.id);
        if expected.is_empty() || r.status != oscost::base::model::Status::Ok {
            continue;
        }
        let ev = r.events.as_ref().expect("events counted");
        for (event, x) in &expected {
            let got = ev.per_op[*event];
            assert!(
                x.holds(got),
                "{}: {got} {event} per op, want {}",
                r.id,
                x.describe(event)
            );
        }
        assert!(
            ev.check.as_ref().is_some_and(|c| c.met),
            "{}: definition check",
            r.id
        );
        checked += 1;
    }
    // Every declaring benchmark had at least one result held to its expectations.
    for id in &declared {
        assert!(
            run.results
                .iter()
                .any(|r| r.id.starts_with(id) && !oscost::bench::expected_events(&r.id).is_empty()),
            "{id}: no result was checked"
        );
    }
    assert!(checked >= declared.len());
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
