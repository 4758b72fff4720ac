//! Tests of `scheduler`.

use super::sides::Repeater;
use super::*;
use crate::base::stop::Interrupted;
use crate::processes::conditions::{Condition, Launch};
use std::cell::RefCell;

use crate::measuring::case::BenchError;
use crate::measuring::sampler::SamplerConfig;

fn count_of(stop: StopWhen) -> Option<usize> {
    match stop {
        StopWhen::Count { n } => Some(n),
        _ => None,
    }
}
use crate::measuring::sampler::Measurement;

/// A worker that never starts: each call logs "SIDE id", and returns 200 samples around a
/// level that depends on the benchmark and how many repetitions of it came before.
struct Fake<'a> {
    side: &'static str,
    log: &'a RefCell<Vec<String>>,
    /// The k-th repetition of a benchmark sits at `levels(id)[k % len]`; empty: skipped.
    levels: fn(&str) -> Vec<f64>,
    /// The call (counted over every side) that a signal interrupts.
    interrupt_at: Option<usize>,
    /// What each call was given: (events asked for, fixed sample count).
    given: RefCell<Vec<(bool, Option<usize>)>>,
    /// The exit witness its worker timed, from the repetition's level.
    exit: fn(f64) -> Option<f64>,
}

impl Repeater for Fake<'_> {
    fn repeat(&self, b: &Benchmark, launch: &Launch) -> Result<Vec<CaseResult>, Stopped> {
        let opts = &launch.opts;
        if Some(self.log.borrow().len()) == self.interrupt_at {
            return Err(Interrupted(libc::SIGINT).into());
        }
        let k = self
            .log
            .borrow()
            .iter()
            .filter(|l| **l == format!("{} {}", self.side, b.id))
            .count();
        self.log
            .borrow_mut()
            .push(format!("{} {}", self.side, b.id));
        self.given
            .borrow_mut()
            .push((!opts.events.is_empty(), count_of(opts.sampler.stop)));
        let levels = (self.levels)(b.id);
        let mut case = CaseResult::failed(
            b.id.to_string(),
            b.id,
            b.definition,
            BenchError::Skipped("not here".into()),
        );
        if levels.is_empty() {
            return Ok(vec![case]);
        }
        let level = levels[k % levels.len()];
        let samples: Vec<f64> = (0..200)
            .map(|j| level * (1.0 + 0.001 * ((j % 7) as f64 - 3.0)))
            .collect();
        case.error = None;
        case.exit_witness_ns = (self.exit)(level);
        case.measurement = Some(Measurement {
            exits_ns: Vec::new(),
            ends_ns: (1..=200).map(|j| j * 100_000).collect(),
            samples_ns: samples,
            preempted: vec![],
            batch: crate::base::model::Batch {
                batched: true,
                size: 100,
            },
            baseline_ns: 0.0,
        });
        Ok(vec![case])
    }
}

fn fake<'a>(
    side: &'static str,
    log: &'a RefCell<Vec<String>>,
    levels: fn(&str) -> Vec<f64>,
) -> Fake<'a> {
    Fake {
        side,
        log,
        levels,
        interrupt_at: None,
        given: RefCell::new(vec![]),
        exit: |_| None,
    }
}

fn plan(ids: &[&str], fixed_total: Option<usize>) -> Plan {
    Plan {
        benchmarks: ids
            .iter()
            .map(|id| crate::bench::find(id).unwrap())
            .collect(),
        opts: WorkerOptions {
            sampler: SamplerConfig {
                stop: StopWhen::Elapsed { ns: 20_000_000 },
                budget_ns: 20_000_000,
                warmup_ns: 0,
                ..SamplerConfig::for_clock(Some(25.0))
            },
            events: vec!["context-switches".into()],
            ..WorkerOptions::for_tests()
        },
        timeout: Duration::from_secs(1),
        label: None,
        reps: RepetitionPlan {
            min: 5,
            max: 10,
            undecided_max: 20,
            rep_ns: 20_000_000,
            precision: 0.01,
            fixed_total,
            decide: None,
        },
        pin_wrapper: false,
        cpu_asked: false,
        quiet: false,
        round_gap: std::time::Duration::ZERO,
        block_s: crate::processes::scheduler::BLOCK_S,
    }
}

