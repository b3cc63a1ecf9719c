//! Writers, readers, snapshot holders, explicit flushes and background compactions at once:
//! every acknowledged write is readable, and snapshots stay frozen.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, KeyspaceOptions, Options, ReadOptions, WriteBatch, WriteOptions};
use strata_policy::{testing, PolicySpec};

#[test]
fn concurrent_writers_readers_and_flushes_lose_nothing() {
    testing::register();
    let mut compacted = 0;
    // Every built-in policy and the test policy, every other one with the writers of a group
    // inserting through its leader rather than all at once, and every other pair with
    // pipelined writes.
    for (i, &policy) in testing::policies_to_test().iter().enumerate() {
        let mut spec: PolicySpec = policy.parse().unwrap();
        spec.fill_defaults([("size_ratio", "4"), ("target_file_size", "8KiB")])
            .unwrap();
        let options = Options::new()
            .with_file_system(Arc::new(MemFs::default()))
            .with_write_buffer_size(16 << 10)
            .with_block_size(1024)
            .with_allow_concurrent_memtable_write(i % 2 == 0)
            .with_enable_pipelined_write(i % 4 >= 2)
            .with_policy_spec(spec)
            .unwrap();
        let db = Db::open("/db", options).unwrap();
        let writers = 3u64;
        let per_writer = 3000u64;
        // acked[w] = how many of writer w's keys are acknowledged.
        let acked: Vec<AtomicU64> = (0..writers).map(|_| AtomicU64::new(0)).collect();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for w in 0..writers {
                let (db, acked) = (&db, &acked);
                s.spawn(move || {
                    // One writer leaves its writes out of the WAL: groups never mix the two.
                    let write = WriteOptions {
                        disable_wal: w == 1,
                        ..WriteOptions::default()
                    };
                    for i in 0..per_writer {
                        let mut batch = WriteBatch::new();
                        batch.put(format!("w{w}-{i:06}"), format!("{i}")).unwrap();
                        db.write(&write, batch).unwrap();
                        acked[w as usize].store(i + 1, Ordering::Release);
                    }
                });
            }
            // Readers check acknowledged keys while everything else runs.
            for r in 0..2u64 {
                let (db, acked, done) = (&db, &acked, &done);
                s.spawn(move || {
                    let mut n = r;
                    while !done.load(Ordering::Acquire) {
                        let w = n % writers;
                        let upto = acked[w as usize].load(Ordering::Acquire);
                        if upto > 0 {
                            let i = (n * 7919) % upto;
                            let v = db.get(format!("w{w}-{i:06}")).unwrap();
                            assert_eq!(
                                v.as_deref(),
                                Some(format!("{i}").as_bytes()),
                                "{policy}: w{w}-{i} acknowledged but not found"
                            );
                        }
                        n += 1;
                    }
                });
            }
            // A snapshot holder: what it sees never changes.
            {
                let (db, done) = (&db, &done);
                s.spawn(move || {
                    while !done.load(Ordering::Acquire) {
                        let snap = db.snapshot();
                        let read = ReadOptions::at(&snap);
                        let before: Vec<_> = db
                            .range_with::<&str, _>(.., &read, false)
                            .unwrap()
                            .map(|r| r.unwrap())
                            .collect();
                        std::thread::yield_now();
                        let after: Vec<_> = db
                            .range_with::<&str, _>(.., &read, false)
                            .unwrap()
                            .map(|r| r.unwrap())
                            .collect();
                        assert_eq!(before, after, "{policy}: a snapshot changed");
                    }
                });
            }
            // Explicit flushes racing the writers' own memtable switches.
            {
                let (db, done) = (&db, &done);
                s.spawn(move || {
                    while !done.load(Ordering::Acquire) {
                        db.flush().unwrap();
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                });
            }
            // Wait for the writers, then stop the others.
            while acked.iter().any(|a| a.load(Ordering::Acquire) < per_writer) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            done.store(true, Ordering::Release);
        });
        db.wait_for_compactions().unwrap();
        for w in 0..writers {
            for i in 0..per_writer {
                assert_eq!(
                    db.get(format!("w{w}-{i:06}")).unwrap().as_deref(),
                    Some(format!("{i}").as_bytes())
                );
            }
        }
        assert_eq!(
            db.range::<&str, _>(..).unwrap().count() as u64,
            writers * per_writer
        );
        let m = db.metrics();
        assert!(m.flushes > 10, "{policy}: {m}");
        if m.compactions > 0 {
            compacted += 1;
        }
        db.close().unwrap();
    }
    // Some policies (tiered ones at this size) merge nothing in 9,000 writes; most do, beside
    // the writers and readers.
    let policies = testing::policies_to_test().len();
    assert!(
        compacted * 2 > policies,
        "{compacted} of {policies} compacted"
    );
}

