//! Log files (write-ahead logs and manifests): a sequence of checksummed records.
//!
//! # Format
//!
//! A log is records back to back, with no file header, padding or blocks:
//!
//! ```text
//! +---------------------+-------------------+-------------------+
//! | checksum: u32 (LE)  | length: u32 (LE)  | payload: length B |
//! +---------------------+-------------------+-------------------+
//! ```
//!
//! `checksum` is the masked CRC32C (Castagnoli) of the four length bytes followed by the payload,
//! so a damaged length field is caught like a damaged payload. The mask (rotate right by 15 bits,
//! then add a constant) is there because logs carry payloads that embed CRCs of their own (table
//! metadata, copies of records), and a plain CRC over data containing CRCs is weak: the CRC of a
//! string followed by its own CRC is a constant. The mask also keeps the checksum of an empty
//! record non-zero, so zero-filled space never parses as a record. A payload holds at most
//! [`MAX_RECORD_LEN`] bytes; the length `u32::MAX` is reserved, so an all-ones length (erased
//! flash, some garbage) is never valid.
//!
//! # Damage: torn tail or corruption
//!
//! [`LogReader`] reads records from offset 0. The record at offset `o` is *damaged* if fewer than
//! 8 header bytes remain, its length is the reserved `u32::MAX`, its payload runs past the end of
//! the file, or its checksum does not match. What happens next depends on whether a *valid
//! record* starts anywhere after the damaged header, that is at some offset `p ≥ o + 8` holding 8
//! bytes whose length field is not `u32::MAX`, whose payload fits in the file and whose checksum
//! matches:
//!
//! - If one does, the damage is in the middle of the log: [`Error::Corruption`] naming offset `o`,
//!   in every [`RecoveryMode`]. Every offset is tried, not only the one the damaged length points
//!   at, because the damage may be in the length field itself: a flipped high bit makes a middle
//!   record look cut short by the end of the file, and trusting it would silently drop every
//!   record after it.
//! - If none does, the damage is a *torn tail*, which is what a crash in the middle of appending
//!   leaves: a record cut short, a last record whose sectors were only partly written, or space
//!   the file system preallocated and zero-filled. [`RecoveryMode::TolerateCorruptedTail`] ends
//!   reading there and reports it through [`LogReader::dropped_tail`];
//!   [`RecoveryMode::AbsoluteConsistency`] reports [`Error::Corruption`] naming `o`.
//!
//! [`RecoveryMode::PointInTime`] never fails: any damage ends reading, and [`LogReader::damage`]
//! says where and which kind. What a whole set of WALs may hold is decided above this module
//! (`wal_chain`), which alone knows whether a log is the last of the history.
//!
//! One limitation follows from the format having no block structure: a torn record whose partial
//! payload itself contains a complete valid record (a payload that embeds a copy of a log) is
//! reported as corruption, since it cannot be told from a damaged length field followed by real
//! records; the reader refuses to drop data it cannot prove torn. For other payloads the chance
//! is 2⁻³² per offset a checksum is tried at.
//!
//! The search for a valid record runs at most once per reader, in O(n log n) time over the `n`
//! bytes after the damage, allocating `n / 16` bytes of prefix CRCs. Decoding never panics and
//! never allocates more than the input's size, whatever the input.
//!
//! Writers must never append after a torn tail (that would turn it into corruption): after
//! recovery, start a new log, or cut the old one at the dropped offset first.

use std::fmt;
use std::io;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fs::WritableFile;

/// Bytes of a record header: checksum and length.
pub const HEADER_LEN: usize = 8;

/// The largest payload a record holds: `u32::MAX - 1` bytes (`u32::MAX` is reserved).
pub const MAX_RECORD_LEN: usize = u32::MAX as usize - 1;

/// The constant of the checksum mask (the bytes of "STRA"), chosen so that masked checksums are
/// specific to this format.
const MASK_DELTA: u32 = 0x5354_5241;

fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The masked checksum of a record with length field `len_bytes` and `payload`.
fn record_checksum(len_bytes: [u8; 4], payload: &[u8]) -> u32 {
    mask(crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload))
}

/// The length field for a payload of `len` bytes, or `InvalidInput` if it is too large.
fn length_field(len: usize) -> io::Result<u32> {
    u32::try_from(len)
        .ok()
        .filter(|&l| l != u32::MAX)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a log record holds at most {MAX_RECORD_LEN} bytes, not {len}"),
            )
        })
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let field = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(field.try_into().ok()?))
}

