//! Merging simulated runs (cutting the result into tables is `strata_exec::Cutter`'s).

use crate::keys::{is_tombstone, key_of};
use crate::output::TableWriter;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use strata_exec::preserve::keys_allow;
use strata_meta::BlockMeta;

/// A read cursor over one run's input: its tables' entry arrays in key order.
pub struct RunCursor {
    tables: Vec<Arc<[u64]>>,
    table: usize,
    index: usize,
}

impl RunCursor {
    /// A cursor over `tables`, which must be in key order and disjoint.
    pub fn new(tables: Vec<Arc<[u64]>>) -> Self {
        let mut cursor = RunCursor {
            tables,
            table: 0,
            index: 0,
        };
        cursor.skip_empty();
        cursor
    }

    fn skip_empty(&mut self) {
        while self.table < self.tables.len() && self.index >= self.tables[self.table].len() {
            self.table += 1;
            self.index = 0;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u64> {
        self.tables.get(self.table).map(|t| t[self.index])
    }

    #[inline]
    fn advance(&mut self) {
        self.index += 1;
        if self.index >= self.tables[self.table].len() {
            self.skip_empty();
        }
    }

    fn len(&self) -> usize {
        self.tables.iter().map(|t| t.len()).sum()
    }
}

/// One input table of a block-preserving merge: its entries and its blocks (`None`: not
/// recorded, so none is ever kept).
pub type BlockedTable = (Arc<[u64]>, Option<Arc<[BlockMeta]>>);

/// A read cursor over one run's tables that also knows their data blocks, for block-preserving
/// merges.
pub struct BlockCursor {
    tables: Vec<BlockedTable>,
    table: usize,
    index: usize,
    /// The current table's block holding `index`, and the entry index where it starts.
    block: usize,
    block_start: usize,
}

impl BlockCursor {
    /// A cursor over `tables` (in key order, disjoint), each with its blocks.
    pub fn new(tables: Vec<BlockedTable>) -> Self {
        let mut cursor = BlockCursor {
            tables,
            table: 0,
            index: 0,
            block: 0,
            block_start: 0,
        };
        cursor.skip_empty();
        cursor
    }

    fn skip_empty(&mut self) {
        while self.table < self.tables.len() && self.index >= self.tables[self.table].0.len() {
            self.table += 1;
            self.index = 0;
            self.block = 0;
            self.block_start = 0;
        }
    }

    fn peek(&self) -> Option<u64> {
        self.tables.get(self.table).map(|t| t.0[self.index])
    }

    fn advance(&mut self) {
        self.index += 1;
        if let Some(blocks) = &self.tables[self.table].1 {
            if let Some(b) = blocks.get(self.block) {
                if self.index >= self.block_start + b.entries as usize {
                    self.block_start += b.entries as usize;
                    self.block += 1;
                }
            }
        }
        if self.index >= self.tables[self.table].0.len() {
            self.skip_empty();
        }
    }

    /// The block starting at the current entry, with its entries, if blocks are recorded.
    fn block_start(&self) -> Option<(&BlockMeta, &[u64])> {
        let (entries, blocks) = self.tables.get(self.table)?;
        let block = blocks.as_deref()?.get(self.block)?;
        if self.index != self.block_start {
            return None;
        }
        let end = (self.block_start + block.entries as usize).min(entries.len());
        Some((block, &entries[self.block_start..end]))
    }
}

/// Merges runs given newest first into `out`, as [`merge_runs`] does, keeping input blocks
/// where the writer's preserver allows (the rule of `strata_exec::preserve`): at the first
/// entry of a block whose keys allow it and whose entries all survive, the writer is asked to
/// keep the block.
pub(crate) fn merge_preserving(
    mut runs: Vec<BlockCursor>,
    mut keep: impl FnMut(u64) -> bool,
    out: &mut TableWriter<'_>,
) {
    loop {
        // The smallest key; among equal keys the newest run.
        let mut current: Option<(usize, u64)> = None;
        for (i, r) in runs.iter().enumerate() {
            if let Some(e) = r.peek() {
                if current.is_none_or(|(_, k)| key_of(e) < k) {
                    current = Some((i, key_of(e)));
                }
            }
        }
        let Some((i, key)) = current else {
            break;
        };
        if let Some((block, entries)) = runs[i].block_start() {
            let next_other = runs
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .filter_map(|(_, r)| r.peek().map(key_of))
                .min();
            let last = entries.last().map_or(key, |&e| key_of(e));
            let last_written = out.last_key();
            if keys_allow(&key, &last, last_written.as_ref(), next_other.as_ref())
                && entries.iter().all(|&e| keep(e))
                && out.try_keep(block, entries)
            {
                for _ in 0..entries.len() {
                    runs[i].advance();
                }
                continue;
            }
        }
        let entry = runs[i].peek().unwrap_or_default();
        if keep(entry) {
            out.add(entry);
        }
        for r in &mut runs[i..] {
            if r.peek().is_some_and(|e| key_of(e) == key) {
                r.advance();
            }
        }
    }
}

/// Merges runs given newest first. For a key present in several runs only the newest entry
/// survives, and is written if `keep(entry)` says so (a tombstone, say, only while older data
/// may exist below the output: [`keep_tombstones_where`]).
pub fn merge_runs(mut runs: Vec<RunCursor>, mut keep: impl FnMut(u64) -> bool) -> Vec<u64> {
    let capacity = runs.iter().map(RunCursor::len).sum();
    let mut out = Vec::with_capacity(capacity);
    let mut emit = |entry: u64, out: &mut Vec<u64>| {
        if keep(entry) {
            out.push(entry);
        }
    };
    match runs.len() {
        0 => {}
        1 => {
            let run = &mut runs[0];
            while let Some(e) = run.peek() {
                emit(e, &mut out);
                run.advance();
            }
        }
        2 => {
            let (newer, older) = runs.split_at_mut(1);
            let (a, b) = (&mut newer[0], &mut older[0]);
            loop {
                match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) => {
                        let (kx, ky) = (key_of(x), key_of(y));
                        if kx < ky {
                            emit(x, &mut out);
                            a.advance();
                        } else if ky < kx {
                            emit(y, &mut out);
                            b.advance();
                        } else {
                            emit(x, &mut out);
                            a.advance();
                            b.advance();
                        }
                    }
                    (Some(x), None) => {
                        emit(x, &mut out);
                        a.advance();
                    }
                    (None, Some(y)) => {
                        emit(y, &mut out);
                        b.advance();
                    }
                    (None, None) => break,
                }
            }
        }
        _ => {
            // Min-heap on (key, run index): for equal keys the newest run pops first.
            let mut heap: BinaryHeap<Reverse<(u64, usize)>> = runs
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.peek().map(|e| Reverse((key_of(e), i))))
                .collect();
            let mut last_key = None;
            while let Some(Reverse((key, i))) = heap.pop() {
                if let Some(entry) = runs[i].peek() {
                    if last_key != Some(key) {
                        emit(entry, &mut out);
                        last_key = Some(key);
                    }
                    runs[i].advance();
                    if let Some(next) = runs[i].peek() {
                        heap.push(Reverse((key_of(next), i)));
                    }
                }
            }
        }
    }
    out
}

