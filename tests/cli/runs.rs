//! What `bench` and `sim` runs report: warnings, leftovers, costs, the simulated SSD, traces
//! and scale mode.

use super::*;

#[test]
fn the_example_policies_file_names_registered_policies_and_options() {
    // `crates/strata-workload/tests/files.rs` loads and validates every example; what only the
    // command line can check is that a file's policies and options exist in the registry.
    let dir = scratch("examples");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workloads/policies.toml");
    let run = succeeded(
        &dir,
        &[
            "sim",
            "--workload",
            file.to_str().unwrap(),
            "--write-buffer-size",
            "1MiB",
            "--json",
        ],
    );
    assert!(
        run.stdout.contains("\"policy\": \"leveled\"")
            && run.stdout.contains("\"policy\": \"tiered\""),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("\"size_ratio\": \"6\""),
        "{}",
        run.stderr
    );
}

#[test]
fn runs_too_small_to_measure_warn_but_run() {
    let dir = scratch("small");
    let run = succeeded(
        &dir,
        &[
            "bench",
            "--entries",
            "1",
            "--ops",
            "1",
            "--policies",
            "leveled",
            "--quiet",
            "--dir",
            "db",
            "--report",
            "r",
        ],
    );
    assert!(
        run.stderr
            .contains("warning: the longest measured phase runs 1 operation,")
            && run
                .stderr
                .contains("worst-throughput window (100000 operations)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("less than one write buffer (8MiB)"),
        "{}",
        run.stderr
    );
    let run = succeeded(&dir, &["sim", "--policies", "leveled", "--entries", "10"]);
    assert!(
        run.stderr.contains("less than one write buffer (4MiB)"),
        "{}",
        run.stderr
    );
    // A run large enough says nothing.
    let run = succeeded(
        &dir,
        &[
            "sim",
            "--policies",
            "leveled",
            "--entries",
            "100000",
            "--buffer-size",
            "1MiB",
        ],
    );
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}

#[test]
fn what_an_earlier_run_left_in_the_database_directory_does_not_block_the_next() {
    let dir = scratch("leftovers");
    // A directory named after the run, as a run that failed after creating its database left it
    // (and as a killed run still does).
    std::fs::create_dir_all(dir.join("db/leveled")).unwrap();
    std::fs::write(dir.join("db/leveled/CURRENT"), "x").unwrap();
    let args = small_bench(&[
        "--workload",
        "fillunique",
        "--entries",
        "2000",
        "--policies",
        "leveled",
        "--quiet",
        "--dir",
        "db",
        "--report",
        "r",
    ]);
    succeeded(&dir, &args);
    succeeded(&dir, &args);
    let mut left: Vec<String> = std::fs::read_dir(dir.join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["leveled"], "each run removes its own directory");
}

#[test]
fn sim_shows_the_last_phase_write_amplification_beside_the_whole_run() {
    let dir = scratch("phases");
    for (workload, phases) in [("updaterandom", true), ("fillunique", false)] {
        let run = succeeded(
            &dir,
            &[
                "sim",
                "--policies",
                "spooky,leveled",
                "--entries",
                "20000",
                "--workload",
                workload,
                "--buffer-size",
                "64KiB",
            ],
        );
        let header = run
            .stdout
            .lines()
            .find(|l| l.starts_with("policy"))
            .unwrap();
        assert!(header.contains("WA"), "{header}");
        assert_eq!(header.contains("WA run"), phases, "{workload}: {header}");
    }
}

#[test]
fn each_bench_run_reports_what_it_cost_the_machine_in_a_process_of_its_own() {
    let dir = scratch("physical");
    let run = succeeded(
        &dir,
        &small_bench(&[
            "--workload",
            "fillunique",
            "--entries",
            "20000",
            "--policies",
            "leveled,tiered",
            "--quiet",
            "--bandwidth-probe",
            "1MiB",
            "--dir",
            "db",
            "--report",
            "r",
        ]),
    );
    assert!(
        run.stdout
            .contains("physical view (device sequential write:"),
        "{}",
        run.stdout
    );
    let text = std::fs::read_to_string(dir.join("r/results.json")).unwrap();
    let c: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        c["device_write_bandwidth"].as_f64().unwrap() > 0.0,
        "{text}"
    );
    for r in c["runs"].as_array().unwrap() {
        assert_eq!(r["total_ops"], 20_000, "{r}");
        // 20,000 entries of 16 + 100 bytes reach the device at least once (the WAL).
        assert!(
            r["device_bytes_written"].as_u64().unwrap() >= 2_320_000,
            "{r}"
        );
        assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0, "{r}");
    }
    // The job files and databases went with the comparison's directory.
    assert_eq!(std::fs::read_dir(dir.join("db")).unwrap().count(), 0);
}

