//! Direct I/O for [`StdFs`](super::StdFs): table files read and written around the page cache
//! (`O_DIRECT`, Linux only).
//!
//! `O_DIRECT` needs the file offset, the length and the memory address of every transfer
//! aligned to the device's logical block. [`ALIGNMENT`] (4 KiB) is a multiple of every block
//! size Linux file systems use, and the files here do the aligning themselves, so callers keep
//! the contracts of [`RandomAccessFile`] and [`super::WritableFile`]: a read at any offset
//! (bounced through an aligned buffer unless it is aligned already), appends of any length
//! (gathered in an aligned buffer and written in whole blocks; a sync writes the last, partial
//! block padded and cuts the file back to its length).

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::std_fs::{read_error, BufferedFile, Sink};
use super::RandomAccessFile;

/// The alignment of offsets, lengths and buffers of direct transfers.
pub const ALIGNMENT: usize = 4096;

/// Bytes a direct writable file gathers before writing them (RocksDB's
/// `writable_file_max_buffer_size`, 1 MiB): table files are written in transfers this large.
const WRITE_BUFFER: usize = 1 << 20;

/// A bounce buffer kept by a reading thread between reads only up to this size.
const MAX_KEPT_BOUNCE: usize = 4 << 20;

/// `n` rounded up to a multiple of [`ALIGNMENT`].
fn align_up(n: u64) -> u64 {
    n.div_ceil(ALIGNMENT as u64) * ALIGNMENT as u64
}

/// `n` rounded down to a multiple of [`ALIGNMENT`].
fn align_down(n: u64) -> u64 {
    n / ALIGNMENT as u64 * ALIGNMENT as u64
}

/// Page-aligned memory for direct transfers: an anonymous mapping, which the kernel aligns to a
/// page, so no unsafe aligned allocation is needed. Only ever allocated for long-lived buffers
/// (a file's write buffer, a thread's bounce buffer, a readahead window), so the system calls a
/// mapping costs are paid rarely.
pub struct AlignedBuf {
    map: memmap2::MmapMut,
}

impl AlignedBuf {
    /// A zeroed buffer of at least `len` bytes (a whole number of [`ALIGNMENT`] blocks, at
    /// least one).
    pub fn new(len: usize) -> io::Result<AlignedBuf> {
        let len = align_up(len.max(1) as u64) as usize;
        Ok(AlignedBuf {
            map: memmap2::MmapMut::map_anon(len)?,
        })
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it holds no bytes (never: buffers hold at least one block).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.map
    }

    /// The bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// Whether a transfer of `buf` at `offset` may go to an `O_DIRECT` descriptor as it is.
fn is_aligned(buf: &[u8], offset: u64) -> bool {
    let a = ALIGNMENT as u64;
    offset.is_multiple_of(a)
        && (buf.len() as u64).is_multiple_of(a)
        && (buf.as_ptr() as usize).is_multiple_of(ALIGNMENT)
}

/// The error a file system that refuses `O_DIRECT` gives (`EINVAL` at open), made to say so.
fn refused(e: io::Error, what: &str, path: &Path) -> io::Error {
    if e.raw_os_error() == Some(libc::EINVAL) {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{what} {} with direct I/O (O_DIRECT): the file system refuses it ({e})",
                path.display()
            ),
        )
    } else {
        io::Error::new(
            e.kind(),
            format!("{what} {} with direct I/O: {e}", path.display()),
        )
    }
}

/// Opens `path` for direct reads.
pub(super) fn open(path: &Path) -> io::Result<DirectRandomAccessFile> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| refused(e, "opening", path))?;
    let len = file
        .metadata()
        .map_err(|e| refused(e, "reading metadata of", path))?
        .len();
    Ok(DirectRandomAccessFile {
        file,
        len,
        path: path.to_path_buf(),
    })
}

/// Creates (or truncates) `path` for direct sequential writes.
pub(super) fn create(path: &Path) -> io::Result<BufferedFile<DirectSink>> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| refused(e, "creating", path))?;
    Ok(BufferedFile::new(DirectSink {
        file,
        path: path.to_path_buf(),
        buf: AlignedBuf::new(WRITE_BUFFER)?,
        buffered: 0,
        buf_offset: 0,
        written: 0,
        failed: false,
    }))
}