/// How a log reader treats damage (see the [module docs](self) for the exact rule).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecoveryMode {
    /// Drop a torn tail, as a crash during an append leaves, and report it through
    /// [`LogReader::dropped_tail`]; damage followed by a valid record is still an error.
    /// RocksDB's `kTolerateCorruptedTailRecords`. The default, for logs that are not synced after
    /// every record (the write-ahead log with `sync = false`, where the tail was never
    /// acknowledged as durable).
    #[default]
    TolerateCorruptedTail,
    /// Any damage, a torn tail included, is an [`Error::Corruption`]. RocksDB's
    /// `kAbsoluteConsistency`: for logs that were synced after every record and closed cleanly.
    AbsoluteConsistency,
    /// Stop at the first damage of any kind and keep what precedes it. A reader in this mode
    /// never fails: it reports the damage through [`LogReader::damage`]. For WAL recovery it
    /// means RocksDB's `kPointInTimeRecovery`: the database opens with a consistent prefix of its
    /// history, and the WALs from the damage on are set aside unreplayed, never deleted.
    PointInTime,
}

/// Damage that ended a reader's log (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Where the damaged record starts: the valid part of the log ends here.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
    /// Whether it is a torn tail (no valid record follows) rather than damage in the middle.
    pub torn: bool,
    /// Whether the file ends inside the damaged record (its header or payload is cut short) or
    /// only zeros are left: the file ended mid-append. A record that fits but fails its
    /// checksum is not cut short.
    pub cut_short: bool,
}

/// Appends records to a log file.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
}

impl LogWriter {
    /// A writer appending to `file`, which should be new: appending to an existing log is only
    /// safe if it ends exactly after a valid record (see the [module docs](self)).
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        LogWriter { file }
    }

    /// Appends one record holding `payload` (buffered: see [`flush`](Self::flush) and
    /// [`sync`](Self::sync)). Fails with `InvalidInput` for a payload over [`MAX_RECORD_LEN`]
    /// bytes, writing nothing.
    pub fn add_record(&mut self, payload: &[u8]) -> io::Result<()> {
        let len_bytes = length_field(payload.len())?.to_le_bytes();
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(&record_checksum(len_bytes, payload).to_le_bytes());
        header[4..].copy_from_slice(&len_bytes);
        self.file.append(&header)?;
        self.file.append(payload)
    }

    /// Hands buffered records to the operating system (they survive a process crash).
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// Makes every record added so far durable (they survive a power loss).
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync()
    }

    /// Starts writing the records handed to the OS to the device, without waiting
    /// ([`WritableFile::start_writeback`]).
    pub fn start_writeback(&mut self) -> io::Result<()> {
        self.file.start_writeback()
    }

    /// Bytes in the log, buffered ones included.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogWriter")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// Where a reader is.
#[derive(Debug, Clone)]
enum State {
    Reading,
    /// Damage ended the log: a torn tail, or (point-in-time mode) any damage.
    Dropped(Damage),
    /// Damage at this offset is an error; every later call repeats it.
    Failed(u64, String),
}

/// Reads the records of a whole log file held in memory.
///
/// Records are returned as owned `Vec<u8>`s rather than slices of the file: a caller can keep
/// them (a write batch replayed into a memtable) and call [`last_record_offset`] while holding
/// one, and the copy is small next to decoding the payload.
///
/// [`last_record_offset`]: Self::last_record_offset
pub struct LogReader {
    data: Vec<u8>,
    file: String,
    mode: RecoveryMode,
    /// Offset of the next record.
    pos: usize,
    last_record_offset: u64,
    state: State,
}

impl LogReader {
    /// A reader over `data`, the whole file `file_name` (the name goes into corruption reports).
    pub fn new(data: Vec<u8>, file_name: String, mode: RecoveryMode) -> Self {
        LogReader {
            data,
            file: file_name,
            mode,
            pos: 0,
            last_record_offset: 0,
            state: State::Reading,
        }
    }

