//! Merging entries into output tables: the engine's half of executing a plan (the other half,
//! shared with the simulator, is `strata_exec`), and the per-key rules of a merge.

mod fold;

use crate::compaction_filter::{CompactionFilter, FilterDecision};
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::fs::{FileSystem, WritebackEvery};
use crate::iter::StoredBlock;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::merge_operator::MergeOperator;
use crate::rate_limiter::{RateLimitedFile, RateLimiter};
use crate::table::{
    Compression, KeptBlock, ReadPurpose, ReadaheadSize, TableBuilder, TableOptions, TableSummary,
};
use crate::table_cache::{RunIterator, TableCache};
use bytes::Bytes;
use std::path::Path;
use std::sync::Arc;
use strata_exec::preserve::{keys_allow, Preserver};
use strata_exec::range_del::{successor, Fragments, RangeTombstone};
use strata_exec::{Cutter, OlderTables};
use strata_meta::{BlockMeta, SeqRange, TableId, TableMeta};
use strata_policy::PlanOutput;

/// Table-writing settings shared by flushes and compactions.
#[derive(Clone, Debug)]
pub struct WriteSettings {
    /// Data block size.
    pub block_size: usize,
    /// Data blocks start on pages ([`crate::Options::with_block_align`]).
    pub block_align: bool,
    /// Restart interval.
    pub restart_interval: usize,
    /// Compression.
    pub compression: Compression,
    /// Record per-block key ranges in table metadata.
    pub record_block_ranges: bool,
    /// Paces table writes, if set ([`crate::Options::with_rate_limiter`]).
    pub rate_limiter: Option<Arc<RateLimiter>>,
    /// Starts a table's writeback every this many bytes; 0 never
    /// ([`crate::Options::with_bytes_per_sync`]).
    pub bytes_per_sync: u64,
    /// Writes tables around the page cache
    /// ([`crate::Options::with_use_direct_io_for_flush_and_compaction`]).
    pub direct_writes: bool,
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
    /// The user's compaction filter, the output level it is told, and the sequence number at
    /// or below which it acts on nothing, in compactions.
    user: Option<(Arc<dyn CompactionFilter>, usize, SeqNo)>,
    /// Entries the user's filter removed and changed.
    pub filtered: (u64, u64),
    /// Versions at or below it have expired (a TTL) and are dropped.
    expired_through: SeqNo,
    /// The inputs' range deletions: what they cover in the same stripe is dropped.
    range_deletions: Option<Arc<Fragments<Bytes>>>,
    /// Folds merge operands ([`fold`]).
    pub(crate) operator: Option<Arc<dyn MergeOperator>>,
}

