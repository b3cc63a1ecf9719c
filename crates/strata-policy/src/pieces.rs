//! Pieces (key ranges cut at a run's table boundaries, or at keys a policy keeps) and the tables
//! of a merge's input levels placed on them. Spooky's rounds and partial last-level merges and
//! Vertiorizon's partitioned boundary merge take their inputs piece by piece.

use crate::plan::PlanInput;
use std::ops::RangeInclusive;
use strata_meta::{format_key, Bytes, RunId, TableMeta, Version};

/// A table of a merge's input levels and the pieces it touches.
pub(crate) struct Placed<'a> {
    pub(crate) level: usize,
    pub(crate) first: usize,
    pub(crate) last: usize,
    pub(crate) run: RunId,
    pub(crate) table: &'a TableMeta,
}

/// Pieces: the key ranges of one run's tables, extended to cover every key.
pub(crate) struct Pieces {
    /// Smallest keys of the run's tables after the first; piece i starts at `bounds[i-1]`.
    pub(crate) bounds: Vec<Bytes>,
}

impl Pieces {
    /// The pieces of `version`: by the table boundaries of the oldest run of `level`, with
    /// `cursor` as one more boundary.
    pub(crate) fn of(version: &Version, level: usize, cursor: Option<Bytes>) -> Self {
        let mut bounds: Vec<Bytes> = version
            .level(level)
            .runs()
            .last()
            .map(|r| {
                r.tables()
                    .iter()
                    .skip(1)
                    .map(|t| t.smallest.clone())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(cursor) = cursor {
            if let Err(at) = bounds.binary_search(&cursor) {
                bounds.insert(at, cursor);
            }
        }
        Pieces { bounds }
    }

    /// The pieces cut at `bounds` (ascending, distinct).
    pub(crate) fn at(bounds: Vec<Bytes>) -> Self {
        Pieces { bounds }
    }

    pub(crate) fn count(&self) -> usize {
        self.bounds.len() + 1
    }

    pub(crate) fn of_key(&self, key: &[u8]) -> usize {
        self.bounds.partition_point(|b| b.as_ref() <= key)
    }

    /// Pieces `first..=last` the key range `[smallest, largest]` touches.
    pub(crate) fn span(&self, smallest: &[u8], largest: &[u8]) -> (usize, usize) {
        (self.of_key(smallest), self.of_key(largest))
    }

    /// The key range of pieces `first..=last`, as text.
    pub(crate) fn describe(&self, first: usize, last: usize) -> String {
        let low = match first {
            0 => "-inf".to_string(),
            i => format_key(&self.bounds[i - 1]),
        };
        let high = match self.bounds.get(last) {
            Some(key) => format_key(key),
            None => "+inf".to_string(),
        };
        format!("[{low}, {high})")
    }

    /// Boundaries strictly inside pieces `first..=last`.
    pub(crate) fn inner(&self, first: usize, last: usize) -> Vec<Bytes> {
        self.bounds[first..last].to_vec()
    }
}

/// Every table of a merge's input levels, placed on the pieces.
pub(crate) struct Placement<'a> {
    tables: Vec<Placed<'a>>,
}

impl<'a> Placement<'a> {
    /// The tables of every run of `levels`.
    pub(crate) fn of(version: &'a Version, levels: RangeInclusive<usize>, pieces: &Pieces) -> Self {
        let tables =
            levels
                .flat_map(|level| {
                    version.level(level).runs().iter().flat_map(move |run| {
                        run.tables().iter().map(move |table| (level, run, table))
                    })
                })
                .map(|(level, run, table)| {
                    let (first, last) = pieces.span(&table.smallest, &table.largest);
                    Placed {
                        level,
                        first,
                        last,
                        run: run.id(),
                        table,
                    }
                })
                .collect();
        Placement { tables }
    }

    /// The placed tables, in level and run order.
    pub(crate) fn tables(&self) -> &[Placed<'a>] {
        &self.tables
    }

    /// Tables touching pieces `lo..=hi`.
    pub(crate) fn touching(&self, lo: usize, hi: usize) -> impl Iterator<Item = &Placed<'a>> {
        self.tables
            .iter()
            .filter(move |t| t.first <= hi && t.last >= lo)
    }

    /// Pieces `lo..=hi` widened until no table crosses their edge.
    pub(crate) fn close(&self, mut lo: usize, mut hi: usize) -> (usize, usize) {
        loop {
            let (new_lo, new_hi) = self
                .touching(lo, hi)
                .fold((lo, hi), |(l, h), t| (l.min(t.first), h.max(t.last)));
            if (new_lo, new_hi) == (lo, hi) {
                return (lo, hi);
            }
            (lo, hi) = (new_lo, new_hi);
        }
    }

    /// The paper's seamless adaptation: the last piece of a closed span `lo..=hi` once the
    /// following pieces are taken in while the tables touching all of them stay under
    /// `file_max` bytes, so that small last-level tables coalesce.
    pub(crate) fn coalesce(&self, lo: usize, mut hi: usize, pieces: usize, file_max: u64) -> usize {
        while hi + 1 < pieces {
            let (_, wider) = self.close(lo, hi + 1);
            let size: u64 = self.touching(lo, wider).map(|t| t.table.size).sum();
            if size >= file_max {
                break;
            }
            hi = wider;
        }
        hi
    }

    /// The plan inputs for the tables touching pieces `lo..=hi`, one per run.
    pub(crate) fn inputs(&self, lo: usize, hi: usize) -> Vec<PlanInput> {
        let mut inputs: Vec<PlanInput> = Vec::new();
        for t in self.touching(lo, hi) {
            match inputs.iter_mut().find(|i| i.run == t.run) {
                Some(input) => input.tables.push(t.table.id),
                None => inputs.push(PlanInput {
                    level: t.level,
                    run: t.run,
                    tables: vec![t.table.id],
                }),
            }
        }
        inputs
    }
}
