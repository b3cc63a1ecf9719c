//! The file-system seam: every byte the engine reads or writes goes through [`FileSystem`].
//!
//! [`StdFs`] is the real implementation; [`MemFs`] keeps files in memory (tests, with power-loss
//! simulation); [`FaultFs`] wraps either and injects I/O errors (reliability tests);
//! [`RecordingFs`] wraps either and records the file trace a storage device would see.

#[cfg(target_os = "linux")]
mod direct;
mod fault;
mod mem;
mod recording;
mod std_fs;
#[cfg(target_os = "linux")]
mod uring;

#[cfg(target_os = "linux")]
pub use direct::{AlignedBuf, ALIGNMENT};
pub use fault::{FaultFs, FaultKind, FaultStats, FileClass, FileClasses};
pub use mem::MemFs;
pub use recording::RecordingFs;
pub use std_fs::StdFs;

use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file being written sequentially. Dropping it closes it without syncing.
pub trait WritableFile: Send + Sync {
    /// Appends `data` (possibly buffered).
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Hands buffered data to the operating system.
    fn flush(&mut self) -> io::Result<()>;
    /// Makes everything appended so far durable (flush, then fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// Whether nothing was appended yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Asks the operating system to start writing what was handed to it (by [`flush`] or a large
    /// append) to the device, without waiting and without any durability promise, so that a
    /// later [`sync`] has less left to wait for. A hint: the default does nothing, and so does
    /// every file system but [`StdFs`] on Linux (`sync_file_range` with
    /// `SYNC_FILE_RANGE_WRITE`, as RocksDB's `bytes_per_sync`).
    ///
    /// [`flush`]: WritableFile::flush
    /// [`sync`]: WritableFile::sync
    fn start_writeback(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A [`WritableFile`] that starts the writeback of what it wrote every `every` bytes
/// ([`WritableFile::start_writeback`]), so that its final sync waits for the last stretch only.
pub struct WritebackEvery {
    inner: Box<dyn WritableFile>,
    every: u64,
    started_at: u64,
}

impl WritebackEvery {
    /// Wraps `inner`; `every` > 0.
    pub fn new(inner: Box<dyn WritableFile>, every: u64) -> Self {
        debug_assert!(every > 0);
        WritebackEvery {
            inner,
            every,
            started_at: 0,
        }
    }
}

impl WritableFile for WritebackEvery {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.inner.append(data)?;
        let len = self.inner.len();
        if len - self.started_at >= self.every {
            self.started_at = len;
            self.inner.start_writeback()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn start_writeback(&mut self) -> io::Result<()> {
        self.inner.start_writeback()
    }
}

/// A file read at arbitrary offsets, shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; an `UnexpectedEof` error if the file is shorter.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// The file's size in bytes.
    fn len(&self) -> u64;
    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The operating system's descriptor of the file and whether it was opened for direct I/O,
    /// for a file system that hands batches of reads to the kernel
    /// ([`FileSystem::read_batch`]); `None` (the default) for files without one.
    fn descriptor(&self) -> Option<(std::os::fd::RawFd, bool)> {
        None
    }
    /// Like [`read_exact_at`](Self::read_exact_at), but a file that waits for a device may
    /// check for the read's completion in a loop for up to `poll` before it sleeps: a small read
    /// then skips the sleep and the wakeup, at the price of the processor time it polls. Only
    /// [`StdFs`]'s files poll (through io_uring, buffered ones only where the page cache lacks
    /// the bytes, and only while fewer reads wait for the device than the machine has cores);
    /// the default reads as `read_exact_at` does.
    fn read_exact_at_polling(
        &self,
        buf: &mut [u8],
        offset: u64,
        poll: std::time::Duration,
    ) -> io::Result<()> {
        let _ = poll;
        self.read_exact_at(buf, offset)
    }
    /// The `len` bytes at `offset` if the operating system holds them in memory and hands them
    /// over without waiting for the device; `None` if it does not. A batch of reads so sends to
    /// the device only the reads that wait ([`FileSystem::read_batch`]), and knows whether any
    /// did. Errors are not reported here: the read then goes with the batch, which reports them.
    /// The default reads nothing (and allocates nothing).
    fn read_if_cached(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let _ = (offset, len);
        None
    }
}

/// One read of a batch ([`FileSystem::read_batch`]): `len` bytes at `offset` of `file`.
pub struct BatchRead {
    /// The file.
    pub file: Arc<dyn RandomAccessFile>,
    /// Where the read starts.
    pub offset: u64,
    /// How many bytes it reads.
    pub len: usize,
    /// How long the batch may check for its reads' answers in a loop before it sleeps
    /// ([`RandomAccessFile::read_exact_at_polling`]); a batch polls for the longest of its
    /// reads'. Zero: sleep at once.
    pub poll: std::time::Duration,
}

/// A held lock on a file; released when dropped.
pub trait FileLock: Send + Sync + Debug {}

/// The operations the engine needs from a file system. Paths are absolute or relative to the
/// process; the engine always passes paths inside the database directory.
pub trait FileSystem: Send + Sync + Debug + 'static {
    /// Creates `path` and its parents if missing.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Creates (or truncates) `path` for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) `path` for appending small records that must survive a process
    /// crash once flushed, without a system call per flush where the file system allows it.
    ///
    /// CONTRACT: a crash (of the process or the machine) may leave the file longer than what was
    /// appended, the rest zero-filled; closing it normally cuts it to the appended length. Only
    /// logs whose readers end at a zero-filled tail may use it. [`StdFs`] on Linux appends
    /// through a shared mapping grown 256 KiB at a time; by default this is
    /// [`create`](Self::create).
    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// Opens `path` for random reads.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>>;
    /// Opens `path` for random reads that go around the page cache (`O_DIRECT`): every read
    /// goes to the device. Reads keep [`RandomAccessFile`]'s contract (any offset and length).
    ///
    /// CONTRACT: a file system that cannot read this way fails with
    /// [`io::ErrorKind::InvalidInput`] (what `O_DIRECT` gets on ramfs) or
    /// [`io::ErrorKind::Unsupported`] (the default), never by reading through a cache instead.
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        Err(no_direct_io("opening", path))
    }
    /// Creates (or truncates) `path` for appends that go around the page cache (`O_DIRECT`),
    /// with [`WritableFile`]'s contract: appended bytes reach the file by a flush (whole
    /// blocks) or a sync (everything). Refuses like [`open_direct`](Self::open_direct).
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Err(no_direct_io("creating", path))
    }
    /// Reads every one of `reads` (files this file system opened), as many at once as it can,
    /// and returns what each read, in the order of `reads`. The default reads them in parallel
    /// on a pool of threads, through each file's [`RandomAccessFile::read_exact_at`];
    /// [`StdFs`] submits them to the kernel together (io_uring) where it can.
    fn read_batch(&self, reads: Vec<BatchRead>) -> Vec<io::Result<Vec<u8>>> {
        crate::io_pool::read_all(reads)
    }
    /// Reads the whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes `to` a file with `from`'s contents, synced, that later changes to `from` leave
    /// alone (a checkpoint's tables; `from` is never written again). [`StdFs`] makes a hard
    /// link and copies where the file system cannot (another device); the default copies.
    fn link_or_copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        copy_file(self, from, to).map(drop)
    }
    /// Deletes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Cuts the file at `path` to `len` bytes (`ftruncate`), without syncing it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Names (not paths) of the entries of directory `path`.
    fn list(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Size of the file at `path`.
    fn file_size(&self, path: &Path) -> io::Result<u64>;
    /// Makes the directory's entries (creations, renames, deletions) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (creating it), failing with `WouldBlock` if another
    /// process or handle holds it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;
}

