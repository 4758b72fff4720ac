//! The benchmark catalogue: what each benchmark is (id, definition) and the function that
//! measures it. A benchmark runs inside a worker process, pinned, with a `Ctx` that hands it the
//! sampler; it returns one or more `Outcome`s (several when it has parameters or placements) and
//! knows nothing of output. A new benchmark is one function in its family file plus one entry
//! in that family's `BENCHMARKS` list.

pub mod call;
pub mod ipc;
pub mod mem;
pub mod spawn;
pub mod switch;
pub mod syscall;
pub mod timer;

use std::collections::BTreeMap;
use std::hint::black_box;

use serde::{Deserialize, Serialize};

use crate::harness::clock::Monotonic;
use crate::harness::noise::{self, CpuSnapshot, Rusage};
use crate::harness::sampler::{Measurement, Sampler, SamplerConfig};
use crate::model::Placement;

/// A benchmark could not produce a number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BenchError {
    /// Not applicable here (not this OS, no such instruction, no permission): said, never faked.
    #[error("skipped: {0}")]
    Skipped(String),
    /// It should have run and did not.
    #[error("failed: {0}")]
    Failed(String),
}

impl BenchError {
    pub fn failed(what: &str, e: impl std::fmt::Display) -> BenchError {
        BenchError::Failed(format!("{what}: {e}"))
    }
}

/// Options the coordinator passes to every worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerOptions {
    pub sampler: SamplerConfigWire,
    /// The CPU single-thread benchmarks are pinned to.
    pub cpu: usize,
    /// CPUs the run may use.
    pub allowed: Vec<usize>,
    /// Resident sizes of the parent for spawn/fork-rss, MiB.
    #[serde(default = "default_fork_sizes")]
    pub fork_sizes_mib: Vec<u64>,
    /// Placements of two-party benchmarks.
    #[serde(default = "switch::default_places")]
    pub placements: Vec<switch::Place>,
    /// The lat_ctx ring's processes and sizes.
    #[serde(default)]
    pub ring: switch::RingOptions,
    /// Name of the POSIX message queue a worker may create (unlinked at once, and again by
    /// the coordinator after the worker).
    #[serde(default = "default_mq_name")]
    pub mq_name: String,
    /// A private directory for temporary files, removed by the coordinator.
    #[serde(default)]
    pub scratch_dir: Option<std::path::PathBuf>,
}

pub fn default_mq_name() -> String {
    format!("/oscost-{}", std::process::id())
}

pub fn default_fork_sizes() -> Vec<u64> {
    vec![0, 64, 256, 1024]
}

/// `SamplerConfig` as it crosses the pipe to the worker.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SamplerConfigWire {
    pub precision: f64,
    pub budget_ns: u64,
    pub min_time_ns: u64,
    pub warmup_ns: u64,
    pub fixed_samples: Option<usize>,
    pub target_batch_ns: u64,
    pub clock_cost_ns: f64,
}

impl From<SamplerConfigWire> for SamplerConfig {
    fn from(w: SamplerConfigWire) -> SamplerConfig {
        SamplerConfig {
            precision: w.precision,
            budget_ns: w.budget_ns,
            min_time_ns: w.min_time_ns,
            warmup_ns: w.warmup_ns,
            fixed_samples: w.fixed_samples,
            target_batch_ns: w.target_batch_ns,
            clock_cost_ns: w.clock_cost_ns,
            ..SamplerConfig::for_clock(w.clock_cost_ns)
        }
    }
}

/// What a benchmark function receives.
pub struct Ctx {
    pub sampler: Sampler<Monotonic, Rusage>,
    pub opts: WorkerOptions,
}

/// One measured result, before statistics.
pub struct Outcome {
    pub id: String,
    pub params: BTreeMap<String, serde_json::Value>,
    pub definition: String,
    pub placement: Placement,
    pub measurement: Measurement,
    /// CPUs the benchmark ran on; the others are watched for load.
    pub used_cpus: Vec<usize>,
    pub cpu_before: CpuSnapshot,
    pub cpu_after: CpuSnapshot,
    pub notes: Vec<String>,
    /// Involuntary switches are part of the operation (a forked child preempting its parent),
    /// so they do not make the result disturbed.
    pub preemption_expected: bool,
    /// This part of a benchmark could not be measured (one placement, one ring size).
    pub error: Option<BenchError>,
}

