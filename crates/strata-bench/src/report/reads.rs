//! The views of a comparison run out of cache: the settings that decide what the page cache and
//! the block cache can hold (memory limit, direct I/O, block cache size, dropped caches), and
//! per phase the reads the device served, per operation and against what the device can do
//! (`--device-probe`). Shared by the terminal table and the HTML page.

use super::best::Better;
use super::{finite, fmt_count, fmt_fixed};
use crate::results::{Comparison, DeviceProbe, PhaseResult, RunResult};
use crate::show_bytes;

/// The settings of one run that decide what is cached.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CacheSettings {
    memory_limit: Option<u64>,
    device_write_limit: Option<u64>,
    direct_io: bool,
    block_cache: Option<u64>,
    row_cache: Option<u64>,
    index_and_filter: Option<String>,
    drop_caches: bool,
}

/// Phrases per run: memory limit, device write limit, I/O, block cache, indexes and filters,
/// page cache.
const PHRASES: usize = 6;

impl CacheSettings {
    fn of(run: &RunResult) -> CacheSettings {
        CacheSettings {
            memory_limit: run.memory_limit,
            device_write_limit: run.device_write_limit,
            direct_io: run.direct_io,
            block_cache: run.block_cache_bytes,
            row_cache: run.row_cache_bytes,
            index_and_filter: run.index_and_filter.clone(),
            drop_caches: run.drop_caches,
        }
    }

    /// The settings as phrases, in a fixed order.
    fn phrases(&self) -> [String; PHRASES] {
        [
            match self.memory_limit {
                Some(limit) => format!("memory limit {}", show_bytes(limit)),
                None => "no memory limit".to_string(),
            },
            // Empty (left out) without one.
            self.device_write_limit
                .map(|rate| format!("device writes capped at {}/s", show_bytes(rate)))
                .unwrap_or_default(),
            if self.direct_io {
                "direct I/O".to_string()
            } else {
                "buffered I/O".to_string()
            },
            {
                let blocks = match self.block_cache {
                    Some(bytes) => format!("block cache {}", show_bytes(bytes)),
                    None => "the engine's default block cache".to_string(),
                };
                match self.row_cache {
                    Some(rows) => format!("{blocks}, row cache {}", show_bytes(rows)),
                    None => blocks,
                }
            },
            // Empty (left out) when the engine does not say.
            self.index_and_filter.clone().unwrap_or_default(),
            if self.drop_caches {
                "page cache dropped before each measured phase".to_string()
            } else {
                "page cache kept between phases".to_string()
            },
        ]
    }
}

/// A line per run that failed, naming it and why.
pub(super) fn failure_lines(c: &Comparison) -> Vec<String> {
    c.failed
        .iter()
        .map(|f| format!("FAILED, no result: {}: {}", f.label, f.error))
        .collect()
}

/// A line per run during which the hypervisor took a noticeable share of the machine's CPU
/// ([`RunResult::steal_share`]): its timings are then not comparable with those of runs that
/// had none.
///
/// [`RunResult::steal_share`]: crate::results::RunResult::steal_share
pub(super) fn steal_lines(c: &Comparison) -> Vec<String> {
    c.runs
        .iter()
        .filter_map(|r| Some((r, r.noticeable_steal()?)))
        .map(|(r, share)| {
            format!(
                "note: the hypervisor took {:.0}% of this machine's CPU time during the run of {} \
                 (steal, /proc/stat): its timings are not comparable with runs that had none",
                100.0 * share,
                r.label
            )
        })
        .collect()
}

/// The settings every run shares, as one line, then a line per set of runs for those that differ
/// (fjall under `--direct-io` runs buffered), naming the runs; empty for a comparison without
/// runs.
pub(super) fn settings_lines(c: &Comparison) -> Vec<String> {
    if c.runs.is_empty() {
        return Vec::new();
    }
    let all: Vec<[String; PHRASES]> = c
        .runs
        .iter()
        .map(|r| CacheSettings::of(r).phrases())
        .collect();
    let shared: Vec<bool> = (0..PHRASES)
        .map(|i| all.iter().all(|p| p[i] == all[0][i]))
        .collect();
    let common: Vec<&str> = (0..PHRASES)
        .filter(|&i| shared[i])
        .map(|i| all[0][i].as_str())
        .filter(|p| !p.is_empty())
        .collect();
    let mut lines = Vec::new();
    if !common.is_empty() {
        lines.push(format!("settings: {}", common.join(", ")));
    }
    if shared.iter().any(|s| !s) {
        // Runs with the same settings share a line: with many policies and a peer or two, a
        // line per run would repeat one phrase twenty times.
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for (run, phrases) in c.runs.iter().zip(&all) {
            let own: Vec<&str> = (0..PHRASES)
                .filter(|&i| !shared[i])
                .map(|i| phrases[i].as_str())
                .filter(|p| !p.is_empty())
                .collect();
            let own = if own.is_empty() {
                "the engine does not say".to_owned()
            } else {
                own.join(", ")
            };
            match groups.iter_mut().find(|(settings, _)| *settings == own) {
                Some((_, runs)) => runs.push(&run.label),
                None => groups.push((own, vec![&run.label])),
            }
        }
        for (settings, runs) in groups {
            lines.push(format!("  {}: {settings}", runs.join(", ")));
        }
    }
    lines
}

