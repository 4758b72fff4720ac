//! `oscost list`: every benchmark id with what one sample measures, then the stages
//! `oscost explain` splits a round trip into, with what each holds.

use super::{Command, Given};
use crate::bench::entry::Among;
use crate::effects::gate::Effects;
use clap::Args;

use super::print_stdout;
use crate::bench;

#[derive(Debug, Args, Clone)]
/// `oscost list`'s arguments.
pub struct ListArgs {
    /// Only these benchmarks: ids, families or prefixes, or result ids, as `run` selects
    /// [default: all].
    #[arg(value_name = "IDS", value_parser = super::args::IdParser, hide_possible_values = true)]
    pub ids: Vec<String>,
}

impl Command for ListArgs {
    /// It writes only to standard output; the default store is still kept safe.
    fn effects(&self) -> Effects {
        Effects::new().store(None)
    }

    /// Print the catalogue, or the part of it the ids select (`bench::select`, the grammar
    /// every command's ids follow).
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let chosen = if self.ids.is_empty() {
            None
        } else {
            Some(
                bench::select(&self.ids)
                    .map_err(super::args::usage)?
                    .benchmarks,
            )
        };
        print_stdout(&list_text(chosen.as_deref()))?;
        Ok(0)
    }
}

/// The widest line `list` prints (a terminal's or a pipe's).
const LIST_WIDTH: usize = 100;

/// The catalogue's lines for `chosen` (all, with explain's stages, when `None`).
fn list_text(chosen: Option<&[&'static crate::bench::entry::Benchmark]>) -> String {
    let mut out = String::new();
    let all = bench::registry();
    for b in chosen.map_or(all.as_slice(), |c| c) {
        // Within 100 columns: the definition wrapped under itself (an id longer than its
        // column pushes only its own line).
        let head = format!("{:<28} ns/op  ", b.id);
        let text = format!(
            "{}{}",
            b.definition,
            if b.default {
                ""
            } else {
                " (not in the default suite)"
            }
        );
        let indent = " ".repeat(36);
        out.push_str(&head);
        out.push_str(&crate::base::text::wrap(
            &text,
            LIST_WIDTH,
            head.len(),
            &indent,
        ));
        out.push('\n');
        if let Some(peer) = b.peer {
            out.push_str(&indent);
            out.push_str(&crate::base::text::wrap(
                &format!("as {peer}"),
                LIST_WIDTH,
                36,
                &indent,
            ));
            out.push('\n');
        }
        // The events one operation must cost, checked on every run (exact ids and variants).
        let mine: Vec<String> = b
            .expectations()
            .iter()
            .map(|x| {
                let at = match x.among {
                    Among::All => String::new(),
                    Among::SameCpu => " (@same)".into(),
                    Among::Suffix(s) => format!(" ({s})"),
                };
                format!("{}{at}", x.expect.describe(x.event))
            })
            .collect();
        if !mine.is_empty() {
            let indent = " ".repeat(36);
            out.push_str(&indent);
            out.push_str(&crate::base::text::wrap(
                &format!("expects {}", mine.join("; ")),
                LIST_WIDTH,
                36,
                &indent,
            ));
            out.push('\n');
        }
    }
    if chosen.is_none() {
        out.push_str(&explain_stages());
    }
    out
}

/// One stage: its name, and its definition wrapped under itself.
fn stage_line(name: &str, def: &str) -> String {
    let head = format!("  {name:<40} ");
    let indent = " ".repeat(head.len());
    format!(
        "{head}{}\n",
        crate::base::text::wrap(def, LIST_WIDTH, head.len(), &indent)
    )
}

/// `oscost explain`'s stages, both tables: what a round trip is cut into.
fn explain_stages() -> String {
    use crate::analysis::explain::{COARSE, FINE};
    let mut out = crate::base::text::wrap(
        "oscost explain ID@PLACEMENT (any switch/ or ipc/ ping-pong): a round trip from the \
         master's switch-in to its next, cut at",
        LIST_WIDTH,
        0,
        "",
    );
    out.push('\n');
    for (name, def) in COARSE {
        out.push_str(&stage_line(name, def));
    }
    out.push_str("with --syscalls (system call events too), each turn in three:\n");
    for (name, def) in FINE.iter().filter(|s| !COARSE.contains(s)) {
        out.push_str(&stage_line(name, def));
    }
    out
}
