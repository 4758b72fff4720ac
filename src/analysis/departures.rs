//! Departing repetitions across a run: a repetition whose median sat apart from its result's
//! others is marked (`Repetition::departs_pct`, by `repetitions`); here a run's marks are
//! sorted into moments of the machine (several results' repetitions moving together, the same
//! way, within `TOGETHER_MS`), families at two levels, and each result's own lone departures,
//! with what those did to its CI. The table says each kind once (`report::table::SaidOnce`).

use super::repetitions::{FINAL_JUDGING, halfwidth, repetition_ci, repetition_medians, two_levels};
use crate::base::model::{BenchResult, Note, Run};
use crate::base::stats;

/// Results of one family that ran at two levels each, whole repetitions at one or the other:
/// on this kind of host every null system call does (getpid, getsid, close-badfd each at one
/// level or another ~8% apart, per process), which is one fact about the machine and its
/// process layout, said once, not a note per result.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyLevels {
    /// The family (`syscall`).
    pub family: String,
    /// Its results with two levels (indices in the run).
    pub results: Vec<usize>,
    /// The levels' ratios (higher over lower), smallest and largest.
    pub ratio: [f64; 2],
}

/// The families in which at least `TOGETHER_RESULTS` results ran at two levels (a
/// `NoteKind::TwoLevels` note), leaving out the results in `explained`.
fn family_levels(run: &Run, explained: &[usize]) -> Vec<FamilyLevels> {
    let mut out: Vec<FamilyLevels> = Vec::new();
    for (i, r) in run.results.iter().enumerate() {
        if explained.contains(&i) || !r.notes.iter().any(Note::is_two_levels) {
            continue;
        }
        let Some(t) = two_levels(&repetition_medians(r)) else {
            continue;
        };
        let ratio = t.ratio();
        match out.iter_mut().find(|f| f.family == r.family) {
            Some(f) => {
                f.results.push(i);
                f.ratio = [f.ratio[0].min(ratio), f.ratio[1].max(ratio)];
            }
            None => out.push(FamilyLevels {
                family: r.family.clone(),
                results: vec![i],
                ratio: [ratio, ratio],
            }),
        }
    }
    out.retain(|f| f.results.len() >= TOGETHER_RESULTS);
    out
}

/// The ratio of the higher level to the lower of a result whose whole repetitions sat at one
/// of two levels (its `NoteKind::TwoLevels` note's), from its repetitions' medians; `None`
/// where they do not.
pub fn levels_ratio(r: &BenchResult) -> Option<f64> {
    two_levels(&repetition_medians(r)).map(|t| t.ratio())
}

/// Departures of different results that start within this many ms of each other, the same
/// way, are one moment of the machine's: its slow or fast phases last 50-500 ms here.
const TOGETHER_MS: f64 = 300.0;

/// A moment is the machine's when at least this many results departed in it together.
const TOGETHER_RESULTS: usize = 3;

/// One moment when repetitions of several results departed together, the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedMove {
    /// When it began, ms since the run started.
    pub at_ms: f64,
    /// The departures' range, percent.
    pub pct: [f64; 2],
    /// The results it touched.
    pub results: usize,
}

/// The moments the machine moved many results' repetitions together, and the results whose
/// every departure falls in one of them (their own notes need not say it again).
pub fn shared_departures(run: &Run) -> (Vec<SharedMove>, Vec<usize>) {
    let d = departures(run);
    (d.moves, d.explained)
}

/// One departing repetition of a run.
#[derive(Debug, Clone, Copy)]
struct Departure {
    /// When it started, ms into the run.
    at_ms: f64,
    /// How far its median sat from its result's others, percent.
    pct: f64,
    /// Its result (index in the run).
    result: usize,
    /// Its index among that result's repetitions.
    rep: usize,
}

