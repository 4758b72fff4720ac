//! The rounds of a measurement: each round one repetition (a fresh worker) of every benchmark
//! still sampling, the sides alternating, in blocks where switching sides starts and stops a
//! program; and the stop rule asked after each round or block (`judge`, `decided`).

use super::sides::Sides;
use super::{MeasuredSide, Plan, Track, rep_options, sampling_ns};
use crate::analysis::RepRun;
use crate::base::model::RepetitionStop;
use crate::base::stop::Stop;
use crate::bench::runner::WorkerOptions;
use crate::processes::conditions::Stopped;

/// How long a block of one side's rounds lasts, at least, where switching sides starts and
/// stops a program (`--during`). Each block is one pair of the comparison
/// (`compare::rounds::paired_blocks`), and a block's B over A spread 1.2-1.9% on spawn/fork
/// whether blocks lasted 1, 2 or 5 s (the level a block catches, not its length), so shorter
/// blocks decide sooner: over 2.6 min of spawn/fork, CIs of ±1.0-2.5% from 16 blocks of 5 s,
/// ±0.7-0.9% from 40 of 2 s. Shorter still, starting and readying the program (a second or more, once
/// every two blocks of B) would be most of the time (docs/design-notes.md, "ab's blocks are
/// its pairs").
pub const BLOCK_S: f64 = 2.0;
/// Blocks for prices (`predict --during`). An addition of 100-150 ns read off a benchmark of
/// 0.5-1.6 us needs its base steady to 1-2% between the sides, and the host drifts by that
/// much between blocks seconds apart: with 5 s blocks (two a side) fs/getdents64-few's price
/// ran from +94 to +233 ns over seven runs of `find`'s prediction, with 1.5 s blocks (two
/// rounds of its 15 benchmarks, six blocks a side) from +139 to +147 over three
/// (docs/design-notes.md, "Prices in short blocks").
pub const PRICE_BLOCK_S: f64 = 1.5;
/// The most rounds one block holds.
pub const BLOCK_MAX_ROUNDS: usize = 64;

/// Rounds in one block of `active` benchmarks: enough for `plan.block_s` of repetitions (each
/// counted with ~20 ms of worker start-up).
pub(super) fn rounds_per_block(plan: &Plan, active: usize) -> usize {
    let round_s = active.max(1) as f64 * (plan.reps.rep_ns as f64 / 1e9 + 0.02);
    ((plan.block_s / round_s).ceil() as usize).clamp(1, BLOCK_MAX_ROUNDS)
}

/// The order the sides measure in round (or block) `k`: A B in even ones, B A in odd ones, so
/// that a drift within a round, or whatever the first of a pair does to the second (a warm
/// cache, a cold CPU), falls on both sides alike.
fn side_order(k: usize, sides: usize) -> Vec<usize> {
    if k.is_multiple_of(2) {
        (0..sides).collect()
    } else {
        (0..sides).rev().collect()
    }
}

/// The pause between two rounds where the plan spreads them apart (`watch`: a slow moment of
/// the host then falls on one round, not all), ended early by a stop.
fn wait_round_gap(plan: &Plan, stop: &Stop) -> Result<(), Stopped> {
    let until = std::time::Instant::now() + plan.round_gap;
    while std::time::Instant::now() < until {
        stop.check()?;
        std::thread::sleep(
            std::time::Duration::from_millis(20)
                .min(until.saturating_duration_since(std::time::Instant::now())),
        );
    }
    Ok(())
}

/// Run round after round: each round one repetition (a fresh worker) of every benchmark still
/// sampling, side by side for `ab` (A then B for each benchmark). A benchmark stops once every
/// case's CI is within the precision (after the minimum repetitions), or at its maximum.
/// Where switching sides is dear (`Sides::blocks`: a program runs during a side), rounds come
/// in blocks: each side measures all of a block's rounds before the other does, the order of
/// the sides alternating from block to block (A B, B A, A B...: a program stays up across the
/// B B of two blocks), each repetition is marked with its block, and the stop rule is asked at
/// the end of a block, its looks counting blocks, which are its pairs (`decided`).
/// `each` holds what every repetition shares (the plan, the worker options, the start the
/// repetitions are timed from, and whether the stop rule judges the host's slow moments).
pub(super) fn run_rounds(
    each: &RoundsSetup<'_>,
    measuring: &mut dyn Sides,
    sides: &mut [MeasuredSide],
    stop: &Stop,
) -> Result<Vec<Vec<String>>, Stopped> {
    let plan = each.plan;
    let mut order = Vec::new();
    let total = plan.reps.max.max(plan.reps.undecided_max);
    let blocks = measuring.blocks();
    let (mut k, mut block) = (0, 0);
    while k < total {
        if k > 0 {
            wait_round_gap(plan, stop)?;
        }
        let active: Vec<usize> = (0..plan.benchmarks.len())
            .filter(|&i| sides.iter().any(|s| s.tracks[i].stopped.is_none()))
            .collect();
        if active.is_empty() {
            break;
        }
        let m = if blocks {
            rounds_per_block(plan, active.len()).min(total - k)
        } else {
            1
        };
        let first_last = side_order(block, sides.len());
        let at = blocks.then_some(block);
        let mut one = |sides: &mut [MeasuredSide], si: usize, i: usize, round: usize| {
            each.repeat(measuring, &mut sides[si], si, i, round, at)
        };
        if blocks {
            for &si in &first_last {
                for round in k..k + m {
                    for &i in &active {
                        one(sides, si, i, round)?;
                    }
                }
            }
            let ids: Vec<String> = active
                .iter()
                .map(|&i| plan.benchmarks[i].id.to_string())
                .collect();
            order.extend(std::iter::repeat_n(ids, m));
            // Two sides are judged from their second block on: A B B A at the least, so that
            // a drift over the blocks falls on both alike, and A is seen before and after B.
            if block > 0 || sides.len() == 1 || k + m >= total {
                for &i in &active {
                    judge(each, sides, i, k, k + m);
                }
            }
        } else {
            let mut round = Vec::new();
            for &i in &active {
                for &si in &first_last {
                    one(sides, si, i, k)?;
                }
                round.push(plan.benchmarks[i].id.to_string());
                judge(each, sides, i, k, k + 1);
            }
            order.push(round);
        }
        k += m;
        block += 1;
    }
    Ok(order)
}

