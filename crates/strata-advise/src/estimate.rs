//! Time per operation from a simulation's counts and a calibration: the throughput model of
//! `strata advise` and of the autopilot's advisor.
//!
//! The simulator counts what a configuration makes the engine do (entries flushed and merged,
//! tables written, entries held by window flushes, runs a lookup or a scan passes, I/Os per
//! lookup); the calibration says what each costs on this machine. The writer's own work (the
//! put, lookups, scans) is *foreground*; flushes and merges are *background*, run by other
//! threads on the other cores: they cost the writer its share of the machine
//! (background ÷ cores), and throttle it outright when they need more than the other cores
//! give (background ÷ (cores − 1) above the foreground).

use crate::calibration::Calibration;
use serde::Serialize;
use strata_sim::SimReport;

/// The operations of a workload, as shares of one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct OperationMix {
    /// Puts and deletes (a read-modify-write counts here and in `reads`).
    pub writes: f64,
    /// Point lookups.
    pub reads: f64,
    /// Range scans.
    pub scans: f64,
    /// Entries a scan returns, on average.
    pub scan_length: f64,
}

/// Where reads are served from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Regime {
    /// Everything in memory: a block read is part of the lookup's CPU cost.
    Cached,
    /// This share of block reads is served from memory, the rest from the device (whose
    /// costs the calibration must have).
    OutOfCache {
        /// Share of block reads served from memory, 0 to 1.
        memory_share: f64,
    },
}

/// A configuration's estimated time per operation, and its parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Estimate {
    /// Nanoseconds per operation.
    pub ns_per_op: f64,
    /// The writer's own nanoseconds per operation.
    pub foreground_ns: f64,
    /// Flush and merge nanoseconds per operation, on whichever core runs them.
    pub background_ns: f64,
}

impl Estimate {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        1e9 / self.ns_per_op.max(1e-9)
    }
}

/// Bytes of a data block (the engine's default block size), for the blocks a scan reads.
const BLOCK_BYTES: f64 = 4096.0;

/// Device reads per lookup and per scan out of cache, where `miss` of the blocks memory does not
/// hold at random: the simulated block cache's misses where it ran on the workload's reads
/// (`SimReport::read_cache`), which see where the workload's keys lie in the tree; otherwise
/// `miss` of every block. A lookup's reads for its filters' false positives fall on blocks at
/// random either way.
fn device_reads(report: &SimReport, miss: f64, scan_blocks: f64) -> (f64, f64) {
    let false_positives = (report.avg_lookup_cost - 1.0).max(0.0);
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    match &report.read_cache {
        Some(c) if c.lookups > 0 || c.scans > 0 => (
            ratio(c.lookup_blocks - c.lookup_block_hits, c.lookups) + false_positives * miss,
            ratio(c.scan_blocks - c.scan_block_hits, c.scans),
        ),
        _ => (report.avg_lookup_cost.max(1.0) * miss, scan_blocks * miss),
    }
}

/// The share of the data blocks the workload's lookups and scans read that the simulated block
/// cache held (`SimReport::read_cache`), when it ran and read any.
pub fn simulated_memory_share(report: &SimReport) -> Option<f64> {
    let c = report.read_cache.as_ref()?;
    let blocks = c.lookup_blocks + c.scan_blocks;
    (blocks > 0).then(|| (c.lookup_block_hits + c.scan_block_hits) as f64 / blocks as f64)
}

/// The estimate for the configuration `report` simulated, on a workload of `mix` whose entries
/// are `entry_bytes` each. The write costs come from the workload's last phase (the one
/// measured, as `strata bench` reports it), or from the whole run without phases; the read
/// costs from the tree over the whole run. `scale` is the simulated data over the real data:
/// a tree simulated scaled down, buffer included, writes `1 / scale` times as many tables per
/// byte as the real one, so its tables count `scale` each (1 when not scaled).
pub fn estimate(
    report: &SimReport,
    mix: &OperationMix,
    entry_bytes: u64,
    calibration: &Calibration,
    regime: Regime,
    scale: f64,
) -> Estimate {
    let c = &calibration.cpu;
    let entry_bytes = entry_bytes.max(1) as f64;
    // Per user byte: bytes flushes and compactions read and wrote, tables written per byte,
    // bytes window flushes held back.
    let last = report.phases.iter().rev().find(|p| p.user_bytes > 0);
    let (user, written, read, tables, held) = match last {
        Some(p) => (
            p.user_bytes,
            p.bytes_written,
            p.bytes_read,
            p.tables_written,
            p.window_held_bytes,
        ),
        None => (
            report.user_bytes,
            report.flush_bytes + report.compaction_bytes_written,
            report.compaction_bytes_read,
            report.tables_written,
            report.window_held_bytes,
        ),
    };
    let per_user = |x: u64| x as f64 / user.max(1) as f64;
    // Each entry written is flushed once; what merges read they also rewrite.
    let mut background_per_write = c.flush_ns_per_entry
        + per_user(read) * c.merge_ns_per_entry
        + per_user(tables) * scale * entry_bytes * c.table_ns
        + per_user(held) * c.merge_ns_per_entry;
    // The runs whose key ranges hold a key: those a lookup consults and a scan merges.
    let runs = report.avg_runs_probed.max(1.0);
    let mut lookup = c.lookup_ns + (runs - 1.0) * c.run_probe_ns;
    let scan_blocks = runs + mix.scan_length * entry_bytes / BLOCK_BYTES;
    let mut scan = runs * c.seek_ns_per_run
        + mix.scan_length * (c.scan_ns_per_entry + (runs - 1.0) * c.scan_ns_per_entry_per_run);
    if let (Regime::OutOfCache { memory_share }, Some(d)) = (regime, &calibration.device) {
        let miss = (1.0 - memory_share).clamp(0.0, 1.0);
        let device_read_ns = d.read_latency_us * 1e3;
        let (lookup_reads, scan_reads) = device_reads(report, miss, scan_blocks);
        lookup += lookup_reads * device_read_ns;
        scan += scan_reads * device_read_ns;
        background_per_write += per_user(written) * entry_bytes / d.write_bytes_per_sec * 1e9
            + per_user(read) * entry_bytes / d.read_bytes_per_sec * 1e9;
    }
    let foreground_ns = mix.writes * c.write_ns + mix.reads * lookup + mix.scans * scan;
    let background_ns = mix.writes * background_per_write;
    let cores = calibration.cores.max(1) as f64;
    let shared = foreground_ns + background_ns / cores;
    let throttled = if cores > 1.0 {
        background_ns / (cores - 1.0)
    } else {
        foreground_ns + background_ns
    };
    // A simulation in time (`strata_sim::Timing::Timed`) says what share of the time writers
    // waited for compactions; the work above was done in the rest. (Advise and the advisor
    // simulate synchronously: paced by the calibration, the stalls of a scaled-down tree
    // swung estimates by 5x, `docs/autopilot.md`.)
    let stalled = if report.simulated_seconds > 0.0 {
        (report.stall_seconds / report.simulated_seconds).clamp(0.0, 0.9)
    } else {
        0.0
    };
    Estimate {
        ns_per_op: (shared.max(throttled) / (1.0 - stalled)).max(1e-3),
        foreground_ns,
        background_ns,
    }
}
