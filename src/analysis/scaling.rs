//! What a scale/ benchmark's results say together (`Cases::Copies`): each result's
//! efficiency against one copy of its mode (from windows paired in time where the result has
//! them: copy 0 alone just before and after the all-copies windows of each repetition, a
//! geometric mean with a t interval on logarithms, flagged when above 1 beyond it; else the
//! one-copy cost over its cost, with a CI from the hierarchical bootstrap of both over their
//! repetitions), its operations per second per
//! task and in total (from its median, so they agree with it), the IPIs per operation with a
//! t interval over the repetitions, and, where threads and processes ran the same number of
//! copies, the threads' cost against the processes': what sharing one address space and one
//! file table costs, called only when its CI excludes 1 by more than the noise band.

use serde_json::json;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::base::model::{BenchResult, Note, NoteKind};
use crate::base::stats::bootstrap::{Repetitions, blocks, ratio_and_difference};

/// Bootstrap resamples for a derived ratio.
const RESAMPLES: usize = 2000;
/// The band within which a thread/process ratio is no news (as `compare`'s default).
const BAND: f64 = 0.02;

/// Parameters each repetition reports whose spread across repetitions the result keeps
/// (`{key}_by_rep`), for a CI of their own.
pub const PER_REPETITION: &[&str] = &[
    "ipis_per_op",
    "tlb_ipis_per_op",
    "idle_pct",
    "paired_efficiency",
];

fn mode(r: &BenchResult) -> Option<&str> {
    r.params.get("mode")?.as_str()
}

fn copies(r: &BenchResult) -> Option<u64> {
    r.params.get("copies")?.as_u64()
}

/// A result's repetitions as the bootstrap takes them.
fn repetitions(r: &BenchResult) -> Repetitions {
    let spans: Vec<(usize, usize)> = if r.repetitions.is_empty() {
        vec![(0, r.samples_ns.len())]
    } else {
        r.repetitions.iter().map(|x| (x.start, x.samples)).collect()
    };
    spans
        .into_iter()
        .filter(|&(s, n)| n > 0 && s + n <= r.samples_ns.len())
        .map(|(s, n)| blocks(&r.samples_ns[s..s + n], 1, 64))
        .collect()
}

/// The ratio of `cand`'s median over `base`'s, with its 95% CI.
pub fn ratio(base: &BenchResult, cand: &BenchResult) -> Option<(f64, [f64; 2])> {
    let (b, c) = (base.stats.as_ref()?.median, cand.stats.as_ref()?.median);
    if b <= 0.0 || c <= 0.0 {
        return None;
    }
    let d = ratio_and_difference(
        &repetitions(base),
        &repetitions(cand),
        (c / b, c - b),
        RESAMPLES,
        0x5ca1e,
    );
    d.ratio_ci
        .iter()
        .all(|x| x.is_finite())
        .then_some((c / b, d.ratio_ci))
}

/// A mean with its 95% t interval.
pub fn mean_ci(values: &[f64]) -> Option<(f64, [f64; 2])> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let (mean, sd) = crate::base::stats::mean_stddev(values);
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .ok()?
        .inverse_cdf(0.975);
    let h = t * sd / (n as f64).sqrt();
    Some((mean, [mean - h, mean + h]))
}

/// A 95% interval for a rate measured once per repetition (IPIs per operation, idle
/// percent). Rates spread by factors, not by amounts (one repetition's 0.02 IPIs/op beside
/// others' 0.003), so where every repetition saw some, the t interval is taken on their
/// logarithms (the geometric mean's), which stays above 0; where one saw none, on the values,
/// clamped at 0, since a count is never below it.
pub fn rate_ci(values: &[f64]) -> Option<[f64; 2]> {
    if values.iter().all(|&v| v > 0.0) {
        geometric_mean_ci(values).map(|(_, ci)| ci)
    } else {
        let (_, ci) = mean_ci(values)?;
        Some([ci[0].max(0.0), ci[1]])
    }
}

