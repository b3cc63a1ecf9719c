//! Fault injection: the engine on a [`FaultFs`] over a [`MemFs`], with I/O errors injected into
//! every kind of operation.
//!
//! - A randomized test runs many seeds of random writes (some synced) under random and scheduled
//!   faults for every built-in policy with background compaction (half the seeds with direct
//!   I/O for table files), crashes at the first error,
//!   loses power, reopens (first under faults, then without), and checks the recovered state
//!   against a model of what was acknowledged.
//! - Targeted tests check each failure rule of the engine (see the docs of `db.rs`) on its own.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use strata_engine::filename::{classify, FileKind};
use strata_engine::fs::{FaultFs, FaultKind, FaultStats, FileClasses, FileSystem, MemFs};
use strata_engine::{Db, Error, Options, RecoveryMode, WriteBatch, WriteOptions};
use strata_policy::{testing, PolicySpec};

const DIR: &str = "/db";

/// Small buffers, blocks and manifests so a few hundred writes flush, compact and rotate the
/// manifest several times; table files opened and created for direct I/O if `direct_io` (the
/// engine's direct paths and its check at open, under the same faults), their data blocks then
/// aligned to pages.
fn small_options(
    fs: Arc<dyn FileSystem>,
    policy: &str,
    synchronous: bool,
    direct_io: bool,
) -> Options {
    let buffer = 4096;
    let mut spec = PolicySpec::new(policy);
    spec.fill_defaults([
        ("size_ratio", "3"),
        ("target_file_size", "2048"),
        ("expected_data_size", "256KiB"),
        ("levels", "3"),
        ("num_levels", "5"),
        // Min-Max flushes a quarter of the buffer, so windows and remainders meet the faults.
        ("bucket_size", "1KiB"),
    ])
    .unwrap();
    Options::new()
        .with_file_system(fs)
        .with_use_direct_reads(direct_io)
        .with_use_direct_io_for_flush_and_compaction(direct_io)
        .with_block_align(direct_io)
        .with_write_buffer_size(buffer)
        .with_block_size(256)
        .with_block_cache_capacity(4096)
        .with_max_open_files(16)
        .with_max_manifest_file_size(4096)
        .with_max_background_jobs(3)
        .with_synchronous_compaction(synchronous)
        .with_policy_spec(spec)
        .unwrap()
}

/// Table files in the directory.
fn table_files(mem: &MemFs) -> BTreeSet<u64> {
    mem.list(Path::new(DIR))
        .unwrap()
        .iter()
        .filter_map(|n| match classify(n) {
            Some(FileKind::Table(t)) => Some(t),
            _ => None,
        })
        .collect()
}

/// Tables of the live version.
/// The table files the current version needs: its tables' own, and those it keeps for the
/// blocks its tables refer to.
fn version_tables(db: &Db) -> BTreeSet<u64> {
    let version = db.version();
    let tables = version.tables().map(|(_, _, t)| t.id.0);
    tables
        .chain(version.retained_files().map(|(file, _)| file.0))
        .collect()
}

/// Whether `e` carries the message of an injected fault (directly or as the cause of read-only
/// mode).
fn is_injected(e: &Error) -> bool {
    e.to_string().contains("injected fault")
}

// ----- the model -----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Returned `Ok`.
    Acked { synced: bool },
    /// Returned an I/O error: it may or may not have reached the WAL.
    Unknown,
    /// Refused before reaching the WAL (read-only).
    Rejected,
}

struct Batch {
    /// (key, value or `None` for a delete); distinct keys.
    ops: Vec<(u32, Option<Vec<u8>>)>,
    outcome: Outcome,
}

#[derive(Default)]
struct Model {
    batches: Vec<Batch>,
}

fn key_name(k: u32) -> String {
    format!("key{k:04}")
}

/// A value naming its batch, so any value read back identifies the write that produced it.
fn value_for(batch: usize, op: usize, rng: &mut StdRng) -> Vec<u8> {
    let pad = rng.random_range(8..48);
    let mut v = format!("b{batch}.{op}:").into_bytes();
    v.extend((0..pad).map(|_| b'a' + rng.random_range(0..26u8)));
    v
}

fn batch_of(value: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(value).ok()?;
    s.strip_prefix('b')?.split('.').next()?.parse().ok()
}

impl Model {
    /// The value every acknowledged write so far gives `key` (exact while nothing failed).
    fn latest(&self, key: u32) -> Option<&Vec<u8>> {
        self.batches
            .iter()
            .rev()
            .filter(|b| matches!(b.outcome, Outcome::Acked { .. }))
            .find_map(|b| b.ops.iter().find(|(k, _)| *k == key))
            .and_then(|(_, v)| v.as_ref())
    }

