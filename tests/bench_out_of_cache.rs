//! `strata bench` out of cache: databases kept with `--keep` serve later runs with
//! `--use-existing-db` (the load skipped, the keys known), multireadrandom reads in batches and
//! says so in its results, and the flags that need privileges or a process per run are refused
//! before any work when they cannot be honoured.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A fresh scratch directory for one test, on the build's disk (not a tmpfs that may refuse
/// direct I/O).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("out-of-cache-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `strata bench args` in `dir`.
fn bench(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("bench")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The error line of a failed run (the first stderr line that is not a warning).
fn error(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| !l.starts_with("warning:"))
        .unwrap_or("")
        .to_string()
}

/// Runs `args`, expecting success, and returns the report's results.json.
fn succeeded(dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = bench(dir, args);
    assert!(
        out.status.success(),
        "strata bench {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = args
        .iter()
        .position(|a| *a == "--report")
        .map(|i| args[i + 1])
        .unwrap();
    serde_json::from_str(&std::fs::read_to_string(dir.join(report).join("results.json")).unwrap())
        .unwrap()
}

/// Runs `args`, expecting the tool to refuse them (exit code 1) with an error containing every
/// one of `expected`, and no report written.
fn refused(dir: &Path, args: &[&str], expected: &[&str]) {
    let out = bench(dir, args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "strata bench {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let e = error(&out);
    for part in expected {
        assert!(e.contains(part), "strata bench {}: {e}", args.join(" "));
    }
}

/// Flags every run here shares: one small Strata run in this process, no peers, no probes.
const SMALL: [&str; 10] = [
    "--policies",
    "leveled",
    "--peers",
    "none",
    "--in-process",
    "--quiet",
    "--bandwidth-probe",
    "0",
    "--write-buffer-size",
    "256KiB",
];

fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args: Vec<&str> = SMALL.to_vec();
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_kept_database_serves_later_runs_without_its_load() {
    let dir = scratch("keep");
    let fill = succeeded(
        &dir,
        &with(&[
            "--workload",
            "fillrandom",
            "--entries",
            "20000",
            "--keep",
            "kept",
            "--report",
            "fill",
        ]),
    );
    assert_eq!(fill["runs"][0]["phases"][0]["name"], "fillrandom");
    assert!(dir.join("kept/leveled").is_dir());
    assert!(dir.join("kept/leveled.bench-state").is_file());

    let read = succeeded(
        &dir,
        &with(&[
            "--workload",
            "readrandom",
            "--entries",
            "20000",
            "--ops",
            "20000",
            "--use-existing-db",
            "kept",
            "--report",
            "read",
        ]),
    );
    let run = &read["runs"][0];
    assert_eq!(run["skipped_phases"], serde_json::json!(["fillrandom"]));
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 1, "the unmeasured fill was skipped: {run}");
    let phase = &phases[0];
    assert_eq!(phase["name"], "readrandom");
    assert_eq!(phase["point_reads"], 20000);
    // fillrandom draws 20,000 keys from a domain of 20,000: about 63% exist, and the kept
    // database holds them.
    let found = phase["point_reads_found"].as_f64().unwrap() / 20000.0;
    assert!(found > 0.5 && found < 0.75, "found {found}: {phase}");
    // Nothing was written, and the database stays.
    assert_eq!(run["user_bytes"], 0);
    assert!(dir.join("kept/leveled").is_dir());

    // A workload that does not fit the kept database is refused before any run.
    refused(
        &dir,
        &with(&[
            "--workload",
            "readrandom",
            "--entries",
            "30000",
            "--use-existing-db",
            "kept",
            "--report",
            "bad",
        ]),
        &["kept/leveled", "20000 entries"],
    );
    refused(
        &dir,
        &with(&[
            "--workload",
            "readrandom",
            "--entries",
            "20000",
            "--value-size",
            "200",
            "--use-existing-db",
            "kept",
            "--report",
            "bad",
        ]),
        &["100-byte values"],
    );
    refused(
        &dir,
        &with(&[
            "--workload",
            "fillrandom",
            "--entries",
            "20000",
            "--keep",
            "kept",
            "--report",
            "bad",
        ]),
        &["--keep", "already exists"],
    );
    refused(
        &dir,
        &with(&[
            "--workload",
            "readrandom",
            "--use-existing-db",
            "nowhere",
            "--report",
            "bad",
        ]),
        &["--use-existing-db nowhere", "no such directory"],
    );
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    refused(
        &dir,
        &with(&[
            "--workload",
            "readrandom",
            "--use-existing-db",
            "empty",
            "--report",
            "bad",
        ]),
        &["no database of leveled"],
    );
    assert!(!dir.join("bad").join("results.json").exists());
}

#[test]
fn multireadrandom_reads_in_batches_and_records_its_settings() {
    let dir = scratch("multiread");
    let run_with = |io: &[&'static str]| {
        let mut args = vec![
            "--workload",
            "multireadrandom",
            "--entries",
            "20000",
            "--ops",
            "20000",
            "--batch-size",
            "16",
            "--threads",
            "2",
            "--report",
            "r",
        ];
        args.extend_from_slice(io);
        bench(&dir, &with(&args))
    };
    let mut out = run_with(&["--direct-io", "--dir", "db"]);
    let direct_io = out.status.success();
    if !direct_io {
        // A file system without direct I/O is refused up front, naming the flag.
        let e = error(&out);
        assert!(e.contains("--direct-io") && e.contains("direct I/O"), "{e}");
        out = run_with(&[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r/results.json")).unwrap())
            .unwrap();
    let run = &c["runs"][0];
    assert_eq!(run["direct_io"], direct_io);
    assert_eq!(run["block_cache_bytes"], 32 << 20);
    assert_eq!(run["memory_limit"], serde_json::Value::Null);
    assert_eq!(run["drop_caches"], false);
    let phase = run["phases"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(phase["name"], "multireadrandom");
    assert_eq!(
        (phase["read_batch"].as_u64(), phase["threads"].as_u64()),
        (Some(16), Some(2))
    );
    // ops/s counts keys: 20,000 operations, in 1,250 batches of 16 (each thread's 10,000 keys
    // make 625 whole batches).
    assert_eq!(phase["ops"], 20000);
    assert_eq!(phase["point_reads"], 20000);
    assert_eq!(phase["latency"]["multiread"]["count"], 1250);
    assert!(phase["latency"].get("read").is_none(), "{phase}");
    let found = phase["point_reads_found"].as_f64().unwrap() / 20000.0;
    assert!(found > 0.5 && found < 0.75, "found {found}");
    // The table says how the run was set up.
    let stdout = String::from_utf8_lossy(&out.stdout);
    if direct_io {
        assert!(stdout.contains("direct I/O, block cache 32MiB"), "{stdout}");
    }

    refused(
        &dir,
        &with(&[
            "--workload",
            "readrandom",
            "--batch-size",
            "8",
            "--report",
            "bad",
        ]),
        &["--batch-size", "multireadrandom"],
    );
}

#[test]
fn flags_that_cannot_be_honoured_are_refused_before_any_work() {
    let dir = scratch("refused");
    refused(
        &dir,
        &with(&["--memory-limit", "256MiB", "--report", "r"]),
        &["--memory-limit", "--in-process"],
    );
    refused(
        &dir,
        &["--memory-limit", "1MiB", "--report", "r"],
        &["--memory-limit", "16MiB"],
    );
    refused(
        &dir,
        &with(&["--device-write-limit", "10", "--report", "r"]),
        &["--device-write-limit", "--in-process"],
    );
    refused(
        &dir,
        &["--device-write-limit", "0", "--report", "r"],
        &["--device-write-limit"],
    );
    refused(
        &dir,
        &with(&[
            "--device-probe",
            "--device-probe-size",
            "4K",
            "--report",
            "r",
        ]),
        &["--device-probe-size"],
    );
    let kept = dir.join("kept");
    std::fs::create_dir_all(&kept).unwrap();
    refused(
        &dir,
        &with(&[
            "--workload",
            "readrandom",
            "--keep",
            "kept",
            "--use-existing-db",
            "other",
            "--report",
            "r",
        ]),
        &["--use-existing-db other"],
    );
    // Dropping caches needs root; where it is not allowed the error names the flag and why.
    let writable = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .is_ok();
    if !writable {
        refused(
            &dir,
            &with(&["--drop-caches", "--report", "r"]),
            &["--drop-caches", "/proc/sys/vm/drop_caches"],
        );
    }
    assert!(!dir.join("r").join("results.json").exists());
}

/// A real memory limit, device write limit and dropped caches, where this machine allows them
/// (root with memory and io cgroups): opt in with `STRATA_BENCH_PRIVILEGED_TESTS=1`, since they change the system's
/// cgroups and drop every process's page cache.
#[test]
fn a_memory_limit_holds_each_run_and_an_exceeded_one_is_named() {
    if std::env::var_os("STRATA_BENCH_PRIVILEGED_TESTS").is_none() {
        eprintln!("skipped: set STRATA_BENCH_PRIVILEGED_TESTS=1 to use real memory cgroups");
        return;
    }
    let dir = scratch("memory-limit");
    let base = [
        "--policies",
        "leveled",
        "--peers",
        "none",
        "--quiet",
        "--bandwidth-probe",
        "0",
        "--workload",
        "fillrandom,readrandom",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--entries",
        "50000",
        "--memory-limit",
        "128MiB",
        "--device-write-limit",
        "64",
        "--direct-io",
        "--drop-caches",
        "--write-buffer-size",
        "1MiB",
        "--report",
        "r",
    ]);
    let c = succeeded(&dir, &args);
    let run = &c["runs"][0];
    assert_eq!(run["memory_limit"], 128 << 20);
    assert_eq!(run["device_write_limit"], 64 << 20);
    assert_eq!(run["drop_caches"], true);
    // A write buffer far beyond the limit: the kernel kills the run, and the error says so.
    let mut args = base.to_vec();
    args.extend([
        "--entries",
        "2000000",
        "--memory-limit",
        "32MiB",
        "--write-buffer-size",
        "256MiB",
        "--report",
        "oom",
    ]);
    let out = bench(&dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the run of leveled was killed by the memory limit of 32MiB"),
        "{stderr}"
    );
}
