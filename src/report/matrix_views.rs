//! The matrix's views: the terminal table with its legend, Markdown, CSV, and the words of a
//! cell and of the change points along the columns (the heatmap page is `matrix_page`). The
//! matrix itself, its cells and their statistics, is `crate::analysis::matrix`.

use crate::analysis::compare::Verdict;
use crate::analysis::matrix::{Cell, Matrix, looked_for_changes};

/// One line per change point: the benchmark, where, how much, and what differed.
pub fn change_lines(m: &Matrix) -> Vec<String> {
    use crate::report::{differences_words, shift_words};
    m.changes
        .iter()
        .map(|c| {
            format!(
                "{} at run {}: {}; since run {}: {}",
                c.bench,
                c.run_id,
                shift_words(c.ratio, c.ratio_ci95, c.before_ns, c.after_ns),
                c.previous_run_id,
                differences_words(&c.differs)
            )
        })
        .collect()
}

/// The change points as lines of text ("" when there were too few columns to look).
pub fn changes_text(m: &Matrix) -> String {
    if !looked_for_changes(m) {
        return String::new();
    }
    if m.changes.is_empty() {
        return "change points along the columns: none beyond the noise\n".into();
    }
    let mut out = String::from("change points along the columns:\n");
    for line in change_lines(m) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// A cell as the terminal shows it: the base's median; a change as its signed percentage with
/// the CI's half-width in points and the addition; "~" (benchstat's mark) for no change beyond
/// the band, before the change measured and the half-width ("~+1.2% ±3.0"); "?" without a CI; the status word when not measured.
pub fn cell_text(m: &Matrix, col: usize, c: &Cell) -> String {
    let text = change_text(m, col, c);
    match (c.verdict, c.addition_ns) {
        (Some(Verdict::Slower | Verdict::Faster), Some(add)) if col != m.base => {
            format!("{text} ({})", crate::report::signed_ns(add))
        }
        _ => text,
    }
}

/// `cell_text` without the addition (what a heatmap cell has room for).
pub fn change_text(m: &Matrix, col: usize, c: &Cell) -> String {
    if let Some(why) = &c.missing {
        return why.clone();
    }
    if col == m.base {
        return c.median_ns.map_or("-".into(), crate::report::format_ns);
    }
    let (Some(r), Some([lo, hi])) = (c.slowdown, c.slowdown_ci95) else {
        return match c.slowdown {
            Some(r) => format!("? {:+.1}%", (r - 1.0) * 100.0),
            None => "?".into(),
        };
    };
    let half = (hi - lo) / 2.0 * 100.0;
    match c.verdict {
        Some(Verdict::Slower | Verdict::Faster) => {
            format!("{:+.1}% ±{half:.1}", (r - 1.0) * 100.0)
        }
        // Within the band or undecided: still the change measured, marked "~".
        _ => format!("~{:+.1}% ±{half:.1}", (r - 1.0) * 100.0),
    }
}

/// The matrix as a terminal table with a legend, every column, nothing wrapped.
pub fn render_table(m: &Matrix, color: bool) -> String {
    let all: Vec<usize> = (0..m.columns.len()).collect();
    with_legend(m, &table_of(m, color, &all).to_string(), usize::MAX)
}

/// The matrix as `oscost matrix` prints it: the table within 100 columns (the base and the
/// latest columns that fit) unless `wide`, the lines under it wrapped at `width` (a
/// terminal's, or 100 in a pipe).
pub fn render_fitted(m: &Matrix, color: bool, width: usize, wide: bool) -> String {
    // The table fits 100 columns, as a run's does; the lines under it the terminal's width.
    let fits = crate::report::table::TABLE_COLUMNS;
    let mut shown: Vec<usize> = (0..m.columns.len()).collect();
    let mut text = table_of(m, color, &shown).to_string();
    let widest = |t: &str| t.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    while !wide && widest(&text) > fits && shown.len() > 2 {
        // The oldest column other than the base gives way first.
        let Some(k) = shown.iter().position(|&c| c != m.base) else {
            break;
        };
        shown.remove(k);
        text = table_of(m, color, &shown).to_string();
    }
    let left_out = m.columns.len() - shown.len();
    if left_out > 0 {
        text.push_str(&format!(
            "\n{}",
            crate::report::table::wrap(
                &format!(
                    "{left_out} of {} columns not shown, the oldest but the base (the table fits \
                     {fits} columns): --wide prints every column; --csv, --markdown and --json \
                     keep them all",
                    m.columns.len()
                ),
                width,
                4
            )
        ));
    }
    with_legend(m, &text, width)
}

/// `table` with the change points, the odd runs and the legend under it, each line wrapped at
/// `width`.
fn with_legend(m: &Matrix, table: &str, width: usize) -> String {
    let legend = if m.by.is_some() {
        group_legend(m)
    } else {
        run_legend(m)
    };
    let projected = projected_words(m).map_or(String::new(), |w| format!("{w}.\n"));
    let under = format!(
        "{}{}{projected}{legend}",
        crate::report::printable(&changes_text(m)),
        odd_runs_text(m)
    );
    let mut out = format!("{table}\n");
    for line in under.lines() {
        out.push_str(&crate::report::table::wrap(line, width, 4));
        out.push('\n');
    }
    out
}

/// The matrix's columns `shown` (indices into `m.columns`) as a terminal table.
fn table_of(m: &Matrix, color: bool, shown: &[usize]) -> comfy_table::Table {
    use comfy_table::{Cell as TCell, CellAlignment, Color};
    let mut header = vec![TCell::new("benchmark")];
    for &i in shown {
        let mut title = m.columns[i].title.join("\n");
        if i == m.base {
            title.push_str("\n(base)");
        }
        header.push(TCell::new(title));
    }
    let learned = m.rows.iter().any(|r| r.run_to_run.is_some());
    if learned {
        header.push(TCell::new(if m.by.is_some() {
            "run to run\n(base group)"
        } else {
            "run to run\n(base's)"
        }));
    }
    let mut t = crate::report::plain_table(color, header);
    for r in &m.rows {
        let mut line = vec![TCell::new(crate::report::printable(&r.bench))];
        for &i in shown {
            let Some(c) = r.cells.get(i) else { continue };
            let mut cell = TCell::new(cell_text(m, i, c));
            if color {
                cell = match c.verdict {
                    Some(Verdict::Slower) => cell.fg(Color::Red),
                    Some(Verdict::Faster) => cell.fg(Color::Green),
                    _ => cell,
                };
            }
            line.push(cell);
        }
        if learned {
            line.push(TCell::new(r.run_to_run.map_or("?".into(), |x| {
                format!("±{:.1}% ({})", x.percent, x.runs)
            })));
        }
        t.add_row(line);
    }
    for i in 1..=shown.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// What the projection to one exit level did among the matrix's cells (runs measured apart,
/// `run_to_run::judge_apart`), in words; `None` where no cell was projected.
pub fn projected_words(m: &Matrix) -> Option<String> {
    let terms: Vec<_> = m
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().filter_map(|c| c.run_to_run))
        .collect();
    crate::report::comparison::projection_words(&terms, "cells")
}

/// The runs at another machine speed, a line each.
pub fn odd_runs_text(m: &Matrix) -> String {
    m.odd_runs
        .iter()
        .map(|o| {
            format!(
                "run {}: every benchmark x{:.3} against the {} other runs of its environment \
                 ({} of {} moved with it): the machine ran at another speed; its cells are \
                 judged with that factor taken out, so only a benchmark that moved further is \
                 called\n",
                o.run_id, o.factor, o.against, o.moved, o.of
            )
        })
        .collect()
}

/// The base column as the legends name it: "run 12", or a group's key, value and runs.
pub fn base_words(m: &Matrix) -> String {
    let base = &m.columns[m.base];
    if base.runs.is_empty() {
        return format!("run {}", base.run_id);
    }
    let ids: Vec<String> = base.runs.iter().map(i64::to_string).collect();
    format!("{} (runs {})", base.title[0], ids.join(", "))
}

fn run_legend(m: &Matrix) -> String {
    format!(
        "base: {} (medians shown); other cells: change of the median against it, ±half \
the 95% CI in percentage points, (the addition); ~ no change beyond ±{:.0}% could be told from \
noise; ? no change called: a run without a CI, or runs measured apart with no run-to-run \
spread known for either environment (fewer than 3 stored runs of the same host, kernel, \
wrapper, CPU, mitigations, THP, boot parameters, kernel settings, confinement and oscost version: run more, or use `oscost \
ab` if the change can be wrapped). Runs measured apart: \
each interval adds the run-to-run spread learned from the store (the last column: the \
base's environment, from that many runs).{}",
        base_words(m),
        m.threshold * 100.0,
        if m.differs.is_empty() {
            " The runs differ in nothing recorded: columns are titled by start time.".to_string()
        } else {
            format!(" Columns differ in: {}.", m.differs.join(", "))
        }
    )
}

fn group_legend(m: &Matrix) -> String {
    format!(
        "columns: groups of runs by {}; base: {} (its level shown: the geometric mean of its \
runs' medians); other cells: change of a group's level against it, ±half the 95% CI in \
percentage points, (the addition). The interval comes from how the runs of each group \
scatter (Welch's t on their log-medians, never narrower than one run's own CI), so the \
host's drift between runs measured apart is in it; ~ no change beyond ±{:.0}% could be told \
from that scatter; ? a group of one run (no scatter to judge by: measure 2 more, e.g. \
`oscost run --runs 3`). The last column: the spread of the base group's runs beyond their \
own CIs.",
        m.by.as_deref().unwrap_or("?"),
        base_words(m),
        m.threshold * 100.0
    )
}

/// The matrix as a Markdown table (the terminal's cells), with the legend under it.
pub fn render_markdown(m: &Matrix) -> String {
    let esc = |s: &str| crate::report::printable(s).replace('|', "\\|");
    let mut out = String::from("| benchmark |");
    for (i, c) in m.columns.iter().enumerate() {
        let base = if i == m.base { " (base)" } else { "" };
        out.push_str(&format!(" {}{base} |", esc(&c.title.join(", "))));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(m.columns.len()));
    out.push('\n');
    for r in &m.rows {
        out.push_str(&format!("| {} |", esc(&r.bench)));
        for (i, c) in r.cells.iter().enumerate() {
            out.push_str(&format!(" {} |", esc(&cell_text(m, i, c))));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "\nBase: {}. A cell is the change of the median against it, ± half the 95% CI in \
percentage points, and the addition; ~ no change beyond ±{:.0}%; ? no CI.\n",
        base_words(m),
        m.threshold * 100.0
    ));
    out
}

/// One CSV line per benchmark and run.
pub fn render_csv(m: &Matrix) -> String {
    let f = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    let q = crate::base::text::csv_field;
    let mut out = String::from(
        "bench,run_id,column,is_base,median_ns,slowdown,slowdown_lo,slowdown_hi,addition_ns,addition_lo,addition_hi,verdict,missing\n",
    );
    for r in &m.rows {
        for (i, c) in r.cells.iter().enumerate() {
            let col = &m.columns[i];
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                q(&r.bench),
                col.run_id,
                q(&col.title.join(" / ")),
                i == m.base,
                f(c.median_ns),
                f(c.slowdown),
                f(c.slowdown_ci95.map(|x| x[0])),
                f(c.slowdown_ci95.map(|x| x[1])),
                f(c.addition_ns),
                f(c.addition_ci95.map(|x| x[0])),
                f(c.addition_ci95.map(|x| x[1])),
                c.verdict.map_or("", |v| v.word()),
                q(c.missing.as_deref().unwrap_or(""))
            ));
        }
    }
    out
}