impl Departure {
    /// Whether `other`, of another result, moved the same way within `TOGETHER_MS` of it.
    fn near(&self, other: &Departure) -> bool {
        (other.at_ms - self.at_ms).abs() <= TOGETHER_MS && other.pct.signum() == self.pct.signum()
    }
}

/// A run's departing repetitions sorted into the machine's moments and each result's own.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Departures {
    /// The moments the machine moved several results' repetitions together.
    pub moves: Vec<SharedMove>,
    /// The results whose every departure falls in one of `moves`.
    pub explained: Vec<usize>,
    /// Each other result with departures, its repetitions that departed alone (at a moment no
    /// two other results did), and whether they matter enough to be noted with the result.
    pub lone: Vec<LoneDepartures>,
    /// Families whose results (other than `explained`) ran at two levels together.
    pub family_levels: Vec<FamilyLevels>,
}

/// A result's repetitions that departed alone, and what they did to its CI.
#[derive(Debug, Clone, PartialEq)]
pub struct LoneDepartures {
    /// The result (its index in the run).
    pub result: usize,
    /// Its repetitions that departed alone.
    pub reps: Vec<usize>,
    /// The CI's half-width with them and without them, percent (`widening_by`).
    pub halfwidth_pct: Option<[f64; 2]>,
    /// They are the reason its CI is wide: said with the result (`noted_alone`), where the
    /// others are said once for the run.
    pub noted: bool,
}

/// A lone departure is said with its result when it widened the CI past this many times the
/// precision asked for...
const NOTED_PAST_TARGET: f64 = 3.0;
/// ...and to at least this many times what the other repetitions give alone. On a default
/// suite here (2026-11-25) 25 results had lone departures: 5 met both (close-badfd +24% took
/// its CI from 0.2% to 7.1%, sem-thread@same +39% from 1.1% to 11.5%), and the other 20 left
/// their CI within 3x the target or barely wider than the others' (gettid +3.2%: 2.6% to 2.8%).
const NOTED_WIDENING: f64 = 2.0;

/// Whether lone departures that leave a result's CI at `halfwidth_pct` (with, without; `None`
/// when the others are too few to tell) are the reason it is wide, for a precision target of
/// `target_pct`.
pub fn noted_alone(halfwidth_pct: Option<[f64; 2]>, target_pct: f64) -> bool {
    match halfwidth_pct {
        Some([with, without]) => {
            with >= NOTED_PAST_TARGET * target_pct && with >= NOTED_WIDENING * without
        }
        None => true,
    }
}

/// Sort a run's departing repetitions into moments of the machine's (`shared_departures`) and
/// departures each result's own.
pub fn departures(run: &Run) -> Departures {
    let all = every_departure(run);
    let flags = shared_flags(&all);
    let moves = moments(&all, &flags);
    let explained: Vec<usize> = (0..run.results.len())
        .filter(|i| {
            let mine: Vec<bool> = all
                .iter()
                .zip(&flags)
                .filter(|(d, _)| d.result == *i)
                .map(|(_, s)| *s)
                .collect();
            !mine.is_empty() && mine.iter().all(|s| *s)
        })
        .collect();
    Departures {
        family_levels: family_levels(run, &explained),
        lone: lone_departures(run, &all, &flags),
        moves,
        explained,
    }
}

/// Every departing repetition of a run, in the order they started.
fn every_departure(run: &Run) -> Vec<Departure> {
    let mut all: Vec<Departure> = run
        .results
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            r.repetitions
                .iter()
                .enumerate()
                .filter_map(move |(k, rep)| {
                    rep.departs_pct.map(|pct| Departure {
                        at_ms: rep.started_ms,
                        pct,
                        result: i,
                        rep: k,
                    })
                })
        })
        .collect();
    all.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    all
}

