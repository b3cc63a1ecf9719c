//! Writing a table: [`TableBuilder`].

use std::cmp::Ordering;
use std::fmt;

use bytes::Bytes;

use super::block::{split_internal_key, BlockBuilder};
use super::bloom::{BloomBuilder, MAX_BITS_PER_KEY};
use super::coding::put_varint;
use super::compress::{block_trailer, BlockCompressor, BLOCK_TRAILER_LEN, TYPE_NONE};
use super::dictionary::PendingBlocks;
use super::format::{
    BlockHandle, Footer, IndexWriter, TableProperties, FOOTER_LEN, FORMAT_VERSION,
    FORMAT_WITHOUT_DICTIONARY, FORMAT_WITHOUT_RANGE_DELETIONS,
};
use super::{Compression, TableOptions};
use crate::error::{Error, Result};
use crate::fs::{WritableFile, ALIGNMENT};
use crate::key::{compare_internal_keys, parse_internal_key, SeqNo, ValueKind};
use strata_exec::range_del::{table_key_range, RangeTombstone};

/// Largest accepted `block_size`.
const MAX_BLOCK_SIZE: usize = 256 << 20;

/// The page aligned data blocks start on ([`TableOptions::block_align`]): the unit of a direct
/// read.
const PAGE: u64 = ALIGNMENT as u64;

/// Padding to the next page.
static ZERO_PAGE: [u8; ALIGNMENT] = [0; ALIGNMENT];

/// Largest accepted key + value. With `MAX_BLOCK_SIZE` this keeps every block, its offsets
/// and its compressed-length prefix within `u32`.
const MAX_ENTRY_BYTES: usize = 1 << 30;

/// The key range and location of one data block (from [`TableSummary::blocks`] or
/// [`super::Table::block_ranges`]), the block-level metadata ChooseBest windows and
/// block-preserving merges work with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRange {
    /// First user key in the block.
    pub smallest: Bytes,
    /// Last user key in the block.
    pub largest: Bytes,
    /// Bytes the block occupies in its file: stored (possibly compressed) contents and the
    /// 5-byte trailer.
    pub size: u64,
    /// Entries in the block.
    pub entries: u64,
    /// Offset of the block in its file.
    pub offset: u64,
    /// The file holding the block when it is another table's (a kept block, see
    /// [`TableBuilder::add_kept_block`]); `None` for the table's own blocks.
    pub file: Option<u64>,
}

/// A data block that already exists in another table file, which a block-preserving merge keeps
/// instead of rewriting ([`TableBuilder::add_kept_block`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptBlock {
    /// The file holding the block (never 0).
    pub file_number: u64,
    /// Offset of the block in that file.
    pub offset: u64,
    /// Bytes it occupies there, trailer included.
    pub size: u64,
    /// Entries in the block.
    pub entries: u64,
}

/// What [`TableBuilder::finish`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSummary {
    /// Bytes in the file.
    pub file_size: u64,
    /// Bytes of the kept blocks the table refers to in other files (not in `file_size`).
    pub referenced_bytes: u64,
    /// Entries (puts and tombstones).
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Range deletions ([`TableBuilder::add_range_tombstone`]).
    pub range_deletions: u64,
    /// Smallest user key, or range deletion start (empty for an empty table).
    pub smallest: Bytes,
    /// Largest user key, or range deletion end (empty for an empty table).
    pub largest: Bytes,
    /// Smallest sequence number (0 for an empty table).
    pub smallest_seqno: SeqNo,
    /// Largest sequence number (0 for an empty table).
    pub largest_seqno: SeqNo,
    /// Sum of internal key lengths (user key plus the 8-byte trailer).
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Data blocks written.
    pub data_blocks: u64,
    /// Each data block's range, in order; filled only with
    /// [`TableOptions::record_block_ranges`].
    pub blocks: Vec<BlockRange>,
    /// The hash of every distinct user key, in chunks; filled only with
    /// [`TableOptions::collect_key_hashes`].
    pub key_hashes: Vec<Vec<u64>>,
}

