//! [`MemFs`]: an in-memory file system for tests, with power-loss simulation and corruption
//! helpers for crash and recovery tests.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::std_fs::{BufferedFile, Sink};
use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// An in-memory file system. Clones share the same files, so a test can drop a database and
/// reopen it on a clone, or simulate a power loss while it is open.
///
/// It behaves like [`StdFs`](super::StdFs): the same append buffering (data is invisible to
/// readers until flushed), the same error kinds (`NotFound` for missing files, `WouldBlock` for a
/// held lock), open handles that survive a rename or removal of their file, and creation that
/// truncates an existing file in place. Two deliberate simplifications:
///
/// - Directories are implicit: a file can be created in a directory nobody created, and every
///   ancestor of a file exists. [`create_dir_all`](FileSystem::create_dir_all) records a
///   directory so that an empty one exists and lists.
/// - Paths are compared after lexical normalization (`a/./b` is `a/b`, `a/c/../b` is `a/b`);
///   relative and absolute paths are different files (there is no current directory).
#[derive(Debug, Default, Clone)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

/// The shared state. Lock order: this mutex, then a file's `RwLock`; writers and readers of an
/// open file take only the file's lock.
#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, Arc<RwLock<MemFile>>>,
    /// The namespace a power loss leaves: each directory's entries as of its last
    /// [`sync_dir`](FileSystem::sync_dir) (none for a directory never synced).
    durable_files: BTreeMap<PathBuf, Arc<RwLock<MemFile>>>,
    dirs: BTreeSet<PathBuf>,
    locks: BTreeSet<PathBuf>,
    /// Direct opens fail, as on ramfs ([`MemFs::refuse_direct_io`]).
    refuse_direct_io: bool,
}

#[derive(Default)]
struct MemFile {
    /// Everything flushed so far.
    data: Vec<u8>,
    /// The prefix of `data` that survives a power loss. Writers only append, so the bytes below
    /// this length are exactly the ones that were synced.
    synced_len: usize,
}

impl fmt::Debug for MemFile {
    // The contents would drown any test failure message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFile")
            .field("len", &self.data.len())
            .field("synced_len", &self.synced_len)
            .finish()
    }
}

/// `path` with `.` removed and `..` applied, so equal files get equal keys.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

fn not_found(what: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{what} {}: no such file", path.display()),
    )
}

impl State {
    fn file(&self, what: &str, path: &Path) -> io::Result<Arc<RwLock<MemFile>>> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(what, path))
    }

    /// Whether `path` is a recorded directory or an ancestor of a file or directory.
    fn is_dir(&self, path: &Path) -> bool {
        self.dirs.iter().any(|d| d.starts_with(path))
            || self.files.keys().any(|f| f != path && f.starts_with(path))
    }
}

impl MemFs {
    /// A new, empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on, refuses (`refuse`) or allows direct I/O: refusing, `open_direct` and
    /// `create_direct` fail with `InvalidInput`, as `O_DIRECT` does on ramfs.
    pub fn refuse_direct_io(&self, refuse: bool) {
        self.state.lock().refuse_direct_io = refuse;
    }

