//! The views of `oscost explain`: a table of stages with a bar made of them for the terminal,
//! and a page with the round trip drawn as a waterfall (pure: bytes out).

use minijinja::context;
use minijinja::value::Serde;
use serde::Serialize;

use super::format_ns;
use super::html::{Page, render};
use crate::analysis::explain::StageStats;

/// What `oscost explain` found: what `--json` writes and the views show.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The result's id (with its placement).
    pub id: String,
    /// The median of the split round trips, traced.
    pub round_trip_ns: f64,
    /// The median of the untraced pass, ns.
    pub untraced_median_ns: f64,
    /// traced / untraced.
    pub tracing_factor: f64,
    /// The benchmark's own median in the traced pass (every round trip, split or not): what
    /// tracing did to the number itself.
    pub traced_pass_median_ns: f64,
    /// Round trips split into stages.
    pub round_trips: usize,
    /// Round trips whose milestones could not all be found.
    pub incomplete: usize,
    /// Trace records the kernel dropped.
    pub lost_records: u64,
    /// Rescheduling and function-call interrupts the traced CPUs received during the traced
    /// pass, per round trip (None where /proc/interrupts could not be read).
    pub ipis_per_round_trip: Option<f64>,
    /// Round trips whose context switch the trace did not show.
    pub switches_unseen: usize,
    /// Round trips in which the peer, or the master, was not asleep, so not woken.
    pub unwoken: [usize; 2],
    /// Whether system call events were traced (`--syscalls`).
    pub syscalls: bool,
    /// Whether ftrace's command-name recorder ran with the events (someone else was tracing,
    /// so oscost's instance could not be made without it): each switch and wake-up cost more.
    pub command_name_recorder: bool,
    /// Each stage's median and spread, in round-trip order.
    pub stages: Vec<StageStats>,
    /// Events this kernel could not trace, so stages that could not be split.
    pub missing_events: Vec<String>,
}

/// One letter per stage, for the bar.
const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOP";

fn headline(v: &Explanation) -> Vec<String> {
    let sum: f64 = v.stages.iter().map(|s| s.median_ns).sum();
    vec![
        format!(
            "{}: traced round trip {} (median of {} round trips), untraced {} (x{:.2} under tracing)",
            v.id,
            format_ns(v.round_trip_ns),
            v.round_trips,
            format_ns(v.untraced_median_ns),
            v.tracing_factor
        ),
        format!(
            "tracing moved the benchmark's own median from {} to {} (x{:.2}); traced: the \
             scheduler's and idle events{}",
            format_ns(v.untraced_median_ns),
            format_ns(v.traced_pass_median_ns),
            v.traced_pass_median_ns / v.untraced_median_ns,
            if v.syscalls {
                ", and system calls (each call then takes the kernel's slow path)"
            } else {
                " (--syscalls splits each turn further, at a higher cost)"
            }
        ),
        format!(
            "stages' medians sum to {} ({:+.1}% of the traced round trip); {}",
            format_ns(sum),
            100.0 * (sum - v.round_trip_ns) / v.round_trip_ns,
            v.ipis_per_round_trip
                .map_or("IPIs not counted".into(), |n| format!(
                    "{n:.2} IPIs received a round trip"
                ))
        ),
    ]
}

/// The terminal's text: the headline, a bar of 60 columns made of the stages, the table.
pub fn render_text(v: &Explanation) -> String {
    let mut s = headline(v).join("\n");
    s.push('\n');
    let sum: f64 = v.stages.iter().map(|x| x.median_ns).sum::<f64>().max(1e-9);
    let mut bar = String::new();
    for (k, st) in v.stages.iter().enumerate() {
        let w = (60.0 * st.median_ns / sum).round() as usize;
        bar.push_str(&(LETTERS[k % LETTERS.len()] as char).to_string().repeat(w));
    }
    s.push_str(&format!("[{bar}]\n\n"));
    let mut t = super::plain_table(false, ["", "stage", "median", "p90", "share"]);
    for (k, st) in v.stages.iter().enumerate() {
        t.add_row([
            (LETTERS[k % LETTERS.len()] as char).to_string(),
            st.name.clone(),
            format_ns(st.median_ns),
            format_ns(st.p90_ns),
            format!("{:.0}%", 100.0 * st.median_ns / sum),
        ]);
    }
    s.push_str(&t.to_string());
    s.push('\n');
    for n in notes(v) {
        s.push_str(&n);
        s.push('\n');
    }
    s
}

