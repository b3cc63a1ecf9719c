//! Flags, sizes, spellings and workload files: each bad one refused before any work, named.

use super::*;

#[test]
fn bench_checks_report_baseline_and_directories_before_the_first_run() {
    let dir = scratch("bench-paths");
    std::fs::write(dir.join("a-file"), "x").unwrap();
    // The default workload (2,000,000 records) runs for minutes: each error must come first.
    let run = refused(
        &dir,
        &["bench", "--policies", "leveled", "--report", "a-file"],
        &["--report", "a-file", "is an existing file"],
    );
    assert!(run.seconds < 10.0);
    refused(
        &dir,
        &["bench", "--policies", "leveled", "--report", "a-file/sub"],
        &["--report", "cannot create"],
    );
    refused(
        &dir,
        &[
            "bench",
            "--policies",
            "leveled,tiered",
            "--baseline",
            "tierd",
        ],
        &["--baseline", "\"tierd\"", "leveled, tiered"],
    );
    refused(
        &dir,
        &["bench", "--policies", "leveled", "--dir", "a-file"],
        &["--dir", "a-file"],
    );
    refused(
        &dir,
        &["bench", "--from-json", "missing.json"],
        &["--from-json", "missing.json", "no such file"],
    );
    refused(
        &dir,
        &["bench", "--policies", "none", "--peers", "none"],
        &["--policies and --peers select nothing"],
    );
    refused(
        &dir,
        &["bench", "--peers", "rocksdb-ish"],
        &["--peers", "unknown peer"],
    );
    refused(
        &dir,
        &["bench", "--policies", "leveled:level0_trigger=0"],
        &["--policies", "level0_trigger"],
    );
    // No report directory was left by the refused runs.
    assert!(!dir.join("bench-report").exists());
}

#[test]
fn a_baseline_may_be_a_policy_name_when_options_decorate_its_label() {
    let dir = scratch("baseline-name");
    let run = succeeded(
        &dir,
        &small_bench(&[
            "--workload",
            "fillunique",
            "--entries",
            "2000",
            "--policies",
            "leveled:level0_trigger=2,tiered",
            "--baseline",
            "leveled",
            "--quiet",
            "--dir",
            "db",
            "--report",
            "r",
        ]),
    );
    assert!(
        run.stdout.contains("vs leveled:level0_trigger=2"),
        "{}",
        run.stdout
    );
}

#[test]
fn sim_checks_its_output_file_and_policies_before_simulating() {
    let dir = scratch("sim-paths");
    // 10,000,000 entries by default: seconds of work that must not happen first.
    refused(
        &dir,
        &["sim", "--timeline-csv", "no-such-dir/t.csv"],
        &["--timeline-csv", "no-such-dir", "does not exist"],
    );
    refused(
        &dir,
        &["sim", "--timeline-csv", "."],
        &["--timeline-csv", "is a directory"],
    );
    refused(
        &dir,
        &["sim", "--policies", "levled"],
        &["--policies", "levled"],
    );
    refused(
        &dir,
        &[
            "sim",
            "--policies",
            "leveled",
            "--policy-option",
            "size_ratio=abc",
        ],
        &["--policy-option size_ratio=abc", "not a number"],
    );
    refused(
        &dir,
        &["sim", "--policies", "tiered", "--policy-option", "fanout=3"],
        &["--policy-option fanout"],
    );
}

#[test]
fn zero_and_negative_counts_name_the_flag() {
    let dir = scratch("counts");
    for cmd in ["sim", "bench"] {
        let run = refused(&dir, &[cmd, "--entries", "0"], &["--entries is 0"]);
        // Not the preset's phase fields, which the user never wrote.
        assert!(!run.stderr.contains("duration_secs"), "{}", run.stderr);
        refused(&dir, &[cmd, "--ops", "0"], &["--ops is 0"]);
        refused(&dir, &[cmd, "--threads", "0"], &["--threads is 0"]);
        refused(&dir, &[cmd, "--zipf-theta", "0"], &["--zipf-theta", "is 0"]);
        refused(&dir, &[cmd, "--theta", "nan"], &["--zipf-theta", "is NaN"]);
        refused(
            &dir,
            &[cmd, "--long-scan-share", "1.5"],
            &["--long-scan-share"],
        );
        refused(
            &dir,
            &[cmd, "--burst-probability", "2"],
            &["--burst-probability", "is 2"],
        );
        refused(&dir, &[cmd, "--burst-size", "0"], &["--burst-size is 0"]);
        refused(&dir, &[cmd, "--distribution", "zipf"], &["--distribution"]);
        refused(&dir, &[cmd, "--hot-period", "0"], &["--hot-period is 0"]);
        refused(&dir, &[cmd, "--disorder", "0"], &["--disorder is 0"]);
        refused(&dir, &[cmd, "--size-ratio", "1"], &["--size-ratio is 1"]);
        refused(&dir, &[cmd, "--jobs", "0"], &["--jobs is 0"]);
        refused(
            &dir,
            &[cmd, "--bloom-bits", "-1"],
            &["--bloom-bits", "is -1"],
        );
        refused_by_parser(&dir, &[cmd, "--entries", "-5"], "--entries", "negative");
        refused_by_parser(
            &dir,
            &[cmd, "--threads", "1.5"],
            "--threads",
            "whole number",
        );
    }
    refused(&dir, &["sim", "--ingest-rate", "0"], &["--ingest-rate"]);
    refused(&dir, &["sim", "--block-size", "0"], &["--block-size is 0"]);
}