    /// Checks a recovered database: every write acknowledged with `sync = true` (and, since the
    /// WAL is a log, every acknowledged write before it) is there or overwritten by a later
    /// write; no value appears that no write produced; what is there is consistent with a prefix
    /// of the writes (a write visible implies every acknowledged write before it is); and a
    /// batch whose outcome is unknown is there entirely or not at all.
    ///
    /// With `all_durable` (no power was lost) every acknowledged write counts as synced.
    fn verify(&self, db: &Db, keys: u32, all_durable: bool, context: &str) {
        let mut observed: BTreeMap<u32, Option<usize>> = BTreeMap::new();
        for k in 0..keys {
            let got = db.get(key_name(k)).unwrap();
            let batch = got.as_ref().map(|v| {
                let b = batch_of(v).unwrap_or_else(|| panic!("{context}: key {k}: alien value"));
                let wrote = self.batches.get(b).and_then(|batch| {
                    (batch.outcome != Outcome::Rejected)
                        .then(|| batch.ops.iter().find(|(key, _)| *key == k))
                        .flatten()
                });
                assert_eq!(
                    wrote.and_then(|(_, v)| v.as_deref()),
                    Some(v.as_ref()),
                    "{context}: key {k} holds a value batch {b} never wrote there"
                );
                b
            });
            observed.insert(k, batch);
        }
        let last_synced = self.batches.iter().rposition(|b| match b.outcome {
            Outcome::Acked { synced } => synced || all_durable,
            Outcome::Unknown | Outcome::Rejected => false,
        });
        let last_visible = observed.values().flatten().copied().max();
        let bound = last_synced.max(last_visible);
        // Batches of unknown outcome that are visible somewhere took effect entirely.
        let included: BTreeSet<usize> = observed.values().flatten().copied().collect();
        for (&k, &seen) in &observed {
            // The newest write to k up to `bound` that certainly took effect.
            let floor = bound.and_then(|bound| {
                self.batches[..=bound]
                    .iter()
                    .enumerate()
                    .rev()
                    .filter(|(i, b)| {
                        matches!(b.outcome, Outcome::Acked { .. })
                            || (b.outcome == Outcome::Unknown && included.contains(i))
                    })
                    .find(|(_, b)| b.ops.iter().any(|(key, _)| *key == k))
                    .map(|(i, _)| i)
            });
            let Some(floor) = floor else { continue };
            match seen {
                Some(b) => assert!(
                    b >= floor,
                    "{context}: key {k} shows batch {b}, but batch {floor} is durable \
                     (last synced {last_synced:?}, last visible {last_visible:?})"
                ),
                None => {
                    // Absent: some write at or after the floor must have deleted it.
                    let deleted = self.batches[floor..].iter().any(|b| {
                        b.outcome != Outcome::Rejected
                            && b.ops.iter().any(|(key, v)| *key == k && v.is_none())
                    });
                    assert!(
                        deleted,
                        "{context}: key {k} is missing, but batch {floor} wrote it and is \
                         durable (last synced {last_synced:?}, last visible {last_visible:?})"
                    );
                }
            }
        }
    }
}

// ----- the randomized test -----

