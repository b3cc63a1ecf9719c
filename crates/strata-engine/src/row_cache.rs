//! The row cache ([`crate::Options::with_row_cache_capacity`], RocksDB's `row_cache`): what point
//! lookups found for a key in a table, kept by (table file number, user key), so that a key read
//! again skips the table's index, its data block and, out of cache, the device read. A data block
//! cached for one hot key holds about 4 KiB; a row holds the key and its value only, so the same
//! memory keeps many more hot keys (skewed reads out of cache are what it is for).
//!
//! Tables never change and file numbers are never reused, so a row never goes stale: a table
//! that leaves the tree leaves rows nobody asks for, which age out. A row is a table's *newest*
//! entry of its key (or the fact that the table holds none), so it answers a read at any
//! sequence number at or above that entry's; an older snapshot reads the table.

use std::hash::{Hash, Hasher};

use bytes::Bytes;
use quick_cache::sync::Cache;
use quick_cache::{Equivalent, Weighter};

use crate::key::{SeqNo, ValueKind};
use crate::stats::Statistics;

/// A table's newest entry of a key: (seq, kind, value), as [`crate::table::Table::get`] returns.
pub(crate) type Entry = (SeqNo, ValueKind, Bytes);

/// Bytes charged per row on top of its key and value: the boxed key, the `Bytes` and the
/// cache's own bookkeeping. Also keeps every weight above zero (quick_cache never evicts
/// zero-weight items).
const ROW_OVERHEAD: u64 = 96;

/// A typical row, which sizes the cache's shards and eviction history: a short key and a value
/// of about 100 bytes.
const TYPICAL_ROW: u64 = 256;

/// The cache's key: a table's file number and a user key, owned.
#[derive(PartialEq, Eq)]
struct RowKey {
    file: u64,
    key: Box<[u8]>,
}

/// A [`RowKey`] borrowed, so that a probe allocates nothing. Hashes as a [`RowKey`] does.
struct RowKeyRef<'k> {
    file: u64,
    key: &'k [u8],
}

impl Hash for RowKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        RowKeyRef {
            file: self.file,
            key: &self.key,
        }
        .hash(state);
    }
}

impl Hash for RowKeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.file);
        self.key.hash(state);
    }
}

impl Equivalent<RowKey> for RowKeyRef<'_> {
    fn equivalent(&self, owned: &RowKey) -> bool {
        self.file == owned.file && *self.key == *owned.key
    }
}

#[derive(Clone)]
struct RowWeighter;

impl Weighter<RowKey, Option<Entry>> for RowWeighter {
    fn weight(&self, key: &RowKey, row: &Option<Entry>) -> u64 {
        let value = row.as_ref().map_or(0, |(_, _, v)| v.len());
        (key.key.len() + value) as u64 + ROW_OVERHEAD
    }
}

/// Rows of tables, bounded in bytes (keys, values and a per-row overhead).
pub(crate) struct RowCache {
    rows: Cache<RowKey, Option<Entry>, RowWeighter>,
    capacity: u64,
}

impl RowCache {
    /// A cache of up to `capacity` bytes of rows.
    pub(crate) fn new(capacity: u64) -> Self {
        let estimated = usize::try_from(capacity / TYPICAL_ROW)
            .unwrap_or(usize::MAX)
            .max(1);
        RowCache {
            rows: Cache::with_weighter(estimated, capacity, RowWeighter),
            capacity,
        }
    }

    /// What table `file` holds of `user_key` for a read at `seq`, if the cache knows:
    /// `Some(None)` when the table holds no version of it, `Some(Some(entry))` when its newest
    /// entry is visible at `seq`. `None` when the cache cannot say (no row, or a row newer than
    /// the read). Counts a hit or a miss in `stats`.
    pub(crate) fn answer(
        &self,
        file: u64,
        user_key: &[u8],
        seq: SeqNo,
        stats: &Statistics,
    ) -> Option<Option<Entry>> {
        let answer = match self.rows.get(&RowKeyRef {
            file,
            key: user_key,
        }) {
            Some(None) => Some(None),
            Some(Some(entry)) if entry.0 <= seq => Some(Some(entry)),
            _ => None,
        };
        let counter = if answer.is_some() {
            &stats.row_cache_hits
        } else {
            &stats.row_cache_misses
        };
        Statistics::add(counter, 1);
        answer
    }

    /// Keeps what a lookup at `seq` found of `user_key` in table `file`, whose entries are at
    /// most `table_largest_seq`. Only a lookup that saw every entry of the table (`seq` at or
    /// above its largest) found the table's newest entry, so only those are kept. The value is
    /// copied: the one found shares its whole data block's buffer.
    pub(crate) fn remember(
        &self,
        file: u64,
        user_key: &[u8],
        seq: SeqNo,
        table_largest_seq: SeqNo,
        found: &Option<Entry>,
    ) {
        if seq < table_largest_seq {
            return;
        }
        let row = found
            .as_ref()
            .map(|(s, kind, v)| (*s, *kind, Bytes::copy_from_slice(v)));
        self.rows.insert(
            RowKey {
                file,
                key: user_key.into(),
            },
            row,
        );
    }

    /// The byte budget.
    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes the rows held now are charged.
    pub(crate) fn used_bytes(&self) -> u64 {
        self.rows.weight()
    }

    /// Rows held now.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: SeqNo, value: &str) -> Option<Entry> {
        Some((
            seq,
            ValueKind::Put,
            Bytes::copy_from_slice(value.as_bytes()),
        ))
    }

    #[test]
    fn a_row_answers_reads_at_or_above_its_entry_and_only_for_its_table() {
        let cache = RowCache::new(1 << 20);
        let stats = Statistics::default();
        cache.remember(7, b"k", 100, 90, &entry(80, "v"));
        assert_eq!(
            cache.answer(7, b"k", 100, &stats).map(|r| r.map(|e| e.0)),
            Some(Some(80))
        );
        assert_eq!(
            cache.answer(7, b"k", 80, &stats).map(|r| r.map(|e| e.0)),
            Some(Some(80))
        );
        // A snapshot older than the newest entry must read the table.
        assert!(cache.answer(7, b"k", 79, &stats).is_none());
        assert!(cache.answer(8, b"k", 100, &stats).is_none());
        assert!(cache.answer(7, b"k2", 100, &stats).is_none());
        assert_eq!(Statistics::get(&stats.row_cache_hits), 2);
        assert_eq!(Statistics::get(&stats.row_cache_misses), 3);
    }

    #[test]
    fn only_a_lookup_that_saw_the_whole_table_is_kept() {
        let cache = RowCache::new(1 << 20);
        let stats = Statistics::default();
        // A snapshot below the table's largest entry found an older version: not kept.
        cache.remember(7, b"k", 50, 90, &entry(40, "old"));
        assert!(cache.answer(7, b"k", 100, &stats).is_none());
        // A table holding no version of the key answers absent at every sequence number.
        cache.remember(7, b"absent", 90, 90, &None);
        assert_eq!(
            cache.answer(7, b"absent", 1, &stats).map(|r| r.is_none()),
            Some(true)
        );
    }

    #[test]
    fn the_cache_stays_within_its_capacity() {
        let cache = RowCache::new(64 << 10);
        let value = "x".repeat(100);
        for i in 0..10_000u32 {
            cache.remember(1, &i.to_be_bytes(), 10, 10, &entry(5, &value));
        }
        assert!(cache.used_bytes() <= cache.capacity());
        assert!(cache.len() > 100 && cache.len() < 10_000);
    }
}
