//! Reading a table: [`Table`], its iterator, and the shared [`BlockCache`].

use std::cell::Cell;
use std::cmp::Ordering;
use std::fmt;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::block::{cmp_to_target, split_internal_key, Block, Cursor, DecodeError};
use super::bloom::BloomFilter;
use super::builder::BlockRange;
use super::compress::{block_crc, decode_contents, BLOCK_TRAILER_LEN, TYPE_NONE};
use super::format::{
    decode_index, BlockHandle, Footer, IndexValue, TableProperties, FOOTER_LEN,
    FORMAT_COMPACT_INDEX, FORMAT_WITH_REFERENCES,
};
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iter::{InternalIterator, StoredBlock};
use crate::key::{
    compare_internal_keys, pack_trailer, parse_internal_key, SeqNo, ValueKind, MAX_SEQNO, SEEK_KIND,
};
use crate::stats::Statistics;

/// Bytes charged per cached block on top of its contents: the `Block`, its `Arc`, the key and
/// the cache's own bookkeeping. Also keeps every weight above zero (quick_cache never evicts
/// zero-weight items).
const CACHE_ENTRY_OVERHEAD: u64 = 128;

/// Blocks from this size on are read into mappings of their own
/// ([`TableFile::read_block_bytes`]): malloc's default threshold for mapping an allocation.
pub(crate) const MAPPED_BLOCK: usize = 128 << 10;

/// Cache key: (file number, block offset).
type CacheKey = (u64, u64);

#[derive(Clone)]
struct BlockWeighter;

impl Weighter<CacheKey, Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &CacheKey, block: &Arc<Block>) -> u64 {
        block.data().len() as u64 + CACHE_ENTRY_OVERHEAD
    }
}

