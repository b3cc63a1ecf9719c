//! Model-checked keyspaces: random puts, deletes, cross-keyspace batches, point reads, scans
//! both ways, snapshots, flushes, keyspace drops and re-creations, and reopens over three
//! keyspaces with different policies (every run has `minmax` and a partial-merge policy among
//! them), checked against one `BTreeMap` per keyspace, with background and synchronous
//! compaction.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{
    Db, Keyspace, KeyspaceOptions, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions,
};
use strata_policy::PolicySpec;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The three keyspaces' policies per run: the default keyspace's first.
const POLICIES: [[&str; 3]; 6] = [
    ["leveled", "minmax", "partial-mixed"],
    ["tiered", "partial-full", "minmax"],
    ["spooky", "minmax", "partial-rr"],
    ["minmax", "partial-choosebest", "lazy-leveled"],
    ["ecotune", "partial-mixed-p", "minmax"],
    ["horizontal-tiered", "minmax", "partial-full-p"],
];

/// The two keyspaces besides the default one.
const NAMES: [&str; 2] = ["events", "users"];

fn spec(policy: &str) -> PolicySpec {
    support::small::small_tree(policy)
}

fn options(fs: &Arc<dyn FileSystem>, policy: &str, synchronous: bool) -> Options {
    Options::new()
        .with_file_system(Arc::clone(fs))
        .with_write_buffer_size(8 << 10)
        .with_block_size(512)
        .with_synchronous_compaction(synchronous)
        .with_max_background_jobs(3)
        .with_policy_spec(spec(policy))
        .unwrap()
}

fn keyspace_options(policy: &str, i: usize) -> KeyspaceOptions {
    KeyspaceOptions::new()
        .with_policy_spec(spec(policy))
        .unwrap()
        // The keyspaces' buffers differ, so their flushes (and WAL switches) interleave.
        .with_write_buffer_size([6 << 10, 12 << 10][i])
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:04}", rng.random_range(0..1500)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.random_range(0..80);
    (0..len).map(|_| rng.random()).collect()
}

/// The database's keyspaces: the default one (index 0), then `NAMES`.
struct Handles {
    db: Db,
    keyspaces: Vec<Keyspace>,
}

fn handles(db: Db) -> Handles {
    let keyspaces = std::iter::once("default")
        .chain(NAMES)
        .map(|n| db.keyspace(n).unwrap())
        .collect();
    Handles { db, keyspaces }
}

fn check_all(h: &Handles, models: &[Model], what: &str) {
    for (i, (ks, model)) in h.keyspaces.iter().zip(models).enumerate() {
        let held: Model = ks
            .range::<&[u8], _>(..)
            .unwrap()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        assert!(
            held == *model,
            "{what}: keyspace {i} ({}) differs",
            ks.name()
        );
    }
}

