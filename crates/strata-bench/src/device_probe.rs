//! What the storage device can do, measured before the runs (`strata bench --device-probe`), so
//! a run's device reads per second can be set against what the device delivers: random 4 KiB
//! reads per second at queue depth 1 (one thread) and 32 (32 threads), and sequential read
//! bandwidth in 1 MiB reads. Every read is direct (`O_DIRECT`), around the page cache, into
//! page-aligned buffers (anonymous mappings, which the kernel aligns), from a file of
//! random-looking bytes written and synced first and removed after.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes of a random read: the 4 KiB of a data block and of the usual device sector.
pub const RANDOM_READ_BYTES: usize = 4096;

/// Bytes of a sequential read.
pub const SEQUENTIAL_READ_BYTES: usize = 1 << 20;

/// The queue depths the probe measures random reads at.
pub const QUEUE_DEPTHS: [usize; 2] = [1, 32];

/// How large a probe and how long each of its measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSettings {
    /// Bytes of the probe file (rounded down to whole MiB; at least 1 MiB). Larger than any
    /// cache in front of the device (the device's own included) to measure the device.
    pub file_bytes: u64,
    /// Seconds each measurement runs.
    pub seconds_each: f64,
}

/// What the device holding the databases measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceProbe {
    /// Random 4 KiB direct reads per second, one at a time.
    pub random_read_iops_qd1: f64,
    /// Random 4 KiB direct reads per second, 32 threads reading at once.
    pub random_read_iops_qd32: f64,
    /// Sequential direct reads of 1 MiB, bytes per second.
    pub sequential_read_bytes_per_sec: f64,
    /// Bytes of the probe file.
    pub file_bytes: u64,
    /// Seconds each measurement ran.
    pub seconds_each: f64,
    /// The device as `major:minor`, where it is a block device sysfs knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

impl DeviceProbe {
    /// The random-read rate measured at the queue depth nearest to `depth` (on a log scale: 4
    /// is nearer 1 than 32, 8 nearer 32), with that depth.
    pub fn iops_near(&self, depth: usize) -> (usize, f64) {
        let depth = depth.max(1) as f64;
        let distance = |qd: usize| (depth.ln() - (qd as f64).ln()).abs();
        if distance(1) <= distance(32) {
            (1, self.random_read_iops_qd1)
        } else {
            (32, self.random_read_iops_qd32)
        }
    }
}

/// Opens `path` for direct reads; the error says when the file system refuses direct I/O.
fn open_direct(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) {
                anyhow::anyhow!(
                    "the file system of {} does not support direct I/O (O_DIRECT), which \
                     measuring the device around the page cache needs",
                    path.parent().unwrap_or(path).display()
                )
            } else {
                anyhow::Error::new(e)
                    .context(format!("opening {} for direct reads", path.display()))
            }
        })
}

/// Checks that files in `dir` can be opened for direct I/O (`O_DIRECT`), as `--direct-io` and
/// the device probe need: tmpfs before Linux 6.6 and some network file systems refuse it.
pub fn check_direct_io(dir: &Path) -> Result<()> {
    let path = dir.join(format!("strata-bench-direct-{}.tmp", std::process::id()));
    std::fs::write(&path, []).with_context(|| format!("creating {}", path.display()))?;
    let opened = open_direct(&path);
    let _ = std::fs::remove_file(&path);
    opened.map(drop)
}

/// A fast generator of random-looking numbers (splitmix64): the probe needs offsets and bytes
/// no cache or deduplication can predict, not statistical quality.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Writes the probe file: `bytes` of random-looking data (a compressing or deduplicating
/// layer cannot shrink it), synced, then dropped from the page cache.
fn write_probe_file(path: &Path, bytes: u64) -> Result<()> {
    let mut file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut rng = SplitMix(0x5EED_0FD1_5C00);
    let mut piece = vec![0u8; SEQUENTIAL_READ_BYTES];
    let mut written = 0;
    while written < bytes {
        for word in piece.chunks_exact_mut(8) {
            word.copy_from_slice(&rng.next().to_le_bytes());
        }
        file.write_all(&piece)
            .with_context(|| format!("writing {}", path.display()))?;
        written += SEQUENTIAL_READ_BYTES as u64;
    }
    file.sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    // The written pages are clean now; direct reads skip them anyway, but they would crowd
    // the page cache the runs use.
    let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
    Ok(())
}

