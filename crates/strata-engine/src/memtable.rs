//! The memtable: an arena skip list of internal keys, the write buffer of the LSM tree.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind, TRAILER_LEN};
use crate::skiplist::{Cursor, KeyOrder, SkipList, Walk};
use bytes::Bytes;
use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, RwLock};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use strata_exec::range_del::{Fragments, RangeTombstone};
use xxhash_rust::xxh3::xxh3_64;

/// Bytes each entry is charged beyond its internal key and value: what a node of RocksDB's
/// skip list costs its arena (an 8-byte header, 4/3 links of 8 bytes on average, padding to 8
/// bytes, rounded), so that equal `write_buffer_size` means equal entries per buffer and equal
/// flushes. Charging a constant instead of each node's actual bytes keeps the buffer's size a
/// pure function of what was written (the simulator predicts flushes from it). This list's
/// nodes have 2 links on average (see `skiplist::BRANCHING`) and a 4-byte header, so its arena
/// holds ~1.5% less than it is charged for 100-byte values (tested).
pub const ENTRY_OVERHEAD: u64 = 22;

/// Bytes an entry of `user_key` and `value` is charged in a buffer: its internal key, its value
/// and [`ENTRY_OVERHEAD`].
pub fn charge(user_key: &[u8], value: &[u8]) -> u64 {
    (user_key.len() + TRAILER_LEN + value.len()) as u64 + ENTRY_OVERHEAD
}

/// Whether `seq` falls in one of `ranges` (ascending, inclusive, as
/// [`Memtable::unlogged_ranges`] returns them).
pub fn in_ranges(ranges: &[(SeqNo, SeqNo)], seq: SeqNo) -> bool {
    let after = ranges.partition_point(|&(first, _)| first <= seq);
    after > 0 && ranges[after - 1].1 >= seq
}

/// Internal-key order ([`key::compare_internal_keys`]).
#[derive(Debug)]
struct InternalOrder;

impl KeyOrder for InternalOrder {
    #[inline]
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        key::compare_internal_keys(a, b)
    }
}

/// A Bloom filter over a memtable's user keys, so a point lookup of a key the memtable does not
/// hold (most lookups, once the data outgrows the buffer) costs one cache line instead of a
/// skip-list search (measured: the search took 21% of a random-read run whose memtable held the
/// fill's last 64 MiB). RocksDB: `memtable_whole_key_filtering` with
/// `memtable_prefix_bloom_size_ratio`.
///
/// Cache-blocked: a key's probes all fall in one 512-bit block picked by its hash. Bits are
/// atomics, set by the (single) writer and read by lookups without locks; a reader that misses
/// a bit being set also misses the entry, which is not yet published either.
#[derive(Debug)]
struct KeyFilter {
    blocks: Box<[[AtomicU64; 8]]>,
}

/// Probes per key: near-optimal for the 8–18 bits per key the default sizing gives.
const FILTER_PROBES: u32 = 6;

impl KeyFilter {
    /// A filter of about `bytes` bytes (whole 64-byte blocks, at least one).
    fn new(bytes: usize) -> Self {
        let blocks = (bytes / 64).max(1);
        KeyFilter {
            blocks: (0..blocks).map(|_| Default::default()).collect(),
        }
    }

    /// The words and bit masks of `hash`'s probes: one 64-byte block picked by the hash, and
    /// [`FILTER_PROBES`] bits in it from a remix of the hash, independent of the block choice.
    /// Adding and probing both walk this sequence, so they always agree.
    #[inline]
    fn probes(&self, hash: u64) -> impl Iterator<Item = (&AtomicU64, u64)> {
        let block = &self.blocks[((u128::from(hash) * self.blocks.len() as u128) >> 64) as usize];
        let mut bits = hash.rotate_left(21).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (0..FILTER_PROBES).map(move |_| {
            let bit = bits & 511;
            bits = bits.rotate_right(9);
            (&block[(bit >> 6) as usize], 1 << (bit & 63))
        })
    }

