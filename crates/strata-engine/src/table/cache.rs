//! The block cache shared by every table of a database.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::block::Block;

/// Bytes charged per cached block on top of its contents: the `Block`, its `Arc`, the key and
/// the cache's own bookkeeping. Also keeps every weight above zero (quick_cache never evicts
/// zero-weight items).
const CACHE_ENTRY_OVERHEAD: u64 = 128;

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

    /// The block at `offset` of file `file`, if cached.
    pub(super) fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        self.cache.get(&(file, offset))
    }

    /// Caches the block at `offset` of file `file`.
    pub(super) fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        self.cache.insert((file, offset), block);
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
            .field("blocks", &self.cache.len())
            .finish()
    }
}
