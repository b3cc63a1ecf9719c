//! What a reader holds: the memtables and the version of one moment.

use crate::key_index::KeyIndexView;
use crate::memtable::Memtable;
use std::sync::Arc;
use strata_meta::{RunIntervals, Version};

/// Everything a read needs to see the tree as of one moment (RocksDB's super-version): the active
/// memtable, the frozen ones still being flushed, and the version. Readers clone the `Arc` of the
/// current one and keep it, so the memtables and table files they read stay alive.
pub(crate) struct SuperVersion {
    /// The memtable writes go into.
    pub memtable: Arc<Memtable>,
    /// Frozen memtables waiting to be flushed, newest first.
    pub frozen: Vec<Arc<Memtable>>,
    /// The tree's shape.
    pub version: Arc<Version>,
    /// The key index over the version's indexed level, if the database keeps one.
    pub key_index: Option<KeyIndexView>,
    /// An interval index over each level's runs (built once per version).
    pub intervals: Arc<Vec<RunIntervals>>,
}

/// The interval indexes of `version`'s levels.
pub(crate) fn run_intervals(version: &Version) -> Arc<Vec<RunIntervals>> {
    Arc::new(version.levels().iter().map(RunIntervals::new).collect())
}
