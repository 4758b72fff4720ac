//! The history page of one benchmark: its medians across runs with their CIs, the level of
//! each segment between change points drawn over them, the change points named with what
//! differed, and a table of every run. Pure: the points and changes in, a `Page` out.

use minijinja::context;
use minijinja::value::Serde;
use serde::Serialize;

use super::format_ns;
use super::html::{Page, render};
use super::plot::{self, Figure, Point};
use crate::analysis::changes::LevelShift;
use crate::base::model::HistoryPoint;

#[derive(Debug, Serialize)]
struct RunRow {
    run: i64,
    started: String,
    label: String,
    wrapper: String,
    median: String,
    ci: String,
    delta: String,
    shift: bool,
}

/// The figure: medians with CI bands against the run's position, and the segment levels.
fn figure(bench: &str, points: &[HistoryPoint], changes: &[LevelShift]) -> Option<Figure<'static>> {
    let measured: Vec<Point> = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let y = p.median?;
            Some(Point {
                x: (i + 1) as f64,
                y,
                lo: p.ci_lo.filter(|v| v.is_finite()).unwrap_or(y),
                hi: p.ci_hi.filter(|v| v.is_finite()).unwrap_or(y),
            })
        })
        .collect();
    if measured.len() < 2 {
        return None;
    }
    // Piecewise constant levels: the median of each segment, at its first and last run.
    let mut bounds: Vec<usize> = changes.iter().map(|c| c.index).collect();
    bounds.insert(0, 0);
    bounds.push(points.len());
    let mut levels = Vec::new();
    for w in bounds.windows(2) {
        let seg: Vec<f64> = points[w[0]..w[1]].iter().filter_map(|p| p.median).collect();
        if seg.is_empty() {
            continue;
        }
        let y = crate::base::stats::median(&seg);
        for x in [w[0] + 1, w[1]] {
            levels.push(Point {
                x: x as f64,
                y,
                lo: y,
                hi: y,
            });
        }
    }
    Some(Figure::Curves {
        title: format!("{bench} across runs (oldest first)"),
        x_desc: "run, in order".into(),
        y_desc: "per operation".into(),
        log2_x: false,
        series: vec![
            ("median, 95% CI".into(), measured),
            ("level between change points".into(), levels),
        ],
        marks: vec![],
    })
}

/// The page. `change_lines` are the changes as `history --changes` words them.
pub fn render_history(
    bench: &str,
    points: &[HistoryPoint],
    changes: &[LevelShift],
    change_lines: &[String],
    selection: &str,
) -> Result<Page, String> {
    let first = points.iter().find_map(|p| p.median);
    let rows: Vec<RunRow> = points
        .iter()
        .enumerate()
        .map(|(i, p)| RunRow {
            run: p.run_id,
            started: p.started_at.clone(),
            label: p.label.clone().unwrap_or_default(),
            wrapper: p.wrapper.clone().unwrap_or_default(),
            median: p.median.map_or_else(|| p.status.clone(), format_ns),
            ci: match (p.ci_lo, p.ci_hi) {
                (Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() => {
                    format!("{} – {}", format_ns(lo), format_ns(hi))
                }
                _ => "-".into(),
            },
            delta: match (first, p.median) {
                (Some(f), Some(m)) if f > 0.0 => format!("{:+.1}%", (m / f - 1.0) * 100.0),
                _ => "-".into(),
            },
            shift: changes.iter().any(|c| c.index == i),
        })
        .collect();
    let svg = match figure(bench, points, changes) {
        Some(f) => Some(plot::svg(&f)?),
        None => None,
    };
    let html = render(
        "history.html",
        context! {
                bench => bench,
                rows => Serde(&rows),
                changes => change_lines.to_vec(),
                figure => svg,
                first => points.first().map(|p| p.started_at.clone()),
                last => points.last().map(|p| p.started_at.clone()),
                selection => selection,
        },
    )?;
    Ok(Page {
        html,
        files: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_marks_the_shift_and_lists_every_run() {
        let noise = [
            0.0, 0.8, -0.6, 0.3, -0.9, 0.5, -0.2, 0.7, -0.4, 0.1, -0.7, 0.6,
        ];
        let points: Vec<HistoryPoint> = (0..12)
            .map(|i| HistoryPoint {
                run_id: i + 1,
                started_at: format!("2026-11-{:02}T00:00:00Z", i + 1),
                label: None,
                wrapper: None,
                status: "ok".into(),
                median: Some(if i < 6 { 100.0 } else { 110.0 } + noise[i as usize]),
                ci_lo: Some(98.0),
                ci_hi: Some(112.0),
                disturbed: false,
                exit_witness_ns: None,
                speed_witness_ns: None,
            })
            .collect();
        let series: Vec<f64> = points.iter().filter_map(|p| p.median).collect();
        let changes = crate::analysis::changes::find_changes(&series);
        assert_eq!(changes.len(), 1);
        let page = render_history(
            "syscall/getpid",
            &points,
            &changes,
            &["at run 7".into()],
            "",
        )
        .unwrap();
        assert_eq!(page.html.matches("class=\"shift\"").count(), 1);
        assert!(page.html.contains("<svg") && page.html.contains("at run 7"));
        assert!(page.html.contains("+9.8%"), "{}", page.html);
    }
}
