//! Fixed parts of the table format: block handles, the footer, index entry values and the
//! properties block.

use bytes::Bytes;

use super::block::{Block, BlockBuilder};
use super::coding::{get_u32_le, get_u64_le, put_varint, Reader};
use super::compress::BLOCK_TRAILER_LEN;
use super::Compression;
use crate::error::{Error, Result};
use crate::key::SeqNo;

/// The newest table format this build writes and reads. Version 2 stores the sequence-number
/// properties as fixed 8-byte integers (version 1: varints), so that a table's size depends only
/// on its keys and values: the simulator can then size tables exactly like the engine. Version 3
/// lets index entries refer to data blocks in other table files (block-preserving merges).
/// Version 4 writes the compact index ([`IndexWriter`]). Version 5 adds a range-deletion block
/// ([`TableProperties::range_deletion_block`]); only a table holding range deletions is written
/// as version 5, so that a build from before them, which would not see the block, refuses such
/// a table instead of reading deleted keys from the tables below it. Others are version 4.
/// Version 6 adds a Zstandard dictionary its data blocks are compressed with
/// ([`TableProperties::compression_dictionary`]); only a table with one is written as version 6.
pub(crate) const FORMAT_VERSION: u32 = 6;

/// The version of a table with range deletions and without a dictionary.
pub(crate) const FORMAT_WITHOUT_DICTIONARY: u32 = 5;

/// The version of a table with neither range deletions nor a dictionary.
pub(crate) const FORMAT_WITHOUT_RANGE_DELETIONS: u32 = 4;

/// The first version whose index entries may name another file.
pub(crate) const FORMAT_WITH_REFERENCES: u32 = 3;

/// The first version with the compact index ([`IndexWriter`]).
pub(crate) const FORMAT_COMPACT_INDEX: u32 = 4;

/// The last eight bytes of every table: `\x89STRATA\n`. The high first byte and the newline
/// catch files mangled by 7-bit or line-ending conversions.
pub(crate) const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"\x89STRATA\n");

/// Bytes of the footer.
pub(crate) const FOOTER_LEN: usize = 64;

/// Where a block's stored contents are in a file (the 5-byte trailer follows them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BlockHandle {
    /// Offset of the first byte.
    pub offset: u64,
    /// Stored size, without the trailer.
    pub size: u64,
}

/// The footer: where the meta blocks are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    /// The index block.
    pub index: BlockHandle,
    /// The Bloom filter, if the table has one.
    pub filter: Option<BlockHandle>,
    /// The properties block.
    pub properties: BlockHandle,
    /// The table's format version.
    pub format_version: u32,
}

impl Footer {
    /// The footer bytes.
    ///
    /// ```text
    /// 0  index offset u64 | 8  index size u64
    /// 16 filter offset u64 | 24 filter size u64     (both 0: no filter)
    /// 32 properties offset u64 | 40 properties size u64
    /// 48 format version u32 | 52 crc32c of bytes 0..52 u32 | 56 magic u64   (all LE)
    /// ```
    pub(crate) fn encode(&self) -> [u8; FOOTER_LEN] {
        let filter = self.filter.unwrap_or_default();
        let mut out = [0u8; FOOTER_LEN];
        let fields = [
            self.index.offset,
            self.index.size,
            filter.offset,
            filter.size,
            self.properties.offset,
            self.properties.size,
        ];
        for (slot, value) in out.chunks_exact_mut(8).zip(fields) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
        out[48..52].copy_from_slice(&self.format_version.to_le_bytes());
        let crc = crc32c::crc32c(&out[..52]);
        out[52..56].copy_from_slice(&crc.to_le_bytes());
        out[56..64].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        out
    }

