//! Repetitions: one case measured by several fresh workers, merged into one result whose CI
//! comes from the variation between them (a hierarchical bootstrap, see `stats::bootstrap`),
//! with the repetitions whose level departs from the others named.

use super::{CaseResult, analyze};
use crate::base::model::note::{DEPARTURE_NOTE, TWO_LEVELS_NOTE};
use crate::base::model::{BenchResult, Note, NoteKind, Repetition, RepetitionStop, Uncertainty};
use crate::base::stats;
use crate::measuring::noise::{CpuSnapshot, CpuTimes};

/// One repetition of a case as the scheduler saw it: what the worker sent, when it started and
/// how long the worker took before its first sample.
#[derive(Debug, Clone, PartialEq)]
pub struct RepRun {
    /// What the worker sent.
    pub case: CaseResult,
    /// When the repetition started, ms since the run started.
    pub started_ms: f64,
    /// The worker's start-up before its first sample, ms.
    pub startup_ms: f64,
    /// The block of rounds it was measured in, where sides alternate in blocks
    /// (`Repetition::block`).
    pub block: Option<usize>,
}

/// How the scheduler wants a case's repetitions judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judging {
    /// Bootstrap resamples (fewer for the stop rule, more for the final interval).
    pub resamples: usize,
    /// At most this many samples go into the bootstrap (thinned evenly).
    pub max_samples: usize,
}

/// The hierarchical CI of a case's repetitions (`None` with too few), from their samples as
/// measured (baseline subtracted), around `point`.
pub fn repetition_ci(reps: &[&[f64]], batch: u64, point: f64, j: Judging) -> Option<[f64; 2]> {
    let per = (j.max_samples / reps.len().max(1)).max(1);
    let blocked: stats::bootstrap::Repetitions = reps
        .iter()
        .map(|s| stats::bootstrap::blocks(s, batch, per))
        .filter(|b| !b.is_empty())
        .collect();
    stats::bootstrap::hierarchical_median_ci(&blocked, point, j.resamples, 0x0005_c057)
}

/// Relative half-width of a CI around `point` (infinite when there is none).
pub fn halfwidth(ci: Option<[f64; 2]>, point: f64) -> f64 {
    match ci {
        Some([lo, hi]) if point.abs() > 0.0 => (hi - lo) / 2.0 / point.abs(),
        _ => f64::INFINITY,
    }
}

/// Sum of per-repetition /proc/stat deltas, as a snapshot pair (from zero), so the noise
/// assessment covers the repetitions' own time and not the other benchmarks' between them.
fn summed_cpu(reps: &[&CaseResult]) -> (CpuSnapshot, CpuSnapshot) {
    let n = reps.iter().map(|c| c.cpu_after.len()).max().unwrap_or(0);
    let mut after: CpuSnapshot = vec![None; n];
    for c in reps {
        for (i, (a, b)) in c.cpu_before.iter().zip(&c.cpu_after).enumerate() {
            if let (Some(a), Some(b)) = (a, b) {
                let t = after[i].get_or_insert_with(CpuTimes::default);
                t.busy += b.busy.saturating_sub(a.busy);
                t.idle += b.idle.saturating_sub(a.idle);
                t.steal += b.steal.saturating_sub(a.steal);
                t.interrupt += b.interrupt.saturating_sub(a.interrupt);
            }
        }
    }
    (vec![Some(CpuTimes::default()); n], after)
}

