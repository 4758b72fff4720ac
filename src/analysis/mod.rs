//! Analysis: turns what a worker measured (`CaseResult`: raw samples and the evidence around
//! them) into the result model's `BenchResult`: order statistics and outliers, the noise
//! assessment (other CPUs' load, steal, preemption), notes a reader must see (a median at or
//! below the baseline), and quantities derived across a benchmark's cases (the per-switch cost
//! of a ping-pong, fork's slope over resident memory). It runs in the coordinator, so a worker
//! only measures and sends; it does no I/O and is tested on synthetic data.

use serde_json::json;

use crate::base::model::{
    BenchResult, Disturbance, DisturbanceCause, Note, NoteKind, Status, family_of,
};
use crate::base::stats;
use crate::bench::entry::Cases;
use crate::bench::runner::CaseResult;
use crate::measuring::case::BenchError;
use crate::measuring::noise::{CpuSnapshot, CpuTimes};

pub mod changes;
pub mod compare;
pub mod confinement;
pub mod contention;
pub mod departures;
pub mod explain;
pub mod facts;
pub mod hooks;
pub mod host_quiet;
mod machine_speed;
pub mod matrix;
pub mod predict;
pub mod profile;
mod repetitions;
pub mod run_to_run;
pub mod scaling;
pub mod select;
pub mod witness;

pub use departures::{
    Departures, FamilyLevels, LoneDepartures, SharedMove, departures, noted_alone,
    shared_departures, widening_by,
};
pub use machine_speed::{
    MIN_POINTS as SPEED_MIN_POINTS, levels_in_time, machine_speed_note, smoothed,
};
pub use repetitions::{
    FINAL_JUDGING, Judging, RepRun, halfwidth, join_windows, merge_repetitions, repetition_ci,
};

/// Thresholds above which a benchmark is called disturbed.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// Another allowed CPU busier than this, percent, disturbs.
    pub other_busy_pct: f64,
    /// Time stolen by the hypervisor above this, percent, disturbs.
    pub steal_pct: f64,
    /// A share of preempted samples above this disturbs.
    pub preempted_share: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            // An idle vCPU shows a few percent from the coordinator and interrupts; a competing
            // task shows tens.
            other_busy_pct: 20.0,
            steal_pct: 5.0,
            preempted_share: 0.05,
        }
    }
}

/// Where a case ran, for judging what other load meant to it.
#[derive(Debug, Clone, Copy)]
pub struct Cpus<'a> {
    /// The CPUs it ran on.
    pub used: &'a [usize],
    /// The allowed CPUs it did not use.
    pub other: &'a [usize],
    /// Those of `other` that are SMT siblings of a used CPU (the same core).
    pub siblings: &'a [usize],
}

