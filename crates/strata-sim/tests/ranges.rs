//! Range deletions in the simulator (`Simulator::delete_range`): for every built-in policy, the
//! keys a reader would find after random puts, deletes and range deletions are the model's,
//! and a merge with nothing below its output drops the range tombstones with what they cover.
//! (That the engine writes the same bytes is `differential.rs`'s.)

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use strata_policy::{build_policy, testing, PolicySpec};
use strata_sim::{SimConfig, Simulator};

fn policy(name: &str) -> PolicySpec {
    let mut spec: PolicySpec = name.parse().unwrap();
    spec.fill_defaults([
        ("size_ratio", "3"),
        ("write_buffer_size", "8KiB"),
        ("target_file_size", "4KiB"),
        ("expected_data_size", "512KiB"),
        ("bucket_size", "4KiB"),
    ])
    .unwrap();
    spec
}

#[test]
fn every_policy_finds_the_models_keys_under_range_deletions() {
    for (i, name) in testing::policies_to_test().iter().enumerate() {
        let config = SimConfig {
            key_size: 8,
            value_size: 100,
            buffer_size: 8 << 10,
            final_flush: false,
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(build_policy(&policy(name)).unwrap(), config).unwrap();
        let mut model = BTreeSet::new();
        let mut rng = StdRng::seed_from_u64(500 + i as u64);
        let mut ranges = 0;
        for step in 0..6_000 {
            let key = rng.random_range(0..1_000u64);
            match rng.random_range(0..100) {
                0..=79 => {
                    sim.put(key).unwrap();
                    model.insert(key);
                }
                80..=94 => {
                    sim.delete(key).unwrap();
                    model.remove(&key);
                }
                _ => {
                    let end = key + rng.random_range(0..40);
                    sim.delete_range(key, end).unwrap();
                    model.retain(|k| !(key..end).contains(k));
                    ranges += 1;
                }
            }
            if step % 1_000 == 999 {
                assert_eq!(sim.live_keys(), model, "{name}, step {step}");
            }
        }
        assert!(ranges > 200);
        sim.flush().unwrap();
        assert_eq!(sim.live_keys(), model, "{name}, flushed");
        sim.finish().unwrap();
    }
}

#[test]
fn a_merge_with_nothing_below_drops_the_tombstones_and_what_they_cover() {
    let config = SimConfig {
        key_size: 8,
        value_size: 100,
        buffer_size: 8 << 10,
        ..SimConfig::default()
    };
    // Leveled over two levels' worth of data: L0's runs soon merge into the last level, with
    // nothing below it.
    let mut spec: PolicySpec = "leveled".parse().unwrap();
    spec.fill_defaults([
        ("write_buffer_size", "8KiB"),
        ("target_file_size", "64KiB"),
        ("expected_data_size", "64KiB"),
    ])
    .unwrap();
    let mut sim = Simulator::new(build_policy(&spec).unwrap(), config).unwrap();
    for key in 0..60 {
        sim.put(key).unwrap();
    }
    sim.flush().unwrap();
    sim.delete_range(10, 30).unwrap();
    sim.flush().unwrap();
    let held = |sim: &Simulator| -> (u64, u64) {
        sim.version().tables().fold((0, 0), |(e, r), (_, _, t)| {
            (e + t.entries, r + t.range_deletions)
        })
    };
    let (_, ranges) = held(&sim);
    assert!(
        ranges > 0,
        "the range tombstone reached a table:\n{}",
        sim.version()
    );
    // Keep writing until a merge with nothing below takes both tables in.
    let mut merged = false;
    for key in 1_000..4_000 {
        sim.put(key).unwrap();
        let (_, ranges) = held(&sim);
        if ranges == 0 {
            merged = true;
            break;
        }
    }
    assert!(
        merged,
        "the tombstone was never dropped:\n{}",
        sim.version()
    );
    let live = sim.live_keys();
    assert!((10..30).all(|k| !live.contains(&k)));
    assert!((0..10).chain(30..60).all(|k| live.contains(&k)));
}
