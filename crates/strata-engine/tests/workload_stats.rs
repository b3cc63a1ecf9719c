//! What policies see of the workload: the engine's counts and its skew estimate α.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Options};

fn open() -> Db {
    let options = Options::new()
        .with_file_system(Arc::new(MemFs::default()))
        .with_write_buffer_size(1 << 20);
    Db::open("/db", options).unwrap()
}

/// Writes `flushes` buffers, each the same `hot` keys followed by `cold` keys never seen before,
/// flushing after each.
fn hot_and_cold(db: &Db, hot: u64, cold: u64, flushes: u64) {
    let mut next_cold = 1_000_000u64;
    for _ in 0..flushes {
        for k in 0..hot {
            db.put(format!("key{k:08}"), [7u8; 40]).unwrap();
        }
        for _ in 0..cold {
            db.put(format!("key{next_cold:08}"), [7u8; 40]).unwrap();
            next_cold += 1;
        }
        db.flush().unwrap();
    }
}

#[test]
fn the_skew_estimate_is_the_share_of_keys_the_previous_flush_held() {
    let db = open();
    assert_eq!(db.workload_stats().skew, None, "no flush yet");
    hot_and_cold(&db, 600, 200, 12);
    let stats = db.workload_stats();
    let alpha = stats.skew.unwrap();
    assert!((alpha - 0.75).abs() < 0.05, "α = {alpha}");
    assert_eq!(stats.puts, 12 * 800);
    assert!(stats.flushes >= 12);
}

#[test]
fn fresh_keys_in_every_flush_estimate_no_skew() {
    let db = open();
    hot_and_cold(&db, 0, 800, 6);
    let alpha = db.workload_stats().skew.unwrap();
    assert!(alpha < 0.02, "α = {alpha}");
}

#[test]
fn scans_are_counted_by_the_entries_they_returned_when_they_end() {
    let db = open();
    for k in 0..200u32 {
        db.put(format!("key{k:08}"), [1u8; 8]).unwrap();
    }
    // Three scans of 5 entries, one of 100, one of none.
    for start in [0u32, 50, 100] {
        let from = format!("key{start:08}");
        let n = db.range(from..).unwrap().take(5).count();
        assert_eq!(n, 5);
    }
    assert_eq!(db.range("key".."zzz").unwrap().take(100).count(), 100);
    assert_eq!(db.range("a".."b").unwrap().count(), 0);
    let scans = db.workload_stats().scans;
    assert_eq!(scans.total(), 5);
    // EcoTune with C = 3 calls a scan long above C + 1 = 4 keys.
    assert_eq!(scans.longer_than(4), 4);
    assert_eq!(scans.longer_than(5), 1);
    assert_eq!(scans.longer_than(0), 4);
}

#[test]
fn lookups_are_timed_apart_from_merges_when_none_runs() {
    let db = open();
    for k in 0..100u32 {
        db.put(format!("key{k:08}"), [1u8; 8]).unwrap();
    }
    for i in 0..3200u32 {
        let _ = db.get(format!("key{:08}", i % 100)).unwrap();
    }
    let times = db.workload_stats().lookup_times;
    // One lookup in 16 is timed; nothing merged meanwhile.
    assert_eq!(times.idle_lookups, 200);
    assert!(times.idle_nanos > 0);
    assert_eq!(times.merging_lookups, 0);
    assert_eq!(
        times.merge_slowdown(),
        None,
        "no lookups beside a merge yet"
    );
}
