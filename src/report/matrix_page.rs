//! The matrix page: a heatmap of benchmarks by runs, coloured on a diverging scale centred on
//! no change (blue faster, red slower, by the log of the slowdown, full at ×2), cells whose
//! change cannot be told from noise neutral, every number in the cell's tooltip, and a table of
//! all the numbers beside it. Pure: a `Matrix` in, a `Page` out.

use minijinja::context;
use minijinja::value::Serde;
use serde::Serialize;

use super::html::{Page, render};
use super::matrix_views::change_text;
use super::{format_ns, signed_ns};
use crate::analysis::compare::Verdict;
use crate::analysis::matrix::{Cell, Matrix};

#[derive(Debug, Serialize)]
struct HeatCell {
    text: String,
    /// A level shift along the columns starts here.
    shift: bool,
    bg: String,
    fg: String,
    tip: String,
}

#[derive(Debug, Serialize)]
struct HeatRow {
    bench: String,
    cells: Vec<HeatCell>,
}

#[derive(Debug, Serialize)]
struct Number {
    bench: String,
    run: String,
    median: String,
    slowdown: String,
    slowdown_ci: String,
    addition: String,
    addition_ci: String,
    verdict: String,
    class: String,
}

const NEUTRAL: [f64; 3] = [244.0, 244.0, 244.0];
const SLOWER: [f64; 3] = [178.0, 24.0, 43.0];
const FASTER: [f64; 3] = [33.0, 102.0, 172.0];

/// Background and text colour of a cell: neutral unless a change is called; then from neutral
/// toward red or blue by |ln slowdown| / ln 2 (square-rooted, so that a few percent already
/// shows, and never paler than a fifth of the way).
pub fn colours(c: &Cell) -> (String, String) {
    let (end, r) = match (c.verdict, c.slowdown) {
        (Some(Verdict::Slower), Some(r)) => (SLOWER, r),
        (Some(Verdict::Faster), Some(r)) => (FASTER, r),
        _ => return ("#f4f4f4".into(), "#1d2327".into()),
    };
    let t = ((r.ln().abs() / 2f64.ln()).min(1.0)).sqrt().max(0.2);
    let mix = |i: usize| (NEUTRAL[i] + (end[i] - NEUTRAL[i]) * t).round() as u8;
    let fg = if t > 0.55 { "#ffffff" } else { "#1d2327" };
    (
        format!("#{:02x}{:02x}{:02x}", mix(0), mix(1), mix(2)),
        fg.into(),
    )
}

fn interval(ci: Option<[f64; 2]>, f: impl Fn(f64) -> String) -> String {
    ci.map_or("-".into(), |[lo, hi]| format!("[{}, {}]", f(lo), f(hi)))
}

/// The matrix's page (no figure files: the heatmap is the table itself).
/// One cell of the heatmap (column `i` of row `r`), and its line in the table of numbers.
fn heat_cell(
    m: &Matrix,
    r: &crate::analysis::matrix::BenchAcross,
    i: usize,
    c: &Cell,
    numbers: &mut Vec<Number>,
) -> HeatCell {
    let ratio = |x: f64| format!("{x:.3}");
    let col = &m.columns[i];
    let verdict = match (&c.missing, i == m.base, c.verdict) {
        (Some(why), _, _) => why.clone(),
        (None, true, _) => "base".into(),
        (None, false, Some(v)) => v.word().into(),
        (None, false, None) => "no CI".into(),
    };
    let n = Number {
        bench: r.bench.clone(),
        run: col.title.join(", "),
        median: c.median_ns.map_or("-".into(), format_ns),
        slowdown: c.slowdown.map_or("-".into(), ratio),
        slowdown_ci: interval(c.slowdown_ci95, ratio),
        addition: c.addition_ns.map_or("-".into(), signed_ns),
        addition_ci: interval(c.addition_ci95, signed_ns),
        class: verdict.replace(' ', "-"),
        verdict,
    };
    let tip = if i == m.base {
        format!("{} on {} (base): median {}", r.bench, n.run, n.median)
    } else {
        format!(
            "{} on {}: median {}, slowdown {} {}, addition {} {}: {}",
            r.bench,
            n.run,
            n.median,
            n.slowdown,
            n.slowdown_ci,
            n.addition,
            n.addition_ci,
            n.verdict
        )
    };
    numbers.push(n);
    let (bg, fg) = if i == m.base {
        ("#ffffff".into(), "#1d2327".into())
    } else {
        colours(c)
    };
    let shift = m
        .changes
        .iter()
        .any(|x| x.column == i && x.bench == r.bench);
    let tip = if shift {
        format!("{tip}; a level shift along the runs starts here")
    } else {
        tip
    };
    HeatCell {
        shift,
        text: change_text(m, i, c),
        bg,
        fg,
        tip,
    }
}

