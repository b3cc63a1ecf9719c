//! `Db::open_read_only` (RELIABILITY.md, section 'Other failure paths'): full reads of a
//! database on storage that refuses every write, with nothing in the directory changed.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::fs::{FileLock, FileSystem, MemFs, RandomAccessFile, WritableFile};
use strata_engine::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

/// Storage mounted read-only: reads pass through, every call that would change the directory
/// fails as `EROFS` would.
#[derive(Debug)]
struct ReadOnlyStorage(Arc<dyn FileSystem>);

fn refused(what: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::ReadOnlyFilesystem,
        format!("{what} {} on read-only storage", path.display()),
    )
}

impl FileSystem for ReadOnlyStorage {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        Err(refused("creating directory", path))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Err(refused("creating", path))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.0.open(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.0.read(path)
    }
    fn rename(&self, from: &Path, _to: &Path) -> io::Result<()> {
        Err(refused("renaming", from))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        Err(refused("removing", path))
    }
    fn truncate(&self, path: &Path, _len: u64) -> io::Result<()> {
        Err(refused("truncating", path))
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        self.0.list(path)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.0.file_size(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        Err(refused("syncing directory", path))
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        Err(refused("locking", path))
    }
}

/// Every file of `dir` and its bytes.
fn files(fs: &dyn FileSystem, dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut names = fs.list(dir).unwrap();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let bytes = fs.read(&dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Writes a database with tables in several levels, overwrites and deletes, and writes still
/// only in the WAL; returns what it must hold.
fn populate(fs: &Arc<MemFs>, dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let options = Options::new()
        .with_file_system(Arc::clone(fs) as Arc<dyn FileSystem>)
        .with_write_buffer_size(16 << 10)
        .with_synchronous_compaction(true);
    let db = Db::open(dir, options).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..4u32 {
        for i in 0..1500u32 {
            let i = (i * 7919 + round * 13) % 2000;
            let value = format!("v{round}-{i}").into_bytes();
            if i % 11 == round {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                db.put(key(i), &value).unwrap();
                model.insert(key(i), value);
            }
        }
    }
    db.flush().unwrap();
    // These stay in the WAL only: the read-only open must replay them.
    let mut batch = WriteBatch::new();
    for i in 2000..2100u32 {
        batch.put(key(i), b"unflushed").unwrap();
        model.insert(key(i), b"unflushed".to_vec());
    }
    batch.delete(key(3)).unwrap();
    model.remove(&key(3));
    db.write(
        &WriteOptions {
            sync: true,
            ..Default::default()
        },
        batch,
    )
    .unwrap();
    assert!(db.version().tables().count() > 1);
    db.close().unwrap();
    model
}

fn read_only_options(fs: &Arc<MemFs>) -> Options {
    Options::new().with_file_system(Arc::new(ReadOnlyStorage(
        Arc::clone(fs) as Arc<dyn FileSystem>
    )))
}

fn assert_read_only(e: Error) {
    assert!(
        matches!(&e, Error::ReadOnly(why) if why.contains("open_read_only")),
        "{e}"
    );
}

#[test]
fn a_read_only_open_reads_everything_and_changes_nothing() {
    let fs = Arc::new(MemFs::new());
    let dir = PathBuf::from("/db");
    let model = populate(&fs, &dir);
    let before = files(fs.as_ref(), &dir);

    let db = Db::open_read_only(&dir, read_only_options(&fs)).unwrap();
    for i in 0..2200u32 {
        assert_eq!(
            db.get(key(i)).unwrap().map(|v| v.to_vec()),
            model.get(&key(i)).cloned(),
            "key {i}"
        );
    }
    let forward: Vec<(Vec<u8>, Vec<u8>)> = db
        .range::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(forward, expected);
    let backward: Vec<Vec<u8>> = db
        .range_rev(key(500)..key(1500))
        .unwrap()
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    let expected_back: Vec<Vec<u8>> = model
        .range(key(500)..key(1500))
        .rev()
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(backward, expected_back);
    let snapshot = db.snapshot();
    let at_snapshot = ReadOptions::at(&snapshot);
    assert_eq!(
        db.get_with(key(2050), &at_snapshot)
            .unwrap()
            .map(|v| v.to_vec()),
        Some(b"unflushed".to_vec())
    );
    assert!(db.metrics().levels.iter().map(|l| l.tables).sum::<usize>() > 1);

    assert_read_only(db.put(b"new", b"value").unwrap_err());
    assert_read_only(db.delete(key(1)).unwrap_err());
    assert_read_only(db.flush().unwrap_err());
    assert_read_only(db.compact_range::<&[u8], _>(..).unwrap_err());
    assert_read_only(db.wait_for_compactions().unwrap_err());
    assert_eq!(db.get(b"new").unwrap(), None);
    drop(snapshot);
    db.close().unwrap();
    assert_eq!(files(fs.as_ref(), &dir), before, "the directory changed");

    // The data is intact for a read-write open afterwards.
    let options = Options::new().with_file_system(Arc::clone(&fs) as Arc<dyn FileSystem>);
    let db = Db::open(&dir, options).unwrap();
    assert_eq!(
        db.get(key(2099)).unwrap().as_deref(),
        Some(&b"unflushed"[..])
    );
    assert_eq!(db.get(key(3)).unwrap(), None);
}

#[test]
fn a_read_only_open_beside_a_writer_sees_the_state_of_its_open() {
    let fs = Arc::new(MemFs::new());
    let dir = PathBuf::from("/db");
    let options = Options::new()
        .with_file_system(Arc::clone(&fs) as Arc<dyn FileSystem>)
        .with_write_buffer_size(4 << 20);
    let writer = Db::open(&dir, options).unwrap();
    for i in 0..1000u32 {
        writer.put(key(i), b"first").unwrap();
    }
    let reader = Db::open_read_only(&dir, read_only_options(&fs)).unwrap();
    for i in 0..1000u32 {
        writer.put(key(i), b"second").unwrap();
    }
    for i in 0..1000u32 {
        assert_eq!(
            reader.get(key(i)).unwrap().as_deref(),
            Some(&b"first"[..]),
            "key {i}"
        );
        assert_eq!(writer.get(key(i)).unwrap().as_deref(), Some(&b"second"[..]));
    }
    reader.close().unwrap();
    writer.close().unwrap();
}

#[test]
fn a_read_only_open_never_creates_a_database() {
    let fs = Arc::new(MemFs::new());
    let e = Db::open_read_only("/nothing", read_only_options(&fs)).unwrap_err();
    assert!(e.to_string().contains("/nothing"), "{e}");
    assert!(fs.file_names().is_empty());

    // A directory with files but no database is named as such.
    fs.create_dir_all(Path::new("/other")).unwrap();
    let mut f = fs.create(Path::new("/other/notes.txt")).unwrap();
    f.append(b"mine").unwrap();
    f.sync().unwrap();
    let e = Db::open_read_only("/other", read_only_options(&fs)).unwrap_err();
    assert!(
        matches!(e, Error::NotADatabase { ref example, .. } if example == "notes.txt"),
        "{e}"
    );
    assert_eq!(fs.read(Path::new("/other/notes.txt")).unwrap(), b"mine");

    // On a real directory, too: no LOCK, no manifest appear.
    let tmp = tempfile::tempdir().unwrap();
    assert!(Db::open_read_only(tmp.path(), Options::new()).is_err());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
