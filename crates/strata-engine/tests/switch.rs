//! Live policy switches (`Db::set_policy`, a different policy at open): every policy hands its
//! tree to every other without losing a key, the database reopens with the policy it records,
//! and crashes in the middle of handovers lose no acknowledged write.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_engine::fs::{FaultFs, FileSystem, MemFs};
use strata_engine::{Db, Error, Options, WriteBatch, WriteOptions};
use strata_policy::{build_policy, testing, CompactionPolicy, PolicySpec};

const DIR: &str = "/db";
const BUFFER: u64 = 8 << 10;

fn policy(name: &str) -> Arc<dyn CompactionPolicy> {
    let mut spec: PolicySpec = name.parse().unwrap();
    spec.fill_defaults([
        ("write_buffer_size", BUFFER.to_string()),
        ("size_ratio", "3".to_string()),
        ("target_file_size", "4096".to_string()),
        ("expected_data_size", "256KiB".to_string()),
        ("levels", "3".to_string()),
        ("num_levels", "5".to_string()),
        ("bucket_size", "2KiB".to_string()),
    ])
    .unwrap();
    build_policy(&spec).unwrap()
}

fn options(fs: Arc<dyn FileSystem>, synchronous: bool) -> Options {
    Options::new()
        .with_file_system(fs)
        .with_write_buffer_size(BUFFER)
        .with_block_size(512)
        .with_max_background_jobs(3)
        .with_synchronous_compaction(synchronous)
}

/// `n` random puts and deletes over 800 keys, each acknowledged (synced when `sync`) before
/// the model takes it.
fn write(db: &Db, rng: &mut StdRng, model: &mut BTreeMap<String, String>, n: usize, sync: bool) {
    let options = if sync {
        WriteOptions::synced()
    } else {
        WriteOptions::default()
    };
    for _ in 0..n {
        let key = format!("key{:04}", rng.random_range(0..800u32));
        let mut batch = WriteBatch::new();
        if rng.random_ratio(1, 5) {
            batch.delete(&key).unwrap();
            db.write(&options, batch).unwrap();
            model.remove(&key);
        } else {
            let value = format!("{key} v{}", rng.random::<u32>());
            batch.put(&key, &value).unwrap();
            db.write(&options, batch).unwrap();
            model.insert(key, value);
        }
    }
}