fn run(seed: u64, synchronous: bool) {
    let policies = POLICIES[seed as usize % POLICIES.len()];
    let what = format!("seed {seed}, {policies:?}, synchronous {synchronous}");
    let mut rng = StdRng::seed_from_u64(seed);
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let open = |fs: &Arc<dyn FileSystem>| {
        handles(Db::open("/db", options(fs, policies[0], synchronous)).unwrap())
    };
    let db = Db::open("/db", options(&fs, policies[0], synchronous)).unwrap();
    for (i, name) in NAMES.iter().enumerate() {
        db.create_keyspace(name, keyspace_options(policies[i + 1], i))
            .unwrap();
    }
    let mut h = handles(db);
    let mut models: Vec<Model> = vec![Model::new(); 3];
    let mut snapshots: Vec<(Snapshot, Vec<Model>)> = Vec::new();
    for step in 0..4_000 {
        let k = rng.random_range(0..3);
        match rng.random_range(0..100) {
            0..=44 => {
                let (key, value) = (key(&mut rng), value(&mut rng));
                h.keyspaces[k].put(&key, &value).unwrap();
                models[k].insert(key, value);
            }
            45..=54 => {
                let key = key(&mut rng);
                h.keyspaces[k].delete(&key).unwrap();
                models[k].remove(&key);
            }
            55..=69 => {
                // A batch across keyspaces, one model change per operation in order.
                let mut batch = WriteBatch::new();
                let mut changes = Vec::new();
                for _ in 0..rng.random_range(1..6) {
                    let (k, key) = (rng.random_range(0..3), key(&mut rng));
                    let value = rng.random_bool(0.8).then(|| value(&mut rng));
                    match &value {
                        Some(v) if k == 0 => batch.put(&key, v).unwrap(),
                        Some(v) => batch.put_in(&h.keyspaces[k], &key, v).unwrap(),
                        None => batch.delete_in(&h.keyspaces[k], &key).unwrap(),
                    };
                    changes.push((k, key, value));
                }
                h.db.write(&WriteOptions::default(), batch).unwrap();
                for (k, key, value) in changes {
                    match value {
                        Some(v) => models[k].insert(key, v),
                        None => models[k].remove(&key),
                    };
                }
            }
            70..=84 => {
                let key = key(&mut rng);
                let got = h.keyspaces[k].get(&key).unwrap();
                assert_eq!(
                    got.as_deref(),
                    models[k].get(&key).map(Vec::as_slice),
                    "{what}, step {step}: get in keyspace {k}"
                );
            }
            85..=88 => {
                let (from, reverse) = (key(&mut rng), rng.random_bool(0.5));
                let held: Vec<Vec<u8>> = if reverse {
                    h.keyspaces[k].range_rev(..from.clone()).unwrap()
                } else {
                    h.keyspaces[k].range(from.clone()..).unwrap()
                }
                .take(20)
                .map(|r| r.unwrap().0.to_vec())
                .collect();
                let expected: Vec<Vec<u8>> = if reverse {
                    models[k]
                        .range(..from)
                        .rev()
                        .take(20)
                        .map(|(k, _)| k.clone())
                        .collect()
                } else {
                    models[k]
                        .range(from..)
                        .take(20)
                        .map(|(k, _)| k.clone())
                        .collect()
                };
                assert_eq!(held, expected, "{what}, step {step}: scan of keyspace {k}");
            }
            89..=91 => {
                if snapshots.len() < 3 {
                    snapshots.push((h.db.snapshot(), models.clone()));
                } else {
                    // Every keyspace reads at the snapshot's one point.
                    let (snapshot, then) = snapshots.remove(0);
                    for _ in 0..5 {
                        let (k, key) = (rng.random_range(0..3), key(&mut rng));
                        let got = h.keyspaces[k]
                            .get_with(&key, &ReadOptions::at(&snapshot))
                            .unwrap();
                        assert_eq!(
                            got.as_deref(),
                            then[k].get(&key).map(Vec::as_slice),
                            "{what}, step {step}: snapshot read in keyspace {k}"
                        );
                    }
                }
            }
            92..=94 => h.keyspaces[k].flush().unwrap(),
            95..=96 if k > 0 => {
                // Drop and re-create: the keyspace starts empty, under a new number.
                let name = NAMES[k - 1];
                let before = h.keyspaces[k].id();
                snapshots.clear();
                h.db.drop_keyspace(name).unwrap();
                let again =
                    h.db.create_keyspace(name, keyspace_options(policies[k], k - 1))
                        .unwrap();
                assert_ne!(again.id(), before);
                assert_eq!(again.range::<&[u8], _>(..).unwrap().count(), 0);
                h.keyspaces[k] = again;
                models[k].clear();
            }
            _ => {
                snapshots.clear();
                let Handles { db, keyspaces } = h;
                drop(keyspaces);
                db.close().unwrap();
                h = open(&fs);
                check_all(&h, &models, &format!("{what}, reopen at step {step}"));
            }
        }
    }
    snapshots.clear();
    h.db.wait_for_compactions().unwrap();
    check_all(&h, &models, &format!("{what}, end"));
    let Handles { db, keyspaces } = h;
    drop(keyspaces);
    db.close().unwrap();
    let h = open(&fs);
    check_all(&h, &models, &format!("{what}, final reopen"));
}

#[test]
fn three_keyspaces_with_different_policies_match_the_model() {
    for seed in 0..POLICIES.len() as u64 {
        run(seed, false);
    }
}

#[test]
fn three_keyspaces_match_the_model_with_synchronous_compaction() {
    for seed in 0..POLICIES.len() as u64 {
        run(100 + seed, true);
    }
}