/// One case's repetitions as one result: the statistics of all samples (the headline median),
/// the CI from the repetitions (`stats.ci95`; the one-stream interval kept in `uncertainty`),
/// every repetition with its level, and the ones whose level departs from the others named.
pub fn merge_repetitions(
    reps: Vec<RepRun>,
    allowed: &[usize],
    j: Judging,
    target: f64,
    stopped: RepetitionStop,
) -> BenchResult {
    let failed: Vec<&RepRun> = reps
        .iter()
        .filter(|r| r.case.measurement.is_none())
        .collect();
    let ok: Vec<&RepRun> = reps
        .iter()
        .filter(|r| r.case.measurement.is_some())
        .collect();
    if ok.is_empty() {
        let first = reps.into_iter().next().map(|r| r.case);
        return analyze(first.expect("a case has at least one repetition"), allowed);
    }
    let mut notes = Vec::new();
    if let Some(f) = failed.first() {
        let why = f
            .case
            .error
            .as_ref()
            .map_or("no samples".into(), |e| e.to_string());
        notes.push(Note::new(
            NoteKind::FailedRepetitions {
                failed: failed.len(),
                of: reps.len(),
            },
            format!(
                "{} of {} repetitions not measured ({why}); the result is the other {}",
                failed.len(),
                reps.len(),
                ok.len()
            ),
        ));
    }
    let (merged, spans) = concatenate(&ok);
    let mut r = analyze(merged, allowed);
    r.notes.extend(notes);
    r.repetitions = ok
        .iter()
        .zip(&spans)
        .map(|(rep, &(start, len))| Repetition {
            start,
            samples: len,
            median_ns: stats::median(&r.samples_ns[start..start + len]),
            started_ms: rep.started_ms,
            startup_ms: rep.startup_ms,
            // As in the result's disturbance: where the operation itself hands the CPU over
            // (pipe ping-pong on one CPU), an involuntary switch is the operation, not noise.
            preempted: match &rep.case.measurement {
                Some(m) if !rep.case.preemption_expected => m.preempted.len(),
                _ => 0,
            },
            departs_pct: None,
            witness_ns: rep.case.witness_ns,
            exit_witness_ns: rep.case.exit_witness_ns,
            memory_events: rep.case.memory_events.clone(),
            block: rep.block,
        })
        .collect();
    let profiled: Vec<(crate::base::model::Profile, f64)> = ok
        .iter()
        .zip(&r.repetitions)
        .filter_map(|(rep, level)| {
            let window = super::profile::window_ns(level, r.baseline_ns);
            Some((rep.case.profile.clone()?, window))
        })
        .collect();
    r.profile = super::profile::merge(profiled);
    name_departures(&mut r, ok[0].case.preemption_expected);
    if let Some(note) = memory_note(&r) {
        r.notes.push(Note::new(NoteKind::MemoryActivity, note));
    }
    attach_uncertainty(&mut r, &spans, j, target, stopped);
    r
}

/// One benchmark measured in windows apart (`watch`: one repetition a window), as one result
/// whose repetitions are the windows' repetitions: samples, preemptions and repetitions
/// concatenated, the disturbance summed, statistics, departures and the CI worked out as a
/// run's are from its repetitions. `None` when no window measured it.
pub fn join_windows(parts: &[&BenchResult]) -> Option<BenchResult> {
    let measured: Vec<&&BenchResult> = parts
        .iter()
        .filter(|r| r.status == crate::base::model::Status::Ok && !r.samples_ns.is_empty())
        .collect();
    let mut r = (**measured.first()?).clone();
    r.samples_ns.clear();
    r.preempted.clear();
    r.repetitions.clear();
    r.notes.clear();
    r.disturbed.preempted_samples = 0;
    let mut spans = Vec::new();
    for p in &measured {
        let start = r.samples_ns.len();
        r.preempted.extend(p.preempted.iter().map(|i| i + start));
        r.samples_ns.extend_from_slice(&p.samples_ns);
        r.disturbed.preempted_samples += p.disturbed.preempted_samples;
        for f in &p.disturbed.flag {
            if !r.disturbed.flag.contains(f) {
                r.disturbed.flag.push(f.clone());
            }
        }
        for c in &p.disturbed.causes {
            if !r.disturbed.causes.contains(c) {
                r.disturbed.causes.push(*c);
            }
        }
        if p.repetitions.is_empty() {
            spans.push((start, p.samples_ns.len()));
        }
        for rep in &p.repetitions {
            let mut x = rep.clone();
            x.start += start;
            x.departs_pct = None;
            spans.push((x.start, x.samples));
            r.repetitions.push(x);
        }
    }
    r.stats = stats::summarize(&r.samples_ns);
    r.outliers = stats::tukey_outliers(&r.samples_ns);
    name_departures(&mut r, false);
    attach_uncertainty(&mut r, &spans, FINAL_JUDGING, 0.01, RepetitionStop::Windows);
    Some(r)
}

