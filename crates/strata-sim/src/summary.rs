//! Key-set summaries for scale mode (issue 17, `docs/scale.md`): a table's keys as per-partition
//! entry counts and distinct-count sketches, so that a merge's deduplicated size can be
//! estimated without the keys. Memory per table depends on the partitions it touches, not on
//! its entries.
//!
//! Each partition holds a HyperLogLog of [`REGISTERS`] one-byte registers: alone, a standard
//! error of about 1.04/√64 = 13%; a table spread over many partitions sums independent
//! estimates, so its total errs far less (256 partitions: about 0.8%).

/// Partitions of the 64-bit key space.
pub const PARTITIONS: usize = 256;

/// Registers of one partition's sketch.
pub const REGISTERS: usize = 64;

/// The partition of a simulator key (63 bits, [`crate::key_of`]): its top 8 bits.
pub fn partition_of(key: u64) -> usize {
    ((key >> 55) & (PARTITIONS as u64 - 1)) as usize
}

/// A HyperLogLog over [`REGISTERS`] registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sketch([u8; REGISTERS]);

impl Default for Sketch {
    fn default() -> Self {
        Sketch([0; REGISTERS])
    }
}

/// A 64-bit mix of `key` (splitmix64's finalizer): HyperLogLog needs hash bits that look
/// uniform, and the simulator's keys are small sequential numbers as often as random ones.
fn mix(key: u64) -> u64 {
    let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Sketch {
    /// Adds a key.
    pub fn add(&mut self, key: u64) {
        let h = mix(key);
        let register = (h as usize) & (REGISTERS - 1);
        // The rank of the first 1 among the remaining bits.
        let rank = ((h >> 6) | (1 << 57)).trailing_zeros() as u8 + 1;
        if rank > self.0[register] {
            self.0[register] = rank;
        }
    }

    /// Adds every key `other` holds (the union of the two sets).
    pub fn merge(&mut self, other: &Sketch) {
        for (a, &b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(b);
        }
    }

    /// The estimated number of distinct keys added.
    pub fn estimate(&self) -> f64 {
        let m = REGISTERS as f64;
        let alpha = 0.709; // for 64 registers
        let sum: f64 = self.0.iter().map(|&r| 2f64.powi(-i32::from(r))).sum();
        let raw = alpha * m * m / sum;
        let zeros = self.0.iter().filter(|&&r| r == 0).count();
        if raw <= 2.5 * m && zeros > 0 {
            // Small sets: linear counting is the better estimate.
            m * (m / zeros as f64).ln()
        } else {
            raw
        }
    }
}

/// One partition of a table's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSummary {
    /// Which partition.
    pub partition: usize,
    /// Entries the table holds in it.
    pub entries: u64,
    /// Of those, tombstones.
    pub tombstones: u64,
    /// The distinct keys.
    pub sketch: Sketch,
}

/// A table's keys, summarized per partition (ascending).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeySummary {
    /// The partitions the table touches.
    pub parts: Vec<PartitionSummary>,
}

impl KeySummary {
    /// The summary of `keys` (ascending, each a simulator key: 63-bit key and a tombstone bit;
    /// see [`crate::key_of`]).
    pub fn of_keys(keys: &[u64]) -> KeySummary {
        let mut parts: Vec<PartitionSummary> = Vec::new();
        for &entry in keys {
            let key = crate::key_of(entry);
            let p = partition_of(key);
            if parts.last().is_none_or(|last| last.partition != p) {
                parts.push(PartitionSummary {
                    partition: p,
                    entries: 0,
                    tombstones: 0,
                    sketch: Sketch::default(),
                });
            }
            let part = parts.last_mut().expect("pushed above");
            part.entries += 1;
            part.tombstones += u64::from(crate::is_tombstone(entry));
            part.sketch.add(key);
        }
        KeySummary { parts }
    }

    /// Entries summarized.
    pub fn entries(&self) -> u64 {
        self.parts.iter().map(|p| p.entries).sum()
    }

    /// The estimated distinct keys of the union of `summaries` (a merge's output before
    /// tombstones drop), partition by partition. Not capped at the entries: a cap cuts off the
    /// upward errors only and biased a table of distinct keys 4% low.
    pub fn union_distinct(summaries: &[&KeySummary]) -> f64 {
        let mut sketches: Vec<Option<Sketch>> = vec![None; PARTITIONS];
        for s in summaries {
            for part in &s.parts {
                match &mut sketches[part.partition] {
                    Some(sketch) => sketch.merge(&part.sketch),
                    slot => *slot = Some(part.sketch.clone()),
                }
            }
        }
        sketches.iter().flatten().map(Sketch::estimate).sum()
    }

    /// Bytes the summary takes.
    pub fn memory_bytes(&self) -> usize {
        self.parts.len() * std::mem::size_of::<PartitionSummary>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_keys(n: usize, domain: u64, seed: u64) -> Vec<u64> {
        let mut rng = seed;
        let mut keys: Vec<u64> = (0..n)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Entries spread over the whole 64 bits: keys over the 63-bit key space.
                (rng % domain) * (u64::MAX / domain)
            })
            .collect();
        keys.sort_unstable();
        keys
    }

    fn distinct(keys: &[u64]) -> usize {
        let mut k = keys.to_vec();
        k.dedup();
        k.len()
    }

    #[test]
    fn one_sketch_counts_within_its_error() {
        for n in [10u64, 100, 1_000, 100_000] {
            let mut s = Sketch::default();
            for k in 0..n {
                s.add(k);
            }
            let e = s.estimate();
            // 64 registers: 13% standard error; allow three of them.
            assert!((e - n as f64).abs() <= 0.4 * n as f64 + 2.0, "{n}: {e}");
        }
    }

    #[test]
    fn a_table_over_many_partitions_counts_within_a_few_percent() {
        let keys = random_keys(1_000_000, 1 << 40, 7);
        let summary = KeySummary::of_keys(&keys);
        assert_eq!(summary.entries(), 1_000_000);
        assert_eq!(summary.parts.len(), PARTITIONS);
        let e = KeySummary::union_distinct(&[&summary]);
        let d = distinct(&keys) as f64;
        assert!((e / d - 1.0).abs() < 0.03, "estimate {e}, distinct {d}");
        // 256 partitions of ~100 bytes: independent of the million entries.
        assert!(
            summary.memory_bytes() < 64 << 10,
            "{}",
            summary.memory_bytes()
        );
    }

    #[test]
    fn a_merge_of_overlapping_updates_estimates_its_deduplicated_size() {
        // Two tables of updates over the same 300,000 keys: a merge keeps each key once.
        let a = random_keys(400_000, 300_000, 1);
        let b = random_keys(400_000, 300_000, 2);
        let (sa, sb) = (KeySummary::of_keys(&a), KeySummary::of_keys(&b));
        let mut both = a.clone();
        both.extend_from_slice(&b);
        both.sort_unstable();
        let d = distinct(&both) as f64;
        let e = KeySummary::union_distinct(&[&sa, &sb]);
        assert!((e / d - 1.0).abs() < 0.03, "estimate {e}, distinct {d}");
        // Disjoint tables: the sum.
        let c = random_keys(50_000, 1 << 40, 3);
        let sc = KeySummary::of_keys(&c);
        let e = KeySummary::union_distinct(&[&sa, &sc]);
        let d = (distinct(&a) + distinct(&c)) as f64;
        assert!((e / d - 1.0).abs() < 0.03, "estimate {e}, distinct {d}");
    }
}
