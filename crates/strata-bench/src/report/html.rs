//! The HTML page: one self-contained file (inline CSS, no scripts, no external resources) beside
//! the chart SVGs it embeds.

use super::best::{table_marks, Better};
use super::charts::{CHARTS, WIDTH};
use super::reads::{
    failure_lines, read_rows, settings_lines, steal_lines, READ_BETTER, READ_HEADERS,
};
use super::style::{run_styles, Pattern, Style};
use super::table::{
    self, MAIN_BETTER, MAIN_HEADERS, PHYSICAL_BETTER, PHYSICAL_HEADERS, RATIO_BETTER, RATIO_HEADERS,
};
use crate::results::{Comparison, RunResult};
use std::fmt::Write;

const STYLE: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 1320px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #e4e4e4; }
th { background: #f4f4f4; text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th.label, td.label { text-align: left; }
.swatch { vertical-align: middle; margin-right: 0.4em; }
.best { font-weight: bold; background: #fff3c4; }
.shapes { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 0 1.5em; }
.shapes > div { min-width: 0; }
.shapes h3 { font-size: 1em; margin: 1em 0 0.3em; }
.shapes code { overflow-wrap: anywhere; }
figure { margin: 1em 0 2em; }
figcaption { color: #555; max-width: 1000px; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.note { color: #555; }
";

/// Escapes text for HTML element content and double-quoted attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The mark of a column's best value, ahead of the number.
const BEST: &str = "★";

/// A run's swatch as an inline SVG, drawn like the charts' legends: a line in its colour and dash
/// pattern with its marker shape at the start.
fn swatch(style: Style) -> String {
    let colour = style.hex();
    let marker = match style.dash {
        Pattern::Solid => "<circle cx=\"5\" cy=\"6\" r=\"5\"".to_owned(),
        Pattern::Dashed => "<rect x=\"1\" y=\"2\" width=\"8\" height=\"8\"".to_owned(),
        Pattern::Dotted => "<polygon points=\"5,0 11,10 -1,10\"".to_owned(),
        Pattern::DashDot => "<polygon points=\"5,0 11,6 5,12 -1,6\"".to_owned(),
    };
    // A white rim, as the charts draw markers.
    let marker = format!("{marker} fill=\"{colour}\" stroke=\"#fff\"/>");
    format!(
        "<svg class=\"swatch\" width=\"40\" height=\"12\" viewBox=\"-1 0 40 12\" aria-hidden=\"true\">\
         <line x1=\"0\" y1=\"6\" x2=\"36\" y2=\"6\" stroke=\"{colour}\" stroke-width=\"3\" \
         stroke-dasharray=\"{}\"/>{marker}</svg>",
        style.dash.dasharray()
    )
}

/// The run label cell, with the swatch the charts use for that run.
fn label_cell(style: Style, label: &str) -> String {
    format!("<td class=\"label\">{}{}</td>", swatch(style), esc(label))
}

/// A table with the run label first and right-aligned numeric cells after it; cells `marks`
/// flags (row by row) are shown as their column's best.
fn push_table<'a>(
    out: &mut String,
    headers: impl IntoIterator<Item = &'a str>,
    rows: &[(String, &[String])],
    marks: &[Vec<bool>],
) {
    out.push_str("<table>\n<tr><th class=\"label\">run</th>");
    for h in headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for (r, (label, cells)) in rows.iter().enumerate() {
        out.push_str("<tr>");
        out.push_str(label);
        for (c, cell) in cells.iter().enumerate() {
            if marks
                .get(r)
                .and_then(|m| m.get(c))
                .copied()
                .unwrap_or(false)
            {
                let _ = write!(
                    out,
                    "<td class=\"num best\" title=\"best in this column\">{BEST} {}</td>",
                    esc(cell)
                );
            } else {
                let _ = write!(out, "<td class=\"num\">{}</td>", esc(cell));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Pushes a table of one row per run, marking each column's best value.
fn push_run_table<'a>(
    out: &mut String,
    headers: impl IntoIterator<Item = &'a str>,
    styles: &[Style],
    rows: Vec<(&str, &[String])>,
    better: &[Better],
) {
    let cells: Vec<&[String]> = rows.iter().map(|(_, cells)| *cells).collect();
    let marks = table_marks(&cells, better, |_| ());
    let rows: Vec<(String, &[String])> = rows
        .iter()
        .zip(styles)
        .map(|((label, cells), style)| (label_cell(*style, label), *cells))
        .collect();
    push_table(out, headers, &rows, &marks);
}

/// The per-level shape of one run at the end, or a note when the engine does not report it.
fn push_shape(out: &mut String, style: Style, run: &RunResult) {
    let _ = writeln!(
        out,
        "<div>\n<h3>{}{} <span class=\"note\">({}, {})</span></h3>",
        swatch(style),
        esc(&run.label),
        esc(&run.engine),
        esc(&run.policy)
    );
    if let Some(state) = &run.policy_state {
        let _ = writeln!(
            out,
            "<p class=\"note\">Policy state at the end: <code>{}</code></p>",
            esc(state)
        );
    }
    if run.shape.is_empty() {
        out.push_str("<p class=\"note\">No shape reported.</p>\n</div>\n");
        return;
    }
    out.push_str(
        "<table>\n<tr><th class=\"label\">level</th><th>sorted runs</th><th>tables</th>\
         <th>MiB</th></tr>\n",
    );
    for level in &run.shape {
        let _ = writeln!(
            out,
            "<tr><td class=\"label\">L{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{:.1}</td></tr>",
            level.level,
            level.runs,
            level.tables,
            level.bytes as f64 / (1024.0 * 1024.0)
        );
    }
    out.push_str("</table>\n</div>\n");
}

/// The whole page.
pub(super) fn render_html(c: &Comparison) -> String {
    let rows = table::rows(c);
    let styles = run_styles(c);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Strata benchmark: {workload}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>Strata benchmark: {workload}</h1>\n<p>{description}</p>\n\
         <p class=\"note\">Main phase = each run's last phase; latencies are over all of its \
         operations. WA = table bytes written ÷ user bytes; SA = disk bytes ÷ live bytes; read amp \
         = data blocks read per point lookup. Raw data: <a href=\"results.json\">results.json</a>, \
         <a href=\"results.csv\">results.csv</a>.</p>\n",
        workload = esc(&c.workload),
        description = esc(&c.description),
    );

    for line in failure_lines(c) {
        let _ = writeln!(
            out,
            "<p class=\"note\"><strong>{}</strong></p>",
            esc(line.trim())
        );
    }
    for line in steal_lines(c).into_iter().chain(settings_lines(c)) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(line.trim()));
    }

    let _ = writeln!(
        out,
        "<h2>Results</h2>\n<p class=\"note\"><span class=\"best\">{BEST} bold</span>: the best \
         value of its column (highest throughput; lowest latency, amplification, CPU and memory). \
         Ties are all marked and missing values never; a column where every run, or most of them, \
         share the best value has no mark. Each run keeps its colour, line pattern and marker in \
         every table and chart.</p>"
    );
    push_run_table(
        &mut out,
        MAIN_HEADERS[1..].iter().copied(),
        &styles,
        rows.iter()
            .map(|r| (r.label.as_str(), r.main.as_slice()))
            .collect(),
        &MAIN_BETTER,
    );

    let _ = writeln!(
        out,
        "<h2>Ratios {}</h2>\n<p class=\"note\">Run ÷ baseline. Above 1 is better for ops/s and the \
         worst window; below 1 is better for p99, WA and peak SA.</p>",
        esc(&table::ratio_title(c))
    );
    push_run_table(
        &mut out,
        RATIO_HEADERS.iter().copied(),
        &styles,
        rows.iter()
            .map(|r| (r.label.as_str(), r.ratios.as_slice()))
            .collect(),
        &RATIO_BETTER,
    );

    let _ = writeln!(
        out,
        "<h2>Physical view</h2>\n<p class=\"note\">{}. Write MB/s: bytes the process sent to the \
         device per second of the run; reads/s: read requests of the block device holding the \
         database (every process's); read MB/s: bytes fetched from storage for the process. Only \
         CPU per operation and peak memory are marked: the rest grow with the work a run did.</p>",
        esc(&table::physical_title(c))
    );
    let physical = table::physical_rows(c);
    push_run_table(
        &mut out,
        PHYSICAL_HEADERS[1..].iter().copied(),
        &styles,
        physical.iter().map(|r| (r[0].as_str(), &r[1..])).collect(),
        &PHYSICAL_BETTER,
    );
    let reads = read_rows(c);
    if !reads.is_empty() {
        out.push_str(
            "<h2>Reads per measured phase</h2>\n<p class=\"note\">Reads/s and reads/op: the \
             block device's counters; % of IOPS: reads/s against the probed random-read rate at \
             the queue depth nearest the phase's (QD = threads × batch); data, index and filter: \
             blocks the engine read from storage per operation. Best values are marked among the \
             runs' rows of the same phase.</p>\n",
        );
        let cells: Vec<&[String]> = reads.iter().map(|(_, cells)| cells.as_slice()).collect();
        // Phases differ in what they do: compare only rows of the same phase (the first cell).
        let marks = table_marks(&cells, &READ_BETTER, |i| cells[i].first());
        let labelled: Vec<(String, &[String])> = reads
            .iter()
            .map(|(label, cells)| {
                let index = c.runs.iter().position(|r| &r.label == label).unwrap_or(0);
                let style = styles.get(index).copied().unwrap_or(Style::nth(0));
                (label_cell(style, label), cells.as_slice())
            })
            .collect();
        push_table(&mut out, READ_HEADERS.iter().copied(), &labelled, &marks);
    }

    out.push_str("<h2>Charts</h2>\n");
    for chart in &CHARTS {
        let _ = writeln!(
            out,
            "<figure><img src=\"{file}\" width=\"{WIDTH}\" alt=\"{title}\">\
             <figcaption>{about}</figcaption></figure>",
            file = chart.file,
            title = esc(chart.title),
            about = esc(chart.about)
        );
    }

    out.push_str("<h2>LSM shape at the end</h2>\n<div class=\"shapes\">\n");
    for (run, style) in c.runs.iter().zip(&styles) {
        push_shape(&mut out, *style, run);
    }
    out.push_str("</div>\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_labels_is_escaped() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        let c = Comparison {
            description: "<script>".into(),
            runs: vec![RunResult {
                label: "x<y".into(),
                ..RunResult::default()
            }],
            ..Comparison::default()
        };
        let page = render_html(&c);
        assert!(!page.contains("<script>"));
        assert!(page.contains("x&lt;y"));
    }
}
