//! Reads issued in parallel, for [`Db::multi_get`](crate::Db::multi_get): the data blocks a
//! batch of lookups needs from one run are read by a pool of threads at once, so the batch waits
//! about one device round trip for them instead of one per block.
//!
//! A pool of threads blocked in `pread` rather than io_uring: both keep a queue of reads in
//! flight at the device, and the pool needs no unsafe code, works through any
//! [`FileSystem`](crate::fs::FileSystem) (fault injection included) and with buffered and
//! direct files alike. BENCHMARKS.md has the measurement of the two side by side.

use std::collections::VecDeque;
use std::io;
use std::sync::{mpsc, Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

use crate::fs::RandomAccessFile;

/// Threads in the pool: reads of a batch in flight at once, besides the caller's own. A
/// multi_get batch of 32 lookups reaches a queue depth of 32.
const THREADS: usize = 31;

/// One read of a batch: `len` bytes at `offset` of `file`.
pub(crate) struct Read {
    pub file: Arc<dyn RandomAccessFile>,
    pub offset: u64,
    pub len: usize,
}

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
