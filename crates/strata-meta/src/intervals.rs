//! An interval index over the runs of a level: which runs' key ranges hold a key, and which
//! start after it, without visiting every run. A level of many small runs whose ranges barely
//! overlap (Min-Max buckets: the paper's IB-tree) then costs a lookup or a scan O(log n + k)
//! runs instead of n.

use crate::version::Level;
use bytes::Bytes;

/// The runs of one level ordered by smallest key, with a max-tree of largest keys over that
/// order: a stabbing query visits only subtrees that can hold an interval reaching the key.
/// Built from the level (rebuilt when the version changes); run numbers are positions in
/// [`Level::runs`], newest first.
#[derive(Clone, Debug, Default)]
pub struct RunIntervals {
    /// Run positions, by smallest key (ties by position).
    order: Vec<u32>,
    /// Smallest key of each run, in `order`.
    smallest: Vec<Bytes>,
    /// Largest key of each run, in `order`.
    largest: Vec<Bytes>,
    /// Implicit binary tree over `order` (leaves from `leaves`): where in `largest` the largest
    /// key below each node is; [`NO_RUN`] for padding. Positions rather than key copies: a
    /// version of thousands of runs (Min-Max buckets) builds one index per install, and each copy
    /// of a key is an atomic reference count to take and later drop.
    max_largest: Vec<u32>,
    leaves: usize,
}

/// A tree node with no run below it.
const NO_RUN: u32 = u32::MAX;

impl RunIntervals {
    /// The index of `level`'s runs (runs without tables are left out).
    pub fn new(level: &Level) -> Self {
        let mut runs: Vec<(Bytes, Bytes, u32)> = level
            .runs()
            .iter()
            .enumerate()
            .filter_map(|(i, run)| {
                let first = run.tables().first()?;
                let last = run.tables().last()?;
                Some((first.smallest.clone(), last.largest.clone(), i as u32))
            })
            .collect();
        runs.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
        let mut order = Vec::with_capacity(runs.len());
        let mut smallest = Vec::with_capacity(runs.len());
        let mut largest = Vec::with_capacity(runs.len());
        for (lo, hi, run) in runs {
            order.push(run);
            smallest.push(lo);
            largest.push(hi);
        }
        let leaves = order.len().next_power_of_two().max(1);
        let mut max_largest = vec![NO_RUN; 2 * leaves];
        for (i, slot) in max_largest[leaves..leaves + order.len()]
            .iter_mut()
            .enumerate()
        {
            *slot = i as u32;
        }
        for node in (1..leaves).rev() {
            let (left, right) = (max_largest[2 * node], max_largest[2 * node + 1]);
            max_largest[node] = match (left, right) {
                (NO_RUN, other) | (other, NO_RUN) => other,
                _ if largest[right as usize] > largest[left as usize] => right,
                _ => left,
            };
        }
        RunIntervals {
            order,
            smallest,
            largest,
            max_largest,
            leaves,
        }
    }

    /// Runs indexed.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no run is indexed.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Adds to `out` the runs whose [smallest, largest] holds `key`, newest first.
    pub fn holding(&self, key: &[u8], out: &mut Vec<usize>) {
        let start = out.len();
        // Only runs starting at or before the key can hold it.
        let end = self.smallest.partition_point(|s| s.as_ref() <= key);
        if end == 0 {
            return;
        }
        if self.order.len() == 1 {
            // One run (a leveled level): no tree to walk.
            if self.largest[0].as_ref() >= key {
                out.push(self.order[0] as usize);
            }
            return;
        }
        // Depth-first over the tree, on the stack: it holds at most one entry per tree level
        // plus one, and a lookup runs this once per level (no allocation per lookup).
        let mut stack = [(0usize, 0usize, 0usize); 66];
        stack[0] = (1, 0, self.leaves);
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let (node, lo, hi) = stack[top];
            let reach = self.max_largest[node];
            if lo >= end || reach == NO_RUN || self.largest[reach as usize].as_ref() < key {
                continue;
            }
            if hi - lo == 1 {
                out.push(self.order[lo] as usize);
                continue;
            }
            let mid = (lo + hi) / 2;
            stack[top] = (2 * node + 1, mid, hi);
            stack[top + 1] = (2 * node, lo, mid);
            top += 2;
        }
        out[start..].sort_unstable();
    }

    /// Where the runs starting after `key` begin in [`RunIntervals::starting_at`]'s order; 0
    /// for no key (every run starts after an unbounded start).
    pub fn first_starting_after(&self, key: Option<&[u8]>) -> usize {
        key.map_or(0, |k| self.smallest.partition_point(|s| s.as_ref() <= k))
    }

    /// The `i`-th run by smallest key: its smallest key and its position in the level.
    pub fn starting_at(&self, i: usize) -> Option<(&Bytes, usize)> {
        Some((self.smallest.get(i)?, *self.order.get(i)? as usize))
    }

    /// Bytes the index takes beyond the keys it shares with the version's tables.
    pub fn memory_bytes(&self) -> usize {
        let key_refs = std::mem::size_of::<Bytes>();
        self.order.len() * (4 + 2 * key_refs) + self.max_largest.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TableMeta, Version, VersionEdit};

    /// A level-1 of one run per (smallest, largest), newest first as listed.
    fn level(ranges: &[(u32, u32)]) -> Level {
        let mut edit = VersionEdit::new();
        // Created oldest first, so the first range listed ends up newest.
        for (i, &(lo, hi)) in ranges.iter().enumerate().rev() {
            let run = crate::RunId(i as u64 + 1);
            edit.new_runs.push(crate::NewRun { level: 1, run });
            edit.added.push(crate::AddedTable {
                level: 1,
                run,
                table: std::sync::Arc::new(TableMeta::new(
                    i as u64 + 1,
                    format!("{lo:06}"),
                    format!("{hi:06}"),
                    10,
                )),
            });
        }
        Version::new().apply(&edit).unwrap().level(1).clone()
    }

    #[test]
    fn holding_finds_exactly_the_runs_whose_range_holds_the_key() {
        let mut rng = 12345u64;
        let mut ranges = Vec::new();
        for i in 0..300u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // Nearly sorted buckets, some wide.
            let lo = i * 10 + (rng % 40) as u32;
            let width = if rng.is_multiple_of(17) {
                900
            } else {
                (rng % 30) as u32
            };
            ranges.push((lo, lo + width));
        }
        let level = level(&ranges);
        let index = RunIntervals::new(&level);
        assert_eq!(index.len(), 300);
        let runs = level.runs();
        for key in (0..4_000u32).step_by(7) {
            let k = format!("{key:06}");
            let mut found = Vec::new();
            index.holding(k.as_bytes(), &mut found);
            let brute: Vec<usize> = (0..runs.len())
                .filter(|&i| {
                    let r = runs[i].key_range();
                    r.smallest.as_ref() <= k.as_bytes() && k.as_bytes() <= r.largest.as_ref()
                })
                .collect();
            assert_eq!(found, brute, "key {k}");
        }
        // Runs starting after a key, in smallest-key order.
        let after = index.first_starting_after(Some(b"001000"));
        let (first, _) = index.starting_at(after).unwrap();
        assert!(first.as_ref() > &b"001000"[..]);
        assert!(index.starting_at(after - 1).unwrap().0.as_ref() <= &b"001000"[..]);
        assert_eq!(index.first_starting_after(None), 0);
    }
}
