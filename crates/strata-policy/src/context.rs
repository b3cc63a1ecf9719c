//! What a policy may know besides the version: leases, workload statistics, the buffer, time.

use crate::leases::Leases;
use std::ops::Bound;
use strata_meta::{Bytes, KeyRange};

/// Counts and estimates of the workload so far, maintained by the engine or simulator. The engine
/// counts from zero at each open: a policy that keeps a count in its state (in the version)
/// must expect the counts it sees later to have restarted below it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadStats {
    /// Put operations (inserts and updates).
    pub puts: u64,
    /// Delete operations.
    pub deletes: u64,
    /// Point lookups.
    pub point_reads: u64,
    /// Range scans by the entries each returned, counted where a scan ends (the engine: when its
    /// iterator is dropped). Each policy draws its own line between short and long scans
    /// ([`ScanLengths::longer_than`]).
    pub scans: ScanLengths,
    /// User key+value bytes ingested.
    pub bytes_ingested: u64,
    /// Buffer flushes so far.
    pub flushes: u64,
    /// Estimated skew: the fraction α of a flush made of hot keys (Vertiorizon §5.3), if known.
    pub skew: Option<f64>,
    /// Time between the last two flushes, in nanoseconds, if known.
    pub flush_interval_nanos: Option<u64>,
    /// Measured time to rewrite one MiB during compaction, in nanoseconds, if known.
    pub rewrite_nanos_per_mib: Option<u64>,
    /// Sampled point-lookup times with and without a merge running (EcoTune's β).
    pub lookup_times: LookupTimes,
}

/// Point lookups the executor timed (a sample of them), split by whether a merge was running
/// when each started: what a merge costs the queries beside it (EcoTune's β). Executors that do
/// not time lookups (the simulator) leave it empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupTimes {
    /// Timed lookups that started while no merge ran.
    pub idle_lookups: u64,
    /// Their total time in nanoseconds.
    pub idle_nanos: u64,
    /// Timed lookups that started while at least one merge ran.
    pub merging_lookups: u64,
    /// Their total time in nanoseconds.
    pub merging_nanos: u64,
}

impl LookupTimes {
    /// Timed lookups each side needs before [`LookupTimes::merge_slowdown`] answers.
    pub const MIN_SAMPLES: u64 = 100;

    /// Query speed while merges run over query speed while none does (mean lookup time idle
    /// over mean lookup time beside a merge), capped at 1; `None` until each side has
    /// [`LookupTimes::MIN_SAMPLES`] timed lookups.
    pub fn merge_slowdown(&self) -> Option<f64> {
        if self.idle_lookups < Self::MIN_SAMPLES || self.merging_lookups < Self::MIN_SAMPLES {
            return None;
        }
        let idle = self.idle_nanos as f64 / self.idle_lookups as f64;
        let merging = self.merging_nanos as f64 / self.merging_lookups as f64;
        (merging > 0.0).then(|| (idle / merging).clamp(1e-3, 1.0))
    }

    /// What was timed since `earlier` (counters only grow).
    pub fn since(&self, earlier: &LookupTimes) -> LookupTimes {
        LookupTimes {
            idle_lookups: self.idle_lookups.saturating_sub(earlier.idle_lookups),
            idle_nanos: self.idle_nanos.saturating_sub(earlier.idle_nanos),
            merging_lookups: self.merging_lookups.saturating_sub(earlier.merging_lookups),
            merging_nanos: self.merging_nanos.saturating_sub(earlier.merging_nanos),
        }
    }
}

/// Scans with exact lengths counted one by one up to this many entries; longer ones by powers of
/// two.
const EXACT_SCAN_LENGTHS: u64 = 16;
/// Power-of-two buckets above the exact lengths: `[16, 32)`, `[32, 64)`, …, the last open (from
/// 2^19 entries; 32 buckets in all, as many as an array can derive `Default` for).
const SCAN_LENGTH_OCTAVES: usize = 16;

/// A histogram of scan lengths (entries returned): exact below 16 entries, by powers of two
/// above. Policies ask it how many scans were longer than their own threshold, so one count
/// serves EcoTune's "more than C + 1 keys" and any other definition of a long scan.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ScanLengths {
    counts: [u64; EXACT_SCAN_LENGTHS as usize + SCAN_LENGTH_OCTAVES],
}

