//! The CSV view: one row per (run, phase, operation type).

use crate::results::{Comparison, LatencySummary, PhaseResult, RunResult};

/// Column names, in order. Run-level columns repeat on every row of the run so each row stands on
/// its own in a spreadsheet or a dataframe. Flags (`direct_io`, `drop_caches`) are 1 or 0.
const HEADER: [&str; 59] = [
    "workload",
    "label",
    "engine",
    "policy",
    "run_ops_per_sec",
    "run_worst_window_ops_per_sec",
    "run_p99_us",
    "write_amp",
    "peak_space_amp",
    "final_space_amp",
    "read_amp",
    "runs_probed_per_lookup",
    "filter_probes_per_lookup",
    "stall_seconds",
    "cpu_seconds",
    "wall_seconds",
    "user_bytes",
    "table_bytes_written",
    "live_bytes",
    "peak_disk_bytes",
    "final_disk_bytes",
    "total_ops",
    "device_bytes_written",
    "peak_rss_bytes",
    "memory_limit_bytes",
    "device_write_limit_bytes_per_second",
    "direct_io",
    "block_cache_bytes",
    "row_cache_bytes",
    "drop_caches",
    "process_bytes_read",
    "device_reads",
    "device_bytes_read",
    "index_reads_per_lookup",
    "filter_reads_per_lookup",
    "steal_share",
    "phase",
    "phase_ops",
    "phase_seconds",
    "phase_ops_per_sec",
    "phase_worst_window_ops_per_sec",
    "phase_write_amp",
    "phase_threads",
    "phase_read_batch",
    "phase_point_reads",
    "phase_point_reads_found",
    "phase_process_bytes_read",
    "phase_device_reads",
    "phase_device_bytes_read",
    "phase_data_blocks_read",
    "phase_index_blocks_read",
    "phase_filter_blocks_read",
    "op",
    "count",
    "mean_us",
    "p50_us",
    "p99_us",
    "p999_us",
    "max_us",
];

/// One CSV row per (run, phase, operation type, including "all") with every numeric field of the
/// run, the phase and the latency summary; the header line comes first.
///
/// A phase without latency summaries still gets one row (empty `op` and latency fields), and so
/// does a run without phases (empty phase fields), so that no run disappears from the file.
/// Missing and non-finite numbers are empty fields; the others parse as numbers.
pub fn render_csv(c: &Comparison) -> String {
    let mut out = String::new();
    push_row(&mut out, HEADER.iter().map(|h| (*h).to_owned()));
    for run in &c.runs {
        if run.phases.is_empty() {
            push_row(&mut out, row(c, run, None, None));
        }
        for phase in &run.phases {
            if phase.latency.is_empty() {
                push_row(&mut out, row(c, run, Some(phase), None));
            }
            for (op, latency) in &phase.latency {
                push_row(&mut out, row(c, run, Some(phase), Some((op, latency))));
            }
        }
    }
    out
}

/// The fields of one row, in [`HEADER`] order.
fn row(
    c: &Comparison,
    run: &RunResult,
    phase: Option<&PhaseResult>,
    latency: Option<(&String, &LatencySummary)>,
) -> Vec<String> {
    let mut fields = vec![
        c.workload.clone(),
        run.label.clone(),
        run.engine.clone(),
        run.policy.clone(),
        float(Some(run.ops_per_sec)),
        float(Some(run.worst_window_ops_per_sec)),
        float(Some(run.p99_us)),
        float(Some(run.write_amp)),
        float(Some(run.peak_space_amp)),
        float(Some(run.final_space_amp)),
        float(run.read_amp),
        float(run.runs_probed_per_lookup),
        float(run.filter_probes_per_lookup),
        float(run.stall_seconds),
        float(Some(run.cpu_seconds)),
        float(Some(run.wall_seconds)),
        run.user_bytes.to_string(),
        run.table_bytes_written.to_string(),
        run.live_bytes.to_string(),
        run.peak_disk_bytes.to_string(),
        run.final_disk_bytes.to_string(),
        run.total_ops.to_string(),
        run.device_bytes_written
            .map_or_else(String::new, |b| b.to_string()),
        run.peak_rss_bytes
            .map_or_else(String::new, |b| b.to_string()),
        count(run.memory_limit),
        count(run.device_write_limit),
        u8::from(run.direct_io).to_string(),
        count(run.block_cache_bytes),
        count(run.row_cache_bytes),
        u8::from(run.drop_caches).to_string(),
        count(run.process_bytes_read),
        count(run.device_reads),
        count(run.device_bytes_read),
        float(run.index_reads_per_lookup),
        float(run.filter_reads_per_lookup),
        float(run.steal_share),
    ];
    match phase {
        Some(p) => fields.extend([
            p.name.clone(),
            p.ops.to_string(),
            float(Some(p.seconds)),
            float(Some(p.ops_per_sec)),
            float(Some(p.worst_window_ops_per_sec)),
            float(p.write_amp),
            p.threads.to_string(),
            p.read_batch.to_string(),
            p.point_reads.to_string(),
            p.point_reads_found.to_string(),
            count(p.process_bytes_read),
            count(p.device_reads),
            count(p.device_bytes_read),
            count(p.blocks_read),
            count(p.index_blocks_read),
            count(p.filter_blocks_read),
        ]),
        None => fields.extend(std::iter::repeat_n(String::new(), 16)),
    }
    match latency {
        Some((op, l)) => fields.extend([
            op.clone(),
            l.count.to_string(),
            float(Some(l.mean_us)),
            float(Some(l.p50_us)),
            float(Some(l.p99_us)),
            float(Some(l.p999_us)),
            float(Some(l.max_us)),
        ]),
        None => fields.extend(std::iter::repeat_n(String::new(), 7)),
    }
    fields
}

/// A count, or an empty field when missing.
fn count(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// A float as Rust's shortest round-trip form (never an exponent, so every CSV reader parses
/// it), or an empty field when missing or not finite.
fn float(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(String::new, |v| v.to_string())
}

/// Appends one line, quoting fields as RFC 4180 requires.
fn push_row(out: &mut String, fields: impl IntoIterator<Item = String>) {
    for (i, field) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if field.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&field);
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_separators_are_quoted() {
        let mut out = String::new();
        push_row(&mut out, ["plain", "a,b", "say \"hi\""].map(str::to_owned));
        assert_eq!(out, "plain,\"a,b\",\"say \"\"hi\"\"\"\n");
    }

    #[test]
    fn floats_never_use_exponents_and_drop_non_finite() {
        assert_eq!(float(Some(1e21)), "1000000000000000000000");
        assert_eq!(float(Some(0.25)), "0.25");
        assert_eq!(float(Some(f64::NAN)), "");
        assert_eq!(float(Some(f64::INFINITY)), "");
        assert_eq!(float(None), "");
    }

    #[test]
    fn every_row_has_as_many_fields_as_the_header() {
        let c = Comparison {
            runs: vec![RunResult {
                label: "only".into(),
                ..RunResult::default()
            }],
            ..Comparison::default()
        };
        let csv = render_csv(&c);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 2, "a run without phases still gets a row");
        assert_eq!(lines[1].split(',').count(), HEADER.len());
    }
}
