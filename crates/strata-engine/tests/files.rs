//! File lifecycle: WALs go once their data is in tables, tables once no version needs them, and
//! a manifest that grows past its limit is replaced without losing anything.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::path::Path;
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::manifest::{classify, FileKind};
use strata_engine::{Db, Options};

fn count(fs: &MemFs, kind: fn(FileKind) -> bool) -> usize {
    fs.list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter(|n| classify(n).is_some_and(kind))
        .count()
}

#[test]
fn wals_and_tables_are_deleted_when_no_longer_needed() {
    let fs = MemFs::default();
    let options = Options::new()
        .with_file_system(Arc::new(fs.clone()))
        .with_write_buffer_size(16 << 10)
        .with_synchronous_compaction(true);
    let db = Db::open("/db", options).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("k{:05}", i % 3000), format!("value {i}"))
            .unwrap();
    }
    db.flush().unwrap();
    // Every memtable is flushed: only the active WAL is left.
    assert_eq!(count(&fs, |k| matches!(k, FileKind::Wal(_))), 1);
    db.compact_range::<&str, _>(..).unwrap();
    // Compaction replaced the tables; the files of the old ones are gone.
    assert_eq!(
        count(&fs, |k| matches!(k, FileKind::Table(_))),
        db.version().table_count()
    );
    // An iterator pins the files it reads until it is dropped.
    let mut it = db.range::<&str, _>(..).unwrap();
    let before = it.next().unwrap().unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), "new").unwrap();
    }
    db.flush().unwrap();
    db.compact_range::<&str, _>(..).unwrap();
    assert_eq!(before.0.as_ref(), b"k00000");
    assert!(
        count(&fs, |k| matches!(k, FileKind::Table(_))) > db.version().table_count(),
        "files an open iterator reads are kept"
    );
    assert_eq!(it.count(), 2999, "the old iterator still reads its files");
    // Unpinned files go at the next version change.
    db.put("z", "z").unwrap();
    db.flush().unwrap();
    assert_eq!(
        count(&fs, |k| matches!(k, FileKind::Table(_))),
        db.version().table_count()
    );
    db.close().unwrap();
}

#[test]
fn a_growing_manifest_is_replaced_and_recovers_the_same_version() {
    let fs = MemFs::default();
    let options = || {
        Options::new()
            .with_file_system(Arc::new(fs.clone()))
            .with_write_buffer_size(8 << 10)
            .with_max_manifest_file_size(4096)
            .with_synchronous_compaction(true)
    };
    let db = Db::open("/db", options()).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("k{i:06}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    let version = db.version();
    assert!(version.table_count() > 5);
    assert_eq!(
        count(&fs, |k| matches!(k, FileKind::Manifest(_))),
        1,
        "old manifests are deleted"
    );
    drop(db);
    let db = Db::open("/db", options()).unwrap();
    // The recovered shape is the one that was live (the policy state included).
    assert_eq!(db.version().to_string(), version.to_string());
    for i in (0..20_000u32).step_by(997) {
        assert_eq!(
            db.get(format!("k{i:06}")).unwrap().as_deref(),
            Some(format!("v{i}").as_bytes())
        );
    }
    db.close().unwrap();
}

/// A policy that flushes windows keeps part of each memtable buffered: the rest is logged again in
/// the open WAL, so the flushed memtable's WAL is deleted as soon as the flush installs, and
/// nothing buffered is lost across a reopen or a power cut after close.
#[test]
fn window_flushes_delete_each_wal_once_nothing_in_it_is_unflushed() {
    strata_policy::testing::register();
    for synchronous in [true, false] {
        let fs = MemFs::default();
        let options = || {
            Options::new()
                .with_file_system(Arc::new(fs.clone()))
                .with_write_buffer_size(16 << 10)
                .with_synchronous_compaction(synchronous)
                .with_policy_named("exercise-executor:target_file_size=8KiB")
                .unwrap()
        };
        let db = Db::open("/db", options()).unwrap();
        let wals = |fs: &MemFs| count(fs, |k| matches!(k, FileKind::Wal(_)));
        let mut most_wals = 0;
        for i in 0..8000u32 {
            db.put(
                format!("k{:06}", i.wrapping_mul(7919) % 100_000),
                format!("value {i}"),
            )
            .unwrap();
            if synchronous {
                // Every flush installs before the write returns: only the open WAL is left.
                assert_eq!(wals(&fs), 1, "after write {i}");
            } else if i % 500 == 0 {
                most_wals = most_wals.max(wals(&fs));
            }
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let metrics = db.metrics();
        assert!(metrics.flushes > 10, "{} flushes", metrics.flushes);
        assert_eq!(wals(&fs), 1, "synchronous {synchronous}");
        // Background flushes lag at most the frozen memtables allowed (2) behind.
        assert!(most_wals <= 3, "{most_wals} WALs at once");
        // The last window flush kept part of the buffer: it is in the memtable and the open WAL.
        assert!(metrics.memtable_bytes > 0, "nothing stayed buffered");
        db.close().unwrap();
        fs.simulate_power_loss();
        let db = Db::open("/db", options()).unwrap();
        for i in (0..8000u32).step_by(7) {
            let key = format!("k{:06}", i.wrapping_mul(7919) % 100_000);
            assert!(
                db.get(&key).unwrap().is_some(),
                "{key} lost (synchronous {synchronous})"
            );
        }
        db.close().unwrap();
    }
}
