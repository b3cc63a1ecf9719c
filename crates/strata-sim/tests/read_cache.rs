//! The simulated block cache of the workload's reads (`SimConfig::read_cache_bytes`): lookups
//! and scans find their keys where the tree holds them, and a block read again is a hit.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::seq::{IndexedRandom, SliceRandom};
use rand::SeedableRng;
use strata_policy::{build_policy, PolicySpec};
use strata_sim::{ReadCacheReport, SimConfig, Simulator};

const BUFFER: u64 = 64 << 10;

fn simulator(policy: &str, cache: u64, scale: Option<u64>) -> Simulator {
    let mut spec = PolicySpec::new(policy);
    spec.fill_defaults([
        ("size_ratio", "4".to_string()),
        ("write_buffer_size", BUFFER.to_string()),
        ("target_file_size", BUFFER.to_string()),
    ])
    .unwrap();
    let config = SimConfig {
        buffer_size: BUFFER,
        read_cache_bytes: Some(cache),
        scale_keys: scale,
        ..SimConfig::default()
    };
    Simulator::new(build_policy(&spec).unwrap(), config).unwrap()
}

fn counts(sim: Simulator) -> ReadCacheReport {
    sim.finish().unwrap().read_cache.unwrap()
}

#[test]
fn a_block_read_again_is_a_hit_and_the_buffer_reads_none() {
    let mut sim = simulator("leveled", 1 << 20, None);
    // 565 entries of 116 bytes fill the 64 KiB buffer: 20,000 leave the last 225 buffered.
    for key in 0..20_000 {
        sim.put(key).unwrap();
    }
    sim.begin_phase("reads");
    sim.read(100);
    sim.read(100);
    sim.read(19_999);
    let c = counts(sim);
    assert_eq!(c.capacity_bytes, 1 << 20);
    assert_eq!((c.lookups, c.lookups_in_buffer), (3, 1));
    assert_eq!((c.lookup_blocks, c.lookup_block_hits), (2, 1));
}

#[test]
fn counts_start_over_at_each_phase() {
    let mut sim = simulator("leveled", 1 << 20, None);
    for key in 0..5_000 {
        sim.put(key).unwrap();
    }
    sim.read(10);
    sim.begin_phase("reads");
    sim.read(10);
    let c = counts(sim);
    // The block the first phase read is still cached; only the second read is counted.
    assert_eq!((c.lookups, c.lookup_blocks, c.lookup_block_hits), (1, 1, 1));
}

/// The share of lookups' blocks found cached, reading in three passes (shuffled) the 3,000
/// keys written last, or 3,000 keys drawn uniformly, after 60,000 keys written in a shuffled
/// order, with a cache of 128 blocks.
fn hit_share(policy: &str, recent: bool) -> f64 {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut order: Vec<u64> = (0..60_000).collect();
    order.shuffle(&mut rng);
    let mut sim = simulator(policy, 512 << 10, None);
    for &key in &order {
        sim.put(key).unwrap();
    }
    sim.begin_phase("reads");
    let mut keys = if recent {
        order[order.len() - 3_000..].to_vec()
    } else {
        order.choose_multiple(&mut rng, 3_000).copied().collect()
    };
    for _ in 0..3 {
        keys.shuffle(&mut rng);
        for &key in &keys {
            sim.read(key);
        }
    }
    let c = counts(sim);
    assert!(c.lookup_blocks > 0);
    c.lookup_block_hits as f64 / c.lookup_blocks as f64
}

#[test]
fn recent_keys_stay_cached_where_young_runs_hold_them_alone() {
    // The last 3,000 keys are about 5 flushes. Tiered keeps them in young runs of recent keys
    // only (about 90 blocks, within the cache's 128); leveled merges some of them into a level
    // among older keys, a block per key; 3,000 keys drawn from all of them lie in about as many
    // blocks whatever the layout.
    let tiered = hit_share("tiered", true);
    let leveled = hit_share("leveled", true);
    let uniform = hit_share("tiered", false);
    assert!(tiered > 0.9, "tiered {tiered}");
    assert!(leveled < tiered - 0.05, "leveled {leveled} tiered {tiered}");
    assert!(uniform < 0.5, "uniform {uniform}");
}

#[test]
fn a_scan_reads_each_block_of_its_keys_once() {
    let mut sim = simulator("leveled", 1 << 20, None);
    for key in 0..20_000 {
        sim.put(key).unwrap();
    }
    sim.begin_phase("scans");
    // 4,096-byte blocks of 124-byte entries hold 33: 100 keys lie in 4 or 5 blocks of the one
    // run holding them (sequential keys overlap in no other run).
    sim.scan_from(1_000, 100);
    sim.scan_from(1_000, 100);
    let c = counts(sim);
    assert_eq!(c.scans, 2);
    assert!((8..=10).contains(&c.scan_blocks), "{c:?}");
    assert_eq!(c.scan_block_hits, c.scan_blocks / 2);
}

#[test]
fn scale_mode_reports_no_cache() {
    let mut sim = simulator("leveled", 1 << 20, Some(1_000));
    for key in 0..20_000 {
        sim.put(key).unwrap();
    }
    sim.read(10);
    assert!(sim.finish().unwrap().read_cache.is_none());
}
