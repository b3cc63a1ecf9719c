//! Checkpoints (`Db::checkpoint`): taken while a writer runs, under every built-in policy, the
//! copy opens and holds every write acknowledged before it began, a prefix of the later ones
//! (whole batches only), and nothing the source does afterwards; hard links on a real file
//! system; refusals.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs, StdFs};
use strata_engine::{Db, Error, Options, WriteBatch, WriteOptions};
use strata_policy::{testing, PolicySpec};

/// Small buffers and tables, so that a few thousand writes make levels, merges and (Min-Max)
/// held buffers; the policy's options it leaves unset take the engine's buffer size.
fn options(fs: Arc<dyn FileSystem>, policy: &str) -> Options {
    let mut spec: PolicySpec = policy.parse().unwrap();
    spec.fill_defaults([
        ("size_ratio", "3"),
        ("target_file_size", "4096"),
        ("expected_data_size", "256KiB"),
        ("bucket_size", "2KiB"),
    ])
    .unwrap();
    Options::new()
        .with_file_system(fs)
        .with_write_buffer_size(8 << 10)
        .with_block_size(512)
        .with_policy_spec(spec)
        .unwrap()
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.range::<&[u8], _>(..)
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// Loads `db`, then takes a checkpoint into `dest` while a thread appends keys `w…` in order;
/// returns what the source held when the checkpoint began and how many appends were
/// acknowledged by then.
fn checkpoint_while_writing(db: &Arc<Db>, dest: &Path) -> (BTreeMap<Vec<u8>, Vec<u8>>, usize) {
    for i in 0..1500u32 {
        db.put(format!("k{:05}", i * 7 % 1500), format!("v{i}"))
            .unwrap();
        if i % 5 == 0 {
            db.delete(format!("k{:05}", i * 3 % 1500)).unwrap();
        }
    }
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acknowledged, stop) =
            (Arc::clone(db), Arc::clone(&acknowledged), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) || i < 200 {
                // Two keys per batch: a checkpoint holds both or neither.
                let mut batch = WriteBatch::new();
                batch.put(format!("w{i:06}"), format!("x{i}")).unwrap();
                batch.put(format!("y{i:06}"), format!("x{i}")).unwrap();
                db.write(&WriteOptions::default(), batch).unwrap();
                i += 1;
                acknowledged.store(i, Ordering::Release);
            }
        })
    };
    while acknowledged.load(Ordering::Acquire) < 100 {
        std::thread::yield_now();
    }
    let before = acknowledged.load(Ordering::Acquire);
    let mut expected = contents(db);
    expected.retain(|k, _| k.starts_with(b"k"));
    db.checkpoint(dest).unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    (expected, before)
}

