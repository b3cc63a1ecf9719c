//! Event listeners: callbacks after every flush and compaction (RocksDB's `EventListener`).

use std::time::Instant;
use strata_exec::job_log::JobRecord;
pub use strata_exec::JobKind;
use strata_policy::Priority;

/// A completed flush or compaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletedJob {
    /// Flush or compaction.
    pub kind: JobKind,
    /// Flushes completed before this job was picked (for a flush, before it ran).
    pub flushes_before: u64,
    /// Levels the inputs came from (ascending; empty for a flush that writes a new run).
    pub input_levels: Vec<usize>,
    /// Input tables (for a flush, the tables it merged with).
    pub input_tables: usize,
    /// Level written to, if any.
    pub output_level: Option<usize>,
    /// Tables written (for a move, re-linked).
    pub output_tables: usize,
    /// Bytes of table files written.
    pub bytes_written: u64,
    /// Bytes of table files read.
    pub bytes_read: u64,
    /// The policy's reason.
    pub reason: String,
    /// The plan's priority (a flush's is normal).
    pub priority: Priority,
    /// When the job was picked (for a plan that writes nothing, when it was installed).
    pub started: Instant,
    /// When its result was installed.
    pub finished: Instant,
}

impl CompletedJob {
    /// The job as a row of a job log ([`strata_exec::job_log`]).
    pub fn record(&self) -> JobRecord {
        JobRecord {
            flushes_before: self.flushes_before,
            kind: self.kind.as_str(),
            input_levels: self.input_levels.clone(),
            input_tables: self.input_tables,
            output_level: self.output_level,
            output_tables: self.output_tables,
            bytes_read: Some(self.bytes_read),
            bytes_written: self.bytes_written,
            seconds: self
                .finished
                .saturating_duration_since(self.started)
                .as_secs_f64(),
            reason: self.reason.clone(),
        }
    }
}

/// Receives notifications from background work. Callbacks run on the thread that did the work,
/// right after the result is installed and while the engine's state lock is held: keep them
/// short, and do not call back into the database from them (that would deadlock).
pub trait EventListener: Send + Sync {
    /// A flush or compaction was installed.
    fn on_job_completed(&self, job: &CompletedJob);
}