    /// Decodes the footer read at `offset` of `file`. The magic is checked first (a file that
    /// is not a table at all), then the checksum (which every version keeps at 52..56 over bytes
    /// 0..52: a footer failing it says nothing reliable, its version included), then the
    /// version (a newer layout may place the other fields differently).
    pub(crate) fn decode(buf: &[u8; FOOTER_LEN], file: &str, offset: u64) -> Result<Footer> {
        let word = |at: usize| get_u64_le(buf, at).unwrap_or_default();
        if word(56) != TABLE_MAGIC {
            return Err(Error::corruption(
                file,
                offset + 56,
                "bad magic number: not a Strata table, or truncated",
            ));
        }
        let version = get_u32_le(buf, 48).unwrap_or_default();
        let stored_crc = get_u32_le(buf, 52).unwrap_or_default();
        if crc32c::crc32c(&buf[..52]) != stored_crc {
            return Err(Error::corruption(
                file,
                offset,
                format!("footer checksum mismatch (its version field reads {version})"),
            ));
        }
        if version > FORMAT_VERSION {
            return Err(Error::UnsupportedFormat {
                file: file.to_string(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(Error::corruption(file, offset + 48, "format version 0"));
        }
        let handle = |at: usize| BlockHandle {
            offset: word(at),
            size: word(at + 8),
        };
        let filter = handle(16);
        let filter = if filter == BlockHandle::default() {
            None
        } else {
            Some(filter)
        };
        Ok(Footer {
            index: handle(0),
            filter,
            properties: handle(32),
            format_version: version,
        })
    }
}

/// One decoded index entry value (the key is the block's last internal key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexValue {
    /// The file holding the block; 0 = this file.
    pub file_number: u64,
    /// Where the block is.
    pub handle: BlockHandle,
    /// Entries in the block.
    pub entries: u64,
    /// Byte range of the block's first user key within the value.
    pub first_key: (usize, usize),
}

impl IndexValue {
    /// Appends the value for a block to `buf`:
    /// `location | varint offset | varint size | varint entries | varint first_key_len |
    /// first_key`, where `location` is the varint 0 for a block in this file, or the varint 1
    /// followed by the other file's number as a u64 (fixed width, so that a table's size does
    /// not depend on how its blocks' files are numbered; the simulator sizes tables exactly).
    #[cfg(test)] // only tests write versions 2 and 3 now
    pub(crate) fn encode(
        buf: &mut Vec<u8>,
        file_number: u64,
        handle: BlockHandle,
        entries: u64,
        first_user_key: &[u8],
    ) {
        if file_number == 0 {
            put_varint(buf, 0);
        } else {
            put_varint(buf, 1);
            buf.extend_from_slice(&file_number.to_le_bytes());
        }
        put_varint(buf, handle.offset);
        put_varint(buf, handle.size);
        put_varint(buf, entries);
        put_varint(buf, first_user_key.len() as u64);
        buf.extend_from_slice(first_user_key);
    }

    /// Decodes a value that must span all of `buf`.
    pub(crate) fn decode(buf: &[u8]) -> Option<IndexValue> {
        let mut r = Reader::new(buf);
        let file_number = match r.varint()? {
            0 => 0,
            1 => {
                let bytes: [u8; 8] = r.bytes(8)?.try_into().ok()?;
                Some(u64::from_le_bytes(bytes)).filter(|&n| n != 0)?
            }
            _ => return None,
        };
        let offset = r.varint()?;
        let size = r.varint()?;
        let entries = r.varint()?;
        let first_len = r.varint_usize()?;
        let first_start = r.position();
        r.bytes(first_len)?;
        if !r.is_at_end() {
            return None;
        }
        Some(IndexValue {
            file_number,
            handle: BlockHandle { offset, size },
            entries,
            first_key: (first_start, first_start + first_len),
        })
    }
}

/// Encodes a version-4 index block: one entry per data block, in order, then the entry count
/// (`u32`). An entry is the block's last internal key, its user key stored as
/// `varint shared | varint unshared | suffix` (sharing a prefix with the previous entry's user
/// key) and its trailer as a fixed `u64` (so the size never depends on sequence numbers), then
/// the block's place and size: `varint 0` for a block of this file, which starts where the
/// previous one of this file ended (at 0 for the first: the builder writes them back to back),
/// `varint 2 | varint offset` for a block of this file that starts later (after the padding of
/// aligned blocks, [`super::TableOptions::block_align`]), or `varint 1 | u64 file | varint
/// offset` for a kept block of another file; then `varint size | varint entries`.
///
/// Versions 2 and 3 also stored each block's first user key and used the block layout with a
/// restart per entry, ~55 bytes per block for 16-byte keys against ~27 here. The first keys were
/// never needed: a block's exact range is in the builder's [`super::BlockRange`]s, and a merge
/// keeping a block reads its first key from the block's first entry.
#[derive(Debug, Default)]
pub(crate) struct IndexWriter {
    buf: Vec<u8>,
    prev_user_key: Vec<u8>,
    count: u32,
    /// Where the last block of this table's own file ended: a block starting there needs no
    /// offset.
    own_end: u64,
}

impl IndexWriter {
    /// Adds the entry of a block whose last internal key is `last_key`, in file `file_number`
    /// (0 for this table's own file).
    ///
    /// REQUIRES the blocks of this table's own file to be added in file order: the offset of one
    /// that starts where the previous ended (or at 0, the first) is not stored.
    pub(crate) fn add(
        &mut self,
        last_key: &[u8],
        file_number: u64,
        handle: BlockHandle,
        entries: u64,
    ) {
        let (user_key, trailer) = last_key.split_at(last_key.len().saturating_sub(8));
        let shared = user_key
            .iter()
            .zip(&self.prev_user_key)
            .take_while(|(a, b)| a == b)
            .count();
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (user_key.len() - shared) as u64);
        self.buf.extend_from_slice(&user_key[shared..]);
        self.buf.extend_from_slice(trailer);
        if file_number == 0 && handle.offset == self.own_end {
            // No offset: readers take the end of the previous block of this file.
            put_varint(&mut self.buf, 0);
        } else if file_number == 0 {
            put_varint(&mut self.buf, 2);
            put_varint(&mut self.buf, handle.offset);
        } else {
            put_varint(&mut self.buf, 1);
            self.buf.extend_from_slice(&file_number.to_le_bytes());
            put_varint(&mut self.buf, handle.offset);
        }
        put_varint(&mut self.buf, handle.size);
        put_varint(&mut self.buf, entries);
        if file_number == 0 {
            // Saturating: a handle past any real file only ever comes from tests that write
            // damaged indexes on purpose.
            self.own_end = handle
                .offset
                .saturating_add(handle.size)
                .saturating_add(BLOCK_TRAILER_LEN as u64);
        }
        self.prev_user_key.clear();
        self.prev_user_key.extend_from_slice(user_key);
        self.count += 1;
    }

    /// Bytes of the block [`IndexWriter::finish`] would return now.
    pub(crate) fn size(&self) -> usize {
        self.buf.len() + 4
    }

    /// The block's contents.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

/// One entry of a version-4 index block, as [`decode_index`] hands it out.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DecodedIndexEntry<'a> {
    /// The block's last internal key, whole.
    pub last_key: &'a [u8],
    /// The file holding the block; 0 = this file.
    pub file_number: u64,
    /// Where the block is.
    pub handle: BlockHandle,
    /// Entries in the block.
    pub entries: u64,
}

/// Decodes a version-4 index block, handing each entry to `each` in order and stopping at its
/// first error. `Ok(None)` if the block is malformed (truncated, trailing bytes, a count that
/// disagrees, a key sharing more than the previous one holds, a block past 2^64, a file number
/// 0); otherwise the entry count. Whether keys are ordered and blocks lie where they may is the
/// caller's check.
pub(crate) fn decode_index<E>(
    data: &[u8],
    mut each: impl FnMut(DecodedIndexEntry<'_>) -> Result<(), E>,
) -> Result<Option<u32>, E> {
    let Some(body_len) = data.len().checked_sub(4) else {
        return Ok(None);
    };
    let Some(count) = get_u32_le(data, body_len) else {
        return Ok(None);
    };
    let mut r = Reader::new(&data[..body_len]);
    // The previous entry's last internal key, which the next one's user key shares a prefix of.
    let mut key: Vec<u8> = Vec::new();
    let mut next_own_offset = 0u64;
    let mut seen = 0u32;
    while !r.is_at_end() {
        let Some(entry) = next_index_entry(&mut r, &mut key, &mut next_own_offset) else {
            return Ok(None);
        };
        let Some(n) = seen.checked_add(1) else {
            return Ok(None);
        };
        seen = n;
        each(entry)?;
    }
    Ok((seen == count).then_some(count))
}

/// Decodes the entry at `r`: rebuilds its last key in `key` (which holds the previous one) and
/// places a block of this file at `next_own_offset`, moving it past the block.
fn next_index_entry<'k>(
    r: &mut Reader<'_>,
    key: &'k mut Vec<u8>,
    next_own_offset: &mut u64,
) -> Option<DecodedIndexEntry<'k>> {
    let shared = r.varint_usize()?;
    let unshared = r.varint_usize()?;
    if shared > key.len().saturating_sub(8) {
        return None;
    }
    key.truncate(shared);
    key.extend_from_slice(r.bytes(unshared)?);
    key.extend_from_slice(r.bytes(8)?);
    let (file_number, offset) = match r.varint()? {
        0 => (0, *next_own_offset),
        // A block of this file after padding: never before the end of the previous one.
        2 => (0, Some(r.varint()?).filter(|&at| at >= *next_own_offset)?),
        1 => {
            let bytes: [u8; 8] = r.bytes(8)?.try_into().ok()?;
            let file = Some(u64::from_le_bytes(bytes)).filter(|&n| n != 0)?;
            (file, r.varint()?)
        }
        _ => return None,
    };
    let size = r.varint()?;
    let entries = r.varint()?;
    if file_number == 0 {
        *next_own_offset = offset
            .checked_add(size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)?;
    }
    Some(DecodedIndexEntry {
        last_key: key,
        file_number,
        handle: BlockHandle { offset, size },
        entries,
    })
}

