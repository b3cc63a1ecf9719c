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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use super::direct::{AlignedBuf, ALIGNMENT};
use super::{BatchRead, RandomAccessFile};

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

/// This thread's ring and arena in `slot`, made on first use; `None` (and io_uring marked
/// unavailable for every thread) where the kernel refuses a ring.
fn make_ring(slot: &mut Option<(IoUring, AlignedBuf)>) -> Option<&mut (IoUring, AlignedBuf)> {
    if slot.is_none() {
        match IoUring::new(RING_ENTRIES).and_then(|ring| Ok((ring, AlignedBuf::new(FIRST_ARENA)?)))
        {
            Ok(made) => *slot = Some(made),
            Err(_) => {
                UNAVAILABLE.store(true, Ordering::Relaxed);
                return None;
            }
        }
    }
    slot.as_mut()
}

/// The direct-I/O span holding `len` bytes at `offset`: its aligned start, its length, and
/// where the wanted bytes start in it.
fn aligned_span(offset: u64, len: usize) -> (u64, usize, usize) {
    let a = ALIGNMENT as u64;
    let start = offset / a * a;
    let end = (offset + len as u64).div_ceil(a) * a;
    (start, (end - start) as usize, (offset - start) as usize)
}

/// The largest read that spins: a few data blocks. Longer reads (compaction inputs, a scan's
/// grown readahead) take long enough that a sleep costs little beside them.
const MAX_SPIN_READ: usize = 64 << 10;

/// Reads waiting for the device at this moment through [`DeviceWait`], across threads, a batch
/// counted as one: those polling and those asleep.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// The most single reads that may wait for the device while one of them polls: one fewer than
/// the cores. A polling reader then never keeps the last core from a thread with work (a flush,
/// or a reader whose block arrived); and where more readers wait than that, their answers
/// arriving keep the cores busy without polling. Four readers on 2 cores ran 0.86–0.97× as
/// fast with each read polling as with none (`BENCHMARKS.md`, "Polled buffered reads").
fn max_spinning() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::thread::available_parallelism().map_or(0, |cores| cores.get().saturating_sub(1))
    })
}

/// One read waiting for the device, counted in [`WAITING`] while it lives.
struct DeviceWait {
    may_poll: bool,
}

impl DeviceWait {
    /// Counts a read that is about to wait for the device.
    fn enter() -> DeviceWait {
        let waiting = WAITING.fetch_add(1, Ordering::AcqRel) + 1;
        DeviceWait {
            may_poll: waiting <= max_spinning(),
        }
    }

    /// Whether this read may poll ([`read_spinning`]): no more reads wait, itself included,
    /// than [`max_spinning`] allows.
    fn may_poll(&self) -> bool {
        self.may_poll
    }
}