/// Reads of `read_bytes` from `threads` threads at once for `seconds`: each thread reads at
/// random aligned offsets (or, with `sequential`, one after another from its own start); the
/// reads completed per second.
fn measure(
    file: &File,
    file_bytes: u64,
    read_bytes: usize,
    threads: usize,
    sequential: bool,
    seconds: f64,
) -> Result<f64> {
    let slots = file_bytes / read_bytes as u64;
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let counts: Vec<Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<u64> {
                    // Page-aligned, as O_DIRECT needs.
                    let mut buffer =
                        memmap2::MmapMut::map_anon(read_bytes).context("mapping a read buffer")?;
                    let mut rng = SplitMix(t as u64 + 1);
                    let mut slot = rng.next() % slots;
                    let mut reads = 0u64;
                    while Instant::now() < deadline {
                        if !sequential {
                            slot = rng.next() % slots;
                        }
                        let offset = slot * read_bytes as u64;
                        let n = file
                            .read_at(&mut buffer[..], offset)
                            .context("reading the probe file")?;
                        if n != read_bytes {
                            bail!("a direct read of {read_bytes} bytes at {offset} read {n}");
                        }
                        reads += 1;
                        slot = (slot + 1) % slots;
                    }
                    Ok(reads)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a probe thread panicked")))
            })
            .collect()
    });
    let mut total = 0;
    for count in counts {
        total += count?;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64().max(1e-9))
}

/// Measures the device holding `dir` (see the module's documentation); the probe file goes in
/// `dir` and is removed whatever happens.
pub fn probe_device(dir: &Path, settings: &ProbeSettings) -> Result<DeviceProbe> {
    let file_bytes =
        settings.file_bytes / SEQUENTIAL_READ_BYTES as u64 * SEQUENTIAL_READ_BYTES as u64;
    if file_bytes == 0 {
        bail!(
            "a device probe of {} bytes is less than one sequential read of {SEQUENTIAL_READ_BYTES}",
            settings.file_bytes
        );
    }
    if !(settings.seconds_each.is_finite() && settings.seconds_each > 0.0) {
        bail!(
            "a device probe must run for some time, not {} seconds",
            settings.seconds_each
        );
    }
    let path = dir.join(format!("strata-bench-probe-{}.tmp", std::process::id()));
    let result = (|| {
        write_probe_file(&path, file_bytes)?;
        let file = open_direct(&path)?;
        let seconds = settings.seconds_each;
        let qd1 = measure(&file, file_bytes, RANDOM_READ_BYTES, 1, false, seconds)?;
        let qd32 = measure(&file, file_bytes, RANDOM_READ_BYTES, 32, false, seconds)?;
        let sequential = measure(&file, file_bytes, SEQUENTIAL_READ_BYTES, 1, true, seconds)?;
        Ok(DeviceProbe {
            random_read_iops_qd1: qd1,
            random_read_iops_qd32: qd32,
            sequential_read_bytes_per_sec: sequential * SEQUENTIAL_READ_BYTES as f64,
            file_bytes,
            seconds_each: seconds,
            device: crate::physical::BlockDevice::holding(dir)
                .map(|d| format!("{}:{}", d.major, d.minor)),
        })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_queue_depth_is_chosen_on_a_log_scale() {
        let probe = DeviceProbe {
            random_read_iops_qd1: 100.0,
            random_read_iops_qd32: 3200.0,
            ..DeviceProbe::default()
        };
        assert_eq!(probe.iops_near(0), (1, 100.0));
        assert_eq!(probe.iops_near(1), (1, 100.0));
        assert_eq!(probe.iops_near(4), (1, 100.0));
        assert_eq!(probe.iops_near(8), (32, 3200.0));
        assert_eq!(probe.iops_near(128), (32, 3200.0));
    }

    #[test]
    fn a_probe_measures_every_figure_and_leaves_nothing_behind() {
        // Not the system's temporary directory, which may be a tmpfs without direct I/O.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        if check_direct_io(dir.path()).is_err() {
            eprintln!("skipped: {} refuses direct I/O", dir.path().display());
            return;
        }
        let settings = ProbeSettings {
            file_bytes: 4 << 20,
            seconds_each: 0.1,
        };
        let probe = probe_device(dir.path(), &settings).unwrap();
        assert!(probe.random_read_iops_qd1 > 0.0, "{probe:?}");
        assert!(probe.random_read_iops_qd32 > 0.0, "{probe:?}");
        assert!(probe.sequential_read_bytes_per_sec > 0.0, "{probe:?}");
        assert_eq!(probe.file_bytes, 4 << 20);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Too small or too short: an error, not a division by zero.
        let tiny = ProbeSettings {
            file_bytes: 1000,
            ..settings.clone()
        };
        assert!(probe_device(dir.path(), &tiny).is_err());
        let instant = ProbeSettings {
            seconds_each: 0.0,
            ..settings
        };
        assert!(probe_device(dir.path(), &instant).is_err());
    }
}
