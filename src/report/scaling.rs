//! The scaling summary of a run's scale/ results: per case, at the largest number of copies
//! measured, each mode's efficiency against one copy (with its CI), the threads' cost against
//! the processes', and the IPIs per operation that explain a shared address space's cost.
//! The run page shows it as its own section; the table (`run`, `show`) prints it under its
//! rows when scale/ results are present.

use serde::Serialize;

use crate::base::model::{BenchResult, Run, Status};

/// One case at its largest number of copies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingLine {
    /// The case's id (`scale/getppid`).
    pub case: String,
    /// will-it-scale's test.
    pub wis: String,
    /// The copies this line is at.
    pub copies: u64,
    /// Processes' efficiency against one process, "0.99 (0.97-1.01)".
    pub processes: String,
    /// Threads' efficiency against one thread.
    pub threads: String,
    /// Threads' cost over processes' at these copies, "x6.09 (5.23-6.23)".
    pub threads_vs_processes: String,
    /// IPIs per operation, processes then threads.
    pub ipis: String,
}

fn num(r: &BenchResult, k: &str) -> Option<f64> {
    r.params.get(k)?.as_f64()
}

fn pair(r: &BenchResult, k: &str) -> Option<[f64; 2]> {
    serde_json::from_value(r.params.get(k)?.clone()).ok()
}

/// A parameter `k` of `r` with its CI (`{k}_ci95`): "0.99 (0.97-1.01)", or "-".
pub(super) fn with_ci(r: Option<&BenchResult>, k: &str, prefix: &str) -> String {
    let Some(r) = r else {
        return "-".into();
    };
    match (num(r, k), pair(r, &format!("{k}_ci95"))) {
        (Some(v), Some([lo, hi])) => format!("{prefix}{v:.2} ({lo:.2}-{hi:.2})"),
        (Some(v), None) => format!("{prefix}{v:.2}"),
        _ => "-".into(),
    }
}

/// The summary, one line per scale/ case of the run, in run order.
pub fn lines(run: &Run) -> Vec<ScalingLine> {
    let scale: Vec<&BenchResult> = run
        .results
        .iter()
        .filter(|r| r.family == "scale" && r.status == Status::Ok && r.stats.is_some())
        .collect();
    let case_of = |r: &BenchResult| r.id.rsplit_once('/').map(|(c, _)| c.to_string());
    let mut cases: Vec<String> = scale.iter().filter_map(|r| case_of(r)).collect();
    cases.dedup();
    let mut out = Vec::new();
    for case in cases {
        let mine: Vec<&BenchResult> = scale
            .iter()
            .copied()
            .filter(|r| case_of(r).as_deref() == Some(case.as_str()))
            .collect();
        let Some(n) = mine
            .iter()
            .filter_map(|r| r.params.get("copies")?.as_u64())
            .max()
        else {
            continue;
        };
        let at = |mode: &str| {
            mine.iter().copied().find(|r| {
                r.params.get("mode").and_then(|v| v.as_str()) == Some(mode)
                    && r.params.get("copies").and_then(|v| v.as_u64()) == Some(n)
            })
        };
        let (p, t) = (at("process"), at("thread"));
        let ipi = |r: Option<&BenchResult>| {
            r.and_then(|r| num(r, "ipis_per_op"))
                .map_or("-".into(), |v| format!("{v:.3}"))
        };
        out.push(ScalingLine {
            wis: mine
                .iter()
                .find_map(|r| r.params.get("wis")?.as_str().map(str::to_string))
                .unwrap_or_default(),
            copies: n,
            processes: with_ci(p, "efficiency", ""),
            threads: with_ci(t, "efficiency", ""),
            threads_vs_processes: with_ci(t, "vs_processes", "x"),
            ipis: format!("{} / {}", ipi(p), ipi(t)),
            case,
        });
    }
    out
}

/// The summary as text for the terminal: a heading and one aligned line per case.
pub fn text(run: &Run) -> Option<String> {
    let lines = lines(run);
    if lines.is_empty() {
        return None;
    }
    let name = |l: &ScalingLine| l.case.trim_start_matches("scale/").to_string();
    let w = lines.iter().map(|l| name(l).len()).max().unwrap_or(0);
    // Within 100 columns: the case without its family, efficiencies "0.99 (0.98-1.00)".
    let mut s = format!(
        "scale/ at the most copies: efficiency against one copy (95% CI)\n {:w$}  {:>6}  {:<16}  {:<16}  {:<17}  {}\n",
        "case", "copies", "processes", "threads", "threads/processes", "IPIs/op p / t"
    );
    for l in &lines {
        s.push_str(&format!(
            " {:w$}  {:>6}  {:<16}  {:<16}  {:<17}  {}\n",
            name(l),
            l.copies,
            l.processes,
            l.threads,
            l.threads_vs_processes,
            l.ipis
        ));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;
    use serde_json::json;

    fn point(case: &str, mode: &str, n: u64, eff: f64) -> BenchResult {
        let mut r = testdata::result(&format!("scale/{case}/{mode}-{n}"), vec![100.0; 5]);
        r.params.insert("mode".into(), json!(mode));
        r.params.insert("copies".into(), json!(n));
        r.params.insert("wis".into(), json!("x1"));
        r.params.insert("efficiency".into(), json!(eff));
        r.params
            .insert("efficiency_ci95".into(), json!([eff - 0.01, eff + 0.01]));
        r.params.insert("ipis_per_op".into(), json!(0.5));
        r
    }

    #[test]
    fn one_line_per_case_at_its_most_copies() {
        let mut run = testdata::run();
        let mut t = point("tlb-flush", "thread", 2, 0.16);
        t.params.insert("vs_processes".into(), json!(6.09));
        run.results = vec![
            point("tlb-flush", "process", 1, 1.0),
            point("tlb-flush", "process", 2, 0.99),
            point("tlb-flush", "thread", 1, 1.0),
            t,
            point("getppid", "process", 1, 1.0),
        ];
        let l = lines(&run);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].case, "scale/tlb-flush");
        assert_eq!(l[0].copies, 2);
        assert_eq!(l[0].processes, "0.99 (0.98-1.00)");
        assert_eq!(l[0].threads, "0.16 (0.15-0.17)");
        assert_eq!(l[0].threads_vs_processes, "x6.09");
        assert_eq!(l[1].threads, "-");
        let text = text(&run).unwrap();
        assert_eq!(text.lines().count(), 4);
        let mut none = testdata::run();
        none.results.retain(|r| r.family != "scale");
        assert!(super::text(&none).is_none());
    }
}
