//! Merge operators (`Options::with_merge_operator`, `Db::merge`): every read path combines a
//! key's operands with its base, snapshots read what they read before, flushes and compactions
//! fold operands without changing any read, and all of it survives reopening.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{
    AppendOperator, Db, Error, MergeOperator, Options, ReadOptions, U64AddOperator, WriteBatch,
};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn le(n: u64) -> [u8; 8] {
    n.to_le_bytes()
}

fn counter_options() -> Options {
    Options::new().with_merge_operator(Arc::new(U64AddOperator) as Arc<dyn MergeOperator>)
}

fn open(fs: &MemFs, options: Options) -> Db {
    Db::open(
        "/db",
        options.with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>),
    )
    .unwrap()
}

fn counter(db: &Db, k: &[u8], read: &ReadOptions<'_>) -> Option<u64> {
    db.get_with(k, read)
        .unwrap()
        .map(|v| u64::from_le_bytes(v[..].try_into().unwrap()))
}

#[test]
fn a_counter_adds_up_across_flushes_compactions_and_reopening() {
    let fs = MemFs::new();
    let db = open(&fs, counter_options().with_write_buffer_size(16 << 10));
    for i in 1..=300u64 {
        db.merge(key(1), le(i)).unwrap();
        if i % 100 == 0 {
            db.flush().unwrap();
        }
    }
    let sum = 300 * 301 / 2;
    let latest = ReadOptions::default();
    assert_eq!(counter(&db, &key(1), &latest), Some(sum));
    // A put resets the base; a delete leaves the next operand on nothing.
    db.put(key(2), le(1000)).unwrap();
    db.merge(key(2), le(5)).unwrap();
    db.delete(key(3)).unwrap();
    db.merge(key(3), le(7)).unwrap();
    let snapshot = db.snapshot();
    db.merge(key(1), le(1)).unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(counter(&db, &key(1), &latest), Some(sum + 1));
    assert_eq!(
        counter(&db, &key(1), &ReadOptions::at(&snapshot)),
        Some(sum)
    );
    assert_eq!(counter(&db, &key(2), &latest), Some(1005));
    assert_eq!(counter(&db, &key(3), &latest), Some(7));
    let scanned: Vec<_> = db
        .range::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(scanned.len(), 3);
    assert_eq!(&scanned[0].1[..], &le(sum + 1));
    drop(snapshot);
    // With no snapshot left, a full compaction folds each key into one put.
    db.compact_range::<&[u8], _>(..).unwrap();
    let entries: u64 = db.version().tables().map(|(_, _, t)| t.entries).sum();
    assert_eq!(entries, 3, "{}", db.version());
    db.close().unwrap();
    let db = open(&fs, counter_options());
    assert_eq!(counter(&db, &key(1), &latest), Some(sum + 1));
    db.close().unwrap();
}

#[test]
fn operands_without_an_operator_are_refused_and_unreadable() {
    let fs = MemFs::new();
    let db = open(&fs, Options::new());
    let e = db.merge(key(1), le(1)).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref m) if m.contains("with_merge_operator")),
        "{e}"
    );
    let mut batch = WriteBatch::new();
    batch
        .put(key(2), "v")
        .unwrap()
        .merge(key(2), le(1))
        .unwrap();
    assert!(db.write(&Default::default(), batch).is_err());
    assert_eq!(
        db.get(key(2)).unwrap(),
        None,
        "a refused batch writes nothing"
    );
    db.close().unwrap();
    // Operands written with an operator, read without one: an error, not a wrong value.
    let db = open(&fs, counter_options());
    db.merge(key(1), le(1)).unwrap();
    db.close().unwrap();
    // The open replays the operand into a memtable, and flushing it needs the operator.
    let opened = Db::open(
        "/db",
        Options::new().with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>),
    );
    let e = match opened {
        Err(e) => e,
        Ok(db) => db.get(key(1)).unwrap_err(),
    };
    assert!(e.to_string().contains("with_merge_operator"), "{e}");
    // Nor may a merge without the operator drop the base below an operand: it refuses, the
    // database turns read-only, and the data is whole when reopened with the operator.
    let db = open(&fs, counter_options());
    db.put(key(7), le(10)).unwrap();
    db.flush().unwrap();
    db.merge(key(7), le(5)).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let db = open(&fs, Options::new());
    let e = db.compact_range::<&[u8], _>(..).unwrap_err();
    assert!(e.to_string().contains("with_merge_operator"), "{e}");
    drop(db);
    let db = open(&fs, counter_options());
    assert_eq!(counter(&db, &key(7), &ReadOptions::default()), Some(15));
    db.close().unwrap();
    // A failing operator fails the read and names itself.
    let db = open(&fs, counter_options());
    db.put(key(5), "not a counter").unwrap();
    db.merge(key(5), le(1)).unwrap();
    let e = db.get(key(5)).unwrap_err();
    assert!(
        matches!(e, Error::MergeFailed { ref operator, .. } if operator == "u64_add"),
        "{e}"
    );
    db.close().unwrap();
}