/// What [`MergeFilter::apply_user_filter`] made of a kept entry.
pub enum Filtered {
    /// Write it as it is.
    Unchanged,
    /// Write this internal key (the entry's, now a tombstone) with no value.
    Tombstone(Vec<u8>),
    /// Write nothing.
    Dropped,
    /// Write the entry's key with this value.
    Changed(Vec<u8>),
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
            user: None,
            filtered: (0, 0),
            expired_through: 0,
            range_deletions: None,
            operator: None,
        }
    }

    /// This filter dropping the entries the inputs' `range_deletions` cover within a snapshot
    /// stripe.
    ///
    /// Unlike a compaction filter's work, dropping a range tombstone needs no guard for the
    /// held memtables of window flushes: a buffer holding range deletions is flushed whole,
    /// held memtables and all, so whatever a held memtable holds was written after every range
    /// tombstone in a table, and none deletes it.
    pub fn with_range_deletions(mut self, range_deletions: Option<Arc<Fragments<Bytes>>>) -> Self {
        self.range_deletions = range_deletions.filter(|f| !f.is_empty());
        self
    }

    /// The range tombstones the merge writes: of the inputs', what
    /// [`Fragments::compacted`] keeps.
    pub fn range_tombstones_to_write(&self) -> Fragments<Bytes> {
        let Some(inputs) = &self.range_deletions else {
            return Fragments::default();
        };
        inputs.compacted(&self.snapshots, self.expired_through, |start, end| {
            self.older
                .as_ref()
                .is_some_and(|o| !o.may_hold_range(start, end))
        })
    }

    /// This filter dropping every version at or below `expired_through`: what a TTL expired,
    /// which reads at every snapshot hide already (an older version of the key is older still,
    /// so nothing reappears).
    pub fn with_expired_through(mut self, expired_through: SeqNo) -> Self {
        self.expired_through = expired_through;
        self
    }

    /// This filter with the user's compaction `filter` applied to what no snapshot sees, for
    /// a merge writing into `level` ([`crate::compaction_filter`]), and to nothing at or below
    /// `held_through`: versions a held memtable may hold too (a window flush leaves the
    /// versions it wrote in memory), whose copies must not differ.
    pub fn with_user_filter(
        mut self,
        filter: Option<Arc<dyn CompactionFilter>>,
        level: usize,
        held_through: SeqNo,
    ) -> Self {
        self.user = filter.map(|f| (f, level, held_through));
        self
    }

    /// Whether entries may change or go (a user's filter, range deletions, merge operands to
    /// fold), so no input block may be kept as it is.
    pub fn may_change_entries(&self) -> bool {
        self.user.is_some() || self.range_deletions.is_some() || self.operator.is_some()
    }

    /// This filter folding merge operands with `operator` ([`fold`]).
    pub fn with_merge_operator(mut self, operator: Option<Arc<dyn MergeOperator>>) -> Self {
        self.operator = operator;
        self
    }

    /// The snapshot stripe of sequence number `seq`: stripe i holds
    /// `snapshots[i-1] < seq <= snapshots[i]`; the last is above every snapshot.
    #[inline]
    pub(crate) fn stripe_of(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// Whether the version of `user_key` at `seq` (in `stripe`) is gone for every reader that
    /// could see it: expired, or covered by a range tombstone of its stripe.
    #[inline]
    pub(crate) fn deleted(&self, user_key: &[u8], seq: SeqNo, stripe: usize) -> bool {
        seq <= self.expired_through
            || self.range_deletions.as_ref().is_some_and(|ranges| {
                let stripe_top = self.snapshots.get(stripe).copied().unwrap_or(SeqNo::MAX);
                ranges.covers_in_stripe(user_key, seq, stripe_top)
            })
    }

    /// Whether a table below the output may hold `user_key` (always, when the filter knows
    /// nothing below).
    pub(crate) fn older_may_hold(&self, user_key: &[u8]) -> bool {
        self.older.as_ref().is_none_or(|o| o.may_hold(user_key))
    }

    /// Asks the user's filter about the entry [`MergeFilter::keep`] just kept, if it is a put
    /// newer than every snapshot (the newest version of its key: older ones in its stripe were
    /// dropped). A removal leaves a tombstone where something older may hold the key.
    pub fn apply_user_filter(&mut self, ikey: &[u8], value: &[u8]) -> Filtered {
        let Some((filter, level, held_through)) = &self.user else {
            return Filtered::Unchanged;
        };
        if self.last_stripe != self.snapshots.len() {
            return Filtered::Unchanged;
        }
        let Some((user_key, seq, ValueKind::Put)) = key::parse_internal_key(ikey) else {
            return Filtered::Unchanged;
        };
        if seq <= *held_through {
            return Filtered::Unchanged;
        }
        match filter.filter(*level, user_key, value) {
            FilterDecision::Keep => Filtered::Unchanged,
            FilterDecision::ChangeValue(value) => {
                self.filtered.1 += 1;
                Filtered::Changed(value)
            }
            FilterDecision::Remove => {
                self.filtered.0 += 1;
                // Older versions in this merge sit in snapshots' stripes (any in this stripe
                // were dropped), so with no snapshot only the tables below can hold the key.
                let older_may_hold = !self.snapshots.is_empty()
                    || self.older.as_ref().is_none_or(|o| o.may_hold(user_key));
                if older_may_hold {
                    Filtered::Tombstone(key::internal_key(user_key, seq, ValueKind::Delete))
                } else {
                    Filtered::Dropped
                }
            }
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
        if seq <= self.expired_through {
            return false;
        }
        let stripe = self.stripe_of(seq);
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
        if self.deleted(user_key, seq, stripe) {
            return false;
        }
        // A tombstone no snapshot needs to see past can go once nothing older is left below;
        // the older versions in this merge fall into the same stripe and are dropped above.
        !(kind == ValueKind::Delete
            && stripe == 0
            && self.older.as_ref().is_some_and(|o| !o.may_hold(user_key)))
    }
}

/// Writes the output of a merge as tables, cut where the shared [`Cutter`] says, keeping input
/// blocks unchanged where the shared [`Preserver`] allows.
pub struct OutputWriter<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    settings: &'a WriteSettings,
    bloom_bits_per_key: f64,
    /// The plan's codec, or the settings' when it names none.
    compression: Compression,
    allocate: &'a dyn Fn() -> u64,
    cutter: Cutter<Bytes>,
    builder: Option<(u64, TableBuilder)>,
    last_user_key: Vec<u8>,
    outputs: Vec<TableMeta>,
    /// Every file created, finished or not (a table whose `finish` failed is in neither
    /// `builder` nor `outputs`, and must still be deleted).
    started: Vec<u64>,
    /// The waste accounting of a block-preserving merge.
    preserver: Option<Preserver>,
    /// Blocks of the open table already told to the preserver.
    blocks_reported: usize,
    /// Takes each finished table's key hashes for the key index, when the output level has one.
    index_table: Option<&'a dyn Fn(u64, Vec<Vec<u64>>)>,
    /// The range tombstones to write, each table taking its piece of them.
    range_tombstones: Fragments<Bytes>,
    /// Where the open table's piece of them starts: after the last key of the table before.
    range_lower: Option<Bytes>,
}

