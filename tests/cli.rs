//! The `strata` binary checks its arguments and workload files before any work: every bad flag,
//! file or directory is refused at once, naming the flag (or the file's key with its line and
//! column); runs too small to measure warn; both commands take the same spellings and size
//! units; a failed run leaves nothing that blocks the next.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one invocation did.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    seconds: f64,
}

impl Run {
    /// The first line of stderr that is not a warning: the error.
    fn error(&self) -> &str {
        self.stderr
            .lines()
            .find(|l| !l.starts_with("warning:"))
            .unwrap_or("")
    }
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `strata args` in `dir`, killing it after `limit` (a check that runs only after the
/// work would otherwise take minutes).
fn strata_in(dir: &Path, args: &[&str], limit: Duration) -> Run {
    let out = dir.join(format!("stdout-{}", std::process::id()));
    let err = dir.join(format!("stderr-{}", std::process::id()));
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "strata {} still running after {limit:?}: it did not fail fast",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn strata(dir: &Path, args: &[&str]) -> Run {
    strata_in(dir, args, Duration::from_secs(60))
}

/// Runs `args`, expecting exit code 1 (an error of the tool, not clap's usage error 2 or an
/// abort) within 10 seconds, with an error line containing every one of `expected`.
fn refused(dir: &Path, args: &[&str], expected: &[&str]) -> Run {
    let run = strata_in(dir, args, Duration::from_secs(10));
    assert_eq!(
        run.code,
        Some(1),
        "strata {}: {}",
        args.join(" "),
        run.stderr
    );
    for e in expected {
        assert!(
            run.error().contains(e),
            "strata {}: error {:?} lacks {e:?}",
            args.join(" "),
            run.error()
        );
    }
    run
}

/// Runs `args`, expecting clap to refuse a value (exit code 2) naming `flag` and saying `what`.
fn refused_by_parser(dir: &Path, args: &[&str], flag: &str, what: &str) {
    let run = strata_in(dir, args, Duration::from_secs(10));
    assert_eq!(
        run.code,
        Some(2),
        "strata {}: {}",
        args.join(" "),
        run.stderr
    );
    let first = run.stderr.lines().next().unwrap_or("");
    assert!(
        first.contains(flag) && first.contains(what),
        "strata {}: {first}",
        args.join(" ")
    );
}

fn succeeded(dir: &Path, args: &[&str]) -> Run {
    let run = strata(dir, args);
    assert_eq!(
        run.code,
        Some(0),
        "strata {}: {}",
        args.join(" "),
        run.stderr
    );
    run
}

/// `bench` followed by `extra`.
fn small_bench<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["bench"];
    args.extend_from_slice(extra);
    args
}

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

/// The simulator's JSON without the fields that vary from run to run.
fn sim_json(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["sim", "--policies", "leveled", "--json"];
    all.extend_from_slice(args);
    let run = succeeded(dir, &all);
    run.stdout
        .lines()
        .filter(|l| {
            !l.contains("wall_seconds") && !l.contains("policy_seconds") && !l.contains("rss")
        })
        .collect::<Vec<_>>()
        .join("\n")
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

#[test]
fn switch_policy_hands_a_closed_database_to_another_policy() {
    let dir = scratch("switch-policy");
    let db_dir = dir.join("db");
    let options = strata_engine::Options::new()
        .with_write_buffer_size(16 << 10)
        .with_synchronous_compaction(true)
        .with_policy_named("tiered:size_ratio=3")
        .unwrap();
    let db = strata_engine::Db::open(&db_dir, options).unwrap();
    for i in 0..4_000u32 {
        db.put(format!("key{:05}", (i * 7) % 3_000), format!("value {i}"))
            .unwrap();
    }
    db.close().unwrap();
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
    // --verify measures the best on the engine.
    let mut args = small.to_vec();
    args[4] = "20000";
    args.extend(["--verify", "1"]);
    let advice = json(&args);
    assert!(
        advice["candidates"][0]["measured_ops_per_sec"]
            .as_f64()
            .unwrap()
            > 0.0
    );
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
    assert_eq!(advice["mix"][0], 1.0, "{advice}");
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
            .ends_with("--memory-limit 1MiB"),
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
    refused(
        &dir,
        &["advise", "--direct-io"],
        &["--direct-io", "--verify"],
    );
}
