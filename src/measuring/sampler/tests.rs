//! The sampler's unit tests: a fake clock and probe give exact answers.

use super::*;
use std::cell::Cell;
use std::rc::Rc;

/// A clock that only moves when told to: each read costs `read_cost` ns.
#[derive(Clone)]
struct FakeClock {
    now: Rc<Cell<u64>>,
    read_cost: u64,
}
impl FakeClock {
    fn new(read_cost: u64) -> Self {
        FakeClock {
            now: Rc::new(Cell::new(1_000)),
            read_cost,
        }
    }
    fn advance(&self, ns: u64) {
        self.now.set(self.now.get() + ns);
    }
}
impl Clock for FakeClock {
    fn now_ns(&self) -> u64 {
        let t = self.now.get();
        self.now.set(t + self.read_cost);
        t
    }
}

/// Reports a preemption in every `every`-th timed section (a pair of reads around it).
struct ScriptedProbe {
    reads: Cell<u64>,
    every: u64,
}
impl PreemptionProbe for ScriptedProbe {
    fn involuntary_switches(&self) -> u64 {
        let r = self.reads.get();
        self.reads.set(r + 1);
        // Section k is read before (2k) and after (2k + 1); section k is preempted when k
        // is a multiple of `every`, so the count is #{j < k} before and #{j <= k} after.
        let (k, e) = (r / 2, self.every);
        if r.is_multiple_of(2) {
            k.div_ceil(e)
        } else {
            k / e + 1
        }
    }
}

fn cfg() -> SamplerConfig {
    SamplerConfig {
        stop: StopWhen::Precise {
            precision: 0.01,
            min_ns: 1_000_000,
        },
        budget_ns: 50_000_000,
        warmup_ns: 1_000_000,
        min_samples: 10,
        max_samples: 100_000,
        target_batch_ns: 32_000,
        clock_cost_ns: Some(0.0),
    }
}

#[test]
fn constant_cost_gives_exact_samples_with_baseline_subtracted() {
    let clock = FakeClock::new(0);
    let s = Sampler::new(clock.clone(), super::super::noise::NoProbe, cfg());
    let c1 = clock.clone();
    let c2 = clock.clone();
    let (m, reason) = s.batched(
        &mut |n| c1.advance(n * 10), // 10 ns per op, loop included
        &mut |n| c2.advance(n * 2),  // 2 ns per iteration of the empty loop
    );
    assert_eq!(m.baseline_ns, 2.0);
    assert!(m.samples_ns.iter().all(|&x| x == 8.0));
    // Batch sized to the target: 32 us / 10 ns.
    assert_eq!(m.batch.size, 3200);
    assert_eq!(reason, StopReason::Precision);
    // Needs both min samples and min time: 1 ms of 32 us batches.
    assert!(m.samples_ns.len() >= 31, "{}", m.samples_ns.len());
    assert!(m.preempted.is_empty());
}

#[test]
fn the_exit_witness_is_timed_between_samples_every_half_millisecond_and_moves_none() {
    let clock = FakeClock::new(0);
    let mut c = cfg();
    c.stop = StopWhen::Elapsed { ns: 10_000_000 };
    let s = Sampler::new(clock.clone(), super::super::noise::NoProbe, c);
    let (c1, c2) = (clock.clone(), clock.clone());
    let (m, _) = s.batched(&mut |n| c1.advance(n * 10), &mut |n| c2.advance(n * 2));
    // 10 ms of sampling, one exit each 0.5 ms from the first sample on; the samples are
    // what they were (the CPUID runs outside every timed batch).
    let want = (10_000_000 / EXIT_EVERY_NS) as usize;
    if cfg!(target_arch = "x86_64") {
        assert!(m.exits_ns.len().abs_diff(want) <= 1, "{}", m.exits_ns.len());
    } else {
        assert!(m.exits_ns.is_empty());
    }
    assert!(m.samples_ns.iter().all(|&x| x == 8.0));

    // One by one (100 us each): an exit after every fifth operation.
    let clock = FakeClock::new(0);
    let mut c = cfg();
    c.stop = StopWhen::Count { n: 50 };
    let s = Sampler::new(clock.clone(), super::super::noise::NoProbe, c);
    let c1 = clock.clone();
    let (m, _) = s
        .individual(&mut || -> Result<f64, Infallible> {
            c1.advance(100_000);
            Ok(100_000.0)
        })
        .unwrap();
    if cfg!(target_arch = "x86_64") {
        assert!(m.exits_ns.len().abs_diff(10) <= 1, "{}", m.exits_ns.len());
    }
    assert!(m.samples_ns.iter().all(|&x| x == 100_000.0));
}

