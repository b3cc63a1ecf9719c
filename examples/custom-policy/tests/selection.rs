//! The policy, written outside Strata's crates and registered at start-up, is selected by name
//! by the engine, by the simulator, and by `strata sim` and `strata bench`.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_engine::{Db, Options};
use strata_example_custom_policy::{register, NAME};
use strata_policy::{build_policy, PolicySpec};
use strata_sim::{SimConfig, Simulator};
use strata_workload::{PresetParams, WorkloadSpec};

#[test]
fn the_engine_runs_it_by_name_and_keeps_every_key() {
    register();
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        Options::new()
            .with_write_buffer_size(64 << 10)
            .with_synchronous_compaction(true)
            .with_policy_named("size-tiered:min_threshold=3,target_file_size=32KiB")
            .unwrap()
    };
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.policy().name(), NAME);
    let value = vec![b'v'; 100];
    for i in 0..20_000u32 {
        db.put(format!("key{:08}", i.wrapping_mul(2_654_435_761)), &value)
            .unwrap();
    }
    db.flush().unwrap();
    let metrics = db.metrics();
    assert!(metrics.flushes >= 20, "{} flushes", metrics.flushes);
    assert!(metrics.compactions > 0, "size-tiered merged nothing");
    // Merges keep the run count far below the number of flushes.
    let runs = db.version().level(1).runs().len() as u64;
    assert!(
        runs < metrics.flushes / 2,
        "{runs} runs after {} flushes",
        metrics.flushes
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in (0..20_000u32).step_by(97) {
        let key = format!("key{:08}", i.wrapping_mul(2_654_435_761));
        assert_eq!(db.get(&key).unwrap().as_deref(), Some(&value[..]), "{key}");
    }
}

#[test]
fn the_simulator_runs_it_by_name() {
    register();
    let policy =
        build_policy(&"size-tiered:min_threshold=4".parse::<PolicySpec>().unwrap()).unwrap();
    let config = SimConfig {
        buffer_size: 64 << 10,
        check_invariants: true,
        ..SimConfig::default()
    };
    let params = PresetParams {
        entries: 50_000,
        ..PresetParams::default()
    };
    let workload = WorkloadSpec::preset("fillunique", &params).unwrap();
    let report = Simulator::run(policy, config, &workload, 42).unwrap();
    assert_eq!(report.policy, NAME);
    assert!(report.compactions > 0);
    // Every byte is written at the flush and once per bucket merge it takes part in:
    // log_4(flushes) ≈ 3.6 merges for 88 flushes, so WA stays well below 6.
    assert!(
        report.write_amp > 2.0 && report.write_amp < 6.0,
        "WA {}",
        report.write_amp
    );
}

#[test]
fn strata_sim_and_bench_select_it_by_name() {
    register();
    strata_cli::run([
        "strata",
        "sim",
        "--policy",
        "size-tiered,tiered",
        "--entries",
        "20000",
        "--buffer-size",
        "64KiB",
        "--json",
    ])
    .unwrap();
    let report = tempfile::tempdir().unwrap();
    strata_cli::run([
        "strata",
        "bench",
        "--workload",
        "fillunique",
        "--entries",
        "5000",
        "--policies",
        "size-tiered:min_threshold=3",
        "--peers",
        "none",
        "--write-buffer-size",
        "64KiB",
        "--quiet",
        "--json",
        "--report",
        report.path().to_str().unwrap(),
    ])
    .unwrap();
    let results = std::fs::read_to_string(report.path().join("results.json")).unwrap();
    assert!(results.contains("size-tiered:min_threshold=3"), "{results}");
}
