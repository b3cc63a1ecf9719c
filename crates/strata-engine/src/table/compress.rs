//! Stored block encoding: optional compression and the 5-byte block trailer.
//!
//! ```text
//! stored block : contents | type: u8 | crc32c(contents ‖ type): u32 LE
//! contents     : the block itself                          (type 0, uncompressed)
//!              | uncompressed_len: u32 LE | lz4 block      (type 1)
//!              | uncompressed_len: u32 LE | zstd frame     (type 2)
//!              | uncompressed_len: u32 LE | zstd frame     (type 3: with the table's dictionary)
//! ```
//!
//! A compressed block may not claim more than [`MAX_EXPANSION`] times its stored size, so a
//! damaged length can never make the reader allocate more than that multiple of what it read.
//! LZ4 cannot exceed this ratio; a Zstd block that would (long runs of one byte) is stored with
//! LZ4 instead, so the bound costs nothing in practice.

use std::cell::RefCell;
use std::io;

use zstd::zstd_safe::{CCtx, CDict, DCtx, DDict};

use super::Compression;

/// Bytes after every stored block: compression type and CRC32C.
pub(crate) const BLOCK_TRAILER_LEN: usize = 5;

/// Largest ratio of uncompressed to stored size a compressed block may claim.
pub(crate) const MAX_EXPANSION: usize = 255;

/// Type byte of an uncompressed block.
pub(crate) const TYPE_NONE: u8 = 0;
/// Type byte of an LZ4 block.
pub(crate) const TYPE_LZ4: u8 = 1;
/// Type byte of a Zstd block.
pub(crate) const TYPE_ZSTD: u8 = 2;
/// Type byte of a Zstd block compressed with its table's dictionary.
pub(crate) const TYPE_ZSTD_DICT: u8 = 3;

/// The CRC32C stored in a block trailer: over the contents and the type byte, so a flipped
/// type is caught too.
#[inline]
pub(crate) fn block_crc(contents: &[u8], block_type: u8) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(contents), &[block_type])
}

/// The trailer for `contents` stored as `block_type`.
pub(crate) fn block_trailer(contents: &[u8], block_type: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = block_crc(contents, block_type).to_le_bytes();
    [block_type, crc[0], crc[1], crc[2], crc[3]]
}

/// Compresses blocks for one table, reusing its output buffer and Zstd contexts.
pub(crate) struct BlockCompressor {
    compression: Compression,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    /// The table's dictionary, prepared at its level, with a context for it: data blocks are
    /// compressed with it once [`BlockCompressor::set_dictionary`] gave one.
    dictionary: Option<(CCtx<'static>, CDict<'static>)>,
    out: Vec<u8>,
}

impl BlockCompressor {
    /// A compressor for `compression`.
    pub(crate) fn new(compression: Compression) -> Self {
        BlockCompressor {
            compression,
            zstd: None,
            dictionary: None,
            out: Vec::new(),
        }
    }

    /// Compresses data blocks from now on with `dictionary` (Zstd only; other codecs ignore
    /// it).
    pub(crate) fn set_dictionary(&mut self, dictionary: &[u8]) -> io::Result<()> {
        let Compression::Zstd { level, .. } = self.compression else {
            return Ok(());
        };
        let failed = || io::Error::other("zstd could not prepare the table's dictionary");
        let cdict = CDict::try_create(dictionary, level).ok_or_else(failed)?;
        let cctx = CCtx::try_create().ok_or_else(failed)?;
        self.dictionary = Some((cctx, cdict));
        Ok(())
    }

