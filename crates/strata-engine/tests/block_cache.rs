//! The block cache's knobs: indexes and filters kept in the cache
//! (`Options::with_cache_index_and_filter_blocks`), pinned by level
//! (`Options::with_pin_index_and_filter_blocks`) or protected by a high-priority pool, and what
//! `Db::metrics` says the cache holds.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, IndexPinning, Metrics, Options};

const KEYS: u32 = 20_000;

fn key(i: u32) -> String {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % KEYS)
}

/// A database of about 20 level-0 tables (no compaction runs: the trigger is out of reach),
/// each small, with a block cache of `cache` bytes.
fn filled(options: Options, cache: u64) -> Db {
    let db = Db::open(
        "/db",
        options
            .with_file_system(Arc::new(MemFs::new()))
            .with_write_buffer_size(64 << 10)
            .with_block_cache_capacity(cache)
            .with_synchronous_compaction(true)
            .with_policy_named("leveled:level0_trigger=1000")
            .unwrap(),
    )
    .unwrap();
    for i in 0..KEYS {
        db.put(key(i), [7u8; 60]).unwrap();
    }
    db.flush().unwrap();
    db
}

/// The cache's entries take about its capacity at most. quick_cache evicts only from its cold
/// entries when its capacity shrinks (as held tables' charges and the high-priority pool grow),
/// so the pool of data blocks may stay a little above its share until later inserts evict hot
/// ones too.
fn within_capacity(m: &Metrics) {
    assert!(
        m.block_cache_bytes <= m.block_cache_capacity * 115 / 100,
        "{m}"
    );
}

/// Looks every key up `rounds` times, checking each is found; the metrics after.
fn read_all(db: &Db, rounds: u32) -> Metrics {
    for _ in 0..rounds {
        for i in 0..KEYS {
            assert!(db.get(key(i)).unwrap().is_some(), "{}", key(i));
        }
    }
    db.metrics()
}

#[test]
fn indexes_and_filters_held_by_tables_are_never_read_again() {
    let db = filled(Options::new(), 1 << 20);
    let m = read_all(&db, 1);
    assert!(m.levels[0].tables > 10, "{m}");
    assert_eq!((m.index_blocks_read, m.filter_blocks_read), (0, 0), "{m}");
    assert_eq!(
        (m.block_cache_indexes, m.block_cache_filters),
        (0, 0),
        "{m}"
    );
    assert!(m.block_cache_table_bytes > 0, "held ones are charged: {m}");
}

#[test]
fn a_cache_too_small_for_the_indexes_reads_them_again() {
    // 64 KiB for ~20 tables whose indexes and filters take more, beside data blocks: the
    // cache holds some, evicts them for others, and lookups read them again.
    let db = filled(
        Options::new()
            .with_cache_index_and_filter_blocks(true)
            .with_cache_index_and_filter_blocks_with_high_priority(false),
        64 << 10,
    );
    let m = read_all(&db, 2);
    let tables = m.levels[0].tables as u64;
    assert!(
        m.index_blocks_read > tables && m.filter_blocks_read > tables,
        "indexes and filters are read again after evictions: {m}"
    );
    within_capacity(&m);
    assert!(
        m.block_cache_table_bytes < tables * 1024,
        "tables that keep their index in the cache charge little: {m}"
    );
}

#[test]
fn pinned_level0_tables_hold_their_indexes_under_the_same_pressure() {
    let db = filled(
        Options::new()
            .with_cache_index_and_filter_blocks(true)
            .with_cache_index_and_filter_blocks_with_high_priority(false)
            .with_pin_index_and_filter_blocks(IndexPinning::Level0),
        64 << 10,
    );
    let m = read_all(&db, 2);
    assert_eq!((m.index_blocks_read, m.filter_blocks_read), (0, 0), "{m}");
    assert_eq!(
        (m.block_cache_indexes, m.block_cache_filters),
        (0, 0),
        "{m}"
    );
}

#[test]
fn a_high_priority_pool_keeps_indexes_from_data_blocks() {
    // The cache holds every index and filter in its high-priority half, while data blocks
    // (all of them together far larger than the cache) churn through the other half.
    let db = filled(
        Options::new().with_cache_index_and_filter_blocks(true),
        512 << 10,
    );
    let m = read_all(&db, 3);
    let tables = m.levels[0].tables as u64;
    assert!(
        m.index_blocks_read <= tables && m.filter_blocks_read <= tables,
        "each index and filter is read at most once: {m}"
    );
    assert!(m.blocks_read > 1000, "data blocks churn: {m}");
    assert_eq!(m.block_cache_indexes, tables, "{m}");
    assert_eq!(m.block_cache_filters, tables, "{m}");
    assert!(
        m.block_cache_index_bytes > 0 && m.block_cache_filter_bytes > 0,
        "{m}"
    );
    assert!(m.block_cache_data_blocks > 0, "{m}");
    within_capacity(&m);
}

#[test]
fn upper_levels_pin_what_lies_above_the_deepest_level() {
    let db = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(MemFs::new()))
            .with_write_buffer_size(64 << 10)
            .with_block_cache_capacity(64 << 10)
            .with_synchronous_compaction(true)
            .with_cache_index_and_filter_blocks(true)
            .with_cache_index_and_filter_blocks_with_high_priority(false)
            .with_pin_index_and_filter_blocks(IndexPinning::UpperLevels),
    )
    .unwrap();
    for i in 0..KEYS {
        db.put(key(i), [7u8; 60]).unwrap();
    }
    db.compact_range::<&[u8], _>(..).unwrap();
    // Everything is in the deepest level now; new writes make a level-0 table above it.
    for i in 0..KEYS / 10 {
        db.put(key(i), [8u8; 60]).unwrap();
    }
    db.flush().unwrap();
    let m = db.metrics();
    assert!(m.levels.len() >= 2, "{m}");
    let before = (m.index_blocks_read, m.filter_blocks_read);
    // Lookups of keys only the deepest level holds read its evicted indexes again; the
    // upper table (probed by every lookup) never.
    let m = read_all(&db, 2);
    let deepest_tables = m.levels.last().unwrap().tables as u64;
    assert!(m.index_blocks_read > before.0, "{m}");
    assert!(
        m.block_cache_indexes <= deepest_tables,
        "only deepest-level indexes are cached: {m}"
    );
}
