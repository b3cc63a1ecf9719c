//! Options of a database, of writes and of reads.

use crate::clock::{Clock, SystemClock};
use crate::compaction_filter::CompactionFilter;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, StdFs};
use crate::listener::EventListener;
use crate::log::RecoveryMode;
use crate::merge_operator::MergeOperator;
use crate::table::{Compression, ReadaheadSize};
use std::sync::Arc;
use strata_policy::autopilot::AutopilotOptions;
use strata_policy::{build_policy, CompactionPolicy, PolicySpec, MAX_DICT_BYTES, MIN_DICT_BYTES};

/// [`Options::with_read_polling`]'s default: past a device's usual read at queue
/// depth 1 (about 40 µs on this project's disk), short of a slow one.
pub const DEFAULT_READ_POLL: std::time::Duration = std::time::Duration::from_micros(150);

/// How a database is opened and run. Every setter names its RocksDB equivalent and the default.
#[derive(Clone, Debug)]
pub struct Options {
    pub(crate) create_if_missing: bool,
    pub(crate) error_if_exists: bool,
    pub(crate) write_buffer_size: u64,
    pub(crate) memtable_bloom_size_ratio: f64,
    pub(crate) max_write_buffer_number: usize,
    pub(crate) level0_slowdown_writes_trigger: usize,
    pub(crate) level0_stop_writes_trigger: usize,
    pub(crate) delayed_write_rate: u64,
    pub(crate) wal_bytes_per_sync: u64,
    pub(crate) bytes_per_sync: u64,
    pub(crate) wal_mapped_writes: bool,
    pub(crate) rate_limit: Option<u64>,
    pub(crate) max_background_jobs: usize,
    pub(crate) reserved_jobs: usize,
    pub(crate) key_index_level: Option<usize>,
    pub(crate) interval_index: bool,
    pub(crate) block_size: usize,
    pub(crate) block_align: bool,
    pub(crate) block_restart_interval: usize,
    pub(crate) compression: Compression,
    pub(crate) block_cache_capacity: u64,
    pub(crate) row_cache_capacity: u64,
    pub(crate) charge_tables_to_cache: bool,
    pub(crate) cache_index_and_filter_blocks: bool,
    pub(crate) index_pinning: IndexPinning,
    pub(crate) index_and_filter_high_priority: bool,
    pub(crate) high_pri_pool_ratio: f64,
    pub(crate) use_direct_reads: bool,
    pub(crate) read_poll: std::time::Duration,
    pub(crate) use_direct_io_for_flush_and_compaction: bool,
    pub(crate) compaction_readahead_size: u64,
    pub(crate) allow_concurrent_memtable_write: bool,
    pub(crate) enable_pipelined_write: bool,
    pub(crate) max_open_files: usize,
    pub(crate) max_manifest_file_size: u64,
    pub(crate) wal_recovery_mode: RecoveryMode,
    pub(crate) paranoid_checks: bool,
    pub(crate) record_block_ranges: bool,
    pub(crate) synchronous_compaction: bool,
    pub(crate) policy: PolicyChoice,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) listeners: Vec<Listener>,
    pub(crate) compaction_filter: Option<Arc<dyn CompactionFilter>>,
    pub(crate) merge_operator: Option<Arc<dyn MergeOperator>>,
    pub(crate) ttl: Option<std::time::Duration>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) periodic_compaction: Option<std::time::Duration>,
    pub(crate) info_log: bool,
    pub(crate) keep_log_file_num: usize,
    pub(crate) max_total_wal_size: u64,
    pub(crate) autopilot: Option<AutopilotOptions>,
}

/// Which tables hold their index and filter while the block cache keeps the others'
/// ([`Options::with_pin_index_and_filter_blocks`]). A table decides when it is opened, from the
/// level a read meets it in, and keeps to it while it is open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexPinning {
    /// No table: every index and filter competes for the cache.
    #[default]
    None,
    /// Tables in level 0, which most lookups probe (RocksDB:
    /// `pin_l0_filter_and_index_blocks_in_cache`).
    Level0,
    /// Tables in every level above the deepest one holding data: about a tenth of the tree's
    /// metadata under leveling with a size ratio of 10, probed by every lookup that reaches the
    /// deepest level (RocksDB has none for unpartitioned indexes; nearest:
    /// `MetadataCacheOptions::unpartitioned_pinning = kFlushedAndSimilar`).
    UpperLevels,
}

impl IndexPinning {
    /// Whether a table met in `level`, when the deepest level holding data is `deepest`,
    /// holds its index and filter.
    pub(crate) fn pins(self, level: usize, deepest: usize) -> bool {
        match self {
            IndexPinning::None => false,
            IndexPinning::Level0 => level == 0,
            IndexPinning::UpperLevels => level < deepest,
        }
    }
}