    /// The stored form of a meta block and its type byte ([`BlockCompressor::encode_data`]
    /// without the dictionary: meta blocks are read before it, or by tools without it).
    pub(crate) fn encode<'a>(&'a mut self, raw: &'a [u8]) -> io::Result<(u8, &'a [u8])> {
        self.encode_with(raw, false)
    }

    /// The stored form of the data block `raw` and its type byte: compressed (with the table's
    /// dictionary, if it has one) when that saves at least 1/8 of the block (smaller gains do
    /// not pay for decompressing on every read), else `raw`.
    pub(crate) fn encode_data<'a>(&'a mut self, raw: &'a [u8]) -> io::Result<(u8, &'a [u8])> {
        self.encode_with(raw, true)
    }

    fn encode_with<'a>(
        &'a mut self,
        raw: &'a [u8],
        with_dictionary: bool,
    ) -> io::Result<(u8, &'a [u8])> {
        let Ok(raw_len) = u32::try_from(raw.len()) else {
            return Ok((TYPE_NONE, raw));
        };
        let block_type = match self.compression {
            Compression::None => return Ok((TYPE_NONE, raw)),
            Compression::Lz4 => {
                self.lz4(raw, raw_len)?;
                TYPE_LZ4
            }
            Compression::Zstd { level, .. } => {
                let block_type = if with_dictionary && self.dictionary.is_some() {
                    self.zstd_with_dictionary(raw, raw_len)?;
                    TYPE_ZSTD_DICT
                } else {
                    self.zstd(raw, raw_len, level)?;
                    TYPE_ZSTD
                };
                if raw.len() > self.out.len().saturating_mul(MAX_EXPANSION) {
                    self.lz4(raw, raw_len)?;
                    TYPE_LZ4
                } else {
                    block_type
                }
            }
        };
        let saves_enough = self.out.len() <= raw.len() - raw.len() / 8;
        let within_bound = raw.len() <= self.out.len().saturating_mul(MAX_EXPANSION);
        if saves_enough && within_bound {
            Ok((block_type, &self.out))
        } else {
            Ok((TYPE_NONE, raw))
        }
    }

    fn lz4(&mut self, raw: &[u8], raw_len: u32) -> io::Result<()> {
        let bound = lz4_flex::block::get_maximum_output_size(raw.len());
        framed(&mut self.out, raw_len, bound, |out| {
            lz4_flex::block::compress_into(raw, out)
                .map_err(|e| io::Error::other(format!("lz4 compression failed: {e}")))
        })
    }

    fn zstd(&mut self, raw: &[u8], raw_len: u32, level: i32) -> io::Result<()> {
        let ctx = match &mut self.zstd {
            Some(ctx) => ctx,
            None => self.zstd.insert(zstd::bulk::Compressor::new(level)?),
        };
        let bound = zstd::zstd_safe::compress_bound(raw.len());
        framed(&mut self.out, raw_len, bound, |out| {
            ctx.compress_to_buffer(raw, out)
        })
    }

    fn zstd_with_dictionary(&mut self, raw: &[u8], raw_len: u32) -> io::Result<()> {
        let Some((cctx, cdict)) = &mut self.dictionary else {
            return Err(io::Error::other("no dictionary to compress with"));
        };
        let bound = zstd::zstd_safe::compress_bound(raw.len());
        framed(&mut self.out, raw_len, bound, |out| {
            cctx.compress_using_cdict(out, raw, cdict)
                .map_err(zstd_error)
        })
    }
}

/// Fills `out` with a compressed block's contents: the uncompressed length `raw_len`, then what
/// `compress` writes into room for `bound` bytes (it returns how many it wrote).
fn framed(
    out: &mut Vec<u8>,
    raw_len: u32,
    bound: usize,
    compress: impl FnOnce(&mut [u8]) -> io::Result<usize>,
) -> io::Result<()> {
    out.clear();
    out.extend_from_slice(&raw_len.to_le_bytes());
    out.resize(4 + bound, 0);
    let n = compress(&mut out[4..])?;
    out.truncate(4 + n);
    Ok(())
}

fn zstd_error(code: zstd::zstd_safe::ErrorCode) -> io::Error {
    io::Error::other(zstd::zstd_safe::get_error_name(code))
}

