//! The views of `oscost predict`: the terminal's summary and table, and the page that draws
//! the breakdown by kind and the predicted and measured intervals side by side (pure: bytes
//! out).

use minijinja::context;
use minijinja::value::Serde;
use serde::Serialize;

use super::format_ns;
use super::html::{FigureOut, Page, render};
use super::plot::{self, Bar, Figure};
use std::collections::BTreeMap;

use crate::analysis::predict::{Line, Price};

/// What `oscost predict` found: what `--json` writes and the views show.
#[derive(Debug, Clone, Serialize)]
pub struct PredictionReport {
    /// The program, as given.
    pub command: String,
    /// The wrapper, as given (empty: none, the program ran plainly during `during`).
    pub wrapper: String,
    /// The program that ran during the wrapped side (`predict --during`), as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<String>,
    /// System calls the program made, by name.
    pub syscalls: BTreeMap<String, u64>,
    /// Processes it created.
    pub processes: u64,
    /// Threads it created.
    pub threads: u64,
    /// Programs it executed.
    pub execs: u64,
    /// What it did that no benchmark prices.
    pub uncounted: Vec<String>,
    /// The time the wrapper adds, predicted from the counts and the prices, ns.
    pub predicted_added_ns: f64,
    /// The prediction's 95% CI, ns.
    pub predicted_ci95: [f64; 2],
    /// The time the wrapper added, measured, ns.
    pub measured_added_ns: f64,
    /// The measurement's 95% CI, ns.
    pub measured_ci95: [f64; 2],
    /// The CPU time the wrapper added, measured, ns.
    pub measured_cpu_added_ns: f64,
    /// The program's median wall time plain, ns.
    pub plain_wall_ns: f64,
    /// The program's median wall time under the wrapper, ns.
    pub wrapped_wall_ns: f64,
    /// Rounds of plain and wrapped runs measured.
    pub rounds: usize,
    /// (predicted - measured) / measured.
    pub error: f64,
    /// The prediction, kind of operation by kind.
    pub breakdown: Vec<Line>,
    /// Each kind's price: what the wrapper adds to one operation.
    pub prices: BTreeMap<String, Price>,
    /// What the prediction assumed, in words.
    pub assumptions: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Why the prediction missed, when it missed.
    pub miss: Option<String>,
}

impl PredictionReport {
    fn total_syscalls(&self) -> u64 {
        self.syscalls.values().sum()
    }
}

fn interval(point: f64, ci: [f64; 2]) -> String {
    format!(
        "{} (95% CI {} to {})",
        super::signed_ns(point),
        super::signed_ns(ci[0]),
        super::signed_ns(ci[1])
    )
}

/// The wrapped side in words: "under `W`", "during `D`", or both.
pub fn side_words(wrapper: &str, during: Option<&str>) -> String {
    match (wrapper.is_empty(), during) {
        (false, Some(d)) => format!("under `{wrapper}` during `{d}`"),
        (true, Some(d)) => format!("during `{d}`"),
        _ => format!("under `{wrapper}`"),
    }
}

/// The headline lines: predicted, measured, the error.
pub fn headlines(v: &PredictionReport) -> Vec<String> {
    vec![
        format!(
            "`{}` {}: {} plain, {} wrapped (medians of {} alternating rounds)",
            v.command,
            side_words(&v.wrapper, v.during.as_deref()),
            format_ns(v.plain_wall_ns),
            format_ns(v.wrapped_wall_ns),
            v.rounds
        ),
        format!(
            "predicted added time {}",
            interval(v.predicted_added_ns, v.predicted_ci95)
        ),
        format!(
            "measured added time  {} wall, {} CPU",
            interval(v.measured_added_ns, v.measured_ci95),
            super::signed_ns(v.measured_cpu_added_ns)
        ),
        format!(
            "prediction error {:+.1}% of the measured added time",
            100.0 * v.error
        ),
    ]
}

/// The rows of the breakdown table, at most `max` (the rest summed in one row).
fn rows(v: &PredictionReport, max: usize) -> Vec<[String; 5]> {
    let mut out: Vec<[String; 5]> = v
        .breakdown
        .iter()
        .take(max)
        .map(|l| {
            [
                l.kind.clone(),
                l.count.to_string(),
                format!("{}{}", l.priced_by, if l.assumed { " (model)" } else { "" }),
                super::signed_ns(l.addition_ns),
                super::signed_ns(l.added_ns),
            ]
        })
        .collect();
    if v.breakdown.len() > max {
        let rest = &v.breakdown[max..];
        out.push([
            format!("{} other kinds", rest.len()),
            rest.iter().map(|l| l.count).sum::<u64>().to_string(),
            String::new(),
            String::new(),
            super::signed_ns(rest.iter().map(|l| l.added_ns).sum()),
        ]);
    }
    out
}

