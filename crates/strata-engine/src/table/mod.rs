//! Table files: immutable, sorted runs of internal-key/value entries, written once by a
//! [`TableBuilder`] and read through [`Table`].
//!
//! # Format, version 4
//!
//! All integers are little-endian; "varint" is LEB128 (7 bits per byte, low groups first).
//!
//! ```text
//! table      : data block* | filter block? | index block | properties block | footer
//! each block : contents | type: u8 | crc32c(contents ‖ type): u32
//! ```
//!
//! - **Stored contents** (type 0) are the block itself; compressed contents are
//!   `uncompressed_len: u32 | payload` with an LZ4 block (type 1) or a Zstd frame (type 2)
//!   as payload. A block is stored compressed only if that saves at least 1/8 of it, and may
//!   never claim more than 255× its stored size uncompressed.
//! - **Data and properties blocks** share one layout: entries
//!   `varint shared | varint unshared | varint value_len | key suffix | value`, then the
//!   restart offsets (`u32` each, the first 0) and their count (`u32`). An entry's key is
//!   the previous key's first `shared` bytes followed by the stored suffix; restart entries
//!   have `shared = 0`. Data blocks restart every `restart_interval` entries and hold internal
//!   keys ([`crate::key`]); a block is cut once it reaches `block_size` bytes, so it never has
//!   fewer than one entry.
//! - **Index block** (version 4): one entry per data block, in order, then the entry count
//!   (`u32`). An entry holds the block's exact last internal key (not a shortened separator,
//!   so a merge can keep a block whole knowing exactly where it ends): the user key as
//!   `varint shared | varint unshared | suffix`, sharing a prefix with the previous entry's, and
//!   the 8-byte trailer; then `varint 0` for a block of this file, which starts where the
//!   previous one of this file ends (the first at 0), or
//!   `varint 1 | u64 file | varint offset` for a *kept block* of another table file (a
//!   block-preserving merge referred to it instead of rewriting it, read through
//!   [`BlockFiles`]); then `varint size | varint entries`. The index is decoded whole at open.
//!   Versions 2 and 3 (still read) used the block layout with a restart per entry, and each
//!   value also held the block's first user key; only version 3 may name another file.
//! - **Filter block** (only with `bloom_bits_per_key > 0`; never compressed): a Bloom filter
//!   over the distinct user keys, `bits[m/8] | probes: u8`, probed with xxh3-64 and double
//!   hashing (see `bloom.rs`).
//! - **Properties block**: block-layout entries `(name, value)` in name order, restart at every
//!   entry; unknown names are skipped. Names: `bloom_bits_per_key` (f64 bits),
//!   `compression` (type byte, then the zigzag-varint level for Zstd), `data_blocks`,
//!   `entries`, `format_version`, `largest_key`, `largest_seqno`, `raw_key_bytes`,
//!   `raw_value_bytes`, `smallest_key`, `smallest_seqno`, `tombstones` (varints unless noted;
//!   the sequence numbers are u64 LE since format version 2, so a table's size does not depend
//!   on them; keys are raw user keys).
//! - **Footer**, 64 bytes: handles (`offset: u64, size: u64`, size excluding the trailer) of
//!   the index (bytes 0..16), filter (16..32, all zero when absent) and properties (32..48);
//!   `format_version: u32` (48..52), `crc32c` of bytes 0..52 (52..56), magic
//!   `\x89STRATA\n` (56..64).
//!
//! Readers check the magic (else [`crate::Error::Corruption`]), then the footer checksum (else
//! corruption), then the version (above 4: [`crate::Error::UnsupportedFormat`]), then every
//! other checksum, and every offset, length and count against the bytes actually present: any
//! input decodes to a value or an error. The magic and the footer checksum (crc32c of bytes
//! 0..52 at 52..56) are the frozen part of the format that every future version keeps, so a
//! damaged version field reads as corruption rather than as a newer format.

mod batch;
mod block;
mod bloom;
mod builder;
mod cache;
mod coding;
mod compress;
mod dictionary;
mod file;
mod format;
mod fuzzing;
mod index;
mod inspect;
mod iter;
mod readahead;
mod reader;
#[cfg(test)]
mod tests;

pub(crate) use batch::{prefetch_blocks, query_blocks};
pub(crate) use bloom::bloom_hash;
pub use builder::{BlockRange, KeptBlock, TableBuilder, TableSummary};
pub use cache::BlockCache;
pub use file::ReadPurpose;
pub(crate) use format::BlockHandle;
pub use format::TableProperties;
#[doc(hidden)]
pub use fuzzing::{fuzz_decode_block, FuzzBlockWalk};
pub use inspect::{BlockPlace, IndexedBlock, TableLayout};
pub use iter::TableIterator;
pub use readahead::{ReadaheadSize, AUTO_READAHEAD_MAX, AUTO_READAHEAD_START};
pub use reader::{BlockFiles, Table};

/// How a table's blocks are compressed: the codec type plans name (declared once, in
/// `strata_policy::compression`).
pub use strata_policy::Compression;

/// Options for writing a table.
#[derive(Clone, Debug, PartialEq)]
pub struct TableOptions {
    /// Uncompressed size at which a data block is cut (default 4096). A single entry larger
    /// than this gets a block of its own. Clamped to 1 B ..= 256 MiB.
    pub block_size: usize,
    /// Entries between restart points in data blocks (default 16; 0 is treated as 1).
    /// Smaller values make seeks faster and blocks larger.
    pub restart_interval: usize,
    /// Block compression (default none).
    pub compression: Compression,
    /// Bloom-filter bits per distinct user key (default 10, ~0.8 % false positives); 0, a
    /// negative or a non-finite value means no filter; values above 100 are clamped to 100.
    pub bloom_bits_per_key: f64,
    /// Whether [`TableBuilder::finish`] reports each data block's key range in
    /// [`TableSummary::blocks`] (default false).
    pub record_block_ranges: bool,
    /// Whether [`TableBuilder::finish`] hands back the hash of every distinct user key in
    /// [`TableSummary::key_hashes`], for an in-memory key index (default false).
    pub collect_key_hashes: bool,
    /// Whether every data block starts on a 4 KiB page of the file (default false). A block is
    /// then cut before an entry that would take it and its trailer past `block_size`, and zeros
    /// pad the file before each block up to the next page, so that a block of at most a page is
    /// one page to read: with direct reads, a block straddling two pages costs a read of both. The padding
    /// costs space (more with compression, which shrinks blocks below the page). RocksDB:
    /// `BlockBasedTableOptions::block_align`.
    pub block_align: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            compression: Compression::None,
            bloom_bits_per_key: 10.0,
            record_block_ranges: false,
            collect_key_hashes: false,
            block_align: false,
        }
    }
}
