//! What a benchmark function is to the measuring layer: the case it measures (`Case`), what it
//! gets to measure with (`Meter`) and what it returns (`Outcome`, or a `BenchError`). The
//! catalogue's entry type, which names the function and the cases it expands to, is
//! `bench::entry`; the runner (`bench::runner`) expands an entry, places the parties,
//! snapshots /proc/stat, forms ids and parameters, and turns a case's error into that case's
//! failure. A benchmark function measures one case and knows nothing of ids, placements or
//! output.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;

use super::clock::Monotonic;
use super::noise::Rusage;
use super::placement::Parties;
use super::sampler::{Measurement, Sampler, SamplerConfig};

pub use super::error::BenchError;

/// One case of a benchmark, as the runner hands it to the benchmark's function.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The catalogue's definition of the benchmark.
    pub definition: &'static str,
    /// Appended to the benchmark id to form the result id ("" for `Cases::One`).
    pub suffix: String,
    /// The case's parameters (a variant's, a ring's N and size), recorded with its result.
    pub params: BTreeMap<String, serde_json::Value>,
    /// Where the parties run, for `Cases::Placements`; the runner has placed the master.
    pub parties: Option<Parties>,
}

impl Case {
    /// An integer parameter the case's expansion set.
    pub fn int(&self, key: &str) -> Result<u64, BenchError> {
        self.params
            .get(key)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| {
                BenchError::Failed(format!("case {} has no parameter {key}", self.suffix))
            })
    }

    /// A yes/no parameter; absent is no.
    pub fn flag(&self, key: &str) -> bool {
        self.params
            .get(key)
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    }

    /// The CPU of a ping-pong's peer (`None`: unpinned).
    pub fn peer_cpu(&self) -> Option<usize> {
        self.parties.as_ref().and_then(|p| p.peer)
    }

    /// Whether both parties were placed on one CPU.
    pub fn same_cpu(&self) -> bool {
        self.parties
            .as_ref()
            .is_some_and(|p| p.master.is_some() && p.master == p.peer)
    }
}

/// What measuring one case gives: its outcome, or why there is none.
pub type Measured = Result<Outcome, BenchError>;

/// The function that measures one case.
pub type CaseFn = fn(&Meter, &Case) -> Measured;

/// What a benchmark function returns for one case: the samples, and what it learned that the
/// catalogue could not say in advance.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The samples.
    pub measurement: Measurement,
    /// Parameters found while measuring (the program run, an overhead subtracted).
    pub params: BTreeMap<String, serde_json::Value>,
    /// A definition that depends on the case (the ring's overhead, a chain's length).
    pub definition: Option<String>,
    /// Notes on the number, for the result.
    pub notes: Vec<String>,
    /// Where it ran, when the function placed its own parties (the ring).
    pub placed: Option<(crate::base::model::Placement, Vec<usize>)>,
}

impl Outcome {
    /// An outcome of these samples and nothing more.
    pub fn of(measurement: Measurement) -> Outcome {
        Outcome {
            measurement,
            params: BTreeMap::new(),
            definition: None,
            notes: vec![],
            placed: None,
        }
    }

    /// With the parameter `key` found while measuring.
    pub fn param(mut self, key: &str, value: impl Into<serde_json::Value>) -> Outcome {
        self.params.insert(key.into(), value.into());
        self
    }
}

/// What a benchmark function measures with: the sampler on the pinned measuring CPU, and the
/// worker's resources.
pub struct Meter {
    /// The sampler, on the real clock and rusage.
    pub sampler: Sampler<Monotonic, Rusage>,
    /// The measuring CPU.
    pub cpu: usize,
    /// CPUs the run may use.
    pub allowed: Vec<usize>,
    /// Name of the POSIX message queue a worker may create (unlinked at once, and again by
    /// the coordinator after the worker).
    pub mq_name: String,
    /// A private directory for temporary files, removed by the coordinator.
    pub scratch_dir: Option<PathBuf>,
    /// The run's cgroup, for a benchmark that asks for one (`Benchmark::cgroup`), or why the
    /// run has none.
    pub cgroup: Result<PathBuf, String>,
    /// perf events counted around each case (`measuring::counters`); empty: none.
    pub events: Vec<String>,
    /// Profile each case in an untimed pass of its own (`measuring::profile`).
    pub profile: bool,
}

impl Meter {
    /// Measure a cheap operation in batches; `op(n)` performs it n times; the empty loop is
    /// the baseline.
    pub fn batched(&self, op: &mut dyn FnMut(u64)) -> Outcome {
        self.batched_with_baseline(op, &mut empty_loop)
    }

    /// As `batched`, with a baseline loop of the benchmark's own.
    pub fn batched_with_baseline(
        &self,
        op: &mut dyn FnMut(u64),
        baseline: &mut dyn FnMut(u64),
    ) -> Outcome {
        Outcome::of(self.sampler.batched(op, baseline).0)
    }

    /// Measure a cheap operation that can fail (a peer that died) in batches, with the empty
    /// loop as baseline.
    pub fn batched_fallible(
        &self,
        op: &mut dyn FnMut(u64) -> Result<(), BenchError>,
    ) -> Result<Outcome, BenchError> {
        Ok(Outcome::of(
            self.sampler.batched_fallible(op, &mut empty_loop)?.0,
        ))
    }

    /// As `batched_fallible`, with a baseline loop of the benchmark's own (a call the
    /// operation needs before it, timed alone and subtracted).
    pub fn batched_with_baseline_fallible(
        &self,
        op: &mut dyn FnMut(u64) -> Result<(), BenchError>,
        baseline: &mut dyn FnMut(u64),
    ) -> Result<Outcome, BenchError> {
        Ok(Outcome::of(self.sampler.batched_fallible(op, baseline)?.0))
    }

    /// What an `individual` operation that timed `units` operations at once in `total_ns`
    /// (one pair of clock reads around them) returns, so that after the sampler takes the
    /// clock pair's cost off each sample, the sample is the cost of one: `(total - clock) /
    /// units`, not `total / units - clock`, which would take a whole pair's cost from each.
    pub fn per_unit(&self, total_ns: u64, units: usize) -> f64 {
        let clock = self.sampler.cfg.clock_cost_ns.unwrap_or(0.0);
        (total_ns as f64 - clock) / units.max(1) as f64 + clock
    }

    /// Measure an operation that times itself (returns its ns), one per sample.
    pub fn individual(
        &self,
        op: &mut dyn FnMut() -> Result<f64, BenchError>,
    ) -> Result<Outcome, BenchError> {
        self.individual_with(self.sampler.cfg, op)
    }

    /// As `individual`, with sampler settings of the benchmark's own (a longer budget for
    /// operations that take milliseconds).
    pub fn individual_with(
        &self,
        cfg: SamplerConfig,
        op: &mut dyn FnMut() -> Result<f64, BenchError>,
    ) -> Result<Outcome, BenchError> {
        let sampler = Sampler::new(Monotonic, Rusage, cfg);
        Ok(Outcome::of(sampler.individual(op)?.0))
    }
}

/// The loop of a batched benchmark with the operation removed.
#[inline(never)]
pub fn empty_loop(n: u64) {
    for i in 0..n {
        black_box(i);
    }
}
