//! The file a table reads from: block reads, checks and decoding, and who they are for.

use std::sync::Arc;

use bytes::Bytes;

use super::block::{Block, DecodeError};
use super::bloom::BloomFilter;
use super::compress::{block_crc, decode_contents, BLOCK_TRAILER_LEN, TYPE_NONE};
use super::format::BlockHandle;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::stats::Statistics;
use zstd::zstd_safe::DDict;

/// Blocks from this size on are read into mappings of their own
/// ([`TableFile::read_block_bytes`]): malloc's default threshold for mapping an allocation.
pub(crate) const MAPPED_BLOCK: usize = 128 << 10;

/// The file a table reads from, with what block reads need to report.
pub(super) struct TableFile {
    pub(super) file: Arc<dyn RandomAccessFile>,
    pub(super) name: String,
    pub(super) size: u64,
    pub(super) stats: Arc<Statistics>,
    /// The Zstandard dictionary the file's data blocks were compressed with, if any (loaded
    /// once at open, after the properties that name it).
    pub(super) dictionary: Option<DDict<'static>>,
    /// How long a query's block read may poll for the device
    /// ([`crate::Options::with_read_polling`]; zero: never).
    pub(super) read_poll: std::time::Duration,
}

/// Who reads a block, which decides the counter it is charged to and whether it may enter the
/// block cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPurpose {
    /// A point lookup or a scan: counted in `blocks_read`, cached.
    Query,
    /// A compaction or merging flush reading its inputs: counted in `compaction_blocks_read`,
    /// never cached (as RocksDB's compaction reads with `fill_cache = false`): a merge reads each
    /// block once, and caching it would evict the blocks lookups need.
    Compaction,
    /// Properties, index and filter blocks read at open, and every block a checksum
    /// verification reads: counted in `metadata_blocks_read`.
    Metadata,
}

impl TableFile {
    /// Bytes the block at `handle` occupies with its trailer, checked to lie inside the file.
    pub(super) fn block_span(&self, handle: BlockHandle, what: &str) -> Result<usize> {
        handle
            .size
            .checked_add(BLOCK_TRAILER_LEN as u64)
            .filter(|total| {
                handle
                    .offset
                    .checked_add(*total)
                    .is_some_and(|end| end <= self.size)
            })
            .and_then(|total| usize::try_from(total).ok())
            .ok_or_else(|| {
                Error::corruption(
                    &self.name,
                    handle.offset,
                    format!(
                        "{what} block (offset {}, size {}) lies outside the {}-byte file",
                        handle.offset, handle.size, self.size
                    ),
                )
            })
    }

    /// Fills `buf` (the block and its trailer) from the file, charges the read to `purpose`'s
    /// counter and verifies the checksum; returns the block's type byte.
    pub(super) fn read_checked(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
        buf: &mut [u8],
    ) -> Result<u8> {
        let poll = match purpose {
            ReadPurpose::Query => self.read_poll,
            ReadPurpose::Compaction | ReadPurpose::Metadata => std::time::Duration::ZERO,
        };
        self.read_polled(buf, handle.offset, what, poll)?;
        self.check_block(handle, what, purpose, buf)
    }

    /// Fills `buf` from the file at `offset`; `what` names the block (or blocks) in errors.
    pub(super) fn read_at(&self, buf: &mut [u8], offset: u64, what: &str) -> Result<()> {
        self.read_polled(buf, offset, what, std::time::Duration::ZERO)
    }

    /// [`read_at`](Self::read_at), polling for the device for up to `poll` where the file can
    /// ([`RandomAccessFile::read_exact_at_polling`]; zero reads as `read_exact_at` does).
    fn read_polled(
        &self,
        buf: &mut [u8],
        offset: u64,
        what: &str,
        poll: std::time::Duration,
    ) -> Result<()> {
        let read = if poll.is_zero() {
            self.file.read_exact_at(buf, offset)
        } else {
            self.file.read_exact_at_polling(buf, offset, poll)
        };
        read.map_err(|e| {
            Error::io(
                format!("reading {what} block of {} at offset {offset}", self.name),
                e,
            )
        })
    }

    /// Charges the block in `buf` (with its trailer, as read from storage) to `purpose`'s
    /// counter and verifies its checksum; returns its type byte.
    fn check_block(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
        buf: &[u8],
    ) -> Result<u8> {
        let total = buf.len();
        match purpose {
            ReadPurpose::Query => {
                Statistics::add(&self.stats.blocks_read, 1);
                Statistics::add(&self.stats.block_bytes_read, total as u64);
            }
            ReadPurpose::Compaction => Statistics::add(&self.stats.compaction_blocks_read, 1),
            ReadPurpose::Metadata => Statistics::add(&self.stats.metadata_blocks_read, 1),
        }
        let stored = total
            .checked_sub(BLOCK_TRAILER_LEN)
            .ok_or_else(|| Error::corruption(&self.name, handle.offset, "short block"))?;
        let (block_type, crc) = match buf.get(stored..) {
            Some(&[t, a, b, c, d]) => (t, u32::from_le_bytes([a, b, c, d])),
            _ => return Err(Error::corruption(&self.name, handle.offset, "short block")),
        };
        if block_crc(&buf[..stored], block_type) != crc {
            return Err(Error::corruption(
                &self.name,
                handle.offset,
                format!("{what} block checksum mismatch"),
            ));
        }
        Ok(block_type)
    }