/// What memory activity counted during some repetitions (`measuring::memory`) did to their
/// level: those repetitions' median level against the others', with the counts summed.
/// `None` when no repetition saw any.
pub fn memory_note(r: &BenchResult) -> Option<String> {
    let (busy, quiet): (Vec<&Repetition>, Vec<&Repetition>) = r
        .repetitions
        .iter()
        .partition(|rep| !rep.memory_events.is_empty());
    if busy.is_empty() {
        return None;
    }
    let mut total = std::collections::BTreeMap::new();
    for rep in &busy {
        for (k, v) in &rep.memory_events {
            *total.entry(k.clone()).or_insert(0u64) += v;
        }
    }
    let level = |reps: &[&Repetition]| {
        let m: Vec<f64> = reps.iter().map(|x| x.median_ns).collect();
        stats::median(&m)
    };
    let which: Vec<String> = r
        .repetitions
        .iter()
        .enumerate()
        .filter(|(_, rep)| !rep.memory_events.is_empty())
        .map(|(k, _)| (k + 1).to_string())
        .collect();
    let against = if quiet.is_empty() {
        "every repetition saw it: no quiet repetition to set them against".to_string()
    } else {
        let (b, q) = (level(&busy), level(&quiet));
        format!(
            "their level {} against {} in the other {} (x{:.2})",
            stats::units::format_ns(b),
            stats::units::format_ns(q),
            quiet.len(),
            b / q
        )
    };
    Some(format!(
        "memory activity during repetition{} {} of {} ({}): {against}",
        if busy.len() == 1 { "" } else { "s" },
        which.join(", "),
        r.repetitions.len(),
        crate::measuring::memory::words(&total)
    ))
}

/// All repetitions' samples as one measured case (samples, preemptions and CPU time summed;
/// baseline and measured float parameters as the repetitions' median), and each repetition's
/// (start, length) in it.
fn concatenate(ok: &[&RepRun]) -> (CaseResult, Vec<(usize, usize)>) {
    let cases: Vec<&CaseResult> = ok.iter().map(|r| &r.case).collect();
    let mut merged = cases[0].clone();
    let (before, after) = summed_cpu(&cases);
    merged.cpu_before = before;
    merged.cpu_after = after;
    let m = merged.measurement.as_mut().expect("measured");
    let mut spans = vec![(0, m.samples_ns.len())];
    let mut end_offset = m.ends_ns.last().copied().unwrap_or(0);
    for c in &cases[1..] {
        let o = c.measurement.as_ref().expect("measured");
        let start = m.samples_ns.len();
        spans.push((start, o.samples_ns.len()));
        m.samples_ns.extend(&o.samples_ns);
        m.preempted.extend(o.preempted.iter().map(|i| i + start));
        m.ends_ns.extend(o.ends_ns.iter().map(|e| e + end_offset));
        end_offset += o.ends_ns.last().copied().unwrap_or(0);
    }
    // Each repetition subtracted its own baseline (and the ring its own overhead): what the
    // result reports is their median, not the first repetition's.
    let baselines: Vec<f64> = cases
        .iter()
        .filter_map(|c| c.measurement.as_ref().map(|x| x.baseline_ns))
        .collect();
    m.baseline_ns = stats::median(&baselines);
    let mut by_rep = Vec::new();
    for (key, value) in merged.params.iter_mut() {
        let per_rep: Vec<f64> = cases
            .iter()
            .filter_map(|c| c.params.get(key)?.as_f64())
            .collect();
        if value.is_f64() && per_rep.len() == cases.len() {
            *value = serde_json::json!(stats::median(&per_rep));
            // The few whose spread across repetitions a result states (scale/'s IPIs).
            if super::scaling::PER_REPETITION.contains(&key.as_str()) {
                by_rep.push((format!("{key}_by_rep"), serde_json::json!(per_rep)));
            }
        }
    }
    merged.params.extend(by_rep);
    merged.events = merge_events(&cases);
    merged.cpu_wait = merge_waits(&cases);
    merged.throttle =
        cases
            .iter()
            .filter_map(|c| c.throttle)
            .reduce(|a, b| crate::base::model::Throttle {
                periods: a.periods + b.periods,
                throttled: a.throttled + b.throttled,
                throttled_ns: a.throttled_ns + b.throttled_ns,
            });
    (merged, spans)
}

