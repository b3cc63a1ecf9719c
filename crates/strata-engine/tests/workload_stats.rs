//! What policies see of the workload: the engine's counts and its skew estimate α.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::{FaultFs, MemFs};
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

/// What a database did since its creation survives closes and reopens; a crash keeps what the
/// last flush recorded.
#[test]
fn lifetime_statistics_add_up_across_reopens_and_a_crash_keeps_the_last_record() {
    let fs = MemFs::default();
    let options = || {
        Options::new()
            .with_file_system(Arc::new(fs.clone()))
            .with_write_buffer_size(64 << 10)
            .with_synchronous_compaction(true)
    };
    let db = Db::open("/db", options()).unwrap();
    for i in 0..2_000u32 {
        db.put(format!("key{:05}", i % 1_500), [1u8; 30]).unwrap();
    }
    db.delete("key00001").unwrap();
    for i in 0..300u32 {
        db.get(format!("key{i:05}")).unwrap();
    }
    let scanned = db.range("key00100".."key00110").unwrap().count();
    assert_eq!(scanned, 10);
    db.flush().unwrap();
    let first = db.lifetime_stats();
    assert_eq!((first.puts, first.deletes), (2_000, 1));
    assert_eq!((first.point_reads, first.scans), (300, 1));
    assert_eq!(first.key_bytes, 2_001 * 8);
    assert_eq!(first.value_bytes, 2_000 * 30);
    assert_eq!(first.scan_length_histogram().total(), 1);
    let wa = first.write_amplification().unwrap();
    assert!(wa > 0.5, "the flushes wrote the data once at least: {wa}");
    db.close().unwrap();

    // Reopen: the counts continue; a read-only open sees them and records nothing.
    let db = Db::open("/db", options()).unwrap();
    let reopened = db.lifetime_stats();
    assert_eq!(reopened.puts, first.puts);
    assert_eq!(reopened.point_reads, first.point_reads);
    assert_eq!(reopened.flush_bytes, first.flush_bytes);
    for i in 0..100u32 {
        db.get(format!("key{i:05}")).unwrap();
        db.put(format!("new{i:05}"), [2u8; 10]).unwrap();
    }
    db.close().unwrap();
    let reader = Db::open_read_only("/db", options()).unwrap();
    let closed = reader.lifetime_stats();
    assert_eq!(
        (closed.puts, closed.point_reads),
        (2_100, 400),
        "close recorded the reads"
    );
    reader.close().unwrap();

    // A crash: what happened after the last record is gone, the rest stays. The process
    // "dies" (its file system refuses everything) before the handle is dropped.
    let faults = FaultFs::new(Arc::new(fs.clone()), 1);
    let db = Db::open("/db", options().with_file_system(Arc::new(faults.clone()))).unwrap();
    for i in 0..50u32 {
        db.get(format!("key{i:05}")).unwrap();
    }
    faults.set_active(false);
    drop(db);
    fs.simulate_power_loss();
    let db = Db::open("/db", options()).unwrap();
    let after_crash = db.lifetime_stats();
    assert_eq!((after_crash.puts, after_crash.point_reads), (2_100, 400));
    db.close().unwrap();
}