#[test]
fn a_group_of_writers_inserting_at_once_appears_whole() {
    // With and without the writers of a group inserting their own batches at once, and with
    // and without pipelined writes (groups inserting beside each other): every batch of two
    // keys is seen whole or not at all, by point reads at a snapshot and by scans, while
    // eight writers commit in groups; afterwards everything is there.
    for (concurrent, pipelined) in [(true, false), (false, false), (true, true), (false, true)] {
        let options = Options::new()
            .with_file_system(Arc::new(MemFs::default()))
            .with_write_buffer_size(64 << 10)
            .with_allow_concurrent_memtable_write(concurrent)
            .with_enable_pipelined_write(pipelined);
        let db = Db::open("/db", options).unwrap();
        let (writers, per_writer) = (8u64, 2000u64);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for w in 0..writers {
                let db = &db;
                handles.push(s.spawn(move || {
                    for i in 0..per_writer {
                        let mut batch = WriteBatch::new();
                        batch.put(format!("a{w}-{i:05}"), format!("{i}")).unwrap();
                        batch.put(format!("b{w}-{i:05}"), format!("{i}")).unwrap();
                        db.write(&WriteOptions::default(), batch).unwrap();
                    }
                }));
            }
            let (db, done) = (&db, &done);
            s.spawn(move || {
                let mut n = 0u64;
                while !done.load(Ordering::Acquire) {
                    let snap = db.snapshot();
                    let read = ReadOptions::at(&snap);
                    let (w, i) = (n % writers, (n * 7919) % per_writer);
                    let a = db.get_with(format!("a{w}-{i:05}"), &read).unwrap();
                    let b = db.get_with(format!("b{w}-{i:05}"), &read).unwrap();
                    assert_eq!(a.is_some(), b.is_some(), "a{w}-{i}: half a batch");
                    if n.is_multiple_of(64) {
                        let a_keys = db.range_with::<&str, _>("a".."b", &read, false).unwrap();
                        let b_keys = db.range_with::<&str, _>("b".."c", &read, false).unwrap();
                        assert_eq!(a_keys.count(), b_keys.count(), "a scan saw half a batch");
                    }
                    n += 1;
                }
            });
            for h in handles {
                h.join().unwrap();
            }
            done.store(true, Ordering::Release);
        });
        let all = db.range::<&str, _>(..).unwrap().count() as u64;
        assert_eq!(
            all,
            2 * writers * per_writer,
            "concurrent: {concurrent}, pipelined: {pipelined}"
        );
        let m = db.metrics();
        assert_eq!(m.batches, writers * per_writer);
        // Some groups had more than one writer, so their inserts ran at once (or by the leader).
        assert!(m.write_groups < m.batches, "{m}");
        db.close().unwrap();
    }
}

