//! Fault injection: the engine on a [`FaultFs`] over a [`MemFs`], with I/O errors injected into
//! every kind of operation.
//!
//! - A randomized test runs many seeds of random writes (some synced, some left out of the WAL)
//!   under random and scheduled faults for every built-in policy with background compaction
//!   (half the seeds with direct I/O for table files; a third with the keys spread over two
//!   keyspaces and a third over three, so batches span them; a third compacting synchronously
//!   with the autopilot switching policy at every window), crashes at the first error, loses
//!   power, reopens (first under faults, then without), and checks the recovered state against a
//!   model of what was acknowledged.
//! - Targeted tests check each failure rule of the engine (see the docs of `db.rs`) on its own.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_engine::filename::{classify, FileKind};
use strata_engine::fs::{FaultFs, FaultKind, FaultStats, FileClasses, FileSystem, MemFs};
use strata_engine::{
    Clock, CompactionFilter, Db, Error, FilterDecision, Keyspace, KeyspaceOptions, ManualClock,
    Options, RecoveryMode, U64AddOperator, WriteBatch, WriteOptions,
};
use strata_policy::{testing, PolicySpec};

mod targeted;

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
    Options::new()
        .with_file_system(fs)
        .with_use_direct_reads(direct_io)
        .with_use_direct_io_for_flush_and_compaction(direct_io)
        .with_block_align(direct_io)
        .with_write_buffer_size(BUFFER)
        .with_block_size(256)
        .with_block_cache_capacity(4096)
        .with_max_open_files(16)
        .with_max_manifest_file_size(4096)
        .with_max_background_jobs(3)
        .with_synchronous_compaction(synchronous)
        .with_policy_spec(small_spec(policy, synchronous))
        .unwrap()
}

/// The write buffer of [`small_options`].
const BUFFER: u64 = 4096;

/// `policy` with the small tables of [`small_options`] (and its codecs, if `synchronous`).
fn small_spec(policy: &str, synchronous: bool) -> PolicySpec {
    let mut spec: PolicySpec = policy.parse().unwrap();
    if synchronous {
        // Every codec under the faults: none in level 0, lz4 above the bottom, zstd with a
        // dictionary per table below (the smallest; zstd trains none on a table of under
        // about 5 KB, so these runs' tables are larger).
        spec.fill_defaults([
            ("target_file_size", "8KiB"),
            ("compression_per_level", "none/lz4"),
            ("bottommost_compression", "zstd+dict256"),
        ])
        .unwrap();
    }
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
    spec.fill_defaults([("write_buffer_size", BUFFER)]).unwrap();
    spec
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

/// The table files the current versions of every keyspace need: their tables' own, and those
/// they keep for the blocks their tables refer to.
fn version_tables(db: &Db) -> BTreeSet<u64> {
    let mut files = BTreeSet::new();
    for keyspace in &Spaces::of(db).0 {
        let version = keyspace.version();
        files.extend(version.tables().map(|(_, _, t)| t.id.0));
        files.extend(version.retained_files().map(|(file, _)| file.0));
    }
    files
}

/// A database's keyspaces in creation order, the default one first: key `k` of the model
/// lives in keyspace `k % n`, so batches span keyspaces when a run has several.
struct Spaces(Vec<Keyspace>);

impl Spaces {
    fn of(db: &Db) -> Spaces {
        Spaces(
            db.list_keyspaces()
                .iter()
                .map(|name| db.keyspace(name).unwrap())
                .collect(),
        )
    }

    fn at(&self, k: u32) -> &Keyspace {
        &self.0[k as usize % self.0.len()]
    }
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
    /// The clock's second when it was written.
    second: u64,
    /// For a batch that adds 1 to counter `k` (a merge operand), `Some(k)`; its `ops` are
    /// empty.
    counter: Option<u32>,
}

/// A compaction filter that removes the values [`removable`] picks and rewrites every other
/// value to itself.
#[derive(Debug)]
struct RemoveSome;

impl CompactionFilter for RemoveSome {
    fn name(&self) -> &str {
        "remove-some"
    }
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
        FILTERED.fetch_add(1, Ordering::Relaxed);
        if removable(value) {
            FilterDecision::Remove
        } else {
            FilterDecision::ChangeValue(value.to_vec())
        }
    }
}

