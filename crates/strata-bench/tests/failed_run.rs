//! A failed run leaves nothing behind that blocks the next comparison in the same directory, the
//! comparison goes on past it and reports it, and a baseline that names no run is refused
//! before anything runs.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_bench::engines::EngineSettings;
use strata_bench::workload::{PresetParams, WorkloadSpec};
use strata_bench::{run_comparison, BenchConfig, MAX_KEY_SIZE};

fn config(key_size: usize, dir: &std::path::Path) -> BenchConfig {
    let params = PresetParams {
        entries: 2_000,
        ops: 2_000,
        key_size,
        ..PresetParams::default()
    };
    BenchConfig {
        workload: WorkloadSpec::preset("fillunique", &params).unwrap(),
        policies: vec!["leveled".to_string()],
        peers: Vec::new(),
        baseline: None,
        settings: EngineSettings {
            write_buffer_size: 256 << 10,
            target_file_size: Some(256 << 10),
            level_base: Some(1 << 20),
            block_cache: 1 << 20,
            expected_data_size: 8 << 20,
            ..EngineSettings::default()
        },
        dir: Some(dir.to_path_buf()),
        seed: 1,
        progress: false,
        job_log: None,
        file_trace: None,
        isolate: None,
        bandwidth_probe_bytes: 0,
        storage: Default::default(),
        settle_phases: false,
    }
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_run_that_fails_at_its_first_insert_does_not_block_the_next_one() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("dbs");
    // Keys longer than the engine takes: the database opens, then the first put fails.
    let e = run_comparison(&config(MAX_KEY_SIZE + 1, &dir)).unwrap_err();
    assert!(
        format!("{e:#}").contains("larger than the maximum"),
        "{e:#}"
    );
    assert!(entries(&dir).is_empty(), "left behind: {:?}", entries(&dir));
    // The same directory serves the next comparison.
    let c = run_comparison(&config(16, &dir)).unwrap();
    assert_eq!(c.runs.len(), 1);
    assert!(entries(&dir).is_empty(), "left behind: {:?}", entries(&dir));
}

#[test]
fn leftovers_of_an_earlier_comparison_do_not_block_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    // What a comparison killed mid-run (or an older build) leaves: a database directory named
    // after the run.
    std::fs::create_dir_all(dir.path().join("leveled")).unwrap();
    std::fs::write(dir.path().join("leveled/CURRENT"), "x").unwrap();
    run_comparison(&config(16, dir.path())).unwrap();
    assert_eq!(entries(dir.path()), vec!["leveled".to_string()]);
}

#[test]
fn an_unknown_baseline_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(16, dir.path());
    c.baseline = Some("tierd".to_string());
    let started = std::time::Instant::now();
    let e = run_comparison(&c).unwrap_err();
    assert!(
        e.to_string()
            .contains("baseline \"tierd\" is not among the runs (leveled)"),
        "{e}"
    );
    assert!(entries(dir.path()).is_empty());
    assert!(started.elapsed().as_secs() < 1, "refused before running");
}

#[test]
fn a_failed_run_is_reported_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(16, dir.path());
    // The second fails when its engine opens: no such policy.
    c.policies = ["leveled", "no-such-policy", "tiered"]
        .map(str::to_string)
        .to_vec();
    let comparison = run_comparison(&c).unwrap();
    let ran: Vec<&str> = comparison.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(ran, ["leveled", "tiered"]);
    assert_eq!(comparison.failed.len(), 1);
    assert_eq!(comparison.failed[0].label, "no-such-policy");
    assert!(
        comparison.failed[0].error.contains("no-such-policy"),
        "{}",
        comparison.failed[0].error
    );
    let table = strata_bench::report::render_table(&comparison);
    assert!(
        table.contains("FAILED, no result: no-such-policy"),
        "{table}"
    );

    // With every run failing there is nothing to compare: an error naming each.
    c.policies = vec!["no-such-policy".to_string()];
    let e = run_comparison(&c).unwrap_err();
    assert!(
        e.to_string().contains("every run failed: no-such-policy"),
        "{e}"
    );
}