const KEYS: u32 = 300;
const STEPS: usize = 500;
/// Seeds per policy; `STRATA_FAULT_SEEDS=<n>` runs more (a soak run).
fn seeds() -> u64 {
    std::env::var("STRATA_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30)
}

/// How far into a run a scheduled fault of `kind` lands: kinds with many operations per run
/// get a wider range.
fn schedule_range(kind: FaultKind) -> u64 {
    match kind {
        FaultKind::Append | FaultKind::ShortWrite | FaultKind::ReadAt => 300,
        FaultKind::Flush | FaultKind::Sync => 150,
        FaultKind::Create | FaultKind::Open | FaultKind::RemoveFile | FaultKind::SyncDir => 12,
        FaultKind::Rename | FaultKind::Read => 3,
        // Truncation happens only after a failed WAL write.
        FaultKind::Truncate => 1,
    }
}

/// Arms one scheduled fault of `focus` and, half the time, low random probabilities of every
/// kind, aimed at a random choice of file classes.
fn arm(fault: &FaultFs, rng: &mut StdRng, focus: FaultKind) {
    fault.clear();
    let writes = matches!(
        focus,
        FaultKind::Append | FaultKind::ShortWrite | FaultKind::Sync | FaultKind::Create
    );
    if writes && rng.random_bool(0.4) {
        // The manifest sees few operations: aim at it directly.
        fault.fail_nth(focus, FileClasses::MANIFEST, rng.random_range(0..8));
    } else {
        fault.fail_nth(
            focus,
            FileClasses::ALL,
            rng.random_range(0..schedule_range(focus)),
        );
    }
    if rng.random_bool(0.5) {
        for kind in FaultKind::ALL {
            fault.set_probability(kind, rng.random_range(0.0..0.002));
        }
    }
    fault.set_targets(match rng.random_range(0..6) {
        0 => FileClasses::WAL,
        1 => FileClasses::TABLE,
        2 => FileClasses::MANIFEST | FileClasses::CURRENT | FileClasses::DIRECTORY,
        _ => FileClasses::ALL,
    });
}

/// One run: writes under faults until the first error, a crash and a power loss, a reopen
/// under faults, then a clean reopen checked against the model. Returns the fault counters.
fn run_one(policy: &str, seed: u64, focus: FaultKind) -> FaultStats {
    let context = format!("policy {policy}, seed {seed}, focus {focus}");
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()), seed);
    let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
    // Half the seeds of every policy read and write tables with direct I/O.
    let direct_io = (seed / 1000) % 2 == 1;
    let options = || small_options(Arc::clone(&fs), policy, false, direct_io);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);

    fault.set_enabled(false);
    let db = Db::open(DIR, options()).unwrap();
    arm(&fault, &mut rng, focus);
    fault.set_enabled(true);

    let mut model = Model::default();
    let mut first_error: Option<Error> = None;
    // After the first error, injection stops and the run goes on for a while: the database
    // must then behave (read-only, or working if the error was one it survives), and what it
    // acknowledges counts like anything else.
    let mut steps_left = STEPS;
    while steps_left > 0 {
        steps_left -= 1;
        let roll = rng.random_range(0..100);
        let result = if roll < 70 {
            let n = model.batches.len();
            let mut keys = BTreeSet::new();
            for _ in 0..rng.random_range(1..=3) {
                keys.insert(rng.random_range(0..KEYS));
            }
            let ops: Vec<(u32, Option<Vec<u8>>)> = keys
                .into_iter()
                .enumerate()
                .map(|(i, k)| {
                    (
                        k,
                        (!rng.random_bool(0.1)).then(|| value_for(n, i, &mut rng)),
                    )
                })
                .collect();
            let mut batch = WriteBatch::new();
            for (k, v) in &ops {
                match v {
                    Some(v) => batch.put(key_name(*k), v).unwrap(),
                    None => batch.delete(key_name(*k)).unwrap(),
                };
            }
            let sync = rng.random_bool(0.15);
            let result = db.write(&WriteOptions { sync }, batch);
            let outcome = match &result {
                Ok(()) => Outcome::Acked { synced: sync },
                Err(Error::ReadOnly(_)) => Outcome::Rejected,
                Err(_) => Outcome::Unknown,
            };
            if let (Some(first), Ok(())) = (&first_error, &result) {
                let wal_failed = first.to_string().contains("WAL 0");
                assert!(
                    !wal_failed,
                    "{context}: a write was acknowledged after the WAL failed ({first})"
                );
            }
            model.batches.push(Batch { ops, outcome });
            result
        } else if roll < 96 {
            // A failed write is never readable (rule 2), so reads see exactly the
            // acknowledged writes, before and after the first error.
            let k = rng.random_range(0..KEYS);
            db.get(key_name(k)).map(|got| {
                assert_eq!(
                    got.as_deref(),
                    model.latest(k).map(|v| v.as_slice()),
                    "{context}: key {k} (first error: {first_error:?})"
                );
            })
        } else if roll < 98 {
            db.flush()
        } else {
            // A scan reads every table (and opens them through the table cache).
            db.range::<&str, _>(..)
                .and_then(|mut it| it.try_for_each(|e| e.map(|_| ())))
        };
        match (result, &first_error) {
            (Ok(()), _) => {}
            (Err(e), None) => {
                assert!(
                    matches!(e, Error::Io { .. } | Error::ReadOnly(_)) && is_injected(&e),
                    "{context}: the first error must be an injected I/O error or read-only \
                     mode naming it: {e}"
                );
                first_error = Some(e);
                fault.set_enabled(false);
                steps_left = steps_left.min(60);
            }
            (Err(e), Some(first)) => assert!(
                matches!(e, Error::ReadOnly(_)),
                "{context}: with injection off, the only error after {first} is read-only \
                 mode, not {e}"
            ),
        }
    }

    // The crash, one of three: the machine dies (the file system stops at once, then power
    // is lost), the database closes normally and then power is lost, or only the process dies
    // (no power loss: everything handed to the file system survives, so every acknowledged
    // write must too, and a manifest record whose sync failed may be complete).
    let crash = rng.random_range(0..3);
    let power_loss = crash != 2;
    if crash == 1 {
        fault.set_enabled(false);
    } else {
        fault.set_active(false);
    }
    drop(db);
    fault.set_enabled(false);
    fault.set_active(true);
    if power_loss {
        mem.simulate_power_loss();
    }
    let context = format!("{context}, crash {crash}");

    // Reopen under faults (recovery reads whole files, replays and flushes the WAL, starts a
    // manifest): it may fail, but must not damage what the clean reopen below recovers.
    if matches!(
        focus,
        FaultKind::Read | FaultKind::Rename | FaultKind::Create | FaultKind::SyncDir
    ) || rng.random_bool(0.3)
    {
        fault.clear();
        fault.set_targets(FileClasses::ALL);
        fault.fail_nth(focus, FileClasses::ALL, rng.random_range(0..3));
        fault.set_enabled(true);
        match Db::open(DIR, options()) {
            Ok(db) => {
                for _ in 0..20 {
                    let _ = db.get(key_name(rng.random_range(0..KEYS)));
                }
                fault.set_enabled(false);
                drop(db);
            }
            Err(e) => assert!(
                matches!(e, Error::Io { .. }) && is_injected(&e),
                "{context}: open under faults failed with {e}"
            ),
        }
        fault.set_enabled(false);
        if power_loss {
            mem.simulate_power_loss();
        }
    }

    fault.clear();
    let db = Db::open(DIR, options())
        .unwrap_or_else(|e| panic!("{context}: reopening without faults failed: {e}"));
    model.verify(&db, KEYS, !power_loss, &context);
    // The database accepts writes again.
    for k in 0..20 {
        db.put(format!("after{k}"), "ok")
            .unwrap_or_else(|e| panic!("{context}: a write after reopening failed: {e}"));
    }
    db.flush()
        .unwrap_or_else(|e| panic!("{context}: a flush after reopening failed: {e}"));
    db.wait_for_compactions()
        .unwrap_or_else(|e| panic!("{context}: compactions after reopening failed: {e}"));
    assert_eq!(db.get("after7").unwrap().as_deref(), Some(&b"ok"[..]));
    // Files are deleted at version changes once nothing reads them; with no reader left, the
    // last change left only the live tables (leftovers of the faults were deleted at open).
    assert_eq!(
        table_files(&mem),
        version_tables(&db),
        "{context}: table files left that no version names"
    );
    db.close().unwrap();
    fault.stats()
}

