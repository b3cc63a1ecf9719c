//! [`StdFs`]: the real file system, through `std::fs`.
//!
//! Also home of [`BufferedFile`], the append buffer both file systems put in front of their files,
//! so that [`MemFs`](super::MemFs) has exactly the buffering, flushing and error behaviour of
//! [`StdFs`]: a test that forgets to flush before reading a file back fails on both.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// Size of a writable file's user-space append buffer. Appends that do not fit after the buffered
/// bytes are written first, and appends at least this large bypass the buffer.
pub(super) const WRITE_BUFFER_SIZE: usize = 64 << 10;

/// The real file system (Unix only: reads are positional `pread`s).
///
/// Files from [`create`](FileSystem::create) buffer appends in user space (64 KiB; larger appends
/// go straight to the file). Dropping one flushes its buffer best-effort and ignores errors, so
/// callers that care about the data must [`flush`](WritableFile::flush) or
/// [`sync`](WritableFile::sync) it and check the result. After any failed operation the file
/// refuses every later one: a retried write or sync could report success for lost data.
#[derive(Debug, Default, Clone)]
pub struct StdFs;

/// Returns a function that prefixes an error with what was being done and to which path, keeping
/// its kind (callers match on `NotFound`, `WouldBlock`, ...): an OS error alone does not say which
/// of the database's files is missing.
fn context<'a>(what: &'a str, path: &'a Path) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |e| io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// `e`, naming the failed read (`len` bytes at `offset` of `path`) and, in brackets, how it read
/// where that was not the plain way (`direct I/O`, ...); its kind is kept.
pub(super) fn read_error(
    path: &Path,
    len: usize,
    offset: u64,
    how: Option<&str>,
    e: io::Error,
) -> io::Error {
    let how = how.map(|how| format!(" ({how})")).unwrap_or_default();
    io::Error::new(
        e.kind(),
        format!(
            "reading {len} bytes at offset {offset} of {}{how}: {e}",
            path.display()
        ),
    )
}

impl FileSystem for StdFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path).map_err(context("creating directory", path))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(context("creating", path))?;
        Ok(Box::new(BufferedFile::new(StdSink::new(file, path))))
    }

    /// On Linux, appends through a shared mapping ([`MappedSink`]); where the file system cannot
    /// reserve space (`fallocate` unsupported), or elsewhere, like [`create`](Self::create).
    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        if !cfg!(target_os = "linux") {
            return self.create(path);
        }
        // Read access too: a shared writable mapping needs a descriptor open for both.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(context("creating", path))?;
        let mut sink = MappedSink {
            base: StdSink::new(file, path),
            map: None,
            map_start: 0,
        };
        match sink.grow() {
            Ok(()) => Ok(Box::new(BufferedFile::new(sink))),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                drop(sink);
                self.create(path)
            }
            Err(e) => Err(e),
        }
    }

    /// Advises the kernel that reads will be random (`POSIX_FADV_RANDOM`, as RocksDB's
    /// `advise_random_on_open`): a lookup's block read then brings that block's pages only, not
    /// a kernel readahead window, which costs device time and, in a memory-limited process,
    /// evicts cached pages it needs. Scans and compactions read ahead themselves
    /// (`table::ReadaheadSize`).
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(context("opening", path))?;
        // A hint: a file system without it reads as before.
        let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::Random);
        let len = file
            .metadata()
            .map_err(context("reading metadata of", path))?
            .len();
        Ok(Arc::new(StdRandomAccessFile {
            file,
            len,
            path: path.to_path_buf(),
        }))
    }

    /// Linux only; an `InvalidInput` error names the path where the file system refuses
    /// `O_DIRECT`.
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        #[cfg(target_os = "linux")]
        return Ok(Arc::new(super::direct::open(path)?));
        #[cfg(not(target_os = "linux"))]
        Err(super::no_direct_io("opening", path))
    }

    /// Linux only, like [`open_direct`](Self::open_direct).
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        #[cfg(target_os = "linux")]
        return Ok(Box::new(super::direct::create(path)?));
        #[cfg(not(target_os = "linux"))]
        Err(super::no_direct_io("creating", path))
    }

    /// Through io_uring (Linux) when every file has a descriptor and the kernel allows it,
    /// else on the pool of threads every file system has.
    fn read_batch(&self, reads: Vec<super::BatchRead>) -> Vec<io::Result<Vec<u8>>> {
        #[cfg(target_os = "linux")]
        if reads.len() > 1 && reads.iter().all(|r| r.file.descriptor().is_some()) {
            if let Some(results) = super::uring::read_batch(&reads) {
                return results;
            }
        }
        crate::io_pool::read_all(reads)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path).map_err(context("reading", path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("renaming {} to {}: {e}", from.display(), to.display()),
            )
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path).map_err(context("removing", path))
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        match fs::hard_link(from, to) {
            Ok(()) => Ok(()),
            // Another device (EXDEV) or a file system without links: copy.
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => super::copy_file(self, from, to)
                .map(drop)
                .map_err(context("copying", from)),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("linking {} to {}: {e}", from.display(), to.display()),
            )),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(len))
            .map_err(context("truncating", path))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    /// Sorted, so that both file systems list a directory identically. Names that are not UTF-8
    /// (never created by the engine) are converted lossily rather than failing the whole listing.
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path).map_err(context("listing", path))? {
            let entry = entry.map_err(context("listing", path))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort_unstable();
        Ok(names)
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)
            .map_err(context("reading metadata of", path))?
            .len())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)
            .and_then(|dir| dir.sync_all())
            .map_err(context("syncing directory", path))
    }

    /// An advisory `flock`-style lock: it excludes other processes and other handles of this
    /// process (each `lock` call opens its own file description), and the kernel releases it if
    /// the process dies, so a crash never leaves a stale lock behind.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(context("creating lock file", path))?;
        // File::try_lock (Rust 1.89, the workspace's minimum) takes an OS advisory lock.
        let locked = file.try_lock();
        match locked {
            Ok(()) => Ok(Box::new(StdFileLock { _file: file })),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another process or handle", path.display()),
            )),
            Err(TryLockError::Error(e)) => Err(context("locking", path)(e)),
        }
    }
}

