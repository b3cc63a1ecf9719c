//! Reading a table: [`Table`], its index, filter and blocks. What describes a table for tools
//! (block places, layout, checksum checks) is in `inspect`.

use std::cell::Cell;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Weak};

use bytes::Bytes;

use super::block::{split_internal_key, Block, Cursor};
use super::bloom::BloomFilter;
use super::cache::{BlockCache, CacheEntry, TableCharge};
use super::compress::BLOCK_TRAILER_LEN;
use super::file::{ReadPurpose, TableFile};
use super::format::{BlockHandle, Footer, TableProperties, FOOTER_LEN};
use super::index::{Index, IndexEntry};
use super::readahead::Readahead;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::key::{pack_trailer, parse_internal_key, SeqNo, ValueKind, MAX_SEQNO, SEEK_KIND};
use crate::stats::Statistics;
use strata_exec::range_del::RangeTombstone;
use zstd::zstd_safe::DDict;

thread_local! {
    /// Key buffer for `Table::get`, reused so that lookups do not allocate.
    static KEY_SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A scratch buffer kept between lookups only up to this capacity.
const MAX_KEPT_SCRATCH: usize = 64 << 10;

fn take_scratch() -> Vec<u8> {
    KEY_SCRATCH.try_with(Cell::take).unwrap_or_default()
}

fn put_scratch(buf: Vec<u8>) {
    if buf.capacity() <= MAX_KEPT_SCRATCH {
        // Fails only while the thread is exiting; the buffer is then just dropped.
        let _ = KEY_SCRATCH.try_with(|slot| slot.set(buf));
    }
}

/// An index or a filter of a table: held by the table, or kept in the block cache.
enum Held<T> {
    /// Held for as long as the table is open (charged to the block cache when it charges
    /// tables): RocksDB's index and filter outside the cache, or pinned in it.
    Pinned(Arc<T>),
    /// In the block cache under the table's file number and this offset, read from the file
    /// again after an eviction.
    Cached(u64),
}

/// An index or a filter in use: borrowed from the table that holds it, or a share of the block
/// cache's.
pub(super) enum MetaRef<'a, T> {
    Pinned(&'a T),
    Cached(Arc<T>),
}

impl<T> Deref for MetaRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            MetaRef::Pinned(t) => t,
            MetaRef::Cached(t) => t,
        }
    }
}

/// An open table file. Cheap to share (`Arc<Table>`); every method takes `&self` and is safe to
/// call from many threads. The properties live in memory, and the index and filter too unless
/// the table keeps them in the block cache ([`Table::cache_index_and_filter`]); data blocks are
/// read on demand, through the block cache when there is one.
pub struct Table {
    pub(super) src: TableFile,
    pub(super) file_number: u64,
    pub(super) cache: Option<Arc<BlockCache>>,
    /// Where the meta blocks are, and the format version (`inspect` reports them).
    pub(super) footer: Footer,
    /// Where data blocks end: the first meta block's offset.
    data_end: u64,
    index: Held<Index>,
    filter: Option<Held<BloomFilter>>,
    properties: TableProperties,
    /// Opens the files of blocks the index refers to elsewhere (see [`BlockFiles`]).
    block_files: Option<Weak<dyn BlockFiles>>,
    /// The range deletions the table holds, read at open (a table holds few or none).
    range_tombstones: Arc<[RangeTombstone<Bytes>]>,
    /// This table's charge on the block cache, if the cache charges open tables.
    _charge: Option<TableCharge>,
}