impl Drop for DeviceWait {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Reads `buf.len()` bytes at `offset` of `file` for a read that waits for the device: polled
/// for up to `poll` ([`read_spinning`]) where its [`DeviceWait`] allows it, else (or where
/// io_uring is unavailable, the file has no descriptor, or the read runs past the file's end)
/// by the file's plain read, asleep. The wait is counted either way. `polled_error` names a
/// failed polled read as the plain read names its own.
pub(super) fn read_waiting(
    file: &dyn RandomAccessFile,
    offset: u64,
    buf: &mut [u8],
    poll: Duration,
    polled_error: impl FnOnce(io::Error) -> io::Error,
) -> io::Result<()> {
    let wait = DeviceWait::enter();
    let in_file = offset
        .checked_add(buf.len() as u64)
        .is_some_and(|end| end <= file.len());
    if in_file && !poll.is_zero() && wait.may_poll() {
        if let Some((fd, _)) = file.descriptor() {
            if let Some(done) = read_spinning(fd, offset, buf, poll) {
                return done.map_err(polled_error);
            }
        }
    }
    file.read_exact_at(buf, offset)
}

/// Reads `out.len()` bytes at `offset` of the file `fd` (direct or buffered) through this
/// thread's ring, and checks for the completion in a loop for up to `spin_for` instead of
/// sleeping in the kernel: at queue depth 1 the sleep and the wakeup around each device read
/// are a large share of a lookup that misses every cache (`BENCHMARKS.md`, "Out of cache").
/// `None` (nothing read) where io_uring is unavailable: the caller then reads the plain way and
/// sleeps. Callers poll only where their [`DeviceWait`] allows it ([`read_waiting`]). The span
/// read is aligned for direct I/O (a buffered file reads the same whole pages the page cache
/// would); it lands in the ring's arena and the wanted bytes are copied out, so the caller's
/// buffer is never the kernel's.
pub(super) fn read_spinning(
    fd: RawFd,
    offset: u64,
    out: &mut [u8],
    spin_for: Duration,
) -> Option<io::Result<()>> {
    if UNAVAILABLE.load(Ordering::Relaxed) || out.is_empty() || out.len() > MAX_SPIN_READ {
        return None;
    }
    let (start, span, skip) = aligned_span(offset, out.len());
    RING.with(|cell| {
        // A batch's short read finishes with a plain read of its file while the batch holds the
        // ring: that read must not take it again.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return None;
        };
        let (ring, arena) = make_ring(&mut slot)?;
        if arena.len() < span {
            *arena = AlignedBuf::new(span.next_power_of_two()).ok()?;
        }
        let entry = opcode::Read::new(
            types::Fd(fd),
            arena.as_mut_slice().as_mut_ptr(),
            span as u32,
        )
        .offset(start)
        .build();
        // SAFETY: the arena outlives the read: this function takes its completion before it
        // returns, or leaks the ring and the arena where it cannot.
        if unsafe { ring.submission().push(&entry) }.is_err() || ring.submit().is_err() {
            // Nothing is in flight if the push failed; a failed submit leaves it unknown.
            std::mem::forget(slot.take());
            return None;
        }
        let mut result = None;
        let waited = await_completions(ring, 1, spin_for, |ring| {
            if result.is_none() {
                result = ring.completion().next().map(|cqe| cqe.result());
            }
            usize::from(result.is_some())
        });
        if let Err(e) = waited {
            std::mem::forget(slot.take());
            return Some(Err(e));
        }
        match result? {
            n if n < 0 => Some(Err(io::Error::from_raw_os_error(-n))),
            n if n as usize >= skip + out.len() => {
                out.copy_from_slice(&arena.as_slice()[skip..skip + out.len()]);
                Some(Ok(()))
            }
            // A short read (a signal, the file's end): the caller reads the plain way.
            _ => None,
        }
    })
}

