//! The run's HTML report: `index.html` and its figures (SVG, PNG too on request) in one directory.
//! The page opens on the cost ladder (one rung per kind of operation, as multiples of a null
//! system call), then per family a compact table and one chart (medians, CIs and every
//! repetition's level as dots) plus its declared curves, then each benchmark's details folded.
//! The overview figures and the CSS are inline, so the page reads from file:// with no
//! network; the details' figures (samples in order, distribution) are files beside it that
//! the browser loads only when a detail is opened, which keeps a default run's page near
//! 300 KB instead of 2.4 MB. Built with minijinja from the result model (pure until
//! `output::write_page`).

use minijinja::context;
use minijinja::value::Serde;
use serde::Serialize;

use super::format_ns;
use super::html::{FigureOut, Page, fig, render};
use super::plot;
use super::run_figures::{Drawn, Owner, families, figures, ok, slug};
use crate::base::model::{BenchResult, Curve, Run, Status};

#[derive(Debug, Clone, Serialize)]
struct ResultEntry {
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
    /// The family's key events per operation ("2.00 cs").
    events: String,
    /// Every counted event per operation, and what could not be counted.
    events_full: String,
    /// Where its time went (`--profile`): a stacked bar and its legend, HTML built with
    /// every name escaped (`report::profile::bar_html`); empty where not profiled.
    profile: String,
}

#[derive(Debug, Clone, Serialize)]
struct FamilyOut {
    name: String,
    figures: Vec<FigureOut>,
    rows: Vec<ResultEntry>,
    details: Vec<(ResultEntry, Vec<FigureOut>)>,
}

