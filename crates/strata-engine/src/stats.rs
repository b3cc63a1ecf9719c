//! Engine statistics: the counters write, space and read amplification are computed from.

use std::sync::atomic::{AtomicU64, Ordering};

/// One point lookup in this many is timed for [`Statistics::lookups_timed_idle`] and its
/// siblings: two clock reads cost ~2% of a cached lookup, so a sample keeps that at ~0.1%.
pub const LOOKUP_SAMPLE_EVERY: u32 = 16;

/// Counters updated by every part of the engine (relaxed atomics).
#[derive(Debug, Default)]
pub struct Statistics {
    /// User key+value bytes accepted by writes (puts count key+value, deletes the key).
    pub user_bytes: AtomicU64,
    /// Bytes appended to write-ahead logs.
    pub wal_bytes: AtomicU64,
    /// WAL syncs.
    pub wal_syncs: AtomicU64,
    /// Write batches committed.
    pub batches: AtomicU64,
    /// Write groups committed (one WAL append each; batches / groups = group-commit factor).
    pub write_groups: AtomicU64,
    /// Bytes written to table files by flushes.
    pub flush_bytes: AtomicU64,
    /// Bytes written to table files by compactions.
    pub compaction_bytes_written: AtomicU64,
    /// Bytes read from table files by compactions (and by flushes that merge into a run).
    pub compaction_bytes_read: AtomicU64,
    /// Flushes completed.
    pub flushes: AtomicU64,
    /// Merges completed.
    pub compactions: AtomicU64,
    /// Merges that rewrote every table of the tree's deepest level (global compactions: the
    /// ends of compaction rounds, [`strata_exec::sources::rewrites_last_level`]).
    pub last_level_rewrites: AtomicU64,
    /// Trivial moves completed.
    pub trivial_moves: AtomicU64,
    /// Nanoseconds spent building the levels' interval indexes, once per new version.
    pub interval_index_nanos: AtomicU64,
    /// Data blocks read from storage by point lookups and scans (block-cache misses; hits
    /// excluded). Compaction inputs and table metadata are counted apart, so that this divided by
    /// the lookups is the read amplification of DESIGN.md.
    pub blocks_read: AtomicU64,
    /// Bytes of the data blocks counted in `blocks_read`.
    pub block_bytes_read: AtomicU64,
    /// Data blocks read from storage by compactions and merging flushes (misses of the cache,
    /// which their reads never fill).
    pub compaction_blocks_read: AtomicU64,
    /// Properties, index and filter blocks read when a table is opened or verified.
    pub metadata_blocks_read: AtomicU64,
    /// Block-cache hits.
    pub block_cache_hits: AtomicU64,
    /// Block-cache misses.
    pub block_cache_misses: AtomicU64,
    /// Bloom-filter probes.
    pub bloom_checks: AtomicU64,
    /// Bloom-filter probes that ruled the table out.
    pub bloom_negatives: AtomicU64,
    /// Put operations written.
    pub puts: AtomicU64,
    /// Delete operations written.
    pub deletes: AtomicU64,
    /// Point lookups.
    pub gets: AtomicU64,
    /// Range iterators created.
    pub scans: AtomicU64,
    /// Range iterators dropped, by the entries each returned (buckets of
    /// [`strata_policy::ScanLengths`]).
    pub scan_lengths: [AtomicU64; strata_policy::ScanLengths::BUCKETS],
    /// Point lookups timed (one in [`LOOKUP_SAMPLE_EVERY`]) that started while no merge ran, and
    /// their nanoseconds; then the same for lookups that started beside a merge (EcoTune's β,
    /// [`strata_policy::LookupTimes`]).
    pub lookups_timed_idle: AtomicU64,
    /// See `lookups_timed_idle`.
    pub lookup_nanos_idle: AtomicU64,
    /// See `lookups_timed_idle`.
    pub lookups_timed_merging: AtomicU64,
    /// See `lookups_timed_idle`.
    pub lookup_nanos_merging: AtomicU64,
    /// Tables probed by point lookups (runs probed, counting each table looked into).
    pub get_tables_probed: AtomicU64,
    /// Microseconds writers spent slowed down or stopped by the write controller.
    pub stall_micros: AtomicU64,
    /// Commit groups the write controller delayed (level 0 at or above the slowdown trigger).
    pub delayed_writes: AtomicU64,
    /// Compactions started again after reading an input failed.
    pub compaction_read_retries: AtomicU64,
    /// Data blocks flushes and compactions wrote into each level (index = level), counted
    /// only while block ranges are recorded (`Options::with_record_block_ranges`). Updated
    /// when a job installs, under the engine's state lock, so a mutex costs nothing extra.
    pub data_blocks_written_per_level: parking_lot::Mutex<Vec<u64>>,
    /// Data blocks block-preserving merges kept in each level instead of rewriting them
    /// (index = level). Updated like `data_blocks_written_per_level`.
    pub data_blocks_preserved_per_level: parking_lot::Mutex<Vec<u64>>,
}

impl Statistics {
    /// Adds `n` to `counter`.
    #[inline]
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `counter`.
    #[inline]
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