    /// Sets `hash`'s bits. REQUIRES: no other thread adds at the same time (the skip list's
    /// writer lock), so a load and a store replace a locked read-modify-write (six per key cost
    /// 4% of a random fill).
    fn add(&self, hash: u64) {
        for (word, mask) in self.probes(hash) {
            word.store(
                word.load(AtomicOrdering::Relaxed) | mask,
                AtomicOrdering::Relaxed,
            );
        }
    }

    /// [`KeyFilter::add`] beside other threads adding: each bit set with an atomic or, so
    /// that no thread's bits overwrite another's.
    fn add_concurrently(&self, hash: u64) {
        for (word, mask) in self.probes(hash) {
            word.fetch_or(mask, AtomicOrdering::Relaxed);
        }
    }

    #[inline]
    fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash)
            .all(|(word, mask)| word.load(AtomicOrdering::Relaxed) & mask != 0)
    }
}

/// A write buffer. Inserts are serialized by the list's own lock ([`Memtable::insert`]) or run
/// at once ([`Memtable::insert_concurrently`]), never both ways at the same time (the engine's
/// commit lock); reads run concurrently with them, without locks.
#[derive(Debug)]
pub struct Memtable {
    list: SkipList<InternalOrder>,
    filter: Option<KeyFilter>,
    /// What every insert adds to.
    counts: CachePadded<InsertCounts>,
    wal_number: u64,
    /// Sequence numbers of writes left out of the WAL ([`crate::WriteOptions::disable_wal`]),
    /// as ascending inclusive ranges: what a close or an explicit flush must log before the
    /// memtable's entries are durable.
    unlogged: Mutex<Vec<(SeqNo, SeqNo)>>,
    /// Range deletions, kept apart from the entries (they are rare).
    range_deletions: RwLock<RangeDeletions>,
    /// How many range deletions were inserted (read without the lock: most memtables have none).
    range_deletion_count: AtomicU64,
}

/// A memtable's counters that every insert adds to: on lines of their own, apart from what
/// every lookup reads (the filter, the list's head, the range deletions' count), so that writers
/// inserting at once do not take those lines from readers with each insert.
#[derive(Debug, Default)]
struct InsertCounts {
    bytes: AtomicU64,
    user_bytes: AtomicU64,
    tombstones: AtomicU64,
    /// Merge operands inserted.
    merges: AtomicU64,
    /// The largest sequence number inserted (a window flush's eviction bound).
    max_seq: AtomicU64,
}

/// What entries inserted with [`Memtable::insert_concurrently`] add to the memtable's counts,
/// which that insert leaves to its caller: a commit group's leader sums its group's entries and
/// adds them once ([`Memtable::add_counts`]), where each writer adding its own took the
/// counters' line from the others once per entry.
#[derive(Clone, Copy, Debug, Default)]
pub struct EntryCounts {
    entries: u64,
    bytes: u64,
    user_bytes: u64,
    tombstones: u64,
    merges: u64,
    max_seq: SeqNo,
}

impl EntryCounts {
    /// Counts an entry of `user_key` at `seq`.
    pub fn add(&mut self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        self.entries += 1;
        self.bytes += charge(user_key, value);
        self.user_bytes += (user_key.len() + value.len()) as u64;
        match kind {
            ValueKind::Delete => self.tombstones += 1,
            ValueKind::Merge => self.merges += 1,
            ValueKind::Put => {}
        }
        self.max_seq = self.max_seq.max(seq);
    }
}

/// A memtable's range deletions: every one inserted, and their fragments, built again by the
/// first read after an insert (so a run of range deletions fragments once, not once each).
#[derive(Debug, Default)]
struct RangeDeletions {
    inserted: Vec<RangeTombstone<Bytes>>,
    fragments: Option<Arc<Fragments<Bytes>>>,
}