/// `strata sim --ssd`: the tree on a simulated SSD, GC and total write amplification in the
/// table and the JSON; a device too small for a policy is a warning naming it, and a bad device
/// setting an error naming the flag.
#[test]
fn sim_puts_the_tree_on_a_simulated_ssd() {
    let dir = scratch("sim-ssd");
    let device = [
        "--workload",
        "spooky-uniform",
        "--entries",
        "200000",
        "--ops",
        "400000",
        "--write-buffer-size",
        "1MiB",
        "--target-file-size",
        "256KiB",
        "--erase-block",
        "1MiB",
        "--ftl-page",
        "16KiB",
    ];
    let mut args = vec![
        "sim",
        "--policies",
        "leveled",
        "--ssd",
        "80MiB",
        "--ssd-report",
        "ssd",
    ];
    args.extend_from_slice(&device);
    let run = succeeded(&dir, &args);
    assert!(run.stdout.contains("GC WA"), "{}", run.stdout);
    let csv = std::fs::read_to_string(dir.join("ssd/ssd-timeline.csv")).unwrap();
    assert!(csv.starts_with("policy,host_bytes,gc_write_amp"), "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.starts_with("leveled,")));
    for chart in ["gc-write-amp.svg", "utilization.svg"] {
        let svg = std::fs::read_to_string(dir.join("ssd").join(chart)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("leveled"), "{chart}");
    }
    refused(
        &dir,
        &["sim", "--ssd-report", "ssd"],
        &["--ssd-report", "--ssd"],
    );
    let json = sim_json(&dir, &[&["--ssd", "80MiB"][..], &device[..]].concat());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let gc = v["ssd"]["gc_write_amp"].as_f64().unwrap();
    assert!(gc >= 1.0, "{gc}");
    assert!(!v["ssd"]["timeline"].as_array().unwrap().is_empty());
    // 30 MiB of flash cannot hold 23 MB of live data at a leveled tree's peak.
    let mut small = vec!["sim", "--policies", "leveled", "--ssd", "30MiB"];
    small.extend_from_slice(&device);
    let run = succeeded(&dir, &small);
    assert!(
        run.stderr
            .contains("leveled on the simulated SSD: the device is full"),
        "{}",
        run.stderr
    );
    refused(
        &dir,
        &["sim", "--ssd", "1GiB", "--over-provisioning", "1.5"],
        &["--ssd", "over_provisioning"],
    );
}

/// `strata bench --file-trace DIR` records each Strata run's device file trace, and `strata sim
/// --replay-trace FILE --ssd SIZE` replays it on the simulated SSD; a replay without a device
/// is refused.
#[test]
fn a_recorded_engine_trace_replays_on_the_simulated_ssd() {
    let dir = scratch("file-trace");
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    succeeded(
        &dir,
        &[
            "bench",
            "--workload",
            "fillrandom",
            "--entries",
            "20000",
            "--policies",
            "leveled",
            "--peers",
            "none",
            "--write-buffer-size",
            "256KiB",
            "--quiet",
            "--file-trace",
            "traces",
        ],
    );
    let trace = dir.join("traces").join("leveled.trace");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.starts_with("c "), "{}", &text[..text.len().min(200)]);
    let run = succeeded(
        &dir,
        &[
            "sim",
            "--replay-trace",
            trace.to_str().unwrap(),
            "--ssd",
            "64MiB",
            "--erase-block",
            "1MiB",
            "--ftl-page",
            "16KiB",
        ],
    );
    assert!(run.stdout.contains("GC WA"), "{}", run.stdout);
    refused(
        &dir,
        &["sim", "--replay-trace", trace.to_str().unwrap()],
        &["--replay-trace", "--ssd"],
    );
}

#[test]
fn sim_scale_mode_keeps_a_sample_and_reports_its_rate() {
    let dir = scratch("sim-scale");
    let run = succeeded(
        &dir,
        &[
            "sim",
            "--policies",
            "leveled,tiered",
            "--entries",
            "300000",
            "--write-buffer-size",
            "1MiB",
            "--scale",
            "20000",
            "--json",
        ],
    );
    let reports: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    for r in reports.as_array().unwrap() {
        // 300,000 entries against a budget of 20,000 keys: one in 16 or more kept.
        assert!(r["sample_one_in"].as_u64().unwrap() >= 16, "{r}");
        assert!(r["write_amp"].as_f64().unwrap() >= 1.0, "{r}");
    }
    let text = succeeded(
        &dir,
        &[
            "sim",
            "--policies",
            "leveled",
            "--entries",
            "50000",
            "--scale",
        ],
    );
    assert!(
        text.stdout.contains("scale mode: at most 4194304 keys"),
        "{}",
        text.stdout
    );
    refused(
        &dir,
        &["sim", "--scale", "10000", "--engine-format"],
        &["--scale", "--engine-format"],
    );
    refused(&dir, &["sim", "--scale", "0"], &["--scale"]);
}

