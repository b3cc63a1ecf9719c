//! Reading ahead of a table iterator: one large read in place of many block-sized ones, for
//! scans and compactions, which read a table's blocks in order.

use super::block::Block;
use super::format::BlockHandle;
use super::reader::{ReadPurpose, TableFile};
use crate::error::Result;
use crate::stats::Statistics;

/// How much a table iterator reads ahead of the block it needs when that block is not cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadaheadSize {
    /// Block by block.
    Off,
    /// This many bytes past every block read from storage (a compaction's
    /// `compaction_readahead_size`, a scan's `ReadOptions::readahead_size`).
    Fixed(usize),
    /// RocksDB's automatic readahead: nothing until two block reads in a row were of
    /// consecutive blocks, then [`AUTO_READAHEAD_START`] bytes, doubling with every further
    /// read up to [`AUTO_READAHEAD_MAX`], back to nothing when the reads stop being consecutive.
    Auto,
}

/// The first automatic readahead (RocksDB's `initial_auto_readahead_size`).
pub const AUTO_READAHEAD_START: usize = 8 << 10;

/// The largest automatic readahead (RocksDB's `max_auto_readahead_size`).
pub const AUTO_READAHEAD_MAX: usize = 256 << 10;

/// Consecutive block reads after which the automatic readahead starts (RocksDB's
/// `num_file_reads_for_auto_readahead`).
const AUTO_READAHEAD_AFTER: u32 = 2;

/// A table iterator's readahead: the file bytes it read past the block it needed, and how
/// much to read next time.
#[derive(Debug)]
pub(crate) struct Readahead {
    size: ReadaheadSize,
    /// The automatic readahead's next size.
    next_auto: usize,
    /// Block reads in a row, each of the block after the one before.
    consecutive: u32,
    /// The index position of the last block read from storage.
    last_read: Option<usize>,
    /// The file offset of `window`'s first byte.
    window_offset: u64,
    /// File bytes read ahead.
    window: Vec<u8>,
}

impl Readahead {
    /// A readahead of `size`, with nothing read yet.
    pub(crate) fn new(size: ReadaheadSize) -> Readahead {
        Readahead {
            size,
            next_auto: AUTO_READAHEAD_START,
            consecutive: 0,
            last_read: None,
            window_offset: 0,
            window: Vec::new(),
        }
    }

    /// How many bytes past a block read at index position `position` to read.
    fn ahead(&mut self, position: usize) -> usize {
        let consecutive = self.last_read.is_some_and(|last| last + 1 == position);
        self.last_read = Some(position);
        match self.size {
            ReadaheadSize::Off => 0,
            ReadaheadSize::Fixed(bytes) => bytes,
            ReadaheadSize::Auto if !consecutive => {
                self.consecutive = 1;
                self.next_auto = AUTO_READAHEAD_START;
                0
            }
            ReadaheadSize::Auto => {
                self.consecutive += 1;
                if self.consecutive < AUTO_READAHEAD_AFTER {
                    return 0;
                }
                let ahead = self.next_auto;
                self.next_auto = (ahead * 2).min(AUTO_READAHEAD_MAX);
                ahead
            }
        }
    }

    /// The data block at `handle` (block `position` of the table's index), from the window read
    /// ahead if it holds it, else read from `src` together with the bytes this readahead
    /// reads past it.
    pub(super) fn block(
        &mut self,
        src: &TableFile,
        handle: BlockHandle,
        position: usize,
        purpose: ReadPurpose,
    ) -> Result<Block> {
        let total = src.block_span(handle, "data")?;
        let end = handle.offset + total as u64;
        let window_end = self.window_offset + self.window.len() as u64;
        if handle.offset >= self.window_offset && end <= window_end {
            // What the last read brought: consecutive as far as the pattern goes.
            self.last_read = Some(position);
            self.count_hit(src, purpose);
            let at = (handle.offset - self.window_offset) as usize;
            return src.parse_stored_block(handle, purpose, self.window[at..at + total].to_vec());
        }
        let ahead = self.ahead(position);
        if ahead == 0 {
            return src.read_parsed_block(handle, "data", purpose);
        }
        // Up to the end of the file at most: the meta blocks and the footer follow the data,
        // so a few of their bytes may come along, never bytes past the file.
        let read_end = end.saturating_add(ahead as u64).min(src.size);
        let len = (read_end - handle.offset) as usize;
        self.window.clear();
        self.window.resize(len, 0);
        self.window_offset = handle.offset;
        if let Err(e) = src.read_at(&mut self.window, handle.offset, "data") {
            self.window.clear();
            return Err(e);
        }
        if purpose == ReadPurpose::Query {
            Statistics::add(&src.stats.readahead_reads, 1);
            Statistics::add(&src.stats.readahead_bytes, len as u64);
        }
        self.count_hit(src, purpose);
        src.parse_stored_block(handle, purpose, self.window[..total].to_vec())
    }

    fn count_hit(&self, src: &TableFile, purpose: ReadPurpose) {
        if purpose == ReadPurpose::Query {
            Statistics::add(&src.stats.readahead_blocks, 1);
        }
    }
}