/// The rounds of `repeaters` over `plan`: the order, and each side's benchmarks' stop
/// reasons and repetition counts.
type Outcome = Result<(Vec<Vec<String>>, Vec<Vec<(Option<RepetitionStop>, usize)>>), Stopped>;

fn rounds_of(plan: &Plan, repeaters: &[&dyn Repeater]) -> Outcome {
    rounds_judging(plan, repeaters, false)
}

/// `rounds_of`, the stop rule judging the host's slow moments (`judges_host`) or not.
fn rounds_judging(plan: &Plan, repeaters: &[&dyn Repeater], judge_host: bool) -> Outcome {
    let mut sides = measured_sides(plan, repeaters.len());
    let bar = indicatif::ProgressBar::hidden();
    let each = rounds::RoundsSetup {
        plan,
        opts: &plan.opts,
        started: std::time::Instant::now(),
        bar: &bar,
        judge_host,
    };
    let order = run_rounds(
        &each,
        &mut Plain(repeaters.to_vec()),
        &mut sides,
        &Stop::never(),
    )?;
    let stops = sides
        .iter()
        .map(|s| {
            s.tracks
                .iter()
                .map(|t| (t.stopped, t.cases.first().map_or(0, |(_, r)| r.len())))
                .collect()
        })
        .collect();
    Ok((order, stops))
}

fn steady(_: &str) -> Vec<f64> {
    vec![100.0]
}

#[test]
fn ab_sides_alternate_within_each_round_and_steady_benchmarks_stop_at_the_minimum() {
    let log = RefCell::new(vec![]);
    let (a, b) = (fake("A", &log, steady), fake("B", &log, steady));
    let plan = plan(&["call/f0", "syscall/getppid"], None);
    let (order, stops) = rounds_of(&plan, &[&a, &b]).unwrap();
    assert_eq!(order.len(), 5);
    assert!(order.iter().all(|r| r == &["call/f0", "syscall/getppid"]));
    assert_eq!(
        log.borrow()[..4],
        [
            "A call/f0",
            "B call/f0",
            "A syscall/getppid",
            "B syscall/getppid"
        ]
    );
    assert_eq!(log.borrow().len(), 20);
    for side in &stops {
        assert_eq!(
            side,
            &[
                (Some(RepetitionStop::Precision), 5),
                (Some(RepetitionStop::Precision), 5)
            ]
        );
    }
    // Events are counted in the first repetition only.
    let given = a.given.borrow();
    assert!(given[0].0 && given[1].0 && given[2..].iter().all(|g| !g.0));
}

