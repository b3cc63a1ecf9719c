//! Writing a merge's output: cut into tables where the shared [`Cutter`] says, keeping input
//! blocks unchanged where the shared [`Preserver`] allows (the engine's `OutputWriter` does the
//! same with real tables).

use crate::keys::{key_bytes, key_of};
use crate::size::{SizedTable, TableEstimate, TableSizer};
use strata_exec::preserve::Preserver;
use strata_exec::range_del::{successor, Fragments, RangeTombstone};
use strata_exec::Cutter;
use strata_meta::{BlockMeta, Bytes, SeqRange};
use strata_policy::{Compression, PlanOutput};

/// A finished output table: as sized, the entries it holds, and its range tombstones.
pub(crate) type WrittenTable = (SizedTable, Vec<u64>, Vec<RangeTombstone<Bytes>>);

/// Cuts entries (in key order) into tables sized by a [`TableSizer`].
pub(crate) struct TableWriter<'a> {
    sizer: &'a dyn TableSizer,
    cutter: Cutter<u64>,
    bloom_bits_per_key: f64,
    compression: Option<Compression>,
    seqnos: SeqRange,
    preserver: Option<Preserver>,
    table: Option<Box<dyn TableEstimate>>,
    /// Entries of the open table.
    entries: Vec<u64>,
    /// Blocks of the open table already told to the preserver.
    reported: usize,
    last_key: Option<u64>,
    done: Vec<WrittenTable>,
    /// The range tombstones to write, each table taking its piece (as the engine's writer).
    range_tombstones: Fragments<Bytes>,
    /// Where the open table's piece starts: after the last key of the table before.
    range_lower: Option<Bytes>,
}

impl<'a> TableWriter<'a> {
    /// A writer of `output`'s tables, cut as its cut rule says; `inputs` are the merge's inputs
    /// (smallest key, bytes) for the cutter's projection.
    pub(crate) fn new(
        sizer: &'a dyn TableSizer,
        output: &PlanOutput,
        seqnos: SeqRange,
        inputs: &[(u64, u64)],
        preserver: Option<Preserver>,
    ) -> Self {
        let cut = &output.cut;
        let boundaries = cut
            .boundaries
            .iter()
            .map(|b| crate::keys::key_at_or_after(b))
            .collect();
        TableWriter {
            sizer,
            cutter: Cutter::new(cut, boundaries, inputs.iter().map(|(k, s)| (k, *s))),
            bloom_bits_per_key: output.bloom_bits_per_key,
            compression: output.compression,
            seqnos,
            preserver,
            table: None,
            entries: Vec::new(),
            reported: 0,
            last_key: None,
            done: Vec::new(),
            range_tombstones: Fragments::default(),
            range_lower: None,
        }
    }

    /// Writes `tombstones` into the tables, each the piece from the key after the last key of
    /// the table before it up to the key after its own last key (the last table: to the end),
    /// as the engine's `OutputWriter` does.
    pub(crate) fn with_range_tombstones(mut self, tombstones: Fragments<Bytes>) -> Self {
        self.range_tombstones = tombstones;
        self
    }

    /// The key of the last entry written.
    pub(crate) fn last_key(&self) -> Option<u64> {
        self.last_key
    }

    /// Cuts a table before `key` if the cutter says so, and makes sure one is open.
    fn open_table_for(&mut self, key: u64) -> &mut Box<dyn TableEstimate> {
        if self
            .cutter
            .cut_before(&key, self.table.as_ref().map(|t| t.size()))
        {
            self.finish_table(false);
        }
        let (sizer, bloom, codec, seqnos) = (
            self.sizer,
            self.bloom_bits_per_key,
            self.compression,
            self.seqnos,
        );
        self.table
            .get_or_insert_with(|| sizer.start_table(bloom, codec, seqnos))
    }

    /// Writes `entry`.
    pub(crate) fn add(&mut self, entry: u64) {
        self.open_table_for(key_of(entry)).add(entry);
        self.entries.push(entry);
        self.last_key = Some(key_of(entry));
        self.report_blocks();
    }

    /// Keeps `block`, holding `entries`, if the preserver allows; false (nothing done) if not.
    /// The caller has checked the keys and that the merge keeps every entry.
    pub(crate) fn try_keep(&mut self, block: &BlockMeta, entries: &[u64]) -> bool {
        let (Some(&first), Some(&last)) = (entries.first(), entries.last()) else {
            return false;
        };
        let open = self.table.as_ref().map_or(0, |t| t.open_block_bytes());
        if !self
            .preserver
            .as_ref()
            .is_some_and(|p| p.may_preserve(open, block.size, block.file))
        {
            return false;
        }
        self.open_table_for(key_of(first)).add_kept(block, entries);
        self.entries.extend_from_slice(entries);
        self.last_key = Some(key_of(last));
        self.report_blocks();
        true
    }

    fn report_blocks(&mut self) {
        if let (Some(p), Some(t)) = (&mut self.preserver, &self.table) {
            for i in self.reported..t.finished_blocks() {
                p.emitted(t.finished_block_size(i));
            }
            self.reported = t.finished_blocks();
        }
    }

    /// Finishes the open table; `last` when no table follows it.
    fn finish_table(&mut self, last: bool) {
        let mut pieces = Vec::new();
        if !self.range_tombstones.is_empty() {
            if last && self.table.is_none() && self.done.is_empty() {
                // Only range tombstones: they still need a table.
                self.table = Some(self.sizer.start_table(
                    self.bloom_bits_per_key,
                    self.compression,
                    self.seqnos,
                ));
            }
            if let Some(t) = &mut self.table {
                let upper = match (last, self.last_key) {
                    (false, Some(k)) => Some(Bytes::from(successor(&key_bytes(k)))),
                    _ => None,
                };
                for piece in self
                    .range_tombstones
                    .clipped(self.range_lower.as_ref(), upper.as_ref())
                {
                    t.add_range_tombstone(&piece);
                    pieces.push(piece);
                }
                self.range_lower = upper;
            }
        }
        if let Some(t) = self.table.take() {
            let sized = t.finish();
            if let Some(p) = &mut self.preserver {
                for b in sized.blocks.iter().skip(self.reported) {
                    p.emitted(b.size);
                }
            }
            self.reported = 0;
            self.done
                .push((sized, std::mem::take(&mut self.entries), pieces));
        }
    }

    /// The finished tables.
    pub(crate) fn finish(mut self) -> Vec<WrittenTable> {
        self.finish_table(true);
        self.done
    }
}
