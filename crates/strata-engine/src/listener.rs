//! Event listeners: callbacks on what the engine does in the background and at open (RocksDB's
//! `EventListener`). Every event also goes to `tracing` (target `strata`) and, where
//! [`crate::Options::with_info_log`] asks for it, to the `LOG` file in the database directory;
//! each event's `Display` is the line those carry.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use strata_exec::job_log::JobRecord;
pub use strata_exec::JobKind;
use strata_policy::Priority;

/// A flush or compaction that was picked and is about to run (a plan that writes nothing, a
/// move or a drop, is reported started and completed at once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartedJob {
    /// The job's number, unique in this process's run of the database; its
    /// [`CompletedJob::job`] is the same.
    pub job: u64,
    /// The keyspace the job works on (`"default"` for the database's own).
    pub keyspace: String,
    /// Flush or compaction.
    pub kind: JobKind,
    /// Levels the inputs come from (ascending; empty for a flush that writes a new run).
    pub input_levels: Vec<usize>,
    /// Input tables (for a flush, the tables it merges with).
    pub input_tables: usize,
    /// Bytes of the input tables, plus for a flush what the memtables hold.
    pub input_bytes: u64,
    /// Level written to, if any.
    pub output_level: Option<usize>,
    /// The policy's reason.
    pub reason: String,
    /// The plan's priority (a flush's is normal).
    pub priority: Priority,
}

/// A completed flush or compaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletedJob {
    /// The job's number ([`StartedJob::job`]).
    pub job: u64,
    /// The keyspace the job worked on ([`StartedJob::keyspace`]).
    pub keyspace: String,
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
            seconds: self.duration().as_secs_f64(),
            reason: self.reason.clone(),
        }
    }

    /// From pick to install.
    pub fn duration(&self) -> Duration {
        self.finished.saturating_duration_since(self.started)
    }
}

/// What the WAL replay of an open found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// WAL files replayed.
    pub wals: usize,
    /// Bytes of those files.
    pub wal_bytes: u64,
    /// Entries (puts and deletes) replayed into the memtable.
    pub entries: u64,
    /// The last sequence number after the replay.
    pub last_sequence: u64,
    /// Where point-in-time recovery stopped, if it did.
    pub stopped: Option<crate::RecoveryStop>,
    /// How long reading and replaying took.
    pub duration: Duration,
}

/// A database that finished opening.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// Its directory.
    pub path: PathBuf,
    /// Whether it was opened read-only.
    pub read_only: bool,
    /// The default keyspace's policy, its specification as the manifest records it.
    pub policy: String,
    /// Keyspaces, the default one included.
    pub keyspaces: usize,
    /// Live tables.
    pub tables: usize,
    /// Bytes of live tables.
    pub table_bytes: u64,
    /// Levels holding data (in the keyspace with the most).
    pub levels: usize,
    /// How long the open took, recovery included.
    pub duration: Duration,
}

/// A policy switch recorded in the manifest ([`crate::Db::set_policy`], or an open with
/// another policy than the one recorded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySwitch {
    /// The policy recorded before (`None` for a database that recorded none).
    pub from: Option<String>,
    /// The policy's specification now recorded.
    pub to: String,
    /// Whether the switch happened at open (a policy given in the options).
    pub at_open: bool,
}

/// Why writers are slowed down or stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallCause {
    /// Level 0 holds this many runs: at least `level0_slowdown_writes_trigger` (delayed) or
    /// `level0_stop_writes_trigger` (stopped).
    Level0Runs(usize),
    /// Frozen memtables waiting for a flush hold this many bytes, `max_write_buffer_number − 1`
    /// buffers or more (or they number `Options::frozen_memtable_limit`).
    MemtablesWaiting(u64),
    /// All buffered data together, this many bytes, reached `write_buffer_size ×
    /// max_write_buffer_number`.
    BufferLimit(u64),
    /// Memtables a window flush keeps hold this many bytes, over the write buffer size.
    HeldBuffer(u64),
}

impl StallCause {
    fn same_kind(self, other: StallCause) -> bool {
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
    }
}

impl fmt::Display for StallCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StallCause::Level0Runs(n) => write!(f, "{n} level-0 runs"),
            StallCause::MemtablesWaiting(b) => write!(f, "{b} bytes of memtables waiting to flush"),
            StallCause::BufferLimit(b) => write!(f, "{b} bytes buffered, at the buffer limit"),
            StallCause::HeldBuffer(b) => write!(f, "{b} bytes held by a window flush"),
        }
    }
}

/// How writers are admitted (RocksDB's `WriteStallCondition`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StallCondition {
    /// Writes pass as they come.
    #[default]
    Normal,
    /// Writes pass at the delayed write rate.
    Delayed(StallCause),
    /// Writes wait until background work makes room.
    Stopped(StallCause),
}

impl StallCondition {
    /// Whether `other` is the same condition for the same kind of cause (counts aside): only
    /// a change of that is reported.
    pub(crate) fn same_as(self, other: StallCondition) -> bool {
        match (self, other) {
            (StallCondition::Normal, StallCondition::Normal) => true,
            (StallCondition::Delayed(a), StallCondition::Delayed(b))
            | (StallCondition::Stopped(a), StallCondition::Stopped(b)) => a.same_kind(b),
            _ => false,
        }
    }
}

