//! Blocks: sequences of key/value entries with key prefix compression and restart points.
//!
//! ```text
//! entry*    : varint shared | varint unshared | varint value_len | key[shared..] | value
//! restarts  : u32 LE offset of each restart entry (the first is 0), ascending
//! count     : u32 LE number of restarts
//! ```
//!
//! An entry's key is the first `shared` bytes of the previous entry's key followed by the
//! `unshared` bytes stored in the entry. Every `restart_interval`-th entry is a restart point
//! stored with `shared = 0`, so its key can be read in place: a seek binary-searches the restart
//! keys without copying anything, then decodes forward from one restart point.
//!
//! The same format holds data blocks (internal keys), the index (one restart per entry so every
//! index key can be binary-searched in place) and the properties block (property names).

use std::cmp::Ordering;

use bytes::Bytes;

use super::coding::{get_u32_le, get_varint, put_varint};

/// A byte range `start..end` within a block.
pub(crate) type Span = (usize, usize);

/// The decoded header of one entry.
struct EntryHeader {
    /// Bytes shared with the previous key.
    shared: usize,
    /// Where the stored key suffix is.
    key: Span,
    /// Where the value is (the next entry starts at its end).
    value: Span,
}

/// Why a block failed to decode, and where (a byte offset within the decoded block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeError {
    /// Offset within the decoded block contents.
    pub offset: usize,
    /// What was wrong.
    pub reason: &'static str,
}

impl DecodeError {
    fn at(offset: usize, reason: &'static str) -> Self {
        DecodeError { offset, reason }
    }
}

/// Accumulates entries for one block; reused from block to block so steady-state `add` does
/// not allocate.
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: u64,
}

impl BlockBuilder {
    /// An empty builder placing a restart point every `restart_interval` (≥ 1) entries.
    pub(crate) fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. REQUIRES: the block stays below 4 GiB (offsets are u32); callers cap
    /// block and entry sizes to guarantee it.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.since_restart < self.restart_interval {
            common_prefix_len(&self.last_key, key)
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        };
        let unshared = &key[shared..];
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, unshared.len() as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Bytes the finished block will take (before compression).
    pub(crate) fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// At least the bytes the finished block would take with `key` and `value` added (three
    /// varints of at most 5 bytes each, and perhaps a new restart point).
    pub(crate) fn size_with(&self, key: &[u8], value: &[u8]) -> usize {
        self.size_estimate() + 15 + key.len() + value.len() + 4
    }

    /// Entries added since the last reset.
    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    /// Whether no entry was added since the last reset.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Appends the restart array and returns the finished block. Call `reset` before reuse.
    /// An empty block has no restart point (a restart must point at an entry).
    pub(crate) fn finish(&mut self) -> &[u8] {
        let restarts: &[u32] = if self.entries == 0 {
            &[]
        } else {
            &self.restarts
        };
        for &r in restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&(restarts.len() as u32).to_le_bytes());
        &self.buf
    }

    /// Empties the builder, keeping its buffers.
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
    }
}

/// Length of the longest common prefix of `a` and `b`.
#[inline]
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Splits an internal key into its user key and trailer. Keys shorter than a trailer cannot
/// come from a valid table; they are treated as a bare user key with the largest trailer (the
/// first position of that user key) so comparisons stay total.
#[inline]
pub(crate) fn split_internal_key(key: &[u8]) -> (&[u8], u64) {
    match key.len().checked_sub(8) {
        Some(n) => {
            let (user, t) = key.split_at(n);
            let trailer = u64::from_le_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]);
            (user, trailer)
        }
        None => (key, u64::MAX),
    }
}

/// Orders the internal key `key` against the target (`user_key`, `trailer`) without building
/// the target as one byte string: user key ascending, then trailer descending.
#[inline]
pub(crate) fn cmp_to_target(key: &[u8], user_key: &[u8], trailer: u64) -> Ordering {
    let (k_user, k_trailer) = split_internal_key(key);
    k_user.cmp(user_key).then_with(|| trailer.cmp(&k_trailer))
}

/// A decoded block, checked to have a well-formed restart array. Entries are decoded lazily
/// (and checked then) by [`Cursor`].
#[derive(Debug)]
pub(crate) struct Block {
    data: Bytes,
    /// Where the restart array starts; entries occupy `data[..restarts_offset]`.
    restarts_offset: usize,
    num_restarts: usize,
}