/// The compaction policy as configured: a registered policy named by a specification, built when
/// the database opens (so it sees the final write buffer size), or a policy object.
#[derive(Clone, Debug)]
pub(crate) enum PolicyChoice {
    /// The policy the database records (the last one it was handed to), or `leveled` for a
    /// database that records none.
    Recorded,
    /// Built at open from the registry.
    Named(PolicySpec),
    /// Used as given.
    Object(Arc<dyn CompactionPolicy>),
}

/// A registered listener (a newtype so `Options` can stay `Debug`).
#[derive(Clone)]
pub(crate) struct Listener(pub Arc<dyn EventListener>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventListener")
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            write_buffer_size: 64 << 20,
            memtable_bloom_size_ratio: 1.0 / 128.0,
            max_write_buffer_number: 2,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            delayed_write_rate: 16 << 20,
            wal_bytes_per_sync: 1 << 20,
            bytes_per_sync: 1 << 20,
            wal_mapped_writes: true,
            rate_limit: None,
            max_background_jobs: 2,
            reserved_jobs: 1,
            key_index_level: None,
            interval_index: true,
            block_size: 4096,
            block_align: false,
            block_restart_interval: 16,
            compression: Compression::None,
            block_cache_capacity: 32 << 20,
            row_cache_capacity: 0,
            charge_tables_to_cache: true,
            cache_index_and_filter_blocks: false,
            index_pinning: IndexPinning::None,
            index_and_filter_high_priority: true,
            high_pri_pool_ratio: 0.5,
            use_direct_reads: false,
            read_poll: DEFAULT_READ_POLL,
            use_direct_io_for_flush_and_compaction: false,
            compaction_readahead_size: 2 << 20,
            allow_concurrent_memtable_write: true,
            enable_pipelined_write: false,
            max_open_files: 1000,
            max_manifest_file_size: 16 << 20,
            wal_recovery_mode: RecoveryMode::TolerateCorruptedTail,
            paranoid_checks: false,
            record_block_ranges: false,
            synchronous_compaction: false,
            policy: PolicyChoice::Recorded,
            fs: Arc::new(StdFs),
            listeners: Vec::new(),
            compaction_filter: None,
            merge_operator: None,
            ttl: None,
            clock: Arc::new(SystemClock),
            periodic_compaction: None,
            info_log: false,
            keep_log_file_num: 1000,
            max_total_wal_size: 0,
            autopilot: None,
        }
    }
}

impl Options {
    /// The defaults: leveled compaction, 64 MiB buffers, 32 MiB block cache, real file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Create the database if the directory holds none. RocksDB: `create_if_missing`.
    /// Default: true.
    pub fn with_create_if_missing(mut self, yes: bool) -> Self {
        self.create_if_missing = yes;
        self
    }

    /// Fail if a database already exists. RocksDB: `error_if_exists`. Default: false.
    pub fn with_error_if_exists(mut self, yes: bool) -> Self {
        self.error_if_exists = yes;
        self
    }

    /// Bytes a memtable holds before it is frozen and flushed. RocksDB: `write_buffer_size`.
    /// Default: 64 MiB.
    pub fn with_write_buffer_size(mut self, bytes: u64) -> Self {
        self.write_buffer_size = bytes;
        self
    }

    /// Size of each memtable's Bloom filter over its user keys, as a share of the write buffer
    /// size (0 for none): point lookups of keys a memtable does not hold skip its search.
    /// RocksDB: `memtable_prefix_bloom_size_ratio` with `memtable_whole_key_filtering` (whose
    /// default is no filter). Default: 1/128 (512 KiB for a 64 MiB buffer, 8 to 30 bits per key
    /// for entries of 40 to 150 bytes).
    pub fn with_memtable_bloom_size_ratio(mut self, ratio: f64) -> Self {
        self.memtable_bloom_size_ratio = ratio;
        self
    }

    /// Bytes of the Bloom filter of each memtable ([`Options::with_memtable_bloom_size_ratio`]).
    pub(crate) fn memtable_filter_bytes(&self) -> usize {
        (self.write_buffer_size as f64 * self.memtable_bloom_size_ratio) as usize
    }

    /// Frozen memtables (held or waiting), each with its WAL, at which writers stall until a
    /// flush, and past which a flush re-buffers what it leaves: 8 × `max_write_buffer_number`.
    /// Window flushes make many small memtables; this bounds their WALs.
    pub(crate) fn frozen_memtable_limit(&self) -> usize {
        8 * self.max_write_buffer_number
    }

    /// Memtables (active plus frozen) before writes stop and wait for a flush. RocksDB:
    /// `max_write_buffer_number`. Default: 2.
    pub fn with_max_write_buffer_number(mut self, n: usize) -> Self {
        self.max_write_buffer_number = n;
        self
    }

    /// L0 runs from which writes are slowed to the delayed write rate
    /// ([`Options::with_delayed_write_rate`]). RocksDB: `level0_slowdown_writes_trigger`.
    /// Default: 20.
    pub fn with_level0_slowdown_writes_trigger(mut self, runs: usize) -> Self {
        self.level0_slowdown_writes_trigger = runs;
        self
    }

