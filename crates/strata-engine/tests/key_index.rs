//! The key index (`Options::with_key_index`): lookups in the indexed level probe only the
//! tables that hold the key, and no filter; answers stay those of a database without it.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Options};

/// A database running `policy` whose flushes write runs of level 1, with or without the key
/// index there.
fn open_with(policy: &str, indexed: bool) -> Db {
    let options = Options::new()
        .with_file_system(Arc::new(MemFs::default()))
        .with_write_buffer_size(64 << 10)
        .with_synchronous_compaction(true)
        .with_key_index(indexed.then_some(1))
        .with_policy_named(policy)
        .unwrap();
    Db::open("/db", options).unwrap()
}

/// Flushes stay as runs of level 1: `ecotune`'s top level, with a unit large enough that no
/// top-to-main compaction happens.
fn open(indexed: bool) -> Db {
    open_with("ecotune:write_buffer_size=64MiB", indexed)
}

/// Six flushed runs in level 1: keys `k0..k2999` each written in two runs (the second time
/// with a new value), then some deleted.
fn load(db: &Db) {
    for round in 0..2u32 {
        for part in 0..3u32 {
            for k in (part * 1000)..(part * 1000 + 1000) {
                db.put(format!("k{k:05}"), format!("v{round}-{k}")).unwrap();
            }
            db.flush().unwrap();
        }
    }
    for k in (0..3000u32).step_by(7) {
        db.delete(format!("k{k:05}")).unwrap();
    }
    db.flush().unwrap();
}

#[test]
fn indexed_lookups_probe_only_the_tables_holding_the_key_and_no_filter() {
    let plain = open(false);
    let indexed = open(true);
    load(&plain);
    load(&indexed);
    let runs = indexed
        .metrics()
        .levels
        .iter()
        .find(|l| l.level == 1)
        .unwrap()
        .runs;
    assert_eq!(runs, 7, "every flush is a run of level 1");
    assert!(indexed.metrics().key_index_entries >= 6000);
    assert!(indexed.metrics().key_index_bytes >= 6000 * 8);
    assert_eq!(plain.metrics().key_index_entries, 0);
    let (p0, i0) = (plain.metrics(), indexed.metrics());
    for k in 0..4000u32 {
        let key = format!("k{k:05}");
        assert_eq!(
            plain.get(&key).unwrap(),
            indexed.get(&key).unwrap(),
            "{key}"
        );
    }
    let (p1, i1) = (plain.metrics(), indexed.metrics());
    assert_eq!(
        i1.bloom_checks, i0.bloom_checks,
        "the index replaces every filter probe"
    );
    assert!(p1.bloom_checks - p0.bloom_checks > 4000);
    // Each key is in at most one run newer than any other version of it: the newest run that
    // holds it answers, so an indexed lookup reads one table per present key and none for the
    // 1000 absent ones.
    assert_eq!(i1.get_tables_probed - i0.get_tables_probed, 3000);
    assert!(p1.get_tables_probed - p0.get_tables_probed > 3000);
}

#[test]
fn keys_leave_the_index_with_their_tables_and_new_ones_enter() {
    // Tiering with eight runs a level: the eighth flush sends level 1 down whole.
    let db = open_with("tiered:size_ratio=8", true);
    load(&db);
    let before = db.metrics().key_index_entries;
    assert!(before >= 6000);
    db.put("k99999", "last").unwrap();
    db.flush().unwrap();
    // Everything left level 1: the index holds nothing of it any more.
    assert!(db.metrics().levels.iter().all(|l| l.level != 1));
    assert_eq!(db.metrics().key_index_entries, 0, "had {before}");
    for k in 0..100u32 {
        db.put(format!("k{k:05}"), "new").unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.metrics().key_index_entries, 100);
    assert_eq!(db.get("k00050").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.get("k02001").unwrap().as_deref(), Some(&b"v1-2001"[..]));
    assert_eq!(
        db.get("k02002").unwrap(),
        None,
        "deleted before it moved down"
    );
}

#[test]
fn a_key_index_beyond_the_last_level_is_refused_by_name() {
    let options = Options::new()
        .with_file_system(Arc::new(MemFs::default()))
        .with_key_index(Some(1000));
    let err = Db::open("/db", options).err().unwrap().to_string();
    assert!(err.contains("key index level 1000"), "{err}");
}
