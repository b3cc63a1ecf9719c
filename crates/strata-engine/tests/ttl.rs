//! Time to live (`Options::with_ttl`): entries older than the TTL read as absent through every
//! read path, compactions drop them, newer writes live on, and ages survive a reopen.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use std::time::Duration;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{Db, Error, Options, ReadOptions};

fn options(fs: &MemFs, ttl: u64) -> Options {
    Options::new()
        .with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>)
        .with_write_buffer_size(16 << 10)
        .with_ttl(Some(Duration::from_secs(ttl)))
}

fn visible(db: &Db, keys: &[String]) -> Vec<bool> {
    keys.iter().map(|k| db.get(k).unwrap().is_some()).collect()
}

#[test]
fn expired_entries_read_absent_everywhere_and_compactions_drop_them() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, 2)).unwrap();
    let old: Vec<String> = (0..200).map(|i| format!("old{i:04}")).collect();
    for k in &old {
        db.put(k, [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    let snapshot = db.snapshot();
    assert!(visible(&db, &old).iter().all(|&v| v));
    // Past the TTL (sampled per second, so up to two more).
    std::thread::sleep(Duration::from_millis(4_200));
    let new: Vec<String> = (0..50).map(|i| format!("new{i:04}")).collect();
    for k in &new {
        db.put(k, [b'w'; 100]).unwrap();
    }
    assert!(visible(&db, &old).iter().all(|&v| !v), "expired keys read");
    assert!(visible(&db, &new).iter().all(|&v| v));
    let keys: Vec<&[u8]> = old.iter().chain(&new).map(|k| k.as_bytes()).collect();
    let got = db.multi_get(&keys).unwrap();
    assert_eq!(got.iter().filter(|v| v.is_some()).count(), new.len());
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), new.len());
    assert_eq!(db.range_rev::<&[u8], _>(..).unwrap().count(), new.len());
    // A snapshot taken before the expiry does not bring them back.
    let at = ReadOptions::at(&snapshot);
    assert_eq!(db.get_with(&old[0], &at).unwrap(), None);
    drop(snapshot);
    // A full compaction drops them: the tree shrinks to the new keys.
    db.compact_range::<&[u8], _>(..).unwrap();
    let entries: u64 = db.version().tables().map(|(_, _, t)| t.entries).sum();
    assert_eq!(entries, new.len() as u64);
    db.close().unwrap();
}

#[test]
fn ages_survive_a_reopen() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, 2)).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    std::thread::sleep(Duration::from_millis(4_200));
    // The flushed entries' ages come from the manifest: expired at once after the reopen.
    let db = Db::open("/db", options(&fs, 2)).unwrap();
    assert_eq!(db.get("k001").unwrap(), None);
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), 0);
    // Without a TTL they read again (until a compaction with one dropped them).
    db.close().unwrap();
    let db = Db::open(
        "/db",
        Options::new().with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>),
    )
    .unwrap();
    assert!(db.get("k001").unwrap().is_some());
}

#[test]
fn a_zero_ttl_is_refused() {
    let err = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(MemFs::new()))
            .with_ttl(Some(Duration::ZERO)),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, Error::InvalidArgument(ref m) if m.contains("ttl")),
        "{err}"
    );
}
