//! The levels' interval indexes over runs (`Options::with_interval_index`): built when first
//! read, and what reads open changes, what they return does not.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Options};

/// A database of many small, barely overlapping buckets (Min-Max over nearly sorted keys),
/// read with and without the interval index: every lookup and scan returns the same, and the
/// index reads far fewer blocks for scans that stop early (measured: 146 against 8,721).
#[test]
fn the_interval_index_changes_what_reads_open_not_what_they_return() {
    let fs = MemFs::default();
    let options = |index: bool| {
        Options::new()
            .with_file_system(Arc::new(fs.clone()))
            .with_write_buffer_size(64 << 10)
            .with_block_cache_capacity(0)
            .with_interval_index(index)
            .with_policy_named("minmax:bucket_size=2KiB")
            .unwrap()
    };
    let db = Db::open("/db", options(true)).unwrap();
    let mut rng = 99u64;
    let key = |i: u64| format!("k{i:08}");
    for i in 0..60_000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Nearly sorted: each key up to 300 places early or late.
        let k = (i + rng % 300).saturating_sub(150);
        db.put(key(k), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    let runs = db.version().level(1).runs().len();
    assert!(runs > 100, "{runs} buckets");
    // The indexes are built by the first read of each version, not by every install: the
    // ingest read nothing, so none exists yet. A scan opens every level, so it builds them;
    // the build time is a lifetime count, which a later install (window flushes go on in the
    // background) does not reset as it does the current version's bytes.
    assert_eq!(db.metrics().interval_index_bytes, 0);
    assert_eq!(db.metrics().interval_index_micros, 0);
    let mut scan = db.range(key(30_000)..).unwrap();
    assert!(scan.next().is_some());
    drop(scan);
    assert!(
        db.metrics().interval_index_micros > 0,
        "the scan built no index"
    );
    db.close().unwrap();

    let read = |index: bool| {
        let db = Db::open("/db", options(index)).unwrap();
        let before = db.metrics().blocks_read;
        let mut answers = Vec::new();
        for start in (0..60_000u64).step_by(997) {
            answers.push(db.get(key(start)).unwrap());
            // A short scan from the start, with no upper bound.
            let mut it = db.range(key(start)..).unwrap();
            for _ in 0..20 {
                match it.next() {
                    Some(entry) => answers.push(Some(entry.unwrap().1)),
                    None => break,
                }
            }
        }
        let blocks = db.metrics().blocks_read - before;
        db.close().unwrap();
        (answers, blocks)
    };
    let (with, blocks_with) = read(true);
    let (without, blocks_without) = read(false);
    assert_eq!(with, without);
    assert!(
        blocks_with * 5 < blocks_without,
        "{blocks_with} blocks read with the index, {blocks_without} without"
    );
}
