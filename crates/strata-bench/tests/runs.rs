//! End to end: workloads run against the engine and the measurements hold together.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_bench::engines::{EngineSettings, PeerShape, Strata};
use strata_bench::workload::{PresetParams, WorkloadSpec};
use strata_bench::{report, run_comparison, BenchConfig};
use strata_policy::{build_policy, PolicySpec};

fn small_settings() -> EngineSettings {
    EngineSettings {
        write_buffer_size: 256 << 10,
        target_file_size: Some(256 << 10),
        level_base: Some(1 << 20),
        block_cache: 1 << 20,
        expected_data_size: 8 << 20,
        ..EngineSettings::default()
    }
}

fn config(workload: WorkloadSpec, policies: &[&str]) -> BenchConfig {
    BenchConfig {
        workload,
        policies: policies.iter().map(|s| s.to_string()).collect(),
        peers: Vec::new(),
        baseline: None,
        settings: small_settings(),
        dir: None,
        seed: 7,
        progress: false,
        job_log: None,
        file_trace: None,
        isolate: None,
        bandwidth_probe_bytes: 0,
        storage: Default::default(),
        settle_phases: false,
    }
}

#[test]
fn policies_and_peers_keep_their_own_defaults_unless_the_settings_give_one() {
    let settings = EngineSettings {
        write_buffer_size: 8 << 20,
        ..EngineSettings::default()
    };
    // Nothing given: each policy's declared options stay unset in its specification.
    let spec = Strata::policy_spec("vertiorizon", &settings).unwrap();
    assert!(!spec.is_set("size_ratio") && !spec.is_set("target_file_size"));
    assert!(spec.is_set("write_buffer_size"));
    let used = PolicySpec::of(build_policy(&spec).unwrap().as_ref());
    assert!(
        used.options.contains(&("size_ratio".into(), "6".into())),
        "{used}"
    );
    // The peers take leveled's shape with the same buffer: T = 10, 64 MiB tables, a base
    // level of T × 8 MiB, 10 Bloom bits.
    let shape = settings.peer_shape().unwrap();
    assert_eq!(
        shape,
        PeerShape {
            size_ratio: 10.0,
            target_file_size: 64 << 20,
            level_base: 80 << 20,
            bloom_bits_per_key: 10.0,
        }
    );
    // Given: policies that declare the option and peers take it.
    let given = EngineSettings {
        size_ratio: Some(4.0),
        level_base: Some(1 << 20),
        ..settings
    };
    let spec = Strata::policy_spec("vertiorizon:size_ratio=5", &given).unwrap();
    assert_eq!(spec.to_string().matches("size_ratio").count(), 1, "{spec}");
    assert!(spec.to_string().contains("size_ratio=5"), "{spec}");
    let shape = given.peer_shape().unwrap();
    assert_eq!((shape.size_ratio, shape.level_base), (4.0, 1 << 20));
}

/// Preset `name` at `entries` records and `ops` operations, other parameters at their defaults.
fn preset(name: &str, entries: u64, ops: u64) -> WorkloadSpec {
    let params = PresetParams {
        entries,
        ops,
        ..PresetParams::default()
    };
    WorkloadSpec::preset(name, &params).unwrap()
}

