//! net/: every loopback benchmark measures by its definition (a TCP or UDP round trip on one
//! CPU is two switches, as a pipe's is), and the costs keep the order what each operation does
//! implies.

mod common;

use common::*;
use oscost::base::model::NoteKind;

#[test]
fn every_net_benchmark_measures_and_a_round_trip_is_two_switches() {
    let _g = measuring();
    let (_, run) = run_json(&unique_tag("net"), &["--quick", "net/"]);
    let ids: Vec<&str> = run.results.iter().map(|r| r.id.as_str()).collect();
    for want in [
        "net/tcp-rr@same",
        "net/tcp-rr@cross",
        "net/udp-rr@same",
        "net/tcp-connect@same",
        "net/unix-connect@same",
        "net/select-tcp/10",
        "net/select-tcp/100",
        "net/poll-tcp/100",
        "net/epoll-tcp/100",
    ] {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
    }
    for r in &run.results {
        match &r.status {
            Status::Ok => {}
            // A cross placement needs a second CPU.
            Status::Skipped { reason } if r.id.ends_with("@cross") => skip(&r.id, reason),
            s => panic!("{}: {s:?}", r.id),
        }
        assert!(
            !r.notes
                .iter()
                .any(|n| matches!(n.kind, NoteKind::DefinitionNotMet)),
            "{}: {:?}",
            r.id,
            r.notes
        );
    }
    // Each party blocks once a round trip: two switches on one CPU, where they are counted.
    for id in ["net/tcp-rr@same", "net/udp-rr@same"] {
        let r = result(&run, id);
        if let Some(cs) = r
            .events
            .as_ref()
            .and_then(|e| e.per_op.get("context-switches"))
        {
            assert!((cs - 2.0).abs() <= 0.1, "{id}: {cs} switches a round trip");
        }
    }
}

/// Host-dependent orderings (slow tier, default sampling).
#[test]
#[ignore = "slow tier (orderings, default sampling): .ci/run runs it with --ignored"]
fn net_costs_are_ordered() {
    let _g = measuring();
    let (_, run) = run_json(
        &unique_tag("net-order"),
        &["--placement", "same", "net/", "switch/pipe-proc"],
    );
    // The TCP stack (a segment built, looped back, acknowledged) on top of the switches a pipe
    // round trip costs.
    assert!(median(&run, "net/tcp-rr@same") > median(&run, "switch/pipe-proc@same"));
    // A TCP handshake and teardown against a unix socket's connect.
    assert!(median(&run, "net/tcp-connect@same") > median(&run, "net/unix-connect@same"));
    // Ten times the descriptors to look at.
    for wait in ["select", "poll", "epoll"] {
        assert!(
            median(&run, &format!("net/{wait}-tcp/100"))
                > 2.0 * median(&run, &format!("net/{wait}-tcp/10")),
            "{wait}"
        );
    }
}
