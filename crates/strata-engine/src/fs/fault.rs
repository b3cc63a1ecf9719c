//! [`FaultFs`]: a file system that wraps another and injects I/O errors, for reliability tests.

use std::fmt;
use std::io;
use std::ops::BitOr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::filename::{classify, FileKind, CURRENT};

/// The operations a fault can be injected into.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// [`FileSystem::create`] fails; no file is created.
    Create,
    /// [`FileSystem::open`] (for random reads) fails.
    Open,
    /// [`WritableFile::append`] fails without writing anything.
    Append,
    /// [`WritableFile::append`] writes a strict prefix of the data, then fails. Only appends of
    /// at least 2 bytes are candidates.
    ShortWrite,
    /// [`WritableFile::flush`] fails; buffered data stays buffered.
    Flush,
    /// [`WritableFile::sync`] fails; nothing is made durable.
    Sync,
    /// [`FileSystem::rename`] fails; nothing is renamed.
    Rename,
    /// [`FileSystem::remove_file`] fails; the file stays.
    RemoveFile,
    /// [`FileSystem::read`] (of a whole file) fails.
    Read,
    /// [`RandomAccessFile::read_exact_at`] fails.
    ReadAt,
    /// [`FileSystem::sync_dir`] fails.
    SyncDir,
    /// [`FileSystem::truncate`] fails; the file keeps its length.
    Truncate,
}

