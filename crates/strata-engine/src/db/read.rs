//! The read path: point lookups and range iterators over memtables and runs, at a snapshot.

use super::engine::Engine;
use crate::error::Result;
use crate::iter::{DeferredChildren, InternalIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::key_index::KeyIndexView;
use crate::merge::gather_range_deletions;
use crate::row_cache::Entry as RowEntry;
use crate::stats::{Statistics, LOOKUP_SAMPLE_EVERY};
use crate::super_version::{ReadRangeDeletions, SuperVersion};
use crate::table::{bloom_hash, prefetch_blocks, ReadPurpose, ReadaheadSize, Table};
use crate::table_cache::{RunIterator, TableCache};
use crate::user_iter::{DbIterator, ReadView, ScanCount};
use bytes::Bytes;
use std::cell::Cell;
use std::ops::Bound;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;
use strata_meta::{TableMeta, Version};

/// The tables the key index names for one key: nearly always none or one.
type SmallTables = Vec<strata_meta::TableId>;

/// What decides the versions point reads find: the read's sequence number, the TTL's expiry
/// bound and the range deletions, and the options a merge operand is read again with.
pub(super) struct PointRead<'a> {
    seq: SeqNo,
    expired_through: SeqNo,
    ranges: ReadRangeDeletions,
    options: &'a ReadOptions<'a>,
}

/// A consistent point-in-time view: reads through it see exactly the writes committed before it
/// was taken.
pub struct Snapshot {
    engine: Arc<Engine>,
    seq: SeqNo,
}

impl Snapshot {
    /// Takes a snapshot of `engine` at its last committed sequence number.
    pub(crate) fn take(engine: &Arc<Engine>) -> Snapshot {
        let mut snapshots = engine.shared.snapshots.lock();
        let seq = engine.shared.last_sequence.load(Ordering::Acquire);
        *snapshots.entry(seq).or_insert(0) += 1;
        Snapshot {
            engine: Arc::clone(engine),
            seq,
        }
    }

    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut snapshots = self.engine.shared.snapshots.lock();
        if let Some(count) = snapshots.get_mut(&self.seq) {
            *count -= 1;
            if *count == 0 {
                snapshots.remove(&self.seq);
            }
        }
    }
}

/// Options of one read.
#[derive(Clone, Copy, Default)]
pub struct ReadOptions<'a> {
    /// Read as of this snapshot instead of the latest state. RocksDB: `ReadOptions::snapshot`.
    pub snapshot: Option<&'a Snapshot>,
    /// Bytes an iterator reads ahead in a table once its block reads there are sequential; 0
    /// lets the readahead grow by itself, from 8 KiB doubling up to 256 KiB, while the reads
    /// stay sequential. RocksDB: `ReadOptions::readahead_size`. Default: 0.
    pub readahead_size: usize,
}

impl<'a> ReadOptions<'a> {
    /// Options that read as of `snapshot`, the others at their defaults.
    pub fn at(snapshot: &'a Snapshot) -> Self {
        ReadOptions {
            snapshot: Some(snapshot),
            ..ReadOptions::default()
        }
    }
}

impl Engine {
    /// The sequence number a read with `options` sees.
    pub(super) fn read_sequence(&self, options: &ReadOptions<'_>) -> SeqNo {
        options.snapshot.map_or_else(
            || self.shared.last_sequence.load(Ordering::Acquire),
            |s| s.seq,
        )
    }

