//! File lifecycle: WALs go once their data is in tables, tables once no version needs them, and
//! a manifest that grows past its limit is replaced without losing anything.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::path::Path;
use std::sync::Arc;
use strata_engine::filename::{classify, FileKind};
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{Db, Options};

fn count(fs: &MemFs, kind: fn(FileKind) -> bool) -> usize {
    fs.list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter(|n| classify(n).is_some_and(kind))
        .count()
}

#[test]
fn wals_and_tables_are_deleted_when_no_longer_needed() {
    let fs = MemFs::default();
    let options = Options::new()
        .with_file_system(Arc::new(fs.clone()))
        .with_write_buffer_size(16 << 10)
        .with_synchronous_compaction(true);
    let db = Db::open("/db", options).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("k{:05}", i % 3000), format!("value {i}"))
            .unwrap();
    }
    db.flush().unwrap();
    // Every memtable is flushed: only the active WAL is left.
    assert_eq!(count(&fs, |k| matches!(k, FileKind::Wal(_))), 1);
    db.compact_range::<&str, _>(..).unwrap();
    // Compaction replaced the tables; the files of the old ones are gone.
    assert_eq!(
        count(&fs, |k| matches!(k, FileKind::Table(_))),
        db.version().table_count()
    );
    // An iterator pins the files it reads until it is dropped.
    let mut it = db.range::<&str, _>(..).unwrap();
    let before = it.next().unwrap().unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), "new").unwrap();
    }
    db.flush().unwrap();
    db.compact_range::<&str, _>(..).unwrap();
    assert_eq!(before.0.as_ref(), b"k00000");
    assert!(
        count(&fs, |k| matches!(k, FileKind::Table(_))) > db.version().table_count(),
        "files an open iterator reads are kept"
    );
    assert_eq!(it.count(), 2999, "the old iterator still reads its files");
    // Unpinned files go at the next version change.
    db.put("z", "z").unwrap();
    db.flush().unwrap();
    assert_eq!(
        count(&fs, |k| matches!(k, FileKind::Table(_))),
        db.version().table_count()
    );
    db.close().unwrap();
}

