//! Strata's storage engine: an embedded, durable, concurrent LSM-tree key-value store that runs
//! any compaction policy through the same [`strata_policy::CompactionPolicy`] interface and
//! [`strata_meta::Version`] model as the simulator.
//!
//! ```
//! use strata_engine::{Db, Options};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::new())?;
//! db.put("hello", "world")?;
//! assert_eq!(db.get("hello")?.as_deref(), Some(&b"world"[..]));
//! db.close()?;
//! # Ok::<(), strata_engine::Error>(())
//! ```
//!
//! # Failures
//!
//! Every I/O error is returned to the caller of the operation that hit it. An error the
//! database cannot recover from in place (a failed flush or compaction, or a failed write to the
//! WAL or the manifest) also makes it read-only: later writes, flushes and compactions fail with
//! [`Error::ReadOnly`] naming the first error, reads keep working, and reopening recovers. A
//! write with `sync = true` returns `Ok` only once its WAL record is synced; a write that failed
//! is never readable, and after a reopen it is there entirely or not at all. Damaged files are
//! reported as [`Error::Corruption`] naming the file and the offset of the damage, except a torn
//! WAL tail (what a crash during an append leaves), which [`RecoveryMode`] decides about.
//! [`fs::FaultFs`] injects I/O errors to test all of this.

pub mod batch;
pub mod clock;
pub mod compaction_filter;
mod db;
pub mod error;
mod events;
pub mod filename;
pub mod fs;
mod info_log;
pub mod inspect;
mod io_pool;
pub mod iter;
pub mod key;
mod key_index;
pub mod keyspace;
mod listener;
pub mod log;
pub mod manifest;
pub mod memtable;
mod merge;
pub mod merge_operator;
mod metrics;
mod options;
mod rate_limiter;
mod row_cache;
mod skiplist;
pub mod stats;
mod super_version;
mod sys;
pub mod table;
mod table_cache;
mod ttl;
mod user_iter;
// Public (but hidden) so that the `wal_reader` fuzz target in `fuzz/` drives the chain rule.
#[doc(hidden)]
pub mod wal_chain;
mod write_controller;
mod write_queue;
pub mod write_timing;

pub use batch::{WriteBatch, MAX_KEY_SIZE, MAX_VALUE_SIZE};
pub use clock::{Clock, ManualClock, SystemClock};
pub use compaction_filter::{CompactionFilter, FilterDecision};
pub use db::{CheckpointSummary, Db, Keyspace, ReadOptions, Snapshot};
pub use error::{Error, Result};
pub use keyspace::{KeyspaceId, KeyspaceOptions};
pub use listener::{
    CompletedJob, EventListener, JobKind, Opened, PolicySwitch, Recovery, StallCause,
    StallCondition, StartedJob, WriteStall,
};
pub use log::RecoveryMode;
pub use merge_operator::{AppendOperator, MergeOperator, U64AddOperator};
pub use metrics::{LevelMetrics, Metrics};
pub use options::{IndexPinning, Options, WriteOptions};
pub use table::Compression;
pub use user_iter::DbIterator;
pub use wal_chain::RecoveryStop;
