//! Compaction filters (RocksDB's `CompactionFilter`): user code that decides, entry by entry,
//! what a compaction keeps. It runs inside every merge a policy chose (and manual compactions),
//! never in a flush, and only on what no snapshot can see: the newest version of a key, when
//! that version is newer than every live snapshot. So a snapshot reads the same before and after
//! any compaction, filter or not.
//!
//! A removed entry becomes a tombstone where something older may still hold its key (an older
//! version a snapshot keeps in this merge, or a table below the output), as RocksDB turns a
//! removal into a deletion marker, so an older value never shows through; where nothing older
//! can, it is dropped outright.

use std::fmt::Debug;

/// What a [`CompactionFilter`] decides for one entry. RocksDB: `CompactionFilter::Decision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Remove the entry: the key reads as deleted from then on.
    Remove,
    /// Keep the key with this value instead.
    ChangeValue(Vec<u8>),
}

/// Decides what compactions keep ([`crate::Options::with_compaction_filter`]). It is called
/// from background threads, several at once, so it must be `Send + Sync`, and for the same
/// entry it should decide the same way every time: when it runs depends on the policy's
/// choices, so a reader sees an entry filtered only after some compaction reached it.
pub trait CompactionFilter: Send + Sync + Debug {
    /// A name for logs.
    fn name(&self) -> &str;

    /// The decision for the put of `value` under `key`, being written into `level`. Deletions
    /// are not shown to the filter.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision;
}