impl<'a> OutputWriter<'a> {
    /// A writer of `output`'s tables that allocates file numbers with `allocate`; `inputs` are
    /// the merge's inputs (smallest key, bytes), which the cutter projects piece sizes from.
    /// With a `preserver` (a block-preserving merge) the tables record their block ranges,
    /// which the manifest needs for the references. With `index_table`, each finished table's
    /// number and key hashes go to it before the table is reported.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        fs: &'a dyn FileSystem,
        dir: &'a Path,
        settings: &'a WriteSettings,
        output: &PlanOutput,
        allocate: &'a dyn Fn() -> u64,
        inputs: &[(Bytes, u64)],
        preserver: Option<Preserver>,
        index_table: Option<&'a dyn Fn(u64, Vec<Vec<u64>>)>,
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
            compression: output.compression.unwrap_or(settings.compression),
            allocate,
            cutter,
            builder: None,
            last_user_key: Vec::new(),
            outputs: Vec::new(),
            started: Vec::new(),
            preserver,
            blocks_reported: 0,
            index_table,
            range_tombstones: Fragments::default(),
            range_lower: None,
        }
    }

    /// Writes `tombstones` into the outputs, each table the piece from the key after the last
    /// key of the table before it up to the key after its own last key (the last table: to the
    /// end), so that tables of one run keep disjoint key ranges.
    pub fn with_range_tombstones(mut self, tombstones: Fragments<Bytes>) -> Self {
        self.range_tombstones = tombstones;
        self
    }

    /// Finishes the open table; `last` when no table follows it.
    fn finish_current(&mut self, last: bool) -> Result<()> {
        if !self.range_tombstones.is_empty() {
            if last && self.builder.is_none() && self.outputs.is_empty() {
                // Only range tombstones: they still need a table.
                self.start_table()?;
            }
            if let Some((_, builder)) = &mut self.builder {
                let upper = (!last).then(|| Bytes::from(successor(&self.last_user_key)));
                for t in self
                    .range_tombstones
                    .clipped(self.range_lower.as_ref(), upper.as_ref())
                {
                    builder.add_range_tombstone(t);
                }
                self.range_lower = upper;
            }
        }
        if let Some((number, builder)) = self.builder.take() {
            let mut summary = builder.finish()?;
            if let Some(index_table) = self.index_table {
                index_table(number, std::mem::take(&mut summary.key_hashes));
            }
            if let Some(p) = &mut self.preserver {
                for b in summary.blocks.iter().skip(self.blocks_reported) {
                    p.emitted(b.size);
                }
            }
            self.blocks_reported = 0;
            self.outputs
                .push(table_meta(number, &summary, self.bloom_bits_per_key));
        }
        Ok(())
    }

    /// Tells the preserver about the blocks the open table finished since the last call.
    fn report_blocks(&mut self) {
        if let (Some(p), Some((_, b))) = (&mut self.preserver, &self.builder) {
            for block in b.finished_blocks().iter().skip(self.blocks_reported) {
                p.emitted(block.size);
            }
            self.blocks_reported = b.finished_blocks().len();
        }
    }

    /// Whether this merge keeps blocks where it can.
    pub fn preserves_blocks(&self) -> bool {
        self.preserver.is_some()
    }

    /// The user key of the last entry written (empty before the first).
    pub fn last_user_key(&self) -> Option<&[u8]> {
        (self.builder.is_some() || !self.outputs.is_empty()).then_some(&self.last_user_key[..])
    }

    /// Keeps `block`, whose entries (in order) are `entries`, instead of rewriting them, if the
    /// preserver allows; false (nothing done) if not. The caller has checked the keys
    /// ([`keys_allow`]) and that the merge keeps every entry.
    pub fn try_keep_block(&mut self, block: &StoredBlock, entries: &EntryBuffer) -> Result<bool> {
        let open = self
            .builder
            .as_ref()
            .map_or(0, |(_, b)| b.open_block_bytes());
        if !self
            .preserver
            .as_ref()
            .is_some_and(|p| p.may_preserve(open, block.size, TableId(block.file_number)))
        {
            return Ok(false);
        }
        let Some((first, _)) = entries.iter().next() else {
            return Ok(false);
        };
        let first_user_key = key::user_key(first);
        let sizes_matter = self.cutter.sizes_matter();
        let open_size =
            self.builder
                .as_ref()
                .map(|(_, b)| if sizes_matter { b.estimated_size() } else { 0 });
        if self.cutter.cut_before(first_user_key, open_size) {
            self.finish_current(false)?;
        }
        if self.builder.is_none() {
            self.start_table()?;
        }
        if let Some((_, b)) = &mut self.builder {
            let kept = KeptBlock {
                file_number: block.file_number,
                offset: block.offset,
                size: block.size,
                entries: block.entries,
            };
            b.add_kept_block(&kept, entries.iter())?;
        }
        self.report_blocks();
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(&block.last_user_key);
        Ok(true)
    }

    /// Starts a new table file.
    fn start_table(&mut self) -> Result<()> {
        let number = (self.allocate)();
        let path = self.dir.join(table_file_name(number));
        // Recorded before creating: a failed create may still leave a file behind.
        self.started.push(number);
        let created = if self.settings.direct_writes {
            self.fs.create_direct(&path)
        } else {
            self.fs.create(&path)
        };
        let mut file = created.map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        // Direct writes reach the device as they are made: there is no writeback to start.
        if self.settings.bytes_per_sync > 0 && !self.settings.direct_writes {
            file = Box::new(WritebackEvery::new(file, self.settings.bytes_per_sync));
        }
        if let Some(limiter) = &self.settings.rate_limiter {
            file = Box::new(RateLimitedFile::new(file, Arc::clone(limiter)));
        }
        let options = TableOptions {
            block_size: self.settings.block_size,
            restart_interval: self.settings.restart_interval,
            compression: self.compression,
            bloom_bits_per_key: self.bloom_bits_per_key,
            record_block_ranges: self.settings.record_block_ranges || self.preserver.is_some(),
            collect_key_hashes: self.index_table.is_some(),
            block_align: self.settings.block_align,
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
                self.finish_current(false)?;
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
        if self.preserver.is_some() {
            self.report_blocks();
        }
        Ok(())
    }

    /// Finishes the last table and returns every output.
    pub fn finish(mut self) -> Result<Vec<TableMeta>> {
        self.finish_current(true)?;
        Ok(self.outputs)
    }

    /// File numbers of every table started so far, finished or not (for cleanup after a
    /// failure).
    pub fn started_files(&self) -> Vec<u64> {
        self.started.clone()
    }
}

