//! Compaction filters (`Options::with_compaction_filter`): compactions remove or rewrite the
//! puts the filter names, flushes do not, snapshots read what they read before, and a removed
//! key never shows an older value.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{CompactionFilter, Db, FilterDecision, Options, ReadOptions};

/// Removes values starting with `tmp:`, rewrites `old:` to `new:`, counts its calls.
#[derive(Debug, Default)]
struct Janitor {
    calls: AtomicU64,
}

impl CompactionFilter for Janitor {
    fn name(&self) -> &str {
        "janitor"
    }
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if value.starts_with(b"tmp:") {
            FilterDecision::Remove
        } else if let Some(rest) = value.strip_prefix(b"old:") {
            FilterDecision::ChangeValue([b"new:", rest].concat())
        } else {
            FilterDecision::Keep
        }
    }
}

fn open(fs: &MemFs, filter: &Arc<Janitor>) -> Db {
    Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>)
            .with_write_buffer_size(32 << 10)
            .with_compaction_filter(Arc::clone(filter) as Arc<dyn CompactionFilter>),
    )
    .unwrap()
}

fn get(db: &Db, key: &str) -> Option<String> {
    db.get(key)
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

#[test]
fn compactions_remove_and_rewrite_what_the_filter_says_and_flushes_do_not() {
    let fs = MemFs::new();
    let janitor = Arc::new(Janitor::default());
    let db = open(&fs, &janitor);
    for i in 0..300 {
        let value = match i % 3 {
            0 => format!("tmp:{i}"),
            1 => format!("old:{i}"),
            _ => format!("keep:{i}"),
        };
        db.put(format!("k{i:04}"), value).unwrap();
    }
    db.flush().unwrap();
    // A flush leaves every entry as it was.
    assert_eq!(get(&db, "k0000").as_deref(), Some("tmp:0"));
    assert_eq!(get(&db, "k0001").as_deref(), Some("old:1"));
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(get(&db, "k0000"), None);
    assert_eq!(get(&db, "k0001").as_deref(), Some("new:1"));
    assert_eq!(get(&db, "k0002").as_deref(), Some("keep:2"));
    let scanned = db.range::<&[u8], _>(..).unwrap().count();
    assert_eq!(scanned, 200);
    let metrics = db.metrics();
    assert_eq!(
        (
            metrics.compaction_filter_removed,
            metrics.compaction_filter_changed
        ),
        (100, 100)
    );
    assert!(janitor.calls.load(Ordering::Relaxed) >= 300);
    // Filtered for good: after a reopen too.
    db.close().unwrap();
    let db = open(&fs, &janitor);
    assert_eq!(get(&db, "k0003"), None);
    assert_eq!(get(&db, "k0004").as_deref(), Some("new:4"));
}

#[test]
fn a_snapshot_reads_the_same_before_and_after_a_filtering_compaction() {
    let fs = MemFs::new();
    let janitor = Arc::new(Janitor::default());
    let db = open(&fs, &janitor);
    db.put("a", "keep:1").unwrap();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    // An older value in the bottom level, a removable one above it, under a snapshot.
    db.put("a", "tmp:2").unwrap();
    db.put("b", "old:2").unwrap();
    let snapshot = db.snapshot();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    // The snapshot sees both puts, and so does the latest view: they are the snapshot's.
    let at = ReadOptions::at(&snapshot);
    assert_eq!(db.get_with("a", &at).unwrap().unwrap(), "tmp:2".as_bytes());
    assert_eq!(get(&db, "a").as_deref(), Some("tmp:2"));
    assert_eq!(get(&db, "b").as_deref(), Some("old:2"));
    drop(snapshot);
    db.compact_range::<&[u8], _>(..).unwrap();
    // Released: the removal hides the older value too, and the rewrite shows.
    assert_eq!(get(&db, "a"), None);
    assert_eq!(get(&db, "b").as_deref(), Some("new:2"));
}

/// What the model knows of a key: the write it came from (a counter) and its value.
type Entry = (u64, Vec<u8>);

/// What the janitor turns `value` into, if anything: `Some(None)` removed, `Some(Some(v))`
/// rewritten, `None` kept.
fn filtered_value(value: &[u8]) -> Option<Option<Vec<u8>>> {
    if value.starts_with(b"tmp:") {
        Some(None)
    } else {
        value
            .strip_prefix(b"old:")
            .map(|rest| Some([b"new:", rest].concat()))
    }
}

/// Reads `key` in the latest view and checks it against `model`: the model's value, or, where
/// no live snapshot holds the key's newest write, what the filter makes of it, which the model
/// then takes in (the filter's work stays).
fn observe(
    db: &Db,
    model: &mut std::collections::BTreeMap<Vec<u8>, Entry>,
    snapshots: &[(
        strata_engine::Snapshot,
        std::collections::BTreeMap<Vec<u8>, Entry>,
    )],
    key: &[u8],
    ctx: &str,
) {
    let got = db.get(key).unwrap().map(|v| v.to_vec());
    let want = model.get(key).cloned();
    let held = want.as_ref().is_some_and(|(write, _)| {
        snapshots
            .iter()
            .any(|(_, m)| m.get(key).is_some_and(|(w, _)| w == write))
    });
    match (
        &want,
        filtered_value(want.as_ref().map_or(&[][..], |w| &w.1)),
    ) {
        (Some((write, v)), Some(after)) if !held && got.as_ref() != Some(v) => {
            assert_eq!(got, after, "filtered read: {ctx}");
            match after {
                Some(v) => {
                    model.insert(key.to_vec(), (*write, v));
                }
                None => {
                    model.remove(key);
                }
            }
        }
        _ => assert_eq!(got, want.map(|w| w.1), "read: {ctx}"),
    }
}

/// Random puts (a third removable, a third rewritable), deletes, snapshots, flushes and manual
/// compactions against a model, for every policy. A snapshot reads exactly what the model held
/// when it was taken; the latest view reads the model's value, or, where no live snapshot holds
/// the key's newest write, what the filter makes of it, and once a read saw the filter's work
/// it must keep seeing it (the model takes it in).
#[test]
fn every_policy_filters_only_what_no_snapshot_sees() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use strata_policy::testing;
    for (i, policy) in testing::policies_to_test().iter().enumerate() {
        let seed = 7000 + i as u64;
        // Synchronous compaction: compactions run only inside writes, flushes and manual
        // compactions, so the model can learn their work before it copies itself for a
        // snapshot.
        let fs = MemFs::new();
        let spec = support::small_tree_spec(policy);
        let janitor = Arc::new(Janitor::default());
        let db = Db::open(
            "/db",
            Options::new()
                .with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>)
                .with_write_buffer_size(8 << 10)
                .with_block_size(512)
                .with_synchronous_compaction(true)
                .with_compaction_filter(Arc::clone(&janitor) as Arc<dyn CompactionFilter>)
                .with_policy_spec(spec)
                .unwrap(),
        )
        .unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
        let mut snapshots: Vec<(strata_engine::Snapshot, BTreeMap<Vec<u8>, Entry>)> = Vec::new();
        let mut writes = 0u64;
        for step in 0..2500 {
            let key = format!("key{:04}", rng.random_range(0..400)).into_bytes();
            let ctx = || format!("{policy}, seed {seed}, step {step}, key {key:?}");
            match rng.random_range(0..100) {
                0..=44 => {
                    let prefix = ["tmp:", "old:", "keep:"][rng.random_range(0..3)];
                    let value = format!("{prefix}{step:0>40}").into_bytes();
                    db.put(&key, &value).unwrap();
                    writes += 1;
                    model.insert(key, (writes, value));
                }
                45..=54 => {
                    db.delete(&key).unwrap();
                    model.remove(&key);
                }
                55..=79 => observe(&db, &mut model, &snapshots, &key, &ctx()),
                80..=86 => {
                    if snapshots.len() < 3 {
                        // Learn first what compactions did to every key, so that the snapshot's
                        // copy of the model is exact (compactions run only inside writes here).
                        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
                        for key in keys {
                            observe(&db, &mut model, &snapshots, &key, &ctx());
                        }
                        snapshots.push((db.snapshot(), model.clone()));
                    } else {
                        snapshots.remove(rng.random_range(0..snapshots.len()));
                    }
                }
                87..=93 => {
                    for (snapshot, at) in &snapshots {
                        let read = ReadOptions::at(snapshot);
                        let got = db.get_with(&key, &read).unwrap().map(|v| v.to_vec());
                        assert_eq!(
                            got,
                            at.get(&key).map(|w| w.1.clone()),
                            "snapshot: {}",
                            ctx()
                        );
                    }
                }
                94..=97 => db.flush().unwrap(),
                _ => db.compact_range::<&[u8], _>(..).unwrap(),
            }
        }
        db.compact_range::<&[u8], _>(..).unwrap();
        let metrics = db.metrics();
        assert!(
            metrics.compaction_filter_removed + metrics.compaction_filter_changed > 0,
            "{policy}: the filter never acted"
        );
        db.close().unwrap();
    }
}
