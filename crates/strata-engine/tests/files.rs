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
