//! The HTML report: `index.html` and its figures (SVG, PNG too on request) in one directory.
//! The page inlines every SVG and its CSS, so it is whole on its own and opens from file://
//! with no network; the figure files sit beside it for use elsewhere. Built with minijinja
//! from the result model (pure until `write`).

use std::path::{Path, PathBuf};

use minijinja::value::Serde;
use minijinja::{Environment, context};
use serde::Serialize;

use super::plot::{self, Bar, Figure, Point};
use super::{comparison, format_ns};
use crate::compare::Comparison;
use crate::model::{BenchResult, Run, Status};

/// A figure ready for the page: its file stem and SVG text.
#[derive(Debug, Clone, Serialize)]
pub struct FigureOut {
    pub name: String,
    pub title: String,
    pub svg: String,
}

#[derive(Debug, Clone, Serialize)]
struct Row {
    id: String,
    anchor: String,
    definition: String,
    status: String,
    reason: Option<String>,
    median: String,
    ci: String,
    min: String,
    p99: String,
    count: usize,
    flags: Vec<String>,
    placement: String,
}

#[derive(Debug, Clone, Serialize)]
struct FamilyOut {
    name: String,
    figures: Vec<FigureOut>,
    rows: Vec<Row>,
    details: Vec<(Row, Vec<FigureOut>)>,
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .to_string()
}

