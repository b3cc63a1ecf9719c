//! Executing plans: merging input runs into output tables, and the per-key rules of a merge.

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::manifest::table_file_name;
use crate::table::{Compression, TableBuilder, TableOptions, TableSummary};
use crate::table_cache::{RunIterator, TableCache};
use std::path::Path;
use std::sync::Arc;
use strata_meta::{BlockMeta, SeqRange, TableId, TableMeta, Version};
use strata_policy::{CutRule, PlanInput};

/// Table-writing settings shared by flushes and compactions.
#[derive(Clone, Debug)]
pub struct WriteSettings {
    /// Data block size.
    pub block_size: usize,
    /// Restart interval.
    pub restart_interval: usize,
    /// Compression.
    pub compression: Compression,
    /// Record per-block key ranges in table metadata.
    pub record_block_ranges: bool,
}

/// Decides, entry by entry, what a merge keeps: the newest version of each key in each snapshot
/// stripe, and tombstones only while something older may still need hiding.
pub struct MergeFilter {
    snapshots: Vec<SeqNo>,
    current_key: Vec<u8>,
    has_key: bool,
    last_stripe: usize,
    older: Vec<Vec<Arc<TableMeta>>>,
}

impl MergeFilter {
    /// A filter for a merge; `snapshots` are the live snapshots' sequence numbers (any order)
    /// and `older` lists, per run older than the output, the tables outside the merge whose data
    /// a dropped tombstone could otherwise expose.
    pub fn new(mut snapshots: Vec<SeqNo>, older: Vec<Vec<Arc<TableMeta>>>) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        MergeFilter {
            snapshots,
            current_key: Vec::new(),
            has_key: false,
            last_stripe: 0,
            older,
        }
    }

    /// Whether an older table outside the merge may hold `user_key`.
    fn may_exist_below(&self, user_key: &[u8]) -> bool {
        self.older.iter().any(|tables| {
            let i = tables.partition_point(|t| t.largest.as_ref() < user_key);
            tables
                .get(i)
                .is_some_and(|t| t.smallest.as_ref() <= user_key)
        })
    }

    /// Whether to keep the entry with internal key `ikey` (entries must arrive in order).
    pub fn keep(&mut self, ikey: &[u8]) -> bool {
        let Some((user_key, seq, kind)) = key::parse_internal_key(ikey) else {
            return true;
        };
        // Entries visible to snapshot s are those with seq <= s: stripe i holds
        // snapshots[i-1] < seq <= snapshots[i]; the last stripe is above every snapshot.
        let stripe = self.snapshots.partition_point(|&s| s < seq);
        if self.has_key && self.current_key == user_key {
            if stripe == self.last_stripe {
                return false;
            }
        } else {
            self.current_key.clear();
            self.current_key.extend_from_slice(user_key);
            self.has_key = true;
        }
        self.last_stripe = stripe;
        // A tombstone no snapshot needs to see past can go once nothing older is left below;
        // the older versions in this merge fall into the same stripe and are dropped above.
        !(kind == ValueKind::Delete && stripe == 0 && !self.may_exist_below(user_key))
    }
}

/// Writes the output of a merge as tables cut by `cut`.
pub struct OutputWriter<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    settings: &'a WriteSettings,
    cut: &'a CutRule,
    bloom_bits_per_key: f64,
    allocate: &'a dyn Fn() -> u64,
    builder: Option<(u64, TableBuilder)>,
    boundary: usize,
    piece_target: Option<u64>,
    last_user_key: Vec<u8>,
    outputs: Vec<TableMeta>,
    /// Every file created, finished or not (a table whose `finish` failed is in neither
    /// `builder` nor `outputs`, and must still be deleted).
    started: Vec<u64>,
    inputs: &'a [Arc<TableMeta>],
}

impl<'a> OutputWriter<'a> {
    /// A writer that allocates file numbers with `allocate`.
    pub fn new(
        fs: &'a dyn FileSystem,
        dir: &'a Path,
        settings: &'a WriteSettings,
        cut: &'a CutRule,
        bloom_bits_per_key: f64,
        allocate: &'a dyn Fn() -> u64,
        inputs: &'a [Arc<TableMeta>],
    ) -> Self {
        OutputWriter {
            fs,
            dir,
            settings,
            cut,
            bloom_bits_per_key,
            allocate,
            builder: None,
            boundary: 0,
            piece_target: cut.target_table_size,
            last_user_key: Vec::new(),
            outputs: Vec::new(),
            started: Vec::new(),
            inputs,
        }
    }

    /// Chooses the size target of the piece that starts at `user_key` (up to the next boundary):
    /// the target table size, or half the piece when it would exceed `split_above` (Spooky's
    /// split in two). The piece's size is estimated from the input tables that start inside it,
    /// since the merge has not produced it yet.
    fn start_piece(&mut self, user_key: &[u8]) {
        self.piece_target = self.cut.target_table_size;
        let Some(limit) = self.cut.split_above else {
            return;
        };
        let end = self.cut.boundaries.get(self.boundary).map(|b| b.as_ref());
        let estimate: u64 = self
            .inputs
            .iter()
            .filter(|t| {
                t.smallest.as_ref() >= user_key && end.is_none_or(|e| t.smallest.as_ref() < e)
            })
            .map(|t| t.size)
            .sum();
        if estimate > limit {
            self.piece_target = Some(estimate.div_ceil(2));
        }
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some((number, builder)) = self.builder.take() {
            let summary = builder.finish()?;
            self.outputs
                .push(table_meta(number, &summary, self.bloom_bits_per_key));
        }
        Ok(())
    }

