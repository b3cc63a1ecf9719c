//! Reading ahead of a table iterator: one large read in place of many block-sized ones, for
//! scans and compactions, which read a table's blocks in order.

use super::block::Block;
use super::file::{ReadPurpose, TableFile};
use super::format::BlockHandle;
use crate::error::Result;
use crate::stats::Statistics;
use std::cell::Cell;

/// How much a table iterator reads ahead of the block it needs when that block is not cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadaheadSize {
    /// Block by block.
    Off,
    /// This many bytes past every block read from storage (a compaction's
    /// `compaction_readahead_size`, a scan's `ReadOptions::readahead_size`).
    Fixed(usize),
    /// RocksDB's automatic readahead: nothing for the first two reads of consecutive blocks;
    /// from the third, [`AUTO_READAHEAD_START`] bytes, doubling with every further read up to
    /// [`AUTO_READAHEAD_MAX`]; back to nothing when the reads stop being consecutive.
    Auto,
}

/// The first automatic readahead (RocksDB's `initial_auto_readahead_size`).
pub const AUTO_READAHEAD_START: usize = 8 << 10;

/// The largest automatic readahead (RocksDB's `max_auto_readahead_size`).
pub const AUTO_READAHEAD_MAX: usize = 256 << 10;

/// Consecutive block reads after which the automatic readahead starts, with the next one
/// (RocksDB's `num_file_reads_for_auto_readahead`). A short scan reading a table's first two
/// blocks so reads nothing it will not use.
const AUTO_READAHEAD_AFTER: u32 = 2;

thread_local! {
    /// The window of this thread's last finished readahead, for its next one: a scan makes an
    /// iterator per table, and a fresh window would be allocated and zeroed every time (in the
    /// page cache that zeroing was most of what reading ahead cost a short scan).
    static SPARE_WINDOW: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A window is kept for the thread's next readahead only up to this size.
const MAX_SPARE_WINDOW: usize = 2 * AUTO_READAHEAD_MAX;

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
    /// File bytes read ahead: `window[..window_len]`. Bytes past it are left from an earlier
    /// read, so that a later one fills them without zeroing them first.
    window: Vec<u8>,
    window_len: usize,
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
            window_len: 0,
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
                if self.consecutive <= AUTO_READAHEAD_AFTER {
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
        let window_end = self.window_offset + self.window_len as u64;
        if handle.offset >= self.window_offset && end <= window_end {
            // What the last read brought: consecutive as far as the pattern goes.
            self.last_read = Some(position);
            self.count_hit(src, purpose);
            let at = (handle.offset - self.window_offset) as usize;
            return src.parse_stored_slice(handle, purpose, &self.window[at..at + total]);
        }
        let ahead = self.ahead(position);
        if ahead == 0 {
            return src.read_parsed_block(handle, "data", purpose);
        }
        // Up to the end of the file at most: the meta blocks and the footer follow the data,
        // so a few of their bytes may come along, never bytes past the file.
        let read_end = end.saturating_add(ahead as u64).min(src.size);
        let len = (read_end - handle.offset) as usize;
        if self.window.is_empty() {
            self.window = SPARE_WINDOW.try_with(Cell::take).unwrap_or_default();
        }
        if self.window.len() < len {
            self.window.resize(len, 0);
        }
        self.window_offset = handle.offset;
        self.window_len = 0;
        src.read_at(&mut self.window[..len], handle.offset, "data")?;
        self.window_len = len;
        if purpose == ReadPurpose::Query {
            Statistics::add(&src.stats.readahead_reads, 1);
            Statistics::add(&src.stats.readahead_bytes, len as u64);
        }
        self.count_hit(src, purpose);
        src.parse_stored_slice(handle, purpose, &self.window[..total])
    }

    fn count_hit(&self, src: &TableFile, purpose: ReadPurpose) {
        if purpose == ReadPurpose::Query {
            Statistics::add(&src.stats.readahead_blocks, 1);
        }
    }
}

