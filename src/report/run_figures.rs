//! The run page's figures: the cost ladder (one bar per primitive on a log scale), the hook
//! ladder (what each hook adds, `hook/` runs only), each
//! family's bars and curves as the catalogue declares them, the clock's cost and step, and the
//! machine's speed over the run; each drawn as SVG (and PNG on request) by `plot`.

use super::format_ns;
use super::plot::{Bar, Figure, Point};
use crate::analysis;
use crate::base::model::{BenchResult, Curve, Run, Status};

pub(super) fn ok(r: &BenchResult) -> bool {
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
        points: if r.repetitions.len() > 1 {
            r.repetitions.iter().map(|p| p.median_ns).collect()
        } else {
            vec![]
        },
    })
}

/// "250x", "3.2x", "1/190": a cost as a multiple of the null system call's.
fn multiple(v: f64, reference: f64) -> String {
    let m = v / reference;
    if m >= 10.0 {
        format!("{m:.0}x")
    } else if m >= 0.95 {
        format!("{m:.1}x")
    } else {
        format!("1/{:.0}", 1.0 / m)
    }
}

/// The cost ladder: the `ladder` results present, cheapest at the top, each labelled with
/// its multiple of the null system call (the ladder's first entry, when it was measured).
fn ladder_figure<'a>(run: &'a Run, ladder: &[&str]) -> Option<Drawn<'a>> {
    let find = |id: &str| run.results.iter().find(|r| r.id == id && ok(r));
    let reference = ladder.first().and_then(|id| find(id));
    let mut bars: Vec<Bar> = ladder.iter().filter_map(|id| bar(find(id)?)).collect();
    if bars.len() < 2 {
        return None;
    }
    bars.sort_by(|a, b| b.value.total_cmp(&a.value));
    let title = match reference.and_then(|r| Some((r.id.as_str(), r.stats.as_ref()?.median))) {
        Some((id, ns)) => {
            for b in &mut bars {
                b.label = format!("{}  {}", b.label, multiple(b.value, ns));
            }
            format!("What this machine costs, as multiples of a null system call ({id})")
        }
        None => "What this machine costs".to_string(),
    };
    Some(Drawn {
        name: "ladder".into(),
        title: title.clone(),
        owner: Owner::Ladder,
        figure: Figure::Bars { title, bars },
    })
}

