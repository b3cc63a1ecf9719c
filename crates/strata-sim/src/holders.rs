//! How many tables of the simulated tree hold each key: the exact tombstone rule's index for
//! trees of thousands of runs.
//!
//! The exact rule keeps a tombstone while a table older than the merge's output holds its key.
//! Asking every older run costs one search per run and tombstone: with Min-Max's 11,000 buckets
//! at 10^8 entries that is 10^12 searches. Counting the holders of every key once, as tables
//! come and go, answers the same question from the other side: an older table holds the key when
//! more tables hold it than the merge's inputs and the (few) newer tables do.

use rustc_hash::FxHashMap;

use crate::keys::key_of;

/// Per key, the number of the tree's tables whose key set holds it.
///
/// FxHash rather than std's SipHash: the keys are the simulator's own integers (no adversary),
/// and this map is touched once per entry written.
#[derive(Debug, Default)]
pub(crate) struct KeyHolders {
    counts: FxHashMap<u64, u32>,
}

impl KeyHolders {
    /// The index of `tables`' key sets.
    pub(crate) fn of<'a>(tables: impl IntoIterator<Item = &'a [u64]>) -> Self {
        let mut holders = KeyHolders::default();
        for entries in tables {
            holders.add(entries);
        }
        holders
    }

    /// Counts a new table's entries (one per key).
    pub(crate) fn add(&mut self, entries: &[u64]) {
        self.counts.reserve(entries.len());
        for &e in entries {
            *self.counts.entry(key_of(e)).or_insert(0) += 1;
        }
    }

    /// Forgets a table's entries; keys no table holds leave the map.
    pub(crate) fn remove(&mut self, entries: &[u64]) {
        for &e in entries {
            let key = key_of(e);
            if let Some(n) = self.counts.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&key);
                }
            }
        }
    }

    /// Keeps only the keys `keep` says (scale mode's thinning: a key is kept in every table or
    /// in none, so its count is unchanged or gone).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        self.counts.retain(|&k, _| keep(k));
    }

    /// Tables holding `key`.
    pub(crate) fn count(&self, key: u64) -> u32 {
        self.counts.get(&key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{put, tombstone};

    #[test]
    fn counts_follow_tables_in_and_out() {
        let a = [put(1), tombstone(2), put(5)];
        let b = [put(2), put(5)];
        let mut holders = KeyHolders::of([&a[..], &b[..]]);
        assert_eq!(
            (holders.count(1), holders.count(2), holders.count(5)),
            (1, 2, 2)
        );
        holders.remove(&a);
        assert_eq!(
            (holders.count(1), holders.count(2), holders.count(5)),
            (0, 1, 1)
        );
        assert!(
            !holders.counts.contains_key(&1),
            "a key no table holds leaves"
        );
        holders.retain(|k| k != 5);
        assert_eq!((holders.count(2), holders.count(5)), (1, 0));
    }
}