/// The matrix as a page: a heat map of the changes, the table, the level shifts.
pub fn render_matrix(m: &Matrix) -> Result<Page, String> {
    let mut numbers = Vec::new();
    let rows: Vec<HeatRow> = m
        .rows
        .iter()
        .map(|r| HeatRow {
            bench: r.bench.clone(),
            cells: r
                .cells
                .iter()
                .enumerate()
                .map(|(i, c)| heat_cell(m, r, i, c, &mut numbers))
                .collect(),
        })
        .collect();
    let html = render(
        "matrix.html",
        context! {
                columns => m.columns.iter().map(|c| context! { title => c.title.clone() }).collect::<Vec<_>>(),
                base => m.base,
                base_words => crate::report::matrix_views::base_words(m),
                by => m.by.clone(),
                differs => m.differs.clone(),
                threshold => format!("{:.0}%", m.threshold * 100.0),
                rows => Serde(&rows),
                changes => crate::report::matrix_views::change_lines(m),
                looked => crate::analysis::matrix::looked_for_changes(m),
                projected => crate::report::matrix_views::projected_words(m),
                numbers => Serde(&numbers),
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
    use crate::base::model::RunSummary;
    use crate::effects::store::ResultRow;

    #[test]
    fn called_changes_are_coloured_by_direction_and_the_rest_is_neutral() {
        let mut c = Cell {
            median_ns: Some(110.0),
            slowdown: Some(1.1),
            slowdown_ci95: Some([1.05, 1.15]),
            addition_ns: Some(10.0),
            addition_ci95: Some([5.0, 15.0]),
            verdict: Some(Verdict::Slower),
            missing: None,
            disturbed: false,
            run_to_run: None,
        };
        let (slow, _) = colours(&c);
        c.slowdown = Some(2.5);
        let (very, fg) = colours(&c);
        assert_eq!((very.as_str(), fg.as_str()), ("#b2182b", "#ffffff"));
        assert_ne!(slow, very);
        c.verdict = Some(Verdict::Faster);
        c.slowdown = Some(0.4);
        assert_eq!(colours(&c).0, "#2166ac");
        c.verdict = Some(Verdict::NoChange);
        assert_eq!(colours(&c).0, "#f4f4f4");
    }

    #[test]
    fn the_page_has_a_cell_and_a_tooltip_per_benchmark_and_run_and_escapes_names() {
        let runs: Vec<RunSummary> = (1..=2)
            .map(|id| RunSummary {
                id,
                started_at: format!("2026-11-0{id}T00:00:00Z"),
                label: Some(format!("<b>{id}</b>")),
                host: None,
                kernel: None,
                wrapper: None,
                benchmarks: 1,
                env_key: None,
            })
            .collect();
        let row = |m: f64| ResultRow {
            bench: "syscall/getpid".into(),
            status: "ok".into(),
            median: Some(m),
            ci_lo: Some(m * 0.99),
            ci_hi: Some(m * 1.01),
            samples: 10,
            disturbed: false,
            exit_witness_ns: None,
            speed_witness_ns: None,
        };
        let m = crate::analysis::matrix::build(
            &runs,
            &[(1, row(100.0)), (2, row(150.0))],
            0,
            &[],
            0.02,
            None,
        );
        let page = render_matrix(&m).unwrap();
        assert!(page.html.contains("+50.0%"), "{}", page.html);
        assert_eq!(page.html.matches("class=\"cell\"").count(), 2);
        assert!(page.html.contains("slowdown 1.500 [1.47"));
        assert!(!page.html.contains("<b>1</b>") && page.html.contains("&lt;b&gt;1"));
    }
}