/// Where `node_key` (an internal key) sits relative to the internal key `user_key` + `trailer`,
/// without building the latter.
#[inline]
fn compare_with(node_key: &[u8], user_key: &[u8], trailer: u64) -> Ordering {
    key::compare_user_keys(key::user_key(node_key), user_key)
        .then_with(|| trailer.cmp(&key::trailer(node_key)))
}

impl Memtable {
    /// An empty memtable whose writes are logged in WAL `wal_number`, without a key filter.
    pub fn new(wal_number: u64) -> Self {
        Self::with_filter(wal_number, 0)
    }

    /// An empty memtable whose writes are logged in WAL `wal_number`, with a Bloom filter of
    /// about `filter_bytes` over its user keys (none when 0).
    pub fn with_filter(wal_number: u64, filter_bytes: usize) -> Self {
        Memtable {
            list: SkipList::new(),
            filter: (filter_bytes > 0).then(|| KeyFilter::new(filter_bytes)),
            counts: CachePadded::default(),
            wal_number,
            unlogged: Mutex::new(Vec::new()),
            range_deletions: RwLock::default(),
            range_deletion_count: AtomicU64::new(0),
        }
    }

    /// Adds a deletion of every key in `[start, end)` older than `seq`; an empty range is
    /// kept out. Charged to the buffer as an entry of key `start` and value `end`.
    pub fn insert_range_deletion(&self, start: &[u8], end: &[u8], seq: SeqNo) {
        if start < end {
            let mut r = self.range_deletions.write();
            r.inserted.push(RangeTombstone {
                start: Bytes::copy_from_slice(start),
                end: Bytes::copy_from_slice(end),
                seq,
            });
            r.fragments = None;
        }
        self.counts.max_seq.fetch_max(seq, AtomicOrdering::Relaxed);
        self.counts
            .bytes
            .fetch_add(charge(start, end), AtomicOrdering::Relaxed);
        self.counts
            .user_bytes
            .fetch_add((start.len() + end.len()) as u64, AtomicOrdering::Relaxed);
        // Counted last, with release: a reader that sees the count sees the deletion.
        self.range_deletion_count
            .fetch_add(1, AtomicOrdering::Release);
    }

    /// Range deletions inserted (empty ranges included: each took a sequence number).
    pub fn range_deletion_count(&self) -> u64 {
        self.range_deletion_count.load(AtomicOrdering::Acquire)
    }

    /// The range deletions, fragmented; `None` when there is none.
    pub fn range_deletions(&self) -> Option<Arc<Fragments<Bytes>>> {
        if self.range_deletion_count() == 0 {
            return None;
        }
        if let Some(f) = &self.range_deletions.read().fragments {
            return Some(Arc::clone(f));
        }
        let mut r = self.range_deletions.write();
        let fragments = Arc::new(Fragments::new(r.inserted.iter().cloned()));
        r.fragments = Some(Arc::clone(&fragments));
        Some(fragments)
    }

    /// Every range deletion inserted (empty ones left out), in the order inserted.
    pub fn inserted_range_deletions(&self) -> Vec<RangeTombstone<Bytes>> {
        self.range_deletions.read().inserted.clone()
    }