#[test]
fn key_and_value_sizes_are_bounded_by_the_engine_and_named() {
    let dir = scratch("sizes");
    for cmd in ["sim", "bench"] {
        refused(
            &dir,
            &[cmd, "--key-size", "0"],
            &["--key-size 0 is below 1"],
        );
        // Four-byte keys hold numbers below 2^32: fine for the partial-merge presets, whose keys
        // are drawn from [0, 10^9), not for a workload whose keys spread over 64 bits.
        refused(
            &dir,
            &[cmd, "--key-size", "4"],
            &["key_size 4 holds key numbers below 2^32", "phase \"load\""],
        );
        refused(
            &dir,
            &[cmd, "--key-size", "1MiB"],
            &["--key-size 1MiB", "limit of 64KiB"],
        );
        // Once an allocation failure (exit 134) in bench.
        refused(
            &dir,
            &[cmd, "--value-size", "100000000000"],
            &["--value-size", "limit of 256MiB"],
        );
        refused(
            &dir,
            &[cmd, "--value-size", "1GiB"],
            &["--value-size 1GiB", "limit of 256MiB"],
        );
        refused_by_parser(
            &dir,
            &[cmd, "--value-size", "-4K"],
            "--value-size",
            "negative",
        );
        refused_by_parser(
            &dir,
            &[cmd, "--value-size", "4PB"],
            "--value-size",
            "units: B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB",
        );
    }
    // Within the limits but not within memory: every thread holds a value in flight.
    refused(
        &dir,
        &[
            "bench",
            "--policies",
            "leveled",
            "--value-size",
            "256MiB",
            "--threads",
            "1024",
        ],
        &["--value-size 256MiB with 1024 thread(s)", "memory"],
    );
    refused(
        &dir,
        &["bench", "--write-buffer-size", "1K"],
        &[
            "--write-buffer-size (--buffer-size) is 1KiB",
            "at least 4KiB",
        ],
    );
    refused(
        &dir,
        &["sim", "--buffer-size", "100"],
        &["--write-buffer-size", "at least 4KiB"],
    );
}

#[test]
fn each_policy_runs_its_own_defaults_unless_a_flag_gives_one() {
    let dir = scratch("policy-defaults");
    let option = |json: &str, name: &str| -> Option<String> {
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        value["policy_options"][name].as_str().map(str::to_string)
    };
    let sim = |extra: &[&str]| {
        let mut args = vec![
            "sim",
            "--policy",
            "vertiorizon",
            "--entries",
            "20000",
            "--json",
            "--timeline-points",
            "0",
        ];
        args.extend_from_slice(extra);
        succeeded(&dir, &args).stdout
    };
    // Vertiorizon declares T = 6 and 64 MiB tables; the simulator's buffer (4 MiB by default)
    // is the one fact it is given.
    let plain = sim(&[]);
    assert_eq!(option(&plain, "size_ratio").as_deref(), Some("6"));
    assert_eq!(option(&plain, "target_file_size").as_deref(), Some("64MiB"));
    assert_eq!(option(&plain, "write_buffer_size").as_deref(), Some("4MiB"));
    let given = sim(&["--size-ratio", "4", "--target-file-size", "1MiB"]);
    assert_eq!(option(&given, "size_ratio").as_deref(), Some("4"));
    assert_eq!(option(&given, "target_file_size").as_deref(), Some("1MiB"));
    // strata bench records what each run's policy was built with.
    let bench = succeeded(
        &dir,
        &[
            "bench",
            "--workload",
            "fillunique",
            "--entries",
            "2000",
            "--policies",
            "vertiorizon",
            "--peers",
            "none",
            "--quiet",
            "--json",
            "--dir",
            "db",
            "--report",
            "r",
        ],
    )
    .stdout;
    let runs: serde_json::Value = serde_json::from_str(&bench).unwrap();
    let options = runs[0]["options"].as_array().unwrap();
    assert!(
        options.iter().any(|o| o[0] == "size_ratio" && o[1] == "6"),
        "{options:?}"
    );
}

