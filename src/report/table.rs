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

/// The width in columns of the terminal stdout is. Without one (a pipe, a file) lines are not
/// wrapped: a script that greps a note finds it on one line.
fn terminal_width() -> usize {
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
    usize::MAX
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

/// A result whose lone departures are why its CI is wide.
#[derive(Debug)]
struct Widened {
    /// The result.
    result: usize,
    /// Its lone departing repetitions and how far each departed, percent.
    departures: Vec<(usize, f64)>,
    /// The CI's half-width with and without them, percent.
    halfwidth_pct: [f64; 2],
}

/// The departure notes a table says once for the run instead of with each result.
#[derive(Debug, Default)]
struct SaidOnce {
    /// The moments the machine moved several results together.
    moves: Vec<crate::analysis::SharedMove>,
    /// Results whose every departure was one of `moves`.
    explained: Vec<usize>,
    /// Results whose lone departures left their CI near what the others give (percent of
    /// each departure), counted in one line.
    quiet: Vec<(usize, Vec<f64>)>,
    /// Results whose lone departures are why their CI is wide.
    widened: Vec<Widened>,
    /// Every note is printed with its result (`--verbose`): nothing is left out, and a
    /// widening departure is said in its note rather than as a flag.
    verbose: bool,
    /// Families whose results ran at two levels together.
    family_levels: Vec<crate::analysis::FamilyLevels>,
    /// The run says its contention once (a `Contention` note): no result repeats its
    /// "other CPU busy" note.
    contention: bool,
}

impl SaidOnce {
    /// Sort `run`'s departures (`analysis::departures`) for a table; `verbose` leaves every
    /// note with its result.
    fn of(run: &Run, verbose: bool) -> SaidOnce {
        let d = crate::analysis::departures(run);
        let has_note = |i: usize, two_levels: bool| {
            run.results[i]
                .notes
                .iter()
                .any(|n| n.is_departure() || (two_levels && n.is_two_levels()))
        };
        let mut said = SaidOnce {
            contention: !verbose
                && run
                    .notes
                    .iter()
                    .any(|n| matches!(n.kind, NoteKind::Contention { .. })),
            family_levels: d.family_levels,
            moves: d.moves,
            explained: d
                .explained
                .into_iter()
                .filter(|&i| has_note(i, true))
                .collect(),
            ..SaidOnce::default()
        };
        for lone in d.lone.into_iter().filter(|l| has_note(l.result, false)) {
            let reps = &run.results[lone.result].repetitions;
            let pct: Vec<(usize, f64)> = lone
                .reps
                .iter()
                .filter_map(|&k| reps.get(k).and_then(|r| r.departs_pct).map(|p| (k, p)))
                .collect();
            match (lone.noted, lone.halfwidth_pct) {
                (true, Some(w)) => said.widened.push(Widened {
                    result: lone.result,
                    departures: pct,
                    halfwidth_pct: w,
                }),
                (true, None) => {}
                (false, _) => said
                    .quiet
                    .push((lone.result, pct.into_iter().map(|x| x.1).collect())),
            }
        }
        if verbose {
            // Every note stays with its result; only the widths are added to it.
            said = SaidOnce {
                widened: said.widened,
                verbose: true,
                ..SaidOnce::default()
            };
        }
        said
    }

    /// The departure note of result `i` is said for the run or as a flag, not with it.
    fn leaves_out(&self, i: usize) -> bool {
        self.explained.contains(&i)
            || self.quiet.iter().any(|(q, _)| *q == i)
            || (!self.verbose && self.widened.iter().any(|w| w.result == i))
    }

    /// The flag of result `i` whose lone departures widened its CI: "rep 3 +24%", or
    /// "reps 2,6 +22..+35%".
    fn departure_flag(&self, i: usize) -> Option<String> {
        if self.verbose {
            return None;
        }
        let pct = &self.widened.iter().find(|w| w.result == i)?.departures;
        let ks: Vec<String> = pct.iter().map(|(k, _)| (k + 1).to_string()).collect();
        let (lo, hi) = crate::base::stats::extent(pct.iter().map(|x| x.1));
        let words = crate::base::stats::units::change_words;
        Some(match pct.len() {
            1 => format!("rep {} {}", ks[0], words(lo)),
            _ => format!("reps {} {}..{}", ks.join(","), words(lo), words(hi)),
        })
    }

    /// Whether result `i`'s note is said with it: not where the run says it once (a
    /// departure or two levels the machine explains, a busy other CPU the contention note
    /// covers).
    fn keeps_with_result(&self, i: usize, kept: &crate::base::model::Note) -> bool {
        !((kept.is_departure() && self.leaves_out(i))
            || (kept.is_two_levels() && self.leaves_out_levels(i))
            || (self.contention && matches!(kept.kind, NoteKind::OtherCpuBusy { .. })))
    }

    /// A note of result `i` as the table says it: a departure that widened the CI adds by how
    /// much.
    fn words(&self, i: usize, kept: &crate::base::model::Note) -> String {
        let widened = self.widened.iter().find(|w| w.result == i);
        let t = &kept.text;
        match (widened.map(|w| w.halfwidth_pct), &kept.kind) {
            (Some([with, without]), NoteKind::Departure { departed }) => format!(
                "{t}; the CI is ±{with:.1}% with {}, ±{without:.1}% from the other repetitions \
                 alone",
                if *departed == 1 { "it" } else { "them" }
            ),
            _ => t.clone(),
        }
    }

    /// The two-levels note of result `i` is said for the run, not with it.
    fn leaves_out_levels(&self, i: usize) -> bool {
        self.explained.contains(&i) || self.family_levels.iter().any(|f| f.results.contains(&i))
    }
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

/// What a `rep K +X%` flag means.
pub const DEPARTURE_LEGEND: &str = "rep K +X%: repetition K departed alone, by X% (or xN: N \
    times the others' level), and is why the result's CI is wide (past 3x the precision asked, and twice what the other repetitions \
    give); kept (--verbose says how wide the CI is without it)";

/// The run-level line for each family whose results ran at two levels together.
fn family_levels_lines(run: &Run, families: &[crate::analysis::FamilyLevels]) -> Vec<String> {
    families
        .iter()
        .map(|f| {
            let names: Vec<String> = f
                .results
                .iter()
                .map(|&i| super::printable(&run.results[i].id).into_owned())
                .collect();
            format!(
                "{} {}/ results ran at two levels, each whole repetition at one or the other \
                 (x{:.2} to x{:.2}: the machine's speed, or how processes were laid out): {}; \
                 kept: each median follows its larger group, each CI spans both (--verbose \
                 says each)",
                names.len(),
                f.family,
                f.ratio[0],
                f.ratio[1],
                names.join(", ")
            )
        })
        .collect()
}

/// The run-level line for the results whose lone departures left their CI near what the
/// other repetitions give.
fn quiet_line(quiet: &[(usize, Vec<f64>)]) -> Option<String> {
    let all = quiet.iter().flat_map(|(_, p)| p.iter().copied());
    let (lo, hi) = crate::base::stats::extent(all);
    (!quiet.is_empty()).then(|| {
        format!(
            "{} result{} had repetitions depart alone ({lo:+.1}% to {hi:+.1}%) that their CI \
             absorbs (under 3x the precision asked, or under twice what the other repetitions \
             give): kept, marked `departs_pct` in the JSON (--verbose lists each)",
            quiet.len(),
            if quiet.len() == 1 { "" } else { "s" }
        )
    })
}

/// The run-level line for the moments the machine moved many results' repetitions together.
fn shared_line(moves: &[crate::analysis::SharedMove], explained: usize) -> Option<String> {
    if moves.is_empty() {
        return None;
    }
    let when: Vec<String> = moves
        .iter()
        .map(|m| {
            let pct = if (m.pct[1] - m.pct[0]).abs() < 0.05 {
                format!("{:+.1}%", m.pct[0])
            } else {
                format!("{:+.1}% to {:+.1}%", m.pct[0], m.pct[1])
            };
            let s = if m.results == 1 { "" } else { "s" };
            format!("{:.1} s ({pct}, {} result{s})", m.at_ms / 1e3, m.results)
        })
        .collect();
    Some(format!(
        "the machine moved repetitions of several results together at {}: kept, marked \
         `departs_pct` in the JSON, and not noted again for the {explained} results whose every \
         departing repetition was one of these (--verbose lists each)",
        when.join(", ")
    ))
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
    if let Some(line) = quiet_line(&said_once.quiet) {
        said(&mut out, &format!("note: {line}"));
    }
    if let Some(line) = uncounted(run) {
        said(&mut out, &super::printable(&line));
    }
    if let Some(w) = crate::analysis::witness::run_witness(run) {
        said(
            &mut out,
            &format!(
                "speed witness: {} a loop of fixed user-space work (median of {} workers; \
                 compare runs' witnesses to see whether the machine itself ran at another speed)",
                super::format_ns(w.ns),
                w.workers
            ),
        );
    }
    if let Some(legend) = phase_legend(run) {
        said(&mut out, legend);
    }
    if !said_once.verbose && !said_once.widened.is_empty() {
        said(&mut out, DEPARTURE_LEGEND);
    }
    out
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
#[cfg(test)]
use fit::compact_flag;
use fit::fitted_table;

#[cfg(test)]
mod tests;