    /// The WAL holding this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Adds an entry.
    ///
    /// REQUIRES: no [`Memtable::insert_concurrently`] runs at the same time.
    pub fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        self.insert_locked(user_key, seq, kind, value, false);
    }

    /// [`Memtable::insert`] for entries that come in the memtable's order (a copy of sorted
    /// entries): each links in after the last with no search ([`SkipList::append_with`]); one
    /// out of order is still inserted where it belongs.
    pub fn insert_in_order(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        self.insert_locked(user_key, seq, kind, value, true);
    }

    fn insert_locked(
        &self,
        user_key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
        in_order: bool,
    ) {
        let trailer = key::pack_trailer(seq, kind as u8).to_le_bytes();
        // The filter before the entry is published: a reader that finds the entry must also
        // pass the filter. Under the list's writer lock, which `KeyFilter::add` requires.
        let hash = self.filter.as_ref().map(|_| xxh3_64(user_key));
        let before_publish = || {
            if let (Some(filter), Some(hash)) = (&self.filter, hash) {
                filter.add(hash);
            }
            // Under the writer lock: a load and a store, not a compare-and-swap loop.
            if seq > self.counts.max_seq.load(AtomicOrdering::Relaxed) {
                self.counts.max_seq.store(seq, AtomicOrdering::Relaxed);
            }
        };
        let key_parts: [&[u8]; 2] = [user_key, &trailer];
        if in_order {
            self.list.append_with(&key_parts, value, before_publish);
        } else {
            self.list.insert_with(&key_parts, value, before_publish);
        }
        self.count_entry(user_key, kind, value);
    }

    /// [`Memtable::insert`] beside other threads inserting the same way (RocksDB's
    /// `allow_concurrent_memtable_write`): the filter's bits are set with atomic ors and the
    /// entry linked in without the list's writer lock. The entry is left out of the memtable's
    /// counts: the caller adds it with [`Memtable::add_counts`] before anything reads them.
    ///
    /// REQUIRES: no [`Memtable::insert`] runs at the same time.
    pub fn insert_concurrently(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let trailer = key::pack_trailer(seq, kind as u8).to_le_bytes();
        let hash = self.filter.as_ref().map(|_| xxh3_64(user_key));
        self.list
            .insert_concurrently(&[user_key, &trailer], value, || {
                if let (Some(filter), Some(hash)) = (&self.filter, hash) {
                    filter.add_concurrently(hash);
                }
            });
    }

    /// Adds entries inserted with [`Memtable::insert_concurrently`] to the memtable's counts
    /// (its length, charge, tombstones, merges and largest sequence number).
    pub fn add_counts(&self, counts: &EntryCounts) {
        if counts.entries == 0 {
            return;
        }
        self.list.add_len(counts.entries as usize);
        self.add_sizes(counts);
        self.counts
            .max_seq
            .fetch_max(counts.max_seq, AtomicOrdering::Relaxed);
    }

    /// Adds `counts`' bytes charged, user bytes, tombstones and merges.
    fn add_sizes(&self, counts: &EntryCounts) {
        let c = &self.counts;
        c.bytes.fetch_add(counts.bytes, AtomicOrdering::Relaxed);
        c.user_bytes
            .fetch_add(counts.user_bytes, AtomicOrdering::Relaxed);
        if counts.tombstones > 0 {
            c.tombstones
                .fetch_add(counts.tombstones, AtomicOrdering::Relaxed);
        }
        if counts.merges > 0 {
            c.merges.fetch_add(counts.merges, AtomicOrdering::Relaxed);
        }
    }

    /// Counts one entry inserted alone (its length the list counted itself, its sequence number
    /// was set under the list's lock).
    fn count_entry(&self, user_key: &[u8], kind: ValueKind, value: &[u8]) {
        let mut counts = EntryCounts::default();
        counts.add(user_key, 0, kind, value);
        self.add_sizes(&counts);
    }

    /// Merge operands inserted.
    pub fn merge_count(&self) -> u64 {
        self.counts.merges.load(AtomicOrdering::Relaxed)
    }

    /// The newest entry of `user_key` with a sequence number ≤ `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(SeqNo, ValueKind, Bytes)> {
        self.newest_at(user_key, snapshot)
            .map(|(seq, kind, value)| (seq, kind, Bytes::copy_from_slice(value)))
    }

    /// Whether the memtable holds the entry of `user_key` at exactly `seq`.
    pub fn contains(&self, user_key: &[u8], seq: SeqNo) -> bool {
        self.newest_at(user_key, seq)
            .is_some_and(|(found_seq, ..)| found_seq == seq)
    }

    /// [`Memtable::get`], the value borrowed from the list.
    fn newest_at(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(SeqNo, ValueKind, &[u8])> {
        if let Some(filter) = &self.filter {
            if !filter.may_contain(xxh3_64(user_key)) {
                return None;
            }
        }
        let trailer = key::pack_trailer(snapshot, key::SEEK_KIND);
        let mut c = Cursor::default();
        c.seek_by(&self.list, |k| compare_with(k, user_key, trailer));
        if !c.valid() {
            return None;
        }
        let (found, seq, kind) = key::parse_internal_key(c.key(&self.list))?;
        (found == user_key).then(|| (seq, kind, c.value(&self.list)))
    }

    /// Records that the writes with sequence numbers `first..=last` were left out of the WAL.
    /// Groups come in sequence order, so a range right after the last one extends it.
    pub fn note_unlogged(&self, first: SeqNo, last: SeqNo) {
        let mut ranges = self.unlogged.lock();
        match ranges.last_mut() {
            Some(prev) if prev.1 + 1 == first => prev.1 = last,
            _ => ranges.push((first, last)),
        }
    }

    /// The sequence-number ranges of writes left out of the WAL (ascending, inclusive).
    pub fn unlogged_ranges(&self) -> Vec<(SeqNo, SeqNo)> {
        self.unlogged.lock().clone()
    }

    /// Whether every entry was written without the WAL: a memtable's writes take one sequence
    /// number per entry, so its ranges then cover as many numbers as it has entries (a copy
    /// made only of such memtables keeps their ranges and holds no more).
    pub fn wholly_unlogged(&self) -> bool {
        let covered: u64 = self
            .unlogged
            .lock()
            .iter()
            .map(|&(first, last)| last - first + 1)
            .sum();
        covered >= self.len() as u64 + self.range_deletion_count()
    }

    /// Sets the ranges of writes left out of the WAL: those of the memtables a copy was made
    /// of, or none once they were logged.
    pub fn set_unlogged_ranges(&self, mut ranges: Vec<(SeqNo, SeqNo)>) {
        ranges.sort_unstable();
        *self.unlogged.lock() = ranges;
    }

    /// The largest sequence number inserted (0 when empty).
    pub fn max_seq(&self) -> SeqNo {
        self.counts.max_seq.load(AtomicOrdering::Relaxed)
    }

    /// Bytes charged to the buffer (what is compared with the write-buffer size): every
    /// entry's internal key and value plus [`ENTRY_OVERHEAD`].
    pub fn approximate_size(&self) -> u64 {
        self.counts.bytes.load(AtomicOrdering::Relaxed)
    }

    /// Bytes the memtable really holds: the arena (within a fraction of a percent of
    /// [`Memtable::approximate_size`] once it holds many entries) and the key filter.
    pub fn memory_usage(&self) -> u64 {
        let filter = self.filter.as_ref().map_or(0, |f| f.blocks.len() * 64);
        (self.list.memory_usage() + filter) as u64
    }

    /// User key+value bytes inserted.
    pub fn user_bytes(&self) -> u64 {
        self.counts.user_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Entries inserted.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether nothing was inserted, neither an entry nor a range deletion.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && self.range_deletion_count() == 0
    }

    /// Tombstones inserted.
    pub fn tombstones(&self) -> u64 {
        self.counts.tombstones.load(AtomicOrdering::Relaxed)
    }

    /// Smallest and largest user keys, if any; with range deletions, the keys of their
    /// ranges too, ends counted in (as a table holding them counts them).
    pub fn key_range(&self) -> Option<(Bytes, Bytes)> {
        let mut c = Cursor::default();
        c.seek_to_first(&self.list);
        let entries = c.valid().then(|| {
            let lo = Bytes::copy_from_slice(key::user_key(c.key(&self.list)));
            c.seek_to_last(&self.list);
            let hi = Bytes::copy_from_slice(key::user_key(c.key(&self.list)));
            (lo, hi)
        });
        let ranges = self.range_deletions();
        let ranges = ranges
            .as_ref()
            .and_then(|f| f.bounds())
            .map(|(lo, hi)| (lo.clone(), hi.clone()));
        match (entries, ranges) {
            (Some((lo, hi)), Some((rlo, rhi))) => Some((lo.min(rlo), hi.max(rhi))),
            (one, other) => one.or(other),
        }
    }

    /// Every entry in order, as (internal key, value), borrowed from the memtable: what a
    /// copy of it logs again without copying the entries first.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let mut cursor = Cursor::default();
        cursor.seek_to_first(&self.list);
        std::iter::from_fn(move || {
            if !cursor.valid() {
                return None;
            }
            let entry = (cursor.key(&self.list), cursor.value(&self.list));
            cursor.next(&self.list);
            Some(entry)
        })
    }

    /// A cursor over the entries. It holds the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemtableIterator {
        MemtableIterator {
            mem: Arc::clone(self),
            cursor: Cursor::default(),
            walk: None,
        }
    }
}