#[test]
fn random_faults_never_lose_synced_writes_or_invent_values() {
    let mut totals = FaultStats::default();
    let mut runs = 0usize;
    let seeds = seeds();
    for (p, policy) in testing::policies_to_test().iter().enumerate() {
        for seed in 0..seeds {
            let focus = FaultKind::ALL[(p * seeds as usize + seed as usize) % FaultKind::COUNT];
            let stats = run_one(policy, seed * 1000 + p as u64, focus);
            totals.merge(&stats);
            runs += 1;
        }
    }
    println!("faults injected over {runs} runs (injected/operations): {totals}");
    for kind in FaultKind::ALL {
        assert!(
            totals.injected(kind) > 0,
            "no {kind} fault was injected: {totals}"
        );
    }
}

// ----- targeted tests -----

/// A `MemFs` under a `FaultFs`, with synchronous compaction unless a test asks otherwise.
struct Env {
    mem: MemFs,
    fault: FaultFs,
}

impl Env {
    fn new() -> Env {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()), 42);
        Env { mem, fault }
    }

    fn options(&self, synchronous: bool) -> Options {
        small_options(Arc::new(self.fault.clone()), "leveled", synchronous, false)
    }

    fn open(&self) -> Db {
        Db::open(DIR, self.options(true)).unwrap()
    }

    /// Turns injection off, loses power if asked, and reopens with paranoid checks (so every
    /// table the recovered version names must exist and verify).
    fn reopen(&self, power_loss: bool) -> Db {
        self.fault.set_enabled(false);
        self.fault.clear();
        if power_loss {
            self.mem.simulate_power_loss();
        }
        Db::open(DIR, self.options(true).with_paranoid_checks(true)).unwrap()
    }

    fn count(&self, kind: fn(FileKind) -> bool) -> usize {
        self.mem
            .list(Path::new(DIR))
            .unwrap()
            .iter()
            .filter(|n| classify(n).is_some_and(kind))
            .count()
    }
}

fn key(i: u32) -> String {
    format!("k{i:05}")
}

fn value(i: u32) -> String {
    format!("value {i} with some padding to fill blocks")
}