/// The repetitions' CPU waits summed (each its own timed pass), with every task seen beside.
fn merge_waits(cases: &[&CaseResult]) -> Option<crate::bench::runner::CpuWait> {
    let waits: Vec<&crate::bench::runner::CpuWait> =
        cases.iter().filter_map(|c| c.cpu_wait.as_ref()).collect();
    if waits.is_empty() {
        return None;
    }
    let mut out = crate::bench::runner::CpuWait::default();
    for w in waits {
        out.run_ns += w.run_ns;
        out.wait_ns += w.wait_ns;
        if let Some(c) = w.cpu_share {
            let sum = out.cpu_share.get_or_insert_with(Default::default);
            sum.wall_ns += c.wall_ns;
            sum.idle_ns += c.idle_ns;
            sum.own_ns += c.own_ns;
            sum.host_ns += c.host_ns;
        }
        for b in &w.beside {
            if !out.beside.contains(b) && out.beside.len() < 4 {
                out.beside.push(b.clone());
            }
        }
    }
    Some(out)
}

/// The repetitions' events per operation, averaged (each repetition counted its own window);
/// an event any repetition could not count is listed with its reason.
fn merge_events(cases: &[&CaseResult]) -> Option<crate::base::model::Events> {
    let all: Vec<&crate::base::model::Events> =
        cases.iter().filter_map(|c| c.events.as_ref()).collect();
    let first = all.first()?;
    let mut out = crate::base::model::Events {
        unavailable: all.iter().flat_map(|e| e.unavailable.clone()).collect(),
        ..Default::default()
    };
    for name in first.per_op.keys() {
        let v: Vec<f64> = all
            .iter()
            .filter_map(|e| e.per_op.get(name).copied())
            .filter(|x| x.is_finite())
            .collect();
        if !v.is_empty() && !out.unavailable.contains_key(name) {
            out.per_op
                .insert(name.clone(), v.iter().sum::<f64>() / v.len() as f64);
        }
    }
    Some(out)
}

/// The medians of a result's repetitions, in order.
pub(super) fn repetition_medians(r: &BenchResult) -> Vec<f64> {
    r.repetitions.iter().map(|x| x.median_ns).collect()
}

/// Mark repetitions whose median departs from the others' by more than their spread and its
/// own explain: beyond 3 robust standard deviations of the repetitions' medians, beyond twice
/// its own within-repetition half-width, and by at least 2%.
///
/// When the repetitions sat at two levels instead (`two_levels`), that is said once instead:
/// against a two-level machine every repetition of the smaller group "departs", and a list of
/// them would hide what happened.
fn name_departures(r: &mut BenchResult, preemption_expected: bool) {
    let meds = repetition_medians(r);
    if meds.len() < 3 {
        return;
    }
    if let Some(levels) = two_levels(&meds) {
        let note = levels.describe(&mut r.repetitions, preemption_expected);
        r.notes.push(Note::new(NoteKind::TwoLevels, note));
        return;
    }
    let center = stats::median(&meds);
    let spread = stats::robust_sd(&meds);
    let mut said = Vec::new();
    let mut departed = Vec::new();
    for (k, rep) in r.repetitions.iter_mut().enumerate() {
        let own = stats::summarize(&r.samples_ns[rep.start..rep.start + rep.samples])
            .map_or(0.0, |s| (s.ci95[1] - s.ci95[0]) / 2.0);
        let off = rep.median_ns - center;
        if center.abs() > 0.0
            && off.abs() > 3.0 * spread
            && off.abs() > 2.0 * own
            && (off / center).abs() > 0.02
        {
            let pct = 100.0 * off / center;
            rep.departs_pct = Some(pct);
            departed.push(pct);
            let preempted =
                preempted_words(rep.preempted, rep.samples, "samples", preemption_expected);
            said.push(format!(
                "repetition {} (at {:.0} ms) sat {pct:+.1}% from the others{preempted}",
                k + 1,
                rep.started_ms,
            ));
        }
    }
    if said.len() > MAX_DEPARTURES_NAMED {
        // A long run on a restless machine can have a hundred; the first few say when it
        // began, the count and range say how much, and every one is marked in the result.
        let rest = &departed[MAX_DEPARTURES_NAMED..];
        let (lo, hi) = stats::extent(rest.iter().copied());
        said.truncate(MAX_DEPARTURES_NAMED);
        said.push(format!(
            "and {} more of the {} repetitions, from {lo:+.1}% to {hi:+.1}% (each marked \
             `departs_pct` in the JSON)",
            rest.len(),
            r.repetitions.len(),
        ));
    }
    if !said.is_empty() {
        r.notes.push(Note::new(
            NoteKind::Departure {
                departed: departed.len(),
            },
            format!("{DEPARTURE_NOTE}{}", said.join("; ")),
        ));
    }
}