/// Writes one table file from entries added in increasing internal-key order.
///
/// Data blocks are written as they fill; the filter, index, properties and footer at
/// [`finish`](Self::finish). After an error the builder must be abandoned (the file is then
/// incomplete and should be deleted).
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    file_name: String,
    block_size: usize,
    /// Data blocks start on pages ([`TableOptions::block_align`]).
    block_align: bool,
    compression: Compression,
    bloom_bits_per_key: f64,
    record_block_ranges: bool,
    /// Bytes written to the file so far.
    offset: u64,
    data_block: BlockBuilder,
    index: IndexWriter,
    /// Collects key hashes for the filter (when `bloom_bits_per_key > 0`) and for the summary
    /// (when `collect_key_hashes`).
    bloom: Option<BloomBuilder>,
    collect_key_hashes: bool,
    compressor: BlockCompressor,
    /// The last key added (empty before the first).
    last_key: Vec<u8>,
    /// User key of the first entry of the block being built.
    block_first_user_key: Vec<u8>,
    smallest: Bytes,
    entries: u64,
    tombstones: u64,
    smallest_seqno: SeqNo,
    largest_seqno: SeqNo,
    raw_key_bytes: u64,
    raw_value_bytes: u64,
    data_blocks: u64,
    blocks: Vec<BlockRange>,
    /// Bytes of kept blocks referred to in other files.
    referenced_bytes: u64,
    /// Range deletions, written in their own block at the end.
    range_tombstones: Vec<RangeTombstone<Bytes>>,
    /// Data blocks held back until the table's dictionary is trained (only while a codec with
    /// a dictionary has not trained it yet).
    pending: Option<PendingBlocks>,
    /// The dictionary the data blocks were compressed with, written as a meta block at the end.
    dictionary: Option<Vec<u8>>,
}