impl FaultKind {
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 12] = [
        FaultKind::Create,
        FaultKind::Open,
        FaultKind::Append,
        FaultKind::ShortWrite,
        FaultKind::Flush,
        FaultKind::Sync,
        FaultKind::Rename,
        FaultKind::RemoveFile,
        FaultKind::Read,
        FaultKind::ReadAt,
        FaultKind::SyncDir,
        FaultKind::Truncate,
    ];

    /// Number of kinds.
    pub const COUNT: usize = FaultKind::ALL.len();

    /// A short lowercase name (`"short-write"`, `"sync-dir"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Create => "create",
            FaultKind::Open => "open",
            FaultKind::Append => "append",
            FaultKind::ShortWrite => "short-write",
            FaultKind::Flush => "flush",
            FaultKind::Sync => "sync",
            FaultKind::Rename => "rename",
            FaultKind::RemoveFile => "remove-file",
            FaultKind::Read => "read",
            FaultKind::ReadAt => "read-at",
            FaultKind::SyncDir => "sync-dir",
            FaultKind::Truncate => "truncate",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Whether the operation changes stored state (refused while the file system is inactive).
    fn mutates(self) -> bool {
        !matches!(self, FaultKind::Open | FaultKind::Read | FaultKind::ReadAt)
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a file is to the engine, from its name (see [`FileClass::of_path`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileClass {
    /// A write-ahead log, `<n>.log`.
    Wal,
    /// A table, `<n>.sst`.
    Table,
    /// A manifest, `MANIFEST-<n>`.
    Manifest,
    /// `CURRENT`, and the temporary files (`CURRENT.<n>.tmp`) renamed onto it.
    Current,
    /// Another temporary file (`*.tmp`).
    Temp,
    /// The `LOCK` file.
    Lock,
    /// A directory (the target of [`FileSystem::sync_dir`]).
    Directory,
    /// Anything else.
    Other,
}

impl FileClass {
    /// The class of the file at `path`, from its file name through
    /// [`filename::classify`](crate::filename::classify).
    pub fn of_path(path: &Path) -> FileClass {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        match classify(&name) {
            Some(FileKind::Wal(_) | FileKind::UnreplayedWal(_)) => FileClass::Wal,
            Some(FileKind::Table(_)) => FileClass::Table,
            Some(FileKind::Manifest(_)) => FileClass::Manifest,
            Some(FileKind::Current) => FileClass::Current,
            Some(FileKind::Lock) => FileClass::Lock,
            Some(FileKind::Temp) if name.starts_with(&format!("{CURRENT}.")) => FileClass::Current,
            Some(FileKind::Temp) => FileClass::Temp,
            Some(FileKind::InfoLog(_)) | None => FileClass::Other,
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of [`FileClass`]es, built from the constants with `|`:
/// `FileClasses::WAL | FileClasses::MANIFEST`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileClasses(u16);

impl FileClasses {
    /// No class.
    pub const NONE: FileClasses = FileClasses(0);
    /// Every class.
    pub const ALL: FileClasses = FileClasses(0xff);
    /// Write-ahead logs.
    pub const WAL: FileClasses = FileClasses(1 << FileClass::Wal as u16);
    /// Tables.
    pub const TABLE: FileClasses = FileClasses(1 << FileClass::Table as u16);
    /// Manifests.
    pub const MANIFEST: FileClasses = FileClasses(1 << FileClass::Manifest as u16);
    /// `CURRENT` and its temporary files.
    pub const CURRENT: FileClasses = FileClasses(1 << FileClass::Current as u16);
    /// Other temporary files.
    pub const TEMP: FileClasses = FileClasses(1 << FileClass::Temp as u16);
    /// The lock file.
    pub const LOCK: FileClasses = FileClasses(1 << FileClass::Lock as u16);
    /// Directories.
    pub const DIRECTORY: FileClasses = FileClasses(1 << FileClass::Directory as u16);
    /// Files of no known class.
    pub const OTHER: FileClasses = FileClasses(1 << FileClass::Other as u16);

    /// Whether `class` is in the set.
    pub fn contains(self, class: FileClass) -> bool {
        self.0 & class.bit() != 0
    }
}

impl From<FileClass> for FileClasses {
    fn from(class: FileClass) -> Self {
        FileClasses(class.bit())
    }
}

impl BitOr for FileClasses {
    type Output = FileClasses;

    fn bitor(self, rhs: FileClasses) -> FileClasses {
        FileClasses(self.0 | rhs.0)
    }
}

/// A snapshot of a [`FaultFs`]'s counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    injected: [u64; FaultKind::COUNT],
    operations: [u64; FaultKind::COUNT],
    /// Operations refused because the file system was inactive (see [`FaultFs::set_active`]);
    /// not counted as injected faults.
    pub refused_while_inactive: u64,
}

impl FaultStats {
    /// Faults of `kind` injected.
    pub fn injected(&self, kind: FaultKind) -> u64 {
        self.injected[kind.index()]
    }

    /// Operations that passed the checkpoint of `kind` (faulted or not; an append counts for
    /// both [`FaultKind::Append`] and, if at least 2 bytes long, [`FaultKind::ShortWrite`]).
    pub fn operations(&self, kind: FaultKind) -> u64 {
        self.operations[kind.index()]
    }

    /// Faults injected, all kinds together.
    pub fn total_injected(&self) -> u64 {
        self.injected.iter().sum()
    }

    /// Adds `other`'s counts to these (for totals over many runs).
    pub fn merge(&mut self, other: &FaultStats) {
        for k in 0..FaultKind::COUNT {
            self.injected[k] += other.injected[k];
            self.operations[k] += other.operations[k];
        }
        self.refused_while_inactive += other.refused_while_inactive;
    }
}

impl fmt::Display for FaultStats {
    /// One `kind: injected/operations` pair per kind, space separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, kind) in FaultKind::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(
                f,
                "{kind}: {}/{}",
                self.injected(*kind),
                self.operations(*kind)
            )?;
        }
        write!(
            f,
            " (refused while inactive: {})",
            self.refused_while_inactive
        )
    }
}

/// SplitMix64: small, fast and good enough to decide faults; no dependency needed.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A scheduled one-shot fault.
#[derive(Debug)]
struct Scheduled {
    kind: FaultKind,
    targets: FileClasses,
    /// Matching operations still to let pass before failing one.
    remaining: u64,
}

#[derive(Debug)]
struct Config {
    enabled: bool,
    active: bool,
    rng: Rng,
    probability: [f64; FaultKind::COUNT],
    targets: FileClasses,
    schedule: Vec<Scheduled>,
}

impl Config {
    /// Whether the operation of `kind` on a file of `class` is to fail (consuming any scheduled
    /// fault it triggers and advancing the other matching schedules).
    fn decide(&mut self, kind: FaultKind, classes: &[FileClass]) -> bool {
        let matches = |targets: FileClasses| classes.iter().any(|&c| targets.contains(c));
        let mut fire = false;
        self.schedule.retain_mut(|s| {
            if s.kind != kind || !matches(s.targets) {
                return true;
            }
            if s.remaining == 0 {
                fire = true;
                return false;
            }
            s.remaining -= 1;
            true
        });
        let p = self.probability[kind.index()];
        // Draw only for kinds with a probability, so arming one kind does not shift the
        // decisions of the others.
        if p > 0.0 && matches(self.targets) && self.rng.next_f64() < p {
            fire = true;
        }
        fire
    }
}

#[derive(Debug)]
struct Shared {
    config: Mutex<Config>,
    injected: [AtomicU64; FaultKind::COUNT],
    operations: [AtomicU64; FaultKind::COUNT],
    refused_while_inactive: AtomicU64,
}

impl Shared {
    /// The checkpoint every faultable operation passes: `Err` if it is to fail.
    fn check(&self, kind: FaultKind, class: FileClass, what: &str, path: &Path) -> io::Result<()> {
        self.check_any(kind, &[class], what, path)
    }

    /// [`check`](Self::check) for an operation on files of several classes (a rename), which is
    /// targeted if any of them is.
    fn check_any(
        &self,
        kind: FaultKind,
        classes: &[FileClass],
        what: &str,
        path: &Path,
    ) -> io::Result<()> {
        self.operations[kind.index()].fetch_add(1, Ordering::Relaxed);
        let mut config = self.config.lock();
        if !config.active && kind.mutates() {
            self.refused_while_inactive.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::other(format!(
                "file system inactive (simulated crash): {what} {}",
                path.display()
            )));
        }
        if !config.enabled || !config.decide(kind, classes) {
            return Ok(());
        }
        self.injected[kind.index()].fetch_add(1, Ordering::Relaxed);
        Err(io::Error::other(format!(
            "injected fault: {kind} failed ({what} {})",
            path.display()
        )))
    }

    /// For an append of `len` bytes: the length of the prefix to write before failing, if this
    /// append is to be a short write.
    fn short_write(&self, class: FileClass, len: usize) -> Option<usize> {
        if len < 2 {
            return None;
        }
        self.operations[FaultKind::ShortWrite.index()].fetch_add(1, Ordering::Relaxed);
        let mut config = self.config.lock();
        if !config.enabled || !config.active || !config.decide(FaultKind::ShortWrite, &[class]) {
            return None;
        }
        self.injected[FaultKind::ShortWrite.index()].fetch_add(1, Ordering::Relaxed);
        // A strict, non-empty prefix.
        Some(1 + (config.rng.next_u64() % (len as u64 - 1)) as usize)
    }
}

/// A file system that injects faults into another. Clones share the configuration and the
/// counters, so a test keeps one clone to steer the faults while the database runs on another.
///
/// The ideas come from RocksDB's `FaultInjectionTestFS` and Pebble's `errorfs`: every operation
/// the engine performs passes a checkpoint that may fail it, either because a test *scheduled*
/// a fault ("the 3rd sync of a WAL from now fails") or by a per-kind *probability* drawn from a
/// seeded generator. Faults can be aimed at [`FileClass`]es (the WAL, tables, the manifest,
/// `CURRENT`), switched off before reopening, and are counted per [`FaultKind`].
///
/// Wrap a [`MemFs`](super::MemFs) to also simulate power loss: a fault on `sync` skips the inner
/// sync, so the data it should have made durable is lost by
/// [`MemFs::simulate_power_loss`](super::MemFs::simulate_power_loss).
///
/// ```
/// use std::sync::Arc;
/// use strata_engine::fs::{FaultFs, FaultKind, FileClasses, MemFs};
///
/// let mem = MemFs::new();
/// let fault = FaultFs::new(Arc::new(mem.clone()), 7);
/// // The next sync of a WAL fails; so does 1 % of all appends, to any file.
/// fault.fail_nth(FaultKind::Sync, FileClasses::WAL, 0);
/// fault.set_probability(FaultKind::Append, 0.01);
/// // ... run the database on `Arc::new(fault.clone())`, then, before reopening:
/// fault.set_enabled(false);
/// println!("{}", fault.stats());
/// ```
///
/// # What an injected fault does
///
/// The operation fails with an [`io::Error`] of kind `Other` whose message starts with
/// `injected fault:` and names the operation and the path, and (except for a short write) has no
/// effect on the inner file system: a failed `create` creates nothing, a failed `rename` renames
/// nothing, a failed `sync` syncs nothing. A *short write* ([`FaultKind::ShortWrite`]) appends a
/// strict prefix of the data to the inner file, then fails, as a write interrupted by a full disk
/// or a crash would.
///
/// A file stays usable after an injected fault: unlike [`StdFs`](super::StdFs), which refuses
/// every operation on a file after its first error, `FaultFs` lets the engine retry. That is
/// deliberate: an engine that appends after a failed (possibly partial) append, or trusts a sync
/// after a failed one, then leaves damage that recovery detects, instead of the file system
/// hiding the mistake.
///
/// Operations never faulted: `create_dir_all`, `exists`, `list`, `file_size`, `lock`, and the
/// `len` of open files.
///
/// # Determinism
///
/// Decisions are a function of the seed and of the order of the operations that reach the
/// checkpoints, so a single-threaded run repeats exactly. With background threads the order,
/// and so the faults, can vary from run to run.
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    shared: Arc<Shared>,
}