#[test]
fn a_growing_manifest_is_replaced_and_recovers_the_same_version() {
    let fs = MemFs::default();
    let options = || {
        Options::new()
            .with_file_system(Arc::new(fs.clone()))
            .with_write_buffer_size(8 << 10)
            .with_max_manifest_file_size(4096)
            .with_synchronous_compaction(true)
    };
    let db = Db::open("/db", options()).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("k{i:06}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    let version = db.version();
    assert!(version.table_count() > 5);
    assert_eq!(
        count(&fs, |k| matches!(k, FileKind::Manifest(_))),
        1,
        "old manifests are deleted"
    );
    drop(db);
    let db = Db::open("/db", options()).unwrap();
    // The recovered shape is the one that was live (the policy state included).
    assert_eq!(db.version().to_string(), version.to_string());
    for i in (0..20_000u32).step_by(997) {
        assert_eq!(
            db.get(format!("k{i:06}")).unwrap().as_deref(),
            Some(format!("v{i}").as_bytes())
        );
    }
    db.close().unwrap();
}

/// A policy that flushes windows keeps part of each memtable buffered: the memtables stay,
/// held, with their WALs, until what is left of them is re-buffered (logged again in the open
/// WAL once evicted entries outweigh live ones) or flushed. Old WALs go, the live ones stay
/// few, and nothing buffered is lost across a reopen or a power cut after close.
#[test]
fn window_flushes_delete_each_wal_once_nothing_in_it_is_unflushed() {
    strata_policy::testing::register();
    for synchronous in [true, false] {
        let fs = MemFs::default();
        let options = || {
            Options::new()
                .with_file_system(Arc::new(fs.clone()))
                .with_write_buffer_size(16 << 10)
                .with_synchronous_compaction(synchronous)
                .with_policy_named("exercise-executor:target_file_size=8KiB")
                .unwrap()
        };
        let db = Db::open("/db", options()).unwrap();
        let wals =
            |fs: &MemFs| strata_engine::filename::wal_numbers(&fs.list(Path::new("/db")).unwrap());
        let first_wal = wals(&fs)[0];
        let (mut most_wals, mut most_frozen) = (0, 0);
        for i in 0..8000u32 {
            db.put(
                format!("k{:06}", i.wrapping_mul(7919) % 100_000),
                format!("value {i}"),
            )
            .unwrap();
            if synchronous || i % 50 == 0 {
                most_wals = most_wals.max(wals(&fs).len());
                most_frozen = most_frozen.max(db.metrics().frozen_memtables);
            }
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let metrics = db.metrics();
        assert!(metrics.flushes > 10, "{} flushes", metrics.flushes);
        // Held memtables go once nothing live is left in them, or are re-buffered once evicted
        // bytes pass the live ones, so their WALs stay few. Without deletes this run would
        // leave hundreds. Frozen memtables, held or waiting, stay at most
        // 8 × max_write_buffer_number (2) + 1: writers stall at that count, and a flush taking
        // more re-buffers what it leaves into one. Counted under the engine's lock. The WALs on
        // disk are those plus the active one's, plus, between a flush's install and its purge,
        // the WALs that flush made obsolete (at most the frozen bound again). Before the count
        // included held memtables and the re-buffer: up to 30 frozen at once, in 5 of 10 runs
        // beside a busy CPU.
        let frozen_bound = if synchronous { 5 } else { 17 };
        assert!(
            most_frozen <= frozen_bound,
            "{most_frozen} frozen memtables at once (synchronous {synchronous})"
        );
        let wal_bound = if synchronous { 6 } else { 2 * frozen_bound + 1 };
        assert!(
            most_wals <= wal_bound,
            "{most_wals} WALs at once (synchronous {synchronous})"
        );
        assert!(wals(&fs)[0] > first_wal, "the first WAL is still there");
        // Once work is done, the WALs left are at most the frozen memtables' and the active
        // one's (fewer when a re-buffered copy shares the open WAL): no obsolete one stays.
        assert!(
            wals(&fs).len() <= metrics.frozen_memtables + 1,
            "{} WALs left for {} frozen memtables (synchronous {synchronous})",
            wals(&fs).len(),
            metrics.frozen_memtables
        );
        // The last window flush kept part of the buffer: it is in memtables and their WALs.
        assert!(metrics.memtable_bytes > 0, "nothing stayed buffered");
        db.close().unwrap();
        fs.simulate_power_loss();
        let db = Db::open("/db", options()).unwrap();
        for i in (0..8000u32).step_by(7) {
            let key = format!("k{:06}", i.wrapping_mul(7919) % 100_000);
            assert!(
                db.get(&key).unwrap().is_some(),
                "{key} lost (synchronous {synchronous})"
            );
        }
        db.close().unwrap();
    }
}

/// A window flush writes its window to a table while the memtables it came from stay held, and
/// their WALs with them. A reopen must not flush those entries a second time: the manifest
/// records each window, replay skips what they cover, and later windows skip it too. Checked
/// against a model after every reopen (held memtables, deletes and overwrites), and by bytes
/// flushed: reopening after every round flushes about what one open does. Forgetting the
/// recorded windows on open fails the second check (measured: 362,423 bytes against 242,775).
#[test]
fn a_reopen_does_not_buffer_again_what_a_window_flush_took() {
    fn run(reopen_every_round: bool) -> (u64, usize) {
        let fs = MemFs::default();
        let options = || {
            Options::new()
                .with_file_system(Arc::new(fs.clone()))
                .with_write_buffer_size(16 << 10)
                .with_synchronous_compaction(true)
                .with_policy_named("minmax:bucket_size=2KiB")
                .unwrap()
        };
        let mut model = std::collections::BTreeMap::new();
        let mut db = Db::open("/db", options()).unwrap();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let (mut flushed, mut evictions_seen) = (0, 0);
        for round in 0..40u32 {
            for _ in 0..400 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Nearly sorted: a key a little behind a clock, so windows leave stragglers.
                let key = format!("k{:06}", (round * 150 + (rng % 400) as u32) % 100_000);
                if rng.is_multiple_of(5) {
                    db.delete(&key).unwrap();
                    model.remove(&key);
                } else {
                    let value = format!("v{round}-{}", rng % 1000);
                    db.put(&key, &value).unwrap();
                    model.insert(key, value);
                }
            }
            if !reopen_every_round && round < 39 {
                continue;
            }
            flushed += db.metrics().flush_bytes;
            db.close().unwrap();
            let recovered = strata_engine::manifest::recover(&fs, Path::new("/db")).unwrap();
            evictions_seen += recovered.default_keyspace().evictions.len();
            db = Db::open("/db", options()).unwrap();
            for (key, value) in &model {
                assert_eq!(
                    db.get(key).unwrap().as_deref(),
                    Some(value.as_bytes()),
                    "{key} after reopen {round}"
                );
            }
            let mut found = 0;
            for entry in db.range::<&str, _>(..).unwrap() {
                let (key, _) = entry.unwrap();
                let key = String::from_utf8(key.to_vec()).unwrap();
                assert!(
                    model.contains_key(&key),
                    "{key} was deleted (reopen {round})"
                );
                found += 1;
            }
            assert_eq!(found, model.len(), "reopen {round}");
        }
        flushed += db.metrics().flush_bytes;
        db.close().unwrap();
        (flushed, evictions_seen)
    }
    let (once, _) = run(false);
    let (every_round, evictions_seen) = run(true);
    assert!(
        evictions_seen >= 20,
        "{evictions_seen}: few reopens found held memtables"
    );
    assert!(
        every_round * 10 < once * 13,
        "40 reopens flushed {every_round} bytes, one open {once}"
    );
}