fn placement_text(r: &BenchResult) -> String {
    match &r.placement {
        crate::model::Placement::Pinned { cpu } => format!("pinned to CPU {cpu}"),
        crate::model::Placement::Same { cpu } => format!("all on CPU {cpu}"),
        crate::model::Placement::Cross { cpus } => format!(
            "across CPUs {}",
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        crate::model::Placement::Free => "unpinned".into(),
    }
}

fn row(r: &BenchResult) -> Row {
    let mut flags: Vec<String> = r
        .disturbed
        .flag
        .iter()
        .map(|f| format!("disturbed: {f}"))
        .collect();
    if let Some(shift) = r.disturbed.phase_shift_pct {
        let share = 100.0 * r.disturbed.phase_samples as f64 / r.samples_ns.len().max(1) as f64;
        flags.push(format!(
            "two levels: {share:.0}% of samples ran {shift:+.0}% slower (the machine or placement changed)"
        ));
    }
    flags.extend(r.notes.iter().cloned());
    let mut definition = r.definition.clone();
    if let Some(ps) = r
        .params
        .get("per_switch_median_ns")
        .and_then(|v| v.as_f64())
    {
        definition.push_str(&format!(
            "; per switch (half a round trip): {}",
            format_ns(ps)
        ));
    }
    let (median, ci, min, p99, count) = match &r.stats {
        Some(s) => (
            format_ns(s.median),
            format!("{} – {}", format_ns(s.ci95[0]), format_ns(s.ci95[1])),
            format_ns(s.min),
            format_ns(s.p99),
            s.count,
        ),
        None => ("-".into(), "-".into(), "-".into(), "-".into(), 0),
    };
    Row {
        id: r.id.clone(),
        anchor: slug(&r.id),
        definition,
        status: r.status.word().into(),
        reason: r.status.reason().map(str::to_string),
        median,
        ci,
        min,
        p99,
        count,
        flags,
        placement: placement_text(r),
    }
}

/// Draw one figure; a figure with nothing to draw is left out of the page.
fn fig(name: String, title: String, f: &Figure) -> Option<FigureOut> {
    plot::svg(f).ok().map(|svg| FigureOut { name, title, svg })
}

fn ok(r: &BenchResult) -> bool {
    r.status == Status::Ok && r.stats.is_some()
}

fn bar(r: &BenchResult) -> Option<Bar> {
    let s = r.stats.as_ref()?;
    Some(Bar {
        label: r.id.clone(),
        value: s.median,
        lo: s.ci95[0],
        hi: s.ci95[1],
        flagged: r.disturbed.is_disturbed(),
    })
}

fn param(r: &BenchResult, k: &str) -> Option<f64> {
    r.params.get(k).and_then(|v| v.as_f64())
}

fn point(r: &BenchResult, x: f64) -> Option<Point> {
    let s = r.stats.as_ref()?;
    Some(Point {
        x,
        y: s.median,
        lo: s.ci95[0],
        hi: s.ci95[1],
    })
}

/// The ring curve: per-switch cost against N, one line per working-set size.
fn ring_figure(results: &[&BenchResult]) -> Option<Figure<'static>> {
    let mut sizes: Vec<u64> = results
        .iter()
        .filter_map(|r| param(r, "size_kb").map(|v| v as u64))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let series: Vec<(String, Vec<Point>)> = sizes
        .iter()
        .map(|&kb| {
            let mut pts: Vec<Point> = results
                .iter()
                .filter(|r| ok(r) && param(r, "size_kb").map(|v| v as u64) == Some(kb))
                .filter_map(|r| point(r, param(r, "procs")?))
                .collect();
            pts.sort_by(|a, b| a.x.total_cmp(&b.x));
            (format!("{kb} KB per process"), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    (!series.is_empty()).then(|| Figure::Curves {
        title: "context switch in a ring of N processes (lat_ctx), overhead subtracted".into(),
        x_desc: "processes in the ring".into(),
        y_desc: "per switch".into(),
        log2_x: true,
        series,
    })
}

fn fork_rss_figure(results: &[&BenchResult]) -> Option<Figure<'static>> {
    let mut pts: Vec<Point> = results
        .iter()
        .filter(|r| ok(r))
        .filter_map(|r| point(r, param(r, "rss_mib")?))
        .collect();
    pts.sort_by(|a, b| a.x.total_cmp(&b.x));
    (pts.len() >= 2).then(|| Figure::Curves {
        title: "fork + exit + wait against the parent's resident memory".into(),
        x_desc: "parent resident memory (MiB)".into(),
        y_desc: "per fork".into(),
        log2_x: false,
        series: vec![("spawn/fork-rss".into(), pts)],
    })
}

/// Owned copies of what a run's report draws, so SVG and PNG come from the same values.
struct Plan<'a> {
    families: Vec<(String, Vec<&'a BenchResult>)>,
}

fn plan(run: &Run) -> Plan<'_> {
    let mut families: Vec<(String, Vec<&BenchResult>)> = Vec::new();
    for r in &run.results {
        match families.iter_mut().find(|(f, _)| *f == r.family) {
            Some((_, v)) => v.push(r),
            None => families.push((r.family.clone(), vec![r])),
        }
    }
    Plan { families }
}

/// Every figure of a run: (file stem, title, figure).
fn figures(run: &Run) -> Vec<(String, String, Figure<'_>)> {
    let p = plan(run);
    let mut out = Vec::new();
    let timer_bars: Vec<Bar> = run
        .results
        .iter()
        .filter(|r| r.family == "timer" && ok(r))
        .filter_map(bar)
        .collect();
    let clock_title = format!(
        "clock calibration: CLOCK_MONOTONIC costs {} per read, smallest step {}",
        format_ns(run.clock.cost_ns),
        format_ns(run.clock.resolution_ns)
    );
    let clock_bars = if timer_bars.is_empty() {
        vec![Bar {
            label: "CLOCK_MONOTONIC (calibration)".into(),
            value: run.clock.cost_ns,
            lo: run.clock.cost_ns,
            hi: run.clock.cost_ns,
            flagged: false,
        }]
    } else {
        timer_bars
    };
    out.push((
        "clock".to_string(),
        clock_title.clone(),
        Figure::Bars {
            title: clock_title,
            bars: clock_bars,
        },
    ));
    for (fam, rs) in &p.families {
        let bars: Vec<Bar> = rs
            .iter()
            .filter(|r| {
                ok(r) && !r.id.starts_with("switch/ring/") && !r.id.starts_with("spawn/fork-rss/")
            })
            .filter_map(|r| bar(r))
            .collect();
        if !bars.is_empty() {
            let title = format!("{fam}/: median cost per operation with its 95% CI");
            out.push((
                format!("family-{fam}"),
                title.clone(),
                Figure::Bars { title, bars },
            ));
        }
        let rings: Vec<&BenchResult> = rs
            .iter()
            .copied()
            .filter(|r| r.id.starts_with("switch/ring/"))
            .collect();
        if let Some(f) = ring_figure(&rings) {
            out.push(("ring".into(), "lat_ctx ring".into(), f));
        }
        let forks: Vec<&BenchResult> = rs
            .iter()
            .copied()
            .filter(|r| r.id.starts_with("spawn/fork-rss/"))
            .collect();
        if let Some(f) = fork_rss_figure(&forks) {
            out.push(("fork-rss".into(), "fork against resident memory".into(), f));
        }
        for r in rs.iter().filter(|r| ok(r)) {
            out.push((
                format!("{}-series", slug(&r.id)),
                format!("{}: samples in order", r.id),
                Figure::TimeSeries(r),
            ));
            out.push((
                format!("{}-hist", slug(&r.id)),
                format!("{}: distribution", r.id),
                Figure::Histogram(r),
            ));
        }
    }
    out
}

const RUN_TEMPLATE: &str = include_str!("../../assets/report.html");
const COMPARE_TEMPLATE: &str = include_str!("../../assets/compare.html");

fn env() -> Environment<'static> {
    let mut e = Environment::new();
    e.add_template("report.html", RUN_TEMPLATE)
        .expect("valid template");
    e.add_template("compare.html", COMPARE_TEMPLATE)
        .expect("valid template");
    e
}