thread_local! {
    /// One Zstd decompression context per thread: creating one allocates ~100 KiB, too much to
    /// pay on every block read.
    static ZSTD_DECOMPRESSOR: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Decodes stored `contents` of `block_type` (whose trailer was already verified) into the
/// block, with the table's `dictionary` if it has one; the reason on failure. Uncompressed
/// contents are returned as they are.
pub(crate) fn decode_contents(
    contents: Vec<u8>,
    block_type: u8,
    dictionary: Option<&DDict<'static>>,
) -> Result<Vec<u8>, String> {
    if block_type == TYPE_NONE {
        return Ok(contents);
    }
    if !matches!(block_type, TYPE_LZ4 | TYPE_ZSTD | TYPE_ZSTD_DICT) {
        return Err(format!("unknown compression type {block_type}"));
    }
    let dictionary = match (block_type, dictionary) {
        (TYPE_ZSTD_DICT, None) => {
            return Err("block compressed with a dictionary the table does not hold".into())
        }
        (TYPE_ZSTD_DICT, dictionary) => dictionary,
        _ => None,
    };
    let Some((len_bytes, payload)) = contents.split_first_chunk::<4>() else {
        return Err("compressed block shorter than its length prefix".into());
    };
    let raw_len = u32::from_le_bytes(*len_bytes) as usize;
    if raw_len > contents.len().saturating_mul(MAX_EXPANSION) {
        return Err(format!(
            "compressed block of {} bytes claims {raw_len} bytes uncompressed",
            contents.len()
        ));
    }
    let mut raw = vec![0u8; raw_len];
    let written = if block_type == TYPE_LZ4 {
        lz4_flex::block::decompress_into(payload, &mut raw).map_err(|e| format!("lz4: {e}"))?
    } else {
        zstd_decompress(payload, &mut raw, dictionary).map_err(|e| format!("zstd: {e}"))?
    };
    if written != raw_len {
        return Err(format!(
            "block decompressed to {written} bytes, expected {raw_len}"
        ));
    }
    Ok(raw)
}

/// Decompresses a Zstd frame into `out` on this thread's context (a one-off context if that is
/// unavailable: the thread is exiting, or a nested use, which cannot happen, borrowed it).
fn zstd_decompress(
    payload: &[u8],
    out: &mut [u8],
    dictionary: Option<&DDict<'static>>,
) -> io::Result<usize> {
    let run = |ctx: &mut DCtx<'static>, out: &mut [u8]| {
        match dictionary {
            Some(ddict) => ctx.decompress_using_ddict(out, payload, ddict),
            None => ctx.decompress(out, payload),
        }
        .map_err(zstd_error)
    };
    let new_context = || DCtx::try_create().ok_or_else(|| io::Error::other("out of memory"));
    let mut out = Some(out);
    let pooled = ZSTD_DECOMPRESSOR.try_with(|slot| {
        let mut slot = slot.try_borrow_mut().ok()?;
        let buf = out.take()?;
        let ctx = match &mut *slot {
            Some(ctx) => ctx,
            None => match new_context() {
                Ok(ctx) => slot.insert(ctx),
                Err(e) => return Some(Err(e)),
            },
        };
        Some(run(ctx, buf))
    });
    match (pooled, out) {
        (Ok(Some(result)), _) => result,
        (_, Some(buf)) => run(&mut new_context()?, buf),
        (_, None) => Err(io::Error::other("zstd decompression context unavailable")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(compression: Compression, raw: &[u8]) -> u8 {
        let mut c = BlockCompressor::new(compression);
        let (block_type, stored) = match c.encode(raw) {
            Ok((t, s)) => (t, s.to_vec()),
            Err(e) => panic!("{e}"),
        };
        match decode_contents(stored, block_type, None) {
            Ok(back) => assert_eq!(back, raw),
            Err(e) => panic!("{e}"),
        }
        block_type
    }

    #[test]
    fn compressible_blocks_are_compressed_and_others_are_not() {
        let text: Vec<u8> = (0..4096).map(|i| b"abcdefgh"[i % 8]).collect();
        assert_eq!(round_trip(Compression::None, &text), TYPE_NONE);
        assert_eq!(round_trip(Compression::Lz4, &text), TYPE_LZ4);
        assert_eq!(round_trip(Compression::zstd(3), &text), TYPE_ZSTD);
        // Pseudo-random bytes do not compress by 1/8.
        let mut x = 0x1234_5678_9abc_def0u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(round_trip(Compression::Lz4, &noise), TYPE_NONE);
        assert_eq!(round_trip(Compression::zstd(3), &noise), TYPE_NONE);
        // A megabyte of zeros beats the expansion bound with Zstd, so it falls back to LZ4.
        let zeros = vec![0u8; 1 << 20];
        assert_eq!(round_trip(Compression::zstd(3), &zeros), TYPE_LZ4);
    }

    fn decode_contents_plain(contents: Vec<u8>, block_type: u8) -> Result<Vec<u8>, String> {
        decode_contents(contents, block_type, None)
    }

    #[test]
    fn damaged_compressed_contents_are_errors() {
        assert!(decode_contents_plain(vec![1, 2, 3], TYPE_LZ4).is_err());
        assert!(decode_contents_plain(vec![0, 0, 0, 0, 0], 9).is_err());
        // A claimed length far beyond the expansion bound is refused before allocating.
        assert!(decode_contents_plain(vec![0xff, 0xff, 0xff, 0x7f, 0], TYPE_ZSTD).is_err());
        assert!(decode_contents_plain(vec![16, 0, 0, 0, 0xf0, 1, 2], TYPE_LZ4).is_err());
        assert!(decode_contents_plain(vec![16, 0, 0, 0, 1, 2, 3, 4], TYPE_ZSTD).is_err());
    }
}
