//! Sizing simulated tables: how many bytes a table of given entries occupies, and where its
//! data blocks end.

use crate::keys::is_tombstone;
use strata_exec::range_del::RangeTombstone;
use strata_meta::{BlockMeta, Bytes, SeqRange, TableId};
use strata_policy::Compression;

/// How many bytes a table of given entries occupies. The default counts key and value bytes
/// only; the engine's tests plug in its real table encoder, so both cut and size tables alike.
pub trait TableSizer: Send + Sync + std::fmt::Debug {
    /// Starts sizing a table built with `bloom_bits_per_key` and the data-block codec
    /// `compression` (`None`: the simulator's default, none), whose sequence numbers span
    /// `seqnos`.
    fn start_table(
        &self,
        bloom_bits_per_key: f64,
        compression: Option<Compression>,
        seqnos: SeqRange,
    ) -> Box<dyn TableEstimate>;
}

/// The running size of one table being sized.
pub trait TableEstimate {
    /// Adds the next entry (in key order; see [`crate::key_of`]).
    fn add(&mut self, entry: u64);
    /// Refers to `block`, a data block of another table holding `entries`, instead of writing
    /// it (a block-preserving merge keeps it); the open block ends first.
    fn add_kept(&mut self, block: &BlockMeta, entries: &[u64]);
    /// Adds a range tombstone the table holds, at any time before [`TableEstimate::finish`]
    /// (the output writer adds a table's piece of them as it finishes it).
    fn add_range_tombstone(&mut self, tombstone: &RangeTombstone<Bytes>);
    /// The size so far, as the executor's output cutter sees it (kept blocks included).
    fn size(&self) -> u64;
    /// Bytes the open data block would occupy if it ended now, as block preservation compares
    /// them; 0 when none is open (or blocks are not cut).
    fn open_block_bytes(&self) -> u64;
    /// Data blocks finished so far.
    fn finished_blocks(&self) -> usize;
    /// Bytes of finished block `i`.
    fn finished_block_size(&self, i: usize) -> u64;
    /// The finished table.
    fn finish(self: Box<Self>) -> SizedTable;
}

/// A finished table as its sizer saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SizedTable {
    /// Bytes of the table's data: its own file and the kept blocks it refers to.
    pub size: u64,
    /// Its data blocks in key order, when the sizer cuts blocks (empty otherwise); the
    /// simulator turns them into [`TableMeta::blocks`].
    pub blocks: Vec<SizedBlock>,
}

/// One data block of a [`SizedTable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SizedBlock {
    /// Entries in the block (consecutive, following the previous block's).
    pub entries: u64,
    /// Bytes the block occupies.
    pub size: u64,
    /// Offset of the block in its file.
    pub offset: u64,
    /// The file holding the block, for a kept block; `None` for the table's own.
    pub file: Option<TableId>,
}

/// Compressed over uncompressed bytes of a data block, per codec: what the default sizer
/// multiplies a compressed table's blocks by. Measure them on the workload's data (the engine's
/// tables record raw and stored bytes); 1.0 is data that does not compress, as random values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompressionRatios {
    /// LZ4's ratio.
    pub lz4: f64,
    /// Zstandard's ratio (one for every level).
    pub zstd: f64,
    /// Zstandard's with a dictionary per table, its bytes included (one for every level and
    /// dictionary size).
    pub zstd_dictionary: f64,
}

impl Default for CompressionRatios {
    fn default() -> Self {
        CompressionRatios {
            lz4: 1.0,
            zstd: 1.0,
            zstd_dictionary: 1.0,
        }
    }
}

impl CompressionRatios {
    /// The ratio of `codec` (`None`, no compression: 1).
    pub fn of(&self, codec: Option<Compression>) -> f64 {
        match codec {
            None | Some(Compression::None) => 1.0,
            Some(Compression::Lz4) => self.lz4,
            Some(Compression::Zstd {
                max_dict_bytes: 0, ..
            }) => self.zstd,
            Some(Compression::Zstd { .. }) => self.zstd_dictionary,
        }
    }
}

/// Sizes a table as the sum of its entries' key and value bytes (no format overhead), times the
/// ratio of the table's codec.
#[derive(Clone, Copy, Debug)]
pub struct RawSizer {
    /// Key bytes per entry.
    pub key_size: u64,
    /// Value bytes per put.
    pub value_size: u64,
    /// Cut data blocks as the engine does: a block ends with the entry that brings it to this
    /// many bytes. `None` cuts none.
    pub block_size: Option<u64>,
    /// Entries each simulated entry stands for: 1 in the exact simulator; in scale mode
    /// ([`crate::SimConfig::scale_keys`]) about the sample's one-in-N, as the merge measured it.
    pub weight: f64,
    /// What each codec shrinks data blocks to.
    pub ratios: CompressionRatios,
}