/// The range deletions of a merge's input `tables` (those whose metadata counts any), opened
/// through `cache`, together with `more` (a flush's memtables'); `None` when there are none.
pub fn input_range_deletions(
    cache: &TableCache,
    tables: impl IntoIterator<Item = Arc<TableMeta>>,
    more: Vec<RangeTombstone<Bytes>>,
) -> Result<Option<Arc<Fragments<Bytes>>>> {
    gather_range_deletions(
        more,
        tables
            .into_iter()
            .filter(|t| t.range_deletions > 0)
            .map(|t| cache.get(t.id.0)),
    )
}

/// `more` and the range tombstones of the `opened` tables, fragmented; `None` when there are
/// none. Merges ([`input_range_deletions`]) and reads gather them so, each opening tables its
/// own way.
pub fn gather_range_deletions(
    more: Vec<RangeTombstone<Bytes>>,
    opened: impl IntoIterator<Item = Result<Arc<crate::table::Table>>>,
) -> Result<Option<Arc<Fragments<Bytes>>>> {
    let mut all = more;
    for table in opened {
        all.extend(table?.range_tombstones().iter().cloned());
    }
    Ok((!all.is_empty()).then(|| Arc::new(Fragments::new(all))))
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
                file: TableId(b.file.unwrap_or(number)),
                offset: b.offset,
            })
            .collect::<Vec<_>>()
            .into()
    });
    TableMeta {
        id: TableId(number),
        smallest: s.smallest.clone(),
        largest: s.largest.clone(),
        size: s.file_size + s.referenced_bytes,
        entries: s.entries,
        tombstones: s.tombstones,
        range_deletions: s.range_deletions,
        seqnos: SeqRange {
            smallest: s.smallest_seqno,
            largest: s.largest_seqno,
        },
        bloom_bits_per_key,
        blocks,
    }
}

