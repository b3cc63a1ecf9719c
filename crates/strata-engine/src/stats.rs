//! Engine statistics: the counters write, space and read amplification are computed from.

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use strata_policy::autopilot::WorkloadWindow;
use strata_policy::ScanLengths;

/// One point lookup in this many is timed for [`Statistics::lookups_timed_idle`] and its
/// siblings: two clock reads cost ~2% of a cached lookup, so a sample keeps that at ~0.1%.
pub const LOOKUP_SAMPLE_EVERY: u32 = 16;

/// Counters updated by every part of the engine (relaxed atomics).
#[derive(Debug, Default)]
pub struct Statistics {
    /// User key+value bytes accepted by writes (puts count key+value, deletes the key).
    pub user_bytes: Counter,
    /// The value bytes among them (the rest are key bytes).
    pub value_bytes: Counter,
    /// Bytes appended to write-ahead logs.
    pub wal_bytes: Counter,
    /// WAL syncs.
    pub wal_syncs: Counter,
    /// Write batches committed.
    pub batches: Counter,
    /// ... of which left out of the WAL ([`crate::WriteOptions::disable_wal`]).
    pub unlogged_batches: Counter,
    /// Write groups committed (one WAL append each; batches / groups = group-commit factor).
    pub write_groups: Counter,
    /// ... of which pipelined: the next group logged while they inserted.
    pub pipelined_write_groups: Counter,
    /// Bytes written to table files by flushes.
    pub flush_bytes: Counter,
    /// Bytes written to table files by compactions.
    pub compaction_bytes_written: Counter,
    /// Bytes read from table files by compactions (and by flushes that merge into a run).
    pub compaction_bytes_read: Counter,
    /// Flushes completed.
    pub flushes: Counter,
    /// Merges completed.
    pub compactions: Counter,
    /// Merges that rewrote every table of the tree's deepest level (global compactions: the
    /// ends of compaction rounds, [`strata_exec::sources::rewrites_last_level`]).
    pub last_level_rewrites: Counter,
    /// Trivial moves completed.
    pub trivial_moves: Counter,
    /// Nanoseconds spent building the levels' interval indexes, once per new version.
    pub interval_index_nanos: Counter,
    /// Data blocks read from storage by point lookups and scans (block-cache misses; hits
    /// excluded). Compaction inputs and table metadata are counted apart, so that this divided by
    /// the lookups is the read amplification of DESIGN.md.
    pub blocks_read: Counter,
    /// Bytes of the data blocks counted in `blocks_read`.
    pub block_bytes_read: Counter,
    /// Data blocks read from storage by compactions and merging flushes (misses of the cache,
    /// which their reads never fill).
    pub compaction_blocks_read: Counter,
    /// Properties, index and filter blocks read when a table is opened or verified.
    pub metadata_blocks_read: Counter,
    /// Index blocks read from storage by point lookups and scans: misses of the block cache
    /// where it holds indexes (`Options::with_cache_index_and_filter_blocks`); 0 while open
    /// tables hold them.
    pub index_blocks_read: Counter,
    /// Filter blocks read from storage by point lookups, counted like `index_blocks_read`.
    pub filter_blocks_read: Counter,
    /// Lookups and scans that found a table's index in the block cache (only tables that keep
    /// it there count).
    pub index_cache_hits: Counter,
    /// Lookups that found a table's filter in the block cache, counted like `index_cache_hits`.
    pub filter_cache_hits: Counter,
    /// Reads of lookups and scans that read ahead: each brought a data block and the file bytes
    /// after it (`ReadOptions::readahead_size`).
    pub readahead_reads: Counter,
    /// Bytes those reads brought.
    pub readahead_bytes: Counter,
    /// Data blocks of lookups and scans that came out of a read ahead (each also counts in
    /// `blocks_read`): the reads of data blocks that went to storage are `blocks_read −
    /// readahead_blocks + readahead_reads`.
    pub readahead_blocks: Counter,
    /// Data blocks that batches of reads ([`crate::Db::multi_get`], a forward scan's first
    /// seeks) sent to storage together.
    pub batched_block_reads: Counter,
    /// Data blocks of those batches that the operating system held in memory (the page cache)
    /// and handed over at once, without going with the batch.
    pub batched_blocks_from_memory: Counter,
    /// Block-cache hits.
    pub block_cache_hits: Counter,
    /// Block-cache misses.
    pub block_cache_misses: Counter,
    /// Table probes of point lookups the row cache answered
    /// ([`crate::Options::with_row_cache_capacity`]).
    pub row_cache_hits: Counter,
    /// Table probes of point lookups the row cache could not answer (it is asked only after the
    /// table's filter let the key through).
    pub row_cache_misses: Counter,
    /// Bloom-filter probes.
    pub bloom_checks: Counter,
    /// Bloom-filter probes that ruled the table out.
    pub bloom_negatives: Counter,
    /// Put operations written.
    pub puts: Counter,
    /// Delete operations written.
    pub deletes: Counter,
    /// Point lookups.
    pub gets: Counter,
    /// Range iterators created.
    pub scans: Counter,
    /// Range iterators dropped, by the entries each returned (buckets of
    /// [`strata_policy::ScanLengths`]).
    pub scan_lengths: [Counter; ScanLengths::BUCKETS],
    /// Point lookups timed (one in [`LOOKUP_SAMPLE_EVERY`]) that started while no merge ran, and
    /// their nanoseconds; then the same for lookups that started beside a merge (EcoTune's β,
    /// [`strata_policy::LookupTimes`]).
    pub lookups_timed_idle: Counter,
    /// See `lookups_timed_idle`.
    pub lookup_nanos_idle: Counter,
    /// See `lookups_timed_idle`.
    pub lookups_timed_merging: Counter,
    /// See `lookups_timed_idle`.
    pub lookup_nanos_merging: Counter,
    /// Tables probed by point lookups (runs probed, counting each table looked into).
    pub get_tables_probed: Counter,
    /// Microseconds writers spent slowed down or stopped by the write controller.
    pub stall_micros: Counter,
    /// Commit groups the write controller delayed (level 0 at or above the slowdown trigger).
    pub delayed_writes: Counter,
    /// Compactions started again after reading an input failed.
    pub compaction_read_retries: Counter,
    /// Entries the compaction filter removed.
    pub compaction_filter_removed: Counter,
    /// Entries whose value the compaction filter changed.
    pub compaction_filter_changed: Counter,
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
    pub fn add(counter: &Counter, n: u64) {
        counter.add(n);
    }