/// Where a [`BufferedFile`] sends its bytes.
pub(super) trait Sink: Send + Sync {
    /// Writes all of `data` at the end of the file.
    fn write_all(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes everything written so far durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Starts writing what was written so far to the device without waiting for it
    /// ([`WritableFile::start_writeback`]); by default nothing.
    fn start_writeback(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A [`WritableFile`] with a user-space append buffer in front of a [`Sink`].
///
/// After any failed operation the file is *poisoned*: every later call fails with the first
/// error. Retrying is never safe: a failed write may have reached the file partially, and after a
/// failed `fsync` Linux may mark the dirty pages clean, so a retried sync could report success
/// for data that was lost (the PostgreSQL "fsyncgate" lesson). The caller must abandon the file.
///
/// Dropping the file flushes the buffer best-effort and ignores errors: callers that care about
/// the data must call [`flush`](WritableFile::flush) or [`sync`](WritableFile::sync) and check it.
pub(super) struct BufferedFile<S: Sink> {
    sink: S,
    buf: Vec<u8>,
    /// Bytes appended so far, buffered ones included.
    len: u64,
    /// The first error, kept as kind and message because `io::Error` is not `Clone`.
    poisoned: Option<(io::ErrorKind, String)>,
}

impl<S: Sink> BufferedFile<S> {
    pub(super) fn new(sink: S) -> Self {
        BufferedFile {
            sink,
            buf: Vec::with_capacity(WRITE_BUFFER_SIZE),
            len: 0,
            poisoned: None,
        }
    }

    fn check(&self) -> io::Result<()> {
        match &self.poisoned {
            None => Ok(()),
            Some((kind, message)) => Err(io::Error::new(
                *kind,
                format!("file unusable after an earlier error: {message}"),
            )),
        }
    }

    /// Runs `op`, poisoning the file if it fails.
    fn guard<T>(&mut self, op: impl FnOnce(&mut Self) -> io::Result<T>) -> io::Result<T> {
        self.check()?;
        op(self).inspect_err(|e| self.poisoned = Some((e.kind(), e.to_string())))
    }

    fn write_buffer(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.sink.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl<S: Sink> WritableFile for BufferedFile<S> {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.guard(|f| {
            if f.buf.len() + data.len() > WRITE_BUFFER_SIZE {
                f.write_buffer()?;
            }
            if data.len() >= WRITE_BUFFER_SIZE {
                // Copying a large append through the buffer would only cost a memcpy.
                f.sink.write_all(data)?;
            } else {
                f.buf.extend_from_slice(data);
            }
            f.len += data.len() as u64;
            Ok(())
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        self.guard(Self::write_buffer)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.guard(|f| {
            f.write_buffer()?;
            f.sink.sync()
        })
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// Only what already left the buffer: writing the buffer out just to start its writeback
    /// would turn a hint into a system call per record.
    fn start_writeback(&mut self) -> io::Result<()> {
        self.guard(|f| f.sink.start_writeback())
    }
}

impl<S: Sink> Drop for BufferedFile<S> {
    fn drop(&mut self) {
        if self.poisoned.is_none() {
            // Best effort by design (see the type's docs): Drop cannot report an error.
            let _ = self.write_buffer();
        }
    }
}

/// The page size writeback is aligned to (a multiple of the real one works as well).
const PAGE: u64 = 4096;

/// The tail of a file [`Sink::start_writeback`] leaves alone. RocksDB's range sync holds back
/// 1 MiB for the same reason.
const WRITEBACK_HOLDBACK: u64 = 1 << 20;

/// A real file opened for appending.
struct StdSink {
    file: File,
    path: PathBuf,
    /// Bytes written to the file.
    written: u64,
    /// Where the next [`Sink::start_writeback`] starts: bytes before it were handed to an
    /// earlier one or to a sync.
    writeback_from: u64,
}

impl StdSink {
    /// `file`, just created at `path`, with nothing written.
    fn new(file: File, path: &Path) -> Self {
        StdSink {
            file,
            path: path.to_path_buf(),
            written: 0,
            writeback_from: 0,
        }
    }
}

impl Sink for StdSink {
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.file
            .write_all(data)
            .map_err(context("writing", &self.path))?;
        self.written += data.len() as u64;
        Ok(())
    }

    /// Leaves the last [`WRITEBACK_HOLDBACK`] bytes out, page-aligned: appends still land
    /// there, and a page under writeback can make the next append to it wait for the device.
    fn start_writeback(&mut self) -> io::Result<()> {
        let from = self.writeback_from;
        let to = self.written.saturating_sub(WRITEBACK_HOLDBACK) & !(PAGE - 1);
        if to > from {
            sync_file_range_write(&self.file, from, to - from)
                .map_err(context("starting writeback of", &self.path))?;
            self.writeback_from = to;
        }
        Ok(())
    }

    /// `fdatasync`: the file's data and the metadata needed to read it back (its size), without
    /// the timestamps. A new file's directory entry additionally needs
    /// [`FileSystem::sync_dir`].
    fn sync(&mut self) -> io::Result<()> {
        self.file
            .sync_data()
            .map_err(context("syncing", &self.path))?;
        self.writeback_from = self.written;
        Ok(())
    }
}

/// Bytes a [`MappedSink`] grows its file by, and maps, at a time: the most a crash leaves
/// zero-filled after the last record, and the most the mapping adds to the resident set (its
/// written pages count there until unmapped). Growing costs an `fallocate`, an `mmap` and an
/// `munmap`, about once per 1,700 WAL records of 150 bytes.
const MAPPED_CHUNK: u64 = 256 << 10;

/// A file appended through a shared mapping of its last chunk ([`FileSystem::create_mapped`]).
///
/// An append is a copy into the page cache: no system call, and like a `write` it survives a
/// crash of the process (the pages belong to the file, not the process) but not of the machine
/// until a sync. Syncs and writeback hints are those of [`StdSink`]: `fdatasync` and
/// `sync_file_range` write pages dirtied through a mapping like any others.
///
/// The file grows [`MAPPED_CHUNK`] bytes at a time with `fallocate`, which reserves the blocks:
/// a full disk is an error from `append`, where a sparse file would deliver `SIGBUS` at a store.
/// Dropping the file unmaps it and cuts it to the bytes written; a crash leaves the zero-filled
/// rest of the chunk, which log readers drop as a torn tail.
///
/// The mapping is only sound while nobody truncates the file under it (a store past the end of
/// the file is `SIGBUS`): the engine owns its WALs, and its own cut after a failed write
/// ([`Db`](crate::Db)'s failure rule 1) happens after the writer is dropped.
struct MappedSink {
    base: StdSink,
    /// The mapped chunk, ending at the file's allocated size; `None` before the first growth.
    map: Option<memmap2::MmapMut>,
    /// The file offset of the mapping's first byte.
    map_start: u64,
}

impl MappedSink {
    /// Extends the file by a chunk and maps that chunk in place of the previous one.
    #[allow(unsafe_code)]
    fn grow(&mut self) -> io::Result<()> {
        let start = self.map_start + self.map.as_ref().map_or(0, |m| m.len() as u64);
        // Unmapping leaves what was stored in the page cache, dirty pages and all.
        self.map = None;
        fallocate(&self.base.file, start, MAPPED_CHUNK)
            .map_err(context("reserving space in", &self.base.path))?;
        // SAFETY: the mapping covers bytes the file now holds, and nothing truncates the file
        // while it is mapped (see the type's docs): this struct owns the descriptor, and the
        // file is cut only in `drop`, after unmapping.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(start)
                .len(MAPPED_CHUNK as usize)
                .map_mut(&self.base.file)
        }
        .map_err(context("mapping", &self.base.path))?;
        self.map = Some(map);
        self.map_start = start;
        Ok(())
    }
}

impl Sink for MappedSink {
    fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let at = (self.base.written - self.map_start) as usize;
            let map = match &mut self.map {
                Some(map) if at < map.len() => map,
                _ => {
                    self.grow()?;
                    continue;
                }
            };
            let n = (map.len() - at).min(data.len());
            map[at..at + n].copy_from_slice(&data[..n]);
            self.base.written += n as u64;
            data = &data[n..];
        }
        Ok(())
    }

    fn start_writeback(&mut self) -> io::Result<()> {
        self.base.start_writeback()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.base.sync()
    }
}

impl Drop for MappedSink {
    fn drop(&mut self) {
        self.map = None;
        // Best effort, like a buffered file's drop: the zero-filled rest is a torn tail to
        // readers if this fails.
        let _ = self.base.file.set_len(self.base.written);
    }
}

/// `offset` and `len` as the C type of file offsets, if both fit.
#[cfg(target_os = "linux")]
fn file_range(offset: u64, len: u64) -> Option<(libc::off64_t, libc::off64_t)> {
    Some((
        libc::off64_t::try_from(offset).ok()?,
        libc::off64_t::try_from(len).ok()?,
    ))
}

/// `fallocate(fd, 0, offset, len)`: allocates the range's blocks, extending the file. `std` has
/// no call for it (`File::set_len` makes a sparse file), hence the `libc` call. An
/// `Unsupported` error means the file system cannot.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn fallocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Some((offset, len)) = file_range(offset, len) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "file offset beyond what fallocate can name",
        ));
    };
    // SAFETY: the descriptor is open for as long as `file` is borrowed, and the call only reads
    // its integer arguments.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP | libc::ENOSYS) => Err(io::Error::new(io::ErrorKind::Unsupported, e)),
        _ => Err(e),
    }
}