#[test]
fn ab_rounds_go_on_until_the_comparison_decides_or_the_budget_ends() {
    let ab_plan = |ids: &[&str]| {
        let mut p = plan(ids, None);
        p.reps.min = crate::base::stats::sequential::MIN_ROUNDS;
        p.reps.max = 40;
        p.reps.decide = Some(0.01);
        p
    };
    // B 5% slower with the same little noise: called at the first look.
    let log = RefCell::new(vec![]);
    let a = fake("A", &log, |_| vec![100.0, 101.0, 99.0, 100.5, 99.5, 100.2]);
    let b = fake("B", &log, |_| {
        vec![105.0, 106.0, 104.0, 105.5, 104.5, 105.2]
    });
    let (order, stops) = rounds_of(&ab_plan(&["syscall/getppid"]), &[&a, &b]).unwrap();
    assert_eq!(stops[0], [(Some(RepetitionStop::Decided), 10)]);
    assert_eq!(order.len(), 10);
    // A B, then B A: each side goes first in every other round.
    assert_eq!(
        log.borrow()[..4],
        [
            "A syscall/getppid",
            "B syscall/getppid",
            "B syscall/getppid",
            "A syscall/getppid"
        ]
    );
    // The two sides alike: no change, inside the band, at the first look.
    let log = RefCell::new(vec![]);
    let a = fake("A", &log, |_| vec![100.0, 101.0, 99.0]);
    let b = fake("B", &log, |_| vec![100.0, 101.0, 99.0]);
    let (_, stops) = rounds_of(&ab_plan(&["syscall/getppid"]), &[&a, &b]).unwrap();
    assert_eq!(stops[0], [(Some(RepetitionStop::Decided), 10)]);
    // Rounds whose ratios swing ±8% around 1: neither called nor inside ±1% by round 40.
    let log = RefCell::new(vec![]);
    let a = fake("A", &log, |_| vec![100.0, 108.0]);
    let b = fake("B", &log, |_| vec![108.0, 100.0, 100.0]);
    let (order, stops) = rounds_of(&ab_plan(&["syscall/getppid"]), &[&a, &b]).unwrap();
    assert_eq!(stops[0], [(Some(RepetitionStop::Budget), 40)]);
    assert_eq!(order.len(), 40);
}

#[test]
fn a_noisy_benchmark_runs_to_its_budget_while_a_steady_one_stops() {
    let log = RefCell::new(vec![]);
    let noisy = |id: &str| match id {
        "syscall/getppid" => vec![100.0, 140.0, 80.0, 120.0, 95.0],
        _ => vec![100.0],
    };
    let run = fake("run", &log, noisy);
    let plan = plan(&["call/f0", "syscall/getppid"], None);
    let (order, stops) = rounds_of(&plan, &[&run]).unwrap();
    assert_eq!(
        stops[0],
        [
            (Some(RepetitionStop::Precision), 5),
            (Some(RepetitionStop::Budget), 10)
        ]
    );
    assert_eq!(order.len(), 10);
    assert!(order[5..].iter().all(|r| r == &["syscall/getppid"]));
}

#[test]
fn slow_moments_that_could_be_half_are_outvoted_by_more_repetitions() {
    // 3 of the first 10 repetitions in a slow moment: they could be half (P = 17%), so the
    // benchmark goes past 10; with none in the next ones, at 15 they cannot (P = 1.8%).
    let log = RefCell::new(vec![]);
    let moments = |_: &str| {
        let mut v = vec![100.0; 20];
        for (k, slow) in [(2, 130.0), (6, 135.0), (9, 128.0)] {
            v[k] = slow;
        }
        v
    };
    let run = fake("run", &log, moments);
    let (order, stops) = rounds_of(&plan(&["syscall/getppid"], None), &[&run]).unwrap();
    assert_eq!(stops[0], [(Some(RepetitionStop::Precision), 15)]);
    assert_eq!(order.len(), 15);
    // Slow moments in 2 of every 5 repetitions stay undecided: the budget ends at 20.
    let log = RefCell::new(vec![]);
    let half = |_: &str| vec![100.0, 100.0, 131.0, 100.0, 131.0];
    let run = fake("run", &log, half);
    let (_, stops) = rounds_of(&plan(&["syscall/getppid"], None), &[&run]).unwrap();
    assert_eq!(stops[0], [(Some(RepetitionStop::Budget), 20)]);
    // Without the extension (a suite, --budget, --quick) the budget ends at the maximum.
    let log = RefCell::new(vec![]);
    let run = fake("run", &log, moments);
    let mut suite = plan(&["syscall/getppid"], None);
    suite.reps.undecided_max = 0;
    let (_, stops) = rounds_of(&suite, &[&run]).unwrap();
    assert_eq!(stops[0], [(Some(RepetitionStop::Budget), 10)]);
}

