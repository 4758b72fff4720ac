//! Markdown export: the same rows and notes as the terminal table, as a GitHub table.

use super::Exporter;
use super::table::{HEADERS, rows};
use crate::analysis::compare::Comparison;
use crate::base::model::Run;

/// A run as a Markdown table.
pub struct Markdown;

/// A cell or line of text: no control characters or bidirectional overrides (the file is read
/// in terminals too: `export --markdown -`), and `|` kept out of the table's structure.
fn escape(s: &str) -> String {
    super::printable(s).replace('|', "\\|")
}

impl Exporter<Run> for Markdown {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        let (rows, notes) = rows(run);
        let mut out = format!("# oscost run {}\n\n", escape(&run.started_at));
        if let Some(l) = &run.label {
            out.push_str(&format!("Label: {}\n\n", escape(l)));
        }
        if let Some(w) = &run.wrapper {
            out.push_str(&format!("Under: `{}`\n\n", escape(w)));
        }
        out.push_str(&format!(
            "Kernel {}, CPU {}; clock CLOCK_MONOTONIC, {:.1} ns per read.\n\n",
            escape(run.env.kernel_release.as_deref().unwrap_or("?")),
            escape(run.env.cpu_model.as_deref().unwrap_or("?")),
            run.clock.cost_ns
        ));
        for n in crate::analysis::confinement_notes(run) {
            out.push_str(&format!("Note: {}\n\n", escape(&n)));
        }
        out.push_str(&format!("| {} |\n", HEADERS.join(" | ")));
        out.push_str("|---|--:|--:|--:|--:|--:|---|---|\n");
        for r in rows {
            let cells: Vec<String> = r.cells.iter().map(|c| escape(c)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        let bandwidths = super::table::bandwidth_lines(run);
        if let Some((head, lines)) = bandwidths.split_first() {
            out.push_str(&format!("\n{}\n\n", escape(head)));
            for l in lines {
                out.push_str(&format!("- {}\n", escape(l.trim())));
            }
        }
        if !notes.is_empty() {
            out.push('\n');
            for (i, n) in notes.iter().enumerate() {
                out.push_str(&format!("{}. {}\n", i + 1, escape(n)));
            }
        }
        // The run's own notes (the machine changed speed, an old schema) after the results'.
        for n in &run.notes {
            out.push_str(&format!("\nNote: {}\n", escape(&n.text)));
        }
        if let Some(line) = super::table::uncounted(run) {
            out.push_str(&format!("\n{}\n", escape(&line)));
        }
        Ok(out.into_bytes())
    }
}

impl Exporter<Comparison> for Markdown {
    fn serialize(&self, cmp: &Comparison) -> anyhow::Result<Vec<u8>> {
        Ok(super::comparison::markdown(cmp).into_bytes())
    }
}

impl Exporter<crate::analysis::matrix::Matrix> for Markdown {
    fn serialize(&self, m: &crate::analysis::matrix::Matrix) -> anyhow::Result<Vec<u8>> {
        Ok(crate::report::matrix_views::render_markdown(m).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    #[test]
    fn is_a_table_with_one_line_per_result_and_notes() {
        let mut run = testdata::run();
        run.notes = vec![crate::base::model::Note::new(
            crate::base::model::NoteKind::MachineSpeed,
            "the machine changed speed",
        )];
        let text = String::from_utf8(Markdown.serialize(&run).unwrap()).unwrap();
        let table: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(table.len(), 2 + 4);
        assert!(
            table
                .iter()
                .filter(|l| !l.starts_with("|--"))
                .all(|l| l.matches(" | ").count() == 7),
            "{text}"
        );
        assert!(text.contains("1. syscall/getppid: disturbed"));
        assert!(text.contains("Label: test"));
        assert!(text.ends_with("\nNote: the machine changed speed\n"));
    }
}