/// Writes keys `from..from + limit` until one fails; returns the first key not acknowledged
/// and the error.
fn write_until_error(db: &Db, from: u32, limit: u32, sync: bool) -> (u32, Option<Error>) {
    for i in from..from + limit {
        let mut b = WriteBatch::new();
        b.put(key(i), value(i)).unwrap();
        if let Err(e) = db.write(&WriteOptions { sync }, b) {
            return (i, Some(e));
        }
    }
    (from + limit, None)
}

fn assert_keys(db: &Db, keys: std::ops::Range<u32>, context: &str) {
    for i in keys {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(value(i).as_bytes()),
            "{context}: key {i}"
        );
    }
}

fn assert_read_only(db: &Db, cause: &str) {
    match db.put("after", "error") {
        Err(Error::ReadOnly(m)) => assert!(m.contains(cause), "{m} should name {cause}"),
        other => panic!("expected read-only mode after {cause}, got {other:?}"),
    }
    assert!(matches!(db.flush(), Err(Error::ReadOnly(_))));
    assert!(matches!(
        db.compact_range::<&str, _>(..),
        Err(Error::ReadOnly(_))
    ));
}

/// A compaction whose input read fails once is tried again and succeeds, leaving the database
/// writable; one whose reads keep failing gives up after three attempts and makes the database
/// read-only (rule 3; RELIABILITY.md, section 'Other failure paths').
#[test]
fn a_failed_read_of_a_compaction_input_is_retried() {
    let env = Env::new();
    let db = env.open();
    let write = |round: u32| {
        for i in 0..300 {
            db.put(key(i), format!("{round}-{}", value(i))).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
    };
    write(0);
    write(1);
    env.fault.fail_nth(FaultKind::ReadAt, FileClasses::TABLE, 0);
    db.compact_range::<&str, _>(..).unwrap();
    assert_eq!(env.fault.stats().injected(FaultKind::ReadAt), 1);
    assert_eq!(db.metrics().compaction_read_retries, 1);
    for i in 0..300 {
        assert_eq!(
            db.get(key(i)).unwrap().unwrap(),
            format!("1-{}", value(i)).as_bytes()
        );
    }

    write(2);
    env.fault.set_targets(FileClasses::TABLE);
    env.fault.set_probability(FaultKind::Open, 1.0);
    env.fault.set_probability(FaultKind::ReadAt, 1.0);
    let e = db.compact_range::<&str, _>(..).unwrap_err();
    assert!(is_injected(&e), "{e}");
    assert_eq!(db.metrics().compaction_read_retries, 1 + 2);
    assert_read_only(&db, "injected fault");
    drop(db);
    let db = env.reopen(false);
    for i in 0..300 {
        assert_eq!(
            db.get(key(i)).unwrap().unwrap(),
            format!("2-{}", value(i)).as_bytes()
        );
    }
    db.close().unwrap();
}

/// A write that fails part-way leaves no partial record at the WAL's end (it is cut off), so
/// even the strictest recovery mode reopens the database; if the cut itself fails, the strict
/// mode reports the torn record and the default mode drops it (RELIABILITY.md, section 'Other
/// failure paths').
#[test]
fn a_failed_wal_write_leaves_a_wal_the_strict_mode_reopens() {
    for (kind, truncate_fails) in [
        (FaultKind::ShortWrite, false),
        (FaultKind::Flush, false),
        (FaultKind::ShortWrite, true),
    ] {
        let context = format!("{kind}, truncate fails {truncate_fails}");
        let env = Env::new();
        let db = env.open();
        db.put("a", "1").unwrap();
        db.write(&WriteOptions::synced(), {
            let mut b = WriteBatch::new();
            b.put("b", "2").unwrap();
            b
        })
        .unwrap();
        env.fault.fail_nth(kind, FileClasses::WAL, 0);
        if truncate_fails {
            env.fault.fail_nth(FaultKind::Truncate, FileClasses::WAL, 0);
        }
        let mut b = WriteBatch::new();
        b.put("c", "x".repeat(300)).unwrap();
        assert!(db.write(&WriteOptions::default(), b).is_err(), "{context}");
        drop(db);
        env.fault.set_enabled(false);
        env.fault.clear();
        let strict = env
            .options(true)
            .with_wal_recovery_mode(RecoveryMode::AbsoluteConsistency);
        match Db::open(DIR, strict) {
            Ok(db) => {
                assert!(!truncate_fails, "{context}: the torn record went unnoticed");
                assert_eq!(
                    db.get("a").unwrap().as_deref(),
                    Some(&b"1"[..]),
                    "{context}"
                );
                assert_eq!(
                    db.get("b").unwrap().as_deref(),
                    Some(&b"2"[..]),
                    "{context}"
                );
                assert_eq!(db.get("c").unwrap(), None, "{context}");
                db.close().unwrap();
            }
            Err(e) => {
                assert!(truncate_fails, "{context}: {e}");
                assert!(matches!(e, Error::Corruption { .. }), "{context}: {e}");
                let db = Db::open(DIR, env.options(true)).unwrap();
                assert_eq!(
                    db.get("b").unwrap().as_deref(),
                    Some(&b"2"[..]),
                    "{context}"
                );
                assert_eq!(db.get("c").unwrap(), None, "{context}");
                db.close().unwrap();
            }
        }
    }
}

#[test]
fn a_failing_wal_write_fails_the_write_and_makes_the_database_read_only() {
    for kind in [FaultKind::Sync, FaultKind::ShortWrite, FaultKind::Flush] {
        for power_loss in [true, false] {
            let context = format!("{kind}, power loss {power_loss}");
            let env = Env::new();
            let db = env.open();
            db.write(&WriteOptions::synced(), {
                let mut b = WriteBatch::new();
                b.put("a", "1").unwrap();
                b
            })
            .unwrap();
            db.put("b", "2").unwrap();
            // The record's header passes, its payload is cut short; or the flush or sync fails.
            env.fault.fail_nth(
                kind,
                FileClasses::WAL,
                u64::from(kind == FaultKind::ShortWrite),
            );
            let mut b = WriteBatch::new();
            b.put("c", "3").unwrap();
            let sync = kind != FaultKind::Flush;
            let e = db.write(&WriteOptions { sync }, b).unwrap_err();
            assert!(
                matches!(e, Error::Io { .. }) && is_injected(&e) && e.to_string().contains("WAL"),
                "{context}: {e}"
            );
            assert_eq!(
                db.get("c").unwrap(),
                None,
                "{context}: a failed write is never readable"
            );
            assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"2"[..]));
            assert_read_only(&db, &format!("injected fault: {kind}"));
            drop(db);

            let db = env.reopen(power_loss);
            assert_eq!(
                db.get("a").unwrap().as_deref(),
                Some(&b"1"[..]),
                "{context}"
            );
            if power_loss || kind == FaultKind::ShortWrite {
                // The WAL is never synced after the failure, and a torn record is never
                // replayed.
                assert_eq!(db.get("c").unwrap(), None, "{context}");
            }
            if !power_loss {
                // "b" was handed to the file system before the failure: a process crash keeps it.
                assert_eq!(
                    db.get("b").unwrap().as_deref(),
                    Some(&b"2"[..]),
                    "{context}"
                );
            }
            db.put("d", "4").unwrap();
            assert_eq!(db.get("d").unwrap().as_deref(), Some(&b"4"[..]));
            db.close().unwrap();
        }
    }
}

