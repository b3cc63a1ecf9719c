//! The horizontal schemes in the simulator against the Vertiorizon paper's traces and lemmas.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_meta::Version;
use strata_policy::math::{binomial, tiering_read_cost};
use strata_policy::{
    HorizontalLeveled, HorizontalLeveledState, HorizontalTiered, HorizontalTieredState,
};
use strata_sim::{SimConfig, Simulator, TraceEvent};

/// Every put fills the buffer, so each put is one flush.
const ENTRY: u64 = 116;

fn config() -> SimConfig {
    SimConfig {
        buffer_size: ENTRY,
        trace: true,
        check_invariants: true,
        final_flush: false,
        ..SimConfig::default()
    }
}

fn tiered_sim(levels: usize, k: u64) -> (Simulator, u64) {
    let flushes = binomial(k + levels as u64 - 1, levels as u64) as u64;
    let policy = HorizontalTiered::new()
        .with_levels(levels)
        .with_write_buffer_size(ENTRY)
        .with_expected_data_size(flushes * ENTRY);
    assert_eq!(
        policy.k(),
        k,
        "k for {flushes} flushes over {levels} levels"
    );
    (Simulator::new(Arc::new(policy), config()).unwrap(), flushes)
}

/// A cascade from level 1 to level j is one merge; the paper lists it as j single-level steps.
fn steps(trace: &[TraceEvent]) -> Vec<(u64, usize, usize)> {
    let mut out = Vec::new();
    for e in trace.iter().filter(|e| e.is_compaction()) {
        // A cascade merges every level from the shallowest input down to the output; levels
        // in between may be empty, so they appear in no input.
        let (Some(to), Some(&from)) = (e.output_level, e.input_levels.first()) else {
            continue;
        };
        for level in from..to {
            out.push((e.flush, level, level + 1));
        }
    }
    out
}

/// The counters, or `None` before the first flush sets them (they start at k).
fn tiered_counters(v: &Version) -> Option<Vec<i64>> {
    let state = v.policy_state().decode::<HorizontalTieredState>().unwrap();
    state.map(|s| s.counters)
}

#[test]
fn horizontal_tiering_matches_the_papers_traces() {
    let (mut sim, n) = tiered_sim(2, 3);
    assert_eq!(n, 6);
    for key in 0..n {
        sim.put(key).unwrap();
    }
    assert_eq!(steps(sim.trace()), vec![(3, 1, 2), (5, 1, 2), (6, 1, 2)]);

    let (mut sim, n) = tiered_sim(3, 3);
    assert_eq!(n, 10);
    for key in 0..n {
        sim.put(key).unwrap();
    }
    let expected = vec![
        (3, 1, 2),
        (5, 1, 2),
        (6, 1, 2),
        (6, 2, 3),
        (8, 1, 2),
        (9, 1, 2),
        (9, 2, 3),
        (10, 1, 2),
        (10, 2, 3),
    ];
    assert_eq!(steps(sim.trace()), expected);
    // The cascades at flushes 6, 9 and 10 each ran as one merge.
    assert_eq!(sim.trace().iter().filter(|e| e.is_compaction()).count(), 6);
}

#[test]
fn counters_reach_zero_after_exactly_the_binomial_number_of_flushes() {
    for levels in 2..=4 {
        for k in 1..=7 {
            let (mut sim, n) = tiered_sim(levels, k);
            for key in 0..n {
                let counters = tiered_counters(sim.version()).unwrap_or(vec![k as i64; levels]);
                assert!(
                    counters.iter().any(|&c| c != 0),
                    "levels {levels}, k {k}: all counters 0 after only {key} flushes"
                );
                sim.put(key).unwrap();
            }
            let counters = tiered_counters(sim.version()).unwrap();
            assert!(
                counters.iter().all(|&c| c == 0),
                "levels {levels}, k {k}: counters {counters:?} after {n} flushes"
            );
            // Lemma 4.1's end state: level ℓ holds k runs, every other level is empty.
            let v = sim.version();
            assert_eq!(v.level(levels).runs().len() as u64, k);
            assert_eq!(v.run_count() as u64, k);
        }
    }
}

#[test]
fn runs_alive_between_flushes_sum_to_lemma_9_4() {
    for levels in 1..=4 {
        for k in 1..=7 {
            let (mut sim, n) = tiered_sim(levels, k);
            let mut runs_alive = 0u128;
            for key in 0..n {
                sim.put(key).unwrap();
                if key + 1 < n {
                    runs_alive += sim.version().run_count() as u128;
                }
            }
            assert_eq!(
                runs_alive,
                tiering_read_cost(n, levels),
                "levels {levels}, k {k}, {n} flushes"
            );
        }
    }
}

#[test]
fn horizontal_leveling_with_two_levels_merges_at_triangular_numbers() {
    let policy = HorizontalLeveled::new().with_levels(2);
    let mut sim = Simulator::new(Arc::new(policy), config()).unwrap();
    for key in 0..66 {
        sim.put(key).unwrap();
    }
    let into_l2: Vec<u64> = sim
        .trace()
        .iter()
        .filter(|e| e.is_compaction() && e.output_level == Some(2))
        .map(|e| e.flush)
        .collect();
    assert_eq!(into_l2, vec![1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 66]);
    let state: HorizontalLeveledState = sim.version().policy_state().decode().unwrap().unwrap();
    assert_eq!(state.counters, vec![0, 11]);
}

#[test]
fn horizontal_leveling_cascades_run_as_one_merge() {
    // With three levels the very first flush cascades from L1 to L3 in a single merge.
    let policy = HorizontalLeveled::new().with_levels(3);
    let mut sim = Simulator::new(Arc::new(policy), config()).unwrap();
    sim.put(1).unwrap();
    let trace: Vec<TraceEvent> = sim
        .trace()
        .iter()
        .filter(|e| e.is_compaction())
        .cloned()
        .collect();
    assert_eq!(trace.len(), 1);
    assert_eq!(trace[0].input_levels, vec![1]);
    assert_eq!(trace[0].output_level, Some(3));
    assert_eq!(steps(&trace), vec![(1, 1, 2), (1, 2, 3)]);
}