/// A merge's read-ahead windows hold at most this many full `compaction_readahead_size`
/// windows in all: each run of a merge reads ahead in its own window, and a policy whose merges
/// fall behind can merge many runs at once (`tiered` with 2 MiB buffers merged 81 runs of L1
/// while loading 1 GB: 162 MiB of windows, and the run was killed by a 256 MiB memory limit).
pub const MERGE_READAHEAD_WINDOWS: usize = 8;

/// The smallest window a merge of many runs gives each run: below it, reads become too small
/// for read-ahead to be worth its copy.
pub const MIN_MERGE_READAHEAD: usize = 64 << 10;

/// The read-ahead of each run of a merge of `runs` runs whose inputs read ahead `readahead`:
/// the whole of it up to [`MERGE_READAHEAD_WINDOWS`] runs, then an equal share of that many
/// windows, at least [`MIN_MERGE_READAHEAD`] (never more than `readahead` itself).
pub fn merge_readahead(readahead: ReadaheadSize, runs: usize) -> ReadaheadSize {
    match readahead {
        ReadaheadSize::Fixed(bytes) if runs > MERGE_READAHEAD_WINDOWS => {
            let share = bytes.saturating_mul(MERGE_READAHEAD_WINDOWS) / runs;
            ReadaheadSize::Fixed(share.max(MIN_MERGE_READAHEAD).min(bytes))
        }
        other => other,
    }
}