/// What a table holds, recorded by the builder in the properties block.
#[derive(Clone, Debug, PartialEq)]
pub struct TableProperties {
    /// Entries (puts and tombstones).
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Smallest sequence number (0 for an empty table).
    pub smallest_seqno: SeqNo,
    /// Largest sequence number (0 for an empty table).
    pub largest_seqno: SeqNo,
    /// Smallest user key (empty for an empty table).
    pub smallest: Bytes,
    /// Largest user key (empty for an empty table).
    pub largest: Bytes,
    /// Sum of internal key lengths (user key plus the 8-byte trailer), before compression.
    pub raw_key_bytes: u64,
    /// Sum of value lengths, before compression.
    pub raw_value_bytes: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Bloom bits per key the filter was built with (0 = no filter).
    pub bloom_bits_per_key: f64,
    /// The compression the table was written with (individual blocks may be stored
    /// uncompressed when compressing did not pay).
    pub compression: Compression,
    /// The format version the table was created with.
    pub format_version: u32,
    /// Range deletions the table holds (fragments, one per piece and sequence number).
    pub range_deletions: u64,
    /// Where they are, when there are any: a block of `[start][end][seq]` records, the keys
    /// length-prefixed by varints, the sequence number 8 bytes little-endian.
    pub(crate) range_deletion_block: Option<BlockHandle>,
    /// Where the Zstandard dictionary its data blocks are compressed with is, when it has one
    /// (an uncompressed block).
    pub(crate) compression_dictionary: Option<BlockHandle>,
}

