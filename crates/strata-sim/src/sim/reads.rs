//! Reads against a simulated block cache ([`SimConfig::read_cache_bytes`]): where each point
//! lookup and scan of the workload finds its keys in the simulated tree, and whether the data
//! blocks it reads would still be in a cache of that size.
//!
//! Out of cache, which blocks stay in memory depends on the layout and the workload together:
//! a read-latest workload reads recent keys, which a tiered tree keeps in small young runs
//! (few blocks, all hot) and a leveled tree merges into a large level among older keys (a block
//! per hot key); zipfian updates keep their hot keys' newest versions in young runs too. A
//! uniform share (cache bytes over stored bytes) sees none of this, so the simulator runs the
//! cache on the workload's own reads.
//!
//! [`SimConfig::read_cache_bytes`]: super::SimConfig::read_cache_bytes

use super::Simulator;
use crate::keys::{key_from_bytes, key_of};
use crate::report::ReadCacheReport;
use rustc_hash::FxHashSet;
use strata_meta::{TableId, TableMeta};

/// A data block of a table: the table and the block's ordinal in it.
type BlockId = (TableId, u64);

/// The cache and what it counted.
pub(super) struct ReadCache {
    /// The blocks held. The engine's block cache is a `quick_cache` pool; the same crate's
    /// single-threaded cache evicts by the same rule, so hits here are the engine's to expect.
    blocks: quick_cache::unsync::Cache<BlockId, ()>,
    /// Entries of a data block, from the block size and the entry size.
    entries_per_block: u64,
    /// The buffer's keys, and how much of the buffer and which flush they reflect: rebuilt
    /// after a flush, extended as the buffer grows.
    buffer_keys: FxHashSet<u64>,
    synced_len: usize,
    synced_flushes: u64,
    /// Counts since the current workload phase began.
    pub(super) counts: ReadCacheReport,
}

impl ReadCache {
    /// A cache of `bytes` over data blocks of `block_bytes` holding entries of `entry_bytes`.
    pub(super) fn new(bytes: u64, block_bytes: u64, entry_bytes: u64) -> Self {
        let blocks = (bytes / block_bytes.max(1)).max(1);
        ReadCache {
            blocks: quick_cache::unsync::Cache::new(blocks as usize),
            // The engine adds about 8 bytes per entry to key and value (sequence number, kind
            // and lengths).
            entries_per_block: (block_bytes / (entry_bytes + 8).max(1)).max(1),
            buffer_keys: FxHashSet::default(),
            synced_len: 0,
            synced_flushes: 0,
            counts: ReadCacheReport {
                capacity_bytes: bytes,
                ..ReadCacheReport::default()
            },
        }
    }

    /// Reads `block`: whether it was cached; it is afterwards.
    fn read(&mut self, block: BlockId) -> bool {
        if self.blocks.get(&block).is_some() {
            return true;
        }
        self.blocks.insert(block, ());
        false
    }
}

/// A run: its tables in key order, each with its sorted entries.
type Run<'a> = Vec<(&'a TableMeta, &'a [u64])>;

/// The position of the first entry at or after `key` in `run`, as (table index, entry index);
/// `None` past the run's end.
fn seek(run: &[(&TableMeta, &[u64])], key: u64) -> Option<(usize, usize)> {
    let t = run.partition_point(|(meta, _)| key_from_bytes(&meta.largest) < key);
    let (_, entries) = run.get(t)?;
    Some((t, entries.partition_point(|&e| key_of(e) < key)))
}

impl Simulator {
    /// Brings the buffer's key set up to date with the buffer.
    fn sync_buffer_keys(&mut self) {
        let Some(cache) = self.read_cache.as_mut() else {
            return;
        };
        if cache.synced_flushes != self.stats.flushes || cache.synced_len > self.buffer.len() {
            cache.buffer_keys.clear();
            cache.synced_len = 0;
            cache.synced_flushes = self.stats.flushes;
        }
        for &e in &self.buffer[cache.synced_len..] {
            cache.buffer_keys.insert(key_of(e));
        }
        cache.synced_len = self.buffer.len();
    }