/// Whether [`RemoveSome`] removes `value`: one value in 26, by its last letter.
fn removable(value: &[u8]) -> bool {
    value.last() == Some(&b'q')
}

/// Values [`RemoveSome`] was asked about, over every run.
static FILTERED: AtomicU64 = AtomicU64::new(0);
/// Reads that found a key gone while the run went on: its newest value had expired, or the
/// filter removed it.
static EXPIRED_READS: AtomicU64 = AtomicU64::new(0);
/// Switches the autopilot made under the faults, over every run.
static AUTOPILOT_SWITCHES: AtomicU64 = AtomicU64::new(0);
static REMOVED_READS: AtomicU64 = AtomicU64::new(0);

/// The TTL of the runs whose entries expire ([`Model::ttl`]), in seconds of their clock, which
/// moves a second every [`STEPS_PER_SECOND`] steps.
const SHORT_TTL: u64 = 30;
const STEPS_PER_SECOND: usize = 8;

/// Counters the runs with a merge operator add to ([`counter_name`]).
const COUNTERS: u32 = 5;

fn counter_name(k: u32) -> String {
    format!("counter{k}")
}

#[derive(Default)]
struct Model {
    batches: Vec<Batch>,
    /// The TTL, in runs whose entries expire, with the clock the database reads.
    ttl: Option<(u64, Arc<ManualClock>)>,
    /// Whether the compaction filter removes [`removable`] values.
    filter_removes: bool,
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
    /// Whether the entries of batch `b` have expired by the clock now. Ages count whole
    /// seconds of the one clock every write and read here asks, so this is exact.
    fn expired(&self, b: usize) -> bool {
        self.ttl
            .as_ref()
            .is_some_and(|(ttl, clock)| self.batches[b].second + ttl <= clock.unix_seconds())
    }

    /// Whether `value`, written by batch `b`, may be gone without a delete: expired, or one the
    /// filter removes (which it does only in the merges it meets it in).
    fn may_vanish(&self, b: usize, value: &[u8]) -> bool {
        self.expired(b) || (self.filter_removes && removable(value))
    }

    /// Checks the counters ([`Batch::counter`]) of a recovered database: each holds at least
    /// the increments acknowledged up to the last durable write (the WAL is a log) and at most
    /// every increment not refused (one of unknown outcome may have happened).
    fn verify_counters(&self, db: &Db, all_durable: bool, context: &str) {
        let spaces = Spaces::of(db);
        let durable = self
            .batches
            .iter()
            .rposition(|b| match b.outcome {
                Outcome::Acked { synced } => synced || all_durable,
                Outcome::Unknown | Outcome::Rejected => false,
            })
            .map_or(0, |last| last + 1);
        for k in 0..COUNTERS {
            let got = spaces
                .at(k)
                .get(counter_name(k))
                .unwrap()
                .map_or(0, |v| u64::from_le_bytes(v[..].try_into().unwrap()));
            let ours = |b: &&Batch| b.counter == Some(k);
            let floor = self.batches[..durable]
                .iter()
                .filter(ours)
                .filter(|b| matches!(b.outcome, Outcome::Acked { .. }))
                .count() as u64;
            let ceiling = self
                .batches
                .iter()
                .filter(ours)
                .filter(|b| b.outcome != Outcome::Rejected)
                .count() as u64;
            assert!(
                (floor..=ceiling).contains(&got),
                "{context}: counter {k} holds {got}, not within {floor}..={ceiling}"
            );
        }
    }

