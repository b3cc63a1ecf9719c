//! Sizing simulated tables: how many bytes a table of given entries occupies, and where its
//! data blocks end.

use crate::keys::is_tombstone;
use strata_meta::{BlockMeta, SeqRange, TableId};

/// How many bytes a table of given entries occupies. The default counts key and value bytes
/// only; the engine's tests plug in its real table encoder, so both cut and size tables alike.
pub trait TableSizer: Send + Sync + std::fmt::Debug {
    /// Starts sizing a table built with `bloom_bits_per_key` whose sequence numbers span `seqnos`.
    fn start_table(&self, bloom_bits_per_key: f64, seqnos: SeqRange) -> Box<dyn TableEstimate>;
}

/// The running size of one table being sized.
pub trait TableEstimate {
    /// Adds the next entry (in key order; see [`crate::key_of`]).
    fn add(&mut self, entry: u64);
    /// Refers to `block`, a data block of another table holding `entries`, instead of writing
    /// it (a block-preserving merge keeps it); the open block ends first.
    fn add_kept(&mut self, block: &BlockMeta, entries: &[u64]);
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

/// Sizes a table as the sum of its entries' key and value bytes (no format overhead).
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
            block.offset = self.own_bytes;
            self.own_bytes += block.size;
            self.blocks.push(block);
        }
    }
}

impl TableEstimate for RawEstimate {
    fn add(&mut self, entry: u64) {
        let bytes = self.sizer.entry_bytes(entry);
        self.weighted += bytes as f64 * self.sizer.weight;
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
    fn start_table(&self, _bloom_bits_per_key: f64, _seqnos: SeqRange) -> Box<dyn TableEstimate> {
        Box::new(RawEstimate {
            sizer: *self,
            weighted: 0.0,
            blocks: Vec::new(),
            open: SizedBlock::default(),
            own_bytes: 0,
        })
    }
}