    fn check_direct(&self, what: &str, path: &Path) -> io::Result<()> {
        if self.state.lock().refuse_direct_io {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{what} {} with direct I/O (O_DIRECT): the file system refuses it",
                    path.display()
                ),
            ));
        }
        Ok(())
    }

    /// Simulates a power loss: every file is cut back to the length it had at its last sync, so
    /// bytes appended (or flushed) but never synced are lost, and a file created but never synced
    /// becomes empty.
    ///
    /// The namespace goes back to the last [`sync_dir`](FileSystem::sync_dir) of each
    /// directory: a file created (or renamed into place) since is gone, a file removed (or
    /// renamed away) since is back under its old name. A real file system may lose such an
    /// entry or keep it; this takes the loss every time, so a missing directory sync shows.
    /// Directories themselves (from [`create_dir_all`](FileSystem::create_dir_all)) survive.
    ///
    /// Writers still open keep working on the cut files; a crash test should drop the database
    /// first (which flushes unsynced data into the files, where this then discards it).
    pub fn simulate_power_loss(&self) {
        let mut state = self.state.lock();
        state.files = state.durable_files.clone();
        for file in state.files.values() {
            let mut file = file.write();
            let synced = file.synced_len;
            file.data.truncate(synced);
        }
    }

    /// Simulates a power loss that keeps every directory entry, as if each directory had been
    /// synced just before it (a file system that happened to write its metadata in time): only
    /// unsynced file contents are lost.
    pub fn simulate_power_loss_keeping_entries(&self) {
        {
            let mut state = self.state.lock();
            state.durable_files = state.files.clone();
        }
        self.simulate_power_loss();
    }

    /// Paths of all files, sorted.
    pub fn file_names(&self) -> Vec<PathBuf> {
        self.state.lock().files.keys().cloned().collect()
    }

    /// XORs the byte at `offset` of `path` with `xor`, in place (a corruption test's bit flip).
    /// Fails with `NotFound` for a missing file and `InvalidInput` for an offset past its end.
    pub fn corrupt(&self, path: &Path, offset: u64, xor: u8) -> io::Result<()> {
        let path = normalize(path);
        let file = self.state.lock().file("corrupting", &path)?;
        let mut file = file.write();
        let len = file.data.len();
        let byte = usize::try_from(offset)
            .ok()
            .and_then(|i| file.data.get_mut(i))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "offset {offset} is past the end of {} ({len} bytes)",
                        path.display()
                    ),
                )
            })?;
        *byte ^= xor;
        Ok(())
    }

    /// Sets the length of `path` like `ftruncate`: cuts it, or extends it with zeros (as if space
    /// had been preallocated). The extension is not synced, so a power loss removes it again.
    pub fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let path = normalize(path);
        let len = usize::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "length exceeds the address space",
            )
        })?;
        let file = self.state.lock().file("truncating", &path)?;
        let mut file = file.write();
        file.data.resize(len, 0);
        file.synced_len = file.synced_len.min(len);
        Ok(())
    }
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = self.state.lock();
        if let Some(file) = path.ancestors().find(|p| state.files.contains_key(*p)) {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!(
                    "creating directory {}: {} is a file",
                    path.display(),
                    file.display()
                ),
            ));
        }
        state.dirs.insert(path);
        Ok(())
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let path = normalize(path);
        let mut state = self.state.lock();
        if state.is_dir(&path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("creating {}: is a directory", path.display()),
            ));
        }
        let file = match state.files.get(&path) {
            // Truncate in place, as O_TRUNC does: handles already open see the same file.
            Some(file) => {
                let mut f = file.write();
                f.data.clear();
                f.synced_len = 0;
                Arc::clone(file)
            }
            None => {
                let file = Arc::new(RwLock::new(MemFile::default()));
                state.files.insert(path, Arc::clone(&file));
                file
            }
        };
        Ok(Box::new(BufferedFile::new(MemSink(file))))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let path = normalize(path);
        let file = self.state.lock().file("opening", &path)?;
        let len = file.read().data.len() as u64;
        Ok(Arc::new(MemRandomAccessFile { file, len, path }))
    }

    /// Memory has no page cache to go around: a direct file is a plain one, unless the file
    /// system refuses direct I/O ([`MemFs::refuse_direct_io`]).
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.check_direct("opening", path)?;
        self.open(path)
    }

    /// Like [`open_direct`](Self::open_direct).
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.check_direct("creating", path)?;
        self.create(path)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let path = normalize(path);
        let file = self.state.lock().file("reading", &path)?;
        let data = file.read().data.clone();
        Ok(data)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut state = self.state.lock();
        let file = state.file("renaming", &from)?;
        if state.is_dir(&to) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("renaming onto {}: is a directory", to.display()),
            ));
        }
        state.files.remove(&from);
        state.files.insert(to, file);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        match self.state.lock().files.remove(&path) {
            Some(_) => Ok(()),
            None => Err(not_found("removing", &path)),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        MemFs::truncate(self, path, len)
    }

    fn exists(&self, path: &Path) -> bool {
        let path = normalize(path);
        let state = self.state.lock();
        state.files.contains_key(&path) || state.is_dir(&path)
    }

    /// Sorted, like [`StdFs`](super::StdFs)'s listing.
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        let path = normalize(path);
        let state = self.state.lock();
        if state.files.contains_key(&path) {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("listing {}: not a directory", path.display()),
            ));
        }
        if !state.is_dir(&path) {
            return Err(not_found("listing", &path));
        }
        let names: BTreeSet<String> = state
            .files
            .keys()
            .chain(&state.dirs)
            .filter_map(|p| p.strip_prefix(&path).ok()?.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Ok(names.into_iter().collect())
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        let path = normalize(path);
        let file = self.state.lock().file("reading metadata of", &path)?;
        let len = file.read().data.len() as u64;
        Ok(len)
    }

    /// Makes the directory's current entries the ones a power loss leaves (see
    /// [`MemFs::simulate_power_loss`]).
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = self.state.lock();
        if !state.is_dir(&path) {
            return Err(not_found("syncing directory", &path));
        }
        let in_dir = |p: &Path| p.parent() == Some(path.as_path());
        state.durable_files.retain(|p, _| !in_dir(p));
        let entries: Vec<_> = state
            .files
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, f)| (p.clone(), Arc::clone(f)))
            .collect();
        state.durable_files.extend(entries);
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let path = normalize(path);
        let mut state = self.state.lock();
        if state.locks.contains(&path) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another handle", path.display()),
            ));
        }
        // Like StdFs, locking creates the file (without truncating it).
        state.files.entry(path.clone()).or_default();
        state.locks.insert(path.clone());
        Ok(Box::new(MemFileLock {
            state: Arc::clone(&self.state),
            path,
        }))
    }
}