// Property names, in the (ascending) order they are written.
const P_BLOOM: &[u8] = b"bloom_bits_per_key";
const P_COMPRESSION: &[u8] = b"compression";
const P_COMPRESSION_DICTIONARY: &[u8] = b"compression_dictionary";
const P_DATA_BLOCKS: &[u8] = b"data_blocks";
const P_ENTRIES: &[u8] = b"entries";
const P_FORMAT_VERSION: &[u8] = b"format_version";
const P_LARGEST_KEY: &[u8] = b"largest_key";
const P_LARGEST_SEQNO: &[u8] = b"largest_seqno";
const P_RANGE_DELETION_BLOCK: &[u8] = b"range_deletion_block";
const P_RANGE_DELETIONS: &[u8] = b"range_deletions";
const P_RAW_KEY_BYTES: &[u8] = b"raw_key_bytes";
const P_RAW_VALUE_BYTES: &[u8] = b"raw_value_bytes";
const P_SMALLEST_KEY: &[u8] = b"smallest_key";
const P_SMALLEST_SEQNO: &[u8] = b"smallest_seqno";
const P_TOMBSTONES: &[u8] = b"tombstones";

impl TableProperties {
    /// Encodes the properties block: a block of (name, value) entries with a restart at every
    /// entry, so that later versions can add names that older readers skip. Integers are
    /// varints, except the sequence numbers, which are 8-byte little-endian (format version 2);
    /// keys are raw bytes, the bits per key an f64 (LE bits), the compression a type byte
    /// followed, for Zstd, by the zigzag-varint level and, with a dictionary, a varint of its
    /// most bytes; block handles are varints of offset and size.
    pub(crate) fn encode(&self, out: &mut BlockBuilder) {
        let mut v = Vec::with_capacity(16);
        let mut num = |out: &mut BlockBuilder, name: &[u8], n: u64| {
            v.clear();
            put_varint(&mut v, n);
            out.add(name, &v);
        };
        out.add(P_BLOOM, &self.bloom_bits_per_key.to_bits().to_le_bytes());
        let mut c = Vec::with_capacity(6);
        match self.compression {
            Compression::None => c.push(0),
            Compression::Lz4 => c.push(1),
            Compression::Zstd {
                level,
                max_dict_bytes,
            } => {
                c.push(2);
                put_varint(&mut c, zigzag(level));
                if max_dict_bytes > 0 {
                    put_varint(&mut c, u64::from(max_dict_bytes));
                }
            }
        }
        out.add(P_COMPRESSION, &c);
        let handle = |h: BlockHandle| {
            let mut v = Vec::with_capacity(20);
            put_varint(&mut v, h.offset);
            put_varint(&mut v, h.size);
            v
        };
        if let Some(h) = self.compression_dictionary {
            out.add(P_COMPRESSION_DICTIONARY, &handle(h));
        }
        num(out, P_DATA_BLOCKS, self.data_blocks);
        num(out, P_ENTRIES, self.entries);
        num(out, P_FORMAT_VERSION, u64::from(self.format_version));
        out.add(P_LARGEST_KEY, &self.largest);
        out.add(P_LARGEST_SEQNO, &self.largest_seqno.to_le_bytes());
        if let Some(h) = self.range_deletion_block {
            out.add(P_RANGE_DELETION_BLOCK, &handle(h));
            num(out, P_RANGE_DELETIONS, self.range_deletions);
        }
        num(out, P_RAW_KEY_BYTES, self.raw_key_bytes);
        num(out, P_RAW_VALUE_BYTES, self.raw_value_bytes);
        out.add(P_SMALLEST_KEY, &self.smallest);
        out.add(P_SMALLEST_SEQNO, &self.smallest_seqno.to_le_bytes());
        num(out, P_TOMBSTONES, self.tombstones);
    }