    /// Reads `counter`.
    #[inline]
    pub fn get(counter: &Counter) -> u64 {
        counter.get()
    }
}

/// Shards of a [`Counter`]: more than the threads that usually add to one at once.
const COUNTER_SHARDS: usize = 16;

/// A count many threads add to at once (every lookup adds to several). The count is spread over
/// shards of a cache line each, a thread adding to its own, so that threads on different cores
/// do not take turns owning one line: with a single `AtomicU64` per count, adding to the lookup
/// count took 80% of a memtable lookup's own time on two threads (docs/concurrency.md). Reading
/// sums the shards, which only metrics do.
#[derive(Default)]
pub struct Counter {
    shards: [CachePadded<AtomicU64>; COUNTER_SHARDS],
}

thread_local! {
    /// This thread's shard of every counter.
    static COUNTER_SHARD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % COUNTER_SHARDS
    };
}

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        let shard = COUNTER_SHARD.try_with(|s| *s).unwrap_or(0);
        self.shards[shard].fetch_add(n, Ordering::Relaxed);
    }

    /// The count: the sum of what every thread added.
    pub fn get(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// What a database has done since it was created: its workload (what `strata advise` tunes
/// for) and the bytes that workload cost (write amplification over the database's life).
///
/// The engine records it with every flush's manifest record, in each new manifest's first
/// record and at close, so it survives reopening; a crash loses what happened since the last
/// flush. Writes replayed from the WAL at open are not counted again.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LifetimeStats {
    /// Puts written.
    pub puts: u64,
    /// Deletes written.
    pub deletes: u64,
    /// Point lookups.
    pub point_reads: u64,
    /// Range iterators created.
    pub scans: u64,
    /// Range iterators by the entries each returned, in [`ScanLengths`]' buckets.
    pub scan_lengths: Vec<u64>,
    /// User key bytes of puts and deletes.
    pub key_bytes: u64,
    /// User value bytes of puts.
    pub value_bytes: u64,
    /// Bytes appended to WALs.
    pub wal_bytes: u64,
    /// Bytes flushes wrote to tables.
    pub flush_bytes: u64,
    /// Bytes compactions wrote to tables, and read from them.
    pub compaction_bytes_written: u64,
    /// Bytes compactions read.
    pub compaction_bytes_read: u64,
    /// Flushes and merges completed.
    pub flushes: u64,
    /// Merges completed.
    pub compactions: u64,
    /// The last skew estimate (the fraction of a flush made of hot keys), if one was made.
    pub skew: Option<f64>,
    /// The last estimate of how much of a flush's key range the previous flush's covered
    /// (`strata_exec::skew::SkewEstimator::range_overlap`: near 0 for ascending keys), if one
    /// was made.
    pub range_overlap: Option<f64>,
    /// Seconds the database has been open for writing.
    pub open_seconds: f64,
}

