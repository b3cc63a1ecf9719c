//! The exact tombstone rule answers the same whether it searches every older run or counts the
//! tables holding each key (`SimConfig::tombstone_index_runs`, `holders.rs`): every built-in
//! policy on a workload that deletes as many keys as it loads, exact, timed and in scale mode.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_policy::{build_policy, registry, PolicySpec};
use strata_sim::{SimConfig, SimReport, Simulator, Timing};
use strata_workload::{PresetParams, WorkloadSpec};

const ENTRIES: u64 = 60_000;
const BUFFER: u64 = 128 << 10;

fn run(name: &str, spec: &WorkloadSpec, base: &SimConfig, index_runs: usize) -> SimReport {
    let mut policy = PolicySpec::new(name);
    policy
        .fill_defaults([
            ("write_buffer_size", BUFFER.to_string()),
            ("target_file_size", BUFFER.to_string()),
            ("expected_data_size", (ENTRIES * 116).to_string()),
        ])
        .unwrap();
    let config = SimConfig {
        tombstone_index_runs: index_runs,
        ..base.clone()
    };
    Simulator::run(build_policy(&policy).unwrap(), config, spec, 3).unwrap()
}

/// What the tombstone rule decides shows in: bytes compactions write, space, tables and runs.
fn outcome(r: &SimReport) -> (u64, u64, u64, u64, u64, u64) {
    (
        r.compaction_bytes_written,
        r.compactions,
        r.flushes,
        r.peak_space_bytes,
        r.final_tables,
        r.max_sorted_runs,
    )
}

#[test]
fn counting_holders_decides_as_searching_older_runs_does() {
    let params = PresetParams {
        entries: ENTRIES,
        ops: ENTRIES,
        ..PresetParams::default()
    };
    let spec = WorkloadSpec::preset("deleterandom", &params).unwrap();
    let exact = SimConfig {
        buffer_size: BUFFER,
        ..SimConfig::default()
    };
    let timed = SimConfig {
        timing: Timing::Timed {
            ingest_bytes_per_sec: 64e6,
            job_bytes_per_sec: 32e6,
            max_jobs: 3,
            reserved_jobs: 1,
        },
        ..exact.clone()
    };
    // Scale mode thins the index with the tables.
    let scaled = exact.clone().with_scale(2_000);
    for (mode, base) in [("exact", &exact), ("timed", &timed), ("scale", &scaled)] {
        for name in registry::builtin_names() {
            let searched = run(name, &spec, base, usize::MAX);
            let counted = run(name, &spec, base, 0);
            assert_eq!(outcome(&searched), outcome(&counted), "{mode} {name}");
            if mode == "scale" {
                assert!(counted.sample_one_in > 1, "{name}: the sample never halved");
            }
        }
    }
}
