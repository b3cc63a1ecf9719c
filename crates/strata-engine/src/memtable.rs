//! The memtable: a concurrent skip list of internal keys, the write buffer of the LSM tree.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind, TRAILER_LEN};
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Approximate per-entry bookkeeping of the skip list (node header and tower), so that buffers
/// of tiny entries still fill up.
pub const ENTRY_OVERHEAD: u64 = 48;

/// Keys and values up to these sizes live inside the skip-list node. Comparisons during a search
/// then read the node itself instead of chasing a pointer to a separate allocation (measured:
/// the pointer chase dominated inserts), and an insert makes one allocation instead of three.
const INLINE_KEY: usize = 48;
const INLINE_VALUE: usize = 128;

/// Bytes stored inline when they fit, on the heap otherwise.
#[derive(Clone, Debug)]
enum Packed<const N: usize> {
    Inline { len: u8, bytes: [u8; N] },
    Heap(Box<[u8]>),
}

impl<const N: usize> Packed<N> {
    fn new(data: &[u8]) -> Self {
        if data.len() <= N && data.len() <= usize::from(u8::MAX) {
            let mut bytes = [0u8; N];
            bytes[..data.len()].copy_from_slice(data);
            Packed::Inline {
                len: data.len() as u8,
                bytes,
            }
        } else {
            Packed::Heap(data.into())
        }
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            Packed::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Packed::Heap(b) => b,
        }
    }
}

/// An internal key in the memtable, ordered by [`key::compare_internal_keys`].
#[derive(Clone, Debug)]
struct MemKey(Packed<INLINE_KEY>);

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_slice() == other.0.as_slice()
    }
}

impl Eq for MemKey {}

impl Ord for MemKey {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        key::compare_internal_keys(self.0.as_slice(), other.0.as_slice())
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A write buffer. Inserts are lock-free and may run concurrently with reads.
#[derive(Debug)]
pub struct Memtable {
    map: SkipMap<MemKey, Packed<INLINE_VALUE>>,
    bytes: AtomicU64,
    user_bytes: AtomicU64,
    tombstones: AtomicU64,
    wal_number: u64,
}

impl Memtable {
    /// An empty memtable whose writes are logged in WAL `wal_number`.
    pub fn new(wal_number: u64) -> Self {
        Memtable {
            map: SkipMap::new(),
            bytes: AtomicU64::new(0),
            user_bytes: AtomicU64::new(0),
            tombstones: AtomicU64::new(0),
            wal_number,
        }
    }

