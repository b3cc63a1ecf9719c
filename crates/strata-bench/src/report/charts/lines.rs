//! Time series as small multiples: one panel per family of runs, every panel on the same axes.

use super::{
    cartesian, draw_legend, draw_marker, draw_styled_line, finite_points, legend_height,
    legend_width, linear_mesh, linear_range, plot_err, svg_document, Area, LegendEntry, FONT, MIB,
    WIDTH,
};
use crate::report::main_phase;
use crate::report::style::{families, run_styles, Style};
use crate::results::{Comparison, RunResult};
use std::io;

/// One run's line in a time-series chart.
pub(in crate::report) struct Line {
    /// The run's label.
    pub label: String,
    /// How it is drawn.
    pub style: Style,
    /// Its finite samples, in time order.
    pub points: Vec<(f64, f64)>,
}

/// One panel of a time-series chart: a title (none for a chart of one panel) and its lines.
pub(in crate::report) struct Panel {
    /// What the panel's runs have in common.
    pub title: Option<String>,
    /// A line per run.
    pub lines: Vec<Line>,
}

/// Height of one panel in a grid of several, and of a chart with a single panel.
const PANEL_HEIGHT: u32 = 290;
const SINGLE_HEIGHT: u32 = 460;
/// Height of a panel's title.
const PANEL_TITLE: u32 = 24;

/// The panels of a time-series chart over `c`: one per family present, each run in its style,
/// with `points` giving each run's samples.
pub(in crate::report) fn family_panels(
    c: &Comparison,
    points: impl Fn(&RunResult) -> Vec<(f64, f64)>,
) -> Vec<Panel> {
    let styles = run_styles(c);
    families(c)
        .into_iter()
        .map(|(family, runs)| Panel {
            title: Some(format!(
                "{}: {} run{}",
                family.title(),
                runs.len(),
                if runs.len() == 1 { "" } else { "s" }
            )),
            lines: runs
                .into_iter()
                .map(|i| Line {
                    label: c.runs[i].label.clone(),
                    style: styles[i],
                    points: points(&c.runs[i]),
                })
                .collect(),
        })
        .collect()
}

/// The panels as a grid (two columns when there are several) on shared linear axes starting at
/// zero, so a line's height means the same in every panel. Runs without points stay in their
/// panel's legend, marked "(no samples)", so a missing series is visible as such.
fn panels_svg(caption: &str, x_desc: &str, y_desc: &str, panels: &[Panel]) -> io::Result<String> {
    let all = || panels.iter().flat_map(|p| &p.lines).flat_map(|l| &l.points);
    let x_range = linear_range(all().map(|p| p.0), 0.0);
    let y_range = linear_range(all().map(|p| p.1), 0.05);
    let legends: Vec<Vec<LegendEntry>> = panels
        .iter()
        .map(|panel| {
            panel
                .lines
                .iter()
                .map(|line| LegendEntry {
                    label: if line.points.is_empty() {
                        format!("{} (no samples)", line.label)
                    } else {
                        line.label.clone()
                    },
                    style: line.style,
                })
                .collect()
        })
        .collect();
    // One legend width for every panel, so their plots line up.
    let legend_w = legend_width(legends.iter().flatten());
    let most = legends.iter().map(Vec::len).max().unwrap_or(0);
    let columns = if panels.len() > 1 { 2 } else { 1 };
    let rows = panels.len().div_ceil(columns).max(1);
    let titled = panels.iter().any(|p| p.title.is_some());
    let base = if panels.len() > 1 {
        PANEL_HEIGHT
    } else {
        SINGLE_HEIGHT
    };
    let panel_h = base.max(legend_height(most) + if titled { PANEL_TITLE } else { 0 } + 20);
    let size = (WIDTH, 44 + panel_h * rows as u32);
    svg_document(size, caption, |body| {
        let cells = body.split_evenly((rows, columns));
        for ((panel, legend), cell) in panels.iter().zip(&legends).zip(&cells) {
            let cell = match &panel.title {
                Some(title) => cell.titled(title, (FONT, 16)).map_err(plot_err)?,
                None => cell.clone(),
            };
            let (width, _) = cell.dim_in_pixel();
            let (plot_area, legend_area) = cell.split_horizontally(width.saturating_sub(legend_w));
            draw_lines(
                &plot_area,
                x_range.clone(),
                y_range.clone(),
                x_desc,
                y_desc,
                panel,
            )?;
            draw_legend(&legend_area, legend)?;
        }
        Ok(())
    })
}

/// One panel's plot: the mesh and a line per run.
fn draw_lines(
    area: &Area<'_>,
    x_range: std::ops::Range<f64>,
    y_range: std::ops::Range<f64>,
    x_desc: &str,
    y_desc: &str,
    panel: &Panel,
) -> io::Result<()> {
    let mut chart = cartesian(area, x_range, y_range)?;
    linear_mesh(&mut chart, x_desc, y_desc)?;
    let plot = chart.plotting_area().strip_coord_spec();
    let (bx, by) = plot.get_base_pixel();
    for line in &panel.lines {
        let pixels: Vec<(f64, f64)> = line
            .points
            .iter()
            .map(|p| {
                let (x, y) = chart.backend_coord(p);
                (f64::from(x - bx), f64::from(y - by))
            })
            .collect();
        match pixels.as_slice() {
            [] => {}
            // A line through one point draws nothing; a marker keeps a single sample visible.
            [(x, y)] => draw_marker(&plot, (*x as i32, *y as i32), line.style, 4)?,
            _ => draw_styled_line(&plot, &pixels, line.style, 2)?,
        }
    }
    Ok(())
}

/// A line per named series (the report's styles in order), on linear axes from zero, as an
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
            style: Style::nth(i),
            points: finite_points(points.iter().copied()),
        })
        .collect();
    panels_svg(caption, x_desc, y_desc, &[Panel { title: None, lines }])
}

/// Ops/s over time in each run's main phase.
pub(super) fn throughput_svg(c: &Comparison, title: &str) -> io::Result<String> {
    let panels = family_panels(c, |run| {
        main_phase(run).map_or_else(Vec::new, |p| {
            finite_points(p.throughput_samples.iter().copied())
        })
    });
    panels_svg(
        title,
        "time since the main phase started (s)",
        "throughput (ops/s)",
        &panels,
    )
}

/// Database directory size over time, per run.
pub(super) fn disk_svg(c: &Comparison, title: &str) -> io::Result<String> {
    let panels = family_panels(c, |run| {
        finite_points(
            run.disk_samples
                .iter()
                .map(|&(t, bytes)| (t, bytes as f64 / MIB)),
        )
    });
    panels_svg(
        title,
        "time since the run started (s)",
        "database directory size (MiB)",
        &panels,
    )
}