/// The merge rule that writes every put and a tombstone only where `needed(key)`: what
/// [`merge_runs`] and [`merge_preserving`] are given when nothing else drops entries.
pub fn keep_tombstones_where(mut needed: impl FnMut(u64) -> bool) -> impl FnMut(u64) -> bool {
    move |entry| !is_tombstone(entry) || needed(key_of(entry))
}

/// Sorts a buffer's entries (in arrival order, possibly with repeated keys) by key, keeping only
/// the last arrival of each key.
pub fn sort_buffer(mut entries: Vec<u64>) -> Vec<u64> {
    // A stable sort by key keeps arrival order among equal keys; the last one wins.
    entries.sort_by_key(|&e| key_of(e));
    let mut out: Vec<u64> = Vec::with_capacity(entries.len());
    for e in entries {
        match out.last_mut() {
            Some(last) if key_of(*last) == key_of(e) => *last = e,
            _ => out.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{put, tombstone};

    fn run(tables: &[&[u64]]) -> RunCursor {
        RunCursor::new(tables.iter().map(|t| Arc::from(t.to_vec())).collect())
    }

    #[test]
    fn newest_run_wins_for_two_and_many_runs() {
        let newer: &[u64] = &[put(1), tombstone(3)];
        let older: &[u64] = &[put(1), put(2), put(3), put(9)];
        let merged = merge_runs(vec![run(&[newer]), run(&[older])], |_| true);
        assert_eq!(merged, vec![put(1), put(2), tombstone(3), put(9)]);
        let oldest: &[u64] = &[tombstone(2), put(4)];
        let merged = merge_runs(
            vec![
                run(&[newer]),
                run(&[&older[..2], &older[2..]]),
                run(&[oldest]),
            ],
            keep_tombstones_where(|_| false),
        );
        assert_eq!(merged, vec![put(1), put(2), put(4), put(9)]);
    }

    #[test]
    fn tombstones_drop_only_when_allowed() {
        let only: &[u64] = &[tombstone(1), tombstone(2), put(3)];
        let merged = merge_runs(vec![run(&[only])], keep_tombstones_where(|k| k == 2));
        assert_eq!(merged, vec![tombstone(2), put(3)]);
    }

    #[test]
    fn buffer_sort_keeps_the_last_write() {
        let sorted = sort_buffer(vec![put(5), put(1), tombstone(5), put(3), put(1)]);
        assert_eq!(sorted, vec![put(1), put(3), tombstone(5)]);
    }
}