    /// The next record's payload; `Ok(None)` at the end of the log or after a dropped torn tail.
    /// Damage that is not a tolerated torn tail is an [`Error::Corruption`] naming the offset of
    /// the damaged record, returned again by every later call.
    pub fn next_record(&mut self) -> Result<Option<Vec<u8>>> {
        match &self.state {
            State::Reading => {}
            State::Dropped(..) => return Ok(None),
            State::Failed(offset, reason) => {
                return Err(Error::corruption(&self.file, *offset, reason.clone()))
            }
        }
        if self.pos == self.data.len() {
            return Ok(None);
        }
        match parse_record(&self.data, self.pos) {
            Ok(payload) => {
                self.last_record_offset = self.pos as u64;
                self.pos = payload.end;
                Ok(Some(self.data[payload].to_vec()))
            }
            Err(bad) => self.damaged(bad),
        }
    }

    /// Classifies the damage at `self.pos` (see the module docs) and ends reading.
    fn damaged(&mut self, bad: BadRecord) -> Result<Option<Vec<u8>>> {
        let offset = self.pos as u64;
        let rest = &self.data[self.pos..];
        let (why, follower, cut_short) = if rest.iter().all(|&b| b == 0) {
            // Nothing valid starts in zeros; skip the search and say what it was.
            let zeros = format!(
                "zero-filled tail of {} bytes (preallocated space)",
                rest.len()
            );
            (zeros, None, true)
        } else {
            let follower = find_valid_record(&self.data, self.pos + HEADER_LEN);
            (bad.why, follower, bad.cut_short)
        };
        let torn = follower.is_none();
        let why = match follower {
            Some(next) => format!("{why}, yet a valid record follows at offset {next}"),
            None => why,
        };
        self.state = match (torn, self.mode) {
            (_, RecoveryMode::PointInTime) | (true, RecoveryMode::TolerateCorruptedTail) => {
                State::Dropped(Damage {
                    offset,
                    reason: why,
                    torn,
                    cut_short,
                })
            }
            (false, _) => State::Failed(offset, why),
            (true, RecoveryMode::AbsoluteConsistency) => State::Failed(
                offset,
                format!("{why}: a torn tail, which absolute-consistency recovery does not accept"),
            ),
        };
        self.next_record()
    }

    /// The torn tail that was dropped, if any: its offset (where the valid part of the log ends)
    /// and what was wrong with it. Only in [`RecoveryMode::TolerateCorruptedTail`] and
    /// [`RecoveryMode::PointInTime`].
    pub fn dropped_tail(&self) -> Option<(u64, String)> {
        self.damage()
            .filter(|d| d.torn)
            .map(|d| (d.offset, d.reason.clone()))
    }

    /// The damage that ended reading without an error, if any: a dropped torn tail, or in
    /// [`RecoveryMode::PointInTime`] any damage.
    pub fn damage(&self) -> Option<&Damage> {
        match &self.state {
            State::Dropped(damage) => Some(damage),
            State::Reading | State::Failed(..) => None,
        }
    }

    /// Bytes of the log read so far that hold valid records: after the last record returned,
    /// or where the damage that ended reading starts.
    pub fn valid_len(&self) -> u64 {
        match &self.state {
            State::Dropped(damage) => damage.offset,
            State::Failed(offset, _) => *offset,
            State::Reading => self.pos as u64,
        }
    }

    /// Offset of the header of the record [`next_record`](Self::next_record) returned last (0
    /// before the first), for reporting a payload that fails to decode.
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }
}

impl fmt::Debug for LogReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogReader")
            .field("file", &self.file)
            .field("len", &self.data.len())
            .field("pos", &self.pos)
            .field("mode", &self.mode)
            .field("state", &self.state)
            .finish()
    }
}

/// The payload of the log's first record, if it is valid.
pub(crate) fn first_record(data: &[u8]) -> Option<&[u8]> {
    parse_record(data, 0).ok().map(|range| &data[range])
}

/// Whether a valid record starts anywhere in `data`.
pub(crate) fn holds_valid_record(data: &[u8]) -> bool {
    first_record(data).is_some() || find_valid_record(data, 0).is_some()
}

/// The payload range of the record at `at`, or why it is damaged.
/// Why the record at an offset is not valid.
struct BadRecord {
    why: String,
    /// The file ends inside the record.
    cut_short: bool,
}