    /// L0 runs at which writes stop until compaction catches up. RocksDB:
    /// `level0_stop_writes_trigger`. Default: 36.
    pub fn with_level0_stop_writes_trigger(mut self, runs: usize) -> Self {
        self.level0_stop_writes_trigger = runs;
        self
    }

    /// Bytes per second writes pass at while slowed (level 0 at or above the slowdown trigger);
    /// the rate then falls while the level-0 backlog grows and recovers as it shrinks. RocksDB:
    /// `delayed_write_rate`. Default: 16 MiB/s.
    pub fn with_delayed_write_rate(mut self, bytes_per_sec: u64) -> Self {
        self.delayed_write_rate = bytes_per_sec;
        self
    }

    /// Starts the WAL's writeback to the device every this many bytes, without waiting for it
    /// ([`WritableFile::start_writeback`](crate::fs::WritableFile::start_writeback)); 0 never
    /// does. The memtable switch syncs the finished WAL in the writing thread, and this leaves
    /// that sync only the last stretch to wait for instead of a whole write buffer's worth.
    /// RocksDB: `wal_bytes_per_sync`, whose default is 0 because RocksDB syncs closed WALs in
    /// its flush job instead. Default: 1 MiB.
    pub fn with_wal_bytes_per_sync(mut self, bytes: u64) -> Self {
        self.wal_bytes_per_sync = bytes;
        self
    }

    /// Starts a table file's writeback to the device every this many bytes while a flush or
    /// compaction writes it, without waiting; 0 never does. The sync that ends every table then
    /// waits for the last stretch only instead of the whole file, which shortened the flush of
    /// a 64 MiB buffer (BENCHMARKS.md, section 'Fifth pass: memory at memtable switches'), and
    /// so the time its memtable stays in memory. RocksDB: `bytes_per_sync` (default 0 there).
    /// Default: 1 MiB.
    pub fn with_bytes_per_sync(mut self, bytes: u64) -> Self {
        self.bytes_per_sync = bytes;
        self
    }

    /// Appends WAL records through a shared mapping of the file
    /// ([`FileSystem::create_mapped`](crate::fs::FileSystem::create_mapped)) instead of a
    /// `write` system call per write group. Both hand the record to the page cache, so a process
    /// crash loses nothing either way, and syncs are the same `fdatasync`; the mapping saves the
    /// system call, which was a third of the writing thread's time on a random fill (~590 ns of
    /// ~1.8 µs per 100-byte value). The cost: a crash leaves the newest WAL with a zero-filled
    /// tail of up to 256 KiB (space grown but not yet written), which recovery drops as a torn tail.
    /// [`RecoveryMode::AbsoluteConsistency`] refuses torn tails, so under it the WAL is always
    /// written with `write`. File systems that cannot map files ([`MemFs`](crate::fs::MemFs)) or
    /// reserve space (no `fallocate`) fall back to `write` as well. RocksDB: none (its
    /// `allow_mmap_writes` applies to table files only). Default: true.
    pub fn with_wal_mapped_writes(mut self, mapped: bool) -> Self {
        self.wal_mapped_writes = mapped;
        self
    }

    /// Limits the bytes flushes and compactions write per second (all of them together), so
    /// background bursts leave the device to the foreground; `None` for no limit. RocksDB:
    /// `rate_limiter` (`NewGenericRateLimiter`). Default: none.
    pub fn with_rate_limiter(mut self, bytes_per_sec: Option<u64>) -> Self {
        self.rate_limit = bytes_per_sec;
        self
    }

    /// Background threads for flushes and compactions (one is reserved for flushes). RocksDB:
    /// `max_background_jobs`. Default: 2.
    pub fn with_max_background_jobs(mut self, n: usize) -> Self {
        self.max_background_jobs = n;
        self
    }

    /// Keeps an in-memory index of every key in `level`'s tables (key hash → the tables holding
    /// it, ~10 bytes per key), so that point lookups probe only the tables that hold the key and
    /// no filter at all: EcoTune's top-level index, for any policy whose level holds many small
    /// runs (ecotune's top level is 1). Tables enter the index when a flush or compaction writes
    /// them into the level; tables moved there, or there when the database opens, are probed
    /// through their filters as usual. `Metrics::key_index_bytes` reports its memory. No
    /// RocksDB equivalent. Default: none.
    pub fn with_key_index(mut self, level: Option<usize>) -> Self {
        self.key_index_level = level;
        self
    }

    /// Whether reads use each level's interval index over its runs (`strata_meta::RunIntervals`):
    /// a point lookup probes only the runs whose key range holds the key, and a scan opens a
    /// run only once it reaches the run's smallest key. Without it a scan opens every run that
    /// overlaps its range when it starts, and a lookup visits every run (what a level of many
    /// small runs, Min-Max buckets, costs without the paper's interval B-tree). No RocksDB
    /// equivalent. Default: true.
    pub fn with_interval_index(mut self, on: bool) -> Self {
        self.interval_index = on;
        self
    }