/// Elsewhere mapped files are not used.
#[cfg(not(target_os = "linux"))]
fn fallocate(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no fallocate"))
}

/// `sync_file_range(fd, offset, len, SYNC_FILE_RANGE_WRITE)`: queues the range's dirty pages for
/// writeback and returns without waiting. No crate the workspace uses wraps it (`nix` 0.32 and
/// `rustix` 1 do not), hence the `libc` call.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn sync_file_range_write(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Some((offset, len)) = file_range(offset, len) else {
        return Ok(()); // beyond what the call can name; the hint is optional
    };
    // SAFETY: the descriptor is open for as long as `file` is borrowed, and the call only reads
    // its integer arguments; it touches no memory of this process.
    let rc = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Elsewhere the hint does nothing.
#[cfg(not(target_os = "linux"))]
fn sync_file_range_write(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

/// A real file read with positional reads, so threads share it without a cursor or a lock.
struct StdRandomAccessFile {
    file: File,
    /// The size at open: files the engine reads are immutable by then.
    len: u64,
    path: PathBuf,
}

impl StdRandomAccessFile {
    /// Fills `buf` from `offset` if the page cache holds all of it: `preadv2` with `RWF_NOWAIT`
    /// (Linux 4.14 on), where the kernel copies what the page cache holds and refuses
    /// (`EAGAIN`) or shortens a read that would wait for the device. A short read, a refusal,
    /// an error, or a kernel or file system without the flag is `false` (`buf` then holds
    /// nothing to use).
    #[cfg(target_os = "linux")]
    fn copy_if_cached(&self, buf: &mut [u8], offset: u64) -> bool {
        use rustix::io::{preadv2, ReadWriteFlags};
        let len = buf.len();
        let read = preadv2(
            &self.file,
            &mut [io::IoSliceMut::new(buf)],
            offset,
            ReadWriteFlags::NOWAIT,
        );
        matches!(read, Ok(n) if n == len)
    }
}

impl RandomAccessFile for StdRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| read_error(&self.path, buf.len(), offset, None, e))
    }

    /// What the page cache holds is copied at once ([`StdRandomAccessFile::copy_if_cached`],
    /// as a plain read would); a read that would wait for the device goes through the thread's
    /// io_uring ring and is polled for ([`super::uring::read_waiting`]), as direct reads are.
    #[cfg(target_os = "linux")]
    fn read_exact_at_polling(
        &self,
        buf: &mut [u8],
        offset: u64,
        poll: std::time::Duration,
    ) -> io::Result<()> {
        if poll.is_zero() {
            return self.read_exact_at(buf, offset);
        }
        if self.copy_if_cached(buf, offset) {
            return Ok(());
        }
        let len = buf.len();
        super::uring::read_waiting(self, offset, buf, poll, |e| {
            read_error(&self.path, len, offset, None, e)
        })
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn descriptor(&self) -> Option<(std::os::fd::RawFd, bool)> {
        use std::os::fd::AsRawFd;
        Some((self.file.as_raw_fd(), false))
    }

    /// [`StdRandomAccessFile::copy_if_cached`] into a buffer of its own.
    #[cfg(target_os = "linux")]
    fn read_if_cached(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.copy_if_cached(&mut buf, offset).then_some(buf)
    }
}

