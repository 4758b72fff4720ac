//! The table a person reads: one row per result with median, 95% CI of the median, p99,
//! sample count and a flag (min and events per operation too with `--wide`); the flag's
//! reasons are numbered notes under the table, every line wrapped at the terminal's width so
//! the default fits 100 columns. The rows are built once (`rows`) and drawn as a terminal table
//! here and, with every column, as Markdown in `markdown.rs`.

use crate::base::model::NoteKind;
use comfy_table::{Cell, Color};

use super::format_ns;
use crate::base::model::{BenchResult, Run, Status};
use crate::base::stats::units::{format_rate, three_digits};

/// The columns of a run's text table.
pub const HEADERS: [&str; 8] = [
    "benchmark",
    "median",
    "95% CI",
    "min",
    "p99",
    "samples",
    "events/op",
    "flag",
];

/// The columns a terminal table shows by default (of `HEADERS`): min and events/op are left
/// to `--wide`, so the table fits 100 columns.
const NARROW: [usize; 6] = [0, 1, 2, 4, 5, 7];

/// How a run's table is drawn on a terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// Every departure note, also those the machine explains.
    pub verbose: bool,
    /// Every column (min and events/op too).
    pub wide: bool,
}

/// The width in columns of the terminal stdout is; without one (a pipe, a file) the 100
/// columns the table is fitted to, so every line of a run's output kept in a CI log or a file
/// fits them too (`--json` keeps each note on one line for scripts).
pub fn terminal_width() -> usize {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills a winsize we own; on a non-terminal it fails.
    if unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 20
    {
        return ws.ws_col as usize;
    }
    fit::TABLE_COLUMNS
}

/// `text` wrapped at `width` columns, lines after the first indented by `indent` spaces.
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let room = if out.is_empty() {
            width
        } else {
            width - indent
        };
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
            if !out.is_empty() {
                out.push_str(&" ".repeat(indent));
            }
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !out.is_empty() {
        out.push_str(&" ".repeat(indent));
    }
    out.push_str(&line);
    out
}

/// One row's cells, and whether the row deserves attention.
pub struct TableLine {
    /// The line's cells, in `HEADERS` order.
    pub cells: [String; 8],
    /// The line deserves attention (disturbed, a definition not met).
    pub warn: bool,
}

/// The CI as the distance of its bounds from the median, in percent: "-0.4/+0.6%". Bounds
/// scaled to three digits would mostly print as the median itself; the JSON keeps them exact.
fn ci_text(lo: f64, hi: f64, median: f64) -> String {
    if median == 0.0 || !median.is_finite() {
        return format!("{}..{}", format_ns(lo), format_ns(hi));
    }
    let pct = |x: f64| 100.0 * (x - median) / median.abs();
    let f = |v: f64| {
        let a = v.abs();
        if a >= 10.0 {
            format!("{a:.0}")
        } else {
            format!("{a:.1}")
        }
    };
    // An upper bound several times the median reads as the multiple it is (the lower bound,
    // never at or below zero, stays a percentage under 100).
    if hi / median >= crate::base::stats::units::MULTIPLE_FROM {
        return format!("-{}%/x{}", f(pct(lo)), three_digits(hi / median));
    }
    format!("-{}/+{}%", f(pct(lo)), f(pct(hi)))
}

/// Table rows and the numbered notes they refer to.
pub fn rows(run: &Run) -> (Vec<TableLine>, Vec<String>) {
    rows_with(run, &SaidOnce::default())
}

/// As `rows`, leaving out the departure notes `said` says once for the run, and adding to a
/// lone departure that widened its result's CI by how much.
fn rows_with(run: &Run, said: &SaidOnce) -> (Vec<TableLine>, Vec<String>) {
    let mut notes = Vec::new();
    let mut note = |id: &str, text: &str| {
        notes.push(format!(
            "{}: {}",
            super::printable(id),
            super::printable(text)
        ));
        notes.len()
    };
    let rows = run
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut flag = Vec::new();
            let mut warn = false;
            match &r.status {
                Status::Ok => {}
                Status::Skipped { reason } => {
                    flag.push(format!("skipped [{}]", note(&r.id, reason)))
                }
                Status::Failed { reason } => {
                    warn = true;
                    flag.push(format!("FAILED [{}]", note(&r.id, reason)))
                }
            }
            let shared =
                said.contention && crate::analysis::contention::shared_cpu(&r.disturbed).is_some();
            if shared {
                // Said once for the run, in its contention note.
                warn = true;
                flag.push("shared CPU".to_string());
            } else if said.inline && r.disturbed.only_steal_or_preempted() {
                // Said by its figures here, and once for the run (`inline_line`).
                warn = true;
                flag.extend(inline_disturbance(r));
            } else if r.disturbed.is_disturbed() {
                warn = true;
                let n = note(
                    &r.id,
                    &format!("disturbed: {}", r.disturbed.flag.join("; ")),
                );
                flag.push(format!("disturbed [{n}]"));
            }
            if let Some(f) = said.departure_flag(i) {
                warn = true;
                flag.push(f);
            }
            if let Some(shift) = r.disturbed.phase_shift_pct {
                let share =
                    100.0 * r.disturbed.phase_samples as f64 / r.samples_ns.len().max(1) as f64;
                flag.push(format!("phase {shift:+.0}%@{share:.0}%"));
            }
            let by_figures = said.note_flags(i, r);
            warn |= !by_figures.is_empty();
            flag.extend(by_figures);
            for kept in r.notes.iter().filter(|n| said.keeps_with_result(i, n)) {
                warn = true;
                let word = match kept.kind {
                    NoteKind::DefinitionNotMet => "definition not met",
                    _ => "note",
                };
                flag.push(format!("{word} [{}]", note(&r.id, &said.words(i, kept))));
            }
            TableLine {
                cells: cells(r, flag.join(" ")),
                warn,
            }
        })
        .collect();
    (rows, notes)
}