    /// Threads, besides `max_background_jobs`, that run only the plans a policy marks urgent
    /// ([`strata_policy::Priority::Urgent`], EcoTune's top-to-main compactions) and sleep
    /// otherwise, so that such a plan never waits behind a long merge. A policy that marks
    /// nothing urgent leaves them asleep. No RocksDB equivalent (its nearest: the high-priority
    /// pool flushes run in). Default: 1.
    pub fn with_reserved_jobs(mut self, n: usize) -> Self {
        self.reserved_jobs = n;
        self
    }

    /// Target uncompressed size of a data block. RocksDB: `BlockBasedTableOptions::block_size`.
    /// Default: 4096.
    pub fn with_block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    /// Starts every data block on a 4 KiB page of its table file, cutting blocks so that a block
    /// and its trailer fit `block_size` where they can and padding the file before each block
    /// to the next page: a point lookup then reads one page where a block straddling two costs
    /// two, which halves the bytes of a direct read of 4 KiB blocks. The padding costs space:
    /// the bytes a block leaves free of its page, little with 116-byte entries and about
    /// 0.9 KiB per block with 1 KiB entries (BENCHMARKS.md, "Direct reads of one page"), more
    /// with compression. RocksDB: `BlockBasedTableOptions::block_align`. Default: false.
    pub fn with_block_align(mut self, yes: bool) -> Self {
        self.block_align = yes;
        self
    }

    /// Entries between restart points in a block. RocksDB: `block_restart_interval`.
    /// Default: 16.
    pub fn with_block_restart_interval(mut self, entries: usize) -> Self {
        self.block_restart_interval = entries;
        self
    }

    /// Block compression. RocksDB: `compression` (and, with a Zstandard dictionary per table,
    /// `compression_opts.max_dict_bytes`). A policy's `compression_per_level` and
    /// `bottommost_compression` override it for the levels they name. Default: none.
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Bytes of uncompressed blocks the shared block cache holds. RocksDB: `block_cache`
    /// (an LRU cache of this capacity). Default: 32 MiB.
    pub fn with_block_cache_capacity(mut self, bytes: u64) -> Self {
        self.block_cache_capacity = bytes;
        self
    }

    /// Bytes of rows the shared row cache holds: what point lookups found for a key in a table
    /// (its newest entry there, or that it holds none), so that a key read again needs neither
    /// the table's index nor its data block. For skewed reads of a tree larger than memory: a
    /// cached 4 KiB data block keeps one hot key of small entries in memory where a row keeps
    /// only that key and its value. The rows come on top of the block cache's capacity. Lookups
    /// ([`crate::Db::get`], [`crate::Db::multi_get`]) ask it after a table's filter lets the key
    /// through; scans never. 0 turns it off. RocksDB: `row_cache` (an LRU cache of this
    /// capacity). Default: 0 (off), as in RocksDB.
    pub fn with_row_cache_capacity(mut self, bytes: u64) -> Self {
        self.row_cache_capacity = bytes;
        self
    }

    /// Charges the memory of open tables (their index, filter and properties, which stay in
    /// memory) to the block cache: the cache then holds fewer data blocks, and blocks and
    /// tables together stay within [`Options::with_block_cache_capacity`], however large the
    /// database grows. RocksDB: `cache_usage_options` with `CacheEntryRole::kBlockBasedTableReader`
    /// charged (close to `cache_index_and_filter_blocks`, except that the index and filter are
    /// never evicted), off by default there. Default: on.
    pub fn with_charge_tables_to_cache(mut self, yes: bool) -> Self {
        self.charge_tables_to_cache = yes;
        self
    }

    /// Reads table files around the page cache (`O_DIRECT`), for lookups, scans and
    /// compactions alike: the block cache is then the only cache of table data, and the memory
    /// a database uses is what its options say. The file system must support direct I/O:
    /// opening fails with [`Error::InvalidArgument`] naming this option and the directory where
    /// it does not (ramfs, and tmpfs before Linux 6.6), never silently reading buffered.
    /// RocksDB: `use_direct_reads`. Default: false.
    pub fn with_use_direct_reads(mut self, yes: bool) -> Self {
        self.use_direct_reads = yes;
        self
    }

    /// How long a lookup's or a scan's read of a block that waits for the device checks for the
    /// answer in a loop before it sleeps, with direct reads ([`Options::with_use_direct_reads`])
    /// and with buffered ones that miss the page cache (what the page cache holds is copied at
    /// once, as a plain read would). At queue depth 1 the sleep and the wakeup around a device
    /// read cost more than the wait itself on some machines: on this project's 2-core machine a
    /// random 4 KiB direct read took 33–36 µs polled against 44–52 µs sleeping, and
    /// out-of-cache `readrandom` on one thread ran 1.14–1.33× faster with direct reads and
    /// 1.27–1.29× with buffered ones (`BENCHMARKS.md`, "Polled direct reads" and "Polled
    /// buffered reads"). The price is the processor time spent polling (about twice the CPU per
    /// lookup there), so a read polls only while no more reads wait for the device than one
    /// fewer than the machine's cores (more readers than that keep the cores busy without it);
    /// reads of more than 64 KiB (compaction inputs, long readahead) never poll, and
    /// compactions never do. A batch of reads (`Db::multi_get`, a scan's first blocks) polls
    /// for its answers as one read does. Zero sleeps at once, as RocksDB does (it has no such
    /// option).
    /// Default: 150 µs.
    pub fn with_read_polling(mut self, poll: std::time::Duration) -> Self {
        self.read_poll = poll;
        self
    }