#[test]
fn appends_read_the_same_both_ways_and_at_snapshots() {
    let fs = MemFs::new();
    let db = open(
        &fs,
        Options::new()
            .with_merge_operator(
                Arc::new(AppendOperator::with_separator(",")) as Arc<dyn MergeOperator>
            )
            .with_write_buffer_size(8 << 10),
    );
    let mut snapshots = Vec::new();
    for i in 0..200u32 {
        db.merge(key(i % 7), format!("{i}")).unwrap();
        if i % 50 == 0 {
            snapshots.push((db.snapshot(), i));
        }
    }
    db.compact_range::<&[u8], _>(..).unwrap();
    let expected = |k: u32, through: u32| -> Option<Vec<u8>> {
        let parts: Vec<String> = (0..=through)
            .filter(|i| i % 7 == k)
            .map(|i| i.to_string())
            .collect();
        (!parts.is_empty()).then(|| parts.join(",").into_bytes())
    };
    let forward: Vec<_> = db
        .range::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut backward: Vec<_> = db
        .range_rev::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    backward.reverse();
    assert_eq!(forward, backward);
    for k in 0..7 {
        assert_eq!(forward[k as usize].1.to_vec(), expected(k, 199).unwrap());
    }
    for (snapshot, through) in &snapshots {
        for k in 0..7 {
            let got = db.get_with(key(k), &ReadOptions::at(snapshot)).unwrap();
            assert_eq!(
                got.map(|v| v.to_vec()),
                expected(k, *through),
                "key {k} at {through}"
            );
        }
    }
    db.close().unwrap();
}

/// What the database holds: each key's counter.
type Model = BTreeMap<Vec<u8>, u64>;

/// Checks point reads, `multi_get` and scans both ways at `read` against `model`.
fn check_reads(db: &Db, read: &ReadOptions<'_>, model: &Model, keys: &[Vec<u8>], ctx: &str) {
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .map(|(k, v)| (k.clone(), le(*v).to_vec()))
        .collect();
    let scan = |reverse| {
        let mut got: Vec<(Vec<u8>, Vec<u8>)> = db
            .range_with::<&[u8], _>(.., read, reverse)
            .unwrap()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        if reverse {
            got.reverse();
        }
        got
    };
    assert_eq!(scan(false), want, "forward scan: {ctx}");
    assert_eq!(scan(true), want, "backward scan: {ctx}");
    let got = db.multi_get_with(keys, read).unwrap();
    for (k, got) in keys.iter().zip(got) {
        let want = model.get(k).map(|v| le(*v).to_vec());
        assert_eq!(got.map(|v| v.to_vec()), want, "multi_get {k:?}: {ctx}");
    }
}

/// Random puts, merges, deletes and range deletions against a model, for every policy, with
/// snapshots, flushes, compactions and reopens (`support::model`): every read path, at the
/// latest state and at every live snapshot, reads the model's counters.
#[test]
fn every_policy_reads_what_a_model_holds_under_merges() {
    use support::model::{model_check, Check};
    for (i, policy) in strata_policy::testing::policies_to_test()
        .iter()
        .enumerate()
    {
        let options = || {
            counter_options()
                .with_write_buffer_size(8 << 10)
                .with_block_size(512)
                .with_synchronous_compaction(true)
                .with_policy_spec(support::small_tree_spec(policy))
                .unwrap()
        };
        let probe: Vec<Vec<u8>> = (0..120).step_by(3).map(key).collect();
        let write = |db: &Db, rng: &mut StdRng, model: &mut Model, _step: u64| {
            let k = key(rng.random_range(0..120));
            match rng.random_range(0..100) {
                0..=21 => {
                    let v = rng.random_range(0..1000);
                    db.put(&k, le(v)).unwrap();
                    model.insert(k, v);
                }
                22..=89 => {
                    let d = rng.random_range(1..100);
                    db.merge(&k, le(d)).unwrap();
                    *model.entry(k).or_insert(0) += d;
                }
                90..=96 => {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                _ => {
                    let start = rng.random_range(0..120);
                    let (a, b) = (key(start), key(start + rng.random_range(1..10)));
                    db.delete_range(&a, &b).unwrap();
                    model.retain(|k, _| !(a <= *k && *k < b));
                }
            }
        };
        let check =
            |db: &Db, read: &ReadOptions<'_>, model: &Model, what: Check<'_>, ctx: &str| match what
            {
                Check::One(rng) => {
                    let k = key(rng.random_range(0..120));
                    assert_eq!(counter(db, &k, read), model.get(&k).copied(), "get: {ctx}");
                }
                Check::All => check_reads(db, read, model, &probe, ctx),
            };
        model_check(policy, 9300 + i as u64, options, Model::new(), write, check);
    }
}
