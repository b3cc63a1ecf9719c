//! The HTML page: one self-contained file (inline CSS, no scripts, no external resources) beside
//! the chart SVGs it embeds.

use super::charts::CHARTS;
use super::reads::{read_rows, settings_lines, READ_HEADERS};
use super::run_colour;
use super::table::{self, MAIN_HEADERS, PHYSICAL_HEADERS, RATIO_HEADERS};
use crate::results::{Comparison, RunResult};
use std::fmt::Write;

const STYLE: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.5em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #e4e4e4; }
th { background: #f4f4f4; text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th.label, td.label { text-align: left; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.4em; }
figure { margin: 1em 0 2em; }
figcaption { color: #555; max-width: 900px; }
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

/// The run label cell, with the colour the charts use for that run.
fn label_cell(index: usize, label: &str) -> String {
    let (r, g, b) = run_colour(index);
    format!(
        "<td class=\"label\"><span class=\"swatch\" style=\"background:#{r:02x}{g:02x}{b:02x}\"></span>{}</td>",
        esc(label)
    )
}

/// A table with the run label first and right-aligned numeric cells after it.
fn push_table<'a>(
    out: &mut String,
    headers: impl IntoIterator<Item = &'a str>,
    rows: impl IntoIterator<Item = (String, &'a [String])>,
) {
    out.push_str("<table>\n<tr><th class=\"label\">run</th>");
    for h in headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for (label, cells) in rows {
        out.push_str("<tr>");
        out.push_str(&label);
        for cell in cells {
            let _ = write!(out, "<td class=\"num\">{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// The per-level shape of one run at the end, or a note when the engine does not report it.
fn push_shape(out: &mut String, index: usize, run: &RunResult) {
    let (r, g, b) = run_colour(index);
    let _ = writeln!(
        out,
        "<h3><span class=\"swatch\" style=\"background:#{r:02x}{g:02x}{b:02x}\"></span>{} \
         <span class=\"note\">({}, {})</span></h3>",
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
        out.push_str("<p class=\"note\">No shape reported.</p>\n");
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
    out.push_str("</table>\n");
}

/// The whole page.
pub(super) fn render_html(c: &Comparison) -> String {
    let rows = table::rows(c);
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

    for line in settings_lines(c) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(line.trim()));
    }

    out.push_str("<h2>Results</h2>\n");
    push_table(
        &mut out,
        MAIN_HEADERS[1..].iter().copied(),
        rows.iter()
            .enumerate()
            .map(|(i, r)| (label_cell(i, &r.label), r.main.as_slice())),
    );

    let _ = writeln!(
        out,
        "<h2>Ratios {}</h2>\n<p class=\"note\">Run ÷ baseline. Above 1 is better for ops/s and the \
         worst window; below 1 is better for p99, WA and peak SA.</p>",
        esc(&table::ratio_title(c))
    );
    push_table(
        &mut out,
        RATIO_HEADERS.iter().copied(),
        rows.iter()
            .enumerate()
            .map(|(i, r)| (label_cell(i, &r.label), r.ratios.as_slice())),
    );

    let _ = writeln!(
        out,
        "<h2>Physical view</h2>\n<p class=\"note\">{}. Write MB/s: bytes the process sent to the \
         device per second of the run; reads/s: read requests of the block device holding the \
         database (every process's); read MB/s: bytes fetched from storage for the process.</p>",
        esc(&table::physical_title(c))
    );
    let physical = table::physical_rows(c);
    push_table(
        &mut out,
        PHYSICAL_HEADERS[1..].iter().copied(),
        physical
            .iter()
            .enumerate()
            .map(|(i, r)| (label_cell(i, &r[0]), &r[1..])),
    );
    let reads = read_rows(c);
    if !reads.is_empty() {
        out.push_str(
            "<h2>Reads per measured phase</h2>\n<p class=\"note\">Reads/s and reads/op: the \
             block device's counters; % of IOPS: reads/s against the probed random-read rate at \
             the queue depth nearest the phase's (QD = threads × batch); data, index and filter: \
             blocks the engine read from storage per operation.</p>\n",
        );
        push_table(
            &mut out,
            READ_HEADERS.iter().copied(),
            reads.iter().map(|(label, cells)| {
                let index = c.runs.iter().position(|r| &r.label == label).unwrap_or(0);
                (label_cell(index, label), cells.as_slice())
            }),
        );
    }

    out.push_str("<h2>Charts</h2>\n");
    for chart in &CHARTS {
        let _ = writeln!(
            out,
            "<figure><img src=\"{file}\" width=\"900\" height=\"500\" alt=\"{title}\">\
             <figcaption>{about}</figcaption></figure>",
            file = chart.file,
            title = esc(chart.title),
            about = esc(chart.about)
        );
    }

    out.push_str("<h2>LSM shape at the end</h2>\n");
    for (i, run) in c.runs.iter().enumerate() {
        push_shape(&mut out, i, run);
    }
    out.push_str("</body>\n</html>\n");
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