/// A cache of decompressed data blocks shared by all tables, bounded in bytes. Blocks are keyed
/// by (file number, offset), so file numbers must be unique among the tables sharing a cache.
///
/// Open tables may also be *charged* to it ([`BlockCache::charging_tables`]): their index,
/// filter and properties stay in memory, outside the cache, but the bytes they hold come off
/// the budget left for blocks, so blocks and tables together stay within the capacity.
pub struct BlockCache {
    cache: Cache<CacheKey, Arc<Block>, BlockWeighter>,
    capacity: u64,
    charge_tables: bool,
    /// Bytes charged by open tables. Under a lock so that the capacity handed to the cache
    /// always follows the latest sum.
    charged: Mutex<u64>,
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` of blocks (contents plus a small per-block
    /// overhead). A block larger than one shard of the cache (capacity / shards) is not kept.
    pub fn new(capacity_bytes: u64) -> Self {
        // Only sizes the shards and the eviction history; blocks are ~4 KiB by default.
        let estimated_items = usize::try_from(capacity_bytes / 4096)
            .unwrap_or(usize::MAX)
            .max(1);
        BlockCache {
            cache: Cache::with_weighter(estimated_items, capacity_bytes, BlockWeighter),
            capacity: capacity_bytes,
            charge_tables: false,
            charged: Mutex::new(0),
        }
    }

    /// This cache, with the memory of open tables charged to it (`yes`) or not.
    pub fn charging_tables(mut self, yes: bool) -> Self {
        self.charge_tables = yes;
        self
    }

    /// The byte budget.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes currently charged to cached blocks.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// Bytes currently charged by open tables (0 unless the cache charges them).
    pub fn table_bytes(&self) -> u64 {
        *self.charged.lock()
    }

    /// Charges `bytes` of an opening table, if this cache charges tables; the charge ends when
    /// the returned value drops.
    fn charge_table(self: &Arc<Self>, bytes: u64) -> Option<TableCharge> {
        if !self.charge_tables {
            return None;
        }
        self.adjust_charge(|c| c.saturating_add(bytes));
        Some(TableCharge {
            cache: Arc::clone(self),
            bytes,
        })
    }

    /// Applies `f` to the charged bytes and gives blocks what is left. The cache never goes
    /// below one block's worth, so lookups still cache something when tables take it all.
    fn adjust_charge(&self, f: impl FnOnce(u64) -> u64) {
        let mut charged = self.charged.lock();
        *charged = f(*charged);
        let for_blocks = self
            .capacity
            .saturating_sub(*charged)
            .max(MIN_BLOCK_BUDGET.min(self.capacity));
        self.cache.set_capacity(for_blocks);
    }
}

/// The block budget a [`BlockCache`] keeps however much open tables are charged.
const MIN_BLOCK_BUDGET: u64 = 1 << 20;

/// An open table's charge on a [`BlockCache`], returned when dropped.
struct TableCharge {
    cache: Arc<BlockCache>,
    bytes: u64,
}

impl Drop for TableCharge {
    fn drop(&mut self) {
        let bytes = self.bytes;
        self.cache.adjust_charge(|c| c.saturating_sub(bytes));
    }
}

impl fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("used_bytes", &self.used_bytes())
            .field("table_bytes", &self.table_bytes())
            .field("blocks", &self.cache.len())
            .finish()
    }
}

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

/// The file a table reads from, with what block reads need to report.
struct TableFile {
    file: Arc<dyn RandomAccessFile>,
    name: String,
    size: u64,
    stats: Arc<Statistics>,
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
    fn block_span(&self, handle: BlockHandle, what: &str) -> Result<usize> {
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
    fn read_checked(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
        buf: &mut [u8],
    ) -> Result<u8> {
        self.file.read_exact_at(buf, handle.offset).map_err(|e| {
            Error::io(
                format!(
                    "reading {what} block of {} at offset {}",
                    self.name, handle.offset
                ),
                e,
            )
        })?;
        let total = buf.len();
        match purpose {
            ReadPurpose::Query => {
                Statistics::add(&self.stats.blocks_read, 1);
                Statistics::add(&self.stats.block_bytes_read, total as u64);
            }
            ReadPurpose::Compaction => Statistics::add(&self.stats.compaction_blocks_read, 1),
            ReadPurpose::Metadata => Statistics::add(&self.stats.metadata_blocks_read, 1),
        }
        let stored = total - BLOCK_TRAILER_LEN;
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

    /// Reads the block at `handle`, verifies its checksum and decompresses it, charging the read
    /// to `purpose`'s counter.
    fn read_block(&self, handle: BlockHandle, what: &str, purpose: ReadPurpose) -> Result<Vec<u8>> {
        let total = self.block_span(handle, what)?;
        let mut buf = vec![0u8; total];
        let block_type = self.read_checked(handle, what, purpose, &mut buf)?;
        buf.truncate(total - BLOCK_TRAILER_LEN);
        decode_contents(buf, block_type).map_err(|reason| {
            Error::corruption(&self.name, handle.offset, format!("{what} block: {reason}"))
        })
    }

    /// [`TableFile::read_block`] as shared bytes. A large uncompressed block (the index and
    /// filter of a big table) is read into an anonymous mapping of its own instead of the heap:
    /// it lives as long as the table, and when the table goes its memory goes back to the
    /// system at once. On the heap, such blocks freed by compactions left holes malloc kept
    /// (measured: with malloc's large allocations always mapped, YCSB A's peak RSS at 2·10^6
    /// entries fell from 154 to 133 MiB).
    fn read_block_bytes(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
    ) -> Result<Bytes> {
        let total = self.block_span(handle, what)?;
        if total < MAPPED_BLOCK {
            return self.read_block(handle, what, purpose).map(Bytes::from);
        }
        let Ok(mut map) = memmap2::MmapMut::map_anon(total) else {
            return self.read_block(handle, what, purpose).map(Bytes::from);
        };
        let block_type = self.read_checked(handle, what, purpose, &mut map)?;
        let stored = total - BLOCK_TRAILER_LEN;
        if block_type != TYPE_NONE {
            return decode_contents(map[..stored].to_vec(), block_type)
                .map(Bytes::from)
                .map_err(|reason| {
                    Error::corruption(&self.name, handle.offset, format!("{what} block: {reason}"))
                });
        }
        Ok(Bytes::from_owner(map).slice(..stored))
    }

    /// Reads and checks the layout of the block at `handle`.
    fn read_parsed_block(
        &self,
        handle: BlockHandle,
        what: &str,
        purpose: ReadPurpose,
    ) -> Result<Block> {
        let contents = self.read_block_bytes(handle, what, purpose)?;
        Block::new(contents).map_err(|e| self.decode_error(handle, what, e))
    }

    fn decode_error(&self, handle: BlockHandle, what: &str, e: DecodeError) -> Error {
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

/// One data block as described by the index.
#[derive(Clone, Copy, Debug)]
struct IndexEntry {
    /// The block's last internal key: a byte range of [`Index::keys`].
    last_key: (u32, u32),
    /// Where the block is, with its size (without the trailer).
    offset: u64,
    size: u32,
    /// Entries in the block.
    entries: u32,
    /// The file holding the block: 0 for this table's own file.
    file: u64,
}

impl IndexEntry {
    fn handle(&self) -> BlockHandle {
        BlockHandle {
            offset: self.offset,
            size: u64::from(self.size),
        }
    }
}

/// The index, decoded and checked at open and kept in memory: every block's exact last
/// internal key, location and entry count (~64 bytes per block with 16-byte keys).
struct Index {
    /// The blocks' last internal keys, back to back.
    keys: Bytes,
    entries: Vec<IndexEntry>,
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
    entries: Vec<IndexEntry>,
    prefixes: Vec<u64>,
}

/// One index entry as any format version describes it, before the checks every version shares.
struct RawIndexEntry<'a> {
    last_key: &'a [u8],
    handle: BlockHandle,
    entries: u64,
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
    fn load(
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
    fn find(&self, user_key: &[u8], trailer: u64) -> usize {
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

    fn last_key(&self, e: &IndexEntry) -> &[u8] {
        slice(&self.keys, e.last_key)
    }

    /// A zero-copy `Bytes` of a range checked at load.
    fn bytes(&self, range: (u32, u32)) -> Bytes {
        let (s, e) = (range.0 as usize, range.1 as usize);
        if s <= e && e <= self.keys.len() {
            self.keys.slice(s..e)
        } else {
            Bytes::new()
        }
    }

    /// Bytes the decoded index holds.
    fn memory_usage(&self) -> usize {
        self.keys.len()
            + self.entries.capacity() * std::mem::size_of::<IndexEntry>()
            + self.prefixes.capacity() * std::mem::size_of::<u64>()
    }
}

#[inline]
fn slice(data: &[u8], range: (u32, u32)) -> &[u8] {
    data.get(range.0 as usize..range.1 as usize)
        .unwrap_or_default()
}

/// An open table file. Cheap to share (`Arc<Table>`); every method takes `&self` and is safe to
/// call from many threads. The index, filter and properties live in memory; data blocks are
/// read on demand, through the block cache when there is one.
pub struct Table {
    src: TableFile,
    file_number: u64,
    cache: Option<Arc<BlockCache>>,
    footer: Footer,
    index: Index,
    filter: Option<BloomFilter>,
    properties: TableProperties,
    /// Opens the files of blocks the index refers to elsewhere (see [`BlockFiles`]).
    block_files: Option<Weak<dyn BlockFiles>>,
    /// This table's charge on the block cache, if the cache charges open tables.
    _charge: Option<TableCharge>,
}

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
        let src = TableFile {
            file,
            name: file_name,
            size,
            stats,
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
        let index = Index::load(
            &src,
            footer.index,
            data_end,
            footer.format_version,
            file_number,
        )?;
        let filter = match footer.filter {
            Some(h) => {
                let contents = src.read_block_bytes(h, "filter", ReadPurpose::Metadata)?;
                Some(BloomFilter::decode(contents).map_err(|reason| {
                    Error::corruption(&src.name, h.offset, format!("filter block: {reason}"))
                })?)
            }
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

        let mut table = Table {
            src,
            file_number,
            cache,
            footer,
            index,
            filter,
            properties,
            block_files: None,
            _charge: None,
        };
        if let Some(cache) = &table.cache {
            table._charge = cache.charge_table(table.memory_usage() as u64);
        }
        Ok(table)
    }

    /// This table, reading the blocks its index places in other files through `files`.
    pub fn with_block_files(mut self, files: Weak<dyn BlockFiles>) -> Table {
        self.block_files = Some(files);
        self
    }

    /// The table whose file holds `entry`'s block: this one, or the one `block_files` opens.
    fn holder(&self, entry: &IndexEntry) -> Result<Holder<'_>> {
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
        if let Some(filter) = &self.filter {
            Statistics::add(&self.src.stats.bloom_checks, 1);
            if !filter.may_contain(user_key) {
                Statistics::add(&self.src.stats.bloom_negatives, 1);
                return Ok(None);
            }
        }
        self.get_unfiltered(user_key, snapshot)
    }

    /// [`Table::get`] without the filter probe: for a caller that already knows the table may
    /// hold the key (the key index).
    pub fn get_unfiltered(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Bytes)>> {
        let trailer = pack_trailer(snapshot.min(MAX_SEQNO), SEEK_KIND);
        // Index keys are exact last keys, so the first entry ≥ the target, if any, is in the
        // first block whose last key is ≥ the target.
        let Some(entry) = self.index.entries.get(self.index.find(user_key, trailer)) else {
            return Ok(None);
        };
        let holder = self.holder(entry)?;
        // Errors name the file that holds the block.
        let src = &holder.table().src;
        let block = holder
            .table()
            .stored_block(entry.handle(), ReadPurpose::Query)?;
        let mut cursor = Cursor::with_buffer(take_scratch());
        let result = match cursor.seek(&block, user_key, trailer) {
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
    /// count statistics.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// An iterator over all entries for a lookup or scan; it holds the table alive.
    pub fn iter(self: &Arc<Self>) -> TableIterator {
        self.iter_for(ReadPurpose::Query)
    }

    /// An iterator over all entries whose block reads are charged to `purpose` (and fill the
    /// block cache only for [`ReadPurpose::Query`]).
    pub fn iter_for(self: &Arc<Self>, purpose: ReadPurpose) -> TableIterator {
        TableIterator {
            table: Arc::clone(self),
            purpose,
            block: None,
            block_index: 0,
            cursor: Cursor::default(),
        }
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

    /// Bytes of memory the open table holds (index, filter and properties), for table-cache
    /// accounting. Cached data blocks are charged to the [`BlockCache`] instead.
    pub fn memory_usage(&self) -> usize {
        self.index.memory_usage()
            + self.filter.as_ref().map_or(0, BloomFilter::size)
            + self.properties.smallest.len()
            + self.properties.largest.len()
            + std::mem::size_of::<Table>()
            + self.src.name.len()
    }

    /// Every data block as the index lists it, in key order: where it is, its entries and its
    /// last user key. Reads nothing.
    pub fn index_blocks(&self) -> Vec<IndexedBlock> {
        self.index
            .entries
            .iter()
            .map(|e| {
                let key = self.index.bytes(e.last_key);
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
            .collect()
    }

    /// Every data block's key range and location: [`Table::index_blocks`] with the first keys
    /// from each block's first entry (one uncached read per block; the index keeps only last
    /// keys).
    pub fn block_ranges(&self) -> Result<Vec<BlockRange>> {
        let mut cursor = Cursor::default();
        let mut ranges = Vec::with_capacity(self.index.entries.len());
        for (e, indexed) in self.index.entries.iter().zip(self.index_blocks()) {
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

    /// The format version the table was written with.
    pub fn format_version(&self) -> u32 {
        self.footer.format_version
    }

    /// Where the table's meta blocks are and what its filter is (for `strata inspect`).
    pub fn layout(&self) -> TableLayout {
        let place = |h: BlockHandle| BlockPlace {
            offset: h.offset,
            size: h.size + BLOCK_TRAILER_LEN as u64,
        };
        TableLayout {
            format_version: self.footer.format_version,
            index: place(self.footer.index),
            properties: place(self.footer.properties),
            filter: self.footer.filter.map(place),
            filter_probes: self.filter.as_ref().map(BloomFilter::probes),
            filter_bits_set: self.filter.as_ref().map(BloomFilter::bits_set),
            filter_bits: self.filter.as_ref().map(|f| f.size() as u64 * 8),
        }
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
        let mut cursor = Cursor::default();
        let mut previous: Vec<u8> = Vec::new();
        for entry in &self.index.entries {
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
            if previous != self.index.last_key(entry) {
                return Err(corrupt("data block's last key differs from its index key"));
            }
        }
        Ok(())
    }

    /// The data block of `entry`, from the cache or the file holding it.
    fn data_block(&self, entry: &IndexEntry, purpose: ReadPurpose) -> Result<Arc<Block>> {
        self.holder(entry)?
            .table()
            .stored_block(entry.handle(), purpose)
    }

    /// The data block at `handle` of this table's own file, from the cache or the file. Only
    /// queries count cache hits and misses and fill the cache; a compaction takes a cached block
    /// but leaves the cache as it is. Blocks are cached under the file that holds them, so a
    /// kept block is cached once for every table referring to it.
    fn stored_block(&self, handle: BlockHandle, purpose: ReadPurpose) -> Result<Arc<Block>> {
        let Some(cache) = &self.cache else {
            return Ok(Arc::new(
                self.src.read_parsed_block(handle, "data", purpose)?,
            ));
        };
        let key = (self.file_number, handle.offset);
        let query = purpose == ReadPurpose::Query;
        if let Some(block) = cache.cache.get(&key) {
            if query {
                Statistics::add(&self.src.stats.block_cache_hits, 1);
            }
            return Ok(block);
        }
        let block = Arc::new(self.src.read_parsed_block(handle, "data", purpose)?);
        if query {
            Statistics::add(&self.src.stats.block_cache_misses, 1);
            cache.cache.insert(key, Arc::clone(&block));
        }
        Ok(block)
    }
}

/// The table holding a data block: the one reading it, or another it refers to.
enum Holder<'a> {
    Own(&'a Table),
    Other(Arc<Table>),
}

impl Holder<'_> {
    fn table(&self) -> &Table {
        match self {
            Holder::Own(t) => t,
            Holder::Other(t) => t,
        }
    }
}

/// An [`InternalIterator`] over one table. It holds the current data block and reuses one key
/// buffer for every entry and block it visits.
pub struct TableIterator {
    table: Arc<Table>,
    /// Who the block reads are for.
    purpose: ReadPurpose,
    /// The loaded block; `None` when the iterator is not positioned.
    block: Option<Arc<Block>>,
    /// Position of `block` in the index.
    block_index: usize,
    cursor: Cursor,
}

impl fmt::Debug for TableIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableIterator")
            .field("table", &self.table.src.name)
            .field("block_index", &self.block_index)
            .field("valid", &self.valid())
            .finish()
    }
}

impl TableIterator {
    /// Makes block `i` current (reusing it if already loaded); false past either end.
    fn load(&mut self, i: usize) -> Result<bool> {
        let Some(entry) = self.table.index.entries.get(i) else {
            self.block = None;
            return Ok(false);
        };
        if self.block.is_none() || self.block_index != i {
            self.block = None;
            self.block = Some(self.table.data_block(entry, self.purpose)?);
            self.block_index = i;
        }
        Ok(true)
    }

    /// A decode error in the current block, naming the file that holds it.
    fn decode_error(&self, e: DecodeError) -> Error {
        let Some(entry) = self.table.index.entries.get(self.block_index) else {
            return self
                .table
                .src
                .decode_error(BlockHandle::default(), "data", e);
        };
        match self.table.holder(entry) {
            Ok(holder) => holder.table().src.decode_error(entry.handle(), "data", e),
            Err(other) => other,
        }
    }

    /// Runs a cursor move on the current block.
    fn on_block(
        &mut self,
        step: impl FnOnce(&mut Cursor, &Block) -> std::result::Result<(), DecodeError>,
    ) -> Result<()> {
        let Some(block) = &self.block else {
            self.cursor.invalidate();
            return Ok(());
        };
        match step(&mut self.cursor, block) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.decode_error(e)),
        }
    }

    /// Positions on the first entry of block `i` or, if empty, of the blocks after it.
    fn first_from(&mut self, mut i: usize) -> Result<()> {
        loop {
            if !self.load(i)? {
                self.cursor.invalidate();
                return Ok(());
            }
            self.on_block(|c, b| c.seek_to_first(b))?;
            if self.cursor.valid() {
                return Ok(());
            }
            i += 1;
        }
    }

    /// Positions on the last entry of block `i` or, if empty, of the blocks before it.
    fn last_from(&mut self, mut i: Option<usize>) -> Result<()> {
        while let Some(at) = i {
            if !self.load(at)? {
                break;
            }
            self.on_block(|c, b| c.seek_to_last(b))?;
            if self.cursor.valid() {
                return Ok(());
            }
            i = at.checked_sub(1);
        }
        self.block = None;
        self.cursor.invalidate();
        Ok(())
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        let (user_key, trailer) = split_internal_key(target);
        let i = self.table.index.find(user_key, trailer);
        if !self.load(i)? {
            self.cursor.invalidate();
            return Ok(());
        }
        self.on_block(|c, b| c.seek(b, user_key, trailer))?;
        if !self.cursor.valid() {
            // Only a block whose index key overstates its contents ends up here.
            self.first_from(i + 1)?;
        }
        Ok(())
    }

    fn seek_for_prev_inner(&mut self, target: &[u8]) -> Result<()> {
        self.seek_inner(target)?;
        if !self.valid() {
            return self.last_from(self.table.index.entries.len().checked_sub(1));
        }
        let (user_key, trailer) = split_internal_key(target);
        if cmp_to_target(self.cursor.key(), user_key, trailer) == Ordering::Greater {
            self.prev_inner()?;
        }
        Ok(())
    }

    fn next_inner(&mut self) -> Result<()> {
        self.on_block(|c, b| c.next(b))?;
        if !self.cursor.valid() && self.block.is_some() {
            self.first_from(self.block_index + 1)?;
        }
        Ok(())
    }

    fn prev_inner(&mut self) -> Result<()> {
        self.on_block(|c, b| c.prev(b))?;
        if !self.cursor.valid() && self.block.is_some() {
            self.last_from(self.block_index.checked_sub(1))?;
        }
        Ok(())
    }

    /// Leaves the iterator unpositioned after an error, passing the error on.
    fn settle(&mut self, result: Result<()>) -> Result<()> {
        if result.is_err() {
            self.block = None;
            self.cursor.invalidate();
        }
        result
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.block.is_some() && self.cursor.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.first_from(0);
        self.settle(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.last_from(self.table.index.entries.len().checked_sub(1));
        self.settle(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_inner(target);
        self.settle(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_for_prev_inner(target);
        self.settle(r)
    }

    fn next(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        let r = self.next_inner();
        self.settle(r)
    }

    fn prev(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        let r = self.prev_inner();
        self.settle(r)
    }

    fn key(&self) -> &[u8] {
        if self.valid() {
            self.cursor.key()
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        match &self.block {
            Some(block) if self.cursor.valid() => self.cursor.value(block),
            _ => &[],
        }
    }

    fn block_start(&self) -> Option<StoredBlock> {
        if !self.valid() || !self.cursor.at_first() {
            return None;
        }
        let entry = self.table.index.entries.get(self.block_index)?;
        let last = self.table.index.bytes(entry.last_key);
        Some(StoredBlock {
            file_number: if entry.file == 0 {
                self.table.file_number
            } else {
                entry.file
            },
            offset: entry.offset,
            size: u64::from(entry.size) + BLOCK_TRAILER_LEN as u64,
            entries: u64::from(entry.entries),
            last_user_key: last.slice(..last.len().saturating_sub(8)),
        })
    }
}