/// The hook ladder (`hook/`): what each hook adds to the unhooked call of the same rounds,
/// smallest at the top, whiskers for the 95% CIs (`analysis::hooks`). Additions at or below 0
/// (a hook that costs nothing measurable) cannot sit on the log scale and are left to the
/// table.
fn hook_figure(run: &Run) -> Option<Drawn<'_>> {
    let mut bars: Vec<Bar> = run
        .results
        .iter()
        .filter_map(|r| {
            let (a, ci) = analysis::hooks::addition_of(r)?;
            (a > 0.0).then(|| Bar {
                label: format!("{}  +{}", r.id, format_ns(a)),
                value: a,
                lo: ci[0].max(a / 100.0),
                hi: ci[1].max(a),
                flagged: r.disturbed.is_disturbed(),
                points: vec![],
            })
        })
        .collect();
    if bars.is_empty() {
        return None;
    }
    bars.sort_by(|a, b| b.value.total_cmp(&a.value));
    let title =
        "What each hook adds to the operation unhooked (median of the rounds' differences, 95% CI)"
            .to_string();
    Some(Drawn {
        name: "hook-ladder".into(),
        title: title.clone(),
        owner: Owner::Family("hook".into()),
        figure: Figure::Bars { title, bars },
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

/// One declared curve from the results under `prefix`: cost against `curve.x`, one line per
/// value of `curve.series` (or one line named after the benchmark).
fn curve_figure(
    results: &[&BenchResult],
    prefix: &str,
    curve: &Curve,
    title: &str,
) -> Option<Figure<'static>> {
    let mine: Vec<&BenchResult> = results
        .iter()
        .copied()
        .filter(|r| r.id.starts_with(prefix) && ok(r))
        .collect();
    let points = |rs: &[&BenchResult]| -> Vec<Point> {
        let mut pts: Vec<Point> = rs
            .iter()
            .filter_map(|r| point(r, param(r, curve.x)?))
            .collect();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        pts
    };
    let series: Vec<(String, Vec<Point>)> = match curve.series {
        // One line per benchmark of the family (`wake/futex/gap-0` is wake/futex's).
        None if curve.across_family => {
            let bench_of = |id: &str| id.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
            let mut ids: Vec<String> = mine.iter().map(|r| bench_of(&r.id)).collect();
            ids.dedup();
            ids.into_iter()
                .map(|b| {
                    let rs: Vec<&BenchResult> = mine
                        .iter()
                        .copied()
                        .filter(|r| bench_of(&r.id) == b)
                        .collect();
                    (b, points(&rs))
                })
                .collect()
        }
        None => vec![(prefix.trim_end_matches('/').to_string(), points(&mine))],
        Some((key, words)) => {
            // A number (a working set: "16 KB per process") or a word (scale/'s mode).
            let value_of = |r: &BenchResult| -> Option<String> {
                match r.params.get(key)? {
                    serde_json::Value::String(s) => Some(s.clone()),
                    v => Some(format!("{}", v.as_f64()? as u64)),
                }
            };
            let mut values: Vec<(Option<u64>, String)> = mine
                .iter()
                .filter_map(|r| value_of(r).map(|v| (v.parse().ok(), v)))
                .collect();
            values.sort();
            values.dedup();
            values
                .into_iter()
                .map(|(_, v)| {
                    let rs: Vec<&BenchResult> = mine
                        .iter()
                        .copied()
                        .filter(|r| value_of(r).as_deref() == Some(v.as_str()))
                        .collect();
                    (format!("{v} {words}").trim_end().to_string(), points(&rs))
                })
                .collect()
        }
    };
    let series: Vec<(String, Vec<Point>)> =
        series.into_iter().filter(|(_, p)| p.len() >= 2).collect();
    (!series.is_empty()).then(|| Figure::Curves {
        title: title.into(),
        x_desc: curve.x_desc.into(),
        y_desc: curve.y_desc.into(),
        log2_x: curve.log2_x,
        series,
        marks: curve
            .regime
            .map_or_else(Vec::new, |key| regime_marks(&mine, curve.x, key)),
    })
}

/// Where the regime named by the parameter `key` starts and changes along x: at each x the
/// regime most of its points are in (ties: the first seen), a mark at the first x and at each
/// x where it differs from the one before.
fn regime_marks(results: &[&BenchResult], x: &str, key: &str) -> Vec<(f64, String)> {
    let mut at: Vec<(f64, Vec<String>)> = Vec::new();
    for r in results {
        let (Some(xv), Some(reg)) = (param(r, x), r.params.get(key).and_then(|v| v.as_str()))
        else {
            continue;
        };
        match at.iter_mut().find(|(v, _)| *v == xv) {
            Some((_, regs)) => regs.push(reg.to_string()),
            None => at.push((xv, vec![reg.to_string()])),
        }
    }
    at.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut marks: Vec<(f64, String)> = Vec::new();
    for (xv, regs) in at {
        let count = |r: &String| regs.iter().filter(|x| *x == r).count();
        let Some(top) = regs
            .iter()
            .max_by(|a, b| count(a).cmp(&count(b)).then(std::cmp::Ordering::Greater))
        else {
            continue;
        };
        if marks.last().is_none_or(|(_, last)| last != top) {
            marks.push((xv, top.clone()));
        }
    }
    marks
}

/// What a figure belongs to on the page.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Owner {
    Ladder,
    Page,
    /// The machine's speed over the run, beside the run's notes.
    Speed,
    Family(String),
    Result(String),
}

