//! What a policy may know besides the version: leases, workload statistics, the buffer, time.

use crate::error::PolicyError;
use crate::plan::Plan;
use std::collections::HashSet;
use std::ops::Bound;
use strata_meta::{Bytes, KeyRange, TableId, Version};

/// Tables and key ranges held by running jobs. Policies read leases to avoid conflicting picks;
/// executors take them when a job starts and release them when it ends or fails.
#[derive(Clone, Debug, Default)]
pub struct Leases {
    tables: HashSet<TableId>,
    writes: Vec<(usize, KeyRange)>,
}

impl Leases {
    /// No leases.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `table` is an input of a running job.
    pub fn is_table_leased(&self, table: TableId) -> bool {
        self.tables.contains(&table)
    }

    /// Whether any of `tables` is leased.
    pub fn any_leased<'a>(&self, mut tables: impl Iterator<Item = &'a TableId>) -> bool {
        tables.any(|t| self.tables.contains(t))
    }

    /// Whether a running job writes output into `level` over a range overlapping `range`.
    pub fn is_range_being_written(&self, level: usize, range: &KeyRange) -> bool {
        self.writes
            .iter()
            .any(|(l, r)| *l == level && r.overlaps(range))
    }

    /// Whether a running job writes output into `level` at all.
    pub fn is_level_being_written(&self, level: usize) -> bool {
        self.writes.iter().any(|(l, _)| *l == level)
    }

    /// Whether nothing is leased.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty() && self.writes.is_empty()
    }

    /// Number of leased tables.
    pub fn leased_table_count(&self) -> usize {
        self.tables.len()
    }

    /// Takes leases for `plan`'s inputs and output range; fails without taking anything if any
    /// input is already leased.
    pub fn acquire(&mut self, plan: &Plan, version: &Version) -> Result<(), PolicyError> {
        if let Some(id) = plan.input_tables().find(|t| self.tables.contains(t)) {
            return Err(PolicyError::Leased(id));
        }
        self.tables.extend(plan.input_tables());
        if let (Some(output), Some(range)) = (&plan.output, plan.input_range(version)) {
            self.writes.push((output.level, range));
        }
        Ok(())
    }

    /// Releases what [`Leases::acquire`] took for `plan` (with the same `version`).
    pub fn release(&mut self, plan: &Plan, version: &Version) {
        for t in plan.input_tables() {
            self.tables.remove(&t);
        }
        if let (Some(output), Some(range)) = (&plan.output, plan.input_range(version)) {
            if let Some(i) = self
                .writes
                .iter()
                .position(|(l, r)| *l == output.level && *r == range)
            {
                self.writes.swap_remove(i);
            }
        }
    }
}

/// Counts and estimates of the workload so far, maintained by the engine or simulator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadStats {
    /// Put operations (inserts and updates).
    pub puts: u64,
    /// Delete operations.
    pub deletes: u64,
    /// Point lookups.
    pub point_reads: u64,
    /// Range scans that read fewer entries than the executor's long-scan threshold.
    pub short_scans: u64,
    /// Range scans that read at least the long-scan threshold of entries, where the number of
    /// runs matters (EcoTune's long scans). The engine counts a scan when its iterator is dropped.
    pub long_scans: u64,
    /// User key+value bytes ingested.
    pub bytes_ingested: u64,
    /// Buffer flushes so far.
    pub flushes: u64,
    /// Estimated skew: the fraction α of a flush made of hot keys (Vertiorizon §5.3), if known.
    pub skew: Option<f64>,
    /// Time between the last two flushes, in nanoseconds, if known.
    pub flush_interval_nanos: Option<u64>,
    /// Measured time to rewrite one MiB during compaction, in nanoseconds, if known.
    pub rewrite_nanos_per_mib: Option<u64>,
}

/// The buffer about to be flushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSummary {
    /// Smallest key in the buffer.
    pub smallest: Bytes,
    /// Largest key in the buffer.
    pub largest: Bytes,
    /// Entries written into the buffer (puts and tombstones), shadowed versions included.
    pub entries: u64,
    /// User key+value bytes written into the buffer, shadowed versions included.
    pub bytes: u64,
}

impl BufferSummary {
    /// The buffer's key range.
    pub fn key_range(&self) -> KeyRange {
        KeyRange::new(self.smallest.clone(), self.largest.clone())
    }
}

/// Everything a policy sees besides the version. Policies get no clock or randomness of their
/// own: time arrives here, as data, so a decision can be replayed exactly.
#[derive(Clone, Copy, Debug)]
pub struct PickContext<'a> {
    /// Leases of running jobs.
    pub leases: &'a Leases,
    /// Workload statistics.
    pub stats: &'a WorkloadStats,
    /// The buffer being flushed (set for [`crate::CompactionPolicy::plan_flush`] only).
    pub buffer: Option<&'a BufferSummary>,
    /// Current time in nanoseconds on the executor's clock (real or simulated).
    pub now_nanos: u64,
}

impl<'a> PickContext<'a> {
    /// A context with the given leases and statistics, no buffer, at time 0.
    pub fn new(leases: &'a Leases, stats: &'a WorkloadStats) -> Self {
        PickContext {
            leases,
            stats,
            buffer: None,
            now_nanos: 0,
        }
    }

    /// The same context describing `buffer`.
    pub fn with_buffer(self, buffer: &'a BufferSummary) -> Self {
        PickContext {
            buffer: Some(buffer),
            ..self
        }
    }
}

/// The keys of a manual compaction (RocksDB's `CompactRange` begin and end): each end is
/// inclusive, exclusive or open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManualRange {
    /// Where the range starts.
    pub start: Bound<Bytes>,
    /// Where the range ends.
    pub end: Bound<Bytes>,
}

impl ManualRange {
    /// Every key.
    pub fn all() -> Self {
        ManualRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Whether a table spanning `[smallest, largest]` holds keys the range may contain.
    pub fn touches(&self, smallest: &[u8], largest: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => largest >= s.as_ref(),
            Bound::Excluded(s) => largest > s.as_ref(),
            Bound::Unbounded => true,
        };
        let before_end = match &self.end {
            Bound::Included(e) => smallest <= e.as_ref(),
            Bound::Excluded(e) => smallest < e.as_ref(),
            Bound::Unbounded => true,
        };
        after_start && before_end
    }
}