    /// The value of `user_key` as `options` say: the active memtable, then frozen memtables
    /// newest first, then runs in recency order; the first entry found decides. One lookup in
    /// [`LOOKUP_SAMPLE_EVERY`] per thread is timed, apart by whether a merge runs beside it.
    pub fn get(&self, user_key: &[u8], options: &ReadOptions<'_>) -> Result<Option<Bytes>> {
        thread_local! {
            static LOOKUPS: Cell<u32> = const { Cell::new(0) };
        }
        let n = LOOKUPS.with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n
        });
        if !n.is_multiple_of(LOOKUP_SAMPLE_EVERY) {
            return self.lookup(user_key, options);
        }
        let merging = self.merges_running.load(Ordering::Relaxed) > 0;
        let started = Instant::now();
        let found = self.lookup(user_key, options);
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let (count, total) = if merging {
            (
                &self.stats.lookups_timed_merging,
                &self.stats.lookup_nanos_merging,
            )
        } else {
            (
                &self.stats.lookups_timed_idle,
                &self.stats.lookup_nanos_idle,
            )
        };
        Statistics::add(count, 1);
        Statistics::add(total, nanos);
        found
    }

    /// [`Engine::get`] without the timing.
    fn lookup(&self, user_key: &[u8], options: &ReadOptions<'_>) -> Result<Option<Bytes>> {
        self.check_open()?;
        let seq = self.read_sequence(options);
        let view = self.super_version_for_read();
        Statistics::add(&self.stats.gets, 1);
        let read = self.point_read(&view, seq, options)?;
        let resolve = |found, kind, value| self.resolve_found(&read, user_key, found, kind, value);
        for memtable in std::iter::once(&view.memtable).chain(&view.frozen) {
            if let Some((found, kind, v)) = memtable.get(user_key, seq) {
                return resolve(found, kind, v);
            }
        }
        let mut holders = Vec::new();
        for (level_no, level) in view.version.levels().iter().enumerate() {
            // In the indexed level, only the tables the key index names may hold the key.
            let mut indexed: Option<(&KeyIndexView, SmallTables)> = None;
            if let Some(index) = view.key_index.as_ref().filter(|k| k.level == level_no) {
                let mut holders = SmallTables::new();
                index.candidates(bloom_hash(user_key), |t| holders.push(t));
                indexed = Some((index, holders));
            }
            // Only the runs whose key range holds the key (the level's interval index), or
            // every run, newest first.
            holders.clear();
            if self.options.interval_index {
                view.intervals
                    .level(level_no)
                    .holding(user_key, &mut holders);
            } else {
                holders.extend(0..level.runs().len());
            }
            for &run in &holders {
                let Some(t) = level.runs()[run].table_covering(user_key) else {
                    continue;
                };
                // A table the key index names needs no filter probe.
                let filtered = match &indexed {
                    Some((index, holders)) if index.is_indexed(t.id) => {
                        if !holders.contains(&t.id) {
                            continue;
                        }
                        false
                    }
                    _ => true,
                };
                Statistics::add(&self.stats.get_tables_probed, 1);
                let table = self.table_for_read(&view, t.id.0, level_no)?;
                if let Some((found, kind, v)) =
                    self.table_get(&table, t, user_key, seq, filtered)?
                {
                    return resolve(found, kind, v);
                }
            }
        }
        Ok(None)
    }

    /// The newest entry of `user_key` visible at `seq` in `table` (whose metadata is `meta`),
    /// probing its filter first if `filtered`: the row cache's answer where it has one, else the
    /// table's, which the row cache then keeps.
    fn table_get(
        &self,
        table: &Table,
        meta: &TableMeta,
        user_key: &[u8],
        seq: SeqNo,
        filtered: bool,
    ) -> Result<Option<RowEntry>> {
        if let Some(answer) = self.answer_before_reading(table, user_key, seq, filtered)? {
            return Ok(answer);
        }
        let found = table.get_unfiltered(user_key, seq)?;
        self.remember_row(table, user_key, seq, meta.seqnos.largest, &found);
        Ok(found)
    }

    /// What a point lookup of `user_key` at `seq` learns of `table` before reading its index
    /// or a block: `Some(None)` when its filter (probed only if `filtered`) rules the key out,
    /// `Some(row)` when the row cache answers, `None` when the table must be read.
    pub(super) fn answer_before_reading(
        &self,
        table: &Table,
        user_key: &[u8],
        seq: SeqNo,
        filtered: bool,
    ) -> Result<Option<Option<RowEntry>>> {
        if filtered && !table.probe_filter(user_key)? {
            return Ok(Some(None));
        }
        Ok(self
            .shared
            .row_cache
            .as_ref()
            .and_then(|rows| rows.answer(table.file_number(), user_key, seq, &self.stats)))
    }

    /// Hands what a lookup at `seq` found of `user_key` in `table` (whose entries are at most
    /// `table_largest_seq`) to the row cache, if there is one.
    pub(super) fn remember_row(
        &self,
        table: &Table,
        user_key: &[u8],
        seq: SeqNo,
        table_largest_seq: SeqNo,
        found: &Option<RowEntry>,
    ) {
        if let Some(rows) = &self.shared.row_cache {
            rows.remember(table.file_number(), user_key, seq, table_largest_seq, found);
        }
    }

    /// What point reads of `view` at `seq` need to decide the versions they find.
    pub(super) fn point_read<'a>(
        &self,
        view: &SuperVersion,
        seq: SeqNo,
        options: &'a ReadOptions<'a>,
    ) -> Result<PointRead<'a>> {
        Ok(PointRead {
            seq,
            expired_through: self.expired_through(),
            ranges: self.read_range_deletions(view)?,
            options,
        })
    }

    /// The value `read` makes of `user_key`'s newest visible version, found at `found`: none
    /// for a delete, or for a version expired (every older one has expired too) or deleted by
    /// a newer range; the operands combined with their base for a merge operand.
    pub(super) fn resolve_found(
        &self,
        read: &PointRead<'_>,
        user_key: &[u8],
        found: SeqNo,
        kind: ValueKind,
        value: Bytes,
    ) -> Result<Option<Bytes>> {
        let alive = found > read.expired_through && !read.ranges.deletes(user_key, found, read.seq);
        match kind {
            ValueKind::Put if alive => Ok(Some(value)),
            ValueKind::Merge if alive => self.read_merged(user_key, read.options),
            _ => Ok(None),
        }
    }

    /// The value of `user_key`, whose newest visible version is a merge operand, as `options`
    /// read it: through an iterator over the key alone, which combines its operands with their
    /// base (a point lookup stops at the first version it finds).
    pub(super) fn read_merged(
        &self,
        user_key: &[u8],
        options: &ReadOptions<'_>,
    ) -> Result<Option<Bytes>> {
        let key = user_key.to_vec();
        let mut it = self.iter(
            (Bound::Included(key.clone()), Bound::Included(key)),
            options,
            false,
        )?;
        Ok(if it.advance()? {
            Some(Bytes::copy_from_slice(it.value()))
        } else {
            None
        })
    }

    /// The range deletions a read of `view` respects ([`ReadRangeDeletions`]); the first
    /// read of a super version gathers those of its frozen memtables and tables.
    pub(super) fn read_range_deletions(&self, view: &SuperVersion) -> Result<ReadRangeDeletions> {
        let settled = match view.range_deletions.get() {
            Some(settled) => settled.clone(),
            None => {
                let built = gather_range_deletions(
                    view.frozen
                        .iter()
                        .flat_map(|m| m.inserted_range_deletions())
                        .collect(),
                    view.version
                        .tables()
                        .filter(|(_, _, t)| t.range_deletions > 0)
                        .map(|(level, _, t)| self.table_in_level(t.id.0, level, &view.version)),
                )?;
                view.range_deletions.get_or_init(|| built).clone()
            }
        };
        Ok(ReadRangeDeletions {
            settled,
            active: view.memtable.range_deletions(),
        })
    }

    /// Table `number` of `view`'s version, met by a point read in `level`: the version's open
    /// handle when it has one, else from the table cache (and kept in the handle for the next
    /// read).
    fn table_for_read<'v>(
        &self,
        view: &'v SuperVersion,
        number: u64,
        level: usize,
    ) -> Result<TableRef<'v>> {
        let Some(slot) = view.handles.as_ref().and_then(|h| h.slot(number)) else {
            return Ok(TableRef::Owned(self.table_in_level(
                number,
                level,
                &view.version,
            )?));
        };
        if let Some(table) = slot.get() {
            return Ok(TableRef::Held(table));
        }
        let table = self.table_in_level(number, level, &view.version)?;
        Ok(TableRef::Held(slot.get_or_init(|| table)))
    }

    /// Table `number`, met by a read in `level` of `version` (which decides whether a table
    /// opened now holds its index and filter: [`crate::IndexPinning`]).
    pub(super) fn table_in_level(
        &self,
        number: u64,
        level: usize,
        version: &Version,
    ) -> Result<Arc<Table>> {
        if !self.shared.tables.pins_by_level() {
            return self.shared.tables.get(number);
        }
        self.shared
            .tables
            .get_at_level(number, level, deepest_level(version))
    }

    /// An iterator over `range` as `options` say, ascending or (`reverse`) descending.
    pub fn iter(
        &self,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        options: &ReadOptions<'_>,
        reverse: bool,
    ) -> Result<DbIterator> {
        self.check_open()?;
        let seq = self.read_sequence(options);
        let view = self.current_super_version();
        Statistics::add(&self.stats.scans, 1);
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(view.memtable.iter()));
        for memtable in &view.frozen {
            children.push(Box::new(memtable.iter()));
        }
        // Per level, the runs holding the scan's start are opened now, and the runs starting
        // after it only once the scan reaches them (the level's interval index): a scan of a
        // level of many small runs (Min-Max buckets) merges the runs its keys reach, not every
        // run after its start. Within a run, only the tables overlapping the range.
        let start = match &range.0 {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.as_slice()),
            Bound::Unbounded => None,
        };
        let readahead = match options.readahead_size {
            0 => ReadaheadSize::Auto,
            bytes => ReadaheadSize::Fixed(bytes),
        };
        let deepest = deepest_level(&view.version);
        // A forward scan's first seek reads a block in every run holding its start: those reads
        // go out together, before the seeks, which then find the blocks cached.
        let first_seek = match (&range.0, reverse) {
            (Bound::Included(k) | Bound::Excluded(k), false) if self.scan_prefetch.open() => {
                Some(key::seek_key(k, key::MAX_SEQNO))
            }
            _ => None,
        };
        let mut prefetch = Vec::new();
        let mut deferred: Vec<Box<dyn DeferredChildren>> = Vec::new();
        let mut holders = Vec::new();
        for (level_no, level) in view.version.levels().iter().enumerate() {
            holders.clear();
            if !self.options.interval_index {
                // Every run overlapping the range, opened now.
                holders.extend(0..level.runs().len());
            } else if let Some(start) = start {
                view.intervals.level(level_no).holding(start, &mut holders);
            }
            for &run in &holders {
                let tables = tables_in_range(level.runs()[run].tables(), &range);
                if !tables.is_empty() {
                    let run = RunIterator::new(
                        Arc::clone(&self.shared.tables),
                        tables.to_vec(),
                        ReadPurpose::Query,
                        readahead,
                    )
                    .in_level(level_no, deepest);
                    if let Some(target) = &first_seek {
                        prefetch.extend(run.seek_block(target)?);
                    }
                    children.push(Box::new(run));
                }
            }
            if !self.options.interval_index {
                continue;
            }
            let first = view.intervals.level(level_no).first_starting_after(start);
            let mut later = RunsStartingLater {
                view: Arc::clone(&view),
                level: level_no,
                next: first,
                range: range.clone(),
                start: Vec::new(),
                tables: Arc::clone(&self.shared.tables),
                readahead,
                deepest,
            };
            later.load_start();
            if later.next_start().is_some() {
                deferred.push(Box::new(later));
            }
        }
        if prefetch.len() > 1 {
            let sent = prefetch_blocks(self.shared.fs.as_ref(), &prefetch);
            self.scan_prefetch.record(sent);
        }
        let scan_count = ScanCount {
            stats: Arc::clone(&self.stats),
            returned: 0,
        };
        let merged = MergingIterator::with_deferred(children, deferred);
        let read_view = ReadView {
            seq,
            expired_through: self.expired_through(),
            range_deletions: self.read_range_deletions(&view)?.joined(),
            operator: self.options.merge_operator.clone(),
        };
        DbIterator::new(merged, view, scan_count, read_view, range, reverse)
    }
}