/// The final interval's bootstrap effort (the scheduler's, and `examples/replay_ci.rs`
/// recomputes with it exactly).
pub const FINAL_JUDGING: Judging = Judging {
    resamples: 1000,
    max_samples: 4000,
};

/// A departure note names at most this many repetitions, then counts the rest.
const MAX_DEPARTURES_NAMED: usize = 5;

/// What the preemption guard saw, as " (3 of 900 samples preempted)". Cited only where it
/// could explain a level: a benchmark whose operation hands the CPU over counts none (see
/// `Repetition::preempted`), so nothing is said there.
fn preempted_words(preempted: usize, samples: usize, what: &str, expected: bool) -> String {
    if expected {
        String::new()
    } else {
        format!(" ({preempted} of {samples} {what} preempted)")
    }
}

/// Repetitions split into two groups by one clear gap in their medians.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TwoLevels {
    /// Indices of the repetitions in the lower group, and its median level.
    low: Vec<usize>,
    low_level: f64,
    high: Vec<usize>,
    high_level: f64,
}

/// The gap between two levels must be at least this (relative to the lower one)...
const LEVEL_GAP: f64 = 0.04;
/// ...and this many times every other gap between neighbouring medians.
const LEVEL_GAP_DOMINANCE: f64 = 3.0;

/// Two levels in the repetitions' medians: sorted, the largest relative gap between neighbours
/// is at least 4% and at least 3x every other gap, with at least two repetitions on each side.
/// A host that moves between two speeds for hundreds of ms at a time (seen here: getpid at 156
/// or 220 ns, fork at 136 or 205 us, for whole repetitions) gives exactly this; a benchmark that
/// is merely noisy spreads its medians without one dominant gap. The floor was 10% until a
/// quieter host (2026-11-24) switched getpid between 137 and 149 ns, 0.3% apart within each
/// group, and the 8.7% split was listed as four "departing" repetitions.
pub(super) fn two_levels(meds: &[f64]) -> Option<TwoLevels> {
    let mut order: Vec<usize> = (0..meds.len()).collect();
    order.sort_by(|&a, &b| meds[a].total_cmp(&meds[b]));
    if meds.len() < 4 || meds[order[0]] <= 0.0 {
        return None;
    }
    let gaps: Vec<f64> = order
        .windows(2)
        .map(|w| meds[w[1]] / meds[w[0]] - 1.0)
        .collect();
    let (cut, &gap) = gaps.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
    let others = gaps
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != cut)
        .map(|(_, &g)| g)
        .fold(0.0, f64::max);
    let (lower, upper) = order.split_at(cut + 1);
    if gap < LEVEL_GAP || gap < LEVEL_GAP_DOMINANCE * others || lower.len() < 2 || upper.len() < 2 {
        return None;
    }
    let level = |idx: &[usize]| stats::median(&idx.iter().map(|&i| meds[i]).collect::<Vec<_>>());
    let (mut low, mut high) = (lower.to_vec(), upper.to_vec());
    low.sort_unstable();
    high.sort_unstable();
    Some(TwoLevels {
        low_level: level(&low),
        high_level: level(&high),
        low,
        high,
    })
}

impl TwoLevels {
    /// The higher level over the lower.
    pub(super) fn ratio(&self) -> f64 {
        self.high_level / self.low_level
    }

