//! The SVG charts. Text is written as SVG `<text>` elements (plotters' SVG backend without its
//! `ttf` feature), so drawing needs no fonts; the viewer's browser picks a sans-serif face.

use super::{finite, main_latency, main_phase, run_colour};
use crate::results::{Comparison, LatencySummary, RunResult};
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
pub(super) const CHARTS: [Chart; 4] = [
    Chart {
        file: "throughput.svg",
        title: "Throughput over time, main phase",
        about: "Throughput over time in each run's main phase (ops/s over each sampling interval).",
        render: throughput_svg,
    },
    Chart {
        file: "disk.svg",
        title: "Disk usage over time",
        about: "Size of each run's database directory over time, in MiB: its peak over the live \
                data size is the peak space amplification.",
        render: disk_svg,
    },
    Chart {
        file: "tradeoff.svg",
        title: "Write amplification vs lookup cost",
        about: "The trade-off of the papers: write amplification against lookup cost (data \
                blocks read per point lookup, or sorted runs probed per lookup where a run \
                reports only that). Lower left is better. Runs without a finite WA or any lookup \
                cost are listed in the legend as not plotted.",
        render: tradeoff_svg,
    },
    Chart {
        file: "latency.svg",
        title: "Latency percentiles, main phase (all operations)",
        about: "Latency percentiles over all operations of each run's main phase, log scale.",
        render: latency_svg,
    },
];

/// Chart size in pixels: readable on a laptop screen and in the docs without scaling.
const SIZE: (u32, u32) = (900, 500);
/// A generic family, so every viewer has it.
const FONT: &str = "sans-serif";
const MIB: f64 = 1024.0 * 1024.0;

/// plotters reports drawing errors in its own type; the report speaks `io::Error`.
fn plot_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("drawing a chart: {e}"))
}

/// The `index`-th run's colour, the same in every chart and in the HTML tables.
fn colour(index: usize) -> RGBColor {
    let (r, g, b) = run_colour(index);
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

/// How a legend entry shows its run: like the chart draws it.
#[derive(Clone, Copy)]
enum Marker {
    Line,
    Dot,
    Bar,
}

/// One legend entry: a run's colour and label (with a note when the run is not drawn).
struct LegendEntry {
    label: String,
    colour: RGBColor,
}

/// Legend panel width: enough for the longest label at the legend's font size (plotters has no
/// font metrics without `ttf`, so this estimates 7.5 px a character), within bounds that
/// leave the plot most of the width.
fn legend_width(entries: &[LegendEntry]) -> u32 {
    let chars = entries
        .iter()
        .map(|e| e.label.chars().count())
        .max()
        .unwrap_or(0);
    (45 + 15 * chars as u32 / 2).clamp(120, 330)
}

/// The legend as a column in its own panel, so it never covers data however the series fall.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[LegendEntry],
    marker: Marker,
) -> io::Result<()> {
    let style = TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, entry) in entries.iter().enumerate() {
        // Starts level with the top of the plot (the chart margin) and steps one line at a time.
        let (x, y) = (8, 24 + 22 * i as i32);
        let colour = entry.colour;
        match marker {
            Marker::Line => area.draw(&PathElement::new(
                vec![(x, y), (x + 20, y)],
                colour.stroke_width(3),
            )),
            Marker::Dot => area.draw(&Circle::new((x + 10, y), 5, colour.filled())),
            Marker::Bar => area.draw(&Rectangle::new(
                [(x + 3, y - 6), (x + 17, y + 6)],
                colour.filled(),
            )),
        }
        .map_err(plot_err)?;
        area.draw(&Text::new(entry.label.clone(), (x + 28, y), &style))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// An SVG chart: the caption across the top, the plot (drawn by `plot`) on the left and the
/// legend on the right.
fn svg_chart(
    caption: &str,
    legend: &[LegendEntry],
    marker: Marker,
    plot: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> io::Result<()>,
) -> io::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let body = root.titled(caption, (FONT, 22)).map_err(plot_err)?;
        let (plot_area, legend_area) = body.split_horizontally(SIZE.0 - legend_width(legend));
        plot(&plot_area)?;
        draw_legend(&legend_area, legend, marker)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// A chart drawn into the report's SVG with the coordinates `X` × `Y` describe.
type Chart2d<'a, 'b, X, Y> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// A chart on `area` with the report's margins and label areas.
fn cartesian<'a, 'b, X, Y>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x: X,
    y: Y,
) -> io::Result<Chart2d<'a, 'b, X, Y>>
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

