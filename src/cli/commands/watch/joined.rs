//! A watch's windows as one stored run and back: the windows joined, each burst timed from
//! the run's start (`join`), and a stored run cut into its windows again (`split_windows`).

use std::time::Duration;

use crate::base::model::{Note, NoteKind, Run};

/// A stored watch run's repetitions cut back into its windows' bursts: a window's bursts all
/// start within a fraction of an interval of its first (`window_plan` spreads them over a
/// quarter of it), the next window's first an interval after; runs stored by watches that
/// timed each window's bursts from the window's own start go back in time where a window
/// begins.
pub(super) fn split_windows(
    reps: &[crate::base::model::Repetition],
    interval: Duration,
) -> Vec<&[crate::base::model::Repetition]> {
    let apart_ms = 0.8 * interval.as_secs_f64() * 1e3;
    let mut out = Vec::new();
    let mut first = 0;
    for i in 1..reps.len() {
        let since = reps[i].started_ms - reps[first].started_ms;
        if since < 0.0 || since >= apart_ms {
            out.push(&reps[first..i]);
            first = i;
        }
    }
    if first < reps.len() {
        out.push(&reps[first..]);
    }
    out
}

/// Windows as one run: each benchmark's windows its repetitions (`join_windows`), the machine
/// as the last window saw it, a note saying what the run is.
pub(super) fn join(windows: &[Run], interval: Duration, why: &str) -> Option<Run> {
    let last = windows.last()?;
    let first = windows.first()?;
    let mut run = last.clone();
    let mut ids: Vec<&str> = Vec::new();
    for w in windows {
        for r in &w.results {
            if !ids.contains(&r.id.as_str()) {
                ids.push(&r.id);
            }
        }
    }
    run.started_at = first.started_at.clone();
    // Each window times its bursts from its own start; in the joined run they are timed from
    // the run's (the first window's) start, as a run's repetitions are, so the windows can
    // be told apart again (`split_windows`).
    let at = |w: &Run| chrono::DateTime::parse_from_rfc3339(&w.started_at).ok();
    let shifted: Vec<Run> = windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let offset_ms = match (at(first), at(w)) {
                (Some(a), Some(b)) => (b - a).num_milliseconds() as f64,
                _ => i as f64 * interval.as_secs_f64() * 1e3,
            };
            let mut w = w.clone();
            for r in &mut w.results {
                for rep in &mut r.repetitions {
                    rep.started_ms += offset_ms;
                }
            }
            w
        })
        .collect();
    run.results = ids
        .iter()
        .filter_map(|id| {
            let parts: Vec<&crate::base::model::BenchResult> = shifted
                .iter()
                .filter_map(|w| w.results.iter().find(|r| r.id == *id))
                .collect();
            crate::analysis::join_windows(&parts)
        })
        .collect();
    run.schedule = None;
    run.notes = vec![Note::new(
        NoteKind::Remark,
        format!(
            "oscost watch: {} windows every {:.0} s from {} to {}, each benchmark once a window (a repetition), saved at {why}",
            windows.len(),
            interval.as_secs_f64(),
            first.started_at,
            last.started_at
        ),
    )];
    Some(run)
}
