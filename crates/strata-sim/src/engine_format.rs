//! The engine's on-disk format in the simulator (feature `engine-format`): tables are sized, and
//! cut into data blocks, by the engine's own table encoder, and the buffer counts the engine's
//! memtable overhead per entry, so a simulation writes the tables and blocks `strata bench`
//! would. Slower than the default raw sizing (every simulated entry is encoded), and exact: the
//! differential test compares the two byte for byte.

use crate::{
    is_tombstone, key_of, CompressionRatios, SimConfig, SizedBlock, SizedTable, TableEstimate,
    TableSizer,
};
use std::sync::Arc;
use strata_engine::fs::WritableFile;
use strata_engine::key::{internal_key, ValueKind, TRAILER_LEN};
use strata_engine::memtable::ENTRY_OVERHEAD;
use strata_engine::table::{Compression, KeptBlock, TableBuilder, TableOptions};
use strata_exec::range_del::RangeTombstone;
use strata_meta::{BlockMeta, Bytes, SeqRange, TableId};
use strata_policy::{ZSTD_DEFAULT_LEVEL, ZSTD_TRAIN_FACTOR};
use strata_workload::{compressible_value, encode_key};

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
    /// The share of each value that is random bytes (the workload's `compression_ratio`): a
    /// compressed table's values are made per entry that way, so its codec shrinks it as it
    /// would the workload's data. An uncompressed table's size does not depend on its bytes.
    pub value_compression_ratio: f64,
}

struct EngineEstimate {
    builder: TableBuilder,
    seqnos: SeqRange,
    added: u64,
    key_size: usize,
    key: Vec<u8>,
    value: Vec<u8>,
    /// With a codec: the share of each value made random per entry; `None` keeps one value.
    varied_values: Option<f64>,
}

impl EngineEstimate {
    /// The internal key the engine would store for `entry`.
    fn encode(&mut self, entry: u64) -> Vec<u8> {
        // Sequence numbers reach an uncompressed table's size only through its properties
        // (min and max). A codec sees every key's, so a compressed table's keys get numbers
        // spread over the range by their key, as varied as the engine's (it wrote them in
        // arrival order, and a table holds them in key order): the same first two, the rest
        // inside the range.
        let seq = match self.added {
            0 => self.seqnos.smallest,
            1 => self.seqnos.largest,
            _ if self.varied_values.is_some() => {
                let span = self.seqnos.largest - self.seqnos.smallest + 1;
                self.seqnos.smallest + spread(key_of(entry)) % span
            }
            _ => self.seqnos.largest,
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
        if let Some(ratio) = self.varied_values {
            value_of(key_of(entry), &mut self.value, ratio);
        }
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

    fn add_range_tombstone(&mut self, tombstone: &RangeTombstone<Bytes>) {
        self.builder.add_range_tombstone(tombstone.clone());
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
            varied_values: compression
                .filter(|c| *c != Compression::None)
                .map(|_| self.value_compression_ratio),
        })
    }
}

/// A SplitMix64 step of `x`: fast, well spread.
fn spread(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The value the engine-format sizer gives `key` in a compressed table: the `ratio` share of
/// it pseudo-random bytes (from the key), repeated to its end, as the workload generator makes
/// values of its `compression_ratio`. A test comparing the engine with the simulator byte for
/// byte writes these values into the engine.
pub fn value_of(key: u64, value: &mut [u8], ratio: f64) {
    compressible_value(value, ratio, |random| {
        // A different stream per key.
        let mut state = key ^ 0x9E37_79B9_7F4A_7C15;
        for chunk in random.chunks_mut(8) {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            chunk.copy_from_slice(&spread(state).to_le_bytes()[..chunk.len()]);
        }
    });
}

/// The dictionary size [`measure_compression_ratios`] measures Zstandard's with.
const DICTIONARY_MEASURED: u32 = 16 << 10;

/// What the engine's codecs shrink a table's data to, measured by encoding the same table of
/// `entries` puts of `key_size`-byte keys and `value_size`-byte values (of the workload's
/// `value_compression_ratio`) with each codec: the ratios [`SimConfig::compression_ratios`]
/// scales the default sizer's tables by.
pub fn measure_compression_ratios(
    key_size: usize,
    value_size: usize,
    value_compression_ratio: f64,
    block_size: usize,
) -> CompressionRatios {
    let sizer = EngineSizer {
        key_size,
        value_size,
        block_size,
        block_align: false,
        value_compression_ratio,
    };
    let seqnos = SeqRange {
        smallest: 1,
        largest: 1,
    };
    let size = |codec: Compression, entries: u64| {
        let mut table = sizer.start_table(0.0, Some(codec), seqnos);
        for key in 0..entries {
            table.add(crate::keys::put(key));
        }
        table.finish().size as f64
    };
    let ratio = |codec: Compression, entries: u64| {
        (size(codec, entries) / size(Compression::None, entries).max(1.0)).min(1.0)
    };
    // A dictionary's table holds enough blocks for its training (16 KiB of dictionary, trained
    // on 100 times that), so its bytes count as they would in a table of the usual size.
    let dictionary = Compression::Zstd {
        level: ZSTD_DEFAULT_LEVEL,
        max_dict_bytes: DICTIONARY_MEASURED,
    };
    let train_entries = u64::from(DICTIONARY_MEASURED * ZSTD_TRAIN_FACTOR)
        .div_ceil((key_size + value_size).max(1) as u64);
    CompressionRatios {
        lz4: ratio(Compression::Lz4, 4096),
        zstd: ratio(Compression::zstd(ZSTD_DEFAULT_LEVEL), 4096),
        zstd_dictionary: ratio(dictionary, train_entries.max(4096)),
    }
}

impl SimConfig {
    /// This configuration with [`SimConfig::compression_ratios`] measured on the engine's
    /// codecs for values of its `value_compression_ratio` ([`measure_compression_ratios`]).
    pub fn with_measured_compression(mut self) -> SimConfig {
        self.compression_ratios = measure_compression_ratios(
            self.key_size as usize,
            self.value_size as usize,
            self.value_compression_ratio,
            self.block_size.map_or(4096, |b| b as usize),
        );
        self
    }

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
            value_compression_ratio: self.value_compression_ratio,
        }));
        self.buffer_entry_overhead = TRAILER_LEN as u64 + ENTRY_OVERHEAD;
        // The nominal block size block-preserving merges measure waste against.
        self.block_size = Some(block_size as u64);
        self.exact_tombstone_drop = false;
        self
    }
}
