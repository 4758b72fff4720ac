//! Figures, drawn with plotters into SVG (always) or PNG (`--png`). Each figure is a value
//! (`Figure`) drawn by one generic function, so the SVG and the PNG are the same drawing.
//! Text in PNGs is rasterised with ab_glyph from the DejaVu Sans bundled in assets/fonts (no
//! system font library); SVG text is left to the viewer's sans-serif.
//!
//! Long series are reduced for drawing, never for statistics: a time series of more than
//! `MAX_POINTS` samples is drawn as the min-max envelope of equal buckets, so a single spike
//! stays visible (the spikes are the point of a per-iteration plot).

use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

mod bars;
mod curves;

use bars::bar_chart;
use curves::curves;

use super::{format_ns, scale};
use crate::base::model::BenchResult;
use crate::base::stats;

const FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
/// Most points one series draws (a series with more is reduced to its envelope).
pub const MAX_POINTS: usize = 600;
// Okabe & Ito's colour-blind-safe palette (blue, orange, green, vermillion, reddish purple,
// sky blue): distinct under every common colour-vision deficiency and in greyscale by lightness.
const BLUE_: RGBColor = RGBColor(0, 114, 178);
const ORANGE_: RGBColor = RGBColor(230, 159, 0);
const GREEN_: RGBColor = RGBColor(0, 158, 115);
const RED_: RGBColor = RGBColor(213, 94, 0);
const GREY_: RGBColor = RGBColor(120, 120, 120);
const PALETTE: [RGBColor; 6] = [
    BLUE_,
    ORANGE_,
    GREEN_,
    RED_,
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
];

/// Font sizes as plotters takes them; its SVG text comes out at 0.806 of these, so the
/// smallest (tick labels, legends) is 11.3 px at the figure's natural width, which the page
/// never shrinks below at 1280 px.
const TEXT: u32 = 14;
const CAPTION: u32 = 18;
/// Head room above the data, as a share of the data's range, where legends sit.
const LEGEND_ROOM: f64 = 0.45;

static FONT_ONCE: Once = Once::new();

/// Make the bundled font the "sans-serif" of bitmap text (once per process).
pub fn register_font() {
    FONT_ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One labelled bar: value with its CI, and the repetitions' own levels (drawn as dots, so a
/// reader sees where the uncertainty comes from).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bar {
    /// The benchmark or side it stands for.
    pub label: String,
    /// Its median.
    pub value: f64,
    /// The CI's lower bound.
    pub lo: f64,
    /// The CI's upper bound.
    pub hi: f64,
    /// Drawn in the warning colour (disturbed, or called).
    pub flagged: bool,
    /// The repetitions' own levels, drawn as dots.
    pub points: Vec<f64>,
}

/// A curve point with its CI.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The parameter.
    pub x: f64,
    /// The median.
    pub y: f64,
    /// The CI's lower bound.
    pub lo: f64,
    /// The CI's upper bound.
    pub hi: f64,
}