impl Default for ScanLengths {
    fn default() -> Self {
        ScanLengths {
            counts: [0; EXACT_SCAN_LENGTHS as usize + SCAN_LENGTH_OCTAVES],
        }
    }
}

impl ScanLengths {
    /// The bucket of a scan that returned `entries`.
    pub fn bucket(entries: u64) -> usize {
        if entries < EXACT_SCAN_LENGTHS {
            return entries as usize;
        }
        // 16..32 is octave 0, 32..64 octave 1, ….
        let octave = (entries.ilog2() - EXACT_SCAN_LENGTHS.ilog2()) as usize;
        EXACT_SCAN_LENGTHS as usize + octave.min(SCAN_LENGTH_OCTAVES - 1)
    }

    /// The smallest length bucket `i` holds.
    fn bucket_start(i: usize) -> u64 {
        match i.checked_sub(EXACT_SCAN_LENGTHS as usize) {
            None => i as u64,
            Some(octave) => EXACT_SCAN_LENGTHS << octave,
        }
    }

    /// Counts one scan that returned `entries`.
    pub fn record(&mut self, entries: u64) {
        self.counts[Self::bucket(entries)] += 1;
    }

    /// Adds `count` scans to bucket `bucket` (an executor keeping its own counters per bucket;
    /// buckets past the last are ignored).
    pub fn add_to_bucket(&mut self, bucket: usize, count: u64) {
        if let Some(c) = self.counts.get_mut(bucket) {
            *c += count;
        }
    }

    /// Number of buckets, for executors that keep one counter per bucket.
    pub const BUCKETS: usize = EXACT_SCAN_LENGTHS as usize + SCAN_LENGTH_OCTAVES;

    /// All scans.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Entries a scan returned on average, each counted at its bucket's smallest length (exact
    /// below 16, within a factor of two above); 0 with no scans.
    pub fn mean(&self) -> f64 {
        let total = self.total();
        if total == 0 {
            return 0.0;
        }
        let entries: u64 = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, &c)| c * Self::bucket_start(i))
            .sum();
        entries as f64 / total as f64
    }

    /// Scans that returned more than `entries` entries: exact below 16; above, scans in the
    /// power-of-two bucket holding `entries + 1` count as longer when that bucket starts at
    /// `entries + 1`, and as not longer otherwise (the threshold rounds up to a bucket's start).
    pub fn longer_than(&self, entries: u64) -> u64 {
        let first = Self::bucket(entries.saturating_add(1));
        let first = if Self::bucket_start(first) > entries {
            first
        } else {
            first + 1
        };
        self.counts.iter().skip(first).sum()
    }
}

/// The buckets that hold scans, as `length: count` (`16-31: count` above the exact lengths).
impl std::fmt::Debug for ScanLengths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for (i, &count) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let start = Self::bucket_start(i);
            let label = if start < EXACT_SCAN_LENGTHS {
                start.to_string()
            } else if i + 1 == Self::BUCKETS {
                format!("{start}-")
            } else {
                format!("{start}-{}", Self::bucket_start(i + 1) - 1)
            };
            map.key(&format_args!("{label}")).value(&count);
        }
        map.finish()
    }
}

/// The buffer about to be flushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSummary {
    /// Smallest key in the buffer.
    pub smallest: Bytes,
    /// Largest key in the buffer.
    pub largest: Bytes,
    /// Entries written into the buffer (puts and tombstones), shadowed versions included.
    pub entries: u64,
    /// User key+value bytes written into the buffer, shadowed versions included.
    pub bytes: u64,
}

impl BufferSummary {
    /// The buffer's key range.
    pub fn key_range(&self) -> KeyRange {
        KeyRange::new(self.smallest.clone(), self.largest.clone())
    }
}

/// Everything a policy sees besides the version. Policies get no clock or randomness of their
/// own: time arrives here, as data, so a decision can be replayed exactly.
#[derive(Clone, Copy, Debug)]
pub struct PickContext<'a> {
    /// Leases of running jobs.
    pub leases: &'a Leases,
    /// Workload statistics.
    pub stats: &'a WorkloadStats,
    /// The buffer being flushed (set for [`crate::CompactionPolicy::plan_flush`] only).
    pub buffer: Option<&'a BufferSummary>,
    /// Current time in nanoseconds on the executor's clock (real or simulated).
    pub now_nanos: u64,
    /// The worker asking runs only [`crate::Priority::Urgent`] plans (a reserved worker): a
    /// policy with an urgent plan due returns it rather than the plan it would pick first. The
    /// executor does not start a normal plan on such a worker.
    pub urgent_only: bool,
}