    /// Mark the smaller group's repetitions (the slower on a tie) as departing from the larger
    /// group's level, and say what happened in one note.
    fn describe(&self, reps: &mut [Repetition], preemption_expected: bool) -> String {
        let ((few, few_level), (many, many_level)) = if self.low.len() < self.high.len() {
            ((&self.low, self.low_level), (&self.high, self.high_level))
        } else {
            ((&self.high, self.high_level), (&self.low, self.low_level))
        };
        for &i in few {
            reps[i].departs_pct = Some(100.0 * (reps[i].median_ns / many_level - 1.0));
        }
        let numbers: Vec<String> = few.iter().map(|&i| (i + 1).to_string()).collect();
        let (pre, n) = few.iter().fold((0, 0), |(p, n), &i| {
            (p + reps[i].preempted, n + reps[i].samples)
        });
        let evidence = preempted_words(pre, n, "of their samples", preemption_expected);
        format!(
            "{TWO_LEVELS_NOTE}repetition{} {} at {}{evidence}, the other {} at {} (x{:.2}), each \
             whole repetition at one or the other (the machine's speed, or how processes were \
             laid out); kept: the median follows the larger group, the CI spans both",
            if few.len() == 1 { "" } else { "s" },
            numbers.join(", "),
            stats::units::format_ns(few_level),
            many.len(),
            stats::units::format_ns(many_level),
            self.ratio(),
        )
    }
}

/// Replace the one-stream CI with the repetitions' CI and say how it was found.
/// A CI whose upper bound is this many times its lower one says no cost: the repetitions'
/// levels disagree, and the result says so in words instead of as a width in percent.
pub const UNSTABLE_FROM: f64 = 2.0;

/// The note for a result whose CI spans `UNSTABLE_FROM` or more: by how much its repetitions'
/// levels disagree, said once in words ("repetitions disagree by 3.1x ...") rather than left
/// to a percentage in the thousands. `None` for a CI narrower than that.
fn unstable_note(ci: [f64; 2], reps: &[Repetition]) -> Option<Note> {
    if ci[1] < UNSTABLE_FROM * ci[0] || ci[1].is_nan() || ci[0].is_nan() || reps.is_empty() {
        return None;
    }
    let (lo, hi) = stats::extent(reps.iter().map(|r| r.median_ns));
    let factor = if lo > 0.0 { hi / lo } else { f64::INFINITY };
    let fmt = stats::units::format_ns;
    Some(Note::new(
        NoteKind::Unstable { factor },
        format!(
            "repetitions disagree by {}x (levels {} to {}): not a stable cost here; the CI spans them",
            stats::units::three_digits(factor),
            fmt(lo),
            fmt(hi)
        ),
    ))
}

fn attach_uncertainty(
    r: &mut BenchResult,
    spans: &[(usize, usize)],
    j: Judging,
    target: f64,
    stopped: RepetitionStop,
) {
    let Some(st) = r.stats.as_mut() else {
        return;
    };
    let within = st.ci95;
    let reps: Vec<&[f64]> = spans
        .iter()
        .map(|&(a, n)| &r.samples_ns[a..a + n])
        .collect();
    let ci = repetition_ci(&reps, r.batch.size, st.median, j);
    let n = reps.len();
    let method = match ci {
        Some(_) => format!(
            "hierarchical bootstrap over {n} repetitions (each a fresh process), then blocks of samples within them; on the log scale, t-expanded for {n} repetitions, at least the t interval of the repetitions' levels and within their distribution-free interval"
        ),
        None => {
            r.notes.push(Note::new(
                NoteKind::TooFewRepetitions { repetitions: n },
                format!(
                    "{n} repetition(s): too few for a confidence interval (at least {})",
                    stats::bootstrap::MIN_REPETITIONS
                ),
            ));
            "none: too few repetitions".to_string()
        }
    };
    if let Some(note) = ci.and_then(|ci| unstable_note(ci, &r.repetitions)) {
        r.notes.push(note);
    }
    st.ci95 = ci.unwrap_or([f64::NAN, f64::NAN]);
    r.uncertainty = Some(Uncertainty {
        method,
        repetitions: n,
        halfwidth_pct: match ci {
            Some(_) => 100.0 * halfwidth(ci, st.median),
            None => f64::NAN,
        },
        target_pct: 100.0 * target,
        stopped,
        within_stream_ci95: within,
        host_slow: None,
    });
}

#[cfg(test)]
mod tests;
