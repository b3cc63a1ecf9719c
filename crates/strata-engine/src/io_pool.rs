//! Reads issued in parallel by a pool of threads: what
//! [`FileSystem::read_batch`](crate::fs::FileSystem::read_batch) does unless a file system has
//! something better. [`StdFs`](crate::fs::StdFs) submits batches through io_uring instead, which
//! measured faster (`fs/uring.rs` has the figures; the measurement is the ignored test below),
//! and falls back to this pool where io_uring is unavailable. The pool works through any
//! file system (fault injection included) and with buffered and direct files alike.

use std::collections::VecDeque;
use std::io;
use std::sync::{mpsc, Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

use crate::fs::BatchRead as Read;

/// Threads in the pool: reads of a batch in flight at once, besides the caller's own. A
/// multi_get batch of 32 lookups reaches a queue depth of 32.
const THREADS: usize = 31;

type Job = Box<dyn FnOnce() + Send>;

/// The jobs waiting for a thread.
#[derive(Default)]
struct Pool {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

impl Pool {
    fn worker(&self) {
        loop {
            let job = {
                let mut jobs = self.jobs.lock();
                loop {
                    if let Some(job) = jobs.pop_front() {
                        break job;
                    }
                    self.ready.wait(&mut jobs);
                }
            };
            job();
        }
    }
}

/// The pool, its threads started on first use; `None` if no thread could be started (reads
/// then go one after another).
fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<Arc<Pool>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool = Arc::new(Pool::default());
        for i in 0..THREADS {
            let worker = Arc::clone(&pool);
            let started = std::thread::Builder::new()
                .name(format!("strata-io-{i}"))
                .spawn(move || worker.worker());
            if started.is_err() && i == 0 {
                return None;
            }
        }
        Some(pool)
    })
    .as_deref()
}

fn read_one(read: &Read) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; read.len];
    read.file.read_exact_at(&mut buf, read.offset)?;
    Ok(buf)
}

/// Reads every one of `reads`, in parallel where there is more than one; the results in the
/// order of `reads`.
pub(crate) fn read_all(reads: Vec<Read>) -> Vec<io::Result<Vec<u8>>> {
    let Some(pool) = pool().filter(|_| reads.len() > 1) else {
        return reads.iter().map(read_one).collect();
    };
    let count = reads.len();
    let (sender, results) = mpsc::channel();
    let mut reads = reads.into_iter().enumerate();
    // The caller reads the first itself rather than wait idle.
    let own = reads.next();
    {
        let mut jobs = pool.jobs.lock();
        for (i, read) in reads {
            let sender = sender.clone();
            jobs.push_back(Box::new(move || {
                // The caller waits for every result, so the receiver outlives the jobs.
                let _ = sender.send((i, read_one(&read)));
            }));
        }
    }
    pool.ready.notify_all();
    drop(sender);
    let mut out: Vec<Option<io::Result<Vec<u8>>>> = (0..count).map(|_| None).collect();
    if let Some((i, read)) = own {
        out[i] = Some(read_one(&read));
    }
    for (i, result) in results.iter() {
        out[i] = Some(result);
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(io::Error::other("a parallel read was lost"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, StdFs};
    use std::time::Duration;

    #[test]
    fn every_read_comes_back_in_order_and_errors_stay_with_their_read() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let file = StdFs.open(&path).expect("open");
        let mut reads: Vec<Read> = (0..40u64)
            .map(|i| Read {
                file: Arc::clone(&file),
                offset: i * 2_411,
                len: 1_000 + i as usize,
                poll: Duration::ZERO,
            })
            .collect();
        reads.push(Read {
            file: Arc::clone(&file),
            offset: 99_990,
            len: 100,
            poll: Duration::ZERO,
        });
        let results = read_all(reads);
        assert_eq!(results.len(), 41);
        for (i, r) in results.iter().take(40).enumerate() {
            let (offset, len) = (i * 2_411, 1_000 + i);
            assert_eq!(
                r.as_ref().expect("read"),
                &data[offset..offset + len],
                "read {i}"
            );
        }
        let e = results[40].as_ref().expect_err("past the end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// The measurement behind the choice of a thread pool: batches of 32 random 4 KiB reads of
    /// a 1 GiB file read with `O_DIRECT` (no page cache between), one after another, through
    /// this pool, and through io_uring (one submission of 32 reads, then a wait for all 32).
    /// Run it with `cargo test --release -p strata-engine io_pool::tests::measure -- --ignored
    /// --nocapture` (`STRATA_MEASURE_DIR` picks the directory, a real disk; default: the
    /// system's temporary directory).
    #[test]
    #[ignore]
    #[allow(unsafe_code)]
    fn measure_parallel_reads_pool_against_io_uring() {
        use io_uring::{opcode, types, IoUring};
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        use std::time::Instant;

        const FILE: u64 = 1 << 30;
        const BATCH: usize = 32;
        const BATCHES: usize = 1500;
        let dir = std::env::var_os("STRATA_MEASURE_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let tmp = tempfile::tempdir_in(dir).expect("tempdir");
        let path = tmp.path().join("reads");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&path).expect("create");
            let chunk: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 31 % 251) as u8).collect();
            for _ in 0..FILE >> 20 {
                f.write_all(&chunk).expect("write");
            }
            f.sync_all().expect("sync");
        }
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut offsets = || -> Vec<u64> {
            (0..BATCH)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed % (FILE / 4096) * 4096
                })
                .collect()
        };
        let file = StdFs.open_direct(&path).expect("open direct");
        let report = |what: &str, started: Instant| {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{what:>10}: {:8.0} reads/s, {:7.1} µs per batch of {BATCH}",
                (BATCH * BATCHES) as f64 / secs,
                secs * 1e6 / BATCHES as f64
            );
        };

        let started = Instant::now();
        for _ in 0..BATCHES / 8 {
            for offset in offsets() {
                let mut buf = vec![0u8; 4096];
                file.read_exact_at(&mut buf, offset).expect("read");
            }
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{:>10}: {:8.0} reads/s",
            "one by one",
            (BATCH * BATCHES / 8) as f64 / secs
        );

        let started = Instant::now();
        for _ in 0..BATCHES {
            let reads = offsets()
                .into_iter()
                .map(|offset| Read {
                    file: Arc::clone(&file),
                    offset,
                    len: 4096,
                    poll: Duration::ZERO,
                })
                .collect();
            for r in read_all(reads) {
                r.expect("read");
            }
        }
        report("pool", started);

        let raw = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .expect("open");
        let mut ring = IoUring::new(64).expect("io_uring");
        let mut bufs: Vec<crate::fs::AlignedBuf> = (0..BATCH)
            .map(|_| crate::fs::AlignedBuf::new(4096).expect("buffer"))
            .collect();
        let started = Instant::now();
        for _ in 0..BATCHES {
            for (i, offset) in offsets().into_iter().enumerate() {
                let buf = bufs[i].as_mut_slice();
                let read = opcode::Read::new(types::Fd(raw.as_raw_fd()), buf.as_mut_ptr(), 4096)
                    .offset(offset)
                    .build()
                    .user_data(i as u64);
                // SAFETY: the buffer outlives the read: every read completes (the wait below)
                // before the buffers are touched again or dropped.
                unsafe { ring.submission().push(&read).expect("queue full") };
            }
            ring.submit_and_wait(BATCH).expect("submit");
            let done: Vec<i32> = ring.completion().map(|c| c.result()).collect();
            assert_eq!(done.len(), BATCH);
            assert!(done.iter().all(|&n| n == 4096), "{done:?}");
        }
        report("io_uring", started);
    }
}