impl Outcome {
    /// An outcome that carries only why it has no numbers.
    pub fn failed(id: String, bench: &Benchmark, e: BenchError) -> Outcome {
        Outcome {
            id,
            params: BTreeMap::new(),
            definition: bench.definition.to_string(),
            placement: Placement::Free,
            measurement: Measurement {
                samples_ns: vec![],
                ends_ns: vec![],
                preempted: vec![],
                batch: crate::model::Batch {
                    batched: false,
                    size: 0,
                },
                baseline_ns: 0.0,
                phase: None,
            },
            used_cpus: vec![],
            cpu_before: vec![],
            cpu_after: vec![],
            notes: vec![],
            preemption_expected: false,
            error: Some(e),
        }
    }
}

impl Ctx {
    /// Measure a cheap operation in batches on the pinned CPU. `op(n)` performs it n times;
    /// the empty loop is the baseline.
    pub fn batched(&self, bench: &Benchmark, op: &mut dyn FnMut(u64)) -> Outcome {
        self.batched_with_baseline(bench, op, &mut empty_loop)
    }

    pub fn batched_with_baseline(
        &self,
        bench: &Benchmark,
        op: &mut dyn FnMut(u64),
        baseline: &mut dyn FnMut(u64),
    ) -> Outcome {
        let before = noise::read_proc_stat();
        let (m, _) = self.sampler.batched(op, baseline);
        let after = noise::read_proc_stat();
        self.outcome(bench, m, before, after)
    }

    /// Measure a cheap operation that can fail (a peer that died) in batches, with the empty
    /// loop as baseline, where the caller has placed the parties.
    pub fn batched_fallible(
        &self,
        bench: &Benchmark,
        op: &mut dyn FnMut(u64) -> Result<(), BenchError>,
    ) -> Result<Outcome, BenchError> {
        let before = noise::read_proc_stat();
        let (m, _) = self.sampler.batched_fallible(op, &mut empty_loop)?;
        let after = noise::read_proc_stat();
        Ok(self.outcome(bench, m, before, after))
    }

    /// Measure an operation that times itself, one per sample, on the pinned CPU.
    pub fn individual(
        &self,
        bench: &Benchmark,
        op: &mut dyn FnMut() -> Result<f64, BenchError>,
    ) -> Result<Outcome, BenchError> {
        self.individual_with(bench, self.sampler.cfg, op)
    }

    /// As `individual`, with sampler settings of the benchmark's own (a longer budget for
    /// operations that take milliseconds).
    pub fn individual_with(
        &self,
        bench: &Benchmark,
        cfg: SamplerConfig,
        op: &mut dyn FnMut() -> Result<f64, BenchError>,
    ) -> Result<Outcome, BenchError> {
        let sampler = Sampler::new(Monotonic, Rusage, cfg);
        let before = noise::read_proc_stat();
        let (m, _) = sampler.individual(op)?;
        let after = noise::read_proc_stat();
        Ok(self.outcome(bench, m, before, after))
    }

    fn outcome(
        &self,
        bench: &Benchmark,
        m: Measurement,
        before: CpuSnapshot,
        after: CpuSnapshot,
    ) -> Outcome {
        Outcome {
            id: bench.id.to_string(),
            params: BTreeMap::new(),
            definition: bench.definition.to_string(),
            placement: Placement::Pinned { cpu: self.opts.cpu },
            measurement: m,
            used_cpus: vec![self.opts.cpu],
            cpu_before: before,
            cpu_after: after,
            notes: vec![],
            preemption_expected: false,
            error: None,
        }
    }
}

/// The loop of a batched benchmark with the operation removed.
#[inline(never)]
pub fn empty_loop(n: u64) {
    for i in 0..n {
        black_box(i);
    }
}

pub type BenchFn = fn(&Ctx, &Benchmark) -> Result<Vec<Outcome>, BenchError>;

/// A catalogue entry.
#[derive(Debug)]
pub struct Benchmark {
    /// `family/name`.
    pub id: &'static str,
    /// What one sample is the cost of, in a sentence.
    pub definition: &'static str,
    /// In the suite that runs when no id is given.
    pub default: bool,
    pub run: BenchFn,
}

