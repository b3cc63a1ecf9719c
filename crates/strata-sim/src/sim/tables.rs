//! Output tables: cutting a merge's entries into tables with ids, and installing the versions
//! that hold them (storing and forgetting tables' key sets).

use super::ttl::InputAges;
use super::Simulator;
use crate::keys::{is_tombstone, key_bytes, key_of};
use crate::output::{TableWriter, WrittenTable};
use crate::size::{SizedBlock, SizedTable, TableSizer};
use std::sync::Arc;
use strata_exec::range_del::{table_key_range, Fragments, RangeTombstone};
use strata_meta::{BlockMeta, Bytes, SeqRange, TableId, TableMeta, Version, VersionEdit};
use strata_policy::PlanOutput;

/// The [`TableMeta::blocks`] of table `file` holding `entries` cut into `blocks` (`None` when
/// the sizer cut none).
fn block_metas(file: TableId, entries: &[u64], blocks: &[SizedBlock]) -> Option<Arc<[BlockMeta]>> {
    if blocks.is_empty() {
        return None;
    }
    let mut start = 0usize;
    let mut metas = Vec::with_capacity(blocks.len());
    for block in blocks {
        let end = (start + block.entries as usize).min(entries.len());
        let (Some(&first), Some(&last)) = (entries.get(start), entries[..end].last()) else {
            break;
        };
        metas.push(BlockMeta {
            smallest: key_bytes(key_of(first)),
            largest: key_bytes(key_of(last)),
            size: block.size,
            entries: block.entries,
            file: block.file.unwrap_or(file),
            offset: block.offset,
        });
        start = end;
    }
    Some(metas.into())
}

impl Simulator {
    /// Cuts `merged` into tables as `output`'s cut rule says ([`Cutter`]), sizing them with the
    /// configured sizer, with `output`'s Bloom bits and codec. `inputs` are the merge's inputs (smallest key, bytes) for the cutter's projection.
    /// `ranges` are the range tombstones the output keeps, each table taking its piece.
    /// `seqnos` are the inputs' sequence numbers: with a TTL, `ages` date each entry and each
    /// table spans its own entries' numbers, as in the engine; without, every table spans
    /// `seqnos`.
    #[allow(clippy::too_many_arguments)] // One call per kind of job; a struct would be read once.
    pub(super) fn write_tables(
        &mut self,
        merged: &[u64],
        (sizer, weight): (Arc<dyn TableSizer>, f64),
        output: &PlanOutput,
        seqnos: SeqRange,
        ages: Option<&InputAges>,
        inputs: &[(u64, u64)],
        ranges: Fragments<Bytes>,
    ) -> Vec<(TableMeta, Arc<[u64]>)> {
        let bloom_bits_per_key = output.bloom_bits_per_key;
        let mut writer = TableWriter::new(sizer.as_ref(), output, seqnos, inputs, None)
            .with_range_tombstones(ranges);
        for &entry in merged {
            writer.add(entry);
        }
        self.new_tables(writer.finish(), weight, bloom_bits_per_key, seqnos, ages)
    }

    /// Output tables with ids, from what a writer finished (dated as
    /// [`Simulator::write_tables`] says).
    pub(super) fn new_tables(
        &mut self,
        written: Vec<WrittenTable>,
        weight: f64,
        bloom_bits_per_key: f64,
        seqnos: SeqRange,
        ages: Option<&InputAges>,
    ) -> Vec<(TableMeta, Arc<[u64]>)> {
        written
            .into_iter()
            .map(|(sized, entries, ranges)| {
                let id = TableId(self.next_table);
                self.next_table += 1;
                let seqnos = self.date_table(id, &entries, &ranges, ages, seqnos);
                self.new_table(
                    id,
                    &entries,
                    ranges,
                    sized,
                    weight,
                    bloom_bits_per_key,
                    seqnos,
                )
            })
            .collect()
    }

    /// Finished output table `id` holding `entries` and `ranges` (not both empty). Its key
    /// range covers both, as the engine's table builder makes it.
    #[allow(clippy::too_many_arguments)] // The parts of one table, from one caller.
    fn new_table(
        &mut self,
        id: TableId,
        entries: &[u64],
        ranges: Vec<RangeTombstone<Bytes>>,
        sized: SizedTable,
        weight: f64,
        bloom_bits_per_key: f64,
        seqnos: SeqRange,
    ) -> (TableMeta, Arc<[u64]>) {
        self.metrics.tables_written += 1;
        let entry_bounds = match (entries.first(), entries.last()) {
            (Some(&first), Some(&last)) => {
                Some((key_bytes(key_of(first)), key_bytes(key_of(last))))
            }
            _ => None,
        };
        let (smallest, largest) =
            table_key_range(entry_bounds, &ranges).unwrap_or_else(|| (key_bytes(0), key_bytes(0)));
        let range_deletions = ranges.len() as u64;
        if !ranges.is_empty() {
            self.table_ranges.insert(id, Arc::from(ranges));
        }
        let meta = TableMeta {
            id,
            smallest,
            largest,
            size: sized.size,
            entries: (entries.len() as f64 * weight).round() as u64,
            tombstones: (entries.iter().filter(|&&e| is_tombstone(e)).count() as f64 * weight)
                .round() as u64,
            range_deletions,
            seqnos,
            bloom_bits_per_key,
            blocks: block_metas(id, entries, &sized.blocks),
        };
        (meta, Arc::from(entries))
    }

    /// Installs a new version: stores new tables' contents and forgets deleted ones, and counts
    /// the data blocks new tables wrote (a moved table is deleted and added by the same edit).
    pub(super) fn install(
        &mut self,
        version: Version,
        edit: &VersionEdit,
        new_arrays: Vec<Arc<[u64]>>,
    ) {
        let mut holders = self.holders.get_mut();
        for (added, array) in edit.added.iter().zip(new_arrays) {
            self.kept_keys += array.len() as u64;
            if let Some(h) = holders.as_deref_mut() {
                h.add(&array);
            }
            if let Some(old) = self.tables.insert(added.table.id, array) {
                self.kept_keys -= old.len() as u64;
                if let Some(h) = holders.as_deref_mut() {
                    h.remove(&old);
                }
            }
        }
        edit.count_blocks(
            &mut self.metrics.blocks_written_per_level,
            &mut self.metrics.blocks_preserved_per_level,
        );
        self.version = version;
        for d in &edit.deleted {
            if self.version.table_location(d.table).is_none() {
                self.table_ranges.remove(&d.table);
                self.table_seqnos.remove(&d.table);
                if let Some(old) = self.tables.remove(&d.table) {
                    self.kept_keys -= old.len() as u64;
                    if let Some(h) = self.holders.get_mut() {
                        h.remove(&old);
                    }
                }
            }
        }
        if let Some(budget) = self.cfg.scale_keys {
            // One key in 2^40 is as far as halving goes: a budget of a handful of keys cannot
            // be met by keys whose hash happens to be near zero.
            while self.kept_keys + self.buffer.len() as u64 > budget && self.sample_one_in < 1 << 40
            {
                self.halve_sample();
            }
        }
        if let Some(files) = self.files.as_mut() {
            files.installed(&self.version, edit);
        }
        self.metrics.max_tables = self
            .metrics
            .max_tables
            .max(self.version.table_count() as u64);
        self.metrics.max_sorted_runs = self
            .metrics
            .max_sorted_runs
            .max(self.version.run_count() as u64);
    }
}