thread_local! {
    /// Each reading thread's bounce buffer for reads that are not aligned.
    static BOUNCE: RefCell<Option<AlignedBuf>> = const { RefCell::new(None) };
}

/// A file read around the page cache. Immutable once opened (the engine reads only finished
/// tables), so its length is read once and reads past it fail before any transfer.
pub(super) struct DirectRandomAccessFile {
    file: File,
    len: u64,
    path: PathBuf,
}

impl DirectRandomAccessFile {
    /// Reads `buf.len()` bytes at the aligned `offset` into the aligned `buf`, of which the
    /// file holds at least `need` bytes (the rest may lie past its end).
    fn read_aligned(&self, buf: &mut [u8], offset: u64, need: usize) -> io::Result<()> {
        let mut got = 0usize;
        while got < need {
            match self.file.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ended before the read",
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl RandomAccessFile for DirectRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len();
        let context = |e: io::Error| read_error(&self.path, len, offset, Some("direct I/O"), e);
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(context(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file holds {} bytes", self.len),
            )));
        }
        if buf.is_empty() {
            return Ok(());
        }
        if is_aligned(buf, offset) {
            let need = buf.len();
            return self.read_aligned(buf, offset, need).map_err(context);
        }
        let start = align_down(offset);
        let span = (align_up(offset + buf.len() as u64) - start) as usize;
        let skip = (offset - start) as usize;
        let need = skip + buf.len();
        BOUNCE
            .with(|cell| {
                let mut slot = cell.borrow_mut();
                if slot.as_ref().is_none_or(|b| b.len() < span) {
                    *slot = Some(AlignedBuf::new(span.next_power_of_two().max(64 << 10))?);
                }
                let Some(bounce) = slot.as_mut() else {
                    unreachable!("the bounce buffer was just made");
                };
                self.read_aligned(&mut bounce.as_mut_slice()[..span], start, need)?;
                buf.copy_from_slice(&bounce.as_slice()[skip..need]);
                if bounce.len() > MAX_KEPT_BOUNCE {
                    *slot = None;
                }
                Ok(())
            })
            .map_err(context)
    }

    fn read_exact_at_polling(
        &self,
        buf: &mut [u8],
        offset: u64,
        poll: std::time::Duration,
    ) -> io::Result<()> {
        let len = buf.len();
        super::uring::read_waiting(self, offset, buf, poll, |e| {
            read_error(&self.path, len, offset, Some("direct I/O, polled"), e)
        })
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn descriptor(&self) -> Option<(std::os::fd::RawFd, bool)> {
        use std::os::fd::AsRawFd;
        Some((self.file.as_raw_fd(), true))
    }
}

/// Where a direct file's appends go ([`super::std_fs::Sink`], behind the same append buffer,
/// error poisoning and length as every other writable file): they gather in an aligned buffer,
/// written out a whole buffer at a time; a sync also writes the partial last block, padded with
/// zeros, cuts the file back to the bytes written and syncs it. The partial block stays gathered
/// and is written again, longer, by the next sync (or the drop, best effort, unless a write
/// failed: the file in front is poisoned then, and nothing more is written).
pub(super) struct DirectSink {
    file: File,
    path: PathBuf,
    buf: AlignedBuf,
    /// Bytes gathered in `buf`.
    buffered: usize,
    /// The file offset of `buf`'s first byte (aligned).
    buf_offset: u64,
    /// Bytes written so far.
    written: u64,
    /// Whether a write or sync failed.
    failed: bool,
}

impl DirectSink {
    /// Writes the whole blocks gathered and moves the partial last block to the buffer's start.
    fn write_whole_blocks(&mut self) -> io::Result<()> {
        let whole = align_down(self.buffered as u64) as usize;
        if whole == 0 {
            return Ok(());
        }
        self.file
            .write_all_at(&self.buf.as_slice()[..whole], self.buf_offset)?;
        self.buf.as_mut_slice().copy_within(whole..self.buffered, 0);
        self.buffered -= whole;
        self.buf_offset += whole as u64;
        Ok(())
    }

    /// Writes the partial last block padded with zeros, and cuts the file back to the bytes
    /// written.
    fn write_tail(&mut self) -> io::Result<()> {
        if self.buffered > 0 {
            let padded = align_up(self.buffered as u64) as usize;
            self.buf.as_mut_slice()[self.buffered..padded].fill(0);
            self.file
                .write_all_at(&self.buf.as_slice()[..padded], self.buf_offset)?;
        }
        self.file.set_len(self.written)
    }