impl Block {
    /// Checks the restart array of `data`: its count fits in the block, offsets start at 0,
    /// strictly increase and point into the entry area.
    pub(crate) fn new(data: Bytes) -> Result<Block, DecodeError> {
        let len = data.len();
        let count_at = len
            .checked_sub(4)
            .ok_or(DecodeError::at(0, "block shorter than its restart count"))?;
        let num_restarts = get_u32_le(&data, count_at)
            .ok_or(DecodeError::at(count_at, "unreadable restart count"))?
            as usize;
        let restarts_offset = num_restarts
            .checked_mul(4)
            .and_then(|n| count_at.checked_sub(n))
            .ok_or(DecodeError::at(
                count_at,
                "restart count larger than the block",
            ))?;
        if num_restarts == 0 && restarts_offset != 0 {
            return Err(DecodeError::at(count_at, "entries without restart points"));
        }
        let mut previous: Option<usize> = None;
        for i in 0..num_restarts {
            let at = restarts_offset + 4 * i;
            let r =
                get_u32_le(&data, at).ok_or(DecodeError::at(at, "unreadable restart"))? as usize;
            let ok = match previous {
                None => r == 0,
                Some(p) => r > p,
            };
            if !ok || r >= restarts_offset {
                return Err(DecodeError::at(at, "restart offsets out of order or range"));
            }
            previous = Some(r);
        }
        Ok(Block {
            data,
            restarts_offset,
            num_restarts,
        })
    }

    /// The whole decoded block.
    pub(crate) fn data(&self) -> &Bytes {
        &self.data
    }

    /// Whether the block holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.num_restarts == 0
    }

    /// Number of restart points.
    pub(crate) fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// Offset of restart point `i`. REQUIRES `i < num_restarts` (checked by `new`; out of range
    /// gives the end of the entries, which every caller treats as "no entry").
    #[inline]
    pub(crate) fn restart(&self, i: usize) -> usize {
        i.checked_mul(4)
            .and_then(|o| self.restarts_offset.checked_add(o))
            .and_then(|at| get_u32_le(&self.data, at))
            .map_or(self.restarts_offset, |r| r as usize)
    }

    /// End of the entry area.
    pub(crate) fn entries_end(&self) -> usize {
        self.restarts_offset
    }

    /// Decodes the header of the entry at `pos`.
    #[inline]
    fn entry_at(&self, pos: usize) -> Result<EntryHeader, DecodeError> {
        let area = self.data.get(..self.restarts_offset).unwrap_or_default();
        let mut p = pos;
        let bad = DecodeError::at(pos, "malformed entry header");
        let shared = get_varint(area, &mut p).ok_or(bad)?;
        let unshared = get_varint(area, &mut p).ok_or(bad)?;
        let value_len = get_varint(area, &mut p).ok_or(bad)?;
        let shared = usize::try_from(shared).map_err(|_| bad)?;
        let key_end = usize::try_from(unshared)
            .ok()
            .and_then(|u| p.checked_add(u))
            .ok_or(bad)?;
        let value_end = usize::try_from(value_len)
            .ok()
            .and_then(|v| key_end.checked_add(v))
            .ok_or(bad)?;
        if value_end > area.len() {
            return Err(DecodeError::at(pos, "entry runs past the end of the block"));
        }
        Ok(EntryHeader {
            shared,
            key: (p, key_end),
            value: (key_end, value_end),
        })
    }

    /// The key of restart point `i`, read in place (restart entries share nothing).
    #[inline]
    pub(crate) fn restart_key(&self, i: usize) -> Result<&[u8], DecodeError> {
        let pos = self.restart(i);
        let entry = self.entry_at(pos)?;
        if entry.shared != 0 {
            return Err(DecodeError::at(pos, "restart entry shares a prefix"));
        }
        Ok(self.data.get(entry.key.0..entry.key.1).unwrap_or_default())
    }

    /// The key and value ranges of the entry at `pos`, which must share nothing with its
    /// predecessor (every entry of a block built with restart interval 1); the next entry starts
    /// where the value ends.
    pub(crate) fn standalone_entry(&self, pos: usize) -> Result<(Span, Span), DecodeError> {
        let EntryHeader { shared, key, value } = self.entry_at(pos)?;
        if shared != 0 {
            return Err(DecodeError::at(
                pos,
                "entry shares a prefix in a block without one",
            ));
        }
        Ok((key, value))
    }
}

/// A position in a block, with the current key rebuilt in a buffer that is reused across
/// moves and across blocks (pass the block to every call). Entries are checked as they are
/// decoded.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    key: Vec<u8>,
    /// Offset of the current entry.
    current: usize,
    /// Offset of the entry after the current one.
    next: usize,
    value: Span,
    /// Index of the restart interval holding the current entry.
    restart: usize,
    valid: bool,
}

