//! `strata_engine::inspect` (`strata inspect`): a database written by every built-in policy is
//! described as its handle saw it, every table file reads back as the manifest records it, WALs
//! are counted op by op, and damage to a table or a WAL is named by file and offset, never a
//! panic.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use strata_engine::filename::{classify, table_file_name, wal_file_name, FileKind};
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::inspect::{inspect_db, inspect_table, inspect_wal, InspectDb};
use strata_engine::{Db, Error, Options, WriteBatch, WriteOptions};
use strata_policy::{testing, PolicySpec};

const DIR: &str = "/db";

fn options(fs: &MemFs, policy: &str) -> Options {
    let mut spec: PolicySpec = policy.parse().unwrap();
    spec.fill_defaults([
        ("size_ratio", "3"),
        ("target_file_size", "4096"),
        ("expected_data_size", "512KiB"),
        ("levels", "3"),
        ("num_levels", "5"),
        ("bucket_size", "2KiB"),
    ])
    .unwrap();
    Options::new()
        .with_file_system(Arc::new(fs.clone()))
        .with_write_buffer_size(8192)
        .with_block_size(512)
        .with_synchronous_compaction(true)
        .with_policy_spec(spec)
        .unwrap()
}

/// Writes 4,000 random puts and deletes over 1,500 keys; returns what is live.
fn load(db: &Db, seed: u64) -> BTreeMap<String, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut live = BTreeMap::new();
    for i in 0..4_000u32 {
        let key = format!("key{:05}", rng.random_range(0..1_500u32));
        if rng.random_ratio(1, 6) {
            db.delete(&key).unwrap();
            live.remove(&key);
        } else {
            let value = format!("value {i} of {key}");
            db.put(&key, &value).unwrap();
            live.insert(key, value);
        }
    }
    live
}

fn files(fs: &MemFs, kind: fn(FileKind) -> Option<u64>) -> Vec<u64> {
    let mut numbers: Vec<u64> = fs
        .list(Path::new(DIR))
        .unwrap()
        .iter()
        .filter_map(|n| classify(n).and_then(kind))
        .collect();
    numbers.sort_unstable();
    numbers
}

fn tables(fs: &MemFs) -> Vec<u64> {
    files(fs, |k| match k {
        FileKind::Table(n) => Some(n),
        _ => None,
    })
}

#[test]
fn a_database_of_every_policy_reads_back_as_its_handle_saw_it() {
    for (seed, policy) in testing::policies_to_test().into_iter().enumerate() {
        let fs = MemFs::new();
        let db = Db::open(DIR, options(&fs, policy)).unwrap();
        let live = load(&db, seed as u64);
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let version = db.version();
        db.close().unwrap();

        let what = InspectDb {
            history: true,
            verify: true,
            scan: true,
        };
        let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
        let d = inspect_db(Arc::clone(&shared), Path::new(DIR), what).unwrap();
        assert!(d.damage.is_empty(), "{policy}: {:?}", d.damage);
        assert!(d.verified, "{policy}");
        assert_eq!(d.tables, version.table_count(), "{policy}");
        assert_eq!(d.runs, version.run_count(), "{policy}");
        assert!(
            d.tables > 1,
            "{policy}: the load should make several tables"
        );
        let entries: u64 = version.tables().map(|(_, _, t)| t.entries).sum();
        assert_eq!(d.entries, entries, "{policy}");
        let runs: Vec<usize> = version.levels().iter().map(|l| l.runs().len()).collect();
        let seen: Vec<usize> = d.levels.iter().map(|l| l.runs.len()).collect();
        assert_eq!(seen, runs, "{policy}");
        let live_data = d.live.as_ref().unwrap();
        assert_eq!(live_data.keys, live.len() as u64, "{policy}");
        let bytes: usize = live.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert_eq!(live_data.bytes, bytes as u64, "{policy}");
        assert!(live_data.space_amplification > 0.5, "{policy}");
        assert_eq!(d.history.len() as u64, d.manifest_records, "{policy}");
        assert!(d.history[0].snapshot, "{policy}");
        assert_eq!(d.flushes, version.flushes(), "{policy}");
        // The workload as the close recorded it.
        assert_eq!(d.lifetime.puts + d.lifetime.deletes, 4_000, "{policy}");
        let written = d.lifetime.flush_bytes + d.lifetime.compaction_bytes_written;
        assert!(
            written >= d.table_bytes,
            "{policy}: every table was written once"
        );

        // Every table file: what the manifest records, every entry in order.
        for (_, _, meta) in version.tables() {
            let path = Path::new(DIR).join(table_file_name(meta.id.0));
            let t = inspect_table(Arc::clone(&shared), &path, true, usize::MAX).unwrap();
            assert!(t.verified && t.damage.is_none(), "{policy}: {:?}", t.damage);
            assert_eq!(t.properties.entries, meta.entries, "{policy}");
            assert_eq!(t.properties.tombstones, meta.tombstones, "{policy}");
            assert_eq!(t.blocks.len() as u64, t.properties.data_blocks, "{policy}");
            assert_eq!(t.dump.len() as u64, meta.entries, "{policy}");
            assert!(
                t.dump.windows(2).all(|w| w[0].key < w[1].key),
                "{policy}: a table holds one entry per key, in order"
            );
            assert_eq!(
                t.dump.iter().filter(|e| e.kind == "delete").count() as u64,
                meta.tombstones,
                "{policy}"
            );
        }
    }
}