impl fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultFs")
            .field("inner", &self.inner)
            .field("config", &*self.shared.config.lock())
            .finish()
    }
}

impl FaultFs {
    /// Wraps `inner`, drawing random decisions from `seed`. Injection starts enabled but with no
    /// probability and no schedule, so nothing fails until a test arms a fault; faults target
    /// every file class.
    pub fn new(inner: Arc<dyn FileSystem>, seed: u64) -> FaultFs {
        FaultFs {
            inner,
            shared: Arc::new(Shared {
                config: Mutex::new(Config {
                    enabled: true,
                    active: true,
                    rng: Rng(seed),
                    probability: [0.0; FaultKind::COUNT],
                    targets: FileClasses::ALL,
                    schedule: Vec::new(),
                }),
                injected: Default::default(),
                operations: Default::default(),
                refused_while_inactive: AtomicU64::new(0),
            }),
        }
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &Arc<dyn FileSystem> {
        &self.inner
    }

    /// Turns injection on or off. While off, no fault is injected and schedules do not advance;
    /// probabilities and schedules are kept for when it is turned on again.
    pub fn set_enabled(&self, enabled: bool) {
        self.shared.config.lock().enabled = enabled;
    }

    /// Whether injection is on.
    pub fn is_enabled(&self) -> bool {
        self.shared.config.lock().enabled
    }

    /// Makes each later operation of `kind` on a targeted file (see
    /// [`set_targets`](Self::set_targets)) fail with probability `p` (clamped to 0..=1; 0 turns
    /// random faults of this kind off).
    pub fn set_probability(&self, kind: FaultKind, p: f64) {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        self.shared.config.lock().probability[kind.index()] = p;
    }

    /// [`set_probability`](Self::set_probability) for every kind.
    pub fn set_all_probabilities(&self, p: f64) {
        for kind in FaultKind::ALL {
            self.set_probability(kind, p);
        }
    }

    /// The probability of faults of `kind`.
    pub fn probability(&self, kind: FaultKind) -> f64 {
        self.shared.config.lock().probability[kind.index()]
    }

    /// Restricts *random* faults to files of these classes (default: all). A rename is
    /// targeted if its source or its destination is; a directory sync has class
    /// [`FileClass::Directory`]. Scheduled faults carry their own targets.
    pub fn set_targets(&self, targets: FileClasses) {
        self.shared.config.lock().targets = targets;
    }

    /// The classes random faults target.
    pub fn targets(&self) -> FileClasses {
        self.shared.config.lock().targets
    }

    /// Schedules one fault: of the operations of `kind` on files of `targets` from now on, the
    /// first `n` pass and the next one fails (`n = 0`: the very next one). Several schedules
    /// count independently.
    pub fn fail_nth(&self, kind: FaultKind, targets: FileClasses, n: u64) {
        self.shared.config.lock().schedule.push(Scheduled {
            kind,
            targets,
            remaining: n,
        });
    }

    /// Scheduled faults that have not fired yet.
    pub fn pending_scheduled(&self) -> usize {
        self.shared.config.lock().schedule.len()
    }

    /// Drops every scheduled fault and sets every probability to 0.
    pub fn clear(&self) {
        let mut config = self.shared.config.lock();
        config.schedule.clear();
        config.probability = [0.0; FaultKind::COUNT];
    }

    /// Restarts the random decisions from `seed`.
    pub fn reseed(&self, seed: u64) {
        self.shared.config.lock().rng = Rng(seed);
    }

    /// Activates or deactivates the file system. While inactive it behaves like a machine that
    /// has crashed: every operation that would change stored state (create, append, flush,
    /// sync, rename, remove, directory sync) fails, whatever the enabled flag says; reads work.
    /// A test deactivates it at the moment of a simulated crash, drops the database (whose last
    /// syncs then fail instead of saving data the crash would have lost), reactivates it and
    /// calls [`MemFs::simulate_power_loss`](super::MemFs::simulate_power_loss).
    ///
    /// Writable files dropped while inactive still hand their user-space buffer to the inner
    /// file system (unsynced, so a simulated power loss discards it).
    pub fn set_active(&self, active: bool) {
        self.shared.config.lock().active = active;
    }

    /// Whether the file system is active.
    pub fn is_active(&self) -> bool {
        self.shared.config.lock().active
    }

    /// The counters so far.
    pub fn stats(&self) -> FaultStats {
        let load = |counters: &[AtomicU64; FaultKind::COUNT]| {
            std::array::from_fn(|i| counters[i].load(Ordering::Relaxed))
        };
        FaultStats {
            injected: load(&self.shared.injected),
            operations: load(&self.shared.operations),
            refused_while_inactive: self.shared.refused_while_inactive.load(Ordering::Relaxed),
        }
    }

    /// Resets every counter to 0.
    pub fn reset_stats(&self) {
        for c in self
            .shared
            .injected
            .iter()
            .chain(&self.shared.operations)
            .chain(std::iter::once(&self.shared.refused_while_inactive))
        {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn check(&self, kind: FaultKind, class: FileClass, what: &str, path: &Path) -> io::Result<()> {
        self.shared.check(kind, class, what, path)
    }

    /// A file from `create` on the wrapped file system, with this one's faults injected.
    fn create_with(
        &self,
        path: &Path,
        create: impl FnOnce(&dyn FileSystem, &Path) -> io::Result<Box<dyn WritableFile>>,
    ) -> io::Result<Box<dyn WritableFile>> {
        let class = FileClass::of_path(path);
        self.check(FaultKind::Create, class, "creating", path)?;
        let file = create(self.inner.as_ref(), path)?;
        Ok(Box::new(FaultWritableFile {
            inner: file,
            shared: Arc::clone(&self.shared),
            class,
            path: path.to_path_buf(),
        }))
    }
}

impl FaultFs {
    /// A file from `open` on the wrapped file system, with this one's faults injected.
    fn open_with(
        &self,
        path: &Path,
        open: impl FnOnce(&dyn FileSystem, &Path) -> io::Result<Arc<dyn RandomAccessFile>>,
    ) -> io::Result<Arc<dyn RandomAccessFile>> {
        let class = FileClass::of_path(path);
        self.check(FaultKind::Open, class, "opening", path)?;
        let file = open(self.inner.as_ref(), path)?;
        Ok(Arc::new(FaultRandomAccessFile {
            inner: file,
            shared: Arc::clone(&self.shared),
            class,
            path: path.to_path_buf(),
        }))
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.create_with(path, |fs, path| fs.create(path))
    }

    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.create_with(path, |fs, path| fs.create_mapped(path))
    }

    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.create_with(path, |fs, path| fs.create_direct(path))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.open_with(path, |fs, path| fs.open(path))
    }

    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.open_with(path, |fs, path| fs.open_direct(path))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.check(FaultKind::Read, FileClass::of_path(path), "reading", path)?;
        self.inner.read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        // Targeted if either end is: renaming CURRENT.<n>.tmp onto CURRENT is a CURRENT fault.
        let classes = [FileClass::of_path(to), FileClass::of_path(from)];
        self.shared
            .check_any(FaultKind::Rename, &classes, "renaming onto", to)?;
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.check(
            FaultKind::RemoveFile,
            FileClass::of_path(path),
            "removing",
            path,
        )?;
        self.inner.remove_file(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.check(
            FaultKind::Truncate,
            FileClass::of_path(path),
            "truncating",
            path,
        )?;
        self.inner.truncate(path, len)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list(path)
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.inner.file_size(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.check(
            FaultKind::SyncDir,
            FileClass::Directory,
            "syncing directory",
            path,
        )?;
        self.inner.sync_dir(path)
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

/// A writable file whose operations pass the checkpoints.
struct FaultWritableFile {
    inner: Box<dyn WritableFile>,
    shared: Arc<Shared>,
    class: FileClass,
    path: std::path::PathBuf,
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.shared
            .check(FaultKind::Append, self.class, "appending to", &self.path)?;
        if let Some(prefix) = self.shared.short_write(self.class, data.len()) {
            self.inner.append(&data[..prefix])?;
            return Err(io::Error::other(format!(
                "injected fault: short-write ({prefix} of {} bytes appended to {})",
                data.len(),
                self.path.display()
            )));
        }
        self.inner.append(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.shared
            .check(FaultKind::Flush, self.class, "flushing", &self.path)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.shared
            .check(FaultKind::Sync, self.class, "syncing", &self.path)?;
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    /// Passed through without a fault of its own: it promises nothing, so a failure to start
    /// writeback is no different from one that shows up at the next sync.
    fn start_writeback(&mut self) -> io::Result<()> {
        self.inner.start_writeback()
    }
}

/// A random-access file whose reads pass the checkpoint.
struct FaultRandomAccessFile {
    inner: Arc<dyn RandomAccessFile>,
    shared: Arc<Shared>,
    class: FileClass,
    path: std::path::PathBuf,
}

impl FaultRandomAccessFile {
    /// Fails a read of `len` bytes at `offset` where a fault is due.
    fn check_read(&self, len: usize, offset: u64) -> io::Result<()> {
        self.shared.check(
            FaultKind::ReadAt,
            self.class,
            &format!("reading {len} bytes at offset {offset} of"),
            &self.path,
        )
    }
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_read(buf.len(), offset)?;
        self.inner.read_exact_at(buf, offset)
    }

    /// The same faults as a plain read, then the inner file's polled read, so that the fault
    /// tests with direct I/O read the way the engine does outside them.
    fn read_exact_at_polling(
        &self,
        buf: &mut [u8],
        offset: u64,
        poll: std::time::Duration,
    ) -> io::Result<()> {
        self.check_read(buf.len(), offset)?;
        self.inner.read_exact_at_polling(buf, offset, poll)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::MemFs;
    use super::*;

    fn setup(seed: u64) -> (MemFs, FaultFs) {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()), seed);
        (mem, fault)
    }

    #[test]
    fn classes_come_from_file_names() {
        let class = |p: &str| FileClass::of_path(Path::new(p));
        assert_eq!(class("/db/000012.log"), FileClass::Wal);
        assert_eq!(class("/db/000013.sst"), FileClass::Table);
        assert_eq!(class("/db/MANIFEST-000001"), FileClass::Manifest);
        assert_eq!(class("/db/CURRENT"), FileClass::Current);
        assert_eq!(class("/db/CURRENT.7.tmp"), FileClass::Current);
        assert_eq!(class("/db/x.tmp"), FileClass::Temp);
        assert_eq!(class("/db/LOCK"), FileClass::Lock);
        assert_eq!(class("/db/notes.txt"), FileClass::Other);
        let set = FileClasses::WAL | FileClasses::CURRENT;
        assert!(set.contains(FileClass::Wal) && set.contains(FileClass::Current));
        assert!(!set.contains(FileClass::Table));
        assert!(FileClasses::ALL.contains(FileClass::Other));
        assert!(!FileClasses::NONE.contains(FileClass::Wal));
    }

    #[test]
    fn scheduled_faults_fire_once_at_the_nth_matching_operation() {
        let (mem, fault) = setup(1);
        fault.fail_nth(FaultKind::Sync, FileClasses::WAL, 1);
        let mut table = fault.create(Path::new("/db/000002.sst")).expect("create");
        let mut wal = fault.create(Path::new("/db/000001.log")).expect("create");
        table.append(b"t").expect("append");
        table.sync().expect("a table sync is not targeted");
        wal.append(b"a").expect("append");
        wal.sync().expect("the first WAL sync passes");
        wal.append(b"b").expect("append");
        let e = wal.sync().expect_err("the second WAL sync fails");
        assert!(e.to_string().contains("injected fault: sync"), "{e}");
        assert_eq!(fault.pending_scheduled(), 0);
        wal.sync().expect("one-shot: the file is still usable");
        let stats = fault.stats();
        assert_eq!(stats.injected(FaultKind::Sync), 1);
        assert_eq!(stats.operations(FaultKind::Sync), 4);
        assert_eq!(stats.total_injected(), 1);
        mem.simulate_power_loss_keeping_entries();
        assert_eq!(mem.read(Path::new("/db/000001.log")).expect("read"), b"ab");
    }

    #[test]
    fn a_failed_sync_leaves_data_to_a_power_loss() {
        let (mem, fault) = setup(2);
        let path = Path::new("/db/000001.log");
        let mut wal = fault.create(path).expect("create");
        wal.append(b"durable").expect("append");
        wal.sync().expect("sync");
        fault.set_probability(FaultKind::Sync, 1.0);
        wal.append(b"+lost").expect("append");
        assert!(wal.sync().is_err());
        drop(wal);
        assert_eq!(mem.read(path).expect("read"), b"durable+lost");
        mem.simulate_power_loss_keeping_entries();
        assert_eq!(mem.read(path).expect("read"), b"durable");
    }

    #[test]
    fn short_writes_append_a_strict_prefix() {
        let (mem, fault) = setup(3);
        fault.set_probability(FaultKind::ShortWrite, 1.0);
        let path = Path::new("/db/000003.sst");
        let mut f = fault.create(path).expect("create");
        f.append(b"x").expect("a 1-byte append cannot be short");
        let e = f.append(b"0123456789").expect_err("short");
        assert!(e.to_string().contains("short-write"), "{e}");
        f.flush().expect("flush");
        let data = mem.read(path).expect("read");
        assert!(data.len() > 1 && data.len() < 11, "{data:?}");
        assert_eq!(&data[1..], &b"0123456789"[..data.len() - 1]);
        assert_eq!(fault.stats().injected(FaultKind::ShortWrite), 1);
    }

    #[test]
    fn every_operation_kind_can_fail_and_has_no_effect() {
        let (mem, fault) = setup(4);
        let dir = Path::new("/db");
        let a = dir.join("000001.log");
        let b = dir.join("000002.log");
        let mut f = fault.create(&a).expect("create");
        f.append(b"data").expect("append");
        f.sync().expect("sync");
        fault.set_all_probabilities(1.0);
        assert!(fault.create(&b).is_err());
        assert!(!mem.exists(&b));
        assert!(f.append(b"more").is_err());
        assert!(f.flush().is_err());
        assert!(f.sync().is_err());
        assert!(fault.rename(&a, &b).is_err());
        assert!(mem.exists(&a) && !mem.exists(&b));
        assert!(fault.remove_file(&a).is_err());
        assert!(mem.exists(&a));
        assert!(fault.read(&a).is_err());
        assert!(fault.open(&a).is_err());
        assert!(fault.sync_dir(dir).is_err());
        assert!(fault.truncate(&a, 1).is_err());
        assert_eq!(mem.file_size(&a).expect("size"), 4);
        fault.set_probability(FaultKind::Open, 0.0);
        let r = fault.open(&a).expect("open");
        let mut buf = [0u8; 2];
        assert!(r.read_exact_at(&mut buf, 0).is_err());
        // Never faulted.
        assert!(fault.exists(&a));
        assert_eq!(fault.list(dir).expect("list"), ["000001.log"]);
        assert_eq!(fault.file_size(&a).expect("size"), 4);
        let stats = fault.stats();
        for kind in FaultKind::ALL {
            if kind != FaultKind::ShortWrite {
                assert!(stats.injected(kind) >= 1, "{kind}: {stats}");
            }
        }
        fault.set_enabled(false);
        r.read_exact_at(&mut buf, 0).expect("disabled");
        assert_eq!(&buf, b"da");
        fault.rename(&a, &b).expect("rename");
        assert_eq!(mem.read(&b).expect("read"), b"data");
        fault.reset_stats();
        assert_eq!(fault.stats(), FaultStats::default());
    }

    #[test]
    fn targets_restrict_random_faults() {
        let (_mem, fault) = setup(5);
        fault.set_probability(FaultKind::Create, 1.0);
        fault.set_targets(FileClasses::MANIFEST | FileClasses::CURRENT);
        assert!(fault.create(Path::new("/db/000001.log")).is_ok());
        assert!(fault.create(Path::new("/db/000002.sst")).is_ok());
        assert!(fault.create(Path::new("/db/MANIFEST-000003")).is_err());
        assert!(fault.create(Path::new("/db/CURRENT.3.tmp")).is_err());
        // A rename onto CURRENT is a CURRENT operation.
        fault.set_probability(FaultKind::Rename, 1.0);
        fault.set_targets(FileClasses::CURRENT);
        fault.set_probability(FaultKind::Create, 0.0);
        fault.create(Path::new("/db/x")).expect("create");
        fault.create(Path::new("/db/y")).expect("create");
        fault
            .rename(Path::new("/db/x"), Path::new("/db/y"))
            .expect("not targeted");
        fault.create(Path::new("/db/x")).expect("create");
        assert!(fault
            .rename(Path::new("/db/x"), Path::new("/db/CURRENT"))
            .is_err());
    }

    #[test]
    fn the_same_seed_makes_the_same_decisions() {
        let run = |seed: u64| {
            let (_mem, fault) = setup(seed);
            fault.set_probability(FaultKind::Append, 0.3);
            let mut f = fault.create(Path::new("/db/000001.log")).expect("create");
            (0..200)
                .map(|_| f.append(b"x").is_err())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
        let failures = run(9).iter().filter(|&&f| f).count();
        assert!((30..90).contains(&failures), "{failures} of 200 at p = 0.3");
    }

    #[test]
    fn an_inactive_file_system_refuses_changes_but_reads() {
        let (mem, fault) = setup(6);
        let path = Path::new("/db/000001.log");
        let mut f = fault.create(path).expect("create");
        f.append(b"synced").expect("append");
        f.sync().expect("sync");
        fault.set_enabled(false);
        fault.set_active(false);
        assert!(!fault.is_active());
        assert!(f.append(b"x").is_err());
        assert!(f.sync().is_err());
        assert!(fault.create(Path::new("/db/b")).is_err());
        assert_eq!(fault.read(path).expect("reads work"), b"synced");
        assert_eq!(fault.stats().total_injected(), 0);
        assert_eq!(fault.stats().refused_while_inactive, 3);
        fault.set_active(true);
        drop(f);
        mem.simulate_power_loss_keeping_entries();
        assert_eq!(mem.read(path).expect("read"), b"synced");
    }
}
