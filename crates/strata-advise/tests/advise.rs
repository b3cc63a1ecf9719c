//! The advisor's parts: a calibration's file round trip and checks, the estimate's response to
//! each count it prices, and the simulating advisor's predictions.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_advise::{
    estimate, workload_like, Calibration, OperationMix, Regime, SimulatingAdvisor,
};
use strata_meta::Version;
use strata_policy::autopilot::{AdviceRequest, Advisor, WorkloadWindow};
use strata_policy::{build_policy, PolicySpec};
use strata_sim::{SimConfig, Simulator};

#[test]
fn a_calibration_round_trips_and_bad_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Calibration::assumed();
    c.measured_at = 1_700_000_000;
    c.save(dir.path()).unwrap();
    let back = Calibration::load(dir.path()).unwrap();
    assert_eq!(back, c);
    assert!(back.is_measured());

    let file = dir.path().join("bad.json");
    let mut bad = c.clone();
    bad.cpu.merge_ns_per_entry = 0.0;
    std::fs::write(&file, serde_json::to_string(&bad).unwrap()).unwrap();
    let e = Calibration::load(&file).unwrap_err().to_string();
    assert!(e.contains("cpu.merge_ns_per_entry is 0"), "{e}");
    std::fs::write(&file, "{").unwrap();
    let e = Calibration::load(&file).unwrap_err().to_string();
    assert!(
        e.contains("bad.json") && e.contains("not a calibration"),
        "{e}"
    );
    let e = Calibration::load(&dir.path().join("missing.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.json"), "{e}");
}

fn report(policy: &str, workload: &str) -> strata_sim::SimReport {
    let spec: PolicySpec = policy.parse().unwrap();
    let params = strata_workload::PresetParams {
        entries: 20_000,
        ops: 20_000,
        ..Default::default()
    };
    let workload = strata_workload::WorkloadSpec::preset(workload, &params).unwrap();
    let config = SimConfig {
        buffer_size: 64 << 10,
        ..SimConfig::default()
    };
    Simulator::run(build_policy(&spec).unwrap(), config, &workload, 7).unwrap()
}

const WRITES: OperationMix = OperationMix {
    writes: 1.0,
    reads: 0.0,
    scans: 0.0,
    scan_length: 0.0,
};

#[test]
fn merging_more_costs_more_and_more_cores_hide_it() {
    let c = Calibration::assumed();
    let leveled = report("leveled-full", "updaterandom");
    let tiered = report("tiered", "updaterandom");
    let cost = |r: &strata_sim::SimReport, c: &Calibration| {
        estimate(r, &WRITES, 116, c, Regime::Cached, 1.0)
    };
    let (l, t) = (cost(&leveled, &c), cost(&tiered, &c));
    assert!(leveled.compaction_bytes_read > tiered.compaction_bytes_read);
    assert!(l.background_ns > t.background_ns, "{l:?} {t:?}");
    assert!(l.ns_per_op > t.ns_per_op);
    // The writer's own work is the same put.
    assert_eq!(l.foreground_ns, t.foreground_ns);
    let mut many = c.clone();
    many.cores = 16;
    assert!(cost(&leveled, &many).ns_per_op < l.ns_per_op);
    // A merge twice as dear costs more.
    let mut dear = c.clone();
    dear.cpu.merge_ns_per_entry *= 2.0;
    assert!(cost(&leveled, &dear).ns_per_op > l.ns_per_op);
}

#[test]
fn reads_pay_for_runs_and_for_the_device_out_of_cache() {
    let c = Calibration::assumed();
    let reads = OperationMix {
        writes: 0.1,
        reads: 0.9,
        scans: 0.0,
        scan_length: 0.0,
    };
    let leveled = report("leveled", "ycsb-b");
    let tiered = report("tiered", "ycsb-b");
    assert!(tiered.avg_range_scan_runs > leveled.avg_range_scan_runs);
    let cached = |r| estimate(r, &reads, 116, &c, Regime::Cached, 1.0);
    assert!(cached(&tiered).foreground_ns > cached(&leveled).foreground_ns);
    let out = |share| {
        estimate(
            &leveled,
            &reads,
            116,
            &c,
            Regime::OutOfCache {
                memory_share: share,
            },
            1.0,
        )
    };
    assert!(out(0.0).ns_per_op > out(0.5).ns_per_op);
    assert!(out(0.5).ns_per_op > cached(&leveled).ns_per_op);
    // Reads served from memory cost what they cost cached; writes still reach the device.
    assert!((out(1.0).foreground_ns - cached(&leveled).foreground_ns).abs() < 1e-6);
    assert!(out(1.0).background_ns > cached(&leveled).background_ns);
}

