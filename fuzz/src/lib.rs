//! Helpers shared by the fuzz targets and the seed generator: in-memory files, and "fixers" that
//! recompute the checksums of a mutated input so the fuzzer reaches the decoders behind them.
//!
//! Every decoder under test sits behind a CRC32C (log records, table blocks, the table footer),
//! which random mutations almost never satisfy. Each target therefore runs the raw input first
//! (that is what exercises the checksum and framing checks themselves) and then, if that
//! changes anything, a copy whose checksums were recomputed over the mutated bytes. The fixers
//! follow the formats documented in `crates/strata-engine/src/log.rs` and
//! `crates/strata-engine/src/table/mod.rs`; the log fixer re-frames records with the engine's
//! own `LogWriter`, so it cannot drift from the writer.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use strata_engine::fs::{RandomAccessFile, WritableFile};
use strata_engine::key::{internal_key, ValueKind};
use strata_engine::log::{LogWriter, HEADER_LEN};
use strata_engine::stats::Statistics;
use strata_engine::table::{BlockFiles, Table, TableBuilder, TableOptions};
use strata_engine::{Error, Result};

pub mod table_check;

/// A read-only in-memory file for [`strata_engine::table::Table::open`].
pub struct MemFile(pub Vec<u8>);

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let eof = || io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end");
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let end = start.checked_add(buf.len()).ok_or_else(eof)?;
        buf.copy_from_slice(self.0.get(start..end).ok_or_else(eof)?);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

/// An in-memory file being appended to, whose bytes stay reachable through clones.
#[derive(Clone, Default)]
pub struct VecFile(pub Arc<Mutex<Vec<u8>>>);

impl VecFile {
    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The bytes appended so far.
    pub fn contents(&self) -> Vec<u8> {
        self.lock().clone()
    }
}

impl WritableFile for VecFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.lock().extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> u64 {
        self.lock().len() as u64
    }
}

/// A log holding `payloads` as records, written by the engine's `LogWriter`.
pub fn write_log<'a>(payloads: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let file = VecFile::default();
    let mut writer = LogWriter::new(Box::new(file.clone()));
    for p in payloads {
        // Only payloads of 4 GiB or more fail; fuzz inputs are far smaller.
        let _ = writer.add_record(p);
    }
    file.contents()
}

/// `data` with the checksum of every record its length fields delimit recomputed: records are
/// taken from offset 0 while a header and the payload it announces fit, re-written with
/// `LogWriter`, and whatever is left (a torn tail) is appended unchanged.
pub fn reframe_log(data: &[u8]) -> Vec<u8> {
    let mut payloads = Vec::new();
    let mut pos = 0usize;
    while let Some(header) = data.get(pos..pos + HEADER_LEN) {
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if len == u32::MAX {
            break;
        }
        let start = pos + HEADER_LEN;
        let Some(payload) = data.get(start..start + len as usize) else {
            break;
        };
        payloads.push(payload);
        pos = start + len as usize;
    }
    let mut out = write_log(payloads);
    out.extend_from_slice(&data[pos..]);
    out
}

const FOOTER_LEN: usize = 64;
const TRAILER_LEN: usize = 5;
const MAGIC: &[u8; 8] = b"\x89STRATA\n";
/// The bound the engine puts on a compressed block's claimed size.
const MAX_EXPANSION: usize = 255;

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = data.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

/// A block handle `(offset, size)` as the range of its stored contents in `data`, if it fits
/// with its trailer.
fn block_range(data_len: usize, offset: u64, size: u64) -> Option<(usize, usize)> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    (end.checked_add(TRAILER_LEN)? <= data_len).then_some((start, end))
}

