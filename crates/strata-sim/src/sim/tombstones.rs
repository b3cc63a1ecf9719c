//! Whether a merge must keep a tombstone: only while a table older than its output may hold the
//! key, decided by key ranges, by the key sets, or by counting the tables that hold each key.

use super::config::KeyFilter;
use super::Simulator;
use crate::holders::KeyHolders;
use crate::keys::{is_tombstone, key_bytes, key_of, tombstone};
use std::sync::Arc;
use strata_exec::OlderTables;
use strata_meta::{table_covering, TableMeta};

/// How one merge decides whether a tombstone must be kept ([`Simulator::tombstone_needed`]).
pub(super) struct TombstoneRule<'a> {
    /// The tables outside the merge, below and above its output.
    older: OlderTables,
    /// When counting holders ([`SimConfig::tombstone_index_runs`]): the merge's input tables,
    /// by run.
    counted_inputs: Option<&'a [Vec<Arc<TableMeta>>]>,
}

impl Simulator {
    /// How a merge whose output `older` places, reading `inputs` (its tables by run, each run's
    /// in key order), decides on tombstones: counted when
    /// [`SimConfig::tombstone_index_runs`] says so, else by searching the older runs.
    pub(super) fn tombstone_rule<'a>(
        &self,
        older: OlderTables,
        inputs: &'a [Vec<Arc<TableMeta>>],
    ) -> TombstoneRule<'a> {
        let (below, above) = older.run_counts();
        let counted = self.cfg.exact_tombstone_drop
            && below >= self.cfg.tombstone_index_runs
            && below > above + inputs.len();
        TombstoneRule {
            older,
            counted_inputs: counted.then_some(inputs),
        }
    }

    /// Whether a tombstone for `key` must be kept: an older table outside the merge covers the key
    /// (and, with exact tombstone dropping, holds it).
    pub(super) fn tombstone_needed(&self, rule: &TombstoneRule, key: u64) -> bool {
        let kb = key_bytes(key);
        if !self.cfg.exact_tombstone_drop {
            return rule.older.covering(&kb).next().is_some();
        }
        let Some(inputs) = rule.counted_inputs else {
            return rule.older.covering(&kb).any(|t| self.holds(t, key));
        };
        // Every table holding the key is older than the output, newer, or an input.
        let holders = self
            .holders
            .get_or_init(|| KeyHolders::of(self.tables.values().map(|a| &a[..])))
            .count(key);
        if holders == 0 {
            return false;
        }
        let in_inputs = inputs.iter().filter_map(|run| table_covering(run, &kb));
        let not_older = in_inputs
            .chain(rule.older.newer_covering(&kb))
            .filter(|t| self.holds(t, key))
            .count();
        holders as usize > not_older
    }

    /// A merge's output `merged` after the compaction `filter` (`SimConfig::compaction_filter`):
    /// a put it removes becomes a tombstone where an older table may hold its key
    /// ([`Simulator::tombstone_needed`]), and goes where none may.
    pub(super) fn filter_values(
        &self,
        merged: Vec<u64>,
        filter: &dyn KeyFilter,
        rule: &TombstoneRule,
    ) -> Vec<u64> {
        merged
            .into_iter()
            .filter_map(|e| {
                let key = key_of(e);
                if is_tombstone(e) || !filter.removes(key) {
                    Some(e)
                } else {
                    self.tombstone_needed(rule, key).then(|| tombstone(key))
                }
            })
            .collect()
    }

    /// Whether `table`'s key set holds `key`.
    fn holds(&self, table: &TableMeta, key: u64) -> bool {
        self.tables.get(&table.id).is_some_and(|arr| {
            let j = arr.partition_point(|&e| key_of(e) < key);
            arr.get(j).is_some_and(|&e| key_of(e) == key)
        })
    }
}