impl RawSizer {
    /// Bytes of one entry: key and value, or the key alone for a tombstone.
    pub fn entry_bytes(&self, entry: u64) -> u64 {
        if is_tombstone(entry) {
            self.key_size
        } else {
            self.key_size + self.value_size
        }
    }
}

struct RawEstimate {
    sizer: RawSizer,
    /// The ratio of the table's codec.
    ratio: f64,
    /// The weighted bytes so far, unrounded (whole at weight 1).
    weighted: f64,
    /// Finished blocks, and the open one (with `block_size`).
    blocks: Vec<SizedBlock>,
    open: SizedBlock,
    /// Bytes of the table's own blocks so far (where the open one starts).
    own_bytes: u64,
}

impl RawEstimate {
    fn end_open_block(&mut self) {
        if self.open.entries > 0 {
            let mut block = std::mem::take(&mut self.open);
            // Blocks are cut by their uncompressed bytes, as the engine cuts them, and stored
            // compressed.
            block.size = (block.size as f64 * self.ratio + 0.5) as u64;
            block.offset = self.own_bytes;
            self.own_bytes += block.size;
            self.blocks.push(block);
        }
    }
}

impl TableEstimate for RawEstimate {
    fn add(&mut self, entry: u64) {
        let bytes = self.sizer.entry_bytes(entry);
        self.weighted += bytes as f64 * self.sizer.weight * self.ratio;
        if let Some(block_size) = self.sizer.block_size {
            self.open.entries += 1;
            self.open.size += bytes;
            if self.open.size >= block_size {
                self.end_open_block();
            }
        }
    }
    fn add_kept(&mut self, block: &BlockMeta, _entries: &[u64]) {
        self.end_open_block();
        self.weighted += block.size as f64;
        self.blocks.push(SizedBlock {
            entries: block.entries,
            size: block.size,
            offset: block.offset,
            file: Some(block.file),
        });
    }
    fn add_range_tombstone(&mut self, tombstone: &RangeTombstone<Bytes>) {
        // Its keys and its sequence number, as the engine's range-deletion block holds them.
        self.weighted += (tombstone.start.len() + tombstone.end.len() + 8) as f64;
    }
    fn size(&self) -> u64 {
        // Rounded by adding a half: `f64::round` is a library call, and the cutter asks at
        // every entry.
        (self.weighted + 0.5) as u64
    }
    fn open_block_bytes(&self) -> u64 {
        self.open.size
    }
    fn finished_blocks(&self) -> usize {
        self.blocks.len()
    }
    fn finished_block_size(&self, i: usize) -> u64 {
        self.blocks.get(i).map_or(0, |b| b.size)
    }
    fn finish(mut self: Box<Self>) -> SizedTable {
        self.end_open_block();
        SizedTable {
            size: self.size(),
            blocks: self.blocks,
        }
    }
}

impl TableSizer for RawSizer {
    fn start_table(
        &self,
        _bloom_bits_per_key: f64,
        compression: Option<Compression>,
        _seqnos: SeqRange,
    ) -> Box<dyn TableEstimate> {
        Box::new(RawEstimate {
            sizer: *self,
            ratio: self.ratios.of(compression),
            weighted: 0.0,
            blocks: Vec::new(),
            open: SizedBlock::default(),
            own_bytes: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_table_is_its_codecs_ratio_of_the_raw_bytes_and_cut_by_raw_bytes() {
        let sizer = RawSizer {
            key_size: 16,
            value_size: 84,
            block_size: Some(1000),
            weight: 1.0,
            ratios: CompressionRatios {
                lz4: 0.5,
                zstd: 0.25,
                zstd_dictionary: 0.2,
            },
        };
        let seqnos = SeqRange {
            smallest: 1,
            largest: 1,
        };
        let size = |codec: Option<Compression>| {
            let mut table = sizer.start_table(10.0, codec, seqnos);
            // Keys 0..100, puts of 100 bytes each.
            for key in 0..100u64 {
                table.add(crate::keys::put(key));
            }
            table.finish()
        };
        let plain = size(None);
        assert_eq!(plain.size, 10_000);
        assert_eq!(size(Some(Compression::None)), plain);
        let lz4 = size(Some(Compression::Lz4));
        let zstd = size(Some(Compression::zstd(19)));
        assert_eq!((lz4.size, zstd.size), (5_000, 2_500));
        // The same blocks, each stored at the ratio.
        assert_eq!(lz4.blocks.len(), plain.blocks.len());
        assert!(lz4.blocks.iter().all(|b| b.size == 500), "{:?}", lz4.blocks);
        assert_eq!(lz4.blocks[1].offset, 500);
    }
}
