//! Merging entries into output tables: the engine's half of executing a plan (the other half,
//! shared with the simulator, is `strata_exec`), and the per-key rules of a merge.

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::manifest::table_file_name;
use crate::table::{Compression, ReadPurpose, TableBuilder, TableOptions, TableSummary};
use crate::table_cache::{RunIterator, TableCache};
use bytes::Bytes;
use std::path::Path;
use std::sync::Arc;
use strata_exec::{Cutter, OlderTables};
use strata_meta::{BlockMeta, SeqRange, TableId, TableMeta};
use strata_policy::PlanOutput;

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
    /// What lies below the output; `None` keeps every tombstone.
    older: Option<OlderTables>,
}

impl MergeFilter {
    /// A filter for a merge; `snapshots` are the live snapshots' sequence numbers (any order)
    /// and `older` the tables below the output whose data a dropped tombstone could expose.
    pub fn new(mut snapshots: Vec<SeqNo>, older: OlderTables) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        MergeFilter {
            snapshots,
            current_key: Vec::new(),
            has_key: false,
            last_stripe: 0,
            older: Some(older),
        }
    }

    /// A filter that drops only shadowed versions and keeps every tombstone: for entries that
    /// stay buffered (a window flush's remainder).
    pub fn keeping_tombstones(snapshots: Vec<SeqNo>) -> Self {
        MergeFilter {
            older: None,
            ..MergeFilter::new(snapshots, OlderTables::default())
        }
    }

    /// Whether to keep the entry with internal key `ikey` (entries must arrive in order).
    #[inline]
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
        !(kind == ValueKind::Delete
            && stripe == 0
            && self.older.as_ref().is_some_and(|o| !o.may_hold(user_key)))
    }
}

/// Writes the output of a merge as tables, cut where the shared [`Cutter`] says.
pub struct OutputWriter<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    settings: &'a WriteSettings,
    bloom_bits_per_key: f64,
    allocate: &'a dyn Fn() -> u64,
    cutter: Cutter<Bytes>,
    builder: Option<(u64, TableBuilder)>,
    last_user_key: Vec<u8>,
    outputs: Vec<TableMeta>,
    /// Every file created, finished or not (a table whose `finish` failed is in neither
    /// `builder` nor `outputs`, and must still be deleted).
    started: Vec<u64>,
}

impl<'a> OutputWriter<'a> {
    /// A writer of `output`'s tables that allocates file numbers with `allocate`; `inputs` are
    /// the merge's inputs (smallest key, bytes), which the cutter projects piece sizes from.
    pub fn new(
        fs: &'a dyn FileSystem,
        dir: &'a Path,
        settings: &'a WriteSettings,
        output: &PlanOutput,
        allocate: &'a dyn Fn() -> u64,
        inputs: &[(Bytes, u64)],
    ) -> Self {
        let cutter = Cutter::new(
            &output.cut,
            output.cut.boundaries.clone(),
            inputs.iter().map(|(key, size)| (key.as_ref(), *size)),
        );
        OutputWriter {
            fs,
            dir,
            settings,
            bloom_bits_per_key: output.bloom_bits_per_key,
            allocate,
            cutter,
            builder: None,
            last_user_key: Vec::new(),
            outputs: Vec::new(),
            started: Vec::new(),
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

    /// Starts a new table file.
    fn start_table(&mut self) -> Result<()> {
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
        Ok(())
    }

    /// Adds an entry (in internal-key order); a new table starts only between user keys.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let user_key = key::user_key(ikey);
        if self.builder.is_none() || self.last_user_key != user_key {
            // The builder's size estimate costs a little per key: only ask when sizes matter.
            let sizes_matter = self.cutter.sizes_matter();
            let open = self
                .builder
                .as_ref()
                .map(|(_, b)| if sizes_matter { b.estimated_size() } else { 0 });
            if self.cutter.cut_before(user_key, open) {
                self.finish_current()?;
            }
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(user_key);
        }
        if self.builder.is_none() {
            self.start_table()?;
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

/// A cursor over each run of `sources` (the shared executor's merge sources: runs newest first,
/// tables in key order), and the bytes they hold.
pub fn source_iterators(
    sources: Vec<Vec<Arc<TableMeta>>>,
    tables: &Arc<TableCache>,
) -> (Vec<Box<dyn InternalIterator>>, u64) {
    let bytes = sources.iter().flatten().map(|t| t.size).sum();
    let iters = sources
        .into_iter()
        .map(|run| {
            Box::new(RunIterator::new(
                Arc::clone(tables),
                run,
                ReadPurpose::Compaction,
            )) as Box<dyn InternalIterator>
        })
        .collect();
    (iters, bytes)
}

/// Why a merge failed: reading its inputs, which left the stored data as it was and may
/// succeed when tried again, or anything else (writing outputs, stopping).
#[derive(Debug)]
pub enum MergeError {
    /// Reading an input failed.
    Input(Error),
    /// Writing an output failed, or the merge was told to stop.
    Output(Error),
}

impl From<MergeError> for Error {
    fn from(e: MergeError) -> Error {
        match e {
            MergeError::Input(e) | MergeError::Output(e) => e,
        }
    }
}

/// Merges `inputs` (newest first) through `filter` into `out`. Returns the number of entries read.
pub fn merge_into(
    inputs: Vec<Box<dyn InternalIterator>>,
    filter: &mut MergeFilter,
    out: &mut OutputWriter<'_>,
    stop: &dyn Fn() -> bool,
) -> std::result::Result<u64, MergeError> {
    let mut merged = MergingIterator::new(inputs);
    merged.seek_to_first().map_err(MergeError::Input)?;
    let mut read = 0u64;
    while merged.valid() {
        read += 1;
        if read.is_multiple_of(4096) && stop() {
            return Err(MergeError::Output(Error::Closed));
        }
        if filter.keep(merged.key()) {
            out.add(merged.key(), merged.value())
                .map_err(MergeError::Output)?;
        }
        merged.next().map_err(MergeError::Input)?;
    }
    Ok(read)
}
