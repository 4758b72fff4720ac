//! The hook ladder's additions: what each `hook/` result adds to the same operation unhooked
//! (`hook/none` for getppid, `hook/pipe-none` for the pipe round trip), from repetitions
//! measured in the same rounds. Repetition k of a hooked result and repetition k of its base
//! ran one after the other in round k, so their
//! difference is free of whatever the machine did between rounds; the addition is the median
//! of those differences with its 95% CI (order statistics), kept in the result's parameters
//! (`addition_ns`, `addition_ci95`) for the views.

use crate::base::model::BenchResult;

/// The unhooked call every getppid rung is an addition to.
pub const HOOK_BASE: &str = "hook/none";
/// The unhooked pipe round trip the `hook/pipe-*` rungs are additions to.
pub const PIPE_BASE: &str = "hook/pipe-none";
/// The family's prefix.
pub const HOOK_FAMILY: &str = "hook/";

/// The unhooked result a `hook/` result is an addition to.
pub fn base_of(id: &str) -> &'static str {
    if id.starts_with("hook/pipe-") {
        PIPE_BASE
    } else {
        HOOK_BASE
    }
}

/// Each measured `hook/` result's addition over its base (`base_of`), where both have at
/// least 3 repetitions.
pub fn additions(results: &mut [BenchResult]) {
    let medians = |id: &str| {
        results
            .iter()
            .find(|r| r.id == id && r.stats.is_some())
            .map(|r| {
                r.repetitions
                    .iter()
                    .map(|x| x.median_ns)
                    .collect::<Vec<f64>>()
            })
    };
    let bases = [HOOK_BASE, PIPE_BASE].map(|b| (b, medians(b)));
    for r in results.iter_mut().filter(|r| {
        r.id.starts_with(HOOK_FAMILY) && r.id != HOOK_BASE && r.id != PIPE_BASE && r.stats.is_some()
    }) {
        let Some(base) = bases
            .iter()
            .find(|(b, _)| *b == base_of(&r.id))
            .and_then(|(_, m)| m.as_ref())
        else {
            continue;
        };
        let d: Vec<f64> = r
            .repetitions
            .iter()
            .zip(base)
            .map(|(h, b)| h.median_ns - b)
            .filter(|x| x.is_finite())
            .collect();
        if d.len() < 3 {
            continue;
        }
        if let Some(s) = crate::base::stats::summarize(&d) {
            r.params.insert("addition_ns".into(), s.median.into());
            r.params.insert(
                "addition_ci95".into(),
                serde_json::json!([s.ci95[0], s.ci95[1]]),
            );
        }
    }
}

/// A result's addition and its CI, where `additions` gave it one.
pub fn addition_of(r: &BenchResult) -> Option<(f64, [f64; 2])> {
    let a = r.params.get("addition_ns")?.as_f64()?;
    let ci = r.params.get("addition_ci95")?.as_array()?;
    Some((a, [ci.first()?.as_f64()?, ci.get(1)?.as_f64()?]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    fn with_reps(id: &str, medians: &[f64]) -> BenchResult {
        let mut r = testdata::result(id, medians.to_vec());
        r.repetitions = medians
            .iter()
            .enumerate()
            .map(|(i, m)| crate::base::model::Repetition {
                start: i,
                samples: 1,
                median_ns: *m,
                started_ms: i as f64,
                startup_ms: 0.0,
                preempted: 0,
                departs_pct: None,
                witness_ns: None,
                exit_witness_ns: None,
                memory_events: Default::default(),
                block: None,
            })
            .collect();
        r
    }

    #[test]
    fn an_addition_is_the_median_of_round_by_round_differences() {
        // The machine moves both by +50 in round 3: the differences do not see it.
        let mut rs = vec![
            with_reps("hook/none", &[300.0, 302.0, 350.0, 301.0, 299.0]),
            with_reps("hook/raw-tp/empty", &[365.0, 366.0, 415.0, 364.0, 366.0]),
            with_reps("syscall/getppid", &[300.0, 300.0, 300.0]),
        ];
        additions(&mut rs);
        let (a, ci) = addition_of(&rs[1]).unwrap();
        assert!((a - 65.0).abs() < 1e-9, "{a}");
        assert!(
            ci[0] <= a && a <= ci[1] && ci[0] >= 63.0 && ci[1] <= 67.0,
            "{ci:?}"
        );
        assert!(addition_of(&rs[0]).is_none() && addition_of(&rs[2]).is_none());
    }

    #[test]
    fn no_base_or_too_few_rounds_give_no_addition() {
        let mut rs = vec![with_reps("hook/raw-tp/empty", &[365.0, 366.0, 364.0])];
        additions(&mut rs);
        assert!(addition_of(&rs[0]).is_none());
        let mut rs = vec![
            with_reps("hook/none", &[300.0, 301.0]),
            with_reps("hook/raw-tp/empty", &[365.0, 366.0]),
        ];
        additions(&mut rs);
        assert!(addition_of(&rs[1]).is_none());
    }
}
