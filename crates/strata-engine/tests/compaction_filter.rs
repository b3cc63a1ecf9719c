//! Compaction filters (`Options::with_compaction_filter`): compactions remove or rewrite the
//! puts the filter names, flushes do not, snapshots read what they read before, and a removed
//! key never shows an older value.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{CompactionFilter, Db, FilterDecision, Options, ReadOptions};

/// Removes values starting with `tmp:`, rewrites `old:` to `new:`, counts its calls.
#[derive(Debug, Default)]
struct Janitor {
    calls: AtomicU64,
}

impl CompactionFilter for Janitor {
    fn name(&self) -> &str {
        "janitor"
    }
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if value.starts_with(b"tmp:") {
            FilterDecision::Remove
        } else if let Some(rest) = value.strip_prefix(b"old:") {
            FilterDecision::ChangeValue([b"new:", rest].concat())
        } else {
            FilterDecision::Keep
        }
    }
}

fn open(fs: &MemFs, filter: &Arc<Janitor>) -> Db {
    Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>)
            .with_write_buffer_size(32 << 10)
            .with_compaction_filter(Arc::clone(filter) as Arc<dyn CompactionFilter>),
    )
    .unwrap()
}

fn get(db: &Db, key: &str) -> Option<String> {
    db.get(key)
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

#[test]
fn compactions_remove_and_rewrite_what_the_filter_says_and_flushes_do_not() {
    let fs = MemFs::new();
    let janitor = Arc::new(Janitor::default());
    let db = open(&fs, &janitor);
    for i in 0..300 {
        let value = match i % 3 {
            0 => format!("tmp:{i}"),
            1 => format!("old:{i}"),
            _ => format!("keep:{i}"),
        };
        db.put(format!("k{i:04}"), value).unwrap();
    }
    db.flush().unwrap();
    // A flush leaves every entry as it was.
    assert_eq!(get(&db, "k0000").as_deref(), Some("tmp:0"));
    assert_eq!(get(&db, "k0001").as_deref(), Some("old:1"));
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(get(&db, "k0000"), None);
    assert_eq!(get(&db, "k0001").as_deref(), Some("new:1"));
    assert_eq!(get(&db, "k0002").as_deref(), Some("keep:2"));
    let scanned = db.range::<&[u8], _>(..).unwrap().count();
    assert_eq!(scanned, 200);
    let metrics = db.metrics();
    assert_eq!(
        (
            metrics.compaction_filter_removed,
            metrics.compaction_filter_changed
        ),
        (100, 100)
    );
    assert!(janitor.calls.load(Ordering::Relaxed) >= 300);
    // Filtered for good: after a reopen too.
    db.close().unwrap();
    let db = open(&fs, &janitor);
    assert_eq!(get(&db, "k0003"), None);
    assert_eq!(get(&db, "k0004").as_deref(), Some("new:4"));
}

#[test]
fn a_snapshot_reads_the_same_before_and_after_a_filtering_compaction() {
    let fs = MemFs::new();
    let janitor = Arc::new(Janitor::default());
    let db = open(&fs, &janitor);
    db.put("a", "keep:1").unwrap();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    // An older value in the bottom level, a removable one above it, under a snapshot.
    db.put("a", "tmp:2").unwrap();
    db.put("b", "old:2").unwrap();
    let snapshot = db.snapshot();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    // The snapshot sees both puts, and so does the latest view: they are the snapshot's.
    let at = ReadOptions::at(&snapshot);
    assert_eq!(db.get_with("a", &at).unwrap().unwrap(), "tmp:2".as_bytes());
    assert_eq!(get(&db, "a").as_deref(), Some("tmp:2"));
    assert_eq!(get(&db, "b").as_deref(), Some("old:2"));
    drop(snapshot);
    db.compact_range::<&[u8], _>(..).unwrap();
    // Released: the removal hides the older value too, and the rewrite shows.
    assert_eq!(get(&db, "a"), None);
    assert_eq!(get(&db, "b").as_deref(), Some("new:2"));
}
