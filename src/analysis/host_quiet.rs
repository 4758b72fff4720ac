//! The host's slow moments, set aside. In a guest every worker times the exit witness (CPUID, a
//! round trip through the hypervisor, in which the guest kernel takes no part) beside its
//! cases, so each repetition says what state the host was in while it ran. Where a run's
//! repetitions that ran while that witness sat well above the run's quiet level were dearer
//! than their results' others (a sign test over the run), the host's slow moments reached the
//! costs, and those repetitions are set aside: each result is then its cost while the host
//! was quiet, its CI from the other repetitions, and the set-aside ones are kept beside it
//! (`Uncertainty::host_slow`) with what the median would have been with them. One note says
//! it for the run.
//!
//! Why set aside and not regress on the witness: a repetition's witness is timed beside its
//! cases, not during them, and jitters by a few percent on its own; dividing every level by it
//! adds that jitter to costs whose repetitions agree within 1% (getpid's interval grew from
//! 0.9% to 13% so on a drifting guest, docs/design-notes.md "A witness that follows the
//! host"). A threshold well above the quiet level's own jitter can only set aside too few,
//! never add noise to what it keeps. Why only for one side: `ab` alternates its sides and
//! judges them as pairs, which cancels the host's moments already; a side's condition could
//! also move its witness.

use crate::base::model::{BenchResult, HostSlow, HostSlowRepetition, Note, NoteKind};
use crate::base::stats;

use super::RepRun;

/// Fewer slow repetitions (with a quiet level of their own result to sit against) than this
/// cannot show that the host's slowness reached the costs.
pub const MIN_SLOW: usize = 5;
/// Fewer exit witnesses than this in a run cannot judge it: `MIN_SLOW` slow repetitions and
/// `MIN_KEPT` quiet ones are the fewest that could pass. It was 20, which left a run of one
/// benchmark unjudged: `oscost run syscall/getpid` on a drifting AMD EPYC guest
/// (2026-12-06) measured 16 repetitions, its first eight with the witness at 4.3-5.2 us
/// against a quiet 3.5 and 184-194 ns against 137-149, and printed 174.4 ns as getpid's cost.
pub const MIN_WITNESSES: usize = MIN_SLOW + MIN_KEPT;
/// The least step above the quiet level called slow, whatever its jitter: the hosts whose
/// drift this is for moved the witness by 20-40% (docs/design-notes.md).
const LEAST_STEP: f64 = 1.10;
/// How many of the quiet level's robust SDs above it a slow witness sits at least.
const JITTERS: f64 = 4.0;
/// A result keeps at least this many repetitions, or none is set aside.
const MIN_KEPT: usize = stats::bootstrap::MIN_REPETITIONS;
/// One-sided sign test level for "the slow repetitions were dearer".
const SIGN_LEVEL: f64 = 0.05;
/// How much dearer, the median over the slow repetitions, before they are the host's to set
/// aside: a quiet AMD EPYC guest (2026-12-04) had 7% of its repetitions' witnesses 10% above
/// its quiet level, and those sat 2% dearer, which a sign test over 56 finds but which is
/// within a result's own spread; the drifting hosts this is for moved costs 12-40%.
const LEAST_DEARER: f64 = 0.05;

/// What a run's exit witnesses said: where its host was quiet, above what a repetition ran in
/// a slow moment, and how much dearer those repetitions were.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostQuiet {
    /// The lower quartile of every exit witness the run's workers timed, ns.
    pub quiet_ns: f64,
    /// Above this a repetition ran in a slow moment of the host, ns.
    pub slow_above_ns: f64,
    /// The median over the slow repetitions of how much dearer each sat than its result's
    /// quiet ones, percent.
    pub dearer_pct: f64,
}

/// One repetition as this judge needs it: its level (median, ns) and its exit witness.
pub type Level = (f64, Option<f64>);

/// Each repetition's level and exit witness, per case, from the scheduler's repetitions
/// (measured ones only).
pub fn levels(cases: &[&[RepRun]]) -> Vec<Vec<Level>> {
    cases
        .iter()
        .map(|reps| {
            reps.iter()
                .filter_map(|r| {
                    let m = r.case.measurement.as_ref()?;
                    Some((stats::median(&m.samples_ns), r.case.exit_witness_ns))
                })
                .collect()
        })
        .collect()
}

/// Whether the host's slow moments reached this run's costs, from every case's repetitions:
/// `Some` where at least `MIN_SLOW` repetitions ran with the witness above the quiet level's
/// jitter and a sign test says they sat dearer than their results' others, by `LEAST_DEARER`
/// or more.
pub fn judge(cases: &[Vec<Level>]) -> Option<HostQuiet> {
    let mut logs: Vec<f64> = cases
        .iter()
        .flatten()
        .filter_map(|&(_, w)| w.filter(|w| *w > 0.0).map(f64::ln))
        .collect();
    if logs.len() < MIN_WITNESSES {
        return None;
    }
    logs.sort_by(f64::total_cmp);
    let quiet = logs[logs.len() / 4];
    // The quiet level's own jitter: the spread of the lower half, which a slow host leaves
    // alone as long as it is quiet half the time.
    let jitter = stats::robust_sd(&logs[..=logs.len() / 2]);
    let above = quiet + (JITTERS * jitter).max(LEAST_STEP.ln());
    let mut dearer = Vec::new();
    for levels in cases {
        let slow = |w: &Option<f64>| w.is_some_and(|w| w > 0.0 && w.ln() > above);
        let kept: Vec<f64> = levels
            .iter()
            .filter(|(l, w)| !slow(w) && *l > 0.0)
            .map(|&(l, _)| l)
            .collect();
        if kept.len() < MIN_KEPT {
            continue;
        }
        let mid = stats::median(&kept).ln();
        dearer.extend(
            levels
                .iter()
                .filter(|(l, w)| slow(w) && *l > 0.0)
                .map(|(l, _)| l.ln() - mid),
        );
    }
    if dearer.len() < MIN_SLOW {
        return None;
    }
    let higher = dearer.iter().filter(|d| **d > 0.0).count();
    let by = stats::median(&dearer).exp_m1();
    (sign_p(higher, dearer.len()) < SIGN_LEVEL && by >= LEAST_DEARER).then(|| HostQuiet {
        quiet_ns: quiet.exp(),
        slow_above_ns: above.exp(),
        dearer_pct: 100.0 * by,
    })
}