/// When scans read the first blocks of their runs together before seeking: at every scan until
/// one sends none of them to storage (all in the block cache or the page cache), then at every
/// 2nd, 4th, ... up to every 64th scan, and at every scan again once one waits for the device.
/// Scans of cached data so look their blocks up twice (the prefetch, then the seek) only once in
/// 64 scans rather than at every scan. Updated without a lock by every scanning thread; a race
/// costs a prefetch more or less.
#[derive(Debug, Default)]
pub(crate) struct PrefetchGate {
    /// Scans to let pass before the next prefetch.
    skip: AtomicU32,
    /// The last skip set, doubled after each prefetch that read nothing.
    backoff: AtomicU32,
}

/// The most scans [`PrefetchGate`] lets pass between two prefetches.
const MAX_PREFETCH_SKIP: u32 = 64;

impl PrefetchGate {
    /// Whether this scan prefetches.
    fn open(&self) -> bool {
        let skip = self.skip.load(Ordering::Relaxed);
        if skip == 0 {
            return true;
        }
        self.skip.store(skip - 1, Ordering::Relaxed);
        false
    }

    /// A prefetch sent `sent` blocks to storage.
    fn record(&self, sent: usize) {
        if sent > 0 {
            self.backoff.store(0, Ordering::Relaxed);
            return;
        }
        let next = (self.backoff.load(Ordering::Relaxed) * 2).clamp(1, MAX_PREFETCH_SKIP);
        self.backoff.store(next, Ordering::Relaxed);
        self.skip.store(next, Ordering::Relaxed);
    }
}