/// A figure to draw: its file stem, title, where it goes on the page, and what it shows.
pub(super) struct Drawn<'a> {
    pub(super) name: String,
    pub(super) title: String,
    pub(super) owner: Owner,
    pub(super) figure: Figure<'a>,
}

/// Results grouped by family, in first-seen order.
pub(super) fn families(run: &Run) -> Vec<(String, Vec<&BenchResult>)> {
    let mut families: Vec<(String, Vec<&BenchResult>)> = Vec::new();
    for r in &run.results {
        match families.iter_mut().find(|(f, _)| *f == r.family) {
            Some((_, v)) => v.push(r),
            None => families.push((r.family.clone(), vec![r])),
        }
    }
    families
}

/// What each clock read costs (the timer/ results, or the calibration alone).
fn clock_figure(run: &Run) -> Drawn<'_> {
    let timer_bars: Vec<Bar> = run
        .results
        .iter()
        .filter(|r| r.family == "timer" && ok(r))
        .filter_map(bar)
        .collect();
    let title = format!(
        "clock calibration: CLOCK_MONOTONIC costs {} per read, smallest step {}",
        format_ns(run.clock.cost_ns),
        format_ns(run.clock.resolution_ns)
    );
    let bars = if timer_bars.is_empty() {
        let c = run.clock.cost_ns;
        vec![Bar {
            label: "CLOCK_MONOTONIC (calibration)".into(),
            value: c,
            lo: c,
            hi: c,
            flagged: false,
            points: vec![],
        }]
    } else {
        timer_bars
    };
    Drawn {
        name: "clock".into(),
        title: title.clone(),
        owner: Owner::Page,
        figure: Figure::Bars { title, bars },
    }
}

/// The machine's speed over the run, from its worker repetitions' levels in time order (none
/// for a run too short to show it, or one of schema version 1).
pub(super) fn speed_figure<'a>(run: &Run) -> Option<Drawn<'a>> {
    let series = analysis::levels_in_time(&run.results);
    if series.len() < analysis::SPEED_MIN_POINTS {
        return None;
    }
    let percent = |&(t, level): &(f64, f64)| (t / 1e3, 100.0 * (level.exp() - 1.0));
    let title =
        "The machine's speed over the run: each repetition against its result's median".to_string();
    Some(Drawn {
        name: "speed".into(),
        title: title.clone(),
        owner: Owner::Speed,
        figure: Figure::MachineSpeed {
            title,
            points: series.iter().map(percent).collect(),
            smoothed: analysis::smoothed(&series).iter().map(percent).collect(),
        },
    })
}

/// A family's figures: its bar chart (results on a declared curve left out) and its curves.
fn family_figures<'a>(
    fam: &str,
    rs: &[&'a BenchResult],
    curves: &[(String, Curve)],
) -> Vec<Drawn<'a>> {
    let on_curve = |r: &BenchResult| curves.iter().any(|(p, _)| r.id.starts_with(p.as_str()));
    // Rows are drawn bottom up: reversed, the chart reads in the table's order.
    let bars: Vec<Bar> = rs
        .iter()
        .rev()
        .filter(|r| ok(r) && !on_curve(r))
        .filter_map(|r| bar(r))
        .collect();
    let mut out = Vec::new();
    let owner = Owner::Family(fam.to_string());
    if !bars.is_empty() {
        let title = format!("{fam}/: median per operation, its 95% CI and each repetition");
        out.push(Drawn {
            name: format!("family-{fam}"),
            title: title.clone(),
            owner: owner.clone(),
            figure: Figure::Bars { title, bars },
        });
    }
    let cycles: Vec<(f64, f64)> = rs
        .iter()
        .filter(|r| ok(r))
        .filter_map(|r| {
            let c = *r.events.as_ref()?.per_op.get("cycles")?;
            Some((r.stats.as_ref()?.median, c))
        })
        .collect();
    if cycles.len() >= 2 {
        let title = format!("{fam}/: cycles per operation against its time");
        out.push(Drawn {
            name: format!("cycles-{fam}"),
            title: title.clone(),
            owner: owner.clone(),
            figure: Figure::CyclesVsTime {
                title,
                points: cycles,
            },
        });
    }
    for (prefix, curve) in curves {
        // A curve several benchmarks declare (scale/'s, one per case) is named and titled
        // after each benchmark, so their figures neither overwrite nor look alike.
        let shared = curves.iter().filter(|(_, c)| c.name == curve.name).count() > 1;
        let (name, title) = if shared {
            (
                format!("{}-curve", slug(prefix)),
                format!("{}: {}", prefix.trim_end_matches('/'), curve.title),
            )
        } else {
            (curve.name.to_string(), curve.title.to_string())
        };
        if let Some(figure) = curve_figure(rs, prefix, curve, &title) {
            out.push(Drawn {
                name,
                title,
                owner: owner.clone(),
                figure,
            });
        }
    }
    out
}