    /// Writes the table files of flushes and compactions around the page cache (`O_DIRECT`),
    /// so that background writes neither fill the page cache nor evict what reads need. WALs
    /// and the manifest stay buffered. Fails at open like [`Options::with_use_direct_reads`]
    /// where the file system refuses direct I/O. RocksDB:
    /// `use_direct_io_for_flush_and_compaction`. Default: false.
    pub fn with_use_direct_io_for_flush_and_compaction(mut self, yes: bool) -> Self {
        self.use_direct_io_for_flush_and_compaction = yes;
        self
    }

    /// Lets every writer of a commit group insert its own batch into the memtable, all at
    /// once, after the group's leader has written the group's WAL record; without it the leader
    /// inserts every batch of the group itself. The group's writes become visible together,
    /// when the last insert is done. RocksDB: `allow_concurrent_memtable_write`. Default: true.
    pub fn with_allow_concurrent_memtable_write(mut self, yes: bool) -> Self {
        self.allow_concurrent_memtable_write = yes;
        self
    }

    /// Lets the next commit group write its WAL record while the one before it still inserts
    /// into the memtable: a group's leader gives up the WAL as soon as its record is written.
    /// Groups still become visible in the order of their sequence numbers, and a memtable is
    /// frozen only once every group that logged into its WAL has inserted. Without concurrent
    /// memtable writes a group's leader inserts its whole group, beside other groups' leaders.
    ///
    /// Off (the default), a group still pipelines where concurrent memtable writes are allowed
    /// and another writer already waits behind it, so that writers on different cores (two
    /// keyspaces written at once, say) do not take turns through each other's inserts; a lone
    /// writer inserts inside its commit, without the concurrent insert's atomics. On, every
    /// group pipelines. RocksDB: `enable_pipelined_write` (which there pipelines always or
    /// never). Default: false.
    pub fn with_enable_pipelined_write(mut self, yes: bool) -> Self {
        self.enable_pipelined_write = yes;
        self
    }

    /// Bytes a compaction reads ahead in each input table: its inputs are read in order, so
    /// one large read replaces many block-sized ones, which matters most with direct reads
    /// (no kernel readahead). 0 reads block by block. A merge of more than 8 runs shares 8
    /// such windows among its runs (`merge::MERGE_READAHEAD_WINDOWS`), so its read-ahead memory
    /// stays bounded however many runs a policy merges at once.
    /// RocksDB: `compaction_readahead_size`. Default: 2 MiB.
    pub fn with_compaction_readahead_size(mut self, bytes: u64) -> Self {
        self.compaction_readahead_size = bytes;
        self
    }

    /// How compactions read ahead in their inputs.
    pub(crate) fn compaction_readahead(&self) -> ReadaheadSize {
        match self.compaction_readahead_size {
            0 => ReadaheadSize::Off,
            bytes => ReadaheadSize::Fixed(usize::try_from(bytes).unwrap_or(usize::MAX)),
        }
    }

    /// Keeps tables' indexes and Bloom filters in the block cache, evicted like data blocks and
    /// read again when needed, instead of held by each open table for as long as it is open.
    /// Memory then stays within the cache's capacity however large the tree grows, at the cost
    /// of index and filter reads once the cache is too small for them (`Metrics` counts them in
    /// `index_blocks_read` and `filter_blocks_read`). Some tables may still hold theirs
    /// ([`Options::with_pin_index_and_filter_blocks`]), and the cache can protect them from
    /// data blocks ([`Options::with_cache_index_and_filter_blocks_with_high_priority`]). Held
    /// ones are charged to the cache either way ([`Options::with_charge_tables_to_cache`]).
    /// RocksDB: `BlockBasedTableOptions::cache_index_and_filter_blocks`. Default: false.
    pub fn with_cache_index_and_filter_blocks(mut self, yes: bool) -> Self {
        self.cache_index_and_filter_blocks = yes;
        self
    }

    /// Which tables hold their index and filter while the block cache keeps the others'
    /// ([`Options::with_cache_index_and_filter_blocks`]; without it every table holds them).
    /// RocksDB: `pin_l0_filter_and_index_blocks_in_cache` is [`IndexPinning::Level0`].
    /// Default: [`IndexPinning::None`].
    pub fn with_pin_index_and_filter_blocks(mut self, pinning: IndexPinning) -> Self {
        self.index_pinning = pinning;
        self
    }