fn check(db: &Db, model: &BTreeMap<String, String>, what: &str) {
    let stored: BTreeMap<String, String> = db
        .range::<&str, _>(..)
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            (
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect();
    assert!(
        stored == *model,
        "{what}: the database and the model differ"
    );
    for (k, v) in model.iter().step_by(37) {
        assert_eq!(
            db.get(k).unwrap().as_deref(),
            Some(v.as_bytes()),
            "{what}: {k}"
        );
    }
}

fn recorded_name(db: &Db) -> String {
    let version = db.version();
    let spec = version.policy().unwrap();
    name_of(spec)
}

/// The policy name of a specification (`name` or `name:option=value,...`).
fn name_of(spec: &str) -> String {
    spec.split(':').next().unwrap().to_string()
}

#[test]
fn every_policy_hands_its_tree_to_every_other_and_the_database_reopens_with_it() {
    let names = testing::policies_to_test();
    for (i, from) in names.iter().enumerate() {
        for to in &names {
            if from == to {
                continue;
            }
            let what = format!("{from} -> {to}");
            let to_name = name_of(to);
            let mem = MemFs::new();
            let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
            let db = Db::open(
                DIR,
                options(Arc::clone(&fs), true).with_policy(policy(from)),
            )
            .unwrap();
            let mut rng = StdRng::seed_from_u64(i as u64);
            let mut model = BTreeMap::new();
            write(&db, &mut rng, &mut model, 1_200, false);
            db.set_policy(policy(to)).unwrap();
            // Synchronously, the handover is over when the switch returns.
            assert!(!db.version().in_handover(), "{what}");
            assert_eq!(recorded_name(&db), to_name, "{what}");
            assert_eq!(db.policy().name(), to_name, "{what}");
            check(&db, &model, &what);
            write(&db, &mut rng, &mut model, 1_200, false);
            check(&db, &model, &what);
            db.close().unwrap();
            // Default options reopen with the recorded policy, options and all.
            let db = Db::open(DIR, options(fs, true)).unwrap();
            assert_eq!(db.policy().name(), to_name, "{what}");
            assert_eq!(
                PolicySpec::of(db.policy().as_ref()),
                PolicySpec::of(policy(to).as_ref()),
                "{what}"
            );
            check(&db, &model, &format!("{what}, reopened"));
            db.close().unwrap();
        }
    }
}

#[test]
fn another_policy_at_open_is_a_switch_and_read_only_handles_cannot_switch() {
    let mem = MemFs::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let db = Db::open(
        DIR,
        options(Arc::clone(&fs), true).with_policy(policy("tiered")),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut model = BTreeMap::new();
    write(&db, &mut rng, &mut model, 2_000, false);
    db.close().unwrap();
    let db = Db::open(
        DIR,
        options(Arc::clone(&fs), true).with_policy(policy("leveled")),
    )
    .unwrap();
    assert_eq!(recorded_name(&db), "leveled");
    assert!(db.version().in_handover());
    check(&db, &model, "tiered reopened as leveled");
    db.wait_for_compactions().unwrap();
    assert!(!db.version().in_handover());
    check(&db, &model, "tiered handed over to leveled");
    db.close().unwrap();
    let reader = Db::open_read_only(DIR, options(Arc::clone(&fs), true)).unwrap();
    assert_eq!(reader.policy().name(), "leveled");
    assert!(matches!(
        reader.set_policy(policy("tiered")),
        Err(Error::ReadOnly(_))
    ));
    reader.close().unwrap();
    // The same policy again changes nothing: no switch, no handover.
    let db = Db::open(DIR, options(fs, true).with_policy(policy("leveled"))).unwrap();
    assert!(!db.version().in_handover());
    db.close().unwrap();
}

/// Crashes at random moments of handovers, with background jobs running: after each, the
/// database opens with the old policy or the new one, every synced write is there, and the
/// handover, if the crash cut it short, goes on to the end.
#[test]
fn crashes_during_handovers_lose_no_acknowledged_write() {
    let names = testing::policies_to_test();
    let mem = MemFs::new();
    let mut rng = StdRng::seed_from_u64(2026);
    let mut model = BTreeMap::new();
    let mut current = names[0].to_string();
    let mut crashed_in_handover = 0;
    let mut cycles = 0;
    while crashed_in_handover < 40 {
        cycles += 1;
        assert!(
            cycles < 400,
            "only {crashed_in_handover} crashes hit a handover"
        );
        let faults = FaultFs::new(Arc::new(mem.clone()), cycles);
        let db = Db::open(DIR, options(Arc::new(faults.clone()), false)).unwrap();
        let recorded = recorded_name(&db);
        assert!(
            recorded == current,
            "cycle {cycles}: the database records {recorded}, not {current}"
        );
        check(&db, &model, &format!("cycle {cycles}, reopened"));
        let n = rng.random_range(50..400);
        write(&db, &mut rng, &mut model, n, true);
        let to = names[rng.random_range(0..names.len())];
        db.set_policy(policy(to)).unwrap();
        current = name_of(to);
        let n = rng.random_range(0..300);
        write(&db, &mut rng, &mut model, n, true);
        if db.version().in_handover() {
            crashed_in_handover += 1;
        }
        // The process dies: nothing more reaches storage, and unsynced bytes are lost.
        faults.set_active(false);
        drop(db);
        mem.simulate_power_loss();
    }
    eprintln!("{cycles} crash cycles, {crashed_in_handover} of them during a handover");
    let db = Db::open(DIR, options(Arc::new(mem.clone()), false)).unwrap();
    db.wait_for_compactions().unwrap();
    assert!(!db.version().in_handover(), "the last handover ended");
    check(&db, &model, "at the end");
    db.close().unwrap();
}