/// The geometric mean of positive `values` with the t interval of their logarithms, back on
/// the values' scale (for what spreads by factors: rates, ratios).
fn geometric_mean_ci(values: &[f64]) -> Option<(f64, [f64; 2])> {
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let (mean, ci) = mean_ci(&logs)?;
    Some((mean.exp(), [ci[0].exp(), ci[1].exp()]))
}

/// A per-repetition parameter's values (`{key}_by_rep`, kept by `analysis::repetitions` for
/// the keys of `PER_REPETITION`); empty where the result has none.
fn by_rep(r: &BenchResult, key: &str) -> Vec<f64> {
    r.params
        .get(&format!("{key}_by_rep"))
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default()
}

/// Efficiency from the windows each repetition paired in time (copy 0 alone just before and
/// after the all-copies windows, `measuring::scaling`): the geometric mean of the repetitions'
/// ratios, with the t interval of their logarithms (a ratio spreads by factors). None for a
/// result without them (one copy, or a run stored before they were taken).
fn paired_efficiency(r: &BenchResult) -> Option<(f64, [f64; 2])> {
    let mut ratios = by_rep(r, "paired_efficiency");
    ratios.retain(|x| x.is_finite() && *x > 0.0);
    geometric_mean_ci(&ratios)
}

/// What one result of a scale/ benchmark gets (parameters, notes), from it and its siblings
/// (`all`, the benchmark's results as measured).
fn additions(
    r: &BenchResult,
    all: &[BenchResult],
) -> (Vec<(String, serde_json::Value)>, Vec<Note>) {
    let (mut params, mut notes) = (Vec::new(), Vec::new());
    let (Some(m), Some(n), Some(median)) = (mode(r), copies(r), r.stats.as_ref().map(|s| s.median))
    else {
        return (params, notes);
    };
    let find = |m: &str, n: u64| {
        all.iter()
            .find(|x| mode(x) == Some(m) && copies(x) == Some(n) && x.stats.is_some())
    };
    if median > 0.0 {
        let per_task = 1e9 / median;
        params.push(("ops_per_s_per_task".into(), json!(per_task)));
        params.push(("ops_per_s_total".into(), json!(per_task * n as f64)));
    }
    // Efficiency's own interval is `efficiency_ci95`, below.
    for key in PER_REPETITION.iter().filter(|k| **k != "paired_efficiency") {
        if let Some(ci) = rate_ci(&by_rep(r, key)) {
            params.push((format!("{key}_ci95"), json!(ci)));
        }
    }
    if let Some((e, ci)) = paired_efficiency(r) {
        params.push(("efficiency".into(), json!(e)));
        params.push(("efficiency_ci95".into(), json!(ci)));
        params.push(("efficiency_paired".into(), json!(true)));
        if ci[0] > 1.0 {
            notes.push(Note::new(NoteKind::EfficiencyAboveOne, format!(
                "efficiency {e:.2} ({:.2}-{:.2}) above 1 beyond its CI: {n} copies ran faster each than one alone at the same moments, which sharing cannot do; the host moved (another guest's load, a frequency change) between the paired windows",
                ci[0], ci[1]
            )));
        }
    } else if let Some(one) = find(m, 1)
        && let Some((x, ci)) = ratio(one, r)
    {
        // Efficiency is the inverse of the slowdown against one copy: runs stored before the
        // paired windows, and the one-copy results themselves.
        params.push(("efficiency".into(), json!(1.0 / x)));
        params.push(("efficiency_ci95".into(), json!([1.0 / ci[1], 1.0 / ci[0]])));
    }
    if m == "thread"
        && n >= 2
        && let Some(p) = find("process", n)
        && let Some((x, ci)) = ratio(p, r)
    {
        params.push(("vs_processes".into(), json!(x)));
        params.push(("vs_processes_ci95".into(), json!(ci)));
        if ci[0] > 1.0 && x > 1.0 + BAND {
            notes.push(Note::new(NoteKind::ThreadsPay, format!(
                "threads pay x{x:.2} ({:.2}-{:.2}) what processes do at {n} copies: they share one address space and one file table",
                ci[0], ci[1]
            )));
        }
    }
    (params, notes)
}

