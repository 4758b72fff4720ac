//! A run's speed witness (see `measuring::witness`): the median over its workers of the fixed
//! user-space loop each timed around its cases, and what two runs' witnesses say about a
//! difference between them. Cases of one benchmark share a worker, so one worker counts once.
//! The same for the exit witness (CPUID, a round trip through the hypervisor in a guest),
//! which follows a host whose own load moves every kernel cost of its guests while the
//! user-space loop stays put.

use crate::base::model::Run;

/// A run's witness: ns per loop (median over its workers) and how many workers timed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunWitness {
    /// The run's speed witness, ns per loop (the median of its workers').
    pub ns: f64,
    /// How many workers timed it.
    pub workers: usize,
}

/// The run's witness, `None` for runs made before it was kept (or with no repetitions).
pub fn run_witness(run: &Run) -> Option<RunWitness> {
    let values = per_worker(run, |rep| rep.witness_ns);
    (!values.is_empty()).then(|| RunWitness {
        ns: crate::base::stats::median(&values),
        workers: values.len(),
    })
}

/// The run's exit witness, ns per CPUID (median over its workers); `None` for runs made
/// before it was kept, or where the CPU has no CPUID.
pub fn run_exit_witness(run: &Run) -> Option<f64> {
    let values = per_worker(run, |rep| rep.exit_witness_ns);
    (!values.is_empty()).then(|| crate::base::stats::median(&values))
}

/// One result's exit witness, ns per CPUID: the median over its repetitions (each timed by
/// the worker that measured it, so the host's state while this benchmark ran, not the run's);
/// `None` where none timed one. The store keeps it beside the result's median (schema 7), so
/// that runs measured apart can be projected to one exit level (`run_to_run::Projection`).
pub fn result_exit_witness(result: &crate::base::model::BenchResult) -> Option<f64> {
    result_median(result, |rep| rep.exit_witness_ns)
}

/// One result's speed witness, ns per loop of fixed user-space work: the median over its
/// repetitions, as `result_exit_witness` (schema 8 keeps it beside the exit witness: on a
/// guest whose host drifted between runs the levels followed this one, not CPUID).
pub fn result_speed_witness(result: &crate::base::model::BenchResult) -> Option<f64> {
    result_median(result, |rep| rep.witness_ns)
}

fn result_median(
    result: &crate::base::model::BenchResult,
    of: impl Fn(&crate::base::model::Repetition) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = result
        .repetitions
        .iter()
        .filter_map(of)
        .filter(|w| w.is_finite() && *w > 0.0)
        .collect();
    (!values.is_empty()).then(|| crate::base::stats::median(&values))
}

/// One value a worker: `of` each repetition, a worker's cases (which carry its start and
/// witnesses, copied: equal bits) counted once.
fn per_worker(run: &Run, of: impl Fn(&crate::base::model::Repetition) -> Option<f64>) -> Vec<f64> {
    let mut seen: Vec<(u64, u64)> = Vec::new();
    let mut values = Vec::new();
    for rep in run.results.iter().flat_map(|r| &r.repetitions) {
        let Some(w) = of(rep) else { continue };
        let key = (rep.started_ms.to_bits(), w.to_bits());
        if !seen.contains(&key) {
            seen.push(key);
            values.push(w);
        }
    }
    values
}

/// How far two runs' exit witnesses may sit apart and still be "the same speed": quiet runs'
/// medians agreed within 1% on a KVM guest, and a host that moved its guest's costs by 7-28%
/// moved the witness by 7-39% (docs/design-notes.md, "A witness that follows the host").
const EXIT_SAME: f64 = 0.05;

/// The sentence a comparison of two runs says about their exit witnesses: how much dearer or
/// cheaper a round trip through the hypervisor was in the candidate, and what that may
/// explain.
pub fn exit_shift_words(base_ns: f64, cand_ns: f64) -> String {
    let ratio = cand_ns / base_ns;
    let what = format!(
        "exit witness (CPUID, which a hypervisor traps; timed by every worker): {cand_ns:.0} \
against {base_ns:.0} ns in the candidate"
    );
    if (ratio - 1.0).abs() < EXIT_SAME {
        return format!("{what}: the host answered its guest at the same speed");
    }
    format!(
        "{what}: the host took {:.0}% {} in the candidate; in a guest whose host moves, every \
kernel cost can move with it (on one KVM guest by 0.5-0.9% for each 1% of this witness), so a \
difference of that order may be the host, not the system",
        (ratio - 1.0).abs() * 100.0,
        if ratio > 1.0 { "longer" } else { "less time" }
    )
}

/// The sentence a comparison of two runs says about their witnesses: how much slower or
/// faster the machine ran plain user code in the candidate, and what that does and does not
/// explain.
pub fn shift_words(base: RunWitness, cand: RunWitness) -> String {
    let ratio = cand.ns / base.ns;
    let what = format!(
        "speed witness (a fixed user-space loop timed by every worker): {:.0} against {:.0} ns a \
loop in the candidate, medians of {} and {} workers",
        cand.ns, base.ns, cand.workers, base.workers
    );
    if (ratio - 1.0).abs() < 0.005 {
        return format!(
            "{what}: the machine ran user code at the same speed, so a change of its clock or of \
what shares its core does not explain a difference (it does not see the kernel's costs)"
        );
    }
    format!(
        "{what}: the machine ran user code {:.1}% {} in the candidate; a difference of that size \
in user-bound benchmarks may be the machine, not the system (it sees the core's clock and \
sharing, not the kernel's costs)",
        (ratio - 1.0).abs() * 100.0,
        if ratio > 1.0 { "slower" } else { "faster" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    #[test]
    fn one_worker_counts_once_and_the_shift_is_said() {
        let mut run = testdata::run();
        run.results = vec![testdata::result("a/x", vec![1.0])];
        let rep = |ms: f64, w: f64| crate::base::model::Repetition {
            witness_ns: Some(w),
            ..testdata::repetition(1.0, ms)
        };
        run.results[0].repetitions = vec![rep(0.0, 100.0), rep(10.0, 104.0), rep(20.0, 102.0)];
        // A second case of the first worker: same start, same witness.
        let mut second = run.results[0].clone();
        second.repetitions.truncate(1);
        run.results.push(second);
        let w = run_witness(&run).unwrap();
        assert_eq!((w.ns, w.workers), (102.0, 3));
        let base = RunWitness {
            ns: 100.0,
            workers: 9,
        };
        let text = shift_words(
            base,
            RunWitness {
                ns: 105.0,
                workers: 8,
            },
        );
        assert!(text.contains("5.0% slower in the candidate"), "{text}");
        assert!(shift_words(base, base).contains("at the same speed, so"));
        assert_eq!(run_exit_witness(&run), None);
        for (k, rep) in run.results[0].repetitions.iter_mut().enumerate() {
            rep.exit_witness_ns = Some([4400.0, 6400.0, 4600.0][k]);
        }
        assert_eq!(run_exit_witness(&run), Some(4600.0));
        let moved = exit_shift_words(4600.0, 6400.0);
        assert!(moved.contains("the host took 39% longer"), "{moved}");
        assert!(exit_shift_words(4600.0, 4700.0).contains("at the same speed"));
        run.results.iter_mut().for_each(|r| r.repetitions.clear());
        assert_eq!(run_witness(&run), None);
    }
}
