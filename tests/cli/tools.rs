//! `inspect`, `switch-policy`, `checkpoint` and `advise`.

use super::*;

#[test]
fn inspect_describes_a_database_and_names_damage_by_file_and_offset() {
    let dir = scratch("inspect");
    let db_dir = dir.join("db");
    let options = strata_engine::Options::new()
        .with_write_buffer_size(16 << 10)
        .with_block_size(1024)
        .with_synchronous_compaction(true);
    let db = strata_engine::Db::open(&db_dir, options).unwrap();
    for i in 0..3_000u32 {
        db.put(format!("key{:05}", (i * 7) % 2_000), format!("value {i}"))
            .unwrap();
    }
    db.flush().unwrap();
    let version = db.version();
    db.close().unwrap();
    let db_arg = db_dir.to_str().unwrap();

    let run = succeeded(
        &dir,
        &[
            "inspect",
            db_arg,
            "--verify",
            "--scan",
            "--history",
            "--tables",
        ],
    );
    assert!(run.stdout.contains("verified"), "{}", run.stdout);
    assert!(
        run.stdout.contains("live data   2000 keys"),
        "{}",
        run.stdout
    );
    let json: serde_json::Value =
        serde_json::from_str(&succeeded(&dir, &["inspect", db_arg, "--json"]).stdout).unwrap();
    assert_eq!(json["tables"], version.table_count());
    assert_eq!(json["damage"].as_array().unwrap().len(), 0);

    // A table: its entries as the manifest records them; then a flipped byte in a data block.
    let (_, _, meta) = version.tables().next().unwrap();
    let name = format!("{:06}.sst", meta.id.0);
    let table = db_dir.join(&name);
    let table_arg = table.to_str().unwrap();
    let json: serde_json::Value = serde_json::from_str(
        &succeeded(
            &dir,
            &["inspect", "table", table_arg, "--dump", "5", "--json"],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(json["properties"]["entries"], meta.entries);
    assert_eq!(json["dump"].as_array().unwrap().len(), 5);
    assert_eq!(json["verified"], true);
    let block = json["blocks"][1]["offset"].as_u64().unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[block as usize + 20] ^= 0x10;
    std::fs::write(&table, &bytes).unwrap();
    let run = refused(
        &dir,
        &["inspect", "table", table_arg],
        &[&name, &format!("offset {block}")],
    );
    assert!(run.stdout.contains("DAMAGED"), "the report is printed too");
    refused(&dir, &["inspect", db_arg, "--verify"], &[&name]);
    // The WAL the close left, and things that are not there.
    let wal = std::fs::read_dir(&db_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let run = succeeded(
        &dir,
        &["inspect", "wal", wal.to_str().unwrap(), "--records"],
    );
    assert!(run.stdout.contains("link"), "{}", run.stdout);
    refused(
        &dir,
        &["inspect", "table", "nope.sst"],
        &["nope.sst", "not a file"],
    );
    refused(
        &dir,
        &["inspect", "nowhere"],
        &["nowhere", "not a directory"],
    );
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    refused(&dir, &["inspect", empty.to_str().unwrap()], &["CURRENT"]);
}

/// A closed database at `db_dir` under `policy`: 3,000 keys written 4,000 times (key `i * 7 %
/// 3000` holds `value i` for the last such `i`), with 16 KiB buffers, so it has several levels.
fn write_small_database(db_dir: &Path, policy: &str) {
    let options = strata_engine::Options::new()
        .with_write_buffer_size(16 << 10)
        .with_synchronous_compaction(true)
        .with_policy_named(policy)
        .unwrap();
    let db = strata_engine::Db::open(db_dir, options).unwrap();
    for i in 0..4_000u32 {
        db.put(format!("key{:05}", (i * 7) % 3_000), format!("value {i}"))
            .unwrap();
    }
    db.close().unwrap();
}

#[test]
fn switch_policy_hands_a_closed_database_to_another_policy() {
    let dir = scratch("switch-policy");
    let db_dir = dir.join("db");
    write_small_database(&db_dir, "tiered:size_ratio=3");
    let db_arg = db_dir.to_str().unwrap();

    let run = succeeded(&dir, &["switch-policy", db_arg, "leveled", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(report["from"].as_str().unwrap().starts_with("tiered:"));
    assert!(report["to"].as_str().unwrap().starts_with("leveled:"));
    // The handover rewrote part of the tree, not all of it twice over.
    let written = report["bytes_written"].as_f64().unwrap();
    assert!(
        written < 2.0 * report["bytes_before"].as_f64().unwrap(),
        "{report}"
    );
    let inspected: serde_json::Value =
        serde_json::from_str(&succeeded(&dir, &["inspect", db_arg, "--json"]).stdout).unwrap();
    assert!(inspected["policy"]
        .as_str()
        .unwrap()
        .starts_with("leveled:"));
    assert_eq!(inspected["in_handover"], false);
    // Every key is there, read with the recorded policy.
    let db = strata_engine::Db::open(&db_dir, strata_engine::Options::new()).unwrap();
    assert_eq!(db.policy().name(), "leveled");
    assert_eq!(db.range::<&str, _>(..).unwrap().count(), 3_000);
    db.close().unwrap();
    // A rewrite on request; bad input names what is wrong.
    let run = succeeded(&dir, &["switch-policy", db_arg, "tiered", "--rewrite"]);
    assert!(run.stdout.contains("with the rewrite"), "{}", run.stdout);
    refused(&dir, &["switch-policy", db_arg, "nosuch"], &["nosuch"]);
    refused(
        &dir,
        &["switch-policy", db_arg, "tiered:size_ratio=0"],
        &["size_ratio"],
    );
    refused(
        &dir,
        &["switch-policy", "nowhere", "tiered"],
        &["nowhere", "not a directory"],
    );
}

#[test]
fn advise_ranks_by_the_objective_keeps_to_constraints_and_reads_a_database() {
    let dir = scratch("advise");
    let small = [
        "advise",
        "--workload",
        "fillrandom",
        "--entries",
        "60000",
        "--write-buffer-size",
        "256KiB",
        "--policies",
        "leveled,tiered,lazy-leveled,minmax",
        "--json",
    ];
    let json = |args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&succeeded(&dir, args).stdout).unwrap()
    };
    let mut args = small.to_vec();
    args.extend(["--objective", "write-amp"]);
    let advice = json(&args);
    let candidates = advice["candidates"].as_array().unwrap();
    // Two size ratios for the three policies that have one, one configuration for minmax.
    assert_eq!(candidates.len(), 7);
    let lowest = candidates
        .iter()
        .min_by(|a, b| {
            a["write_amp"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["write_amp"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(advice["pick"]["spec"], lowest["spec"]);
    assert!(advice["pick"]["bench_flags"]
        .as_str()
        .unwrap()
        .starts_with("--policies '"));
    assert!(advice["pick"]["rust"]
        .as_str()
        .unwrap()
        .contains("with_policy_named"));
    // Read cost on a workload of lookups and updates, no scans: the score is the I/Os per
    // lookup, whatever the share of writes.
    let advice = json(&[
        "advise",
        "--workload",
        "ycsb-b",
        "--entries",
        "30000",
        "--ops",
        "30000",
        "--write-buffer-size",
        "256KiB",
        "--policies",
        "leveled,tiered",
        "--objective",
        "read-cost",
        "--json",
    ]);
    let scores: Vec<f64> = advice["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["score"], c["lookup_cost"], "{c}");
            c["score"].as_f64().unwrap()
        })
        .collect();
    assert!(scores.windows(2).all(|w| w[0] <= w[1]), "{scores:?}");
    // A space budget leaves configurations out, and the pick keeps to it.
    let mut args = small.to_vec();
    args.extend(["--max-space-amp", "1.6"]);
    let advice = json(&args);
    let kept: Vec<&serde_json::Value> = advice["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["excluded"].is_null())
        .collect();
    assert!(!kept.is_empty() && kept.len() < 7, "{advice}");
    assert!(kept.iter().all(|c| c["space_amp"].as_f64().unwrap() <= 1.6));
    assert_eq!(advice["pick"]["spec"], kept[0]["spec"]);
    let mut args = small.to_vec();
    args.extend(["--max-space-amp", "0.5"]);
    refused(&dir, &args, &["no configuration meets the constraints"]);
    // --verify measures the best on the engine: the best two the estimate tells apart. Under
    // --max-memory each configuration comes with three filter sizes, which a workload without
    // reads does not tell apart, so the second is not the first with other filters.
    let mut args = small.to_vec();
    args[4] = "20000";
    args.extend(["--max-memory", "64MiB", "--verify", "2", "--settle"]);
    args.extend(["--verify-rounds", "2"]);
    let advice = json(&args);
    // Settled verify runs: the pick's flags say so, to measure it as advise did.
    let flags = advice["pick"]["bench_flags"].as_str().unwrap();
    assert!(flags.ends_with(" --settle"), "{flags}");
    let measured: Vec<String> = advice["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["measured_ops_per_sec"]
                .as_f64()
                .is_some_and(|ops| ops > 0.0)
        })
        .map(|c| {
            let spec = c["spec"].as_str().unwrap();
            let options = spec
                .split(',')
                .filter(|o| !o.starts_with("bloom_bits_per_key"));
            options.collect::<Vec<_>>().join(",")
        })
        .collect();
    assert_eq!(measured.len(), 2, "{advice}");
    assert_ne!(measured[0], measured[1], "{advice}");
    // Two rounds: each verified configuration ran twice and ranks by their median (of two, the
    // mean).
    for c in advice["candidates"].as_array().unwrap() {
        let Some(median) = c["measured_ops_per_sec"].as_f64() else {
            continue;
        };
        let runs: Vec<f64> = c["measured_runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_f64().unwrap())
            .collect();
        assert_eq!(runs.len(), 2, "{c}");
        assert!((median - (runs[0] + runs[1]) / 2.0).abs() < 1e-6, "{c}");
    }
    let mut args = small.to_vec();
    args.extend(["--verify", "1", "--verify-rounds", "0"]);
    refused(&dir, &args, &["--verify-rounds"]);
    // A database's recorded workload: all puts.
    let db_dir = dir.join("db");
    let db = strata_engine::Db::open(&db_dir, strata_engine::Options::new()).unwrap();
    for i in 0..5_000u32 {
        db.put(format!("key{i:06}"), [0u8; 50]).unwrap();
    }
    db.close().unwrap();
    let advice = json(&[
        "advise",
        "--db",
        db_dir.to_str().unwrap(),
        "--policies",
        "leveled,tiered",
        "--write-buffer-size",
        "64KiB",
        "--json",
    ]);
    assert!(advice["workload"]
        .as_str()
        .unwrap()
        .starts_with("recorded by"));
    assert_eq!(advice["mix"]["writes"], 1.0, "{advice}");
    refused(&dir, &["advise", "--size-ratios", "1"], &["--size-ratios"]);
    refused(&dir, &["advise", "--db", "nowhere"], &["--db nowhere"]);
}

#[test]
fn advise_out_of_cache_charges_the_device_for_what_memory_cannot_hold() {
    let dir = scratch("advise-out-of-cache");
    let base = [
        "advise",
        "--workload",
        "ycsb-b",
        "--entries",
        "30000",
        "--ops",
        "30000",
        "--write-buffer-size",
        "256KiB",
        "--policies",
        "leveled,tiered",
        "--json",
    ];
    let advise = |extra: &[&str]| -> Vec<serde_json::Value> {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let advice: serde_json::Value =
            serde_json::from_str(&succeeded(&dir, &args).stdout).unwrap();
        advice["candidates"].as_array().unwrap().clone()
    };
    let estimate = |cs: &[serde_json::Value], spec: &str| {
        cs.iter().find(|c| c["spec"] == spec).unwrap()["estimated_ops_per_sec"]
            .as_f64()
            .unwrap()
    };
    // The mix is the reported phase's (95% reads), not diluted by the 30,000 loaded entries.
    let mut args = base.to_vec();
    args.extend(["--objective", "read-cost"]);
    let advice: serde_json::Value = serde_json::from_str(&succeeded(&dir, &args).stdout).unwrap();
    assert!(advice["mix"]["reads"].as_f64().unwrap() > 0.9, "{advice}");
    let cached = advise(&["--max-memory", "1MiB"]);
    assert!(cached.iter().all(|c| c["memory_share"].is_null()));
    // About 3.5 MB of data and 1 MiB of memory, most of it taken by two 256 KiB buffers.
    let out = advise(&["--max-memory", "1MiB", "--device-read-us", "100"]);
    for c in &out {
        let share = c["memory_share"].as_f64().unwrap();
        assert!(share > 0.0 && share < 0.5, "{c}");
        let spec = c["spec"].as_str().unwrap();
        assert!(estimate(&out, spec) < estimate(&cached, spec) / 2.0, "{c}");
    }
    // Lookups dominate: the order follows I/Os per lookup more than it does in the cache.
    let leader = &out[0];
    let cheapest = out
        .iter()
        .map(|c| c["lookup_cost"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert!(
        leader["lookup_cost"].as_f64().unwrap() <= cheapest * 1.01,
        "{leader}"
    );
    // The pick's bench flags carry the regime.
    let mut args = base.to_vec();
    args.extend(["--max-memory", "1MiB", "--device-read-us", "100"]);
    let advice: serde_json::Value = serde_json::from_str(&succeeded(&dir, &args).stdout).unwrap();
    assert!(
        advice["pick"]["bench_flags"]
            .as_str()
            .unwrap()
            .ends_with("--memory-limit 1MiB --block-cache 32MiB"),
        "{advice}"
    );
    // More memory serves more reads from it.
    let roomy = advise(&["--max-memory", "3MiB", "--device-read-us", "100"]);
    let spec = out[0]["spec"].as_str().unwrap();
    let share = |cs: &[serde_json::Value]| {
        cs.iter().find(|c| c["spec"] == spec).unwrap()["memory_share"]
            .as_f64()
            .unwrap()
    };
    assert!(share(&roomy) > share(&out));
    refused(
        &dir,
        &["advise", "--device-read-us", "100"],
        &["--device-read-us", "--max-memory"],
    );
    refused(
        &dir,
        &["advise", "--max-memory", "1MiB", "--device-read-us", "0"],
        &["--device-read-us"],
    );
    // With direct I/O only the block cache holds tables, however much memory is left.
    let direct = advise(&[
        "--max-memory",
        "3MiB",
        "--device-read-us",
        "100",
        "--direct-io",
        "--block-cache",
        "64KiB",
    ]);
    assert!(share(&direct) < share(&roomy) / 4.0);
    // A block cache that cannot fit beside the buffers would get the verify runs killed.
    refused(
        &dir,
        &[
            "advise",
            "--max-memory",
            "1MiB",
            "--device-read-us",
            "100",
            "--verify",
            "1",
        ],
        &["--block-cache", "--max-memory"],
    );
}

#[test]
fn checkpoint_copies_a_closed_database_into_a_new_directory() {
    let dir = scratch("checkpoint");
    let db_dir = dir.join("db");
    write_small_database(&db_dir, "leveled");
    let (db_arg, copy) = (db_dir.to_str().unwrap(), dir.join("copy"));
    let copy_arg = copy.to_str().unwrap();
    let run = succeeded(&dir, &["checkpoint", db_arg, copy_arg]);
    assert!(run.stdout.contains("tables"), "{}", run.stdout);
    let db = strata_engine::Db::open(&copy, strata_engine::Options::new()).unwrap();
    assert_eq!(db.policy().name(), "leveled");
    assert_eq!(db.range::<&str, _>(..).unwrap().count(), 3_000);
    // Written at i = 1 and again at i = 3001.
    assert_eq!(
        db.get("key00007").unwrap().as_deref(),
        Some(&b"value 3001"[..])
    );
    db.close().unwrap();
    refused(&dir, &["checkpoint", db_arg, copy_arg], &["already exists"]);
    refused(
        &dir,
        &["checkpoint", "nowhere", copy_arg],
        &["not a directory"],
    );
}

#[test]
fn strata_log_prints_the_engines_events() {
    let dir = scratch("strata-log");
    let db_dir = dir.join("db");
    write_small_database(&db_dir, "leveled");
    let (db_arg, copy) = (db_dir.to_str().unwrap(), dir.join("copy"));
    let limit = Duration::from_secs(60);
    let quiet = strata_with_log(
        &dir,
        &["checkpoint", db_arg, copy.to_str().unwrap()],
        limit,
        None,
    );
    assert_eq!(quiet.code, Some(0), "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("opened"), "{}", quiet.stderr);
    let copy = dir.join("copy2");
    let args = ["checkpoint", db_arg, copy.to_str().unwrap()];
    let logged = strata_with_log(&dir, &args, limit, Some("strata=info"));
    assert_eq!(logged.code, Some(0), "{}", logged.stderr);
    for event in ["recovery replayed", "opened"] {
        assert!(
            logged.stderr.contains(event),
            "no {event:?} in {}",
            logged.stderr
        );
    }
    let copy = dir.join("copy3");
    let args = ["checkpoint", db_arg, copy.to_str().unwrap()];
    let bad = strata_with_log(&dir, &args, limit, Some("strata=[nonsense"));
    assert_eq!(bad.code, Some(1), "{}", bad.stderr);
    assert!(bad.error().contains("STRATA_LOG"), "{}", bad.stderr);
}

#[test]
fn inspect_lists_keyspaces_and_switch_policy_hands_one_over() {
    let dir = scratch("keyspace-tools");
    let db_dir = dir.join("db");
    {
        let options = strata_engine::Options::new()
            .with_write_buffer_size(16 << 10)
            .with_synchronous_compaction(true);
        let db = strata_engine::Db::open(&db_dir, options).unwrap();
        let events = db
            .create_keyspace(
                "events",
                strata_engine::KeyspaceOptions::new()
                    .with_policy_named("leveled")
                    .unwrap()
                    .with_write_buffer_size(8 << 10),
            )
            .unwrap();
        for i in 0..3_000u32 {
            db.put(format!("key{i:05}"), "default").unwrap();
            events.put(format!("key{i:05}"), "event").unwrap();
        }
        events.flush().unwrap();
        drop(events);
        db.close().unwrap();
    }
    let db_arg = db_dir.to_str().unwrap();
    let run = succeeded(&dir, &["inspect", db_arg]);
    assert!(
        run.stdout.contains("keyspace    events (number 1)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("write_buffer_size=8192"),
        "{}",
        run.stdout
    );
    let inspected: serde_json::Value =
        serde_json::from_str(&succeeded(&dir, &["inspect", db_arg, "--json"]).stdout).unwrap();
    assert_eq!(inspected["keyspaces"].as_array().unwrap().len(), 2);
    assert_eq!(
        inspected["leftovers"].as_array().unwrap().len(),
        0,
        "another keyspace's tables are not leftovers: {inspected}"
    );
    let run = succeeded(
        &dir,
        &[
            "switch-policy",
            db_arg,
            "tiered",
            "--keyspace",
            "events",
            "--json",
        ],
    );
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        report["from"].as_str().unwrap().starts_with("leveled"),
        "{report}"
    );
    assert!(
        report["to"].as_str().unwrap().starts_with("tiered"),
        "{report}"
    );
    let db = strata_engine::Db::open(&db_dir, strata_engine::Options::new()).unwrap();
    assert_eq!(db.keyspace("events").unwrap().policy().name(), "tiered");
    assert_eq!(
        db.policy().name(),
        "leveled",
        "the default keyspace kept its policy"
    );
    assert_eq!(
        db.keyspace("events")
            .unwrap()
            .range::<&str, _>(..)
            .unwrap()
            .count(),
        3_000
    );
    db.close().unwrap();
    refused(
        &dir,
        &["switch-policy", db_arg, "tiered", "--keyspace", "nosuch"],
        &["nosuch"],
    );
    // advise reads each keyspace's own recorded workload: the default keyspace's 3,000 puts
    // alone, and the events keyspace's 3,000 puts beside the scan that counted them above.
    let mix = |keyspace: &str| {
        let run = succeeded(
            &dir,
            &[
                "advise",
                "--db",
                db_arg,
                "--keyspace",
                keyspace,
                "--policies",
                "leveled,tiered",
                "--write-buffer-size",
                "64KiB",
                "--json",
            ],
        );
        let advice: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        advice["mix"]["writes"].as_f64().unwrap()
    };
    assert_eq!(mix("default"), 1.0);
    let events = mix("events");
    assert!(events > 0.999 && events < 1.0, "{events}");
    refused(
        &dir,
        &["advise", "--db", db_arg, "--keyspace", "nosuch"],
        &["nosuch"],
    );
}

/// `strata inspect` prints the autopilot's decisions from the manifest: every switch, and each
/// decision with its candidates under `--history`.
#[test]
fn inspect_prints_the_autopilots_decisions() {
    use std::sync::Arc;
    use strata_policy::autopilot::{AutopilotOptions, PreferPolicy};
    let dir = scratch("inspect-autopilot");
    let db_dir = dir.join("db");
    let advisor = PreferPolicy {
        target: "tiered".to_string(),
        handover_bytes: 4096,
    };
    let autopilot = AutopilotOptions::new(Arc::new(advisor))
        .with_every_bytes(64 << 10)
        .with_min_window_ops(100)
        .with_min_seconds_between_switches(0.0);
    let options = strata_engine::Options::new()
        .with_write_buffer_size(16 << 10)
        .with_autopilot(autopilot);
    let db = strata_engine::Db::open(&db_dir, options).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0u32;
    while !db
        .autopilot_decisions()
        .iter()
        .any(|d| !matches!(d.action, strata_policy::autopilot::Action::Keep))
    {
        for _ in 0..500 {
            db.put(format!("key{i:08}"), [7u8; 100]).unwrap();
            i += 1;
        }
        std::thread::sleep(Duration::from_millis(25));
        assert!(Instant::now() < deadline, "no switch");
    }
    db.close().unwrap();
    let text = succeeded(&dir, &["inspect", db_dir.to_str().unwrap()]).stdout;
    assert!(text.contains("switch leveled"), "{text}");
    assert!(text.contains("-> tiered"), "{text}");
    let history = succeeded(&dir, &["inspect", db_dir.to_str().unwrap(), "--history"]).stdout;
    assert!(history.contains("autopilot: keep"), "{history}");
    assert!(history.contains("switch to tiered"), "{history}");
    assert!(history.contains("ns/op, handover 4.0KiB"), "{history}");
}