/// One run's line in a time-series chart.
struct Line {
    label: String,
    colour: RGBColor,
    points: Vec<(f64, f64)>,
}

/// A time series per run on linear axes starting at zero. Runs without points stay in the
/// legend, marked "(no samples)", so a missing series is visible as such.
fn line_chart(caption: &str, x_desc: &str, y_desc: &str, lines: &[Line]) -> io::Result<String> {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let x_range = linear_range(all().map(|p| p.0), 0.0);
    let y_range = linear_range(all().map(|p| p.1), 0.05);
    let legend: Vec<LegendEntry> = lines
        .iter()
        .map(|line| LegendEntry {
            label: if line.points.is_empty() {
                format!("{} (no samples)", line.label)
            } else {
                line.label.clone()
            },
            colour: line.colour,
        })
        .collect();
    svg_chart(caption, &legend, Marker::Line, |area| {
        let mut chart = cartesian(area, x_range, y_range)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&axis_number)
            .y_label_formatter(&axis_number)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 13))
            .draw()
            .map_err(plot_err)?;
        for line in lines {
            let colour = line.colour;
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(plot_err)?;
            // A line through one point draws nothing; a dot keeps a single sample visible.
            if line.points.len() == 1 {
                chart
                    .draw_series(
                        line.points
                            .iter()
                            .map(|&p| Circle::new(p, 4, colour.filled())),
                    )
                    .map_err(plot_err)?;
            }
        }
        Ok(())
    })
}

/// A line per named series (the report's colours in order), on linear axes from zero, as an
/// SVG document: for timelines other tools draw in the report's style (`strata sim --ssd`).
pub fn series_svg(
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> io::Result<String> {
    let lines: Vec<Line> = series
        .iter()
        .enumerate()
        .map(|(i, (label, points))| Line {
            label: label.clone(),
            colour: colour(i),
            points: finite_points(points.iter().copied()),
        })
        .collect();
    line_chart(caption, x_desc, y_desc, &lines)
}

/// Ops/s over time in each run's main phase.
fn throughput_svg(c: &Comparison, title: &str) -> io::Result<String> {
    let lines: Vec<Line> = c
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| Line {
            label: run.label.clone(),
            colour: colour(i),
            points: main_phase(run).map_or_else(Vec::new, |p| {
                finite_points(p.throughput_samples.iter().copied())
            }),
        })
        .collect();
    line_chart(
        title,
        "time since the main phase started (s)",
        "throughput (ops/s)",
        &lines,
    )
}

/// Database directory size over time, per run.
fn disk_svg(c: &Comparison, title: &str) -> io::Result<String> {
    let lines: Vec<Line> = c
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| Line {
            label: run.label.clone(),
            colour: colour(i),
            points: finite_points(
                run.disk_samples
                    .iter()
                    .map(|&(t, bytes)| (t, bytes as f64 / MIB)),
            ),
        })
        .collect();
    line_chart(
        title,
        "time since the run started (s)",
        "database directory size (MiB)",
        &lines,
    )
}

/// Where a run's lookup cost comes from.
#[derive(Clone, Copy, PartialEq)]
enum CostSource {
    /// Data blocks read from storage per point lookup.
    ReadAmp,
    /// Sorted runs probed per point lookup (for runs that do not report blocks read).
    RunsProbed,
}

/// The y of the trade-off plot: read amplification when the run reports it, else runs probed per
/// lookup, else none (the run is left out of the plot).
fn lookup_cost(run: &RunResult) -> Option<(f64, CostSource)> {
    run.read_amp
        .and_then(finite)
        .map(|v| (v, CostSource::ReadAmp))
        .or_else(|| {
            run.runs_probed_per_lookup
                .and_then(finite)
                .map(|v| (v, CostSource::RunsProbed))
        })
}