/// Opens the table files that index entries of other tables refer to: a table made by a
/// block-preserving merge reads some of its data blocks from other files. The engine's table
/// cache implements it; a table opened on its own ([`Table::open`]) has none and reports such
/// blocks as unreadable.
pub trait BlockFiles: Send + Sync {
    /// The open table in file `file_number`.
    fn table(&self, file_number: u64) -> Result<Arc<Table>>;
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("file_name", &self.src.name)
            .field("file_number", &self.file_number)
            .field("file_size", &self.src.size)
            .field("entries", &self.properties.entries)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Opens the table in `file`: reads and checks the footer, properties, index and filter.
    /// `file_number` keys its blocks in `cache`; `file_name` names the file in errors.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        file_number: u64,
        file_name: String,
        cache: Option<Arc<BlockCache>>,
        stats: Arc<Statistics>,
    ) -> Result<Table> {
        let size = file.len();
        let mut src = TableFile {
            file,
            name: file_name,
            size,
            stats,
            dictionary: None,
            read_poll: std::time::Duration::ZERO,
        };
        let Some(footer_offset) = size.checked_sub(FOOTER_LEN as u64) else {
            return Err(Error::corruption(
                &src.name,
                0,
                format!("file of {size} bytes is too short to be a table"),
            ));
        };
        let mut buf = [0u8; FOOTER_LEN];
        src.file
            .read_exact_at(&mut buf, footer_offset)
            .map_err(|e| Error::io(format!("reading the footer of {}", src.name), e))?;
        let footer = Footer::decode(&buf, &src.name, footer_offset)?;

        // Meta blocks end before the footer; data blocks end before the first meta block.
        let meta = [Some(footer.index), footer.filter, Some(footer.properties)];
        let mut data_end = footer_offset;
        for h in meta.into_iter().flatten() {
            let end = h
                .offset
                .checked_add(h.size)
                .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
            if end.is_none_or(|e| e > footer_offset) {
                return Err(Error::corruption(
                    &src.name,
                    footer_offset,
                    format!(
                        "footer: block (offset {}, size {}) overlaps the footer",
                        h.offset, h.size
                    ),
                ));
            }
            data_end = data_end.min(h.offset);
        }

        let props_block =
            src.read_parsed_block(footer.properties, "properties", ReadPurpose::Metadata)?;
        let properties = TableProperties::decode(&props_block).map_err(|reason| {
            Error::corruption(
                &src.name,
                footer.properties.offset,
                format!("properties block: {reason}"),
            )
        })?;
        if let Some(h) = properties.compression_dictionary {
            let raw = src.read_block(h, "compression dictionary", ReadPurpose::Metadata)?;
            let dictionary = DDict::try_create(&raw).ok_or_else(|| {
                Error::corruption(
                    &src.name,
                    h.offset,
                    "zstd refused the compression dictionary",
                )
            })?;
            src.dictionary = Some(dictionary);
        }
        let index = Index::load(
            &src,
            footer.index,
            data_end,
            footer.format_version,
            file_number,
        )?;
        let filter = match footer.filter {
            Some(h) => Some(Held::Pinned(Arc::new(src.read_filter(h)?))),
            None => None,
        };

        let indexed_entries = index
            .entries
            .iter()
            .try_fold(0u64, |sum, e| sum.checked_add(u64::from(e.entries)));
        if index.entries.len() as u64 != properties.data_blocks
            || indexed_entries != Some(properties.entries)
        {
            return Err(Error::corruption(
                &src.name,
                footer.index.offset,
                format!(
                    "index lists {} blocks holding {indexed_entries:?} entries, properties say {} \
                     blocks holding {} entries",
                    index.entries.len(),
                    properties.data_blocks,
                    properties.entries
                ),
            ));
        }

        let range_tombstones = match properties.range_deletion_block {
            Some(h) => read_range_tombstones(&src, h, properties.range_deletions)?,
            None => Arc::from(Vec::new()),
        };

        let mut table = Table {
            src,
            file_number,
            cache,
            footer,
            data_end,
            index: Held::Pinned(Arc::new(index)),
            filter,
            properties,
            block_files: None,
            range_tombstones,
            _charge: None,
        };
        if let Some(cache) = &table.cache {
            table._charge = cache.charge_table(table.memory_usage() as u64);
        }
        Ok(table)
    }

    /// This table, keeping its index and filter in its block cache (if it has one) instead of
    /// holding them: they are evicted like blocks (unless the cache gives them high priority)
    /// and read again when needed, and the table charges the cache only for its properties.
    /// RocksDB: `cache_index_and_filter_blocks`.
    pub fn cache_index_and_filter(mut self) -> Table {
        let Some(cache) = self.cache.clone() else {
            return self;
        };
        if let Held::Pinned(index) = &self.index {
            let offset = self.footer.index.offset;
            cache.insert_meta(
                self.file_number,
                offset,
                CacheEntry::Index(Arc::clone(index)),
            );
            self.index = Held::Cached(offset);
        }
        if let (Some(Held::Pinned(filter)), Some(h)) = (&self.filter, self.footer.filter) {
            cache.insert_meta(
                self.file_number,
                h.offset,
                CacheEntry::Filter(Arc::clone(filter)),
            );
            self.filter = Some(Held::Cached(h.offset));
        }
        // Charge again for what the table still holds.
        self._charge = None;
        self._charge = cache.charge_table(self.memory_usage() as u64);
        self
    }

    /// The index: the table's own, or the block cache's (read into it again after an eviction,
    /// counted in `index_blocks_read`).
    pub(super) fn index(&self) -> Result<MetaRef<'_, Index>> {
        match &self.index {
            Held::Pinned(index) => Ok(MetaRef::Pinned(index)),
            Held::Cached(offset) => self.cached_index(*offset).map(MetaRef::Cached),
        }
    }

    /// [`Table::index`] as a share that outlives the borrow (for iterators).
    pub(super) fn shared_index(&self) -> Result<Arc<Index>> {
        match &self.index {
            Held::Pinned(index) => Ok(Arc::clone(index)),
            Held::Cached(offset) => self.cached_index(*offset),
        }
    }

    fn cached_index(&self, offset: u64) -> Result<Arc<Index>> {
        let stats = &self.src.stats;
        let cache = self.meta_cache()?;
        if let Some(CacheEntry::Index(index)) = cache.get_meta(self.file_number, offset) {
            Statistics::add(&stats.index_cache_hits, 1);
            return Ok(index);
        }
        Statistics::add(&stats.index_blocks_read, 1);
        let index = Arc::new(Index::load(
            &self.src,
            self.footer.index,
            self.data_end,
            self.footer.format_version,
            self.file_number,
        )?);
        cache.insert_meta(
            self.file_number,
            offset,
            CacheEntry::Index(Arc::clone(&index)),
        );
        Ok(index)
    }

    /// The Bloom filter, if the table has one: the table's own, or the block cache's (read
    /// into it again after an eviction, counted in `filter_blocks_read`).
    pub(super) fn filter(&self) -> Result<Option<MetaRef<'_, BloomFilter>>> {
        let offset = match &self.filter {
            None => return Ok(None),
            Some(Held::Pinned(filter)) => return Ok(Some(MetaRef::Pinned(filter))),
            Some(Held::Cached(offset)) => *offset,
        };
        let stats = &self.src.stats;
        let cache = self.meta_cache()?;
        if let Some(CacheEntry::Filter(filter)) = cache.get_meta(self.file_number, offset) {
            Statistics::add(&stats.filter_cache_hits, 1);
            return Ok(Some(MetaRef::Cached(filter)));
        }
        Statistics::add(&stats.filter_blocks_read, 1);
        let handle = self.footer.filter.unwrap_or_default();
        let filter = Arc::new(self.src.read_filter(handle)?);
        cache.insert_meta(
            self.file_number,
            offset,
            CacheEntry::Filter(Arc::clone(&filter)),
        );
        Ok(Some(MetaRef::Cached(filter)))
    }

    /// The block cache holding the index and filter ([`Table::cache_index_and_filter`] only
    /// hands them to a table that has one).
    fn meta_cache(&self) -> Result<&Arc<BlockCache>> {
        self.cache.as_ref().ok_or_else(|| {
            Error::corruption(
                &self.src.name,
                self.footer.index.offset,
                "the table keeps its index in a block cache it does not have",
            )
        })
    }

    /// This table, its lookups' and scans' block reads polling for the device for up to `poll`
    /// ([`crate::fs::RandomAccessFile::read_exact_at_polling`]).
    pub fn with_read_poll(mut self, poll: std::time::Duration) -> Table {
        self.src.read_poll = poll;
        self
    }

    /// This table, reading the blocks its index places in other files through `files`.
    pub fn with_block_files(mut self, files: Weak<dyn BlockFiles>) -> Table {
        self.block_files = Some(files);
        self
    }

    /// The table whose file holds `entry`'s block: this one, or the one `block_files` opens.
    pub(super) fn holder(&self, entry: &IndexEntry) -> Result<Holder<'_>> {
        if entry.file == 0 {
            return Ok(Holder::Own(self));
        }
        let files = self
            .block_files
            .as_ref()
            .and_then(Weak::upgrade)
            .ok_or_else(|| {
                Error::corruption(
                    &self.src.name,
                    self.footer.index.offset,
                    format!(
                    "a data block lies in file {}, which only a database can open for this table",
                    entry.file
                ),
                )
            })?;
        Ok(Holder::Other(files.table(entry.file)?))
    }

    /// The newest entry of `user_key` with seq ≤ `snapshot`, if this table has one:
    /// (seq, kind, value). Probes the Bloom filter first (counting `bloom_checks` and
    /// `bloom_negatives`), then the in-memory index of last keys, then reads at most one data
    /// block.
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Bytes)>> {
        self.get_from(user_key, snapshot, true)
    }

    /// [`Table::get`] without the filter probe: for a caller that already knows the table may
    /// hold the key (the key index).
    pub fn get_unfiltered(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Bytes)>> {
        self.get_from(user_key, snapshot, false)
    }

    fn get_from(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        filtered: bool,
    ) -> Result<Option<(SeqNo, ValueKind, Bytes)>> {
        let Some(position) = self.locate(user_key, snapshot, filtered)? else {
            return Ok(None);
        };
        let entry = self.index()?.entries[position];
        let block = self.data_block(&entry, ReadPurpose::Query)?;
        self.find_in_block(&block, position, user_key, snapshot)
    }

    /// Where a point lookup of `user_key` at `snapshot` must look in this table: the index
    /// position of the one data block that can hold its newest visible entry, or `None` when
    /// the Bloom filter (probed, and counted in `bloom_checks` and `bloom_negatives`, only if
    /// `filtered`) or the index rules the table out. Reads nothing.
    pub(crate) fn locate(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        filtered: bool,
    ) -> Result<Option<usize>> {
        if filtered && !self.probe_filter(user_key)? {
            return Ok(None);
        }
        let trailer = pack_trailer(snapshot.min(MAX_SEQNO), SEEK_KIND);
        // Index keys are exact last keys, so the first entry ≥ the target, if any, is in the
        // first block whose last key is ≥ the target.
        let index = self.index()?;
        let position = index.find(user_key, trailer);
        Ok((position < index.entries.len()).then_some(position))
    }

    /// [`Table::may_contain`], the probe counted in `bloom_checks` and `bloom_negatives`: for
    /// lookups.
    pub(crate) fn probe_filter(&self, user_key: &[u8]) -> Result<bool> {
        let Some(filter) = self.filter()? else {
            return Ok(true);
        };
        Statistics::add(&self.src.stats.bloom_checks, 1);
        let may = filter.may_contain(user_key);
        if !may {
            Statistics::add(&self.src.stats.bloom_negatives, 1);
        }
        Ok(may)
    }

    /// The table whose file holds the data block at index `position` (this one, or the one a
    /// block-preserving merge kept it in) and where it lies there.
    pub(crate) fn block_holder(
        self: &Arc<Self>,
        position: usize,
    ) -> Result<(Arc<Table>, BlockHandle)> {
        let entry = self.index()?.entries[position];
        let holder = match self.holder(&entry)? {
            Holder::Own(_) => Arc::clone(self),
            Holder::Other(table) => table,
        };
        Ok((holder, entry.handle()))
    }

    /// The data block a seek to the internal key `target` starts in (the first whose last key
    /// is at or after it), and the table whose file holds it; `None` past the last block.
    pub(crate) fn seek_block(
        self: &Arc<Self>,
        target: &[u8],
    ) -> Result<Option<(Arc<Table>, BlockHandle)>> {
        let (user_key, trailer) = split_internal_key(target);
        let index = self.index()?;
        let position = index.find(user_key, trailer);
        if position >= index.entries.len() {
            return Ok(None);
        }
        self.block_holder(position).map(Some)
    }

    /// The newest entry of `user_key` with seq ≤ `snapshot` in `block`, the data block at
    /// index `position` ([`Table::locate`]'s answer).
    pub(crate) fn find_in_block(
        &self,
        block: &Block,
        position: usize,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Bytes)>> {
        let entry = self.index()?.entries[position];
        let trailer = pack_trailer(snapshot.min(MAX_SEQNO), SEEK_KIND);
        // Errors name the file that holds the block.
        let holder = self.holder(&entry)?;
        let src = &holder.table().src;
        let mut cursor = Cursor::with_buffer(take_scratch());
        let result = match cursor.seek(block, user_key, trailer) {
            Err(e) => Err(src.decode_error(entry.handle(), "data", e)),
            Ok(()) if !cursor.valid() => Ok(None),
            Ok(()) => match parse_internal_key(cursor.key()) {
                Some((found, seq, kind)) if found == user_key => {
                    let (s, e) = cursor.value_range();
                    let data = block.data();
                    if s <= e && e <= data.len() {
                        Ok(Some((seq, kind, data.slice(s..e))))
                    } else {
                        Err(Error::corruption(
                            &src.name,
                            entry.offset,
                            "value out of range",
                        ))
                    }
                }
                Some(_) => Ok(None),
                None => Err(Error::corruption(
                    &src.name,
                    entry.offset,
                    "data block holds an invalid internal key",
                )),
            },
        };
        put_scratch(cursor.into_buffer());
        result
    }

    /// False if the Bloom filter rules `user_key` out (always true without a filter). Does not
    /// count probes.
    pub fn may_contain(&self, user_key: &[u8]) -> Result<bool> {
        Ok(self.filter()?.is_none_or(|f| f.may_contain(user_key)))
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// The file number given at open.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The file name given at open.
    pub fn file_name(&self) -> &str {
        &self.src.name
    }

    /// The file's size in bytes.
    pub fn file_size(&self) -> u64 {
        self.src.size
    }

    /// Bytes of memory the open table holds (properties, and the index and filter unless the
    /// block cache keeps them), for table-cache accounting. Cached blocks are charged to the
    /// [`BlockCache`] instead.
    pub fn memory_usage(&self) -> usize {
        let index = match &self.index {
            Held::Pinned(index) => index.memory_usage(),
            Held::Cached(_) => 0,
        };
        let filter = match &self.filter {
            Some(Held::Pinned(filter)) => filter.size(),
            _ => 0,
        };
        index
            + filter
            + self.properties.smallest.len()
            + self.properties.largest.len()
            + self
                .range_tombstones
                .iter()
                .map(|t| t.start.len() + t.end.len() + 24)
                .sum::<usize>()
            + std::mem::size_of::<Table>()
            + self.src.name.len()
    }

    /// The range deletions the table holds (fragments: pieces that do not overlap, one
    /// record per piece and sequence number).
    pub fn range_tombstones(&self) -> &Arc<[RangeTombstone<Bytes>]> {
        &self.range_tombstones
    }

    /// The format version the table was written with.
    pub fn format_version(&self) -> u32 {
        self.footer.format_version
    }

    /// The data block of `entry`, from the cache or the file holding it.
    pub(super) fn data_block(
        &self,
        entry: &IndexEntry,
        purpose: ReadPurpose,
    ) -> Result<Arc<Block>> {
        self.holder(entry)?
            .table()
            .stored_block(entry.handle(), purpose)
    }

    /// The data block at `handle` of this table's own file, from the cache or the file. Only
    /// queries count cache hits and misses and fill the cache; a compaction takes a cached block
    /// but leaves the cache as it is. Blocks are cached under the file that holds them, so a
    /// kept block is cached once for every table referring to it.
    pub(super) fn stored_block(
        &self,
        handle: BlockHandle,
        purpose: ReadPurpose,
    ) -> Result<Arc<Block>> {
        self.stored_block_via(handle, purpose, None)
    }

    /// [`Table::stored_block`], reading a missing block through `readahead` if given: block
    /// `position` of this table's index.
    pub(super) fn stored_block_via(
        &self,
        handle: BlockHandle,
        purpose: ReadPurpose,
        readahead: Option<(&mut Readahead, usize)>,
    ) -> Result<Arc<Block>> {
        let query = purpose == ReadPurpose::Query;
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.get(self.file_number, handle.offset) {
                if query {
                    Statistics::add(&self.src.stats.block_cache_hits, 1);
                }
                return Ok(block);
            }
        }
        let block = Arc::new(match readahead {
            Some((readahead, position)) => readahead.block(&self.src, handle, position, purpose)?,
            None => self.src.read_parsed_block(handle, "data", purpose)?,
        });
        if let (Some(cache), true) = (&self.cache, query) {
            Statistics::add(&self.src.stats.block_cache_misses, 1);
            cache.insert(self.file_number, handle.offset, Arc::clone(&block));
        }
        Ok(block)
    }
}