#[test]
fn the_engine_format_writes_the_engines_larger_entries() {
    // Four-byte keys and 100-byte values: the engine's format adds an 8-byte trailer and
    // length prefixes to every entry and an index and a filter to every table, so the same
    // workload writes more blocks and more bytes.
    let dir = scratch("engine-format");
    let args = [
        "--workload",
        "partial-merge-uniform",
        "--entries",
        "20000",
        "--ops",
        "10000",
        "--key-size",
        "4",
        "--block-size",
        "4KiB",
    ];
    let value = |json: &str, field: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        match &v[field] {
            serde_json::Value::Array(levels) => levels.iter().map(|l| l.as_u64().unwrap()).sum(),
            other => other.as_u64().unwrap(),
        }
    };
    let raw = sim_json(&dir, &args);
    let mut engine_args = args.to_vec();
    engine_args.push("--engine-format");
    let engine = sim_json(&dir, &engine_args);
    let (raw_blocks, engine_blocks) = (
        value(&raw, "blocks_written_per_level"),
        value(&engine, "blocks_written_per_level"),
    );
    assert!(
        engine_blocks as f64 > 1.05 * raw_blocks as f64,
        "{engine_blocks} blocks in the engine's format, {raw_blocks} raw"
    );
    assert!(value(&engine, "flush_bytes") > value(&raw, "flush_bytes"));
}

/// Asserts two outputs are the same, showing the first line that differs.
fn assert_same(a: &str, b: &str, what: &str) {
    if let Some((x, y)) = a.lines().zip(b.lines()).find(|(x, y)| x != y) {
        panic!("{what}: {x:?} != {y:?}");
    }
    assert_eq!(a.lines().count(), b.lines().count(), "{what}");
}

#[test]
fn every_size_flag_takes_units_with_one_rule() {
    let dir = scratch("units");
    let base = sim_json(
        &dir,
        &[
            "--entries",
            "20000",
            "--key-size",
            "16",
            "--value-size",
            "1024",
            "--write-buffer-size",
            "65536",
            "--target-file-size",
            "32768",
            "--max-bytes-for-level-base",
            "262144",
        ],
    );
    for (key, value, buffer, target, base_level) in [
        ("16B", "1K", "64K", "32K", "256K"),
        ("16b", "1k", "64KB", "32kb", "256KiB"),
        ("16", "1KiB", "64kib", "0.03125m", "0.25MB"),
    ] {
        let same = sim_json(
            &dir,
            &[
                "--entries",
                "20000",
                "--key-size",
                key,
                "--value-size",
                value,
                "--buffer-size",
                buffer,
                "--target-file-size",
                target,
                "--level-base",
                base_level,
            ],
        );
        assert_same(
            &same,
            &base,
            &format!("{key} {value} {buffer} {target} {base_level}"),
        );
    }
    assert!(base.contains("\"value_size\": 1024"), "{base}");
    assert!(base.contains("max_bytes_for_level_base"), "{base}");
}

