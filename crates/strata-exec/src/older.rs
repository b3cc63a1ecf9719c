//! What lies below a merge's output: the tombstone rule.

use std::collections::HashSet;
use std::sync::Arc;
use strata_meta::{Run, RunId, TableId, TableMeta, Version};
use strata_policy::OutputRun;

/// The tables older than a merge's output, outside the merge: the runs after the output run in
/// its level and every run of deeper levels, each as its tables in key order.
///
/// A tombstone the merge writes may be dropped only when no such table can hold its key: else the
/// older value would reappear. Both executors ask [`OlderTables::covering`]; the engine (like
/// RocksDB) drops a tombstone when no older table's key range covers it, and the simulator can in
/// addition look into the covering tables' key sets. It also keeps the runs on the other side,
/// newer than the output ([`OlderTables::newer_covering`]): a simulator that counts every table
/// holding a key answers "does an older table hold it" by subtracting the merge's own tables and
/// the newer ones, which is cheaper when thousands of runs lie below.
#[derive(Clone, Debug, Default)]
pub struct OlderTables {
    /// The older runs, shared with the version (a merge at the top of a tree of thousands of
    /// tables copies none of them).
    runs: Vec<Arc<Run>>,
    /// The runs newer than the output: shallower levels', and the output level's before it.
    newer: Vec<Arc<Run>>,
    /// The merge's own tables, which do not count.
    inputs: HashSet<TableId>,
}

impl OlderTables {
    /// The tables older than an output placed in run `run` of `level` of `version`, leaving out
    /// `inputs` (the merge's own tables). A new run's place is
    /// [`strata_meta::Level::new_run_position`]'s.
    pub fn below(version: &Version, level: usize, run: OutputRun, inputs: &[TableId]) -> Self {
        let inputs: HashSet<TableId> = inputs.iter().copied().collect();
        let output_level = version.level(level);
        let first_older = match run {
            OutputRun::Existing(id) => output_level.position(id).map_or(0, |p| p + 1),
            OutputRun::New => {
                // The runs of this level the merge takes tables from, found by the inputs'
                // locations: asking each run (thousands in a tree of buckets) at every merge made
                // it quadratic.
                let losing: HashSet<RunId> = inputs
                    .iter()
                    .filter_map(|&t| version.table_location(t))
                    .filter(|loc| loc.level == level)
                    .map(|loc| loc.run)
                    .collect();
                output_level.new_run_position(|run| losing.contains(&run))
            }
        };
        let mut runs = Vec::new();
        let mut newer = Vec::new();
        for (l, lvl) in version.levels().iter().enumerate() {
            let split = match l.cmp(&level) {
                std::cmp::Ordering::Less => lvl.runs().len(),
                std::cmp::Ordering::Equal => first_older,
                std::cmp::Ordering::Greater => 0,
            };
            newer.extend(lvl.runs()[..split].iter().cloned());
            runs.extend(lvl.runs()[split..].iter().cloned());
        }
        OlderTables {
            runs,
            newer,
            inputs,
        }
    }