#[derive(Debug, Clone)]
/// A figure a page draws.
pub enum Figure<'a> {
    /// Every sample in order, with the median and its CI.
    TimeSeries(&'a BenchResult),
    /// Histogram of the samples with the median and its CI.
    Histogram(&'a BenchResult),
    /// Horizontal bars of medians (ns) with CI whiskers on a log axis.
    Bars {
        /// The figure's title.
        title: String,
        /// The bars, top to bottom.
        bars: Vec<Bar>,
    },
    /// Lines of y (ns) against x with CI bands, one per named series.
    Curves {
        /// The figure's title.
        title: String,
        /// The x axis's label.
        x_desc: String,
        /// What one y value is, before the unit: "per switch", "per fork".
        y_desc: String,
        /// x grows in powers of two: drawn on a log2 axis with ticks at 2, 4, 8, ...
        log2_x: bool,
        /// Named series of points.
        series: Vec<(String, Vec<Point>)>,
        /// Vertical marks: at x, a regime starts (wake/: the idle state entered from there).
        marks: Vec<(f64, String)>,
    },
    /// Cycles per operation against its time (ns), one dot per benchmark: the slope is the
    /// clock rate, and a dot off the line spent its time waiting, not computing.
    CyclesVsTime {
        /// The figure's title.
        title: String,
        /// (ns, cycles) per benchmark.
        points: Vec<(f64, f64)>,
    },
    /// The machine's speed over a run: each worker repetition's level (percent from its
    /// result's median) at its start time (s), and their moving median as a line.
    MachineSpeed {
        /// The figure's title.
        title: String,
        /// (s, percent) per repetition.
        points: Vec<(f64, f64)>,
        /// The moving median of the points.
        smoothed: Vec<(f64, f64)>,
    },
    /// Slowdown per benchmark (ratio), sorted, CI whiskers, the noise band shaded.
    Slowdown {
        /// The figure's title.
        title: String,
        /// One bar per benchmark, the ratio with its CI.
        bars: Vec<Bar>,
        /// The noise band's half-width (0.02 = ±2%).
        threshold: f64,
    },
}

/// Width and height of every figure, pixels.
pub const SIZE: (u32, u32) = (820, 360);

/// Height a figure needs (bar charts grow with their bars).
pub fn size_of(f: &Figure) -> (u32, u32) {
    match f {
        Figure::Bars { bars, .. } | Figure::Slowdown { bars, .. } => {
            (SIZE.0, (100 + 24 * bars.len() as u32).max(170))
        }
        _ => SIZE,
    }
}

/// The figure as an SVG document.
pub fn svg(f: &Figure) -> Result<String, String> {
    register_font();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size_of(f)).into_drawing_area();
        draw(&root, f)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The figure as the bytes of a PNG image.
pub fn png(f: &Figure) -> Result<Vec<u8>, String> {
    register_font();
    let (w, h) = size_of(f);
    // A bitmap can be megabytes, and the glyph rasteriser allocates as it draws, where a
    // failure aborts: a process short of memory says so instead. Once the emergency reserve
    // is spent no more bitmaps are drawn; before each, room for it and a margin is probed.
    let n = w as usize * h as usize * 3;
    if crate::base::reserve::spent() {
        return Err("memory ran short, so no more PNG figures were drawn (the SVGs were)".into());
    }
    if !crate::base::reserve::room_for(2 * n + (4 << 20)) {
        return Err(format!("not enough memory to draw a {w}x{h} PNG figure"));
    }
    let mut rgb: Vec<u8> = Vec::new();
    rgb.try_reserve_exact(n)
        .map_err(|e| format!("not enough memory for a {w}x{h} image: {e}"))?;
    rgb.resize(n, 0);
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root, f)?;
        root.present().map_err(e2s)?;
    }
    let mut out = Vec::new();
    out.try_reserve(n / 4)
        .map_err(|e| format!("not enough memory to encode a {w}x{h} image: {e}"))?;
    let mut enc = ::png::Encoder::new(&mut out, w, h);
    enc.set_color(::png::ColorType::Rgb);
    enc.set_depth(::png::BitDepth::Eight);
    enc.write_header()
        .and_then(|mut wr| wr.write_image_data(&rgb))
        .map_err(e2s)?;
    Ok(out)
}

type Res = Result<(), String>;

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Axes, descriptions and tick labels of the linear charts (time series, histogram, curves).
fn axes<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    x_desc: &str,
    y_desc: &str,
    x_labels: usize,
    x_fmt: &dyn Fn(&f64) -> String,
) -> Res {
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(x_labels)
        .x_label_formatter(x_fmt)
        .y_label_formatter(&tick)
        .label_style(("sans-serif", TEXT))
        .axis_desc_style(("sans-serif", TEXT))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e2s)
}

/// The legend box every figure uses.
fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Res {
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(GREY_)
        .label_font(("sans-serif", TEXT))
        .draw()
        .map_err(e2s)
}

/// The unit a figure's values are shown in, and the divisor to get there.
fn unit_for(ns: f64) -> (&'static str, f64) {
    let (_, unit) = scale(ns);
    let div = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        _ => 1e9,
    };
    (unit, div)
}