/// Checks a checkpoint's contents: the loaded keys as they were, every append acknowledged
/// before it began, and the appends it holds a prefix of all of them.
fn check_copy(copy: &Db, expected: &BTreeMap<Vec<u8>, Vec<u8>>, before: usize, what: &str) {
    let held = contents(copy);
    let loaded: BTreeMap<_, _> = held
        .iter()
        .filter(|(k, _)| k.starts_with(b"k"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(loaded == *expected, "{what}: the loaded keys differ");
    let appends = held.keys().filter(|k| k.starts_with(b"w")).count();
    assert!(
        appends >= before,
        "{what}: {appends} appends held, {before} acknowledged before the checkpoint"
    );
    for i in 0..appends {
        for key in [format!("w{i:06}"), format!("y{i:06}")] {
            assert_eq!(
                copy.get(&key).unwrap().as_deref(),
                Some(format!("x{i}").as_bytes()),
                "{what}: the appends held are not a prefix, or a batch is torn at {key}"
            );
        }
    }
    let halves = held.keys().filter(|k| k.starts_with(b"y")).count();
    assert_eq!(halves, appends, "{what}: a batch is torn");
}

#[test]
fn a_checkpoint_taken_while_writing_opens_with_every_acknowledged_write_under_every_policy() {
    for name in testing::policies_to_test() {
        let mem = MemFs::new();
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        let db = Arc::new(Db::open("/db", options(Arc::clone(&fs), name)).unwrap());
        let (expected, before) = checkpoint_while_writing(&db, Path::new("/copy"));
        // The source goes on: more writes, flushes and compactions delete files it had.
        for i in 0..3000u32 {
            db.put(format!("k{:05}", i % 1500), "later").unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        Arc::into_inner(db).unwrap().close().unwrap();
        mem.simulate_power_loss();
        let copy = Db::open("/copy", options(Arc::clone(&fs), name)).unwrap();
        check_copy(&copy, &expected, before, name);
        copy.close().unwrap();
    }
}

#[test]
fn on_a_real_file_system_tables_are_hard_links_and_the_copy_outlives_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let (source, dest) = (dir.path().join("db"), dir.path().join("copies/one"));
    let fs: Arc<dyn FileSystem> = Arc::new(StdFs);
    let db = Arc::new(Db::open(&source, options(Arc::clone(&fs), "leveled")).unwrap());
    let (expected, before) = checkpoint_while_writing(&db, &dest);
    // The source's compactions delete tables at any time after the first checkpoint; a second
    // one, taken with no job running, shows the links exactly: each of its tables has the
    // source's name, its own, and the first checkpoint's if that one has the table too.
    db.wait_for_compactions().unwrap();
    let quiet = dir.path().join("copies/two");
    db.checkpoint(&quiet).unwrap();
    let tables: Vec<_> = std::fs::read_dir(&quiet)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    assert!(!tables.is_empty(), "the checkpoint holds no table");
    for table in &tables {
        use std::os::unix::fs::MetadataExt;
        let in_first = dest.join(table.file_name().unwrap()).exists();
        assert_eq!(
            std::fs::metadata(table).unwrap().nlink(),
            2 + u64::from(in_first),
            "{} is not linked",
            table.display()
        );
    }
    Arc::into_inner(db).unwrap().close().unwrap();
    std::fs::remove_dir_all(&source).unwrap();
    let copy = Db::open(&dest, options(fs, "leveled")).unwrap();
    check_copy(&copy, &expected, before, "leveled on StdFs");
    copy.close().unwrap();
}

#[test]
fn a_checkpoint_into_an_existing_directory_is_refused_and_changes_nothing() {
    let mem = MemFs::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let db = Db::open("/db", options(Arc::clone(&fs), "leveled")).unwrap();
    db.put("a", "1").unwrap();
    fs.create_dir_all(Path::new("/taken")).unwrap();
    let mut f = fs.create(Path::new("/taken/mine")).unwrap();
    f.append(b"user data").unwrap();
    f.sync().unwrap();
    match db.checkpoint("/taken") {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("/taken"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        fs.list(Path::new("/taken")).unwrap(),
        vec!["mine".to_string()]
    );
    assert_eq!(fs.read(Path::new("/taken/mine")).unwrap(), b"user data");
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    // A checkpoint of a checkpoint opens too.
    let summary = db.checkpoint("/first").unwrap();
    assert!(summary.wals >= 1, "{summary:?}");
    let first = Db::open("/first", options(Arc::clone(&fs), "leveled")).unwrap();
    first.checkpoint("/second").unwrap();
    first.close().unwrap();
    let second = Db::open("/second", options(fs, "leveled")).unwrap();
    assert_eq!(second.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    second.close().unwrap();
    db.close().unwrap();
}

#[test]
fn a_checkpoint_that_meets_a_fault_fails_leaves_no_files_and_the_source_stays_whole() {
    use strata_engine::fs::{FaultFs, FaultKind, FileClasses};
    let kinds = [
        FaultKind::Create,
        FaultKind::Append,
        FaultKind::ShortWrite,
        FaultKind::Sync,
        FaultKind::Read,
        FaultKind::Rename,
        FaultKind::SyncDir,
    ];
    let mut failed = 0;
    for kind in kinds {
        for n in 0..4 {
            let mem = MemFs::new();
            let faults = FaultFs::new(Arc::new(mem.clone()), 7);
            let fs: Arc<dyn FileSystem> = Arc::new(faults.clone());
            let db = Db::open("/db", options(Arc::clone(&fs), "leveled")).unwrap();
            for i in 0..600u32 {
                db.put(format!("k{:04}", i * 7 % 500), format!("v{i}"))
                    .unwrap();
            }
            db.wait_for_compactions().unwrap();
            let expected = contents(&db);
            faults.fail_nth(kind, FileClasses::ALL, n);
            let what = format!("{} after {n}", kind.name());
            if db.checkpoint("/copy").is_err() {
                failed += 1;
                let left = mem.list(Path::new("/copy")).unwrap_or_default();
                assert!(
                    left.is_empty(),
                    "{what}: the failed checkpoint left {left:?}"
                );
                // The empty directory it leaves takes the next try.
                faults.clear();
                db.checkpoint("/copy").unwrap();
            }
            let copy = Db::open("/copy", options(Arc::new(mem.clone()), "leveled")).unwrap();
            assert!(contents(&copy) == expected, "{what}: the copy differs");
            copy.close().unwrap();
            faults.clear();
            assert!(contents(&db) == expected, "{what}: the source changed");
            db.close().unwrap();
        }
    }
    assert!(failed > 0, "no fault reached a checkpoint");
}

/// A window flush that re-buffers what it leaves logs those entries again, with their sequence
/// numbers, in the open WAL; a checkpoint that copies that WAL and the older ones it came from
/// (its manifest predates the flush) replays each such entry twice. Recovery takes it once:
/// before, one round in about 30 of this loop failed on the duplicate.
#[test]
fn a_checkpoint_racing_a_re_buffering_window_flush_replays_each_entry_once() {
    testing::register();
    for _ in 0..100 {
        let mem = MemFs::new();
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        let db = Arc::new(Db::open("/db", options(Arc::clone(&fs), testing::NAME)).unwrap());
        let (expected, before) = checkpoint_while_writing(&db, Path::new("/copy"));
        Arc::into_inner(db).unwrap().close().unwrap();
        let copy = Db::open("/copy", options(Arc::clone(&fs), testing::NAME)).unwrap();
        check_copy(&copy, &expected, before, testing::NAME);
        copy.close().unwrap();
    }
}
