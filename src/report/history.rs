//! `oscost history`: the stored runs, and one benchmark across them with its trend (a
//! sparkline, the change from the previous and from the first run).

use super::format_ns;
use crate::base::model::{HistoryPoint, RunSummary};

fn table(color: bool, headers: Vec<&str>) -> comfy_table::Table {
    super::plain_table(color, headers)
}

/// The stored runs as a terminal table, oldest first.
pub fn runs(list: &[RunSummary], color: bool) -> String {
    if list.is_empty() {
        return "no runs stored yet (`oscost run` saves one)\n".into();
    }
    let mut t = table(
        color,
        vec![
            "run",
            "started",
            "label",
            "host",
            "kernel",
            "wrapper",
            "benchmarks",
        ],
    );
    for r in list {
        let o = |v: &Option<String>| {
            v.as_deref()
                .map_or("-".into(), |s| super::printable(s).into_owned())
        };
        t.add_row(vec![
            r.id.to_string(),
            r.started_at.clone(),
            o(&r.label),
            o(&r.host),
            o(&r.kernel),
            o(&r.wrapper),
            r.benchmarks.to_string(),
        ]);
    }
    format!("{t}\n")
}

/// Whether two runs' CIs of a benchmark overlap (false when either has none).
fn cis_overlap(a: &HistoryPoint, b: &HistoryPoint) -> bool {
    match (a.ci_lo, a.ci_hi, b.ci_lo, b.ci_hi) {
        (Some(a_lo), Some(a_hi), Some(b_lo), Some(b_hi)) => a_lo <= b_hi && b_lo <= a_hi,
        _ => false,
    }
}

/// Eight-level bars of `values` between their min and max.
pub fn sparkline(values: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let (lo, hi) = crate::base::stats::extent(finite.iter().copied());
    values
        .iter()
        .map(|&v| {
            if !v.is_finite() {
                ' '
            } else if hi <= lo {
                BARS[3]
            } else {
                BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize]
            }
        })
        .collect()
}

/// `values` in at most `width` columns: each column the median of its share of the runs
/// (NaN when none of them was measured), so 200 runs fit an 80-column terminal.
pub fn fit(values: &[f64], width: usize) -> Vec<f64> {
    let width = width.max(1);
    if values.len() <= width {
        return values.to_vec();
    }
    let per = values.len().div_ceil(width);
    values
        .chunks(per)
        .map(|c| {
            let v: Vec<f64> = c.iter().copied().filter(|x| x.is_finite()).collect();
            if v.is_empty() {
                f64::NAN
            } else {
                crate::base::stats::median(&v)
            }
        })
        .collect()
}

/// A benchmark across runs: the table, then its trend as a sparkline that fits `columns`.
pub fn trend(bench: &str, points: &[HistoryPoint], color: bool, columns: usize) -> String {
    if points.is_empty() {
        return format!("no stored run has {bench}\n");
    }
    let (t, said_noise) = trend_table(points, color);
    let medians: Vec<f64> = points
        .iter()
        .map(|p| p.median.unwrap_or(f64::NAN))
        .collect();
    let measured: Vec<f64> = medians.iter().copied().filter(|m| m.is_finite()).collect();
    let mut out = format!("{bench} across {} run(s)\n{t}\n", points.len());
    if said_noise {
        out.push_str(
            "~ the two runs' 95% CIs overlap: the change cannot be told from noise (as benchstat \
             marks it)\n",
        );
    }
    // "trend " and the latest-vs-first sentence take about 50 columns.
    let room = columns.saturating_sub(50).max(10);
    let line = fit(&medians, room);
    let per = medians.len().div_ceil(line.len().max(1));
    let note = if per > 1 {
        format!(" ({per} runs per column)")
    } else {
        String::new()
    };
    out.push_str(&format!("trend {}{note}", sparkline(&line)));
    if let (Some(first), Some(last)) = (measured.first(), measured.last())
        && measured.len() > 1
        && *first != 0.0
    {
        out.push_str(&format!(
            "  latest {} vs first {}: {:+.1}%",
            format_ns(*last),
            format_ns(*first),
            (last / first - 1.0) * 100.0
        ));
    }
    out.push('\n');
    out
}

/// One row per run, and whether a change was marked as within the two runs' noise.
fn trend_table(points: &[HistoryPoint], color: bool) -> (comfy_table::Table, bool) {
    let mut t = table(
        color,
        vec![
            "run",
            "started",
            "label",
            "wrapper",
            "median",
            "95% CI",
            "vs previous",
            "flag",
        ],
    );
    let mut prev: Option<&HistoryPoint> = None;
    let mut said_noise = false;
    let o = |v: &Option<String>| {
        v.as_deref()
            .map_or("-".into(), |s| super::printable(s).into_owned())
    };
    for p in points {
        let change = match (prev.and_then(|q| q.median), p.median) {
            (Some(a), Some(b)) if a != 0.0 => {
                let pct = format!("{:+.1}%", (b / a - 1.0) * 100.0);
                if prev.is_some_and(|q| cis_overlap(q, p)) {
                    said_noise = true;
                    format!("~ {pct}")
                } else {
                    pct
                }
            }
            _ => "-".into(),
        };
        let flag = if p.status != "ok" {
            p.status.clone()
        } else if p.disturbed {
            "disturbed".into()
        } else {
            String::new()
        };
        t.add_row(vec![
            p.run_id.to_string(),
            p.started_at.clone(),
            o(&p.label),
            o(&p.wrapper),
            p.median.map_or("-".into(), format_ns),
            ci_text(p.ci_lo, p.ci_hi),
            change,
            flag,
        ]);
        if p.median.is_some() {
            prev = Some(p);
        }
    }
    (t, said_noise)
}