#[test]
fn out_of_cache_reads_take_the_simulated_caches_misses_where_it_ran() {
    let c = Calibration::assumed();
    let reads = OperationMix {
        writes: 0.0,
        reads: 0.5,
        scans: 0.5,
        scan_length: 20.0,
    };
    let mut r = report("leveled", "ycsb-b");
    let out = |r: &strata_sim::SimReport| {
        estimate(
            r,
            &reads,
            116,
            &c,
            Regime::OutOfCache { memory_share: 0.1 },
            1.0,
        )
    };
    let uniform = out(&r);
    assert_eq!(strata_advise::simulated_memory_share(&r), None);
    // Every block the workload read was cached: only the filters' false positives reach the
    // device, at the uniform share.
    r.read_cache = Some(strata_sim::ReadCacheReport {
        capacity_bytes: 1 << 20,
        lookups: 100,
        lookups_in_buffer: 20,
        lookup_blocks: 80,
        lookup_block_hits: 80,
        scans: 100,
        scan_blocks: 300,
        scan_block_hits: 300,
    });
    let all_cached = out(&r);
    assert_eq!(strata_advise::simulated_memory_share(&r), Some(1.0));
    let device_ns = c.device.as_ref().unwrap().read_latency_us * 1e3;
    let false_positives = (r.avg_lookup_cost - 1.0).max(0.0);
    let cached = estimate(&r, &reads, 116, &c, Regime::Cached, 1.0);
    let expected = cached.foreground_ns + 0.5 * false_positives * 0.9 * device_ns;
    assert!(
        (all_cached.foreground_ns - expected).abs() < 1e-6,
        "{all_cached:?}"
    );
    assert!(all_cached.ns_per_op < uniform.ns_per_op);
    // Half the lookups' blocks and a third of the scans' missed: one device read per scan,
    // 0.4 per lookup.
    let cache = r.read_cache.as_mut().unwrap();
    cache.lookup_block_hits = 40;
    cache.scan_block_hits = 200;
    let some_missed = out(&r);
    let more = some_missed.foreground_ns - all_cached.foreground_ns;
    assert!(
        (more - (0.5 * 0.4 + 0.5 * 1.0) * device_ns).abs() < 1e-6,
        "{more}"
    );
    assert_eq!(
        strata_advise::simulated_memory_share(&r),
        Some(240.0 / 380.0)
    );
}

#[test]
fn scans_pay_per_entry_and_per_run() {
    let c = Calibration::assumed();
    let r = report("tiered", "ycsb-e");
    let scans = |scan_length| OperationMix {
        writes: 0.05,
        reads: 0.0,
        scans: 0.95,
        scan_length,
    };
    let short = estimate(&r, &scans(10.0), 116, &c, Regime::Cached, 1.0);
    let long = estimate(&r, &scans(100.0), 116, &c, Regime::Cached, 1.0);
    let diff = long.foreground_ns - short.foreground_ns;
    let runs = r.avg_runs_probed.max(1.0);
    let per_entry = c.cpu.scan_ns_per_entry + (runs - 1.0) * c.cpu.scan_ns_per_entry_per_run;
    assert!((diff - 0.95 * 90.0 * per_entry).abs() < 1e-6);
}

#[test]
fn a_window_scales_down_with_its_buffer() {
    let window = WorkloadWindow {
        puts: 50_000,
        point_reads: 50_000,
        key_bytes: 16 * 50_000,
        value_bytes: 100 * 50_000,
        skew: Some(0.9),
        seconds: 1.0,
        ..WorkloadWindow::default()
    };
    let shape = workload_like(&window, (16, 100), 116 << 20, 8 << 20, (10_000, 5_000)).unwrap();
    assert_eq!(shape.entries, 10_000);
    assert!((shape.scale - 10_000.0 / (1 << 20) as f64).abs() < 1e-9);
    assert_eq!(shape.buffer_size, 80_000); // 8 MiB × scale
    let tiny = workload_like(&window, (16, 100), 116 << 30, 8 << 20, (10_000, 5_000)).unwrap();
    assert_eq!(tiny.buffer_size, 64 << 10); // under the floor
    assert!((shape.mix.writes - 0.5).abs() < 1e-9);
    let run = shape.spec.phases.last().unwrap();
    assert_eq!(run.ops, 5_000);
    assert!(matches!(run.keys, strata_workload::KeyDist::Zipfian { .. }));
}