impl Cursor {
    /// A cursor that rebuilds keys in `buf` (its contents are discarded).
    pub(crate) fn with_buffer(mut buf: Vec<u8>) -> Self {
        buf.clear();
        Cursor {
            key: buf,
            ..Cursor::default()
        }
    }

    /// Gives the key buffer back (for reuse by the next cursor).
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.key
    }

    /// Whether the cursor is on an entry.
    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.valid
    }

    /// Whether the cursor is on the block's first entry.
    pub(crate) fn at_first(&self) -> bool {
        self.valid && self.current == 0
    }

    /// Leaves the cursor on no entry.
    pub(crate) fn invalidate(&mut self) {
        self.valid = false;
    }

    /// The current key (meaningful only while valid).
    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value within `block` (meaningful only while valid).
    #[inline]
    pub(crate) fn value<'b>(&self, block: &'b Block) -> &'b [u8] {
        block
            .data
            .get(self.value.0..self.value.1)
            .unwrap_or_default()
    }

    /// The byte range of the current value within the block's data.
    pub(crate) fn value_range(&self) -> Span {
        self.value
    }

    /// Positions before restart point `i`, so the next `advance` decodes it.
    fn start_at_restart(&mut self, block: &Block, i: usize) {
        self.key.clear();
        self.restart = i;
        self.next = block.restart(i);
        self.valid = false;
    }

    /// Decodes the entry at `self.next`; false (and invalid) at the end of the block.
    #[inline]
    fn advance(&mut self, block: &Block) -> Result<bool, DecodeError> {
        if self.next >= block.restarts_offset {
            self.valid = false;
            return Ok(false);
        }
        let pos = self.next;
        let EntryHeader {
            shared,
            key: (ks, ke),
            value,
        } = match block.entry_at(pos) {
            Ok(e) => e,
            Err(e) => {
                self.valid = false;
                return Err(e);
            }
        };
        if shared > self.key.len() {
            self.valid = false;
            return Err(DecodeError::at(
                pos,
                "entry shares more than the previous key",
            ));
        }
        self.key.truncate(shared);
        self.key
            .extend_from_slice(block.data.get(ks..ke).unwrap_or_default());
        self.current = pos;
        self.next = value.1;
        self.value = value;
        while self.restart + 1 < block.num_restarts && block.restart(self.restart + 1) <= pos {
            self.restart += 1;
        }
        self.valid = true;
        Ok(true)
    }

    /// Moves to the first entry (invalid if the block is empty).
    pub(crate) fn seek_to_first(&mut self, block: &Block) -> Result<(), DecodeError> {
        if block.is_empty() {
            self.valid = false;
            return Ok(());
        }
        self.start_at_restart(block, 0);
        self.advance(block).map(drop)
    }

    /// Moves to the last entry (invalid if the block is empty).
    pub(crate) fn seek_to_last(&mut self, block: &Block) -> Result<(), DecodeError> {
        if block.is_empty() {
            self.valid = false;
            return Ok(());
        }
        self.start_at_restart(block, block.num_restarts - 1);
        while self.advance(block)? {
            if self.next >= block.restarts_offset {
                break;
            }
        }
        Ok(())
    }

    /// Moves to the next entry (invalid past the last).
    #[inline]
    pub(crate) fn next(&mut self, block: &Block) -> Result<(), DecodeError> {
        self.advance(block).map(drop)
    }

    /// Moves to the previous entry (invalid before the first): rescans from the closest restart
    /// point before the current entry, since entries can only be decoded forwards.
    pub(crate) fn prev(&mut self, block: &Block) -> Result<(), DecodeError> {
        let original = self.current;
        let mut r = self.restart;
        while block.restart(r) >= original {
            if r == 0 {
                self.valid = false;
                return Ok(());
            }
            r -= 1;
        }
        self.start_at_restart(block, r);
        while self.advance(block)? {
            if self.next >= original {
                break;
            }
        }
        if !self.valid || self.next != original {
            self.valid = false;
            return Err(DecodeError::at(original, "entries do not chain"));
        }
        Ok(())
    }

    /// Moves to the first entry whose key is ≥ the internal key (`user_key`, `trailer`);
    /// invalid if there is none.
    #[inline]
    pub(crate) fn seek(
        &mut self,
        block: &Block,
        user_key: &[u8],
        trailer: u64,
    ) -> Result<(), DecodeError> {
        if block.is_empty() {
            self.valid = false;
            return Ok(());
        }
        // The last restart point whose key is < the target: the answer lies after it (or at
        // restart 0 when every restart key is ≥ the target).
        let mut lo = 0;
        let mut hi = block.num_restarts - 1;
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if cmp_to_target(block.restart_key(mid)?, user_key, trailer) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.start_at_restart(block, lo);
        while self.advance(block)? {
            if cmp_to_target(&self.key, user_key, trailer) != Ordering::Less {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};
    use proptest::prelude::*;

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        let data = Bytes::copy_from_slice(b.finish());
        match Block::new(data) {
            Ok(block) => block,
            Err(e) => panic!("built block does not decode: {e:?}"),
        }
    }

    fn sample(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                let user = format!("key{:05}", i / 3);
                let seq = 1000 - (i % 3) as u64;
                (
                    internal_key(user.as_bytes(), seq, ValueKind::Put),
                    format!("v{i}").into_bytes(),
                )
            })
            .collect()
    }

    #[test]
    fn cursor_walks_both_ways_and_seeks() -> Result<(), DecodeError> {
        for interval in [1, 2, 16, 1000] {
            let entries = sample(100);
            let block = build(&entries, interval);
            let mut c = Cursor::default();
            c.seek_to_first(&block)?;
            for (k, v) in &entries {
                assert!(c.valid());
                assert_eq!(c.key(), &k[..]);
                assert_eq!(c.value(&block), &v[..]);
                c.next(&block)?;
            }
            assert!(!c.valid());
            c.seek_to_last(&block)?;
            for (k, _) in entries.iter().rev() {
                assert!(c.valid());
                assert_eq!(c.key(), &k[..]);
                c.prev(&block)?;
            }
            assert!(!c.valid());
            for (i, (k, _)) in entries.iter().enumerate() {
                let (user, t) = split_internal_key(k);
                c.seek(&block, user, t)?;
                assert_eq!(c.key(), &k[..], "exact seek {i} interval {interval}");
                // Just after this entry: the next one.
                c.seek(&block, user, t - 1)?;
                match entries.get(i + 1) {
                    Some((next, _)) => assert_eq!(c.key(), &next[..]),
                    None => assert!(!c.valid()),
                }
            }
            c.seek(&block, b"a", u64::MAX)?;
            assert_eq!(c.key(), &entries[0].0[..]);
            c.seek(&block, b"z", u64::MAX)?;
            assert!(!c.valid());
        }
        Ok(())
    }

    #[test]
    fn empty_block_has_no_entries() -> Result<(), DecodeError> {
        let mut b = BlockBuilder::new(16);
        let block = match Block::new(Bytes::copy_from_slice(b.finish())) {
            Ok(block) => block,
            Err(e) => panic!("{e:?}"),
        };
        let mut c = Cursor::default();
        c.seek_to_first(&block)?;
        assert!(!c.valid());
        c.seek_to_last(&block)?;
        assert!(!c.valid());
        c.seek(&block, b"k", 0)?;
        assert!(!c.valid());
        Ok(())
    }

    #[test]
    fn bad_restart_arrays_are_rejected() {
        // Count larger than the block.
        assert!(Block::new(Bytes::from_static(&[5, 0, 0, 0])).is_err());
        assert!(Block::new(Bytes::from_static(&[1, 2])).is_err());
        // Entries but no restart.
        assert!(Block::new(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0])).is_err());
        // First restart not at 0.
        assert!(Block::new(Bytes::from_static(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0])).is_err());
        // A restart pointing past the entries.
        assert!(Block::new(Bytes::from_static(&[
            0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0
        ]))
        .is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_the_block_decoder(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            target in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            // Bias towards a plausible restart array so the entry decoder gets exercised.
            let mut with_restarts = data.clone();
            with_restarts.extend_from_slice(&0u32.to_le_bytes());
            with_restarts.extend_from_slice(&1u32.to_le_bytes());
            for bytes in [data, with_restarts] {
                let Ok(block) = Block::new(Bytes::from(bytes)) else { continue };
                let mut c = Cursor::default();
                let mut steps = 0;
                if c.seek_to_first(&block).is_ok() {
                    while c.valid() && c.next(&block).is_ok() {
                        steps += 1;
                    }
                }
                if c.seek_to_last(&block).is_ok() {
                    while c.valid() && c.prev(&block).is_ok() {
                        steps += 1;
                    }
                }
                let (user, t) = split_internal_key(&target);
                let _ = c.seek(&block, user, t);
                // Each entry takes at least three header bytes, bounding the walk.
                prop_assert!(steps <= 2 * block.data().len());
            }
        }
    }
}
