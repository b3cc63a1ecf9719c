//! Strata's storage engine: an embedded, durable, concurrent LSM-tree key-value store that runs
//! any compaction policy through the same [`strata_policy::CompactionPolicy`] interface and
//! [`strata_meta::Version`] model as the simulator.

pub mod batch;
pub mod error;
pub mod fs;
pub mod iter;
pub mod key;
pub mod log;
pub mod memtable;
pub mod stats;
pub mod table;

pub use error::{Error, Result};
