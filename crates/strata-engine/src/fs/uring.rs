//! Batches of reads through io_uring, for [`StdFs::read_batch`](super::StdFs): one submission
//! puts every read of a batch in flight at once, and one wait collects them.
//!
//! Why io_uring and not only the pool of threads the other file systems use
//! (`crate::io_pool`): batches of 32 random 4 KiB direct reads of a 1 GiB file went at 65,381
//! reads/s through io_uring against 54,403 through the pool (medians of 3 runs each, on the
//! 2-core machine of BENCHMARKS.md; `io_pool::tests::measure_parallel_reads_pool_against_io_uring`),
//! because the pool wakes a thread per read and the ring needs one system call per batch.
//!
//! The module is allowed unsafe code (the workspace denies it): handing the kernel a buffer to
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

/// The arena a thread's first batch makes, and the size a larger one goes back to.
const FIRST_ARENA: usize = 256 << 10;

/// An arena kept between batches only up to this size.
const MAX_KEPT_ARENA: usize = 8 << 20;

thread_local! {
    /// Each reading thread's ring and the aligned arena its reads land in, made on its first
    /// batch. One arena carved for every read of a round: a mapping per read cost a `mmap`, its
    /// page faults and a `munmap` with its TLB shootdown for each block.
    static RING: RefCell<Option<(IoUring, AlignedBuf)>> = const { RefCell::new(None) };
}

/// Where one read of a batch lands in the arena: the whole span aligned, for direct files (and
/// for buffered ones, which need not be).
struct Landing {
    fd: RawFd,
    /// File offset of the span's first byte.
    offset: u64,
    /// Where the span starts in the arena, and its bytes.
    at: usize,
    span: usize,
    /// Where the wanted bytes start in the span, and how many there are.
    skip: usize,
    len: usize,
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
            let made = IoUring::new(RING_ENTRIES)
                .and_then(|ring| Ok((ring, AlignedBuf::new(FIRST_ARENA)?)));
            match made {
                Ok(made) => *slot = Some(made),
                Err(_) => {
                    UNAVAILABLE.store(true, Ordering::Relaxed);
                    return None;
                }
            }
        }
        let mut results = Vec::with_capacity(reads.len());
        for chunk in reads.chunks(RING_ENTRIES as usize) {
            let (ring, arena) = slot.as_mut()?;
            match read_round(ring, arena, chunk) {
                Ok(round) => results.extend(round),
                Err(e) => {
                    // The kernel may still write into the arena: give up the ring and the
                    // arena without freeing them, and fail what is left.
                    std::mem::forget(slot.take());
                    let kind = e.kind();
                    results.extend(
                        reads[results.len()..].iter().map(|_| {
                            Err(io::Error::new(kind, "waiting for a batch of reads failed"))
                        }),
                    );
                    return Some(results);
                }
            }
        }
        if let Some((_, arena)) = slot.as_mut().filter(|(_, a)| a.len() > MAX_KEPT_ARENA) {
            if let Ok(smaller) = AlignedBuf::new(FIRST_ARENA) {
                *arena = smaller;
            }
        }
        Some(results)
    })
}

/// Where the read lands, its span aligned, at `*at` of the arena (advanced past it).
fn landing(read: &BatchRead, at: &mut usize) -> io::Result<Landing> {
    let (fd, _) = read
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
    let a = ALIGNMENT as u64;
    let start = read.offset / a * a;
    let end = (read.offset + read.len as u64).div_ceil(a) * a;
    let span = (end - start) as usize;
    let landing = Landing {
        fd,
        offset: start,
        at: *at,
        span,
        skip: (read.offset - start) as usize,
        len: read.len,
    };
    *at += span;
    Ok(landing)
}

/// One round of at most [`RING_ENTRIES`] reads: each read's result, or an error when the wait
/// for them failed (reads may then still be in flight into the arena).
fn read_round(
    ring: &mut IoUring,
    arena: &mut AlignedBuf,
    reads: &[BatchRead],
) -> io::Result<Vec<io::Result<Vec<u8>>>> {
    let mut end = 0usize;
    let mut landings: Vec<io::Result<Landing>> =
        reads.iter().map(|r| landing(r, &mut end)).collect();
    if arena.len() < end {
        match AlignedBuf::new(end.next_power_of_two()) {
            Ok(bigger) => *arena = bigger,
            Err(e) => {
                let kind = e.kind();
                return Ok(reads
                    .iter()
                    .map(|_| Err(io::Error::new(kind, "no memory for a batch of reads")))
                    .collect());
            }
        }
    }
    let base = arena.as_mut_slice().as_mut_ptr();
    let mut submitted = 0usize;
    for (i, landing) in landings.iter_mut().enumerate() {
        let entry = match landing {
            // SAFETY (of the pointer arithmetic): `at + span <= end <= arena.len()`.
            Ok(l) => opcode::Read::new(types::Fd(l.fd), unsafe { base.add(l.at) }, l.span as u32)
                .offset(l.offset)
                .build()
                .user_data(i as u64),
            Err(_) => continue,
        };
        // SAFETY: the arena outlives every submitted read (this function waits for all of them
        // below, and its caller leaks the arena if it cannot), and nothing touches it
        // meanwhile; spans do not overlap.
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
            Err(e) => return Err(e),
        }
        for cqe in ring.completion() {
            if let Some(slot) = done.get_mut(cqe.user_data() as usize) {
                *slot = Some(cqe.result());
                completed += 1;
            }
        }
    }
    let bytes = arena.as_slice();
    Ok(landings
        .into_iter()
        .zip(done)
        .zip(reads)
        .map(|((landing, result), read)| {
            let l = landing?;
            match result {
                Some(n) if n < 0 => Err(io::Error::from_raw_os_error(-n)),
                Some(n) if (n as usize) >= l.skip + l.len => {
                    let from = l.at + l.skip;
                    Ok(bytes[from..from + l.len].to_vec())
                }
                // A short read (rare: a signal, the file's end): the rest the plain way.
                Some(_) | None => {
                    let mut buf = vec![0u8; read.len];
                    read.file.read_exact_at(&mut buf, read.offset).map(|()| buf)
                }
            }
        })
        .collect())
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