    /// Keeps indexes and filters in the block cache in a pool of their own that data blocks
    /// never evict, of up to [`Options::with_high_pri_pool_ratio`] of the capacity (data blocks
    /// use what it leaves unused), so that scans and lookups of cold data do not push out
    /// the metadata every lookup needs. Applies with
    /// [`Options::with_cache_index_and_filter_blocks`]. RocksDB:
    /// `cache_index_and_filter_blocks_with_high_priority`. Default: true.
    pub fn with_cache_index_and_filter_blocks_with_high_priority(mut self, yes: bool) -> Self {
        self.index_and_filter_high_priority = yes;
        self
    }

    /// The share of the block cache the high-priority pool of indexes and filters may take
    /// ([`Options::with_cache_index_and_filter_blocks_with_high_priority`]), in [0, 1]. RocksDB:
    /// `LRUCacheOptions::high_pri_pool_ratio`. Default: 0.5.
    pub fn with_high_pri_pool_ratio(mut self, ratio: f64) -> Self {
        self.high_pri_pool_ratio = ratio;
        self
    }

    /// Table files kept open. RocksDB: `max_open_files`. Default: 1000.
    pub fn with_max_open_files(mut self, n: usize) -> Self {
        self.max_open_files = n;
        self
    }

    /// Manifest size at which a fresh manifest is started. RocksDB: `max_manifest_file_size`.
    /// Default: 16 MiB.
    pub fn with_max_manifest_file_size(mut self, bytes: u64) -> Self {
        self.max_manifest_file_size = bytes;
        self
    }

    /// What WAL recovery tolerates. RocksDB: `wal_recovery_mode`. Default:
    /// [`RecoveryMode::TolerateCorruptedTail`].
    pub fn with_wal_recovery_mode(mut self, mode: RecoveryMode) -> Self {
        self.wal_recovery_mode = mode;
        self
    }

    /// Verify every table's checksums when opening. RocksDB: `paranoid_checks` (which does less).
    /// Default: false.
    pub fn with_paranoid_checks(mut self, yes: bool) -> Self {
        self.paranoid_checks = yes;
        self
    }

    /// Record per-block key ranges of every table in the version (for block-granular policies;
    /// it makes the manifest larger). No RocksDB equivalent. Default: false.
    pub fn with_record_block_ranges(mut self, yes: bool) -> Self {
        self.record_block_ranges = yes;
        self
    }

    /// Run flushes and compactions in the writing thread, to completion, instead of in the
    /// background: deterministic, for tests and for comparing with the simulator. No RocksDB
    /// equivalent. Default: false.
    pub fn with_synchronous_compaction(mut self, yes: bool) -> Self {
        self.synchronous_compaction = yes;
        self
    }

    /// The compaction policy, as an object. RocksDB: `compaction_style` plus its options.
    /// Default: the policy the database records (every database records the policy it was
    /// last handed to, with its options), or `leveled` with default options for a new one.
    ///
    /// A policy other than the recorded one is a policy switch at open (see `Db::set_policy`):
    /// the tree is handed over to it, and the database records it from then on.
    pub fn with_policy(mut self, policy: Arc<dyn CompactionPolicy>) -> Self {
        self.policy = PolicyChoice::Object(policy);
        self
    }

    /// A registered policy by specification: `name` or `name:option=value,...`, e.g.
    /// `"leveled:level0_trigger=2"` (see [`strata_policy::registry`]). It is built when the
    /// database opens; its `write_buffer_size`, where it has one and the specification does not
    /// set it, is this database's write buffer size. Fails at once, naming the problem, if the
    /// name or an option is unknown or a value is out of range.
    pub fn with_policy_named(self, spec: &str) -> Result<Self> {
        self.with_policy_spec(spec.parse()?)
    }

    /// [`Options::with_policy_named`] with a parsed specification.
    pub fn with_policy_spec(mut self, spec: PolicySpec) -> Result<Self> {
        // Build once now, so a bad specification fails here rather than at open.
        build_policy(&spec)?;
        self.policy = PolicyChoice::Named(spec);
        Ok(self)
    }

    /// The policy a database that records `recorded` (a specification, see
    /// [`strata_policy::PolicySpec::of`]) runs: the configured object, the named policy built
    /// with this database's write buffer size as its default, or the recorded one (`leveled`
    /// when none is recorded). The flag says whether it was configured rather than recorded.
    pub(crate) fn policy_for(
        &self,
        recorded: Option<&str>,
    ) -> Result<(Arc<dyn CompactionPolicy>, bool)> {
        match (&self.policy, recorded) {
            (PolicyChoice::Object(policy), _) => Ok((Arc::clone(policy), true)),
            (PolicyChoice::Named(spec), _) => Ok((self.build_named(spec)?, true)),
            (PolicyChoice::Recorded, Some(text)) => {
                let built = text
                    .parse::<PolicySpec>()
                    .and_then(|spec| build_policy(&spec));
                let policy = built.map_err(|e| {
                    Error::InvalidArgument(format!(
                        "the database records the policy {text}, which cannot be built here \
                         ({e}); register it, or name a policy with Options::with_policy"
                    ))
                })?;
                Ok((policy, false))
            }
            (PolicyChoice::Recorded, None) => {
                Ok((self.build_named(&PolicySpec::new("leveled"))?, false))
            }
        }
    }