#[test]
fn a_failing_table_write_during_a_flush_leaves_no_partial_table_after_reopen() {
    for kind in [
        FaultKind::Create,
        FaultKind::Append,
        FaultKind::ShortWrite,
        FaultKind::Sync,
    ] {
        let env = Env::new();
        let db = env.open();
        let (n, e) = write_until_error(&db, 0, 1000, false);
        assert!(e.is_none());
        env.fault.fail_nth(kind, FileClasses::TABLE, 0);
        // Deleting the partial output fails too: it stays until the next open.
        env.fault.set_targets(FileClasses::TABLE);
        env.fault.set_probability(FaultKind::RemoveFile, 1.0);
        let e = db.flush().unwrap_err();
        assert!(is_injected(&e), "{kind}: {e}");
        assert_read_only(&db, &format!("injected fault: {kind}"));
        assert_keys(&db, 0..n, "before reopen");
        if kind != FaultKind::Create {
            assert!(
                !table_files(&env.mem).is_subset(&version_tables(&db)),
                "{kind}: the partial table is still there (its delete failed)"
            );
        }
        drop(db);
        let db = env.reopen(true);
        assert_keys(&db, 0..n, &format!("{kind}, after reopen"));
        assert_eq!(table_files(&env.mem), version_tables(&db), "{kind}");
        db.close().unwrap();
    }
}

#[test]
fn a_failing_compaction_output_makes_the_database_read_only_and_is_deleted() {
    for kind in [FaultKind::Append, FaultKind::Sync, FaultKind::SyncDir] {
        let env = Env::new();
        let db = env.open();
        let (n, _) = write_until_error(&db, 0, 2000, false);
        db.flush().unwrap();
        let before = version_tables(&db);
        assert!(before.len() > 1);
        let targets = if kind == FaultKind::SyncDir {
            FileClasses::DIRECTORY
        } else {
            FileClasses::TABLE
        };
        env.fault
            .fail_nth(kind, targets, 2 * u64::from(kind == FaultKind::Append));
        let e = db.compact_range::<&str, _>(..).unwrap_err();
        assert!(is_injected(&e), "{kind}: {e}");
        assert_read_only(&db, &format!("injected fault: {kind}"));
        // The outputs are gone; the inputs are still the version, and still readable.
        assert_eq!(version_tables(&db), before, "{kind}");
        assert_eq!(table_files(&env.mem), before, "{kind}");
        assert_keys(&db, 0..n, "before reopen");
        drop(db);
        let db = env.reopen(true);
        assert_keys(&db, 0..n, &format!("{kind}, after reopen"));
        assert_eq!(table_files(&env.mem), version_tables(&db));
        db.compact_range::<&str, _>(..).unwrap();
        db.close().unwrap();
    }
}