fn parse_record(data: &[u8], at: usize) -> std::result::Result<Range<usize>, BadRecord> {
    let avail = data.len() - at;
    let bad = |why: String, cut_short: bool| Err(BadRecord { why, cut_short });
    let (Some(stored), Some(len)) = (read_u32(data, at), read_u32(data, at + 4)) else {
        return bad(
            format!(
                "record header cut short: {avail} of {HEADER_LEN} bytes before the end of the file"
            ),
            true,
        );
    };
    if len == u32::MAX {
        return bad(
            "record length field holds the reserved value 0xffffffff".to_string(),
            false,
        );
    }
    let start = at + HEADER_LEN;
    let payload = start..start.saturating_add(len as usize);
    if payload.end > data.len() {
        return bad(
            format!(
                "record of {len} bytes cut short: {} bytes before the end of the file",
                avail - HEADER_LEN
            ),
            true,
        );
    }
    if record_checksum(len.to_le_bytes(), &data[payload.clone()]) != stored {
        return bad(
            format!("checksum mismatch in a record of {len} bytes"),
            false,
        );
    }
    Ok(payload)
}

/// The smallest offset `p ≥ from` at which a valid record starts, if any.
///
/// Checking each candidate's checksum directly would cost up to O(n²) (O(n³) expected for random
/// data, whose length fields fit with probability n / 2³²): minutes for a torn multi-megabyte
/// record. Instead the CRC of any substring comes from two prefix CRCs, since
/// `crc(A ‖ B) = crc(A)·x^(8|B|) ⊕ crc(B)` (the identity behind `crc32c_combine`): prefix CRCs
/// are stored every [`CHECKPOINT`] bytes and finished from the nearest checkpoint, and the shift
/// by `x^(8|B|)` costs O(log |B|) multiplications modulo the CRC polynomial.
fn find_valid_record(data: &[u8], from: usize) -> Option<usize> {
    let region = data.get(from..)?;
    let checkpoints: Vec<u32> = std::iter::once(0)
        .chain(region.chunks_exact(CHECKPOINT).scan(0, |crc, chunk| {
            *crc = crc32c::crc32c_append(*crc, chunk);
            Some(*crc)
        }))
        .collect();
    // crc32c(region[..i]), from the checkpoint at or below `i`.
    let prefix_crc = |i: usize| {
        let base = i / CHECKPOINT;
        crc32c::crc32c_append(checkpoints[base], &region[base * CHECKPOINT..i])
    };
    for p in 0..region.len().saturating_sub(HEADER_LEN - 1) {
        let (Some(stored), Some(len)) = (read_u32(region, p), read_u32(region, p + 4)) else {
            break;
        };
        let end = (p + HEADER_LEN).saturating_add(len as usize);
        if len == u32::MAX || end > region.len() {
            continue;
        }
        // The checksum covers the length field and the payload.
        let covered = p + 4..end;
        let crc = if covered.len() <= DIRECT_CRC_MAX {
            crc32c::crc32c(&region[covered])
        } else {
            prefix_crc(end) ^ shift(prefix_crc(covered.start), covered.len() as u64)
        };
        if mask(crc) == stored {
            return Some(from + p);
        }
    }
    None
}

/// Distance between stored prefix CRCs in [`find_valid_record`]: its table takes 4 bytes per
/// `CHECKPOINT` bytes of input, and each lookup finishes at most `CHECKPOINT - 1` bytes.
const CHECKPOINT: usize = 64;

/// Below this many bytes a direct CRC is cheaper than two prefix lookups and a shift.
const DIRECT_CRC_MAX: usize = 512;

/// The CRC32C polynomial, bit-reflected as the CRC computes it.
const POLY: u32 = 0x82F6_3B78;

/// `a · b` modulo the CRC polynomial, both in the reflected representation (bit 31 is `x⁰`).
const fn mul_mod_poly(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = 1u32 << 31;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        // b ·= x
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        bit >>= 1;
    }
    product
}

/// `X_POW_2K[k]` = `x^(2^k)` modulo the polynomial, for every bit a `u64` byte count shifted by 3
/// (to count bits) can have.
const X_POW_2K: [u32; 67] = {
    let mut table = [0u32; 67];
    let mut power = 1u32 << 30; // x¹
    let mut k = 0;
    while k < table.len() {
        table[k] = power;
        power = mul_mod_poly(power, power);
        k += 1;
    }
    table
};

