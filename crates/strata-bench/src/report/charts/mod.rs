//! The SVG charts. Text is written as SVG `<text>` elements (plotters' SVG backend without its
//! `ttf` feature), so drawing needs no fonts; the viewer's browser picks a sans-serif face.
//!
//! Every run keeps its [`Style`] (colour and dash pattern, shown as a marker shape on points and
//! in legends) across the charts; line charts are drawn as small multiples, one panel per family.

mod latency;
mod lines;
mod scatter;

pub use lines::series_svg;

use super::style::{Pattern, Style};
use crate::results::Comparison;
use plotters::coord::ranged1d::AsRangedCoord;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::io;
use std::ops::Range;

/// One chart of the report.
pub(super) struct Chart {
    /// File name inside the report directory.
    pub file: &'static str,
    /// The chart's caption, also its alternative text in the HTML page.
    pub title: &'static str,
    /// What the chart shows, for the HTML caption.
    pub about: &'static str,
    /// Draws the chart as an SVG document under the given caption.
    pub render: fn(&Comparison, &str) -> io::Result<String>,
}

/// The charts, in the order the HTML page shows them.
pub(super) const CHARTS: [Chart; 6] = [
    Chart {
        file: "throughput.svg",
        title: "Throughput over time, main phase",
        about: "Throughput over time in each run's main phase (ops/s over each sampling \
                interval), one panel per family of policies and one for the peers, all on the \
                same axes so panels compare directly.",
        render: lines::throughput_svg,
    },
    Chart {
        file: "disk.svg",
        title: "Disk usage over time",
        about: "Size of each run's database directory over time, in MiB, one panel per family \
                on shared axes: its peak over the live data size is the peak space \
                amplification.",
        render: lines::disk_svg,
    },
    Chart {
        file: "throughput-wa.svg",
        title: "Throughput vs write amplification",
        about: "Main-phase throughput against write amplification, one labelled point per run. \
                Upper left is better. Runs missing either value are listed in the legend as not \
                plotted.",
        render: scatter::throughput_wa_svg,
    },
    Chart {
        file: "throughput-sa.svg",
        title: "Throughput vs peak space amplification",
        about: "Main-phase throughput against peak space amplification (peak disk use ÷ live \
                data), one labelled point per run. Upper left is better.",
        render: scatter::throughput_sa_svg,
    },
    Chart {
        file: "tradeoff.svg",
        title: "Write amplification vs lookup cost",
        about: "The trade-off of the papers: write amplification against lookup cost (data \
                blocks read per point lookup, or sorted runs probed per lookup where a run \
                reports only that). Lower left is better. Runs without a finite WA or any lookup \
                cost are listed in the legend as not plotted.",
        render: scatter::tradeoff_svg,
    },
    Chart {
        file: "latency.svg",
        title: "Latency percentiles, main phase (all operations)",
        about: "Latency percentiles over all operations of each run's main phase, log scale; \
                bars in legend order, each topped with its run's marker.",
        render: latency::latency_svg,
    },
];

/// The panels of the time-series charts over `c`: each one's title and its runs' labels.
#[cfg(test)]
pub(super) fn family_panels(c: &Comparison) -> Vec<(String, Vec<String>)> {
    lines::family_panels(c, |_| Vec::new())
        .into_iter()
        .map(|p| {
            let labels = p.lines.into_iter().map(|l| l.label).collect();
            (p.title.unwrap_or_default(), labels)
        })
        .collect()
}

/// Chart width in pixels: two panels of small multiples side by side stay legible at full size.
pub(super) const WIDTH: u32 = 1300;
/// A generic family, so every viewer has it.
const FONT: &str = "sans-serif";
const MIB: f64 = 1024.0 * 1024.0;

/// plotters reports drawing errors in its own type; the report speaks `io::Error`.
fn plot_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("drawing a chart: {e}"))
}

/// A style's colour for plotters.
fn rgb(style: Style) -> RGBColor {
    let (r, g, b) = style.colour;
    RGBColor(r, g, b)
}

/// Tick labels: at most two decimals, and k/M/G past 10,000 so the y label area stays narrow.
fn axis_number(v: &f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (*v, "")
    };
    let mut s = format!("{scaled:.2}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    if s == "-0" {
        s = "0".to_owned();
    }
    s + suffix
}

/// An axis range that includes zero and every value, with `headroom` (a fraction of the span)
/// added at the top; `0..1` when there are no values, so an empty chart still draws its axes.
fn linear_range(values: impl Iterator<Item = f64>, headroom: f64) -> Range<f64> {
    let (lo, hi) = values.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let hi = if hi > lo { hi } else { lo + 1.0 };
    lo..hi + (hi - lo) * headroom
}

/// A range around the values with a quarter of their span (at least a fifth of the largest
/// value) as margin: trade-off points often differ by little in lookup cost, and an axis from
/// zero would squeeze them onto one line.
fn fitted_range(values: impl Iterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !(lo.is_finite() && hi.is_finite()) {
        return 0.0..1.0;
    }
    let pad = ((hi - lo) * 0.25).max(hi.abs() * 0.2).max(0.05);
    (lo - pad).max(0.0)..hi + pad
}

