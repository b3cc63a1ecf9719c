//! Workload phases: what happens between two phase starts is reported apart
//! ([`crate::SimReport::phases`]).

use super::Simulator;
use crate::report::PhaseReport;

/// Where the current workload phase started, and its peak space so far.
pub(super) struct PhaseMark {
    name: String,
    write_ops: u64,
    flushes: u64,
    user_bytes: u64,
    bytes_written: u64,
    bytes_read: u64,
    window_held_bytes: u64,
    tables_written: u64,
    bytes_written_per_level: Vec<u64>,
    blocks_written_per_level: Vec<u64>,
    blocks_preserved_per_level: Vec<u64>,
    pub(super) peak_space_bytes: u64,
}

impl Simulator {
    /// Starts workload phase `name`: what follows is reported apart in [`SimReport::phases`]
    /// (the phase before it ends here). [`Simulator::run`] calls it at every phase of the
    /// workload; callers feeding operations themselves may.
    ///
    /// [`SimReport::phases`]: crate::SimReport::phases
    pub fn begin_phase(&mut self, name: &str) {
        self.end_phase();
        self.restart_read_counts();
        self.phase = Some(PhaseMark {
            name: name.to_string(),
            write_ops: self.stats.puts + self.stats.deletes,
            flushes: self.stats.flushes,
            user_bytes: self.stats.bytes_ingested,
            bytes_written: self.metrics.flush_bytes + self.metrics.compaction_bytes,
            bytes_read: self.metrics.flush_read_bytes + self.metrics.compaction_read_bytes,
            window_held_bytes: self.metrics.window_held_bytes,
            tables_written: self.metrics.tables_written,
            bytes_written_per_level: self.metrics.bytes_written_per_level.clone(),
            blocks_written_per_level: self.metrics.blocks_written_per_level.clone(),
            blocks_preserved_per_level: self.metrics.blocks_preserved_per_level.clone(),
            peak_space_bytes: self.version.disk_bytes(),
        });
    }

    pub(super) fn end_phase(&mut self) {
        let Some(mark) = self.phase.take() else {
            return;
        };
        let user_bytes = self.stats.bytes_ingested - mark.user_bytes;
        let bytes_written =
            self.metrics.flush_bytes + self.metrics.compaction_bytes - mark.bytes_written;
        let live = self.live_entries * (self.cfg.key_size + self.cfg.value_size);
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let since = |now: &[u64], then: &[u64]| -> Vec<u64> {
            now.iter()
                .enumerate()
                .map(|(l, n)| n - then.get(l).copied().unwrap_or(0))
                .collect()
        };
        let bytes_written_per_level = since(
            &self.metrics.bytes_written_per_level,
            &mark.bytes_written_per_level,
        );
        let blocks_written_per_level = since(
            &self.metrics.blocks_written_per_level,
            &mark.blocks_written_per_level,
        );
        let blocks_preserved_per_level = since(
            &self.metrics.blocks_preserved_per_level,
            &mark.blocks_preserved_per_level,
        );
        self.phases.push(PhaseReport {
            name: mark.name,
            write_ops: self.stats.puts + self.stats.deletes - mark.write_ops,
            flushes_before: mark.flushes,
            user_bytes,
            bytes_written,
            bytes_read: self.metrics.flush_read_bytes + self.metrics.compaction_read_bytes
                - mark.bytes_read,
            window_held_bytes: self.metrics.window_held_bytes - mark.window_held_bytes,
            tables_written: self.metrics.tables_written - mark.tables_written,
            bytes_written_per_level,
            blocks_written_per_level,
            blocks_preserved_per_level,
            write_amp: ratio(bytes_written, user_bytes),
            peak_space_bytes: mark.peak_space_bytes,
            peak_space_over_live: ratio(mark.peak_space_bytes, live),
        });
    }
}