    /// Decodes a properties block; the reason on failure. Unknown names are skipped; every
    /// name this version writes must be present.
    pub(crate) fn decode(block: &Block) -> std::result::Result<TableProperties, String> {
        let data = block.data();
        let mut p = PartialProperties::default();
        let mut pos = 0;
        while pos < block.entries_end() {
            let ((ks, ke), (vs, ve)) = block
                .standalone_entry(pos)
                .map_err(|e| format!("{} at byte {}", e.reason, e.offset))?;
            pos = ve;
            let name = data.get(ks..ke).unwrap_or_default();
            let value = data.get(vs..ve).unwrap_or_default();
            let bad = || format!("malformed property {}", name.escape_ascii());
            let int = || {
                let mut r = Reader::new(value);
                r.varint().filter(|_| r.is_at_end()).ok_or_else(bad)
            };
            let handle = || {
                let mut r = Reader::new(value);
                let (offset, size) = (r.varint(), r.varint());
                offset
                    .zip(size)
                    .filter(|_| r.is_at_end())
                    .map(|(offset, size)| BlockHandle { offset, size })
                    .ok_or_else(bad)
            };
            match name {
                P_BLOOM => {
                    let bits = <[u8; 8]>::try_from(value).map_err(|_| bad())?;
                    let f = f64::from_bits(u64::from_le_bytes(bits));
                    if !f.is_finite() || f < 0.0 {
                        return Err(bad());
                    }
                    p.bloom = Some(f);
                }
                P_COMPRESSION => p.compression = Some(decode_compression(value).ok_or_else(bad)?),
                P_COMPRESSION_DICTIONARY => p.compression_dictionary = Some(handle()?),
                P_DATA_BLOCKS => p.data_blocks = Some(int()?),
                P_ENTRIES => p.entries = Some(int()?),
                P_FORMAT_VERSION => {
                    p.format_version = Some(u32::try_from(int()?).map_err(|_| bad())?)
                }
                P_LARGEST_KEY => p.largest = Some(data.slice(vs..ve)),
                P_LARGEST_SEQNO => p.largest_seqno = Some(data.slice(vs..ve)),
                P_RANGE_DELETION_BLOCK => p.range_deletion_block = Some(handle()?),
                P_RANGE_DELETIONS => p.range_deletions = Some(int()?),
                P_RAW_KEY_BYTES => p.raw_key_bytes = Some(int()?),
                P_RAW_VALUE_BYTES => p.raw_value_bytes = Some(int()?),
                P_SMALLEST_KEY => p.smallest = Some(data.slice(vs..ve)),
                P_SMALLEST_SEQNO => p.smallest_seqno = Some(data.slice(vs..ve)),
                P_TOMBSTONES => p.tombstones = Some(int()?),
                _ => {}
            }
        }
        p.finish()
    }
}