#[test]
fn a_background_error_stops_background_work_and_makes_writes_fail() {
    let env = Env::new();
    let db = Db::open(DIR, env.options(false)).unwrap();
    env.fault.set_targets(FileClasses::TABLE);
    env.fault.set_probability(FaultKind::Sync, 1.0);
    let (n, e) = write_until_error(&db, 0, 50_000, false);
    match e {
        Some(Error::ReadOnly(m)) => assert!(m.contains("injected fault: sync"), "{m}"),
        other => panic!("expected read-only mode, got {other:?}"),
    }
    assert!(matches!(db.wait_for_compactions(), Err(Error::ReadOnly(_))));
    // Background threads pick no more work: nothing touches the file system any more.
    let before = env.fault.stats();
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(env.fault.stats(), before);
    assert!(
        before.injected(FaultKind::Sync) <= 3,
        "at most one failure per background thread: {before}"
    );
    assert_keys(&db, 0..n, "before close");
    // Closing a read-only database reports the error that made it read-only (RELIABILITY.md,
    // section 'Bad input').
    match db.close() {
        Err(Error::ReadOnly(m)) => assert!(m.contains("injected fault: sync"), "{m}"),
        other => panic!("close of a read-only database returned {other:?}"),
    }
    let db = env.reopen(false);
    assert_keys(&db, 0..n, "after reopen");
    assert_eq!(table_files(&env.mem), version_tables(&db));
    db.close().unwrap();
}

#[test]
fn a_failing_manifest_append_keeps_the_outputs_its_record_may_name() {
    for kind in [FaultKind::Sync, FaultKind::ShortWrite, FaultKind::Append] {
        for power_loss in [false, true] {
            let context = format!("{kind}, power loss {power_loss}");
            let env = Env::new();
            let db = env.open();
            let (n, _) = write_until_error(&db, 0, 500, false);
            env.fault.fail_nth(kind, FileClasses::MANIFEST, 0);
            let e = db.flush().unwrap_err();
            assert!(
                is_injected(&e) && e.to_string().contains("MANIFEST"),
                "{context}: {e}"
            );
            assert_read_only(&db, &format!("injected fault: {kind}"));
            let outputs: BTreeSet<u64> = table_files(&env.mem)
                .difference(&version_tables(&db))
                .copied()
                .collect();
            assert!(
                !outputs.is_empty(),
                "{context}: the flush's outputs are kept"
            );
            drop(db);
            // Paranoid checks: every table the recovered version names exists and verifies.
            let db = env.reopen(power_loss);
            assert_keys(&db, 0..n, &context);
            if kind == FaultKind::Sync && !power_loss {
                // The record reached the file (only its sync failed): the reopened version
                // names the kept outputs.
                assert!(
                    outputs.is_subset(&version_tables(&db)),
                    "{context}: {outputs:?} not in the recovered version"
                );
            }
            assert_eq!(table_files(&env.mem), version_tables(&db), "{context}");
            db.put("more", "writes").unwrap();
            db.flush().unwrap();
            db.close().unwrap();
        }
    }
}

#[test]
fn a_failing_rename_of_current_during_manifest_rotation_is_recoverable() {
    for power_loss in [false, true] {
        let env = Env::new();
        let db = env.open();
        env.fault
            .fail_nth(FaultKind::Rename, FileClasses::CURRENT, 0);
        let (n, e) = write_until_error(&db, 0, 20_000, true);
        match e {
            Some(Error::ReadOnly(m)) => assert!(m.contains("injected fault: rename"), "{m}"),
            other => panic!("expected read-only mode after the rotation failed, got {other:?}"),
        }
        assert_eq!(env.fault.stats().injected(FaultKind::Rename), 1);
        assert_eq!(
            env.count(|k| matches!(k, FileKind::Manifest(_))),
            2,
            "both manifests are kept"
        );
        assert_keys(&db, 0..n, "before reopen");
        drop(db);
        let db = env.reopen(power_loss);
        assert_keys(&db, 0..n, &format!("power loss {power_loss}"));
        assert_eq!(env.count(|k| matches!(k, FileKind::Manifest(_))), 1);
        assert_eq!(env.count(|k| k == FileKind::Temp), 0);
        let (m, e) = write_until_error(&db, n, 200, false);
        assert!(e.is_none());
        assert_keys(&db, 0..m, "after reopen");
        db.close().unwrap();
    }
}