/// Tick labels without a useless ".0" and with no more digits than the step needs.
pub fn tick(v: &f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        format!("{}", v.round() as i64)
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// Tick labels of a log axis from `x0` to `x1`: only at 1, 2 and 5 times a power of ten
/// (every mantissa when the range is too short to hold two of those), so neighbouring labels
/// such as "90" and "100" never print on top of each other.
pub fn log_tick(v: &f64, x0: f64, x1: f64) -> String {
    let nice = |m: f64| [1.0, 2.0, 5.0].iter().any(|k| (m - k).abs() < 1e-6 * k);
    let mantissa = |x: f64| x / 10f64.powf(x.log10().floor());
    let in_range = (x0.log10().floor() as i32..=x1.log10().ceil() as i32)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|k| k * 10f64.powi(e)))
        .filter(|x| *x >= x0 && *x <= x1)
        .count();
    if *v <= 0.0 || !v.is_finite() {
        return String::new();
    }
    if in_range >= 2 && !nice(mantissa(*v)) {
        return String::new();
    }
    tick(v)
}

fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    if hi <= lo {
        let d = lo.abs().max(1e-9) * 0.1;
        return (lo - d, hi + d);
    }
    let d = (hi - lo) * 0.08;
    (lo - d, hi + d)
}

/// Draw `f` on `root`.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, f: &Figure) -> Res {
    root.fill(&WHITE).map_err(e2s)?;
    match f {
        Figure::TimeSeries(r) => time_series(root, r),
        Figure::Histogram(r) => histogram(root, r),
        Figure::Bars { title, bars } => bar_chart(root, title, bars, None),
        Figure::Curves {
            title,
            x_desc,
            y_desc,
            log2_x,
            series,
            marks,
        } => curves(root, title, (x_desc, y_desc), *log2_x, series, marks),
        Figure::Slowdown {
            title,
            bars,
            threshold,
        } => bar_chart(root, title, bars, Some(*threshold)),
        Figure::CyclesVsTime { title, points } => curves::scatter(root, title, points),
        Figure::MachineSpeed {
            title,
            points,
            smoothed,
        } => curves::speed(root, title, points, smoothed),
    }
}

/// Samples reduced to at most MAX_POINTS (x, y) pairs: the min and max of each bucket.
/// Lower and upper outlines of a series, as (x, y) points.
pub type Envelope = (Vec<(f64, f64)>, Vec<(f64, f64)>);

/// The lower and upper outline of `samples` in buckets, at most `MAX_POINTS` each.
pub fn envelope(samples: &[f64]) -> Envelope {
    let n = samples.len();
    if n <= MAX_POINTS {
        let pts: Vec<(f64, f64)> = samples
            .iter()
            .enumerate()
            .map(|(i, &y)| (i as f64, y))
            .collect();
        return (pts.clone(), pts);
    }
    let buckets = MAX_POINTS / 2;
    let per = n.div_ceil(buckets);
    let mut lo = Vec::with_capacity(buckets);
    let mut hi = Vec::with_capacity(buckets);
    for (k, chunk) in samples.chunks(per).enumerate() {
        let x = (k * per + chunk.len() / 2) as f64;
        let (a, b) = crate::base::stats::extent(chunk.iter().copied());
        lo.push((x, a));
        hi.push((x, b));
    }
    (lo, hi)
}

