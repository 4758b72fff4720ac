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
    let tag = unique_tag("net-order");
    let (_, run) = run_json(&tag, &["--placement", "same", "net/", "switch/pipe-proc"]);
    let tenfold = "ten times the descriptors to look at";
    assert_costlier(
        &tag,
        &run,
        &["--placement", "same"],
        &[
            costlier(
                "net/tcp-rr@same",
                "switch/pipe-proc@same",
                "the TCP stack (a segment built, looped back, acknowledged) on top of the \
                 switches a pipe round trip costs",
            ),
            costlier(
                "net/tcp-connect@same",
                "net/unix-connect@same",
                "a TCP handshake and teardown against a unix socket's connect",
            ),
            costlier_by("net/select-tcp/100", 2.0, "net/select-tcp/10", tenfold),
            costlier_by("net/poll-tcp/100", 2.0, "net/poll-tcp/10", tenfold),
            costlier_by("net/epoll-tcp/100", 2.0, "net/epoll-tcp/10", tenfold),
        ],
    );
}

/// A real pair: the same pipe bandwidth measured plain and with its writes traced (strace stops
/// each one), alternated by `ab`: the traced side's lower rate is called slower, and the rates
/// are said beside the times.
#[test]
fn a_slowed_pipe_bandwidth_is_called_slower_by_ab() {
    if std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_err()
    {
        skip_needing(
            "a_slowed_pipe_bandwidth_is_called_slower_by_ab",
            &["strace"],
            "no strace",
        );
        return;
    }
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ab.json");
    let out = oscost(&unique_tag("bw-ab"))
        .args([
            "ab",
            "bw/pipe",
            "--placement",
            "same",
            "--b",
            "strace -f -e trace=write -o /dev/null",
            "--quick",
            "--no-save",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let row = &c["rows"][0];
    assert_eq!(row["id"], "bw/pipe@same");
    assert_eq!(row["verdict"], "slower", "{row}");
    assert_eq!(row["bytes_per_op"], 1048576.0);
    assert!(
        text.contains("bandwidths (the table's medians are times per MiB moved"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("bw/pipe@same:") && l.contains(" to "))
        .unwrap_or_else(|| panic!("no rate line in {text}"));
    assert!(line.contains("%), slower"), "{line}");
}

/// Every bandwidth measures, says what one operation moves, and shows its rate under the
/// table; copying a mebibyte (a read and a write of each byte) costs more than reading it, and
/// a pipe (two copies and the switches between the parties) more than a copy in memory.
#[test]
fn every_bandwidth_measures_a_mebibyte_an_operation() {
    let _g = measuring();
    let tag = unique_tag("bw");
    let (out, run) = run_json(&tag, &["--quick", "--placement", "same", "bw/"]);
    let ids: Vec<&str> = run.results.iter().map(|r| r.id.as_str()).collect();
    for want in [
        "bw/pipe@same",
        "bw/unix@same",
        "bw/tcp@same",
        "bw/file-reread",
        "bw/mmap-reread",
        "bw/mem-read",
        "bw/mem-write",
        "bw/mem-copy",
    ] {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
        let r = result(&run, want);
        assert_eq!(r.status, Status::Ok, "{want}");
        assert_eq!(r.bytes_per_op(), Some(1048576.0), "{want}");
        assert!(r.rate().is_some_and(|x| x.bytes_per_s > 0.0), "{want}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("bandwidths (the table's times are per MiB moved"),
        "{text}"
    );
    assert_costlier(
        &tag,
        &run,
        &["--quick", "--placement", "same"],
        &[
            costlier(
                "bw/mem-copy",
                "bw/mem-read",
                "a read and a write against a read",
            ),
            costlier(
                "bw/pipe@same",
                "bw/mem-copy",
                "two copies through the kernel and switches against one copy",
            ),
        ],
    );
}