/// The y-axis title of the trade-off plot, naming exactly the quantities plotted.
fn lookup_cost_title(sources: &[CostSource]) -> &'static str {
    let blocks = sources.contains(&CostSource::ReadAmp);
    let runs = sources.contains(&CostSource::RunsProbed);
    match (blocks, runs) {
        (true, true) => "data blocks read per point lookup (* = sorted runs probed)",
        (true, false) => "data blocks read per point lookup",
        (false, true) => "sorted runs probed per point lookup",
        (false, false) => "lookup cost (no run reports one)",
    }
}

/// Write amplification against lookup cost, one labelled point per run.
fn tradeoff_svg(c: &Comparison, title: &str) -> io::Result<String> {
    struct Point {
        label: String,
        colour: RGBColor,
        at: Option<(f64, f64, CostSource)>,
    }
    let points: Vec<Point> = c
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| Point {
            label: run.label.clone(),
            colour: colour(i),
            at: finite(run.write_amp)
                .zip(lookup_cost(run))
                .map(|(wa, (cost, source))| (wa, cost, source)),
        })
        .collect();
    let plotted = || points.iter().filter_map(|p| p.at);
    let sources: Vec<CostSource> = plotted().map(|(_, _, s)| s).collect();
    let mixed = sources.contains(&CostSource::ReadAmp) && sources.contains(&CostSource::RunsProbed);
    // Generous headroom: point labels extend right of and above their points.
    let x_range = linear_range(plotted().map(|p| p.0), 0.25);
    let y_range = fitted_range(plotted().map(|p| p.1));

    let legend: Vec<LegendEntry> = points
        .iter()
        .map(|p| LegendEntry {
            label: if p.at.is_some() {
                p.label.clone()
            } else {
                format!("{} (not plotted)", p.label)
            },
            colour: p.colour,
        })
        .collect();
    svg_chart(title, &legend, Marker::Dot, |area| {
        let mut chart = cartesian(area, x_range, y_range)?;
        chart
            .configure_mesh()
            .x_desc("write amplification (table bytes written ÷ user bytes)")
            .y_desc(lookup_cost_title(&sources))
            .x_label_formatter(&axis_number)
            .y_label_formatter(&axis_number)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 13))
            .draw()
            .map_err(plot_err)?;
        // Place each label at the first offset whose box (estimated: no font metrics without
        // `ttf`) clears the dots and the labels placed before it, so close points stay readable.
        // Every dot is an obstacle too, so no label covers another run's point.
        let mut placed: Vec<(i32, i32, i32, i32)> = points
            .iter()
            .filter_map(|p| p.at)
            .map(|(wa, cost, _)| {
                let (x, y) = chart.backend_coord(&(wa, cost));
                (x - 7, y - 7, x + 7, y + 7)
            })
            .collect();
        for p in &points {
            let Some((wa, cost, source)) = p.at else {
                continue;
            };
            let text = if mixed && source == CostSource::RunsProbed {
                format!("{} *", p.label)
            } else {
                p.label.clone()
            };
            let (px, py) = chart.backend_coord(&(wa, cost));
            let width = 8 * text.chars().count() as i32;
            let candidates = [
                (9, -18),
                (9, 6),
                (-width - 9, -18),
                (-width - 9, 6),
                (9, -34),
                (9, 22),
                (-width - 9, -34),
                (-width - 9, 22),
            ];
            let clear = |(dx, dy): (i32, i32)| {
                let (x0, y0) = (px + dx, py + dy);
                placed
                    .iter()
                    .all(|&(a, b, c, d)| x0 + width <= a || c <= x0 || y0 + 16 <= b || d <= y0)
            };
            let offset = candidates
                .into_iter()
                .find(|&o| clear(o))
                .unwrap_or(candidates[0]);
            placed.push((
                px + offset.0,
                py + offset.1,
                px + offset.0 + width,
                py + offset.1 + 16,
            ));
            // A label moved off its usual spot gets a leader line back to its dot.
            let anchor = if offset.0 < 0 {
                (offset.0 + width, offset.1 + 8)
            } else {
                (offset.0, offset.1 + 8)
            };
            let leader = if offset == candidates[0] {
                vec![(0, 0), (0, 0)]
            } else {
                vec![(0, 0), anchor]
            };
            let point = EmptyElement::at((wa, cost))
                + PathElement::new(leader, p.colour.stroke_width(1))
                + Circle::new((0, 0), 6, p.colour.filled())
                + Text::new(text, offset, (FONT, 15).into_font());
            chart.draw_series([point]).map_err(plot_err)?;
        }
        Ok(())
    })
}

