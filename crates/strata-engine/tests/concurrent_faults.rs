//! Fault injection with many writers: eight threads commit in groups (inserting their batches
//! into the memtable at once, or through the leader; the groups one after another, or
//! pipelined) while I/O errors hit the WAL, the tables
//! and the manifest; then the machine dies and loses power. After a clean reopen every key
//! holds a value its writer tried to write, no older than the last write of that writer a
//! synced write of the same writer made durable.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use strata_engine::fs::{FaultFs, FaultKind, FileClasses, FileSystem, MemFs};
use strata_engine::{Db, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";
const WRITERS: usize = 8;
const KEYS_PER_WRITER: usize = 16;
const WRITES_PER_WRITER: u32 = 250;

fn options(fs: Arc<dyn FileSystem>, concurrent: bool, pipelined: bool) -> Options {
    Options::new()
        .with_file_system(fs)
        .with_write_buffer_size(4096)
        .with_block_size(256)
        .with_max_background_jobs(3)
        .with_allow_concurrent_memtable_write(concurrent)
        .with_enable_pipelined_write(pipelined)
}

fn key(writer: usize, k: usize) -> String {
    format!("w{writer}-k{k:02}")
}

/// What one writer did to each of its keys: every write it tried, and the last one it knows
/// durable (acknowledged before or with one of its own acknowledged synced writes).
#[derive(Default, Clone)]
struct History {
    tried: Vec<Vec<u32>>,
    durable: Vec<Option<u32>>,
}

/// One writer: batches of one or two of its keys, every seventh synced, until its writes run
/// out; a failed write is unknown (it may or may not have reached the WAL).
fn write(db: &Db, writer: usize, seed: u64) -> History {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut h = History {
        tried: vec![Vec::new(); KEYS_PER_WRITER],
        durable: vec![None; KEYS_PER_WRITER],
    };
    // Acknowledged writes not yet known durable, per key.
    let mut acked: Vec<Option<u32>> = vec![None; KEYS_PER_WRITER];
    for n in 0..WRITES_PER_WRITER {
        let mut batch = WriteBatch::new();
        let first = rng.random_range(0..KEYS_PER_WRITER);
        let keys = if rng.random_bool(0.5) {
            vec![first, (first + 1) % KEYS_PER_WRITER]
        } else {
            vec![first]
        };
        for &k in &keys {
            batch.put(key(writer, k), n.to_string()).unwrap();
            h.tried[k].push(n);
        }
        let sync = n % 7 == 0;
        if db
            .write(
                &WriteOptions {
                    sync,
                    ..Default::default()
                },
                batch,
            )
            .is_ok()
        {
            for &k in &keys {
                acked[k] = Some(n);
            }
            if sync {
                for (d, a) in h.durable.iter_mut().zip(&acked) {
                    if a.is_some() {
                        *d = *a;
                    }
                }
            }
        }
    }
    h
}

#[test]
fn many_writers_under_faults_keep_every_synced_write() {
    let mut errors = 0;
    for seed in 0..16u64 {
        let concurrent = seed % 4 != 3;
        let pipelined = seed % 8 >= 4;
        let context =
            format!("seed {seed}, concurrent inserts {concurrent}, pipelined {pipelined}");
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()), seed);
        let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
        fault.set_enabled(false);
        let db = Db::open(DIR, options(Arc::clone(&fs), concurrent, pipelined)).unwrap();
        let mut rng = StdRng::seed_from_u64(seed ^ 0xfa17);
        let kind = [
            FaultKind::Append,
            FaultKind::ShortWrite,
            FaultKind::Sync,
            FaultKind::Create,
        ][rng.random_range(0..4)];
        let targets = [FileClasses::WAL, FileClasses::ALL][rng.random_range(0..2)];
        fault.fail_nth(kind, targets, rng.random_range(0..400));
        fault.set_enabled(true);
        let histories: Vec<History> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let db = &db;
                    s.spawn(move || write(db, w, seed * 100 + w as u64))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        if db.put("probe", "after").is_err() {
            errors += 1;
        }
        // The machine dies: the file system stops, then power is lost.
        fault.set_active(false);
        drop(db);
        fault.set_enabled(false);
        fault.set_active(true);
        mem.simulate_power_loss();
        let db = Db::open(DIR, options(Arc::clone(&fs), concurrent, pipelined))
            .unwrap_or_else(|e| panic!("{context}: reopening failed: {e}"));
        for (w, h) in histories.iter().enumerate() {
            for k in 0..KEYS_PER_WRITER {
                let found = db
                    .get(key(w, k))
                    .unwrap()
                    .map(|v| std::str::from_utf8(&v).unwrap().parse::<u32>().unwrap());
                let at = format!("{context}: {} found {found:?}", key(w, k));
                match (found, h.durable[k]) {
                    (None, None) => {}
                    (None, Some(d)) => panic!("{at}, but write {d} was durable"),
                    (Some(f), durable) => {
                        assert!(h.tried[k].contains(&f), "{at}: never written");
                        assert!(
                            durable.is_none_or(|d| f >= d),
                            "{at}: older than {durable:?}"
                        );
                    }
                }
            }
        }
        db.close().unwrap();
    }
    // Faults hit some runs hard enough to stop writes: the errors were met, not avoided.
    assert!(errors > 0, "no run ended read-only");
}