#[test]
fn a_wal_is_counted_op_by_op_and_its_damage_is_placed() {
    let fs = MemFs::new();
    let options = options(&fs, "leveled").with_write_buffer_size(1 << 20);
    let db = Db::open(DIR, options).unwrap();
    let sync = WriteOptions::synced();
    for i in 0..50u32 {
        let mut batch = WriteBatch::new();
        batch.put(format!("k{i:03}"), "v").unwrap();
        if i % 10 == 9 {
            batch.delete(format!("k{:03}", i - 1)).unwrap();
        }
        db.write(&sync, batch).unwrap();
    }
    let wal_number = *files(&fs, |k| match k {
        FileKind::Wal(n) => Some(n),
        _ => None,
    })
    .last()
    .unwrap();
    let path = Path::new(DIR).join(wal_file_name(wal_number));
    let w = inspect_wal(&fs, &path, true).unwrap();
    assert_eq!((w.groups, w.puts, w.deletes), (50, 50, 5));
    assert_eq!(w.seqnos, Some((1, 55)));
    assert_eq!(w.records.len(), 51, "the link and one record per write");
    assert!(w.records[0].link);
    assert!(w.damage.is_none() && w.torn_tail.is_none());
    assert_eq!(w.valid_bytes, w.bytes);

    // A crash in the middle of the last append: a torn tail, not damage.
    let last = w.records.last().unwrap().offset;
    fs.truncate(&path, last + 9).unwrap();
    let torn = inspect_wal(&fs, &path, false).unwrap();
    assert_eq!(torn.groups, 49);
    assert!(
        torn.torn_tail.is_some() && torn.damage.is_none(),
        "{torn:?}"
    );

    // A flipped byte in the middle of the file: damage at that record.
    let middle = &w.records[20];
    fs.corrupt(&path, middle.offset + 10, 0x40).unwrap();
    let damaged = inspect_wal(&fs, &path, false).unwrap();
    let damage = damaged.damage.unwrap();
    assert_eq!(damage.file, wal_file_name(wal_number));
    assert_eq!(damage.offset, middle.offset);
    assert_eq!(damaged.groups, 19, "records before the damage are counted");
    drop(db);
}

#[test]
fn table_damage_is_named_by_file_and_offset() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs, "leveled")).unwrap();
    load(&db, 7);
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
    let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let number = *tables(&fs).last().unwrap();
    let name = table_file_name(number);
    let path = Path::new(DIR).join(&name);
    let sound = inspect_table(Arc::clone(&shared), &path, true, 0).unwrap();
    assert!(sound.verified);

    // A data block's byte flipped: the table opens, the check names the block.
    let block = &sound.blocks[sound.blocks.len() / 2];
    fs.corrupt(&path, block.offset + block.size / 2, 0x01)
        .unwrap();
    let t = inspect_table(Arc::clone(&shared), &path, true, 10).unwrap();
    let damage = t.damage.unwrap();
    assert_eq!(
        (damage.file.as_str(), damage.offset),
        (name.as_str(), block.offset)
    );
    assert!(!t.verified);
    assert_eq!(t.blocks.len(), sound.blocks.len(), "the index still reads");
    let what = InspectDb {
        verify: true,
        ..InspectDb::default()
    };
    let d = inspect_db(Arc::clone(&shared), Path::new(DIR), what).unwrap();
    assert_eq!(d.damage.len(), 1);
    assert_eq!(
        (d.damage[0].file.as_str(), d.damage[0].offset),
        (name.as_str(), block.offset)
    );
    assert!(!d.verified);

    // Cut short: the footer is gone, and the open says so.
    let size = fs.file_size(&path).unwrap();
    fs.truncate(&path, size - 20).unwrap();
    match inspect_table(Arc::clone(&shared), &path, true, 0) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, name),
        other => panic!("expected corruption, got {other:?}"),
    }
    let d = inspect_db(shared, Path::new(DIR), InspectDb::default()).unwrap();
    assert!(
        d.damage
            .iter()
            .any(|x| x.file == name && x.reason.contains("bytes, but")),
        "{:?}",
        d.damage
    );
}
