//! A snapshot of the engine's counters, its amplifications and the tree's shape.

use crate::row_cache::RowCache;
use crate::stats::Statistics;
use crate::table::BlockCache;
use std::fmt;
use strata_meta::Version;

/// One level's shape.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LevelMetrics {
    /// Level number.
    pub level: usize,
    /// Sorted runs.
    pub runs: usize,
    /// Tables.
    pub tables: usize,
    /// Bytes of table files.
    pub bytes: u64,
}

/// Counters since open and the current shape. Amplifications follow the measuring conventions of
/// `docs/architecture.md`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Metrics {
    /// User key+value bytes written.
    pub user_bytes: u64,
    /// Bytes appended to WALs (reported apart from write amplification).
    pub wal_bytes: u64,
    /// Bytes written to tables by flushes.
    pub flush_bytes: u64,
    /// Bytes written to tables by compactions.
    pub compaction_bytes_written: u64,
    /// Bytes read by compactions and merging flushes.
    pub compaction_bytes_read: u64,
    /// (flush + compaction bytes written) / user bytes.
    pub write_amp: f64,
    /// Flushes.
    pub flushes: u64,
    /// Merges.
    pub compactions: u64,
    /// Trivial moves.
    pub trivial_moves: u64,
    /// Merges that rewrote every table of the deepest level (compaction rounds ended).
    pub last_level_rewrites: u64,
    /// Puts written.
    pub puts: u64,
    /// Deletes written.
    pub deletes: u64,
    /// Point lookups.
    pub gets: u64,
    /// Range iterators created.
    pub scans: u64,
    /// Tables probed by point lookups.
    pub get_tables_probed: u64,
    /// Data blocks read from storage by lookups and scans.
    pub blocks_read: u64,
    /// Bytes of the data blocks in `blocks_read`.
    pub block_bytes_read: u64,
    /// Data blocks read from storage by compactions and merging flushes.
    pub compaction_blocks_read: u64,
    /// Properties, index and filter blocks read when tables were opened.
    pub metadata_blocks_read: u64,
    /// Index blocks read from storage by lookups and scans (block-cache misses where the cache
    /// holds indexes; 0 while open tables hold them).
    pub index_blocks_read: u64,
    /// Filter blocks read from storage by lookups, counted like `index_blocks_read`.
    pub filter_blocks_read: u64,
    /// Lookups and scans that found a table's index in the block cache (tables that keep it
    /// there only).
    pub index_cache_hits: u64,
    /// Lookups that found a table's filter in the block cache, counted like `index_cache_hits`.
    pub filter_cache_hits: u64,
    /// Reads of lookups and scans that read ahead (a data block and the bytes after it).
    pub readahead_reads: u64,
    /// Bytes those reads brought.
    pub readahead_bytes: u64,
    /// Data blocks that came out of a read ahead (each also counts in `blocks_read`).
    pub readahead_blocks: u64,
    /// Data blocks that batches of reads (`Db::multi_get`, a forward scan's first seeks) sent
    /// to storage together.
    pub batched_block_reads: u64,
    /// Data blocks of those batches the operating system held in memory and handed over at
    /// once.
    pub batched_blocks_from_memory: u64,
    /// Block-cache hits of lookups and scans.
    pub block_cache_hits: u64,
    /// Block-cache misses of lookups and scans.
    pub block_cache_misses: u64,
    /// Table probes of point lookups the row cache answered
    /// ([`Options::with_row_cache_capacity`](crate::Options::with_row_cache_capacity)).
    pub row_cache_hits: u64,
    /// Table probes of point lookups the row cache was asked and could not answer.
    pub row_cache_misses: u64,
    /// The row cache's capacity (0 when off).
    pub row_cache_capacity: u64,
    /// Bytes charged by the rows it holds (keys, values and a per-row overhead).
    pub row_cache_bytes: u64,
    /// Rows it holds.
    pub row_cache_rows: u64,
    /// Bloom-filter probes.
    pub bloom_checks: u64,
    /// Bloom-filter probes that excluded a table.
    pub bloom_negatives: u64,
    /// WAL syncs.
    pub wal_syncs: u64,
    /// Batches committed.
    pub batches: u64,
    /// ... of which left out of the WAL ([`crate::WriteOptions::disable_wal`]).
    pub unlogged_batches: u64,
    /// Commit groups (one WAL append each).
    pub write_groups: u64,
    /// ... of which pipelined: the next group logged while they inserted
    /// ([`crate::Options::with_enable_pipelined_write`]).
    pub pipelined_write_groups: u64,
    /// Microseconds writers were delayed or stopped.
    pub stall_micros: u64,
    /// Commit groups delayed at the delayed write rate.
    pub delayed_writes: u64,
    /// Compactions started again after reading an input failed (each retry counts once).
    pub compaction_read_retries: u64,
    /// Entries the compaction filter removed ([`crate::Options::with_compaction_filter`]).
    pub compaction_filter_removed: u64,
    /// Entries whose value the compaction filter changed.
    pub compaction_filter_changed: u64,
    /// Bytes of live table files, including files kept only because tables refer to blocks
    /// in them ([`strata_meta::Version::disk_bytes`]).
    pub table_bytes: u64,
    /// Bytes held by memtables (their arenas).
    pub memtable_bytes: u64,
    /// Frozen memtables: waiting for a flush, or held by a window flush. Each keeps its WAL,
    /// so the WALs on disk are these plus the active one's (plus, for a moment, those a flush
    /// just made obsolete). RocksDB: `rocksdb.num-immutable-mem-table`.
    pub frozen_memtables: usize,
    /// The block cache's capacity.
    pub block_cache_capacity: u64,
    /// Block-cache bytes in use by cached entries (data blocks, and indexes and filters where
    /// the cache keeps them), each with a small per-entry overhead.
    pub block_cache_bytes: u64,
    /// What the block cache holds, by kind: data blocks and their bytes.
    pub block_cache_data_blocks: u64,
    /// See `block_cache_data_blocks`.
    pub block_cache_data_bytes: u64,
    /// Table indexes the block cache holds
    /// ([`Options::with_cache_index_and_filter_blocks`](crate::Options::with_cache_index_and_filter_blocks)),
    /// and their bytes.
    pub block_cache_indexes: u64,
    /// See `block_cache_indexes`.
    pub block_cache_index_bytes: u64,
    /// Table filters the block cache holds, and their bytes.
    pub block_cache_filters: u64,
    /// See `block_cache_filters`.
    pub block_cache_filter_bytes: u64,
    /// Bytes open tables charge to the block cache
    /// ([`Options::with_charge_tables_to_cache`](crate::Options::with_charge_tables_to_cache);
    /// 0 when off).
    pub block_cache_table_bytes: u64,
    /// Sorted runs in the tree.
    pub sorted_runs: usize,
    /// Tables in the tree.
    pub tables: usize,
    /// Per-level shape (non-empty levels only).
    pub levels: Vec<LevelMetrics>,
    /// Data blocks flushes and compactions wrote into each level (index = level); empty
    /// unless block ranges are recorded (`Options::with_record_block_ranges`).
    pub data_blocks_written_per_level: Vec<u64>,
    /// Data blocks block-preserving merges kept in each level instead of rewriting them (index
    /// = level); counted like `data_blocks_written_per_level`.
    pub data_blocks_preserved_per_level: Vec<u64>,
    /// Files kept only because tables refer to blocks in them, and their bytes.
    pub retained_files: usize,
    /// Bytes of those files.
    pub retained_file_bytes: u64,
    /// Microseconds spent in the compaction policy's decisions (picks, flush plans, holds).
    pub policy_micros: u64,
    /// Keys in the key index ([`Options::with_key_index`](crate::Options::with_key_index)),
    /// stale generations included; 0 without one.
    pub key_index_entries: u64,
    /// Bytes the key index's hash tables hold.
    pub key_index_bytes: u64,
    /// Microseconds spent building the levels' interval indexes (each level's once per
    /// version, by the first read that needs it).
    pub interval_index_micros: u64,
    /// Bytes the current version's interval indexes take (those reads have built).
    pub interval_index_bytes: u64,
}

