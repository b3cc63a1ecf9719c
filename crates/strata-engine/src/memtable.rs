//! The memtable: a concurrent skip list of internal keys, the write buffer of the LSM tree.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, InternalKey, SeqNo, ValueKind, TRAILER_LEN};
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Approximate per-entry bookkeeping of the skip list (node, pointers, two `Bytes` handles), so
/// that buffers of tiny entries still fill up.
const ENTRY_OVERHEAD: u64 = 64;

/// A write buffer. Inserts are lock-free and may run concurrently with reads.
#[derive(Debug)]
pub struct Memtable {
    map: SkipMap<InternalKey, Bytes>,
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

    /// Adds an entry. One allocation holds key and value; the map stores slices of it.
    pub fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let ikey_len = user_key.len() + TRAILER_LEN;
        let mut buf = Vec::with_capacity(ikey_len + value.len());
        key::append_internal_key(&mut buf, user_key, seq, kind as u8);
        buf.extend_from_slice(value);
        let all = Bytes::from(buf);
        let ikey = all.slice(..ikey_len);
        let val = all.slice(ikey_len..);
        self.map.insert(InternalKey(ikey), val);
        self.bytes
            .fetch_add(all.len() as u64 + ENTRY_OVERHEAD, Ordering::Relaxed);
        self.user_bytes
            .fetch_add((user_key.len() + value.len()) as u64, Ordering::Relaxed);
        if kind == ValueKind::Delete {
            self.tombstones.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The newest entry of `user_key` with a sequence number ≤ `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(SeqNo, ValueKind, Bytes)> {
        let target = InternalKey(Bytes::from(key::seek_key(user_key, snapshot)));
        let entry = self.map.lower_bound(Bound::Included(&target))?;
        let (found, seq, kind) = key::parse_internal_key(&entry.key().0)?;
        (found == user_key).then(|| (seq, kind, entry.value().clone()))
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
        let lo = first.key().0.slice(..first.key().0.len() - TRAILER_LEN);
        let hi = last.key().0.slice(..last.key().0.len() - TRAILER_LEN);
        Some((lo, hi))
    }

    /// A cursor over the entries. It holds the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemtableIterator {
        MemtableIterator {
            mem: Arc::clone(self),
            buffer: Vec::new(),
            index: 0,
        }
    }
}

/// How many entries a cursor copies out of the skip list per step: each refill is one O(log n)
/// search, after which moves are array steps.
const PREFETCH: usize = 64;

/// A cursor over a memtable. It copies small runs of entries (cheap `Bytes` clones) out of the
/// skip list, because skip-list entries borrow the map and cannot live in an owned cursor.
pub struct MemtableIterator {
    mem: Arc<Memtable>,
    buffer: Vec<(Bytes, Bytes)>,
    index: usize,
}

impl MemtableIterator {
    fn fill_forward(&mut self, from: Bound<&InternalKey>) {
        self.buffer.clear();
        self.index = 0;
        for e in self.mem.map.range((from, Bound::Unbounded)).take(PREFETCH) {
            self.buffer.push((e.key().0.clone(), e.value().clone()));
        }
    }

    fn fill_backward(&mut self, to: Bound<&InternalKey>) {
        self.buffer.clear();
        for e in self
            .mem
            .map
            .range((Bound::Unbounded, to))
            .rev()
            .take(PREFETCH)
        {
            self.buffer.push((e.key().0.clone(), e.value().clone()));
        }
        // Keep the buffer in key order; the cursor sits on its last element.
        self.buffer.reverse();
        self.index = self.buffer.len().saturating_sub(1);
    }

    fn current(&self) -> Option<&(Bytes, Bytes)> {
        self.buffer.get(self.index)
    }
}

impl InternalIterator for MemtableIterator {
    fn valid(&self) -> bool {
        self.index < self.buffer.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.fill_forward(Bound::Unbounded);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.fill_backward(Bound::Unbounded);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let t = InternalKey(Bytes::copy_from_slice(target));
        self.fill_forward(Bound::Included(&t));
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let t = InternalKey(Bytes::copy_from_slice(target));
        self.fill_backward(Bound::Included(&t));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        // The buffer is always in key order around the cursor, whichever way it was filled.
        if self.index + 1 < self.buffer.len() {
            self.index += 1;
            return Ok(());
        }
        match self.current().map(|(k, _)| InternalKey(k.clone())) {
            Some(k) => self.fill_forward(Bound::Excluded(&k)),
            None => self.buffer.clear(),
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if self.index > 0 && self.index < self.buffer.len() {
            self.index -= 1;
            return Ok(());
        }
        match self.current().map(|(k, _)| InternalKey(k.clone())) {
            Some(k) => self.fill_backward(Bound::Excluded(&k)),
            None => self.buffer.clear(),
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.current().map_or(&[], |(_, v)| v)
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