impl LifetimeStats {
    /// These counts plus what `stats` counted since the open, with the open's skew and key-range
    /// overlap estimates `(skew, range_overlap)` (where it made them) and its `seconds`.
    pub fn plus(
        &self,
        stats: &Statistics,
        (skew, range_overlap): (Option<f64>, Option<f64>),
        seconds: f64,
    ) -> LifetimeStats {
        let get = Statistics::get;
        let value_bytes = get(&stats.value_bytes);
        let mut scan_lengths = self.scan_lengths.clone();
        scan_lengths.resize(ScanLengths::BUCKETS.max(scan_lengths.len()), 0);
        for (sum, count) in scan_lengths.iter_mut().zip(&stats.scan_lengths) {
            *sum += get(count);
        }
        // Every manifest record carries these: empty long-scan buckets cost nothing.
        while scan_lengths.last() == Some(&0) {
            scan_lengths.pop();
        }
        LifetimeStats {
            puts: self.puts + get(&stats.puts),
            deletes: self.deletes + get(&stats.deletes),
            point_reads: self.point_reads + get(&stats.gets),
            scans: self.scans + get(&stats.scans),
            scan_lengths,
            key_bytes: self.key_bytes + get(&stats.user_bytes).saturating_sub(value_bytes),
            value_bytes: self.value_bytes + value_bytes,
            wal_bytes: self.wal_bytes + get(&stats.wal_bytes),
            flush_bytes: self.flush_bytes + get(&stats.flush_bytes),
            compaction_bytes_written: self.compaction_bytes_written
                + get(&stats.compaction_bytes_written),
            compaction_bytes_read: self.compaction_bytes_read + get(&stats.compaction_bytes_read),
            flushes: self.flushes + get(&stats.flushes),
            compactions: self.compactions + get(&stats.compactions),
            skew: skew.or(self.skew),
            range_overlap: range_overlap.or(self.range_overlap),
            open_seconds: self.open_seconds + seconds,
        }
    }

    /// User key and value bytes written.
    pub fn user_bytes(&self) -> u64 {
        self.key_bytes + self.value_bytes
    }

    /// Table bytes written by flushes and compactions ÷ user bytes written (DESIGN.md's write
    /// amplification), if anything was written.
    pub fn write_amplification(&self) -> Option<f64> {
        let user = self.user_bytes();
        (user > 0).then(|| (self.flush_bytes + self.compaction_bytes_written) as f64 / user as f64)
    }

    /// Operations of every kind.
    pub fn operations(&self) -> u64 {
        self.puts + self.deletes + self.point_reads + self.scans
    }

    /// The workload between `earlier` (an earlier reading of the same counters) and these:
    /// what the autopilot judges ([`crate::Options::with_autopilot`]).
    pub fn window_since(&self, earlier: &LifetimeStats) -> WorkloadWindow {
        let scans = self.scans_since(&earlier.scan_lengths);
        WorkloadWindow {
            puts: self.puts.saturating_sub(earlier.puts),
            deletes: self.deletes.saturating_sub(earlier.deletes),
            point_reads: self.point_reads.saturating_sub(earlier.point_reads),
            scans: self.scans.saturating_sub(earlier.scans),
            scan_length: scans.mean(),
            key_bytes: self.key_bytes.saturating_sub(earlier.key_bytes),
            value_bytes: self.value_bytes.saturating_sub(earlier.value_bytes),
            skew: self.skew,
            range_overlap: self.range_overlap,
            seconds: (self.open_seconds - earlier.open_seconds).max(0.0),
        }
    }

    /// The range scans by length, as policies count them.
    pub fn scan_length_histogram(&self) -> ScanLengths {
        self.scans_since(&[])
    }

    /// The range scans by length since the bucket counts `earlier` (an earlier reading).
    fn scans_since(&self, earlier: &[u64]) -> ScanLengths {
        let mut scans = ScanLengths::default();
        for (bucket, &count) in self
            .scan_lengths
            .iter()
            .enumerate()
            .take(ScanLengths::BUCKETS)
        {
            let before = earlier.get(bucket).copied().unwrap_or(0);
            scans.add_to_bucket(bucket, count.saturating_sub(before));
        }
        scans
    }
}
