//! What a reader holds: the memtables and the version of one moment.

use crate::key::SeqNo;
use crate::key_index::KeyIndexView;
use crate::memtable::Memtable;
use crate::stats::Statistics;
use crate::table::Table;
use bytes::Bytes;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use strata_exec::range_del::Fragments;
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
    /// An interval index over each level's runs (built once per version, when first read).
    pub intervals: Arc<LevelIntervals>,
    /// The version's open tables, for point reads (built once per version); `None` when the
    /// version has more tables than the table cache keeps open.
    pub handles: Option<Arc<TableHandles>>,
    /// The range deletions of the frozen memtables and the version's tables, gathered by the
    /// first read that needs them (`None` inside: there are none).
    pub range_deletions: OnceLock<Option<Arc<Fragments<Bytes>>>>,
}

/// The range deletions a read respects: the super version's (settled while it is current) and
/// the active memtable's (which every write may add to), kept apart so a point read queries
/// each instead of joining them.
pub(crate) struct ReadRangeDeletions {
    pub settled: Option<Arc<Fragments<Bytes>>>,
    pub active: Option<Arc<Fragments<Bytes>>>,
}

impl ReadRangeDeletions {
    /// Whether the version of `key` at `found` reads as deleted at `read_seq`.
    #[inline]
    pub fn deletes(&self, key: &[u8], found: SeqNo, read_seq: SeqNo) -> bool {
        [&self.settled, &self.active]
            .into_iter()
            .flatten()
            .any(|f| f.covering(key, read_seq).is_some_and(|t| t > found))
    }

    /// Both sets as one (an iterator asks once per key, so it joins them once).
    pub fn joined(self) -> Option<Arc<Fragments<Bytes>>> {
        match (self.settled, self.active) {
            (Some(a), Some(b)) => Some(Arc::new(Fragments::new(
                a.tombstones().chain(b.tombstones()),
            ))),
            (a, b) => a.or(b),
        }
    }
}

/// The open tables of one version, filled as reads meet them (RocksDB pins its table readers in
/// the file metadata when `max_open_files` is -1). A point read that finds its table here takes
/// no lock and writes no shared cache line; through the table cache it would take the read lock
/// of the shard holding the table's number, and every reader of a small tree shares those few
/// shards (docs/concurrency.md, "On 16 cores").
///
/// Kept only while every table of the version fits in the table cache, so the files held open
/// here stay within `max_open_files`, as the cache's own would.
pub(crate) struct TableHandles {
    /// Table numbers in ascending order, each with its table once a read opened it.
    slots: Vec<(u64, OnceLock<Arc<Table>>)>,
}

impl TableHandles {
    /// Slots for `version`'s tables, or `None` when it has more than `max_open` of them. The
    /// tables `previous` already holds open stay open.
    pub fn for_version(
        version: &Version,
        previous: Option<&TableHandles>,
        max_open: usize,
    ) -> Option<Arc<TableHandles>> {
        let mut numbers: Vec<u64> = version.tables().map(|(_, _, t)| t.id.0).collect();
        if numbers.len() > max_open {
            return None;
        }
        numbers.sort_unstable();
        let slots = numbers
            .into_iter()
            .map(|number| {
                let slot = OnceLock::new();
                if let Some(table) = previous.and_then(|p| p.slot(number)).and_then(|s| s.get()) {
                    let _ = slot.set(Arc::clone(table));
                }
                (number, slot)
            })
            .collect();
        Some(Arc::new(TableHandles { slots }))
    }

    /// Table `number`'s slot, if the version holds it.
    pub fn slot(&self, number: u64) -> Option<&OnceLock<Arc<Table>>> {
        self.slots
            .binary_search_by_key(&number, |(n, _)| *n)
            .ok()
            .map(|i| &self.slots[i].1)
    }
}

/// The interval indexes over one version's levels, each built by the first read that needs it.
///
/// Why not at the install: a level of thousands of runs (Min-Max buckets) was indexed again at
/// every flush, under the state lock, 0.5 ms per flush on average over a 3·10^7-entry ingest, a
/// cost growing with the buckets for an index only reads use (docs/minmax.md, "Installs that do
/// not grow with the tree"). Built here, a version nobody reads costs nothing, and a version
/// read many times is indexed once. The first reader of a level pays the build, and concurrent
/// readers of that level wait for it.
pub(crate) struct LevelIntervals {
    version: Arc<Version>,
    levels: Vec<OnceLock<RunIntervals>>,
    /// Where the build time goes (`interval_index_nanos`).
    stats: Arc<Statistics>,
}