#[test]
fn bench_spreads_strata_keys_over_keyspaces_with_a_policy_each() {
    let dir = scratch("keyspaces");
    let args = small_bench(&[
        "--workload",
        "fillseq,readrandom",
        "--entries",
        "3000",
        "--policies",
        "leveled",
        "--keyspaces",
        "3",
        "--keyspace-policies",
        "minmax,tiered",
        "--quiet",
        "--dir",
        "db",
        "--keep",
        "kept",
        "--report",
        "r",
    ]);
    let run = succeeded(&dir, &args);
    assert!(run.stdout.contains("3 keyspaces"), "{}", run.stdout);
    let db =
        strata_engine::Db::open_read_only(dir.join("kept/leveled"), strata_engine::Options::new())
            .unwrap();
    assert_eq!(db.list_keyspaces(), ["default", "ks1", "ks2"]);
    let mut total = 0;
    for (name, policy) in [("default", "leveled"), ("ks1", "minmax"), ("ks2", "tiered")] {
        let keyspace = db.keyspace(name).unwrap();
        assert_eq!(keyspace.policy().name(), policy);
        let keys = keyspace.range::<&[u8], _>(..).unwrap().count();
        assert!(
            keys > 500,
            "{name} holds {keys} keys: the hash spreads them"
        );
        total += keys;
    }
    assert_eq!(total, 3000, "every key of fillseq, each in one keyspace");
}

#[test]
fn sim_expires_entries_on_the_timed_clock() {
    let dir = scratch("sim-ttl");
    // 100,000 updates of 116 bytes at 1 MB/s: 23 simulated seconds, the TTL 5.
    let run = |ttl: &[&str]| {
        let mut args = vec![
            "sim",
            "--policies",
            "leveled",
            "--workload",
            "updaterandom",
            "--entries",
            "100000",
            "--buffer-size",
            "256KiB",
            "--timed",
            "--ingest-rate",
            "1MB",
            "--json",
        ];
        args.extend_from_slice(ttl);
        let run = succeeded(&dir, &args);
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let bytes: u64 = report["levels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["bytes"].as_u64().unwrap())
            .sum();
        bytes
    };
    let kept = run(&[]);
    let expired = run(&["--ttl", "5", "--periodic-compaction", "2"]);
    assert!(
        expired * 2 < kept,
        "{expired} bytes with a TTL, {kept} without"
    );
    refused(&dir, &["sim", "--ttl", "5"], &["--ttl", "--timed"]);
    refused(&dir, &["sim", "--timed", "--ttl", "0"], &["--ttl"]);
    refused(
        &dir,
        &["sim", "--timed", "--periodic-compaction", "5"],
        &["--periodic-compaction", "--ttl"],
    );
}

#[test]
fn sim_runs_a_block_cache_on_the_workloads_reads_when_asked() {
    let dir = scratch("sim-read-cache");
    let args = [
        "--workload",
        "ycsb-d",
        "--entries",
        "20000",
        "--ops",
        "20000",
        "--buffer-size",
        "64KiB",
        "--read-cache",
        "256KiB",
    ];
    let json: serde_json::Value = serde_json::from_str(&sim_json(&dir, &args)).unwrap();
    let report = json.as_array().map_or(&json, |a| &a[0]);
    let cache = &report["read_cache"];
    assert_eq!(cache["capacity_bytes"], 256 << 10, "{report}");
    let lookups = cache["lookups"].as_u64().unwrap();
    let blocks = cache["lookup_blocks"].as_u64().unwrap();
    let hits = cache["lookup_block_hits"].as_u64().unwrap();
    assert!(
        lookups > 15_000 && blocks <= lookups && hits <= blocks,
        "{cache}"
    );
    // Read-latest reads hit what the last flushes wrote: some, not every, block is cached.
    assert!(hits > 0 && hits < blocks, "{cache}");
    refused(
        &dir,
        &["sim", "--read-cache", "1MiB", "--scale"],
        &["--read-cache", "--scale"],
    );
}