    /// `e`, naming the file, and the sink marked failed.
    fn fail(&mut self, e: io::Error) -> io::Error {
        self.failed = true;
        io::Error::new(
            e.kind(),
            format!("writing {} (direct I/O): {e}", self.path.display()),
        )
    }
}

impl Sink for DirectSink {
    fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        self.written += data.len() as u64;
        while !data.is_empty() {
            let room = self.buf.len() - self.buffered;
            let n = room.min(data.len());
            self.buf.as_mut_slice()[self.buffered..self.buffered + n].copy_from_slice(&data[..n]);
            self.buffered += n;
            data = &data[n..];
            if self.buffered == self.buf.len() {
                if let Err(e) = self.write_whole_blocks() {
                    return Err(self.fail(e));
                }
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let synced = self
            .write_whole_blocks()
            .and_then(|()| self.write_tail())
            .and_then(|()| self.file.sync_data());
        synced.map_err(|e| self.fail(e))
    }
}

impl Drop for DirectSink {
    fn drop(&mut self) {
        // Best effort, like a buffered file's drop: hand everything written to the file (the
        // buffer in front has already written what it held into this sink), unless a write
        // failed, after which nothing more is written.
        if !self.failed {
            let _ = self.write_whole_blocks().and_then(|()| self.write_tail());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::WritableFile;

    /// Bytes that differ from their neighbours, so a misplaced copy shows.
    fn pattern(len: usize, seed: u64) -> Vec<u8> {
        (0..len as u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9) ^ seed).rotate_left(7) as u8)
            .collect()
    }

    #[test]
    fn direct_writes_read_back_at_any_offset_and_length() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("t.sst");
        let mut w = create(&path).expect("create direct");
        let mut want = Vec::new();
        // Small appends, one larger than the write buffer, odd sizes, with flushes and syncs
        // between (a sync leaves a partial block that later appends extend).
        let sizes = [
            1,
            4095,
            4097,
            300,
            WRITE_BUFFER + 12_345,
            7,
            4096,
            100_000,
            3,
        ];
        for (i, &n) in sizes.iter().enumerate() {
            let piece = pattern(n, i as u64);
            w.append(&piece).expect("append");
            want.extend_from_slice(&piece);
            match i % 3 {
                0 => w.flush().expect("flush"),
                1 => w.sync().expect("sync"),
                _ => {}
            }
            assert_eq!(w.len(), want.len() as u64);
        }
        w.sync().expect("sync");
        assert_eq!(
            std::fs::read(&path).expect("read"),
            want,
            "a sync leaves exactly the appended bytes"
        );
        // Unsynced appends reach the file when the writer drops.
        w.append(b"tail").expect("append");
        want.extend_from_slice(b"tail");
        drop(w);
        assert_eq!(std::fs::read(&path).expect("read"), want);

        let r = open(&path).expect("open direct");
        assert_eq!(r.len(), want.len() as u64);
        for (offset, len) in [
            (0, 1),
            (0, 4096),
            (1, 4096),
            (4095, 2),
            (4096, 8192),
            (5000, 70_000),
            (want.len() as u64 - 4, 4),
            (want.len() as u64 - 5000, 5000),
            (0, want.len() as u64),
        ] {
            let mut buf = vec![0u8; len as usize];
            r.read_exact_at(&mut buf, offset).expect("read");
            assert_eq!(
                &buf[..],
                &want[offset as usize..(offset + len) as usize],
                "{len} bytes at {offset}"
            );
        }
        // An aligned read into an aligned buffer goes straight to the file.
        let mut aligned = AlignedBuf::new(8192).expect("buffer");
        r.read_exact_at(aligned.as_mut_slice(), 4096).expect("read");
        assert_eq!(aligned.as_slice(), &want[4096..4096 + 8192]);
        let e = r
            .read_exact_at(&mut [0u8; 8], want.len() as u64 - 4)
            .expect_err("read across the end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        r.read_exact_at(&mut [], want.len() as u64)
            .expect("an empty read at the end is fine");
    }

    #[test]
    fn an_empty_direct_file_syncs_to_zero_bytes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("e.sst");
        let mut w = create(&path).expect("create direct");
        w.sync().expect("sync");
        drop(w);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), 0);
    }
}
