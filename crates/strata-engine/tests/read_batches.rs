//! Batches of block reads (a forward scan's first seeks, `Db::multi_get`) in and out of the
//! operating system's cache: blocks it holds are read at once, only the others go to storage
//! together, and scans stop prefetching while none would.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use strata_engine::fs::FileSystem;
use strata_engine::{Db, Metrics, Options};
use support::Watching;

const KEYS: u32 = 20_000;

fn key(i: u32) -> String {
    format!("key{i:08}")
}

/// A database of two overlapping level-0 runs (even keys, then odd keys) and a block cache of
/// a few blocks, so that every scan's first seeks read a block in each run.
fn two_runs(fs: &Arc<Watching>) -> Db {
    let db = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::clone(fs) as Arc<dyn FileSystem>)
            .with_write_buffer_size(64 << 20)
            .with_block_cache_capacity(16 << 10)
            .with_charge_tables_to_cache(false),
    )
    .unwrap();
    for parity in 0..2 {
        for i in (parity..KEYS).step_by(2) {
            db.put(key(i), [i as u8; 100]).unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_compactions().unwrap();
    assert_eq!(db.metrics().sorted_runs, 2, "two level-0 runs");
    db
}

/// `count` scans of 10 entries from starts spread over the keys, each checked.
fn scans(db: &Db, count: u32) -> Metrics {
    for n in 0..count {
        let start = n * 7919 % (KEYS - 10);
        let keys: Vec<_> = db
            .range(key(start)..)
            .unwrap()
            .take(10)
            .map(|r| r.unwrap().0)
            .collect();
        let expected: Vec<_> = (start..start + 10).map(|i| key(i).into_bytes()).collect();
        assert_eq!(keys, expected, "scan from {start}");
    }
    db.metrics()
}

#[test]
fn scans_stop_prefetching_while_the_operating_system_holds_their_blocks() {
    let fs = Arc::new(Watching::default());
    fs.in_memory.store(true, Ordering::Relaxed);
    let db = two_runs(&fs);
    let before = db.metrics();
    let after = scans(&db, 300);
    assert_eq!(after.batched_block_reads, before.batched_block_reads);
    let from_memory = after.batched_blocks_from_memory - before.batched_blocks_from_memory;
    // Prefetching at every scan reads two blocks each (600); backing off to every 64th scan
    // leaves about ten prefetches.
    assert!(
        from_memory > 0 && from_memory <= 40,
        "{from_memory} blocks prefetched from memory in 300 scans"
    );

    // Once the blocks must come from the device, the next prefetch sends them to storage and
    // every scan after it prefetches again.
    fs.in_memory.store(false, Ordering::Relaxed);
    let later = scans(&db, 200);
    let sent = later.batched_block_reads - after.batched_block_reads;
    assert!(
        sent >= 2 * 100,
        "{sent} blocks sent to storage in 200 scans"
    );
    assert_eq!(
        later.batched_blocks_from_memory,
        after.batched_blocks_from_memory
    );
}

#[test]
fn multi_get_reads_the_blocks_in_memory_at_once_and_sends_the_rest() {
    let fs = Arc::new(Watching::default());
    let db = two_runs(&fs);
    let keys: Vec<String> = (0..KEYS).step_by(331).map(key).collect();
    for in_memory in [true, false] {
        fs.in_memory.store(in_memory, Ordering::Relaxed);
        let before = db.metrics();
        let values = db.multi_get(&keys).unwrap();
        for (i, value) in (0..KEYS).step_by(331).zip(&values) {
            assert_eq!(value.as_deref(), Some(&[i as u8; 100][..]), "{}", key(i));
        }
        let after = db.metrics();
        let sent = after.batched_block_reads - before.batched_block_reads;
        let from_memory = after.batched_blocks_from_memory - before.batched_blocks_from_memory;
        if in_memory {
            assert_eq!(sent, 0);
            assert!(from_memory > 0);
        } else {
            assert_eq!(from_memory, 0);
            assert!(sent > 0);
        }
    }
}