#[test]
fn ycsb_a_measures_throughput_latency_and_amplification() {
    let w = preset("ycsb-a", 30_000, 30_000);
    let c = run_comparison(&config(w, &["leveled", "tiered"])).unwrap();
    assert_eq!(c.baseline, "leveled");
    for r in &c.runs {
        assert_eq!(r.phases.len(), 2, "{}", r.label);
        let run = &r.phases[1];
        assert_eq!(run.ops, 30_000);
        assert!(r.ops_per_sec > 0.0 && r.worst_window_ops_per_sec > 0.0);
        // Fewer operations than a window: the worst window is the whole phase.
        assert!(
            (r.worst_window_ops_per_sec - r.ops_per_sec).abs() / r.ops_per_sec < 0.2,
            "{r:?}"
        );
        let all = &run.latency["all"];
        assert!(all.p50_us <= all.p99_us && all.p99_us <= all.p999_us && all.p999_us <= all.max_us);
        assert_eq!(all.count, 30_000);
        assert_eq!(
            run.latency["read"].count + run.latency["update"].count,
            30_000
        );
        // 30,000 loaded records of 116 bytes, updates keep the count.
        assert_eq!(r.live_bytes, 30_000 * 116);
        assert!(
            r.write_amp > 0.5 && r.write_amp < 20.0,
            "{}: WA {}",
            r.label,
            r.write_amp
        );
        assert!(r.peak_space_amp >= r.final_space_amp * 0.99);
        // Each phase's write amplification, weighted by its user bytes, adds up to the run's.
        let user: u64 = r.phases.iter().map(|p| p.user_bytes).sum();
        assert_eq!(user, r.user_bytes, "{}", r.label);
        let weighted: f64 = r
            .phases
            .iter()
            .map(|p| p.write_amp.unwrap() * p.user_bytes as f64)
            .sum();
        assert!(
            (weighted / user as f64 - r.write_amp).abs() < 0.2 * r.write_amp,
            "{}: phases {weighted} vs run {}",
            r.label,
            r.write_amp
        );
        assert!(r.peak_disk_bytes > 0 && !r.disk_samples.is_empty());
        assert!(r.read_amp.is_some() && r.runs_probed_per_lookup.is_some());
        assert!(r.filter_probes_per_lookup.is_some());
        assert!(!r.shape.is_empty());
        // The run records the options its policy was built with: the settings' where given.
        let option = |name: &str| {
            r.options
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(option("target_file_size"), Some("256KiB"), "{r:?}");
        assert_eq!(option("size_ratio"), Some("10"), "{}", r.label);
    }
    let table = report::render_table(&c);
    assert!(
        table.contains("tiered") && table.contains("vs leveled"),
        "{table}"
    );
}

#[test]
fn fills_and_writes_on_many_threads_run() {
    let params = PresetParams {
        entries: 20_000,
        ops: 20_000,
        threads: 4,
        ..PresetParams::default()
    };
    let w = WorkloadSpec::preset("fillseq,overwrite,readwhilewriting", &params).unwrap();
    assert_eq!(w.phases[0].threads, 4);
    let c = run_comparison(&config(w, &["leveled"])).unwrap();
    let run = &c.runs[0];
    assert_eq!(run.phases[0].ops, 20_000);
    // Four writers over disjoint key indexes write 20,000 distinct records of 116 bytes;
    // the overwrites and readwhilewriting's writer keep their number.
    assert_eq!(run.live_bytes, 20_000 * 116);
    assert_eq!(run.phases[1].latency["update"].count, 20_000);
    assert_eq!(run.phases[2].latency["read"].count, 20_000);
}

#[test]
fn db_bench_phases_and_toml_workloads_run() {
    let w = preset("fillseq,readrandom,seekrandom,deleterandom", 20_000, 20_000);
    let c = run_comparison(&config(w, &["horizontal-tiered"])).unwrap();
    let names: Vec<&str> = c.runs[0].phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["fillseq", "readrandom", "seekrandom", "deleterandom"]
    );
    // After a sequential fill every uniformly chosen key exists; deletes then shrink the set.
    assert!(c.runs[0].live_bytes < 20_000 * 116);
    let toml = r#"
        name = "custom"
        value_size = 50
        [[phases]]
        name = "load"
        ops = 5000
        mix = { insert = 1.0 }
        [[phases]]
        name = "scan-heavy"
        ops = 2000
        threads = 2
        mix = { scan = 0.7, read = 0.3 }
        keys = { kind = "latest", theta = 0.9 }
    "#;
    let w = WorkloadSpec::from_toml(toml).unwrap();
    let c = run_comparison(&config(w, &["lazy-leveled"])).unwrap();
    let phase = &c.runs[0].phases[1];
    assert_eq!(phase.ops, 2000);
    assert!(phase.latency.contains_key("scan") && phase.latency.contains_key("read"));
    assert_eq!(c.runs[0].live_bytes, 5000 * 66);
}

#[test]
fn open_loop_and_rate_limited_writer_run_for_their_duration() {
    let params = PresetParams {
        entries: 5_000,
        ops: 400,
        query_rate: 2_000.0,
        write_rate_mib: 1.0,
        ..PresetParams::default()
    };
    let w = WorkloadSpec::preset("ecotune", &params).unwrap();
    let c = run_comparison(&config(w, &["leveled"])).unwrap();
    let q = &c.runs[0].phases[1];
    // 400 queries at 2,000 per second take at least about 0.2 s.
    assert!(q.seconds >= 0.18, "{}", q.seconds);
    assert!(
        q.ops_per_sec < 2_600.0,
        "open loop caps the rate: {}",
        q.ops_per_sec
    );
    assert!(q.latency.contains_key("long_scan"));
    // The writer ran beside the queries: more user bytes than the load alone.
    assert!(c.runs[0].user_bytes > 5_000 * 116);
}

#[test]
fn a_job_log_accounts_for_every_byte_the_run_wrote() {
    let w = preset("ycsb-a", 20_000, 20_000);
    let logs = tempfile::tempdir().unwrap();
    let mut c = config(w, &["leveled", "tiered:size_ratio=3"]);
    c.job_log = Some(logs.path().to_path_buf());
    let comparison = run_comparison(&c).unwrap();
    for run in &comparison.runs {
        let path = logs
            .path()
            .join(strata_exec::job_log::job_log_file_name(&run.label));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(strata_exec::job_log::JOB_LOG_HEADER));
        let (mut flushes, mut merges, mut written) = (0, 0, 0u64);
        for line in lines {
            // The label is quoted and has no commas here; the reason comes last.
            let fields: Vec<&str> = line.splitn(11, ',').collect();
            assert_eq!(fields[0], format!("\"{}\"", run.label), "{line}");
            match fields[2] {
                "flush" => flushes += 1,
                "merge" => merges += 1,
                _ => {}
            }
            written += fields[8].parse::<u64>().unwrap();
        }
        assert!(
            flushes > 0 && merges > 0,
            "{}: {flushes} flushes, {merges} merges",
            run.label
        );
        // Every table byte the run counted was written by a logged job.
        assert_eq!(written, run.table_bytes_written, "{}", run.label);
    }
}

