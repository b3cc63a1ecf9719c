//! A table's Zstandard dictionary ([`super::Compression::Zstd`]'s `max_dict_bytes`): trained on
//! the table's own first data blocks, which its builder holds back until then, and stored as a
//! meta block that its reader loads at open. Blocks compressed with it have their own type byte,
//! so a kept block (a block-preserving merge's) is always read with its own file's dictionary.
//!
//! As RocksDB's `zstd_max_train_bytes`, training reads up to [`ZSTD_TRAIN_FACTOR`] times the
//! dictionary's size of blocks; a table that ends first trains on all it has, and one smaller
//! than [`MIN_TRAIN_FACTOR`] times the dictionary trains none (its blocks are compressed
//! without one).

use strata_policy::ZSTD_TRAIN_FACTOR;

/// A table trains a dictionary only from this many times the dictionary's bytes of blocks:
/// zstd's trainer needs samples well beyond the dictionary it writes, and below this a table
/// would store a dictionary about as large as what it could save.
pub(super) const MIN_TRAIN_FACTOR: usize = 8;

/// Data blocks held back until the dictionary is trained, with what indexing each needs.
#[derive(Debug)]
pub(super) struct PendingBlocks {
    max_dict_bytes: usize,
    /// The raw blocks, back to back.
    data: Vec<u8>,
    blocks: Vec<PendingBlock>,
}

/// One held-back data block.
#[derive(Debug)]
pub(super) struct PendingBlock {
    /// Its bytes in [`PendingBlocks`]'s data.
    pub(super) len: usize,
    pub(super) entries: u64,
    /// Its first user key and last internal key, as its index entry and range need them.
    pub(super) first_user_key: Vec<u8>,
    pub(super) last_key: Vec<u8>,
}

impl PendingBlocks {
    /// Holds blocks for a dictionary of `max_dict_bytes` (more than 0).
    pub(super) fn new(max_dict_bytes: u32) -> Self {
        PendingBlocks {
            max_dict_bytes: max_dict_bytes as usize,
            data: Vec::new(),
            blocks: Vec::new(),
        }
    }

    /// Holds back `raw`, a finished data block.
    pub(super) fn push(
        &mut self,
        raw: &[u8],
        entries: u64,
        first_user_key: &[u8],
        last_key: &[u8],
    ) {
        self.data.extend_from_slice(raw);
        self.blocks.push(PendingBlock {
            len: raw.len(),
            entries,
            first_user_key: first_user_key.to_vec(),
            last_key: last_key.to_vec(),
        });
    }

    /// Whether enough is held to train on.
    pub(super) fn is_full(&self) -> bool {
        self.data.len() >= self.max_dict_bytes * ZSTD_TRAIN_FACTOR as usize
    }

    /// Bytes held, uncompressed.
    pub(super) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Blocks held.
    pub(super) fn len(&self) -> usize {
        self.blocks.len()
    }

    /// A dictionary trained on the blocks held, `None` when they are too few or zstd could not
    /// train one (the table is then written without).
    pub(super) fn train(&self) -> Option<Vec<u8>> {
        if self.data.len() < self.max_dict_bytes * MIN_TRAIN_FACTOR {
            return None;
        }
        let sizes: Vec<usize> = self.blocks.iter().map(|b| b.len).collect();
        zstd::dict::from_continuous(&self.data, &sizes, self.max_dict_bytes).ok()
    }

    /// The blocks held, in order, with their bytes.
    pub(super) fn into_blocks(self) -> (Vec<u8>, Vec<PendingBlock>) {
        (self.data, self.blocks)
    }
}