impl fmt::Debug for TableBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableBuilder")
            .field("file_name", &self.file_name)
            .field("entries", &self.entries)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl TableBuilder {
    /// A builder writing to `file` (a new, empty file); `file_name` names it in errors.
    /// Out-of-range options are clamped as documented on [`TableOptions`].
    pub fn new(file: Box<dyn WritableFile>, file_name: String, options: TableOptions) -> Self {
        let bits = options.bloom_bits_per_key;
        let bloom_bits_per_key = if bits.is_finite() && bits > 0.0 {
            bits.min(MAX_BITS_PER_KEY)
        } else {
            0.0
        };
        TableBuilder {
            file,
            file_name,
            block_size: options.block_size.clamp(1, MAX_BLOCK_SIZE),
            block_align: options.block_align,
            compression: options.compression,
            bloom_bits_per_key,
            record_block_ranges: options.record_block_ranges,
            offset: 0,
            data_block: BlockBuilder::new(options.restart_interval),
            index: IndexWriter::default(),
            bloom: (bloom_bits_per_key > 0.0 || options.collect_key_hashes)
                .then(|| BloomBuilder::new(bloom_bits_per_key)),
            collect_key_hashes: options.collect_key_hashes,
            compressor: BlockCompressor::new(options.compression),
            last_key: Vec::new(),
            block_first_user_key: Vec::new(),
            smallest: Bytes::new(),
            entries: 0,
            tombstones: 0,
            smallest_seqno: SeqNo::MAX,
            largest_seqno: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            data_blocks: 0,
            blocks: Vec::new(),
            referenced_bytes: 0,
            range_tombstones: Vec::new(),
            pending: match options.compression.max_dict_bytes() {
                0 => None,
                bytes => Some(PendingBlocks::new(bytes)),
            },
            dictionary: None,
        }
    }

    /// Adds a range deletion, at any time before [`TableBuilder::finish`]: the table's key
    /// range widens to its start and to the last key before its end ([`table_key_range`]),
    /// and its sequence numbers to its own.
    pub fn add_range_tombstone(&mut self, tombstone: RangeTombstone<Bytes>) {
        self.range_tombstones.push(tombstone);
    }

    /// Adds an entry.
    ///
    /// REQUIRES internal keys strictly increasing; an out-of-order key returns
    /// [`Error::InvalidArgument`] (as do a key that is not a valid internal key and an entry
    /// above 1 GiB) and leaves the builder unchanged.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        // An aligned block must fit its page: cut before the entry that would overflow it
        // (checked first, so that a rejected entry leaves the builder unchanged).
        if self.block_align
            && !self.data_block.is_empty()
            && self.data_block.size_with(internal_key, value) + BLOCK_TRAILER_LEN > self.block_size
        {
            self.check_entry(internal_key, value)?;
            self.flush_data_block()?;
        }
        let starts_block = self.data_block.is_empty();
        self.note_entry(internal_key, value, starts_block)?;
        self.data_block.add(internal_key, value);
        if self.data_block.size_estimate() >= self.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Refers to `block`, a data block of another table file, instead of writing one: a
    /// block-preserving merge keeps it where it is. `entries` are the block's entries in order;
    /// they go into the filter and the properties, and nothing of them is written. The open data
    /// block is written first, however little it holds.
    ///
    /// REQUIRES the block's keys to follow the keys added so far, and exactly `block.entries`
    /// entries; otherwise returns [`Error::InvalidArgument`] (the builder must then be
    /// abandoned).
    pub fn add_kept_block<'e>(
        &mut self,
        block: &KeptBlock,
        entries: impl IntoIterator<Item = (&'e [u8], &'e [u8])>,
    ) -> Result<()> {
        if block.file_number == 0 || block.size < BLOCK_TRAILER_LEN as u64 {
            return Err(Error::InvalidArgument(format!(
                "{}: a kept block needs a file number and room for its trailer (file {}, {} \
                 bytes)",
                self.file_name, block.file_number, block.size
            )));
        }
        if !self.data_block.is_empty() {
            self.flush_data_block()?;
        }
        self.write_pending_blocks()?;
        let mut count = 0u64;
        for (key, value) in entries {
            self.note_entry(key, value, count == 0)?;
            count += 1;
        }
        if count != block.entries || count == 0 {
            return Err(Error::InvalidArgument(format!(
                "{}: kept block at offset {} of file {} holds {} entries, {count} were given",
                self.file_name, block.offset, block.file_number, block.entries
            )));
        }
        let handle = BlockHandle {
            offset: block.offset,
            size: block.size - BLOCK_TRAILER_LEN as u64,
        };
        self.index_data_block(Some(block.file_number), handle, count);
        self.referenced_bytes += block.size;
        Ok(())
    }

    /// Adds the index entry of the data block just finished or kept (in `file`, or this table's
    /// own when `None`), whose entries ran from `block_first_user_key` to `last_key`, and
    /// records its range.
    fn index_data_block(&mut self, file: Option<u64>, handle: BlockHandle, entries: u64) {
        self.index
            .add(&self.last_key, file.unwrap_or(0), handle, entries);
        if self.record_block_ranges {
            self.blocks.push(BlockRange {
                smallest: Bytes::copy_from_slice(&self.block_first_user_key),
                largest: Bytes::copy_from_slice(split_internal_key(&self.last_key).0),
                size: handle.size + BLOCK_TRAILER_LEN as u64,
                entries,
                offset: handle.offset,
                file,
            });
        }
        self.data_blocks += 1;
    }

    /// Checks that `internal_key` is an internal key following the last one and that the entry
    /// is within the size limit; returns its user key, sequence number and kind, and whether
    /// its user key differs from the last entry's.
    fn check_entry<'k>(
        &self,
        internal_key: &'k [u8],
        value: &[u8],
    ) -> Result<(&'k [u8], SeqNo, ValueKind, bool)> {
        let Some((user_key, seq, kind)) = parse_internal_key(internal_key) else {
            return Err(Error::InvalidArgument(format!(
                "{}: \"{}\" is not an internal key",
                self.file_name,
                internal_key.escape_ascii()
            )));
        };
        if internal_key.len().saturating_add(value.len()) > MAX_ENTRY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "{}: entry of {} key and {} value bytes exceeds the {MAX_ENTRY_BYTES}-byte limit",
                self.file_name,
                internal_key.len(),
                value.len()
            )));
        }
        if self.entries == 0 {
            return Ok((user_key, seq, kind, true));
        }
        if compare_internal_keys(&self.last_key, internal_key) != Ordering::Less {
            let (last_user, last_trailer) = split_internal_key(&self.last_key);
            return Err(Error::InvalidArgument(format!(
                "{}: key \"{}\" (seq {seq}) added after \"{}\" (seq {}); keys must \
                 strictly increase",
                self.file_name,
                user_key.escape_ascii(),
                last_user.escape_ascii(),
                last_trailer >> 8
            )));
        }
        let new_user_key = split_internal_key(&self.last_key).0 != user_key;
        Ok((user_key, seq, kind, new_user_key))
    }

    /// Checks the entry ([`TableBuilder::check_entry`]) and accounts for it in the filter and
    /// the properties; `starts_block` makes its user key the block's first.
    fn note_entry(&mut self, internal_key: &[u8], value: &[u8], starts_block: bool) -> Result<()> {
        let (user_key, seq, kind, new_user_key) = self.check_entry(internal_key, value)?;
        if self.entries == 0 {
            self.smallest = Bytes::copy_from_slice(user_key);
        }
        if new_user_key {
            if let Some(bloom) = &mut self.bloom {
                bloom.add_key(user_key);
            }
        }
        if starts_block {
            self.block_first_user_key.clear();
            self.block_first_user_key.extend_from_slice(user_key);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);

        self.entries += 1;
        if kind == ValueKind::Delete {
            self.tombstones += 1;
        }
        self.smallest_seqno = self.smallest_seqno.min(seq);
        self.largest_seqno = self.largest_seqno.max(seq);
        self.raw_key_bytes += internal_key.len() as u64;
        self.raw_value_bytes += value.len() as u64;
        Ok(())
    }

    /// Bytes the open data block would occupy if it were written now, trailer included
    /// (uncompressed); 0 when no block is open.
    pub fn open_block_bytes(&self) -> u64 {
        if self.data_block.is_empty() {
            0
        } else {
            (self.data_block.size_estimate() + BLOCK_TRAILER_LEN) as u64
        }
    }

    /// The data blocks finished so far (with [`TableOptions::record_block_ranges`]).
    pub fn finished_blocks(&self) -> &[BlockRange] {
        &self.blocks
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes written plus bytes buffered for the file: the open data block, the index built
    /// so far and the filter the keys added so far need, plus the kept blocks referred to in
    /// other files (the table holds their data). This is what output cutting compares with the
    /// target file size (the properties block and footer add a few hundred bytes). Blocks held
    /// back for a dictionary count uncompressed, with their trailers.
    pub fn estimated_size(&self) -> u64 {
        let data = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.size_estimate() + self.pad_before_block() as usize
        };
        let data = data
            + self.pending.as_ref().map_or(0, |pending| {
                pending.bytes() + pending.len() * BLOCK_TRAILER_LEN
            });
        let filter = match &self.bloom {
            Some(bloom) if self.bloom_bits_per_key > 0.0 => bloom.encoded_len(),
            _ => 0,
        };
        self.offset + self.referenced_bytes + (data + self.index.size() + filter) as u64
    }

    /// Writes the open data block and its index entry, or holds it back while the table's
    /// dictionary waits for blocks to train on.
    fn flush_data_block(&mut self) -> Result<()> {
        let entries = self.data_block.entries();
        if let Some(pending) = &mut self.pending {
            pending.push(
                self.data_block.finish(),
                entries,
                &self.block_first_user_key,
                &self.last_key,
            );
            self.data_block.reset();
            if pending.is_full() {
                self.write_pending_blocks()?;
            }
            return Ok(());
        }
        self.pad_to_page()?;
        let raw = self.data_block.finish();
        let handle = write_data_block(
            &mut self.compressor,
            &mut *self.file,
            &self.file_name,
            &mut self.offset,
            raw,
        )?;
        self.index_data_block(None, handle, entries);
        self.data_block.reset();
        Ok(())
    }

    /// Trains the table's dictionary on the blocks held back (if any are), then writes them
    /// compressed with it, and every later block goes straight out.
    fn write_pending_blocks(&mut self) -> Result<()> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        if let Some(dictionary) = pending.train() {
            self.compressor.set_dictionary(&dictionary).map_err(|e| {
                Error::io(format!("preparing the dictionary of {}", self.file_name), e)
            })?;
            self.dictionary = Some(dictionary);
        }
        // Index entries are made from the builder's block keys; the last block held back ends
        // with the last key added, so the keys end where they were.
        let (data, blocks) = pending.into_blocks();
        let mut start = 0;
        for block in blocks {
            let raw = &data[start..start + block.len];
            start += block.len;
            self.pad_to_page()?;
            let handle = write_data_block(
                &mut self.compressor,
                &mut *self.file,
                &self.file_name,
                &mut self.offset,
                raw,
            )?;
            self.block_first_user_key = block.first_user_key;
            self.last_key = block.last_key;
            self.index_data_block(None, handle, block.entries);
        }
        Ok(())
    }

    /// Bytes of padding the next data block needs before it to start on a page: none unless
    /// blocks are aligned ([`TableOptions::block_align`]).
    fn pad_before_block(&self) -> u64 {
        if self.block_align {
            (PAGE - self.offset % PAGE) % PAGE
        } else {
            0
        }
    }

    /// Writes zeros up to where the next data block starts ([`TableBuilder::pad_before_block`]).
    fn pad_to_page(&mut self) -> Result<()> {
        let pad = self.pad_before_block();
        if pad > 0 {
            self.file
                .append(&ZERO_PAGE[..pad as usize])
                .map_err(|e| Error::io(format!("writing {}", self.file_name), e))?;
            self.offset += pad;
        }
        Ok(())
    }

    /// Compresses (if configured) and writes a meta block.
    fn write_meta_block(&mut self, raw: &[u8], compress: bool) -> Result<BlockHandle> {
        let (block_type, stored) = if compress {
            self.compressor
                .encode(raw)
                .map_err(|e| Error::io(format!("compressing a block of {}", self.file_name), e))?
        } else {
            (TYPE_NONE, raw)
        };
        write_block(
            &mut *self.file,
            &self.file_name,
            &mut self.offset,
            block_type,
            stored,
        )
    }

    /// Writes the last data block, the filter, index and properties blocks and the footer,
    /// then syncs the file.
    pub fn finish(mut self) -> Result<TableSummary> {
        if !self.data_block.is_empty() {
            self.flush_data_block()?;
        }
        self.write_pending_blocks()?;
        let bloom = self.bloom.take();
        let filter = match &bloom {
            Some(bloom) if self.bloom_bits_per_key > 0.0 => {
                let mut bits = Vec::new();
                bloom.finish(&mut bits);
                // Filter bits are random by design: compressing them cannot pay.
                Some(self.write_meta_block(&bits, false)?)
            }
            _ => None,
        };
        let key_hashes = match bloom {
            Some(bloom) if self.collect_key_hashes => bloom.into_hashes(),
            _ => Vec::new(),
        };

        let index_block = std::mem::take(&mut self.index).finish();
        let index = self.write_meta_block(&index_block, true)?;

        let entry_bounds = (self.entries > 0).then(|| {
            (
                self.smallest.clone(),
                Bytes::copy_from_slice(split_internal_key(&self.last_key).0),
            )
        });
        let (mut smallest_seqno, mut largest_seqno) = if self.entries == 0 {
            (SeqNo::MAX, 0)
        } else {
            (self.smallest_seqno, self.largest_seqno)
        };
        let range_tombstones = std::mem::take(&mut self.range_tombstones);
        let mut range_deletion_block = None;
        if !range_tombstones.is_empty() {
            let mut raw = Vec::new();
            for t in &range_tombstones {
                smallest_seqno = smallest_seqno.min(t.seq);
                largest_seqno = largest_seqno.max(t.seq);
                put_varint(&mut raw, t.start.len() as u64);
                raw.extend_from_slice(&t.start);
                put_varint(&mut raw, t.end.len() as u64);
                raw.extend_from_slice(&t.end);
                // Fixed width, as the properties' sequence numbers: a table's size depends
                // on its keys alone, so the simulator sizes it without knowing the numbers.
                raw.extend_from_slice(&t.seq.to_le_bytes());
            }
            range_deletion_block = Some(self.write_meta_block(&raw, true)?);
        }
        // Dictionaries are trained to be incompressible.
        let compression_dictionary = match self.dictionary.take() {
            Some(dictionary) => Some(self.write_meta_block(&dictionary, false)?),
            None => None,
        };
        let (smallest, largest) =
            table_key_range(entry_bounds, &range_tombstones).unwrap_or_default();
        if smallest_seqno > largest_seqno {
            (smallest_seqno, largest_seqno) = (0, 0);
        }
        // The oldest version that can read the table: older builds refuse it instead of
        // misreading it.
        let format_version = if compression_dictionary.is_some() {
            FORMAT_VERSION
        } else if range_deletion_block.is_some() {
            FORMAT_WITHOUT_DICTIONARY
        } else {
            FORMAT_WITHOUT_RANGE_DELETIONS
        };
        let properties = TableProperties {
            entries: self.entries,
            tombstones: self.tombstones,
            smallest_seqno,
            largest_seqno,
            smallest: smallest.clone(),
            largest: largest.clone(),
            raw_key_bytes: self.raw_key_bytes,
            raw_value_bytes: self.raw_value_bytes,
            data_blocks: self.data_blocks,
            bloom_bits_per_key: self.bloom_bits_per_key,
            compression: self.compression,
            format_version,
            range_deletions: range_tombstones.len() as u64,
            range_deletion_block,
            compression_dictionary,
        };
        let mut props_block = BlockBuilder::new(1);
        properties.encode(&mut props_block);
        let properties_handle = self.write_meta_block(props_block.finish(), true)?;

        let footer = Footer {
            index,
            filter,
            properties: properties_handle,
            format_version,
        };
        let io_err = |e| Error::io(format!("writing {}", self.file_name), e);
        self.file.append(&footer.encode()).map_err(io_err)?;
        self.offset += FOOTER_LEN as u64;
        self.file
            .sync()
            .map_err(|e| Error::io(format!("syncing {}", self.file_name), e))?;

        Ok(TableSummary {
            file_size: self.offset,
            referenced_bytes: self.referenced_bytes,
            entries: self.entries,
            tombstones: self.tombstones,
            range_deletions: range_tombstones.len() as u64,
            smallest,
            largest,
            smallest_seqno,
            largest_seqno,
            raw_key_bytes: self.raw_key_bytes,
            raw_value_bytes: self.raw_value_bytes,
            data_blocks: self.data_blocks,
            blocks: self.blocks,
            key_hashes,
        })
    }
}

