//! The partial-merge family in the simulator (docs/partial-merge.md), at a small scale: the
//! paper's steady state (a fill, then 50/50 inserts of new keys and deletes of live ones),
//! counted in data blocks written into levels 1 and below per request.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_policy::{build_policy, PolicySpec};
use strata_sim::{SimConfig, SimReport, Simulator};
use strata_workload::{PresetParams, WorkloadSpec};

const BUFFER: u64 = 16 << 10;

/// Runs `policy` on the steady-state uniform workload: K_0 = 64 KiB, Γ = 10, so about 1 MiB of
/// records makes a three-level tree (L2 holds the data, L1 up to 640 KiB).
fn run(policy: &str, options: &[(&str, &str)], ops: u64) -> SimReport {
    let mut spec = PolicySpec::new(policy);
    for (name, value) in options {
        spec = spec.with(*name, *value);
    }
    spec.fill_defaults([
        ("write_buffer_size", BUFFER.to_string()),
        ("level0_size", "64KiB".to_string()),
        ("target_file_size", "2KiB".to_string()),
        ("merge_rate", "0.1".to_string()),
    ])
    .unwrap();
    let config = SimConfig {
        buffer_size: BUFFER,
        key_size: 4,
        value_size: 100,
        block_size: Some(512),
        check_invariants: true,
        ..SimConfig::default()
    };
    let params = PresetParams {
        entries: 10_000,
        ops,
        key_size: 4,
        ..PresetParams::default()
    };
    let workload = WorkloadSpec::preset("partial-merge-uniform", &params).unwrap();
    Simulator::run(build_policy(&spec).unwrap(), config, &workload, 5).unwrap()
}

/// Data blocks written into levels 1 and below in the measured phase, per request.
fn cost(report: &SimReport) -> f64 {
    let run = report.phases.last().unwrap();
    assert_eq!(run.name, "run");
    run.blocks_written_per_level[1..].iter().sum::<u64>() as f64 / run.write_ops as f64
}

#[test]
fn partial_merges_write_less_than_full_merges_in_steady_state() {
    let full = cost(&run("partial-full-p", &[], 60_000));
    let rr = cost(&run("partial-rr-p", &[], 60_000));
    let best_run = run("partial-choosebest-p", &[], 60_000);
    assert!(
        best_run.policy_seconds > 0.0,
        "ChooseBest's scans took no time"
    );
    let best = cost(&best_run);
    eprintln!("blocks per request: full {full:.3}, rr {rr:.3}, choosebest {best:.3}");
    assert!(best < 0.95 * full, "choosebest {best} vs full {full}");
    assert!(rr < 0.95 * full, "rr {rr} vs full {full}");
}

#[test]
fn mixed_learns_beta_in_steady_state_and_keeps_the_cheaper_choice() {
    let report = run("partial-mixed-p", &[], 200_000);
    let state: serde_json::Value = serde_json::from_str(&report.policy_state).unwrap();
    let learner = &state["mixed"];
    assert_eq!(learner["stage"], "done", "{learner:#}");
    assert_eq!(learner["height"], 3);
    let betas: Vec<(f64, f64)> = learner["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["parameter"] == "beta")
        .map(|m| (m["value"].as_f64().unwrap(), m["cost"].as_f64().unwrap()))
        .collect();
    assert_eq!(betas.len(), 2, "{learner:#}");
    assert!(betas.iter().all(|&(_, c)| c > 0.0));
    // β = false is measured first, then β = true; the cheaper one stays.
    assert_eq!((betas[0].0, betas[1].0), (0.0, 1.0));
    let chosen = learner["bottom_full"].as_bool().unwrap();
    assert_eq!(chosen, betas[1].1 <= betas[0].1, "{betas:?}");
    // Learning ended within the run, and after it started.
    let (start, end) = (
        learner["started_at_flush"].as_u64().unwrap(),
        learner["finished_at_flush"].as_u64().unwrap(),
    );
    assert!(start < end, "{learner:#}");
}
