//! Views of the result model: bytes in, bytes out. Every exporter is a pure
//! `serialize(x) -> bytes` (as in hyperfine), for runs and for comparisons alike, so each is
//! tested on synthetic data; putting bytes on disk is `output.rs`'s job.

pub mod ci_formats;
pub mod compare_page;
pub mod comparison;
pub mod csv;
pub mod env;
pub mod explain;
pub mod history;
pub mod history_page;
pub mod html;
pub mod json;
pub mod junit;
pub mod kcidb;
pub mod markdown;
pub mod matrix_page;
pub mod matrix_views;
pub mod openmetrics;
pub mod outcomes;
pub mod plot;
pub mod predict;
pub mod profile;
pub mod run_figures;
pub mod run_page;
pub mod scaling;
pub mod table;
pub mod wis;
pub mod xgraph;

use crate::base::model::Run;

pub use crate::base::text::{is_spoofing, printable};

/// The events that matter to a result's family, per operation, compactly: "2.00 cs" for a
/// switch or a spawn, "1.00 flt" for memory, and cycles and IPC wherever they were counted;
/// empty when nothing was counted.
pub fn key_events(r: &crate::base::model::BenchResult) -> String {
    let Some(ev) = &r.events else {
        return String::new();
    };
    let keys: &[&str] = match r.family.as_str() {
        "switch" | "spawn" => &["context-switches"],
        "mem" => &["minor-faults"],
        "ipc" | "syscall" => &["context-switches", "minor-faults"],
        _ => &[],
    };
    let mut parts: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            let v = ev.per_op.get(*k)?;
            let short = crate::measuring::counters::find(k).map_or(*k, |d| d.short);
            Some(format!("{} {short}", event_number(*v)))
        })
        .collect();
    if let Some(c) = ev.per_op.get("cycles") {
        parts.push(format!("{} cyc", event_number(*c)));
        if let Some(i) = ev.per_op.get("instructions")
            && *c > 0.0
        {
            parts.push(format!("IPC {:.2}", i / c));
        }
    }
    parts.join(", ")
}

/// An event count per operation: two decimals when small, whole when large, never "-0.00".
pub fn event_number(v: f64) -> String {
    let v = if v.abs() < 0.005 { 0.0 } else { v };
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Turns a run (or a comparison) into the bytes of one file format.
pub trait Exporter<T: ?Sized = Run> {
    /// The bytes of `x` in this format.
    fn serialize(&self, x: &T) -> anyhow::Result<Vec<u8>>;
}

/// The house style for terminal tables: a rule under the header and nothing else (rows of
/// numbers read best unboxed); colour and Unicode only on a terminal without NO_COLOR.
pub fn plain_table<T: Into<comfy_table::Row>>(color: bool, headers: T) -> comfy_table::Table {
    use comfy_table::{ContentArrangement, LineStyle, Table, presets};
    let mut t = Table::new();
    let rule = if color { '─' } else { '-' };
    t.load_style(presets::NOTHING.header_separator(LineStyle::none().fill(rule).junction(rule)))
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers);
    if color {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    t
}

pub use crate::base::stats::units::{format_ns, scale, three_digits};

/// A time with its sign always shown: "+19.2 ns", "-1.05 us".
pub fn signed_ns(ns: f64) -> String {
    if ns >= 0.0 {
        format!("+{}", format_ns(ns))
    } else {
        format!("-{}", format_ns(-ns))
    }
}

/// A level shift in words, as `history --changes` and `matrix` print it:
/// "x1.052 [1.031-1.074], 219 ns -> 230 ns".
pub fn shift_words(ratio: f64, ci: [f64; 2], before: f64, after: f64) -> String {
    format!(
        "x{ratio:.3} [{:.3}-{:.3}], {} -> {}",
        ci[0],
        ci[1],
        format_ns(before),
        format_ns(after)
    )
}

/// What differed between two runs' environments, in words.
pub fn differences_words(differs: &[String]) -> String {
    if differs.is_empty() {
        "nothing oscost records differs".to_string()
    } else {
        differs.join("; ")
    }
}
