//! The engine's on-disk format in the simulator (feature `engine-format`): tables are sized, and
//! cut into data blocks, by the engine's own table encoder, and the buffer counts the engine's
//! memtable overhead per entry, so a simulation writes the tables and blocks `strata bench`
//! would. Slower than the default raw sizing (every simulated entry is encoded), and exact: the
//! differential test compares the two byte for byte.

use crate::{is_tombstone, key_of, SimConfig, SizedBlock, SizedTable, TableEstimate, TableSizer};
use std::sync::Arc;
use strata_engine::fs::WritableFile;
use strata_engine::key::{internal_key, ValueKind, TRAILER_LEN};
use strata_engine::memtable::ENTRY_OVERHEAD;
use strata_engine::table::{Compression, KeptBlock, TableBuilder, TableOptions};
use strata_meta::{BlockMeta, SeqRange, TableId};
use strata_workload::encode_key;

/// Counts bytes instead of storing them.
struct CountingFile(u64);

impl WritableFile for CountingFile {
    fn append(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0 += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0
    }
}

/// Sizes a simulated table by encoding it with the engine's table builder (with the plan's codec,
/// none by default as in the engine), with keys of `key_size` bytes and values of `value_size`.
#[derive(Clone, Debug)]
pub struct EngineSizer {
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes of a put.
    pub value_size: usize,
    /// Data block size. RocksDB: `block_size`.
    pub block_size: usize,
    /// Data blocks start on pages, padded (the engine's `Options::with_block_align`).
    pub block_align: bool,
}

struct EngineEstimate {
    builder: TableBuilder,
    seqnos: SeqRange,
    added: u64,
    key_size: usize,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl EngineEstimate {
    /// The internal key the engine would store for `entry`.
    fn encode(&mut self, entry: u64) -> Vec<u8> {
        // Sequence numbers only reach the table through its properties (min and max).
        let seq = if self.added == 0 {
            self.seqnos.smallest
        } else {
            self.seqnos.largest
        };
        self.added += 1;
        let kind = if is_tombstone(entry) {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        encode_key(&mut self.key, key_of(entry), self.key_size);
        internal_key(&self.key, seq, kind)
    }
}

impl TableEstimate for EngineEstimate {
    fn add(&mut self, entry: u64) {
        let ikey = self.encode(entry);
        let value = if is_tombstone(entry) {
            &[][..]
        } else {
            &self.value[..]
        };
        // Writing to a counting file cannot fail, and the keys ascend: an error here is a bug.
        #[allow(clippy::expect_used)]
        self.builder
            .add(&ikey, value)
            .expect("sizing a table in memory");
    }

    fn add_kept(&mut self, block: &BlockMeta, entries: &[u64]) {
        let keys: Vec<Vec<u8>> = entries.iter().map(|&e| self.encode(e)).collect();
        let kept = KeptBlock {
            file_number: block.file.0,
            offset: block.offset,
            size: block.size,
            entries: block.entries,
        };
        let value = &self.value[..];
        let pairs = keys.iter().zip(entries).map(|(k, &e)| {
            let v: &[u8] = if is_tombstone(e) { &[] } else { value };
            (&k[..], v)
        });
        // As in `add`: the entries come in order and match the block.
        #[allow(clippy::expect_used)]
        self.builder
            .add_kept_block(&kept, pairs)
            .expect("sizing a table in memory");
    }

    fn size(&self) -> u64 {
        self.builder.estimated_size()
    }

    fn open_block_bytes(&self) -> u64 {
        self.builder.open_block_bytes()
    }

    fn finished_blocks(&self) -> usize {
        self.builder.finished_blocks().len()
    }

    fn finished_block_size(&self, i: usize) -> u64 {
        self.builder.finished_blocks().get(i).map_or(0, |b| b.size)
    }

    fn finish(self: Box<Self>) -> SizedTable {
        #[allow(clippy::expect_used)]
        let summary = self.builder.finish().expect("sizing a table in memory");
        SizedTable {
            size: summary.file_size + summary.referenced_bytes,
            blocks: summary
                .blocks
                .iter()
                .map(|b| SizedBlock {
                    entries: b.entries,
                    size: b.size,
                    offset: b.offset,
                    file: b.file.map(TableId),
                })
                .collect(),
        }
    }
}

impl TableSizer for EngineSizer {
    fn start_table(
        &self,
        bloom_bits_per_key: f64,
        compression: Option<Compression>,
        seqnos: SeqRange,
    ) -> Box<dyn TableEstimate> {
        let options = TableOptions {
            block_size: self.block_size,
            restart_interval: 16,
            // The engine's own codec on the sizer's values (which compress far better than
            // most data: a table's size then shows the codec's overhead, not a real ratio).
            compression: compression.unwrap_or(Compression::None),
            bloom_bits_per_key,
            record_block_ranges: true,
            collect_key_hashes: false,
            block_align: self.block_align,
        };
        Box::new(EngineEstimate {
            builder: TableBuilder::new(Box::new(CountingFile(0)), "sizer".into(), options),
            seqnos,
            added: 0,
            key_size: self.key_size,
            key: Vec::with_capacity(self.key_size.max(8)),
            value: vec![b'v'; self.value_size],
        })
    }
}

impl SimConfig {
    /// This configuration with the engine's format: tables sized and cut into blocks of
    /// `block_size` by the engine's encoder, the buffer counting the engine's memtable overhead
    /// per entry (its internal-key trailer and skiplist node), and tombstones dropped by the
    /// engine's rule (where no older table's key range holds the key).
    pub fn with_engine_format(self, block_size: usize) -> SimConfig {
        self.with_engine_blocks(block_size, false)
    }

    /// [`SimConfig::with_engine_format`], the data blocks aligned to pages if `block_align`
    /// (the engine's `Options::with_block_align`): the padding counts in tables' sizes.
    pub fn with_engine_blocks(mut self, block_size: usize, block_align: bool) -> SimConfig {
        self.sizer = Some(Arc::new(EngineSizer {
            key_size: self.key_size as usize,
            value_size: self.value_size as usize,
            block_size,
            block_align,
        }));
        self.buffer_entry_overhead = TRAILER_LEN as u64 + ENTRY_OVERHEAD;
        // The nominal block size block-preserving merges measure waste against.
        self.block_size = Some(block_size as u64);
        self.exact_tombstone_drop = false;
        self
    }
}
