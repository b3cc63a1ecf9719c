//! Scale mode (docs/scale.md) against the exact simulator: every built-in policy on the four
//! workloads of docs/scale.md, section 'Scale against exact', at a size where the key budget
//! forces a sample of one key in 16. The full-size comparison (10^7 and 10^8 entries) is
//! `scripts/scale-check.sh`.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_policy::{build_policy, registry, CompactionPolicy, PolicySpec};
use strata_sim::{SimConfig, SimError, SimReport, Simulator};
use strata_workload::{PresetParams, WorkloadSpec};

const ENTRIES: u64 = 200_000;
const BUFFER: u64 = 256 << 10;
/// About 11.6 MB of data in entries of 116 bytes: the budget keeps one key in 8 to 16, and a
/// buffer's table about 70 to 140 of its 1,130 keys.
const BUDGET: u64 = 20_000;

fn policy(name: &str) -> Arc<dyn CompactionPolicy> {
    let mut spec = PolicySpec::new(name);
    spec.fill_defaults([
        ("write_buffer_size", BUFFER.to_string()),
        ("target_file_size", BUFFER.to_string()),
        ("expected_data_size", (ENTRIES * 116).to_string()),
    ])
    .unwrap();
    build_policy(&spec).unwrap()
}

fn run(name: &str, workload: &WorkloadSpec, scale: Option<u64>) -> SimReport {
    let config = SimConfig {
        buffer_size: BUFFER,
        scale_keys: scale,
        ..SimConfig::default()
    };
    Simulator::run(policy(name), config, workload, 7).unwrap()
}

#[test]
fn scale_mode_matches_the_exact_simulator_for_every_policy() {
    let params = PresetParams {
        entries: ENTRIES,
        ops: ENTRIES,
        ..PresetParams::default()
    };
    let mut worst = (0.0f64, String::new());
    let mut failures = Vec::new();
    for workload in ["fillrandom", "updaterandom", "updatezipf", "deleterandom"] {
        let spec = WorkloadSpec::preset(workload, &params).unwrap();
        for name in registry::builtin_names() {
            let exact = run(name, &spec, None);
            let scaled = run(name, &spec, Some(BUDGET));
            assert_eq!(exact.sample_one_in, 1);
            assert!(
                scaled.sample_one_in >= 8,
                "{workload} {name}: one in {}",
                scaled.sample_one_in
            );
            // The user's bytes are counted, not sampled.
            assert_eq!(exact.user_bytes, scaled.user_bytes, "{workload} {name}");
            // Deleting as many keys as were loaded leaves a third of them live, and at the end
            // space grows about 10% a flush until a merge cleans it: peak space turns on which
            // flush that merge follows, in either mode (spooky-lazy: flush 94 of 101 exact, 92
            // in scale mode, so durable peaks of 1.85 and 2.21). At this size that is one or
            // two flushes; at the sizes of scripts/scale-check.sh it is within 5%. Here
            // deletes' peak is held to 25%, which still catches tombstones that never drop.
            let sa_tolerance = if workload == "deleterandom" {
                0.25
            } else {
                0.08
            };
            for (what, e, s, tolerance) in [
                ("WA", exact.write_amp, scaled.write_amp, 0.08),
                (
                    "peak SA",
                    exact.peak_space_amp,
                    scaled.peak_space_amp,
                    sa_tolerance,
                ),
            ] {
                let d = s / e - 1.0;
                if d.abs() > worst.0.abs() {
                    worst = (d, format!("{workload} {name} {what}"));
                }
                // Within 5% at scripts/scale-check.sh's sizes; a tree of 200,000 entries has
                // few merges to average over, so 8% here.
                if d.abs() > tolerance {
                    failures.push(format!(
                        "{workload} {name}: {what} exact {e:.3}, scale {s:.3}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    eprintln!("largest difference: {:+.2}% ({})", worst.0 * 100.0, worst.1);
}

#[test]
fn a_fill_of_distinct_keys_is_sized_exactly() {
    // No merge drops anything, so the measured weights make every size exact: the same
    // decisions, the same bytes.
    let params = PresetParams {
        entries: ENTRIES,
        ..PresetParams::default()
    };
    let spec = WorkloadSpec::preset("fillunique", &params).unwrap();
    for name in ["leveled-full", "tiered", "vertiorizon"] {
        let exact = run(name, &spec, None);
        let scaled = run(name, &spec, Some(BUDGET));
        assert_eq!(exact.compactions, scaled.compactions, "{name}");
        let d = scaled.write_amp / exact.write_amp - 1.0;
        assert!(
            d.abs() < 1e-3,
            "{name}: WA {} against {}",
            scaled.write_amp,
            exact.write_amp
        );
    }
}

#[test]
fn kept_keys_stay_within_the_budget() {
    let config = SimConfig {
        buffer_size: BUFFER,
        ..SimConfig::default()
    }
    .with_scale(BUDGET);
    let mut sim = Simulator::new(policy("leveled"), config).unwrap();
    let mut rng = 1u64;
    for _ in 0..400_000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        sim.put(rng >> 1).unwrap();
    }
    let kept: usize = sim
        .version()
        .tables()
        .map(|(_, _, t)| sim.table_keys(t.id).unwrap().len())
        .sum();
    let entries: u64 = sim.version().tables().map(|(_, _, t)| t.entries).sum();
    assert!(kept as u64 <= BUDGET, "{kept} keys kept");
    // 400,000 distinct keys: the tables still count them all, within the sample's error.
    assert!(
        (entries as f64 / 400_000.0 - 1.0).abs() < 0.05,
        "{entries} entries counted"
    );
    let report = sim.finish().unwrap();
    assert!(
        report.sample_one_in >= 32,
        "one in {}",
        report.sample_one_in
    );
}

#[test]
fn scale_mode_refuses_what_needs_every_entry() {
    let refused = |config: SimConfig| match Simulator::new(policy("leveled"), config) {
        Err(SimError::Config(msg)) => msg,
        Ok(_) => panic!("accepted"),
        Err(e) => panic!("{e}"),
    };
    let msg = refused(SimConfig {
        block_size: Some(4096),
        ..SimConfig::default().with_scale(BUDGET)
    });
    assert!(msg.contains("block size"), "{msg}");
    let msg = refused(SimConfig::default().with_scale(0));
    assert!(msg.contains("at least one key"), "{msg}");
}
