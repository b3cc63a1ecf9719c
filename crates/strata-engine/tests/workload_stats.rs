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