/// Judge one case from evidence. Load on a sibling hardware thread of the measuring core is a
/// disturbance (it takes the core's execution units); load on a separate core is only named in
/// the returned notes: on a machine whose CPUs are separate cores it moved getpid by 0%.
pub fn assess(
    before: &CpuSnapshot,
    after: &CpuSnapshot,
    cpus: Cpus,
    preempted_samples: usize,
    samples: usize,
    th: Thresholds,
) -> (Disturbance, Vec<Note>) {
    let (used, other) = (cpus.used, cpus.other);
    let delta = |cpus: &[usize]| -> Option<CpuTimes> {
        let mut d = CpuTimes::default();
        let mut any = false;
        for &c in cpus {
            if let (Some(Some(a)), Some(Some(b))) = (before.get(c), after.get(c)) {
                d.busy += b.busy.saturating_sub(a.busy);
                d.idle += b.idle.saturating_sub(a.idle);
                d.steal += b.steal.saturating_sub(a.steal);
                any = true;
            }
        }
        any.then_some(d)
    };
    let pct = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            100.0 * part as f64 / whole as f64
        }
    };
    let steal_pct = delta(used).map_or(0.0, |d| pct(d.steal, d.total()));
    let other_cpu_busy_pct = if other.is_empty() {
        None
    } else {
        delta(other).map(|d| pct(d.busy + d.steal, d.total()))
    };
    let mut d = Disturbance {
        preempted_samples,
        steal_pct,
        other_cpu_busy_pct,
        ..Disturbance::default()
    };
    let mut notes = Vec::new();
    let sibling_busy = delta(cpus.siblings).map(|d| pct(d.busy + d.steal, d.total()));
    if let Some(b) = sibling_busy
        && b > th.other_busy_pct
    {
        d.add(
            DisturbanceCause::SiblingBusy,
            format!(
                "other CPU busy {b:.0}% (an SMT sibling: it shares the core, expect a slowdown)"
            ),
        );
    } else if let Some(b) = other_cpu_busy_pct
        && b > th.other_busy_pct
    {
        notes.push(Note::new(
            NoteKind::OtherCpuBusy { busy_pct: b },
            format!(
                "other CPU busy {b:.0}% while this ran (a separate core: a disturbance only if the numbers moved)"
            ),
        ));
    }
    if steal_pct > th.steal_pct {
        d.add(
            DisturbanceCause::Steal,
            format!("steal {steal_pct:.0}% (the hypervisor took the CPU)"),
        );
    }
    if samples > 0 && preempted_samples as f64 / samples as f64 > th.preempted_share {
        d.add(
            DisturbanceCause::Preempted,
            format!("{preempted_samples} of {samples} samples preempted"),
        );
    }
    (d, notes)
}

fn status_of(e: BenchError) -> Status {
    match e {
        BenchError::Skipped(reason) => Status::Skipped { reason },
        BenchError::Failed(reason) => Status::Failed { reason },
    }
}

/// The noise assessment of one case: preemptions count unless the operation hands the CPU
/// over; other CPUs' load counts as a flag only on SMT siblings of the CPUs it ran on.
fn judge_noise(
    raw: &CaseResult,
    allowed: &[usize],
    preempted: usize,
    samples: usize,
) -> (Disturbance, Vec<Note>) {
    let other: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !raw.used_cpus.contains(c))
        .collect();
    let siblings: Vec<usize> = raw
        .smt_siblings
        .iter()
        .copied()
        .filter(|c| other.contains(c))
        .collect();
    let cpus = Cpus {
        used: &raw.used_cpus,
        other: &other,
        siblings: &siblings,
    };
    let preempted = if raw.preemption_expected {
        0
    } else {
        preempted
    };
    let th = Thresholds::default();
    let (mut d, notes) = assess(
        &raw.cpu_before,
        &raw.cpu_after,
        cpus,
        preempted,
        samples,
        th,
    );
    if let Some(w) = &raw.cpu_wait {
        if let Some(c) = w.cpu_share.filter(|c| c.wall_ns > 0) {
            d.cpu_foreign_pct = Some(100.0 * c.foreign_ns() as f64 / c.wall_ns as f64);
        }
        let own_wait = (!raw.preemption_expected)
            .then(|| {
                d.cpu_wait_pct = Some(100.0 * w.share());
                cpu_wait_flag(w)
            })
            .flatten();
        // The thread's own wait says it where it is the one kept waiting; where it slept while
        // its children or peers waited (fork, exec, a ping-pong on one CPU), the CPU's account
        // does.
        let said = own_wait
            .map(|f| (DisturbanceCause::CpuWait, f))
            .or_else(|| foreign_share_flag(w).map(|f| (DisturbanceCause::ForeignShare, f)));
        if let Some((cause, flag)) = said {
            d.add(cause, flag);
        }
    }
    if let Some(t) = &raw.throttle
        && t.throttled_ns > 0
    {
        let ms = t.throttled_ns as f64 / 1e6;
        d.throttled_ms = Some(ms);
        d.add(
            DisturbanceCause::Throttled,
            format!(
                "its cgroup's CPU quota stopped the worker for {ms:.1} ms in {} of {} periods \
                 (cpu.stat)",
                t.throttled, t.periods
            ),
        );
    }
    (d, notes)
}