/// Environment facts for the page, in order.
fn env_rows(run: &Run) -> Vec<(String, String)> {
    let e = &run.env;
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unknown)".into());
    vec![
        ("host".into(), o(&e.hostname)),
        (
            "kernel".into(),
            format!("{} {}", o(&e.kernel_release), o(&e.kernel_version)),
        ),
        ("boot command line".into(), o(&e.boot_cmdline)),
        ("CPU".into(), o(&e.cpu_model)),
        (
            "online / allowed CPUs".into(),
            format!("{} / {:?}", o(&e.online_cpus), e.allowed_cpus),
        ),
        ("SMT sibling groups".into(), e.smt_siblings.join(" ")),
        ("clocksource".into(), o(&e.clocksource)),
        (
            "clock".into(),
            format!(
                "CLOCK_MONOTONIC: {} per read, smallest step {}",
                format_ns(run.clock.cost_ns),
                format_ns(run.clock.resolution_ns)
            ),
        ),
        ("transparent huge pages".into(), o(&e.thp_enabled)),
        (
            "virtualization".into(),
            format!(
                "hypervisor flag {}; {} {}",
                if e.hypervisor_flag { "set" } else { "clear" },
                o(&e.dmi_vendor),
                o(&e.dmi_product)
            ),
        ),
        ("cgroup cpu.max".into(), o(&e.cgroup_cpu_max)),
        ("libc".into(), o(&e.libc_version)),
        (
            "oscost".into(),
            format!("{} ({} build)", e.oscost_version, e.build_profile),
        ),
    ]
}

/// The run's page and its figures, as (relative path, bytes).
pub fn render_run(run: &Run) -> Result<(String, Vec<FigureOut>), String> {
    let figs: Vec<FigureOut> = figures(run)
        .iter()
        .filter_map(|(name, title, f)| fig(name.clone(), title.clone(), f))
        .collect();
    let find = |name: &str| figs.iter().find(|f| f.name == name).cloned();
    let families: Vec<FamilyOut> = plan(run)
        .families
        .into_iter()
        .map(|(name, rs)| {
            let mut family_figs: Vec<FigureOut> =
                [format!("family-{name}"), "ring".into(), "fork-rss".into()]
                    .iter()
                    .filter(|n| *n != "ring" || name == "switch")
                    .filter(|n| *n != "fork-rss" || name == "spawn")
                    .filter_map(|n| find(n))
                    .collect();
            family_figs.dedup_by(|a, b| a.name == b.name);
            FamilyOut {
                rows: rs.iter().map(|r| row(r)).collect(),
                details: rs
                    .iter()
                    .filter(|r| ok(r))
                    .map(|r| {
                        let s = slug(&r.id);
                        let f = [format!("{s}-series"), format!("{s}-hist")]
                            .iter()
                            .filter_map(|n| find(n))
                            .collect();
                        (row(r), f)
                    })
                    .collect(),
                figures: family_figs,
                name,
            }
        })
        .collect();
    let counts = (
        run.results
            .iter()
            .filter(|r| r.status == Status::Ok)
            .count(),
        run.results
            .iter()
            .filter(|r| matches!(r.status, Status::Skipped { .. }))
            .count(),
        run.results
            .iter()
            .filter(|r| matches!(r.status, Status::Failed { .. }))
            .count(),
        run.results
            .iter()
            .filter(|r| r.disturbed.is_disturbed())
            .count(),
    );
    let html = env()
        .get_template("report.html")
        .map_err(|e| e.to_string())?
        .render(context! {
            run => context! {
                started_at => &run.started_at, label => &run.label, wrapper => &run.wrapper,
                version => &run.tool.version,
            },
            env => Serde(env_rows(run)),
            vulnerabilities => Serde(&run.env.vulnerabilities),
            clock => Serde(find("clock")),
            families => Serde(families),
            ok => counts.0, skipped => counts.1, failed => counts.2, disturbed => counts.3,
            total => run.results.len(),
            phase_legend => super::table::PHASE_LEGEND,
        })
        .map_err(|e| e.to_string())?;
    Ok((html, figs))
}

