//! A [`MemFs`] for tests that watch what the engine asks of its files: which files it opens or
//! creates, direct or not, and whether opened files say the operating system holds them in
//! memory (as page-cached files answer `RandomAccessFile::read_if_cached`), and whose reads of
//! chosen files wait at a gate.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

pub mod model;
pub mod small;

use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use strata_engine::fs::{FileLock, FileSystem, MemFs, RandomAccessFile, WritableFile};

/// A [`MemFs`] that records every open and create, and whose opened (buffered) files are held in
/// memory while `in_memory` is set.
#[derive(Debug, Default)]
pub struct Watching {
    pub inner: MemFs,
    /// (what, file name, direct), in order.
    pub seen: Mutex<Vec<(&'static str, String, bool)>>,
    pub in_memory: Arc<AtomicBool>,
    /// Reads of the files it names wait while it is shut.
    pub gate: Arc<ReadGate>,
}

/// Holds reads of the files it names while shut.
#[derive(Debug, Default)]
pub struct ReadGate {
    /// The file names whose reads wait, and whether the gate is shut.
    names: Mutex<(HashSet<String>, bool)>,
    opened: Condvar,
    /// Reads waiting now.
    pub waiting: AtomicUsize,
}

impl ReadGate {
    /// Makes reads of `name` wait while the gate is shut.
    pub fn hold(&self, name: String) {
        self.names.lock().0.insert(name);
    }

    /// Shuts or opens the gate.
    pub fn set_shut(&self, shut: bool) {
        self.names.lock().1 = shut;
        self.opened.notify_all();
    }

    fn pass(&self, name: &str) {
        let mut names = self.names.lock();
        if names.1 && names.0.contains(name) {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            while names.1 {
                self.opened.wait(&mut names);
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Watching {
    fn note(&self, what: &'static str, path: &Path, direct: bool) {
        self.seen.lock().push((what, file_name(path), direct));
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

/// A file of [`Watching`]: reads pass through; it holds every range in memory while
/// `in_memory` is set.
struct WatchedFile {
    inner: Arc<dyn RandomAccessFile>,
    in_memory: Arc<AtomicBool>,
    name: String,
    gate: Arc<ReadGate>,
}

impl RandomAccessFile for WatchedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.gate.pass(&self.name);
        self.inner.read_exact_at(buf, offset)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_if_cached(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        if !self.in_memory.load(Ordering::Relaxed) {
            return None;
        }
        let mut buf = vec![0u8; len];
        self.inner.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
    }
}

impl FileSystem for Watching {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.note("create", path, false);
        self.inner.create(path)
    }
    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.note("create", path, false);
        self.inner.create_mapped(path)
    }
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.note("create", path, true);
        self.inner.create_direct(path)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.note("open", path, false);
        Ok(Arc::new(WatchedFile {
            inner: self.inner.open(path)?,
            in_memory: Arc::clone(&self.in_memory),
            name: file_name(path),
            gate: Arc::clone(&self.gate),
        }))
    }
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.note("open", path, true);
        self.inner.open_direct(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
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
        self.inner.sync_dir(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

/// `policy` with small levels and tables, so a few hundred writes flush and compact many times
/// (the tests that loop over every policy on a 8 KiB buffer).
pub fn small_tree_spec(policy: &str) -> strata_policy::PolicySpec {
    let mut spec: strata_policy::PolicySpec = policy.parse().expect("a policy specification");
    spec.fill_defaults([
        ("size_ratio", "3"),
        ("target_file_size", "4KiB"),
        ("expected_data_size", "256KiB"),
        ("bucket_size", "2KiB"),
    ])
    .expect("options every test policy takes");
    spec
}

/// Runs `run` for every policy under test, each on a thread of its own (for tests that mostly
/// wait on the clock), failing if any run fails.
pub fn every_policy_at_once(run: fn(&'static str)) {
    let runs: Vec<_> = strata_policy::testing::policies_to_test()
        .into_iter()
        .map(|policy| std::thread::spawn(move || run(policy)))
        .collect();
    for run in runs {
        run.join().expect("a policy's run failed");
    }
}
