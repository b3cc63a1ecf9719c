//! Metamorphic test: the compaction policy decides where data lives, never what a read returns.
//! The same random operation sequence, run under every built-in policy (and under background and
//! synchronous compaction, and with the autopilot switching policy at every window), must
//! produce identical results for every read.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Options, ReadOptions, WriteBatch};
use strata_policy::{testing, PolicySpec};

#[derive(Clone, Debug)]
enum Step {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>),
    Scan(Vec<u8>, usize, bool),
    Snapshot,
    SnapshotGet(Vec<u8>),
    Flush,
    Compact,
    Reopen,
}

fn steps(seed: u64, n: usize) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed);
    let key = |rng: &mut StdRng| format!("k{:04}", rng.random_range(0..800)).into_bytes();
    (0..n)
        .map(|_| match rng.random_range(0..100) {
            0..=44 => Step::Put(
                key(&mut rng),
                rng.random::<u64>()
                    .to_le_bytes()
                    .repeat(rng.random_range(1..6)),
            ),
            45..=54 => Step::Delete(key(&mut rng)),
            55..=59 => Step::Batch(
                (0..rng.random_range(1..10))
                    .map(|_| {
                        (
                            key(&mut rng),
                            rng.random_bool(0.7).then(|| vec![rng.random(); 20]),
                        )
                    })
                    .collect(),
            ),
            60..=79 => Step::Get(key(&mut rng)),
            80..=89 => Step::Scan(key(&mut rng), rng.random_range(1..40), rng.random_bool(0.5)),
            90..=91 => Step::Snapshot,
            92..=95 => Step::SnapshotGet(key(&mut rng)),
            96..=97 => Step::Flush,
            98 => Step::Compact,
            _ => Step::Reopen,
        })
        .collect()
}

/// The write buffer of every run.
const BUFFER: u64 = 4 << 10;

/// `policy` with the runs' small tables.
fn spec(policy: &str) -> PolicySpec {
    let mut spec: PolicySpec = policy.parse().unwrap();
    spec.fill_defaults([
        ("size_ratio", "3"),
        ("target_file_size", "2KiB"),
        ("expected_data_size", "512KiB"),
        ("num_levels", "5"),
        // Min-Max flushes a quarter of the buffer at a time.
        ("bucket_size", "1KiB"),
    ])
    .unwrap();
    spec.fill_defaults([("write_buffer_size", BUFFER)]).unwrap();
    spec
}

/// With `autopilot`, the autopilot hands the tree to the next policy of the test list at every
/// window of 2 KiB written.
fn options(fs: &MemFs, policy: &str, synchronous: bool, autopilot: bool) -> Options {
    let options = Options::new()
        .with_file_system(Arc::new(fs.clone()))
        .with_write_buffer_size(BUFFER)
        .with_block_size(512)
        .with_synchronous_compaction(synchronous)
        .with_policy_spec(spec(policy))
        .unwrap();
    if !autopilot {
        return options;
    }
    options.with_autopilot(testing::rotating_autopilot(2048, |p| spec(p).to_string()))
}

/// Runs `steps` and returns the transcript of every read's result.
fn transcript(policy: &str, synchronous: bool, steps: &[Step]) -> Vec<String> {
    transcript_with(policy, synchronous, false, steps).0
}

/// [`transcript`], with the autopilot switching at every window if `autopilot`; and the
/// switches it made.
fn transcript_with(
    policy: &str,
    synchronous: bool,
    autopilot: bool,
    steps: &[Step],
) -> (Vec<String>, usize) {
    let fs = MemFs::default();
    let mut db = Db::open("/db", options(&fs, policy, synchronous, autopilot)).unwrap();
    let mut snapshot = None;
    let mut out = Vec::new();
    let mut switches = 0;
    for step in steps {
        match step {
            Step::Put(k, v) => db.put(k, v).unwrap(),
            Step::Delete(k) => db.delete(k).unwrap(),
            Step::Batch(ops) => {
                let mut b = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => b.put(k, v).unwrap(),
                        None => b.delete(k).unwrap(),
                    };
                }
                db.write(&Default::default(), b).unwrap();
            }
            Step::Get(k) => out.push(format!("{:?}", db.get(k).unwrap())),
            Step::Scan(k, n, reverse) => {
                let it = if *reverse {
                    db.range_rev(..k.as_slice()).unwrap()
                } else {
                    db.range(k.as_slice()..).unwrap()
                };
                let items: Vec<_> = it.take(*n).map(|r| r.unwrap()).collect();
                out.push(format!("{items:?}"));
            }
            Step::Snapshot => snapshot = Some(db.snapshot()),
            Step::SnapshotGet(k) => {
                if let Some(s) = &snapshot {
                    let read = ReadOptions::at(s);
                    out.push(format!("{:?}", db.get_with(k, &read).unwrap()));
                }
            }
            Step::Flush => db.flush().unwrap(),
            Step::Compact => db.compact_range::<&[u8], _>(..).unwrap(),
            Step::Reopen => {
                // A snapshot does not survive a reopen; later snapshot reads wait for a new one.
                snapshot = None;
                switches += switches_in(&db);
                drop(db);
                db = Db::open("/db", options(&fs, policy, synchronous, autopilot)).unwrap();
            }
        }
    }
    let all: Vec<_> = db
        .range::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    out.push(format!("{all:?}"));
    switches += switches_in(&db);
    db.close().unwrap();
    (out, switches)
}

/// The switches the autopilot made since `db` opened.
fn switches_in(db: &Db) -> usize {
    db.autopilot_decisions()
        .iter()
        .filter(|d| d.switch_policy().is_some())
        .count()
}

#[test]
fn every_policy_returns_identical_results() {
    for seed in [11, 12] {
        let steps = steps(seed, 2500);
        let reference = transcript("leveled", true, &steps);
        assert!(reference.len() > 500, "the sequence must read a lot");
        for policy in testing::policies_to_test() {
            for synchronous in [true, false] {
                let t = transcript(policy, synchronous, &steps);
                assert_eq!(
                    t.len(),
                    reference.len(),
                    "{policy} (synchronous {synchronous}), seed {seed}"
                );
                if let Some(i) = t.iter().zip(&reference).position(|(a, b)| a != b) {
                    panic!(
                        "{policy} (synchronous {synchronous}), seed {seed}: read {i} differs:\n{}\nvs leveled:\n{}",
                        t[i], reference[i]
                    );
                }
            }
        }
    }
}

/// The autopilot handing the tree to another policy at every window (compacting synchronously,
/// where it decides in the writes) changes no read.
#[test]
fn the_autopilot_switching_returns_identical_results() {
    let steps = steps(13, 2500);
    let reference = transcript("leveled", true, &steps);
    for policy in ["leveled", "minmax", "partial-rr"] {
        let (t, switches) = transcript_with(policy, true, true, &steps);
        assert_eq!(t, reference, "{policy} with the autopilot");
        eprintln!("{policy} with the autopilot: {switches} switches");
        assert!(switches >= 10, "{policy}: {switches} switches");
    }
}
