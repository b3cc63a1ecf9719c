//! The row cache (`Options::with_row_cache_capacity`): repeated lookups answered without a data
//! block, and never an answer a newer write, a snapshot, a delete or a range deletion says
//! otherwise about.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Metrics, Options, ReadOptions};

fn key(i: u32) -> String {
    format!("key{i:06}")
}

/// A database with a row cache of `rows` bytes and a block cache of one block, compacting in
/// the writes, holding keys 0..1000 (value `v1-<i>`) in tables.
fn filled(rows: u64) -> Db {
    let db = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(MemFs::new()))
            .with_write_buffer_size(16 << 10)
            .with_block_cache_capacity(4096)
            .with_row_cache_capacity(rows)
            .with_synchronous_compaction(true)
            .with_policy_named("leveled")
            .unwrap(),
    )
    .unwrap();
    for i in 0..1000 {
        db.put(key(i), format!("v1-{i}")).unwrap();
    }
    db.flush().unwrap();
    db
}

fn get(db: &Db, k: &str) -> Option<String> {
    db.get(k)
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

fn hits_and_blocks(m: &Metrics) -> (u64, u64) {
    (m.row_cache_hits, m.blocks_read + m.block_cache_hits)
}

#[test]
fn a_key_read_again_is_answered_without_a_block() {
    let db = filled(1 << 20);
    for i in 0..100 {
        assert_eq!(get(&db, &key(i)).unwrap(), format!("v1-{i}"));
    }
    let first = db.metrics();
    assert_eq!(first.row_cache_hits, 0, "{first}");
    assert!(first.row_cache_rows >= 100, "{first}");
    for i in 0..100 {
        assert_eq!(get(&db, &key(i)).unwrap(), format!("v1-{i}"));
    }
    let (hits, blocks) = hits_and_blocks(&db.metrics());
    assert_eq!(hits, 100);
    assert_eq!(
        blocks,
        hits_and_blocks(&first).1,
        "a row answered needs no block"
    );
    // A batch is answered from the same rows.
    let keys: Vec<String> = (0..100).map(key).collect();
    let values = db.multi_get(&keys).unwrap();
    assert!(values
        .iter()
        .enumerate()
        .all(|(i, v)| v.as_deref() == Some(format!("v1-{i}").as_bytes())));
    let m = db.metrics();
    assert_eq!(hits_and_blocks(&m), (200, blocks), "{m}");
    assert!(m.row_cache_bytes <= m.row_cache_capacity);
}

#[test]
fn rows_never_hide_newer_writes_deletes_or_range_deletions() {
    let db = filled(1 << 20);
    for i in 0..300 {
        get(&db, &key(i));
    }
    // Newer writes, in the memtable and then in newer tables.
    for i in 0..100 {
        db.put(key(i), format!("v2-{i}")).unwrap();
    }
    db.delete(key(100)).unwrap();
    db.delete_range(key(200), key(250)).unwrap();
    let check = |db: &Db| {
        for i in 0..300 {
            let want = match i {
                0..100 => Some(format!("v2-{i}")),
                100 | 200..250 => None,
                _ => Some(format!("v1-{i}")),
            };
            assert_eq!(get(db, &key(i)), want, "{}", key(i));
            let batch = db.multi_get(&[key(i)]).unwrap();
            assert_eq!(
                batch[0].as_deref(),
                want.as_deref().map(str::as_bytes),
                "{}",
                key(i)
            );
        }
    };
    check(&db);
    db.flush().unwrap();
    check(&db);
    db.compact_range::<&[u8], _>(..).unwrap();
    check(&db);
    assert!(db.metrics().row_cache_hits > 0);
}

#[test]
fn a_snapshot_older_than_a_row_reads_the_table() {
    let db = filled(1 << 20);
    let before = db.snapshot();
    for i in 0..50 {
        db.put(key(i), format!("v2-{i}")).unwrap();
    }
    db.flush().unwrap();
    // One table holds both versions of each key (the snapshot keeps the old ones).
    db.compact_range::<&[u8], _>(..).unwrap();
    let old = ReadOptions::at(&before);
    for round in 0..2 {
        for i in 0..50 {
            // The latest read keeps the newest version as the table's row; the snapshot's
            // must not take it.
            assert_eq!(get(&db, &key(i)).unwrap(), format!("v2-{i}"), "{round}");
            let at = db.get_with(key(i), &old).unwrap().unwrap();
            assert_eq!(&at[..], format!("v1-{i}").as_bytes(), "round {round}");
            let batch = db.multi_get_with(&[key(i)], &old).unwrap();
            assert_eq!(batch[0].as_deref(), Some(format!("v1-{i}").as_bytes()));
        }
    }
    // The other order: a snapshot read first keeps no row, so a latest read finds the newest.
    let fresh = filled(1 << 20);
    let before = fresh.snapshot();
    fresh.put(key(7), "v2").unwrap();
    fresh.flush().unwrap();
    fresh.compact_range::<&[u8], _>(..).unwrap();
    let at = fresh.get_with(key(7), &ReadOptions::at(&before)).unwrap();
    assert_eq!(at.as_deref(), Some(&b"v1-7"[..]));
    assert_eq!(get(&fresh, &key(7)).as_deref(), Some("v2"));
}

#[test]
fn a_small_row_cache_evicts_and_stays_correct() {
    let db = filled(8 << 10);
    for round in 0..3 {
        for i in 0..1000 {
            assert_eq!(get(&db, &key(i)).unwrap(), format!("v1-{i}"), "{round}");
        }
    }
    let m = db.metrics();
    assert!(m.row_cache_rows < 1000, "{m}");
    assert!(m.row_cache_bytes <= m.row_cache_capacity, "{m}");
}

#[test]
fn without_a_row_cache_nothing_is_counted() {
    let db = filled(0);
    for i in 0..100 {
        get(&db, &key(i));
        get(&db, &key(i));
    }
    let m = db.metrics();
    assert_eq!(
        (m.row_cache_hits, m.row_cache_misses, m.row_cache_capacity),
        (0, 0, 0)
    );
    assert!(!m.to_string().contains("row cache"));
}
