//! Range deletions (`Db::delete_range`, `WriteBatch::delete_range`): every read path hides what
//! a range covers at and after its sequence number, snapshots taken before it still read it,
//! merges drop what it covers and drop the tombstone itself once nothing below can hold its
//! keys, and all of it survives reopening.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{Db, Options, ReadOptions, WriteBatch};

/// What the database holds: each key's value.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn open(fs: &MemFs, options: Options) -> Db {
    Db::open(
        "/db",
        options.with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>),
    )
    .unwrap()
}

/// Keys and values of a forward scan of everything.
fn scan(db: &Db, read: &ReadOptions<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.range_with::<&[u8], _>(.., read, false)
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// Keys of a backward scan of everything, put back in ascending order.
fn scan_rev(db: &Db, read: &ReadOptions<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<_> = db
        .range_with::<&[u8], _>(.., read, true)
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    out.reverse();
    out
}

/// Checks every read path of `db` at `read` against `model`.
fn check_reads(
    db: &Db,
    read: &ReadOptions<'_>,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    keys: &[Vec<u8>],
    ctx: &str,
) {
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scan(db, read), want, "forward scan: {ctx}");
    assert_eq!(scan_rev(db, read), want, "backward scan: {ctx}");
    let got = db.multi_get_with(keys, read).unwrap();
    for (k, got) in keys.iter().zip(got) {
        let want = model.get(k);
        assert_eq!(
            got.as_deref(),
            want.map(|v| &v[..]),
            "multi_get {k:?}: {ctx}"
        );
        let single = db.get_with(k, read).unwrap();
        assert_eq!(single.as_deref(), want.map(|v| &v[..]), "get {k:?}: {ctx}");
    }
}

#[test]
fn a_range_deletion_hides_its_keys_from_every_read_path_but_not_from_older_snapshots() {
    let fs = MemFs::new();
    let db = open(&fs, Options::new().with_write_buffer_size(16 << 10));
    let mut model = BTreeMap::new();
    for i in 0..400 {
        db.put(key(i), format!("v{i}")).unwrap();
        model.insert(key(i), format!("v{i}").into_bytes());
    }
    let keys: Vec<Vec<u8>> = (0..410).map(key).collect();
    let before = db.snapshot();
    let before_model = model.clone();
    db.delete_range(key(100), key(200)).unwrap();
    model.retain(|k, _| !(key(100) <= *k && *k < key(200)));
    // A write after the range is not covered by it.
    db.put(key(150), "again").unwrap();
    model.insert(key(150), b"again".to_vec());
    // An empty range deletes nothing; an end before the start is refused, writing nothing.
    db.delete_range(key(300), key(300)).unwrap();
    let e = db.delete_range(key(301), key(299)).unwrap_err();
    assert!(e.to_string().contains("comes before the start key"), "{e}");
    for stage in ["memtable", "flushed", "compacted", "reopened"] {
        match stage {
            "flushed" => db.flush().unwrap(),
            "compacted" => db.compact_range::<&[u8], _>(..).unwrap(),
            _ => {}
        }
        check_reads(&db, &ReadOptions::default(), &model, &keys, stage);
        if stage != "reopened" {
            check_reads(&db, &ReadOptions::at(&before), &before_model, &keys, stage);
        }
    }
    drop(before);
    db.close().unwrap();
    let db = open(&fs, Options::new().with_write_buffer_size(16 << 10));
    check_reads(&db, &ReadOptions::default(), &model, &keys, "reopened");
    // Once no snapshot needs them, a full compaction leaves neither the covered entries nor
    // the tombstone: nothing lies below the last level.
    db.compact_range::<&[u8], _>(..).unwrap();
    let version = db.version();
    let entries: u64 = version.tables().map(|(_, _, t)| t.entries).sum();
    let ranges: u64 = version.tables().map(|(_, _, t)| t.range_deletions).sum();
    assert_eq!(entries, model.len() as u64, "{version}");
    assert_eq!(ranges, 0, "{version}");
    check_reads(&db, &ReadOptions::default(), &model, &keys, "bottom");
    db.close().unwrap();
}