/// Write a run's report into `dir`: index.html, fig/*.svg, and fig/*.png with `png`.
pub fn write_run(run: &Run, dir: &Path, png: bool) -> anyhow::Result<Vec<PathBuf>> {
    let (html, figs) =
        render_run(run).map_err(|e| anyhow::anyhow!("cannot render the report: {e}"))?;
    let mut written = write_files(dir, &html, &figs)?;
    if png {
        let fdir = dir.join("fig");
        for (name, _, f) in figures(run) {
            let p = fdir.join(format!("{name}.png"));
            plot::png(&f, &p).map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", p.display()))?;
            written.push(p);
        }
    }
    Ok(written)
}

fn write_files(dir: &Path, html: &str, figs: &[FigureOut]) -> anyhow::Result<Vec<PathBuf>> {
    let fdir = dir.join("fig");
    std::fs::create_dir_all(&fdir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", fdir.display()))?;
    let mut written = Vec::new();
    for f in figs {
        let p = fdir.join(format!("{}.svg", f.name));
        super::write_atomic(&p, f.svg.as_bytes())?;
        written.push(p);
    }
    let index = dir.join("index.html");
    super::write_atomic(&index, html.as_bytes())?;
    written.push(index);
    Ok(written)
}

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
    let mut rows: Vec<&crate::compare::Row> = cmp.rows.iter().collect();
    rows.sort_by(|a, b| a.slowdown.total_cmp(&b.slowdown));
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: r.id.clone(),
            value: r.slowdown,
            lo: r.slowdown_ci95[0],
            hi: r.slowdown_ci95[1],
            flagged: r.disturbed,
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

/// A comparison's page and its slowdown figure.
pub fn render_comparison(cmp: &Comparison) -> Result<(String, Vec<FigureOut>), String> {
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
            base: format_ns(r.base_median_ns),
            cand: format_ns(r.cand_median_ns),
            slowdown: format!("x{:.3}", r.slowdown),
            ci: format!("{:.3} – {:.3}", r.slowdown_ci95[0], r.slowdown_ci95[1]),
            addition: format!(
                "{}{}",
                if r.addition_ns >= 0.0 { "+" } else { "-" },
                format_ns(r.addition_ns.abs())
            ),
            p: if r.p_value < 0.001 {
                "<0.001".into()
            } else {
                format!("{:.3}", r.p_value)
            },
            verdict: format!(
                "{}{}{}",
                r.verdict.word(),
                if r.verdict == crate::compare::Verdict::NoChange && !r.within_band {
                    "*"
                } else {
                    ""
                },
                if r.disturbed { " (disturbed)" } else { "" }
            ),
            class: r.verdict.word().replace(' ', "-"),
        })
        .collect();
    let html = env()
        .get_template("compare.html")
        .map_err(|e| e.to_string())?
        .render(context! {
            base => Serde(&cmp.base), cand => Serde(&cmp.cand),
            figure => Serde(figs.first()),
            rows => Serde(table),
            headlines => Serde(comparison::headlines(cmp, 8)),
            summary => comparison::summary_line(cmp),
            only_base => Serde(&cmp.only_base), only_cand => Serde(&cmp.only_cand),
            unmeasured => Serde(&cmp.unmeasured),
            inconclusive => cmp.summary.inconclusive > 0,
        })
        .map_err(|e| e.to_string())?;
    Ok((html, figs))
}

pub fn write_comparison(cmp: &Comparison, dir: &Path, png: bool) -> anyhow::Result<Vec<PathBuf>> {
    let (html, figs) =
        render_comparison(cmp).map_err(|e| anyhow::anyhow!("cannot render the comparison: {e}"))?;
    let mut written = write_files(dir, &html, &figs)?;
    if png && let Some((_, f)) = slowdown_figure(cmp) {
        let p = dir.join("fig/slowdown.png");
        plot::png(&f, &p).map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

    #[test]
    fn run_page_has_every_result_its_environment_and_figures() {
        let run = testdata::run();
        let (html, figs) = render_run(&run).unwrap();
        // minijinja escapes "/" in text as &#x2f;.
        let html = html.replace("&#x2f;", "/");
        assert!(html.starts_with("<!DOCTYPE html>"));
        for id in ["call/f0", "syscall/getppid", "spawn/fork", "timer/rdtscp"] {
            assert!(html.contains(id), "{id} missing");
        }
        assert!(html.contains("no rdtscp"), "the skip reason is shown");
        assert!(html.contains("disturbed: other CPU busy 97%"));
        assert!(html.contains("definition of call/f0"));
        assert!(figs.iter().any(|f| f.name == "clock"));
        assert!(figs.iter().any(|f| f.name == "family-call"));
        assert!(figs.iter().any(|f| f.name == "call-f0-series"));
        assert!(!html.contains("<script src"), "self-contained");
    }
}