impl LevelIntervals {
    /// Indexes for `version`'s levels, none built yet.
    pub fn new(version: &Arc<Version>, stats: &Arc<Statistics>) -> Arc<Self> {
        Arc::new(LevelIntervals {
            version: Arc::clone(version),
            levels: (0..version.num_levels()).map(|_| OnceLock::new()).collect(),
            stats: Arc::clone(stats),
        })
    }

    /// The index over level `level`'s runs, built now if no read has built it. Panics past the
    /// version's last level, as indexing its levels would.
    pub fn level(&self, level: usize) -> &RunIntervals {
        self.levels[level].get_or_init(|| {
            let started = Instant::now();
            let index = RunIntervals::new(self.version.level(level));
            Statistics::add(
                &self.stats.interval_index_nanos,
                started.elapsed().as_nanos() as u64,
            );
            index
        })
    }

    /// Bytes of the indexes built so far.
    pub fn memory_bytes(&self) -> u64 {
        self.levels
            .iter()
            .filter_map(OnceLock::get)
            .map(|i| i.memory_bytes() as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use crate::key::{internal_key, ValueKind};
    use crate::stats::Statistics;
    use crate::table::{TableBuilder, TableOptions};
    use std::path::Path;

    /// A version of tables 3, 7 and 12 (two levels), or of 12 and 20 after a compaction.
    fn version(after: bool) -> Version {
        let text = if after {
            "L1:\n  run 2:\n    table 12 [a, c] size=1M\n    table 20 [d, f] size=1M\n"
        } else {
            "L0:\n  run 1:\n    table 7 [a, b] size=1M\n  run 3:\n    table 3 [c, d] size=1M\n\
             L1:\n  run 2:\n    table 12 [a, c] size=1M\n"
        };
        Version::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn table(number: u64) -> Arc<Table> {
        let fs = MemFs::new();
        let path = Path::new("/t.sst");
        let mut b = TableBuilder::new(
            fs.create(path).expect("create"),
            "t.sst".into(),
            TableOptions::default(),
        );
        let key = internal_key(b"a", 1, ValueKind::Put);
        b.add(&key, b"v").expect("add");
        b.finish().expect("finish");
        let file = fs.open(path).expect("open");
        let stats = Arc::new(Statistics::default());
        Arc::new(Table::open(file, number, "t.sst".into(), None, stats).expect("open table"))
    }

    #[test]
    fn a_slot_per_table_of_the_version_and_none_beyond_the_open_files() {
        let v = version(false);
        let handles = TableHandles::for_version(&v, None, 3).expect("three tables fit in three");
        for number in [3, 7, 12] {
            let slot = handles.slot(number).expect("a slot per table");
            assert!(slot.get().is_none(), "nothing is opened ahead of a read");
        }
        for number in [0, 4, 13] {
            assert!(
                handles.slot(number).is_none(),
                "table {number} is not in the version"
            );
        }
        assert!(
            TableHandles::for_version(&v, None, 2).is_none(),
            "three tables held open would exceed two open files"
        );
    }

    #[test]
    fn a_new_version_keeps_the_tables_it_shares_open_and_drops_the_others() {
        let before = TableHandles::for_version(&version(false), None, 16).unwrap();
        let (t3, t12) = (table(3), table(12));
        before.slot(3).unwrap().set(Arc::clone(&t3)).ok().unwrap();
        before.slot(12).unwrap().set(Arc::clone(&t12)).ok().unwrap();
        let after = TableHandles::for_version(&version(true), Some(&before), 16).unwrap();
        let kept = after.slot(12).unwrap().get().expect("table 12 stays open");
        assert!(Arc::ptr_eq(kept, &t12));
        assert!(
            after.slot(20).unwrap().get().is_none(),
            "a new table waits for a read"
        );
        assert!(
            after.slot(3).is_none(),
            "a compacted table leaves the handles"
        );
        drop(before);
        assert_eq!(
            Arc::strong_count(&t3),
            1,
            "only this test holds table 3 now"
        );
    }
}
