//! The latency chart: p50/p99/p99.9 of each run's main phase as grouped bars.

use super::{axis_number, cartesian, draw_marker, plot_err, rgb, svg_chart, LegendEntry, FONT};
use crate::report::main_latency;
use crate::report::style::run_styles;
use crate::results::{Comparison, LatencySummary};
use plotters::prelude::*;
use std::io;

/// A percentile of the latency chart: its name and where a summary keeps it.
type Percentile = (&'static str, fn(&LatencySummary) -> f64);

/// The percentiles of the latency chart, in group order.
const PERCENTILES: [Percentile; 3] = [
    ("p50", |l| l.p50_us),
    ("p99", |l| l.p99_us),
    ("p99.9", |l| l.p999_us),
];

/// Height of the chart (taller when its legend needs it).
const HEIGHT: u32 = 520;

/// p50/p99/p99.9 of each run's main phase as grouped bars (a group per percentile, a bar per
/// run, in legend order) on a log scale, which keeps microsecond medians and millisecond tails
/// readable together. Each bar carries its run's marker on top: colours repeat past ten runs.
pub(super) fn latency_svg(c: &Comparison, title: &str) -> io::Result<String> {
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
    let styles = run_styles(c);

    let legend: Vec<LegendEntry> = c
        .runs
        .iter()
        .zip(&values)
        .zip(&styles)
        .map(|((run, v), style)| LegendEntry {
            label: if v.iter().all(Option::is_none) {
                format!("{} (no latency)", run.label)
            } else {
                run.label.clone()
            },
            style: *style,
        })
        .collect();
    svg_chart(title, HEIGHT, &legend, |area| {
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
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .draw()
            .map_err(plot_err)?;
        let mut tops = Vec::new();
        for (i, (run_values, style)) in values.iter().zip(&styles).enumerate() {
            let colour = rgb(*style);
            let bars: Vec<_> = run_values
                .iter()
                .enumerate()
                .filter_map(|(g, v)| {
                    let v = (*v)?;
                    let x0 = g as f64 - 0.4 + i as f64 * bar;
                    // A sliver of space between neighbouring bars.
                    let x1 = x0 + bar * 0.9;
                    tops.push((chart.backend_coord(&((x0 + x1) / 2.0, v)), *style));
                    Some(Rectangle::new([(x0, lo), (x1, v)], colour.filled()))
                })
                .collect();
            chart.draw_series(bars).map_err(plot_err)?;
        }
        let plot = chart.plotting_area().strip_coord_spec();
        let (bx, by) = plot.get_base_pixel();
        // Markers sized to the bars, so neighbours do not cover each other.
        let (width, _) = plot.dim_in_pixel();
        let r = ((f64::from(width) * bar / groups * 0.45) as i32).clamp(2, 6);
        for ((x, y), style) in tops {
            draw_marker(&plot, (x - bx, y - by - r - 1), style, r)?;
        }
        Ok(())
    })
}