/// Points whose coordinates are both finite.
fn finite_points(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    points
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

/// A drawing area in pixels (relative to its top left corner).
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The "on" pieces of the polyline `points` (pixels) drawn with `pattern` (on and off lengths,
/// starting with on, continuing across corners), each a polyline; the whole line when the
/// pattern is empty.
fn dash_pieces(points: &[(f64, f64)], pattern: &[f64]) -> Vec<Vec<(f64, f64)>> {
    if pattern.is_empty() || points.len() < 2 {
        return vec![points.to_vec()];
    }
    let mut pieces = Vec::new();
    let mut current = vec![points[0]];
    let (mut k, mut left) = (0, pattern[0]);
    for pair in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        let length = (x1 - x0).hypot(y1 - y0);
        if length <= 0.0 {
            continue;
        }
        let (dx, dy) = ((x1 - x0) / length, (y1 - y0) / length);
        let mut done = 0.0;
        while length - done > 1e-9 {
            let step = left.min(length - done);
            done += step;
            left -= step;
            let at = (x0 + dx * done, y0 + dy * done);
            if k % 2 == 0 {
                current.push(at);
            }
            if left <= 1e-9 {
                if k % 2 == 0 {
                    pieces.push(std::mem::take(&mut current));
                }
                k = (k + 1) % pattern.len();
                left = pattern[k];
                if k % 2 == 0 {
                    current = vec![at];
                }
            }
        }
    }
    if current.len() >= 2 {
        pieces.push(current);
    }
    pieces
}

/// Draws the polyline `points` (pixels on `area`) in `style`'s colour and dash pattern.
fn draw_styled_line(
    area: &Area<'_>,
    points: &[(f64, f64)],
    style: Style,
    width: u32,
) -> io::Result<()> {
    let stroke = rgb(style).stroke_width(width);
    for piece in dash_pieces(points, style.dash.pattern()) {
        let pixels: Vec<(i32, i32)> = piece
            .iter()
            .map(|&(x, y)| (x.round() as i32, y.round() as i32))
            .collect();
        area.draw(&PathElement::new(pixels, stroke))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// Draws `style`'s marker (its dash's shape: circle, square, triangle or diamond) centred on
/// `(x, y)` (pixels on `area`), `r` pixels from centre to edge, with a white rim so overlapping
/// markers stay apart.
fn draw_marker(area: &Area<'_>, (x, y): (i32, i32), style: Style, r: i32) -> io::Result<()> {
    let fill = rgb(style).filled();
    let rim = WHITE.stroke_width(1);
    let polygon = |points: Vec<(i32, i32)>| -> io::Result<()> {
        area.draw(&Polygon::new(points.clone(), fill))
            .map_err(plot_err)?;
        let mut outline = points;
        outline.push(outline[0]);
        area.draw(&PathElement::new(outline, rim)).map_err(plot_err)
    };
    match style.dash {
        Pattern::Solid => {
            area.draw(&Circle::new((x, y), r, fill)).map_err(plot_err)?;
            area.draw(&Circle::new((x, y), r, rim)).map_err(plot_err)
        }
        Pattern::Dashed => {
            let s = r * 9 / 10;
            polygon(vec![
                (x - s, y - s),
                (x + s, y - s),
                (x + s, y + s),
                (x - s, y + s),
            ])
        }
        Pattern::Dotted => {
            let s = r + 1;
            polygon(vec![
                (x, y - s),
                (x + s, y + s * 3 / 4),
                (x - s, y + s * 3 / 4),
            ])
        }
        Pattern::DashDot => {
            let s = r + 1;
            polygon(vec![(x, y - s), (x + s, y), (x, y + s), (x - s, y)])
        }
    }
}

/// One legend entry: a run's style and label (with a note when the run is not drawn).
struct LegendEntry {
    label: String,
    style: Style,
}

/// Legend geometry: the first entry's centre, the step between entries, the swatch's length.
const LEGEND_TOP: i32 = 18;
const LEGEND_STEP: i32 = 20;
const SWATCH: i32 = 36;

/// Height a legend of `entries` lines needs.
fn legend_height(entries: usize) -> u32 {
    (LEGEND_TOP + LEGEND_STEP * entries as i32) as u32
}

/// Legend panel width: enough for the longest label at the legend's font size (plotters has no
/// font metrics without `ttf`, so this estimates 7.5 px a character), within bounds that
/// leave the plot most of the width.
fn legend_width<'e>(entries: impl IntoIterator<Item = &'e LegendEntry>) -> u32 {
    let chars = entries
        .into_iter()
        .map(|e| e.label.chars().count())
        .max()
        .unwrap_or(0);
    (SWATCH as u32 + 24 + 15 * chars as u32 / 2).clamp(130, 360)
}

/// A run's swatch as legends show it: a short line in its dash pattern with its marker at the
/// start, left end at `(x, y)`.
fn draw_swatch(area: &Area<'_>, (x, y): (i32, i32), style: Style) -> io::Result<()> {
    let line = [
        (f64::from(x), f64::from(y)),
        (f64::from(x + SWATCH), f64::from(y)),
    ];
    draw_styled_line(area, &line, style, 3)?;
    draw_marker(area, (x + 5, y), style, 5)
}

/// The legend as a column in its own panel, so it never covers data however the series fall.
fn draw_legend(area: &Area<'_>, entries: &[LegendEntry]) -> io::Result<()> {
    let text = TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, entry) in entries.iter().enumerate() {
        let (x, y) = (8, LEGEND_TOP + LEGEND_STEP * i as i32);
        draw_swatch(area, (x, y), entry.style)?;
        area.draw(&Text::new(entry.label.clone(), (x + SWATCH + 8, y), &text))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// An SVG document of `size` pixels: white, the caption across the top, the rest drawn by `body`.
fn svg_document(
    size: (u32, u32),
    caption: &str,
    body: impl FnOnce(&Area<'_>) -> io::Result<()>,
) -> io::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let area = root.titled(caption, (FONT, 22)).map_err(plot_err)?;
        body(&area)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// An SVG chart `height` pixels tall (taller where the legend needs it): the caption across the
/// top, the plot (drawn by `plot`) on the left and the legend on the right.
fn svg_chart(
    caption: &str,
    height: u32,
    legend: &[LegendEntry],
    plot: impl FnOnce(&Area<'_>) -> io::Result<()>,
) -> io::Result<String> {
    // The caption takes about 40 pixels above the legend.
    let size = (WIDTH, height.max(40 + legend_height(legend.len())));
    svg_document(size, caption, |body| {
        let (plot_area, legend_area) = body.split_horizontally(WIDTH - legend_width(legend));
        plot(&plot_area)?;
        draw_legend(&legend_area, legend)
    })
}

/// A chart drawn into the report's SVG with the coordinates `X` × `Y` describe.
type Chart2d<'a, 'b, X, Y> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// A chart on `area` with the report's margins and label areas.
fn cartesian<'a, 'b, X, Y>(area: &'a Area<'b>, x: X, y: Y) -> io::Result<Chart2d<'a, 'b, X, Y>>
where
    X: AsRangedCoord,
    Y: AsRangedCoord,
{
    ChartBuilder::on(area)
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(75)
        .build_cartesian_2d(x, y)
        .map_err(plot_err)
}

/// Draws the mesh of a chart on linear axes, with both axes titled.
fn linear_mesh(
    chart: &mut Chart2d<'_, '_, Range<f64>, Range<f64>>,
    x_desc: &str,
    y_desc: &str,
) -> io::Result<()> {
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&axis_number)
        .y_label_formatter(&axis_number)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .draw()
        .map_err(plot_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers_are_short() {
        assert_eq!(axis_number(&0.0), "0");
        assert_eq!(axis_number(&0.30000000004), "0.3");
        assert_eq!(axis_number(&2500.0), "2500");
        assert_eq!(axis_number(&250_000.0), "250k");
        assert_eq!(axis_number(&1_500_000.0), "1.5M");
    }

    #[test]
    fn linear_range_survives_no_values_and_a_single_zero() {
        assert_eq!(linear_range(std::iter::empty(), 0.0), 0.0..1.0);
        assert_eq!(linear_range([0.0].into_iter(), 0.0), 0.0..1.0);
        assert_eq!(linear_range([4.0, -2.0].into_iter(), 0.5), -2.0..7.0);
    }

    #[test]
    fn dashes_follow_the_pattern_across_corners() {
        // 10 px right then 10 px down, in 4 on / 2 off: on 0-4, 6-10 (to the corner), then
        // 12-16 and 18-20 along the whole path.
        let pieces = dash_pieces(&[(0.0, 0.0), (10.0, 0.0), (10.0, 10.0)], &[4.0, 2.0]);
        let ends: Vec<((f64, f64), (f64, f64))> =
            pieces.iter().map(|p| (p[0], p[p.len() - 1])).collect();
        assert_eq!(
            ends,
            [
                ((0.0, 0.0), (4.0, 0.0)),
                ((6.0, 0.0), (10.0, 0.0)),
                ((10.0, 2.0), (10.0, 6.0)),
                ((10.0, 8.0), (10.0, 10.0)),
            ]
        );
        // The piece that reaches the corner ends there; a piece crossing one keeps the corner.
        let crossing = dash_pieces(&[(0.0, 0.0), (3.0, 0.0), (3.0, 3.0)], &[5.0, 1.0]);
        assert_eq!(crossing[0], [(0.0, 0.0), (3.0, 0.0), (3.0, 2.0)]);
        assert_eq!(dash_pieces(&[(1.0, 1.0), (2.0, 2.0)], &[]).len(), 1);
    }
}