/// Recomputes the trailer checksum of the block stored at `start..end`.
fn fix_block(data: &mut [u8], (start, end): (usize, usize)) {
    let block_type = data[end];
    let crc = crc32c::crc32c_append(crc32c::crc32c(&data[start..end]), &[block_type]);
    data[end + 1..end + TRAILER_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// The decoded contents of a stored block (type byte after it), if they decode.
pub fn decode_stored(stored: &[u8], block_type: u8) -> Option<Vec<u8>> {
    match block_type {
        0 => Some(stored.to_vec()),
        1 | 2 => {
            let (len, payload) = stored.split_first_chunk::<4>()?;
            let len = u32::from_le_bytes(*len) as usize;
            if len > stored.len().saturating_mul(MAX_EXPANSION) {
                return None;
            }
            let out = if block_type == 1 {
                lz4_flex::block::decompress(payload, len).ok()?
            } else {
                zstd::bulk::decompress(payload, len).ok()?
            };
            (out.len() == len).then_some(out)
        }
        _ => None,
    }
}

fn varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The `(key suffix, value)` of each entry of a decoded block, in order, up to the first
/// malformed one.
pub fn block_entries(block: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    let Some(count_at) = block.len().checked_sub(4) else {
        return out;
    };
    let c = &block[count_at..];
    let restarts = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize;
    let Some(end) = restarts
        .checked_mul(4)
        .and_then(|n| count_at.checked_sub(n))
    else {
        return out;
    };
    let area = &block[..end];
    let mut pos = 0;
    while pos < area.len() {
        let entry = (|| {
            let _shared = varint(area, &mut pos)?;
            let unshared = usize::try_from(varint(area, &mut pos)?).ok()?;
            let value_len = usize::try_from(varint(area, &mut pos)?).ok()?;
            let key = area.get(pos..pos.checked_add(unshared)?)?;
            pos += unshared;
            let value = area.get(pos..pos.checked_add(value_len)?)?;
            pos += value_len;
            Some((key, value))
        })();
        match entry {
            Some(e) => out.push(e),
            None => break,
        }
    }
    out
}

/// The `(offset, size)` handles of the data blocks an index block lists in the table's own
/// file (entries naming another file, format version 3, are skipped).
pub fn index_handles(index: &[u8]) -> Vec<(u64, u64)> {
    block_entries(index)
        .into_iter()
        .filter_map(|(_, value)| {
            let mut pos = 0;
            if varint(value, &mut pos)? != 0 {
                return None;
            }
            Some((varint(value, &mut pos)?, varint(value, &mut pos)?))
        })
        .collect()
}

/// The handles `(offset, size)` of the index, filter (if any) and properties blocks named by
/// the footer of `data`, if it ends with the table magic.
pub fn footer_handles(data: &[u8]) -> Option<[(u64, u64); 3]> {
    let f = data.len().checked_sub(FOOTER_LEN)?;
    if &data[f + 56..] != MAGIC {
        return None;
    }
    Some([0, 16, 32].map(|at| (u64_at(data, f + at), u64_at(data, f + at + 8))))
}

/// Recomputes, in place, the footer checksum of a table and the trailer checksums of its meta
/// blocks and of the data blocks its index lists (when the index decodes). Returns false, and
/// changes nothing, if `data` does not end with a table footer.
pub fn fix_table_checksums(data: &mut [u8]) -> bool {
    let Some(handles) = footer_handles(data) else {
        return false;
    };
    let f = data.len() - FOOTER_LEN;
    let crc = crc32c::crc32c(&data[f..f + 52]);
    data[f + 52..f + 56].copy_from_slice(&crc.to_le_bytes());
    let body = f; // blocks must end before the footer
    for &(offset, size) in &handles {
        if (offset, size) != (0, 0) {
            if let Some(r) = block_range(body, offset, size) {
                fix_block(data, r);
            }
        }
    }
    let (offset, size) = handles[0];
    let Some((start, end)) = block_range(body, offset, size) else {
        return true;
    };
    let Some(index) = decode_stored(&data[start..end], data[end]) else {
        return true;
    };
    for (offset, size) in index_handles(&index) {
        if let Some(r) = block_range(body, offset, size) {
            fix_block(data, r);
        }
    }
    true
}

/// The number of the donor table: the file whose blocks the `table_references` target's
/// tables refer to.
pub const DONOR_FILE: u64 = 3;

/// The donor table's bytes: 40 entries over user keys `m000`..`m039` in blocks of about 128
/// bytes, built the same way every time, so seeds written by `gen-seeds` refer to its blocks
/// where the fuzz target finds them.
pub fn donor_table_bytes() -> Vec<u8> {
    let file = VecFile::default();
    let options = TableOptions {
        block_size: 128,
        restart_interval: 2,
        ..TableOptions::default()
    };
    let mut builder = TableBuilder::new(Box::new(file.clone()), "donor.sst".into(), options);
    for i in 0..40u64 {
        let key = format!("m{i:03}");
        let kind = if i % 7 == 6 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let value = if kind == ValueKind::Put {
            format!("donor-{i}")
        } else {
            String::new()
        };
        // Writing to memory cannot fail and the keys ascend.
        let _ = builder.add(
            &internal_key(key.as_bytes(), 500 + i, kind),
            value.as_bytes(),
        );
    }
    let _ = builder.finish();
    file.contents()
}

/// Serves the donor table as file [`DONOR_FILE`] to tables that refer to its blocks.
pub struct DonorFiles(Arc<Table>);

impl BlockFiles for DonorFiles {
    fn table(&self, file_number: u64) -> Result<Arc<Table>> {
        if file_number == DONOR_FILE {
            Ok(Arc::clone(&self.0))
        } else {
            Err(Error::io(
                format!("opening table {file_number}"),
                io::Error::new(io::ErrorKind::NotFound, "no such table in the fuzz target"),
            ))
        }
    }
}

/// The donor, opened once per process, as the `BlockFiles` a referring table reads through.
pub fn donor_files() -> Weak<dyn BlockFiles> {
    static DONOR: OnceLock<Option<Arc<DonorFiles>>> = OnceLock::new();
    let donor = DONOR.get_or_init(|| {
        let table = Table::open(
            Arc::new(MemFile(donor_table_bytes())),
            DONOR_FILE,
            "000003.sst".to_string(),
            None,
            Arc::new(Statistics::default()),
        )
        .ok()?;
        Some(Arc::new(DonorFiles(Arc::new(table))))
    });
    match donor {
        Some(d) => {
            let weak: Weak<DonorFiles> = Arc::downgrade(d);
            weak
        }
        None => Weak::<DonorFiles>::new(),
    }
}