    /// The older tables whose key range covers `key`: at most one per run. A run's tables are
    /// disjoint, so when the one covering `key` is an input, no other table of that run does.
    pub fn covering<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
        self.covering_in(&self.runs, key)
    }

    /// The tables newer than the output, outside the merge, whose key range covers `key`: at
    /// most one per run.
    pub fn newer_covering<'a>(
        &'a self,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
        self.covering_in(&self.newer, key)
    }

    /// Runs below the output, and runs above it.
    pub fn run_counts(&self) -> (usize, usize) {
        (self.runs.len(), self.newer.len())
    }

    fn covering_in<'a>(
        &'a self,
        runs: &'a [Arc<Run>],
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
        runs.iter().filter_map(move |run| {
            run.table_covering(key)
                .filter(|t| !self.inputs.contains(&t.id))
        })
    }

    /// Whether an older table's key range covers `key`.
    pub fn may_hold(&self, key: &[u8]) -> bool {
        self.covering(key).next().is_some()
    }

    /// Whether an older table's key range overlaps `[start, end]` (a range tombstone's keys,
    /// its end counted in: a table starting there is kept to the conservative side).
    pub fn may_hold_range(&self, start: &[u8], end: &[u8]) -> bool {
        self.runs.iter().any(|run| {
            let tables = run.tables();
            let first = tables.partition_point(|t| t.largest.as_ref() < start);
            tables[first..]
                .iter()
                .take_while(|t| t.smallest.as_ref() <= end)
                .any(|t| !self.inputs.contains(&t.id))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_meta::VersionEdit;

    fn version() -> Version {
        // L1: run 3 (newest) [m, p], run 2 [a, c]; L2: run 1 [a, z].
        let mut edit = VersionEdit::new();
        edit.create_run(2, RunId(1))
            .add_table(2, RunId(1), TableMeta::new(1, "a", "z", 10));
        let v = Version::new().apply(&edit).unwrap();
        let mut edit = VersionEdit::new();
        edit.create_run(1, RunId(2))
            .add_table(1, RunId(2), TableMeta::new(2, "a", "c", 10));
        let v = v.apply(&edit).unwrap();
        let mut edit = VersionEdit::new();
        edit.create_run(1, RunId(3))
            .add_table(1, RunId(3), TableMeta::new(3, "m", "p", 10));
        v.apply(&edit).unwrap()
    }

    fn ids(older: &OlderTables, key: &str) -> Vec<u64> {
        older.covering(key.as_bytes()).map(|t| t.id.0).collect()
    }

    #[test]
    fn a_range_is_held_below_when_an_older_table_outside_the_merge_overlaps_it() {
        let v = version();
        // Merging L1's run 3 into L1's run 2 ([a, c]): L2's [a, z] lies below everything.
        let older = OlderTables::below(&v, 1, OutputRun::Existing(RunId(2)), &[TableId(3)]);
        assert!(older.may_hold_range(b"q", b"r"));
        // Merging L2's only table: nothing lies below it.
        let bottom = OlderTables::below(&v, 2, OutputRun::Existing(RunId(1)), &[TableId(1)]);
        assert!(!bottom.may_hold_range(b"a", b"z"));
        // Into run 3's place in L1 with run 2 and L2 not inputs: [d, e] meets only L2.
        let above = OlderTables::below(&v, 1, OutputRun::Existing(RunId(3)), &[TableId(1)]);
        assert!(above.may_hold_range(b"b", b"b"), "run 2 holds [a, c]");
        assert!(
            !above.may_hold_range(b"d", b"e"),
            "L2's only table is an input"
        );
    }

    #[test]
    fn runs_newer_than_the_output_do_not_count() {
        let v = version();
        // Merging run 2 (the older L1 run) into a new run: it takes run 2's place, so run 3,
        // newer, is not below it; L2 is.
        let older = OlderTables::below(&v, 1, OutputRun::New, &[TableId(2)]);
        assert_eq!(ids(&older, "n"), vec![1]);
        assert_eq!(ids(&older, "b"), vec![1]);
        // Below: run 2 itself (its tables are inputs, which never count) and L2's run.
        assert_eq!(older.run_counts(), (2, 1));
        let newer: Vec<u64> = older.newer_covering(b"n").map(|t| t.id.0).collect();
        assert_eq!(newer, vec![3]);
        assert_eq!(older.newer_covering(b"b").count(), 0);
        // A new run with no input in L1 goes to the front: both L1 runs are below it.
        let older = OlderTables::below(&v, 1, OutputRun::New, &[]);
        assert_eq!(ids(&older, "n"), vec![3, 1]);
        // Merging into run 3: run 2 and L2 are below.
        let older = OlderTables::below(&v, 1, OutputRun::Existing(RunId(3)), &[TableId(3)]);
        assert_eq!(ids(&older, "b"), vec![2, 1]);
        assert!(!older.may_hold(b"zz"));
        // An input of an older run does not count: merging run 2 into run 3 too.
        let older = OlderTables::below(
            &v,
            1,
            OutputRun::Existing(RunId(3)),
            &[TableId(3), TableId(2)],
        );
        assert_eq!(ids(&older, "b"), vec![1]);
        // Into the last level: nothing is below; both L1 runs are above, and so is the output
        // run itself (its tables outside the merge are not older than the output).
        let older = OlderTables::below(&v, 2, OutputRun::Existing(RunId(1)), &[TableId(1)]);
        assert!(!older.may_hold(b"b"));
        assert_eq!(older.run_counts(), (0, 3));
        let newer: Vec<u64> = older.newer_covering(b"b").map(|t| t.id.0).collect();
        assert_eq!(newer, vec![2]);
    }
}