    /// Adds an entry; a new table starts only between user keys.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let user_key = key::user_key(ikey);
        let new_user_key = self.builder.is_none() || self.last_user_key != user_key;
        if new_user_key && self.builder.is_some() {
            let mut crossed = false;
            while self.boundary < self.cut.boundaries.len()
                && self.cut.boundaries[self.boundary].as_ref() <= user_key
            {
                self.boundary += 1;
                crossed = true;
            }
            let full = match (self.piece_target, &self.builder) {
                (Some(target), Some((_, b))) => b.estimated_size() >= target,
                _ => false,
            };
            if crossed || full {
                self.finish_current()?;
            }
            if crossed {
                self.start_piece(user_key);
            }
        }
        if self.builder.is_none() {
            if self.outputs.is_empty() {
                while self.boundary < self.cut.boundaries.len()
                    && self.cut.boundaries[self.boundary].as_ref() <= user_key
                {
                    self.boundary += 1;
                }
                self.start_piece(user_key);
            }
            let number = (self.allocate)();
            let path = self.dir.join(table_file_name(number));
            // Recorded before creating: a failed create may still leave a file behind.
            self.started.push(number);
            let file = self
                .fs
                .create(&path)
                .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
            let options = TableOptions {
                block_size: self.settings.block_size,
                restart_interval: self.settings.restart_interval,
                compression: self.settings.compression,
                bloom_bits_per_key: self.bloom_bits_per_key,
                record_block_ranges: self.settings.record_block_ranges,
            };
            self.builder = Some((
                number,
                TableBuilder::new(file, table_file_name(number), options),
            ));
        }
        if new_user_key {
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(user_key);
        }
        if let Some((_, b)) = &mut self.builder {
            b.add(ikey, value)?;
        }
        Ok(())
    }

    /// Finishes the last table and returns every output.
    pub fn finish(mut self) -> Result<Vec<TableMeta>> {
        self.finish_current()?;
        Ok(self.outputs)
    }

    /// File numbers of every table started so far, finished or not (for cleanup after a
    /// failure).
    pub fn started_files(&self) -> Vec<u64> {
        self.started.clone()
    }
}

/// Table metadata for a finished table.
pub fn table_meta(number: u64, s: &TableSummary, bloom_bits_per_key: f64) -> TableMeta {
    let blocks = (!s.blocks.is_empty()).then(|| {
        s.blocks
            .iter()
            .map(|b| BlockMeta {
                smallest: b.smallest.clone(),
                largest: b.largest.clone(),
                size: b.size,
                entries: b.entries,
                file: TableId(number),
                offset: b.offset,
            })
            .collect::<Vec<_>>()
            .into()
    });
    TableMeta {
        id: TableId(number),
        smallest: s.smallest.clone(),
        largest: s.largest.clone(),
        size: s.file_size,
        entries: s.entries,
        tombstones: s.tombstones,
        seqnos: SeqRange {
            smallest: s.smallest_seqno,
            largest: s.largest_seqno,
        },
        bloom_bits_per_key,
        blocks,
    }
}

/// A cursor over each input run, newest first, for a merge of `inputs` in `version`.
pub fn input_iterators(
    version: &Version,
    inputs: &[PlanInput],
    tables: &Arc<TableCache>,
) -> Result<(Vec<Box<dyn InternalIterator>>, u64)> {
    let mut ordered: Vec<&PlanInput> = inputs.iter().collect();
    ordered.sort_by_key(|i| {
        (
            i.level,
            version.level(i.level).position(i.run).unwrap_or(usize::MAX),
        )
    });
    let mut iters: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(ordered.len());
    let mut bytes = 0;
    for input in ordered {
        let mut metas: Vec<Arc<TableMeta>> = input
            .tables
            .iter()
            .map(|id| {
                version.table(*id).cloned().ok_or_else(|| {
                    Error::InvalidArgument(format!("plan input table {id} is not in the version"))
                })
            })
            .collect::<Result<_>>()?;
        metas.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        bytes += metas.iter().map(|t| t.size).sum::<u64>();
        iters.push(Box::new(RunIterator::new(Arc::clone(tables), metas)));
    }
    Ok((iters, bytes))
}

/// Merges `inputs` (newest first) through `filter` into `out`. Returns the number of entries read.
pub fn merge_into(
    inputs: Vec<Box<dyn InternalIterator>>,
    filter: &mut MergeFilter,
    out: &mut OutputWriter<'_>,
    stop: &dyn Fn() -> bool,
) -> Result<u64> {
    let mut merged = MergingIterator::new(inputs);
    merged.seek_to_first()?;
    let mut read = 0u64;
    while merged.valid() {
        read += 1;
        if read.is_multiple_of(4096) && stop() {
            return Err(Error::Closed);
        }
        if filter.keep(merged.key()) {
            out.add(merged.key(), merged.value())?;
        }
        merged.next()?;
    }
    Ok(read)
}
