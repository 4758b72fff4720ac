//! lmbench's lat_ctx output, for `oscost ctx`: per working-set size a blank line, then
//! `"size=Sk ovr=X`, then `N cost` per ring size, in microseconds with two decimals, which is
//! what xgraph and lmbench's scripts read. CIs and flags are returned separately (for stderr),
//! so the graph stays parseable. Sizes and counts come from each result's parameters (failed
//! points carry them too), never from parsing ids.

use crate::base::model::{BenchResult, Run, Status};

fn param(r: &BenchResult, k: &str) -> Option<f64> {
    r.params.get(k).and_then(|v| v.as_f64())
}

/// (stdout text, stderr notes).
pub fn lat_ctx(run: &Run) -> (String, String) {
    let mut out = String::new();
    let mut notes = String::new();
    let mut current: Option<u64> = None;
    for r in &run.results {
        let Some(kb) = param(r, "size_kb").map(|v| v as u64) else {
            continue;
        };
        if current != Some(kb) {
            current = Some(kb);
            let ovr = run
                .results
                .iter()
                .filter(|x| param(x, "size_kb").map(|v| v as u64) == Some(kb))
                .find_map(|x| param(x, "overhead_ns"));
            out.push_str(&format!(
                "\n\"size={kb}k ovr={:.2}\n",
                ovr.map_or(f64::NAN, |o| o / 1e3)
            ));
        }
        let n = param(r, "procs").map_or(0, |v| v as u64);
        match (&r.status, &r.stats) {
            (Status::Ok, Some(s)) => {
                out.push_str(&format!("{n} {:.2}\n", s.median / 1e3));
                notes.push_str(&format!(
                    "size={kb}k N={n}: {:.2} us, 95% CI {:.2}-{:.2} us, {} samples{}{}\n",
                    s.median / 1e3,
                    s.ci95[0] / 1e3,
                    s.ci95[1] / 1e3,
                    s.count,
                    if s.median <= 0.0 {
                        " [FLAG: at or below the overhead; lat_ctx would drop this point]"
                    } else {
                        ""
                    },
                    if r.disturbed.is_disturbed() {
                        format!(" [disturbed: {}]", r.disturbed.flag.join("; "))
                    } else {
                        String::new()
                    }
                ));
            }
            (st, _) => notes.push_str(&format!(
                "size={kb}k N={n}: {} ({})\n",
                st.word(),
                st.reason().unwrap_or("no samples")
            )),
        }
    }
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    fn point(n: u64, kb: u64, samples: Vec<f64>) -> BenchResult {
        let mut r = testdata::result(&format!("switch/ring/n{n}-s{kb}k"), samples);
        r.params.insert("procs".into(), n.into());
        r.params.insert("size_kb".into(), kb.into());
        r.params.insert("overhead_ns".into(), 1234.0.into());
        r
    }

    #[test]
    fn prints_lat_ctx_format_and_keeps_points_below_overhead() {
        let mut run = testdata::run();
        run.results = vec![
            point(2, 0, vec![3000.0, 3100.0, 3200.0]),
            point(4, 0, vec![-100.0, -50.0, -10.0]),
            point(2, 16, vec![5000.0]),
        ];
        let (out, notes) = lat_ctx(&run);
        assert_eq!(
            out,
            "\n\"size=0k ovr=1.23\n2 3.10\n4 -0.05\n\n\"size=16k ovr=1.23\n2 5.00\n"
        );
        assert!(notes.contains("size=0k N=4: -0.05 us"));
        assert!(notes.contains("FLAG: at or below the overhead"));
    }
}