/// Properties as they are found, before checking that all are present.
#[derive(Default)]
struct PartialProperties {
    bloom: Option<f64>,
    compression: Option<Compression>,
    data_blocks: Option<u64>,
    entries: Option<u64>,
    format_version: Option<u32>,
    largest: Option<Bytes>,
    /// Raw: its encoding depends on the format version.
    largest_seqno: Option<Bytes>,
    raw_key_bytes: Option<u64>,
    raw_value_bytes: Option<u64>,
    smallest: Option<Bytes>,
    /// Raw: its encoding depends on the format version.
    smallest_seqno: Option<Bytes>,
    tombstones: Option<u64>,
    range_deletions: Option<u64>,
    range_deletion_block: Option<BlockHandle>,
    compression_dictionary: Option<BlockHandle>,
}

impl PartialProperties {
    fn finish(self) -> std::result::Result<TableProperties, String> {
        fn need<T>(v: Option<T>, name: &[u8]) -> std::result::Result<T, String> {
            v.ok_or_else(|| format!("missing property {}", name.escape_ascii()))
        }
        let format_version = need(self.format_version, P_FORMAT_VERSION)?;
        // Version 1 wrote sequence numbers as varints, later versions as 8 bytes LE.
        let seqno = |raw: Option<Bytes>, name: &[u8]| {
            let raw = need(raw, name)?;
            let bad = || format!("malformed property {}", name.escape_ascii());
            if format_version == 1 {
                let mut r = Reader::new(&raw);
                r.varint().filter(|_| r.is_at_end()).ok_or_else(bad)
            } else {
                let bytes = <[u8; 8]>::try_from(raw.as_ref()).map_err(|_| bad())?;
                Ok(u64::from_le_bytes(bytes))
            }
        };
        Ok(TableProperties {
            entries: need(self.entries, P_ENTRIES)?,
            tombstones: need(self.tombstones, P_TOMBSTONES)?,
            smallest_seqno: seqno(self.smallest_seqno, P_SMALLEST_SEQNO)?,
            largest_seqno: seqno(self.largest_seqno, P_LARGEST_SEQNO)?,
            smallest: need(self.smallest, P_SMALLEST_KEY)?,
            largest: need(self.largest, P_LARGEST_KEY)?,
            raw_key_bytes: need(self.raw_key_bytes, P_RAW_KEY_BYTES)?,
            raw_value_bytes: need(self.raw_value_bytes, P_RAW_VALUE_BYTES)?,
            data_blocks: need(self.data_blocks, P_DATA_BLOCKS)?,
            bloom_bits_per_key: need(self.bloom, P_BLOOM)?,
            compression: need(self.compression, P_COMPRESSION)?,
            format_version,
            // Both or neither.
            range_deletions: match (self.range_deletion_block, self.range_deletions) {
                (Some(_), Some(n)) => n,
                (None, None) => 0,
                (Some(_), None) => {
                    return Err(format!(
                        "missing property {}",
                        P_RANGE_DELETIONS.escape_ascii()
                    ))
                }
                (None, Some(_)) => {
                    return Err(format!(
                        "missing property {}",
                        P_RANGE_DELETION_BLOCK.escape_ascii()
                    ))
                }
            },
            range_deletion_block: self.range_deletion_block,
            compression_dictionary: self.compression_dictionary,
        })
    }
}