/// The device probe's figures as one phrase.
pub(super) fn probe_phrase(probe: &DeviceProbe) -> String {
    format!(
        "random 4 KiB reads {}/s at queue depth 1 and {}/s at 32, sequential reads {:.1} MB/s",
        fmt_count(Some(probe.random_read_iops_qd1)),
        fmt_count(Some(probe.random_read_iops_qd32)),
        probe.sequential_read_bytes_per_sec / 1e6
    )
}

/// `reads_per_sec` as a percentage of the probe's rate at the queue depth nearest `depth`,
/// with that depth.
pub(super) fn share_of_iops(
    reads_per_sec: Option<f64>,
    probe: Option<&DeviceProbe>,
    depth: usize,
) -> Option<(f64, usize)> {
    let (qd, iops) = probe?.iops_near(depth);
    let share = finite(reads_per_sec? / iops)?;
    Some((share * 100.0, qd))
}

/// Headers of the per-phase reads view.
pub(super) const READ_HEADERS: [&str; 11] = [
    "phase",
    "ops/s",
    "found %",
    "reads/s",
    "reads/op",
    "% of IOPS",
    "data/op",
    "index/op",
    "filter/op",
    "read MB/s",
    "QD",
];

/// Which way each reads column improves (compared within a phase): ops/s up, reads and blocks
/// per operation down; the rest have no direction.
pub(super) const READ_BETTER: [Better; 11] = [
    Better::Neither,
    Better::Higher,
    Better::Neither,
    Better::Neither,
    Better::Lower,
    Better::Neither,
    Better::Lower,
    Better::Lower,
    Better::Lower,
    Better::Neither,
    Better::Neither,
];

/// Whether a phase read anything worth a row: point reads, blocks the engine read, or bytes
/// its process had fetched from storage. (The block device's counters alone are no sign: they
/// count every process's reads.)
fn reads_something(p: &PhaseResult) -> bool {
    p.point_reads > 0 || p.blocks_read.unwrap_or(0) > 0 || p.process_bytes_read.unwrap_or(0) > 0
}

/// One row per run and measured phase that read: the run label, then one cell per
/// [`READ_HEADERS`] entry. Device reads per second and per operation come from the block
/// device's counters (every process's reads), read MB/s from the run's own process; data,
/// index and filter blocks per operation from the engine; "% of IOPS" sets reads per second
/// against the probe's rate at the queue depth nearest the phase's (threads × batch), "QD".
pub(super) fn read_rows(c: &Comparison) -> Vec<(String, Vec<String>)> {
    let probe = c.device_probe.as_ref();
    let mut rows = Vec::new();
    for run in &c.runs {
        for p in run.phases.iter().filter(|p| reads_something(p)) {
            let reads_per_sec = p.device_reads_per_sec();
            let share = share_of_iops(reads_per_sec, probe, p.queue_depth());
            let read_mb = p
                .process_bytes_read
                .filter(|_| p.seconds > 0.0)
                .map(|b| b as f64 / p.seconds / 1e6);
            rows.push((
                run.label.clone(),
                vec![
                    p.name.clone(),
                    fmt_count(finite(p.ops_per_sec)),
                    fmt_fixed(p.found_share().map(|s| s * 100.0), 1),
                    fmt_count(reads_per_sec),
                    fmt_fixed(p.per_op(p.device_reads), 2),
                    fmt_fixed(share.map(|(s, _)| s), 1),
                    fmt_fixed(p.per_op(p.blocks_read), 2),
                    fmt_fixed(p.per_op(p.index_blocks_read), 2),
                    fmt_fixed(p.per_op(p.filter_blocks_read), 2),
                    fmt_fixed(read_mb, 1),
                    p.queue_depth().to_string(),
                ],
            ));
        }
    }
    rows
}