/// For each departure, whether it belongs to a moment of the machine's: at least
/// `TOGETHER_RESULTS` results departed the same way within `TOGETHER_MS` of it, or of one that
/// did.
fn shared_flags(all: &[Departure]) -> Vec<bool> {
    let shared = |d: &Departure| {
        let mut others: Vec<usize> = all
            .iter()
            .filter(|o| o.result != d.result && d.near(o))
            .map(|o| o.result)
            .collect();
        others.sort_unstable();
        others.dedup();
        others.len() + 1 >= TOGETHER_RESULTS
    };
    let centers: Vec<bool> = all.iter().map(shared).collect();
    // A departure within TOGETHER_MS of one that is shared, the same way, belongs to that
    // moment too (the window of the first of three results may not reach the third).
    all.iter()
        .map(|d| all.iter().zip(&centers).any(|(o, &c)| c && d.near(o)))
        .collect()
}

/// The machine's moments: the shared departures (`flags`) grouped while each follows the last
/// within `TOGETHER_MS`, each with its range and how many results moved.
fn moments(all: &[Departure], flags: &[bool]) -> Vec<SharedMove> {
    let mut moves: Vec<SharedMove> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    // A moment goes on while shared departures follow within TOGETHER_MS of the last one: a
    // slow phase of 500 ms is one moment, not two, the second with a single result.
    let mut last_ms = f64::NEG_INFINITY;
    for (d, _) in all.iter().zip(flags).filter(|(_, s)| **s) {
        let follows = d.at_ms - last_ms <= TOGETHER_MS;
        last_ms = d.at_ms;
        match moves.last_mut() {
            Some(m) if follows => {
                m.pct = [m.pct[0].min(d.pct), m.pct[1].max(d.pct)];
                if let Some(v) = members.last_mut() {
                    v.push(d.result);
                }
            }
            _ => {
                moves.push(SharedMove {
                    at_ms: d.at_ms,
                    pct: [d.pct, d.pct],
                    results: 0,
                });
                members.push(vec![d.result]);
            }
        }
    }
    for (m, mut v) in moves.iter_mut().zip(members) {
        v.sort_unstable();
        v.dedup();
        m.results = v.len();
    }
    moves
}

/// Each result's departures that no moment explains, with what they did to its CI.
fn lone_departures(run: &Run, all: &[Departure], flags: &[bool]) -> Vec<LoneDepartures> {
    let mut alone: Vec<(usize, Vec<usize>)> = Vec::new();
    for (d, _) in all.iter().zip(flags).filter(|(_, s)| !**s) {
        match alone.iter_mut().find(|(i, _)| *i == d.result) {
            Some((_, reps)) => reps.push(d.rep),
            None => alone.push((d.result, vec![d.rep])),
        }
    }
    alone.sort_unstable();
    alone
        .into_iter()
        .map(|(result, mut reps)| {
            reps.sort_unstable();
            let r = &run.results[result];
            let halfwidth_pct = widening_by(r, &reps);
            let target = r.uncertainty.as_ref().map_or(0.0, |u| u.target_pct);
            LoneDepartures {
                noted: noted_alone(halfwidth_pct, target),
                result,
                reps,
                halfwidth_pct,
            }
        })
        .collect()
}

/// A result's CI half-width as it is and as the repetitions other than `left_out` alone give
/// it, percent of the point: how much those repetitions widened it. `None` where the others
/// are too few for an interval.
pub fn widening_by(r: &BenchResult, left_out: &[usize]) -> Option<[f64; 2]> {
    let st = r.stats.as_ref()?;
    let with = 100.0 * halfwidth(Some(st.ci95), st.median);
    let kept: Vec<&[f64]> = r
        .repetitions
        .iter()
        .enumerate()
        .filter(|(k, _)| !left_out.contains(k))
        .filter_map(|(_, rep)| r.samples_ns.get(rep.start..rep.start + rep.samples))
        .collect();
    let point = stats::median(&kept.concat());
    let without = 100.0
        * halfwidth(
            repetition_ci(&kept, r.batch.size, point, FINAL_JUDGING),
            point,
        );
    (with.is_finite() && without.is_finite()).then_some([with, without])
}