/// Keeps the locked file open; closing it (on drop) releases the lock. (`File`'s `Debug` shows
/// the path.)
#[derive(Debug)]
struct StdFileLock {
    _file: File,
}

impl FileLock for StdFileLock {}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Behaviour every [`FileSystem`] must show, run against a fresh, empty directory `root`.
    pub(in crate::fs) fn conformance(fs: &dyn FileSystem, root: &Path) {
        let dir = root.join("db");
        fs.create_dir_all(&dir).expect("create_dir_all");
        fs.create_dir_all(&dir)
            .expect("create_dir_all is idempotent");
        assert!(fs.exists(&dir));
        assert_eq!(fs.list(&dir).expect("list"), Vec::<String>::new());

        // Write, flush, sync, read back.
        let a = dir.join("a.log");
        let mut w = fs.create(&a).expect("create");
        assert!(w.is_empty());
        w.append(b"hello ").expect("append");
        w.append(b"world").expect("append");
        assert_eq!(w.len(), 11);
        assert_eq!(
            fs.read(&a).expect("read"),
            b"",
            "appends are buffered until flushed"
        );
        w.flush().expect("flush");
        assert_eq!(fs.read(&a).expect("read"), b"hello world");
        let big = vec![7u8; WRITE_BUFFER_SIZE + 3];
        w.append(b"!").expect("append");
        w.append(&big).expect("a large append bypasses the buffer");
        assert_eq!(w.len(), 12 + big.len() as u64);
        assert_eq!(fs.file_size(&a).expect("size"), 12 + big.len() as u64);
        w.append(b"tail").expect("append");
        w.sync().expect("sync");
        drop(w);
        let data = fs.read(&a).expect("read");
        assert_eq!(data.len(), 16 + big.len());
        assert_eq!(&data[..12], b"hello world!");
        assert_eq!(&data[data.len() - 4..], b"tail");

        // Dropping a writer flushes it.
        let b = dir.join("b.tmp");
        let mut w = fs.create(&b).expect("create");
        w.append(b"dropped").expect("append");
        drop(w);
        assert_eq!(fs.read(&b).expect("read"), b"dropped");

        // Positional reads, from several threads.
        let r = fs.open(&a).expect("open");
        assert_eq!(r.len(), data.len() as u64);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let r = &r;
                let data = &data;
                s.spawn(move || {
                    for i in 0..100 {
                        let offset = (t * 1000 + i * 37) % (data.len() as u64 - 16);
                        let mut buf = [0u8; 16];
                        r.read_exact_at(&mut buf, offset).expect("read_exact_at");
                        assert_eq!(&buf[..], &data[offset as usize..offset as usize + 16]);
                    }
                });
            }
        });
        let mut buf = [0u8; 8];
        let end = data.len() as u64;
        let e = r
            .read_exact_at(&mut buf, end - 4)
            .expect_err("read across the end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = r
            .read_exact_at(&mut buf, end + 100)
            .expect_err("read beyond the end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        r.read_exact_at(&mut [], end)
            .expect("an empty read at the end is fine");

        // Missing files.
        let missing = dir.join("missing");
        assert!(!fs.exists(&missing));
        for e in [
            fs.open(&missing).err().expect("open a missing file"),
            fs.read(&missing).expect_err("read"),
            fs.file_size(&missing).expect_err("file_size"),
            fs.remove_file(&missing).expect_err("remove_file"),
            fs.rename(&missing, &dir.join("x")).expect_err("rename"),
            fs.list(&dir.join("no-dir")).expect_err("list"),
        ] {
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        }

        // Rename replaces the target atomically; remove deletes.
        fs.rename(&b, &a).expect("rename over an existing file");
        assert!(!fs.exists(&b));
        assert_eq!(fs.read(&a).expect("read"), b"dropped");
        assert_eq!(fs.file_size(&a).expect("size"), 7);
        // An open reader keeps seeing the file it opened.
        let mut buf = [0u8; 5];
        r.read_exact_at(&mut buf, 0)
            .expect("read the replaced file");
        assert_eq!(&buf, b"hello");
        let c = dir.join("c");
        fs.create(&c).expect("create").sync().expect("sync");
        assert_eq!(fs.file_size(&c).expect("size"), 0);
        fs.create_dir_all(&dir.join("sub")).expect("create_dir_all");
        assert_eq!(fs.list(&dir).expect("list"), ["a.log", "c", "sub"]);
        fs.remove_file(&c).expect("remove");
        assert!(!fs.exists(&c));
        assert_eq!(fs.list(&dir).expect("list"), ["a.log", "sub"]);

        // Creating an existing file truncates it.
        let mut w = fs.create(&a).expect("create again");
        w.sync().expect("sync");
        assert_eq!(fs.file_size(&a).expect("size"), 0);
        fs.sync_dir(&dir).expect("sync_dir");

        // Locks: exclusive, released on drop, and they create the file.
        let lock_path = dir.join("LOCK");
        let lock = fs.lock(&lock_path).expect("lock");
        assert!(fs.exists(&lock_path));
        let e = fs.lock(&lock_path).expect_err("lock twice");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        drop(lock);
        let lock = fs.lock(&lock_path).expect("lock after release");
        drop(lock);
    }

    #[test]
    fn std_fs_conformance() {
        let tmp = tempfile::tempdir().expect("tempdir");
        conformance(&StdFs, tmp.path());
    }

    #[test]
    fn writeback_covers_whole_pages_short_of_the_tail_and_a_sync_catches_up() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("w.log");
        let file = std::fs::File::create(&path).expect("create");
        let mut sink = StdSink::new(file, &path);
        sink.write_all(&vec![1u8; 1 << 20]).expect("write");
        sink.start_writeback().expect("writeback");
        assert_eq!(sink.writeback_from, 0, "nothing before the held-back tail");
        sink.write_all(&vec![2u8; (1 << 20) + 4097]).expect("write");
        sink.start_writeback().expect("writeback");
        assert_eq!(
            sink.writeback_from,
            (1 << 20) + 4096,
            "page-aligned, 1 MiB held back"
        );
        sink.sync().expect("sync");
        assert_eq!(sink.writeback_from, sink.written);
        assert_eq!(
            std::fs::read(&path).expect("read").len() as u64,
            sink.written,
            "writeback must not change what the file holds"
        );
    }

    #[test]
    fn a_mapped_file_holds_exactly_its_appends_across_chunks_once_dropped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("m.log");
        let mut w = StdFs.create_mapped(&path).expect("create_mapped");
        // Small appends, one larger than a chunk, and small ones again: three chunk boundaries.
        let mut want = Vec::new();
        let pieces: Vec<Vec<u8>> = (0..300u32)
            .map(|i| vec![(i % 251) as u8 + 1; 150])
            .chain(std::iter::once(vec![7u8; MAPPED_CHUNK as usize + 12_345]))
            .chain((0..7000u32).map(|i| vec![(i % 13) as u8 + 1; 150]))
            .collect();
        for (i, piece) in pieces.iter().enumerate() {
            w.append(piece).expect("append");
            want.extend_from_slice(piece);
            if i % 100 == 0 {
                w.flush().expect("flush");
            }
        }
        w.flush().expect("flush");
        assert_eq!(w.len(), want.len() as u64);
        // Open, the file is whole chunks: what was flushed, then zeros (what a crash leaves).
        let open = std::fs::read(&path).expect("read");
        assert!((open.len() as u64).is_multiple_of(MAPPED_CHUNK));
        assert!(open.len() > want.len());
        assert_eq!(&open[..want.len()], &want[..]);
        assert!(open[want.len()..].iter().all(|&b| b == 0));
        w.start_writeback().expect("writeback");
        w.sync().expect("sync");
        drop(w);
        assert_eq!(
            std::fs::read(&path).expect("read"),
            want,
            "cut to the appends"
        );
    }

    #[test]
    fn reads_from_memory_return_the_file_s_bytes_or_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
        fs::write(&path, &data).expect("write");
        let file = StdFs.open(&path).expect("open");
        let mut buf = vec![0u8; 5000];
        // Read once, so that the page cache holds the file.
        file.read_exact_at(&mut buf, 3000).expect("read");
        if let Some(cached) = file.read_if_cached(3000, 5000) {
            assert_eq!(cached, data[3000..8000]);
        }
        assert_eq!(
            file.read_if_cached(18_000, 5000),
            None,
            "a read past the end is never whole"
        );
    }

    #[test]
    fn std_fs_missing_directory() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let e = StdFs
            .create(&tmp.path().join("no-dir/file"))
            .err()
            .expect("create in a missing directory");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string().contains("no-dir"),
            "errors name the path: {e}"
        );
        let e = StdFs
            .sync_dir(&tmp.path().join("no-dir"))
            .expect_err("sync_dir");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    /// A sink that fails its first sync, as a disk would.
    struct FlakySink {
        written: Vec<u8>,
        fail_next_sync: bool,
    }

    impl Sink for FlakySink {
        fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
            self.written.extend_from_slice(data);
            Ok(())
        }

        fn sync(&mut self) -> io::Result<()> {
            if std::mem::take(&mut self.fail_next_sync) {
                return Err(io::Error::other("EIO"));
            }
            Ok(())
        }
    }

    #[test]
    fn a_failed_sync_poisons_the_file() {
        let mut f = BufferedFile::new(FlakySink {
            written: Vec::new(),
            fail_next_sync: true,
        });
        f.append(b"abc").expect("append");
        assert!(f.sync().is_err());
        // The sink would succeed now, but the data may be lost: every later call must fail.
        let e = f.sync().expect_err("retried sync");
        assert!(e.to_string().contains("EIO"), "{e}");
        assert!(f.append(b"d").is_err());
        assert!(f.flush().is_err());
        assert_eq!(f.len(), 3);
    }
}
