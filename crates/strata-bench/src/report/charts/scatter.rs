//! Trade-off scatter plots: one labelled point per run, in the run's colour and marker.

use super::{
    cartesian, draw_marker, fitted_range, legend_height, linear_mesh, linear_range, plot_err, rgb,
    svg_chart, Area, LegendEntry, FONT,
};
use crate::report::finite;
use crate::report::style::{run_styles, Style};
use crate::results::{Comparison, RunResult};
use plotters::prelude::*;
use std::io;
use std::ops::Range;

/// Height of a scatter chart (taller when its legend needs it).
const HEIGHT: u32 = 620;
/// Label font size, and the estimated width of one of its (bold) characters and of a line
/// (plotters has no font metrics without `ttf`).
const LABEL_FONT: u32 = 14;
const CHAR_WIDTH: i32 = 7;
const LABEL_HEIGHT: i32 = 16;

/// One run on a scatter plot.
struct Point {
    /// The text beside the point.
    text: String,
    /// The run's label, for the legend.
    label: String,
    style: Style,
    /// Where it is plotted; `None` leaves it out (the legend says so).
    at: Option<(f64, f64)>,
}

/// A box in pixels: left, top, right, bottom.
type Bounds = (i32, i32, i32, i32);

/// Whether two boxes overlap.
fn overlaps(a: Bounds, b: Bounds) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// The area two boxes share, in square pixels.
fn overlap_area(a: Bounds, b: Bounds) -> i64 {
    let w = (a.2.min(b.2) - a.0.max(b.0)).max(0);
    let h = (a.3.min(b.3) - a.1.max(b.1)).max(0);
    i64::from(w) * i64::from(h)
}

/// How far a box lies from the point `(0, 0)`, in pixels.
fn distance((x0, y0, x1, y1): Bounds) -> f64 {
    let dx = x0.max(-x1).max(0);
    let dy = y0.max(-y1).max(0);
    f64::from(dx).hypot(f64::from(dy))
}

/// Labels further than this from their dot get a leader line back to it.
const LEADER_FROM: f64 = 12.0;

/// Spots around a dot for a label `width` wide, as top left offsets, nearest first.
fn label_spots(width: i32) -> Vec<(i32, i32)> {
    let mut spots = Vec::new();
    for dy in (-LABEL_HEIGHT / 2 - 96..=96 - LABEL_HEIGHT / 2).step_by(8) {
        for dx in [9, 29, 49, -width - 9, -width - 29, -width - 49, -width / 2] {
            spots.push((dx, dy));
        }
    }
    // Reading runs left to right: a spot right of the dot wins over one as near elsewhere.
    let near = |(dx, dy): (i32, i32)| {
        let penalty = if dx < 0 { 2.5 } else { 0.0 };
        distance((dx, dy, dx + width, dy + LABEL_HEIGHT)) + penalty
    };
    // Among spots as near, the one most level with the dot.
    let level = |(_, dy): (i32, i32)| (dy + LABEL_HEIGHT / 2).abs();
    spots.sort_by(|a, b| {
        near(*a)
            .total_cmp(&near(*b))
            .then(level(*a).cmp(&level(*b)))
    });
    spots
}

/// Where each label goes, as its top left corner's offset from its dot: the nearest spot whose
/// box (estimated from the text's length) stays inside `frame` and clears every dot and the
/// labels placed before it; where none does, the spot overlapping least. Every dot is an
/// obstacle, so no label covers another run's point.
fn place_labels(dots: &[(i32, i32)], widths: &[i32], frame: Bounds) -> Vec<(i32, i32)> {
    let mut taken: Vec<Bounds> = dots
        .iter()
        .map(|&(x, y)| (x - 7, y - 7, x + 7, y + 7))
        .collect();
    let mut offsets = Vec::with_capacity(dots.len());
    for (&(px, py), &width) in dots.iter().zip(widths) {
        let spots = label_spots(width);
        let bounds = |(dx, dy): (i32, i32)| {
            let (x0, y0) = (px + dx, py + dy);
            (x0, y0, x0 + width, y0 + LABEL_HEIGHT)
        };
        let inside =
            |b: Bounds| b.0 >= frame.0 && b.1 >= frame.1 && b.2 <= frame.2 && b.3 <= frame.3;
        let cost = |o: (i32, i32)| -> i64 {
            let b = bounds(o);
            let outside = if inside(b) { 0 } else { 1 << 40 };
            outside + taken.iter().map(|&t| overlap_area(b, t)).sum::<i64>()
        };
        let offset = spots
            .iter()
            .copied()
            .find(|&o| inside(bounds(o)) && !taken.iter().any(|&t| overlaps(bounds(o), t)))
            .or_else(|| spots.iter().copied().min_by_key(|&o| cost(o)))
            .unwrap_or((9, -LABEL_HEIGHT / 2));
        taken.push(bounds(offset));
        offsets.push(offset);
    }
    offsets
}

