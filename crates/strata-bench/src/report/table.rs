//! The results table and its ratio block, as a cell model shared by the terminal and HTML views.

use super::best::Better;
use super::reads::{failure_lines, probe_phrase, settings_lines, share_of_iops, steal_lines};
use super::{finite, fmt_count, fmt_fixed, main_latency, main_phase};
use crate::results::{Comparison, RunResult};

/// Headers of the main block (the first column holds run labels).
pub(super) const MAIN_HEADERS: [&str; 10] = [
    "run",
    "ops/s",
    "worst ops/s",
    "p50 µs",
    "p99 µs",
    "p99.9 µs",
    "WA",
    "peak SA",
    "read amp",
    "CPU s",
];

/// Which way each main column (after "run") improves.
pub(super) const MAIN_BETTER: [Better; 9] = [
    Better::Higher,
    Better::Higher,
    Better::Lower,
    Better::Lower,
    Better::Lower,
    Better::Lower,
    Better::Lower,
    Better::Lower,
    Better::Lower,
];

/// Headers of the ratio block (run ÷ baseline).
pub(super) const RATIO_HEADERS: [&str; 5] = ["ops/s", "worst", "p99", "WA", "peak SA"];

/// Which way each ratio improves.
pub(super) const RATIO_BETTER: [Better; 5] = [
    Better::Higher,
    Better::Higher,
    Better::Lower,
    Better::Lower,
    Better::Lower,
];

/// The cells of one run's row, formatted; `-` marks a missing value.
pub(super) struct Row {
    /// Run label.
    pub label: String,
    /// One cell per [`MAIN_HEADERS`] entry after "run".
    pub main: Vec<String>,
    /// One cell per [`RATIO_HEADERS`] entry.
    pub ratios: Vec<String>,
}

/// The numbers a row and its ratios are made of; `None` when missing or not finite.
struct Numbers {
    ops: Option<f64>,
    worst: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
    p999: Option<f64>,
    write_amp: Option<f64>,
    peak_space_amp: Option<f64>,
    read_amp: Option<f64>,
    cpu: Option<f64>,
}

impl Numbers {
    fn of(run: &RunResult) -> Self {
        let latency = main_latency(run);
        Numbers {
            ops: finite(run.ops_per_sec),
            worst: finite(run.worst_window_ops_per_sec),
            p50: latency.and_then(|l| finite(l.p50_us)),
            // p50 and p99.9 exist only in the histogram summary; p99 comes from the same summary
            // so the three columns describe one distribution, and falls back to the run's own
            // field for runners that fill only that.
            p99: finite(latency.map_or(run.p99_us, |l| l.p99_us)),
            p999: latency.and_then(|l| finite(l.p999_us)),
            write_amp: finite(run.write_amp),
            peak_space_amp: finite(run.peak_space_amp),
            read_amp: run.read_amp.and_then(finite),
            cpu: finite(run.cpu_seconds),
        }
    }

    /// The values the ratio block compares, in [`RATIO_HEADERS`] order.
    fn ratio_inputs(&self) -> [Option<f64>; 5] {
        [
            self.ops,
            self.worst,
            self.p99,
            self.write_amp,
            self.peak_space_amp,
        ]
    }
}

/// The baseline run, if the comparison names one that it contains.
pub(super) fn baseline(c: &Comparison) -> Option<&RunResult> {
    c.runs.iter().find(|r| r.label == c.baseline)
}

/// One formatted row per run, in run order.
pub(super) fn rows(c: &Comparison) -> Vec<Row> {
    let base = baseline(c).map(|b| Numbers::of(b).ratio_inputs());
    c.runs
        .iter()
        .map(|run| {
            let n = Numbers::of(run);
            let main = vec![
                fmt_count(n.ops),
                fmt_count(n.worst),
                fmt_fixed(n.p50, 1),
                fmt_fixed(n.p99, 1),
                fmt_fixed(n.p999, 1),
                fmt_fixed(n.write_amp, 2),
                fmt_fixed(n.peak_space_amp, 2),
                fmt_fixed(n.read_amp, 2),
                fmt_fixed(n.cpu, 1),
            ];
            let ratios = n
                .ratio_inputs()
                .iter()
                .enumerate()
                .map(|(i, v)| fmt_fixed(ratio(*v, base.and_then(|b| b[i])), 2))
                .collect();
            Row {
                label: run.label.clone(),
                main,
                ratios,
            }
        })
        .collect()
}