fn placement_text(r: &BenchResult) -> String {
    match &r.placement {
        crate::base::model::Placement::Pinned { cpu } => format!("pinned to CPU {cpu}"),
        crate::base::model::Placement::Same { cpu } => format!("all on CPU {cpu}"),
        crate::base::model::Placement::Cross { cpus } => format!(
            "across CPUs {}",
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        crate::base::model::Placement::Free => "unpinned".into(),
    }
}

fn row(r: &BenchResult) -> ResultEntry {
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
    flags.extend(r.notes.iter().map(|n| n.text.clone()));
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
    if let Some(rate) = r.rate() {
        use crate::base::stats::units::format_rate;
        definition.push_str(&format!(
            "; as a rate: {} (95% CI {} to {}; the times are per MiB moved)",
            format_rate(rate.bytes_per_s),
            format_rate(rate.ci95[0]),
            format_rate(rate.ci95[1])
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
    ResultEntry {
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
        events: super::key_events(r),
        events_full: events_text(r),
        profile: super::profile::bar_html(r, super::profile::TOP).unwrap_or_default(),
    }
}

/// "context-switches 2.00, minor-faults 0.00; not counted: cycles (not supported: ...)".
fn events_text(r: &BenchResult) -> String {
    let Some(ev) = &r.events else {
        return String::new();
    };
    let counted: Vec<String> = ev
        .per_op
        .iter()
        .map(|(k, v)| format!("{k} {}", super::event_number(*v)))
        .collect();
    let mut t = counted.join(", ");
    if let Some(c) = &ev.check {
        t.push_str(&format!(
            "; definition: {} ({})",
            c.expected,
            if c.met { "met" } else { "NOT met" }
        ));
    }
    if !ev.unavailable.is_empty() {
        // One reason for all when they share it (no PMU: every hardware event).
        let reasons: std::collections::BTreeSet<&String> = ev.unavailable.values().collect();
        let names: Vec<&str> = ev.unavailable.keys().map(String::as_str).collect();
        let why: Vec<&str> = reasons.iter().map(|s| s.as_str()).collect();
        t.push_str(&format!(
            "; not counted: {} ({})",
            names.join(", "),
            why.join("; ")
        ));
    }
    t
}

/// The figure files of the page's figures `figs` (drawn as `drawn`): SVG always, PNG too with
/// `png`, each linked from its figure.
fn figure_files(
    drawn: &[Drawn],
    figs: &[FigureOut],
    png: bool,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut files: Vec<(String, Vec<u8>)> = figs
        .iter()
        .map(|f| (format!("fig/{}.svg", f.name), f.svg.clone().into_bytes()))
        .collect();
    // A PNG beside each figure the page shows (and links), none for one left out.
    if png {
        for d in drawn
            .iter()
            .filter(|d| figs.iter().any(|f| f.name == d.name))
        {
            files.push((format!("fig/{}.png", d.name), plot::png(&d.figure)?));
        }
    }
    Ok(files)
}

/// Environment facts for the page: the one list `oscost env` prints (`report::env::facts`).
fn env_rows(run: &Run) -> Vec<(String, String)> {
    super::env::facts(&run.env)
}

fn counts(run: &Run) -> [usize; 4] {
    let n = |f: &dyn Fn(&BenchResult) -> bool| run.results.iter().filter(|r| f(r)).count();
    [
        n(&|r| r.status == Status::Ok),
        n(&|r| matches!(r.status, Status::Skipped { .. })),
        n(&|r| matches!(r.status, Status::Failed { .. })),
        n(&|r| r.disturbed.is_disturbed()),
    ]
}

/// The run's page: every result, the machine, and the figures (`curves` are the catalogue's
/// declared curves, by id prefix).
///
/// The page inlines the overview (the ladder, each family's chart and curves) and folds each
/// benchmark's details, whose figures (samples in order, distribution) are files beside the
/// page loaded only when opened (what that saves is in the module doc).
pub fn render_run(
    run: &Run,
    curves: &[(String, Curve)],
    ladder: &[&str],
    png: bool,
) -> Result<Page, String> {
    let drawn = figures(run, curves, ladder);
    let figs: Vec<(Owner, FigureOut)> = drawn
        .iter()
        .filter_map(|d| {
            Some((
                d.owner.clone(),
                fig(d.name.clone(), d.title.clone(), &d.figure)?,
            ))
        })
        .collect();
    let owned_by = |o: Owner| -> Vec<FigureOut> {
        figs.iter()
            .filter(|(w, _)| *w == o)
            .map(|(_, f)| f.clone())
            .collect()
    };
    let families: Vec<FamilyOut> = families(run)
        .into_iter()
        .map(|(name, rs)| FamilyOut {
            rows: rs.iter().map(|r| row(r)).collect(),
            details: rs
                .iter()
                .filter(|r| ok(r))
                .map(|r| (row(r), owned_by(Owner::Result(r.id.clone()))))
                .collect(),
            figures: owned_by(Owner::Family(name.clone())),
            name,
        })
        .collect();
    let [ok_n, skipped, failed, disturbed] = counts(run);
    // What confined the workers first (it enters every number), then the run's own notes.
    let notes: Vec<String> = crate::analysis::confinement_notes(run)
        .into_iter()
        .chain(run.notes.iter().map(|n| n.text.clone()))
        .collect();
    let html = render(
        "report.html",
        context! {
            run => context! {
                started_at => &run.started_at, label => &run.label, wrapper => &run.wrapper,
                version => &run.tool.version, notes => &notes,
            },
            env => Serde(env_rows(run)),
            vulnerabilities => Serde(&run.env.vulnerabilities),
            clock => Serde(owned_by(Owner::Page).first()),
            speed => Serde(owned_by(Owner::Speed).first()),
            ladder => Serde(owned_by(Owner::Ladder).first()),
            families => Serde(families),
            scaling => Serde(super::scaling::lines(run)),
            ok => ok_n, skipped => skipped, failed => failed, disturbed => disturbed,
            total => run.results.len(),
            phase_legend => super::table::phase_legend(run).unwrap_or_default(),
            png => png,
        },
    )?;
    let svgs: Vec<FigureOut> = figs.into_iter().map(|(_, f)| f).collect();
    Ok(Page {
        html,
        files: figure_files(&drawn, &svgs, png)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;
    use crate::report::plot::Figure;
    use crate::report::run_figures::speed_figure;

    #[test]
    fn run_page_has_every_result_its_environment_and_figures() {
        let mut run = testdata::run();
        run.notes = vec![crate::base::model::Note::new(
            crate::base::model::NoteKind::MachineSpeed,
            "the machine changed speed during this run",
        )];
        let page = render_run(
            &run,
            &[],
            &["syscall/getppid", "call/f0", "spawn/fork"],
            false,
        )
        .unwrap();
        let html = page.html;
        // minijinja escapes "/" in text as &#x2f;.
        let html = html.replace("&#x2f;", "/");
        assert!(html.starts_with("<!DOCTYPE html>"));
        for id in ["call/f0", "syscall/getppid", "spawn/fork", "timer/rdtscp"] {
            assert!(html.contains(id), "{id} missing");
        }
        assert!(html.contains("no rdtscp"), "the skip reason is shown");
        assert!(html.contains("disturbed: other CPU busy 97%"));
        assert!(html.contains("definition of call/f0"));
        assert!(html.contains("⚠ the machine changed speed during this run"));
        assert!(
            !html.contains("phase +X%@Y%"),
            "no phase flags, no legend for them"
        );
        let has = |f: &str| page.files.iter().any(|(p, _)| p == f);
        assert!(has("fig/clock.svg") && has("fig/family-call.svg") && has("fig/ladder.svg"));
        // The ladder is the page's first figure, its rungs as multiples of the null syscall.
        let first_svg = html.find("<svg").unwrap();
        assert!(html[..first_svg].contains("What this machine costs"));
        assert!(html.contains("spawn/fork  ") && html.contains("1.0x"));
        // With cycles counted, a family gets cycles against time.
        let mut counted = testdata::run();
        let mut second = counted.results[0].clone();
        second.id = format!("{}-again", second.id);
        counted.results.push(second);
        for r in &mut counted.results {
            r.events = Some(crate::base::model::Events {
                per_op: [(
                    "cycles".to_string(),
                    3.0 * r.stats.as_ref().map_or(1.0, |s| s.median),
                )]
                .into(),
                ..Default::default()
            });
        }
        let page2 = render_run(&counted, &[], &[], false).unwrap();
        assert!(
            page2
                .files
                .iter()
                .any(|(p, _)| p.starts_with("fig/cycles-"))
        );
        assert!(!has("fig/cycles-call.svg"), "none without cycles");
        // Details are folded, their figures files loaded only when opened.
        assert!(html.contains("<details") && html.contains("src=\"fig/call-f0-series.svg\""));
        assert!(has("fig/call-f0-series.svg"));
        assert!(!has("fig/clock.png"), "PNG only when asked for");
        // With PNGs, every file the page comes with is linked from it: SVG and PNG beside
        // each figure, none written for a figure the page leaves out.
        let with_png = render_run(&testdata::run(), &[], &[], true).unwrap();
        let linked = with_png.html.replace("&#x2f;", "/");
        assert!(with_png.files.iter().any(|(p, _)| p.ends_with(".png")));
        for (path, _) in &with_png.files {
            assert!(
                linked.contains(&format!("\"{path}\"")),
                "{path} is not linked"
            );
        }
        assert!(!html.contains("<script src"), "self-contained");
        assert!(
            !html.contains("speed over the run"),
            "no repetitions, no speed figure"
        );
    }

    #[test]
    fn a_run_with_repetitions_shows_the_machines_speed_over_time() {
        let mut run = testdata::run();
        // Ten repetitions of one benchmark, the fourth to sixth 30% slower.
        let meds = [
            100.0, 101.0, 99.0, 130.0, 131.0, 129.0, 100.0, 100.5, 99.5, 100.0,
        ];
        run.results[0].repetitions = meds
            .iter()
            .enumerate()
            .map(|(k, &m)| testdata::repetition(m, 250.0 * k as f64))
            .collect();
        let drawn = speed_figure(&run).unwrap();
        let Figure::MachineSpeed {
            points, smoothed, ..
        } = &drawn.figure
        else {
            panic!("not the speed figure");
        };
        // In seconds and percent from the result's median (100.25).
        assert_eq!(points.len(), 10);
        assert_eq!(points[3].0, 0.75);
        assert!((points[3].1 - 100.0 * (130.0 / 100.25 - 1.0)).abs() < 1e-9);
        assert_eq!(smoothed.len(), 6, "a median of 5 at each inner repetition");
        let page = render_run(&run, &[], &[], false).unwrap();
        assert!(
            page.html
                .contains("speed over the run: each repetition against")
        );
        assert!(page.html.contains("Each dot is one repetition"));
        // Seven repetitions cannot show it.
        run.results[0].repetitions.truncate(7);
        assert!(speed_figure(&run).is_none());
    }
}