/// A percentile of the latency chart: its name and where a summary keeps it.
type Percentile = (&'static str, fn(&LatencySummary) -> f64);

/// The percentiles of the latency chart, in group order.
const PERCENTILES: [Percentile; 3] = [
    ("p50", |l| l.p50_us),
    ("p99", |l| l.p99_us),
    ("p99.9", |l| l.p999_us),
];

/// p50/p99/p99.9 of each run's main phase as grouped bars (a group per percentile, a bar per
/// run) on a log scale, which keeps microsecond medians and millisecond tails readable together.
fn latency_svg(c: &Comparison, title: &str) -> io::Result<String> {
    // Values a log axis can show: positive and finite.
    let values: Vec<[Option<f64>; 3]> = c
        .runs
        .iter()
        .map(|run| {
            let l = main_latency(run);
            PERCENTILES.map(|(_, get)| l.map(get).filter(|v| v.is_finite() && *v > 0.0))
        })
        .collect();
    let (min, max) = values
        .iter()
        .flatten()
        .flatten()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    // Whole decades, so the axis starts and ends on a labelled power of ten.
    let (lo, hi) = if max > 0.0 {
        let lo = 10f64.powf(min.log10().floor());
        let hi = 10f64.powf(max.log10().ceil());
        (lo, if hi > lo { hi } else { lo * 10.0 })
    } else {
        (1.0, 1000.0)
    };
    let groups = PERCENTILES.len() as f64;
    let bar = 0.8 / c.runs.len().max(1) as f64;

    let legend: Vec<LegendEntry> = c
        .runs
        .iter()
        .zip(&values)
        .enumerate()
        .map(|(i, (run, v))| LegendEntry {
            label: if v.iter().all(Option::is_none) {
                format!("{} (no latency)", run.label)
            } else {
                run.label.clone()
            },
            colour: colour(i),
        })
        .collect();
    svg_chart(title, &legend, Marker::Bar, |area| {
        let mut chart = cartesian(area, -0.5..groups - 0.5, (lo..hi).log_scale())?;
        // Ticks fall on the group centres 0, 1, 2 (one tick per group on a range three
        // wide); any tick between groups stays unlabelled rather than naming the wrong group.
        let group_name = |x: &f64| {
            let centre = x.round();
            if (x - centre).abs() > 1e-9 || centre < 0.0 {
                return String::new();
            }
            PERCENTILES
                .get(centre as usize)
                .map_or_else(String::new, |(name, _)| (*name).to_owned())
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(PERCENTILES.len())
            .x_desc("percentile")
            .y_desc("latency (µs, log scale)")
            .x_label_formatter(&group_name)
            .y_label_formatter(&axis_number)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 13))
            .draw()
            .map_err(plot_err)?;
        for (i, run_values) in values.iter().enumerate() {
            let colour = colour(i);
            let bars = run_values.iter().enumerate().filter_map(|(g, v)| {
                let v = (*v)?;
                let x0 = g as f64 - 0.4 + i as f64 * bar;
                // A sliver of space between neighbouring bars.
                let x1 = x0 + bar * 0.9;
                Some(Rectangle::new([(x0, lo), (x1, v)], colour.filled()))
            });
            chart.draw_series(bars).map_err(plot_err)?;
        }
        Ok(())
    })
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
    fn lookup_cost_prefers_read_amp_and_skips_nan() {
        let mut run = RunResult {
            read_amp: Some(1.5),
            runs_probed_per_lookup: Some(4.0),
            ..RunResult::default()
        };
        assert!(matches!(lookup_cost(&run), Some((v, CostSource::ReadAmp)) if v == 1.5));
        run.read_amp = Some(f64::NAN);
        assert!(matches!(lookup_cost(&run), Some((v, CostSource::RunsProbed)) if v == 4.0));
        run.runs_probed_per_lookup = None;
        assert!(lookup_cost(&run).is_none());
    }
}