    /// The data block at `handle` from `stored`, its bytes with the trailer as read from
    /// storage by a batch of reads: charged to `purpose`'s counter, checked, decompressed and
    /// parsed like [`TableFile::read_parsed_block`]'s.
    pub(super) fn parse_stored_block(
        &self,
        handle: BlockHandle,
        purpose: ReadPurpose,
        mut stored: Vec<u8>,
    ) -> Result<Block> {
        let block_type = self.check_block(handle, "data", purpose, &stored)?;
        stored.truncate(stored.len() - BLOCK_TRAILER_LEN);
        let contents = self.decode(handle, "data", stored, block_type)?;
        Block::new(exact_bytes(contents)).map_err(|e| self.decode_error(handle, "data", e))
    }

    /// [`TableFile::parse_stored_block`] of bytes that stay the caller's (a readahead window):
    /// only the block's contents are copied out.
    pub(super) fn parse_stored_slice(
        &self,
        handle: BlockHandle,
        purpose: ReadPurpose,
        stored: &[u8],
    ) -> Result<Block> {
        let block_type = self.check_block(handle, "data", purpose, stored)?;
        let contents = &stored[..stored.len() - BLOCK_TRAILER_LEN];
        let contents = if block_type == TYPE_NONE {
            Bytes::copy_from_slice(contents)
        } else {
            exact_bytes(self.decode(handle, "data", contents.to_vec(), block_type)?)
        };
        Block::new(contents).map_err(|e| self.decode_error(handle, "data", e))
    }

    /// `stored`'s contents decompressed, or a corruption error naming the `what` block.
    fn decode(
        &self,
        handle: BlockHandle,
        what: &str,
        stored: Vec<u8>,
        block_type: u8,
    ) -> Result<Vec<u8>> {
        decode_contents(stored, block_type, self.dictionary.as_ref()).map_err(|reason| {
            Error::corruption(&self.name, handle.offset, format!("{what} block: {reason}"))
        })
    }

    /// Reads the block at `handle`, verifies its checksum and decompresses it, charging the read
    /// to `purpose`'s counter.
    pub(super) fn read_block(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
    ) -> Result<Vec<u8>> {
        let total = self.block_span(handle, what)?;
        let mut buf = vec![0u8; total];
        let block_type = self.read_checked(handle, what, purpose, &mut buf)?;
        buf.truncate(total - BLOCK_TRAILER_LEN);
        self.decode(handle, what, buf, block_type)
    }

    /// [`TableFile::read_block`] as shared bytes. A large uncompressed block (the index and
    /// filter of a big table) is read into an anonymous mapping of its own instead of the heap:
    /// it lives as long as the table, and when the table goes its memory goes back to the
    /// system at once. On the heap, such blocks freed by compactions left holes malloc kept
    /// (measured: with malloc's large allocations always mapped, YCSB A's peak RSS at 2·10^6
    /// entries fell from 154 to 133 MiB).
    pub(super) fn read_block_bytes(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
    ) -> Result<Bytes> {
        let total = self.block_span(handle, what)?;
        if total < MAPPED_BLOCK {
            return self.read_block(handle, what, purpose).map(exact_bytes);
        }
        let Ok(mut map) = memmap2::MmapMut::map_anon(total) else {
            return self.read_block(handle, what, purpose).map(exact_bytes);
        };
        let block_type = self.read_checked(handle, what, purpose, &mut map)?;
        let stored = total - BLOCK_TRAILER_LEN;
        if block_type != TYPE_NONE {
            return self
                .decode(handle, what, map[..stored].to_vec(), block_type)
                .map(exact_bytes);
        }
        Ok(Bytes::from_owner(map).slice(..stored))
    }

    /// Reads and decodes the Bloom filter block at `handle`.
    pub(super) fn read_filter(&self, handle: BlockHandle) -> Result<BloomFilter> {
        let contents = self.read_block_bytes(handle, "filter", ReadPurpose::Metadata)?;
        BloomFilter::decode(contents).map_err(|reason| {
            Error::corruption(&self.name, handle.offset, format!("filter block: {reason}"))
        })
    }

    /// Reads and checks the layout of the block at `handle`.
    pub(super) fn read_parsed_block(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
    ) -> Result<Block> {
        let contents = self.read_block_bytes(handle, what, purpose)?;
        Block::new(contents).map_err(|e| self.decode_error(handle, what, e))
    }

    pub(super) fn decode_error(&self, handle: BlockHandle, what: &str, e: DecodeError) -> Error {
        Error::corruption(
            &self.name,
            handle.offset,
            format!(
                "{what} block: {} at byte {} of the decoded block",
                e.reason, e.offset
            ),
        )
    }
}

/// `contents` as shared bytes in one allocation. `Bytes::from` a vector whose capacity exceeds
/// its length (a block read with its trailer, then cut) allocates a second, shared header for
/// it; a block read from storage is made and dropped once per read, so in a scan that extra
/// allocation and its free showed in profiles (`bytes::bytes::shared_drop`, `_int_free`).
/// Shrinking to the length first is a realloc that keeps the memory where it is.
fn exact_bytes(contents: Vec<u8>) -> Bytes {
    Bytes::from(contents.into_boxed_slice())
}
