//! Repetitions: one case measured by several fresh workers, merged into one result whose CI
//! comes from the variation between them (a hierarchical bootstrap, see `stats::bootstrap`),
//! with the repetitions whose level departs from the others named.

use super::{CaseResult, analyze};
use crate::harness::noise::{CpuSnapshot, CpuTimes};
use crate::model::{BenchResult, Repetition, Uncertainty};
use crate::stats;

/// One repetition of a case as the scheduler saw it: what the worker sent, when it started and
/// how long the worker took before its first sample.
#[derive(Debug, Clone, PartialEq)]
pub struct RepRun {
    pub case: CaseResult,
    pub started_ms: f64,
    pub startup_ms: f64,
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
    let rounds: stats::bootstrap::Rounds = reps
        .iter()
        .map(|s| stats::bootstrap::blocks(s, batch, per))
        .filter(|b| !b.is_empty())
        .collect();
    stats::bootstrap::hierarchical_median_ci(&rounds, point, j.resamples, 0x0005_c057)
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
    stopped: &str,
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
        notes.push(format!(
            "{} of {} repetitions not measured ({why}); the result is the other {}",
            failed.len(),
            reps.len(),
            ok.len()
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
            preempted: rep
                .case
                .measurement
                .as_ref()
                .map_or(0, |m| m.preempted.len()),
            departs_pct: None,
        })
        .collect();
    name_departures(&mut r);
    attach_uncertainty(&mut r, &spans, j, target, stopped);
    r
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
    for (key, value) in merged.params.iter_mut() {
        let per_rep: Vec<f64> = cases
            .iter()
            .filter_map(|c| c.params.get(key)?.as_f64())
            .collect();
        if value.is_f64() && per_rep.len() == cases.len() {
            *value = serde_json::json!(stats::median(&per_rep));
        }
    }
    merged.events = merge_events(&cases);
    (merged, spans)
}

/// The repetitions' events per operation, averaged (each repetition counted its own window);
/// an event any repetition could not count is listed with its reason.
fn merge_events(cases: &[&CaseResult]) -> Option<crate::model::Events> {
    let all: Vec<&crate::model::Events> = cases.iter().filter_map(|c| c.events.as_ref()).collect();
    let first = all.first()?;
    let mut out = crate::model::Events {
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

/// Mark repetitions whose median departs from the others' by more than their spread and its
/// own explain: beyond 3 robust standard deviations of the repetitions' medians, beyond twice
/// its own within-repetition half-width, and by at least 2%.
fn name_departures(r: &mut BenchResult) {
    let meds: Vec<f64> = r.repetitions.iter().map(|x| x.median_ns).collect();
    if meds.len() < 3 {
        return;
    }
    let center = stats::median(&meds);
    let spread =
        1.4826 * stats::median(&meds.iter().map(|m| (m - center).abs()).collect::<Vec<_>>());
    let mut said = Vec::new();
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
            said.push(format!(
                "repetition {} (at {:.0} ms) sat {pct:+.1}% from the others ({} of {} samples preempted)",
                k + 1,
                rep.started_ms,
                rep.preempted,
                rep.samples
            ));
        }
    }
    if !said.is_empty() {
        r.notes
            .push(format!("kept, not removed: {}", said.join("; ")));
    }
}

/// Replace the one-stream CI with the repetitions' CI and say how it was found.
fn attach_uncertainty(
    r: &mut BenchResult,
    spans: &[(usize, usize)],
    j: Judging,
    target: f64,
    stopped: &str,
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
            "hierarchical bootstrap over {n} repetitions (each a fresh process), then blocks of samples within them; t-expanded for {n} repetitions, and at least the t interval of the repetitions' medians"
        ),
        None => {
            r.notes.push(format!(
                "{n} repetition(s): too few for a confidence interval (at least {})",
                stats::bootstrap::MIN_REPETITIONS
            ));
            "none: too few repetitions".to_string()
        }
    };
    st.ci95 = ci.unwrap_or([f64::NAN, f64::NAN]);
    r.uncertainty = Some(Uncertainty {
        method,
        repetitions: n,
        halfwidth_pct: match ci {
            Some(_) => 100.0 * halfwidth(ci, st.median),
            None => f64::NAN,
        },
        target_pct: 100.0 * target,
        stopped: stopped.to_string(),
        within_stream_ci95: within,
    });
}