/// The runs of one level that start after a scan's start, by smallest key, for the scan's
/// merging iterator to open once it reaches them.
struct RunsStartingLater {
    view: Arc<SuperVersion>,
    level: usize,
    /// The next run, by position in the level's interval index order.
    next: usize,
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    /// The next run's smallest internal key; empty when no run is left in the range.
    start: Vec<u8>,
    tables: Arc<TableCache>,
    readahead: ReadaheadSize,
    /// The deepest level holding data in the scan's version.
    deepest: usize,
}

impl RunsStartingLater {
    /// Sets `start` for the run at `next` (empty when none is left below the range's end).
    fn load_start(&mut self) {
        self.start.clear();
        if let Some((smallest, _)) = self.view.intervals.level(self.level).starting_at(self.next) {
            if !strata_meta::above_end(&self.range.1, smallest) {
                self.start = key::seek_key(smallest, key::MAX_SEQNO);
            }
        }
    }
}

impl DeferredChildren for RunsStartingLater {
    fn next_start(&self) -> Option<&[u8]> {
        (!self.start.is_empty()).then_some(self.start.as_slice())
    }

    fn open_next(&mut self) -> Box<dyn InternalIterator> {
        let intervals = self.view.intervals.level(self.level);
        let run = intervals.starting_at(self.next).map_or(0, |(_, run)| run);
        let tables = tables_in_range(
            self.view.version.level(self.level).runs()[run].tables(),
            &self.range,
        )
        .to_vec();
        self.next += 1;
        self.load_start();
        Box::new(
            RunIterator::new(
                Arc::clone(&self.tables),
                tables,
                ReadPurpose::Query,
                self.readahead,
            )
            .in_level(self.level, self.deepest),
        )
    }
}