#[test]
fn the_stop_rule_judges_the_quiet_repetitions_where_the_host_was_slow_in_the_others() {
    // Every third repetition in a slow moment of the host: its exit witness high and the cost
    // 25% dearer. Judged as measured, those could be half and the benchmarks go on to the
    // extended budget; with the slow ones set aside, as the results will be, the quiet ones
    // agree within 0.3% once the run has shown the host's part.
    let slow_thirds = |_: &str| vec![100.0, 100.0, 125.0];
    let host = |level: f64| Some(if level > 110.0 { 5000.0 } else { 3800.0 });
    let ids = ["call/f0", "syscall/getppid", "syscall/getpid"];
    let stops = |exit: fn(f64) -> Option<f64>, judge_host: bool| {
        let log = RefCell::new(vec![]);
        let run = Fake {
            exit,
            ..fake("run", &log, slow_thirds)
        };
        rounds_judging(&plan(&ids, None), &[&run], judge_host)
            .unwrap()
            .1
    };
    let as_measured = stops(host, false);
    assert!(
        as_measured[0].iter().all(|(_, n)| *n >= 10),
        "{as_measured:?}"
    );
    let quiet = stops(host, true);
    assert!(
        quiet[0]
            .iter()
            .all(|(why, n)| *why == Some(RepetitionStop::Precision) && *n <= 8),
        "{quiet:?}"
    );
    // A witness that does not move judges as before.
    let no_witness = stops(|_| None, true);
    assert_eq!(no_witness, as_measured);
}

#[test]
fn a_benchmark_measured_nowhere_stops_after_one_round_and_fixed_counts_are_shared_out() {
    let log = RefCell::new(vec![]);
    let skipped = fake("run", &log, |_| vec![]);
    let (order, stops) = rounds_of(&plan(&["call/f0"], None), &[&skipped]).unwrap();
    assert_eq!(order.len(), 1);
    assert_eq!(stops[0], [(Some(RepetitionStop::NotMeasured), 1)]);
    // --samples 1003 over the 5 minimum repetitions: 201 201 201 200 200, then "fixed".
    let log = RefCell::new(vec![]);
    let fixed = fake("run", &log, steady);
    let (_, stops) = rounds_of(&plan(&["call/f0"], Some(1003)), &[&fixed]).unwrap();
    assert_eq!(stops[0], [(Some(RepetitionStop::Fixed), 5)]);
    let counts: Vec<Option<usize>> = fixed.given.borrow().iter().map(|g| g.1).collect();
    assert_eq!(counts, [201, 201, 201, 200, 200].map(Some));
}

#[test]
fn an_interrupt_stops_the_rounds_at_once() {
    let log = RefCell::new(vec![]);
    let a = Fake {
        interrupt_at: Some(3),
        ..fake("A", &log, steady)
    };
    let b = Fake {
        interrupt_at: Some(3),
        ..fake("B", &log, steady)
    };
    let plan = plan(&["call/f0", "syscall/getppid"], None);
    let e = rounds_of(&plan, &[&a, &b]).unwrap_err();
    assert_eq!(e, Stopped::Signal(Interrupted(libc::SIGINT)));
    assert_eq!(log.borrow().len(), 3, "no repetition after the signal");
}

#[test]
fn repetitions_shrink_with_the_suite_and_stop_where_asked() {
    let one = repetition_plan(1, 0.01, None, None, false);
    assert_eq!((one.min, one.max, one.rep_ns), (5, 10, REP_CEILING_NS));
    let suite = repetition_plan(100, 0.01, None, None, false);
    assert_eq!((suite.max, suite.rep_ns), (8, 40_000_000));
    let quick = repetition_plan(100, 0.02, None, None, true);
    assert_eq!((quick.max, quick.rep_ns), (5, REP_FLOOR_NS));
    assert_eq!(
        (one.undecided_max, suite.undecided_max, quick.undecided_max),
        (20, 0, 0)
    );
    let budget = repetition_plan(1, 0.01, Some(0.6), None, false);
    assert_eq!((budget.max, budget.undecided_max), (10, 0));
    assert_eq!(repetition_plan(1, 0.01, Some(0.01), None, false).max, 5);
    assert_eq!(
        repetition_plan(1, 0.01, None, Some(37), false).fixed_total,
        Some(37)
    );
}

