//! A table's index, decoded and checked at open: every data block's last key and place.

use std::cmp::Ordering;

use bytes::Bytes;

use super::block::{cmp_to_target, split_internal_key};
use super::compress::BLOCK_TRAILER_LEN;
use super::file::{ReadPurpose, TableFile};
use super::format::{
    decode_index, BlockHandle, IndexValue, FORMAT_COMPACT_INDEX, FORMAT_WITH_REFERENCES,
};
use crate::error::{Error, Result};
use crate::key::{compare_internal_keys, parse_internal_key};

/// One data block as described by the index.
#[derive(Clone, Copy, Debug)]
pub(super) struct IndexEntry {
    /// The block's last internal key: a byte range of [`Index::keys`].
    pub(super) last_key: (u32, u32),
    /// Where the block is, with its size (without the trailer).
    pub(super) offset: u64,
    pub(super) size: u32,
    /// Entries in the block.
    pub(super) entries: u32,
    /// The file holding the block: 0 for this table's own file.
    pub(super) file: u64,
}

impl IndexEntry {
    pub(super) fn handle(&self) -> BlockHandle {
        BlockHandle {
            offset: self.offset,
            size: u64::from(self.size),
        }
    }
}

/// The index, decoded and checked at open and kept in memory: every block's exact last
/// internal key, location and entry count (~64 bytes per block with 16-byte keys).
pub(super) struct Index {
    /// The blocks' last internal keys, back to back.
    keys: Bytes,
    pub(super) entries: Vec<IndexEntry>,
    /// `key_prefix` of each block's last user key. Searching this dense array first keeps a
    /// lookup's binary search in a few cache lines instead of touching two scattered places
    /// (entry and key bytes) per step; full keys are compared only among equal prefixes.
    prefixes: Vec<u64>,
}

/// The first eight bytes of `user_key` as a big-endian number, zero-padded: ordering prefixes
/// never contradicts ordering the keys.
#[inline]
fn key_prefix(user_key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = user_key.len().min(8);
    b[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(b)
}

/// [`Index`] while it is being decoded.
#[derive(Default)]
struct IndexParts {
    keys: Vec<u8>,
    pub(super) entries: Vec<IndexEntry>,
    prefixes: Vec<u64>,
}

/// One index entry as any format version describes it, before the checks every version shares.
struct RawIndexEntry<'a> {
    pub(super) last_key: &'a [u8],
    handle: BlockHandle,
    pub(super) entries: u64,
    file_number: u64,
    /// The block's first user key (versions 2 and 3 only).
    first_user_key: Option<&'a [u8]>,
}