/// `value / base`, missing when either is missing or the quotient is not finite (a zero
/// baseline).
fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    value.zip(base).and_then(|(v, b)| finite(v / b))
}

/// The title of the ratio block.
pub(super) fn ratio_title(c: &Comparison) -> String {
    if baseline(c).is_some() {
        format!("vs {}", c.baseline)
    } else {
        format!("vs {} (no such run)", c.baseline)
    }
}

/// The terminal table: first the settings that decide what is cached (memory limit, direct
/// I/O, block cache, dropped caches: once when every run shares them, per run where they
/// differ), then one row per run with ops/s, worst-window ops/s, p50/p99/p99.9 µs (main
/// phase, all operations), write amplification, peak space amplification, read amplification and
/// CPU seconds, then a block `vs <baseline>` with run ÷ baseline for ops/s, worst window, p99, WA
/// and peak SA (`-` when either value is missing). Column widths follow the content; numbers are
/// right-aligned.
pub fn render_table(c: &Comparison) -> String {
    let rows = rows(c);
    let header: Vec<String> = MAIN_HEADERS
        .iter()
        .chain(RATIO_HEADERS.iter())
        .map(|h| (*h).to_owned())
        .collect();
    let cells: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| {
            std::iter::once(r.label.as_str())
                .chain(r.main.iter().map(String::as_str))
                .chain(r.ratios.iter().map(String::as_str))
                .collect()
        })
        .collect();
    // Widths in characters, not bytes: "µ" is two bytes but one column, and `format!` pads by
    // characters too.
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let split = MAIN_HEADERS.len();
    let title = ratio_title(c);
    // The ratio block is at least as wide as its title, which sits above it.
    let ratio_width: usize = widths[split..].iter().sum::<usize>() + 2 * (RATIO_HEADERS.len() - 1);
    if let Some(last) = widths.last_mut() {
        *last += title.chars().count().saturating_sub(ratio_width);
    }

    let line = |cells: &[&str]| -> String {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == split {
                out.push_str("  | ");
            } else if i > 0 {
                out.push_str("  ");
            }
            if i == 0 {
                out.push_str(&format!("{cell:<w$}"));
            } else {
                out.push_str(&format!("{cell:>w$}"));
            }
        }
        out.trim_end().to_owned()
    };
    let main_width = widths[..split].iter().sum::<usize>() + 2 * (split - 1);
    let mut out = String::new();
    let mut settings = failure_lines(c);
    settings.extend(steal_lines(c));
    settings.extend(settings_lines(c));
    if !settings.is_empty() {
        out.push_str(&settings.join("\n"));
        out.push_str("\n\n");
    }
    out.push_str(&format!("{:main_width$}  | {title}\n", ""));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let header_line = line(&header_refs);
    out.push_str(&header_line);
    out.push('\n');
    out.push_str(&"-".repeat(header_line.chars().count()));
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&render_physical(c));
    out.push_str(&super::reads::render_reads(c));
    out.push_str(&render_rounds(c));
    out
}

/// Per run and phase with whole compaction rounds in it: how many, the mean of their
/// throughputs, and each one's (empty when no run has a whole round).
pub fn render_rounds(c: &Comparison) -> String {
    let mut out = String::new();
    for run in &c.runs {
        for phase in run.phases.iter().filter(|p| !p.rounds.is_empty()) {
            let each: Vec<String> = phase
                .rounds
                .iter()
                .map(|r| fmt_count(Some(r.ops_per_sec)))
                .collect();
            let mean =
                phase.rounds.iter().map(|r| r.ops_per_sec).sum::<f64>() / phase.rounds.len() as f64;
            out.push_str(&format!(
                "{} {}: {} whole compaction rounds, mean {} ops/s per round ({})\n",
                run.label,
                phase.name,
                phase.rounds.len(),
                fmt_count(Some(mean)),
                each.join(", ")
            ));
        }
    }
    if !out.is_empty() {
        out = format!(
            "\nthroughput per compaction round (between merges that rewrite the last level)\n{out}"
        );
    }
    for run in &c.runs {
        if let Some((keys, bytes)) = run.key_index {
            out.push_str(&format!(
                "{}: key index of {} keys in {:.1} MiB ({:.1} bytes a key)\n",
                run.label,
                fmt_count(Some(keys as f64)),
                bytes as f64 / f64::from(1 << 20),
                bytes as f64 / keys.max(1) as f64
            ));
        }
    }
    out
}