fn time_series<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &BenchResult) -> Res {
    let st = r.stats.as_ref().ok_or("no samples")?;
    let (unit, div) = unit_for(st.median);
    let (lo_env, hi_env) = envelope(&r.samples_ns);
    // The y range shows the body and the tail up to p99.9; beyond it points sit on the edge.
    let s = stats::sorted_copy(&r.samples_ns);
    let top = stats::quantile_sorted(&s, 0.999).max(st.ci95[1]);
    let (y0, y1) = padded(st.min / div, top / div);
    let y1 = y1 + (y1 - y0) * LEGEND_ROOM;
    let n = r.samples_ns.len().max(2) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: every sample in order", r.id),
            ("sans-serif", CAPTION),
        )
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n, y0..y1)
        .map_err(e2s)?;
    axes(
        &mut chart,
        "sample",
        &format!("per operation ({unit})"),
        10,
        &tick,
    )?;
    let clamp = |p: &(f64, f64)| (p.0, (p.1 / div).clamp(y0, y1));
    chart
        .draw_series(LineSeries::new(hi_env.iter().map(clamp), BLUE_.mix(0.8)))
        .map_err(e2s)?
        .label("samples (max per bucket)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE_));
    if lo_env != hi_env {
        chart
            .draw_series(LineSeries::new(lo_env.iter().map(clamp), BLUE_.mix(0.4)))
            .map_err(e2s)?
            .label("min per bucket")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE_.mix(0.4)));
    }
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, st.ci95[0] / div), (n, st.ci95[1] / div)],
            ORANGE_.mix(0.25).filled(),
        )))
        .map_err(e2s)?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, st.median / div), (n, st.median / div)],
            ORANGE_.stroke_width(2),
        ))
        .map_err(e2s)?
        .label(format!("median {} (95% CI band)", format_ns(st.median)))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], ORANGE_.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn histogram<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &BenchResult) -> Res {
    let st = r.stats.as_ref().ok_or("no samples")?;
    let (unit, div) = unit_for(st.median);
    // Bins over p0.5..p99.5 so one far outlier does not squash the body; the rest is said.
    let s = stats::sorted_copy(&r.samples_ns);
    let (lo, hi) = (
        stats::quantile_sorted(&s, 0.005) / div,
        stats::quantile_sorted(&s, 0.995) / div,
    );
    let (lo, hi) = if hi > lo { (lo, hi) } else { padded(lo, hi) };
    let bins = 40usize;
    let w = (hi - lo) / bins as f64;
    let mut counts = vec![0usize; bins];
    let mut outside = 0;
    for &x in &r.samples_ns {
        let v = x / div;
        if v < lo || v > hi {
            outside += 1;
            continue;
        }
        let k = (((v - lo) / w) as usize).min(bins - 1);
        counts[k] += 1;
    }
    let cmax = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "{}: distribution{}",
                r.id,
                if outside > 0 {
                    format!(" ({outside} samples beyond p0.5-p99.5 not drawn)")
                } else {
                    String::new()
                }
            ),
            ("sans-serif", CAPTION),
        )
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(64)
        .build_cartesian_2d(lo..hi, 0f64..cmax * (1.0 + LEGEND_ROOM))
        .map_err(e2s)?;
    axes(
        &mut chart,
        &format!("per operation ({unit})"),
        "samples",
        10,
        &tick,
    )?;
    chart
        .draw_series(counts.iter().enumerate().map(|(k, &c)| {
            let x0 = lo + k as f64 * w;
            Rectangle::new([(x0, 0.0), (x0 + w, c as f64)], BLUE_.mix(0.6).filled())
        }))
        .map_err(e2s)?
        .label("samples per bin")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], BLUE_.mix(0.6).filled()));
    let (m, a, b) = (st.median / div, st.ci95[0] / div, st.ci95[1] / div);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(a.max(lo), 0.0), (b.min(hi), cmax * (1.0 + LEGEND_ROOM))],
            ORANGE_.mix(0.25).filled(),
        )))
        .map_err(e2s)?;
    chart
        .draw_series(LineSeries::new(
            [(m, 0.0), (m, cmax * (1.0 + LEGEND_ROOM))],
            ORANGE_.stroke_width(2),
        ))
        .map_err(e2s)?
        .label(format!("median {} and its 95% CI", format_ns(st.median)))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], ORANGE_.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    #[test]
    fn ticks_drop_needless_decimals() {
        assert_eq!(tick(&150.0), "150");
        assert_eq!(tick(&2.5), "2.5");
        assert_eq!(tick(&0.25), "0.25");
        assert_eq!(tick(&12.5), "12.5");
        assert_eq!(tick(&0.0), "0");
        assert_eq!(tick(&0.01), "0.01");
    }

    #[test]
    fn log_ticks_never_crowd() {
        // 90 and 100 on a 40..400 axis: only 50, 100, 200 are labelled.
        assert_eq!(log_tick(&90.0, 40.0, 400.0), "");
        assert_eq!(log_tick(&100.0, 40.0, 400.0), "100");
        assert_eq!(log_tick(&200.0, 40.0, 400.0), "200");
        // A short range with at most one nice value keeps every label plotters gives.
        assert_eq!(log_tick(&150.0, 120.0, 180.0), "150");
    }

    #[test]
    fn envelope_keeps_spikes_and_short_series_whole() {
        let mut s = vec![1.0; 10_000];
        s[4321] = 500.0;
        let (lo, hi) = envelope(&s);
        assert!(lo.len() <= MAX_POINTS && hi.len() <= MAX_POINTS);
        assert!(hi.iter().any(|p| p.1 == 500.0), "the spike survives");
        assert!(lo.iter().all(|p| p.1 == 1.0));
        let (a, b) = envelope(&[1.0, 2.0]);
        assert_eq!(a, vec![(0.0, 1.0), (1.0, 2.0)]);
        assert_eq!(a, b);
    }

    #[test]
    fn every_figure_draws_to_svg_with_its_labels() {
        let r = testdata::result(
            "syscall/getpid",
            (0..3000).map(|i| 150.0 + (i % 17) as f64).collect(),
        );
        let ts = svg(&Figure::TimeSeries(&r)).unwrap();
        assert!(ts.starts_with("<svg") && ts.contains("every sample in order"));
        assert!(ts.contains("per operation (ns)") && ts.contains("median"));
        let h = svg(&Figure::Histogram(&r)).unwrap();
        assert!(h.contains("distribution") && h.contains("samples per bin"));
        let bars = vec![
            Bar {
                label: "call/f0".into(),
                value: 1.2,
                lo: 1.1,
                hi: 1.3,
                flagged: false,
                points: vec![1.15, 1.2, 1.25],
            },
            Bar {
                label: "syscall/getpid".into(),
                value: 150.0,
                lo: 149.0,
                hi: 151.0,
                flagged: true,
                points: vec![],
            },
        ];
        let b = svg(&Figure::Bars {
            title: "call and syscall".into(),
            bars: bars.clone(),
        })
        .unwrap();
        assert!(b.contains("syscall/getpid") && b.contains("log scale"));
        let c = svg(&Figure::Curves {
            title: "ring".into(),
            x_desc: "processes".into(),
            y_desc: "per switch".into(),
            log2_x: true,
            series: vec![(
                "0 KB".into(),
                vec![
                    Point {
                        x: 2.0,
                        y: 3000.0,
                        lo: 2900.0,
                        hi: 3100.0,
                    },
                    Point {
                        x: 8.0,
                        y: 3500.0,
                        lo: 3400.0,
                        hi: 3600.0,
                    },
                ],
            )],
            marks: vec![(4.0, "haltpoll".into())],
        })
        .unwrap();
        assert!(c.contains("0 KB") && c.contains("per switch (us)"));
        assert!(c.contains("haltpoll"), "the regime's mark is labelled");
        let s = svg(&Figure::Slowdown {
            title: "slowdown".into(),
            bars,
            threshold: 0.02,
        })
        .unwrap();
        assert!(s.contains("no-change band"));
        // Tick labels, legends and axis descriptions: at least 11 px at natural size.
        for svg in [&ts, &h, &b, &c, &s] {
            for size in svg.split("font-size=\"").skip(1) {
                let px: f64 = size.split('"').next().unwrap().parse().unwrap();
                assert!(px >= 11.0, "{px} px text");
            }
        }
    }

    #[test]
    fn png_uses_the_bundled_font() {
        let r = testdata::result("x/y", vec![1.0, 2.0, 3.0, 4.0]);
        let bytes = png(&Figure::Histogram(&r)).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(bytes.len() > 1000, "a real image, not an empty one");
    }
}