#[test]
fn writers_into_two_keyspaces_pipeline_on_the_default_options_and_a_lone_writer_does_not() {
    // On the default options (pipelined writes off) a group whose leader finds another writer
    // queued behind it pipelines, so that two writers into two keyspaces insert side by side;
    // every acknowledged write is readable at once, and all of them at the end. A lone writer
    // never pipelines.
    let db = Db::open(
        "/db",
        Options::new().with_file_system(Arc::new(MemFs::default())),
    )
    .unwrap();
    let keyspaces = [
        db.create_keyspace("a", KeyspaceOptions::new()).unwrap(),
        db.create_keyspace("b", KeyspaceOptions::new()).unwrap(),
    ];
    let per_writer = 20_000u64;
    let acked: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = keyspaces
            .iter()
            .zip(&acked)
            .map(|(keyspace, acked)| {
                s.spawn(move || {
                    for i in 0..per_writer {
                        keyspace.put(format!("{i:06}"), format!("{i}")).unwrap();
                        acked.store(i + 1, Ordering::Release);
                    }
                })
            })
            .collect();
        let (keyspaces, acked, done) = (&keyspaces, &acked, &done);
        s.spawn(move || {
            let mut n = 0u64;
            while !done.load(Ordering::Acquire) {
                let w = (n % 2) as usize;
                let upto = acked[w].load(Ordering::Acquire);
                if upto > 0 {
                    let i = upto - 1 - (n * 7919) % upto.min(64);
                    let v = keyspaces[w].get(format!("{i:06}")).unwrap();
                    assert_eq!(v.as_deref(), Some(format!("{i}").as_bytes()), "{w}: {i}");
                }
                n += 1;
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    for keyspace in &keyspaces {
        assert_eq!(
            keyspace.range::<&str, _>(..).unwrap().count() as u64,
            per_writer
        );
    }
    let m = db.metrics();
    assert_eq!(m.batches, 2 * per_writer);
    assert!(m.pipelined_write_groups > 0, "{m}");
    db.close().unwrap();

    let db = Db::open(
        "/db",
        Options::new().with_file_system(Arc::new(MemFs::default())),
    )
    .unwrap();
    for i in 0..5_000u64 {
        db.put(format!("{i:06}"), "v").unwrap();
    }
    let m = db.metrics();
    assert_eq!((m.batches, m.pipelined_write_groups), (5_000, 0), "{m}");
    db.close().unwrap();
}

/// Records every completed job.
#[derive(Default)]
struct Jobs(std::sync::Mutex<Vec<strata_engine::CompletedJob>>);

impl strata_engine::EventListener for Jobs {
    fn on_job_completed(&self, job: &strata_engine::CompletedJob) {
        self.0.lock().unwrap().push(job.clone());
    }
}

/// With two compaction threads, Spooky's partitioned merges (which carry the round as policy
/// state) run beside merges out of L0 (which carry none): the engine holds off only a second
/// state-carrying job. Timing decides whether two jobs meet, so the test writes until they do,
/// up to a bound that is far above what a working engine needs.
#[test]
fn partitioned_merges_run_beside_merges_out_of_level_0() {
    let mut spec = PolicySpec::new("spooky");
    spec.fill_defaults([("size_ratio", "4"), ("write_buffer_size", "64KiB")])
        .unwrap();
    let jobs = Arc::new(Jobs::default());
    let options = Options::new()
        .with_file_system(Arc::new(MemFs::default()))
        .with_write_buffer_size(64 << 10)
        .with_max_background_jobs(3)
        .with_policy_spec(spec)
        .unwrap()
        .with_event_listener(jobs.clone());
    let db = Db::open("/db", options).unwrap();
    let value = vec![b'v'; 100];
    let is_piece = |j: &strata_engine::CompletedJob| j.reason.contains("partitioned merge");
    let out_of_l0 = |j: &strata_engine::CompletedJob| {
        matches!(j.kind, strata_engine::JobKind::Compaction(_))
            && j.input_levels.first() == Some(&0)
    };
    let mut met = false;
    let mut written = 0u64;
    // Scrambled keys, so that every piece gets new data.
    let mut key = 0x9E37_79B9_7F4A_7C15u64;
    while !met && written < 200_000 * 8 {
        for _ in 0..20_000 {
            key = key
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            db.put((key % 400_000).to_be_bytes(), &value).unwrap();
        }
        written += 20_000;
        let jobs = jobs.0.lock().unwrap();
        // A merge out of L0 that started while a piece was running (the other order proves
        // nothing: a piece may always start beside a job that carries no state).
        met = jobs.iter().filter(|j| is_piece(j)).any(|p| {
            jobs.iter()
                .filter(|j| out_of_l0(j))
                .any(|m| p.started < m.started && m.started < p.finished)
        });
    }
    db.close().unwrap();
    let jobs = jobs.0.lock().unwrap();
    let pieces = jobs.iter().filter(|j| is_piece(j)).count();
    assert!(
        met,
        "after {written} writes, {pieces} pieces and {} merges out of L0, none started during a piece",
        jobs.iter().filter(|j| out_of_l0(j)).count()
    );
    // Pieces never overlap each other: one state-carrying job at a time.
    let pieces: Vec<_> = jobs.iter().filter(|j| is_piece(j)).collect();
    for (i, a) in pieces.iter().enumerate() {
        for b in &pieces[i + 1..] {
            assert!(a.finished <= b.started || b.finished <= a.started);
        }
    }
}
