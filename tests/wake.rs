//! wake/: every gap of a mechanism measured across two CPUs, with the sleeper's CPU and its
//! idle states recorded; on one allowed CPU the family is skipped with the reason, never faked.

mod common;

use common::*;

#[test]
fn every_gap_is_measured_across_cpus_with_the_sleepers_idle_states() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        skip(
            "every_gap_is_measured_across_cpus_with_the_sleepers_idle_states",
            "one allowed CPU: no wake-up across CPUs",
        );
        return;
    }
    let _g = measuring();
    let (_, run) = run_json(&unique_tag("wake"), &["--quick", "wake/futex", "wake/pipe"]);
    for mech in ["wake/futex", "wake/pipe"] {
        for gap in ["0", "1us", "10us", "100us", "1ms", "10ms"] {
            let id = format!("{mech}/gap-{gap}");
            let r = result(&run, &id);
            assert_eq!(r.status.word(), "ok", "{id}: {:?}", r.notes);
            let sleeper = r.params["sleeper_cpu"].as_u64().unwrap() as usize;
            match &r.placement {
                oscost::base::model::Placement::Cross { cpus } => {
                    assert_eq!(cpus.len(), 2, "{id}");
                    assert_eq!(cpus[1], sleeper, "{id}");
                    assert_ne!(cpus[0], sleeper, "{id}: the sleeper must be on another CPU");
                }
                p => panic!("{id}: {p:?}"),
            }
            assert!(r.params["idle_states"].is_object(), "{id}");
            assert!(r.params["gap_ns"].as_u64().is_some(), "{id}");
            assert!(
                r.notes.iter().any(|n| n.text.contains("the sleeper's CPU")),
                "{id}: {:?}",
                r.notes
            );
            assert!(stats(&run, &id).median > 0.0, "{id}");
        }
    }
}

#[test]
fn on_one_cpu_the_family_is_skipped_with_the_reason() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let cpu = allowed_cpus()[0];
    let mut cmd = oscost(&unique_tag("wake-one"));
    cmd.args(["run", "--no-save", "--quick", "wake/eventfd", "--json"])
        .arg(&path);
    oscost::measuring::placement::pin_on_exec(&mut cmd, cpu);
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = read_run(&path);
    for r in &run.results {
        assert_eq!(r.status.word(), "skipped", "{}", r.id);
    }
}