/// A cursor over each run of `sources` (the shared executor's merge sources: runs newest first,
/// tables in key order), reading each table with `readahead` shared out by [`merge_readahead`],
/// and the bytes they hold.
pub fn source_iterators(
    sources: Vec<Vec<Arc<TableMeta>>>,
    tables: &Arc<TableCache>,
    readahead: ReadaheadSize,
) -> (Vec<Box<dyn InternalIterator>>, u64) {
    let bytes = sources.iter().flatten().map(|t| t.size).sum();
    let readahead = merge_readahead(readahead, sources.len());
    let iters = sources
        .into_iter()
        .map(|run| {
            Box::new(RunIterator::new(
                Arc::clone(tables),
                run,
                ReadPurpose::Compaction,
                readahead,
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
///
/// When `out` preserves blocks, every entry that starts a stored input block is a candidate
/// (see `strata_exec::preserve`): if its keys allow, the block's entries are read ahead and run
/// through the filter; if the filter keeps them all and the writer's preserver agrees, the block
/// is kept, else they are written one by one as usual.
pub fn merge_into(
    inputs: Vec<Box<dyn InternalIterator>>,
    filter: &mut MergeFilter,
    out: &mut OutputWriter<'_>,
    stop: &dyn Fn() -> bool,
) -> std::result::Result<u64, MergeError> {
    let mut merged = MergingIterator::new(inputs);
    merged.seek_to_first().map_err(MergeError::Input)?;
    let mut read = 0u64;
    let mut next_stop_check = 4096;
    let mut buffer = EntryBuffer::default();
    while merged.valid() {
        if read >= next_stop_check {
            next_stop_check = read + 4096;
            if stop() {
                return Err(MergeError::Output(Error::Closed));
            }
        }
        if out.preserves_blocks() && !filter.may_change_entries() {
            if let Some(block) = candidate_block(&merged, out) {
                read += take_block(&mut merged, &block, filter, &mut buffer)?;
                if !(buffer.all_kept
                    && out
                        .try_keep_block(&block, &buffer)
                        .map_err(MergeError::Output)?)
                {
                    for (k, v) in buffer.kept() {
                        out.add(k, v).map_err(MergeError::Output)?;
                    }
                }
                continue;
            }
        }
        read += 1;
        if filter.keep(merged.key()) {
            if key::parse_internal_key(merged.key()).is_some_and(|(_, _, k)| k == ValueKind::Merge)
            {
                // Without the operator the operand cannot fold, and the versions below it,
                // which the filter drops as shadowed, would be lost: refuse instead.
                let operator = filter
                    .operator
                    .clone()
                    .ok_or_else(|| MergeError::Output(crate::user_iter::missing_operator()))?;
                // Leaves the cursor past the operands it folded.
                read += fold::fold(&mut merged, filter, operator.as_ref(), out)?;
                continue;
            }
            match filter.apply_user_filter(merged.key(), merged.value()) {
                Filtered::Unchanged => out.add(merged.key(), merged.value()),
                Filtered::Tombstone(ikey) => out.add(&ikey, &[]),
                Filtered::Dropped => Ok(()),
                Filtered::Changed(value) => out.add(merged.key(), &value),
            }
            .map_err(MergeError::Output)?;
        }
        merged.next().map_err(MergeError::Input)?;
    }
    Ok(read)
}

/// The stored block starting at the merge's current entry, if its keys allow keeping it.
fn candidate_block(merged: &MergingIterator, out: &OutputWriter<'_>) -> Option<StoredBlock> {
    let block = merged.current_block_start()?;
    let first = key::user_key(merged.key());
    let next_other = merged.smallest_other_key().map(key::user_key);
    keys_allow(
        first,
        &block.last_user_key[..],
        out.last_user_key(),
        next_other,
    )
    .then_some(block)
}

/// Reads `block`'s entries (all from the current child) into `buffer`, through `filter`;
/// returns how many. A block holding other than the entries its index says is corruption.
fn take_block(
    merged: &mut MergingIterator,
    block: &StoredBlock,
    filter: &mut MergeFilter,
    buffer: &mut EntryBuffer,
) -> std::result::Result<u64, MergeError> {
    buffer.clear();
    let child = merged.current_child();
    for i in 0..block.entries {
        if !merged.valid()
            || merged.current_child() != child
            || (i > 0 && merged.current_block_start().is_some())
        {
            return Err(MergeError::Input(Error::corruption(
                crate::filename::table_file_name(block.file_number),
                block.offset,
                format!(
                    "data block holds {i} entries, its index says {}",
                    block.entries
                ),
            )));
        }
        let keep = filter.keep(merged.key());
        buffer.push(merged.key(), merged.value(), keep);
        merged.next().map_err(MergeError::Input)?;
    }
    Ok(block.entries)
}

/// The entries of one input block, read ahead while deciding whether to keep it.
#[derive(Default)]
pub struct EntryBuffer {
    data: Vec<u8>,
    /// (key end, value end, kept by the filter) per entry; each entry starts where the previous
    /// one ends.
    entries: Vec<(usize, usize, bool)>,
    all_kept: bool,
}

impl EntryBuffer {
    fn clear(&mut self) {
        self.data.clear();
        self.entries.clear();
        self.all_kept = true;
    }

    fn push(&mut self, key: &[u8], value: &[u8], kept: bool) {
        self.data.extend_from_slice(key);
        let key_end = self.data.len();
        self.data.extend_from_slice(value);
        self.entries.push((key_end, self.data.len(), kept));
        self.all_kept &= kept;
    }

    fn all(&self) -> impl Iterator<Item = (&[u8], &[u8], bool)> {
        let mut start = 0;
        self.entries.iter().map(move |&(key_end, value_end, kept)| {
            let entry = (
                &self.data[start..key_end],
                &self.data[key_end..value_end],
                kept,
            );
            start = value_end;
            entry
        })
    }

    /// Every entry, in order: (internal key, value).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.all().map(|(k, v, _)| (k, v))
    }

    /// The entries the filter kept.
    fn kept(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.all().filter(|e| e.2).map(|(k, v, _)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_of_many_runs_shares_out_a_bounded_readahead() {
        let full = 2 << 20;
        let fixed = ReadaheadSize::Fixed(full);
        // Up to the window count, every run reads ahead in full.
        for runs in [1, 2, MERGE_READAHEAD_WINDOWS] {
            assert_eq!(merge_readahead(fixed, runs), fixed);
        }
        // Beyond it, the windows together stay within that many full ones.
        for runs in [MERGE_READAHEAD_WINDOWS + 1, 30, 81, 200] {
            let ReadaheadSize::Fixed(each) = merge_readahead(fixed, runs) else {
                panic!("a fixed readahead stays fixed");
            };
            assert!(each < full, "{runs} runs: {each}");
            assert!(
                each * runs <= full * MERGE_READAHEAD_WINDOWS || each == MIN_MERGE_READAHEAD,
                "{runs} runs: {each} each"
            );
        }
        // Never below the floor, and a readahead already below the floor is left as it is.
        assert_eq!(
            merge_readahead(fixed, 10_000),
            ReadaheadSize::Fixed(MIN_MERGE_READAHEAD)
        );
        let small = ReadaheadSize::Fixed(16 << 10);
        assert_eq!(merge_readahead(small, 100), small);
        assert_eq!(merge_readahead(ReadaheadSize::Off, 100), ReadaheadSize::Off);
    }

    /// Removes every put whose value starts with `x`.
    #[derive(Debug)]
    struct RemoveX;

    impl CompactionFilter for RemoveX {
        fn name(&self) -> &str {
            "remove-x"
        }
        fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
            if value.starts_with(b"x") {
                FilterDecision::Remove
            } else {
                FilterDecision::Keep
            }
        }
    }

    fn filtered(filter: &mut MergeFilter, key: &[u8], seq: SeqNo, value: &[u8]) -> Option<String> {
        let ikey = key::internal_key(key, seq, ValueKind::Put);
        if !filter.keep(&ikey) {
            return None;
        }
        Some(match filter.apply_user_filter(&ikey, value) {
            Filtered::Unchanged => "kept".to_string(),
            Filtered::Tombstone(t) => {
                let (k, s, kind) = key::parse_internal_key(&t).unwrap();
                assert_eq!((k, s, kind), (key, seq, ValueKind::Delete));
                "tombstone".to_string()
            }
            Filtered::Dropped => "dropped".to_string(),
            Filtered::Changed(v) => format!("changed to {v:?}"),
        })
    }

    #[test]
    fn the_user_filter_sees_only_what_no_snapshot_sees_and_never_uncovers_older_data() {
        let remove_x = || Some(Arc::new(RemoveX) as Arc<dyn CompactionFilter>);
        // No snapshot, nothing below: a removed put goes entirely.
        let mut f =
            MergeFilter::new(vec![], OlderTables::default()).with_user_filter(remove_x(), 1, 0);
        assert_eq!(filtered(&mut f, b"a", 9, b"x1").as_deref(), Some("dropped"));
        // Its older versions in the merge are gone with it (the same stripe).
        assert_eq!(filtered(&mut f, b"a", 5, b"v"), None);
        assert_eq!(filtered(&mut f, b"b", 9, b"v").as_deref(), Some("kept"));
        assert_eq!(f.filtered, (1, 0));

        // A snapshot at 7: the newest version (9) is above it and filtered, into a tombstone
        // because the snapshot keeps version 5; version 5 is the snapshot's and never filtered.
        let mut f =
            MergeFilter::new(vec![7], OlderTables::default()).with_user_filter(remove_x(), 1, 0);
        assert_eq!(
            filtered(&mut f, b"a", 9, b"x1").as_deref(),
            Some("tombstone")
        );
        assert_eq!(filtered(&mut f, b"a", 5, b"x0").as_deref(), Some("kept"));

        // Something below may hold the key: a tombstone hides it.
        let version =
            strata_meta::Version::parse("L2:\n  run 1:\n    table 1 [a, z] size=1K\n").unwrap();
        let older = OlderTables::below(&version, 1, strata_policy::OutputRun::New, &[]);
        let mut f = MergeFilter::new(vec![], older).with_user_filter(remove_x(), 1, 0);
        assert_eq!(
            filtered(&mut f, b"m", 3, b"xy").as_deref(),
            Some("tombstone")
        );

        // Versions a held memtable may hold too are left alone.
        let mut f =
            MergeFilter::new(vec![], OlderTables::default()).with_user_filter(remove_x(), 1, 9);
        assert_eq!(filtered(&mut f, b"a", 9, b"x1").as_deref(), Some("kept"));
        assert_eq!(
            filtered(&mut f, b"b", 10, b"x1").as_deref(),
            Some("dropped")
        );

        // Without a user filter nothing changes, and flushes' filters have none.
        let mut f = MergeFilter::new(vec![], OlderTables::default());
        assert!(!f.may_change_entries());
        assert_eq!(filtered(&mut f, b"a", 9, b"x1").as_deref(), Some("kept"));
    }
}
