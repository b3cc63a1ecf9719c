//! Presenting a [`Comparison`]: the terminal table, the CSV and JSON files, SVG charts and a
//! self-contained HTML page.
//!
//! Every view reads the same numbers: the *main phase* of a run is its last phase (the one
//! `RunResult::ops_per_sec` describes), and its latency is the phase's `"all"` summary. Missing
//! or non-finite values are shown as `-` (table), an empty field (CSV) or left out (charts), never
//! as a misleading zero.
//!
//! There is no PNG output: plotters can only draw text into bitmaps through its `ttf` feature,
//! which needs system font libraries and installed fonts, and CI machines have neither. Convert
//! the SVGs with a browser when a PNG is needed.

mod best;
mod charts;
mod csv;
mod html;
mod reads;
mod style;
mod table;

pub use charts::series_svg;
pub use csv::render_csv;
pub use reads::render_reads;
pub use table::render_table;

use crate::results::{Comparison, LatencySummary, PhaseResult, RunResult};
use std::io;
use std::path::{Path, PathBuf};

/// Writes the whole report into `dir` (created if missing) and returns the path of its
/// `index.html`.
///
/// Files: `results.json` (the comparison, pretty-printed; non-finite numbers become `null`),
/// `results.csv` ([`render_csv`]), `throughput.svg` (ops/s over time in the main phase) and
/// `disk.svg` (database directory size over time, MiB), each as small multiples with one panel
/// per family of policies and one for the peers on shared axes; `throughput-wa.svg` and
/// `throughput-sa.svg` (main-phase throughput against write amplification and against peak
/// space amplification), `tradeoff.svg` (write amplification against lookup cost), each with one
/// labelled point per run; `latency.svg` (p50/p99/p99.9 of the main phase per run, log scale) and
/// `index.html`, whose tables mark each column's best value and which needs nothing beyond these
/// files. Every run keeps one colour and dash pattern (a marker shape on points) throughout.
pub fn write_report(c: &Comparison, dir: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(c).map_err(io::Error::other)?;
    std::fs::write(dir.join("results.json"), json)?;
    std::fs::write(dir.join("results.csv"), render_csv(c))?;
    for chart in charts::CHARTS {
        std::fs::write(dir.join(chart.file), (chart.render)(c, chart.title)?)?;
    }
    let index = dir.join("index.html");
    std::fs::write(&index, html::render_html(c))?;
    Ok(index)
}

/// The main (last measured) phase of a run.
fn main_phase(run: &RunResult) -> Option<&PhaseResult> {
    run.phases.last()
}

/// Latency over all operations of the main phase.
fn main_latency(run: &RunResult) -> Option<&LatencySummary> {
    main_phase(run).and_then(|p| p.latency.get("all"))
}

/// `Some(v)` when `v` is finite: NaN and infinities mean "not measured" everywhere in the report.
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Rounds to an integer with thousands separators ("1,234,567"), or `-`.
fn fmt_count(v: Option<f64>) -> String {
    let Some(v) = v else {
        return "-".to_owned();
    };
    let digits = format!("{:.0}", v.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    // "-0" would be noise for values that round to zero.
    if v < 0.0 && digits != "0" {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `decimals` digits after the point, or `-`.
fn fmt_fixed(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

#[cfg(test)]
mod tests;
