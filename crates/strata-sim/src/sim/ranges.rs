//! Range deletions in the simulator: the buffer keeps them beside its entries, tables beside
//! their key sets, and merges apply the engine's rules (`strata_exec::range_del`): an entry
//! goes when a range tombstone newer than it covers it, and a tombstone goes once nothing below
//! the output may hold its keys.
//!
//! The simulator's entries carry no sequence numbers, so "newer" is recency: a tombstone in
//! the buffer covers the entries that arrived before it, and one in a run covers the entries of
//! older runs. That is the engine's sequence-number rule, because a merge or flush drops every
//! entry its tombstones cover: an entry sharing a table with a tombstone over its key was
//! written after it. Tombstones keep their sequence numbers, which decide which of a piece's
//! tombstones a merge keeps, as in the engine.

use super::{SimError, Simulator};
use crate::keys::key_bytes;
use std::sync::Arc;
use strata_exec::range_del::{Fragments, RangeTombstone};
use strata_exec::OlderTables;
use strata_meta::{Bytes, TableMeta};

/// The range tombstones of a merge's inputs, by run (newest first), and what they cover.
pub(super) struct InputRanges {
    /// Every input tombstone, its sequence number replaced by the recency of its run: the
    /// number of runs older than it plus one, so a larger number is a newer run.
    by_recency: Fragments<Bytes>,
    /// Every input tombstone as it is.
    all: Vec<RangeTombstone<Bytes>>,
    runs: u64,
}

impl InputRanges {
    /// The tombstones of `runs` (each a list of tombstones), newest run first; `None` when
    /// there are none.
    pub(super) fn of(runs: Vec<Vec<RangeTombstone<Bytes>>>) -> Option<InputRanges> {
        if runs.iter().all(Vec::is_empty) {
            return None;
        }
        let count = runs.len() as u64;
        let by_recency = Fragments::new(runs.iter().enumerate().flat_map(|(i, run)| {
            run.iter().map(move |t| RangeTombstone {
                seq: count - i as u64,
                ..t.clone()
            })
        }));
        Some(InputRanges {
            by_recency,
            all: runs.into_iter().flatten().collect(),
            runs: count,
        })
    }

    /// Whether an entry of `key` in run `run` (0 = newest) is covered by a tombstone of a newer
    /// run.
    pub(super) fn covers(&self, run: usize, key: u64) -> bool {
        let recency = self.runs - run as u64;
        self.by_recency
            .covering(&key_bytes(key)[..], u64::MAX)
            .is_some_and(|newest| newest > recency)
    }

    /// `entries` of run `run` less those a newer run's tombstones cover.
    pub(super) fn uncovered(&self, run: usize, entries: &[u64]) -> Arc<[u64]> {
        entries
            .iter()
            .copied()
            .filter(|&e| !self.covers(run, crate::keys::key_of(e)))
            .collect()
    }

    /// What the output keeps of the tombstones: the newest of each piece (the simulator keeps
    /// no snapshots), less those no table below the output may hold a key of and those a TTL
    /// expired (at or below `expired_through`).
    pub(super) fn to_write(&self, older: &OlderTables, expired_through: u64) -> Fragments<Bytes> {
        Fragments::new(self.all.iter().cloned()).compacted(&[], expired_through, |start, end| {
            !older.may_hold_range(start, end)
        })
    }
}

impl Simulator {
    /// Deletes every key in `[start, end)`: one buffer entry of key `start` and value `end`, as
    /// the engine charges it. Not in scale mode, whose sample cannot weigh a range.
    pub fn delete_range(&mut self, start: u64, end: u64) -> Result<(), SimError> {
        if self.cfg.scale_keys.is_some() {
            return Err(SimError::Config(
                "range deletions need the exact simulator, not scale mode".to_string(),
            ));
        }
        self.stats.deletes += 1;
        let bytes = 2 * self.cfg.key_size;
        // Counted as one delete, as the engine counts it.
        self.autopilot_count(super::autopilot::Counted::Write {
            delete: true,
            key_bytes: bytes,
            value_bytes: 0,
        });
        let seq = self.next_seqno();
        if start < end {
            self.buffer_ranges.push((
                self.buffer.len(),
                RangeTombstone {
                    start: key_bytes(start),
                    end: key_bytes(end),
                    seq,
                },
            ));
        }
        self.account_buffered(bytes)
    }

    /// The range tombstones of `tables`.
    pub(super) fn ranges_of<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a Arc<TableMeta>>,
    ) -> Vec<RangeTombstone<Bytes>> {
        tables
            .into_iter()
            .filter_map(|t| self.table_ranges.get(&t.id))
            .flat_map(|r| r.iter().cloned())
            .collect()
    }

    /// The buffer's range deletions, and the buffer's entries (in arrival order) less those a
    /// later range deletion covers.
    pub(super) fn take_buffer_ranges(
        &mut self,
        raw: Vec<u64>,
    ) -> (Vec<RangeTombstone<Bytes>>, Vec<u64>) {
        let ranges = std::mem::take(&mut self.buffer_ranges);
        if ranges.is_empty() {
            return (Vec::new(), raw);
        }
        // Arrival position as the sequence number: a range that arrived when `at` entries were
        // buffered covers the entries before position `at`.
        let by_arrival = Fragments::new(ranges.iter().map(|(at, t)| RangeTombstone {
            seq: *at as u64,
            ..t.clone()
        }));
        let kept = raw
            .into_iter()
            .enumerate()
            .filter(|&(i, e)| {
                by_arrival
                    .covering(&key_bytes(crate::keys::key_of(e))[..], u64::MAX)
                    .is_none_or(|at| at <= i as u64)
            })
            .map(|(_, e)| e)
            .collect();
        (ranges.into_iter().map(|(_, t)| t).collect(), kept)
    }
}
