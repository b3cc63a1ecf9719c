//! A short crash test: every policy (and the test policy that flushes windows) is killed with SIGKILL mid-workload and verified on restart.
//! The long version (hundreds of cycles) is documented in RELIABILITY.md.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::process::Command;

#[test]
fn killed_runs_lose_no_acknowledged_write() {
    let policies = strata_policy::testing::policies_to_test().len();
    let cycles = 2 * policies;
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata-stress"))
        .args(["crash", "--cycles", &cycles.to_string()])
        .args(["--max-seconds", "0.6", "--threads", "3"])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "crash test failed:\n{stdout}\n{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["failures"], 0);
    assert_eq!(summary["cycles"], cycles);
    assert!(
        summary["kills"].as_u64().unwrap() >= cycles as u64 - 2,
        "{summary}"
    );
    // Later cycles verify what earlier ones acknowledged.
    assert!(
        summary["acked_writes_verified"].as_u64().unwrap() > 100,
        "{summary}"
    );
    // Every built-in policy and the executor-exercising test policy (window flushes) ran.
    assert_eq!(
        summary["per_policy_cycles"].as_object().unwrap().len(),
        policies
    );
}