/// P(X >= k) for X ~ Binomial(n, 1/2): how likely `k` of `n` sit higher by chance alone.
fn sign_p(k: usize, n: usize) -> f64 {
    use statrs::distribution::{Binomial, DiscreteCDF};
    match (k, Binomial::new(0.5, n as u64)) {
        (0, _) => 1.0,
        (_, Ok(b)) => 1.0 - b.cdf(k as u64 - 1),
        (_, Err(_)) => 1.0,
    }
}

impl HostQuiet {
    /// Whether this repetition was measured while the host was slow.
    pub fn is_slow(&self, r: &RepRun) -> bool {
        r.case.measurement.is_some()
            && r.case
                .exit_witness_ns
                .is_some_and(|w| w > self.slow_above_ns)
    }

    /// Whether a case's slow repetitions are set aside: some are, and at least `MIN_KEPT`
    /// measured ones are left.
    pub fn sets_aside(&self, reps: &[RepRun]) -> bool {
        let measured = reps.iter().filter(|r| r.case.measurement.is_some()).count();
        let slow = reps.iter().filter(|r| self.is_slow(r)).count();
        slow > 0 && measured - slow >= MIN_KEPT
    }

    /// The repetitions a case's statistics are of: the quiet ones where the slow are set
    /// aside (`sets_aside`), else all (for the stop rule, which asks before the end).
    pub fn kept<'a>(&self, reps: &'a [RepRun]) -> Vec<&'a RepRun> {
        let aside = self.sets_aside(reps);
        reps.iter()
            .filter(|r| !(aside && self.is_slow(r)))
            .collect()
    }
}

/// A case's repetitions less those that ran while the host was slow, and those set aside
/// (`None` where none is, or where fewer than `MIN_KEPT` measured ones would be left: then
/// every repetition stays).
pub fn split(reps: Vec<RepRun>, host: &HostQuiet) -> (Vec<RepRun>, Option<HostSlow>) {
    if !host.sets_aside(&reps) {
        return (reps, None);
    }
    let every: Vec<f64> = reps
        .iter()
        .filter_map(|r| r.case.measurement.as_ref())
        .flat_map(|m| m.samples_ns.iter().copied())
        .collect();
    let (aside, kept): (Vec<RepRun>, Vec<RepRun>) = reps.into_iter().partition(|r| host.is_slow(r));
    let repetitions = aside
        .iter()
        .filter_map(|r| {
            let m = r.case.measurement.as_ref()?;
            Some(HostSlowRepetition {
                started_ms: r.started_ms,
                median_ns: stats::median(&m.samples_ns),
                samples: m.samples_ns.len(),
                exit_witness_ns: r.case.exit_witness_ns?,
            })
        })
        .collect();
    let with = HostSlow {
        quiet_ns: host.quiet_ns,
        slow_above_ns: host.slow_above_ns,
        median_with_ns: stats::median(&every),
        repetitions,
    };
    (kept, Some(with))
}

/// The run's one note on what was set aside, from its results (`None` where nothing was).
pub fn note(results: &[BenchResult], host: Option<&HostQuiet>) -> Option<Note> {
    let host = host?;
    let aside: Vec<(&BenchResult, &HostSlow)> = results
        .iter()
        .filter_map(|r| Some((r, r.uncertainty.as_ref()?.host_slow.as_ref()?)))
        .collect();
    if aside.is_empty() {
        return None;
    }
    let set_aside: usize = aside.iter().map(|(_, h)| h.repetitions.len()).sum();
    let of = set_aside + results.iter().map(|r| r.repetitions.len()).sum::<usize>();
    // The result the slow repetitions moved most, to say in figures what was taken out.
    let (moved, by) = aside
        .iter()
        .filter_map(|(r, h)| {
            let m = r.stats.as_ref()?.median;
            (m > 0.0).then(|| (r.id.as_str(), h.median_with_ns / m - 1.0))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let text = format!(
        "the host was slow in {set_aside} of {of} repetitions: their exit witness (CPUID, a round \
         trip through the hypervisor; interrupts on this CPU slow it too) sat above {:.2} us, \
         against {:.2} us quiet, and they sat {:+.0}% dearer than their results' others: set aside \
         from {} results, each now its cost while the host was quiet (with them {moved} would \
         read {:+.1}%; `uncertainty.host_slow` in the JSON keeps them)",
        host.slow_above_ns / 1e3,
        host.quiet_ns / 1e3,
        host.dearer_pct,
        aside.len(),
        100.0 * by,
    );
    Some(Note::new(
        NoteKind::HostSlow {
            set_aside,
            of,
            results: aside.len(),
            quiet_ns: host.quiet_ns,
            slow_above_ns: host.slow_above_ns,
            dearer_pct: host.dearer_pct,
        },
        text,
    ))
}

#[cfg(test)]
mod tests;