/// `crc · x^(8·bytes)` modulo the polynomial: what appending `bytes` zero bytes does to a CRC
/// register, i.e. the `crc(A)` term of `crc(A ‖ B)` for `|B| = bytes`.
fn shift(crc: u32, bytes: u64) -> u32 {
    let mut power = 1u32 << 31; // x⁰
    let mut rest = bytes;
    let mut k = 3; // 8 = 2³ bits per byte
    while rest != 0 {
        if rest & 1 != 0 {
            power = mul_mod_poly(X_POW_2K[k], power);
        }
        rest >>= 1;
        k += 1;
    }
    mul_mod_poly(power, crc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use std::path::Path;

    /// Writes `records` to a log on a fresh `MemFs` and returns the file's bytes.
    fn write_log(records: &[Vec<u8>]) -> Vec<u8> {
        let fs = MemFs::new();
        let path = Path::new("/db/000001.log");
        let mut writer = LogWriter::new(fs.create(path).expect("create"));
        assert!(writer.is_empty());
        for r in records {
            writer.add_record(r).expect("add_record");
        }
        writer.sync().expect("sync");
        let data = fs.read(path).expect("read");
        assert_eq!(writer.len(), data.len() as u64);
        data
    }

    /// Offsets at which each record starts, plus the end of the log.
    fn boundaries(records: &[Vec<u8>]) -> Vec<usize> {
        let mut offsets = vec![0];
        for r in records {
            offsets.push(offsets.last().copied().unwrap_or(0) + HEADER_LEN + r.len());
        }
        offsets
    }

    /// Reads every record; the error, if reading ended with one.
    fn read_all(data: Vec<u8>, mode: RecoveryMode) -> (Vec<Vec<u8>>, Option<Error>, LogReader) {
        let mut reader = LogReader::new(data, "000001.log".to_string(), mode);
        let mut records = Vec::new();
        loop {
            match reader.next_record() {
                Ok(Some(r)) => records.push(r),
                Ok(None) => return (records, None, reader),
                Err(e) => return (records, Some(e), reader),
            }
        }
    }

    fn corruption_offset(e: Option<Error>) -> u64 {
        match e {
            Some(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, "000001.log");
                offset
            }
            other => panic!("expected a corruption error, got {other:?}"),
        }
    }

    fn small_log() -> Vec<Vec<u8>> {
        vec![
            b"first".to_vec(),
            Vec::new(),
            vec![0xab; 100],
            b"x".to_vec(),
            Vec::new(),
            (0..=255).collect(),
            b"last record".to_vec(),
        ]
    }

    #[test]
    fn round_trip_random_records() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut records: Vec<Vec<u8>> = (0..500)
            .map(|_| {
                let len = match rng.random_range(0..10) {
                    0 => 0,
                    1..=7 => rng.random_range(1..200),
                    _ => rng.random_range(200..70_000),
                };
                (0..len).map(|_| rng.random()).collect()
            })
            .collect();
        records.insert(250, vec![0x5a; 1 << 20]);
        records.push(Vec::new());
        let data = write_log(&records);
        assert_eq!(data.len(), boundaries(&records)[records.len()]);
        for mode in [
            RecoveryMode::TolerateCorruptedTail,
            RecoveryMode::AbsoluteConsistency,
        ] {
            let (read, error, reader) = read_all(data.clone(), mode);
            assert!(error.is_none(), "{error:?}");
            assert!(read == records);
            assert_eq!(reader.dropped_tail(), None);
        }
        let (read, error, _) = read_all(Vec::new(), RecoveryMode::AbsoluteConsistency);
        assert!(read.is_empty() && error.is_none(), "an empty log is valid");
    }

    #[test]
    fn last_record_offset_names_the_header() {
        let records = small_log();
        let starts = boundaries(&records);
        let mut reader = LogReader::new(
            write_log(&records),
            "x".to_string(),
            RecoveryMode::default(),
        );
        for (i, r) in records.iter().enumerate() {
            assert_eq!(reader.next_record().expect("read").as_ref(), Some(r));
            assert_eq!(reader.last_record_offset(), starts[i] as u64);
        }
        assert_eq!(reader.next_record().expect("end"), None);
    }

    #[test]
    fn every_truncation_is_a_torn_tail() {
        let records = small_log();
        let data = write_log(&records);
        let starts = boundaries(&records);
        for cut in 0..=data.len() {
            let complete = starts.iter().filter(|&&s| s <= cut).count() - 1;
            let at_boundary = starts.contains(&cut);

            let (read, error, reader) =
                read_all(data[..cut].to_vec(), RecoveryMode::TolerateCorruptedTail);
            assert!(error.is_none(), "cut at {cut}: {error:?}");
            assert!(read[..] == records[..complete], "cut at {cut}");
            match reader.dropped_tail() {
                None => assert!(at_boundary, "cut at {cut}: nothing dropped"),
                Some((offset, _)) => {
                    assert!(!at_boundary, "cut at {cut}: a complete log dropped a tail");
                    assert_eq!(offset, starts[complete] as u64, "cut at {cut}");
                }
            }

            let (read, error, _) =
                read_all(data[..cut].to_vec(), RecoveryMode::AbsoluteConsistency);
            assert!(read[..] == records[..complete], "cut at {cut}");
            if at_boundary {
                assert!(error.is_none(), "cut at {cut}: {error:?}");
            } else {
                assert_eq!(corruption_offset(error), starts[complete] as u64);
            }
        }
    }

    #[test]
    fn damage_in_the_middle_is_corruption_in_both_modes() {
        let records = small_log();
        let data = write_log(&records);
        let starts = boundaries(&records);
        let middle = 3; // b"x", followed by three records
                        // Every byte of the record, header included: a damaged length field must not make the
                        // rest of the log look like a torn tail.
        for at in starts[middle]..starts[middle + 1] {
            for xor in [0x01, 0x80, 0xff] {
                let mut damaged = data.clone();
                damaged[at] ^= xor;
                for mode in [
                    RecoveryMode::TolerateCorruptedTail,
                    RecoveryMode::AbsoluteConsistency,
                ] {
                    let (read, error, reader) = read_all(damaged.clone(), mode);
                    assert!(read[..] == records[..middle], "byte {at} ^ {xor:#x}");
                    assert_eq!(corruption_offset(error), starts[middle] as u64);
                    assert_eq!(reader.dropped_tail(), None);
                }
            }
        }
    }

    #[test]
    fn damage_in_the_last_record_is_a_torn_tail() {
        let records = small_log();
        let data = write_log(&records);
        let starts = boundaries(&records);
        let last = records.len() - 1;
        for at in starts[last]..data.len() {
            let mut damaged = data.clone();
            damaged[at] ^= 0x10;
            let (read, error, reader) =
                read_all(damaged.clone(), RecoveryMode::TolerateCorruptedTail);
            assert!(error.is_none(), "byte {at}: {error:?}");
            assert!(read[..] == records[..last]);
            let (offset, _) = reader.dropped_tail().expect("a dropped tail");
            assert_eq!(offset, starts[last] as u64);

            let (read, error, _) = read_all(damaged, RecoveryMode::AbsoluteConsistency);
            assert!(read[..] == records[..last]);
            assert_eq!(corruption_offset(error), starts[last] as u64);
        }
    }

    #[test]
    fn zero_filled_tail_is_a_torn_tail() {
        let records = small_log();
        let mut data = write_log(&records);
        let end = data.len() as u64;
        data.resize(data.len() + 4096, 0);
        let (read, error, reader) = read_all(data.clone(), RecoveryMode::TolerateCorruptedTail);
        assert!(error.is_none() && read == records);
        let (offset, why) = reader.dropped_tail().expect("a dropped tail");
        assert_eq!(offset, end);
        assert!(why.contains("zero-filled"), "{why}");
        let (_, error, _) = read_all(data, RecoveryMode::AbsoluteConsistency);
        assert_eq!(corruption_offset(error), end);
        assert_ne!(
            record_checksum([0; 4], &[]),
            0,
            "an all-zero header must never be a valid empty record"
        );
    }

    #[test]
    fn errors_repeat_and_drops_stay_dropped() {
        let records = small_log();
        let mut data = write_log(&records);
        let starts = boundaries(&records);
        data[starts[1] + 2] ^= 1;
        let mut reader = LogReader::new(data, "f".to_string(), RecoveryMode::default());
        assert!(reader.next_record().expect("first").is_some());
        for _ in 0..2 {
            match reader.next_record() {
                Err(Error::Corruption { offset, reason, .. }) => {
                    assert_eq!(offset, starts[1] as u64);
                    assert!(reason.contains("valid record follows"), "{reason}");
                }
                other => panic!("expected corruption, got {other:?}"),
            }
        }

        let mut reader = LogReader::new(vec![1, 2, 3], "f".to_string(), RecoveryMode::default());
        assert_eq!(reader.next_record().expect("torn"), None);
        assert_eq!(reader.next_record().expect("still torn"), None);
        assert_eq!(reader.dropped_tail().map(|(o, _)| o), Some(0));
    }

    #[test]
    fn a_torn_large_record_is_classified_quickly() {
        // 4 MiB of random payload cut short: about 2¹¹ offsets in it have a length field that
        // fits, each needing a checksum over up to 4 MiB if computed directly.
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let big: Vec<u8> = (0..4 << 20).map(|_| rng.random()).collect();
        let records = vec![b"before".to_vec(), big];
        let data = write_log(&records);
        let cut = data.len() - 1000;
        let started = std::time::Instant::now();
        let (read, error, reader) =
            read_all(data[..cut].to_vec(), RecoveryMode::TolerateCorruptedTail);
        assert!(error.is_none() && read[..] == records[..1]);
        assert!(reader.dropped_tail().is_some());
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn oversized_payloads_are_rejected() {
        assert_eq!(length_field(MAX_RECORD_LEN).expect("largest"), u32::MAX - 1);
        for len in [MAX_RECORD_LEN + 1, usize::MAX] {
            let e = length_field(len).expect_err("too large");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
        let mut reserved = write_log(&[b"ok".to_vec()]);
        reserved.extend_from_slice(&[1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff]);
        let (read, _, reader) = read_all(reserved, RecoveryMode::TolerateCorruptedTail);
        assert_eq!(read.len(), 1);
        let (_, why) = reader.dropped_tail().expect("dropped");
        assert!(why.contains("reserved"), "{why}");
    }

    #[test]
    fn shift_matches_crc32c_combine() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for len_b in [0usize, 1, 7, 64, 1000, 70_000] {
            let a: Vec<u8> = (0..rng.random_range(0..300))
                .map(|_| rng.random())
                .collect();
            let b: Vec<u8> = (0..len_b).map(|_| rng.random()).collect();
            let (crc_a, crc_b) = (crc32c::crc32c(&a), crc32c::crc32c(&b));
            let whole = crc32c::crc32c(&[a, b].concat());
            assert_eq!(whole, shift(crc_a, len_b as u64) ^ crc_b);
            assert_eq!(whole, crc32c::crc32c_combine(crc_a, crc_b, len_b));
        }
    }

    #[test]
    fn search_finds_records_at_any_distance() {
        // Records behind garbage long enough to need checkpoints and the shift.
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for garbage in [0usize, 1, 63, 64, 65, 1000] {
            for payload_len in [0usize, 10, DIRECT_CRC_MAX, 3000] {
                let mut data: Vec<u8> = (0..garbage).map(|_| rng.random::<u8>() | 0x80).collect();
                let payload: Vec<u8> = (0..payload_len).map(|_| rng.random()).collect();
                data.extend(write_log(&[payload]));
                assert_eq!(find_valid_record(&data, 0), Some(garbage));
                data.truncate(data.len() - 1);
                assert_eq!(find_valid_record(&data, 0), None);
            }
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            for mode in [RecoveryMode::TolerateCorruptedTail, RecoveryMode::AbsoluteConsistency] {
                let total = data.len();
                let (read, _, _) = read_all(data.clone(), mode);
                prop_assert!(read.iter().map(|r| r.len() + HEADER_LEN).sum::<usize>() <= total);
            }
        }

        /// Whatever the damage, what is read is a prefix of what was written.
        #[test]
        fn damaged_logs_read_as_a_prefix(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..12),
            cut in any::<prop::sample::Index>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 0..3),
        ) {
            let mut data = write_log(&records);
            if !data.is_empty() {
                for (at, xor) in flips {
                    let i = at.index(data.len());
                    data[i] ^= xor;
                }
                data.truncate(cut.index(data.len() + 1));
            }
            for mode in [RecoveryMode::TolerateCorruptedTail, RecoveryMode::AbsoluteConsistency] {
                let (read, _, _) = read_all(data.clone(), mode);
                prop_assert!(read.len() <= records.len());
                prop_assert!(read[..] == records[..read.len()]);
            }
        }
    }
}
