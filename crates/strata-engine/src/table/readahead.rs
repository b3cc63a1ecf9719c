//! Reading ahead of a table iterator: one large read in place of many block-sized ones, for
//! scans and compactions, which read a table's blocks in order.

use super::block::Block;
use super::file::{ReadPurpose, TableFile};
use super::format::BlockHandle;
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

/// A table iterator's readahead: the file range it read (or had the operating system read)
/// past the block it needed, and how much to read next time.
#[derive(Debug)]
pub(crate) struct Readahead {
    size: ReadaheadSize,
    /// The automatic readahead's next size.
    next_auto: usize,
    /// Block reads in a row, each of the block after the one before.
    consecutive: u32,
    /// The index position of the last block read from storage.
    last_read: Option<usize>,
    /// The file offset of the range read ahead.
    window_offset: u64,
    /// Its length.
    window_len: u64,
    /// Its bytes, when read into memory of the iterator's own; empty when the operating system
    /// was asked to read the range into its cache ([`RandomAccessFile::prefetch`]).
    ///
    /// [`RandomAccessFile::prefetch`]: crate::fs::RandomAccessFile::prefetch
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
            window_len: 0,
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
                if self.consecutive <= AUTO_READAHEAD_AFTER {
                    return 0;
                }
                let ahead = self.next_auto;
                self.next_auto = (ahead * 2).min(AUTO_READAHEAD_MAX);
                ahead
            }
        }
    }

    /// The data block at `handle` (block `position` of the table's index), from the range read
    /// ahead if it holds it, else read from `src` together with the bytes this readahead reads
    /// past it. The automatic readahead asks the operating system to read those bytes into its
    /// cache where it can (as RocksDB's does with buffered reads) and reads the blocks from
    /// there as they are needed: a scan that stops early then copies only the blocks it used
    /// (measured: reading 8 KiB windows into the iterator's memory, scans of a page-cached
    /// database copied 2.4 times the bytes of the blocks they used). A fixed readahead (a
    /// compaction's, or `ReadOptions::readahead_size`) reads into memory of its own, one read
    /// for the whole range.
    pub(super) fn block(
        &mut self,
        src: &TableFile,
        handle: BlockHandle,
        position: usize,
        purpose: ReadPurpose,
    ) -> Result<Block> {
        let total = src.block_span(handle, "data")?;
        let end = handle.offset + total as u64;
        if handle.offset >= self.window_offset && end <= self.window_offset + self.window_len {
            // What the last read brought: consecutive as far as the pattern goes.
            self.last_read = Some(position);
            self.count_hit(src, purpose);
            if self.window.is_empty() {
                return src.read_parsed_block(handle, "data", purpose);
            }
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
        let len = read_end - handle.offset;
        self.window.clear();
        self.window_offset = handle.offset;
        self.window_len = 0;
        if self.size == ReadaheadSize::Auto {
            // A block the page cache holds says the blocks after it are likely there too: the
            // kernel serves them as fast without a hint, which would cost a system call.
            let mut stored = vec![0u8; total];
            if src.file.read_if_cached(&mut stored, handle.offset) {
                return src.parse_stored_block(handle, purpose, stored);
            }
            if src.file.prefetch(handle.offset, len) {
                self.window_len = len;
                self.count_read(src, purpose, len);
                self.count_hit(src, purpose);
                return src.read_parsed_block(handle, "data", purpose);
            }
        }
        self.window.resize(len as usize, 0);
        if let Err(e) = src.read_at(&mut self.window, handle.offset, "data") {
            self.window.clear();
            return Err(e);
        }
        self.window_len = len;
        self.count_read(src, purpose, len);
        self.count_hit(src, purpose);
        src.parse_stored_block(handle, purpose, self.window[..total].to_vec())
    }

    fn count_read(&self, src: &TableFile, purpose: ReadPurpose, len: u64) {
        if purpose == ReadPurpose::Query {
            Statistics::add(&src.stats.readahead_reads, 1);
            Statistics::add(&src.stats.readahead_bytes, len);
        }
    }

    fn count_hit(&self, src: &TableFile, purpose: ReadPurpose) {
        if purpose == ReadPurpose::Query {
            Statistics::add(&src.stats.readahead_blocks, 1);
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

    /// A file that records the length of every read, and of every range it was asked to
    /// prefetch; it takes prefetches when `hints` and says it holds every range in memory when
    /// `in_memory`, as a page-cached file would.
    #[derive(Default)]
    struct Counting {
        inner: Option<Arc<dyn RandomAccessFile>>,
        reads: Mutex<Vec<usize>>,
        prefetched: Mutex<Vec<u64>>,
        hints: bool,
        in_memory: bool,
    }

    impl Counting {
        fn inner(&self) -> &dyn RandomAccessFile {
            self.inner.as_deref().expect("a file")
        }
    }

    impl RandomAccessFile for Counting {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.reads.lock().push(buf.len());
            self.inner().read_exact_at(buf, offset)
        }
        fn len(&self) -> u64 {
            self.inner().len()
        }
        fn read_if_cached(&self, buf: &mut [u8], offset: u64) -> bool {
            self.in_memory && self.read_exact_at(buf, offset).is_ok()
        }
        fn prefetch(&self, _offset: u64, len: u64) -> bool {
            if self.hints {
                self.prefetched.lock().push(len);
            }
            self.hints
        }
    }

    /// A table of 300 blocks of ~4 KiB, opened over a file that counts its reads (those of
    /// opening the table forgotten).
    fn table() -> (Arc<Table>, Arc<Counting>, Arc<Statistics>) {
        table_over(Counting::default())
    }

    /// [`table`] over `file` (its `inner` set here).
    fn table_over(mut file: Counting) -> (Arc<Table>, Arc<Counting>, Arc<Statistics>) {
        let fs = MemFs::new();
        let path = Path::new("/t.sst");
        let mut b = TableBuilder::new(
            fs.create(path).expect("create"),
            "t.sst".into(),
            TableOptions::default(),
        );
        for i in 0..300 * 30u32 {
            let key = internal_key(format!("key{i:08}").as_bytes(), 1, ValueKind::Put);
            b.add(&key, &[i as u8; 120]).expect("add");
        }
        b.finish().expect("finish");
        file.inner = Some(fs.open(path).expect("open"));
        let file = Arc::new(file);
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
    fn automatic_readahead_has_the_operating_system_read_ahead_where_it_can() {
        let (table, file, stats) = table_over(Counting {
            hints: true,
            ..Counting::default()
        });
        assert_eq!(scan_all(&table, ReadaheadSize::Auto), 9000);
        let blocks = table.index().expect("index").entries.len();
        // Every block read on its own, from the kernel's cache in a real file system.
        let reads = file.reads.lock().clone();
        assert_eq!(reads.len(), blocks);
        assert!(reads.iter().all(|&r| r < 5000), "{reads:?}");
        // The ranges asked for grow as the iterator's own reads would.
        let hints = file.prefetched.lock().clone();
        assert!(hints[0] > 8192 && hints[0] < 8192 + 5000, "{hints:?}");
        assert!(
            hints
                .iter()
                .all(|&h| h <= (AUTO_READAHEAD_MAX + 5000) as u64),
            "{hints:?}"
        );
        assert!(hints.len() < blocks / 10, "{} hints", hints.len());
        let g = Statistics::get;
        assert_eq!(g(&stats.readahead_reads), hints.len() as u64);
        assert_eq!(g(&stats.readahead_blocks), blocks as u64 - 2);
    }

    #[test]
    fn blocks_the_operating_system_holds_are_read_without_reading_ahead() {
        let (table, file, stats) = table_over(Counting {
            hints: true,
            in_memory: true,
            ..Counting::default()
        });
        assert_eq!(scan_all(&table, ReadaheadSize::Auto), 9000);
        let blocks = table.index().expect("index").entries.len();
        assert!(file.prefetched.lock().is_empty());
        let reads = file.reads.lock().clone();
        assert_eq!(reads.len(), blocks);
        assert!(reads.iter().all(|&r| r < 5000), "{reads:?}");
        assert_eq!(Statistics::get(&stats.readahead_reads), 0);
        assert_eq!(Statistics::get(&stats.blocks_read), blocks as u64);
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
}
