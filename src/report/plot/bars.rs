//! Horizontal bar charts on a log axis: a family's medians with their CIs, and a comparison's
//! slowdowns with the shaded no-change band.

use plotters::coord::Shift;
use plotters::coord::combinators::LogCoord;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::{
    BLUE_, Bar, CAPTION, GREEN_, GREY_, ORANGE_, RED_, Res, TEXT, e2s, log_tick, unit_for,
};
use crate::base::stats;

type BarChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<LogCoord<f64>, RangedCoordf64>>;

/// The x range of the bars (whiskers and the band included), widened for breathing room.
fn log_range(bars: &[Bar], div: f64, band: Option<f64>) -> (f64, f64) {
    let (mut x0, mut x1) = crate::base::stats::extent(
        bars.iter()
            .flat_map(|b| [b.value, b.lo, b.hi])
            .map(|v| v / div)
            .filter(|v| v.is_finite() && *v > 0.0),
    );
    if let Some(t) = band {
        x0 = x0.min(1.0 - t);
        x1 = x1.max(1.0 + t);
    }
    if !(x0.is_finite() && x1.is_finite()) {
        (x0, x1) = (0.1, 10.0);
    }
    (x0 / 1.6, x1 * 1.6)
}

/// Room for the longest label, 8 to 40 characters (about 7 px each at the tick font size).
fn label_width(bars: &[Bar]) -> u32 {
    let chars = bars.iter().map(|b| b.label.chars().count()).max();
    chars.unwrap_or(8).clamp(8, 40) as u32 * 8 + 12
}

/// Horizontal bars on a log axis. With `band`, values are ratios drawn from 1 and the band
/// [1 - band, 1 + band] is shaded (the comparison's noise threshold).
pub(super) fn bar_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    bars: &[Bar],
    band: Option<f64>,
) -> Res {
    let (unit, div) = match band {
        Some(_) => ("x", 1.0),
        None => unit_for(stats::median(
            &bars.iter().map(|b| b.value).collect::<Vec<_>>(),
        )),
    };
    let (x0, x1) = log_range(bars, div, band);
    let n = bars.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", CAPTION))
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(label_width(bars))
        .build_cartesian_2d((x0..x1).log_scale(), 0f64..n)
        .map_err(e2s)?;
    // What the marks mean is said under the axis, never in a legend box over the bars.
    let dots = if bars.iter().any(|b| !b.points.is_empty()) {
        "; dots: repetitions"
    } else {
        ""
    };
    let x_desc = match band {
        Some(t) => format!(
            "slowdown (candidate / base), log scale; grey: no-change band ±{:.0}%",
            t * 100.0
        ),
        None => {
            let orange = if bars.iter().any(|b| b.flagged) {
                "; orange: disturbed"
            } else {
                ""
            };
            format!("median ({unit}), log scale; whiskers: 95% CI{dots}{orange}")
        }
    };
    bar_mesh(&mut chart, bars, &x_desc, (x0, x1))?;
    if let Some(t) = band {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(1.0 - t, 0.0), (1.0 + t, n)],
                GREY_.mix(0.18).filled(),
            )))
            .map_err(e2s)?;
    }
    for (k, b) in bars.iter().enumerate() {
        draw_bar(&mut chart, k as f64, b, div, x0, band)?;
    }
    Ok(())
}

/// The axis with the bars' labels at their centres.
fn bar_mesh<DB: DrawingBackend>(
    chart: &mut BarChart<'_, DB>,
    bars: &[Bar],
    x_desc: &str,
    (x0, x1): (f64, f64),
) -> Res {
    let names: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .x_label_formatter(&|v| log_tick(v, x0, x1))
        .y_labels(bars.len().max(1) * 2 + 1)
        .y_label_formatter(&|y| {
            // Labels sit at bar centres (k + 0.5); other tick positions stay blank.
            let k = (y - 0.5).round();
            if ((y - 0.5) - k).abs() < 1e-6 && k >= 0.0 {
                names.get(k as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", TEXT))
        .axis_desc_style(("sans-serif", TEXT))
        .light_line_style(WHITE.mix(0.0))
        .disable_y_mesh()
        .draw()
        .map_err(e2s)
}

/// Bar `b` in row `y`, from the axis (or from 1 for ratios), with its CI whiskers. Ratios are
/// red when slower beyond the band, green when faster, grey otherwise; a disturbed median is
/// orange.
fn draw_bar<DB: DrawingBackend>(
    chart: &mut BarChart<'_, DB>,
    y: f64,
    b: &Bar,
    div: f64,
    x0: f64,
    band: Option<f64>,
) -> Res {
    let base = if band.is_some() { 1.0 } else { x0 };
    let v = (b.value / div).max(x0);
    let color = match band {
        Some(t) if b.lo > 1.0 + t => RED_,
        Some(t) if b.hi < 1.0 - t => GREEN_,
        Some(_) => GREY_,
        None if b.flagged => ORANGE_,
        None => BLUE_,
    };
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(base.min(v), y + 0.2), (base.max(v), y + 0.8)],
            color.mix(0.75).filled(),
        )))
        .map_err(e2s)?;
    let (lo, hi) = ((b.lo / div).max(x0), (b.hi / div).max(x0));
    if !(lo.is_finite() && hi.is_finite()) {
        return Ok(());
    }
    let whiskers = [
        vec![(lo, y + 0.5), (hi, y + 0.5)],
        vec![(lo, y + 0.3), (lo, y + 0.7)],
        vec![(hi, y + 0.3), (hi, y + 0.7)],
    ];
    for w in whiskers {
        chart
            .draw_series(std::iter::once(PathElement::new(w, BLACK.stroke_width(1))))
            .map_err(e2s)?;
    }
    let dots = b
        .points
        .iter()
        .map(|p| p / div)
        .filter(|p| p.is_finite() && *p > 0.0)
        .map(|p| Circle::new((p.max(x0), y + 0.5), 3, BLACK.mix(0.55).filled()));
    chart.draw_series(dots).map_err(e2s)?;
    Ok(())
}