fn cells(r: &BenchResult, flag: String) -> [String; 8] {
    match &r.stats {
        Some(s) => [
            super::printable(&r.id).into_owned(),
            format_ns(s.median),
            ci_text(s.ci95[0], s.ci95[1], s.median),
            format_ns(s.min),
            format_ns(s.p99),
            s.count.to_string(),
            super::key_events(r),
            flag,
        ],
        None => [
            super::printable(&r.id).into_owned(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "0".into(),
            String::new(),
            flag,
        ],
    }
}

/// The table of `rows`, the columns `shown`.
fn table_of(rows: &[TableLine], shown: &[usize], color: bool) -> comfy_table::Table {
    let mut t = super::plain_table(color, shown.iter().map(|&i| HEADERS[i]).collect::<Vec<_>>());
    for row in rows {
        let cells: Vec<Cell> = shown
            .iter()
            .map(|&i| {
                let cell = Cell::new(&row.cells[i]);
                if color && row.warn && i == 7 {
                    cell.fg(Color::Yellow)
                } else {
                    cell
                }
            })
            .collect();
        t.add_row(cells);
    }
    // The numbers, right-aligned: median, CI, min, p99, samples.
    for (k, &i) in shown.iter().enumerate() {
        if (1..=5).contains(&i)
            && let Some(c) = t.column_mut(k)
        {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    t
}

/// Render for a terminal (or a pipe). `color` is false for NO_COLOR and non-terminals. A
/// departure the machine explains (`analysis::shared_departures`) is said once for the run,
/// not per result, unless `verbose`.
pub fn render(run: &Run, color: bool, opts: TableOptions) -> String {
    render_at(run, color, opts, terminal_width())
}

/// As `render`, notes wrapped at `width` columns.
pub fn render_at(run: &Run, color: bool, opts: TableOptions, width: usize) -> String {
    let said_once = SaidOnce::of(run, opts.verbose);
    let (rows, notes) = rows_with(run, &said_once);
    let shown: Vec<usize> = if opts.wide {
        (0..HEADERS.len()).collect()
    } else {
        NARROW.to_vec()
    };
    let t = fitted_table(rows, &shown, color, opts.wide);
    // Every line but the table's is wrapped at the terminal's width.
    let said = |out: &mut String, line: &str| {
        out.push_str(&wrap(line, width, 4));
        out.push('\n');
    };
    let mut out = String::new();
    for n in crate::analysis::confinement_notes(run) {
        said(&mut out, &format!("note: {}", super::printable(&n)));
    }
    out.push_str(&t.to_string());
    out.push('\n');
    if let Some(scaling) = super::scaling::text(run) {
        out.push_str(&scaling);
    }
    for (i, line) in hook_ladder_lines(run).iter().enumerate() {
        if i == 0 {
            said(&mut out, line);
        } else {
            // A rung's columns line up: not wrapped.
            out.push_str(line);
            out.push('\n');
        }
    }
    for line in bandwidth_lines(run) {
        out.push_str(&line);
        out.push('\n');
    }
    for (i, n) in notes.iter().enumerate() {
        said(&mut out, &format!("[{}] {n}", i + 1));
    }
    for n in &run.notes {
        said(&mut out, &format!("note: {}", super::printable(&n.text)));
    }
    if let Some(line) = shared_line(&said_once.moves, said_once.explained.len()) {
        said(&mut out, &format!("note: {line}"));
    }
    for line in family_levels_lines(run, &said_once.family_levels) {
        said(&mut out, &format!("note: {line}"));
    }
    if let Some(line) = inline_line(run, &said_once) {
        said(&mut out, &format!("note: {line}"));
    }
    if let Some(line) = quiet_line(&said_once.quiet, &said_once.untold) {
        said(&mut out, &format!("note: {line}"));
    }
    if let Some(line) = uncounted(run) {
        said(&mut out, &super::printable(&line));
    }
    if let Some(line) = witness_line(run) {
        said(&mut out, &line);
    }
    if let Some(legend) = phase_legend(run) {
        said(&mut out, legend);
    }
    if !said_once.verbose && !said_once.widened.is_empty() {
        said(&mut out, DEPARTURE_LEGEND);
    }
    out
}

/// The run's witnesses, one line: the speed witness and, where the CPU has CPUID, the exit
/// witness (`analysis::witness`).
fn witness_line(run: &Run) -> Option<String> {
    let w = crate::analysis::witness::run_witness(run)?;
    let exit = crate::analysis::witness::run_exit_witness(run).map_or(String::new(), |e| {
        format!(
            "; exit witness: {} a CPUID, a round trip through the hypervisor in a guest",
            super::format_ns(e)
        )
    });
    Some(format!(
        "speed witness: {} a loop of fixed user-space work{exit} (medians of {} workers; \
         compare runs' witnesses to see whether the machine or its host ran at another speed)",
        super::format_ns(w.ns),
        w.workers
    ))
}

/// The run's bandwidths as rates, where it has any: a heading, then one line a result with the
/// rate at the median and its CI (the table shows the time per MiB, which comparisons use).
pub fn bandwidth_lines(run: &Run) -> Vec<String> {
    let rated: Vec<(&str, crate::base::model::Rate)> = run
        .results
        .iter()
        .filter_map(|r| r.rate().map(|rate| (r.id.as_str(), rate)))
        .collect();
    if rated.is_empty() {
        return vec![];
    }
    let width = rated.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
    let mut lines = vec![
        "bandwidths (the table's times are per MiB moved; here as rates, 95% CI):".to_string(),
    ];
    for (id, rate) in rated {
        lines.push(format!(
            "  {:<width$}  {:>11}  ({} to {})",
            super::printable(id),
            format_rate(rate.bytes_per_s),
            format_rate(rate.ci95[0]),
            format_rate(rate.ci95[1]),
        ));
    }
    lines
}

/// The hook ladder, where the run has one: each hook's addition to the unhooked call of the
/// same rounds, smallest first (`analysis::hooks`).
pub fn hook_ladder_lines(run: &Run) -> Vec<String> {
    use crate::analysis::hooks::{HOOK_BASE, PIPE_BASE, addition_of};
    let mut rungs: Vec<(&str, f64, [f64; 2])> = run
        .results
        .iter()
        .filter_map(|r| addition_of(r).map(|(a, ci)| (r.id.as_str(), a, ci)))
        .collect();
    if rungs.is_empty() {
        return vec![];
    }
    rungs.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = vec![format!(
        "hook ladder: what each hook adds to the same operation unhooked ({HOOK_BASE}, {PIPE_BASE}) measured in the same rounds (median of the rounds' differences, 95% CI):"
    )];
    for (id, a, ci) in rungs {
        out.push(format!(
            "  {id:<34} {:>9}  ({} to {})",
            super::signed_ns(a),
            super::signed_ns(ci[0]),
            super::signed_ns(ci[1])
        ));
    }
    out
}

/// The events that could not be counted, each once with why ("events not counted: cycles (no
/// hardware counter here)"), or `None` when every event asked for was counted.
pub fn uncounted(run: &Run) -> Option<String> {
    let mut why: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for r in &run.results {
        for (name, reason) in r.events.iter().flat_map(|e| &e.unavailable) {
            why.entry(name.as_str()).or_insert(reason.as_str());
        }
    }
    if why.is_empty() {
        return None;
    }
    // Grouped by reason: without a PMU every hardware event has the same one.
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, reason) in why {
        match by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(name),
            None => by_reason.push((reason, vec![name])),
        }
    }
    let list: Vec<String> = by_reason
        .iter()
        .map(|(r, names)| format!("{} ({r})", names.join(", ")))
        .collect();
    Some(format!("events not counted: {}", list.join("; ")))
}

/// The legend of phase flags, for a run that has any (only runs of schema 1 do).
pub fn phase_legend(run: &Run) -> Option<&'static str> {
    run.results
        .iter()
        .any(|r| r.disturbed.phase_shift_pct.is_some())
        .then_some(PHASE_LEGEND)
}

/// What a `phase +X%@Y%` flag means (on runs of schema_version 1, which looked for phases within
/// one long stream; repetitions name departing levels in notes instead).
pub const PHASE_LEGEND: &str = "phase +X%@Y%: Y% of the samples ran X% slower than the rest, in stretches of tens of ms or more: the machine (or, unpinned, the placement) changed during the benchmark; the median covers both levels";

mod fit;
mod said_once;
pub use fit::TABLE_COLUMNS;
#[cfg(test)]
use fit::compact_flag;
use fit::fitted_table;
use said_once::{
    DEPARTURE_LEGEND, SaidOnce, family_levels_lines, inline_disturbance, inline_line, quiet_line,
    shared_line,
};

#[cfg(test)]
mod tests;
