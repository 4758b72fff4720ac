//! Curves: cost against a parameter (the ring's processes on a log2 axis, fork against
//! resident memory), one line per series with its CI as a band; and two scatters: cycles against
//! time per operation, and the machine's speed over a run.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::base::stats::{extent, quantile_sorted, sorted_copy};

use super::{
    CAPTION, GREY_, LEGEND_ROOM, PALETTE, Point, Res, TEXT, axes, e2s, legend, padded, tick,
    unit_for,
};

/// The x range of the drawn (transformed) x values: whole powers of two on a log2 axis.
fn x_range(xs: &[f64], log2_x: bool) -> (f64, f64) {
    let (xa, xb) = extent(xs.iter().copied());
    if log2_x {
        (xa.floor() - 0.3, xb.ceil() + 0.3)
    } else {
        padded(xa, xb)
    }
}

/// Tick labels of the x axis: on a log2 axis, N at whole powers of two and blank between.
fn x_label(v: &f64, log2_x: bool) -> String {
    if !log2_x {
        return tick(v);
    }
    let k = v.round();
    if (v - k).abs() < 1e-6 && k >= 0.0 {
        format!("{}", 2f64.powi(k as i32) as u64)
    } else {
        String::new()
    }
}

/// A titled chart with linear axes and the room the axis labels need.
fn cartesian<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    x: Range<f64>,
    y: Range<f64>,
) -> Result<ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", CAPTION))
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(e2s)
}

pub(super) fn curves<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    log2_x: bool,
    series: &[(String, Vec<Point>)],
    marks: &[(f64, String)],
) -> Res {
    let all: Vec<&Point> = series.iter().flat_map(|(_, p)| p.iter()).collect();
    if all.is_empty() {
        return Err("no points".into());
    }
    let ymax = all
        .iter()
        .map(|p| p.hi.max(p.y))
        .fold(f64::NEG_INFINITY, f64::max);
    let ymin = all
        .iter()
        .map(|p| p.lo.min(p.y))
        .fold(f64::INFINITY, f64::min)
        .min(0.0);
    let (unit, div) = unit_for(ymax.abs().max(1.0));
    let (y0, y1) = padded(ymin / div, ymax / div);
    let y1 = y1 + (y1 - y0) * LEGEND_ROOM;
    // On a log2 axis the drawn x is log2(N); ticks are labelled with N.
    let tx = |x: f64| if log2_x { x.max(1e-9).log2() } else { x };
    let xs: Vec<f64> = all.iter().map(|p| tx(p.x)).collect();
    let (x0, x1) = x_range(&xs, log2_x);
    let n_x_labels = if log2_x {
        ((x1 - x0) * 4.0) as usize + 1
    } else {
        10
    };
    let mut chart = cartesian(root, title, x0..x1, y0..y1)?;
    let y_desc = format!("{y_desc} ({unit})");
    axes(&mut chart, x_desc, &y_desc, n_x_labels, &|v| {
        x_label(v, log2_x)
    })?;
    for (k, (name, pts)) in series.iter().enumerate() {
        let c = PALETTE[k % PALETTE.len()];
        let band: Vec<(f64, f64)> = pts
            .iter()
            .map(|p| (tx(p.x), p.hi / div))
            .chain(pts.iter().rev().map(|p| (tx(p.x), p.lo / div)))
            .collect();
        chart
            .draw_series(std::iter::once(Polygon::new(band, c.mix(0.2).filled())))
            .map_err(e2s)?;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (tx(p.x), p.y / div)),
                c.stroke_width(2),
            ))
            .map_err(e2s)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        let dots = pts
            .iter()
            .map(|p| Circle::new((tx(p.x), p.y / div), 3, c.filled()));
        chart.draw_series(dots).map_err(e2s)?;
    }
    // A regime's start: a thin line up the plot, its name beside it, under the legend's room.
    let grey = BLACK.mix(0.45);
    for (x, label) in marks {
        let x = tx(*x);
        let top = y1 - (y1 - y0) * LEGEND_ROOM;
        chart
            .draw_series(LineSeries::new([(x, y0), (x, top)], grey.stroke_width(1)))
            .map_err(e2s)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {label}"),
                (x, top),
                ("sans-serif", TEXT).into_font().color(&grey),
            )))
            .map_err(e2s)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// Cycles per operation (y) against ns per operation (x), one dot each.