#[test]
fn noisy_cost_that_never_converges_stops_at_budget() {
    let clock = FakeClock::new(0);
    let s = Sampler::new(clock.clone(), super::super::noise::NoProbe, cfg());
    let c1 = clock.clone();
    let k = Cell::new(0u64);
    let (m, reason) = s.batched(
        &mut |n| {
            // Alternate 10 ns and 30 ns per op: the median's CI never narrows to 1%.
            let step = if k.get().is_multiple_of(2) { 10 } else { 30 };
            k.set(k.get() + 1);
            c1.advance(n * step)
        },
        &mut |_| {},
    );
    assert_eq!(reason, StopReason::Budget);
    let total: f64 = m.samples_ns.iter().map(|x| x * m.batch.size as f64).sum();
    assert!((50_000_000.0..50_100_000.0).contains(&total), "{total}");
}

#[test]
fn fixed_count_is_exact() {
    let clock = FakeClock::new(0);
    let mut c = cfg();
    c.stop = StopWhen::Count { n: 17 };
    let s = Sampler::new(clock.clone(), super::super::noise::NoProbe, c);
    let c1 = clock.clone();
    let (m, reason) = s.batched(&mut |n| c1.advance(n * 5), &mut |_| {});
    assert_eq!(reason, StopReason::FixedCount);
    assert_eq!(m.samples_ns.len(), 17);
}

#[test]
fn preempted_samples_are_marked_not_dropped() {
    let clock = FakeClock::new(0);
    let probe = ScriptedProbe {
        reads: Cell::new(0),
        every: 4,
    };
    let mut c = cfg();
    c.stop = StopWhen::Count { n: 40 };
    let s = Sampler::new(clock.clone(), probe, c);
    let c1 = clock.clone();
    let (m, _) = s.batched(&mut |n| c1.advance(n * 5), &mut |_| {});
    assert_eq!(m.samples_ns.len(), 40);
    assert_eq!(m.preempted.len(), 10);
}

#[test]
fn individual_ops_keep_every_time_minus_clock_cost() {
    let clock = FakeClock::new(0);
    let mut c = cfg();
    c.clock_cost_ns = Some(25.0);
    c.stop = StopWhen::Count { n: 5 };
    let s = Sampler::new(clock.clone(), super::super::noise::NoProbe, c);
    let times = Cell::new(0u64);
    let c1 = clock.clone();
    let (m, reason) = s
        .individual::<()>(&mut || {
            let i = times.get();
            times.set(i + 1);
            c1.advance(1_000_000);
            Ok(1000.0 + i as f64)
        })
        .unwrap();
    assert_eq!(reason, StopReason::FixedCount);
    assert_eq!(m.batch.size, 1);
    // Three warm-up ops (1 ms warm-up / 3 passes after one op of 1 ms), then five samples.
    assert_eq!(m.samples_ns, vec![978.0, 979.0, 980.0, 981.0, 982.0]);
}

#[test]
fn individual_errors_propagate() {
    let clock = FakeClock::new(0);
    let s = Sampler::new(clock, super::super::noise::NoProbe, cfg());
    let r = s.individual(&mut || Err::<f64, _>("fork: EAGAIN"));
    assert_eq!(r.unwrap_err(), "fork: EAGAIN");
}

#[test]
fn target_batch_is_a_thousand_clock_reads_within_bounds() {
    assert_eq!(target_batch_ns(Some(27.0)), 54_000);
    assert_eq!(target_batch_ns(Some(1.0)), 20_000);
    assert_eq!(target_batch_ns(Some(5000.0)), 1_000_000);
    assert_eq!(target_batch_ns(None), 50_000);
}
