//! Strata and RocksDB run the same random operations (puts, deletes, range deletions, merges
//! with a u64 counter operator, batches, snapshots, flushes, full compactions) and must answer every read the same: point reads, and
//! scans both ways, at the latest state and at live snapshots. Needs `--features rocksdb`
//! (RocksDB compiles from source); without it the file is empty.
//!
//! `STRATA_DIFF_SEEDS` (default 10) and `STRATA_DIFF_OPS` (default 20,000) size the run; each
//! seed runs a different built-in policy in Strata, on small buffers so that flushes and merges
//! happen often.

#![cfg(feature = "rocksdb")]
#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rocksdb::IteratorMode;
use std::sync::Arc;
use strata_engine::{Db, MergeOperator, Options, ReadOptions, U64AddOperator, WriteBatch};

const KEYS: u32 = 2000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Counter keys: written by merges of 8-byte operands, 8-byte puts and deletes (and range
/// deletions over them), so every value the counter operator meets is a counter.
const COUNTERS: u32 = 200;

fn counter_key(i: u32) -> Vec<u8> {
    format!("mkey{i:06}").into_bytes()
}

/// One write of a batch, applied to both engines alike.
enum Write {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    DeleteRange(Vec<u8>, Vec<u8>),
    Merge(Vec<u8>, Vec<u8>),
}

/// RocksDB's side of the counter: 8-byte little-endian values and operands, added.
fn rocks_add(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let read = |b: &[u8]| <[u8; 8]>::try_from(b).ok().map(u64::from_le_bytes);
    let mut sum = existing.map_or(Some(0), read)?;
    for op in operands {
        sum = sum.wrapping_add(read(op)?);
    }
    Some(sum.to_le_bytes().to_vec())
}

fn random_write(rng: &mut StdRng, step: u64) -> Write {
    if rng.random_bool(0.3) {
        let k = counter_key(rng.random_range(0..COUNTERS));
        return match rng.random_range(0..100) {
            0..=79 => Write::Merge(k, rng.random_range(0..1000u64).to_le_bytes().to_vec()),
            80..=89 => Write::Put(k, rng.random_range(0..1000u64).to_le_bytes().to_vec()),
            90..=95 => Write::Delete(k),
            _ => {
                let start = rng.random_range(0..COUNTERS);
                Write::DeleteRange(
                    counter_key(start),
                    counter_key(start + rng.random_range(1..10)),
                )
            }
        };
    }
    match rng.random_range(0..100) {
        0..=74 => {
            let len = rng.random_range(0..200);
            let mut value = format!("s{step}:").into_bytes();
            value.extend((0..len).map(|_| b'a' + rng.random_range(0..26u8)));
            Write::Put(key(rng.random_range(0..KEYS)), value)
        }
        75..=89 => Write::Delete(key(rng.random_range(0..KEYS))),
        _ => {
            let start = rng.random_range(0..KEYS);
            let width = if rng.random_bool(0.1) {
                rng.random_range(1..KEYS / 4)
            } else {
                rng.random_range(1..20)
            };
            Write::DeleteRange(key(start), key(start + width))
        }
    }
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Up to `limit` pairs from `start`, ascending, or (`reverse`) from `start` down.
fn strata_scan(
    db: &Db,
    read: &ReadOptions<'_>,
    start: &[u8],
    reverse: bool,
    limit: usize,
) -> Pairs {
    let range = if reverse {
        (
            std::ops::Bound::Unbounded,
            std::ops::Bound::Included(start.to_vec()),
        )
    } else {
        (
            std::ops::Bound::Included(start.to_vec()),
            std::ops::Bound::Unbounded,
        )
    };
    db.range_with(range, read, reverse)
        .unwrap()
        .take(limit)
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

fn rocks_scan<'a>(
    iter: impl Iterator<Item = Result<(Box<[u8]>, Box<[u8]>), rocksdb::Error>> + 'a,
    limit: usize,
) -> Pairs {
    iter.take(limit)
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// What one seed compared.
#[derive(Default, Debug)]
struct Compared {
    ops: u64,
    gets: u64,
    scans: u64,
    range_deletions: u64,
    merges: u64,
}

/// `policy` on trees of a few MiB: small tables and buckets, so merges happen often.
fn policy_spec(policy: &str) -> strata_policy::PolicySpec {
    let mut spec: strata_policy::PolicySpec = policy.parse().unwrap();
    spec.fill_defaults([
        ("target_file_size", "64KiB"),
        ("expected_data_size", "4MiB"),
        ("bucket_size", "32KiB"),
    ])
    .unwrap();
    spec
}

fn run_seed(seed: u64, ops: u64, policy: &str) -> Compared {
    let dir = tempfile::tempdir().unwrap();
    let strata = Db::open(
        dir.path().join("strata"),
        Options::new()
            .with_write_buffer_size(64 << 10)
            .with_block_size(1024)
            .with_merge_operator(Arc::new(U64AddOperator) as Arc<dyn MergeOperator>)
            .with_policy_spec(policy_spec(policy))
            .unwrap(),
    )
    .unwrap();
    let mut rocks_options = rocksdb::Options::default();
    rocks_options.create_if_missing(true);
    rocks_options.set_write_buffer_size(64 << 10);
    rocks_options.set_target_file_size_base(64 << 10);
    rocks_options.set_merge_operator_associative("u64_add", rocks_add);
    let rocks = rocksdb::DB::open(&rocks_options, dir.path().join("rocksdb")).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut snapshots: Vec<(strata_engine::Snapshot, rocksdb::Snapshot<'_>)> = Vec::new();
    let mut compared = Compared::default();
    for step in 0..ops {
        compared.ops += 1;
        let ctx = || format!("seed {seed} ({policy}), step {step}");
        match rng.random_range(0..100) {
            0..=54 => {
                let writes: Vec<Write> = if rng.random_bool(0.1) {
                    (0..rng.random_range(2..8))
                        .map(|_| random_write(&mut rng, step))
                        .collect()
                } else {
                    vec![random_write(&mut rng, step)]
                };
                let mut ours = WriteBatch::new();
                let mut theirs = rocksdb::WriteBatch::default();
                for w in &writes {
                    match w {
                        Write::Put(k, v) => {
                            ours.put(k, v).unwrap();
                            theirs.put(k, v);
                        }
                        Write::Delete(k) => {
                            ours.delete(k).unwrap();
                            theirs.delete(k);
                        }
                        Write::DeleteRange(a, b) => {
                            compared.range_deletions += 1;
                            ours.delete_range(a, b).unwrap();
                            theirs.delete_range(a, b);
                        }
                        Write::Merge(k, operand) => {
                            compared.merges += 1;
                            ours.merge(k, operand).unwrap();
                            theirs.merge(k, operand);
                        }
                    }
                }
                strata.write(&Default::default(), ours).unwrap();
                rocks.write(theirs).unwrap();
            }
            55..=79 => {
                let k = if rng.random_bool(0.3) {
                    counter_key(rng.random_range(0..COUNTERS))
                } else {
                    key(rng.random_range(0..KEYS))
                };
                compared.gets += 1;
                match snapshots.len() {
                    0 => {}
                    n if rng.random_bool(0.5) => {
                        let (ours, theirs) = &snapshots[rng.random_range(0..n)];
                        let got = strata.get_with(&k, &ReadOptions::at(ours)).unwrap();
                        assert_eq!(
                            got.as_deref(),
                            theirs.get(&k).unwrap().as_deref(),
                            "snapshot get {k:?}: {}",
                            ctx()
                        );
                        continue;
                    }
                    _ => {}
                }
                assert_eq!(
                    strata.get(&k).unwrap().as_deref(),
                    rocks.get(&k).unwrap().as_deref(),
                    "get {k:?}: {}",
                    ctx()
                );
            }
            80..=91 => {
                let start = if rng.random_bool(0.3) {
                    counter_key(rng.random_range(0..COUNTERS))
                } else {
                    key(rng.random_range(0..KEYS))
                };
                let reverse = rng.random_bool(0.4);
                let limit = rng.random_range(1..60);
                compared.scans += 1;
                let mode = if reverse {
                    IteratorMode::From(&start, rocksdb::Direction::Reverse)
                } else {
                    IteratorMode::From(&start, rocksdb::Direction::Forward)
                };
                let (ours, theirs) = match snapshots.len() {
                    n if n > 0 && rng.random_bool(0.5) => {
                        let (ours, theirs) = &snapshots[rng.random_range(0..n)];
                        (
                            strata_scan(&strata, &ReadOptions::at(ours), &start, reverse, limit),
                            rocks_scan(theirs.iterator(mode), limit),
                        )
                    }
                    _ => (
                        strata_scan(&strata, &ReadOptions::default(), &start, reverse, limit),
                        rocks_scan(rocks.iterator(mode), limit),
                    ),
                };
                assert_eq!(
                    ours,
                    theirs,
                    "scan from {start:?} (reverse {reverse}): {}",
                    ctx()
                );
            }
            92..=95 => {
                if snapshots.len() < 4 {
                    snapshots.push((strata.snapshot(), rocks.snapshot()));
                } else {
                    snapshots.remove(rng.random_range(0..snapshots.len()));
                }
            }
            96..=98 => {
                strata.flush().unwrap();
                rocks.flush().unwrap();
            }
            _ => {
                strata.compact_range::<&[u8], _>(..).unwrap();
                rocks.compact_range(None::<&[u8]>, None::<&[u8]>);
            }
        }
    }
    // Everything, both ways, at the end.
    let all_ours = strata_scan(&strata, &ReadOptions::default(), b"", false, usize::MAX);
    let all_theirs = rocks_scan(rocks.iterator(IteratorMode::Start), usize::MAX);
    assert_eq!(all_ours, all_theirs, "final scan: seed {seed} ({policy})");
    snapshots.clear();
    strata.close().unwrap();
    compared
}

#[test]
fn strata_reads_what_rocksdb_reads_after_the_same_operations() {
    let seeds = env_or("STRATA_DIFF_SEEDS", 10);
    let ops = env_or("STRATA_DIFF_OPS", 20_000);
    let policies = strata_policy::testing::policies_to_test();
    let mut total = Compared::default();
    for seed in 0..seeds {
        let policy = &policies[seed as usize % policies.len()];
        let c = run_seed(4400 + seed, ops, policy);
        eprintln!(
            "seed {} ({policy}): {} operations, {} gets and {} scans compared, {} range deletions, \
             {} merges, 0 mismatches",
            4400 + seed,
            c.ops,
            c.gets,
            c.scans,
            c.range_deletions,
            c.merges
        );
        total.ops += c.ops;
        total.gets += c.gets;
        total.scans += c.scans;
        total.range_deletions += c.range_deletions;
        total.merges += c.merges;
    }
    eprintln!("all seeds: {total:?}, 0 mismatches");
}