/// The per-phase reads view for the terminal (empty when no phase read).
pub fn render_reads(c: &Comparison) -> String {
    let rows = read_rows(c);
    if rows.is_empty() {
        return String::new();
    }
    let header: Vec<&str> = std::iter::once("run").chain(READ_HEADERS).collect();
    let cells: Vec<Vec<&str>> = rows
        .iter()
        .map(|(label, cells)| {
            std::iter::once(label.as_str())
                .chain(cells.iter().map(String::as_str))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |row: &[&str]| -> String {
        let mut out = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            // Labels and phase names left, numbers right.
            if i < 2 {
                out.push_str(&format!("{cell:<w$}  "));
            } else {
                out.push_str(&format!("{cell:>w$}  "));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = String::from(
        "\nreads per measured phase (reads/s and reads/op: the block device's counters; \
         data/index/filter: blocks the engine read per operation)\n",
    );
    out.push_str(&line(&header));
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, direct_io: bool) -> RunResult {
        RunResult {
            label: label.into(),
            memory_limit: Some(256 << 20),
            direct_io,
            block_cache_bytes: Some(32 << 20),
            ..RunResult::default()
        }
    }

    #[test]
    fn common_settings_show_once_and_differences_per_run() {
        let same = Comparison {
            runs: vec![run("leveled", true), run("rocksdb", true)],
            ..Comparison::default()
        };
        assert_eq!(
            settings_lines(&same),
            [
                "settings: memory limit 256MiB, direct I/O, block cache 32MiB, page cache kept \
              between phases"
            ]
        );
        let mixed = Comparison {
            runs: vec![run("leveled", true), run("fjall", false)],
            ..Comparison::default()
        };
        let lines = settings_lines(&mixed);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(!lines[0].contains("I/O"), "{lines:?}");
        assert_eq!(lines[1], "  leveled: direct I/O");
        assert_eq!(lines[2], "  fjall: buffered I/O");
        // Runs that agree share a line.
        let grouped = Comparison {
            runs: vec![
                run("leveled", true),
                run("fjall", false),
                run("tiered", true),
            ],
            ..Comparison::default()
        };
        let lines = settings_lines(&grouped);
        assert_eq!(
            lines[1..],
            ["  leveled, tiered: direct I/O", "  fjall: buffered I/O"]
        );
    }

    #[test]
    fn phase_reads_are_set_against_the_probe_at_the_nearest_queue_depth() {
        let probe = DeviceProbe {
            random_read_iops_qd1: 10_000.0,
            random_read_iops_qd32: 100_000.0,
            ..DeviceProbe::default()
        };
        let phase = |name: &str, threads: usize, read_batch: usize| PhaseResult {
            name: name.into(),
            ops: 100_000,
            seconds: 10.0,
            ops_per_sec: 10_000.0,
            threads,
            read_batch,
            point_reads: 100_000,
            point_reads_found: 63_000,
            device_reads: Some(50_000),
            process_bytes_read: Some(200_000_000),
            blocks_read: Some(90_000),
            index_blocks_read: Some(0),
            ..PhaseResult::default()
        };
        let c = Comparison {
            runs: vec![RunResult {
                label: "leveled".into(),
                phases: vec![
                    phase("readrandom", 1, 1),
                    phase("multireadrandom", 1, 32),
                    PhaseResult {
                        name: "fillrandom".into(),
                        ..PhaseResult::default()
                    },
                ],
                ..RunResult::default()
            }],
            device_probe: Some(probe),
            ..Comparison::default()
        };
        let rows = read_rows(&c);
        assert_eq!(rows.len(), 2, "the fill read nothing: {rows:?}");
        // 5,000 reads/s: 50% of QD1's 10,000, 5% of QD32's 100,000.
        assert_eq!(
            rows[0].1,
            [
                "readrandom",
                "10,000",
                "63.0",
                "5,000",
                "0.50",
                "50.0",
                "0.90",
                "0.00",
                "-",
                "20.0",
                "1"
            ]
        );
        assert_eq!(rows[1].1[5], "5.0");
        assert_eq!(rows[1].1[10], "32");
        let text = render_reads(&c);
        assert!(text.contains("multireadrandom"), "{text}");
        assert!(render_reads(&Comparison::default()).is_empty());
    }
}
