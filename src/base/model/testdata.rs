//! A synthetic run shared by the exporters' tests.
use std::collections::BTreeMap;

use super::*;
use crate::base::stats;

/// A measured result `id` of these samples, summarised as a run would summarise it.
pub fn result(id: &str, samples: Vec<f64>) -> BenchResult {
    BenchResult {
        id: id.into(),
        family: family_of(id).into(),
        params: BTreeMap::new(),
        unit: "ns".into(),
        definition: format!("definition of {id}"),
        placement: Placement::Pinned { cpu: 1 },
        batch: Batch {
            batched: true,
            size: 1000,
        },
        baseline_ns: 0.5,
        stats: stats::summarize(&samples),
        outliers: stats::tukey_outliers(&samples),
        samples_ns: samples,
        preempted: vec![],
        disturbed: Disturbance::default(),
        notes: vec![],
        status: Status::Ok,
        repetitions: vec![],
        uncertainty: None,
        events: None,
        profile: None,
    }
}

/// A repetition at `median_ns` that started at `started_ms`, one sample, nothing preempted.
pub fn repetition(median_ns: f64, started_ms: f64) -> Repetition {
    Repetition {
        start: 0,
        samples: 1,
        median_ns,
        started_ms,
        startup_ms: 0.0,
        preempted: 0,
        departs_pct: None,
        witness_ns: None,
        exit_witness_ns: None,
        memory_events: BTreeMap::new(),
        block: None,
    }
}

/// `run()` with every sample, and so every statistic, `factor` times larger.
pub fn run_scaled(factor: f64) -> Run {
    let mut run = self::run();
    for r in &mut run.results {
        r.samples_ns.iter_mut().for_each(|x| *x *= factor);
        r.stats = stats::summarize(&r.samples_ns);
    }
    run
}

/// A run of a few results: measured, one disturbed, one skipped.
pub fn run() -> Run {
    let mut disturbed = result("syscall/getppid", vec![200.0, 210.0, 190.0, 205.0]);
    disturbed.disturbed.flag = vec!["other CPU busy 97%".into()];
    Run {
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        started_at: "2026-11-22T13:00:00Z".into(),
        label: Some("test".into()),
        wrapper: None,
        settings: vec![],
        during: None,
        env: Env::default(),
        clock: ClockInfo {
            source: ClockSource::ClockMonotonic,
            cost_ns: 25.0,
            resolution_ns: 1.0,
        },
        results: vec![
            result("call/f0", vec![1.0, 1.5, 2.0, 1.25, 1.75]),
            disturbed,
            result("spawn/fork", vec![150_000.0, 160_000.0, 155_000.0]),
            BenchResult::not_measured(
                "timer/rdtscp",
                "rdtscp",
                Status::Skipped {
                    reason: "no rdtscp".into(),
                },
            ),
        ],
        schedule: None,
        notes: vec![],
    }
}