#[test]
fn a_range_deletion_from_an_unflushed_wal_replays_and_a_batch_mixes_it_with_puts() {
    let fs = MemFs::new();
    let db = open(&fs, Options::new());
    for i in 0..50 {
        db.put(key(i), "old").unwrap();
    }
    db.flush().unwrap();
    let mut batch = WriteBatch::new();
    batch
        .delete_range(key(10), key(40))
        .unwrap()
        .put(key(20), "new")
        .unwrap();
    db.write(&Default::default(), batch).unwrap();
    // Not flushed: the WAL holds the range.
    drop(db);
    let db = open(&fs, Options::new());
    assert_eq!(db.get(key(9)).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(db.get(key(10)).unwrap(), None);
    assert_eq!(
        db.get(key(20)).unwrap().as_deref(),
        Some(&b"new"[..]),
        "later in the batch, later in sequence"
    );
    assert_eq!(db.get(key(39)).unwrap(), None);
    assert_eq!(db.get(key(40)).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), 50 - 30 + 1);
    db.close().unwrap();
}

#[test]
fn a_buffer_holding_only_a_range_deletion_flushes_into_a_table_of_it_alone() {
    let fs = MemFs::new();
    let db = open(&fs, Options::new());
    for i in 0..20 {
        db.put(key(i), "v").unwrap();
    }
    db.flush().unwrap();
    db.delete_range(key(5), key(15)).unwrap();
    db.flush().unwrap();
    let version = db.version();
    let holders: Vec<_> = version
        .tables()
        .filter(|(_, _, t)| t.range_deletions > 0)
        .map(|(_, _, t)| (t.entries, t.smallest.clone(), t.largest.clone()))
        .collect();
    assert_eq!(
        holders,
        vec![(0, key(5).into(), key(15).into())],
        "{version}"
    );
    // `inspect` reads the table's range-deletion block and checks its checksum.
    let holder = version
        .tables()
        .find(|(_, _, t)| t.range_deletions > 0)
        .map(|(_, _, t)| t.id.0)
        .unwrap();
    let path = std::path::Path::new("/db").join(strata_engine::filename::table_file_name(holder));
    let shared = Arc::new(fs.clone()) as Arc<dyn FileSystem>;
    let t = strata_engine::inspect::inspect_table(shared, &path, true, 0).unwrap();
    assert!(t.verified && t.damage.is_none(), "{:?}", t.damage);
    assert_eq!(t.properties.range_deletions, 1);
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), 10);
    db.close().unwrap();
}

/// Random puts, deletes and range deletions (some wide, some empty) against a model, for every
/// policy, with snapshots, flushes, compactions and reopens (`support::model`): every read
/// path at the latest state and at every live snapshot reads exactly what the model held.
#[test]
fn every_policy_reads_what_a_model_holds_under_range_deletions() {
    use support::model::{model_check, Check};
    for (i, policy) in strata_policy::testing::policies_to_test()
        .iter()
        .enumerate()
    {
        let options = || {
            Options::new()
                .with_write_buffer_size(8 << 10)
                .with_block_size(512)
                .with_synchronous_compaction(true)
                .with_policy_spec(support::small_tree_spec(policy))
                .unwrap()
        };
        let probe: Vec<Vec<u8>> = (0..300).step_by(7).map(key).collect();
        let write = |db: &Db, rng: &mut StdRng, model: &mut Model, step: u64| {
            let k = key(rng.random_range(0..300));
            match rng.random_range(0..100) {
                0..=79 => {
                    let value = format!("{step:0>40}").into_bytes();
                    db.put(&k, &value).unwrap();
                    model.insert(k, value);
                }
                80..=89 => {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                _ => {
                    let start = rng.random_range(0..300);
                    let width = if rng.random_bool(0.2) {
                        rng.random_range(0..150)
                    } else {
                        rng.random_range(0..12)
                    };
                    let (a, b) = (key(start), key(start + width));
                    db.delete_range(&a, &b).unwrap();
                    model.retain(|k, _| !(a <= *k && *k < b));
                }
            }
        };
        let check =
            |db: &Db, read: &ReadOptions<'_>, model: &Model, what: Check<'_>, ctx: &str| match what
            {
                Check::One(rng) => {
                    let k = key(rng.random_range(0..300));
                    let got = db.get_with(&k, read).unwrap();
                    assert_eq!(got.as_deref(), model.get(&k).map(|v| &v[..]), "get: {ctx}");
                }
                Check::All => check_reads(db, read, model, &probe, ctx),
            };
        model_check(policy, 9100 + i as u64, options, Model::new(), write, check);
    }
}
