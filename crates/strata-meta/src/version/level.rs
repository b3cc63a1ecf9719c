//! Sorted runs and levels: the parts a [`Version`](super::Version) is built from, with the key
//! lookups over a run's tables.

use crate::error::EditError;
use crate::key::KeyRange;
use crate::table::{RunId, TableMeta};
use std::sync::Arc;

/// The table of `tables` (sorted by key, disjoint: a run's, or a slice of one) whose key range
/// holds `key`, if any (binary search).
pub fn table_covering<'a>(tables: &'a [Arc<TableMeta>], key: &[u8]) -> Option<&'a Arc<TableMeta>> {
    let i = tables.partition_point(|t| t.largest.as_ref() < key);
    tables.get(i).filter(|t| t.smallest.as_ref() <= key)
}

/// A sorted run: tables ordered by key that do not overlap one another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub(super) id: RunId,
    pub(super) tables: Vec<Arc<TableMeta>>,
    pub(super) size: u64,
    pub(super) file_bytes: u64,
    pub(super) entries: u64,
}

impl Run {
    /// A run holding `tables`, which must be sorted by key and disjoint.
    pub(super) fn from_tables(id: RunId, tables: Vec<Arc<TableMeta>>) -> Self {
        let size = tables.iter().map(|t| t.size).fold(0, u64::saturating_add);
        let file_bytes = tables
            .iter()
            .map(|t| t.file_bytes())
            .fold(0, u64::saturating_add);
        let entries = tables
            .iter()
            .map(|t| t.entries)
            .fold(0, u64::saturating_add);
        Run {
            id,
            tables,
            size,
            file_bytes,
            entries,
        }
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// The run's tables in key order.
    pub fn tables(&self) -> &[Arc<TableMeta>] {
        &self.tables
    }

    /// Total bytes of the run's tables.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of the run's tables' own files ([`TableMeta::file_bytes`]): their size less the
    /// blocks they refer to in other files.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Total entries of the run's tables.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The key range the run covers. Runs are never empty inside a version.
    pub fn key_range(&self) -> KeyRange {
        match (self.tables.first(), self.tables.last()) {
            (Some(first), Some(last)) => KeyRange {
                smallest: first.smallest.clone(),
                largest: last.largest.clone(),
            },
            _ => KeyRange::new(bytes::Bytes::new(), bytes::Bytes::new()),
        }
    }

    /// The run's table whose key range holds `key`, if any ([`table_covering`]).
    pub fn table_covering(&self, key: &[u8]) -> Option<&Arc<TableMeta>> {
        table_covering(&self.tables, key)
    }

    /// The contiguous slice of tables whose key ranges overlap `range` (binary search).
    pub fn overlapping(&self, range: &KeyRange) -> &[Arc<TableMeta>] {
        let start = self.tables.partition_point(|t| t.largest < range.smallest);
        let end = self.tables.partition_point(|t| t.smallest <= range.largest);
        if start >= end {
            &[]
        } else {
            &self.tables[start..end]
        }
    }

    /// Bytes of the tables overlapping `range`.
    pub fn overlapping_size(&self, range: &KeyRange) -> u64 {
        self.overlapping(range)
            .iter()
            .map(|t| t.size)
            .fold(0, u64::saturating_add)
    }

    /// [`Run::overlapping_size`] of each of `tables` (in key order and disjoint, as a run's
    /// are), in one sweep of both runs: O(n + m) key comparisons where n binary searches take
    /// O(n log m). A policy rating every table of a level by its overlap below (leveled
    /// compaction's pick) does this at every decision.
    pub fn overlapping_sizes(&self, tables: &[Arc<TableMeta>]) -> Vec<u64> {
        let mut prefix = Vec::with_capacity(self.tables.len() + 1);
        prefix.push(0u64);
        for t in &self.tables {
            prefix.push(prefix[prefix.len() - 1].saturating_add(t.size));
        }
        let (mut start, mut end) = (0, 0);
        tables
            .iter()
            .map(|t| {
                while start < self.tables.len() && self.tables[start].largest < t.smallest {
                    start += 1;
                }
                end = end.max(start);
                while end < self.tables.len() && self.tables[end].smallest <= t.largest {
                    end += 1;
                }
                prefix[end] - prefix[start]
            })
            .collect()
    }

    /// Checks that tables are in key order and disjoint.
    pub(super) fn check_order(&self, level: usize) -> Result<(), EditError> {
        for pair in self.tables.windows(2) {
            if pair[0].largest >= pair[1].smallest {
                return Err(EditError::Overlap {
                    level,
                    run: self.id,
                    left: pair[0].id,
                    right: pair[1].id,
                });
            }
        }
        Ok(())
    }
}

/// A level: zero or more runs, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Level {
    pub(super) runs: Vec<Arc<Run>>,
    pub(super) size: u64,
    pub(super) file_bytes: u64,
}

pub(super) static EMPTY_LEVEL: Level = Level {
    runs: Vec::new(),
    size: 0,
    file_bytes: 0,
};

impl Level {
    pub(super) fn from_runs(runs: Vec<Arc<Run>>) -> Self {
        let size = runs.iter().map(|r| r.size).fold(0, u64::saturating_add);
        let file_bytes = runs
            .iter()
            .map(|r| r.file_bytes)
            .fold(0, u64::saturating_add);
        Level {
            runs,
            size,
            file_bytes,
        }
    }

    /// Bytes of the level's tables' own files ([`Run::file_bytes`]).
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// The runs, newest first.
    pub fn runs(&self) -> &[Arc<Run>] {
        &self.runs
    }

    /// Total bytes in the level.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the level holds no runs.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Number of tables across the level's runs.
    pub fn table_count(&self) -> usize {
        self.runs.iter().map(|r| r.tables.len()).sum()
    }

    /// Position (0 = newest) of run `id` in this level.
    pub fn position(&self, id: RunId) -> Option<usize> {
        self.runs.iter().position(|r| r.id == id)
    }

    /// Where a run that an edit creates in this level is placed: just before the newest run the
    /// same edit deletes tables from (`loses_tables`), or at the front (newest position) when it
    /// deletes from none. Runs at this position and after are older than the new run. This is the
    /// one definition of new-run placement; [`Version::apply`] follows it, and plan validation and
    /// the executors ask it.
    ///
    /// [`Version::apply`]: super::Version::apply
    pub fn new_run_position(&self, mut loses_tables: impl FnMut(RunId) -> bool) -> usize {
        self.runs
            .iter()
            .position(|r| loses_tables(r.id))
            .unwrap_or(0)
    }

    /// Iterates over every table in the level, newest run first.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableMeta>> {
        self.runs.iter().flat_map(|r| r.tables.iter())
    }
}
