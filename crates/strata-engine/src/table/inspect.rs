//! Describing a table without reading its entries: where its blocks are ([`Table::index_blocks`],
//! [`Table::block_ranges`], [`Table::layout`]) and whether they are intact
//! ([`Table::verify_checksums`]). Tools and tests use these; lookups and scans do not.

use std::cmp::Ordering;

use bytes::Bytes;

use super::block::{split_internal_key, Cursor};
use super::bloom::BloomFilter;
use super::builder::BlockRange;
use super::compress::BLOCK_TRAILER_LEN;
use super::file::ReadPurpose;
use super::format::BlockHandle;
use super::reader::Table;
use crate::error::{Error, Result};
use crate::key::{compare_internal_keys, parse_internal_key};

/// Where a block is in a table file: offset and bytes with its trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BlockPlace {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Bytes it occupies, its 5-byte trailer included.
    pub size: u64,
}

/// A data block as a table's index lists it ([`Table::index_blocks`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedBlock {
    /// Where it is in the file holding it.
    pub place: BlockPlace,
    /// Entries in it.
    pub entries: u64,
    /// Its last user key.
    pub last_key: Bytes,
    /// The file holding it when it is another table's (a block kept by a block-preserving
    /// merge); `None` for the table's own blocks.
    pub file: Option<u64>,
}

/// A table file's layout beyond its data blocks ([`Table::layout`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TableLayout {
    /// The format version in the footer.
    pub format_version: u32,
    /// The index block.
    pub index: BlockPlace,
    /// The properties block.
    pub properties: BlockPlace,
    /// The Bloom filter block, if the table has one.
    pub filter: Option<BlockPlace>,
    /// Hash probes per key of the filter.
    pub filter_probes: Option<u32>,
    /// Bits of the filter that are set, and its bits: with the probes, an estimate of its
    /// false-positive rate, (set / bits)^probes.
    pub filter_bits_set: Option<u64>,
    /// Bits of the filter.
    pub filter_bits: Option<u64>,
    /// The Zstandard dictionary the data blocks are compressed with, if the table has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression_dictionary: Option<BlockPlace>,
}

impl Table {
    /// Every data block as the index lists it, in key order: where it is, its entries and its
    /// last user key. Reads nothing but the index, if the block cache evicted it.
    pub fn index_blocks(&self) -> Result<Vec<IndexedBlock>> {
        let index = self.index()?;
        Ok(index
            .entries
            .iter()
            .map(|e| {
                let key = index.bytes(e.last_key);
                IndexedBlock {
                    place: BlockPlace {
                        offset: e.offset,
                        size: u64::from(e.size) + BLOCK_TRAILER_LEN as u64,
                    },
                    entries: u64::from(e.entries),
                    last_key: key.slice(..key.len().saturating_sub(8)),
                    file: (e.file != 0).then_some(e.file),
                }
            })
            .collect())
    }

    /// Every data block's key range and location: [`Table::index_blocks`] with the first keys
    /// from each block's first entry (one uncached read per block; the index keeps only last
    /// keys).
    pub fn block_ranges(&self) -> Result<Vec<BlockRange>> {
        let mut cursor = Cursor::default();
        let index = self.index()?;
        let mut ranges = Vec::with_capacity(index.entries.len());
        for (e, indexed) in index.entries.iter().zip(self.index_blocks()?) {
            let holder = self.holder(e)?;
            let src = &holder.table().src;
            let block = src.read_parsed_block(e.handle(), "data", ReadPurpose::Metadata)?;
            cursor
                .seek_to_first(&block)
                .map_err(|err| src.decode_error(e.handle(), "data", err))?;
            let first = split_internal_key(cursor.key()).0;
            ranges.push(BlockRange {
                smallest: Bytes::copy_from_slice(first),
                largest: indexed.last_key,
                size: indexed.place.size,
                entries: indexed.entries,
                offset: indexed.place.offset,
                file: indexed.file,
            });
        }
        Ok(ranges)
    }

    /// Where the table's meta blocks are and what its filter is (for `strata inspect`).
    pub fn layout(&self) -> Result<TableLayout> {
        let place = |h: BlockHandle| BlockPlace {
            offset: h.offset,
            size: h.size + BLOCK_TRAILER_LEN as u64,
        };
        let filter = self.filter()?;
        Ok(TableLayout {
            format_version: self.footer.format_version,
            index: place(self.footer.index),
            properties: place(self.footer.properties),
            filter: self.footer.filter.map(place),
            filter_probes: filter.as_deref().map(BloomFilter::probes),
            filter_bits_set: filter.as_deref().map(BloomFilter::bits_set),
            filter_bits: filter.as_deref().map(|f| f.size() as u64 * 8),
            compression_dictionary: self.properties().compression_dictionary.map(place),
        })
    }

    /// Reads every block from the file (bypassing the cache) and checks its checksum and
    /// contents: each data block must decode completely, hold the number of entries the index
    /// says, in increasing order, and end with the key the index lists.
    pub fn verify_checksums(&self) -> Result<()> {
        self.src
            .read_block(self.footer.properties, "properties", ReadPurpose::Metadata)?;
        self.src
            .read_block(self.footer.index, "index", ReadPurpose::Metadata)?;
        if let Some(h) = self.footer.filter {
            self.src.read_block(h, "filter", ReadPurpose::Metadata)?;
        }
        if let Some(h) = self.properties().range_deletion_block {
            self.src
                .read_block(h, "range deletions", ReadPurpose::Metadata)?;
        }
        if let Some(h) = self.properties().compression_dictionary {
            self.src
                .read_block(h, "compression dictionary", ReadPurpose::Metadata)?;
        }
        let mut cursor = Cursor::default();
        let mut previous: Vec<u8> = Vec::new();
        let index = self.index()?;
        for entry in &index.entries {
            let holder = self.holder(entry)?;
            let src = &holder.table().src;
            let block = src.read_parsed_block(entry.handle(), "data", ReadPurpose::Metadata)?;
            let corrupt = |reason: &str| Error::corruption(&src.name, entry.offset, reason);
            let mut count = 0u64;
            cursor
                .seek_to_first(&block)
                .map_err(|e| src.decode_error(entry.handle(), "data", e))?;
            while cursor.valid() {
                let key = cursor.key();
                if parse_internal_key(key).is_none() {
                    return Err(corrupt("data block holds an invalid internal key"));
                }
                if !previous.is_empty() && compare_internal_keys(&previous, key) != Ordering::Less {
                    return Err(corrupt("data block keys out of order"));
                }
                previous.clear();
                previous.extend_from_slice(key);
                count += 1;
                cursor
                    .next(&block)
                    .map_err(|e| src.decode_error(entry.handle(), "data", e))?;
            }
            if count != u64::from(entry.entries) {
                return Err(corrupt(&format!(
                    "data block holds {count} entries, the index says {}",
                    entry.entries
                )));
            }
            if previous != index.last_key(entry) {
                return Err(corrupt("data block's last key differs from its index key"));
            }
        }
        Ok(())
    }
}