    fn build_named(&self, spec: &PolicySpec) -> Result<Arc<dyn CompactionPolicy>> {
        let mut spec = spec.clone();
        spec.fill_defaults([("write_buffer_size", self.write_buffer_size)])?;
        Ok(build_policy(&spec)?)
    }

    /// The file system. RocksDB: `env`. Default: the real one.
    pub fn with_file_system(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }

    /// Runs the policy the database records (a keyspace's tree without a policy of its own).
    pub(crate) fn with_recorded_policy(mut self) -> Self {
        self.policy = PolicyChoice::Recorded;
        self
    }

    /// Adds a listener told about opens, recoveries, flushes and compactions (start and end),
    /// write stalls, background errors and policy switches ([`EventListener`]). RocksDB:
    /// `listeners`. Default: none.
    pub fn with_event_listener(mut self, listener: Arc<dyn EventListener>) -> Self {
        self.listeners.push(Listener(listener));
        self
    }

    /// Has compactions ask `filter` about each put no snapshot can see, to keep, remove or
    /// change it ([`crate::compaction_filter`]); flushes do not. RocksDB: `compaction_filter`.
    /// Default: none.
    pub fn with_compaction_filter(mut self, filter: Arc<dyn CompactionFilter>) -> Self {
        self.compaction_filter = Some(filter);
        self
    }

    /// Combines merge operands (`Db::merge`, [`crate::WriteBatch::merge`]) with `operator`, in
    /// reads, flushes and compactions, for every keyspace ([`crate::merge_operator`]). A
    /// database holding operands must be opened with the operator that wrote them: reading an
    /// operand without one is an error. With an operator, merges keep no input block unchanged
    /// (block-preserving policies rewrite every block), since any block may hold operands to
    /// fold. RocksDB: `merge_operator`. Default: none (merges are refused).
    pub fn with_merge_operator(mut self, operator: Arc<dyn MergeOperator>) -> Self {
        self.merge_operator = Some(operator);
        self
    }