/// A cursor over a memtable: a position in its skip list, whose entries it lends without
/// copying (the `Arc` keeps the list's arena alive).
pub struct MemtableIterator {
    mem: Arc<Memtable>,
    cursor: Cursor,
    /// After `seek_to_first`, until another positioning call: a [`Walk`] that reads ahead
    /// (flushes read whole memtables this way).
    walk: Option<Walk>,
}

impl InternalIterator for MemtableIterator {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let walk = Walk::new(&self.mem.list);
        self.cursor = walk.cursor();
        self.walk = Some(walk);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.walk = None;
        self.cursor.seek_to_last(&self.mem.list);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.walk = None;
        self.cursor.seek(&self.mem.list, target);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.walk = None;
        self.cursor.seek_for_prev(&self.mem.list, target);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.cursor.valid() {
            match &mut self.walk {
                Some(walk) => {
                    walk.next();
                    self.cursor = walk.cursor();
                }
                None => self.cursor.next(&self.mem.list),
            }
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.walk = None;
        if self.cursor.valid() {
            self.cursor.prev(&self.mem.list);
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        if self.cursor.valid() {
            self.cursor.key(&self.mem.list)
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.cursor.valid() {
            self.cursor.value(&self.mem.list)
        } else {
            &[]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(it: &mut MemtableIterator) -> Vec<(Vec<u8>, SeqNo)> {
        let mut out = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            let (k, s, _) = key::parse_internal_key(it.key()).unwrap();
            out.push((k.to_vec(), s));
            it.next().unwrap();
        }
        out
    }

    #[test]
    fn get_sees_the_newest_version_at_a_snapshot() {
        let m = Memtable::new(1);
        m.insert(b"a", 1, ValueKind::Put, b"a1");
        m.insert(b"a", 5, ValueKind::Put, b"a5");
        m.insert(b"a", 7, ValueKind::Delete, b"");
        m.insert(b"ab", 2, ValueKind::Put, b"ab2");
        assert_eq!(m.get(b"a", 9).map(|e| e.1), Some(ValueKind::Delete));
        assert_eq!(m.get(b"a", 6).map(|e| e.2), Some(Bytes::from("a5")));
        assert_eq!(m.get(b"a", 4).map(|e| e.2), Some(Bytes::from("a1")));
        assert_eq!(m.get(b"a", 0), None);
        assert_eq!(m.get(b"b", 9), None);
        assert_eq!(m.get(b"", 9), None);
        assert_eq!(m.len(), 4);
        assert_eq!(m.tombstones(), 1);
        assert_eq!(m.key_range(), Some((Bytes::from("a"), Bytes::from("ab"))));
    }

    #[test]
    fn the_key_filter_passes_every_stored_key_and_few_others() {
        let m = Memtable::with_filter(1, 64 << 10); // 512 Kbit for 40,000 keys: 13 bits each
        for i in 0..40_000u64 {
            m.insert(&(i * 2).to_be_bytes(), i + 1, ValueKind::Put, b"v");
        }
        for i in 0..40_000u64 {
            assert!(m.get(&(i * 2).to_be_bytes(), key::MAX_SEQNO).is_some());
        }
        let filter = m.filter.as_ref().unwrap();
        let passed = (0..40_000u64)
            .filter(|i| filter.may_contain(xxh3_64(&(i * 2 + 1).to_be_bytes())))
            .count();
        // A blocked filter at 13 bits per key and 6 probes: well under 1%.
        assert!(passed < 400, "{passed} false positives in 40,000");
        assert_eq!(m.memory_usage() - m.list.memory_usage() as u64, 64 << 10);
    }

    #[test]
    fn charged_bytes_track_the_arena_and_rocksdb_s_per_entry_cost() {
        let m = Memtable::new(1);
        for i in 0..200_000u64 {
            m.insert(
                &(i * 7919).to_be_bytes(),
                i + 1,
                ValueKind::Put,
                &[3u8; 100],
            );
        }
        let charged = m.approximate_size() as f64;
        let arena = m.memory_usage() as f64;
        // Each node: 2 links on average (16 B), a 4-byte header, 116 B of key and value: 136 B
        // against 138 charged, so a full buffer holds no more memory than it is charged for.
        assert!(
            (0.96..1.0).contains(&(arena / charged)),
            "{charged} vs {arena}"
        );
        // 8-byte keys, 100-byte values: 8 + 8 + 100 + 22 bytes each.
        assert_eq!(m.approximate_size(), 200_000 * 138);
    }

    #[test]
    fn cursor_moves_both_ways_and_changes_direction() {
        let m = Arc::new(Memtable::new(1));
        for i in 0..300u32 {
            m.insert(
                format!("k{i:04}").as_bytes(),
                u64::from(i) + 1,
                ValueKind::Put,
                b"v",
            );
        }
        let mut it = m.iter();
        let all = collect(&mut it);
        assert_eq!(all.len(), 300);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        // Walk backwards from the end.
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push(key::user_key(it.key()).to_vec());
            it.prev().unwrap();
        }
        assert_eq!(back.len(), 300);
        assert_eq!(back[0], b"k0299".to_vec());
        // Change direction in the middle.
        it.seek(&key::seek_key(b"k0100", key::MAX_SEQNO)).unwrap();
        assert_eq!(key::user_key(it.key()), b"k0100");
        it.prev().unwrap();
        assert_eq!(key::user_key(it.key()), b"k0099");
        it.next().unwrap();
        assert_eq!(key::user_key(it.key()), b"k0100");
        it.seek_for_prev(&key::seek_key(b"k0150x", 0)).unwrap();
        assert_eq!(key::user_key(it.key()), b"k0150");
        it.seek(&key::seek_key(b"zzz", key::MAX_SEQNO)).unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn concurrent_inserts_are_all_visible() {
        // Both ways: serialized by the list's lock, and linked concurrently.
        for concurrently in [false, true] {
            // A small filter, so that the writers race for the same words of it.
            let m = Arc::new(Memtable::with_filter(1, 4096));
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let m = &m;
                    s.spawn(move || {
                        for i in 0..5000u64 {
                            let seq = t * 5000 + i + 1;
                            let k = format!("k{i}-{t}");
                            if concurrently {
                                m.insert_concurrently(k.as_bytes(), seq, ValueKind::Put, b"x");
                                let mut counts = EntryCounts::default();
                                counts.add(k.as_bytes(), seq, ValueKind::Put, b"x");
                                m.add_counts(&counts);
                            } else {
                                m.insert(k.as_bytes(), seq, ValueKind::Put, b"x");
                            }
                        }
                    });
                }
            });
            assert_eq!(m.len(), 20_000);
            assert_eq!(m.max_seq(), 20_000);
            // Every key passes the filter and is found with its own sequence number.
            for t in 0..4u64 {
                for i in 0..5000u64 {
                    let k = format!("k{i}-{t}");
                    let found = m.get(k.as_bytes(), key::MAX_SEQNO).map(|e| e.0);
                    assert_eq!(
                        found,
                        Some(t * 5000 + i + 1),
                        "{k}, concurrently: {concurrently}"
                    );
                }
            }
        }
    }
}
