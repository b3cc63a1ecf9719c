//! Vertiorizon in the simulator: the phase cycle (horizontal part → V1 → V2) with dynamic
//! resizing, skew adaptation from the estimated α, and the dynamic Bloom layout.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_policy::{build_policy, PolicySpec, VertiorizonState};
use strata_sim::{SimConfig, SimReport, Simulator};

const BUFFER: u64 = 64 << 10;
/// Entries of 16-byte keys and 100-byte values per buffer.
const PER_BUFFER: u64 = BUFFER / 116;

fn simulator(spec: &str) -> Simulator {
    let mut spec: PolicySpec = spec.parse().unwrap();
    spec.fill_defaults([
        ("write_buffer_size", BUFFER.to_string()),
        ("target_file_size", BUFFER.to_string()),
    ])
    .unwrap();
    let config = SimConfig {
        buffer_size: BUFFER,
        trace: true,
        check_invariants: true,
        ..SimConfig::default()
    };
    Simulator::new(build_policy(&spec).unwrap(), config).unwrap()
}

/// Puts `buffers` buffers of distinct keys in a scrambled order.
fn fill(sim: &mut Simulator, buffers: u64) {
    let n = buffers * PER_BUFFER;
    for i in 0..n {
        sim.put(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 8).unwrap();
    }
}

fn state(sim: &Simulator) -> VertiorizonState {
    sim.version().policy_state().decode().unwrap().unwrap()
}

#[test]
fn phases_move_the_horizontal_part_down_and_v1_spills_into_v2() {
    let mut sim = simulator(
        "vertiorizon:horizontal_buffers=8,size_ratio=3,max_horizontal_levels=3,bloom_layout=uniform",
    );
    fill(&mut sim, 240);
    let phase_ends = sim
        .trace()
        .iter()
        .filter(|e| e.reason.starts_with("phase") && e.reason.contains(" full ("))
        .count();
    let end = state(&sim);
    let v1 = sim.version().level(4).size();
    let v2 = sim.version().level(5).size();
    // V2's capacity n·T²·B = 72 buffers is passed, so n grew by a third (⌈8·4/3⌉ = 11) at least once.
    assert!(end.n >= 11, "n = {}", end.n);
    assert!(phase_ends >= 240 / 16, "{phase_ends} phase boundaries");
    assert!(v2 > 0, "partial merges reached V2");
    // After the last partial merge V1 is within n·T/√2 buffers (plus the table that crossed it).
    let capacity = (end.n as f64 * 3.0 / std::f64::consts::SQRT_2 * BUFFER as f64) as u64;
    assert!(v1 <= capacity + BUFFER, "V1 {v1} > {capacity}");
    // Nothing but the horizontal part sits above V1.
    for level in 1..=3 {
        let runs = sim.version().level(level).runs().len();
        assert!(runs <= 8, "L{level} holds {runs} runs");
    }
    // Levels between the horizontal part and V1 stay empty whatever ℓ the tuning picked.
    assert!((end.levels + 1..4).all(|l| sim.version().level(l).is_empty()));
    let live = sim.live_keys().len() as u64;
    let report = sim.finish().unwrap();
    assert_eq!(live, 240 * PER_BUFFER, "no key lost");
    assert!(report.write_amp > 1.0);
}

/// Each buffer: the same `hot` keys and `cold` keys never seen before.
fn hot_and_cold(spec: &str, hot: u64, buffers: u64) -> (SimReport, usize) {
    let mut sim = simulator(spec);
    let cold = PER_BUFFER - hot;
    let mut next_cold = 1 << 40;
    for _ in 0..buffers {
        for k in 0..hot {
            sim.put(k).unwrap();
        }
        for _ in 0..cold {
            sim.put(next_cold).unwrap();
            next_cold += 1;
        }
    }
    let merges = sim
        .trace()
        .iter()
        .filter(|e| e.reason.contains(": L1 -> L2;"))
        .count();
    (sim.finish().unwrap(), merges)
}

#[test]
fn skew_adaptation_raises_level_one_threshold_and_saves_writes() {
    // Three quarters of every flush are the same hot keys: α ≈ 0.75, δ = 2.
    let hot = PER_BUFFER * 3 / 4;
    let base = "vertiorizon:horizontal_buffers=60,horizontal_merge=leveling,horizontal_levels=2,bloom_layout=uniform";
    let (adaptive, adaptive_merges) = hot_and_cold(base, hot, 58);
    let (fixed, fixed_merges) = hot_and_cold(&format!("{base},skew_threshold=0"), hot, 58);
    assert!(
        adaptive_merges < fixed_merges,
        "{adaptive_merges} merges into L2 with δ from α, {fixed_merges} without"
    );
    assert!(
        adaptive.write_amp < fixed.write_amp,
        "WA {} with δ from α, {} without",
        adaptive.write_amp,
        fixed.write_amp
    );
}

#[test]
fn dynamic_bloom_layout_lowers_lookup_cost_for_the_same_memory() {
    let run = |layout: &str| {
        let mut sim = simulator(&format!(
            "leveled:size_ratio=4,bloom_bits_per_key=5,bloom_layout={layout}"
        ));
        fill(&mut sim, 200);
        let memory: f64 = sim
            .version()
            .tables()
            .map(|(_, _, t)| t.entries as f64 * t.bloom_bits_per_key)
            .sum();
        (sim.finish().unwrap(), memory)
    };
    let (uniform, uniform_memory) = run("uniform");
    let (dynamic, dynamic_memory) = run("dynamic");
    assert!(
        dynamic.lookup_cost < uniform.lookup_cost,
        "lookup cost {} dynamic vs {} uniform",
        dynamic.lookup_cost,
        uniform.lookup_cost
    );
    // Filters are sized when their tables are written, so memory follows the average only
    // approximately: within a fifth.
    let ratio = dynamic_memory / uniform_memory;
    assert!((0.8..1.2).contains(&ratio), "filter memory ratio {ratio}");
}
