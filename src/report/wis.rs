//! will-it-scale's own table, for `oscost scale`: `tasks,processes,processes_idle,threads,
//! threads_idle,linear` with a `0,0,100,0,100,0` first row, as its runtest.py prints it, so
//! that scripts and plots made for will-it-scale read oscost's numbers. `processes` and
//! `threads` are operations per second of all tasks together (runtest.py's "average"),
//! `*_idle` the CPUs' idle percent while they ran, `linear` N times the better one-task
//! figure. CIs, efficiencies and anything not measured go to a second text, for stderr.

use crate::base::model::{BenchResult, Run, Status};

fn copies(r: &BenchResult) -> Option<u64> {
    r.params.get("copies")?.as_u64()
}

fn mode(r: &BenchResult) -> Option<&str> {
    r.params.get("mode")?.as_str()
}

fn measured(r: Option<&BenchResult>) -> Option<&BenchResult> {
    r.filter(|r| r.status == Status::Ok && r.stats.is_some())
}

fn num(r: &BenchResult, k: &str) -> Option<f64> {
    r.params.get(k)?.as_f64()
}

/// (stdout: the table, stderr: each point's CI and efficiency, and what was not measured).
pub fn table(run: &Run, bench: &str) -> (String, String) {
    let mine: Vec<&BenchResult> = run
        .results
        .iter()
        .filter(|r| r.id.starts_with(&format!("{bench}/")))
        .collect();
    let mut tasks: Vec<u64> = mine.iter().filter_map(|r| copies(r)).collect();
    tasks.sort_unstable();
    tasks.dedup();
    let find = |m: &str, n: u64| {
        mine.iter()
            .copied()
            .find(|r| mode(r) == Some(m) && copies(r) == Some(n))
    };
    let total = |r: Option<&BenchResult>| measured(r).and_then(|r| num(r, "ops_per_s_total"));
    let idle = |r: Option<&BenchResult>| measured(r).and_then(|r| num(r, "idle_pct"));
    let one = [total(find("process", 1)), total(find("thread", 1))]
        .into_iter()
        .flatten()
        .fold(f64::NAN, f64::max);
    let mut out = String::from("tasks,processes,processes_idle,threads,threads_idle,linear\n");
    out.push_str("0,0,100,0,100,0\n");
    let mut notes = String::new();
    for n in tasks {
        let (p, t) = (find("process", n), find("thread", n));
        // will-it-scale prints -1 for a run that gave no average.
        let ops = |x: Option<f64>| x.map_or("-1".to_string(), |v| format!("{}", v.round() as u64));
        let pct = |x: Option<f64>| x.map_or("-1".to_string(), |v| format!("{v:.2}"));
        let linear = if one.is_finite() {
            format!("{}", (one * n as f64).round() as u64)
        } else {
            "0".into()
        };
        out.push_str(&format!(
            "{n},{},{},{},{},{linear}\n",
            ops(total(p)),
            pct(idle(p)),
            ops(total(t)),
            pct(idle(t))
        ));
        for r in [p, t].into_iter().flatten() {
            notes.push_str(&point_note(r));
        }
    }
    (out, notes)
}

fn point_note(r: &BenchResult) -> String {
    let Some(s) = r.stats.as_ref().filter(|_| r.status == Status::Ok) else {
        let why = match &r.status {
            Status::Skipped { reason } => format!("skipped: {reason}"),
            Status::Failed { reason } => format!("failed: {reason}"),
            _ => "not measured".into(),
        };
        return format!("{}: {why}\n", r.id);
    };
    let mut line = format!(
        "{}: {:.1} ns per operation per task (95% CI {:.1}-{:.1}), {:.0} ops/s per task",
        r.id,
        s.median,
        s.ci95[0],
        s.ci95[1],
        num(r, "ops_per_s_per_task").unwrap_or(f64::NAN)
    );
    if num(r, "efficiency").is_some() {
        let e = super::scaling::with_ci(Some(r), "efficiency", "");
        line.push_str(&format!(", efficiency {e}"));
    }
    if let Some(i) = num(r, "ipis_per_op") {
        line.push_str(&format!(", {i:.3} IPIs/op"));
    }
    if !r.disturbed.flag.is_empty() {
        line.push_str(&format!(" [{}]", r.disturbed.flag.join("; ")));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;
    use serde_json::json;

    fn point(mode: &str, n: u64, total: f64, idle: f64) -> BenchResult {
        let mut r = testdata::result(
            &format!("scale/getppid/{mode}-{n}"),
            vec![1.0e9 / total * n as f64; 9],
        );
        r.params.insert("mode".into(), json!(mode));
        r.params.insert("copies".into(), json!(n));
        r.params.insert("ops_per_s_total".into(), json!(total));
        r.params.insert("idle_pct".into(), json!(idle));
        r
    }

    #[test]
    fn the_table_is_will_it_scales() {
        let mut run = testdata::run();
        run.results = vec![
            point("process", 1, 5_000_000.0, 50.0),
            point("process", 2, 9_900_000.0, 0.5),
            point("thread", 1, 5_100_000.0, 50.2),
            point("thread", 2, 9_800_000.0, 0.4),
        ];
        run.results.push(BenchResult::not_measured(
            "scale/other/process-1",
            "d",
            Status::Ok,
        ));
        let (out, notes) = table(&run, "scale/getppid");
        assert_eq!(
            out,
            "tasks,processes,processes_idle,threads,threads_idle,linear\n0,0,100,0,100,0\n\
             1,5000000,50.00,5100000,50.20,5100000\n2,9900000,0.50,9800000,0.40,10200000\n"
        );
        assert_eq!(notes.lines().count(), 4);
    }

    #[test]
    fn a_point_not_measured_is_minus_one_and_said() {
        let mut skipped = point("thread", 2, 1.0, 0.0);
        skipped.status = Status::Skipped {
            reason: "2 copies need 2 CPUs".into(),
        };
        let mut run = testdata::run();
        run.results = vec![point("process", 1, 100.0, 0.0), skipped];
        let (out, notes) = table(&run, "scale/getppid");
        assert!(out.ends_with("2,-1,-1,-1,-1,200\n"), "{out}");
        assert!(notes.contains("skipped: 2 copies need 2 CPUs"));
    }
}