#[test]
fn a_condition_that_did_not_hold_is_its_own_error_not_a_signal() {
    let e = Stopped::SettingNotHeld(crate::effects::settings_guard::NotHeld::NotKept {
        setting: "thp".into(),
        value: "always".into(),
        kept: "madvise".into(),
    })
    .into_error();
    assert!(e.downcast_ref::<Interrupted>().is_none(), "{e}");
    assert!(e.to_string().contains("did not keep"), "{e}");
    let e = Stopped::Signal(Interrupted(libc::SIGINT)).into_error();
    assert_eq!(
        e.downcast_ref::<Interrupted>(),
        Some(&Interrupted(libc::SIGINT))
    );
}

#[test]
fn a_block_holds_rounds_for_the_plans_block_time() {
    // Two benchmarks of 20 ms a repetition plus ~20 ms of start-up: a round is about 80 ms.
    let mut p = plan(&["syscall/getppid", "syscall/getpid"], None);
    let long = super::rounds_per_block(&p, 2);
    p.block_s = super::PRICE_BLOCK_S;
    let short = super::rounds_per_block(&p, 2);
    assert!(
        short < long,
        "{short} rounds in a short block, {long} in a long one"
    );
    assert!(short >= 1);
    // A block never holds less than one round, however short it is asked to be.
    p.block_s = 0.0;
    assert_eq!(super::rounds_per_block(&p, 2), 1);
}

/// Sides that alternate in blocks, as a program run during one makes them (`conditions::during`),
/// without a program.
struct Blocked<'a>(Plain<'a>);

impl Sides for Blocked<'_> {
    fn count(&self) -> usize {
        self.0.count()
    }

    fn repeat(
        &mut self,
        side: usize,
        b: &Benchmark,
        opts: &WorkerOptions,
    ) -> Result<Vec<CaseResult>, Stopped> {
        self.0.repeat(side, b, opts)
    }

    fn blocks(&self) -> bool {
        true
    }
}

#[test]
fn in_blocks_the_stop_rule_looks_at_blocks_not_rounds() {
    // Ten rounds a block (a round of one benchmark is about 40 ms here).
    let mut p = plan(&["syscall/getppid"], None);
    p.block_s = 0.39;
    assert_eq!(super::rounds_per_block(&p, 1), 10);
    p.reps.min = crate::base::stats::sequential::MIN_ROUNDS;
    p.reps.max = 400;
    p.reps.decide = Some(0.01);
    // B 5% slower with a little noise: decided at the first look, ten blocks, not ten rounds.
    let log = RefCell::new(vec![]);
    let a = fake("A", &log, |_| vec![100.0, 101.0, 99.0, 100.5, 99.5, 100.2]);
    let b = fake("B", &log, |_| {
        vec![105.0, 106.0, 104.0, 105.5, 104.5, 105.2]
    });
    let mut sides = measured_sides(&p, 2);
    let bar = indicatif::ProgressBar::hidden();
    let each = rounds::RoundsSetup {
        plan: &p,
        opts: &p.opts,
        started: std::time::Instant::now(),
        bar: &bar,
        judge_host: false,
    };
    run_rounds(
        &each,
        &mut Blocked(Plain(vec![&a, &b])),
        &mut sides,
        &Stop::never(),
    )
    .unwrap();
    for side in &sides {
        let t = &side.tracks[0];
        assert_eq!(t.stopped, Some(RepetitionStop::Decided));
        assert_eq!((t.blocks(), t.cases[0].1.len()), (10, 100));
        // Each repetition knows its block: ten of each.
        let blocks: Vec<Option<usize>> = t.cases[0].1.iter().map(|r| r.block).collect();
        assert_eq!(blocks[..10], [Some(0); 10]);
        assert_eq!(blocks[90..], [Some(9); 10]);
    }
    // A then B in the first block, B then A in the second (a program stays up across B B).
    let log = log.borrow();
    assert_eq!(
        (&log[9][..], &log[10][..]),
        ("A syscall/getppid", "B syscall/getppid")
    );
    assert_eq!(
        (&log[29][..], &log[30][..]),
        ("B syscall/getppid", "A syscall/getppid")
    );
}