/// Every figure of a run.
pub(super) fn figures<'a>(
    run: &'a Run,
    curves: &[(String, Curve)],
    ladder: &[&str],
) -> Vec<Drawn<'a>> {
    let mut out: Vec<Drawn> = ladder_figure(run, ladder).into_iter().collect();
    out.extend(hook_figure(run));
    out.push(clock_figure(run));
    out.extend(speed_figure(run));
    for (fam, rs) in families(run) {
        out.extend(family_figures(&fam, &rs, curves));
        for r in rs.iter().filter(|r| ok(r)) {
            let owner = Owner::Result(r.id.clone());
            out.push(Drawn {
                name: format!("{}-series", slug(&r.id)),
                title: format!("{}: samples in order", r.id),
                owner: owner.clone(),
                figure: Figure::TimeSeries(r),
            });
            out.push(Drawn {
                name: format!("{}-hist", slug(&r.id)),
                title: format!("{}: distribution", r.id),
                owner,
                figure: Figure::Histogram(r),
            });
        }
    }
    out
}

/// A result's id as a file name and an HTML anchor: every character but ASCII letters and
/// digits becomes `-` (the figures' names and the page's links agree on it).
pub(super) fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, x: f64, state: Option<&str>) -> BenchResult {
        let mut r = crate::base::model::testdata::result(id, vec![1.0, 2.0, 3.0]);
        r.params.insert("gap_decade".into(), serde_json::json!(x));
        if let Some(s) = state {
            r.params.insert("idle_state".into(), serde_json::json!(s));
        }
        r
    }

    #[test]
    fn regimes_are_marked_where_they_start_and_change_by_the_majority_at_each_x() {
        let rs = [
            result("wake/futex/gap-0", 0.0, Some("none")),
            result("wake/pipe/gap-0", 0.0, Some("none")),
            result("wake/futex/gap-1us", 1.0, Some("POLL")),
            result("wake/pipe/gap-1us", 1.0, Some("none")),
            result("wake/futex/gap-10us", 2.0, Some("haltpoll")),
            result("wake/pipe/gap-10us", 2.0, Some("haltpoll")),
            result("wake/eventfd/gap-10us", 2.0, Some("POLL")),
            result("wake/futex/gap-1ms", 4.0, Some("haltpoll")),
            result("wake/futex/gap-10ms", 5.0, None),
        ];
        let refs: Vec<&BenchResult> = rs.iter().collect();
        // At 1 us a tie: the first seen (POLL) wins.
        assert_eq!(
            regime_marks(&refs, "gap_decade", "idle_state"),
            vec![
                (0.0, "none".to_string()),
                (1.0, "POLL".to_string()),
                (2.0, "haltpoll".to_string())
            ]
        );
        assert!(regime_marks(&refs[8..], "gap_decade", "idle_state").is_empty());
    }
}