impl fmt::Display for StallCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StallCondition::Normal => f.write_str("normal"),
            StallCondition::Delayed(c) => write!(f, "delayed ({c})"),
            StallCondition::Stopped(c) => write!(f, "stopped ({c})"),
        }
    }
}

/// A change of how writers are admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteStall {
    /// The condition now.
    pub condition: StallCondition,
    /// The condition before.
    pub previous: StallCondition,
    /// How long the previous condition lasted.
    pub previous_lasted: Duration,
}

/// Receives notifications from the engine. Every method has an empty default, so a listener
/// implements only what it needs. Callbacks run on the thread that did the work, most while
/// the engine's state lock is held: keep them short, and do not call back into the database
/// from them (that would deadlock).
pub trait EventListener: Send + Sync {
    /// The WAL replay of an open finished (read-write and read-only opens alike).
    fn on_recovery(&self, _recovery: &Recovery) {}
    /// The database finished opening.
    fn on_open(&self, _opened: &Opened) {}
    /// A flush or compaction was picked and its inputs leased.
    fn on_job_started(&self, _job: &StartedJob) {}
    /// A flush or compaction was installed.
    fn on_job_completed(&self, _job: &CompletedJob) {}
    /// Writers' admission changed (RocksDB: `OnStallConditionsChanged`).
    fn on_write_stall(&self, _stall: &WriteStall) {}
    /// Background work failed and the database turned read-only (reported once, for the
    /// first error).
    fn on_background_error(&self, _error: &crate::Error) {}
    /// The manifest recorded a policy switch.
    fn on_policy_switch(&self, _switch: &PolicySwitch) {}
}

fn levels(levels: &[usize]) -> String {
    let named: Vec<String> = levels.iter().map(|l| format!("L{l}")).collect();
    if named.is_empty() {
        "buffer".to_string()
    } else {
        named.join("+")
    }
}

/// How a line names a job: its number, and its keyspace unless that is the default one.
fn job_name(job: u64, keyspace: &str) -> String {
    if keyspace == crate::manifest::DEFAULT_KEYSPACE_NAME {
        format!("job {job}")
    } else {
        format!("keyspace {keyspace} job {job}")
    }
}

fn output(level: Option<usize>) -> String {
    level.map_or_else(|| "nothing".to_string(), |l| format!("L{l}"))
}

impl fmt::Display for StartedJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} started: {} tables ({} bytes) from {} to {}, priority {:?}: {}",
            job_name(self.job, &self.keyspace),
            self.kind.as_str(),
            self.input_tables,
            self.input_bytes,
            levels(&self.input_levels),
            output(self.output_level),
            self.priority,
            self.reason
        )
    }
}

impl fmt::Display for CompletedJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} finished in {:.3} s: read {} bytes, wrote {} bytes in {} tables to {}",
            job_name(self.job, &self.keyspace),
            self.kind.as_str(),
            self.duration().as_secs_f64(),
            self.bytes_read,
            self.bytes_written,
            self.output_tables,
            output(self.output_level)
        )
    }
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "recovery replayed {} entries from {} WALs ({} bytes) in {:.3} s, last sequence {}",
            self.entries,
            self.wals,
            self.wal_bytes,
            self.duration.as_secs_f64(),
            self.last_sequence
        )?;
        match &self.stopped {
            Some(stop) => write!(
                f,
                "; point-in-time recovery stopped at offset {} of {}: {}",
                stop.offset, stop.file, stop.reason
            ),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "opened {}{} in {:.3} s: policy {}, {} keyspaces, {} tables ({} bytes) in {} levels",
            self.path.display(),
            if self.read_only { " read-only" } else { "" },
            self.duration.as_secs_f64(),
            self.policy,
            self.keyspaces,
            self.tables,
            self.table_bytes,
            self.levels
        )
    }
}

impl fmt::Display for PolicySwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "policy switched from {} to {}{}",
            self.from.as_deref().unwrap_or("none recorded"),
            self.to,
            if self.at_open { " at open" } else { "" }
        )
    }
}

impl fmt::Display for WriteStall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "writes {} (were {} for {:.3} s)",
            self.condition,
            self.previous,
            self.previous_lasted.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_differ_by_kind_of_cause_not_by_count() {
        let stopped = |c| StallCondition::Stopped(c);
        assert!(stopped(StallCause::Level0Runs(36)).same_as(stopped(StallCause::Level0Runs(40))));
        assert!(!stopped(StallCause::Level0Runs(36)).same_as(stopped(StallCause::BufferLimit(1))));
        assert!(!stopped(StallCause::Level0Runs(36))
            .same_as(StallCondition::Delayed(StallCause::Level0Runs(36))));
        assert!(StallCondition::Normal.same_as(StallCondition::Normal));
    }

    #[test]
    fn lines_name_what_happened() {
        let stall = WriteStall {
            condition: StallCondition::Stopped(StallCause::Level0Runs(36)),
            previous: StallCondition::Delayed(StallCause::Level0Runs(20)),
            previous_lasted: Duration::from_millis(1500),
        };
        assert_eq!(
            stall.to_string(),
            "writes stopped (36 level-0 runs) (were delayed (20 level-0 runs) for 1.500 s)"
        );
        let switch = PolicySwitch {
            from: None,
            to: "tiered".to_string(),
            at_open: true,
        };
        assert_eq!(
            switch.to_string(),
            "policy switched from none recorded to tiered at open"
        );
    }
}
