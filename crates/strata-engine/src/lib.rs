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

pub mod batch;
mod compaction;
mod db;
pub mod error;
pub mod fs;
pub mod iter;
pub mod key;
mod listener;
pub mod log;
pub mod manifest;
pub mod memtable;
mod metrics;
mod options;
pub mod stats;
pub mod table;
mod table_cache;
mod user_iter;

pub use batch::{WriteBatch, MAX_KEY_SIZE, MAX_VALUE_SIZE};
pub use db::{Db, ReadOptions, Snapshot};
pub use error::{Error, Result};
pub use listener::{CompletedJob, EventListener, JobKind};
pub use log::RecoveryMode;
pub use metrics::{LevelMetrics, Metrics};
pub use options::{Options, WriteOptions};
pub use table::Compression;
pub use user_iter::DbIterator;