    /// Entries written `ttl` or longer ago read as absent, at the latest view and at every
    /// snapshot alike, and compactions drop them. Ages come from when sequence numbers were
    /// written, sampled about once a second (`ttl.rs`), in whole seconds: an entry may expire up
    /// to a second before its TTL or after it; entries a reopen replays from
    /// WALs count as written at the reopen, and a table whose entries have all expired is
    /// dropped whole. Opened again without a TTL, a database shows what compactions have not
    /// dropped yet (as RocksDB's does). Whole seconds, at least one. RocksDB:
    /// `DBWithTTL`'s `ttl` (its `Options::ttl` only schedules compactions). Default: none.
    pub fn with_ttl(mut self, ttl: Option<std::time::Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// The clock ages are read from ([`Options::with_ttl`]): the system's, or a
    /// [`crate::ManualClock`] a test moves. RocksDB: the `SystemClock` of `Options::env`. Default:
    /// [`crate::SystemClock`].
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Lets the database choose its own compaction policy: a thread of its own closes a window
    /// of the default keyspace's workload every so often (by bytes written and by time), asks
    /// the options' advisor what each candidate configuration would cost on it, and hands the
    /// tree to the best through [`crate::Db::set_policy`] when the rule of
    /// [`strata_policy::autopilot::Pilot`] says the gain is worth the handover. Every decision,
    /// kept or switched, is recorded in the manifest (`strata inspect --history` prints them)
    /// and kept in memory ([`crate::Db::autopilot_decisions`]). With
    /// [`Options::with_synchronous_compaction`] there is no thread: the write that completes a
    /// window (by bytes or operations; time is not counted) decides, as the simulator does.
    /// No RocksDB equivalent. Default: off.
    pub fn with_autopilot(mut self, autopilot: AutopilotOptions) -> Self {
        self.autopilot = Some(autopilot);
        self
    }

    /// With a TTL ([`Options::with_ttl`]), rewrites in place, before the policy is asked, a
    /// table holding entries that expired `period` or longer ago, dropping them: expired data
    /// goes even where no merge the policy chooses reaches it. Whole seconds. RocksDB:
    /// `periodic_compaction_seconds` (which rewrites files by age alone). Default: none (a
    /// table is dropped once all of it has expired, and partly expired ones wait for merges).
    pub fn with_periodic_compaction(mut self, period: Option<std::time::Duration>) -> Self {
        self.periodic_compaction = period;
        self
    }

    /// Once the WALs some keyspace still needs hold more than this many bytes, the keyspace
    /// holding the oldest has its memtable frozen and flushed, so that a keyspace written
    /// rarely does not keep every WAL since its last flush. RocksDB: `max_total_wal_size`.
    /// Default: 0, meaning 4 × `write_buffer_size` × `max_write_buffer_number` × the number of
    /// keyspaces.
    pub fn with_max_total_wal_size(mut self, bytes: u64) -> Self {
        self.max_total_wal_size = bytes;
        self
    }

    /// Writes the engine's events, one timestamped line each, to `LOG` in the database
    /// directory (a read-write open only; the previous `LOG` is kept as `LOG.old.<micros>`).
    /// RocksDB always writes one (`info_log`). Default: off; the events still go to `tracing`.
    pub fn with_info_log(mut self, yes: bool) -> Self {
        self.info_log = yes;
        self
    }

    /// The most info logs kept, the current one included; an open deletes the oldest beyond
    /// it. RocksDB: `keep_log_file_num`. Default: 1000.
    pub fn with_keep_log_file_num(mut self, n: usize) -> Self {
        self.keep_log_file_num = n;
        self
    }

    /// Checks every option, naming the first one out of range.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidArgument(what.to_string()));
        if self.ttl.is_some_and(|ttl| ttl.as_secs() == 0) {
            return bad("ttl must be at least one second (ages are counted in whole seconds)");
        }
        if self.periodic_compaction.is_some() && self.ttl.is_none() {
            return bad("periodic_compaction rewrites expired data: it needs a ttl (with_ttl)");
        }
        if let Some(level) = self
            .key_index_level
            .filter(|&l| l >= strata_meta::Version::MAX_LEVELS)
        {
            return Err(Error::InvalidArgument(format!(
                "key index level {level} is beyond the last level ({})",
                strata_meta::Version::MAX_LEVELS - 1
            )));
        }
        if self.write_buffer_size < 4096 {
            return bad("write_buffer_size must be at least 4096 bytes");
        }
        if !(0.0..=0.25).contains(&self.memtable_bloom_size_ratio) {
            return bad("memtable_bloom_size_ratio must be between 0 and 0.25");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2 (one active, one flushing)");
        }
        if self.level0_stop_writes_trigger == 0 || self.level0_slowdown_writes_trigger == 0 {
            return bad("level0 write triggers must be at least 1");
        }
        if self.level0_slowdown_writes_trigger > self.level0_stop_writes_trigger {
            return bad(
                "level0_slowdown_writes_trigger must not exceed level0_stop_writes_trigger",
            );
        }
        if self.delayed_write_rate < 16 << 10 {
            return bad("delayed_write_rate must be at least 16 KiB/s");
        }
        if self.rate_limit.is_some_and(|r| r < 1 << 20) {
            return bad("the rate limiter's rate must be at least 1 MiB/s");
        }
        if self.max_background_jobs == 0 {
            return bad("max_background_jobs must be at least 1");
        }
        if !(256..=(64 << 20)).contains(&self.block_size) {
            return bad("block_size must be between 256 bytes and 64 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.keep_log_file_num == 0 {
            return bad("keep_log_file_num must be at least 1 (the current info log)");
        }
        if self.max_manifest_file_size < 4096 {
            return bad("max_manifest_file_size must be at least 4096 bytes");
        }
        if !(0.0..=1.0).contains(&self.high_pri_pool_ratio) {
            return bad("high_pri_pool_ratio must be between 0 and 1");
        }
        if self.compaction_readahead_size > 1 << 30 {
            return bad("compaction_readahead_size must be at most 1 GiB");
        }
        if let Compression::Zstd {
            level,
            max_dict_bytes,
        } = self.compression
        {
            if !(-7..=22).contains(&level) {
                return bad("zstd compression level must be between -7 and 22");
            }
            if max_dict_bytes != 0 && !(MIN_DICT_BYTES..=MAX_DICT_BYTES).contains(&max_dict_bytes) {
                return bad(&format!(
                    "a zstd dictionary (max_dict_bytes) must be 0 or {MIN_DICT_BYTES} to \
                     {MAX_DICT_BYTES} bytes, not {max_dict_bytes}"
                ));
            }
        }
        Ok(())
    }
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Sync the WAL before acknowledging. RocksDB: `WriteOptions::sync`. Default: false (the
    /// write survives a process crash but may be lost on power failure).
    pub sync: bool,
    /// Leave the write out of the WAL. RocksDB: `WriteOptions::disableWAL`. Default: false.
    ///
    /// A write left out is durable once it is in a table, after [`crate::Db::flush`] (which
    /// also logs what a window-flushing policy keeps buffered) or a clean [`crate::Db::close`]
    /// (which logs every such write still buffered); a crash before that loses it. Since a
    /// window flush writes part of a memtable, a crash may keep part of a batch left out and
    /// lose the rest. Cannot be combined with `sync` (an `InvalidArgument`).
    pub disable_wal: bool,
}

impl WriteOptions {
    /// Options that sync the WAL before returning.
    pub fn synced() -> Self {
        WriteOptions {
            sync: true,
            ..WriteOptions::default()
        }
    }

    /// Options that leave the write out of the WAL (see [`WriteOptions::disable_wal`]).
    pub fn without_wal() -> Self {
        WriteOptions {
            disable_wal: true,
            ..WriteOptions::default()
        }
    }
}