/// Appends to a shared in-memory file.
struct MemSink(Arc<RwLock<MemFile>>);

impl Sink for MemSink {
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.write().data.extend_from_slice(data);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut file = self.0.write();
        file.synced_len = file.data.len();
        Ok(())
    }
}

/// Reads a shared in-memory file; like a real file, it sees later changes to that file.
struct MemRandomAccessFile {
    file: Arc<RwLock<MemFile>>,
    /// The size at open, as [`StdFs`](super::StdFs) caches it.
    len: u64,
    path: PathBuf,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let file = self.file.read();
        let source = usize::try_from(offset)
            .ok()
            .and_then(|start| file.data.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "reading {} bytes at offset {offset} of {} ({} bytes)",
                        buf.len(),
                        self.path.display(),
                        file.data.len()
                    ),
                )
            })?;
        buf.copy_from_slice(source);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// A held entry in the lock registry, removed on drop.
struct MemFileLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl fmt::Debug for MemFileLock {
    // Not the whole file system.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFileLock")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::super::std_fs::tests::conformance;
    use super::*;

    #[test]
    fn mem_fs_conformance() {
        conformance(&MemFs::new(), Path::new("/tmp"));
    }

    #[test]
    fn clones_share_files() {
        let fs = MemFs::new();
        let clone = fs.clone();
        let mut w = fs.create(Path::new("/db/a")).expect("create");
        w.append(b"abc").expect("append");
        w.flush().expect("flush");
        assert_eq!(clone.read(Path::new("/db/./a")).expect("read"), b"abc");
        let lock = clone.lock(Path::new("/db/LOCK")).expect("lock");
        assert!(fs.lock(Path::new("/db/x/../LOCK")).is_err());
        drop(lock);
        fs.lock(Path::new("/db/LOCK")).expect("lock after release");
        assert_eq!(fs.file_names(), [Path::new("/db/LOCK"), Path::new("/db/a")]);
    }

    #[test]
    fn power_loss_drops_exactly_the_unsynced_suffix() {
        let fs = MemFs::new();
        let path = Path::new("/db/000001.log");
        let mut w = fs.create(path).expect("create");
        w.append(b"synced").expect("append");
        w.sync().expect("sync");
        w.append(b"+flushed").expect("append");
        w.flush().expect("flush");
        w.append(b"+buffered").expect("append");
        assert_eq!(fs.read(path).expect("read"), b"synced+flushed");

        let never_synced = Path::new("/db/000002.sst");
        let mut w2 = fs.create(never_synced).expect("create");
        w2.append(b"data").expect("append");
        drop(w2);
        fs.sync_dir(Path::new("/db")).expect("sync_dir");

        fs.simulate_power_loss();
        assert_eq!(fs.read(path).expect("read"), b"synced");
        assert!(fs.exists(never_synced), "its directory entry was synced");
        assert_eq!(fs.file_size(never_synced).expect("size"), 0);

        // A writer kept open continues after the cut; a second sync makes the new bytes durable.
        w.append(b"+more").expect("append");
        w.sync().expect("sync");
        fs.simulate_power_loss();
        assert_eq!(fs.read(path).expect("read"), b"synced+buffered+more");
    }