/// Efficiency, rates, IPIs and the thread/process contrast of every result of one scale/
/// benchmark: each computed from the results as measured, then written.
pub fn derive(results: &mut [BenchResult]) {
    let added: Vec<_> = results.iter().map(|r| additions(r, results)).collect();
    for (r, (params, notes)) in results.iter_mut().zip(added) {
        r.params.extend(params);
        r.notes.extend(notes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::{Repetition, Status};

    /// A result of `mode` at `n` copies whose repetitions sit at `levels` (each 20 samples
    /// around its level, ±0.5%).
    fn result(mode: &str, n: u64, levels: &[f64]) -> BenchResult {
        let mut r = BenchResult::not_measured(&format!("scale/x/{mode}-{n}"), "d", Status::Ok);
        r.params.insert("mode".into(), json!(mode));
        r.params.insert("copies".into(), json!(n));
        for (i, &l) in levels.iter().enumerate() {
            let start = r.samples_ns.len();
            r.samples_ns
                .extend((0..20).map(|k| l * (1.0 + 0.005 * ((k % 5) as f64 - 2.0) / 2.0)));
            r.repetitions.push(Repetition {
                start,
                samples: 20,
                median_ns: l,
                started_ms: i as f64,
                startup_ms: 1.0,
                preempted: 0,
                departs_pct: None,
                witness_ns: None,
                exit_witness_ns: None,
                memory_events: Default::default(),
                block: None,
            });
        }
        r.stats = crate::base::stats::summarize(&r.samples_ns);
        r
    }

    /// With windows paired in time, efficiency comes from them, not from the two results'
    /// medians (which a host that moved between them would bias: here the one-copy result
    /// was measured at a slow moment, 130 ns, against the pairs' 100); a point above 1 beyond
    /// its CI is said as the host moving.
    #[test]
    fn paired_windows_give_efficiency_and_a_point_above_one_is_flagged() {
        let mut rs = vec![
            result("process", 1, &[130.0, 131.0, 129.0]),
            result("process", 2, &[100.0, 101.0, 100.0]),
            result("thread", 1, &[100.0, 100.0, 100.0]),
            result("thread", 2, &[90.0, 90.5, 89.5]),
        ];
        rs[1].params.insert(
            "paired_efficiency_by_rep".into(),
            json!([0.98, 1.0, 1.01, 0.99]),
        );
        rs[3].params.insert(
            "paired_efficiency_by_rep".into(),
            json!([1.11, 1.12, 1.10, 1.11]),
        );
        derive(&mut rs);
        let eff = |r: &BenchResult| r.params["efficiency"].as_f64().unwrap();
        let ci = |r: &BenchResult| -> [f64; 2] {
            serde_json::from_value(r.params["efficiency_ci95"].clone()).unwrap()
        };
        assert!((eff(&rs[1]) - 0.995).abs() < 0.005, "{}", eff(&rs[1]));
        let c = ci(&rs[1]);
        assert!(c[0] < 0.995 && c[1] > 0.995 && c[1] < 1.02, "{c:?}");
        assert_eq!(rs[1].params["efficiency_paired"], json!(true));
        assert!(!rs[1].notes.iter().any(|n| n.text.contains("above 1")));
        assert!(ci(&rs[3])[0] > 1.0);
        assert!(
            rs[3]
                .notes
                .iter()
                .any(|n| n.text.contains("above 1 beyond its CI") && n.text.contains("host moved")),
            "{:?}",
            rs[3].notes
        );
        // One copy keeps its efficiency of 1, from the ratio with itself.
        assert!((eff(&rs[0]) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn efficiency_is_one_copy_over_n_with_a_ci_that_holds_it() {
        let mut rs = vec![
            result("process", 1, &[100.0, 101.0, 99.0, 100.0, 100.5]),
            result("process", 2, &[101.0, 100.0, 102.0, 101.0, 100.0]),
            result("thread", 1, &[100.0, 100.5, 99.5, 100.0, 101.0]),
            result("thread", 2, &[400.0, 410.0, 395.0, 405.0, 400.0]),
        ];
        rs[3].params.insert(
            "ipis_per_op_by_rep".into(),
            json!([0.9, 1.0, 1.1, 1.0, 1.0]),
        );
        derive(&mut rs);
        let eff = |r: &BenchResult| r.params["efficiency"].as_f64().unwrap();
        let ci = |r: &BenchResult, k: &str| -> [f64; 2] {
            serde_json::from_value(r.params[k].clone()).unwrap()
        };
        assert!((eff(&rs[0]) - 1.0).abs() < 1e-9);
        assert!(eff(&rs[1]) > 0.97 && eff(&rs[1]) < 1.01, "{}", eff(&rs[1]));
        assert!((eff(&rs[3]) - 0.25).abs() < 0.01, "{}", eff(&rs[3]));
        let c = ci(&rs[3], "efficiency_ci95");
        assert!(c[0] < eff(&rs[3]) && eff(&rs[3]) < c[1] && c[1] < 0.3);
        // Rates follow the median: 1e9 / 400 ns per task, twice that in total.
        let per = rs[3].params["ops_per_s_per_task"].as_f64().unwrap();
        assert!((per - 1e9 / rs[3].stats.as_ref().unwrap().median).abs() < 1e-6);
        assert!((rs[3].params["ops_per_s_total"].as_f64().unwrap() - 2.0 * per).abs() < 1e-6);
        // Threads against processes at 2 copies: called, with the note.
        let v = rs[3].params["vs_processes"].as_f64().unwrap();
        assert!(v > 3.8 && v < 4.2);
        assert!(rs[3].notes.iter().any(|n| n.text.contains("threads pay x")));
        assert!(!rs[1].params.contains_key("vs_processes"));
        // IPIs per operation: a t interval over the repetitions, above 0.
        let i = ci(&rs[3], "ipis_per_op_ci95");
        assert!(i[0] > 0.8 && i[1] < 1.2, "{i:?}");
    }

    #[test]
    fn threads_like_processes_are_no_news() {
        let mut rs = vec![
            result("process", 1, &[100.0, 101.0, 99.0, 100.0]),
            result("process", 2, &[100.0, 101.0, 99.0, 100.0]),
            result("thread", 1, &[100.0, 101.0, 99.0, 100.0]),
            result("thread", 2, &[100.5, 100.0, 99.5, 100.0]),
        ];
        derive(&mut rs);
        assert!(rs.iter().all(|r| r.notes.is_empty()));
        let v = rs[3].params["vs_processes"].as_f64().unwrap();
        assert!((v - 1.0).abs() < 0.02);
    }

    #[test]
    fn a_rate_seen_in_every_repetition_has_an_interval_above_zero() {
        let skewed = [0.003, 0.004, 0.0035, 0.02, 0.003];
        let ci = rate_ci(&skewed).unwrap();
        assert!(ci[0] > 0.0 && ci[0] < 0.004 && ci[1] > 0.004, "{ci:?}");
        // A repetition that saw none: the values' interval, never below 0.
        let ci = rate_ci(&[0.0, 0.0, 0.001]).unwrap();
        assert_eq!(ci[0], 0.0);
    }

    #[test]
    fn a_t_interval_needs_two_values() {
        assert!(mean_ci(&[1.0]).is_none());
        let (m, ci) = mean_ci(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(m, 2.0);
        // t(2) = 4.303, sd 1: ±2.484.
        assert!((ci[1] - 4.484).abs() < 0.01 && (ci[0] + 0.484).abs() < 0.01);
    }
}
