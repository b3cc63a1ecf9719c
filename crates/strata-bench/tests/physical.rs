//! The physical readings respond to what the process does (Linux; a single test in its own
//! process, so no other test's allocations or writes move the counters under it).

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::io::Write;
use std::path::Path;
use strata_bench::physical::{
    cpu_seconds, device_bytes_written, peak_rss_bytes, reset_peak_rss, sequential_write_bandwidth,
};

#[test]
fn process_counters_move_with_the_work_done() {
    let cpu = cpu_seconds();
    // Busy work the optimizer cannot drop.
    let mut x = 1u64;
    for i in 0..50_000_000u64 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    assert!(x != 0 || cpu >= 0.0);
    assert!(cpu_seconds() > cpu, "CPU time did not advance");

    // Linux-only readings: where /proc exists they must respond to what the process does.
    if let Some(before) = peak_rss_bytes() {
        let big = std::hint::black_box(vec![1u8; 64 << 20]);
        let after = peak_rss_bytes().unwrap();
        assert!(after >= before + (60 << 20), "{before} -> {after}");
        drop(std::hint::black_box(big));
        if reset_peak_rss() {
            assert!(peak_rss_bytes().unwrap() < after);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    if let Some(before) = device_bytes_written() {
        let path = dir.path().join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 4 << 20]).unwrap();
        f.sync_all().unwrap();
        let after = device_bytes_written().unwrap();
        // tmpfs never sends bytes to a device; a real file system must count them.
        if !on_tmpfs(dir.path()) {
            assert!(after >= before + (4 << 20), "{before} -> {after}");
        }
    }
    let bandwidth = sequential_write_bandwidth(dir.path(), 8 << 20).unwrap();
    assert!(bandwidth > 0.0 && bandwidth.is_finite());
    assert!(std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .all(|e| e.file_name() != "strata-bench-bandwidth.tmp"));
}

/// Whether `dir` lies on a tmpfs mount (the longest mount point that prefixes it decides).
fn on_tmpfs(dir: &Path) -> bool {
    let dir = dir.canonicalize().unwrap();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (point, kind) = (f.nth(1)?, f.next()?);
            dir.starts_with(point)
                .then_some((point.len(), kind == "tmpfs"))
        })
        .max()
        .is_some_and(|(_, tmpfs)| tmpfs)
}