#[test]
fn counted_blocks_follow_the_bytes_written_and_only_the_measured_phases() {
    // The partial-merge protocol: four-byte keys, a fill, an unmeasured settle phase, then the
    // measured 50/50 phase.
    let params = PresetParams {
        entries: 20_000,
        ops: 20_000,
        key_size: 4,
        ..PresetParams::default()
    };
    let w = WorkloadSpec::preset("partial-merge-uniform", &params).unwrap();
    let policy = "partial-choosebest-p:level0_size=512KiB,target_file_size=64KiB";
    let mut counted = config(w.clone(), &[policy]);
    counted.settings.count_blocks = true;
    let c = run_comparison(&counted).unwrap();
    let r = &c.runs[0];
    let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["load", "run"]);
    for p in &r.phases {
        let blocks: u64 = p.blocks_written_per_level.iter().sum();
        // Blocks are cut at 4 KiB of entries; compressed, they are smaller on disk, so the
        // bytes written bound the blocks from below only loosely, and 8 KiB per block bounds
        // them from above.
        let written = p.write_amp.unwrap() * p.user_bytes as f64;
        assert!(blocks > 0, "{}: no blocks counted", p.name);
        assert!(
            (blocks as f64) < written / 256.0 && (blocks as f64) > written / 8192.0,
            "{}: {blocks} blocks for {written} bytes written",
            p.name
        );
    }
    // Compactions write below level 0, in whichever phase they ran (on a loaded machine the
    // load's may finish after it).
    let levels = r
        .phases
        .iter()
        .map(|p| p.blocks_written_per_level.len())
        .max();
    assert!(levels >= Some(2), "{:?}", r.phases);
    // The time the policy took deciding is a part of the run's CPU time.
    let decided = r.policy_seconds.unwrap();
    assert!(
        decided > 0.0 && decided < r.cpu_seconds,
        "{decided} of {}",
        r.cpu_seconds
    );
    let plain = run_comparison(&config(w, &[policy])).unwrap();
    assert!(plain.runs[0]
        .phases
        .iter()
        .all(|p| p.blocks_written_per_level.is_empty()));
}

/// Strata's batched read finds what its single reads find, and a Strata opened for direct I/O
/// says so (where the file system allows direct I/O at all).
#[test]
fn strata_reads_in_batches_and_reports_its_io_settings() {
    use strata_bench::engines::{KvEngine, Strata};
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let direct = strata_bench::device_probe::check_direct_io(dir.path()).is_ok();
    let settings = EngineSettings {
        direct_io: direct,
        ..small_settings()
    };
    let engine = Strata::open(&dir.path().join("db"), "leveled", &settings).unwrap();
    assert_eq!(engine.direct_io(), direct);
    assert_eq!(engine.block_cache_bytes(), Some(1 << 20));
    let key = |i: u32| format!("key{i:08}").into_bytes();
    for i in (0..2_000).step_by(2) {
        engine.put(&key(i), b"value").unwrap();
    }
    engine.settle().unwrap();
    let keys: Vec<Vec<u8>> = (0..100).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let single = refs.iter().filter(|k| engine.get(k).unwrap()).count();
    assert_eq!(single, 50);
    assert_eq!(engine.multi_get(&refs).unwrap(), single);
}

/// `--settle`: a phase that wrote waits for its flushes and compactions, and counts them, so its
/// write amplification is all the run's (nothing is left for later); without it the phase
/// reports no settling.
#[test]
fn a_settled_phase_counts_the_work_it_left() {
    for settle in [false, true] {
        let mut c = config(preset("fillrandom", 60_000, 60_000), &["leveled"]);
        c.settle_phases = settle;
        let run = &run_comparison(&c).unwrap().runs[0];
        let phase = &run.phases[0];
        assert_eq!(phase.settle_seconds.is_some(), settle, "{phase:?}");
        if let Some(settle_seconds) = phase.settle_seconds {
            assert!(phase.seconds >= settle_seconds);
            let phase_wa = phase.write_amp.unwrap();
            assert!(
                (phase_wa - run.write_amp).abs() < 1e-9 * run.write_amp.max(1.0),
                "phase WA {phase_wa} against the run's {}",
                run.write_amp
            );
        }
    }
}