/// Copies `from` to a new file `to` through `fs` and syncs it; returns the bytes copied.
pub(crate) fn copy_file<F: FileSystem + ?Sized>(fs: &F, from: &Path, to: &Path) -> io::Result<u64> {
    let data = fs.read(from)?;
    let mut file = fs.create(to)?;
    file.append(&data)?;
    file.sync()?;
    Ok(data.len() as u64)
}

/// The error of a file system without direct I/O.
pub(crate) fn no_direct_io(what: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "{what} {} with direct I/O: this file system has none",
            path.display()
        ),
    )
}

/// `dir/name`.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts appended bytes and where writebacks were started.
    struct Recorder {
        len: u64,
        writebacks: Arc<parking_lot::Mutex<Vec<u64>>>,
    }

    impl WritableFile for Recorder {
        fn append(&mut self, data: &[u8]) -> io::Result<()> {
            self.len += data.len() as u64;
            Ok(())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn len(&self) -> u64 {
            self.len
        }
        fn start_writeback(&mut self) -> io::Result<()> {
            self.writebacks.lock().push(self.len);
            Ok(())
        }
    }

    #[test]
    fn writeback_starts_once_per_stretch_of_bytes() {
        let writebacks = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let inner = Recorder {
            len: 0,
            writebacks: Arc::clone(&writebacks),
        };
        let mut file = WritebackEvery::new(Box::new(inner), 1000);
        for _ in 0..25 {
            file.append(&[0u8; 300]).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(file.len(), 7500);
        // After 1200, 2400, ... bytes: the first append at or past each 1000-byte stretch.
        assert_eq!(*writebacks.lock(), vec![1200, 2400, 3600, 4800, 6000, 7200]);
    }
}