/// Waits until `collect` (which takes completions off `ring` and returns how many it has taken
/// in all) has `want`: checks the completion queue in a loop for up to `poll`, then sleeps in
/// the kernel for the rest, submitting whatever is still queued. An error is the wait's; reads
/// may then still be in flight.
fn await_completions(
    ring: &mut IoUring,
    want: usize,
    poll: Duration,
    mut collect: impl FnMut(&mut IoUring) -> usize,
) -> io::Result<()> {
    let started = Instant::now();
    loop {
        let taken = collect(ring);
        if taken >= want {
            return Ok(());
        }
        if started.elapsed() >= poll {
            match ring.submit_and_wait(want - taken) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
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
    // The batch waits as one read does.
    let wait = DeviceWait::enter();
    let poll = match reads.iter().map(|r| r.poll).max() {
        Some(poll) if wait.may_poll() => poll,
        _ => Duration::ZERO,
    };
    RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        make_ring(&mut slot)?;
        let mut results = Vec::with_capacity(reads.len());
        for chunk in reads.chunks(RING_ENTRIES as usize) {
            let (ring, arena) = slot.as_mut()?;
            match read_round(ring, arena, chunk, poll) {
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
    let (start, span, skip) = aligned_span(read.offset, read.len);
    let landing = Landing {
        fd,
        offset: start,
        at: *at,
        span,
        skip,
        len: read.len,
    };
    *at += span;
    Ok(landing)
}

/// One round of at most [`RING_ENTRIES`] reads: each read's result, or an error when the wait
/// for them failed (reads may then still be in flight into the arena). Their answers are
/// checked for in a loop for up to `poll` before the round sleeps for the rest.
fn read_round(
    ring: &mut IoUring,
    arena: &mut AlignedBuf,
    reads: &[BatchRead],
    poll: Duration,
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
    if !poll.is_zero() && submitted > 0 {
        // Polling needs the reads in flight; sleeping submits them with its wait.
        ring.submit()?;
    }
    await_completions(ring, submitted, poll, |ring| {
        for cqe in ring.completion() {
            if let Some(slot) = done.get_mut(cqe.user_data() as usize) {
                *slot = Some(cqe.result());
                completed += 1;
            }
        }
        completed
    })?;
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
    fn a_spinning_read_returns_the_bytes_at_any_offset_and_refuses_long_reads() {
        const SPIN: Duration = Duration::from_micros(150);
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path);
        let Ok(file) = file else {
            eprintln!("skipped: this file system refuses O_DIRECT");
            return;
        };
        let mut spun = 0;
        for i in 0..200u64 {
            let offset = i * 977 % 190_000;
            let mut out = vec![0u8; 1 + (i as usize * 53) % 9_000];
            let Some(result) = read_spinning(file.as_raw_fd(), offset, &mut out, SPIN) else {
                continue;
            };
            result.expect("read");
            assert_eq!(
                out,
                &data[offset as usize..offset as usize + out.len()],
                "read {i}"
            );
            spun += 1;
        }
        if !UNAVAILABLE.load(Ordering::Relaxed) {
            assert_eq!(
                spun, 200,
                "every read goes through the ring where it is available"
            );
        }
        let mut long = vec![0u8; MAX_SPIN_READ + 1];
        assert!(read_spinning(file.as_raw_fd(), 0, &mut long, SPIN).is_none());
    }

    #[test]
    fn a_polled_buffered_read_returns_the_bytes_whether_the_page_cache_holds_them_or_not() {
        const POLL: Duration = Duration::from_micros(150);
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        // Not a whole number of pages: the last reads' aligned spans run past the end.
        let data: Vec<u8> = (0..200_003u32).map(|i| (i * 29 % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let evict = || {
            // Clean pages leave the page cache when asked, so the reads below wait for the
            // device and take the ring's path.
            let f = std::fs::File::open(&path).expect("open");
            f.sync_all().expect("sync");
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise");
        };
        let file = StdFs.open(&path).expect("open");
        for round in 0..2 {
            if round == 0 {
                evict();
            }
            for i in 0..200u64 {
                let len = 1 + (i as usize * 53) % 9_000;
                let offset = if i % 10 == 0 {
                    (data.len() - len) as u64
                } else {
                    i * 977 % 190_000
                };
                let mut out = vec![0u8; len];
                file.read_exact_at_polling(&mut out, offset, POLL)
                    .expect("read");
                assert_eq!(
                    out,
                    &data[offset as usize..offset as usize + len],
                    "round {round}, read {i}"
                );
            }
        }
        let mut past_end = vec![0u8; 10];
        let err = file
            .read_exact_at_polling(&mut past_end, data.len() as u64 - 5, POLL)
            .expect_err("a read past the end");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_batch_reads_buffered_and_direct_files_at_any_offset_polled_or_not() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let buffered = StdFs.open(&path).expect("open");
        let direct = StdFs.open_direct(&path).expect("open direct");
        for poll in [Duration::ZERO, Duration::from_micros(150)] {
            let mut reads = Vec::new();
            for i in 0..100u64 {
                let file = if i % 2 == 0 { &buffered } else { &direct };
                reads.push(BatchRead {
                    file: Arc::clone(file),
                    offset: i * 2_917 % 290_000,
                    len: 1 + (i as usize * 97) % 9_000,
                    poll,
                });
            }
            reads.push(BatchRead {
                file: Arc::clone(&direct),
                offset: 299_000,
                len: 2_000,
                poll,
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
                    "read {i}, polling for {poll:?}"
                );
            }
            let e = results[100].as_ref().expect_err("past the end");
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        }
    }
}