fn ci_text(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(a), Some(b)) => format!("{}..{}", format_ns(a), format_ns(b)),
        _ => "-".into(),
    }
}

/// One benchmark's history as groups of runs (`history ID --by KEY`): each group's level (the
/// geometric mean of its runs' medians) with the 95% interval its runs' scatter gives, the
/// spread between its runs beyond their own CIs, and its change against the first group,
/// judged as `matrix --by` judges it (`threshold`: the no-change band, 0.02 = ±2%).
pub fn groups(
    bench: &str,
    key: &str,
    groups: &[(String, Vec<HistoryPoint>)],
    threshold: f64,
    color: bool,
) -> String {
    use crate::analysis::run_to_run::{RunLevel, estimate, group_difference, group_level};
    let levels = |ps: &[HistoryPoint]| -> Vec<RunLevel> {
        ps.iter()
            .filter(|p| p.status == "ok")
            .filter_map(|p| {
                Some(RunLevel {
                    median: p.median.filter(|m| *m > 0.0)?,
                    ci95: [p.ci_lo?, p.ci_hi?],
                })
            })
            .collect()
    };
    let name = |v: &str| {
        if v.is_empty() {
            "none".to_string()
        } else {
            super::printable(v).into_owned()
        }
    };
    let base_name = groups.first().map_or(String::new(), |(v, _)| name(v));
    let against = format!("against {key} {base_name}");
    let mut t = table(
        color,
        vec![key, "runs", "level", "95% CI", "run to run", &against],
    );
    let base = groups.first().map(|(_, ps)| levels(ps)).unwrap_or_default();
    for (i, (value, ps)) in groups.iter().enumerate() {
        let lv = levels(ps);
        let level = group_level(&lv);
        let change = match (i, group_difference(&base, &lv)) {
            (0, _) => "base".to_string(),
            (_, Some(d)) => {
                let (v, _) = crate::analysis::compare::verdict(d.ratio_ci95, d.ratio, threshold);
                let pct = |r: f64| (r - 1.0) * 100.0;
                format!(
                    "{:+.1}% [{:+.1}, {:+.1}] {}",
                    pct(d.ratio),
                    pct(d.ratio_ci95[0]),
                    pct(d.ratio_ci95[1]),
                    v.word()
                )
            }
            (_, None) => "? (a group needs 2 runs with a CI)".into(),
        };
        t.add_row(vec![
            name(value),
            format!("{} of {}", lv.len(), ps.len()),
            level.map_or("-".into(), |(l, _)| format_ns(l)),
            level.map_or("-".into(), |(_, [lo, hi])| ci_text(Some(lo), Some(hi))),
            estimate(&lv).map_or("?".into(), |s| format!("±{:.1}% ({})", s.percent(), s.runs)),
            change,
        ]);
    }
    format!(
        "{bench} by {key}: groups of runs measured apart\n{t}\nlevel: geometric mean of the \
group's runs' medians; 95% CI: from how its runs scatter (t on their log-medians, never narrower \
than one run's own CI); run to run: that scatter beyond the runs' own CIs (3 runs needed); a \
change is called when its CI excludes x1 and it lies beyond ±{:.0}%.\n",
        threshold * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_history_fits_the_terminal() {
        let v: Vec<f64> = (0..200).map(f64::from).collect();
        let f = fit(&v, 30);
        assert!(f.len() <= 30 && f.len() >= 25, "{}", f.len());
        assert_eq!(f[0], 3.0, "median of the first 7");
        assert_eq!(fit(&v[..10], 30), v[..10].to_vec());
        assert!(fit(&[f64::NAN, f64::NAN, 1.0], 1)[0] == 1.0);
    }

    #[test]
    fn sparkline_spans_min_to_max() {
        assert_eq!(sparkline(&[1.0, 2.0, 3.0]), "▁▅█");
        assert_eq!(sparkline(&[5.0, 5.0]), "▄▄");
        assert_eq!(sparkline(&[1.0, f64::NAN, 8.0]), "▁ █");
    }

    #[test]
    fn trend_shows_changes_and_first_to_last() {
        let p = |id, m: Option<f64>, status: &str| HistoryPoint {
            run_id: id,
            started_at: format!("t{id}"),
            label: None,
            wrapper: None,
            status: status.into(),
            median: m,
            ci_lo: m,
            ci_hi: m,
            disturbed: false,
            exit_witness_ns: None,
            speed_witness_ns: None,
        };
        let text = trend(
            "syscall/getpid",
            &[
                p(1, Some(100.0), "ok"),
                p(2, None, "failed"),
                p(3, Some(150.0), "ok"),
            ],
            false,
            80,
        );
        assert!(
            text.contains("+50.0%") && !text.contains("~ +50.0%"),
            "{text}"
        );
        assert!(text.contains("failed"));
        assert!(text.contains("latest 150 ns vs first 100 ns: +50.0%"));
        assert!(!text.contains("cannot be told from noise"), "{text}");
        // Overlapping CIs: the change is marked as noise, and the mark explained once.
        let wide = |id, m: f64| HistoryPoint {
            ci_lo: Some(m * 0.8),
            ci_hi: Some(m * 1.2),
            ..p(id, Some(m), "ok")
        };
        let text = trend(
            "syscall/getpid",
            &[wide(1, 100.0), wide(2, 110.0), wide(3, 200.0)],
            false,
            80,
        );
        assert!(text.contains("~ +10.0%"), "{text}");
        assert!(
            text.contains(" +81.8%") && !text.contains("~ +81.8%"),
            "{text}"
        );
        assert!(text.contains("\n~ the two runs' 95% CIs overlap"), "{text}");
    }
}
