//! A workload like a recorded one, for the simulator: the operation mix, sizes and skew of a
//! window (or of a database's lifetime), over a tree as large as the live one, scaled down to a
//! size that simulates in a fraction of a second.

use crate::estimate::OperationMix;
use strata_policy::autopilot::WorkloadWindow;
use strata_workload::{InsertOrder, KeyDist, Mix, PresetParams, WorkloadSpec};

/// The skew estimate above which a workload is simulated as zipfian (the fraction of a flush
/// made of keys the flush before also held).
pub const ZIPFIAN_ABOVE: f64 = 0.3;

/// The key-range overlap of consecutive flushes below which a workload's writes are simulated
/// as nearly sorted inserts, new keys after the old ones.
pub const ASCENDING_BELOW: f64 = 0.5;

/// A workload to simulate, with the tree it runs on.
#[derive(Clone, Debug)]
pub struct WorkloadShape {
    /// Load the live keys, then the window's operations.
    pub spec: WorkloadSpec,
    /// Its operation mix.
    pub mix: OperationMix,
    /// Key bytes.
    pub key_size: u64,
    /// Value bytes.
    pub value_size: u64,
    /// Write buffer bytes, scaled like the data.
    pub buffer_size: u64,
    /// Simulated data over real data (1: not scaled down).
    pub scale: f64,
    /// Keys loaded.
    pub entries: u64,
}

impl WorkloadShape {
    /// Bytes of the simulated data.
    pub fn data_bytes(&self) -> u64 {
        self.entries * (self.key_size + self.value_size)
    }
}

/// The workload of `window`, with `key_size` and `value_size` bytes per entry, on a tree of
/// `live_bytes` under a `write_buffer_size` buffer: at most `max_entries` loaded and
/// `max_ops` operations, the buffer scaled down with the data.
pub fn workload_like(
    window: &WorkloadWindow,
    (key_size, value_size): (u64, u64),
    live_bytes: u64,
    write_buffer_size: u64,
    (max_entries, max_ops): (u64, u64),
) -> Result<WorkloadShape, String> {
    let entry = (key_size + value_size).max(1);
    let live_keys = (live_bytes / entry).max(1000);
    let entries = live_keys.min(max_entries);
    let scale = entries as f64 / live_keys as f64;
    // At least 64 KiB: a buffer of a few entries makes trees of nothing but tiny tables.
    let buffer_size = ((write_buffer_size as f64 * scale) as u64).max(64 << 10);
    let ops = window.operations().clamp(1000, max_ops);
    let params = PresetParams {
        entries,
        ops,
        key_size: key_size as usize,
        value_size: value_size as usize,
        ..PresetParams::default()
    };
    let mut spec = WorkloadSpec::preset("updaterandom", &params)
        .map_err(|e| format!("building the workload: {e}"))?;
    spec.name = "like the last window".to_string();
    let total = window.operations().max(1) as f64;
    let scan_length = window.scan_length.round().max(1.0);
    if let Some(run) = spec.phases.last_mut() {
        run.mix = Mix {
            update: window.puts as f64 / total,
            delete: window.deletes as f64 / total,
            read: window.point_reads as f64 / total,
            scan: window.scans as f64 / total,
            ..Mix::default()
        };
        run.scan_length = scan_length as usize;
        if window.skew.is_some_and(|a| a > ZIPFIAN_ABOVE) {
            run.keys = KeyDist::Zipfian { theta: 0.99 };
        }
        if let Some(overlap) = window.range_overlap.filter(|&o| o < ASCENDING_BELOW) {
            // Flushes follow one another along the key space: new keys, in nearly ascending
            // order, displaced by about the share of a buffer's keys the overlap says.
            let buffer_entries = buffer_size / (key_size + value_size).max(1);
            let order = InsertOrder::NearlySorted {
                window: ((overlap * buffer_entries as f64) as u64).max(1),
            };
            run.mix.insert = run.mix.update;
            run.mix.update = 0.0;
            // The tree loaded the same way: the run's keys follow the loaded ones.
            for phase in &mut spec.phases {
                phase.inserts = order.clone();
            }
        }
    }
    Ok(WorkloadShape {
        spec,
        mix: OperationMix {
            writes: (window.puts + window.deletes) as f64 / total,
            reads: window.point_reads as f64 / total,
            scans: window.scans as f64 / total,
            scan_length,
        },
        key_size,
        value_size,
        buffer_size,
        scale,
        entries,
    })
}