/// What a run says at its top about what confined its workers (nothing for an unconfined run
/// or one made before confinement was recorded).
pub fn confinement_notes(run: &crate::base::model::Run) -> Vec<String> {
    run.env
        .confinement
        .as_ref()
        .map(confinement::said)
        .unwrap_or_default()
}

/// A wait share above which a result is flagged as sharing its CPU. A task spinning on the CPU
/// makes it ~50%; with none, a whole `--quick` suite on a 2-vCPU VM waited at most 8% (a
/// kernel writeback worker, 20 ms passes), most results under 3%.
pub const CPU_WAIT_SHARE: f64 = 0.10;

/// ...and the least waiting, summed over a result's repetitions, that is flagged: one short
/// blip (a writeback worker for a millisecond) in a pass of a few milliseconds is a large
/// share and no contention; a task sharing the CPU makes tens of milliseconds.
pub const CPU_WAIT_MIN_NS: u64 = 5_000_000;

/// The flag of a measuring thread that waited for its own CPU: the median of short batches
/// barely moves when another task shares the CPU, but every operation's throughput halves,
/// so it is said, with what was runnable there.
pub fn cpu_wait_flag(w: &crate::bench::runner::CpuWait) -> Option<String> {
    let share = w.share();
    if share <= CPU_WAIT_SHARE || w.wait_ns < CPU_WAIT_MIN_NS {
        return None;
    }
    let beside = if w.beside.is_empty() {
        String::new()
    } else {
        format!("; runnable there: {}", w.beside.join(", "))
    };
    Some(format!(
        "waited {:.0}% of its time for its CPU (another task shared it{beside})",
        share * 100.0
    ))
}

/// A share of the measuring CPU taken by other programs above which a result is flagged. With
/// none, a `--quick` default suite here (2026-11-25) left at most 6.7% (spawn/: the kernel's
/// own work after an exit, RCU and kworkers, runs there and is nobody's process time); a
/// task spinning 60% of every 10 ms on the CPU took 43% of it.
pub const CPU_FOREIGN_SHARE: f64 = 0.15;

/// The flag of a measuring CPU that other programs took more than `CPU_FOREIGN_SHARE` of (and
/// at least `CPU_WAIT_MIN_NS`) while a result was measured, from the CPU's own account
/// (`noise::CpuShare`: not idle and not the worker's process tree), with who ran there.
pub fn foreign_share_flag(w: &crate::bench::runner::CpuWait) -> Option<String> {
    let c = w.cpu_share?;
    let foreign = c.foreign_ns();
    if c.wall_ns == 0 || foreign < CPU_WAIT_MIN_NS {
        return None;
    }
    let share = foreign as f64 / c.wall_ns as f64;
    if share <= CPU_FOREIGN_SHARE {
        return None;
    }
    let beside = if w.beside.is_empty() {
        String::new()
    } else {
        format!("; running there: {}", w.beside.join(", "))
    };
    Some(format!(
        "other programs ran {:.0}% of the time on its CPU while it measured (the CPU's idle \
         time and the worker's own processes' CPU time leave that; its children and peers \
         waited for it{beside})",
        share * 100.0
    ))
}

/// Hold the result's events against its definition (its catalogue entry's `events`): the check is
/// recorded in `events.check`, and a departure is also a note with the counts. Events that
/// could not be counted are not checked.
pub fn check_definition(r: &mut BenchResult) {
    let Some(ev) = r.events.as_mut() else { return };
    let mut expected = Vec::new();
    let mut missed = Vec::new();
    for (event, x) in crate::bench::expected_events(&r.id) {
        let Some(&v) = ev.per_op.get(event) else {
            continue;
        };
        expected.push(x.describe(event));
        if !x.holds(v) {
            missed.push(format!("{} expected, {v:.2} counted", x.describe(event)));
        }
    }
    if expected.is_empty() {
        ev.check = None;
        return;
    }
    ev.check = Some(crate::base::model::DefinitionCheck {
        expected: expected.join("; "),
        met: missed.is_empty(),
    });
    if !missed.is_empty() {
        r.notes.push(Note::new(
            NoteKind::DefinitionNotMet,
            format!(
                "{}{}",
                crate::base::model::note::DEFINITION_NOTE,
                missed.join("; ")
            ),
        ));
    }
}

