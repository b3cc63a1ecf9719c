//! The block cache shared by every table of a database: data blocks, and the index and filter
//! of tables that do not hold their own ([`crate::Options::with_cache_index_and_filter_blocks`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::block::Block;
use super::bloom::BloomFilter;
use super::index::Index;

/// Bytes charged per cached entry on top of its contents: the `Block`, its `Arc`, the key and
/// the cache's own bookkeeping. Also keeps every weight above zero (quick_cache never evicts
/// zero-weight items).
const CACHE_ENTRY_OVERHEAD: u64 = 128;

/// Cache key: (file number, block offset). A table's data, index and filter blocks lie at
/// different offsets, so one key space serves them all.
type CacheKey = (u64, u64);

/// What the cache holds under a key.
#[derive(Clone)]
pub(super) enum CacheEntry {
    /// A data block.
    Data(Arc<Block>),
    /// A table's decoded index.
    Index(Arc<Index>),
    /// A table's Bloom filter.
    Filter(Arc<BloomFilter>),
}

impl CacheEntry {
    /// Bytes the entry holds.
    fn bytes(&self) -> u64 {
        match self {
            CacheEntry::Data(block) => block.data().len() as u64,
            CacheEntry::Index(index) => index.memory_usage() as u64,
            CacheEntry::Filter(filter) => filter.size() as u64,
        }
    }
}

#[derive(Clone)]
struct EntryWeighter;

impl Weighter<CacheKey, CacheEntry> for EntryWeighter {
    fn weight(&self, _key: &CacheKey, entry: &CacheEntry) -> u64 {
        entry.bytes() + CACHE_ENTRY_OVERHEAD
    }
}

type Pool = Cache<CacheKey, CacheEntry, EntryWeighter>;

/// A pool of `capacity_bytes` for entries of about `typical_entry` bytes. The estimate sizes
/// the shards (fewer for larger entries, so that one shard holds any entry that fits the
/// pool's share of a shard) and the eviction history.
fn pool(capacity_bytes: u64, typical_entry: u64) -> Pool {
    let estimated_items = usize::try_from(capacity_bytes / typical_entry)
        .unwrap_or(usize::MAX)
        .max(1);
    Cache::with_weighter(estimated_items, capacity_bytes, EntryWeighter)
}

/// Blocks are ~4 KiB by default.
const TYPICAL_BLOCK: u64 = 4096;

/// A 64 MiB table of 4 KiB blocks has an index of ~1 MiB and a filter of ~600 KiB.
const TYPICAL_INDEX: u64 = 256 << 10;

/// What a [`BlockCache`] holds, by kind ([`BlockCache::contents`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheContents {
    /// Data blocks and their bytes.
    pub data_blocks: u64,
    /// See `data_blocks`.
    pub data_bytes: u64,
    /// Table indexes and their bytes.
    pub indexes: u64,
    /// See `indexes`.
    pub index_bytes: u64,
    /// Table filters and their bytes.
    pub filters: u64,
    /// See `filters`.
    pub filter_bytes: u64,
}

