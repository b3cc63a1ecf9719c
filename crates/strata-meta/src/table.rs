//! Table (sorted string table) metadata.

use crate::key::KeyRange;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A sequence number: the position of a write in the global write order.
pub type SeqNo = u64;

/// Identifies a table; in the engine it is also the table file's number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableId(pub u64);

/// Identifies a sorted run. Runs keep their id while tables are added to and removed from them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RunId(pub u64);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An inclusive range of sequence numbers.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SeqRange {
    /// Smallest sequence number present.
    pub smallest: SeqNo,
    /// Largest sequence number present.
    pub largest: SeqNo,
}

impl SeqRange {
    /// The smallest range covering both.
    pub fn union(self, other: SeqRange) -> SeqRange {
        SeqRange {
            smallest: self.smallest.min(other.smallest),
            largest: self.largest.max(other.largest),
        }
    }
}

/// Metadata of one data block inside a table: what block-granular policies (ChooseBest windows,
/// block-preserving merges) need to see without reading data.
///
/// `file` names the table file that physically holds the block. It equals the owning table's id
/// for blocks the table wrote itself; a different id means the table reuses a block that already
/// exists in another file (a block-preserving merge kept it), so that file must stay alive while
/// any table refers to it ([`crate::Version::retained_files`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockMeta {
    /// Smallest key in the block.
    pub smallest: Bytes,
    /// Largest key in the block.
    pub largest: Bytes,
    /// Bytes the block occupies in `file` (in the engine, its stored contents and 5-byte
    /// trailer).
    pub size: u64,
    /// Number of entries in the block.
    pub entries: u64,
    /// The table file that holds the block.
    pub file: TableId,
    /// Byte offset of the block inside `file`.
    pub offset: u64,
}

/// Metadata of one table: everything a compaction policy may look at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableMeta {
    /// The table's id.
    pub id: TableId,
    /// Smallest user key in the table.
    pub smallest: Bytes,
    /// Largest user key in the table.
    pub largest: Bytes,
    /// Bytes of the table's data: its own file plus the blocks it refers to in other files
    /// ([`TableMeta::file_bytes`] is its own file alone). Level sizes and policies count this.
    pub size: u64,
    /// Number of entries (puts and tombstones).
    pub entries: u64,
    /// Number of tombstones among the entries.
    pub tombstones: u64,
    /// Range tombstones the table holds besides its entries (fragments: one per piece of key
    /// range and sequence number). Its key range includes their keys, ends counted in.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub range_deletions: u64,
    /// Range of sequence numbers of the entries.
    pub seqnos: SeqRange,
    /// Bloom filter bits per key the table was built with (0 = no filter).
    pub bloom_bits_per_key: f64,
    /// Per-block key ranges, when the producer recorded them. JSON holds them in a compact
    /// form ([`crate::block_list`]).
    #[serde(with = "crate::block_list")]
    pub blocks: Option<Arc<[BlockMeta]>>,
}

impl Eq for TableMeta {}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TableMeta {
    /// A table with the given id, key bounds and size; the other fields are zero or empty.
    pub fn new(id: u64, smallest: impl Into<Bytes>, largest: impl Into<Bytes>, size: u64) -> Self {
        TableMeta {
            id: TableId(id),
            smallest: smallest.into(),
            largest: largest.into(),
            size,
            entries: 0,
            tombstones: 0,
            range_deletions: 0,
            seqnos: SeqRange::default(),
            bloom_bits_per_key: 0.0,
            blocks: None,
        }
    }

    /// The table's key range.
    pub fn key_range(&self) -> KeyRange {
        KeyRange {
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
        }
    }

    /// Data blocks the table wrote into its own file, as opposed to blocks it refers to in other
    /// files; 0 when its blocks are not recorded.
    pub fn blocks_written(&self) -> u64 {
        self.blocks.as_deref().map_or(0, |blocks| {
            blocks.iter().filter(|b| b.file == self.id).count() as u64
        })
    }

    /// Data blocks the table refers to in other files (blocks a block-preserving merge kept
    /// instead of rewriting them).
    pub fn blocks_referenced(&self) -> u64 {
        self.external_blocks().count() as u64
    }

    /// Bytes of the blocks the table refers to in other files.
    pub fn referenced_bytes(&self) -> u64 {
        self.external_blocks().map(|b| b.size).sum()
    }

    /// Bytes of the table's own file: [`TableMeta::size`] less the blocks it refers to
    /// elsewhere. What writing the table cost, and what deleting its file frees.
    pub fn file_bytes(&self) -> u64 {
        self.size.saturating_sub(self.referenced_bytes())
    }

    /// The other files whose blocks the table refers to, each with the bytes it refers to
    /// there, in file order.
    pub fn referenced_files(&self) -> Vec<(TableId, u64)> {
        let mut files: Vec<(TableId, u64)> = Vec::new();
        for b in self.external_blocks() {
            match files.iter_mut().find(|(f, _)| *f == b.file) {
                Some((_, bytes)) => *bytes += b.size,
                None => files.push((b.file, b.size)),
            }
        }
        files.sort_unstable_by_key(|&(f, _)| f);
        files
    }

    fn external_blocks(&self) -> impl Iterator<Item = &BlockMeta> {
        self.blocks
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(move |b| b.file != self.id)
    }

    /// Whether the table's keys overlap `range`.
    pub fn overlaps(&self, range: &KeyRange) -> bool {
        self.smallest <= range.largest && range.smallest <= self.largest
    }

    /// Checks the table's own consistency; the message names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.smallest > self.largest {
            return Err(format!(
                "table {}: smallest key is after largest key",
                self.id
            ));
        }
        if self.tombstones > self.entries {
            return Err(format!(
                "table {}: {} tombstones but only {} entries",
                self.id, self.tombstones, self.entries
            ));
        }
        if self.seqnos.smallest > self.seqnos.largest {
            return Err(format!("table {}: seqno range is reversed", self.id));
        }
        if !self.bloom_bits_per_key.is_finite() || self.bloom_bits_per_key < 0.0 {
            return Err(format!(
                "table {}: bloom bits per key {} is not a finite non-negative number",
                self.id, self.bloom_bits_per_key
            ));
        }
        if let Some(blocks) = &self.blocks {
            if blocks.is_empty() {
                // An empty list would print like "no block metadata" and read back as `None`.
                return Err(format!(
                    "table {}: block metadata is present but empty",
                    self.id
                ));
            }
            let mut previous: Option<&BlockMeta> = None;
            for block in blocks.iter() {
                if block.smallest > block.largest {
                    return Err(format!(
                        "table {}: a block's key range is reversed",
                        self.id
                    ));
                }
                if block.smallest < self.smallest || block.largest > self.largest {
                    return Err(format!(
                        "table {}: a block lies outside the table's key range",
                        self.id
                    ));
                }
                // Versions of one key may straddle two blocks, so neighbours may share a key.
                if let Some(p) = previous {
                    if p.largest > block.smallest {
                        return Err(format!(
                            "table {}: blocks overlap or are out of order",
                            self.id
                        ));
                    }
                }
                previous = Some(block);
            }
            if self.referenced_bytes() > self.size {
                return Err(format!(
                    "table {}: it refers to {} bytes of blocks in other files but holds only {}",
                    self.id,
                    self.referenced_bytes(),
                    self.size
                ));
            }
        }
        Ok(())
    }
}