/// The table holding a data block: the one reading it, or another it refers to.
pub(super) enum Holder<'a> {
    Own(&'a Table),
    Other(Arc<Table>),
}

impl Holder<'_> {
    pub(super) fn table(&self) -> &Table {
        match self {
            Holder::Own(t) => t,
            Holder::Other(t) => t,
        }
    }
}

/// Reads and decodes the range-deletion block at `handle`, which the properties say holds
/// `count` records.
fn read_range_tombstones(
    src: &TableFile,
    handle: BlockHandle,
    count: u64,
) -> Result<Arc<[RangeTombstone<Bytes>]>> {
    let raw = Bytes::from(src.read_block(handle, "range deletions", ReadPurpose::Metadata)?);
    let bad = |what: &str| {
        Error::corruption(
            &src.name,
            handle.offset,
            format!("range-deletion block: {what}"),
        )
    };
    let mut out = Vec::new();
    let mut pos = 0;
    let slice = |pos: &mut usize| -> Option<Bytes> {
        let len = usize::try_from(super::coding::get_varint(&raw, pos)?).ok()?;
        let end = pos.checked_add(len).filter(|&e| e <= raw.len())?;
        let s = raw.slice(*pos..end);
        *pos = end;
        Some(s)
    };
    while pos < raw.len() {
        let record = (|| {
            let start = slice(&mut pos)?;
            let end = slice(&mut pos)?;
            let seq = super::coding::get_u64_le(&raw, pos).filter(|&s| s <= MAX_SEQNO)?;
            pos += 8;
            Some(RangeTombstone { start, end, seq })
        })();
        match record {
            Some(t) if t.start < t.end => out.push(t),
            Some(_) => return Err(bad("a range that ends before it starts")),
            None => return Err(bad("a truncated or malformed record")),
        }
    }
    if out.len() as u64 != count {
        return Err(bad(&format!(
            "{} records, the properties say {count}",
            out.len()
        )));
    }
    Ok(Arc::from(out))
}