/// Headers of the physical view.
pub(super) const PHYSICAL_HEADERS: [&str; 8] = [
    "run",
    "write MB/s",
    "% of write bw",
    "reads/s",
    "read MB/s",
    "% of IOPS",
    "CPU µs/op",
    "peak RSS MiB",
];

/// Which way each physical column (after "run") improves: only CPU per operation and memory
/// have a direction regardless of how much a run wrote or read.
pub(super) const PHYSICAL_BETTER: [Better; 7] = [
    Better::Neither,
    Better::Neither,
    Better::Neither,
    Better::Neither,
    Better::Neither,
    Better::Lower,
    Better::Lower,
];

/// The physical view's cells, one row per run, in [`PHYSICAL_HEADERS`] order.
pub(super) fn physical_rows(c: &Comparison) -> Vec<Vec<String>> {
    let bandwidth = c.device_write_bandwidth.and_then(finite);
    c.runs
        .iter()
        .map(|run| {
            let device = run.device_bytes_per_sec();
            let reads = run.device_reads_per_sec();
            let depth = main_phase(run).map_or(1, |p| p.queue_depth());
            vec![
                run.label.clone(),
                fmt_fixed(device.map(|b| b / 1e6), 1),
                fmt_fixed(ratio(device, bandwidth).map(|r| r * 100.0), 1),
                fmt_count(reads),
                fmt_fixed(run.process_read_bytes_per_sec().map(|b| b / 1e6), 1),
                fmt_fixed(
                    share_of_iops(reads, c.device_probe.as_ref(), depth).map(|(s, _)| s),
                    1,
                ),
                fmt_fixed(run.cpu_seconds_per_op().map(|s| s * 1e6), 2),
                fmt_fixed(run.peak_rss_bytes.map(|b| b as f64 / f64::from(1 << 20)), 0),
            ]
        })
        .collect()
}

/// The physical view's title: what the device measured before the runs.
pub(super) fn physical_title(c: &Comparison) -> String {
    let mut title = match c.device_write_bandwidth.and_then(finite) {
        Some(b) => format!(
            "physical view (device sequential write: {:.1} MB/s",
            b / 1e6
        ),
        None => "physical view (device bandwidth not measured".to_owned(),
    };
    if let Some(probe) = &c.device_probe {
        title.push_str("; ");
        title.push_str(&probe_phrase(probe));
    }
    title.push(')');
    title
}

/// The physical view: per run, bytes sent to the device per second of the run (MB = 10^6 bytes)
/// and as a share of the device's measured sequential write bandwidth; device read requests per
/// second (the block device's counters, every process's) and bytes the process had read from
/// storage per second, with the reads as a share of the device's random-read rate at the queue
/// depth nearest the main phase's (`--device-probe`); CPU microseconds per operation (every
/// phase), and peak resident memory.
pub fn render_physical(c: &Comparison) -> String {
    let rows = physical_rows(c);
    let mut widths: Vec<usize> = PHYSICAL_HEADERS.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| -> String {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                out.push_str(&format!("{cell:<w$}"));
            } else {
                out.push_str(&format!("  {cell:>w$}"));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = physical_title(c);
    out.push('\n');
    out.push_str(&line(&PHYSICAL_HEADERS));
    out.push('\n');
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&cells));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(fmt_count(Some(1_234_567.4)), "1,234,567");
        assert_eq!(fmt_count(Some(999.0)), "999");
        assert_eq!(fmt_count(Some(1000.0)), "1,000");
        assert_eq!(fmt_count(Some(-12_345.0)), "-12,345");
        assert_eq!(fmt_count(Some(-0.2)), "0");
        assert_eq!(fmt_count(None), "-");
    }

    #[test]
    fn ratio_is_missing_for_zero_or_missing_baseline() {
        assert_eq!(ratio(Some(2.0), Some(1.0)), Some(2.0));
        assert_eq!(ratio(Some(2.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
    }
}