/// What the key index holds, for [`Metrics::collect`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyIndexUse {
    pub entries: u64,
    pub bytes: u64,
}

/// The caches of a database, for [`Metrics::collect`].
pub(crate) struct Caches<'a> {
    /// Blocks.
    pub blocks: &'a BlockCache,
    /// Rows, when there is a row cache.
    pub rows: Option<&'a RowCache>,
}

/// What the memtables hold, for [`Metrics::collect`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MemtableUse {
    /// Their arenas' bytes, the active memtable's included.
    pub bytes: u64,
    /// Frozen ones, held or waiting.
    pub frozen: usize,
}

impl Metrics {
    pub(crate) fn collect(
        s: &Statistics,
        version: &Version,
        memtables: MemtableUse,
        caches: Caches<'_>,
        policy_nanos: u64,
        key_index: KeyIndexUse,
        interval_index_bytes: u64,
    ) -> Metrics {
        let g = Statistics::get;
        let cache = caches.blocks;
        let contents = cache.contents();
        let user_bytes = g(&s.user_bytes);
        let flush_bytes = g(&s.flush_bytes);
        let compaction_bytes_written = g(&s.compaction_bytes_written);
        let write_amp = if user_bytes > 0 {
            (flush_bytes + compaction_bytes_written) as f64 / user_bytes as f64
        } else {
            0.0
        };
        Metrics {
            user_bytes,
            wal_bytes: g(&s.wal_bytes),
            flush_bytes,
            compaction_bytes_written,
            compaction_bytes_read: g(&s.compaction_bytes_read),
            write_amp,
            flushes: g(&s.flushes),
            compactions: g(&s.compactions),
            trivial_moves: g(&s.trivial_moves),
            interval_index_micros: g(&s.interval_index_nanos) / 1000,
            interval_index_bytes,
            last_level_rewrites: g(&s.last_level_rewrites),
            puts: g(&s.puts),
            deletes: g(&s.deletes),
            gets: g(&s.gets),
            scans: g(&s.scans),
            get_tables_probed: g(&s.get_tables_probed),
            blocks_read: g(&s.blocks_read),
            block_bytes_read: g(&s.block_bytes_read),
            compaction_blocks_read: g(&s.compaction_blocks_read),
            metadata_blocks_read: g(&s.metadata_blocks_read),
            index_blocks_read: g(&s.index_blocks_read),
            filter_blocks_read: g(&s.filter_blocks_read),
            index_cache_hits: g(&s.index_cache_hits),
            filter_cache_hits: g(&s.filter_cache_hits),
            readahead_reads: g(&s.readahead_reads),
            readahead_bytes: g(&s.readahead_bytes),
            readahead_blocks: g(&s.readahead_blocks),
            batched_block_reads: g(&s.batched_block_reads),
            batched_blocks_from_memory: g(&s.batched_blocks_from_memory),
            block_cache_hits: g(&s.block_cache_hits),
            block_cache_misses: g(&s.block_cache_misses),
            row_cache_hits: g(&s.row_cache_hits),
            row_cache_misses: g(&s.row_cache_misses),
            row_cache_capacity: caches.rows.map_or(0, RowCache::capacity),
            row_cache_bytes: caches.rows.map_or(0, RowCache::used_bytes),
            row_cache_rows: caches.rows.map_or(0, |r| r.len() as u64),
            bloom_checks: g(&s.bloom_checks),
            bloom_negatives: g(&s.bloom_negatives),
            wal_syncs: g(&s.wal_syncs),
            batches: g(&s.batches),
            unlogged_batches: g(&s.unlogged_batches),
            write_groups: g(&s.write_groups),
            pipelined_write_groups: g(&s.pipelined_write_groups),
            stall_micros: g(&s.stall_micros),
            delayed_writes: g(&s.delayed_writes),
            compaction_read_retries: g(&s.compaction_read_retries),
            compaction_filter_removed: g(&s.compaction_filter_removed),
            compaction_filter_changed: g(&s.compaction_filter_changed),
            table_bytes: version.disk_bytes(),
            memtable_bytes: memtables.bytes,
            frozen_memtables: memtables.frozen,
            block_cache_capacity: cache.capacity(),
            block_cache_bytes: cache.used_bytes(),
            block_cache_data_blocks: contents.data_blocks,
            block_cache_data_bytes: contents.data_bytes,
            block_cache_indexes: contents.indexes,
            block_cache_index_bytes: contents.index_bytes,
            block_cache_filters: contents.filters,
            block_cache_filter_bytes: contents.filter_bytes,
            block_cache_table_bytes: cache.table_bytes(),
            sorted_runs: version.run_count(),
            tables: version.table_count(),
            levels: version
                .levels()
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.is_empty())
                .map(|(level, l)| LevelMetrics {
                    level,
                    runs: l.runs().len(),
                    tables: l.table_count(),
                    bytes: l.size(),
                })
                .collect(),
            data_blocks_written_per_level: s.data_blocks_written_per_level.lock().clone(),
            data_blocks_preserved_per_level: s.data_blocks_preserved_per_level.lock().clone(),
            retained_files: version.retained_files().count(),
            retained_file_bytes: version.retained_files().map(|(_, size)| size).sum(),
            policy_micros: policy_nanos / 1000,
            key_index_entries: key_index.entries,
            key_index_bytes: key_index.bytes,
        }
    }
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "writes: {} puts, {} deletes, {} user bytes, {} WAL bytes ({} syncs, {} batches in {} groups, {} of them pipelined, {} batches not logged)",
            self.puts, self.deletes, self.user_bytes, self.wal_bytes, self.wal_syncs, self.batches, self.write_groups, self.pipelined_write_groups, self.unlogged_batches
        )?;
        writeln!(
            f,
            "tables: {} flushes wrote {} bytes, {} compactions wrote {} and read {}, {} trivial moves; write amp {:.2}",
            self.flushes,
            self.flush_bytes,
            self.compactions,
            self.compaction_bytes_written,
            self.compaction_bytes_read,
            self.trivial_moves,
            self.write_amp
        )?;
        writeln!(
            f,
            "reads: {} gets probing {} tables, {} scans; {} blocks read ({} bytes), {} more by compactions, {} metadata blocks; cache {} hits / {} misses; bloom {} of {} probes negative",
            self.gets,
            self.get_tables_probed,
            self.scans,
            self.blocks_read,
            self.block_bytes_read,
            self.compaction_blocks_read,
            self.metadata_blocks_read,
            self.block_cache_hits,
            self.block_cache_misses,
            self.bloom_negatives,
            self.bloom_checks
        )?;
        writeln!(
            f,
            "cache: {} of {} bytes: {} data blocks ({} bytes), {} indexes ({} bytes), {} filters \
             ({} bytes); {} bytes charged by open tables; index {} hits / {} reads, filter {} \
             hits / {} reads; readahead {} reads ({} bytes) serving {} blocks; batches {} \
             blocks sent to storage, {} from memory",
            self.block_cache_bytes,
            self.block_cache_capacity,
            self.block_cache_data_blocks,
            self.block_cache_data_bytes,
            self.block_cache_indexes,
            self.block_cache_index_bytes,
            self.block_cache_filters,
            self.block_cache_filter_bytes,
            self.block_cache_table_bytes,
            self.index_cache_hits,
            self.index_blocks_read,
            self.filter_cache_hits,
            self.filter_blocks_read,
            self.readahead_reads,
            self.readahead_bytes,
            self.readahead_blocks,
            self.batched_block_reads,
            self.batched_blocks_from_memory
        )?;
        writeln!(
            f,
            "shape: {} runs, {} tables, {} table bytes, {} memtable bytes ({} frozen memtables), \
             stalled {} µs",
            self.sorted_runs,
            self.tables,
            self.table_bytes,
            self.memtable_bytes,
            self.frozen_memtables,
            self.stall_micros
        )?;
        if self.row_cache_capacity > 0 {
            writeln!(
                f,
                "row cache: {} rows in {} of {} bytes; {} hits / {} misses",
                self.row_cache_rows,
                self.row_cache_bytes,
                self.row_cache_capacity,
                self.row_cache_hits,
                self.row_cache_misses
            )?;
        }
        if self.key_index_entries > 0 {
            writeln!(
                f,
                "key index: {} keys in {} bytes",
                self.key_index_entries, self.key_index_bytes
            )?;
        }
        for l in &self.levels {
            writeln!(
                f,
                "  L{}: {} runs, {} tables, {} bytes",
                l.level, l.runs, l.tables, l.bytes
            )?;
        }
        if !self.data_blocks_preserved_per_level.is_empty() || self.retained_files > 0 {
            writeln!(
                f,
                "blocks: written per level {:?}, kept per level {:?}; {} files ({} bytes) kept for references",
                self.data_blocks_written_per_level,
                self.data_blocks_preserved_per_level,
                self.retained_files,
                self.retained_file_bytes
            )?;
        }
        Ok(())
    }
}