#[test]
fn the_advisor_predicts_the_current_policy_and_every_candidate() {
    let advisor = SimulatingAdvisor::new(Calibration::assumed())
        .with_candidates(vec![PolicySpec::new("tiered"), PolicySpec::new("leveled")])
        .with_simulation_size(5_000, 5_000);
    let window = WorkloadWindow {
        puts: 10_000,
        key_bytes: 16 * 10_000,
        value_bytes: 100 * 10_000,
        seconds: 1.0,
        ..WorkloadWindow::default()
    };
    let version = Version::new();
    let current = "leveled:size_ratio=10";
    let request = AdviceRequest {
        window: &window,
        current,
        version: &version,
        live_bytes: 2 << 20,
        write_buffer_size: 256 << 10,
        key_size: 16,
        value_size: 100,
    };
    let predictions = advisor.predict(&request).unwrap();
    // The current one under its own specification, and tiered; leveled is the current policy.
    let specs: Vec<&str> = predictions.iter().map(|p| p.spec.as_str()).collect();
    assert_eq!(specs.len(), 2, "{specs:?}");
    assert_eq!(specs[0], current);
    assert!(specs[1].starts_with("tiered"), "{specs:?}");
    assert!(predictions.iter().all(|p| p.ns_per_op > 0.0));
    // An empty tree hands over for nothing.
    assert!(predictions.iter().all(|p| p.handover_bytes == 0));
    // The winner of a write-only window merges less.
    assert!(
        predictions[1].ns_per_op < predictions[0].ns_per_op,
        "{predictions:?}"
    );
}

/// A steady workload's windows cost one simulation per candidate: the advisor simulates a
/// window in quantized steps and answers the same steps from memory, while a tree of another
/// size or a window of another mix is simulated again.
#[test]
fn the_windows_of_a_steady_workload_are_answered_from_memory() {
    let advisor = SimulatingAdvisor::new(Calibration::assumed())
        .with_candidates(vec![PolicySpec::new("tiered"), PolicySpec::new("leveled")])
        .with_simulation_size(5_000, 5_000);
    let window = |puts: u64, point_reads: u64| WorkloadWindow {
        puts,
        point_reads,
        key_bytes: 16 * puts,
        value_bytes: 100 * puts,
        seconds: 1.0,
        ..WorkloadWindow::default()
    };
    let version = Version::new();
    let predict = |window: &WorkloadWindow, live_bytes: u64| {
        let request = AdviceRequest {
            window,
            current: "leveled",
            version: &version,
            live_bytes,
            write_buffer_size: 256 << 10,
            key_size: 16,
            value_size: 100,
        };
        advisor.predict(&request).unwrap()
    };
    let first = predict(&window(10_000, 0), 2 << 20);
    assert_eq!(advisor.simulations(), 2);
    // 3% more operations and 5% more data: the same steps, nothing simulated.
    let again = predict(&window(10_300, 0), (2 << 20) * 105 / 100);
    assert_eq!(advisor.simulations(), 2);
    assert_eq!(first, again);
    // Twice the data, or half the operations reads: simulated again.
    predict(&window(10_000, 0), 4 << 20);
    assert_eq!(advisor.simulations(), 4);
    let mixed = predict(&window(5_000, 5_000), 4 << 20);
    assert_eq!(advisor.simulations(), 6);
    assert_ne!(first[1].ns_per_op, mixed[1].ns_per_op);
}

#[test]
fn flushes_that_follow_one_another_make_a_nearly_sorted_workload() {
    let window = WorkloadWindow {
        puts: 50_000,
        key_bytes: 16 * 50_000,
        value_bytes: 100 * 50_000,
        range_overlap: Some(0.03),
        seconds: 1.0,
        ..WorkloadWindow::default()
    };
    let shape = workload_like(&window, (16, 100), 116 << 20, 8 << 20, (10_000, 5_000)).unwrap();
    let run = shape.spec.phases.last().unwrap();
    assert_eq!(run.mix.insert, 1.0);
    assert_eq!(run.mix.update, 0.0);
    assert!(shape
        .spec
        .phases
        .iter()
        .all(|p| matches!(p.inserts, strata_workload::InsertOrder::NearlySorted { .. })));
    // Keys all over the key space stay updates of random keys.
    let spread = WorkloadWindow {
        range_overlap: Some(0.97),
        ..window
    };
    let shape = workload_like(&spread, (16, 100), 116 << 20, 8 << 20, (10_000, 5_000)).unwrap();
    assert_eq!(shape.spec.phases.last().unwrap().mix.update, 1.0);
}