    /// The value every acknowledged write so far gives `key` (exact while nothing failed), and
    /// the batch that wrote it.
    fn latest(&self, key: u32) -> Option<(usize, &Vec<u8>)> {
        self.batches
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, b)| matches!(b.outcome, Outcome::Acked { .. }))
            .find_map(|(i, b)| b.ops.iter().find(|(k, _)| *k == key).map(|op| (i, op)))
            .and_then(|(i, (_, v))| v.as_ref().map(|v| (i, v)))
    }

    /// Checks a read of `key` while the run goes on: what the acknowledged writes give it, or
    /// nothing where that expired (exactly then) or the filter may have removed it.
    fn check_read(&self, key: u32, got: Option<&[u8]>, context: &str) {
        let want = self.latest(key);
        match (got, want) {
            (None, Some((b, _))) if self.expired(b) => {
                EXPIRED_READS.fetch_add(1, Ordering::Relaxed);
            }
            (None, Some((b, v))) if self.may_vanish(b, v) => {
                REMOVED_READS.fetch_add(1, Ordering::Relaxed);
            }
            (got, want) => {
                assert!(
                    want.is_none_or(|(b, _)| !self.expired(b)),
                    "{context}: key {key} reads {:?} though batch {} expired",
                    got.map(String::from_utf8_lossy),
                    want.map_or(0, |(b, _)| b)
                );
                assert_eq!(got, want.map(|(_, v)| v.as_slice()), "{context}: key {key}");
            }
        }
    }

    /// Checks a recovered database: every write acknowledged with `sync = true` (and, since the
    /// WAL is a log, every acknowledged write before it) is there or overwritten by a later
    /// write; no value appears that no write produced; what is there is consistent with a prefix
    /// of the writes (a write visible implies every acknowledged write before it is); and a
    /// batch whose outcome is unknown is there entirely or not at all.
    ///
    /// With `all_durable` (no power was lost) every acknowledged write counts as synced.
    fn verify(&self, db: &Db, keys: u32, all_durable: bool, context: &str) {
        let spaces = Spaces::of(db);
        let mut observed: BTreeMap<u32, Option<usize>> = BTreeMap::new();
        for k in 0..keys {
            let got = spaces.at(k).get(key_name(k)).unwrap();
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
                    // Absent: some write at or after the floor must have deleted it, or written
                    // a value that expired or the filter removes.
                    let deleted = self.batches[floor..].iter().enumerate().any(|(i, b)| {
                        b.outcome != Outcome::Rejected
                            && b.ops.iter().any(|(key, v)| {
                                *key == k
                                    && v.as_ref().is_none_or(|v| self.may_vanish(floor + i, v))
                            })
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
/// Keys written without the WAL (`WriteOptions::disable_wal`), apart from the model's.
const UNLOGGED_KEYS: u32 = 50;

/// Of a key written without the WAL: every value written, and the last one acknowledged with
/// its second.
type Unlogged = (BTreeSet<String>, Option<(String, u64)>);

fn unlogged_key(k: u32) -> String {
    format!("unlogged{k:03}")
}
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
    // Half the runs add to counters (merge operands) too, and a quarter have every compaction
    // ask a compaction filter that removes one value in 26 and rewrites the others to
    // themselves. Either keeps merges from keeping blocks unchanged, so the last quarter keeps
    // block preservation under the faults. Every run has a TTL, on a clock the test moves a
    // second every few steps: in the half without counters (whose sums would shrink as
    // operands expired) a short one, which expires the first writes long before the end (with
    // periodic compaction reclaiming them), in the others one no entry outlives. The ages it
    // samples go into the manifest under the faults, and reads and merges check them.
    let with_counters = seed % 4 < 2;
    let with_filter = seed % 4 == 2;
    // A third of every policy's seeds compact synchronously with the autopilot switching at
    // every window, in the writes (decisions and handovers under the faults, deterministic).
    let with_autopilot = (seed / 1000) % 3 == 2;
    let clock = Arc::new(ManualClock::new(1_700_000_000));
    let ttl = if with_counters { 3600 } else { SHORT_TTL };
    let options = || {
        let mut options = small_options(Arc::clone(&fs), policy, with_autopilot, direct_io)
            .with_clock(Arc::clone(&clock) as Arc<dyn Clock>)
            .with_ttl(Some(Duration::from_secs(ttl)));
        if ttl == SHORT_TTL {
            options = options.with_periodic_compaction(Some(Duration::from_secs(5)));
        }
        if seed % 5 < 3 {
            // A row cache of a few rows, which the lookups fill and evict.
            options = options.with_row_cache_capacity(2048);
        }
        if with_counters {
            options = options.with_merge_operator(Arc::new(U64AddOperator));
        }
        if with_filter {
            options = options.with_compaction_filter(Arc::new(RemoveSome));
        }
        if with_autopilot {
            // Decisions and handovers under the faults at every window of 2 KiB.
            let autopilot = testing::rotating_autopilot(2048, |p| small_spec(p, true).to_string());
            options = options.with_autopilot(autopilot);
        }
        options
    };
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);

    fault.set_enabled(false);
    let db = Db::open(DIR, options()).unwrap();
    // A third of the runs spread the keys over one keyspace, a third over two, a third over
    // three (each running the same policy with the same options).
    for i in 1..=seed % 3 {
        db.create_keyspace(&format!("ks{i}"), KeyspaceOptions::new())
            .unwrap();
    }
    let spaces = Spaces::of(&db);
    arm(&fault, &mut rng, focus);
    fault.set_enabled(true);

    let mut model = Model {
        ttl: (ttl == SHORT_TTL).then(|| (SHORT_TTL, Arc::clone(&clock))),
        filter_removes: with_filter,
        ..Model::default()
    };
    // Writes left out of the WAL go to keys of their own (the model's prefix rule does not
    // hold for them).
    let mut unlogged: BTreeMap<u32, Unlogged> = BTreeMap::new();
    let mut first_error: Option<Error> = None;
    // After the first error, injection stops and the run goes on for a while: the database
    // must then behave (read-only, or working if the error was one it survives), and what it
    // acknowledges counts like anything else.
    let mut steps_left = STEPS;
    while steps_left > 0 {
        steps_left -= 1;
        if steps_left.is_multiple_of(STEPS_PER_SECOND) {
            clock.advance(1);
        }
        let roll = rng.random_range(0..100);
        // Chosen by the step, not the generator, so the seeds' draws stay as they were.
        let result = if roll < 70 && steps_left.is_multiple_of(4) {
            let k = (steps_left as u32 * 7) % UNLOGGED_KEYS;
            let value = format!("unlogged-{steps_left}");
            let mut batch = WriteBatch::new();
            batch.put(unlogged_key(k), &value).unwrap();
            let (written, acked) = unlogged.entry(k).or_default();
            written.insert(value.clone());
            let result = db.write(&WriteOptions::without_wal(), batch);
            *acked = match &result {
                Ok(()) => Some((value, clock.unix_seconds())),
                Err(_) => None,
            };
            result
        } else if roll < 70 {
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
                    Some(v) => batch.put_in(spaces.at(*k), key_name(*k), v).unwrap(),
                    None => batch.delete_in(spaces.at(*k), key_name(*k)).unwrap(),
                };
            }
            // Every 13th step, a range deletion instead, chosen by the step so the seeds' draws
            // stay as they were: keys [a, end) in every keyspace, which the model takes as a
            // delete of each.
            let (ops, batch, counter) = if with_counters && steps_left % 11 == 3 {
                // A counter's increment, a merge operand, every 11th step of half the runs.
                let k = steps_left as u32 % COUNTERS;
                let mut batch = WriteBatch::new();
                batch
                    .merge_in(spaces.at(k), counter_name(k), 1u64.to_le_bytes())
                    .unwrap();
                (Vec::new(), batch, Some(k))
            } else if steps_left % 13 == 5 {
                let a = (steps_left as u32 * 31) % KEYS;
                let end = (a + 1 + steps_left as u32 % 9).min(KEYS);
                let mut batch = WriteBatch::new();
                for space in &spaces.0 {
                    batch
                        .delete_range_in(space, key_name(a), key_name(end))
                        .unwrap();
                }
                ((a..end).map(|k| (k, None)).collect(), batch, None)
            } else {
                (ops, batch, None)
            };
            let sync = rng.random_bool(0.15);
            let result = db.write(
                &WriteOptions {
                    sync,
                    ..Default::default()
                },
                batch,
            );
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
            model.batches.push(Batch {
                ops,
                outcome,
                second: clock.unix_seconds(),
                counter,
            });
            result
        } else if roll < 96 {
            // A failed write is never readable (rule 2), so reads see exactly the
            // acknowledged writes, before and after the first error.
            let k = rng.random_range(0..KEYS);
            spaces.at(k).get(key_name(k)).map(|got| {
                model.check_read(
                    k,
                    got.as_deref(),
                    &format!("{context} (first error: {first_error:?})"),
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
    let switches = db
        .autopilot_decisions()
        .iter()
        .filter(|d| d.switch_policy().is_some())
        .count();
    AUTOPILOT_SWITCHES.fetch_add(switches as u64, Ordering::Relaxed);
    let crash = rng.random_range(0..3);
    let power_loss = crash != 2;
    if crash == 1 {
        fault.set_enabled(false);
    } else {
        fault.set_active(false);
    }
    // A close that succeeds has logged and synced the writes left out of the WAL.
    let closed_cleanly = if crash == 1 {
        db.close().is_ok()
    } else {
        drop(spaces);
        drop(db);
        false
    };
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
            // With several keyspaces, one keyspace's recovery may fail a manifest rotation (a
            // background error) and the next one's install then reports read-only mode naming
            // that fault.
            Err(e) => assert!(
                matches!(e, Error::Io { .. } | Error::ReadOnly(_)) && is_injected(&e),
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
    model.verify_counters(&db, !power_loss, &context);
    // Writes left out of the WAL: never a value nobody wrote; all there after a clean close
    // with no error before it (the close logged and synced them).
    for (k, (written, acked)) in &unlogged {
        let got = db
            .get(unlogged_key(*k))
            .unwrap()
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        if let Some(v) = &got {
            assert!(
                written.contains(v),
                "{context}: {} = {v}: never written",
                unlogged_key(*k)
            );
        }
        let expired = |second: u64| ttl == SHORT_TTL && second + ttl <= clock.unix_seconds();
        match acked {
            Some((value, second)) if closed_cleanly && !expired(*second) => assert_eq!(
                got.as_ref(),
                Some(value),
                "{context}: {} lost at a clean close",
                unlogged_key(*k)
            ),
            _ => {}
        }
    }
    // The database accepts writes again, in every keyspace; each keyspace's flush is a
    // version change, at which its files no reader holds any more go. The clock first moves
    // past the TTL: what the reopen replayed expires, and the new writes must not (their
    // sequence numbers may be those of writes the crash lost, which no sample may date).
    clock.advance(SHORT_TTL + 1);
    for keyspace in &Spaces::of(&db).0 {
        for k in 0..20 {
            keyspace
                .put(format!("after{k}"), "ok")
                .unwrap_or_else(|e| panic!("{context}: a write after reopening failed: {e}"));
        }
        keyspace
            .flush()
            .unwrap_or_else(|e| panic!("{context}: a flush after reopening failed: {e}"));
    }
    for keyspace in &Spaces::of(&db).0 {
        keyspace
            .wait_for_compactions()
            .unwrap_or_else(|e| panic!("{context}: compactions after reopening failed: {e}"));
    }
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
    // `STRATA_FAULT_ONE=<policy>@<seed>/<focus>` reruns one run, as a failure names it.
    if let Ok(one) = std::env::var("STRATA_FAULT_ONE") {
        let (policy, rest) = one.rsplit_once('@').expect("policy@seed/focus");
        let (seed, focus) = rest.split_once('/').expect("policy@seed/focus");
        let focus = FaultKind::ALL
            .into_iter()
            .find(|k| k.to_string() == focus)
            .expect("a fault kind");
        run_one(policy, seed.parse().expect("a seed"), focus);
        return;
    }
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
    let filtered = FILTERED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(filtered > 0, "the compaction filter never ran");
    println!("values the compaction filter rewrote: {filtered}");
    let (expired, removed) = (
        EXPIRED_READS.load(Ordering::Relaxed),
        REMOVED_READS.load(Ordering::Relaxed),
    );
    println!("reads that found a value expired: {expired}, removed by the filter: {removed}");
    assert!(expired > 0, "no read found a value expired");
    assert!(removed > 0, "no read found a value the filter removed");
    let switches = AUTOPILOT_SWITCHES.load(Ordering::Relaxed);
    println!("switches the autopilot made under the faults: {switches}");
    assert!(switches > 0, "the autopilot never switched");
    for kind in FaultKind::ALL {
        assert!(
            totals.injected(kind) > 0,
            "no {kind} fault was injected: {totals}"
        );
    }
}