/// A scatter chart of `points` on the given ranges: a marker and a label per plotted run, and a
/// leader line to labels that had to move away from their point.
fn scatter_svg(
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    (x_range, y_range): (Range<f64>, Range<f64>),
    points: &[Point],
) -> io::Result<String> {
    let legend: Vec<LegendEntry> = points
        .iter()
        .map(|p| LegendEntry {
            label: if p.at.is_some() {
                p.label.clone()
            } else {
                format!("{} (not plotted)", p.label)
            },
            style: p.style,
        })
        .collect();
    let height = HEIGHT.max(40 + legend_height(legend.len()));
    svg_chart(caption, height, &legend, |area| {
        let mut chart = cartesian(area, x_range, y_range)?;
        linear_mesh(&mut chart, x_desc, y_desc)?;
        let plot: Area<'_> = chart.plotting_area().strip_coord_spec();
        let (bx, by) = plot.get_base_pixel();
        let (w, h) = plot.dim_in_pixel();
        let plotted: Vec<(&Point, (i32, i32))> = points
            .iter()
            .filter_map(|p| {
                let (x, y) = chart.backend_coord(&p.at?);
                Some((p, (x - bx, y - by)))
            })
            .collect();
        let dots: Vec<(i32, i32)> = plotted.iter().map(|(_, d)| *d).collect();
        let widths: Vec<i32> = plotted
            .iter()
            .map(|(p, _)| CHAR_WIDTH * p.text.chars().count() as i32)
            .collect();
        let offsets = place_labels(&dots, &widths, (0, 0, w as i32, h as i32));
        // Bold, so labels in the palette's lighter colours stay legible on white.
        let font = (FONT, LABEL_FONT).into_font().style(FontStyle::Bold);
        for (((p, (x, y)), (dx, dy)), width) in plotted.iter().zip(&offsets).zip(&widths) {
            let (x0, y0) = (x + dx, y + dy);
            if distance((*dx, *dy, dx + width, dy + LABEL_HEIGHT)) > LEADER_FROM {
                // To the nearest point of the label's box.
                let to = (
                    (*x).clamp(x0, x0 + width),
                    (*y).clamp(y0, y0 + LABEL_HEIGHT),
                );
                plot.draw(&PathElement::new(
                    vec![(*x, *y), to],
                    rgb(p.style).stroke_width(1),
                ))
                .map_err(plot_err)?;
            }
            // In the run's colour, which ties a label to its marker where points crowd.
            let colour = rgb(p.style);
            let text = TextStyle::from(font.clone()).color(&colour);
            plot.draw(&Text::new(p.text.clone(), (x0, y0), &text))
                .map_err(plot_err)?;
        }
        // Markers last, so no leader line or label crosses one.
        for (p, at) in &plotted {
            draw_marker(&plot, *at, p.style, 6)?;
        }
        Ok(())
    })
}

/// The run's points with their styles, `at` deciding where each goes (if anywhere).
fn points_of(c: &Comparison, at: impl Fn(&RunResult) -> Option<(f64, f64)>) -> Vec<Point> {
    let styles = run_styles(c);
    c.runs
        .iter()
        .zip(styles)
        .map(|(run, style)| Point {
            text: run.label.clone(),
            label: run.label.clone(),
            style,
            at: at(run),
        })
        .collect()
}

/// Main-phase throughput (the table's ops/s), the y of the throughput scatters.
fn main_ops(run: &RunResult) -> Option<f64> {
    finite(run.ops_per_sec)
}

