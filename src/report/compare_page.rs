//! The comparison page: headline sentences, the sorted slowdown chart and the table with
//! verdicts, from a `Comparison` (pure: bytes out).

use minijinja::context;
use minijinja::value::Serde;
use serde::Serialize;

use super::html::{FigureOut, Page, render};
use super::plot::{self, Bar, Figure};
use super::{comparison, format_ns};
use crate::analysis::compare::Comparison;

#[derive(Debug, Clone, Serialize)]
struct CmpRow {
    id: String,
    base: String,
    cand: String,
    slowdown: String,
    ci: String,
    addition: String,
    p: String,
    verdict: String,
    class: String,
}

/// The slowdown chart of a comparison, bars sorted by slowdown; `None` when nothing compared.
fn slowdown_figure(cmp: &Comparison) -> Option<(String, Figure<'static>)> {
    let mut rows: Vec<&crate::analysis::compare::BenchComparison> = cmp.rows.iter().collect();
    rows.sort_by(|a, b| a.slowdown.total_cmp(&b.slowdown));
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: r.id.clone(),
            value: r.slowdown,
            lo: r.slowdown_ci95[0],
            hi: r.slowdown_ci95[1],
            flagged: r.disturbed,
            points: vec![],
        })
        .collect();
    let title = format!(
        "slowdown of {} against {} (sorted; whiskers: 95% CI)",
        cmp.cand.name, cmp.base.name
    );
    (!bars.is_empty()).then(|| {
        let f = Figure::Slowdown {
            title: title.clone(),
            bars,
            threshold: cmp.threshold,
        };
        (title, f)
    })
}

/// A median as a time, and for a bandwidth its rate too ("301 us (3.24 GiB/s)").
fn with_rate(ns: f64, rate: Option<f64>) -> String {
    match rate {
        Some(b) => format!(
            "{} ({})",
            format_ns(ns),
            crate::base::stats::units::format_rate(b)
        ),
        None => format_ns(ns),
    }
}

/// A comparison's page and its slowdown figure (PNG too with `png`).
pub fn render_comparison(cmp: &Comparison, png: bool) -> Result<Page, String> {
    let mut figs = Vec::new();
    if let Some((title, f)) = slowdown_figure(cmp) {
        figs.push(FigureOut {
            name: "slowdown".into(),
            title,
            svg: plot::svg(&f)?,
        });
    }
    let table: Vec<CmpRow> = cmp
        .rows
        .iter()
        .map(|r| CmpRow {
            id: r.id.clone(),
            // A bandwidth's medians are times per MiB: its rates beside them.
            base: with_rate(r.base_median_ns, r.rates().map(|x| x.0)),
            cand: with_rate(r.cand_median_ns, r.rates().map(|x| x.1)),
            slowdown: format!("x{:.3}", r.slowdown),
            ci: format!("{:.3} – {:.3}", r.slowdown_ci95[0], r.slowdown_ci95[1]),
            addition: super::signed_ns(r.addition_ns),
            p: if r.p_value < 0.001 {
                "<0.001".into()
            } else {
                format!("{:.3}", r.p_value)
            },
            verdict: format!(
                "{}{}{}",
                r.verdict.word(),
                if r.verdict == crate::analysis::compare::Verdict::NoChange && !r.within_band {
                    "*"
                } else {
                    ""
                },
                if r.disturbed { " (disturbed)" } else { "" }
            ),
            class: r.verdict.word().replace(' ', "-"),
        })
        .collect();
    let html = render(
        "compare.html",
        context! {
            base => Serde(&cmp.base), cand => Serde(&cmp.cand), differs => Serde(&cmp.differs),
            figure => Serde(figs.first()),
            png => png,
            rows => Serde(table),
            headlines => Serde(comparison::headlines(cmp, 8)),
            summary => comparison::summary_line(cmp),
            one_factor => comparison::one_factor_line(cmp),
            only_base => Serde(&cmp.only_base), only_cand => Serde(&cmp.only_cand),
            unmeasured => Serde(&cmp.unmeasured),
            inconclusive => cmp.summary.inconclusive > 0,
            why => Serde(cmp.rows.iter().filter_map(|r| {
                Some(super::profile::attribution_html(&r.id, r.attribution.as_ref()?))
            }).collect::<Vec<String>>()),
        },
    )?;
    let mut files: Vec<(String, Vec<u8>)> = figs
        .iter()
        .map(|f| (format!("fig/{}.svg", f.name), f.svg.clone().into_bytes()))
        .collect();
    if png && let Some((_, f)) = slowdown_figure(cmp) {
        files.push(("fig/slowdown.png".into(), plot::png(&f)?));
    }
    Ok(Page { html, files })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::{Options, compare};
    use crate::base::model::testdata;

    #[test]
    fn the_page_has_both_sides_every_row_and_the_runs_notes() {
        let base = testdata::run();
        let mut cand = testdata::run();
        cand.notes = vec![crate::base::model::Note::new(
            crate::base::model::NoteKind::MachineSpeed,
            "the machine changed speed during this run",
        )];
        let c = compare(&base, &cand, "run 1", "run 2", &Options::default());
        let html = render_comparison(&c, false).unwrap().html;
        let html = html.replace("&#x2f;", "/");
        assert!(html.contains("<h1>run 2 against run 1</h1>"), "{html}");
        for r in &c.rows {
            assert!(html.contains(&format!("<td class=\"id\">{}</td>", r.id)));
        }
        assert!(html.contains("⚠ candidate: the machine changed speed during this run"));
        assert!(!html.contains("⚠ base:"));
        assert!(
            !html.contains("moved by about one factor"),
            "nothing changed"
        );
        // Everything 3.8x slower: the one-factor line follows the summary.
        let c = compare(
            &base,
            &testdata::run_scaled(3.8),
            "run 1",
            "run 2",
            &Options::default(),
        );
        let html = render_comparison(&c, false).unwrap().html;
        assert!(html.contains("<p>the 3 slower moved by about one factor (x3.80-x3.80)"));
    }
}