/// A cache of decompressed data blocks shared by all tables, bounded in bytes. Entries are keyed
/// by (file number, offset), so file numbers must be unique among the tables sharing a cache.
///
/// Open tables may also be *charged* to it ([`BlockCache::charging_tables`]): the index, filter
/// and properties a table holds (pins) stay in memory, outside the cache, but the bytes they
/// hold come off the budget left for cached entries, so both together stay within the
/// capacity. Tables that do not hold their index and filter keep them in the cache, where they
/// are evicted like blocks, or, with a high-priority pool ([`BlockCache::with_high_priority`]),
/// kept apart from data blocks, which never evict them (RocksDB's
/// `cache_index_and_filter_blocks_with_high_priority`).
pub struct BlockCache {
    /// Data blocks, and index and filter blocks when there is no high-priority pool.
    low: Pool,
    /// Index and filter blocks, at most `high_capacity` bytes of them.
    high: Option<Pool>,
    capacity: u64,
    charge_tables: bool,
    /// Bytes charged by open tables. Under a lock so that the capacity handed to the cache
    /// always follows the latest sum.
    charged: Mutex<u64>,
    /// The high pool's weight when the low pool's capacity was last set.
    high_weight_seen: AtomicU64,
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` of blocks (contents plus a small per-block
    /// overhead). A block larger than one shard of the cache (capacity / shards) is not kept.
    pub fn new(capacity_bytes: u64) -> Self {
        BlockCache {
            low: pool(capacity_bytes, TYPICAL_BLOCK),
            high: None,
            capacity: capacity_bytes,
            charge_tables: false,
            charged: Mutex::new(0),
            high_weight_seen: AtomicU64::new(0),
        }
    }

    /// This cache, with the memory of open tables charged to it (`yes`) or not.
    pub fn charging_tables(mut self, yes: bool) -> Self {
        self.charge_tables = yes;
        self
    }

    /// This cache, keeping index and filter blocks in a pool of their own of up to `ratio` of
    /// the capacity that data blocks never evict (RocksDB's LRU cache with
    /// `high_pri_pool_ratio`); data blocks use what that pool leaves unused.
    pub fn with_high_priority(mut self, ratio: f64) -> Self {
        let bytes = (self.capacity as f64 * ratio.clamp(0.0, 1.0)) as u64;
        self.high = Some(pool(bytes.max(1), TYPICAL_INDEX));
        self
    }

    /// The data block at `offset` of file `file`, if cached.
    pub(super) fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        match self.low.get(&(file, offset)) {
            Some(CacheEntry::Data(block)) => Some(block),
            _ => None,
        }
    }

    /// Caches the data block at `offset` of file `file`.
    pub(super) fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        self.low.insert((file, offset), CacheEntry::Data(block));
    }

    /// The pool index and filter blocks go to.
    fn meta_pool(&self) -> &Pool {
        self.high.as_ref().unwrap_or(&self.low)
    }

    /// The index or filter cached at `offset` of file `file`.
    pub(super) fn get_meta(&self, file: u64, offset: u64) -> Option<CacheEntry> {
        self.meta_pool().get(&(file, offset))
    }

    /// Caches an index or a filter at `offset` of file `file`.
    pub(super) fn insert_meta(&self, file: u64, offset: u64, entry: CacheEntry) {
        self.meta_pool().insert((file, offset), entry);
        if let Some(high) = &self.high {
            // Data blocks get what the high pool leaves: follow its growth now and then.
            let weight = high.weight();
            let seen = self.high_weight_seen.load(Ordering::Relaxed);
            if weight.abs_diff(seen) > self.capacity / 64 {
                self.adjust_charge(|c| c);
            }
        }
    }

    /// The byte budget.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes currently charged to cached entries (blocks, indexes and filters).
    pub fn used_bytes(&self) -> u64 {
        self.low.weight() + self.high.as_ref().map_or(0, Pool::weight)
    }

    /// What the cache holds now, by kind. Visits every entry: for metrics, not for hot paths.
    pub fn contents(&self) -> CacheContents {
        let mut c = CacheContents::default();
        let pools = std::iter::once(&self.low).chain(self.high.as_ref());
        for (_, entry) in pools.flat_map(Pool::iter) {
            let (count, bytes) = match entry {
                CacheEntry::Data(_) => (&mut c.data_blocks, &mut c.data_bytes),
                CacheEntry::Index(_) => (&mut c.indexes, &mut c.index_bytes),
                CacheEntry::Filter(_) => (&mut c.filters, &mut c.filter_bytes),
            };
            *count += 1;
            *bytes += entry.bytes();
        }
        c
    }

    /// Bytes currently charged by open tables (0 unless the cache charges them).
    pub fn table_bytes(&self) -> u64 {
        *self.charged.lock()
    }

    /// Charges `bytes` of an opening table, if this cache charges tables; the charge ends when
    /// the returned value drops.
    pub(super) fn charge_table(self: &Arc<Self>, bytes: u64) -> Option<TableCharge> {
        if !self.charge_tables {
            return None;
        }
        self.adjust_charge(|c| c.saturating_add(bytes));
        Some(TableCharge {
            cache: Arc::clone(self),
            bytes,
        })
    }

    /// Applies `f` to the charged bytes and gives the low pool what is left after them and the
    /// high pool's entries. It never goes below one block's worth, so lookups still cache
    /// something when tables take it all.
    fn adjust_charge(&self, f: impl FnOnce(u64) -> u64) {
        let mut charged = self.charged.lock();
        *charged = f(*charged);
        let high = self.high.as_ref().map_or(0, Pool::weight);
        self.high_weight_seen.store(high, Ordering::Relaxed);
        let for_blocks = self
            .capacity
            .saturating_sub(*charged)
            .saturating_sub(high)
            .max(MIN_BLOCK_BUDGET.min(self.capacity));
        self.low.set_capacity(for_blocks);
    }
}

/// The block budget a [`BlockCache`] keeps however much open tables are charged.
const MIN_BLOCK_BUDGET: u64 = 1 << 20;

/// An open table's charge on a [`BlockCache`], returned when dropped.
pub(super) struct TableCharge {
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
            .field("entries", &self.low.len())
            .field("high_priority_entries", &self.high.as_ref().map(Pool::len))
            .finish()
    }
}