/// The x values of the plotted points, and the throughput range of their y: fitted to the
/// values rather than from zero, as runs often differ by a fraction of their throughput and
/// their labels need the room.
fn throughput_axes(points: &[Point]) -> (Vec<f64>, Range<f64>) {
    let plotted = || points.iter().filter_map(|p| p.at);
    let y = fitted_range(plotted().map(|a| a.1));
    (plotted().map(|a| a.0).collect(), y)
}

/// Main-phase throughput against write amplification.
pub(super) fn throughput_wa_svg(c: &Comparison, title: &str) -> io::Result<String> {
    let points = points_of(c, |run| finite(run.write_amp).zip(main_ops(run)));
    let (xs, y_range) = throughput_axes(&points);
    // Labels extend right of their points: headroom on the right.
    let x_range = linear_range(xs.into_iter(), 0.2);
    scatter_svg(
        title,
        "write amplification (table bytes written ÷ user bytes)",
        "main-phase throughput (ops/s)",
        (x_range, y_range),
        &points,
    )
}

/// Main-phase throughput against peak space amplification.
pub(super) fn throughput_sa_svg(c: &Comparison, title: &str) -> io::Result<String> {
    let points = points_of(c, |run| finite(run.peak_space_amp).zip(main_ops(run)));
    // Space amplification sits just above 1 for most policies: an axis from zero would squeeze
    // them into one column.
    let (xs, y_range) = throughput_axes(&points);
    let x_range = fitted_range(xs.into_iter());
    scatter_svg(
        title,
        "peak space amplification (peak disk bytes ÷ live bytes)",
        "main-phase throughput (ops/s)",
        (x_range, y_range),
        &points,
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
pub(super) fn tradeoff_svg(c: &Comparison, title: &str) -> io::Result<String> {
    let costs: Vec<Option<(f64, f64, CostSource)>> = c
        .runs
        .iter()
        .map(|run| {
            finite(run.write_amp)
                .zip(lookup_cost(run))
                .map(|(wa, (cost, source))| (wa, cost, source))
        })
        .collect();
    let sources: Vec<CostSource> = costs.iter().flatten().map(|&(_, _, s)| s).collect();
    let mixed = sources.contains(&CostSource::ReadAmp) && sources.contains(&CostSource::RunsProbed);
    let mut points = points_of(c, |_| None);
    for (point, cost) in points.iter_mut().zip(&costs) {
        if let Some((wa, cost, source)) = *cost {
            point.at = Some((wa, cost));
            if mixed && source == CostSource::RunsProbed {
                point.text.push_str(" *");
            }
        }
    }
    let plotted = || costs.iter().flatten();
    // Generous headroom: point labels extend right of and above their points.
    let x_range = linear_range(plotted().map(|p| p.0), 0.25);
    let y_range = fitted_range(plotted().map(|p| p.1));
    scatter_svg(
        title,
        "write amplification (table bytes written ÷ user bytes)",
        lookup_cost_title(&sources),
        (x_range, y_range),
        &points,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn labels_go_next_to_their_dot_when_there_is_room() {
        assert_eq!(distance((9, -8, 89, 8)), 9.0);
        assert_eq!(distance((-50, -30, -40, -20)), 40f64.hypot(20.0));
        let offsets = place_labels(&[(100, 100)], &[80], (0, 0, 400, 300));
        assert_eq!(
            offsets,
            [(9, -LABEL_HEIGHT / 2)],
            "right of the dot, centred"
        );
    }

    #[test]
    fn crowded_labels_move_apart_and_stay_inside() {
        // Five points almost on top of one another, near the right edge.
        let dots = [(380, 100), (382, 101), (384, 99), (381, 102), (383, 100)];
        let widths = [80; 5];
        let frame = (0, 0, 400, 300);
        let offsets = place_labels(&dots, &widths, frame);
        let boxes: Vec<Bounds> = dots
            .iter()
            .zip(&offsets)
            .map(|(&(x, y), &(dx, dy))| (x + dx, y + dy, x + dx + 80, y + dy + LABEL_HEIGHT))
            .collect();
        for (i, a) in boxes.iter().enumerate() {
            assert!(
                a.0 >= 0 && a.2 <= 400 && a.1 >= 0 && a.3 <= 300,
                "{a:?} outside"
            );
            for b in &boxes[i + 1..] {
                assert!(!overlaps(*a, *b), "{a:?} and {b:?} overlap");
            }
        }
    }
}