    /// The runs of the tree, newest first, each as its tables with their entries.
    fn runs_with_entries(&self) -> impl Iterator<Item = Run<'_>> {
        self.version
            .levels()
            .iter()
            .flat_map(|level| level.runs())
            .map(|run| {
                run.tables()
                    .iter()
                    .map(|t| (&**t, self.tables.get(&t.id).map_or(&[][..], |a| &a[..])))
                    .collect()
            })
    }

    /// A point lookup of `key` through the simulated cache: answered by the buffer, or by the
    /// data block of the newest run holding the key (a tombstone too: the engine reads it to
    /// learn the key is gone). A key no run holds reads no data block here; the filters'
    /// false positives are the lookup cost's part, not this.
    pub(super) fn cache_lookup(&mut self, key: u64) {
        if self.read_cache.is_none() || self.sample_one_in > 1 {
            return;
        }
        self.sync_buffer_keys();
        let in_buffer = self
            .read_cache
            .as_ref()
            .is_some_and(|c| c.buffer_keys.contains(&key));
        let per_block = self.read_cache.as_ref().map_or(1, |c| c.entries_per_block);
        let block = if in_buffer {
            None
        } else {
            // Runs are listed one at a time: a lookup stops at the newest run holding its key.
            self.runs_with_entries().find_map(|run| {
                let (t, i) = seek(&run, key)?;
                let (meta, entries) = run[t];
                let found = entries.get(i).is_some_and(|&e| key_of(e) == key);
                found.then_some((meta.id, i as u64 / per_block))
            })
        };
        let Some(cache) = self.read_cache.as_mut() else {
            return;
        };
        cache.counts.lookups += 1;
        match block {
            None if in_buffer => cache.counts.lookups_in_buffer += 1,
            None => {}
            Some(b) => {
                cache.counts.lookup_blocks += 1;
                if cache.read(b) {
                    cache.counts.lookup_block_hits += 1;
                }
            }
        }
    }

    /// A scan of `entries` entries from `start` through the simulated cache: every run's data
    /// blocks from `start` to the scan's last key. The last key is the one `entries` places on
    /// in the run holding the most entries at `start` (nearly the merged stream's, since the
    /// largest run holds most keys); tombstones count as entries there.
    pub(super) fn cache_scan(&mut self, start: u64, entries: u64) {
        if self.read_cache.is_none() || self.sample_one_in > 1 {
            return;
        }
        let per_block = self.read_cache.as_ref().map_or(1, |c| c.entries_per_block);
        let runs: Vec<Run<'_>> = self.runs_with_entries().collect();
        let largest = runs
            .iter()
            .max_by_key(|run| run.iter().map(|(_, e)| e.len()).sum::<usize>());
        let end = largest.and_then(|run| {
            let (mut t, mut i) = seek(run, start)?;
            let mut left = entries.saturating_sub(1) as usize;
            loop {
                let (_, e) = run.get(t)?;
                if i + left < e.len() {
                    return Some(key_of(e[i + left]));
                }
                left -= e.len().saturating_sub(i);
                (t, i) = (t + 1, 0);
                if t == run.len() {
                    return run.last().and_then(|(_, e)| e.last()).map(|&e| key_of(e));
                }
            }
        });
        let mut blocks: Vec<BlockId> = Vec::new();
        if let Some(end) = end {
            for run in &runs {
                let Some((mut t, mut i)) = seek(run, start) else {
                    continue;
                };
                // Each block from the seek's to the one holding the last key at or before `end`.
                while let Some(&(meta, e)) = run.get(t) {
                    if e.get(i).is_none_or(|&x| key_of(x) > end) {
                        break;
                    }
                    let last = e.partition_point(|&x| key_of(x) <= end).max(i + 1) - 1;
                    blocks.extend(
                        (i as u64 / per_block..=last as u64 / per_block).map(|b| (meta.id, b)),
                    );
                    if last + 1 < e.len() {
                        break;
                    }
                    (t, i) = (t + 1, 0);
                }
            }
        }
        drop(runs);
        let Some(cache) = self.read_cache.as_mut() else {
            return;
        };
        cache.counts.scans += 1;
        cache.counts.scan_blocks += blocks.len() as u64;
        for b in blocks {
            if cache.read(b) {
                cache.counts.scan_block_hits += 1;
            }
        }
    }

    /// Starts the read counts over at a phase boundary (the cache keeps its blocks).
    pub(super) fn restart_read_counts(&mut self) {
        if let Some(cache) = self.read_cache.as_mut() {
            let capacity_bytes = cache.counts.capacity_bytes;
            cache.counts = ReadCacheReport {
                capacity_bytes,
                ..ReadCacheReport::default()
            };
        }
    }

    /// What the simulated cache counted in the last phase, when it ran on every key (not in
    /// scale mode, where a lookup's key is most likely not one of the kept ones).
    pub(super) fn read_cache_report(&self) -> Option<ReadCacheReport> {
        (self.sample_one_in == 1)
            .then(|| self.read_cache.as_ref().map(|c| c.counts.clone()))
            .flatten()
    }
}