/// A condition that logs each call, and names the wrapper of the launch it enters.
struct Logged<'a> {
    name: &'static str,
    log: &'a RefCell<Vec<String>>,
    /// `held` fails on this side.
    fails_on: Option<usize>,
}

impl Condition for Logged<'_> {
    fn words(&self, side: usize) -> Option<String> {
        Some(format!("{} {side}", self.name))
    }

    fn enter(&mut self, side: usize, launch: &mut Launch) -> Result<(), Stopped> {
        self.log
            .borrow_mut()
            .push(format!("enter {} {side}", self.name));
        launch.wrapper.push(self.name.to_string());
        Ok(())
    }

    fn held(&mut self, side: usize) -> Result<(), Stopped> {
        self.log
            .borrow_mut()
            .push(format!("held {} {side}", self.name));
        match self.fails_on {
            Some(s) if s == side => {
                Err(crate::processes::during::DuringFailed("gone".into()).into())
            }
            _ => Ok(()),
        }
    }

    fn finish(&mut self) -> Result<(), Stopped> {
        self.log.borrow_mut().push(format!("finish {}", self.name));
        Err(crate::processes::during::DuringFailed(self.name.into()).into())
    }
}

/// A repeater that logs the launch it is given.
struct LaunchLog<'a>(&'a RefCell<Vec<String>>);

impl Repeater for LaunchLog<'_> {
    fn repeat(&self, b: &Benchmark, launch: &Launch) -> Result<Vec<CaseResult>, Stopped> {
        self.0.borrow_mut().push(format!(
            "repeat {} under {}",
            b.id,
            launch.wrapper.join(" ")
        ));
        Ok(vec![])
    }
}

#[test]
fn a_side_enters_its_conditions_in_order_then_repeats_then_asks_each_whether_it_held() {
    let log = RefCell::new(vec![]);
    let repeater = LaunchLog(&log);
    let mut conditions: Vec<Box<dyn Condition + '_>> = vec![
        Box::new(Logged {
            name: "w",
            log: &log,
            fails_on: None,
        }),
        Box::new(Logged {
            name: "s",
            log: &log,
            fails_on: Some(1),
        }),
    ];
    assert_eq!(
        crate::processes::conditions::side_words(&conditions, 1).as_deref(),
        Some("w 1 + s 1")
    );
    let mut sides = Conditioned {
        repeater: &repeater,
        count: 2,
        conditions: &mut conditions,
    };
    let b = crate::bench::find("syscall/getppid").unwrap();
    let opts = plan(&["syscall/getppid"], None).opts;
    sides.repeat(0, b, &opts).unwrap();
    assert_eq!(
        *log.borrow(),
        [
            "enter w 0",
            "enter s 0",
            "repeat syscall/getppid under w s",
            "held w 0",
            "held s 0"
        ]
    );
    // A condition that did not hold ends the measurement with its reason.
    log.borrow_mut().clear();
    let e = sides.repeat(1, b, &opts).unwrap_err();
    assert!(matches!(e, Stopped::DuringFailed(_)), "{e:?}");
    // Finishing finishes every condition, also after the first fails, and says the first.
    log.borrow_mut().clear();
    let e = sides.finish().unwrap_err();
    assert_eq!(e.to_string(), "w");
    assert_eq!(*log.borrow(), ["finish w", "finish s"]);
}