#[test]
fn both_commands_take_both_spellings_and_the_help_shows_them() {
    let dir = scratch("aliases");
    // Each spelling selects the same run.
    let a = sim_json(
        &dir,
        &[
            "--entries",
            "20000",
            "--buffer-size",
            "64KiB",
            "--theta",
            "0.8",
            "--level-base",
            "1MiB",
        ],
    );
    let b = sim_json(
        &dir,
        &[
            "--entries",
            "20000",
            "--write-buffer-size",
            "64KiB",
            "--zipf-theta",
            "0.8",
            "--max-bytes-for-level-base",
            "1MiB",
        ],
    );
    assert_same(&a, &b, "--buffer-size --theta --level-base");
    let c = succeeded(
        &dir,
        &[
            "sim",
            "--policy",
            "leveled",
            "--entries",
            "20000",
            "--buffer-size",
            "64KiB",
            "--json",
        ],
    );
    assert!(c.stdout.contains("\"policy\": \"leveled\""));
    for spelling in [
        [
            "--policy",
            "--buffer-size",
            "--theta",
            "--level-base",
            "--bloom-bits",
        ],
        [
            "--policies",
            "--write-buffer-size",
            "--zipf-theta",
            "--max-bytes-for-level-base",
            "--bloom-bits-per-key",
        ],
    ] {
        succeeded(
            &dir,
            &[
                "bench",
                "--workload",
                "fillunique",
                "--entries",
                "2000",
                spelling[0],
                "leveled",
                spelling[1],
                "64KiB",
                spelling[2],
                "0.9",
                spelling[3],
                "1MiB",
                spelling[4],
                "8",
                "--quiet",
                "--dir",
                "db",
                "--report",
                "r",
            ],
        );
    }
    for cmd in ["sim", "bench"] {
        let help = succeeded(&dir, &[cmd, "--help"]).stdout;
        for (flag, alias) in [
            ("--policies", "--policy"),
            ("--write-buffer-size", "--buffer-size"),
            ("--zipf-theta", "--theta"),
            ("--max-bytes-for-level-base", "--level-base"),
            ("--bloom-bits-per-key", "--bloom-bits"),
        ] {
            let line = help
                .lines()
                .position(|l| l.trim_start().starts_with(&format!("{flag} ")))
                .unwrap_or_else(|| panic!("{cmd} --help lacks {flag}"));
            let entry: String = help.lines().skip(line).take(3).collect();
            assert!(
                entry.contains(&format!("[alias: {alias}]")),
                "{cmd} {flag}: {entry}"
            );
        }
        assert!(
            help.contains("4K = 4KB = 4KiB"),
            "{cmd} documents the size rule"
        );
    }
}

#[test]
fn workload_files_are_checked_by_key_with_line_and_column() {
    let dir = scratch("files");
    let good = "name = \"w\"\n[[phases]]\nname = \"load\"\nops = 2000\nmix = { insert = 1.0 }\n";
    std::fs::write(dir.join("good.toml"), good).unwrap();
    std::fs::write(
        dir.join("writ.toml"),
        good.replace("insert = 1.0", "insert = 1.0, writ = 3.0"),
    )
    .unwrap();
    std::fs::write(
        dir.join("thread.toml"),
        good.replace("ops = 2000", "ops = 2000\nthread = 8"),
    )
    .unwrap();
    std::fs::write(
        dir.join("negative.toml"),
        good.replace("insert = 1.0", "insert = 1.0, read = -2.0"),
    )
    .unwrap();
    std::fs::write(
        dir.join("duration.toml"),
        good.replace("ops = 2000", "ops = 2000\nduration_secs = -1.0"),
    )
    .unwrap();
    std::fs::write(
        dir.join("big-key.toml"),
        good.replace("name = \"w\"", "name = \"w\"\nkey_size = 100000"),
    )
    .unwrap();
    for cmd in ["sim", "bench"] {
        refused(
            &dir,
            &[cmd, "--workload", "writ.toml"],
            &[
                "workload file writ.toml",
                "line 5, column 23",
                "unknown field `writ`",
            ],
        );
        refused(
            &dir,
            &[cmd, "--workload", "thread.toml"],
            &["line 5, column 1", "unknown field `thread`", "`threads`"],
        );
        refused(
            &dir,
            &[cmd, "--workload", "negative.toml"],
            &["phase \"load\"", "mix.read is -2"],
        );
        refused(
            &dir,
            &[cmd, "--workload", "duration.toml"],
            &["duration_secs is -1"],
        );
        refused(
            &dir,
            &[cmd, "--workload", "big-key.toml"],
            &["big-key.toml", "key_size 100000", "limit of 64KiB"],
        );
        refused(
            &dir,
            &[cmd, "--workload", "missing.toml"],
            &["--workload missing.toml", "cannot read"],
        );
    }
    // Preset flags do not apply to a file: said, not silently dropped.
    let run = succeeded(
        &dir,
        &[
            "sim",
            "--workload",
            "good.toml",
            "--entries",
            "5",
            "--policies",
            "leveled",
        ],
    );
    assert!(
        run.stderr.contains("warning: --entries ignored"),
        "{}",
        run.stderr
    );
    // A file the simulator cannot replay is refused before simulating.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workloads");
    let durations = examples.join("durations.toml");
    refused(
        &dir,
        &["sim", "--workload", durations.to_str().unwrap()],
        &["cannot replay", "runs for a duration"],
    );
}