fn zigzag(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

fn unzigzag(v: u64) -> Option<i32> {
    let v = u32::try_from(v).ok()?;
    Some(((v >> 1) as i32) ^ -((v & 1) as i32))
}

fn decode_compression(value: &[u8]) -> Option<Compression> {
    let mut r = Reader::new(value);
    let c = match r.bytes(1)?.first()? {
        0 => Compression::None,
        1 => Compression::Lz4,
        2 => Compression::Zstd {
            level: unzigzag(r.varint()?)?,
            max_dict_bytes: if r.is_at_end() {
                0
            } else {
                u32::try_from(r.varint()?).ok()?
            },
        },
        _ => return None,
    };
    r.is_at_end().then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(seqnos: (u64, u64)) -> TableProperties {
        TableProperties {
            entries: 3,
            tombstones: 1,
            smallest_seqno: seqnos.0,
            largest_seqno: seqnos.1,
            smallest: Bytes::from_static(b"a"),
            largest: Bytes::from_static(b"c"),
            raw_key_bytes: 27,
            raw_value_bytes: 10,
            data_blocks: 1,
            bloom_bits_per_key: 10.0,
            compression: Compression::None,
            format_version: FORMAT_WITHOUT_RANGE_DELETIONS,
            range_deletions: 0,
            range_deletion_block: None,
            compression_dictionary: None,
        }
    }

    #[test]
    fn dictionary_properties_round_trip() {
        let p = TableProperties {
            compression: Compression::Zstd {
                level: -3,
                max_dict_bytes: 16 << 10,
            },
            compression_dictionary: Some(BlockHandle {
                offset: 4096,
                size: 16000,
            }),
            format_version: FORMAT_VERSION,
            ..properties((1, 9))
        };
        let block = Block::new(Bytes::from(encoded(&p))).unwrap();
        assert_eq!(TableProperties::decode(&block).unwrap(), p);
    }

    #[test]
    fn range_deletion_properties_round_trip_and_come_in_pairs() {
        let p = TableProperties {
            range_deletions: 4,
            range_deletion_block: Some(BlockHandle {
                offset: 100,
                size: 60,
            }),
            format_version: FORMAT_WITHOUT_DICTIONARY,
            ..properties((1, 9))
        };
        let block = Block::new(Bytes::from(encoded(&p))).unwrap();
        assert_eq!(TableProperties::decode(&block).unwrap(), p);
        // The count without the block is malformed.
        let mut b = BlockBuilder::new(1);
        for (name, value) in [
            (P_BLOOM, 10.0f64.to_bits().to_le_bytes().to_vec()),
            (P_COMPRESSION, vec![0]),
            (P_DATA_BLOCKS, vec![1]),
            (P_ENTRIES, vec![3]),
            (P_FORMAT_VERSION, vec![5]),
            (P_LARGEST_KEY, b"c".to_vec()),
            (P_LARGEST_SEQNO, 9u64.to_le_bytes().to_vec()),
            (P_RANGE_DELETIONS, vec![4]),
            (P_RAW_KEY_BYTES, vec![27]),
            (P_RAW_VALUE_BYTES, vec![10]),
            (P_SMALLEST_KEY, b"a".to_vec()),
            (P_SMALLEST_SEQNO, 1u64.to_le_bytes().to_vec()),
            (P_TOMBSTONES, vec![1]),
        ] {
            b.add(name, &value);
        }
        let block = Block::new(Bytes::from(b.finish().to_vec())).unwrap();
        let e = TableProperties::decode(&block).unwrap_err();
        assert!(e.contains("range_deletion_block"), "{e}");
    }

    fn encoded(p: &TableProperties) -> Vec<u8> {
        let mut b = BlockBuilder::new(1);
        p.encode(&mut b);
        b.finish().to_vec()
    }

    #[test]
    fn the_size_of_properties_does_not_depend_on_sequence_numbers() {
        let small = properties((1, 2));
        let large = properties((1 << 40, (1 << 56) - 1));
        assert_eq!(encoded(&small).len(), encoded(&large).len());
        for p in [small, large] {
            let block = Block::new(Bytes::from(encoded(&p))).unwrap();
            assert_eq!(TableProperties::decode(&block).unwrap(), p);
        }
    }

    /// A properties block as format version 1 wrote it (varint sequence numbers), claiming
    /// `format_version`.
    fn varint_properties(format_version: u64) -> Block {
        let varint = |n: u64| {
            let mut v = Vec::new();
            put_varint(&mut v, n);
            v
        };
        let mut b = BlockBuilder::new(1);
        b.add(P_BLOOM, &10.0f64.to_bits().to_le_bytes());
        b.add(P_COMPRESSION, &[0]);
        b.add(P_DATA_BLOCKS, &varint(1));
        b.add(P_ENTRIES, &varint(3));
        b.add(P_FORMAT_VERSION, &varint(format_version));
        b.add(P_LARGEST_KEY, b"c");
        b.add(P_LARGEST_SEQNO, &varint(300));
        b.add(P_RAW_KEY_BYTES, &varint(27));
        b.add(P_RAW_VALUE_BYTES, &varint(10));
        b.add(P_SMALLEST_KEY, b"a");
        b.add(P_SMALLEST_SEQNO, &varint(7));
        b.add(P_TOMBSTONES, &varint(1));
        Block::new(Bytes::from(b.finish().to_vec())).unwrap()
    }

    #[test]
    fn version_1_properties_with_varint_sequence_numbers_still_read() {
        let p = TableProperties::decode(&varint_properties(1)).unwrap();
        assert_eq!(
            (p.smallest_seqno, p.largest_seqno, p.format_version),
            (7, 300, 1)
        );
        // The same block claiming version 2 has sequence numbers of the wrong width.
        let e = TableProperties::decode(&varint_properties(2)).unwrap_err();
        assert!(e.contains("_seqno"), "{e}");
    }

    #[test]
    fn footer_round_trips_and_checks_magic_version_and_crc() -> Result<()> {
        let footer = Footer {
            index: BlockHandle {
                offset: 10,
                size: 20,
            },
            filter: None,
            properties: BlockHandle {
                offset: 35,
                size: 7,
            },
            format_version: FORMAT_VERSION,
        };
        let bytes = footer.encode();
        assert_eq!(Footer::decode(&bytes, "t.sst", 100)?, footer);
        let with_filter = Footer {
            filter: Some(BlockHandle { offset: 1, size: 2 }),
            ..footer
        };
        assert_eq!(
            Footer::decode(&with_filter.encode(), "t.sst", 0)?,
            with_filter
        );

        let mut bad = bytes;
        bad[60] ^= 1;
        assert!(matches!(
            Footer::decode(&bad, "t.sst", 100),
            Err(Error::Corruption { file, offset: 156, .. }) if file == "t.sst"
        ));
        // A newer version with its checksum intact is unsupported; a damaged version field
        // (the checksum fails) is corruption.
        let mut newer = bytes;
        newer[48..52].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let damaged = newer;
        let crc = crc32c::crc32c(&newer[..52]);
        newer[52..56].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            Footer::decode(&newer, "t.sst", 100),
            Err(Error::UnsupportedFormat {
                found,
                supported: FORMAT_VERSION,
                ..
            }) if found == FORMAT_VERSION + 1
        ));
        assert!(matches!(
            Footer::decode(&damaged, "t.sst", 100),
            Err(Error::Corruption { offset: 100, .. })
        ));
        let mut flipped = bytes;
        flipped[3] ^= 0x40;
        assert!(matches!(
            Footer::decode(&flipped, "t.sst", 100),
            Err(Error::Corruption { .. })
        ));
        Ok(())
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0, 1, -1, 22, -7, i32::MAX, i32::MIN] {
            assert_eq!(unzigzag(zigzag(v)), Some(v));
        }
        assert_eq!(unzigzag(u64::from(u32::MAX) + 1), None);
    }

    #[test]
    fn index_values_round_trip_and_must_be_exact() {
        let mut buf = Vec::new();
        let handle = BlockHandle {
            offset: 1 << 40,
            size: 4100,
        };
        IndexValue::encode(&mut buf, 0, handle, 31, b"first");
        let v = IndexValue::decode(&buf);
        assert_eq!(
            v,
            Some(IndexValue {
                file_number: 0,
                handle,
                entries: 31,
                first_key: (buf.len() - 5, buf.len())
            })
        );
        assert_eq!(IndexValue::decode(&buf[..buf.len() - 1]), None);
        buf.push(0);
        assert_eq!(IndexValue::decode(&buf), None);

        // Another file's number is fixed width: the value's length does not depend on it.
        let mut small = Vec::new();
        IndexValue::encode(&mut small, 7, handle, 31, b"first");
        let mut large = Vec::new();
        IndexValue::encode(&mut large, u64::MAX, handle, 31, b"first");
        assert_eq!(small.len(), large.len());
        assert_eq!(
            IndexValue::decode(&large).map(|v| v.file_number),
            Some(u64::MAX)
        );
        // Location 1 with file 0, or an unknown location, is malformed.
        let mut zero = vec![1];
        zero.extend_from_slice(&0u64.to_le_bytes());
        zero.extend_from_slice(&small[9..]);
        assert_eq!(IndexValue::decode(&zero), None);
        let mut unknown = small.clone();
        unknown[0] = 2;
        assert_eq!(IndexValue::decode(&unknown), None);
    }
}