impl Drop for Readahead {
    fn drop(&mut self) {
        if !self.window.is_empty() && self.window.len() <= MAX_SPARE_WINDOW {
            let window = std::mem::take(&mut self.window);
            // A thread being torn down has no spare to keep.
            let _ = SPARE_WINDOW.try_with(|spare| spare.set(window));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, MemFs, RandomAccessFile};
    use crate::iter::InternalIterator;
    use crate::key::{internal_key, ValueKind};
    use crate::table::{Table, TableBuilder, TableOptions};
    use parking_lot::Mutex;
    use std::io;
    use std::path::Path;
    use std::sync::Arc;

    /// A file that records the length of every read.
    struct Counting {
        inner: Arc<dyn RandomAccessFile>,
        reads: Mutex<Vec<usize>>,
    }

    impl RandomAccessFile for Counting {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.reads.lock().push(buf.len());
            self.inner.read_exact_at(buf, offset)
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
    }

    /// A table of 300 blocks of ~4 KiB, opened over a file that counts its reads (those of
    /// opening the table forgotten).
    fn table() -> (Arc<Table>, Arc<Counting>, Arc<Statistics>) {
        table_of_values(0)
    }

    /// [`table`] with the value of key `i` made of bytes `i as u8 ^ salt`.
    fn table_of_values(salt: u8) -> (Arc<Table>, Arc<Counting>, Arc<Statistics>) {
        let fs = MemFs::new();
        let path = Path::new("/t.sst");
        let mut b = TableBuilder::new(
            fs.create(path).expect("create"),
            "t.sst".into(),
            TableOptions::default(),
        );
        for i in 0..300 * 30u32 {
            let key = internal_key(format!("key{i:08}").as_bytes(), 1, ValueKind::Put);
            b.add(&key, &[i as u8 ^ salt; 120]).expect("add");
        }
        b.finish().expect("finish");
        let file = Arc::new(Counting {
            inner: fs.open(path).expect("open"),
            reads: Mutex::new(Vec::new()),
        });
        let stats = Arc::new(Statistics::default());
        let table = Table::open(
            Arc::clone(&file) as Arc<dyn RandomAccessFile>,
            1,
            "t.sst".into(),
            None,
            Arc::clone(&stats),
        )
        .expect("open table");
        file.reads.lock().clear();
        (Arc::new(table), file, stats)
    }

    fn scan_all(table: &Arc<Table>, size: ReadaheadSize) -> usize {
        let mut it = table.iter_with(ReadPurpose::Query, size);
        it.seek_to_first().expect("seek");
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().expect("next");
        }
        n
    }

    #[test]
    fn automatic_readahead_starts_after_two_reads_and_doubles_to_its_maximum() {
        let (table, file, stats) = table();
        assert_eq!(scan_all(&table, ReadaheadSize::Auto), 9000);
        let reads = file.reads.lock().clone();
        let blocks = table.index().expect("index").entries.len();
        // Two block-sized reads, then 8 KiB past a block, 16, 32, ... up to 256 KiB.
        assert!(
            reads[0] < 5000 && reads[1] < 5000 && reads[2] > 8192 && reads[2] < 8192 + 5000,
            "{reads:?}"
        );
        for pair in reads[2..].windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(
                b >= a || b < AUTO_READAHEAD_MAX,
                "sizes grow until the maximum (or the file's end): {reads:?}"
            );
        }
        assert!(
            reads.iter().all(|&r| r <= AUTO_READAHEAD_MAX + 5000),
            "{reads:?}"
        );
        assert!(
            reads.len() < blocks / 10,
            "{} reads for {blocks} blocks",
            reads.len()
        );
        let g = Statistics::get;
        assert_eq!(g(&stats.blocks_read), blocks as u64);
        assert_eq!(g(&stats.readahead_blocks), blocks as u64 - 2);
        assert_eq!(g(&stats.readahead_reads), reads.len() as u64 - 2);
    }

    #[test]
    fn a_fixed_readahead_reads_that_much_past_every_block_and_off_reads_blocks() {
        let (table, file, _) = table();
        scan_all(&table, ReadaheadSize::Fixed(64 << 10));
        let reads = file.reads.lock().clone();
        let last = reads.len() - 1;
        assert!(
            reads[..last]
                .iter()
                .all(|&r| r > 64 << 10 && r < (64 << 10) + 5000),
            "{reads:?}"
        );
        file.reads.lock().clear();
        scan_all(&table, ReadaheadSize::Off);
        let blocks = table.index().expect("index").entries.len();
        assert_eq!(file.reads.lock().len(), blocks);
    }

    #[test]
    fn point_seeks_read_no_more_than_their_blocks() {
        let (table, file, _) = table();
        let mut it = table.iter_with(ReadPurpose::Query, ReadaheadSize::Auto);
        for i in (0..9000u32).step_by(1337) {
            let target = internal_key(format!("key{i:08}").as_bytes(), 1, ValueKind::Put);
            it.seek(&target).expect("seek");
            assert!(it.valid());
        }
        let reads = file.reads.lock().clone();
        assert!(reads.iter().all(|&r| r < 5000), "{reads:?}");
    }

    #[test]
    fn a_window_another_iterator_left_serves_none_of_its_bytes() {
        // The first scan leaves this thread a window of the largest size, full of the first
        // table's bytes; the second reads shorter windows into it, of a table whose values differ.
        let (first, _, _) = table_of_values(0);
        assert_eq!(scan_all(&first, ReadaheadSize::Auto), 9000);
        let (second, _, stats) = table_of_values(0x5a);
        let mut it = second.iter_with(ReadPurpose::Query, ReadaheadSize::Fixed(8 << 10));
        it.seek_to_first().expect("seek");
        let mut i = 0u32;
        while it.valid() {
            assert_eq!(it.value(), &[i as u8 ^ 0x5a; 120][..], "value of key {i}");
            i += 1;
            it.next().expect("next");
        }
        assert_eq!(i, 9000);
        assert!(Statistics::get(&stats.readahead_blocks) > 100);
    }
}