pub(super) fn scatter<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    points: &[(f64, f64)],
) -> Res {
    if points.is_empty() {
        return Err("no points".into());
    }
    let xmax = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let (unit, div) = unit_for(xmax.abs().max(1.0));
    let (x0, x1) = padded(0.0, xmax / div);
    let ymax = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let (y0, y1) = padded(0.0, ymax);
    let mut chart = cartesian(root, title, x0.max(0.0)..x1, y0.max(0.0)..y1)?;
    axes(
        &mut chart,
        &format!("time per operation ({unit})"),
        "cycles per operation",
        10,
        &tick,
    )?;
    let c = PALETTE[0];
    chart
        .draw_series(
            points
                .iter()
                .map(|&(x, y)| Circle::new((x / div, y), 4, c.filled())),
        )
        .map_err(e2s)?;
    Ok(())
}

/// The y range of the speed figure: the 1st to 99th percentile of the dots, widened to hold the
/// whole smoothed line.
fn robust_range(points: &[(f64, f64)], smoothed: &[(f64, f64)]) -> (f64, f64) {
    let ys = sorted_copy(&points.iter().map(|p| p.1).collect::<Vec<_>>());
    let (lo, hi) = extent(smoothed.iter().map(|p| p.1));
    (
        quantile_sorted(&ys, 0.01).min(lo),
        quantile_sorted(&ys, 0.99).max(hi),
    )
}

/// Levels (percent from each result's median, y) against the time they were measured (s, x):
/// a dot per worker repetition, the moving median as a line, zero as a rule.
pub(super) fn speed<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    points: &[(f64, f64)],
    smoothed: &[(f64, f64)],
) -> Res {
    if points.is_empty() {
        return Err("no points".into());
    }
    let (xa, xb) = extent(points.iter().map(|p| p.0));
    // The y axis spans the middle 98% of the dots and the whole line: one repetition far out
    // (a fork at +90%) would otherwise squash the band where the story is. Dots beyond it are
    // drawn hollow at the edge.
    let (ya, yb) = robust_range(points, smoothed);
    let (x0, x1) = padded(xa.min(0.0), xb);
    let (y0, y1) = padded(ya.min(0.0), yb.max(0.0));
    let top = y1;
    let y1 = y1 + (y1 - y0) * LEGEND_ROOM;
    let mut chart = cartesian(root, title, x0..x1, y0..y1)?;
    axes(
        &mut chart,
        "time since the run started (s)",
        "level against its result's median (%)",
        10,
        &tick,
    )?;
    chart
        .draw_series(LineSeries::new(
            [(x0, 0.0), (x1, 0.0)],
            GREY_.stroke_width(1),
        ))
        .map_err(e2s)?;
    let dot = PALETTE[0];
    let on_axis = |p: &&(f64, f64)| (y0..=top).contains(&p.1);
    let inside = points.iter().filter(on_axis);
    let beyond: Vec<&(f64, f64)> = points.iter().filter(|p| !on_axis(p)).collect();
    chart
        .draw_series(inside.map(|&p| Circle::new(p, 3, dot.mix(0.6).filled())))
        .map_err(e2s)?
        .label("one repetition (a fresh worker)")
        .legend(move |(x, y)| Circle::new((x + 8, y), 3, dot.filled()));
    if !beyond.is_empty() {
        chart
            .draw_series(
                beyond
                    .iter()
                    .map(|&&(x, y)| Circle::new((x, y.clamp(y0, top)), 4, dot.stroke_width(1))),
            )
            .map_err(e2s)?
            .label("beyond the axis, drawn at its edge")
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, dot.stroke_width(1)));
    }
    let line = PALETTE[1];
    chart
        .draw_series(LineSeries::new(
            smoothed.iter().copied(),
            line.stroke_width(2),
        ))
        .map_err(e2s)?
        .label("median of 5 neighbours")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], line.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speed_axis_leaves_out_a_lone_far_repetition_but_never_the_line() {
        let mut points: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64, (i % 21) as f64 - 10.0))
            .collect();
        points.push((100.0, 93.0));
        assert_eq!(robust_range(&points, &[]), (-10.0, 10.0));
        assert_eq!(
            robust_range(&points, &[(5.0, -30.0), (6.0, 12.0)]),
            (-30.0, 12.0)
        );
    }
}