    /// The WAL holding this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Adds an entry.
    pub fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let mut ikey = [0u8; INLINE_KEY];
        let ikey_len = user_key.len() + TRAILER_LEN;
        let key = if ikey_len <= INLINE_KEY {
            ikey[..user_key.len()].copy_from_slice(user_key);
            ikey[user_key.len()..ikey_len]
                .copy_from_slice(&key::pack_trailer(seq, kind as u8).to_le_bytes());
            MemKey(Packed::new(&ikey[..ikey_len]))
        } else {
            MemKey(Packed::new(&key::internal_key(user_key, seq, kind)))
        };
        self.map.insert(key, Packed::new(value));
        self.bytes.fetch_add(
            (ikey_len + value.len()) as u64 + ENTRY_OVERHEAD,
            Ordering::Relaxed,
        );
        self.user_bytes
            .fetch_add((user_key.len() + value.len()) as u64, Ordering::Relaxed);
        if kind == ValueKind::Delete {
            self.tombstones.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The newest entry of `user_key` with a sequence number ≤ `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(SeqNo, ValueKind, Bytes)> {
        let target = MemKey(Packed::new(&key::seek_key(user_key, snapshot)));
        let entry = self.map.lower_bound(Bound::Included(&target))?;
        let (found, seq, kind) = key::parse_internal_key(entry.key().0.as_slice())?;
        (found == user_key).then(|| (seq, kind, Bytes::copy_from_slice(entry.value().as_slice())))
    }

    /// Approximate memory used, in bytes (what is compared with the write-buffer size).
    pub fn approximate_size(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// User key+value bytes inserted.
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes.load(Ordering::Relaxed)
    }

    /// Entries inserted.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Tombstones inserted.
    pub fn tombstones(&self) -> u64 {
        self.tombstones.load(Ordering::Relaxed)
    }

    /// Smallest and largest user keys, if any.
    pub fn key_range(&self) -> Option<(Bytes, Bytes)> {
        let first = self.map.front()?;
        let last = self.map.back()?;
        let lo = Bytes::copy_from_slice(key::user_key(first.key().0.as_slice()));
        let hi = Bytes::copy_from_slice(key::user_key(last.key().0.as_slice()));
        Some((lo, hi))
    }

    /// A cursor over the entries. It holds the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemtableIterator {
        MemtableIterator {
            mem: Arc::clone(self),
            data: Vec::new(),
            entries: Vec::new(),
            index: 0,
            batch: FIRST_BATCH,
        }
    }
}

/// How many entries a cursor copies out of the skip list right after a seek. Most seeks (point
/// scans, short range scans where the memtable holds a sliver of the keys) read one or two
/// entries from here, so copying more is wasted work.
const FIRST_BATCH: usize = 4;

/// The most entries one refill copies: each refill is one O(log n) search, after which moves are
/// array steps, so long scans grow their batch up to this.
const MAX_BATCH: usize = 64;

/// A cursor over a memtable. It copies small runs of entries out of the skip list into one flat
/// buffer, because skip-list entries borrow the map and cannot live in an owned cursor.
pub struct MemtableIterator {
    mem: Arc<Memtable>,
    /// Keys and values of the prefetched entries, back to back.
    data: Vec<u8>,
    /// (key start, key end = value start, value end) into `data`, in key order.
    entries: Vec<(usize, usize, usize)>,
    index: usize,
    /// Entries the next refill copies: reset by seeks, doubled by each refill that continues a
    /// scan, capped at [`MAX_BATCH`].
    batch: usize,
}

impl MemtableIterator {
    fn push(&mut self, key: &[u8], value: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(key);
        let mid = self.data.len();
        self.data.extend_from_slice(value);
        self.entries.push((start, mid, self.data.len()));
    }

    fn clear(&mut self) {
        self.data.clear();
        self.entries.clear();
        self.index = 0;
    }

    /// Sets the batch for the next refill: a seek starts small, a continuing scan doubles.
    fn size_batch(&mut self, continuing: bool) {
        self.batch = if continuing {
            (self.batch * 2).min(MAX_BATCH)
        } else {
            FIRST_BATCH
        };
    }

    fn fill_forward(&mut self, from: Bound<&MemKey>) {
        self.clear();
        let mem = Arc::clone(&self.mem);
        for e in mem.map.range((from, Bound::Unbounded)).take(self.batch) {
            self.push(e.key().0.as_slice(), e.value().as_slice());
        }
    }

    fn fill_backward(&mut self, to: Bound<&MemKey>) {
        self.clear();
        let mem = Arc::clone(&self.mem);
        let mut picked: Vec<_> = mem
            .map
            .range((Bound::Unbounded, to))
            .rev()
            .take(self.batch)
            .collect();
        // Keep the buffer in key order; the cursor sits on its last element.
        picked.reverse();
        for e in &picked {
            self.push(e.key().0.as_slice(), e.value().as_slice());
        }
        self.index = self.entries.len().saturating_sub(1);
    }

    fn current_key(&self) -> Option<MemKey> {
        self.entries
            .get(self.index)
            .map(|&(a, b, _)| MemKey(Packed::new(&self.data[a..b])))
    }
}

impl InternalIterator for MemtableIterator {
    fn valid(&self) -> bool {
        self.index < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.size_batch(false);
        self.fill_forward(Bound::Unbounded);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.size_batch(false);
        self.fill_backward(Bound::Unbounded);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let t = MemKey(Packed::new(target));
        self.size_batch(false);
        self.fill_forward(Bound::Included(&t));
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let t = MemKey(Packed::new(target));
        self.size_batch(false);
        self.fill_backward(Bound::Included(&t));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        // The buffer is always in key order around the cursor, whichever way it was filled.
        if self.index + 1 < self.entries.len() {
            self.index += 1;
            return Ok(());
        }
        self.size_batch(true);
        match self.current_key() {
            Some(k) => self.fill_forward(Bound::Excluded(&k)),
            None => self.clear(),
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if self.index > 0 && self.index < self.entries.len() {
            self.index -= 1;
            return Ok(());
        }
        self.size_batch(true);
        match self.current_key() {
            Some(k) => self.fill_backward(Bound::Excluded(&k)),
            None => self.clear(),
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.entries
            .get(self.index)
            .map_or(&[], |&(a, b, _)| &self.data[a..b])
    }

    fn value(&self) -> &[u8] {
        self.entries
            .get(self.index)
            .map_or(&[], |&(_, b, c)| &self.data[b..c])
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
    fn seeks_copy_a_small_batch_and_scans_grow_it() {
        let m = Arc::new(Memtable::new(1));
        for i in 0..500u32 {
            m.insert(format!("k{i:04}").as_bytes(), 1, ValueKind::Put, b"v");
        }
        let mut it = m.iter();
        it.seek(&key::seek_key(b"k0010", key::MAX_SEQNO)).unwrap();
        assert_eq!(it.entries.len(), FIRST_BATCH);
        // Walk forward: every refill doubles the batch until the cap.
        let mut sizes = Vec::new();
        for _ in 0..400 {
            if it.index == 0 {
                sizes.push(it.entries.len());
            }
            it.next().unwrap();
        }
        assert_eq!(sizes[..5], [4, 8, 16, 32, 64]);
        assert!(sizes[5..].iter().all(|&n| n == MAX_BATCH));
        assert_eq!(key::user_key(it.key()), b"k0410");
        // A new seek starts small again, in either direction.
        it.seek_for_prev(&key::seek_key(b"k0200", 0)).unwrap();
        assert_eq!(it.entries.len(), FIRST_BATCH);
        assert_eq!(key::user_key(it.key()), b"k0200");
    }

    #[test]
    fn cursor_moves_both_ways_across_prefetch_boundaries() {
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
        let m = Arc::new(Memtable::new(1));
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let m = &m;
                s.spawn(move || {
                    for i in 0..1000u64 {
                        let seq = t * 1000 + i + 1;
                        m.insert(format!("t{t}-{i}").as_bytes(), seq, ValueKind::Put, b"x");
                    }
                });
            }
        });
        assert_eq!(m.len(), 4000);
        assert_eq!(m.get(b"t3-999", key::MAX_SEQNO).map(|e| e.0), Some(4000));
    }
}