impl Index {
    /// Decodes and checks the index block: keys are valid internal keys in increasing order,
    /// the table's own blocks lie in `data_end` in file order, each block holds at least one
    /// entry, and (versions 2 and 3) first keys are consistent with last keys. Entries may name
    /// another file only from format version 3 on, and never the table's own number
    /// (`file_number`); where such blocks lie is checked when they are read.
    pub(super) fn load(
        src: &TableFile,
        handle: BlockHandle,
        data_end: u64,
        format_version: u32,
        file_number: u64,
    ) -> Result<Index> {
        let corrupt = |reason: String| Error::corruption(&src.name, handle.offset, reason);
        let mut index = IndexParts::default();
        let mut prev_block_end = 0u64;
        let mut check_and_push = |i: usize, raw: RawIndexEntry<'_>| -> Result<()> {
            if raw.file_number != 0 && format_version < FORMAT_WITH_REFERENCES {
                return Err(corrupt(format!(
                    "index entry {i} refers to a data block in file {}, which format version \
                     {format_version} does not allow",
                    raw.file_number
                )));
            }
            if raw.file_number != 0 && raw.file_number == file_number {
                return Err(corrupt(format!(
                    "index entry {i} names the table's own file {file_number} as another file"
                )));
            }
            let key = raw.last_key;
            if parse_internal_key(key).is_none() {
                return Err(corrupt(format!(
                    "index entry {i} has an invalid internal key"
                )));
            }
            let (last_user, _) = split_internal_key(key);
            if let Some(first) = raw.first_user_key {
                if first > last_user {
                    return Err(corrupt(format!("index entry {i} starts after it ends")));
                }
            }
            if let Some(prev) = index.entries.last() {
                let prev_key = slice(&index.keys, prev.last_key);
                let first_before_prev = raw
                    .first_user_key
                    .is_some_and(|first| first < split_internal_key(prev_key).0);
                if compare_internal_keys(prev_key, key) != Ordering::Less || first_before_prev {
                    return Err(corrupt(format!("index entry {i} is out of order")));
                }
            }
            let h = raw.handle;
            if raw.file_number == 0 {
                let end = h
                    .offset
                    .checked_add(h.size)
                    .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
                if h.offset < prev_block_end || end.is_none_or(|e| e > data_end) {
                    return Err(corrupt(format!(
                        "index entry {i}: data block (offset {}, size {}) overlaps another \
                         block or lies outside the data area",
                        h.offset, h.size
                    )));
                }
                prev_block_end = end.unwrap_or(data_end);
            }
            if raw.entries == 0 {
                return Err(corrupt(format!("index entry {i} describes an empty block")));
            }
            let (Ok(size), Ok(entries)) = (u32::try_from(h.size), u32::try_from(raw.entries))
            else {
                return Err(corrupt(format!(
                    "index entry {i} describes a block of {} bytes and {} entries, beyond 4 GiB \
                     or 2^32 entries",
                    h.size, raw.entries
                )));
            };
            let start = index.keys.len();
            index.keys.extend_from_slice(key);
            let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(index.keys.len()))
            else {
                return Err(corrupt("index keys larger than 4 GiB".into()));
            };
            index.prefixes.push(key_prefix(last_user));
            index.entries.push(IndexEntry {
                last_key: (start, end),
                offset: h.offset,
                size,
                entries,
                file: raw.file_number,
            });
            Ok(())
        };
        if format_version >= FORMAT_COMPACT_INDEX {
            // Decoded into `index` and dropped: a plain read, never a mapping.
            let data = src.read_block(handle, "index", ReadPurpose::Metadata)?;
            let mut i = 0usize;
            let decoded = decode_index(&data, |e| {
                let raw = RawIndexEntry {
                    last_key: e.last_key,
                    handle: e.handle,
                    entries: e.entries,
                    file_number: e.file_number,
                    first_user_key: None,
                };
                i += 1;
                check_and_push(i - 1, raw)
            })?;
            if decoded.is_none() {
                return Err(corrupt(format!("malformed index entry {i}")));
            }
        } else {
            let block = src.read_parsed_block(handle, "index", ReadPurpose::Metadata)?;
            let data = block.data();
            if u32::try_from(data.len()).is_err() {
                return Err(corrupt("index block larger than 4 GiB".into()));
            }
            for i in 0..block.num_restarts() {
                let ((ks, ke), (vs, ve)) = block
                    .standalone_entry(block.restart(i))
                    .map_err(|e| src.decode_error(handle, "index", e))?;
                let next = if i + 1 < block.num_restarts() {
                    block.restart(i + 1)
                } else {
                    block.entries_end()
                };
                if ve != next {
                    return Err(corrupt(format!(
                        "index entry {i} is not followed by a restart"
                    )));
                }
                let value = data.get(vs..ve).unwrap_or_default();
                let value = IndexValue::decode(value)
                    .ok_or_else(|| corrupt(format!("malformed index entry {i}")))?;
                let first = (vs + value.first_key.0, vs + value.first_key.1);
                check_and_push(
                    i,
                    RawIndexEntry {
                        last_key: data.get(ks..ke).unwrap_or_default(),
                        handle: value.handle,
                        entries: value.entries,
                        file_number: value.file_number,
                        first_user_key: data.get(first.0..first.1),
                    },
                )?;
            }
        }
        index.entries.shrink_to_fit();
        index.prefixes.shrink_to_fit();
        Ok(Index {
            // Exact size, so that slices of it (kept blocks' last keys) share it without a copy.
            keys: Bytes::from(index.keys.into_boxed_slice()),
            entries: index.entries,
            prefixes: index.prefixes,
        })
    }

    /// The position of the first block whose last key is ≥ (`user_key`, `trailer`); the number
    /// of blocks if there is none.
    #[inline]
    pub(super) fn find(&self, user_key: &[u8], trailer: u64) -> usize {
        let p = key_prefix(user_key);
        // Blocks ending in a smaller prefix end before the target, larger ones after it.
        let lo = self.prefixes.partition_point(|&x| x < p);
        let tied = self.prefixes.get(lo..).unwrap_or_default();
        let hi = lo + tied.partition_point(|&x| x == p);
        let candidates = self.entries.get(lo..hi).unwrap_or_default();
        lo + candidates.partition_point(|e| {
            cmp_to_target(slice(&self.keys, e.last_key), user_key, trailer) == Ordering::Less
        })
    }

    pub(super) fn last_key(&self, e: &IndexEntry) -> &[u8] {
        slice(&self.keys, e.last_key)
    }

    /// A zero-copy `Bytes` of a range checked at load.
    pub(super) fn bytes(&self, range: (u32, u32)) -> Bytes {
        let (s, e) = (range.0 as usize, range.1 as usize);
        if s <= e && e <= self.keys.len() {
            self.keys.slice(s..e)
        } else {
            Bytes::new()
        }
    }

    /// Bytes the decoded index holds.
    pub(super) fn memory_usage(&self) -> usize {
        self.keys.len()
            + self.entries.capacity() * std::mem::size_of::<IndexEntry>()
            + self.prefixes.capacity() * std::mem::size_of::<u64>()
    }
}

#[inline]
pub(super) fn slice(data: &[u8], range: (u32, u32)) -> &[u8] {
    data.get(range.0 as usize..range.1 as usize)
        .unwrap_or_default()
}