/// The terminal's text: headlines, the breakdown's largest rows, assumptions, the miss.
pub fn render_text(v: &PredictionReport) -> String {
    let mut s = String::new();
    for h in headlines(v) {
        s.push_str(&h);
        s.push('\n');
    }
    s.push_str(&format!(
        "counted: {} system calls of {} kinds, {} processes, {} threads, {} execs\n\n",
        v.total_syscalls(),
        v.syscalls.len(),
        v.processes,
        v.threads,
        v.execs
    ));
    let mut t = super::plain_table(false, ["kind", "count", "priced by", "addition", "added"]);
    for r in rows(v, 12) {
        t.add_row(r);
    }
    for i in [1, 3, 4] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    s.push_str(&t.to_string());
    s.push('\n');
    for a in &v.assumptions {
        s.push_str(&format!("assumed: {a}\n"));
    }
    for u in &v.uncounted {
        s.push_str(&format!("not counted: {u}\n"));
    }
    if let Some(m) = &v.miss {
        s.push_str(&format!("miss: {m}\n"));
    }
    s
}

#[derive(Serialize)]
struct BreakdownLine {
    cells: [String; 5],
    assumed: bool,
}

/// The page: headlines, the two intervals, the breakdown chart and table.
pub fn render_page(v: &PredictionReport) -> Result<Page, String> {
    let mut figs = Vec::new();
    let bar = |label: &str, value: f64, ci: [f64; 2]| Bar {
        label: label.into(),
        value,
        lo: ci[0],
        hi: ci[1],
        flagged: false,
        points: vec![],
    };
    let both = vec![
        bar("predicted", v.predicted_added_ns, v.predicted_ci95),
        bar("measured", v.measured_added_ns, v.measured_ci95),
    ];
    if both.iter().all(|b| b.lo > 0.0) {
        let title = "added time: predicted against measured (whiskers: 95% CI)".to_string();
        let f = Figure::Bars {
            title: title.clone(),
            bars: both,
        };
        figs.push(FigureOut {
            name: "intervals".into(),
            title,
            svg: plot::svg(&f)?,
        });
    }
    let kinds: Vec<Bar> = v
        .breakdown
        .iter()
        .filter(|l| l.added_ns > 0.0)
        .take(15)
        .map(|l| Bar {
            label: format!("{} ×{}", l.kind, l.count),
            value: l.added_ns,
            lo: l.added_ns,
            hi: l.added_ns,
            flagged: l.assumed,
            points: vec![],
        })
        .collect();
    if !kinds.is_empty() {
        let title = "predicted added time by kind (orange: priced as the null call)".to_string();
        let f = Figure::Bars {
            title: title.clone(),
            bars: kinds,
        };
        figs.push(FigureOut {
            name: "breakdown".into(),
            title,
            svg: plot::svg(&f)?,
        });
    }
    let table: Vec<BreakdownLine> = rows(v, 40)
        .into_iter()
        .zip(
            v.breakdown
                .iter()
                .map(|l| l.assumed)
                .chain(std::iter::repeat(false)),
        )
        .map(|(cells, assumed)| BreakdownLine { cells, assumed })
        .collect();
    let html = render(
        "predict.html",
        context! {
            v => Serde(v),
            total_syscalls => v.total_syscalls(),
            headlines => Serde(headlines(v)),
            figures => Serde(&figs),
            rows => Serde(table),
        },
    )?;
    let files = figs
        .iter()
        .map(|f| (format!("fig/{}.svg", f.name), f.svg.clone().into_bytes()))
        .collect();
    Ok(Page { html, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> PredictionReport {
        let line = |kind: &str, count: u64, add: f64, assumed: bool| Line {
            kind: kind.into(),
            count,
            priced_by: if assumed {
                "syscall/getppid"
            } else {
                "syscall/read-devzero"
            }
            .into(),
            assumed,
            addition_ns: add,
            added_ns: count as f64 * add,
        };
        PredictionReport {
            command: "dd if=/dev/zero of=/dev/null bs=1 count=100000".into(),
            wrapper: "strace -f -o /dev/null".into(),
            during: None,
            syscalls: [
                ("read".to_string(), 100_000),
                ("write".to_string(), 100_040),
            ]
            .into_iter()
            .collect(),
            processes: 0,
            threads: 0,
            execs: 1,
            uncounted: vec![],
            predicted_added_ns: 10e9,
            predicted_ci95: [9e9, 11e9],
            measured_added_ns: 11e9,
            measured_ci95: [10.5e9, 11.5e9],
            measured_cpu_added_ns: 12e9,
            plain_wall_ns: 80e6,
            wrapped_wall_ns: 11.08e9,
            rounds: 5,
            error: (10e9 - 11e9) / 11e9,
            prices: BTreeMap::new(),
            breakdown: vec![
                line("read", 100_000, 50_000.0, false),
                line("openat", 20, 40_000.0, true),
            ],
            assumptions: vec!["20 calls of 1 kinds ...".into()],
            miss: None,
        }
    }

    #[test]
    fn the_text_says_both_intervals_the_error_and_the_breakdown() {
        let t = render_text(&view());
        assert!(t.contains("predicted added time +10.0 s"), "{t}");
        assert!(t.contains("measured added time  +11.0 s"), "{t}");
        assert!(t.contains("prediction error -9.1%"), "{t}");
        assert!(t.contains("syscall/getppid (model)"), "{t}");
        assert!(t.contains("assumed: 20 calls"), "{t}");
    }

    #[test]
    fn the_page_draws_the_intervals_and_the_breakdown() {
        let p = render_page(&view()).unwrap();
        let names: Vec<&str> = p.files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, ["fig/intervals.svg", "fig/breakdown.svg"]);
        assert!(p.html.contains("openat"), "{}", p.html);
        assert!(p.html.contains("<svg"));
    }
}
