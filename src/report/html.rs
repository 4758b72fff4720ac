//! What every page shares: a rendered page (`Page`: `index.html` and its figure files, which
//! `output::write_page` writes), a figure ready for a page (`FigureOut`), and the page
//! templates compiled into the binary, rendered with minijinja (`render`). Each page is a
//! module of its own: the run's (`run_page.rs`), a comparison's, a matrix's, a history's,
//! a prediction's and an explanation's.

use minijinja::Environment;
use serde::Serialize;

use super::plot::{self, Figure};

/// A figure ready for the page: its file stem, title and SVG text.
#[derive(Debug, Clone, Serialize)]
pub struct FigureOut {
    /// The figure's file stem.
    pub name: String,
    /// Its title.
    pub title: String,
    /// The SVG text.
    pub svg: String,
}

/// Draw one figure; a figure with nothing to draw is left out of the page.
pub(super) fn fig(name: String, title: String, f: &Figure) -> Option<FigureOut> {
    plot::svg(f).ok().map(|svg| FigureOut { name, title, svg })
}

/// A rendered page: `index.html` and its figure files, as relative paths and bytes. Writing
/// them is `output::write_page`'s job.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The page's `index.html`.
    pub html: String,
    /// Its figure files: relative path and bytes.
    pub files: Vec<(String, Vec<u8>)>,
}

const RUN_TEMPLATE: &str = include_str!("../../assets/report.html");
const COMPARE_TEMPLATE: &str = include_str!("../../assets/compare.html");
const MATRIX_TEMPLATE: &str = include_str!("../../assets/matrix.html");
const HISTORY_TEMPLATE: &str = include_str!("../../assets/history.html");
const PREDICT_TEMPLATE: &str = include_str!("../../assets/predict.html");
const EXPLAIN_TEMPLATE: &str = include_str!("../../assets/explain.html");
const PAGE_BASE_CSS: &str = include_str!("../../assets/page-base.css");
const PAGE_TABLES_CSS: &str = include_str!("../../assets/page-tables.css");

/// The page templates (compiled into the binary).
pub(super) fn env() -> Environment<'static> {
    let mut e = Environment::new();
    e.add_template("report.html", RUN_TEMPLATE)
        .expect("valid template");
    e.add_template("compare.html", COMPARE_TEMPLATE)
        .expect("valid template");
    e.add_template("matrix.html", MATRIX_TEMPLATE)
        .expect("valid template");
    e.add_template("history.html", HISTORY_TEMPLATE)
        .expect("valid template");
    e.add_template("predict.html", PREDICT_TEMPLATE)
        .expect("valid template");
    e.add_template("explain.html", EXPLAIN_TEMPLATE)
        .expect("valid template");
    e.add_template("page-base.css", PAGE_BASE_CSS)
        .expect("valid template");
    e.add_template("page-tables.css", PAGE_TABLES_CSS)
        .expect("valid template");
    e
}

/// Render one of the page templates with `ctx`.
pub(super) fn render(template: &str, ctx: minijinja::Value) -> Result<String, String> {
    env()
        .get_template(template)
        .and_then(|t| t.render(ctx))
        .map_err(|e| e.to_string())
}