/// What every repetition of a measurement's rounds shares: the plan, the session's worker
/// options, the run's start (repetitions are timed from it), the progress bar, and whether
/// the stop rule judges the repetitions the results will be of once the host's slow ones are
/// set aside (`scheduler::judges_host`).
pub(super) struct RoundsSetup<'a> {
    pub(super) plan: &'a Plan,
    pub(super) opts: &'a WorkerOptions,
    pub(super) started: std::time::Instant,
    pub(super) bar: &'a indicatif::ProgressBar,
    pub(super) judge_host: bool,
}

impl RoundsSetup<'_> {
    /// One repetition (a fresh worker) of benchmark `i` on side `si` in round `round`, added to
    /// the side's track with its start, its worker's start-up and its block (`block`, where the
    /// sides alternate in blocks).
    fn repeat(
        &self,
        measuring: &mut dyn Sides,
        side: &mut MeasuredSide,
        si: usize,
        i: usize,
        round: usize,
        block: Option<usize>,
    ) -> Result<(), Stopped> {
        let opts = rep_options(self.opts, self.plan, round);
        let b = side.tracks[i].bench;
        self.bar
            .set_message(format!("{} (repetition {})", b.id, round + 1));
        let t0 = self.started.elapsed();
        let cases = measuring.repeat(si, b, &opts)?;
        let wall = self.started.elapsed().saturating_sub(t0);
        let startup_ms = (wall.as_nanos() as f64 - sampling_ns(&cases) as f64).max(0.0) / 1e6;
        for case in cases {
            side.tracks[i].add(RepRun {
                case,
                started_ms: t0.as_secs_f64() * 1e3,
                startup_ms,
                block,
            });
        }
        self.bar.inc(1);
        Ok(())
    }
}

/// After `done` repetitions of benchmark `i` on every side (`since` of them at the last time
/// it was asked): stop it when it may. A sequential look is taken if one fell in between.
fn judge(each: &RoundsSetup<'_>, sides: &mut [MeasuredSide], i: usize, since: usize, done: usize) {
    let reps = &each.plan.reps;
    let stop = if sides.iter().all(|s| s.tracks[i].nothing_to_repeat()) {
        Some(RepetitionStop::NotMeasured)
    } else if done < reps.min {
        None
    } else if reps.fixed_total.is_some() {
        Some(RepetitionStop::Fixed)
    } else if let (Some(band), [a, b]) = (reps.decide, &*sides) {
        let mut last = done >= reps.max;
        // Measured in blocks, the blocks are the pairs judged, and so what the looks count
        // (`judge` is asked once a block), up to the schedule's calibrated end.
        let (since, done) = match a.tracks[i].blocks() {
            0 => (since, done),
            n => {
                last |= n >= crate::base::stats::sequential::MAX_ROUNDS;
                (n - 1, n)
            }
        };
        if !(since + 1..=done).any(|d| crate::base::stats::sequential::is_look(d, last)) {
            None
        } else if decided(&a.tracks[i], &b.tracks[i], band) {
            Some(RepetitionStop::Decided)
        } else if last {
            Some(RepetitionStop::Budget)
        } else {
            None
        }
    } else if sides.iter().all(|s| {
        let host = each.judge_host.then(|| super::host_of(&s.tracks)).flatten();
        s.tracks[i].precise_enough(reps.precision, host.as_ref())
    }) {
        Some(RepetitionStop::Precision)
    } else if done >= reps.max
        && done < reps.undecided_max
        && sides.iter().any(|s| s.tracks[i].outliers_undecided())
    {
        None
    } else if done >= reps.max {
        Some(RepetitionStop::Budget)
    } else {
        None
    };
    if let Some(why) = stop {
        for s in sides.iter_mut() {
            s.tracks[i].stopped = Some(why);
        }
    }
}

/// Whether every case both sides measured has decided (`compare::rounds::paired`: called, or no
/// change inside the band). A case one side could not measure decides nothing and holds
/// nothing back.
/// Measured in blocks, the blocks are the pairs (`compare::rounds::paired_blocks`).
fn decided(a: &Track, b: &Track, band: f64) -> bool {
    use crate::analysis::compare::rounds::{Decision, in_blocks, paired, paired_blocks};
    a.block_medians()
        .iter()
        .zip(b.block_medians())
        .all(|(ma, mb)| {
            if ma.is_empty() || mb.is_empty() {
                return true;
            }
            let judged = match (in_blocks(ma), in_blocks(&mb)) {
                (Some(ba), Some(bb)) => paired_blocks(&ba, &bb, band),
                _ => {
                    let n = ma.len().min(mb.len());
                    let m =
                        |v: &[(Option<usize>, f64)]| v[..n].iter().map(|x| x.1).collect::<Vec<_>>();
                    paired(&m(ma), &m(&mb), band)
                }
            };
            judged.is_some_and(|p| p.rounds.decision != Decision::Undecided)
        })
}
