//! The physical view of a run: what the process cost the machine (CPU time, bytes sent to the
//! storage device, peak resident memory) and the device's own sequential write bandwidth, to set
//! the device bytes against. Read from Linux's `/proc`; elsewhere every reading is `None` (or
//! zero CPU time), never an error, because a benchmark should still run.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// CPU seconds (user + system) this process has used, from /proc (Linux; clock ticks are
/// assumed to be 100 per second, Linux's fixed USER_HZ).
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name: utime is the 12th, stime the 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Bytes this process (all its threads) has caused to be sent to the storage layer, net of
/// dirty page-cache bytes it cancelled by truncating or deleting files before they were written
/// back: `write_bytes − cancelled_write_bytes` of `/proc/self/io`. Buffered writes count when
/// they dirty the page cache, so this is what the device receives (WAL, flushes, compactions,
/// manifest) even when writeback happens later. `None` where `/proc/self/io` is missing.
pub fn device_bytes_written() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| -> Option<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(field("write_bytes")?.saturating_sub(field("cancelled_write_bytes").unwrap_or(0)))
}

/// The process's peak resident set size since it started or since the last
/// [`reset_peak_rss`] (`VmHWM` of `/proc/self/status`), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// The process's resident set size now (`VmRSS` of `/proc/self/status`), in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|kib| kib * 1024)
}

/// A `kB` field of `/proc/self/status`.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Resets [`peak_rss_bytes`] to the current resident size (Linux's `clear_refs` value 5);
/// whether it could. A run in a process of its own needs no reset; a run after others in one
/// process does, and still inherits the memory its predecessors freed but the allocator kept.
pub fn reset_peak_rss() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/clear_refs")
        .and_then(|mut f| f.write_all(b"5"))
        .is_ok()
}

/// Measures the sequential write bandwidth of the device holding `dir`, in bytes per second:
/// writes `bytes` in 1 MiB pieces to a new file there, syncs it, and removes it. The sync is
/// inside the timing, so the page cache cannot flatter the figure.
pub fn sequential_write_bandwidth(dir: &Path, bytes: u64) -> std::io::Result<f64> {
    const PIECE: usize = 1 << 20;
    let path = dir.join("strata-bench-bandwidth.tmp");
    let result = (|| {
        let mut file = std::fs::File::create(&path)?;
        // Not zeros: a compressing or deduplicating file system would skip them.
        let piece: Vec<u8> = (0..PIECE)
            .map(|i| {
                (i as u64)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .rotate_right(29) as u8
            })
            .collect();
        let started = Instant::now();
        let mut written = 0u64;
        while written < bytes {
            let n = PIECE.min((bytes - written) as usize);
            file.write_all(&piece[..n])?;
            written += n as u64;
        }
        file.sync_all()?;
        let seconds = started.elapsed().as_secs_f64();
        Ok(written as f64 / seconds.max(1e-9))
    })();
    let _ = std::fs::remove_file(&path);
    result
}