impl Benchmark {
    pub fn family(&self) -> &'static str {
        self.id.split('/').next().unwrap_or(self.id)
    }
}

/// Every benchmark, in suite order.
pub fn registry() -> Vec<&'static Benchmark> {
    call::BENCHMARKS
        .iter()
        .chain(timer::BENCHMARKS)
        .chain(syscall::BENCHMARKS)
        .chain(spawn::BENCHMARKS)
        .chain(switch::BENCHMARKS)
        .chain(ipc::BENCHMARKS)
        .chain(mem::BENCHMARKS)
        .collect()
}

pub fn find(id: &str) -> Option<&'static Benchmark> {
    registry().into_iter().find(|b| b.id == id)
}

/// Resolve user patterns (exact ids, `family/` or `family` or any id prefix) to benchmarks, in
/// registry order, without duplicates. An empty pattern list means the default suite. A pattern
/// that matches nothing is an error naming the closest id.
pub fn select(patterns: &[String]) -> Result<Vec<&'static Benchmark>, String> {
    let all = registry();
    if patterns.is_empty() {
        return Ok(all.into_iter().filter(|b| b.default).collect());
    }
    let mut chosen = vec![false; all.len()];
    for p in patterns {
        if p.trim().is_empty() {
            return Err("an empty benchmark id; give an id or prefix (`oscost list`)".into());
        }
        // An exact id selects that benchmark alone (`syscall/getpid` is not also
        // `syscall/getpid-raw`); anything else is a family or a prefix.
        let exact = all.iter().position(|b| b.id == p);
        let mut any = false;
        for (i, b) in all.iter().enumerate() {
            let family_match = p.trim_end_matches('/') == b.family();
            let hit = match exact {
                Some(e) => e == i,
                None => family_match || b.id.starts_with(p.as_str()),
            };
            if hit {
                chosen[i] = true;
                any = true;
            }
        }
        if !any {
            return Err(unknown_id_message(p, &all));
        }
    }
    Ok(all
        .into_iter()
        .zip(chosen)
        .filter_map(|(b, c)| c.then_some(b))
        .collect())
}

fn unknown_id_message(p: &str, all: &[&'static Benchmark]) -> String {
    let mut names: Vec<&str> = all.iter().map(|b| b.id).collect();
    let families: Vec<String> = all.iter().map(|b| format!("{}/", b.family())).collect();
    names.extend(families.iter().map(String::as_str));
    let best = names
        .iter()
        .map(|n| (strsim::damerau_levenshtein(p, n), *n))
        .min();
    match best {
        Some((d, n)) if d <= p.len().max(3) / 2 + 1 => {
            format!("no benchmark matches '{p}'; did you mean '{n}'? (`oscost list` shows all)")
        }
        _ => format!("no benchmark matches '{p}'; `oscost list` shows every id"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_family_slash_name_and_defined() {
        let all = registry();
        let mut ids: Vec<&str> = all.iter().map(|b| b.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "duplicate id");
        for b in all {
            let (fam, name) = b.id.split_once('/').expect("family/name");
            assert!(!fam.is_empty() && !name.is_empty());
            assert!(b.definition.len() > 10, "{} needs a definition", b.id);
        }
    }

    #[test]
    fn select_by_prefix_family_and_exact_and_suggests_nearest() {
        let s = select(&["syscall/".into()]).unwrap();
        assert!(s.iter().all(|b| b.family() == "syscall") && s.len() > 5);
        assert_eq!(select(&["syscall".into()]).unwrap().len(), s.len());
        let g = select(&["syscall/getpid".into()]).unwrap();
        assert_eq!(g.len(), 1, "an exact id is not a prefix");
        let g = select(&["syscall/getp".into()]).unwrap();
        assert!(g.len() >= 4, "a prefix selects every match");
        let e = select(&["syscall/getpdi".into()]).unwrap_err();
        assert!(e.contains("did you mean 'syscall/getpid'"), "{e}");
        let e = select(&["zzzzzzzzzzzzz".into()]).unwrap_err();
        assert!(e.contains("oscost list"));
        // Order follows the registry and there are no duplicates.
        let two = select(&["call/f0".into(), "call/".into()]).unwrap();
        assert_eq!(two.len(), call::BENCHMARKS.len());
    }
}