/// The deepest level of `version` holding data (0 for an empty tree).
fn deepest_level(version: &Version) -> usize {
    version
        .levels()
        .iter()
        .rposition(|level| !level.is_empty())
        .unwrap_or(0)
}

/// The contiguous tables of a run (sorted, disjoint) whose key ranges overlap `range`.
fn tables_in_range<'a>(
    tables: &'a [Arc<strata_meta::TableMeta>],
    range: &(Bound<Vec<u8>>, Bound<Vec<u8>>),
) -> &'a [Arc<strata_meta::TableMeta>] {
    // First table not wholly before the start.
    let first = tables.partition_point(|t| strata_meta::below_start(&range.0, &t.largest));
    // First table wholly after the end.
    let end = tables.partition_point(|t| !strata_meta::above_end(&range.1, &t.smallest));
    &tables[first..end.max(first)]
}

/// A table for one read: borrowed from the super version's handles, or owned from the table
/// cache.
enum TableRef<'v> {
    Held(&'v Arc<Table>),
    Owned(Arc<Table>),
}

impl std::ops::Deref for TableRef<'_> {
    type Target = Table;

    fn deref(&self) -> &Table {
        match self {
            TableRef::Held(table) => table,
            TableRef::Owned(table) => table,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_meta::TableMeta;

    #[test]
    fn prefetches_back_off_while_they_send_nothing_to_storage_and_resume_when_they_do() {
        let gate = PrefetchGate::default();
        let opened = |gate: &PrefetchGate, scans: usize| (0..scans).filter(|_| gate.open()).count();
        assert_eq!(opened(&gate, 10), 10, "every scan prefetches at first");
        // Each useless prefetch doubles the scans let pass: 1, 2, 4, ... up to 64.
        for skip in [1, 2, 4, 8, 16, 32, 64, 64] {
            assert!(gate.open());
            gate.record(0);
            assert_eq!(opened(&gate, skip), 0, "{skip} scans pass");
        }
        assert!(gate.open());
        gate.record(3);
        assert_eq!(
            opened(&gate, 10),
            10,
            "a prefetch that sent blocks to storage opens the gate again"
        );
    }

    #[test]
    fn a_scan_takes_only_the_tables_its_range_overlaps() {
        // Tables [b, d], [f, h], [j, l].
        let tables: Vec<Arc<TableMeta>> = [("b", "d"), ("f", "h"), ("j", "l")]
            .iter()
            .enumerate()
            .map(|(i, (lo, hi))| Arc::new(TableMeta::new(i as u64, *lo, *hi, 10)))
            .collect();
        let ids = |range: (Bound<&str>, Bound<&str>)| -> Vec<u64> {
            let range = (
                range.0.map(|s| s.as_bytes().to_vec()),
                range.1.map(|s| s.as_bytes().to_vec()),
            );
            tables_in_range(&tables, &range)
                .iter()
                .map(|t| t.id.0)
                .collect()
        };
        use Bound::{Excluded, Included, Unbounded};
        assert_eq!(ids((Unbounded, Unbounded)), [0, 1, 2]);
        assert_eq!(ids((Included("e"), Included("e"))), Vec::<u64>::new());
        assert_eq!(ids((Included("e"), Included("f"))), [1]);
        assert_eq!(ids((Included("e"), Excluded("f"))), Vec::<u64>::new());
        assert_eq!(ids((Included("h"), Unbounded)), [1, 2]);
        assert_eq!(ids((Excluded("h"), Unbounded)), [2]);
        assert_eq!(ids((Unbounded, Included("b"))), [0]);
        assert_eq!(ids((Unbounded, Excluded("b"))), Vec::<u64>::new());
        assert_eq!(ids((Included("c"), Included("k"))), [0, 1, 2]);
        assert_eq!(ids((Included("m"), Unbounded)), Vec::<u64>::new());
        // An empty range (start after end) takes nothing.
        assert_eq!(ids((Included("k"), Included("c"))), Vec::<u64>::new());
    }
}