/// Statistics, outliers, disturbance and notes for one measured case.
pub fn analyze(mut raw: CaseResult, allowed: &[usize]) -> BenchResult {
    let m = match (raw.error.take(), raw.measurement.take()) {
        (Some(e), _) => return not_measured(raw.id, raw.definition, raw.params, status_of(e)),
        (None, None) => {
            let why = Status::Failed {
                reason: "the worker sent a case without samples".into(),
            };
            return not_measured(raw.id, raw.definition, raw.params, why);
        }
        (None, Some(m)) => m,
    };
    // Picoseconds are below any clock's resolution; rounding keeps result files small.
    let samples: Vec<f64> = m
        .samples_ns
        .iter()
        .map(|x| (x * 1000.0).round() / 1000.0)
        .collect();
    let st = stats::summarize(&samples);
    let (disturbed, load_notes) = judge_noise(&raw, allowed, m.preempted.len(), samples.len());
    // The benchmark's own notes are words only; the analysis's have kinds.
    let mut notes: Vec<Note> = raw.notes.into_iter().map(Note::remark).collect();
    notes.extend(load_notes);
    if let Some(s) = &st
        && s.median <= 0.0
    {
        notes.push(Note::new(NoteKind::AtOrBelowBaseline, format!(
            "median {:.3} ns is at or below the baseline ({:.3} ns/iteration): the operation costs less than the loop's own jitter",
            s.median, m.baseline_ns
        )));
    }
    let mut r = BenchResult {
        family: family_of(&raw.id).to_string(),
        id: raw.id,
        params: raw.params,
        unit: "ns".into(),
        definition: raw.definition,
        placement: raw.placement,
        batch: m.batch,
        baseline_ns: m.baseline_ns,
        outliers: stats::tukey_outliers(&samples),
        samples_ns: samples,
        preempted: m.preempted,
        stats: st,
        disturbed,
        notes,
        status: Status::Ok,
        repetitions: vec![],
        uncertainty: None,
        events: raw.events,
        // Set where the repetitions are merged, which knows each one's median.
        profile: None,
    };
    check_definition(&mut r);
    r
}

fn not_measured(
    id: String,
    definition: String,
    params: std::collections::BTreeMap<String, serde_json::Value>,
    status: Status,
) -> BenchResult {
    let mut r = BenchResult::not_measured(&id, &definition, status);
    r.params = params;
    r
}

/// Quantities a benchmark's cases give together: the per-switch cost of each ping-pong (half a
/// round trip), and for the fork-size curve the least-squares slope over resident memory
/// (on the last point, with a sentence).
pub fn derive(cases: &Cases, results: &mut [BenchResult]) {
    match cases {
        Cases::Placements => {
            for r in results.iter_mut() {
                if let Some(s) = &r.stats {
                    let per_switch = s.median / 2.0;
                    r.params
                        .insert("per_switch_median_ns".into(), json!(per_switch));
                }
            }
        }
        Cases::ForkSizes => fork_slope(results),
        Cases::Copies => scaling::derive(results),
        _ => {}
    }
}

fn fork_slope(results: &mut [BenchResult]) {
    let points: Vec<(f64, f64)> = results
        .iter()
        .filter_map(|r| Some((r.params.get("rss_mib")?.as_f64()?, r.stats.as_ref()?.median)))
        .collect();
    if let (Some(s), Some(last)) = (stats::slope(&points), results.last_mut()) {
        last.params.insert("slope_ns_per_mib".into(), json!(s));
        last.notes.push(Note::new(NoteKind::Slope, format!(
            "fork cost grows {:.2} us per MiB of resident memory ({:.1} ms per GiB; least squares over {} sizes)",
            s / 1e3,
            s * 1024.0 / 1e6,
            points.len()
        )));
    }
}

#[cfg(test)]
mod tests;
