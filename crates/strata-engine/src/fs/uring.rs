//! Batches of reads through io_uring, for [`StdFs::read_batch`](super::StdFs): one submission
//! puts every read of a batch in flight at once, and one wait collects them.
//!
//! Why io_uring and not only the pool of threads the other file systems use
//! (`crate::io_pool`): batches of 32 random 4 KiB direct reads of a 1 GiB file went at 65,381
//! reads/s through io_uring against 54,403 through the pool (medians of 3 runs each, on the
//! 2-core machine of BENCHMARKS.md; `io_pool::tests::measure_parallel_reads_pool_against_io_uring`),
//! because the pool wakes a thread per read and the ring needs one system call per batch.
//!
//! This is the one module of the file systems with unsafe code: handing the kernel a buffer to
//! fill is unsafe, since the buffer must stay alive and untouched until the read completes. Every
//! batch here waits for all the reads it submitted before its buffers are used or dropped, and
//! leaks them if the wait itself fails.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use io_uring::{opcode, types, IoUring};

use super::direct::{AlignedBuf, ALIGNMENT};
use super::BatchRead;

/// Reads a ring takes at once: a batch larger than this goes in several rounds.
const RING_ENTRIES: u32 = 64;

/// Set once a ring could not be made (a kernel without io_uring, or a sandbox refusing it):
/// later batches go straight to the fallback.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Each reading thread's ring, made on its first batch.
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Where one read of a batch lands: its own buffer, the whole span aligned for direct files.
struct Landing {
    fd: RawFd,
    /// File offset of the buffer's first byte.
    offset: u64,
    /// The bytes to read into the buffer.
    span: usize,
    /// Where the wanted bytes start in the buffer, and how many there are.
    skip: usize,
    len: usize,
    buf: Buffer,
}

enum Buffer {
    Heap(Vec<u8>),
    Aligned(AlignedBuf),
}

impl Buffer {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            Buffer::Heap(v) => v.as_mut_ptr(),
            Buffer::Aligned(a) => a.as_mut_slice().as_mut_ptr(),
        }
    }
    fn as_slice(&self) -> &[u8] {
        match self {
            Buffer::Heap(v) => v,
            Buffer::Aligned(a) => a.as_slice(),
        }
    }
}

/// Reads `reads` through this thread's ring; `None` if io_uring is not available (the caller
/// then reads another way). Every read must have a descriptor ([`super::RandomAccessFile::descriptor`]).
pub(super) fn read_batch(reads: &[BatchRead]) -> Option<Vec<io::Result<Vec<u8>>>> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            match IoUring::new(RING_ENTRIES) {
                Ok(ring) => *slot = Some(ring),
                Err(_) => {
                    UNAVAILABLE.store(true, Ordering::Relaxed);
                    return None;
                }
            }
        }
        let ring = slot.as_mut()?;
        let mut results = Vec::with_capacity(reads.len());
        for chunk in reads.chunks(RING_ENTRIES as usize) {
            results.extend(read_round(ring, chunk));
        }
        Some(results)
    })
}

/// Prepares the buffer of one read.
fn landing(read: &BatchRead) -> io::Result<Landing> {
    let (fd, direct) = read
        .file
        .descriptor()
        .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "a file without a descriptor"))?;
    if read.offset.saturating_add(read.len as u64) > read.file.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "reading {} bytes at offset {} of a {}-byte file",
                read.len,
                read.offset,
                read.file.len()
            ),
        ));
    }
    if !direct {
        return Ok(Landing {
            fd,
            offset: read.offset,
            span: read.len,
            skip: 0,
            len: read.len,
            buf: Buffer::Heap(vec![0u8; read.len]),
        });
    }
    let a = ALIGNMENT as u64;
    let start = read.offset / a * a;
    let end = (read.offset + read.len as u64).div_ceil(a) * a;
    let span = (end - start) as usize;
    Ok(Landing {
        fd,
        offset: start,
        span,
        skip: (read.offset - start) as usize,
        len: read.len,
        buf: Buffer::Aligned(AlignedBuf::new(span)?),
    })
}

/// One round of at most [`RING_ENTRIES`] reads.
fn read_round(ring: &mut IoUring, reads: &[BatchRead]) -> Vec<io::Result<Vec<u8>>> {
    let mut landings: Vec<io::Result<Landing>> = reads.iter().map(landing).collect();
    let mut submitted = 0usize;
    for (i, landing) in landings.iter_mut().enumerate() {
        let entry = match landing {
            Ok(l) => opcode::Read::new(types::Fd(l.fd), l.buf.as_mut_ptr(), l.span as u32)
                .offset(l.offset)
                .build()
                .user_data(i as u64),
            Err(_) => continue,
        };
        // SAFETY: the buffer lives in `landings` until every submitted read has completed
        // (the wait below), and nothing touches it meanwhile.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            *landing = Err(io::Error::other("the ring is full"));
            continue;
        }
        submitted += 1;
    }
    let mut done: Vec<Option<i32>> = vec![None; reads.len()];
    let mut completed = 0usize;
    while completed < submitted {
        match ring.submit_and_wait(submitted - completed) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // The kernel may still write into the buffers: never free them.
                std::mem::forget(landings);
                return reads
                    .iter()
                    .map(|_| Err(io::Error::other("waiting for a batch of reads failed")))
                    .collect();
            }
        }
        for cqe in ring.completion() {
            if let Some(slot) = done.get_mut(cqe.user_data() as usize) {
                *slot = Some(cqe.result());
                completed += 1;
            }
        }
    }
    landings
        .into_iter()
        .zip(done)
        .zip(reads)
        .map(|((landing, result), read)| {
            let l = landing?;
            match result {
                Some(n) if n < 0 => Err(io::Error::from_raw_os_error(-n)),
                Some(n) if (n as usize) >= l.skip + l.len => {
                    Ok(l.buf.as_slice()[l.skip..l.skip + l.len].to_vec())
                }
                // A short read (rare: a signal, the file's end): the rest the plain way.
                Some(_) | None => {
                    let mut buf = vec![0u8; read.len];
                    read.file.read_exact_at(&mut buf, read.offset).map(|()| buf)
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, StdFs};
    use std::sync::Arc;

    #[test]
    fn a_batch_reads_buffered_and_direct_files_at_any_offset() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let buffered = StdFs.open(&path).expect("open");
        let direct = StdFs.open_direct(&path).expect("open direct");
        let mut reads = Vec::new();
        for i in 0..100u64 {
            let file = if i % 2 == 0 { &buffered } else { &direct };
            reads.push(BatchRead {
                file: Arc::clone(file),
                offset: i * 2_917 % 290_000,
                len: 1 + (i as usize * 97) % 9_000,
            });
        }
        reads.push(BatchRead {
            file: Arc::clone(&direct),
            offset: 299_000,
            len: 2_000,
        });
        let wanted: Vec<(usize, usize)> =
            reads.iter().map(|r| (r.offset as usize, r.len)).collect();
        let Some(results) = read_batch(&reads) else {
            eprintln!("skipped: io_uring is not available here");
            return;
        };
        assert_eq!(results.len(), 101);
        for (i, ((offset, len), r)) in wanted.iter().zip(&results).enumerate().take(100) {
            assert_eq!(
                r.as_ref().expect("read"),
                &data[*offset..offset + len],
                "read {i}"
            );
        }
        let e = results[100].as_ref().expect_err("past the end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
    }
}