#[test]
fn a_failing_remove_of_an_obsolete_file_is_harmless() {
    let env = Env::new();
    let db = env.open();
    env.fault.set_probability(FaultKind::RemoveFile, 1.0);
    for round in 0..4u32 {
        for i in 0..1500u32 {
            db.put(key(i % 500), format!("{round} {}", value(i)))
                .unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range::<&str, _>(..).unwrap();
    assert!(env.fault.stats().injected(FaultKind::RemoveFile) > 0);
    assert!(
        table_files(&env.mem).len() > version_tables(&db).len(),
        "obsolete tables are left behind"
    );
    assert!(env.count(|k| matches!(k, FileKind::Wal(_))) > 1);
    for i in 0..500u32 {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(format!("3 {}", value(i + 1000)).as_bytes())
        );
    }
    // Deletes work again: the next version change deletes the tables left behind.
    env.fault.set_enabled(false);
    db.put("x", "y").unwrap();
    db.flush().unwrap();
    assert_eq!(table_files(&env.mem), version_tables(&db));
    drop(db);
    let db = env.reopen(false);
    assert_eq!(env.count(|k| matches!(k, FileKind::Wal(_))), 1);
    assert_eq!(env.count(|k| matches!(k, FileKind::Manifest(_))), 1);
    assert_eq!(db.get("x").unwrap().as_deref(), Some(&b"y"[..]));
    db.close().unwrap();
}

#[test]
fn a_failing_wal_creation_at_a_memtable_switch_fails_the_write_and_changes_nothing() {
    let env = Env::new();
    let db = env.open();
    env.fault.fail_nth(FaultKind::Create, FileClasses::WAL, 0);
    let (n, e) = write_until_error(&db, 0, 5000, true);
    let e = e.unwrap();
    assert!(
        matches!(e, Error::Io { .. }) && e.to_string().contains("creating WAL"),
        "{e}"
    );
    // The directory sync after creating the next WAL fails: that WAL is deleted again.
    let wals = env.count(|k| matches!(k, FileKind::Wal(_)));
    env.fault
        .fail_nth(FaultKind::SyncDir, FileClasses::DIRECTORY, 0);
    let (m, e) = write_until_error(&db, n, 1, true);
    let e = e.unwrap();
    assert_eq!(m, n);
    assert!(e.to_string().contains("after creating WAL"), "{e}");
    assert_eq!(env.count(|k| matches!(k, FileKind::Wal(_))), wals);
    // Neither failure is fatal: the old WAL stays in use and the next switch succeeds.
    let (m, e) = write_until_error(&db, n, 1000, true);
    assert!(e.is_none(), "{e:?}");
    assert_keys(&db, 0..m, "before reopen");
    drop(db);
    let db = env.reopen(true);
    assert_keys(&db, 0..m, "after reopen");
    db.close().unwrap();
}

#[test]
fn a_failed_database_creation_can_be_retried() {
    for kind in [FaultKind::Rename, FaultKind::Sync, FaultKind::SyncDir] {
        let env = Env::new();
        env.fault.fail_nth(kind, FileClasses::ALL, 0);
        let e = Db::open(DIR, env.options(true)).unwrap_err();
        assert!(is_injected(&e), "{kind}: {e}");
        // A failed sync of the first manifest or rename of CURRENT leave no CURRENT (the
        // directory sync comes after the rename).
        assert_eq!(
            env.mem.exists(Path::new("/db/CURRENT")),
            kind == FaultKind::SyncDir,
            "{kind}"
        );
        let db = env.reopen(true);
        db.put("k", "v").unwrap();
        db.flush().unwrap();
        assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
        db.close().unwrap();
    }
}

#[test]
fn a_failing_directory_sync_after_a_flush_discards_its_tables() {
    let env = Env::new();
    let db = env.open();
    let (n, _) = write_until_error(&db, 0, 300, false);
    // The first directory sync of the flush is the new WAL's, the second the tables'.
    env.fault
        .fail_nth(FaultKind::SyncDir, FileClasses::DIRECTORY, 1);
    let e = db.flush().unwrap_err();
    assert!(e.to_string().contains("after writing tables"), "{e}");
    assert_read_only(&db, "injected fault: sync-dir");
    assert_eq!(table_files(&env.mem), version_tables(&db));
    drop(db);
    let db = env.reopen(true);
    assert_keys(&db, 0..n, "after reopen");
    db.close().unwrap();
}
