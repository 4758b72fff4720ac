//! `oscost list`: every benchmark id with what one sample measures.

use clap::Args;

use super::print_stdout;
use crate::bench;

#[derive(Debug, Args, Clone)]
pub struct ListArgs {}

impl ListArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        print_stdout(&list_text())?;
        Ok(0)
    }
}

fn list_text() -> String {
    let mut out = String::new();
    for b in bench::registry() {
        out.push_str(&format!(
            "{:<28} ns/op  {}{}\n",
            b.id,
            b.definition,
            if b.default {
                ""
            } else {
                "  (not in the default suite)"
            }
        ));
        // The events one operation must cost, checked on every run (exact ids and variants).
        let mine: Vec<String> = bench::EXPECTED_EVENTS
            .iter()
            .filter(|(key, _, _)| {
                key.trim_end_matches('/') == b.id
                    || key.strip_prefix(b.id).is_some_and(|r| r.starts_with('@'))
            })
            .map(|(key, event, x)| {
                let at = key.strip_prefix(b.id).unwrap_or("").trim_end_matches('/');
                let at = if at.is_empty() {
                    String::new()
                } else {
                    format!(" ({at})")
                };
                format!("{}{at}", x.describe(event))
            })
            .collect();
        if !mine.is_empty() {
            out.push_str(&format!("{:<28}        expects {}\n", "", mine.join("; ")));
        }
    }
    out
}