impl<'a> PickContext<'a> {
    /// A context with the given leases and statistics, no buffer, at time 0.
    pub fn new(leases: &'a Leases, stats: &'a WorkloadStats) -> Self {
        PickContext {
            leases,
            stats,
            buffer: None,
            now_nanos: 0,
            urgent_only: false,
        }
    }

    /// The same context describing `buffer`.
    pub fn with_buffer(self, buffer: &'a BufferSummary) -> Self {
        PickContext {
            buffer: Some(buffer),
            ..self
        }
    }
}

/// The keys of a manual compaction (RocksDB's `CompactRange` begin and end): each end is
/// inclusive, exclusive or open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManualRange {
    /// Where the range starts.
    pub start: Bound<Bytes>,
    /// Where the range ends.
    pub end: Bound<Bytes>,
}

impl ManualRange {
    /// Every key.
    pub fn all() -> Self {
        ManualRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Whether a table spanning `[smallest, largest]` holds keys the range may contain.
    pub fn touches(&self, smallest: &[u8], largest: &[u8]) -> bool {
        !strata_meta::below_start(&self.start, largest)
            && !strata_meta::above_end(&self.end, smallest)
    }
}

#[cfg(test)]
mod tests {
    use super::{LookupTimes, ScanLengths};

    #[test]
    fn scans_longer_than_a_threshold_are_exact_below_16_entries() {
        let mut s = ScanLengths::default();
        for entries in [0, 1, 4, 4, 5, 15, 16, 31, 32, 101, 1 << 40] {
            s.record(entries);
        }
        assert_eq!(s.total(), 11);
        // EcoTune with C = 3: longer than C + 1 = 4 entries.
        assert_eq!(s.longer_than(4), 7);
        assert_eq!(s.longer_than(0), 10);
        assert_eq!(s.longer_than(15), 5);
        // 32 starts a bucket: scans of 32..64 entries and more.
        assert_eq!(s.longer_than(31), 3);
        // 100 rounds up to the bucket starting at 128: the scan of 101 does not count.
        assert_eq!(s.longer_than(100), 1);
        assert_eq!(s.longer_than(u64::MAX), 0);
    }

    #[test]
    fn merge_slowdown_is_the_ratio_of_mean_lookup_times_once_both_sides_are_sampled() {
        let mut t = LookupTimes {
            idle_lookups: 200,
            idle_nanos: 200 * 1_000,
            merging_lookups: 99,
            merging_nanos: 99 * 4_000,
        };
        assert_eq!(t.merge_slowdown(), None, "too few lookups beside merges");
        t.merging_lookups = 100;
        t.merging_nanos = 100 * 4_000;
        assert_eq!(t.merge_slowdown(), Some(0.25));
        // Lookups that ran faster beside a merge (noise) do not make β above 1.
        t.merging_nanos = 100 * 500;
        assert_eq!(t.merge_slowdown(), Some(1.0));
        let earlier = LookupTimes {
            idle_lookups: 100,
            idle_nanos: 100 * 1_000,
            merging_lookups: 0,
            merging_nanos: 0,
        };
        assert_eq!(t.since(&earlier).idle_lookups, 100);
        assert_eq!(t.since(&t), LookupTimes::default());
    }

    #[test]
    fn buckets_cover_every_length() {
        assert_eq!(ScanLengths::bucket(15), 15);
        assert_eq!(ScanLengths::bucket(16), 16);
        assert_eq!(ScanLengths::bucket(31), 16);
        assert_eq!(ScanLengths::bucket(32), 17);
        assert_eq!(ScanLengths::bucket(u64::MAX), ScanLengths::BUCKETS - 1);
        let mut s = ScanLengths::default();
        s.add_to_bucket(3, 2);
        s.add_to_bucket(ScanLengths::BUCKETS, 9);
        assert_eq!((s.total(), s.longer_than(2)), (2, 2));
        s.record(40);
        s.record(u64::MAX);
        let last = ScanLengths::bucket_start(ScanLengths::BUCKETS - 1);
        assert_eq!(format!("{s:?}"), format!("{{3: 2, 32-63: 1, {last}-: 1}}"));
    }
}