    #[test]
    fn power_loss_undoes_directory_changes_since_the_last_directory_sync() {
        let fs = MemFs::new();
        let write = |name: &str, data: &[u8]| {
            let mut w = fs.create(Path::new(name)).expect("create");
            w.append(data).expect("append");
            w.sync().expect("sync");
        };
        write("/db/kept", b"k");
        write("/db/removed", b"r");
        write("/db/old-name", b"o");
        write("/other/elsewhere", b"e");
        fs.sync_dir(Path::new("/db")).expect("sync_dir");
        // Changes after the directory sync: all lost, whatever their files' syncs.
        write("/db/created", b"c");
        fs.remove_file(Path::new("/db/removed")).expect("remove");
        fs.rename(Path::new("/db/old-name"), Path::new("/db/new-name"))
            .expect("rename");
        fs.simulate_power_loss();
        let names = |dir: &str| fs.list(Path::new(dir)).unwrap_or_default();
        assert_eq!(names("/db"), ["kept", "old-name", "removed"]);
        assert_eq!(fs.read(Path::new("/db/removed")).expect("read"), b"r");
        assert_eq!(fs.read(Path::new("/db/old-name")).expect("read"), b"o");
        assert!(
            !fs.exists(Path::new("/other/elsewhere")),
            "/other was never synced"
        );

        // A second directory sync makes the same changes durable.
        write("/db/created", b"c");
        fs.rename(Path::new("/db/old-name"), Path::new("/db/new-name"))
            .expect("rename");
        fs.sync_dir(Path::new("/db")).expect("sync_dir");
        fs.simulate_power_loss();
        assert_eq!(names("/db"), ["created", "kept", "new-name", "removed"]);
    }

    #[test]
    fn create_truncates_in_place_and_resets_durability() {
        let fs = MemFs::new();
        let path = Path::new("CURRENT");
        let mut w = fs.create(path).expect("create");
        w.append(b"MANIFEST-000001\n").expect("append");
        w.sync().expect("sync");
        drop(w);
        let r = fs.open(path).expect("open");
        let mut w = fs.create(path).expect("create again");
        let mut buf = [0u8; 1];
        assert!(
            r.read_exact_at(&mut buf, 0).is_err(),
            "the reader sees the truncation"
        );
        w.append(b"x").expect("append");
        drop(w);
        fs.simulate_power_loss_keeping_entries();
        assert_eq!(fs.file_size(path).expect("size"), 0);
    }

    #[test]
    fn corrupt_and_truncate() {
        let fs = MemFs::new();
        let path = Path::new("/db/f");
        let mut w = fs.create(path).expect("create");
        w.append(&[0, 1, 2, 3]).expect("append");
        w.sync().expect("sync");
        drop(w);
        fs.corrupt(path, 2, 0xff).expect("corrupt");
        assert_eq!(fs.read(path).expect("read"), [0, 1, 0xfd, 3]);
        let e = fs.corrupt(path, 4, 1).expect_err("past the end");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = fs.corrupt(Path::new("/db/g"), 0, 1).expect_err("missing");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);

        fs.truncate(path, 2).expect("truncate");
        assert_eq!(fs.read(path).expect("read"), [0, 1]);
        fs.truncate(path, 5).expect("extend");
        assert_eq!(fs.read(path).expect("read"), [0, 1, 0, 0, 0]);
        fs.simulate_power_loss_keeping_entries();
        assert_eq!(fs.read(path).expect("read"), [0, 1]);
        let e = fs.truncate(Path::new("/db/g"), 0).expect_err("missing");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn directories_are_implicit_but_recorded() {
        let fs = MemFs::new();
        assert!(!fs.exists(Path::new("/a")));
        fs.create(Path::new("/a/b/c"))
            .expect("create without create_dir_all");
        assert!(fs.exists(Path::new("/a")));
        assert!(fs.exists(Path::new("/a/b")));
        assert_eq!(fs.list(Path::new("/a")).expect("list"), ["b"]);
        assert_eq!(
            fs.list(Path::new("/a/b/c"))
                .expect_err("list a file")
                .kind(),
            io::ErrorKind::NotADirectory
        );
        assert_eq!(
            fs.create(Path::new("/a/b"))
                .err()
                .expect("create over a directory")
                .kind(),
            io::ErrorKind::IsADirectory
        );
        assert_eq!(
            fs.create_dir_all(Path::new("/a/b/c/d"))
                .expect_err("a directory under a file")
                .kind(),
            io::ErrorKind::NotADirectory
        );
        fs.create_dir_all(Path::new("/e/f"))
            .expect("create_dir_all");
        assert_eq!(fs.list(Path::new("/")).expect("list"), ["a", "e"]);
        assert_eq!(
            fs.list(Path::new("/e/f")).expect("list"),
            Vec::<String>::new()
        );
        fs.sync_dir(Path::new("/e")).expect("sync_dir");
    }
}