/// Compresses the data block `raw` and writes it at `*offset` ([`write_block`]).
fn write_data_block(
    compressor: &mut BlockCompressor,
    file: &mut dyn WritableFile,
    file_name: &str,
    offset: &mut u64,
    raw: &[u8],
) -> Result<BlockHandle> {
    let (block_type, stored) = compressor
        .encode_data(raw)
        .map_err(|e| Error::io(format!("compressing a block of {file_name}"), e))?;
    write_block(file, file_name, offset, block_type, stored)
}

/// Appends `stored` and its trailer at `*offset`, advancing it; the block's handle.
fn write_block(
    file: &mut dyn WritableFile,
    file_name: &str,
    offset: &mut u64,
    block_type: u8,
    stored: &[u8],
) -> Result<BlockHandle> {
    let io_err = |e| Error::io(format!("writing {file_name}"), e);
    file.append(stored).map_err(io_err)?;
    file.append(&block_trailer(stored, block_type))
        .map_err(io_err)?;
    let handle = BlockHandle {
        offset: *offset,
        size: stored.len() as u64,
    };
    *offset += (stored.len() + BLOCK_TRAILER_LEN) as u64;
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use crate::iter::InternalIterator;
    use crate::key::internal_key;
    use crate::stats::Statistics;
    use crate::table::{ReadPurpose, ReadaheadSize, Table};
    use std::path::Path;
    use std::sync::Arc;

    /// A table of 3,000 entries of 16-byte keys and 100-byte values written with `block_align`,
    /// opened again, its data blocks' places as the index gives them, and its entries read back.
    fn aligned_table(block_align: bool) -> (Vec<BlockRange>, usize) {
        let fs = MemFs::new();
        let path = Path::new("/t.sst");
        let options = TableOptions {
            block_align,
            record_block_ranges: true,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::new(fs.create(path).expect("create"), "t.sst".into(), options);
        let value = |i: u32| vec![i as u8; 100];
        for i in 0..3000u32 {
            let key = internal_key(format!("key{i:013}").as_bytes(), 1, ValueKind::Put);
            b.add(&key, &value(i)).expect("add");
        }
        let summary = b.finish().expect("finish");
        let table = Arc::new(
            Table::open(
                fs.open(path).expect("open"),
                1,
                "t.sst".into(),
                None,
                Arc::new(Statistics::default()),
            )
            .expect("open table"),
        );
        let ranges = table.block_ranges().expect("block ranges");
        assert_eq!(
            ranges, summary.blocks,
            "the index places blocks where they were written"
        );
        let mut it = table.iter_with(ReadPurpose::Query, ReadaheadSize::Auto);
        it.seek_to_first().expect("seek");
        let mut read = 0;
        while it.valid() {
            assert_eq!(it.value(), &value(read as u32)[..], "entry {read}");
            read += 1;
            it.next().expect("next");
        }
        (ranges, read)
    }

    #[test]
    fn aligned_data_blocks_each_lie_within_one_page() {
        let page = |offset: u64| offset / PAGE;
        let (ranges, read) = aligned_table(true);
        assert_eq!(read, 3000);
        assert!(ranges.len() > 50);
        for r in &ranges {
            assert_eq!(
                r.offset % PAGE,
                0,
                "block at {} starts off a page",
                r.offset
            );
            assert!(r.size <= PAGE, "block at {} of {} bytes", r.offset, r.size);
        }
        // Without alignment the same blocks straddle pages (what the option is for).
        let (ranges, read) = aligned_table(false);
        assert_eq!(read, 3000);
        let straddling = ranges
            .iter()
            .filter(|r| page(r.offset) != page(r.offset + r.size - 1))
            .count();
        assert!(
            straddling > ranges.len() / 2,
            "{straddling} of {}",
            ranges.len()
        );
    }
}