/// What the reader must know to read the stages: round trips not split or not woken,
/// switch-ins not seen, events missing, the recorder.
fn notes(v: &Explanation) -> Vec<String> {
    let mut notes = Vec::new();
    if v.command_name_recorder {
        notes.push(
            "ftrace's command-name recorder ran with the events (the host was tracing, so \
             oscost's instance could not be made without it): each switch and wake-up cost more"
                .to_string(),
        );
    }
    if v.unwoken.iter().any(|&n| n > 0) {
        notes.push(format!(
            "not asleep when the other sent, so not woken: the peer in {} round trips, the master \
             in {} (on one CPU a waking often preempts the waker); their wait stages are 0",
            v.unwoken[0], v.unwoken[1]
        ));
    }
    if v.incomplete > 0 || v.lost_records > 0 {
        notes.push(format!(
            "{} round trips not split (a milestone missing: the pass's ends, {} records lost{})",
            v.incomplete,
            v.lost_records,
            if v.syscalls {
                ", or a party not woken"
            } else {
                ""
            }
        ));
    }
    if v.switches_unseen > 0 {
        notes.push(format!(
            "{} switch-ins were not recorded (a CPU that traces nothing while it idles): there \
             the CPU's idle exit and the switch are one stage, \"switched in\", up to the \
             thread's first own event",
            v.switches_unseen
        ));
    }
    for m in &v.missing_events {
        notes.push(format!(
            "not traced: {m} (this kernel has no such tracepoint)"
        ));
    }
    notes
}

/// The round trip as a waterfall: each stage a bar starting where the previous one ended.
fn waterfall(v: &Explanation) -> String {
    let (w, row, left) = (820.0, 26.0, 300.0);
    let h = row * v.stages.len() as f64 + 40.0;
    let sum: f64 = v.stages.iter().map(|s| s.median_ns).sum::<f64>().max(1e-9);
    let scale = (w - left - 90.0) / sum;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">"
    );
    let mut x = left;
    for (k, st) in v.stages.iter().enumerate() {
        let y = 10.0 + row * k as f64;
        let bw = (st.median_ns * scale).max(1.0);
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{x:.1}\" y=\"{}\" width=\"{bw:.1}\" height=\"{}\" fill=\"#3d8fc6\"/>\
             <text x=\"{:.1}\" y=\"{}\">{}</text>",
            left - 8.0,
            y + 15.0,
            super::printable(&st.name),
            y + 3.0,
            row - 8.0,
            x + bw + 4.0,
            y + 15.0,
            format_ns(st.median_ns)
        ));
        x += st.median_ns * scale;
    }
    s.push_str(&format!(
        "<text x=\"{left}\" y=\"{}\">0</text><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"end\">{}</text></svg>",
        h - 6.0,
        h - 6.0,
        format_ns(sum)
    ));
    s
}

/// The explanation as a page: the stages as a bar chart and a table.
pub fn render_page(v: &Explanation) -> Result<Page, String> {
    let svg = waterfall(v);
    let html = render(
        "explain.html",
        context! {
            v => Serde(v),
            headlines => Serde(headline(v)),
            notes => Serde(notes(v)),
            svg => svg.clone(),
        },
    )?;
    Ok(Page {
        html,
        files: vec![("fig/waterfall.svg".into(), svg.into_bytes())],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> Explanation {
        let st = |name: &str, m: f64| StageStats {
            name: name.into(),
            median_ns: m,
            p90_ns: m * 1.5,
            definition: String::new(),
        };
        Explanation {
            id: "switch/pipe-proc@cross".into(),
            round_trip_ns: 30_000.0,
            untraced_median_ns: 27_000.0,
            tracing_factor: 30_000.0 / 27_000.0,
            traced_pass_median_ns: 29_000.0,
            round_trips: 400,
            incomplete: 2,
            lost_records: 0,
            ipis_per_round_trip: Some(2.0),
            unwoken: [0, 0],
            syscalls: false,
            command_name_recorder: false,
            switches_unseen: 0,
            stages: vec![
                st("send", 1_000.0),
                st("idle exit", 14_000.0),
                st("back", 15_000.0),
            ],
            missing_events: vec![],
        }
    }

    #[test]
    fn the_text_has_the_bar_the_table_and_tracings_factor() {
        let t = render_text(&view());
        assert!(t.contains("x1.11 under tracing"), "{t}");
        assert!(t.contains("from 27.0 us to 29.0 us (x1.07)"), "{t}");
        assert!(t.contains("+0.0% of the traced round trip"), "{t}");
        // 60 columns: 2 A, 28 B, 30 C.
        assert!(
            t.contains(&format!(
                "[{}{}{}]",
                "A".repeat(2),
                "B".repeat(28),
                "C".repeat(30)
            )),
            "{t}"
        );
        assert!(t.contains("2 round trips not split"), "{t}");
    }

    #[test]
    fn the_page_draws_a_waterfall() {
        let p = render_page(&view()).unwrap();
        assert!(p.html.contains("<svg"));
        assert_eq!(p.files[0].0, "fig/waterfall.svg");
        assert_eq!(p.html.matches("<rect").count(), 3);
    }
}
